"""RESIZE_NEAREST and RESIZE_LINEAR: signatures, shape inference and numpy references.

The last two axes are resized, to the `shape` operand when given, else to the input size times `scales`
(truncated as Paddle does). The references compute source coordinates the way Paddle's interpolate
kernels do (float32 ratios; 1/scale when the size came from scales).

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`, `common`,
the standard's codes and types and `errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    as_compute_float,
    const_array,
    const_int,
    const_ints,
    hw_pair,
    known,
    map_shapes,
    param_bool,
    param_int,
    param_ints,
)
from nnadapter_bridge.nnadapter.operations.registry import (
    BOOL,
    FLOATS,
    FLOATS_Q8,
    INT32,
    INT32_64,
    Slot,
    operation,
    reference,
)

_F32 = np.float32


# -- signatures and shape inference ------------------------------------------------------------------
def resize_out_size(in_size: int, shape_value, scale_value) -> int:
    """Output length from the shape operand (wins) or the scale; Paddle truncates float32 in * scale."""
    if shape_value is not None:
        return int(shape_value)
    return int(np.float32(in_size) * np.float32(scale_value))


def _resize_prepare(op):
    t = op.inputs[0].type
    if t.rank < 3:
        raise OperationError(f"{op.type.name}: input must be [N, C, (D...,) H, W], got {t.describe()}")
    has_shape = op.inputs[1] is not None
    has_scales = len(op.inputs) > 2 and op.inputs[2] is not None
    if not has_shape and not has_scales:
        raise OperationError(f"{op.type.name}: at least one of shape and scales must be given")
    shape = hw_pair(const_ints(op, 1), "shape", op) if has_shape else None
    scales_arr = const_array(op, 2) if has_scales else None
    scales = None
    if scales_arr is not None:
        scales = hw_pair([float(s) for s in np.asarray(scales_arr).reshape(-1)], "scales", op)

    def dims_fn(dims):
        head = tuple(dims[:-2])
        if shape is not None:
            return head + tuple(shape)
        if has_shape or scales is None:
            return head + (UNKNOWN, UNKNOWN)
        return head + tuple(resize_out_size(d, None, s) if known(d) else UNKNOWN for d, s in zip(dims[-2:], scales))

    return map_shapes(t, dims_fn)


@operation(T.RESIZE_NEAREST,
           inputs=[Slot("input", FLOATS_Q8), Slot("shape", INT32_64, optional=True),
                   Slot("scales", FLOATS, optional=True),
                   Slot("align_corners", BOOL, optional=True)],
           outputs=[Slot("output")])
def prepare_resize_nearest(op):
    """Nearest-neighbour resize of the last two axes to `shape`, else to floor(in * scales)."""
    return [_resize_prepare(op)]


@operation(T.RESIZE_LINEAR,
           inputs=[Slot("input", FLOATS_Q8), Slot("shape", INT32_64, optional=True),
                   Slot("scales", FLOATS, optional=True),
                   Slot("align_corners", BOOL, optional=True), Slot("align_mode", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_resize_linear(op):
    """Bilinear resize of the last two axes; align_corners, else align_mode 0 (half-pixel) or 1."""
    align_mode = const_int(op, 4, 1)
    if align_mode not in (0, 1):
        raise OperationError(f"{op.type.name}: align_mode must be 0 or 1, got {align_mode}")
    return [_resize_prepare(op)]


# -- references ------------------------------------------------------------------------------------------
def _resize_plan(op, inputs):
    """Output size and source-coordinate ratio per resized axis, computed the way Paddle's
    interpolate kernels do (float32 ratios; 1/scale when the size came from scales)."""
    x = inputs[0]
    shape = param_ints(inputs[1])
    scales = None if inputs[2] is None else [float(s) for s in np.asarray(inputs[2]).reshape(-1)]
    align_corners = param_bool(inputs[3] if len(inputs) > 3 else None)
    plan = []
    for a in (0, 1):
        size = x.shape[x.ndim - 2 + a]
        out = resize_out_size(size, None if shape is None else shape[a], None if scales is None else scales[a])
        if out <= 1:
            ratio = _F32(0)  # a single output row reads source row 0
        elif align_corners:
            ratio = _F32(size - 1) / _F32(out - 1)
        elif shape is None and scales is not None and scales[a] > 0:
            ratio = _F32(1.0 / scales[a])
        else:
            ratio = _F32(size) / _F32(out)
        plan.append((size, out, ratio))
    return plan, align_corners


def _same_size(x, plan) -> bool:
    """Paddle's interpolate kernels copy the input when the output size equals it (so an inf stays inf where
    interpolating with a zero weight would give NaN)."""
    return all(size == out for size, out, _ in plan)


@reference(T.RESIZE_NEAREST)
def resize_nearest(op, inputs):
    x = inputs[0]
    plan, align_corners = _resize_plan(op, inputs)
    if _same_size(x, plan):
        return [np.array(x)]
    index = []
    for size, out, ratio in plan:
        k = np.arange(out, dtype=_F32)
        src = ratio * k  # float32 product, as the reference kernel
        src = np.floor(src.astype(np.float64) + 0.5) if align_corners else np.floor(src)
        index.append(np.minimum(src.astype(np.int64), size - 1))
    return [np.ascontiguousarray(x[..., index[0][:, None], index[1][None, :]])]


def linear_taps(size, out, ratio, half_pixel, src_in_double):
    """Per output position: the two source indices and the weights of the second and the first (float32, as
    Paddle's kernel). Paddle's bilinear kernel computes a row's half-pixel source position in double (then
    stores it as a float) and a column's in float: a position 1.5e-8 past an integer keeps that tiny weight
    for rows only (`src_in_double`)."""
    if half_pixel and src_in_double:
        k = np.arange(out, dtype=np.float64)
        src = float(ratio) * (k + 0.5) - 0.5
        lo = np.maximum(np.trunc(src), 0).astype(np.int64)
        frac = np.maximum(src, 0).astype(_F32) - lo.astype(_F32)
    elif half_pixel:
        k = np.arange(out, dtype=_F32)
        src = _F32(ratio) * (k + _F32(0.5)) - _F32(0.5)
        lo = np.maximum(np.trunc(src), 0).astype(np.int64)
        frac = np.maximum(src, _F32(0)) - lo.astype(_F32)
    else:
        src = ratio * np.arange(out, dtype=_F32)
        lo = src.astype(np.int64)
        frac = src - lo.astype(_F32)
    hi = np.minimum(lo + 1, size - 1)
    lo = np.minimum(lo, size - 1)
    frac = frac.astype(_F32)
    return lo, hi, frac, (_F32(1) - frac).astype(_F32)


@reference(T.RESIZE_LINEAR)
def resize_linear(op, inputs):
    x = as_compute_float(inputs[0])  # float64 values keep float64; the ratios stay float32 as Paddle's
    plan, align_corners = _resize_plan(op, inputs)
    if _same_size(x, plan):
        return [np.array(x)]
    align_mode = param_int(inputs[4] if len(inputs) > 4 else None, 1)
    half_pixel = align_mode == 0 and not align_corners
    (h, oh, rh), (w, ow, rw) = plan
    y_n, y_s, d_n, d_s = linear_taps(h, oh, rh, half_pixel, src_in_double=True)
    x_w, x_e, d_w, d_e = linear_taps(w, ow, rw, half_pixel, src_in_double=False)
    ft = x.dtype
    d_n, d_s = d_n.astype(ft)[:, None], d_s.astype(ft)[:, None]
    d_w, d_e = d_w.astype(ft)[None, :], d_e.astype(ft)[None, :]
    rows_n, rows_s = x[..., y_n, :], x[..., y_s, :]
    with np.errstate(invalid="ignore", over="ignore"):
        # Paddle's sum, term by term in x's precision: nw*d_s*d_e + sw*d_n*d_e + ne*d_s*d_w + se*d_n*d_w
        out = rows_n[..., x_w] * d_s * d_e
        out += rows_s[..., x_w] * d_n * d_e
        out += rows_n[..., x_e] * d_s * d_w
        out += rows_s[..., x_e] * d_n * d_w
    return [out]
