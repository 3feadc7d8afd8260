"""The "pool2d" host kernel (for the cases its converter rejects) against Paddle, and a model mixing a
convertible and a rejected pool2d with the same attributes: the second runs on the host."""
from __future__ import annotations

import os

import numpy as np
import pytest

import nnadapter_bridge as nb
from devtools.zoo import write_program
from nnadapter_bridge.host import HostExecutor
from nnadapter_bridge.loader import load_model
from support.converter_harness import opdesc_program
from support.tolerances import assert_op_close

POOL_ATTRS = {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0], "ceil_mode": True,
              "exclusive": False, "global_pooling": False, "adaptive": False, "data_format": "NCHW",
              "padding_algorithm": "EXPLICIT"}


@pytest.mark.parametrize("changes", [
    {},  # the partial last window: Paddle divides by the whole ksize
    {"pooling_type": "max"},
    {"exclusive": True},
    {"ceil_mode": False, "paddings": [1, 0]},
    {"paddings": [1, 0, 0, 1], "ksize": [3, 2]},
    {"adaptive": True, "ksize": [2, 3], "ceil_mode": False},
    {"global_pooling": True},
    {"ksize": [9, 9], "strides": [2, 2], "ceil_mode": False},  # the kernel past the input: one position (C++ /)
    {"ksize": [10, 8], "strides": [1, 1], "ceil_mode": False, "exclusive": True},  # an empty output
])
def test_pool2d_host_kernel_matches_paddle(tmp_path, changes):
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 7)).astype(np.float32)
    saved = opdesc_program(tmp_path, "pool2d", inputs={"X": ["x"]}, outputs={"Out": ["y"]},
                           attrs={**POOL_ATTRS, **changes}, feeds={"x": x})
    graph = load_model(saved.model_path)
    op = next(op for op in graph.ops() if op.type == "pool2d")
    scope = {"x": x}
    HostExecutor(graph).run_host_kernel(op, scope)
    assert_op_close(scope["y"], saved.outputs[0], what=f"pool2d {changes}")


def test_same_attrs_different_dims_are_decided_separately(tmp_path):
    """Two pool2d ops with equal attributes: on the 1x1 input the 2x2 kernel leaves Paddle an empty output, which
    the converter rejects (the host kernel gives it). The support decision must not reuse the 8x8 op's verdict
    for it (it is keyed by dims)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    b = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    attrs = {**POOL_ATTRS, "strides": [1, 1], "ceil_mode": False}
    vars_ = [{"name": "a", "dtype": "float32", "shape": [1, 3, 8, 8]},
             {"name": "b", "dtype": "float32", "shape": [1, 3, 1, 1]},
             {"name": "oa", "dtype": "float32", "shape": [1, 3, 7, 7]},
             {"name": "ob", "dtype": "float32", "shape": [1, 3, 0, 0]}]
    ops = [{"type": "pool2d", "inputs": {"X": ["a"]}, "outputs": {"Out": ["oa"]}, "attrs": attrs},
           {"type": "pool2d", "inputs": {"X": ["b"]}, "outputs": {"Out": ["ob"]}, "attrs": attrs}]
    path = os.path.join(str(tmp_path), "__model__")
    write_program(path, [{"vars": vars_, "ops": ops}], feeds=["a", "b"], fetches=["oa", "ob"])
    from support.converter_harness import _run_saved, paddle_static

    with paddle_static() as paddle:
        want = _run_saved(paddle, str(tmp_path), "__model__", None, {"a": a, "b": b})
    config = nb.Config()
    config.set_model_file(path)
    predictor = nb.create_predictor(config)
    assert [op.output("Out") for op in predictor.host_ops] == [["ob"]]
    predictor.get_input_by_name("a").from_numpy(a)
    predictor.get_input_by_name("b").from_numpy(b)
    predictor.run()
    for k, expected in enumerate(want):
        assert_op_close(predictor.get_output(k).numpy(), expected, what=predictor.get_output_names()[k])
