"""Converters for the neural-network layer ops: convolutions (conv2d, depthwise_conv2d, conv2d_transpose,
depthwise_conv2d_transpose), pooling (pool2d, max_pool2d_with_index, unpool), normalizations (batch_norm, affine_channel,
sync_batch_norm, instance_norm, layer_norm, group_norm, lrn, norm, p_norm), matrix products (fc, mul,
matmul, matmul_v2, bmm, dot), softmax, log_softmax and dropout.

Layout and padding attributes are read through `layout`; operation chains, fused activations and
binary steps come from `emit`; quantized products from `quantization`.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from converters import quantization
from converters.attrs import input_dims, known_dims
from converters.emit import (
    FUSED_PRODUCT_EMITS,
    binary,
    binary_step,
    cast_to,
    compare,
    emit_chain,
    fuse_none,
    fuse_code_of,
    fused_activation_reason,
    fused_activation_steps,
    reduce_step,
    scalar_mul_step,
    transpose_step,
    unary_step,
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
    UNKNOWN, AutoPad, FuseCode, OperationType as T, PadMode, Precision, dtype_precision, precision_dtype,
)
from nnadapter_bridge.nnadapter.operations.window import window_out_size
from nnadapter_bridge.nnadapter.types import Operand

# -- family helpers --------------------------------------------------------------------------------------

def _param_float(like: Optional[Operand]) -> Precision:
    """The precision of a float parameter that goes with `like`: float64 for a float64 input (Paddle's
    double kernels take double parameters), float32 otherwise (float32, float16 and quantized inputs)."""
    return Precision.FLOAT64 if like is not None and like.type.precision == Precision.FLOAT64 else Precision.FLOAT32


def _float_param_const(ctx, value: np.ndarray, like: Optional[Operand], name: str):
    precision = _param_float(like)
    return ctx.const(np.asarray(value).astype(precision_dtype(precision)), precision, name=name)


def _bias_vector(ctx, op, slot: str, size: int, like_name: str, like: Optional[Operand] = None):
    """The op's bias as a 1-D operand of `size` values (a zero constant when the slot is empty), in the
    float precision that goes with the input `like`."""
    v = OpView(op)
    name = v.optional_input(slot)
    if name is None:
        return _float_param_const(ctx, np.zeros(size), like, f"{like_name}/zero_bias")
    if ctx.is_param(name):
        return _float_param_const(ctx, ctx.param(name).reshape(-1), like, name)
    return ctx.input(name)


# -- convolution -----------------------------------------------------------------------------------------------

def conv_act_type(op) -> str:
    """The fused activation of a conv op: `with_act` + `act_type`, or the legacy `fuse_relu`."""
    v = OpView(op)
    if v.attr("with_act", False):
        return v.attr_str("act_type", "relu")
    if v.attr("fuse_relu", False):
        return "relu"
    return ""


def _check_conv(op, ctx) -> Optional[str]:
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
    return (layout_reason(op, "data_format") or fused_activation_reason(op, conv_act_type(op))
            or _conv_quant_reason(op, ctx))


def _conv_quant_reason(op, ctx) -> Optional[str]:
    """Quantized path (int8 Filter): the scale attrs, a persistable Bias, per-channel only along C_out."""
    v = OpView(op)
    if not quantization.has_int8_weight(ctx, op, "Filter"):
        return None
    bias = v.optional_input("Bias")
    if bias and not ctx.is_param(bias):
        return "a quantized conv needs a persistable Bias (it becomes an int32 constant)"
    filter_dims = ctx.param(v.input("Filter")).shape
    transpose = v.type.endswith("_transpose")
    groups = int(v.attr("groups", 1) or 1)
    # A transposed filter [C_in, C_out/groups, kh, kw] has C_out along one axis only when groups == 1.
    channels = (filter_dims[1] if transpose else filter_dims[0])
    return quantization.product_quant_reason(ctx, op, "Input", "Filter", "Output", channels,
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
                       filter_channel_dim: int = 0, after: Optional[Callable] = None):
    if quantization.emit_integer_product(ctx, op):  # Paddle's fake or QDQ quantized form: int8 x int8 -> int32
        return
    v = OpView(op)
    out_name = v.output("Output")
    # A Paddle Lite int8 conv the mixed-precision config lists: float input and dequantized filter.
    floats = quantization.float_product_operands(ctx, op, "Input", "Filter", filter_channel_dim, out_name)
    x = floats[0] if floats else ctx.input(v.input("Input"))
    channel_last = is_channel_last(op, "data_format")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    filter_operand = floats[1] if floats else ctx.input(v.input("Filter"))
    quant = quantization.product_quant(ctx, op, "Input", "Filter", "Output")
    if quant is None:
        bias = _bias_vector(ctx, op, "Bias", out_channels_of(filter_operand.type.dims), out_name, x)
    else:  # quantized path (quantization): int8 filter, int32 bias, quantized input and output
        filter_operand = quantization.quantized_weight(ctx, v.input("Filter"), quant.weight_scales,
                                                     filter_channel_dim)
        bias = quantization.quantized_bias(ctx, v.optional_input("Bias"), quant,
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
            x = quantization.quantized_input(ctx, x, quant.input_scale, out_name)
            steps = quant.input_scale * np.asarray(quant.weight_scales, dtype=np.float64)
            sums = ctx.temp(out_name, "int32_sums", quantization.int32_sums_type(steps, 1))
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
            x = quantization.quantized_input(ctx, x, quant.input_scale, out_name)
            quantization.emit_quantized(ctx, operation, operands(x), out, quant.output_scale, out_name)

    steps = [("conv", main)] + fused_activation_steps(op, act_type)
    if after is not None:
        steps += after(ctx, op, out_name)
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(4))))
    emit_chain(ctx, out_name, x, steps)


@converter("conv2d", "depthwise_conv2d", emits=[T.CONV_2D, T.TRANSPOSE, *FUSED_PRODUCT_EMITS, *quantization.QUANT_EMITS],
           check=_check_conv)
def convert_conv2d(ctx, op):
    _convert_conv_like(ctx, op, T.CONV_2D, lambda filter_dims: filter_dims[0], lambda ctx, op: [])


def _check_conv_transpose(op, ctx) -> Optional[str]:
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


def _run_time_hw(ctx, op, attr: str, var: str) -> Operand:
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
                  *quantization.QUANT_EMITS],
           check=_check_conv_transpose)
def convert_conv2d_transpose(ctx, op):
    """A run-time output_size (ENet passes the skip tensor's shape) is any size from the default up to the default
    plus stride - 1: the transposed convolution with the largest output padding, sliced to it. A position's value
    does not depend on how far the output extends, so the slice is what Paddle computes at that size."""
    v = OpView(op)
    groups = int(v.attr("groups", 1) or 1)
    run_time_size = bool(var_attr_names(op.attrs.get("output_size")))
    if run_time_size and quantization.product_quant(ctx, op, "Input", "Filter", "Output") is not None:
        raise ctx.error("a quantized conv2d_transpose with a run-time output_size is not converted")
    # Paddle's transposed filter is [C_in, C_out / groups, kh, kw].
    _convert_conv_like(ctx, op, T.CONV_2D_TRANSPOSE, lambda filter_dims: filter_dims[1] * groups, _transpose_extra,
                       filter_channel_dim=1, after=_slice_to_output_size if run_time_size else None)


def _slice_to_output_size(ctx, op, out_name: str):
    size = _run_time_hw(ctx, op, "output_size", out_name)

    def step(ctx, x, out):
        ctx.add(T.SLICE, [x, ctx.const_i32([2, 3]), ctx.const_i32([0, 0]), size, None], [out])

    return [("output_size", step)]


# -- pooling ---------------------------------------------------------------------------------------------------

def _pool_geometry(op, dims):
    """(kind, kernel, strides, pads, auto_pad) where kind is 'window', 'global' or 'adaptive'."""
    v = OpView(op)
    ksize = v.attr_ints("ksize", [1, 1])
    strides = v.attr_ints("strides", [1, 1])
    pads = explicit_pads(v.attr_ints("paddings", [0, 0]))
    auto_pad = AUTO_PAD_OF[v.attr_str("padding_algorithm", "EXPLICIT")]
    if v.attr("global_pooling", False) or (v.attr("adaptive", False) and ksize == [1, 1]):
        return "global", ksize, strides, [0, 0, 0, 0], AutoPad.AUTO_PAD_NONE
    if v.attr("adaptive", False):
        return "adaptive", ksize, strides, pads, auto_pad
    return "window", ksize, strides, pads, auto_pad


def _pool_check_common(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = padding_reason(op)
    if reason:
        return reason
    if len(v.attr_ints("ksize", [1, 1])) != 2 or len(v.attr_ints("strides", [1, 1])) != 2:
        return "ksize and strides must hold 2 values"
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 4:
        return f"only 2-D pooling on 4-D inputs is converted, X has rank {len(dims)}"
    return layout_reason(op, "data_format")


def _overhang(size, kernel, stride, before, after) -> bool:
    """True when ceil_mode adds a window that reaches past the explicit padding."""
    span = size + before + after - kernel
    return span % stride != 0


def _trunc_div(a: int, b: int) -> int:
    """C++ integer division (toward zero), which Paddle's output-size formulas use."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _paddle_pool_windows(size: int, k: int, s: int, before: int, after: int, ceil_mode: bool, exclusive: bool):
    """Paddle's 2-D pooling along one axis: (output length, divisor per output position). The length is
    (size - k + before + after [+ s - 1]) / s + 1 in C++ integers (a kernel past the padded input still gives
    one position); window i spans [i*s - before, min(i*s - before + k, size + before)) (the leading pad bounds
    both ends: Paddle's kernel takes one pad per axis), its divisor is that span (exclusive=false) or the part
    inside the input (exclusive)."""
    out = _trunc_div(size - k + before + after + (s - 1 if ceil_mode else 0), s) + 1
    start = np.arange(max(out, 0)) * s - before
    end = np.minimum(start + k, size + before)
    if exclusive:
        return out, np.minimum(end, size) - np.maximum(start, 0)
    return out, end - start


def _operation_pool_windows(size: int, k: int, s: int, before: int, after: int, ceil_mode: bool, exclusive: bool):
    """The same for AVERAGE_POOL_2D / MAX_POOL_2D (nnadapter.operations.pool): floor/ceil length, divisor
    bounded by the trailing pad (count_include_pad) or the input."""
    out = window_out_size(size, k, s, before, after, 1, ceil_mode)
    start = np.arange(max(out, 0)) * s - before
    if exclusive:
        return out, np.minimum(start + k, size) - np.maximum(start, 0)
    return out, np.minimum(start + k, size + after) - start


def _paddle_pool_form(ctx, op, x, ksize, strides, pads, auto_pad, pooling_type):
    """None when the pooling operation computes what Paddle's kernel does for `x`; else (out_hw, correction):
    the output size and, for an average, the factor ksize-area / Paddle's divisor (NaN where that divisor is
    0: Paddle's 0 / 0) that turns an average over zero-padded ksize windows into Paddle's. Needs the spatial dims
    (unknown: None, the operation's own rule applies)."""
    v = OpView(op)
    dims = x.type.dims
    if auto_pad not in (AutoPad.AUTO_PAD_NONE, AutoPad.AUTO_PAD_VALID) or not known_dims(dims[2:4]) \
            or x.type.is_quantized:
        return None
    if auto_pad == AutoPad.AUTO_PAD_VALID:
        pads = [0, 0, 0, 0]
    ceil_mode = v.attr_bool("ceil_mode", False)
    exclusive = v.attr_bool("exclusive", True)
    paddle, ours = [], []
    for a in (0, 1):
        args = (int(dims[2 + a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1], ceil_mode, exclusive)
        paddle.append(_paddle_pool_windows(*args))
        ours.append(_operation_pool_windows(*args))
    out_hw = [paddle[0][0], paddle[1][0]]
    if min(out_hw) <= 0:  # _check_pool2d sends these to the host
        raise ctx.error(f"Paddle's pool2d output would be {out_hw} for an input of {list(dims)}")
    same_size = out_hw == [ours[0][0], ours[1][0]]
    if pooling_type == "max":
        return None if same_size else (out_hw, None)
    divisor = paddle[0][1][:, None] * paddle[1][1][None, :]
    if same_size and np.array_equal(divisor, ours[0][1][:, None] * ours[1][1][None, :]) and np.all(divisor > 0):
        return None
    with np.errstate(divide="ignore"):
        correction = np.where(divisor != 0, float(ksize[0] * ksize[1]) / np.where(divisor != 0, divisor, 1), np.nan)
    return out_hw, correction


def _paddle_pool_steps(ctx, op, x, ksize, strides, pads, auto_pad, pooling_type, form) -> list:
    """Chain steps for _paddle_pool_form's case: the input padded so every window of Paddle's output fits
    (zeros for an average, which then divides by the ksize area and is corrected; a max pools with that
    padding as its own, which it skips), then the pooling without ceil_mode."""
    out_hw, correction = form
    dims = x.type.dims
    if auto_pad == AutoPad.AUTO_PAD_VALID:
        pads = [0, 0, 0, 0]
    top, left = pads[0], pads[2]
    extra = [max((out_hw[a] - 1) * strides[a] + ksize[a] - pads[2 * a] - int(dims[2 + a]), 0) for a in (0, 1)]
    none = ctx.const_i32(int(AutoPad.AUTO_PAD_NONE))
    if pooling_type == "max":
        return [("pool", lambda ctx, x, out: ctx.add(
            T.MAX_POOL_2D, [x, none, ctx.const_i32([top, extra[0], left, extra[1]]), ctx.const_i32(ksize),
                            ctx.const_i32(strides), ctx.const_bool(False), ctx.const_bool(False),
                            ctx.const_i32(int(Precision.INT32)), fuse_none(ctx)], [out, None]))]
    steps = [
        ("padded", lambda ctx, x, out: ctx.add(
            T.PAD, [x, ctx.const_i32([0, 0, 0, 0, top, extra[0], left, extra[1]]),
                    ctx.const_i32(int(PadMode.CONSTANT)), ctx.const_like(0.0, x)], [out])),
        ("pool", lambda ctx, x, out: ctx.add(
            T.AVERAGE_POOL_2D, [x, none, ctx.const_i32([0, 0, 0, 0]), ctx.const_i32(ksize), ctx.const_i32(strides),
                                ctx.const_bool(False), ctx.const_bool(True), fuse_none(ctx)], [out])),
    ]
    if not np.all(correction == 1.0):
        dtype = precision_dtype(x.type.precision)
        factor = np.asarray(correction, dtype=dtype).reshape(1, 1, *out_hw)
        steps.append(("paddle_divisor", lambda ctx, x, out: binary(ctx, T.MUL, x, ctx.const(factor), out)))
    return steps


def _check_pool2d(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = _pool_check_common(op, ctx)
    if reason:
        return reason
    pooling_type = v.attr_str("pooling_type", "max")
    if pooling_type not in ("max", "avg"):
        return f"pooling_type '{pooling_type}' is not max or avg"
    dims = input_dims(ctx, op, "X")
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, dims or ())
    if dims is not None and known_dims(dims):
        if kind == "window" and auto_pad in (AutoPad.AUTO_PAD_NONE, AutoPad.AUTO_PAD_VALID):
            hw = dims[1:3] if is_channel_last(op, "data_format") else dims[2:4]
            pads = pads if auto_pad == AutoPad.AUTO_PAD_NONE else [0, 0, 0, 0]
            out_hw = [_paddle_pool_windows(int(hw[a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1],
                                           v.attr_bool("ceil_mode", False), True)[0] for a in (0, 1)]
            if min(out_hw) <= 0:
                return (f"the kernel {ksize} leaves Paddle an output of {out_hw} for an input of {list(dims)} (an "
                        f"empty tensor, or Paddle's error below 0), which the host kernel gives")
        return None  # the spatial dims are known: convert_pool2d takes Paddle's windows exactly
    if (pooling_type == "avg" and kind == "window" and v.attr("ceil_mode", False)
            and not v.attr("exclusive", True) and auto_pad == AutoPad.AUTO_PAD_NONE):
        # Paddle divides a non-exclusive average by the full ksize area even for the window ceil_mode
        # adds past the padding; AVERAGE_POOL_2D's count_include_pad never counts that overhang.
        if dims is None or not known_dims(dims):
            return "ceil_mode with exclusive=false needs known spatial dims to rule out a partial last window"
        hw = dims[1:3] if is_channel_last(op, "data_format") else dims[2:4]
        if any(_overhang(hw[a], ksize[a], strides[a], pads[2 * a], pads[2 * a + 1]) for a in (0, 1)):
            return ("avg pool2d with ceil_mode and exclusive=false over a partial last window: Paddle's divisor "
                    "(the whole ksize) differs from AVERAGE_POOL_2D's count_include_pad")
    return None


def _pool_steps(ctx, op, x, kind, ksize, strides, pads, auto_pad, pooling_type, index_operand=None):
    """The pooling operation (as a chain step) for an NCHW operand x."""
    v = OpView(op)
    ceil_mode = v.attr_bool("ceil_mode", False)
    dims = x.type.dims
    with_index = index_operand is not None
    if kind == "global" and known_dims(dims[2:4]):
        kind, ksize, strides, pads = "window", [dims[2], dims[3]], [1, 1], [0, 0, 0, 0]
        ceil_mode = False
    elif kind == "global":
        kind, ksize = "adaptive", [1, 1]  # one window over an unknown plane

    if kind == "adaptive":
        if pooling_type == "avg":
            return lambda ctx, x, out: ctx.add(T.ADAPTIVE_AVERAGE_POOL_2D, [x, ctx.const_i32(ksize)], [out])
        return lambda ctx, x, out: ctx.add(
            T.ADAPTIVE_MAX_POOL_2D,
            [x, ctx.const_i32(ksize), ctx.const_bool(with_index), ctx.const_i32(int(Precision.INT32))],
            [out, index_operand])
    head = lambda ctx: [ctx.const_i32(int(auto_pad)), ctx.const_i32(pads), ctx.const_i32(ksize),  # noqa: E731
                        ctx.const_i32(strides), ctx.const_bool(ceil_mode)]
    if pooling_type == "avg":
        include_pad = not v.attr_bool("exclusive", True)
        return lambda ctx, x, out: ctx.add(
            T.AVERAGE_POOL_2D, [x] + head(ctx) + [ctx.const_bool(include_pad), fuse_none(ctx)], [out])
    return lambda ctx, x, out: ctx.add(
        T.MAX_POOL_2D, [x] + head(ctx) + [ctx.const_bool(with_index), ctx.const_i32(int(Precision.INT32)), fuse_none(ctx)],
        [out, index_operand])


_POOL_EMITS = [T.AVERAGE_POOL_2D, T.MAX_POOL_2D, T.ADAPTIVE_AVERAGE_POOL_2D, T.ADAPTIVE_MAX_POOL_2D, T.TRANSPOSE,
               T.PAD, T.MUL]


@converter("pool2d", emits=_POOL_EMITS, check=_check_pool2d)
def convert_pool2d(ctx, op):
    v = OpView(op)
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = is_channel_last(op, "data_format")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, x.type.dims)
    pooling_type = v.attr_str("pooling_type", "max")
    form = _paddle_pool_form(ctx, op, x, ksize, strides, pads, auto_pad, pooling_type) if kind == "window" else None
    if form is not None:
        steps = _paddle_pool_steps(ctx, op, x, ksize, strides, pads, auto_pad, pooling_type, form)
    else:
        steps = [("pool", _pool_steps(ctx, op, x, kind, ksize, strides, pads, auto_pad, pooling_type))]
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(4))))
    emit_chain(ctx, out_name, x, steps)


