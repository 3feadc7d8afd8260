"""ProgramGraph: a loaded Paddle inference model (blocks, ops, vars, params) and `load_model`, its entry point.

Paddle programs are not SSA: an op may write a var that already holds a value (batch_norm writes its
running mean back into `Mean`'s var; `assign` and in-place activations do the same). A graph keyed by var
name alone would then have cycles. So `ProgramGraph.graph` versions vars: `("var", name)` is the first
value of `name` (a feed, a parameter, or the first op output), and every later write adds a node
`("var", name, k)` (k = 1, 2, ...); readers are wired to the latest version before them in program order.
Edges therefore always point forward in program order and the graph is a DAG. Every var node carries
`var=VarInfo` and `version=k`; every op node `("op", i)` carries `op=OpInfo`; edges carry `slots` (the
slot names through which the op reads or writes that var). The networkx graph is built on first use of
`graph` / `block_graph` only: `ops()` (what the predictor and the partition read) needs no graph, because
program order is a topological order of this DAG by construction, so a predictor never imports networkx.

Entry points: `load_model`, `ProgramGraph`. Imports the loader's readers (protobuf, the decoders, the checks) only
when a model file is parsed: a warm start reads the decoded program from its snapshot (loader.snapshot) and loads
neither (tests/e2e/test_startup_imports.py); networkx only where a graph is built: a warm start loads this module and
must not load networkx (tests/e2e/test_startup_memory.py).
"""
from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING

import numpy as np

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import dtypes
from nnadapter_bridge.loader.model_files import ModelSource, map_file, resolve
from nnadapter_bridge.loader.program import (
    EMPTY_VAR_NAME,
    BlockInfo,
    BlockRef,
    OpInfo,
    VarInfo,
    VarRef,
    lookup_var,
)

if TYPE_CHECKING:  # imported on first use of ProgramGraph.graph (~40 ms to import)
    import networkx as nx

    from nnadapter_bridge.loader import framework_pb2 as pb

__all__ = ["load_model", "ProgramGraph", "BlockInfo", "OpInfo", "VarInfo", "BlockRef", "VarRef"]


