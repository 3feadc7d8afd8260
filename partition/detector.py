"""The subgraph detector: which ops of block 0 run together as device subgraphs (facts §4.3, §4.4), Paddle Lite's
clustering over a dependency graph with versioned vars and what every op reads and writes (sub-blocks included).
The bodies of the loops and branches left on the host (their blocks, nested ones too) are partitioned the same way,
each block on its own, as Paddle Lite's subgraph pass does for every block: a body's subgraphs run on the devices
each time the host runs the body.
Entry points: `detect_subgraphs`, `op_reads` / `op_writes`, `body_ops`, `sub_block_indices`. Imports the
ground (the loader's program model, the standard's graph contraction, errors) and `partition.config` only; nothing
here knows about devices. How it clusters and why: docs/architecture.md, "The subgraph detector".
"""
from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Collection

from nnadapter_bridge.errors import BridgeError
from nnadapter_bridge.loader.program import EMPTY_VAR_NAME, BlockRef, VarRef
from nnadapter_bridge.nnadapter.contraction import contract
from nnadapter_bridge.nnadapter.record import plain_dataclass
from partition.config import op_input_names, op_key, op_output_names

# Paddle's graph-boundary ops: they have no converter and must stay on the host.
HOST_ONLY_OP_TYPES = frozenset({"feed", "fetch"})


@plain_dataclass
class Subgraph:
    """One cluster of ops that runs as a single device program, with its boundary var names sorted."""

    index: int
    ops: list  # OpInfo, in program order
    input_names: list[str]  # data produced outside (or a program input) and read inside
    output_names: list[str]  # values made inside and read outside, or program outputs
    weight_names: list[str]  # persistable params read inside
    local_names: list[str]  # values made and read only inside
    unused_names: list[str]  # values made inside that nothing reads (XShape, ...)
    block: int = 0  # the block holding its ops: 0, or a loop or branch body

    @property
    def op_keys(self) -> list[tuple]:
        return [op_key(op) for op in self.ops]

    def __repr__(self) -> str:
        types = ",".join(op.type for op in self.ops)
        return f"Subgraph({self.index}, ops=[{types}], inputs={self.input_names}, outputs={self.output_names})"


@plain_dataclass
class PartitionResult:
    """The detector's answer: the subgraphs, the host ops, and the order to run them in."""

    ops: list  # every op of block 0 in program order
    subgraphs: list[Subgraph]
    host_ops: list  # ops outside every subgraph, in program order
    forced_op_keys: frozenset  # ops the partition config kept on the host
    _steps: list = dataclasses.field(repr=False, default_factory=list)
    # block -> the PartitionResult of a loop or branch body (its `ops` are that block's): the blocks of block 0's
    # host control-flow ops and the blocks nested in them. Their subgraphs are numbered after block 0's.
    bodies: dict = dataclasses.field(repr=False, default_factory=dict)

    def __post_init__(self):
        self._index_by_key = {_placed_key(op): s.index for s in self.subgraphs for op in s.ops}

    def every_subgraph(self) -> list[Subgraph]:
        """Block 0's subgraphs, then the bodies', by index."""
        return list(self.subgraphs) + sorted((s for body in self.bodies.values() for s in body.subgraphs),
                                             key=lambda s: s.index)

    def subgraph_index_of(self, op) -> int | None:
        """The index of the subgraph holding `op` (of block 0 or of a body), None for a host op."""
        found = self._index_by_key.get(_placed_key(op))
        if found is None and self.bodies:
            body = self.bodies.get(getattr(op, "block_idx", 0))
            found = body.subgraph_index_of(op) if body is not None else None
        return found

    def steps(self) -> list:
        """Host ops (OpInfo) and subgraphs (Subgraph) in an order that respects every dependency."""
        return list(self._steps)


def _placed_key(op) -> tuple:
    """An op's block and index: op keys (op_key) name block-0 ops, and a body's ops repeat their indexes."""
    return getattr(op, "block_idx", 0), op.index


class PartitionError(BridgeError):
    """The detector produced an impossible partition (a bug here, never a user error)."""


def sub_block_indices(op) -> list[int]:
    """The blocks `op`'s BLOCK / BLOCKS attributes name (while's and conditional_block's sub_block), in order."""
    found = []
    for value in op.attrs.values():
        for ref in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(ref, BlockRef) and ref.idx not in found:
                found.append(ref.idx)
    return found