def _check_max_pool_with_index(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = _pool_check_common(op, ctx)
    if reason:
        return reason
    if v.attr_str("padding_algorithm", "EXPLICIT") == "SAME":
        return "max_pool2d_with_index has no SAME padding"
    dims = input_dims(ctx, op, "X")
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, dims or ())
    if dims is not None and known_dims(dims[2:4]) and kind == "window":
        pads = pads if auto_pad == AutoPad.AUTO_PAD_NONE else [0, 0, 0, 0]
        ceil_mode = v.attr_bool("ceil_mode", False)
        sizes = [(_paddle_pool_windows(int(dims[2 + a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1], ceil_mode,
                                       True)[0],
                  window_out_size(int(dims[2 + a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1], 1, ceil_mode))
                 for a in (0, 1)]
        if any(paddle != ours for paddle, ours in sizes):
            return (f"the kernel {ksize} reaches past the padded input {list(dims)}: Paddle's output size "
                    f"{[p for p, _ in sizes]} (C++ integer division) is not MAX_POOL_2D's (the host kernel gives it)")
    return None


@converter("max_pool2d_with_index", emits=[T.MAX_POOL_2D, T.ADAPTIVE_MAX_POOL_2D], check=_check_max_pool_with_index)
def convert_max_pool2d_with_index(ctx, op):
    v = OpView(op)
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, x.type.dims)
    if kind == "global" and not v.attr("global_pooling", False):
        kind = "adaptive"  # adaptive [1, 1] keeps its flat argmax indices either way
    mask_name = v.optional_output("Mask")
    mask = ctx.output(mask_name) if mask_name else ctx.temp(out_name, "mask")
    step = _pool_steps(ctx, op, x, kind, ksize, strides, pads, auto_pad, "max", index_operand=mask)
    emit_chain(ctx, out_name, x, [("pool", step)])


# -- max unpooling ----------------------------------------------------------------------------------------------
#
# Paddle's unpool (F.max_unpool2d; ENet's decoder) writes each X value at its flat h * W_out + w position in
# Indices, zeros elsewhere. NNAdapter has no scatter. When the windows tile the input (ksize == strides, no
# padding) and Indices is the Mask of a max_pool2d_with_index with those same windows, every index lies in its
# own window: output position (h, w) can only receive the cell (h // kh, w // kw), and receives it exactly when
# that cell's index is h * W_out + w. So X and Indices are GATHERed at the clamped cell of every output position
# (rows past the tiled input clamp to the last cell, whose index never names them: zeros, as Paddle leaves them),
# compared with the flat positions (RANGE), and WHERE(equal, X, 0). The output size is the run-time
# `output_size` tensor (ENet passes the pooled tensor's shape), the constant one, or Paddle's default H * k.
# Other indices (from elsewhere, or overlapping windows) could land outside their window: the host kernel.

def _unpool_indices_source(op, ctx) -> Optional[str]:
    """Why Indices is not the Mask of a max_pool2d_with_index over the same ksize/strides (None when it is)."""
    v = OpView(op)
    graph, current = getattr(ctx, "graph", None), getattr(ctx, "current_op", None)
    if graph is None or current is None:
        return "the op producing Indices is not known here"
    name = v.input("Indices")
    writers = [w for w in graph.writers(name, current.block_idx) if w.index < current.index]
    pool = writers[-1] if writers else None
    if pool is None or pool.type != "max_pool2d_with_index" or name not in pool.output("Mask"):
        return "Indices is not the Mask of a max_pool2d_with_index (its indices may leave their windows)"
    p = OpView(ctx.resolved(pool))
    same = (p.attr_ints("ksize", []) == v.attr_ints("ksize", []) and p.attr_ints("strides", []) == v.attr_ints(
        "strides", []) and not any(p.attr_ints("paddings", [0, 0])) and not p.attr_bool("global_pooling")
        and not p.attr_bool("adaptive"))
    if not same:
        return "Indices comes from a max_pool2d_with_index whose windows are not the unpool's"
    return None


def _check_unpool(op, ctx) -> Optional[str]:
    v = OpView(op)
    if v.attr_str("unpooling_type", "max") != "max":
        return f"unpooling_type '{v.attr_str('unpooling_type', 'max')}' is not max"
    if v.attr_str("data_format", "NCHW") != "NCHW":
        return f"data_format '{v.attr_str('data_format', 'NCHW')}' is not NCHW"
    ksize, strides = v.attr_ints("ksize", []), v.attr_ints("strides", [])
    if len(ksize) != 2 or ksize != strides or any(v.attr_ints("paddings", [0, 0])):
        return (f"the windows (ksize {ksize}, strides {strides}, paddings {v.attr_ints('paddings', [0, 0])}) "
                "do not tile the input")
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 4:
        return f"X must be 4-D, got dims {list(dims)}"
    return _unpool_indices_source(op, ctx)


@converter("unpool", emits=[T.SHAPE, T.SLICE, T.CONCAT, T.RESHAPE, T.MUL, T.CAST, T.RANGE, T.FLOOR_DIV, T.SUB, T.MIN, T.GATHER,
                            T.UNSQUEEZE, T.ADD, T.EQUAL, T.WHERE], check=_check_unpool)
def convert_unpool(ctx, op):
    v = OpView(op)
    var = v.output("Out")
    x = ctx.input(v.input("X"))
    indices = ctx.input(v.input("Indices"))
    kernel = v.attr_ints("ksize", [])

    def out(type_, inputs, purpose):
        result = ctx.temp(var, purpose)
        ctx.add(type_, inputs, [result])
        return result

    def as_i32(value, purpose):
        return value if value.type.precision == Precision.INT32 else cast_to(
            ctx, value, Precision.INT32, ctx.temp(var, purpose))

    in_shape = out(T.SHAPE, [x, ctx.const_i32(int(Precision.INT32))], "in_shape")
    if var_attr_names(op.attrs.get("output_size")):  # a run-time size (ENet: the pooled tensor's shape)
        size = _run_time_hw(ctx, op, "output_size", var)
    elif v.attr_ints("output_size", []):
        size = ctx.const_i32(v.attr_ints("output_size", [])[-2:])
    else:  # Paddle's default (in - 1) * stride - 2 * padding + ksize, which is in * k here
        in_hw = out(T.SLICE, [in_shape, ctx.const_i32([0]), ctx.const_i32([2]), ctx.const_i32([4]), None], "in_hw")
        size = binary(ctx, T.MUL, in_hw, ctx.const_i32(kernel), ctx.temp(var, "out_hw"))
    size_w = out(T.SLICE, [size, ctx.const_i32([0]), ctx.const_i32([1]), ctx.const_i32([2]), None], "out_w")

    def source_cells(axis):
        """RANGE over output axis `axis` (2: rows, 3: columns), and the input cell each reads, clamped."""
        count = out(T.SLICE, [size, ctx.const_i32([0]), ctx.const_i32([axis - 2]), ctx.const_i32([axis - 1]),
                              None], f"count{axis}")
        positions = out(T.RANGE, [ctx.const_i32(0), count, ctx.const_i32(1)], f"positions{axis}")
        cell = binary(ctx, T.FLOOR_DIV, positions, ctx.const_i32(kernel[axis - 2]), ctx.temp(var, f"cell{axis}"))
        last = out(T.SLICE, [in_shape, ctx.const_i32([0]), ctx.const_i32([axis]), ctx.const_i32([axis + 1]), None],
                   f"in_count{axis}")
        last = binary(ctx, T.SUB, last, ctx.const_i32(1), ctx.temp(var, f"last{axis}"))
        return positions, binary(ctx, T.MIN, cell, last, ctx.temp(var, f"source{axis}"))

    rows, source_rows = source_cells(2)
    cols, source_cols = source_cells(3)

    def spread(value, purpose):
        by_row = out(T.GATHER, [value, source_rows, ctx.const_i32(2)], f"{purpose}_rows")
        return out(T.GATHER, [by_row, source_cols, ctx.const_i32(3)], purpose)

    row_starts = binary(ctx, T.MUL, out(T.UNSQUEEZE, [rows, ctx.const_i32([1])], "rows_column"), size_w,
                        ctx.temp(var, "row_starts"))
    positions = binary(ctx, T.ADD, row_starts, cols, ctx.temp(var, "positions"))
    chosen = compare(ctx, T.EQUAL, spread(as_i32(indices, "indices_i32"), "indices"), positions,
                     ctx.temp(var, "chosen"))
    ctx.add(T.WHERE, [chosen, spread(x, "values"), ctx.const_like(0, x)], [ctx.output(var)])


# -- normalization ---------------------------------------------------------------------------------------------

def _param_or_default(ctx, op, slot: str, size: Optional[int], fill: float, out_name: str, purpose: str,
                      like: Optional[Operand] = None):
    """The op's per-channel/per-element parameter operand, or a constant `fill` of `size` values, in the
    float precision that goes with the input `like`."""
    v = OpView(op)
    name = v.optional_input(slot)
    if name is not None:
        if ctx.is_param(name):
            return _float_param_const(ctx, ctx.param(name).reshape(-1), like, name)
        return ctx.input(name)
    return _float_param_const(ctx, np.full(size, fill), like, f"{out_name}/{purpose}")


def _check_channel_norm(layout_attr: str, default_layout: str = "NCHW", needs_affine_dims: bool = False):
    def check(op, ctx) -> Optional[str]:
        v = OpView(op)
        reason = layout_reason(op, layout_attr, default_layout)
        if reason:
            return reason
        dims = input_dims(ctx, op, "X")
        if dims is not None and len(dims) < 2:
            return f"X must have rank >= 2, got {len(dims)}"
        if needs_affine_dims and dims is not None and not (v.optional_input("Scale") and v.optional_input("Bias")):
            channel = dims[-1] if is_channel_last(op, layout_attr, default_layout) else dims[1]
            if channel == UNKNOWN or channel < 0:
                return "a missing Scale or Bias needs a known channel count"
        return None

    return check


def _channel_norm(ctx, op, layout_attr: str, default_layout: str, emit: Callable):
    """Run `emit(ctx, x_nchw, out)` on the channel-first view of X, transposing around it when needed."""
    v = OpView(op)
    out_name = v.output("Y")
    x = ctx.input(v.input("X"))
    channel_last = is_channel_last(op, layout_attr, default_layout) and len(x.type.dims) > 2
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    steps = [("norm", emit)]
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(len(x.type.dims)))))
    emit_chain(ctx, out_name, x, steps)