class ProgramGraph:
    """A Paddle inference program with its parameters, decoded and cross-checked at load time."""

    def __init__(self, program_desc: pb.ProgramDesc | None, blocks: list[BlockInfo], params: dict[str, np.ndarray],
                 layout: str, model_path: str | None, params_path: str | None, model_format: str = "program_desc",
                 format_version: int | None = None):
        # None for a PIR program (translated straight into `blocks`); parsed again on first use for a program
        # read from loader.snapshot (program_desc property)
        self._program_desc = program_desc
        self.format = model_format  # "program_desc" or "pir"
        self.format_version = format_version  # the PIR serialization version; None for a ProgramDesc
        self.blocks = blocks
        self.params = params
        self.layout = layout
        self.model_path = model_path
        self.params_path = params_path
        self._param_maps = _param_maps(params)
        self.source_digest: str | None = None  # sha256 of the model file's bytes (set by load_model)
        self.opt_version: str | None = None  # the Paddle Lite opt that wrote a .nb (set by load_model)
        self.inputs = _feed_fetch_targets(blocks[0], "feed", "Out")
        self.outputs = _feed_fetch_targets(blocks[0], "fetch", "X")
        self._graphs: dict[int, nx.DiGraph] = {}
        self._readers: dict[int, dict[str, list[OpInfo]]] = {}
        self._writers: dict[int, dict[str, list[OpInfo]]] = {}
        for block in blocks:
            readers: dict[str, list[OpInfo]] = {}
            writers: dict[str, list[OpInfo]] = {}
            for op in block.ops:
                for name in dict.fromkeys(op.input_names()):
                    readers.setdefault(name, []).append(op)
                for name in dict.fromkeys(op.output_names()):
                    writers.setdefault(name, []).append(op)
            self._readers[block.idx] = readers
            self._writers[block.idx] = writers

    @property
    def program_desc(self) -> pb.ProgramDesc | None:
        """The parsed ProgramDesc of a legacy program; a graph read from its snapshot parses the model file on
        first use (only saving a .nb reads it), so a warm start does not load protobuf."""
        if self._program_desc is None and self.format == "program_desc" and self.model_path is not None:
            from nnadapter_bridge.loader.program_desc import parse_program_desc

            self._program_desc = parse_program_desc(map_file(self.model_path), self.model_path)
        return self._program_desc

    # -- graph views ------------------------------------------------------------------------------------
    @property
    def graph(self) -> nx.DiGraph:
        """The versioned var/op DAG of block 0 (see the module docstring)."""
        return self.block_graph(0)

    def block_graph(self, block: int = 0) -> nx.DiGraph:
        """The versioned var/op DAG of any block; vars of enclosing blocks appear as plain var nodes."""
        import networkx as nx

        info = self._block(block)
        cached = self._graphs.get(block)
        if cached is not None:
            return cached
        g: nx.DiGraph[tuple] = nx.DiGraph(block=block)
        latest: dict[str, tuple] = {}  # var name -> node holding its current value
        versions: dict[str, int] = {}
        for name, var in info.vars.items():
            g.add_node(("var", name), var=var, version=0)

        def var_node_for_read(name):
            node = latest.get(name)
            if node is None:
                node = latest[name] = ("var", name)
                versions[name] = 0
                if node not in g:
                    g.add_node(node, var=lookup_var(self.blocks, block, name), version=0)
            return node

        for op in info.ops:
            op_node = ("op", op.index)
            g.add_node(op_node, op=op)
            for slot, names in op.inputs.items():
                for name in names:
                    if name == EMPTY_VAR_NAME:
                        continue
                    _add_slot_edge(g, var_node_for_read(name), op_node, slot)
            for slot, names in op.outputs.items():
                for name in names:
                    if name == EMPTY_VAR_NAME:
                        continue
                    if name in latest:
                        versions[name] += 1
                        node: tuple = ("var", name, versions[name])
                        g.add_node(node, var=lookup_var(self.blocks, block, name), version=versions[name])
                    else:
                        node = ("var", name)
                        versions[name] = 0
                        if node not in g:
                            g.add_node(node, var=lookup_var(self.blocks, block, name), version=0)
                    latest[name] = node
                    _add_slot_edge(g, op_node, node, slot)
        self._graphs[block] = g
        return g

    def ops(self, block: int = 0) -> list[OpInfo]:
        """The ops of `block` in a topological order of its dependency DAG: file order. Every edge of the
        versioned DAG points forward in file order (an op reads the latest value written before it, or a
        value from outside; what it writes is a new node), so file order is always a valid order, and it is
        the order a lexicographic topological sort by op index gives (tests/loader check both agree)."""
        return list(self._block(block).ops)

    def var(self, name: str, block: int = 0) -> VarInfo:
        """The VarDesc `name` as seen from `block` (its own vars, then enclosing blocks')."""
        self._block(block)
        var = lookup_var(self.blocks, block, name)
        if var is None:
            raise ModelFormatError(f"no var '{name}' in block {block} or its enclosing blocks",
                                   path=self.model_path, var=name)
        return var

    def producer(self, name: str, block: int = 0) -> OpInfo | None:
        """The op whose output is the first value of `name`; None when that value comes from outside the
        program: a parameter (persistable) or a var some op reads before any op writes it."""
        writers = self._writers[self._block(block).idx].get(name)
        if not writers:
            return None
        var = lookup_var(self.blocks, block, name)
        if var is not None and var.persistable:
            return None
        readers = self._readers[block].get(name)
        if readers and readers[0].index <= writers[0].index:
            return None
        return writers[0]

    def writers(self, name: str, block: int = 0) -> list[OpInfo]:
        """Every op that writes `name`, in program order."""
        return list(self._writers[self._block(block).idx].get(name, []))

    def consumers(self, name: str, block: int = 0) -> list[OpInfo]:
        """Every op that reads `name` (any version), in program order."""
        return list(self._readers[self._block(block).idx].get(name, []))

    def param(self, name: str) -> np.ndarray:
        try:
            return self.params[name]
        except KeyError:
            raise ModelFormatError("not a parameter of this model (not a persistable var of block 0)",
                                   path=self.params_path or self.model_path, var=name) from None

    def _block(self, block: int) -> BlockInfo:
        if not isinstance(block, int) or not 0 <= block < len(self.blocks):
            raise ModelFormatError(f"no block {block}: the program has {len(self.blocks)}", path=self.model_path)
        return self.blocks[block]

    def release_param_pages(self) -> None:
        """Drop the resident pages of the memory-mapped params files from this process (madvise DONTNEED):
        once the devices hold their own copy of the weights (a program was compiled or restored), the process
        need not keep a second one. Nothing changes for readers: the arrays stay valid, and a page read again
        (a host op, a fallback to the host) is mapped back from the file. Params read into memory (buffers,
        small files) are not affected."""
        for mapped in self._param_maps:
            try:
                mapped.madvise(mmap.MADV_DONTNEED)
            except (AttributeError, OSError, ValueError):  # no madvise on this platform, or a closed map
                pass

    # -- summaries --------------------------------------------------------------------------------------
    def num_ops(self) -> int:
        return sum(len(b.ops) for b in self.blocks)

    def params_nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.params.values())

    def __repr__(self) -> str:
        return (f"ProgramGraph(layout={self.layout!r}, blocks={len(self.blocks)}, ops={self.num_ops()}, "
                f"params={len(self.params)}, inputs={self.inputs}, outputs={self.outputs})")


