"""Small hand-built programs for the partition tests, without paddle.

`op(...)` makes a real loader OpInfo; `real_program(ops, params)` wraps them in the loader's own
ProgramGraph; `FakeProgram` implements the same interface from a name-keyed networkx graph whose nodes
are inserted in a caller-chosen order, so tests can check the detector does not depend on it.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from nnadapter_bridge.loader.graph import ProgramGraph
from nnadapter_bridge.loader.program import BlockInfo, OpInfo, VarInfo

LOD_TENSOR = 7
FEED_MINIBATCH = 9
FETCH_LIST = 10
FP32 = 5


def op(index: int, op_type: str, inputs, outputs, **attrs) -> OpInfo:
    """An OpInfo; `inputs`/`outputs` are a {slot: [names]} dict or a name list (slot X / Out)."""
    if not isinstance(inputs, dict):
        inputs = {"X": list(inputs)} if inputs else {}
    if not isinstance(outputs, dict):
        outputs = {"Out": list(outputs)} if outputs else {}
    return OpInfo(op_type, index, 0, inputs, outputs, dict(attrs), {})


def chain_ops(specs):
    """OpInfos numbered in list order from (type, inputs, outputs[, attrs]) tuples."""
    return [op(i, spec[0], spec[1], spec[2], **(spec[3] if len(spec) > 3 else {})) for i, spec in enumerate(specs)]


def _vars_of(ops, params) -> dict:
    found = {}
    for o in ops:
        for name in o.input_names() + o.output_names():
            if name in found:
                continue
            kind = {"feed": FEED_MINIBATCH, "fetch": FETCH_LIST}.get(name, LOD_TENSOR)
            tensor = kind == LOD_TENSOR
            found[name] = VarInfo(name, kind, np.dtype("float32") if tensor else None, FP32 if tensor else None,
                                  (1,) if tensor else (), name in params or not tensor, 0, False,
                                  is_parameter=name in params)
    return found


def params_for(names) -> dict:
    return {name: np.zeros((1,), np.float32) for name in names}


def real_program(ops, params=()) -> ProgramGraph:
    """The loader's ProgramGraph over `ops` (block 0 only), `params` names becoming persistable params."""
    params = params_for(params) if not isinstance(params, dict) else params
    block = BlockInfo(0, -1, -1, list(ops), _vars_of(ops, params))
    return ProgramGraph(None, [block], params, "test", None, None)


class FakeProgram:
    """The ProgramGraph interface for SSA programs, with graph nodes inserted in the order given."""

    def __init__(self, ops, params=(), insertion_order=None):
        self.params = params_for(params) if not isinstance(params, dict) else params
        self._vars = _vars_of(ops, self.params)
        self.inputs = [n for o in sorted(ops, key=lambda o: o.index) if o.type == "feed" for n in o.output_names()]
        self.outputs = [n for o in sorted(ops, key=lambda o: o.index) if o.type == "fetch" for n in o.input_names()]
        self.blocks = []
        order = list(ops) if insertion_order is None else [ops[i] for i in insertion_order]
        g = nx.DiGraph()
        for o in order:
            g.add_node(("op", o.index), op=o)
            for name in o.input_names():
                g.add_node(("var", name), var=self._vars[name])
                g.add_edge(("var", name), ("op", o.index))
            for name in o.output_names():
                g.add_node(("var", name), var=self._vars[name])
                g.add_edge(("op", o.index), ("var", name))
        self.graph = g

    def ops(self, block=0):
        def key(node):
            # Vars first, so an op is ready as soon as its inputs exist; ready ops then go by index.
            return (1, node[1], "") if node[0] == "op" else (0, -1, node[1])
        return [self.graph.nodes[n]["op"] for n in nx.lexicographical_topological_sort(self.graph, key=key)
                if n[0] == "op"]

    def var(self, name, block=0):
        return self._vars[name]

    def producer(self, name, block=0):
        preds = list(self.graph.predecessors(("var", name)))
        return self.graph.nodes[preds[0]]["op"] if preds else None

    def consumers(self, name, block=0):
        return sorted((self.graph.nodes[n]["op"] for n in self.graph.successors(("var", name))),
                      key=lambda o: o.index)