@converter("batch_norm", "sync_batch_norm", emits=[T.BATCH_NORMALIZATION, T.TRANSPOSE],
           check=_check_channel_norm("data_layout"))
def convert_batch_norm(ctx, op):
    v = OpView(op)
    # Inference form: the running Mean/Variance normalize; MeanOut, SavedMean etc. are unused.
    def emit(ctx, x, out):
        operands = [ctx.input(v.input(slot)) for slot in ("Scale", "Bias", "Mean", "Variance")]
        ctx.add(T.BATCH_NORMALIZATION, [x, *operands, ctx.const_f32(v.attr_float("epsilon", 1e-5))], [out])

    _channel_norm(ctx, op, "data_layout", "NCHW", emit)


@converter("instance_norm", emits=[T.INSTANCE_NORMALIZATION, T.TRANSPOSE],
           check=_check_channel_norm("data_format", needs_affine_dims=True))
def convert_instance_norm(ctx, op):
    v = OpView(op)
    def emit(ctx, x, out):
        channels = x.type.dims[1]
        out_name = v.output("Y")
        scale = _param_or_default(ctx, op, "Scale", channels, 1.0, out_name, "scale", x)
        bias = _param_or_default(ctx, op, "Bias", channels, 0.0, out_name, "bias", x)
        ctx.add(T.INSTANCE_NORMALIZATION, [x, scale, bias, ctx.const_f32(v.attr_float("epsilon", 1e-5))], [out])

    _channel_norm(ctx, op, "data_format", "NCHW", emit)


