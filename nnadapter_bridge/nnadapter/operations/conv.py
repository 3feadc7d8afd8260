"""CONV_2D and CONV_2D_TRANSPOSE: signatures, shape inference and numpy references.

Layout is NCHW. Spatial parameters (pads, strides, dilations) are read from constant operands; when one
is computed at run time the affected output dims become NNADAPTER_UNKNOWN. The references compute in float32
(float64 for float64 operands) and go through BLAS: convolution is im2col built with one strided copy per
kernel tap plus one (batched) matmul for all groups; depthwise convolution accumulates one multiply-add per
tap; no loop runs per pixel or per channel. Window arithmetic comes from `window`, so prepare and reference
agree.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`,
`common`, `window`, the standard's codes and types and `errors`: never the model, the reference, the runtime or
anything above the ground.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, AutoPad
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    apply_optional_fuse_code,
    as_compute_float,
    compute_dtype,
    const_int,
    const_ints,
    hw_pair,
    known,
    map_shapes,
    param_int,
    param_ints,
)
from nnadapter_bridge.nnadapter.operations.registry import (
    BIAS,
    FILTER,
    FLOATS_Q8,
    INT32,
    INT32_64,
    Slot,
    operation,
    reference,
)
from nnadapter_bridge.nnadapter.operations.window import (
    check_4d,
    pad_spatial,
    resolve_window,
    transpose_out_size,
    window_out_size,
    window_output_type,
    window_tap,
)

# -- signatures and shape inference ------------------------------------------------------------------
_CONV_INPUTS = [
    Slot("input", FLOATS_Q8), Slot("filter", FILTER), Slot("bias", BIAS, optional=True), Slot("auto_pad", INT32),
    Slot("pads", INT32, optional=True), Slot("strides", INT32), Slot("group", INT32), Slot("dilations", INT32),
]


def _group(op):
    """The constant `group` operand (None when computed at run time); it must be positive."""
    group = const_int(op, 6, 1)
    if group is not None and group <= 0:
        raise OperationError(f"{op.type.name}: group must be positive, got {group}")
    return group


@operation(T.CONV_2D, inputs=_CONV_INPUTS + [Slot("fuse_code", INT32, optional=True)], outputs=[Slot("output")])
def prepare_conv_2d(op):
    """2-D convolution; filter [C_out, C_in/group, kh, kw] (depthwise: group = C_in, C_out = k * C_in)."""
    check_4d(op)
    check_4d(op, 1, "filter")
    filt = op.inputs[1].type.dims
    group = _group(op)
    c_in = op.inputs[0].type.dims[1]
    if group is not None and known(c_in) and known(filt[1]) and filt[1] * group != c_in:
        raise OperationError(f"{op.type.name}: filter {list(filt)} with group {group} needs {filt[1] * group} "
                             f"input channels, input has {c_in}")
    if group is not None and known(filt[0]) and filt[0] % group:
        raise OperationError(f"{op.type.name}: {filt[0]} output channels are not divisible by group {group}")
    kernel = list(filt[2:]) if all(known(d) for d in filt[2:]) else None
    return [window_output_type(op, kernel, hw_pair(const_ints(op, 5), "strides", op),
                               hw_pair(const_ints(op, 7), "dilations", op), 4, channels=filt[0])]


@operation(T.CONV_2D_TRANSPOSE,
           inputs=_CONV_INPUTS + [Slot("output_padding", INT32, optional=True),
                                  Slot("output_shape", INT32_64, optional=True),
                                  Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_conv_2d_transpose(op):
    """Transposed convolution. The filter is Paddle's [C_in, C_out/group, kh, kw] (what conv2d_transpose
    stores and what Paddle Lite passes through); C_out = filter[1] * group."""
    check_4d(op)
    check_4d(op, 1, "filter")
    filt = op.inputs[1].type.dims
    group = _group(op)
    c_in = op.inputs[0].type.dims[1]
    if known(c_in) and known(filt[0]) and filt[0] != c_in:
        raise OperationError(f"{op.type.name}: filter {list(filt)} expects {filt[0]} input channels "
                             f"(layout [C_in, C_out/group, kh, kw]), input has {c_in}")
    channels = filt[1] * group if (group is not None and known(filt[1])) else UNKNOWN
    output_padding = hw_pair(const_ints(op, 8), "output_padding", op) or [0, 0]
    output_shape = None
    if len(op.inputs) > 9 and op.inputs[9] is not None:
        output_shape = hw_pair(const_ints(op, 9), "output_shape", op)
        if output_shape is None:
            # Computed at run time: only the spatial dims are unknown.
            return [map_shapes(op.inputs[0].type, lambda d: (d[0], channels, UNKNOWN, UNKNOWN))]
    kernel = list(filt[2:]) if all(known(d) for d in filt[2:]) else None
    return [window_output_type(op, kernel, hw_pair(const_ints(op, 5), "strides", op),
                               hw_pair(const_ints(op, 7), "dilations", op), 4, channels=channels, transpose=True,
                               output_padding=output_padding, output_shape=output_shape)]


# -- references ------------------------------------------------------------------------------------------
def conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, pads, strides, dilations, group: int) -> np.ndarray:
    """NCHW convolution with explicit (top, bottom, left, right) pads; filter [C_out, C_in/group, kh, kw]."""
    ft = compute_dtype(x, w)
    x, w = as_compute_float(x, ft), as_compute_float(w, ft)
    n, c_in, h, wd = x.shape
    c_out, c_in_g, kh, kw = w.shape
    top, bottom, left, right = pads
    sh, sw = strides
    dh, dw = dilations
    oh = window_out_size(h, kh, sh, top, bottom, dh)
    ow = window_out_size(wd, kw, sw, left, right, dw)
    xp = pad_spatial(x, top, bottom, left, right)
    if c_in_g == 1 and group == c_in and group > 1:
        out = _depthwise(xp, w, oh, ow, strides, dilations)
    elif kh == kw == 1 and group == 1:
        cols = window_tap(xp, 0, 0, oh, ow, sh, sw).reshape(n, c_in, oh * ow)  # a copy only when strided
        out = np.matmul(w.reshape(c_out, c_in), cols)
    else:
        # im2col with the batch inside the columns ([C_in, kh, kw, N, oh, ow]): one GEMM per group for the whole
        # batch, [C_out/G, K] x [K, N * P], where a batch of small images (an R-CNN head's hundred 14x14 RoIs)
        # would otherwise make N small GEMMs (1.5-3x slower measured at N = 8-100).
        cols = np.empty((c_in, kh, kw, n, oh, ow), dtype=ft)
        for i in range(kh):
            for j in range(kw):
                cols[:, i, j] = window_tap(xp, i * dh, j * dw, oh, ow, sh, sw).transpose(1, 0, 2, 3)
        k = c_in_g * kh * kw
        out = np.matmul(w.reshape(group, c_out // group, k), cols.reshape(group, k, n * oh * ow))
        out = np.ascontiguousarray(out.reshape(c_out, n, oh, ow).transpose(1, 0, 2, 3))  # no copy when N = 1
    out = out.reshape(n, c_out, oh, ow)
    if bias is not None:
        out += as_compute_float(bias, ft).reshape(c_out, 1, 1)
    return out


def _depthwise(xp: np.ndarray, w: np.ndarray, oh: int, ow: int, strides, dilations) -> np.ndarray:
    """group = C_in, channel multiplier m = C_out / C_in: one broadcast multiply-add per kernel tap."""
    n, c_in = xp.shape[:2]
    c_out, _, kh, kw = w.shape
    mult = c_out // c_in
    sh, sw = strides
    dh, dw = dilations
    coef = w.reshape(c_in, mult, kh, kw)
    out = np.zeros((n, c_in, mult, oh, ow), dtype=xp.dtype)
    scratch = np.empty_like(out)
    for i in range(kh):
        for j in range(kw):
            tap = window_tap(xp, i * dh, j * dw, oh, ow, sh, sw)[:, :, None]
            np.multiply(tap, coef[:, :, i, j][:, :, None, None], out=scratch)
            out += scratch
    return out.reshape(n, c_out, oh, ow)


def conv2d_transpose(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, pads, strides, dilations,
                     group: int, out_hw) -> np.ndarray:
    """Transposed convolution (filter [C_in, C_out/group, kh, kw]): one matmul to the per-tap
    contributions, then col2im as one strided accumulate per tap, cropped to the output window."""
    ft = compute_dtype(x, w)
    x, w = as_compute_float(x, ft), as_compute_float(w, ft)
    n, c_in, h, wd = x.shape
    _, c_out_g, kh, kw = w.shape
    c_in_g = c_in // group
    c_out = c_out_g * group
    top, _, left, _ = pads
    sh, sw = strides
    dh, dw = dilations
    oh, ow = out_hw
    wt = w.reshape(group, c_in_g, c_out_g * kh * kw).transpose(0, 2, 1)
    contrib = np.matmul(wt, x.reshape(n, group, c_in_g, h * wd)).reshape(n, c_out, kh, kw, h, wd)
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, top + oh)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, left + ow)
    buf = np.zeros((n, c_out, full_h, full_w), dtype=ft)
    for i in range(kh):
        for j in range(kw):
            window_tap(buf, i * dh, j * dw, h, wd, sh, sw)[...] += contrib[:, :, i, j]
    out = buf[:, :, top:top + oh, left:left + ow]
    if bias is not None:
        out = out + as_compute_float(bias, ft).reshape(c_out, 1, 1)
    return np.ascontiguousarray(out)


def _conv_window(op, inputs, x, kh, kw):
    auto_pad = param_int(inputs[3], int(AutoPad.AUTO_PAD_NONE))
    strides = param_ints(inputs[5], [1, 1])
    dilations = param_ints(inputs[7], [1, 1])
    return resolve_window(auto_pad, param_ints(inputs[4]), x.shape[2:], (kh, kw), strides, dilations), strides


@reference(T.CONV_2D)
def conv_2d(op, inputs):
    x, w, bias = inputs[0], inputs[1], inputs[2]
    (pads, dilations), strides = _conv_window(op, inputs, x, w.shape[2], w.shape[3])
    out = conv2d(x, w, bias, pads, strides, dilations, param_int(inputs[6], 1))
    # conv2d's result is fresh, so the activation may clamp it in place.
    return [apply_optional_fuse_code(out, inputs[8] if len(inputs) > 8 else None, in_place=True)]


@reference(T.CONV_2D_TRANSPOSE)
def conv_2d_transpose(op, inputs):
    x, w, bias = inputs[0], inputs[1], inputs[2]
    kh, kw = w.shape[2:]
    (pads, dilations), strides = _conv_window(op, inputs, x, kh, kw)
    output_padding = param_ints(inputs[8] if len(inputs) > 8 else None, [0, 0])
    output_shape = param_ints(inputs[9] if len(inputs) > 9 else None)
    if output_shape is None:
        output_shape = [transpose_out_size(x.shape[2 + a], (kh, kw)[a], strides[a], pads[2 * a], pads[2 * a + 1],
                                           dilations[a], output_padding[a]) for a in (0, 1)]
    out = conv2d_transpose(x, w, bias, pads, strides, dilations, param_int(inputs[6], 1), output_shape)
    return [apply_optional_fuse_code(out, inputs[10] if len(inputs) > 10 else None)]
