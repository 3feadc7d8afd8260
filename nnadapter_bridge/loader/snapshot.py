"""The decoded program kept in the model cache dir, so a warm start does not parse the model file again.

Owns `<cache_dir>/program-<key>.json` (the key: the model and params files' real paths): the blocks (vars, and ops
with their slots, attributes and attribute types), where each parameter lies in the params file, the model bytes'
sha256 (ProgramGraph.source_digest, which keys the verdicts and the plan) and the graph's format fields; JSON data
(orjson), never pickle. Entry points: `load_snapshot`, `file_identities`, `save_snapshot_soon` (load_model calls them
when given a snapshot dir; the snapshot is written in a thread: `wait_for_snapshot_writes`), `save_snapshot` and
`loader_code_digest`.

A snapshot is used only when both files are the ones it was made from, and the loader's code is the same:
  * same real path, device, inode, size, modification and status-change time. The status-change time is the
    content check that stays cheap: a file rewritten with the same size and modification time (`touch -d`, or a
    copy that keeps times) has a new one, because any write or time change sets it to the current time, and a
    user cannot set it back; a file replaced by rename has another inode;
  * it is written only when both files last changed more than RACY_NS before they were read: two writes within
    one tick of a coarse file-system clock could otherwise leave the same times;
  * the loader's code digest (`loader_code_digest`) is the one that wrote it.
Only a model file with one combined params file (or none) gets one: buffers, per-var params directories and
Paddle Lite's .nb are parsed at every start. It is written only when decoding the written text gives back exactly
the graph just parsed (value types included, and every parameter at the very same place of the same mapping): a
value the encoding cannot carry leaves the model without a snapshot, never with a different one. A damaged
snapshot is a miss with one NncCacheWarning and is rewritten; a stale one (files or loader changed) is replaced
without a warning. The file carries no MAC, like the verdicts and the plan: the predictor passes no snapshot dir
when an integrity key is set (Config.set_nnadapter_model_cache_key).

Must not import: protobuf or what loads it (framework_pb2, program_desc, params, validate): a warm start that reads
its program here does not load the parser, which is the point. Imports the loader's data model and dtypes, and the
ground's cache-file helpers.
"""
from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
import warnings

import numpy as np

from nnadapter_bridge.loader import dtypes
from nnadapter_bridge.loader.model_files import ModelSource, map_file
from nnadapter_bridge.loader.program import BlockInfo, BlockRef, OpInfo, VarInfo, VarRef
from nnadapter_bridge.nnadapter.nnc import (
    NncCacheWarning,
    file_identity,
    read_kept_json,
    write_file_atomically,
)
from nnadapter_bridge.nnadapter.source_digest import files_digest
from nnadapter_bridge.nnadapter.text_digest import sha256_hex

SNAPSHOT_FORMAT = "nnadapter-bridge-program-v1"
MAX_SNAPSHOT_BYTES = 256 << 20
RACY_NS = 2_000_000_000  # as subgraph.support_decisions.FingerprintMemo's
# The layouts with a model file and at most one params file (loader.model_files).
_LAYOUTS = frozenset({"pdmodel+pdiparams", "json+pdiparams", "dir+__params__", "files"})
_PENDING: list = []  # the threads of save_snapshot_soon
_PENDING_LOCK = threading.Lock()


class _Unencodable(ValueError):
    """A value the snapshot's JSON cannot carry exactly (the model then gets no snapshot)."""


def loader_code_digest() -> str:
    """md5 (16 hex) of the loader's sources: how a model's bytes become ops and attributes. Once per process
    (nnadapter.source_digest); it keys the snapshots and the verdicts' program records."""
    root = os.path.dirname(os.path.abspath(__file__))
    return files_digest("loader", lambda: [(name, os.path.join(root, name))
                                           for name in sorted(f for f in os.listdir(root) if f.endswith(".py"))])