def _nested_blocks(blocks, roots: list[int]) -> list[int]:
    """`roots` and every block their ops' sub-blocks reach, each once, in discovery order."""
    found, stack = [], list(reversed(roots))
    while stack:
        idx = stack.pop()
        if idx in found or not 0 <= idx < len(blocks):
            continue
        found.append(idx)
        for op in blocks[idx].ops:
            stack.extend(reversed(sub_block_indices(op)))
    return found


def body_ops(program, op) -> list:
    """Every op of `op`'s sub-blocks and the blocks nested in them ([] for an op without a sub-block): each block's
    ops in order, a nested block after the block holding it."""
    blocks = getattr(program, "blocks", None)
    roots = sub_block_indices(op)
    if not roots or blocks is None:
        return []
    return [inner for idx in _nested_blocks(blocks, roots) for inner in blocks[idx].ops]


def _attr_var_names(op) -> list[str]:
    return [ref.name for value in op.attrs.values()
            for ref in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(ref, VarRef)]


def sub_block_io(program, op) -> tuple[list[str], list[str]]:
    """(vars read, vars written) by the ops of `op`'s sub-blocks and their nested blocks that none of those
    blocks declares: what a control-flow op takes from and gives back to the block holding it. Reads count
    input slots and Variable-valued attributes. ([], []) for an op without a sub-block."""
    blocks = getattr(program, "blocks", None)
    roots = sub_block_indices(op)
    if not roots or blocks is None:
        return [], []
    nested = _nested_blocks(blocks, roots)
    local = {name for idx in nested for name in blocks[idx].vars}
    reads: dict[str, None] = {}  # ordered sets
    writes: dict[str, None] = {}
    for idx in nested:
        for inner in blocks[idx].ops:
            for name in list(inner.input_names()) + _attr_var_names(inner):
                if name not in local:
                    reads[name] = None
            for name in inner.output_names():
                if name not in local:
                    writes[name] = None
    return list(reads), list(writes)


def op_reads(program, op) -> list[str]:
    """Every var `op` reads (module docstring), each once, without Paddle's empty-slot marker."""
    names = op_input_names(op)
    extra = sub_block_io(program, op)[0]
    return names + [n for n in dict.fromkeys(extra) if n not in names and n != EMPTY_VAR_NAME] if extra else names


def op_writes(program, op) -> list[str]:
    """Every var `op` writes: its output slots, then the outside vars its sub-blocks write."""
    names = op_output_names(op)
    extra = sub_block_io(program, op)[1]
    return names + [n for n in dict.fromkeys(extra) if n not in names and n != EMPTY_VAR_NAME] if extra else names


class _DependencyGraph:
    """Ops and versioned vars of block 0 as adjacency lists in insertion order, plus data-flow facts."""

    def __init__(self, ops: list, program=None):
        self.program = program
        self.order: list[tuple] = []  # every node, topologically sorted
        self.succ: dict[tuple, dict] = {}  # node -> {out-neighbour: None}, an ordered set
        self.producer: dict[tuple, tuple] = {}  # var node -> op key
        self.readers: dict[tuple, list] = {}  # var node -> op keys, program order
        self.inputs_of: dict[tuple, list] = {}  # op key -> var nodes read
        self.outputs_of: dict[tuple, list] = {}  # op key -> var nodes written
        self.latest: dict[str, tuple] = {}  # var name -> node of its last value
        for op in ops:
            self._add_op(op)

    def _add_node(self, node) -> None:
        self.order.append(node)
        self.succ[node] = {}

    def _add_edge(self, a, b) -> None:
        self.succ[a][b] = None

    def _add_op(self, op) -> None:
        key = op_key(op)
        reads = []
        names = op_reads(self.program, op)
        if sub_block_indices(op):
            # A skipped branch or a loop run zero times leaves its outputs as they were: their earlier values
            # pass through the op, so it reads them.
            names += [n for n in op_writes(self.program, op) if n in self.latest and n not in names]
        for name in names:
            node = self.latest.get(name)
            if node is None:  # a program input, a parameter, or a var read before anything writes it
                node = self.latest[name] = ("var", name, 0)
                self._add_node(node)
                self.readers[node] = []
            reads.append(node)
        self._add_node(key)
        for node in reads:
            self._add_edge(node, key)
            self.readers[node].append(key)
        writes = []
        for name in op_writes(self.program, op):
            previous = self.latest.get(name)
            node = ("var", name, previous[2] + 1 if previous else 0)
            if previous is not None:
                # The new value must not land before the old one is read, nor before the old write.
                for reader in self.readers[previous]:
                    if reader != key:
                        self._add_edge(reader, key)
                writer = self.producer.get(previous)
                if writer is not None and writer != key:
                    self._add_edge(writer, key)
            self._add_node(node)
            self._add_edge(key, node)
            self.producer[node] = key
            self.readers[node] = []
            self.latest[name] = node
            writes.append(node)
        self.inputs_of[key] = reads
        self.outputs_of[key] = writes


