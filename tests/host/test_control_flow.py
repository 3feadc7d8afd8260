"""Control flow through HostExecutor: programs with `while` (paddle.static.nn.while_loop), `conditional_block`
+ `select_input` (paddle.static.nn.cond) and tensor arrays, built in paddle's legacy static mode, saved,
loaded with our loader, every op of block 0 run in order against one scope, compared with Paddle.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

from nnadapter_bridge.host import HostExecutor
from nnadapter_bridge.loader import load_model
from support.converter_harness import static_program
from support.tolerances import assert_op_close

RNG = np.random.default_rng(23)


@contextlib.contextmanager
def legacy_logical_not():
    """paddle 3.3.1's cond() calls paddle.logical_not, which refuses legacy-mode Variables ("must be Value");
    append the plain `logical_not` OpDesc instead, which Paddle's legacy executor runs."""
    import paddle
    from paddle.base.layer_helper import LayerHelper

    def logical_not(x, out=None, name=None):
        helper = LayerHelper("logical_not")
        result = helper.create_variable_for_type_inference(dtype="bool")
        helper.append_op(type="logical_not", inputs={"X": [x]}, outputs={"Out": [result]})
        return result

    original = paddle.logical_not
    paddle.logical_not = logical_not
    try:
        yield
    finally:
        paddle.logical_not = original


def run_program(saved):
    graph = load_model(saved.model_path, saved.params_path)
    executor = HostExecutor(graph)
    scope = {**graph.params, **{k: np.array(v) for k, v in saved.feeds.items()}}
    executor.run_block(0, scope)
    return graph, executor, [scope[name] for name in graph.outputs]


def check(saved, rtol=None):
    graph, executor, got = run_program(saved)
    for i, (g, w) in enumerate(zip(got, saved.outputs)):
        assert_op_close(g, w, what=f"output {i} ({graph.outputs[i]})", **({"rtol": rtol} if rtol else {}))
    return graph, executor


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_while_loop(tmp_path, steps):
    def build(x):
        import paddle

        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], steps, "int64")
        _, y = paddle.static.nn.while_loop(
            lambda i, y: i < n, lambda i, y: [i + 1, paddle.nn.functional.relu(y - 0.3) * 2.0 + 0.5], [i, x]
        )
        return y

    saved = static_program(tmp_path, build, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})
    # rtol 1e-6 (not 6e-7): the loop body's float32 arithmetic repeats, so rounding differences accumulate
    graph, executor = check(saved, rtol=1e-6)
    assert any(op.type == "while" for op in graph.ops())
    assert executor.unsupported_op_types(graph.ops()) == []
    if steps > 1:
        # The loop body's ops are planned once and reused on later iterations.
        assert executor.plan_hits >= (steps - 1) * len(graph.blocks[1].ops)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond(tmp_path, sign):
    def build(x):
        import paddle

        with legacy_logical_not():
            return paddle.static.nn.cond(
                paddle.mean(x) > 0, lambda: paddle.nn.functional.relu(x) * 2.0 + 1.0, lambda: x * 3.0 - 2.0
            )

    x = (np.abs(RNG.standard_normal((3, 4))) * sign).astype(np.float32)
    saved = static_program(tmp_path, build, {"x": x})
    graph, _ = check(saved)
    types = [op.type for op in graph.ops()]
    assert types.count("conditional_block") == 2 and "select_input" in types


def test_while_with_tensor_array(tmp_path):
    """A loop writing each step into a tensor array, then reading it back, its length and the stacked array."""
    def build(x):
        import paddle

        arr = paddle.tensor.create_array("float32")
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 4, "int64")

        def body(i, y):
            y = y * 0.5 + 1.0
            paddle.tensor.array_write(y, i, array=arr)
            return [paddle.increment(i), y]

        paddle.static.nn.while_loop(lambda i, y: i < n, body, [i, x])
        length = paddle.tensor.array_length(arr)
        second = paddle.tensor.array_read(arr, paddle.full([1], 1, "int64"))
        stacked, _ = paddle.tensor.manipulation.tensor_array_to_tensor(arr, axis=0, use_stack=True)
        concat, index = paddle.tensor.manipulation.tensor_array_to_tensor(arr, axis=1, use_stack=False)
        return [length, second, stacked, concat, index]

    saved = static_program(tmp_path, build, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})
    graph, _, got = run_program(saved)
    for i in range(4):
        assert_op_close(got[i], saved.outputs[i], what=graph.outputs[i])
    # Paddle's executor fetches OutIndex as None (it never materializes that var), so check it directly:
    # the size of each of the 4 arrays' elements along the concat axis.
    assert saved.outputs[4] is None or np.asarray(saved.outputs[4]).dtype == object
    np.testing.assert_array_equal(got[4], np.array([3, 3, 3, 3], np.int32))
    types = {op.type for b in graph.blocks for op in b.ops}
    assert {"write_to_array", "read_from_array", "lod_array_length", "tensor_array_to_tensor", "while"} <= types


def test_the_predictor_says_why_a_branch_runs_on_the_host(tmp_path):
    """unsupported_reasons() names the control-flow ops too (T5's and DeBERTa-v2's shape branches): they never go
    to the support decision, so its reasons lacked them and a placement check said 'no reason recorded'."""
    import nnadapter_bridge as nb

    def build(x):
        import paddle

        with legacy_logical_not():
            return paddle.static.nn.cond(paddle.mean(x) > 0, lambda: x * 2.0, lambda: x - 1.0)

    static_program(tmp_path, build, {"x": RNG.standard_normal((3, 4)).astype(np.float32)})
    config = nb.Config()
    config.set_model_dir(str(tmp_path))
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)
    assert "conditional_block" in {op.type for op in predictor.host_ops}
    assert "control flow" in predictor.unsupported_reasons()["conditional_block"]
