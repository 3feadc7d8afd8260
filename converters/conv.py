"""Converters for the convolutions: conv2d, depthwise_conv2d (CONV_2D), conv2d_transpose and
depthwise_conv2d_transpose (CONV_2D_TRANSPOSE), with their bias, fused activation and quantized forms; unfold
(im2col, which NNAdapter has no operation for) as strided slices (SLICE) stacked and flattened; fold (col2im) when its
blocks tile the output, as a RESHAPE and TRANSPOSE (overlapping or padded blocks keep the host kernel).

Layout and padding attributes are read through `layout`; operation chains, fused activations and
binary steps come from `emit`; quantized products from `quantized_products`.

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry), `quantized_products` and the
standard.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from converters import quantized_products
from converters.attrs import bias_vector, input_dims, known_dim
from converters.context import ConversionContext
from converters.emit import (
    FUSED_PRODUCT_EMITS,
    binary,
    cast_to,
    emit_chain,
    fuse_code_of,
    fused_activation_reason,
    fused_activation_steps,
    transpose_step,
)
from converters.layout import (
    AUTO_PAD_OF,
    channel_last_perm,
    explicit_pads,
    is_channel_last,
    layout_reason,
    padding_reason,
    to_channel_first,
)
from converters.op_view import OpView, var_attr_names
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import (
    FuseCode,
    PadMode,
    Precision,
)
from nnadapter_bridge.nnadapter.codes import (
    OperationType as T,
)
from nnadapter_bridge.nnadapter.types import Operand

# -- convolution -----------------------------------------------------------------------------------------------

def conv_act_type(op) -> str:
    """The fused activation of a conv op: `with_act` + `act_type`, or the legacy `fuse_relu`."""
    v = OpView(op)
    if v.attr("with_act", False):
        return v.attr_str("act_type", "relu")
    if v.attr("fuse_relu", False):
        return "relu"
    return ""


def _check_conv(op, ctx) -> str | None:
    v = OpView(op)
    reason = padding_reason(op)
    if reason:
        return reason
    for name in ("strides", "dilations"):
        if len(v.attr_ints(name, [1, 1])) != 2:
            return f"{name} {v.attr_ints(name, [1, 1])} must hold 2 values"
    dims = input_dims(ctx, op, "Input")
    if dims is not None and len(dims) != 4:
        return f"only 2-D convolution on 4-D inputs is converted, Input has rank {len(dims)}"
    filter_dims = input_dims(ctx, op, "Filter")
    if filter_dims and not known_dim(filter_dims[0]):
        # A filter computed from the data (SOLOv2's dynamic kernels: rows picked by a nonzero): CONV_2D's bias and
        # output take their channel count from it
        return "the Filter's output channels are known only at run time (a filter computed from the data)"
    return (layout_reason(op, "data_format") or fused_activation_reason(op, conv_act_type(op))
            or _conv_quant_reason(op, ctx))


def _conv_quant_reason(op, ctx) -> str | None:
    """Quantized path (int8 Filter): the scale attrs, a persistable Bias, per-channel only along C_out."""
    v = OpView(op)
    if not quantized_products.has_int8_weight(ctx, op, "Filter"):
        return None
    bias = v.optional_input("Bias")
    if bias and not ctx.is_param(bias):
        return "a quantized conv needs a persistable Bias (it becomes an int32 constant)"
    filter_dims = ctx.param(v.input("Filter")).shape
    transpose = v.type.endswith("_transpose")
    groups = int(v.attr("groups", 1) or 1)
    # A transposed filter [C_in, C_out/groups, kh, kw] has C_out along one axis only when groups == 1.
    channels = (filter_dims[1] if transpose else filter_dims[0])
    return quantized_products.product_quant_reason(ctx, op, "Input", "Filter", "Output", channels,
                                           per_channel_ok=not transpose or groups == 1,
                                           float_output_ok=not transpose)


def _conv_window_operands(ctx, op):
    """auto_pad, pads, strides, group, dilations operands shared by CONV_2D and CONV_2D_TRANSPOSE."""
    v = OpView(op)
    pads = explicit_pads(v.attr_ints("paddings", [0, 0]))
    auto_pad = AUTO_PAD_OF[v.attr_str("padding_algorithm", "EXPLICIT")]
    return [ctx.const_i32(int(auto_pad)), ctx.const_i32(pads), ctx.const_i32(v.attr_ints("strides", [1, 1])),
            ctx.const_i32(int(v.attr("groups", 1) or 1)), ctx.const_i32(v.attr_ints("dilations", [1, 1]))]


def _convert_conv_like(ctx, op, operation: T, out_channels_of: Callable, extra_operands: Callable,
                       filter_channel_dim: int = 0, after: Callable | None = None):
    if quantized_products.emit_integer_product(ctx, op):  # Paddle's fake or QDQ quantized form: int8 x int8 -> int32
        return
    v = OpView(op)
    out_name = v.output("Output")
    # A Paddle Lite int8 conv the mixed-precision config lists: float input and dequantized filter.
    floats = quantized_products.float_product_operands(ctx, op, "Input", "Filter", filter_channel_dim, out_name)
    x = floats[0] if floats else ctx.input(v.input("Input"))
    channel_last = is_channel_last(op, "data_format")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    filter_operand = floats[1] if floats else ctx.input(v.input("Filter"))
    quant = quantized_products.product_quant(ctx, op, "Input", "Filter", "Output")
    if quant is None:
        bias = bias_vector(ctx, op, "Bias", out_channels_of(filter_operand.type.dims), out_name, x)
    else:  # quantized path (quantized_products): int8 filter, int32 bias, quantized input and output
        filter_operand = quantized_products.quantized_weight(ctx, v.input("Filter"), quant.weight_scales,
                                                     filter_channel_dim)
        bias = quantized_products.quantized_bias(ctx, v.optional_input("Bias"), quant,
                                         out_channels_of(filter_operand.type.dims), out_name)
    act_type = conv_act_type(op)
    fuse = fuse_code_of(act_type)
    fuse = FuseCode.FUSED_NONE if fuse is None else fuse

    def main(ctx, x, out):
        operands = lambda x: ([x, filter_operand, bias] + _conv_window_operands(ctx, op)  # noqa: E731
                              + extra_operands(ctx, op) + [ctx.const_i32(int(fuse))])
        if quant is None:
            ctx.add(operation, operands(x), [out])
        elif quant.output_scale is None:
            # Paddle Lite's int8 conv with no Output0_scale (the last one before a float op): the int32 sums,
            # dequantized at input_scale x weight_scale, then the float bias and the fused activation
            x = quantized_products.quantized_input(ctx, x, quant.input_scale, out_name)
            steps = quant.input_scale * np.asarray(quant.weight_scales, dtype=np.float64)
            sums = ctx.temp(out_name, "int32_sums", quantized_products.int32_sums_type(steps, 1))
            integer_operands = operands(x)
            integer_operands[2] = None
            integer_operands[-1] = ctx.const_i32(int(FuseCode.FUSED_NONE))
            ctx.add(operation, integer_operands, [sums])
            real = ctx.temp(out_name, "float_sums")
            ctx.add(T.DEQUANTIZE, [sums], [real])
            channels = out_channels_of(filter_operand.type.dims)
            bias_name = v.optional_input("Bias")
            bias_value = (np.zeros(channels, np.float32) if bias_name is None
                          else ctx.param(bias_name).astype(np.float32).reshape(-1))
            bias_operand = ctx.model.add_constant(np.ascontiguousarray(bias_value.reshape(1, channels, 1, 1)))
            binary(ctx, T.ADD, real, bias_operand, out, fuse=fuse)
        else:
            x = quantized_products.quantized_input(ctx, x, quant.input_scale, out_name)
            quantized_products.emit_quantized(ctx, operation, operands(x), out, quant.output_scale, out_name)

    steps = [("conv", main)] + fused_activation_steps(op, act_type)
    if after is not None:
        steps += after(ctx, op, out_name)
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(4))))
    emit_chain(ctx, out_name, x, steps)


@converter(
    "conv2d",
    "depthwise_conv2d",
    emits=[T.CONV_2D, T.TRANSPOSE, *FUSED_PRODUCT_EMITS, *quantized_products.QUANT_EMITS],
    check=_check_conv,
)
def convert_conv2d(ctx: ConversionContext, v: OpView) -> None:
    _convert_conv_like(ctx, v.op, T.CONV_2D, lambda filter_dims: filter_dims[0], lambda ctx, op: [])


def _check_conv_transpose(op, ctx) -> str | None:
    v = OpView(op)
    reason = _check_conv(op, ctx)
    if reason:
        return reason
    if var_attr_names(op.attrs.get("output_size")):
        if v.attr_ints("output_padding", []) or v.attr_str("padding_algorithm", "EXPLICIT") != "EXPLICIT":
            return "a run-time output_size is converted only with explicit paddings and no output_padding"
        if is_channel_last(op, "data_format"):
            return "a run-time output_size is converted only for a channel-first (NCHW) layout"
        return None
    for name in ("output_padding", "output_size"):
        values = v.attr_ints(name, [])
        if values and len(values) != 2:
            return f"{name} {values} must be empty or hold 2 values"
    return None


def _transpose_extra(ctx, op) -> list:
    v = OpView(op)
    if var_attr_names(op.attrs.get("output_size")):  # the largest output; _slice_to_output_size slices it
        return [ctx.const_i32([max(s, d) - 1 for s, d in zip(v.attr_ints("strides", [1, 1]),
                                                             v.attr_ints("dilations", [1, 1]))]), None]
    output_padding = v.attr_ints("output_padding", [])
    output_size = v.attr_ints("output_size", [])
    return [ctx.const_i32(output_padding) if output_padding else None,
            ctx.const_i32(output_size) if output_size else None]


def run_time_hw(ctx, op, attr: str, var: str) -> Operand:
    """The last two values of the Variable-valued attribute `attr` (one tensor, or one tensor per value) as an int32
    [2] operand computed at run time."""
    pieces = []
    for k, ref in enumerate(var_attr_names(op.attrs.get(attr))):
        piece = ctx.input(ref)
        if piece.type.precision != Precision.INT32:
            piece = cast_to(ctx, piece, Precision.INT32, ctx.temp(var, f"{attr}{k}_i32"))
        if len(piece.type.dims) == 0:
            flat = ctx.temp(var, f"{attr}{k}_flat")
            ctx.add(T.RESHAPE, [piece, ctx.const_i32([1])], [flat])
            piece = flat
        pieces.append(piece)
    size = pieces[0]
    if len(pieces) > 1:
        size = ctx.temp(var, attr)
        ctx.add(T.CONCAT, [*pieces, ctx.const_i32(0)], [size])
    hw = ctx.temp(var, f"{attr}_hw")
    ctx.add(T.SLICE, [size, ctx.const_i32([0]), ctx.const_i32([-2]), ctx.const_i32([np.iinfo(np.int32).max]), None],
            [hw])
    return hw


@converter("conv2d_transpose", "depthwise_conv2d_transpose",
           emits=[T.CONV_2D_TRANSPOSE, T.TRANSPOSE, T.SLICE, T.CONCAT, T.CAST, T.RESHAPE, *FUSED_PRODUCT_EMITS,
                  *quantized_products.QUANT_EMITS],
           check=_check_conv_transpose)
def convert_conv2d_transpose(ctx: ConversionContext, v: OpView) -> None:
    """A run-time output_size (ENet passes the skip tensor's shape) is any size from the default up to the default
    plus stride - 1: the transposed convolution with the largest output padding, sliced to it. A position's value
    does not depend on how far the output extends, so the slice is what Paddle computes at that size."""
    groups = int(v.attr("groups", 1) or 1)
    run_time_size = bool(var_attr_names(v.op.attrs.get("output_size")))
    if run_time_size and quantized_products.product_quant(ctx, v.op, "Input", "Filter", "Output") is not None:
        raise ctx.error("a quantized conv2d_transpose with a run-time output_size is not converted")
    # Paddle's transposed filter is [C_in, C_out / groups, kh, kw].
    _convert_conv_like(ctx, v.op, T.CONV_2D_TRANSPOSE, lambda filter_dims: filter_dims[1] * groups, _transpose_extra,
                       filter_channel_dim=1, after=_slice_to_output_size if run_time_size else None)


def _slice_to_output_size(ctx, op, out_name: str):
    size = run_time_hw(ctx, op, "output_size", out_name)

    def step(ctx, x, out):
        ctx.add(T.SLICE, [x, ctx.const_i32([2, 3]), ctx.const_i32([0, 0]), size, None], [out])

    return [("output_size", step)]


# -- unfold (im2col) -------------------------------------------------------------------------------------------

def _unfold_geometry(v: OpView) -> tuple[list, list, list, list]:
    """(kernel, strides, dilations, [top, left, bottom, right]) of an unfold op; one or two values stand for all."""
    def pair(name):
        values = v.attr_ints(name, [1, 1])
        return values * 2 if len(values) == 1 else values

    paddings = v.attr_ints("paddings", [0, 0, 0, 0])
    if len(paddings) == 1:
        paddings = paddings * 4
    elif len(paddings) == 2:
        paddings = paddings * 2
    return pair("kernel_sizes"), pair("strides"), pair("dilations"), paddings


def _check_unfold(op, ctx) -> str | None:
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return None
    if len(dims) != 4:
        return f"X must be 4-D [N, C, H, W], got {list(dims)}"
    if not known_dim(dims[1]):
        return "the channel count is unknown: the [N, C*kh*kw, L] reshape needs it"
    kernel, strides, dilations, (top, left, bottom, right) = _unfold_geometry(OpView(op))
    for size, k, d, before, after in ((dims[2], kernel[0], dilations[0], top, bottom),
                                      (dims[3], kernel[1], dilations[1], left, right)):
        if known_dim(size) and size + before + after < d * (k - 1) + 1:
            return "the sliding blocks do not fit the padded input (Paddle raises; the host kernel says why)"
    return None


@converter("unfold", emits=[T.PAD, T.SLICE, T.STACK, T.RESHAPE], check=_check_unfold)
def convert_unfold(ctx: ConversionContext, v: OpView) -> None:
    """im2col as kh*kw strided slices of the zero-padded input, stacked behind the channel and flattened: Paddle's
    [N, C*kh*kw, L] with the column of block (i, j) of channel c at c*kh*kw + i*kw + j. Each slice is exact (a copy),
    so the result is Paddle's to the bit. The slice for kernel offset i starts at i*dilation and ends
    dilation*(k-1-i) before the end of the padded axis: with the stride as step that is exactly Paddle's
    (padded - dilation*(k-1) - 1) // stride + 1 positions, with no need to know the spatial size."""
    kernel, strides, dilations, (top, left, bottom, right) = _unfold_geometry(v)
    out_name = v.output("Y")
    x = ctx.input(v.input("X"))
    channels = int(x.type.dims[1])
    if any((top, left, bottom, right)):
        padded = ctx.temp(out_name, "padded")
        ctx.add(T.PAD, [x, ctx.const_i32([0, 0, 0, 0, top, bottom, left, right]),
                        ctx.const_i32(int(PadMode.CONSTANT)), ctx.const_like(0.0, x)], [padded])
        x = padded
    end = np.iinfo(np.int32).max
    blocks = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            h_stop, w_stop = dilations[0] * (kernel[0] - 1 - i), dilations[1] * (kernel[1] - 1 - j)
            block = ctx.temp(out_name, f"block{i}_{j}")
            ctx.add(T.SLICE, [x, ctx.const_i32([2, 3]), ctx.const_i32([i * dilations[0], j * dilations[1]]),
                              ctx.const_i32([-h_stop if h_stop else end, -w_stop if w_stop else end]),
                              ctx.const_i32(strides)], [block])
            blocks.append(block)
    stacked = ctx.temp(out_name, "blocks")
    ctx.add(T.STACK, [*blocks, ctx.const_i32(2)], [stacked])  # [N, C, kh*kw, out_h, out_w]
    ctx.add(T.RESHAPE, [stacked, ctx.const_i32([0, channels * kernel[0] * kernel[1], -1])], [ctx.output(out_name)])


# -- fold (col2im) ---------------------------------------------------------------------------------------------

def _fold_tiles(v: OpView) -> tuple[list, list] | None:
    """(output_sizes, kernel) of a fold whose blocks tile its output exactly (stride = kernel, no padding, no
    dilation, the output a whole number of blocks), else None."""
    def pair(name, default):
        values = v.attr_ints(name, default)
        return values * 2 if len(values) == 1 else values

    out, kernel = pair("output_sizes", [1, 1]), pair("kernel_sizes", [1, 1])
    if pair("strides", [1, 1]) != kernel or any(pair("dilations", [1, 1])[a] != 1 for a in (0, 1)):
        return None
    if any(v.attr_ints("paddings", [0, 0, 0, 0])) or any(out[a] % kernel[a] for a in (0, 1)):
        return None
    return out, kernel


def _check_fold(op, ctx) -> str | None:
    tiles = _fold_tiles(OpView(op))
    if tiles is None:
        return "only a fold whose blocks tile the output (stride = kernel, no padding or dilation) is converted"
    dims = input_dims(ctx, op, "X")
    if dims is not None:
        (out_h, out_w), (kh, kw) = tiles
        if len(dims) != 3 or not known_dim(dims[1]) or dims[1] % (kh * kw):
            return f"X {list(dims)} is not [N, C*{kh}*{kw}, L] with a known channel count"
        if known_dim(dims[2]) and dims[2] != (out_h // kh) * (out_w // kw):
            return f"X holds {dims[2]} blocks, not the {(out_h // kh) * (out_w // kw)} of a {out_h}x{out_w} output"
    return None


@converter("fold", emits=[T.RESHAPE, T.TRANSPOSE], check=_check_fold)
def convert_fold(ctx: ConversionContext, v: OpView) -> None:
    """Blocks that tile the output (MobileViTV2 folds its patches back): block (bh, bw)'s value (c, i, j) lands at
    (c, bh*kh + i, bw*kw + j), one copy each, so col2im is [N, C, kh, kw, BH, BW] -> [N, C, BH, kh, BW, kw]."""
    tiles = _fold_tiles(v)
    assert tiles is not None  # _check_fold
    (out_h, out_w), (kh, kw) = tiles
    out_name = v.output("Y")
    x = ctx.input(v.input("X"))
    channels = int(x.type.dims[1]) // (kh * kw)
    blocks = ctx.temp(out_name, "blocks")
    ctx.add(T.RESHAPE, [x, ctx.const_i32([0, channels, kh, kw, out_h // kh, out_w // kw])], [blocks])
    placed = ctx.temp(out_name, "placed")
    ctx.add(T.TRANSPOSE, [blocks, ctx.const_i32([0, 1, 4, 2, 5, 3])], [placed])
    ctx.add(T.RESHAPE, [placed, ctx.const_i32([0, channels, out_h, out_w])], [ctx.output(out_name)])