def _is_weight(program, name: str) -> bool:
    if name in program.params:
        return True
    try:
        var = program.var(name)
    except BridgeError:  # a name no block declares: treat as data, the loader already vetted the program
        return False
    return bool(var is not None and var.persistable)


def _describe(program, graph: _DependencyGraph, index: int, ops: list, block: int = 0,
              escaping: Callable[[str, set], bool] | None = None) -> Subgraph:
    """Classify the var names at a cluster's boundary (facts §4.4). `escaping(name, members)`: for a body's cluster
    (its ops' keys `members`), whether a value it writes may be read beyond the body's own data flow (_BodyReads):
    then it is an output, whoever reads it here."""
    members = {op_key(op) for op in ops}
    graph_outputs = {graph.latest[n] for n in program.outputs if n in graph.latest}
    inputs, outputs, weights, local, unused = set(), set(), set(), set(), set()
    for op in ops:
        key = op_key(op)
        for node in graph.inputs_of[key]:
            name = node[1]
            if _is_weight(program, name) and graph.producer.get(node) is None:
                weights.add(name)
            elif graph.producer.get(node) not in members:
                inputs.add(name)
        for node in graph.outputs_of[key]:
            name = node[1]
            readers = graph.readers[node]
            if (node in graph_outputs or any(r not in members for r in readers)
                    or (escaping is not None and escaping(name, members))):
                outputs.add(name)
            elif readers:
                local.add(name)
            else:
                unused.add(name)
    return Subgraph(index, list(ops), sorted(inputs), sorted(outputs), sorted(weights), sorted(local),
                    sorted(unused), block)


class _BodyReads:
    """What a value written in a loop or branch body may be read by beyond the body's own data flow: the next
    iteration of a loop (an op before the writer, reading the name), the block holding the loop or branch (a var the
    body does not declare: its loop vars and results), any op of another block. A body cluster hands out every such
    value (conservative: an extra output costs a copy, a missing one a wrong answer)."""

    def __init__(self, program, block: int):
        blocks = program.blocks
        self.declared = set(blocks[block].vars)
        self.read_elsewhere: set = set()
        self.readers_here: dict = {}  # name -> op keys of this block reading it (any version)
        for other in blocks:
            for op in other.ops:
                names = op_input_names(op)
                if other.idx != block:
                    self.read_elsewhere.update(names)
                else:
                    for name in names:
                        self.readers_here.setdefault(name, set()).add(op_key(op))

    def __call__(self, name: str, members: set) -> bool:
        return (name not in self.declared or name in self.read_elsewhere
                or bool(self.readers_here.get(name, set()) - members))


