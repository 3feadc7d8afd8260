"""Converters for the resizes: nearest_interp, bilinear_interp and their _v2 forms (RESIZE_NEAREST,
RESIZE_LINEAR), and linear_interp_v2 (paddle.nn.functional.interpolate(mode="linear")) of an [N, C, W] (NCW)
or [N, W, C] (NWC) input.

Tensor forms of attributes become operands: interp `OutSize`, `SizeTensor` (a list of [1] tensors,
CONCATenated) and `Scale`.

1-D: NNAdapter's RESIZE_LINEAR resizes the two spatial axes of a 4-D tensor, so the width axis is resized as
the W of an [N, C, 1, W] view whose height stays 1 (a single row samples itself whatever the alignment rule),
then viewed back as [N, C, W']. The output width follows Paddle's priority: SizeTensor > OutSize > the Scale
tensor > the scale attribute > out_w; a size tensor becomes [1, W'] and a scale [1.0, s]. One case is left to
the host kernel: half-pixel sampling (align_corners off, align_mode 0) to a single output position, which
Paddle's 1-D kernel takes between two inputs and RESIZE_LINEAR (Paddle's 2-D rule) at input 0, and so also a
width not known at conversion.

bicubic_interp_v2 of an [N, C, H, W] (NCHW) or [N, H, W, C] (NHWC) float32 input whose sizes are known at conversion
(which the engine's conversion for concrete input shapes gives): GATHER, MUL and ADD taps (below).

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry) and the standard (with its
interpolation rules, nnadapter.interp_rules, which the host kernel follows too).
"""
from __future__ import annotations

import numpy as np

from converters.attrs import input_dims, known_dims
from converters.context import ConversionContext
from converters.emit import binary, emit_chain, transpose_step
from converters.layout import channel_last_perm, is_channel_last, layout_reason, to_channel_first
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.interp_rules import cubic_taps, output_size, source_ratio
from nnadapter_bridge.nnadapter.types import Operand

# -- resize ----------------------------------------------------------------------------------------------------

_V1 = ("nearest_interp", "bilinear_interp")


def _interp_scales_attr(op) -> list:
    """v2's `scale` list (v1's float) as [scale_h, scale_w], or [] when unset / not positive."""
    v = OpView(op)
    if v.type in _V1:
        scale = float(v.attr("scale", 0.0) or 0.0)
        return [scale, scale] if scale > 0 else []
    scales = v.attr_floats("scale", [])
    if len(scales) == 1:
        scales = scales * 2
    return scales if len(scales) >= 2 and scales[0] > 0 and scales[1] > 0 else []


def _check_interp(op, ctx) -> str | None:
    v = OpView(op)
    reason = layout_reason(op, "data_layout")
    if reason:
        return reason
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 4:
        return f"only 2-D resizing of 4-D inputs is converted, X has rank {len(dims)}"
    method = v.attr_str("interp_method", "nearest" if v.type.startswith("nearest") else "bilinear")
    if method != ("nearest" if v.type.startswith("nearest") else "bilinear"):
        return f"interp_method '{method}' does not match {v.type}"
    if v.optional_input("SizeTensor"):
        # Paddle 3.3.1 (v1 and v2) takes the size from SizeTensor and samples with in / out, ignoring any
        # Scale tensor or scale attribute (unlike OutSize below): RESIZE at that shape is exact.
        return None
    has_scale = bool(v.optional_input("Scale")) or bool(_interp_scales_attr(op))
    if v.optional_input("OutSize") and has_scale and not v.attr("align_corners", True):
        # Paddle (v1 and v2) then takes the size from OutSize but samples with 1 / scale; RESIZE samples
        # with in / out.
        return "OutSize together with a scale (Paddle samples with 1/scale at OutSize's size)"
    if v.type in _V1 and not v.optional_input("OutSize") and has_scale:
        if v.optional_input("Scale"):
            return "v1 interpolation with a Scale tensor samples with in/out after truncation; not expressible"
        if dims is None or not known_dims(dims[2:]):
            return "v1 interpolation with a scale needs known spatial dims"
    if not v.optional_input("OutSize") and not has_scale:
        if v.attr_int("out_h", -1) <= 0 or v.attr_int("out_w", -1) <= 0:
            return "no output size: OutSize, SizeTensor, Scale, scale and out_h/out_w are all unset"
    return None