def _looks_like_json(data) -> bool:
    """pir.looks_like_pir, without importing the PIR reader for a ProgramDesc."""
    head = bytes(data[:64]).lstrip()
    return head[:1] in (b"{", b"[")


def _looks_like_naive_buffer(data, source) -> bool:
    # A file is told by its name (a damaged .nb is reported as one, not as an unreadable ProgramDesc), so the
    # naive-buffer reader (flatbuffers) loads only for a .nb or a buffer.
    if source.model_path is not None:
        return source.model_path.endswith(".nb")
    from nnadapter_bridge.loader.naive_buffer import looks_like_naive_buffer

    return looks_like_naive_buffer(data)


def _check_naive_buffer_params(block: BlockInfo, params: dict, where: str) -> None:
    """Every persistable tensor var of block 0 has its stored tensor, of the declared dtype and dims (with the
    tolerances the params readers have: params._int8_weight, params._shape_matches)."""
    from nnadapter_bridge.loader.params import _int8_weight, _shape_matches

    for spec_name, dtype, shape in saved_param_specs(block, where):
        stored = params.get(spec_name)
        if stored is None:
            raise ModelFormatError(f"persistable var '{spec_name}' has no stored tensor in the .nb's params",
                                   path=where)
        if stored.dtype != dtype and not _int8_weight(stored.dtype, dtype):
            raise ModelFormatError(f"parameter '{spec_name}' is stored as {stored.dtype}, the program declares "
                                   f"{np.dtype(dtype)}", path=where)
        # naive_buffer took the stored dims; a 0-d/[1] pair may remain
        if shape is not None and not _shape_matches(stored.shape, shape):
            raise ModelFormatError(f"parameter '{spec_name}' is stored with dims {list(stored.shape)}, the program "
                                   f"declares {list(shape)}", path=where)


def _param_maps(params: dict) -> list:
    """The distinct mmap objects the params arrays are views of (loader.params maps files read-only)."""
    found = {}
    for array in params.values():
        base = array
        while isinstance(base, np.ndarray):
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        if isinstance(base, mmap.mmap):
            found[id(base)] = base
    return list(found.values())


def _add_slot_edge(g: nx.DiGraph, src, dst, slot: str) -> None:
    if g.has_edge(src, dst):
        g.edges[src, dst]["slots"].append(slot)
    else:
        g.add_edge(src, dst, slots=[slot])


def _node_sort_key(node):
    """Var nodes first, then ops by file index: the lexicographic topological order that ops() returns."""
    if node[0] == "op":
        return (1, node[1], "", 0)
    return (0, 0, node[1], node[2] if len(node) > 2 else 0)


def _feed_fetch_targets(block: BlockInfo, op_type: str, slot: str) -> list[str]:
    """Feed (fetch) target vars ordered by the ops' `col` attribute, file order breaking ties."""
    found: list[tuple[int, int, str]] = []  # (col, file position, name)
    for op in block.ops:
        if op.type == op_type:
            names = op.output(slot) if op_type == "feed" else op.input(slot)
            col = op.attr("col", op.index)
            found.extend((col if isinstance(col, int) else op.index, op.index, n) for n in names)
    return [name for _, _, name in sorted(found)]


