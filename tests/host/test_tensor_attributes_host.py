"""Host kernels for attributes that come from tensors: crop_tensor and empty (their output dims are tensor
values), and Variable-valued attributes read from the scope by OpScope (checked against Paddle dygraph)."""
from __future__ import annotations

import numpy as np
import paddle

from nnadapter_bridge.host.kernels import HOST_KERNELS, OpScope
from nnadapter_bridge.loader.program import OpInfo, VarRef


def _run(op_type, inputs, attrs, scope):
    op = OpInfo(op_type, 0, 0, inputs, {"Out": ["out"]}, attrs, {})
    HOST_KERNELS[op_type].fn(OpScope(op, scope))
    return scope["out"]


def test_crop_tensor_from_shape_tensor_list_and_offsets_tensor():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    scope = {"x": x, "s1": np.asarray([2], np.int32), "o": np.asarray([0, 1, 1], np.int32)}
    got = _run("crop_tensor", {"X": ["x"], "ShapeTensor": ["s0", "s1", "s2"], "Offsets": ["o"]}, {},
               {**scope, "s0": np.asarray([2], np.int32), "s2": np.asarray([-1], np.int32)})
    want = paddle.crop(paddle.to_tensor(x), shape=[2, 2, -1], offsets=paddle.to_tensor(scope["o"])).numpy()
    np.testing.assert_array_equal(got, want)


def test_empty_from_shape_tensor():
    got = _run("empty", {"ShapeTensor": ["s"]}, {"dtype": 5}, {"s": np.asarray([2, 3], np.int64)})
    assert got.shape == tuple(paddle.empty(paddle.to_tensor([2, 3])).shape) and got.dtype == np.float32


def test_opscope_reads_variable_attributes_from_the_scope():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got = _run("reduce_prod", {"X": ["x"]}, {"dim": VarRef("d")}, {"x": x, "d": np.asarray([1], np.int64)})
    np.testing.assert_allclose(got, paddle.prod(paddle.to_tensor(x), axis=1).numpy(), rtol=1e-6)
    got = _run("eye", {}, {"num_rows": VarRef("n"), "num_columns": 4, "dtype": 5}, {"n": np.asarray([3], np.int32)})
    np.testing.assert_array_equal(got, paddle.eye(3, 4).numpy())
