"""Converter for 1-D linear interpolation: linear_interp_v2 (paddle.nn.functional.interpolate(mode="linear")) of
an [N, C, W] input (NCW) or [N, W, C] (NWC).

NNAdapter's RESIZE_LINEAR resizes the two spatial axes of a 4-D tensor, so the width axis is resized as the W of
an [N, C, 1, W] view whose height stays 1 (a single row samples itself whatever the alignment rule), then viewed
back as [N, C, W']. The output width follows Paddle's priority: SizeTensor > OutSize > the Scale tensor > the scale
attribute > out_w; a size tensor becomes [1, W'] and a scale [1.0, s]. One case is left to the host kernel:
half-pixel sampling (align_corners off, align_mode 0) to a single output position, which Paddle's 1-D kernel takes
between two inputs and RESIZE_LINEAR (Paddle's 2-D rule) at input 0, and so also a width not known at conversion.
The 2-D resizes live in resize.py.
Imports only the converter toolkit and the NNAdapter codes.
"""
from __future__ import annotations

from typing import Optional

from converters.attrs import input_dims
from converters.emit import emit_chain, transpose_step
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T

_CHANNEL_FIRST = ("NCW", "NCHW", "AnyLayout", "ANYLAYOUT", "")
_CHANNEL_LAST = ("NWC", "NHWC")


def _scale_attr(op) -> Optional[float]:
    scales = OpView(op).attr_floats("scale", [])
    return scales[0] if scales and scales[0] > 0 else None


def _check_linear_1d(op, ctx) -> Optional[str]:
    v = OpView(op)
    layout = v.attr_str("data_layout", "NCW")
    if layout not in _CHANNEL_FIRST + _CHANNEL_LAST:
        return f"data_layout '{layout}' is neither NCW nor NWC"
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 3:
        return f"only the 1-D form ([N, C, W] input) is converted, X has rank {len(dims)}"
    method = v.attr_str("interp_method", "linear")
    if method != "linear":
        return f"interp_method '{method}' does not match linear_interp_v2"
    if v.inputs("SizeTensor"):
        return None  # Paddle takes the size from SizeTensor and samples with in / out: RESIZE at that size
    has_scale = bool(v.optional_input("Scale")) or _scale_attr(op) is not None
    if v.optional_input("OutSize") and has_scale and not v.attr("align_corners", True):
        return "OutSize together with a scale (Paddle samples with 1/scale at OutSize's size)"
    if not v.optional_input("OutSize") and not has_scale and v.attr_int("out_w", -1) <= 0:
        return "no output size: OutSize, SizeTensor, Scale, scale and out_w are all unset"
    if not v.attr("align_corners", True) and v.attr_int("align_mode", 1) == 0:
        width = _known_width(ctx, op, dims, layout in _CHANNEL_LAST)
        if width is None or width == 1:
            # Paddle's 1-D kernel keeps in/out (or 1/scale) for a single output position and samples it half a
            # step in; RESIZE_LINEAR, like Paddle's 2-D kernels, reads position 0 then.
            return ("half-pixel sampling to a single output position (or to a width computed at run time, "
                    "which may be one): Paddle's 1-D kernel samples it between inputs, RESIZE_LINEAR at input 0")
    return None


def _known_width(ctx, op, dims, channel_last: bool) -> Optional[int]:
    """The output width when it is known at conversion (a lower bound of 2 when only that is), else None."""
    v = OpView(op)
    in_w = dims[1 if channel_last else 2] if dims is not None and len(dims) == 3 else -1
    for tensors in (v.inputs("SizeTensor"), [v.optional_input("OutSize")]):
        tensors = [name for name in tensors if name]
        if tensors:
            value = ctx.constant_value(tensors[0])
            return None if value is None else int(value.reshape(-1)[0])
    scale = _scale_attr(op)
    if v.optional_input("Scale"):
        value = ctx.constant_value(v.optional_input("Scale"))
        scale = None if value is None else float(value.reshape(-1)[0])
    if scale is not None:
        if in_w > 0:
            return int(in_w * scale)
        return 2 if scale >= 2 else None  # any input width (at least 1) gives at least 2 positions
    return v.attr_int("out_w", -1)


def _size_and_scales(ctx, op):
    """(shape [1, W'] or None, scales [1.0, s] or None) for RESIZE_LINEAR, in Paddle's priority."""
    v = OpView(op)
    out_name = v.output("Out")

    def with_unit_height(operand, unit, purpose):
        both = ctx.temp(out_name, purpose)
        ctx.add(T.CONCAT, [unit, operand, ctx.const_i32(0)], [both])
        return both

    if v.inputs("SizeTensor"):
        width = ctx.ints_operand(op, "out_size", tensor_list="SizeTensor")
        return with_unit_height(width, ctx.const_i32([1]), "size"), None
    if v.optional_input("OutSize"):
        width = ctx.ints_operand(op, "out_size", tensor="OutSize")
        return with_unit_height(width, ctx.const_i32([1]), "size"), None
    scale_tensor = v.optional_input("Scale")
    if scale_tensor:
        return None, with_unit_height(ctx.input(scale_tensor), ctx.const_f32([1.0]), "scales")
    scale = _scale_attr(op)
    if scale is not None:
        return None, ctx.const_f32([1.0, scale])
    return ctx.const_i32([1, v.attr_int("out_w", -1)]), None


@converter("linear_interp_v2", emits=[T.RESIZE_LINEAR, T.RESHAPE, T.CONCAT, T.CAST, T.TRANSPOSE],
           check=_check_linear_1d)
def convert_linear_interp_1d(ctx, op):
    v = OpView(op)
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = v.attr_str("data_layout", "NCW") in _CHANNEL_LAST
    shape, scales = _size_and_scales(ctx, op)
    align_corners = ctx.const_bool(v.attr_bool("align_corners", True))
    align_mode = ctx.const_i32(v.attr_int("align_mode", 1))
    steps = [("channel_first", transpose_step([0, 2, 1]))] if channel_last else []
    steps += [
        ("as_2d", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([0, 0, 1, -1])], [out])),
        ("resize", lambda ctx, x, out: ctx.add(T.RESIZE_LINEAR, [x, shape, scales, align_corners, align_mode], [out])),
        ("as_1d", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([0, 0, -1])], [out])),
    ]
    if channel_last:
        steps.append(("channel_last", transpose_step([0, 2, 1])))
    emit_chain(ctx, out_name, x, steps)