def _check_group_norm(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = _check_channel_norm("data_layout", needs_affine_dims=True)(op, ctx)
    if reason:
        return reason
    if int(v.attr("groups", 1) or 0) <= 0:
        return f"groups {v.attr('groups')} must be positive"
    return None


@converter("group_norm", emits=[T.GROUP_NORMALIZATION, T.TRANSPOSE], check=_check_group_norm)
def convert_group_norm(ctx, op):
    v = OpView(op)
    def emit(ctx, x, out):
        channels = x.type.dims[1]
        out_name = v.output("Y")
        scale = _param_or_default(ctx, op, "Scale", channels, 1.0, out_name, "scale", x)
        bias = _param_or_default(ctx, op, "Bias", channels, 0.0, out_name, "bias", x)
        ctx.add(T.GROUP_NORMALIZATION, [x, scale, bias, ctx.const_f32(v.attr_float("epsilon", 1e-5)),
                                        ctx.const_i32(v.attr_int("groups", 1))], [out])

    _channel_norm(ctx, op, "data_layout", "NCHW", emit)


def _check_affine_channel(op, ctx) -> Optional[str]:
    reason = layout_reason(op, "data_layout", "NCHW")
    if reason:
        return reason
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) < 2:
        return f"X must have a channel axis, got rank {len(dims)}"
    return None


