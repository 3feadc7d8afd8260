"""Converter for 1-D linear interpolation: linear_interp_v2 (paddle.nn.functional.interpolate(mode="linear")) of
an [N, C, W] input (NCW) or [N, W, C] (NWC).

NNAdapter's RESIZE_LINEAR resizes the two spatial axes of a 4-D tensor, so the width axis is resized as the W of
an [N, C, 1, W] view whose height stays 1 (a single row samples itself whatever the alignment rule), then viewed
back as [N, C, W']. The output width follows Paddle's priority: SizeTensor > OutSize > the Scale tensor > the scale
attribute > out_w; a size tensor becomes [1, W'] and a scale [1.0, s]. The 2-D resizes live in conv_nn_resize.py.
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
    return None


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