def _schedule(graph: _DependencyGraph, ops: list, unit_of: dict, units: dict) -> list:
    """Host ops and subgraphs in a topological order of the quotient graph, earliest first op first."""
    # Kahn's algorithm on the quotient graph, always taking the ready unit whose first op comes first (a
    # lexicographic topological sort; plain dicts and a heap, so a predictor start never imports networkx).
    # Units have distinct first positions, so the heap holds positions alone.
    first_position: dict = {}
    for i, op in enumerate(ops):
        first_position.setdefault(unit_of[op_key(op)], i)
    unit_at = {position: unit for unit, position in first_position.items()}
    successors: dict = {unit: set() for unit in first_position}
    indegree = dict.fromkeys(first_position, 0)
    for op in ops:
        key = op_key(op)
        unit = unit_of[key]
        for nxt in graph.succ[key]:
            targets = graph.readers[nxt] if nxt[0] == "var" else [nxt]
            for target in targets:
                other = unit_of[target]
                if other != unit and other not in successors[unit]:
                    successors[unit].add(other)
                    indegree[other] += 1
    ready = [position for unit, position in first_position.items() if not indegree[unit]]
    heapq.heapify(ready)
    order = []
    while ready:
        unit = unit_at[heapq.heappop(ready)]
        order.append(unit)
        for other in successors[unit]:
            indegree[other] -= 1
            if not indegree[other]:
                heapq.heappush(ready, first_position[other])
    if len(order) != len(first_position):
        stuck = [unit for unit, count in indegree.items() if count]
        raise PartitionError(f"subgraph detection produced a cycle between {stuck[:4]}; this is a bug in "
                             f"partition.detector, please report it with the model")
    return [units[unit] for unit in order]


def detect_subgraphs(program, is_supported: Callable[[object], bool], forced_op_keys: Collection = (),
                     min_subgraph_size: int = 1) -> PartitionResult:
    """Partition block 0 of `program` into device subgraphs and host ops, then the body of every loop and branch left
    on the host (module docstring): `bodies` of the result.

    `is_supported(op)` says whether an op can run on the selected devices; `forced_op_keys` are keys
    (`op_key(op)`, e.g. from `PartitionConfig.match`) of block-0 ops to keep on the host whatever the predicate
    says; clusters with fewer than `min_subgraph_size` ops go back to the host (numbering skips them).
    """
    if min_subgraph_size < 1:
        raise ValueError(f"min_subgraph_size must be >= 1, got {min_subgraph_size}")
    # A view of one subgraph's ops (the engine splitting it around declined ops) names their block.
    result = _partition_block(program, list(program.ops()), is_supported, frozenset(forced_op_keys),
                              min_subgraph_size, getattr(program, "block", 0))
    blocks = getattr(program, "blocks", None)
    if blocks is None:  # a view of some ops (a subgraph split around declined ops): no bodies
        return result
    roots = [idx for op in result.host_ops for idx in sub_block_indices(op)]
    following = len(result.subgraphs)
    for block in _nested_blocks(blocks, roots):
        if block == 0:
            continue
        body = _partition_block(program, list(blocks[block].ops), is_supported, frozenset(), min_subgraph_size,
                                block, following, _BodyReads(program, block))
        result.bodies[block] = body
        following += len(body.subgraphs)
    return result


def _partition_block(program, ops: list, is_supported: Callable[[object], bool], forced: frozenset,
                     min_subgraph_size: int, block: int = 0, first_index: int = 0,
                     escaping: _BodyReads | None = None) -> PartitionResult:
    """The PartitionResult of `ops` (of `block`); its subgraphs numbered from `first_index`. `escaping`: a body's
    values read beyond its own data flow (_describe)."""
    graph = _DependencyGraph(ops, program)

    marked = set()
    for op in ops:
        key = op_key(op)
        if (op.type in HOST_ONLY_OP_TYPES or key in forced or sub_block_indices(op)
                or not is_supported(op)):
            continue
        marked.add(key)
        marked.update(graph.outputs_of[key])  # so op -> var -> op chains can contract
    root_of = contract(graph.order, graph.succ, lambda node: True if node in marked else None)

    clusters: dict[tuple, list] = {}
    for op in ops:
        key = op_key(op)
        if key in marked:
            clusters.setdefault(root_of[key], []).append(op)  # dicts keep first-op order
    subgraphs: list[Subgraph] = []
    unit_of, units = {}, {}
    for members in clusters.values():
        if len(members) < min_subgraph_size:
            continue
        subgraph = _describe(program, graph, first_index + len(subgraphs), members, block, escaping)
        subgraphs.append(subgraph)
        units[("subgraph", subgraph.index)] = subgraph
        for op in members:
            unit_of[op_key(op)] = ("subgraph", subgraph.index)
    host_ops = [op for op in ops if op_key(op) not in unit_of]
    for op in host_ops:
        unit_of[op_key(op)] = op_key(op)
        units[op_key(op)] = op
    steps = _schedule(graph, ops, unit_of, units)
    return PartitionResult(ops, subgraphs, host_ops, forced, steps)