@converter("affine_channel", emits=[T.MUL, T.ADD, T.UNSQUEEZE], check=_check_affine_channel)
def convert_affine_channel(ctx, op):
    """x * scale + bias with one scale and bias per channel (axis 1, or the last axis for NHWC)."""
    v = OpView(op)
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    rank = x.type.rank
    channel_last = is_channel_last(op, "data_layout")
    trailing = 0 if channel_last else rank - 2  # 1-dims after the channel so it lines up with axis 1

    def per_channel(slot):
        name = v.input(slot)
        if ctx.is_param(name):
            value = ctx.param(name).reshape((-1,) + (1,) * trailing)
            return _float_param_const(ctx, value, x, name)
        operand = ctx.input(name)
        if trailing:
            unsqueezed = ctx.temp(out_name, f"{slot.lower()}_per_channel")
            ctx.add(T.UNSQUEEZE, [operand, ctx.const_i32(list(range(1, trailing + 1)))], [unsqueezed])
            operand = unsqueezed
        return operand

    scaled = binary(ctx, T.MUL, x, per_channel("Scale"), ctx.temp(out_name, "scaled"))
    binary(ctx, T.ADD, scaled, per_channel("Bias"), ctx.output(out_name))


def _check_layer_norm(op, ctx) -> Optional[str]:
    v = OpView(op)
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return None
    axis = v.attr_int("begin_norm_axis", 1)
    if not -len(dims) <= axis < len(dims):
        return f"begin_norm_axis {axis} is out of range for rank {len(dims)}"
    if not (v.optional_input("Scale") and v.optional_input("Bias")) and not known_dims(dims[axis:]):
        return "a missing Scale or Bias needs known normalized dims"
    return None


@converter("layer_norm", emits=[T.LAYER_NORMALIZATION], check=_check_layer_norm)
def convert_layer_norm(ctx, op):
    v = OpView(op)
    out_name = v.output("Y")
    x = ctx.input(v.input("X"))
    axis = v.attr_int("begin_norm_axis", 1)
    axis = axis + len(x.type.dims) if axis < 0 else axis
    size = int(np.prod(x.type.dims[axis:])) if known_dims(x.type.dims[axis:]) else None
    scale = _param_or_default(ctx, op, "Scale", size, 1.0, out_name, "scale", x)
    bias = _param_or_default(ctx, op, "Bias", size, 0.0, out_name, "bias", x)
    epsilon = ctx.const_f32(v.attr_float("epsilon", 1e-5))
    ctx.add(T.LAYER_NORMALIZATION, [x, scale, bias, ctx.const_i32(axis), epsilon], [ctx.output(out_name)])