def _interp_size_and_scales(ctx, op, in_hw):
    """(shape operand or None, scales operand or None) for RESIZE_*, following Paddle's priority:
    SizeTensor > OutSize > Scale tensor > scale attribute > out_h/out_w."""
    v = OpView(op)
    out_name = v.output("Out")
    # The size tensors are often computed from the input's shape (`size=paddle.shape(x)[2:]`, or `[h, w]` of
    # 0-d and [1] slices): ints_operand folds them when they are known now and joins 0-d and [1] parts.
    if v.inputs("SizeTensor"):
        return ctx.ints_operand(op, "out_size", tensor_list="SizeTensor"), None
    if v.optional_input("OutSize"):
        return ctx.ints_operand(op, "out_size", tensor="OutSize"), None
    scales_attr = _interp_scales_attr(op)
    scale_tensor = v.optional_input("Scale")
    if v.type in _V1 and scales_attr:
        # v1 samples with in / out after truncating the size, which is what a fixed shape gives.
        return ctx.const_i32([int(np.float32(d) * np.float32(s)) for d, s in zip(in_hw, scales_attr)]), None
    if scale_tensor:
        scales = ctx.input(scale_tensor)
        if scales.type.rank == 0:  # a 0-d scale (paddle.to_tensor(2.0)) scales both axes, like a [1] one
            flat = ctx.temp(out_name, "scale_1d")
            ctx.add(T.RESHAPE, [scales, ctx.const_i32([1])], [flat])
            scales = flat
        if scales.type.dims and scales.type.dims[0] == 1:
            both = ctx.temp(out_name, "scales")
            ctx.add(T.CONCAT, [scales, scales, ctx.const_i32(0)], [both])
            scales = both
        return None, scales
    if scales_attr:
        return None, ctx.const_f32(scales_attr[:2])
    return ctx.const_i32([v.attr_int("out_h", -1), v.attr_int("out_w", -1)]), None


@converter("nearest_interp", "nearest_interp_v2", "bilinear_interp", "bilinear_interp_v2",
           emits=[T.RESIZE_NEAREST, T.RESIZE_LINEAR, T.CONCAT, T.CAST, T.RESHAPE, T.TRANSPOSE], check=_check_interp)
def convert_interp(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = is_channel_last(v.op, "data_layout")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    shape, scales = _interp_size_and_scales(ctx, v.op, x.type.dims[2:])
    align_corners = v.attr_bool("align_corners", True)
    if v.type.startswith("nearest"):
        resize = lambda ctx, x, out: ctx.add(  # noqa: E731
            T.RESIZE_NEAREST, [x, shape, scales, ctx.const_bool(align_corners)], [out])
    else:
        align_mode = v.attr_int("align_mode", 1)
        resize = lambda ctx, x, out: ctx.add(  # noqa: E731
            T.RESIZE_LINEAR, [x, shape, scales, ctx.const_bool(align_corners), ctx.const_i32(align_mode)], [out])
    steps = [("resize", resize)]
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(4))))
    emit_chain(ctx, out_name, x, steps)


# -- linear_interp_v2 (1-D) --------------------------------------------------------------------------------

_CHANNEL_FIRST = ("NCW", "NCHW", "AnyLayout", "ANYLAYOUT", "")
_CHANNEL_LAST = ("NWC", "NHWC")


def _scale_attr(op) -> float | None:
    scales = OpView(op).attr_floats("scale", [])
    return scales[0] if scales and scales[0] > 0 else None


def _check_linear_1d(op, ctx) -> str | None:
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


