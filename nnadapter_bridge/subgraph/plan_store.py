"""The partition plan kept in the model cache dir, so a warm start reads it instead of partitioning again.

Owns `<cache_dir>/plan-<key>.json`: the detector's answer for one program (its subgraphs with their op indexes and
boundary names, and the run order of subgraphs and host ops; the same for each loop and branch body partitioned), as
JSON data, never pickle. Imports nothing of the
partitioner but its result types, so a start that reads a plan does not load the detector's graph code.

The key (`plan_key`) is the sha256 of everything the plan follows from:
  * the verdict store's key (SIGNATURE format, devices in context order, context properties, the versions string:
    nnadapter-bridge's version, the digest of the converters', the standard's and the drivers' code, the drivers'
    versions and environment);
  * the program key (SupportDecider.program_key: the sha256 of the model file's bytes, every parameter's dtype and
    shape, the loader's code): a model changed in place, even to the same size and modification time, has another
    key. Parameter values do not shape the plan (the verdicts read no weight value: their signatures carry a
    parameter's dtype and shape only);
  * the ops the partition config forces to the host (their indexes: the config's effect, not its text), and the
    minimum subgraph size;
  * a digest of the partitioner's code (partition/ and this floor's plan modules), read, not imported.
A plan is written only beside verdicts that were recorded for the same program (a start whose validation faulted
records neither). It is read with the verdict store's safe reader (no symlinks, regular files only, at most
MAX_PLAN_BYTES) and checked in full against the graph: every op index in range and in at most one subgraph, the
run order naming every subgraph and host op once, names that are strings. A file that fails a check is a miss
with one NncCacheWarning and is rewritten; it carries no MAC (as the verdicts: a forged plan can move ops between
the host and the devices, whose converters and drivers still refuse what they cannot run, but it cannot inject a
program).

Must not import: the partition detector (partition.detector's graph code is what a warm start skips), the
converters, the CLI.
"""
from __future__ import annotations

import json
import os
import warnings

from nnadapter_bridge.nnadapter.nnc import NncCacheWarning, read_kept_json, write_file_atomically
from nnadapter_bridge.nnadapter.source_digest import files_digest
from nnadapter_bridge.nnadapter.text_digest import sha256_hex

PLAN_FORMAT = "nnadapter-bridge-plan-v2"  # v2: the loop and branch bodies' partitions
MAX_PLAN_BYTES = 64 << 20
_CODE_FILES = (("partition", ("__init__.py", "config.py", "detector.py")),
               ("nnadapter_bridge/subgraph", ("plan.py", "plan_store.py")))