def _paths(source: ModelSource) -> tuple | None:
    """(model path, params path or None) of a source that can have a snapshot, else None."""
    if (source.layout not in _LAYOUTS or source.model_path is None or source.model_bytes is not None
            or source.params_bytes is not None or source.params_is_dir):
        return None
    return source.model_path, source.params_path


def file_identities(source: ModelSource) -> dict | None:
    """The identities of the source's files now (module docstring), with the time they were taken; None for a
    source that cannot have a snapshot."""
    paths = _paths(source)
    if paths is None:
        return None
    model, params = paths
    found = {"model": file_identity(model, resolve=True),
             "params": None if params is None else file_identity(params, resolve=True),
             "taken_ns": time.time_ns()}
    if found["model"] is None or (params is not None and found["params"] is None):
        return None
    return found


def snapshot_path(cache_dir: str, source: ModelSource) -> str | None:
    paths = _paths(source)
    if paths is None:
        return None
    model, params = paths
    text = "\n".join([SNAPSHOT_FORMAT, os.path.realpath(model), os.path.realpath(params) if params else ""])
    return os.path.join(cache_dir, f"program-{sha256_hex(text)[:32]}.json")


# -- values --------------------------------------------------------------------------------------------
def _encode(value, strings: dict):
    """An attribute value as JSON data: scalars as they are, a list as an array, and as one-key objects (tags)
    what JSON has no form for or what is better shared: a list of strings {"s": [indexes into the document's
    string table `strings`]} (Paddle's op_callstack repeats the same few lines on every op: 80% of a legacy
    program's bytes), a tuple {"t": [...]}, a BlockRef {"b": idx}, a VarRef {"v": name}, a non-finite float
    {"f": "nan" | "inf" | "-inf"}."""
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        if not -(1 << 63) <= value < (1 << 64):
            raise _Unencodable("an integer beyond 64 bits")
        return value
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        if value and all(type(v) is str for v in value):
            return {"s": [strings.setdefault(v, len(strings)) for v in value]}
        return [_encode(v, strings) for v in value]
    if kind is tuple:
        return {"t": [_encode(v, strings) for v in value]}
    if kind is BlockRef:
        return {"b": value.idx}
    if kind is VarRef:
        return {"v": value.name}
    raise _Unencodable(f"a {kind.__name__} attribute value")


_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _decode(data, strings: list):
    if type(data) is list:
        for v in data:
            if type(v) is list or type(v) is dict:
                return [_decode(v, strings) for v in data]
        return data  # scalars only (shapes, axes): orjson's new list as it is
    if type(data) is dict:
        if len(data) != 1:
            raise ValueError("an attribute value object is not a one-key tag")
        (tag, inner), = data.items()
        if tag == "s" and isinstance(inner, list):
            return [strings[i] for i in inner]  # an index that is not an int: TypeError, a miss
        if tag == "t" and isinstance(inner, list):
            return tuple(_decode(v, strings) for v in inner)
        if tag == "b" and type(inner) is int:
            return BlockRef(inner)
        if tag == "v" and isinstance(inner, str):
            return VarRef(inner)
        if tag == "f" and inner in _FLOATS:
            return _FLOATS[inner]
        raise ValueError(f"unknown attribute value tag {str(tag)[:20]!r}")
    return data


_EXACT = frozenset({str, int, bool})  # types whose == is exact once the types are the same


