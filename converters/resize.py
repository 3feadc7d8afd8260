"""Converters for the spatial-resampling ops of the NN family: padding (pad2d, pad3d, pad), resizing
(nearest_interp, bilinear_interp and their _v2 forms) and pixel_shuffle.

Tensor forms of attributes become operands: pad2d/pad3d `Paddings`, interp `OutSize`, `SizeTensor`
(a list of [1] tensors, CONCATenated) and `Scale`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from converters.attrs import input_dims, known_dims
from converters.emit import emit_chain, transpose_step
from converters.layout import channel_last_perm, is_channel_last, layout_reason, to_channel_first
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T, PadMode

# -- padding ----------------------------------------------------------------------------------------------------

_PAD_MODES = {"constant": PadMode.CONSTANT, "reflect": PadMode.REFLECT, "edge": PadMode.EDGE,
              "replicate": PadMode.REPLICATE}


def _emit_pad(ctx, op, x, pads_operand, mode: str, value: float):
    v = OpView(op)
    ctx.add(T.PAD, [x, pads_operand, ctx.const_i32(int(_PAD_MODES[mode])), ctx.const_like(value, x)],
            [ctx.output(v.output("Out"))])


def _check_pad_nd(spatial: int, default_format: str, *, circular: bool = False):
    def check(op, ctx) -> Optional[str]:
        v = OpView(op)
        mode = v.attr_str("mode", "constant")
        if circular and mode == "circular":
            runtime = v.optional_input("Paddings")
            if runtime and (ctx is None or ctx.constant_value(runtime) is None):
                return "mode 'circular' needs its paddings at conversion, the Paddings tensor is computed at run time"
            dims = input_dims(ctx, op, "X")
            if dims is not None and not known_dims(dims):
                return f"mode 'circular' needs the padded dims, X is {list(dims)}"
        elif mode not in _PAD_MODES:
            return f"mode '{mode}' has no NNAdapter pad mode (constant, reflect, edge, replicate)"
        reason = layout_reason(op, "data_format", default_format)
        if reason:
            return reason
        if not v.optional_input("Paddings") and len(v.attr_ints("paddings", [0] * 2 * spatial)) != 2 * spatial:
            return f"paddings must hold {2 * spatial} values"
        dims = input_dims(ctx, op, "X")
        if dims is not None and len(dims) != spatial + 2:
            return f"X must have rank {spatial + 2}, got {len(dims)}"
        return None

    return check


def _constant_pads(ctx, op, order: list, channel_last: bool, spatial: int) -> Optional[list]:
    """PAD's [begin, end] per axis from Paddle's paddings when known at conversion (else None); `order` lists,
    per spatial axis in data order (D, H, W), the positions of its (begin, end) in Paddle's paddings."""
    v = OpView(op)
    zeros = [0, 0]
    runtime = v.optional_input("Paddings")
    known = ctx.constant_value(runtime) if runtime else None
    if runtime is not None and known is None:
        return None
    values = np.asarray(known).reshape(-1).tolist() if runtime else v.attr_ints("paddings", [0] * 2 * spatial)
    spatial_pads = [int(values[i]) for begin_end in order for i in begin_end]
    return zeros + spatial_pads + zeros if channel_last else zeros + zeros + spatial_pads


def _pads_operand(ctx, op, order: list, channel_last: bool, spatial: int):
    """PAD's pads operand (see _constant_pads): a constant, or the run-time Paddings tensor reordered."""
    v = OpView(op)
    pads = _constant_pads(ctx, op, order, channel_last, spatial)
    if pads is not None:
        return ctx.const_i32(pads)
    runtime = v.optional_input("Paddings")
    # A run-time Paddings tensor: reorder it with GATHER when Paddle's order is not D, H, W, then CONCAT
    # the zeros of the batch and channel axes around it.
    paddings = ctx.input(runtime)
    flat_order = [i for begin_end in order for i in begin_end]
    out_name = v.output("Out")
    if flat_order != list(range(2 * spatial)):
        reordered = ctx.temp(out_name, "paddings")
        ctx.add(T.GATHER, [paddings, ctx.const_i32(flat_order), ctx.const_i32(0)], [reordered])
        paddings = reordered
    dtype = paddings.type.dtype
    zero2 = ctx.const(np.zeros(2, dtype=dtype))
    parts = [zero2, paddings, zero2] if channel_last else [zero2, zero2, paddings]
    pads = ctx.temp(out_name, "pads")
    ctx.add(T.CONCAT, parts + [ctx.const_i32(0)], [pads])
    return pads


@converter("pad2d", emits=[T.PAD, T.CONCAT], check=_check_pad_nd(2, "NCHW"))
def convert_pad2d(ctx, op):
    v = OpView(op)
    # Paddle: [top, bottom, left, right].
    x = ctx.input(v.input("X"))
    pads = _pads_operand(ctx, op, [(0, 1), (2, 3)], is_channel_last(op, "data_format"), 2)
    _emit_pad(ctx, op, x, pads, v.attr_str("mode", "constant"), v.attr_float("pad_value", 0.0))