def _code_digest() -> str:
    """md5 (16 hex) of the partitioner's sources (module docstring), once per process (nnadapter.source_digest)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # A file absent from an installed layout is hashed as absent: its absence is part of the digest.
    return files_digest("partitioner", lambda: [(f"{directory}/{name}", os.path.join(root, directory, name))
                                                for directory, names in _CODE_FILES for name in names])


def plan_key(store_key: str, program_key: str, forced_indexes, min_subgraph_size: int) -> str:
    """The key of a plan (module docstring)."""
    text = "\n".join([PLAN_FORMAT, "store:" + store_key, "program:" + program_key,
                      "forced:" + ",".join(str(int(i)) for i in sorted(forced_indexes)),
                      f"min_subgraph_size:{int(min_subgraph_size)}", "code:" + _code_digest()])
    return sha256_hex(text)


def plan_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, f"plan-{key[:32]}.json")


def _warn(path: str, reason: str) -> None:
    warnings.warn(f"partition plan cache {path} is unusable ({reason}); partitioning afresh", NncCacheWarning,
                  stacklevel=4)


def _names(value, what: str) -> list:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError(f"{what} is not a list of names")
    return value


def _index(value, count: int, what: str) -> int:
    if type(value) is not int or not 0 <= value < count:
        raise ValueError(f"{what} {value!r} is not an op index below {count}")
    return value


def load_plan(cache_dir: str, key: str, graph):
    """The PartitionResult stored under `key` for `graph` (its block-0 ops), or None: no file (silently), or a file
    that fails a check (one NncCacheWarning)."""
    path = plan_path(cache_dir, key)
    document, problem = read_kept_json(path, MAX_PLAN_BYTES)
    if problem:
        _warn(path, problem)
    if document is None:
        return None
    try:
        return _parse(document, key, graph)
    except ValueError as exc:
        _warn(path, str(exc))
        return None


def _parse(document, key: str, graph):
    from partition.detector import PartitionResult

    if not isinstance(document, dict) or document.get("format") != PLAN_FORMAT:
        raise ValueError(f"not a {PLAN_FORMAT} file")
    if document.get("key") != key:
        raise ValueError(f"its key is {str(document.get('key'))[:80]!r}, expected {key!r}")
    ops = list(graph.ops())
    count = len(ops)
    if document.get("ops") != count or any(op.index != i for i, op in enumerate(ops)):
        raise ValueError(f"it is for a program of {document.get('ops')!r} ops, this one has {count}")
    forced = document.get("forced")
    if not isinstance(forced, list):
        raise ValueError("'forced' is not a list")
    forced_keys = frozenset(("op", _index(i, count, "forced op")) for i in forced)
    subgraphs, host_ops, order = _parse_block(document, ops, 0, 0)
    result = PartitionResult(ops, subgraphs, host_ops, forced_keys, order)
    bodies = document.get("bodies")
    if not isinstance(bodies, list):
        raise ValueError("'bodies' is not a list")
    following = len(subgraphs)
    for entry in bodies:
        block = entry.get("block") if isinstance(entry, dict) else None
        if type(block) is not int or not 0 < block < len(graph.blocks) or block in result.bodies:
            raise ValueError(f"body {str(block)[:20]!r} is not a block of this program, once")
        body_ops = list(graph.blocks[block].ops)
        if entry.get("ops") != len(body_ops):
            raise ValueError(f"body {block} is for a block of {entry.get('ops')!r} ops, this one has {len(body_ops)}")
        found, host, steps = _parse_block(entry, body_ops, block, following)
        result.bodies[block] = PartitionResult(body_ops, found, host, frozenset(), steps)
        following += len(found)
    return result


def _parse_block(document: dict, ops: list, block: int, first: int) -> tuple:
    """(subgraphs, host ops, run order) of one block's entry: `ops` the block's, its subgraphs numbered from
    `first`."""
    from partition.detector import Subgraph

    count = len(ops)
    entries, steps = document.get("subgraphs"), document.get("steps")
    if not isinstance(entries, list) or not isinstance(steps, list):
        raise ValueError(f"block {block}: 'subgraphs' or 'steps' is not a list")
    owner: dict = {}
    subgraphs = []
    for number, entry in enumerate(entries, first):
        fields = ("ops", "inputs", "outputs", "weights", "locals", "unused")
        if not isinstance(entry, dict) or set(entry) != set(fields):
            raise ValueError(f"subgraph {number} is not an object of {', '.join(fields)}")
        if not isinstance(entry["ops"], list) or not entry["ops"]:
            raise ValueError(f"subgraph {number} has no op")
        members = []
        for value in entry["ops"]:
            index = _index(value, count, f"subgraph {number}: op")
            if index in owner:
                raise ValueError(f"op {index} of block {block} is in two subgraphs")
            owner[index] = number
            members.append(ops[index])
        if [op.index for op in members] != sorted(op.index for op in members):
            raise ValueError(f"subgraph {number}: its ops are not in program order")
        subgraphs.append(Subgraph(number, members, *(_names(entry[f], f"subgraph {number}: {f}")
                                                      for f in fields[1:]), block))
    host_ops = [op for op in ops if op.index not in owner]
    by_number = {s.index: s for s in subgraphs}
    expected = {("subgraph", s.index) for s in subgraphs} | {("op", op.index) for op in host_ops}
    order, seen = [], set()
    for step in steps:
        if (not isinstance(step, list) or len(step) != 2 or step[0] not in ("subgraph", "op")
                or type(step[1]) is not int or tuple(step) not in expected or tuple(step) in seen):
            raise ValueError(f"the run order of block {block} holds {str(step)[:80]}, not a subgraph or host op once")
        seen.add(tuple(step))
        order.append(by_number[step[1]] if step[0] == "subgraph" else ops[step[1]])
    if len(seen) != len(expected):
        raise ValueError(f"the run order of block {block} leaves out a subgraph or a host op")
    return subgraphs, host_ops, order


def _block_document(result) -> dict:
    from partition.detector import Subgraph

    return {
        "subgraphs": [{"ops": [op.index for op in s.ops], "inputs": list(s.input_names),
                       "outputs": list(s.output_names), "weights": list(s.weight_names),
                       "locals": list(s.local_names), "unused": list(s.unused_names)} for s in result.subgraphs],
        "steps": [["subgraph", step.index] if isinstance(step, Subgraph) else ["op", step.index]
                  for step in result.steps()],
    }


def save_plan(cache_dir: str, key: str, result) -> bool:
    """Write `result` (a PartitionResult) under `key`, atomically; a failed write is one NncCacheWarning. True when
    written."""
    document = {
        "format": PLAN_FORMAT, "key": key, "ops": len(result.ops), **_block_document(result),
        "forced": sorted(index for _, index in result.forced_op_keys),
        "bodies": [{"block": block, "ops": len(body.ops), **_block_document(body)}
                   for block, body in sorted(result.bodies.items())],
    }
    path = plan_path(cache_dir, key)
    try:
        write_file_atomically(path, json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    except OSError as exc:
        warnings.warn(f"cannot write the partition plan cache {path}: {exc}", NncCacheWarning, stacklevel=3)
        return False
    return True