def _check_lrn(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = layout_reason(op, "data_format", "AnyLayout")
    if reason:
        return reason
    if v.attr_int("n", 5) <= 0:
        return f"n {v.attr('n')} must be positive"
    return None


@converter("lrn", emits=[T.LRN, T.TRANSPOSE], check=_check_lrn)
def convert_lrn(ctx, op):
    v = OpView(op)
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = is_channel_last(op, "data_format", "AnyLayout")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    # Paddle's lrn: x / (k + alpha * sum of x^2 over the n-channel window)^beta (alpha not divided by n),
    # the same form as LRN's bias/alpha/beta.
    operands = lambda ctx: [ctx.const_i32(v.attr_int("n", 5)), ctx.const_f32(v.attr_float("k", 2.0)),  # noqa: E731
                            ctx.const_f32(v.attr_float("alpha", 1e-4)), ctx.const_f32(v.attr_float("beta", 0.75))]
    steps = [("lrn", lambda ctx, x, out: ctx.add(T.LRN, [x] + operands(ctx), [out]))]
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(len(x.type.dims)))))
    emit_chain(ctx, out_name, x, steps)


@converter("norm", emits=[T.MUL, T.REDUCE_SUM, T.ADD, T.POW, T.DIV])
def convert_norm(ctx, op):
    v = OpView(op)
    # Paddle's norm is x / sqrt(sum(x^2) + epsilon) along axis, with Norm = sqrt(sum(x^2) + epsilon).
    # LP_NORMALIZATION adds epsilon outside the root, which differs for small vectors, so spell it out.
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    axis = v.attr_int("axis", 1)
    epsilon = v.attr_float("epsilon", 1e-10)
    norm_name = v.optional_output("Norm") or f"{out_name}/norm"
    norm = emit_chain(ctx, norm_name, x, [
        ("square", lambda ctx, x, out: binary(ctx, T.MUL, x, x, out)),
        ("sum", reduce_step(T.REDUCE_SUM, [axis], True)),
        ("add_epsilon", binary_step(T.ADD, lambda ctx, x: ctx.const_like(epsilon, x))),
        ("sqrt", binary_step(T.POW, lambda ctx, x: ctx.const_like(0.5, x))),
    ])
    binary(ctx, T.DIV, x, norm, ctx.output(out_name))


def _count_non_zero_step(ctx, x, out):
    """Paddle's p_norm with porder 0: `(x != 0).cast<T>()` summed by the next step (NaN counts as non-zero)."""
    test = compare(ctx, T.NOT_EQUAL, x, ctx.const_like(0.0, x), ctx.temp(out.name or "p_norm", "non_zero_test"))
    cast_to(ctx, test, x.type.precision, out)


@converter("p_norm", emits=[T.ABS, T.POW, T.REDUCE_SUM, T.REDUCE_MAX, T.MUL, T.RESHAPE, T.SQUEEZE, T.NOT_EQUAL,
                            T.CAST, T.FILL_LIKE])
def convert_p_norm(ctx, op):
    v = OpView(op)
    # p_norm is the norm itself: (sum |x|^p)^(1/p) over axis; +inf / -inf orders are max / min of |x|; order 0
    # counts the non-zeros. epsilon only guards Paddle's gradient.
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    porder = v.attr_float("porder", 2.0)
    keepdim = v.attr_bool("keepdim", False)
    asvector = v.attr_bool("asvector", False)
    steps = []
    rank = len(x.type.dims)
    if rank == 0 and not asvector:
        # Paddle's kernel reduces a 0-d x along `axis` over no element at all: 0 (the empty sum, whatever the
        # order), -inf for the max of order +inf, +inf for the min of order -inf; the result is 0-d.
        empty = -np.inf if porder == np.inf else np.inf if porder == -np.inf else 0.0
        value = ctx.const(np.asarray([empty], dtype=precision_dtype(x.type.precision)), x.type.precision)
        ctx.add(T.FILL_LIKE, [x, value], [ctx.output(out_name)])
        return
    if asvector:
        steps.append(("flatten", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([-1])], [out])))
        axis = 0
    else:
        axis = v.attr_int("axis", -1)
    steps.append(("abs", unary_step(T.ABS)))
    # Reduce keeping the axis so the constants of the later steps (shape [1]) broadcast without
    # growing a 0-D result; SQUEEZE drops the axis at the end.
    if np.isinf(porder):
        negate = porder < 0
        if negate:  # min |x| = -max(-|x|)
            steps.append(("negate", scalar_mul_step(-1.0)))
        steps.append(("max", reduce_step(T.REDUCE_MAX, [axis], True)))
        if negate:
            steps.append(("negate_back", scalar_mul_step(-1.0)))
    elif porder == 0:
        steps.append(("non_zero", _count_non_zero_step))
        steps.append(("sum", reduce_step(T.REDUCE_SUM, [axis], True)))
    else:
        if porder != 1.0:
            steps.append(("pow", binary_step(T.POW, lambda ctx, x: ctx.const_like(porder, x))))
        steps.append(("sum", reduce_step(T.REDUCE_SUM, [axis], True)))
        if porder != 1.0:
            steps.append(("root", binary_step(T.POW, lambda ctx, x: ctx.const_like(1.0 / porder, x))))
    # With asvector Paddle's result is [1] * rank(x) under keepdim (0-D for a 0-D x), else 0-D; the
    # flattened reduction above has shape [1].
    if asvector and keepdim and rank > 1:
        steps.append(("keepdim", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([1] * rank)], [out])))
    elif not keepdim or (asvector and rank == 0):
        steps.append(("squeeze", lambda ctx, x, out: ctx.add(T.SQUEEZE, [x, ctx.const_i32([axis])], [out])))
    emit_chain(ctx, out_name, x, steps)


# -- softmax -----------------------------------------------------------------------------------------------------