def _same(a, b) -> bool:
    """Equal, and of the very same types all the way down (1 is not 1.0 nor True; a tuple is not a list)."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is float:
        return a.hex() == b.hex()  # -0.0 is not 0.0; nan is nan
    if kind is list or kind is tuple:
        if len(a) != len(b):
            return False
        types = list(map(type, a))
        if set(types) <= _EXACT and types == list(map(type, b)):  # the common case (names, call stacks), at C speed
            return a == b
        return all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, OpInfo):
        return all(_same(getattr(a, s), getattr(b, s)) for s in OpInfo.__slots__)
    if isinstance(a, (VarInfo, BlockInfo)):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)


# -- the document --------------------------------------------------------------------------------------
def _dtype_code(dtype) -> int | None:
    if dtype is None:
        return None
    try:
        return dtypes.var_type_of_dtype(dtype)
    except KeyError:
        raise _Unencodable(f"dtype {dtype}") from None


def _encode_blocks(blocks: list, strings: dict) -> list:
    return [{"idx": b.idx, "parent": b.parent_idx, "forward": b.forward_block_idx,
             "vars": [[v.name, v.var_type, v.data_type, _dtype_code(v.dtype), list(v.shape), v.persistable,
                       v.lod_level, v.need_check_feed, v.is_parameter, v.stop_gradient] for v in b.vars.values()],
             "ops": [[op.type, op.index, op.block_idx, op.inputs, op.outputs,
                      {name: _encode(value, strings) for name, value in op.attrs.items()}, op.attr_types, op.is_target]
                     for op in b.ops]}
            for b in blocks]


def _decode_blocks(data, strings: list) -> list:
    if not isinstance(strings, list) or not all(isinstance(t, str) for t in strings):
        raise ValueError("the string table is not a list of strings")
    blocks = []
    dtype_of: dict = {None: None}  # element type code -> numpy dtype, looked up once per code
    for b in data:
        variables = {}
        for name, var_type, data_type, code, shape, persistable, lod_level, check, is_param, stop in b["vars"]:
            if code not in dtype_of:
                dtype_of[code] = dtypes.numpy_dtype(code)
            dtype = dtype_of[code]
            variables[name] = VarInfo(name, var_type, dtype, data_type, tuple(shape), persistable, lod_level, check,
                                      is_param, stop)
        ops = []
        for op_type, index, block_idx, inputs, outputs, attrs, attr_types, is_target in b["ops"]:
            if type(attrs) is not dict:
                raise ValueError("an op's attributes are not an object")
            for name, value in attrs.items():  # most values are scalars, which decode as they are
                if type(value) is list or type(value) is dict:
                    attrs[name] = _decode(value, strings)
            ops.append(OpInfo(op_type, index, block_idx, inputs, outputs, attrs, attr_types, is_target))
        blocks.append(BlockInfo(b["idx"], b["parent"], b["forward"], ops, variables))
    return blocks


def _param_places(params: dict) -> tuple:
    """(the one buffer every parameter views, [[name, dtype code, shape, byte offset]]); _Unencodable when they do
    not all view one buffer (the arrays of loader.params.read_combined over map_file do)."""
    buffer, places = None, []
    for name, array in params.items():
        base = array
        while isinstance(base, (np.ndarray, memoryview)):  # np.frombuffer holds a memoryview of the mapping
            base = base.obj if isinstance(base, memoryview) else base.base
        if base is None or (buffer is not None and base is not buffer):
            raise _Unencodable(f"parameter '{name}' is not a view of the params file")
        buffer = base
        offset = array.__array_interface__["data"][0] - np.frombuffer(buffer, np.uint8).__array_interface__["data"][0]
        places.append([name, _dtype_code(array.dtype), list(array.shape), offset])
    return buffer, places


def _params_over(buffer, places: list) -> dict:
    params = {}
    for name, code, shape, offset in places:
        dtype = dtypes.numpy_dtype(code)
        count = math.prod(shape)
        if type(offset) is not int or offset < 0 or offset + count * dtype.itemsize > len(buffer):
            raise ValueError(f"parameter '{name}' lies beyond the params file")
        params[name] = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape)
    return params


def _graph(document: dict, source: ModelSource, blocks: list, params: dict):
    from nnadapter_bridge.loader.graph import ProgramGraph  # graph imports this module when given a snapshot dir

    graph = ProgramGraph(None, blocks, params, source.layout, source.model_path, source.params_path,
                         model_format=document["format_name"], format_version=document["format_version"])
    graph.source_digest = document["source_digest"]
    return graph


def load_snapshot(cache_dir: str, source: ModelSource):
    """The ProgramGraph kept for `source`'s files, or None: no snapshot, a stale one (silently), or a damaged one
    (one NncCacheWarning)."""
    path = snapshot_path(cache_dir, source)
    if path is None:
        return None
    document, problem = read_kept_json(path, MAX_SNAPSHOT_BYTES)
    if document is None:
        if problem:
            _warn(path, problem)
        return None
    try:
        if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"not a {SNAPSHOT_FORMAT} file")
        files = file_identities(source)
        if (files is None or document.get("model") != files["model"] or document.get("params") != files["params"]
                or document.get("loader") != loader_code_digest()):
            return None  # stale: the files or the loader changed since; replaced after this start's parse
        blocks = _decode_blocks(document["blocks"], document["strings"])
        params = {} if source.params_path is None else _params_over(map_file(source.params_path),
                                                                     document["param_places"])
        return _graph(document, source, blocks, params)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        _warn(path, f"{type(exc).__name__}: {exc}"[:300])
        return None
    except OSError as exc:  # the params file went away between the check and the mapping: parse instead
        _warn(path, f"cannot map the params file: {exc}")
        return None


def save_snapshot(cache_dir: str, source: ModelSource, files: dict, graph) -> bool:
    """Keep `graph`, parsed from `source`'s files whose identities were `files` before they were read, when it may
    be (module docstring). True when written; a failed write is one NncCacheWarning."""
    path = snapshot_path(cache_dir, source)
    if path is None or graph.format not in ("program_desc", "pir"):
        return False
    changed = max(f[5] for f in (files["model"], files["params"]) if f is not None)
    now = file_identities(source)  # a file changed while it was parsed: the graph may be of neither version
    if files["taken_ns"] - changed <= RACY_NS or now is None or (now["model"], now["params"]) != (
            files["model"], files["params"]):
        return False
    import orjson

    try:
        buffer, places = _param_places(graph.params) if graph.params else (None, [])
        strings: dict = {}
        blocks = _encode_blocks(graph.blocks, strings)
        document = {"format": SNAPSHOT_FORMAT, "model": files["model"], "params": files["params"],
                    "loader": loader_code_digest(), "format_name": graph.format,
                    "format_version": graph.format_version, "source_digest": graph.source_digest,
                    "strings": list(strings), "blocks": blocks, "param_places": places}
        data = orjson.dumps(document)
        # Decoded again and compared with what was parsed: only an exact round trip is kept.
        again = orjson.loads(data)
        if not _same(_decode_blocks(again["blocks"], again["strings"]), graph.blocks):
            return False
        if buffer is not None:
            rebuilt = _params_over(buffer, again["param_places"])
            if any(rebuilt[n].__array_interface__ != graph.params[n].__array_interface__ for n in graph.params):
                return False
    except (_Unencodable, TypeError, ValueError):  # orjson refuses a lone surrogate, a key that is no str, ...
        return False
    try:
        write_file_atomically(path, data)
    except OSError as exc:
        warnings.warn(f"cannot write the program snapshot {path}: {exc}", NncCacheWarning, stacklevel=3)
        return False
    return True


def save_snapshot_soon(cache_dir: str, source: ModelSource, files: dict, graph) -> None:
    """save_snapshot in a thread of its own, so a start that parsed its model does not wait for the encoding and
    its check (~25 ms for mobilenet_v2): the loaded graph is never changed after load_model (nothing above the
    loader writes to its blocks), and the thread is not a daemon, so the process exits only once it is done."""
    thread = threading.Thread(target=save_snapshot, args=(cache_dir, source, files, graph),
                              name="nnadapter-bridge-program-snapshot")
    with _PENDING_LOCK:
        _PENDING[:] = [t for t in _PENDING if t.is_alive()] + [thread]
    thread.start()


def wait_for_snapshot_writes(timeout: float | None = None) -> None:
    """Wait for the snapshots being written (save_snapshot_soon)."""
    with _PENDING_LOCK:
        pending = list(_PENDING)
    for thread in pending:
        thread.join(timeout)


def _warn(path: str, reason: str) -> None:
    warnings.warn(f"program snapshot {path} is unusable ({reason}); parsing the model file", NncCacheWarning,
                  stacklevel=4)