def saved_param_specs(block: BlockInfo, where: str) -> list[tuple[str, np.dtype, tuple | None]]:
    """(name, dtype, shape) of the vars a params file holds, in the combined file's order (facts §7.3); shape None
    for a run-time persistable (run_time_persistables), whose stored dims are whatever the export held."""
    from nnadapter_bridge.loader.params import NOT_SAVED_KINDS

    written_first = run_time_persistables(block)
    specs: list[tuple[str, np.dtype, tuple | None]] = []
    for name in sorted(block.vars):
        var = block.vars[name]
        if not var.persistable or var.var_type in NOT_SAVED_KINDS:
            continue
        if var.var_type != dtypes.VarTypeCode.LOD_TENSOR:
            raise ModelFormatError(f"persistable var of kind {dtypes.type_name(var.var_type)} is not supported "
                                   f"(only LOD_TENSOR parameters can be read)", path=where, var=name)
        if var.dtype is None:
            raise ModelFormatError(f"parameter has element type {dtypes.type_name(var.data_type or -1)}, which "
                                   f"this loader cannot hold; the model is corrupt or needs a newer loader",
                                   path=where, var=name)
        if any(d < 0 for d in var.shape):
            if name not in written_first:
                raise ModelFormatError(f"parameter declares dims {list(var.shape)}; a persistable var's dims are "
                                       f"its stored tensor's, all known (-1 only belongs to a run-time axis such "
                                       f"as the batch)", path=where, var=name)
            specs.append((name, var.dtype, None))  # a run-time value (run_time_persistables): any stored dims
            continue
        specs.append((name, var.dtype, var.shape))
    return specs


def run_time_persistables(block: BlockInfo) -> set[str]:
    """The persistable vars with unknown (-1) dims that an op of `block` writes before any op reads them.

    Legacy dy2static (FLAGS_enable_pir_api=0) marks an eager tensor a model keeps between calls persistable and
    assigns it from the traced value at run time (ppdet's SOLOv2 head: `eager_tmp_4 = assign(relu_24.tmp_0)`,
    dims [-1, 256, -1, -1]); the params file still holds the tensor it had at export. Paddle loads that tensor
    and the assign overwrites it before its first reader, so the value is the op's, not the file's."""
    candidates = {name for name, var in block.vars.items() if var.persistable and any(d < 0 for d in var.shape)}
    found: set[str] = set()
    read: set[str] = set()
    for op in block.ops:
        read.update(n for n in op.input_names() if n in candidates and n not in found)
        found.update(n for n in op.output_names() if n in candidates and n not in read)
    return found


def _per_var_path(directory: str, name: str) -> str:
    path = os.path.normpath(os.path.join(directory, name))
    root = os.path.normpath(directory)
    # A var name is a relative file name; one that climbs out of the directory is a forged model.
    if os.path.isabs(name) or os.path.commonpath([root, path]) != root or path == root:
        raise ModelFormatError("parameter name is not a file name inside the model directory",
                               path=directory, var=name)
    return path


def _load_params(source: ModelSource, specs, model_where: str) -> dict[str, np.ndarray]:
    from nnadapter_bridge.loader.params import PER_VAR_MMAP_THRESHOLD, read_combined, read_single

    if not specs:
        return {}
    if source.params_bytes is not None:
        return read_combined(memoryview(source.params_bytes), "<params buffer>", specs)
    if source.params_path is None:
        expected = source.expected_params
        if source.params_named_missing:
            raise ModelFormatError(f"params file not found; check the path (the model has {len(specs)} "
                                   "parameters)", path=expected)
        hint = (f"expected {expected}" if expected else "pass the params file (params_path=...)")
        raise ModelFormatError(f"the model has {len(specs)} parameters but no params file was found; {hint}",
                               path=expected or model_where)
    if source.params_is_dir:
        params = {}
        for name, dtype, shape in specs:
            path = _per_var_path(source.params_path, name)
            if not os.path.isfile(path):
                raise ModelFormatError("missing parameter file (this layout wants one file per persistable var; "
                                       "re-export the model or copy the file)", path=path, var=name)
            params[name] = read_single(map_file(path, PER_VAR_MMAP_THRESHOLD), path, name, dtype, shape)
        return params
    return read_combined(map_file(source.params_path), source.params_path, specs)