def _softmax(ctx, op, operation: T, scalar_result: float) -> None:
    """SOFTMAX / LOG_SOFTMAX along `axis`. On a 0-d X Paddle's kernel does not compute: it writes 1 (0 for
    log_softmax) into a 0-d Out, even for a NaN or inf X, so a FILL_LIKE of that value is the exact form
    (and every driver takes it, where onnxruntime refuses a rank-0 Softmax)."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    if x.type.rank == 0:
        precision = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
        value = ctx.const(np.asarray([scalar_result], dtype=precision_dtype(precision)), precision)
        ctx.add(T.FILL_LIKE, [x, value], [out])
        return
    ctx.add(operation, [x, ctx.const_i32(v.attr_int("axis", -1))], [out])


def _check_softmax(op, ctx) -> Optional[str]:
    v = OpView(op)
    x = v.optional_input("X")
    if x and ctx.has(x) and ctx.rank(x) == 0 and v.attr_int("axis", -1) not in (-1, 0):
        return f"axis {v.attr('axis')} is out of range for a 0-d X (Paddle takes -1 or 0)"
    return None


@converter("softmax", emits=[T.SOFTMAX, T.FILL_LIKE], check=_check_softmax)
def convert_softmax(ctx, op):
    _softmax(ctx, op, T.SOFTMAX, 1.0)


@converter("log_softmax", emits=[T.LOG_SOFTMAX, T.FILL_LIKE], check=_check_softmax)
def convert_log_softmax(ctx, op):
    _softmax(ctx, op, T.LOG_SOFTMAX, 0.0)


# -- dropout -----------------------------------------------------------------------------------------------------

@converter("dropout", emits=[T.MUL])
def convert_dropout(ctx, op):
    v = OpView(op)
    # Inference: upscale_in_train already scaled while training (identity now); downgrade_in_infer
    # scales by the keep probability. Paddle Lite emits a MUL either way; so do we.
    x = ctx.input(v.input("X"))
    if v.attr_str("dropout_implementation", "downgrade_in_infer") == "upscale_in_train":
        factor = 1.0
    else:
        factor = 1.0 - v.attr_float("dropout_prob", 0.5)
    binary(ctx, T.MUL, x, ctx.const_like(factor, x), ctx.output(v.output("Out")))


# -- matrix products --------------------------------------------------------------------------------------------

# Quantized products (an int8 persistable weight with Paddle Lite's scale attrs) go through quantization's
# QUANTIZE -> FULLY_CONNECTED -> DEQUANTIZE step; FULLY_CONNECTED flattens the input to rows, so the
# output is reshaped back to the input's leading dims.

def _quant_matmul_reason(op, ctx, x_slot: str, w_slot: str, out_slot: str, lead_count: Optional[int],
                         channel_dim: int) -> Optional[str]:
    """Why the quantized path cannot take this op (None when it can or the weight is not int8).
    `lead_count`: how many leading X dims the output keeps (None: all but the last)."""
    v = OpView(op)
    if not quantization.has_int8_weight(ctx, op, w_slot):
        return None
    w = ctx.param(v.input(w_slot))
    if w.ndim != 2:
        return f"a quantized {w_slot} must be 2-D, got shape {list(w.shape)}"
    dims = input_dims(ctx, op, x_slot)
    if dims is not None:
        lead = dims[:lead_count] if lead_count is not None else dims[:-1]
        if len(lead) == 0:
            return f"a quantized product needs {x_slot} of rank >= 2"
        if len(lead) > 1 and sum(1 for d in lead if not known_dims([d])) > 1:
            return f"{x_slot} needs at most one unknown leading dim to reshape the quantized product back"
    return quantization.product_quant_reason(ctx, op, x_slot, w_slot, out_slot, w.shape[channel_dim],
                                           float_output_ok=True)


def _quant_matmul_steps(ctx, op, quant, x, w_slot: str, channel_dim: int, bias_name: Optional[str],
                        fuse: FuseCode, out_name: str, lead_count: Optional[int]) -> list:
    """Chain steps of a quantized product: the quantized FULLY_CONNECTED, then the reshape back."""
    v = OpView(op)
    steps = [("matmul_quant", quantization.quantized_fc_step(ctx, op, quant, v.input(w_slot), channel_dim,
                                                           bias_name, fuse, out_name))]
    lead = list(x.type.dims[:lead_count] if lead_count is not None else x.type.dims[:-1])
    if len(lead) > 1:
        units = ctx.param(v.input(w_slot)).shape[channel_dim]
        shape = [d if known_dims([d]) else -1 for d in lead] + [units]
        steps.append(("out_shape", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32(shape)], [out])))
    return steps


_QUANT_MATMUL_EMITS = [T.FULLY_CONNECTED, T.RESHAPE, *quantization.QUANT_EMITS]


def _check_fc(op, ctx) -> Optional[str]:
    v = OpView(op)
    if v.attr("padding_weights", False):
        return "padding_weights (W stored with 4 padding rows/columns) is not converted"
    w = v.optional_input("W")
    if w is None or not (ctx.is_param(w) or _is_constant_operand(ctx, w)):
        return "W must be a persistable 2-D weight"
    w_dims = ctx.param(w).shape if ctx.is_param(w) else ctx.dims(w)
    if len(w_dims) != 2:
        return f"W must be 2-D, got shape {list(w_dims)}"
    bias = v.optional_input("Bias")
    if quantization.has_int8_weight(ctx, op, "W") and bias and not ctx.is_param(bias):
        return "a quantized fc needs a persistable Bias (it becomes an int32 constant)"
    return (fused_activation_reason(op, v.attr_str("activation_type", ""))
            or _quant_matmul_reason(op, ctx, "Input", "W", "Out", v.attr_int("in_num_col_dims", 1), 1))


def _is_constant_operand(ctx, name: str) -> bool:
    """True when `name` is bound to a constant operand (a weight folded by dequantize_linear) or to the
    DEQUANTIZE of one (an int8 weight read through dequantize_linear)."""
    if not ctx.has(name) or ctx.is_param(name):
        return False
    operand = ctx.input(name)
    return operand.is_constant or quantization.is_dequantized_constant(ctx, operand)


@converter("fc", emits=[T.RESHAPE, T.MAT_MUL, T.ADD, *FUSED_PRODUCT_EMITS, *_QUANT_MATMUL_EMITS], check=_check_fc)
def convert_fc(ctx, op):
    v = OpView(op)
    out_name = v.output("Out")
    floats = quantization.float_product_operands(ctx, op, "Input", "W", 1, out_name)  # listed in mixed precision
    x = floats[0] if floats else ctx.input(v.input("Input"))
    w = floats[1] if floats else ctx.input(v.input("W"))
    k, n = w.type.dims
    num_col_dims = v.attr_int("in_num_col_dims", 1)
    act_type = v.attr_str("activation_type", "")
    fuse = fuse_code_of(act_type)
    fuse = FuseCode.FUSED_NONE if fuse is None else fuse
    quant = quantization.product_quant(ctx, op, "Input", "W", "Out")
    if quant is not None:  # quantized path: the bias and the fuse code go into FULLY_CONNECTED
        steps = _quant_matmul_steps(ctx, op, quant, x, "W", 1, v.optional_input("Bias"), fuse, out_name,
                                    num_col_dims)
        emit_chain(ctx, out_name, x, steps + fused_activation_steps(op, act_type))
        return
    bias = _bias_vector(ctx, op, "Bias", n, out_name, x)
    steps = []
    if len(x.type.dims) != num_col_dims + 1:
        # Rows are the first in_num_col_dims dims; the rest flatten into the K columns.
        steps.append(("reshape", lambda ctx, x, out: ctx.add(
            T.RESHAPE, [x, ctx.const_i32([0] * num_col_dims + [-1])], [out])))
    steps.append(("matmul", lambda ctx, x, out: ctx.add(
        T.MAT_MUL, [x, w, ctx.const_bool(False), ctx.const_bool(False)], [out])))
    steps.append(("add", lambda ctx, x, out: binary(ctx, T.ADD, x, bias, out, fuse)))
    steps += fused_activation_steps(op, act_type)
    emit_chain(ctx, out_name, x, steps)


def _check_mul(op, ctx) -> Optional[str]:
    v = OpView(op)
    for slot, attr in (("X", "x_num_col_dims"), ("Y", "y_num_col_dims")):
        dims = input_dims(ctx, op, slot)
        k = v.attr_int(attr, 1)
        if dims is not None and not 1 <= k < len(dims):
            return f"{attr} {k} must be in [1, rank({slot}) = {len(dims)})"
        if slot == "Y" and dims is not None and not known_dims(dims):
            return "Y needs known dims to flatten it into a matrix"
    return _quant_matmul_reason(op, ctx, "X", "Y", "Out", v.attr_int("x_num_col_dims", 1), 1)


@converter("mul", emits=[T.RESHAPE, T.MAT_MUL, *_QUANT_MATMUL_EMITS], check=_check_mul)
def convert_mul(ctx, op):
    if quantization.emit_integer_product(ctx, op):  # Paddle's fake or QDQ quantized form: int8 x int8 -> int32
        return
    v = OpView(op)
    out_name = v.output("Out")
    x_name, y_name = v.input("X"), v.input("Y")
    floats = quantization.float_product_operands(ctx, op, "X", "Y", 1, out_name)  # listed in mixed precision
    x = floats[0] if floats else ctx.input(x_name)
    xk, yk = v.attr_int("x_num_col_dims", 1), v.attr_int("y_num_col_dims", 1)
    quant = quantization.product_quant(ctx, op, "X", "Y", "Out")
    if quant is not None:  # quantized path; the check keeps Y 2-D, so y_num_col_dims is 1
        emit_chain(ctx, out_name, x, _quant_matmul_steps(ctx, op, quant, x, "Y", 1, None, FuseCode.FUSED_NONE,
                                                         out_name, xk))
        return
    y_dims = ctx.dims(y_name)
    rows, cols = int(np.prod(y_dims[:yk])), int(np.prod(y_dims[yk:]))
    if floats:  # the quantized-path check keeps Y 2-D
        y = floats[1]
    elif ctx.is_param(y_name):
        matrix = ctx.param(y_name).reshape(rows, cols)
        y = ctx.const(matrix, dtype_precision(matrix.dtype), name=y_name)  # a float64 weight stays float64
    elif len(y_dims) != 2:
        y = ctx.temp(out_name, "y_matrix")
        ctx.add(T.RESHAPE, [ctx.input(y_name), ctx.const_i32([rows, cols])], [y])
    else:
        y = ctx.input(y_name)
    steps = []
    if len(x.type.dims) != xk + 1:
        steps.append(("x_matrix", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([0] * xk + [-1])], [out])))
    steps.append(("matmul", lambda ctx, x, out: ctx.add(T.MAT_MUL, [x, y, ctx.const_bool(False), ctx.const_bool(False)],
                                                        [out])))
    if len(y_dims) - yk > 1:
        # Out is X's leading dims followed by Y's trailing dims.
        tail = list(y_dims[yk:])
        steps.append(("out_shape", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([0] * xk + tail)], [out])))
    emit_chain(ctx, out_name, x, steps)


def _matmul(ctx, op, transpose_x: bool, transpose_y: bool, alpha: float = 1.0):
    if quantization.emit_integer_product(ctx, op):  # Paddle's fake or QDQ quantized form: int8 x int8 -> int32
        return None
    v = OpView(op)
    out_name = v.output("Out")
    # Listed in the mixed-precision config: float X and Y (Y's output units along axis 0 when transposed).
    floats = quantization.float_product_operands(ctx, op, "X", "Y", 0 if transpose_y else 1, out_name)
    x, y = floats if floats else (ctx.input(v.input("X")), ctx.input(v.input("Y")))
    quant = quantization.product_quant(ctx, op, "X", "Y", "Out")
    if quant is not None:  # quantized path: Y's output units are axis 0 when transposed, else axis 1
        steps = _quant_matmul_steps(ctx, op, quant, x, "Y", 0 if transpose_y else 1, None, FuseCode.FUSED_NONE,
                                    out_name, None)
    else:
        steps = [("matmul", lambda ctx, x, out: ctx.add(
            T.MAT_MUL, [x, y, ctx.const_bool(transpose_x), ctx.const_bool(transpose_y)], [out]))]
    if alpha != 1.0:
        steps.append(("alpha", scalar_mul_step(alpha)))
    return emit_chain(ctx, out_name, x, steps)


def _check_matmul(op, ctx) -> Optional[str]:
    v = OpView(op)
    x, y = input_dims(ctx, op, "X"), input_dims(ctx, op, "Y")
    if x is not None and y is not None and len(x) == 1 and len(y) == 1:
        return "matmul (v1) of two 1-D vectors gives shape [1], which MAT_MUL (a 0-D result) does not"
    for name in ("fused_reshape_X", "fused_reshape_Y", "fused_reshape_Out", "fused_transpose_X",
                 "fused_transpose_Y", "fused_transpose_Out"):
        if v.attr_ints(name, []):
            return f"the oneDNN-fused attribute {name} is not converted"
    if int(v.attr("head_number", 1) or 1) != 1:
        return "head_number > 1 (multi-head matmul) is not converted"
    return _quant_matmul_v_reason(op, ctx, "transpose_X", "transpose_Y")


def _quant_matmul_v_reason(op, ctx, trans_x_attr: str, trans_y_attr: str) -> Optional[str]:
    """The quantized-path conditions of matmul / matmul_v2: X not transposed, a 2-D int8 Y."""
    v = OpView(op)
    if not quantization.has_int8_weight(ctx, op, "Y"):
        return None
    if v.attr(trans_x_attr, False):
        return f"a quantized matmul with {trans_x_attr} is not converted"
    return _quant_matmul_reason(op, ctx, "X", "Y", "Out", None, 0 if v.attr(trans_y_attr, False) else 1)


@converter("matmul", emits=[T.MAT_MUL, T.MUL, *_QUANT_MATMUL_EMITS], check=_check_matmul)
def convert_matmul(ctx, op):
    v = OpView(op)
    _matmul(ctx, op, v.attr_bool("transpose_X", False), v.attr_bool("transpose_Y", False),
            v.attr_float("alpha", 1.0))


@converter("matmul_v2", emits=[T.MAT_MUL, *_QUANT_MATMUL_EMITS],
           check=lambda op, ctx: _quant_matmul_v_reason(op, ctx, "trans_x", "trans_y"))
def convert_matmul_v2(ctx, op):
    v = OpView(op)
    _matmul(ctx, op, v.attr_bool("trans_x", False), v.attr_bool("trans_y", False))


@converter("bmm", emits=[T.MAT_MUL])
def convert_bmm(ctx, op):
    _matmul(ctx, op, False, False)


def _check_dot(op, ctx) -> Optional[str]:
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) not in (1, 2):
        return f"dot takes 1-D or 2-D inputs, X has rank {len(dims)}"
    return None


@converter("dot", emits=[T.MUL, T.REDUCE_SUM], check=_check_dot)
def convert_dot(ctx, op):
    v = OpView(op)
    # Sum of products along the last axis: [N] x [N] -> [], [B, N] x [B, N] -> [B].
    out_name = v.output("Out")
    x, y = ctx.input(v.input("X")), ctx.input(v.input("Y"))
    emit_chain(ctx, out_name, x, [
        ("product", lambda ctx, x, out: binary(ctx, T.MUL, x, y, out)),
        ("sum", reduce_step(T.REDUCE_SUM, [-1], False)),
    ])
