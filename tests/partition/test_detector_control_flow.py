"""The edges the detector adds for what an op reads besides its input slots (partition/detector.py docstring): a
Variable-valued attribute, a loop or branch body's reads from block 0 (listed in the control-flow op's X / Input
slot or not, nested blocks included), and a control-flow op's outputs, which keep their values when a branch is
skipped. Each case is a small legacy program (written with zoo.write_program, read by the loader) where, without
the edge, the value would stay inside a subgraph, or two device ops would merge into one subgraph around a host op
that sits between them (a cycle: the subgraph would need the host op's result and the host op the subgraph's)."""
from __future__ import annotations

from devtools.zoo import write_program
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.loader.program import BlockRef, VarRef
from partition import Subgraph, detect_subgraphs
from partition.detector import op_reads, op_writes

F32 = {"dtype": "float32", "shape": [2]}


def _vars(*names, **specs):
    return [{"name": n, **specs.get(n, F32)} for n in names]


def _load(blocks, fetches):
    return load_model(model_bytes=write_program(None, blocks, feeds=["x"], fetches=fetches))


def _device_unless(*host_types):
    return lambda op: op.type not in host_types


def _unit_of(partition, out_name):
    for step in partition.steps():
        ops = step.ops if isinstance(step, Subgraph) else [step]
        if any(out_name in op.output_names() for op in ops):
            return step
    raise AssertionError(out_name)


