"""The example device's "hardware": numpy kernels for the six operations it implements.

A real driver would hand these to its SDK's graph builder instead; what carries over is the shape of the
work: `check_*` says whether one operation (its precisions, its constant attributes) is something the
device can do exactly as the NNAdapter standard defines it, and `compile_*` turns an operation whose check
passed into a kernel with its constants prepared once (the "compiled program").
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nnadapter_bridge.nnadapter.codes import AutoPad, FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T

FLOAT32 = Precision.FLOAT32
FUSE_RANGES = {FuseCode.FUSED_NONE: None, FuseCode.FUSED_RELU: (0.0, None), FuseCode.FUSED_RELU1: (-1.0, 1.0),
               FuseCode.FUSED_RELU6: (0.0, 6.0)}


# -- reading operands --------------------------------------------------------------------------------------
def _const(op, i: int) -> np.ndarray | None:
    """Operand i's constant value; None when absent. Raises ValueError when it is not a constant."""
    if i >= len(op.inputs) or op.inputs[i] is None:
        return None
    operand = op.inputs[i]
    if not operand.is_constant:
        raise ValueError(f"operand {i} must be a constant")
    return np.asarray(operand.value)


def _scalar(op, i: int, default):
    value = _const(op, i)
    return default if value is None else value.reshape(-1)[0].item()


def _fuse(op, i: int):
    code = FuseCode(int(_scalar(op, i, int(FuseCode.FUSED_NONE))))
    return FUSE_RANGES[code]


def _float32(op, *indexes) -> None:
    for i in indexes:
        operand = op.inputs[i]
        if operand is not None and operand.type.precision != FLOAT32:
            raise ValueError(f"operand {i} is {operand.type.precision.name}; this device computes float32 only")
    for operand in op.outputs:
        if operand is not None and operand.type.precision != FLOAT32:
            raise ValueError("the output must be float32")


def _activate(x: np.ndarray, fuse) -> np.ndarray:
    if fuse is None:
        return x
    low, high = fuse
    if high is None:
        return np.fmax(x, np.float32(low))  # NNAdapter's relu turns NaN into 0, as Paddle's does
    return np.clip(x, np.float32(low), np.float32(high))


# -- the operations --------------------------------------------------------------------------------------
Kernel = Callable[[list], list]


def compile_elementwise(op) -> Kernel:
    _float32(op, 0, 1)
    fuse = _fuse(op, 2)
    fn = {T.ADD: np.add, T.SUB: np.subtract, T.MUL: np.multiply}[op.type]
    return lambda args: [_activate(fn(args[0], args[1]).astype(np.float32, copy=False), fuse)]


def compile_relu(op) -> Kernel:
    _float32(op, 0)
    return lambda args: [np.fmax(args[0], np.float32(0))]


def compile_fully_connected(op) -> Kernel:
    _float32(op, 0, 1, 2)
    weight = _const(op, 1)
    if weight is None or weight.ndim != 2:
        raise ValueError("the weight must be a constant [num_units, input_size]")
    bias = _const(op, 2)
    fuse = _fuse(op, 3)
    weight_t = np.ascontiguousarray(weight.T.astype(np.float32))  # "compiled": laid out once

    def run(args):
        out = args[0].reshape(-1, weight_t.shape[0]) @ weight_t
        if bias is not None:
            out += bias
        return [_activate(out, fuse)]

    return run


def compile_conv_2d(op) -> Kernel:
    """NCHW convolution by im2col + one matmul per group; explicit pads only (AUTO_PAD_NONE)."""
    _float32(op, 0, 1, 2)
    weight = _const(op, 1)
    if weight is None or weight.ndim != 4:
        raise ValueError("the filter must be a constant [C_out, C_in/group, kh, kw]")
    bias = _const(op, 2)
    if int(_scalar(op, 3, int(AutoPad.AUTO_PAD_NONE))) != int(AutoPad.AUTO_PAD_NONE):
        raise ValueError("only explicit pads (AUTO_PAD_NONE)")
    pads = [int(p) for p in (_const(op, 4) if _const(op, 4) is not None else np.zeros(4)).reshape(-1)]
    strides = [int(s) for s in (_const(op, 5) if _const(op, 5) is not None else np.ones(2)).reshape(-1)]
    group = int(_scalar(op, 6, 1))
    dilations = [int(d) for d in (_const(op, 7) if _const(op, 7) is not None else np.ones(2)).reshape(-1)]
    fuse = _fuse(op, 8)
    if len(pads) != 4 or min(pads) < 0 or len(strides) != 2 or min(strides) < 1 or len(dilations) != 2 \
            or min(dilations) < 1:
        raise ValueError("pads must be 4 values >= 0, strides and dilations 2 values >= 1")
    c_out, c_in_group, kh, kw = weight.shape
    if group < 1 or c_out % group:
        raise ValueError(f"group {group} does not divide {c_out} output channels")
    top, bottom, left, right = pads
    (sh, sw), (dh, dw) = strides, dilations
    k = c_in_group * kh * kw
    filters = np.ascontiguousarray(weight.reshape(group, c_out // group, k).astype(np.float32))

    def run(args):
        x = args[0]
        n, c_in, h, w = x.shape
        if c_in != c_in_group * group:
            raise ValueError(f"input has {c_in} channels, the filter wants {c_in_group * group}")
        oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
        ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
        xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
        cols = np.empty((n, c_in, kh, kw, oh, ow), dtype=np.float32)  # im2col
        for i in range(kh):
            for j in range(kw):
                cols[:, :, i, j] = xp[
                    :, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw
                ]
        out = np.matmul(filters, cols.reshape(n, group, k, oh * ow))  # [N, G, C_out/G, OH*OW]
        out = out.reshape(n, c_out, oh, ow)
        if bias is not None:
            out += bias.reshape(c_out, 1, 1)
        return [_activate(out, fuse)]

    return run


COMPILERS = {T.ADD: compile_elementwise, T.SUB: compile_elementwise, T.MUL: compile_elementwise,
             T.RELU: compile_relu, T.FULLY_CONNECTED: compile_fully_connected, T.CONV_2D: compile_conv_2d}


def unsupported_reason(op) -> str:
    """'' when this device runs `op` exactly as the standard says, else why not. The answer comes from the
    same code that compiles it (a trial compile), so validate_program never claims what create_program then
    refuses; the conformance kit checks that the results match too."""
    compiler = COMPILERS.get(op.type)
    if compiler is None:
        return f"{op.type.name} is not implemented"
    try:
        compiler(op)
    except (ValueError, KeyError, TypeError) as exc:
        return str(exc)
    return ""
