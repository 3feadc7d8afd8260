"""builtin_device kernels: elementwise binary arithmetic, comparisons, logic, unary math, activations."""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.nnadapter.codes import FuseCode, OperationType as T
from hal.builtin_device.kernels.registry import kernel


def apply_fuse_code(x: np.ndarray, fuse_code) -> np.ndarray:
    code = FuseCode(int(np.asarray(fuse_code).reshape(-1)[0]))
    if code == FuseCode.FUSED_RELU:
        return np.maximum(x, 0).astype(x.dtype, copy=False)
    if code == FuseCode.FUSED_RELU1:
        return np.clip(x, -1, 1).astype(x.dtype, copy=False)
    if code == FuseCode.FUSED_RELU6:
        return np.clip(x, 0, 6).astype(x.dtype, copy=False)
    return x


@kernel(T.RELU)
def relu(op, inputs):
    x = inputs[0]
    return [np.maximum(x, 0).astype(x.dtype, copy=False)]


@kernel(T.ADD)
def add(op, inputs):
    a, b, fuse = inputs
    return [apply_fuse_code(np.add(a, b), fuse)]