def _loop_program(listed_reads):
    """v = relu(x) on a device; a while body reads v (listed in X or not) and writes u; w = u * v on a device."""
    block0 = {"vars": _vars("x", "v", "u", "w", "i", "limit", "flag", i={"dtype": "int64", "shape": [1]},
                            limit={"dtype": "int64", "shape": [1]}, flag={"dtype": "bool", "shape": [1]}),
              "ops": [
                  {"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["v"]}},
                  {"type": "fill_constant", "outputs": {"Out": ["i"]},
                   "attrs": {"shape": [1], "value": 0.0, "dtype": 3, "str_value": ""}},
                  {"type": "fill_constant", "outputs": {"Out": ["limit"]},
                   "attrs": {"shape": [1], "value": 2.0, "dtype": 3, "str_value": ""}},
                  {"type": "assign", "inputs": {"X": ["x"]}, "outputs": {"Out": ["u"]}},
                  {"type": "less_than", "inputs": {"X": ["i"], "Y": ["limit"]}, "outputs": {"Out": ["flag"]}},
                  {"type": "while", "inputs": {"X": listed_reads + ["u", "i", "limit"], "Condition": ["flag"]},
                   "outputs": {"Out": ["u", "i", "flag"], "StepScopes": []},
                   "attrs": {"sub_block": BlockRef(1), "is_test": True}},
                  {"type": "elementwise_mul", "inputs": {"X": ["u"], "Y": ["v"]}, "outputs": {"Out": ["w"]},
                   "attrs": {"axis": -1}},
              ]}
    body = {"parent_idx": 0, "vars": _vars("t"), "ops": [
        {"type": "elementwise_add", "inputs": {"X": ["u"], "Y": ["v"]}, "outputs": {"Out": ["t"]},
         "attrs": {"axis": -1}},
        {"type": "assign", "inputs": {"X": ["t"]}, "outputs": {"Out": ["u"]}},
        {"type": "increment", "inputs": {"X": ["i"]}, "outputs": {"Out": ["i"]}, "attrs": {"step": 1.0}},
        {"type": "less_than", "inputs": {"X": ["i"], "Y": ["limit"]}, "outputs": {"Out": ["flag"]}},
    ]}
    return _load([block0, body], ["w"])


def test_a_loop_body_read_missing_from_the_while_slot_is_exported():
    graph = _loop_program(listed_reads=[])
    loop = next(op for op in graph.ops() if op.type == "while")
    assert "v" not in loop.input_names() and "v" in op_reads(graph, loop)
    partition = detect_subgraphs(graph, _device_unless("while"))
    producer = _unit_of(partition, "v")
    assert isinstance(producer, Subgraph) and "v" in producer.output_names
    order = partition.steps()
    assert order.index(producer) < order.index(loop)


def test_the_loop_between_two_device_ops_splits_them():
    # relu (v) and elementwise_mul (w) are both on the device, but the while runs between them (it reads v and
    # writes u, which the mul reads): one subgraph around both would be a cycle.
    for listed in ([], ["v"]):
        graph = _loop_program(listed_reads=listed)
        partition = detect_subgraphs(graph, _device_unless("while"))
        assert _unit_of(partition, "v") is not _unit_of(partition, "w"), listed
        order = [s for s in partition.steps() if isinstance(s, Subgraph) or s.type == "while"]
        assert [getattr(s, "type", "subgraph") for s in order][-2:] == ["while", "subgraph"]


def test_an_attribute_read_between_two_device_ops_splits_them():
    # range (host) reads `end` only through its attribute; the device's `end` and the final add must not merge.
    block0 = {"vars": _vars("x", "end", "steps", "total", "as_float", "out",
                            end={"dtype": "int64", "shape": []}, steps={"dtype": "int64", "shape": [-1]},
                            total={"dtype": "int64", "shape": []}, as_float={"dtype": "float32", "shape": []}),
              "ops": [
                  {"type": "arg_max", "inputs": {"X": ["x"]}, "outputs": {"Out": ["end"]},
                   "attrs": {"axis": -1, "flatten": True, "keepdims": False, "dtype": 3}},
                  {"type": "range", "outputs": {"Out": ["steps"]},
                   "attrs": {"start": 0.0, "end": VarRef("end"), "step": 1.0, "dtype": 3}},
                  {"type": "reduce_sum", "inputs": {"X": ["steps"]}, "outputs": {"Out": ["total"]},
                   "attrs": {"dim": [0], "keep_dim": False, "reduce_all": True}},
                  {"type": "cast", "inputs": {"X": ["total"]}, "outputs": {"Out": ["as_float"]},
                   "attrs": {"in_dtype": 3, "out_dtype": 5}},
                  {"type": "elementwise_add", "inputs": {"X": ["x"], "Y": ["as_float"]}, "outputs": {"Out": ["out"]},
                   "attrs": {"axis": -1}},
              ]}
    graph = _load([block0], ["out"])
    partition = detect_subgraphs(graph, _device_unless("range"))
    first, last = _unit_of(partition, "end"), _unit_of(partition, "out")
    assert first is not last and "end" in first.output_names


def test_a_skipped_branch_keeps_the_value_a_device_gave_its_output():
    # o = relu(x) on a device; a conditional_block (host) may overwrite o; o is fetched. When the branch is
    # skipped, o is the device's value: the subgraph must hand it out although no slot of the op reads it.
    block0 = {"vars": _vars("x", "o", "flag", flag={"dtype": "bool", "shape": []}),
              "ops": [
                  {"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["o"]}},
                  {"type": "fill_constant", "outputs": {"Out": ["flag"]},
                   "attrs": {"shape": [], "value": 0.0, "dtype": 0, "str_value": ""}},
                  {"type": "conditional_block", "inputs": {"Cond": ["flag"], "Input": []},
                   "outputs": {"Out": ["o"], "Scope": []},
                   "attrs": {"sub_block": BlockRef(1), "is_scalar_condition": True}},
              ]}
    body = {"parent_idx": 0, "vars": [], "ops": [
        {"type": "scale", "inputs": {"X": ["x"]}, "outputs": {"Out": ["o"]}, "attrs": {"scale": 2.0}}]}
    graph = _load([block0, body], ["o"])
    branch = next(op for op in graph.ops() if op.type == "conditional_block")
    assert op_writes(graph, branch) == ["o"]
    partition = detect_subgraphs(graph, _device_unless("conditional_block"))
    relu = next(s for s in partition.subgraphs if any(op.type == "relu" for op in s.ops))
    assert "o" in relu.output_names


def test_a_read_in_a_nested_body_counts():
    # block 0: a conditional_block whose body (block 1) holds another conditional_block whose body (block 2)
    # reads v through reshape2's Shape slot and writes o; neither control-flow op lists v.
    block0 = {"vars": _vars("x", "v", "o", "flag", "shape", flag={"dtype": "bool", "shape": []},
                            shape={"dtype": "int32", "shape": [1]}),
              "ops": [
                  {"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["v"]}},
                  {"type": "shape", "inputs": {"Input": ["v"]}, "outputs": {"Out": ["shape"]}},
                  {"type": "assign", "inputs": {"X": ["x"]}, "outputs": {"Out": ["o"]}},
                  {"type": "fill_constant", "outputs": {"Out": ["flag"]},
                   "attrs": {"shape": [], "value": 1.0, "dtype": 0, "str_value": ""}},
                  {"type": "conditional_block", "inputs": {"Cond": ["flag"], "Input": []},
                   "outputs": {"Out": ["o"], "Scope": []},
                   "attrs": {"sub_block": BlockRef(1), "is_scalar_condition": True}},
              ]}
    outer = {"parent_idx": 0, "vars": [], "ops": [
        {"type": "conditional_block", "inputs": {"Cond": ["flag"], "Input": []}, "outputs": {"Out": ["o"], "Scope": []},
         "attrs": {"sub_block": BlockRef(2), "is_scalar_condition": True}}]}
    inner = {"parent_idx": 1, "vars": _vars("xs", xs={"dtype": "float32", "shape": [0, 2]}), "ops": [
        {"type": "reshape2", "inputs": {"X": ["x"], "Shape": ["shape"]}, "outputs": {"Out": ["o"], "XShape": ["xs"]},
         "attrs": {"shape": [-1]}}]}
    graph = _load([block0, outer, inner], ["o"])
    branch = next(op for op in graph.ops() if op.type == "conditional_block")
    assert "shape" not in branch.input_names() and {"x", "shape", "flag"} <= set(op_reads(graph, branch))
    assert op_writes(graph, branch) == ["o"]
    partition = detect_subgraphs(graph, _device_unless("conditional_block"))
    for name in ("shape", "o"):  # o: the value a skipped branch keeps
        device = _unit_of(partition, name)
        assert isinstance(device, Subgraph) and name in device.output_names, (name, device)
