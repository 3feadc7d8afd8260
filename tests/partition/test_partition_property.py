"""Property: whatever ops the devices take, a partitioned program computes what the whole program computes on
the host. Random legacy programs (written with devtools.zoo.write_program, read back by the loader) hold
attribute tensors (a reshape target from a `shape` op's ShapeTensor-style `Shape` slot, a `range` whose `end` is a
Variable-valued attribute computed from the data) and control flow (`conditional_block`, `while`, one nested in the
other) whose bodies read block-0 values, directly and through attributes, that the control-flow op's X / Input slot
does not always list (PIR's translation leaves out what a body reads through an attribute). Each program is
partitioned under a random support set and run as the predictor runs it: host ops on one scope, each subgraph on
a scope of its own that sees only its input vars and weights and hands back only its output vars (what a device
program sees). A var the partition graph misses is then a missing value or a stale one.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devtools.zoo import write_combined_params, write_program
from nnadapter_bridge.host.executor import HostExecutor
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.loader.program import BlockRef, VarRef
from partition import Subgraph, detect_subgraphs, op_key

SHAPE = [2, 3]
FP32, INT64, BOOL = 5, 3, 0


class _ProgramDraft:
    """Blocks under construction: ops and var declarations per block, fresh names."""

    def __init__(self, draw):
        self.draw = draw
        self.blocks = [{"vars": [], "ops": []}]
        self.count = 0

    def new_block(self, parent: int) -> int:
        self.blocks.append({"vars": [], "ops": [], "parent_idx": parent})
        return len(self.blocks) - 1

    def var(self, block: int, dtype="float32", shape=SHAPE, prefix="v") -> str:
        self.count += 1
        name = f"{prefix}_{self.count}"
        self.blocks[block]["vars"].append({"name": name, "dtype": dtype, "shape": list(shape)})
        return name

    def op(self, block: int, op_type: str, inputs: dict, outputs: dict, **attrs) -> None:
        self.blocks[block]["ops"].append({"type": op_type, "inputs": inputs, "outputs": outputs, "attrs": attrs})

    def pick(self, names: list) -> str:
        # Mostly a computed var (x and w are always at hand, in every scope): what the partition can lose.
        computed = [n for n in names if n not in ("x", "w")]
        return self.draw(st.sampled_from(computed if computed and self.draw(st.integers(0, 3)) else names))

    # -- one random computation, written into `block`, reading `visible` float vars; returns its result -------
    def computation(self, block: int, visible: list, depth: int) -> str:
        kinds = ["unary", "binary", "reshape_by_shape", "range_end_attr"]
        if depth < 2:
            kinds += ["cond", "while"] * (2 - depth)
        kind = self.draw(st.sampled_from(kinds))
        return getattr(self, "_" + kind)(block, visible, depth)

    def _unary(self, block, visible, depth):
        out = self.var(block)
        op_type = self.draw(st.sampled_from(["relu", "tanh", "scale"]))
        attrs = {"scale": 0.5, "bias": 0.25, "bias_after_scale": True} if op_type == "scale" else {}
        self.op(block, op_type, {"X": [self.pick(visible)]}, {"Out": [out]}, **attrs)
        return out

    def _binary(self, block, visible, depth):
        out = self.var(block)
        op_type = self.draw(st.sampled_from(["elementwise_add", "elementwise_sub", "elementwise_mul"]))
        self.op(block, op_type, {"X": [self.pick(visible)], "Y": [self.pick(visible)]}, {"Out": [out]}, axis=-1)
        return out

    def _reshape_by_shape(self, block, visible, depth):
        # The target shape is a tensor another op computes (reshape2's Shape slot).
        shape = self.var(block, "int32", [2], "shape")
        self.op(block, "shape", {"Input": [self.pick(visible)]}, {"Out": [shape]})
        out, xshape = self.var(block), self.var(block, "float32", [0] + SHAPE, "xshape")
        self.op(block, "reshape2", {"X": [self.pick(visible)], "Shape": [shape]}, {"Out": [out], "XShape": [xshape]},
                shape=[-1, SHAPE[1]])
        return out

    def _range_end_attr(self, block, visible, depth):
        # range's end is a Variable-valued attribute computed from the data (1 + the flat argmax: 1..6).
        index = self.var(block, "int64", [], "argmax")
        self.op(block, "arg_max", {"X": [self.pick(visible)]}, {"Out": [index]}, axis=-1, flatten=True,
                keepdims=False, dtype=INT64)
        end = self.var(block, "int64", [], "end")
        self.op(block, "increment", {"X": [index]}, {"Out": [end]}, step=1.0)
        steps = self.var(block, "int64", [-1], "range")
        self.op(block, "range", {}, {"Out": [steps]}, start=0.0, end=VarRef(end), step=1.0, dtype=INT64)
        total = self.var(block, "int64", [], "sum")
        self.op(block, "reduce_sum", {"X": [steps]}, {"Out": [total]}, dim=[0], keep_dim=False, reduce_all=True)
        as_float = self.var(block, "float32", [], "cast")
        self.op(block, "cast", {"X": [total]}, {"Out": [as_float]}, in_dtype=INT64, out_dtype=FP32)
        out = self.var(block)
        self.op(block, "elementwise_add", {"X": [self.pick(visible)], "Y": [as_float]}, {"Out": [out]}, axis=-1)
        return out

    def _body(self, body: int, visible: list, depth: int) -> str:
        local = list(visible)
        for _ in range(self.draw(st.integers(1, 3))):
            local.append(self.computation(body, local, depth + 1))
        return local[-1]

    def _cond(self, block, visible, depth):
        mean = self.var(block, "float32", [], "mean")
        self.op(block, "reduce_mean", {"X": [self.pick(visible)]}, {"Out": [mean]}, dim=[0], keep_dim=False,
                reduce_all=True)
        zero = self.var(block, "float32", [], "zero")
        self.op(block, "fill_constant", {}, {"Out": [zero]}, shape=[], value=0.0, dtype=FP32, str_value="")
        flag = self.var(block, "bool", [], "flag")
        self.op(block, "greater_than", {"X": [mean], "Y": [zero]}, {"Out": [flag]}, axis=-1)
        out = self.var(block)
        self.op(block, "assign", {"X": [self.pick(visible)]}, {"Out": [out]})  # the value when the branch is skipped
        body = self.new_block(block)
        result = self._body(body, visible, depth)
        self.op(body, "assign", {"X": [result]}, {"Out": [out]})
        listed = self.draw(st.lists(st.sampled_from(visible), unique=True, max_size=len(visible)))
        self.op(block, "conditional_block", {"Cond": [flag], "Input": listed}, {"Out": [out], "Scope": []},
                sub_block=BlockRef(body), is_scalar_condition=True)
        return out

    def _while(self, block, visible, depth):
        counter = self.var(block, "int64", [1], "i")
        self.op(block, "fill_constant", {}, {"Out": [counter]}, shape=[1], value=0.0, dtype=INT64, str_value="")
        limit = self.var(block, "int64", [1], "limit")
        self.op(block, "fill_constant", {}, {"Out": [limit]}, shape=[1], value=float(self.draw(st.integers(1, 3))),
                dtype=INT64, str_value="")
        carried = self.var(block)
        self.op(block, "assign", {"X": [self.pick(visible)]}, {"Out": [carried]})
        flag = self.var(block, "bool", [1], "loop")
        self.op(block, "less_than", {"X": [counter], "Y": [limit]}, {"Out": [flag]}, axis=-1)
        body = self.new_block(block)
        result = self._body(body, visible + [carried], depth)
        bounded = self.var(body)
        self.op(body, "tanh", {"X": [result]}, {"Out": [bounded]})  # no overflow however many steps
        self.op(body, "assign", {"X": [bounded]}, {"Out": [carried]})
        self.op(body, "increment", {"X": [counter]}, {"Out": [counter]}, step=1.0)
        self.op(body, "less_than", {"X": [counter], "Y": [limit]}, {"Out": [flag]}, axis=-1)
        listed = self.draw(st.lists(st.sampled_from(visible + [carried]), unique=True))
        self.op(block, "while", {"X": listed + [counter, limit], "Condition": [flag]},
                {"Out": [carried, counter, flag], "StepScopes": []}, sub_block=BlockRef(body), is_test=True)
        return carried


@st.composite
def programs(draw):
    """(model bytes, params bytes, feeds): a random program with a feed `x` and a weight `w`."""
    draft = _ProgramDraft(draw)
    draft.blocks[0]["vars"] += [{"name": "x", "dtype": "float32", "shape": SHAPE},
                                {"name": "w", "dtype": "float32", "shape": SHAPE, "persistable": True}]
    visible = ["x", "w"]
    for _ in range(draw(st.integers(2, 6))):
        visible.append(draft.computation(0, visible, 0))
    fetches = [visible[-1]] + draw(st.lists(st.sampled_from(visible[2:-1]), unique=True, max_size=2)) \
        if len(visible) > 3 else [visible[-1]]
    model = write_program(None, draft.blocks, feeds=["x"], fetches=fetches)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    params = write_combined_params(None, {"w": rng.standard_normal(SHAPE).astype(np.float32)})
    return model, params, {"x": rng.standard_normal(SHAPE).astype(np.float32)}


def _block_ops(graph):
    return [op for op in graph.ops() if op.type not in ("feed", "fetch")]


def _run_whole(graph, feeds) -> dict:
    host = HostExecutor(graph)
    scope = {**graph.params, **feeds}
    for op in _block_ops(graph):
        host.run(op, scope)
    return scope


def _run_partitioned(graph, partition, feeds) -> dict:
    host = HostExecutor(graph)
    scope = {**graph.params, **feeds}
    for step in partition.steps():
        if isinstance(step, Subgraph):
            # What a device program gets: its input vars and weights, nothing else; what it gives back: its outputs.
            missing = [n for n in step.input_names if n not in scope]
            assert not missing, f"subgraph {step.index} reads {missing}, which nothing before it produced"
            own = {n: scope[n] for n in step.input_names}
            own.update({n: graph.params[n] for n in step.weight_names})
            for op in step.ops:
                host.run(op, own)
            for name in step.output_names:
                scope[name] = own[name]
        elif step.type not in ("feed", "fetch"):
            host.run(step, scope)
    return scope


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs(), data=st.data())
def test_partitioned_program_matches_the_whole_program_on_the_host(program, data):
    model, params, feeds = program
    graph = load_model(model_bytes=model, params_bytes=params)
    ops = _block_ops(graph)
    taken = data.draw(st.lists(st.integers(0, 3), min_size=len(ops), max_size=len(ops)), label="device ops")
    supported = {op_key(op) for op, roll in zip(ops, taken) if roll}  # about 3 ops in 4 on a device
    min_size = data.draw(st.integers(1, 2), label="min_subgraph_size")
    partition = detect_subgraphs(graph, lambda op: op_key(op) in supported, min_subgraph_size=min_size)
    want = _run_whole(graph, feeds)
    got = _run_partitioned(graph, partition, feeds)
    for name in graph.outputs:
        assert name in got, f"{name} is not produced by the partitioned run"
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs(), data=st.data())
def test_the_predictor_on_a_device_matches_the_whole_program_on_the_host(program, data):
    """The same programs through the predictor on builtin_device, the ops a partition config forces to the host
    drawn at random (the real engines, boundary copies and host fallbacks instead of the simulation above)."""
    import warnings

    import nnadapter_bridge as nb
    from partition.config import config_line

    model, params, feeds = program
    graph = load_model(model_bytes=model, params_bytes=params)
    ops = _block_ops(graph)
    forced = data.draw(st.lists(st.booleans(), min_size=len(ops), max_size=len(ops)), label="forced to the host")
    lines = [config_line(op.type, [], op.output_names()) for op, force in zip(ops, forced) if force]
    config = nb.Config()
    config.set_model_buffer(model, params)
    config.set_nnadapter_device_names(["builtin_device"])
    config.set_nnadapter_subgraph_partition_config_buffer("\n".join(line for line in lines if line))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the host share of these small programs is large on purpose
        predictor = nb.create_predictor(config)
        predictor.get_input_by_name("x").from_numpy(feeds["x"])
        predictor.run()
    want = _run_whole(graph, feeds)
    for k, name in enumerate(predictor.get_output_names()):
        np.testing.assert_allclose(predictor.get_output(k).numpy(), want[name], rtol=1e-6, atol=1e-6, err_msg=name)