def _known_width(ctx, op, dims, channel_last: bool) -> int | None:
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
def convert_linear_interp_1d(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = v.attr_str("data_layout", "NCW") in _CHANNEL_LAST
    shape, scales = _size_and_scales(ctx, v.op)
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


# -- bicubic_interp_v2 ------------------------------------------------------------------------------------------
# No NNAdapter operation resizes bicubically, but Paddle's kernel is separable and, for sizes known at conversion,
# each axis is four taps: GATHER of the clamped neighbour rows (or columns), MUL by the weights of each output
# position, and the four products ADDed in Paddle's order (nnadapter.interp_rules computes the taps exactly as the
# host kernel does); along W first, then H, as Paddle. A NaN or inf reaches only the outputs whose taps read it.


def _bicubic_plan(ctx, op) -> tuple | str:
    """(x's spatial axes, input sizes, output sizes, scales), or a reason string when the sizes are not known now."""
    v = OpView(op)
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return "X has no operand yet"
    if len(dims) != 4:
        return f"only 2-D resizing of 4-D inputs is converted, X has rank {len(dims)}"
    axes = (1, 2) if is_channel_last(op, "data_layout") else (2, 3)
    in_hw = [dims[a] for a in axes]
    if not known_dims(in_hw):
        return "the input's spatial dims are not known at conversion (the taps are constants)"
    missing = []

    def tensors(slot):
        names = v.inputs(slot)
        if not names:
            return None
        values = [ctx.constant_value(name) for name in names]
        if any(value is None for value in values):
            missing.append(slot)
            return None
        return values

    out_hw, scales = output_size(in_hw, lambda name, default: v.attr(name, default), tensors)
    if missing:
        return f"its {', '.join(missing)} is computed at run time (the taps are constants)"
    if len(out_hw) != 2 or any(d <= 0 for d in out_hw):
        return f"no output size can be determined (got {out_hw})"
    return axes, in_hw, out_hw, scales


def _check_bicubic(op, ctx) -> str | None:
    v = OpView(op)
    reason = layout_reason(op, "data_layout")
    if reason:
        return reason
    if v.attr_str("interp_method", "bicubic") != "bicubic":
        return f"interp_method '{v.attr_str('interp_method', '')}' does not match bicubic_interp_v2"
    x = v.input("X")
    if ctx.has(x) and ctx.input(x).type.precision != Precision.FLOAT32:
        return f"X is {ctx.input(x).type.precision.name}: the taps are composed in float32 only"
    plan = _bicubic_plan(ctx, op)
    return plan if isinstance(plan, str) else None


@converter("bicubic_interp_v2", emits=[T.GATHER, T.MUL, T.ADD, T.ASSIGN], check=_check_bicubic)
def convert_bicubic_interp(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    plan = _bicubic_plan(ctx, v.op)
    if isinstance(plan, str):  # the check said so already; a caller without the check still gets the reason
        raise ctx.error(f"cannot be converted: {plan}")
    axes, in_hw, out_hw, scales = plan
    if list(out_hw) == list(in_hw):  # Paddle's kernel copies the input then (an inf stays an inf)
        ctx.add(T.ASSIGN, [x], [ctx.output(out_name)])
        return
    align_corners = v.attr_bool("align_corners", True)
    value = x
    for k in (1, 0):  # W, then H
        axis = axes[k]
        ratio = source_ratio(in_hw[k], out_hw[k], scales[k], align_corners, single_zero=True)
        indices, weights = cubic_taps(in_hw[k], out_hw[k], ratio, align_corners)
        shape = [1] * 4
        shape[axis] = out_hw[k]
        total: Operand | None = None
        for tap, (index, weight) in enumerate(zip(indices, weights)):
            rows = ctx.temp(out_name, f"axis{axis}_tap{tap}")
            ctx.add(T.GATHER, [value, ctx.const_i32(index), ctx.const_i32(axis)], [rows])
            term = binary(ctx, T.MUL, rows, ctx.const(weight.reshape(shape)), ctx.temp(out_name, f"axis{axis}_w{tap}"))
            last = k == 0 and tap == 3
            target = ctx.output(out_name) if last else ctx.temp(out_name, f"axis{axis}_sum{tap}")
            total = term if total is None else binary(ctx, T.ADD, total, term, target)
        assert total is not None  # four taps
        value = total