def load_model(model_path=None, params_path=None, *, model_bytes=None, params_bytes=None,
               snapshot_dir: str | None = None) -> ProgramGraph:
    """Load a Paddle inference model from a directory, files or bytes (see loader.model_files for the layouts).

    `model_path` may be a directory (layout auto-detected) or a model file; `params_path` a combined params
    file or a directory of per-var files. Raises ModelFormatError for anything missing, ambiguous or corrupt.
    `snapshot_dir`: a model cache dir where the decoded program is kept (loader.snapshot): read instead of
    parsing the model file when that file and the params file are unchanged, and written after a parse.
    """
    source = resolve(model_path, params_path, model_bytes, params_bytes)
    if snapshot_dir is None:
        return _load(source)
    # Imported here: only a start with a model cache dir keeps snapshots.
    from nnadapter_bridge.loader import snapshot

    graph = snapshot.load_snapshot(snapshot_dir, source)
    if graph is not None:
        return graph
    files = snapshot.file_identities(source)  # taken before the files are read: a change while parsing shows
    graph = _load(source)
    if files is not None:
        snapshot.save_snapshot_soon(snapshot_dir, source, files, graph)
    return graph


def _load(source: ModelSource) -> ProgramGraph:
    # Imported here: a start that reads its program from loader.snapshot loads neither protobuf nor the checks.
    from nnadapter_bridge.loader.program_desc import decode_blocks, parse_program_desc
    from nnadapter_bridge.loader.validate import validate_program

    if source.model_bytes is not None:
        model_data, model_where = source.model_bytes, "<model buffer>"
    elif source.model_path is not None:
        model_data, model_where = map_file(source.model_path), source.model_path
    else:  # resolve() refuses this already
        raise ModelFormatError("no model given: pass a model directory, a model file, or model_bytes")
    params_where = source.params_path if source.params_path is not None else (
        "<params buffer>" if source.params_bytes is not None else None)
    # What the program (ops, attributes, declared vars) is, for records keyed by it (support verdicts by op).
    import hashlib  # here: a start that reads its program from loader.snapshot hashes nothing (no OpenSSL)

    source_digest = hashlib.sha256(model_data).hexdigest()
    if _looks_like_naive_buffer(model_data, source):
        from nnadapter_bridge.loader import naive_buffer  # Paddle Lite's optimized .nb

        if source.params_path is not None or source.params_bytes is not None:
            raise ModelFormatError("a Paddle Lite .nb holds its own parameters; give it without a params file",
                                   path=source.params_path or model_where)
        model = naive_buffer.read_naive_buffer(model_data, model_where)
        blocks = decode_blocks(model.program, model_where)
        _check_naive_buffer_params(blocks[0], model.params, model_where)
        validate_program(blocks, model.params, model_where)
        graph = ProgramGraph(model.program, blocks, model.params, "naive_buffer", source.model_path,
                             source.model_path, model_format="naive_buffer", format_version=model.meta_version)
        graph.opt_version = model.opt_version
        graph.source_digest = source_digest
        return graph
    if _looks_like_json(model_data):
        from nnadapter_bridge.loader import pir  # imported for PIR programs only (~3 ms, orjson, its tables)

        if source.params_is_dir:
            raise ModelFormatError("a PIR program keeps its parameters in one .pdiparams file, not a directory of "
                                   "per-var files; pass the .pdiparams", path=source.params_path)
        pir_program = pir.translate(pir.parse_json(model_data, model_where), model_where)
        del model_data  # the JSON tree is gone with translate's frame; drop the file bytes too
        params = _load_params(source, pir_program.param_specs, model_where)
        validate_program(pir_program.blocks, params, model_where)
        graph = ProgramGraph(None, pir_program.blocks, params, source.layout, source.model_path, params_where,
                             model_format="pir", format_version=pir_program.version)
        graph.source_digest = source_digest
        return graph
    program = parse_program_desc(model_data, model_where)
    blocks = decode_blocks(program, model_where)
    specs = saved_param_specs(blocks[0], model_where)
    params = _load_params(source, specs, model_where)
    for name in run_time_persistables(blocks[0]):  # read to keep the file's order; the program computes them
        params.pop(name, None)
    validate_program(blocks, params, model_where)
    graph = ProgramGraph(program, blocks, params, source.layout, source.model_path, params_where)
    graph.source_digest = source_digest
    return graph
