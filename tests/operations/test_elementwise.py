"""builtin_device against independent expectations: elementwise, comparison, logic, unary, activations."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.codes import FuseCode, OperationType as T
from op_harness import Const, run_op
from tolerances import assert_op_close

rng = np.random.default_rng(0)


def test_relu_matches_paddle():
    import paddle

    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    (got,) = run_op(T.RELU, [x])
    want = paddle.nn.functional.relu(paddle.to_tensor(x)).numpy()
    assert_op_close(got, want, what="RELU")


@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1,), (5, 2))])
@pytest.mark.parametrize("fuse", [FuseCode.FUSED_NONE, FuseCode.FUSED_RELU, FuseCode.FUSED_RELU1, FuseCode.FUSED_RELU6])
def test_add_broadcast_and_fuse(shapes, fuse):
    a = rng.standard_normal(shapes[0]).astype(np.float32) * 4
    b = rng.standard_normal(shapes[1]).astype(np.float32) * 4
    (got,) = run_op(T.ADD, [a, Const(b), int(fuse)])
    want = a + b
    if fuse == FuseCode.FUSED_RELU:
        want = np.maximum(want, 0)
    elif fuse == FuseCode.FUSED_RELU1:
        want = np.clip(want, -1, 1)
    elif fuse == FuseCode.FUSED_RELU6:
        want = np.clip(want, 0, 6)
    assert_op_close(got, want, what=f"ADD {shapes} {fuse.name}")