def _emit_circular_pad(ctx, op, x, pads: list) -> None:
    """Paddle's circular padding: output index i of an axis of size n reads input ((i - begin) mod n), so a
    pad wider than the axis wraps around again; one GATHER of those constant indices per padded axis."""
    v = OpView(op)
    out_name = v.output("Out")
    padded = [axis for axis in range(len(pads) // 2) if pads[2 * axis] or pads[2 * axis + 1]]
    if not padded:
        ctx.add(T.ASSIGN, [x], [ctx.output(out_name)])
        return
    dims = ctx.dims(x)
    for k, axis in enumerate(padded):
        begin, end = pads[2 * axis], pads[2 * axis + 1]
        size = int(dims[axis])
        if size + begin + end < 0 or (size == 0 and begin + end > 0):
            raise ctx.error(f"circular padding ({begin}, {end}) of an axis of size {size}")
        indices = [(i - begin) % size for i in range(size + begin + end)]
        target = ctx.output(out_name) if k == len(padded) - 1 else ctx.temp(out_name, f"circular_{axis}")
        ctx.add(T.GATHER, [x, ctx.const_i32(indices), ctx.const_i32(axis)], [target])
        x = target


@converter("pad3d", emits=[T.PAD, T.CONCAT, T.GATHER, T.ASSIGN], check=_check_pad_nd(3, "NCDHW", circular=True))
def convert_pad3d(ctx, op):
    v = OpView(op)
    # Paddle: [left, right, top, bottom, front, back], i.e. W first; PAD wants D, H, W.
    x = ctx.input(v.input("X"))
    order, channel_last = [(4, 5), (2, 3), (0, 1)], is_channel_last(op, "data_format", "NCDHW")
    if v.attr_str("mode", "constant") == "circular":
        _emit_circular_pad(ctx, op, x, _constant_pads(ctx, op, order, channel_last, 3))
        return
    pads = _pads_operand(ctx, op, order, channel_last, 3)
    _emit_pad(ctx, op, x, pads, v.attr_str("mode", "constant"), v.attr_float("value", 0.0))


def _check_pad(op, ctx) -> Optional[str]:
    v = OpView(op)
    dims = input_dims(ctx, op, "X")
    paddings = v.attr_ints("paddings", [])
    if dims is not None and len(paddings) != 2 * len(dims):
        return f"paddings {paddings} must hold 2 * rank(X) = {2 * len(dims)} values"
    return None


@converter("pad", emits=[T.PAD], check=_check_pad)
def convert_pad(ctx, op):
    v = OpView(op)
    # The original pad op: [before_0, after_0, before_1, ...] over every axis, constant fill.
    x = ctx.input(v.input("X"))
    _emit_pad(ctx, op, x, ctx.const_i32(v.attr_ints("paddings", [])), "constant", v.attr_float("pad_value", 0.0))


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


def _check_interp(op, ctx) -> Optional[str]:
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
def convert_interp(ctx, op):
    v = OpView(op)
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = is_channel_last(op, "data_layout")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    shape, scales = _interp_size_and_scales(ctx, op, x.type.dims[2:])
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


# -- pixel_shuffle ------------------------------------------------------------------------------------------------

def _check_pixel_shuffle(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = layout_reason(op, "data_format")
    if reason:
        return reason
    factor = v.attr_int("upscale_factor", 1)
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return None
    if len(dims) != 4 or not known_dims(dims[1:]):
        return "pixel_shuffle needs a 4-D input with known channel and spatial dims"
    channels = dims[3] if is_channel_last(op, "data_format") else dims[1]
    if factor <= 0 or channels % (factor * factor):
        return f"{channels} channels do not split by upscale_factor {factor} squared"
    return None


@converter("pixel_shuffle", emits=[T.RESHAPE, T.TRANSPOSE], check=_check_pixel_shuffle)
def convert_pixel_shuffle(ctx, op):
    v = OpView(op)
    # [N, C*r*r, H, W] -> [N, C, r, r, H, W] -> [N, C, H, r, W, r] -> [N, C, H*r, W*r] (channel-first).
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    r = v.attr_int("upscale_factor", 1)
    if is_channel_last(op, "data_format"):
        _, h, w, c = x.type.dims
        split, perm, merged = [0, h, w, c // (r * r), r, r], [0, 1, 4, 2, 5, 3], [0, h * r, w * r, c // (r * r)]
    else:
        _, c, h, w = x.type.dims
        split, perm, merged = [0, c // (r * r), r, r, h, w], [0, 1, 4, 2, 5, 3], [0, c // (r * r), h * r, w * r]
    emit_chain(ctx, out_name, x, [
        ("split", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32(split)], [out])),
        ("interleave", transpose_step(perm)),
        ("merge", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32(merged)], [out])),
    ])
