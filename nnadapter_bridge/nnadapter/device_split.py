"""Splitting one NNAdapter Model across the devices of a context (facts §4.7 and §6.3).

1. `assign_devices`: each operation goes to the first device (context order) that supports it.
2. `cluster_operations`: Paddle Lite's contraction (nnadapter.contraction) over the operation graph,
   merging operations of the same device. The result is acyclic, and every path between two
   operations of one cluster stays in it.
3. `build_submodels`: one submodel per cluster, operands copied shallowly (constant arrays shared),
   inputs/outputs numbered as in NNAdapter: -k-1 for the whole model's input/output k, 0,1,2,... for
   buffers shared between submodels, allocated in order of first encounter.

Submodel order: clusters in order of their first operation in topological order (Lite's rule), except
that a cluster never runs before one it reads from: the order is a topological sort of the cluster
graph that picks, among the ready clusters, the one that appears first. Everything is deterministic.

A model output that another submodel also reads is listed twice among its producer's outputs: once as
model output (-k-1), once as a shared buffer, so the .nnc indexes can describe it.

Entry point: `partition_model` (Compilation.finish calls it for a context of several devices). Imports
the standard's model and types only; networkx only when clusters of several devices must be ordered.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import Lifetime, ResultCode
from nnadapter_bridge.nnadapter.contraction import contract
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import Operand, Operation


def assign_devices(model: Model, supported: Sequence[Sequence[bool]], device_names: Sequence[str]) -> list:
    """Device index per operation (model.operations order): the first device whose flag is true."""
    assignment = []
    for i, op in enumerate(model.operations):
        for device_index, flags in enumerate(supported):
            if flags[i]:
                assignment.append(device_index)
                break
        else:
            raise NNAdapterError(f"none of these {len(device_names)} devices ({', '.join(device_names)}) "
                                 f"supports {op.label()}", ResultCode.FEATURE_NOT_SUPPORTED)
    return assignment


def _operation_successors(order: list) -> dict:
    """id(operation) -> ids of the operations reading its outputs (ordered, duplicate-free)."""
    producers = {}
    for op in order:
        for o in op.outputs:
            if o is not None:
                producers[o.index] = op
    successors: dict[int, dict[int, None]] = {id(op): {} for op in order}
    for op in order:
        for o in op.inputs:
            if o is None or o.is_constant:
                continue
            producer = producers.get(o.index)
            if producer is not None and producer is not op:
                successors[id(producer)][id(op)] = None
    return successors


def cluster_operations(model: Model, assignment: Sequence[int]) -> list:
    """[(device_index, [operations in topological order])] with no cycle between clusters."""
    order = model.topological_operations()
    position = {id(op): k for k, op in enumerate(order)}
    list_position = {id(op): i for i, op in enumerate(model.operations)}
    device_of = {id(op): assignment[list_position[id(op)]] for op in order}
    successors = _operation_successors(order)
    root_of = contract([id(op) for op in order], successors, device_of.__getitem__)
    clusters: dict = {}
    for op in order:
        clusters.setdefault(root_of[id(op)], []).append(op)
    return _order_clusters(successors, position, clusters, device_of)


def _order_clusters(successors: dict, position: dict, clusters: dict, device_of: dict) -> list:
    """The clusters in a topological order of the cluster graph, the earliest first operation first."""
    if len(clusters) == 1:  # the common case: one device; no graph to order
        ((root, ops),) = clusters.items()
        return [(device_of[root], ops)]
    # Imported here: the runtime imports this module on every start, and networkx costs ~40 ms to import.
    import networkx as nx

    root_of = {id(op): root for root, ops in clusters.items() for op in ops}
    first = {root: position[id(ops[0])] for root, ops in clusters.items()}
    cluster_graph: nx.DiGraph[int] = nx.DiGraph()
    cluster_graph.add_nodes_from(clusters)
    for node, targets in successors.items():
        for target in targets:
            if root_of[node] != root_of[target]:
                cluster_graph.add_edge(root_of[node], root_of[target])
    try:
        roots = list(nx.lexicographical_topological_sort(cluster_graph, key=first.__getitem__))
    except nx.NetworkXUnfeasible:  # cannot happen when the contraction is correct
        raise NNAdapterError("partitioning produced a cycle between submodels",
                             ResultCode.DEVICE_INTERNAL_ERROR) from None
    return [(device_of[root], clusters[root]) for root in roots]


@dataclasses.dataclass
class Submodel:
    device_index: int
    model: Model
    input_indexes: list
    output_indexes: list


def build_submodels(model: Model, clusters: Sequence) -> list:
    """One finished Model per cluster with NNAdapter's I/O index convention (see module docstring)."""
    cluster_of = {id(op): k for k, (_, ops) in enumerate(clusters) for op in ops}
    consumers: dict = {}
    for op in model.operations:
        for o in op.inputs:
            if o is not None:
                consumers.setdefault(o.index, []).append(op)
    model_inputs = {o.index: k for k, o in enumerate(model.input_operands)}
    model_outputs = {o.index: k for k, o in enumerate(model.output_operands)}
    shared: dict = {}

    def shared_index(operand: Operand) -> int:
        if operand.index not in shared:
            shared[operand.index] = len(shared)
        return shared[operand.index]

    submodels = []
    for k, (device_index, ops) in enumerate(clusters):
        sub = Model()
        copies: dict = {}

        def copy_of(operand, sub=sub, copies=copies):  # bound: the loop rebinds both
            if operand is None:
                return None
            if operand.index not in copies:
                clone = Operand(operand.type.copy(), operand.value, operand.name, len(sub.operands))
                sub.operands.append(clone)
                copies[operand.index] = clone
            return copies[operand.index]

        produced_here = {o.index for op in ops for o in op.outputs if o is not None}
        inputs, input_indexes = [], []
        for op in ops:
            for o in op.inputs:
                if o is None or o.is_constant or o.index in produced_here or o.index in copies:
                    continue
                clone = copy_of(o)
                clone.type.lifetime = Lifetime.MODEL_INPUT
                inputs.append(clone)
                input_indexes.append(-model_inputs[o.index] - 1 if o.index in model_inputs else shared_index(o))
        outputs, output_indexes = [], []
        for op in ops:
            for o in op.outputs:
                if o is None:
                    continue
                read_outside = any(cluster_of.get(id(c)) != k for c in consumers.get(o.index, ()))
                if o.index in model_outputs:
                    outputs.append(copy_of(o))
                    output_indexes.append(-model_outputs[o.index] - 1)
                if read_outside:
                    outputs.append(copy_of(o))
                    output_indexes.append(shared_index(o))
                if o.index in model_outputs or read_outside:
                    copies[o.index].type.lifetime = Lifetime.MODEL_OUTPUT
        for op in ops:
            sub.operations.append(Operation(op.type, [copy_of(o) for o in op.inputs],
                                            [copy_of(o) for o in op.outputs], len(sub.operations)))
        sub.input_operands = inputs
        sub.output_operands = outputs
        sub.finished = True
        submodels.append(Submodel(device_index, sub, input_indexes, output_indexes))
    return submodels


def partition_model(model: Model, supported: Sequence[Sequence[bool]], device_names: Sequence[str]) -> list:
    """assign_devices + cluster_operations + build_submodels."""
    assignment = assign_devices(model, supported, device_names)
    return build_submodels(model, cluster_operations(model, assignment))
