"""HostExecutor: the converter path on builtin_device against Paddle, plan caching, the choice between
converter and host kernel, the frozen-constant retry, and `unsupported_op_types`.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from devtools.zoo import write_program
from nnadapter_bridge.errors import UnsupportedOpError
from nnadapter_bridge.host import HOST_KERNELS, HostExecutor
from nnadapter_bridge.host.executor import PATH_CONVERTER, PATH_FROZEN, PATH_HOST_KERNEL, HostExecutionError
from nnadapter_bridge.loader import load_model
from support.converter_harness import opdesc_program, static_program
from support.tolerances import assert_op_close

RNG = np.random.default_rng(11)


def load(saved):
    graph = load_model(saved.model_path, saved.params_path)
    return graph, HostExecutor(graph), {**graph.params, **saved.feeds}


def compute_ops(graph):
    return [op for op in graph.ops() if op.type not in ("feed", "fetch")]


def test_converter_path_matches_paddle(tmp_path):
    """conv2d + relu + elementwise ops: each runs converted alone on builtin_device, equal to Paddle."""
    def build(x):
        import paddle

        conv = paddle.nn.Conv2D(3, 4, 3, padding=1)
        return paddle.nn.functional.relu(conv(x)) * 0.5 + 1.0

    saved = static_program(tmp_path, build, {"x": RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)})
    graph, executor, scope = load(saved)
    ops = compute_ops(graph)
    assert {"conv2d", "relu"} <= {op.type for op in ops}
    for op in ops:
        executor.run(op, scope)
        assert executor.plan_for(op, scope).path == PATH_CONVERTER, op.label()
    # rtol 1e-5 (not 6e-7): conv accumulates 27 products in a different order than Paddle's im2col GEMM
    assert_op_close(scope[graph.outputs[0]], saved.outputs[0], rtol=1e-5)


def test_plan_is_cached_per_shape_signature(tmp_path):
    saved = opdesc_program(tmp_path, "relu", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           feeds={"x": RNG.standard_normal((3, 4)).astype(np.float32)})
    graph, executor, scope = load(saved)
    (op,) = compute_ops(graph)
    executor.run(op, scope)
    first = executor.plan_for(op, scope)
    assert (executor.plans_built, executor.plan_hits) == (1, 0)
    scope["x"] = RNG.standard_normal((3, 4)).astype(np.float32)  # same shape, new values: plan reused
    executor.run(op, scope)
    assert (executor.plans_built, executor.plan_hits) == (1, 1)
    assert executor.plan_for(op, scope) is first and first.runs == 2
    np.testing.assert_array_equal(scope["out"], np.maximum(scope["x"], 0))
    scope["x"] = RNG.standard_normal((5, 2)).astype(np.float32)  # new shape: a new plan
    executor.run(op, scope)
    assert (executor.plans_built, executor.plan_hits) == (2, 1)
    assert scope["out"].shape == (5, 2)
    scope["x"] = RNG.standard_normal((3, 4)).astype(np.float32)  # back to the first shape: its plan again
    executor.run(op, scope)
    assert (executor.plans_built, executor.plan_hits) == (2, 2) and first.runs == 3


@pytest.mark.parametrize("op_type", ["less_than", "logical_and"])
def test_converter_preferred_over_host_kernel(tmp_path, op_type):
    assert op_type in HOST_KERNELS
    if op_type == "less_than":
        feeds = {"x": RNG.standard_normal((4,)).astype(np.float32), "y": RNG.standard_normal((4,)).astype(np.float32)}
    else:
        feeds = {"x": RNG.random(4) > 0.5, "y": RNG.random(4) > 0.5}
    saved = opdesc_program(tmp_path, op_type, inputs={"X": ["x"], "Y": ["y"]}, outputs={"Out": ["out"]},
                           feeds=feeds, extra_vars=[{"name": "out", "dtype": "bool", "shape": [4]}])
    graph, executor, scope = load(saved)
    (op,) = compute_ops(graph)
    executor.run(op, scope)
    assert executor.plan_for(op, scope).path == PATH_CONVERTER
    assert_op_close(scope["out"], saved.outputs[0])


def test_host_kernel_when_no_converter(tmp_path):
    saved = opdesc_program(tmp_path, "erf", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           feeds={"x": RNG.standard_normal((6,)).astype(np.float32)})
    graph, executor, scope = load(saved)
    (op,) = compute_ops(graph)
    executor.run(op, scope)
    plan = executor.plan_for(op, scope)
    assert plan.path == PATH_HOST_KERNEL and plan.reason == "no converter"
    assert_op_close(scope["out"], saved.outputs[0])


def test_runtime_tensor_is_frozen_for_a_converter_needing_constants(tmp_path):
    """split's AxisTensor computed at run time: the converter refuses it as a model input (SPLIT takes its axis as a
    constant), so the op is converted with its inputs as constants, once per distinct value."""
    feeds = {"x": RNG.standard_normal((7, 7)).astype(np.float32), "axis": np.array([1], np.int32)}
    saved = opdesc_program(tmp_path, "split", inputs={"X": ["x"], "AxisTensor": ["axis"]},
                           outputs={"Out": ["a", "b"]}, attrs={"axis": 0, "num": 0, "sections": [3, 4]},
                           feeds=feeds)
    graph, executor, scope = load(saved)
    (op,) = compute_ops(graph)
    executor.run(op, scope)
    plan = executor.plan_for(op, scope)
    assert plan.path == PATH_FROZEN
    for name, want in zip(("a", "b"), saved.outputs):
        assert_op_close(scope[name], want, atol=0.0)
    scope["axis"] = np.array([0], np.int32)
    executor.run(op, scope)
    assert scope["a"].shape == (3, 7) and scope["b"].shape == (4, 7)
    np.testing.assert_array_equal(np.concatenate([scope["a"], scope["b"]], axis=0), scope["x"])
    assert len(plan.frozen) == 2 and executor.plans_built == 1


def _program_with_made_up_ops(path):
    from nnadapter_bridge.loader.program import BlockRef

    write_program(path, [
        {"vars": [{"name": "x", "dtype": "float32", "shape": [2]}, {"name": "c", "dtype": "bool", "shape": [1]},
                  {"name": "y", "dtype": "float32", "shape": [2]}, {"name": "z", "dtype": "float32", "shape": [2]}],
         "ops": [{"type": "my_made_up_op", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]}},
                 {"type": "relu", "inputs": {"X": ["y"]}, "outputs": {"Out": ["z"]}},
                 {"type": "conditional_block", "inputs": {"Cond": ["c"], "Input": ["z"]},
                  "outputs": {"Out": ["z"]}, "attrs": {"sub_block": BlockRef(1), "is_scalar_condition": True}}]},
        {"parent_idx": 0, "vars": [],
         "ops": [{"type": "another_made_up_op", "inputs": {"X": ["z"]}, "outputs": {"Out": ["z"]}},
                 {"type": "my_made_up_op", "inputs": {"X": ["z"]}, "outputs": {"Out": ["z"]}}]}],
        feeds=["x", "c"], fetches=["z"])


def test_unsupported_op_types_lists_made_up_ops_in_sub_blocks(tmp_path):
    path = os.path.join(tmp_path, "__model__")
    _program_with_made_up_ops(path)
    graph = load_model(path)
    executor = HostExecutor(graph)
    assert executor.unsupported_op_types(graph.ops()) == ["another_made_up_op", "my_made_up_op"]
    assert executor.unsupported_op_types([op for op in graph.ops() if op.type == "relu"]) == []
    made_up = next(op for op in graph.ops() if op.type == "my_made_up_op")
    assert not executor.can_run(made_up)
    with pytest.raises(UnsupportedOpError, match="my_made_up_op"):
        executor.run(made_up, {"x": np.zeros(2, np.float32)})


def test_missing_input_names_the_op_and_var(tmp_path):
    saved = opdesc_program(tmp_path, "erf", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           feeds={"x": np.zeros((2,), np.float32)}, run_paddle=False)
    graph, executor, _ = load(saved)
    (op,) = compute_ops(graph)
    with pytest.raises(Exception, match=r"erf#\d+.*'x'"):
        executor.run(op, {})


def test_feed_is_not_the_executors(tmp_path):
    saved = opdesc_program(tmp_path, "relu", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           feeds={"x": np.zeros((2,), np.float32)}, run_paddle=False)
    graph, executor, scope = load(saved)
    feed = next(op for op in graph.ops() if op.type == "feed")
    with pytest.raises(HostExecutionError, match="feed"):
        executor.run(feed, scope)


def test_duplicate_host_kernel_fails():
    from nnadapter_bridge.host import host_kernel

    with pytest.raises(ValueError, match="registered twice"):
        host_kernel("erf")(lambda io: None)


def test_a_wider_integer_than_declared_is_kept(tmp_path):
    """paddle 2.6.2 declares kthvalue's Indices with X's dtype (int32 for an int32 X) and the `scale`
    save_inference_model appends after it likewise, while Paddle's kernels write int64 and follow the dtype they are
    given: a converted op's int64 result is not narrowed to the int32 its var declares (it was, so those outputs came
    out int32 where Paddle's are int64)."""
    feeds = {"x": np.array([3, -7, 2**40], np.int64)}
    saved = opdesc_program(tmp_path, "scale", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"scale": 1.0, "bias": 0.0, "bias_after_scale": True}, feeds=feeds,
                           extra_vars=[{"name": "out", "dtype": "int32", "shape": [3]}])
    assert saved.outputs[0].dtype == np.int64  # Paddle's own answer: the run-time dtype
    graph, executor, scope = load(saved)
    (op,) = compute_ops(graph)
    executor.run(op, scope)
    assert scope["out"].dtype == np.int64
    np.testing.assert_array_equal(scope["out"], saved.outputs[0])
