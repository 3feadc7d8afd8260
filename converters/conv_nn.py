"""Converters for the neural-network layer ops: convolutions (conv2d, depthwise_conv2d, conv2d_transpose,
depthwise_conv2d_transpose), pooling (pool2d, max_pool2d_with_index), normalizations (batch_norm,
sync_batch_norm, instance_norm, layer_norm, group_norm, lrn, norm, p_norm), matrix products (fc, mul,
matmul, matmul_v2, bmm, dot), softmax, log_softmax and dropout.

Also the family helpers the sibling modules `conv_nn_resize` and `conv_detection` share: attribute
readers with Paddle's defaults, padding normalization, fused-activation unpacking, channel-last layout
handling (TRANSPOSE in, TRANSPOSE out) and `emit_chain`, which names every intermediate operand after
the op's output var.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from converters import conv_quant
from converters.context import fuse_code_of
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import UNKNOWN, AutoPad, FuseCode, OperationType as T, Precision

# -- attribute readers -------------------------------------------------------------------------------------

AUTO_PAD_OF = {"EXPLICIT": AutoPad.AUTO_PAD_NONE, "SAME": AutoPad.AUTO_PAD_SAME, "VALID": AutoPad.AUTO_PAD_VALID}
CHANNEL_FIRST = ("NCHW", "NCDHW", "AnyLayout", "ANYLAYOUT", "")
CHANNEL_LAST = ("NHWC", "NDHWC")


def _attr_list(op, name: str, default: Sequence, cast) -> list:
    """Attr `name` as a list (a scalar becomes one element), or `default` when the op lacks it."""
    value = op.attr(name)
    if value is None:
        return list(default)
    if isinstance(value, (int, float)):
        return [cast(value)]
    return [cast(v) for v in value]


def attr_ints(op, name: str, default: Sequence[int]) -> list:
    return _attr_list(op, name, default, int)


def attr_floats(op, name: str, default: Sequence[float]) -> list:
    return _attr_list(op, name, default, float)


def attr_str(op, name: str, default: str) -> str:
    value = op.attr(name)
    return default if value is None else str(value)


def first_input(op, slot: str) -> Optional[str]:
    names = op.input(slot)
    return names[0] if names else None


def first_output(op, slot: str) -> Optional[str]:
    names = op.output(slot)
    return names[0] if names else None


def explicit_pads(paddings: Sequence[int]) -> Optional[list]:
    """Paddle's 2-value [h, w] or 4-value [top, bottom, left, right] paddings as [top, bottom, left, right]."""
    if len(paddings) == 2:
        return [paddings[0], paddings[0], paddings[1], paddings[1]]
    if len(paddings) == 4:
        return list(paddings)
    return None


def layout_reason(op, name: str, default: str = "NCHW") -> Optional[str]:
    layout = attr_str(op, name, default)
    if layout not in CHANNEL_FIRST + CHANNEL_LAST:
        return f"{name} '{layout}' is neither channel-first (NCHW/NCDHW) nor channel-last (NHWC/NDHWC)"
    return None


def is_channel_last(op, name: str, default: str = "NCHW") -> bool:
    return attr_str(op, name, default) in CHANNEL_LAST


def known_dims(dims) -> bool:
    return all(d != UNKNOWN and d >= 0 for d in dims)


def input_dims(ctx, op, slot: str) -> Optional[tuple]:
    """Dims of the op's first `slot` input, or None when it has no operand yet (check before conversion)."""
    name = first_input(op, slot)
    if name is None or not ctx.has(name):
        return None
    return tuple(ctx.dims(name))


# -- emission helpers --------------------------------------------------------------------------------------

def emit_chain(ctx, out_name: str, x, steps: Sequence[tuple]):
    """Run `steps` [(purpose, fn(ctx, x, out))] in order, each reading the previous result; every step
    but the last writes a `<out_name>/<purpose>` temp, the last writes the output var's operand."""
    for i, (purpose, fn) in enumerate(steps):
        out = ctx.output(out_name) if i == len(steps) - 1 else ctx.temp(out_name, purpose)
        fn(ctx, x, out)
        x = out
    return x


def unary_step(operation: T) -> Callable:
    return lambda ctx, x, out: ctx.add(operation, [x], [out])


def transpose_step(perm: Sequence[int]) -> Callable:
    return lambda ctx, x, out: ctx.add(T.TRANSPOSE, [x, ctx.const_i32(list(perm))], [out])


def channel_first_perm(rank: int) -> list:
    """Permutation moving the last (channel) axis to position 1."""
    return [0, rank - 1] + list(range(1, rank - 1))


def channel_last_perm(rank: int) -> list:
    """The inverse of channel_first_perm."""
    return [0] + list(range(2, rank)) + [1]


def to_channel_first(ctx, x, out_name: str):
    """A TRANSPOSE of channel-last `x` to channel-first, as a `<out>/channel_first` temp."""
    perm = channel_first_perm(len(x.type.dims))
    temp = ctx.temp(out_name, "channel_first")
    ctx.add(T.TRANSPOSE, [x, ctx.const_i32(perm)], [temp])
    return temp


def scalar_mul_step(value: float) -> Callable:
    return lambda ctx, x, out: ctx.add(T.MUL, [x, ctx.const_like(value, x), ctx.const_i32(int(FuseCode.FUSED_NONE))],
                                       [out])


# Paddle activation names a fused op (conv2d with_act, fc activation_type) may carry, beyond the fuse codes.
_UNARY_ACTS = {"sigmoid": T.SIGMOID, "tanh": T.TANH, "log": T.LOG, "abs": T.ABS}
ACTIVATION_EMITS = [T.LEAKY_RELU, T.HARD_SWISH, T.MUL, *_UNARY_ACTS.values()]


def activation_reason(act_type: str) -> Optional[str]:
    if fuse_code_of(act_type) is not None or act_type in _UNARY_ACTS or act_type in ("leaky_relu", "hard_swish"):
        return None
    return f"fused activation '{act_type}' has no NNAdapter fuse code or operation here"


def activation_steps(op, act_type: str) -> list:
    """Extra operations for a fused activation that is not a fuse code (none for relu/relu1/relu6)."""
    if fuse_code_of(act_type) is not None:
        return []
    if act_type in _UNARY_ACTS:
        return [(act_type, unary_step(_UNARY_ACTS[act_type]))]
    if act_type == "leaky_relu":
        alpha = float(op.attr("leaky_relu_alpha", 0.02))
        return [("leaky_relu", lambda ctx, x, out: ctx.add(T.LEAKY_RELU, [x, ctx.const_f32(alpha)], [out]))]
    if act_type == "hard_swish":
        # Paddle: x * min(max(x + offset, 0), threshold) / scale
        #       = x * clip(x / threshold + offset / threshold, 0, 1) * (threshold / scale).
        threshold = float(op.attr("hard_swish_threshold", 6.0))
        scale = float(op.attr("hard_swish_scale", 6.0))
        offset = float(op.attr("hard_swish_offset", 3.0))
        steps = [("hard_swish", lambda ctx, x, out: ctx.add(
            T.HARD_SWISH, [x, ctx.const_f32(1.0 / threshold), ctx.const_f32(offset / threshold)], [out]))]
        if abs(threshold / scale - 1.0) > 1e-6:
            steps.append(("hard_swish_scale", scalar_mul_step(threshold / scale)))
        return steps
    raise ValueError(f"unchecked activation {act_type!r}")  # check() rejects these first


def bias_vector(ctx, op, slot: str, size: int, like_name: str):
    """The op's bias as a 1-D operand of `size` values (a zero constant when the slot is empty)."""
    name = first_input(op, slot)
    if name is None:
        return ctx.const(np.zeros(size, dtype=np.float32), name=f"{like_name}/zero_bias")
    if ctx.is_param(name):
        value = ctx.param(name).astype(np.float32).reshape(-1)
        return ctx.const(value, name=name)
    return ctx.input(name)


# -- convolution -----------------------------------------------------------------------------------------------

def conv_act_type(op) -> str:
    """The fused activation of a conv op: `with_act` + `act_type`, or the legacy `fuse_relu`."""
    if op.attr("with_act", False):
        return attr_str(op, "act_type", "relu")
    if op.attr("fuse_relu", False):
        return "relu"
    return ""


def _check_conv(op, ctx) -> Optional[str]:
    paddings = attr_ints(op, "paddings", [0, 0])
    if explicit_pads(paddings) is None:
        return f"paddings {paddings} must hold 2 or 4 values"
    algorithm = attr_str(op, "padding_algorithm", "EXPLICIT")
    if algorithm not in AUTO_PAD_OF:
        return f"padding_algorithm '{algorithm}' is not EXPLICIT, SAME or VALID"
    for name in ("strides", "dilations"):
        if len(attr_ints(op, name, [1, 1])) != 2:
            return f"{name} {attr_ints(op, name, [1, 1])} must hold 2 values"
    dims = input_dims(ctx, op, "Input")
    if dims is not None and len(dims) != 4:
        return f"only 2-D convolution on 4-D inputs is converted, Input has rank {len(dims)}"
    return (layout_reason(op, "data_format") or activation_reason(conv_act_type(op))
            or _conv_quant_reason(op, ctx))


def _conv_quant_reason(op, ctx) -> Optional[str]:
    """Quantized path (int8 Filter): the scale attrs, a persistable Bias, per-channel only along C_out."""
    if not conv_quant.has_int8_weight(ctx, op, "Filter"):
        return None
    bias = first_input(op, "Bias")
    if bias and not ctx.is_param(bias):
        return "a quantized conv needs a persistable Bias (it becomes an int32 constant)"
    filter_dims = ctx.param(first_input(op, "Filter")).shape
    transpose = op.type.endswith("_transpose")
    groups = int(op.attr("groups", 1) or 1)
    # A transposed filter [C_in, C_out/groups, kh, kw] has C_out along one axis only when groups == 1.
    channels = (filter_dims[1] if transpose else filter_dims[0])
    return conv_quant.product_quant_reason(ctx, op, "Input", "Filter", "Output", channels,
                                           per_channel_ok=not transpose or groups == 1)


def _conv_window_operands(ctx, op):
    """auto_pad, pads, strides, group, dilations operands shared by CONV_2D and CONV_2D_TRANSPOSE."""
    pads = explicit_pads(attr_ints(op, "paddings", [0, 0]))
    auto_pad = AUTO_PAD_OF[attr_str(op, "padding_algorithm", "EXPLICIT")]
    return [ctx.const_i32(int(auto_pad)), ctx.const_i32(pads), ctx.const_i32(attr_ints(op, "strides", [1, 1])),
            ctx.const_i32(int(op.attr("groups", 1) or 1)), ctx.const_i32(attr_ints(op, "dilations", [1, 1]))]


def _convert_conv_like(ctx, op, operation: T, out_channels_of: Callable, extra_operands: Callable,
                       filter_channel_dim: int = 0):
    out_name = first_output(op, "Output")
    x = ctx.input(first_input(op, "Input"))
    channel_last = is_channel_last(op, "data_format")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    filter_operand = ctx.input(first_input(op, "Filter"))
    quant = conv_quant.product_quant(ctx, op, "Input", "Filter", "Output")
    if quant is None:
        bias = bias_vector(ctx, op, "Bias", out_channels_of(filter_operand.type.dims), out_name)
    else:  # quantized path (conv_quant): int8 filter, int32 bias, quantized input and output
        filter_operand = conv_quant.quantized_weight(ctx, first_input(op, "Filter"), quant.weight_scales,
                                                     filter_channel_dim)
        bias = conv_quant.quantized_bias(ctx, first_input(op, "Bias"), quant,
                                         out_channels_of(filter_operand.type.dims), out_name)
    act_type = conv_act_type(op)
    fuse = fuse_code_of(act_type)
    fuse = FuseCode.FUSED_NONE if fuse is None else fuse

    def main(ctx, x, out):
        operands = lambda x: ([x, filter_operand, bias] + _conv_window_operands(ctx, op)  # noqa: E731
                              + extra_operands(ctx, op) + [ctx.const_i32(int(fuse))])
        if quant is None:
            ctx.add(operation, operands(x), [out])
        else:
            x = conv_quant.quantized_input(ctx, x, quant.input_scale, out_name)
            conv_quant.emit_quantized(ctx, operation, operands(x), out, quant.output_scale, out_name)

    steps = [("conv", main)] + activation_steps(op, act_type)
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(4))))
    emit_chain(ctx, out_name, x, steps)


@converter("conv2d", "depthwise_conv2d", emits=[T.CONV_2D, T.TRANSPOSE, *ACTIVATION_EMITS, *conv_quant.QUANT_EMITS],
           check=_check_conv)
def convert_conv2d(ctx, op):
    _convert_conv_like(ctx, op, T.CONV_2D, lambda filter_dims: filter_dims[0], lambda ctx, op: [])


def _check_conv_transpose(op, ctx) -> Optional[str]:
    reason = _check_conv(op, ctx)
    if reason:
        return reason
    for name in ("output_padding", "output_size"):
        values = attr_ints(op, name, [])
        if values and len(values) != 2:
            return f"{name} {values} must be empty or hold 2 values"
    return None


def _transpose_extra(ctx, op) -> list:
    output_padding = attr_ints(op, "output_padding", [])
    output_size = attr_ints(op, "output_size", [])
    return [ctx.const_i32(output_padding) if output_padding else None,
            ctx.const_i32(output_size) if output_size else None]


@converter("conv2d_transpose", "depthwise_conv2d_transpose",
           emits=[T.CONV_2D_TRANSPOSE, T.TRANSPOSE, *ACTIVATION_EMITS, *conv_quant.QUANT_EMITS],
           check=_check_conv_transpose)
def convert_conv2d_transpose(ctx, op):
    groups = int(op.attr("groups", 1) or 1)
    # Paddle's transposed filter is [C_in, C_out / groups, kh, kw].
    _convert_conv_like(ctx, op, T.CONV_2D_TRANSPOSE, lambda filter_dims: filter_dims[1] * groups, _transpose_extra,
                       filter_channel_dim=1)


# -- pooling ---------------------------------------------------------------------------------------------------

def _pool_geometry(op, dims):
    """(kind, kernel, strides, pads, auto_pad) where kind is 'window', 'global' or 'adaptive'."""
    ksize = attr_ints(op, "ksize", [1, 1])
    strides = attr_ints(op, "strides", [1, 1])
    pads = explicit_pads(attr_ints(op, "paddings", [0, 0]))
    auto_pad = AUTO_PAD_OF[attr_str(op, "padding_algorithm", "EXPLICIT")]
    if op.attr("global_pooling", False) or (op.attr("adaptive", False) and ksize == [1, 1]):
        return "global", ksize, strides, [0, 0, 0, 0], AutoPad.AUTO_PAD_NONE
    if op.attr("adaptive", False):
        return "adaptive", ksize, strides, pads, auto_pad
    return "window", ksize, strides, pads, auto_pad


def _pool_check_common(op, ctx) -> Optional[str]:
    paddings = attr_ints(op, "paddings", [0, 0])
    if explicit_pads(paddings) is None:
        return f"paddings {paddings} must hold 2 or 4 values"
    algorithm = attr_str(op, "padding_algorithm", "EXPLICIT")
    if algorithm not in AUTO_PAD_OF:
        return f"padding_algorithm '{algorithm}' is not EXPLICIT, SAME or VALID"
    if len(attr_ints(op, "ksize", [1, 1])) != 2 or len(attr_ints(op, "strides", [1, 1])) != 2:
        return "ksize and strides must hold 2 values"
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 4:
        return f"only 2-D pooling on 4-D inputs is converted, X has rank {len(dims)}"
    return layout_reason(op, "data_format")


def _overhang(size, kernel, stride, before, after) -> bool:
    """True when ceil_mode adds a window that reaches past the explicit padding."""
    span = size + before + after - kernel
    return span % stride != 0


def _check_pool2d(op, ctx) -> Optional[str]:
    reason = _pool_check_common(op, ctx)
    if reason:
        return reason
    pooling_type = attr_str(op, "pooling_type", "max")
    if pooling_type not in ("max", "avg"):
        return f"pooling_type '{pooling_type}' is not max or avg"
    dims = input_dims(ctx, op, "X")
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, dims or ())
    if (pooling_type == "avg" and kind == "window" and op.attr("ceil_mode", False)
            and not op.attr("exclusive", True) and auto_pad == AutoPad.AUTO_PAD_NONE):
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
    ceil_mode = bool(op.attr("ceil_mode", False))
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
    none = lambda ctx: ctx.const_i32(int(FuseCode.FUSED_NONE))  # noqa: E731
    if pooling_type == "avg":
        include_pad = not bool(op.attr("exclusive", True))
        return lambda ctx, x, out: ctx.add(
            T.AVERAGE_POOL_2D, [x] + head(ctx) + [ctx.const_bool(include_pad), none(ctx)], [out])
    return lambda ctx, x, out: ctx.add(
        T.MAX_POOL_2D, [x] + head(ctx) + [ctx.const_bool(with_index), ctx.const_i32(int(Precision.INT32)), none(ctx)],
        [out, index_operand])


_POOL_EMITS = [T.AVERAGE_POOL_2D, T.MAX_POOL_2D, T.ADAPTIVE_AVERAGE_POOL_2D, T.ADAPTIVE_MAX_POOL_2D, T.TRANSPOSE]


@converter("pool2d", emits=_POOL_EMITS, check=_check_pool2d)
def convert_pool2d(ctx, op):
    out_name = first_output(op, "Out")
    x = ctx.input(first_input(op, "X"))
    channel_last = is_channel_last(op, "data_format")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, x.type.dims)
    pooling_type = attr_str(op, "pooling_type", "max")
    steps = [("pool", _pool_steps(ctx, op, x, kind, ksize, strides, pads, auto_pad, pooling_type))]
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(4))))
    emit_chain(ctx, out_name, x, steps)


def _check_max_pool_with_index(op, ctx) -> Optional[str]:
    reason = _pool_check_common(op, ctx)
    if reason:
        return reason
    if attr_str(op, "padding_algorithm", "EXPLICIT") == "SAME":
        return "max_pool2d_with_index has no SAME padding"
    return None


@converter("max_pool2d_with_index", emits=[T.MAX_POOL_2D, T.ADAPTIVE_MAX_POOL_2D], check=_check_max_pool_with_index)
def convert_max_pool2d_with_index(ctx, op):
    out_name = first_output(op, "Out")
    x = ctx.input(first_input(op, "X"))
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, x.type.dims)
    if kind == "global" and not op.attr("global_pooling", False):
        kind = "adaptive"  # adaptive [1, 1] keeps its flat argmax indices either way
    mask_name = first_output(op, "Mask")
    mask = ctx.output(mask_name) if mask_name else ctx.temp(out_name, "mask")
    step = _pool_steps(ctx, op, x, kind, ksize, strides, pads, auto_pad, "max", index_operand=mask)
    emit_chain(ctx, out_name, x, [("pool", step)])


# -- normalization ---------------------------------------------------------------------------------------------

def _param_or_default(ctx, op, slot: str, size: Optional[int], fill: float, out_name: str, purpose: str):
    """The op's per-channel/per-element parameter operand, or a constant `fill` of `size` values."""
    name = first_input(op, slot)
    if name is not None:
        if ctx.is_param(name):
            return ctx.const(ctx.param(name).astype(np.float32).reshape(-1), name=name)
        return ctx.input(name)
    return ctx.const(np.full(size, fill, dtype=np.float32), name=f"{out_name}/{purpose}")


def _check_channel_norm(layout_attr: str, default_layout: str = "NCHW", needs_affine_dims: bool = False):
    def check(op, ctx) -> Optional[str]:
        reason = layout_reason(op, layout_attr, default_layout)
        if reason:
            return reason
        dims = input_dims(ctx, op, "X")
        if dims is not None and len(dims) < 2:
            return f"X must have rank >= 2, got {len(dims)}"
        if needs_affine_dims and dims is not None and not (first_input(op, "Scale") and first_input(op, "Bias")):
            channel = dims[-1] if is_channel_last(op, layout_attr, default_layout) else dims[1]
            if channel == UNKNOWN or channel < 0:
                return "a missing Scale or Bias needs a known channel count"
        return None

    return check


def _channel_norm(ctx, op, layout_attr: str, default_layout: str, emit: Callable):
    """Run `emit(ctx, x_nchw, out)` on the channel-first view of X, transposing around it when needed."""
    out_name = first_output(op, "Y")
    x = ctx.input(first_input(op, "X"))
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
    # Inference form: the running Mean/Variance normalize; MeanOut, SavedMean etc. are unused.
    def emit(ctx, x, out):
        operands = [ctx.input(first_input(op, slot)) for slot in ("Scale", "Bias", "Mean", "Variance")]
        ctx.add(T.BATCH_NORMALIZATION, [x, *operands, ctx.const_f32(float(op.attr("epsilon", 1e-5)))], [out])

    _channel_norm(ctx, op, "data_layout", "NCHW", emit)


@converter("instance_norm", emits=[T.INSTANCE_NORMALIZATION, T.TRANSPOSE],
           check=_check_channel_norm("data_format", needs_affine_dims=True))
def convert_instance_norm(ctx, op):
    def emit(ctx, x, out):
        channels = x.type.dims[1]
        out_name = first_output(op, "Y")
        scale = _param_or_default(ctx, op, "Scale", channels, 1.0, out_name, "scale")
        bias = _param_or_default(ctx, op, "Bias", channels, 0.0, out_name, "bias")
        ctx.add(T.INSTANCE_NORMALIZATION, [x, scale, bias, ctx.const_f32(float(op.attr("epsilon", 1e-5)))], [out])

    _channel_norm(ctx, op, "data_format", "NCHW", emit)


def _check_group_norm(op, ctx) -> Optional[str]:
    reason = _check_channel_norm("data_layout", needs_affine_dims=True)(op, ctx)
    if reason:
        return reason
    if int(op.attr("groups", 1) or 0) <= 0:
        return f"groups {op.attr('groups')} must be positive"
    return None


@converter("group_norm", emits=[T.GROUP_NORMALIZATION, T.TRANSPOSE], check=_check_group_norm)
def convert_group_norm(ctx, op):
    def emit(ctx, x, out):
        channels = x.type.dims[1]
        out_name = first_output(op, "Y")
        scale = _param_or_default(ctx, op, "Scale", channels, 1.0, out_name, "scale")
        bias = _param_or_default(ctx, op, "Bias", channels, 0.0, out_name, "bias")
        ctx.add(T.GROUP_NORMALIZATION, [x, scale, bias, ctx.const_f32(float(op.attr("epsilon", 1e-5))),
                                        ctx.const_i32(int(op.attr("groups", 1)))], [out])

    _channel_norm(ctx, op, "data_layout", "NCHW", emit)


def _check_layer_norm(op, ctx) -> Optional[str]:
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return None
    axis = int(op.attr("begin_norm_axis", 1))
    if not -len(dims) <= axis < len(dims):
        return f"begin_norm_axis {axis} is out of range for rank {len(dims)}"
    if not (first_input(op, "Scale") and first_input(op, "Bias")) and not known_dims(dims[axis:]):
        return "a missing Scale or Bias needs known normalized dims"
    return None


@converter("layer_norm", emits=[T.LAYER_NORMALIZATION], check=_check_layer_norm)
def convert_layer_norm(ctx, op):
    out_name = first_output(op, "Y")
    x = ctx.input(first_input(op, "X"))
    axis = int(op.attr("begin_norm_axis", 1))
    axis = axis + len(x.type.dims) if axis < 0 else axis
    size = int(np.prod(x.type.dims[axis:])) if known_dims(x.type.dims[axis:]) else None
    scale = _param_or_default(ctx, op, "Scale", size, 1.0, out_name, "scale")
    bias = _param_or_default(ctx, op, "Bias", size, 0.0, out_name, "bias")
    epsilon = ctx.const_f32(float(op.attr("epsilon", 1e-5)))
    ctx.add(T.LAYER_NORMALIZATION, [x, scale, bias, ctx.const_i32(axis), epsilon], [ctx.output(out_name)])


def _check_lrn(op, ctx) -> Optional[str]:
    reason = layout_reason(op, "data_format", "AnyLayout")
    if reason:
        return reason
    if int(op.attr("n", 5)) <= 0:
        return f"n {op.attr('n')} must be positive"
    return None


@converter("lrn", emits=[T.LRN, T.TRANSPOSE], check=_check_lrn)
def convert_lrn(ctx, op):
    out_name = first_output(op, "Out")
    x = ctx.input(first_input(op, "X"))
    channel_last = is_channel_last(op, "data_format", "AnyLayout")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    # Paddle's lrn: x / (k + alpha * sum of x^2 over the n-channel window)^beta (alpha not divided by n),
    # the same form as LRN's bias/alpha/beta.
    operands = lambda ctx: [ctx.const_i32(int(op.attr("n", 5))), ctx.const_f32(float(op.attr("k", 2.0))),  # noqa: E731
                            ctx.const_f32(float(op.attr("alpha", 1e-4))), ctx.const_f32(float(op.attr("beta", 0.75)))]
    steps = [("lrn", lambda ctx, x, out: ctx.add(T.LRN, [x] + operands(ctx), [out]))]
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(len(x.type.dims)))))
    emit_chain(ctx, out_name, x, steps)


def _reduce_step(operation: T, axes: Sequence[int], keepdim: bool) -> Callable:
    return lambda ctx, x, out: ctx.add(operation, [x, ctx.const_i32(list(axes)), ctx.const_bool(keepdim)], [out])


def _binary_step(operation: T, other: Callable) -> Callable:
    """A binary arithmetic step whose second operand is `other(ctx, x)`."""
    return lambda ctx, x, out: ctx.add(operation, [x, other(ctx, x), ctx.const_i32(int(FuseCode.FUSED_NONE))], [out])


@converter("norm", emits=[T.MUL, T.REDUCE_SUM, T.ADD, T.POW, T.DIV])
def convert_norm(ctx, op):
    # Paddle's norm is x / sqrt(sum(x^2) + epsilon) along axis, with Norm = sqrt(sum(x^2) + epsilon).
    # LP_NORMALIZATION adds epsilon outside the root, which differs for small vectors, so spell it out.
    out_name = first_output(op, "Out")
    x = ctx.input(first_input(op, "X"))
    axis = int(op.attr("axis", 1))
    epsilon = float(op.attr("epsilon", 1e-10))
    norm_name = first_output(op, "Norm") or f"{out_name}/norm"
    norm = emit_chain(ctx, norm_name, x, [
        ("square", lambda ctx, x, out: ctx.add(T.MUL, [x, x, ctx.const_i32(0)], [out])),
        ("sum", _reduce_step(T.REDUCE_SUM, [axis], True)),
        ("add_epsilon", _binary_step(T.ADD, lambda ctx, x: ctx.const_like(epsilon, x))),
        ("sqrt", _binary_step(T.POW, lambda ctx, x: ctx.const_like(0.5, x))),
    ])
    ctx.add(T.DIV, [x, norm, ctx.const_i32(0)], [ctx.output(out_name)])


def _check_p_norm(op, ctx) -> Optional[str]:
    porder = float(op.attr("porder", 2.0))
    if porder == 0:
        return "porder 0 (count of non-zeros) has no NNAdapter operation"
    return None


@converter("p_norm", emits=[T.ABS, T.POW, T.REDUCE_SUM, T.REDUCE_MAX, T.MUL, T.RESHAPE, T.SQUEEZE], check=_check_p_norm)
def convert_p_norm(ctx, op):
    # p_norm is the norm itself: (sum |x|^p)^(1/p) over axis; +inf / -inf orders are max / min of |x|.
    # epsilon only guards Paddle's gradient.
    out_name = first_output(op, "Out")
    x = ctx.input(first_input(op, "X"))
    porder = float(op.attr("porder", 2.0))
    keepdim = bool(op.attr("keepdim", False))
    asvector = bool(op.attr("asvector", False))
    steps = []
    if asvector:
        steps.append(("flatten", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([-1])], [out])))
        axis = 0
    else:
        axis = int(op.attr("axis", -1))
    steps.append(("abs", unary_step(T.ABS)))
    # Reduce keeping the axis so the constants of the later steps (shape [1]) broadcast without
    # growing a 0-D result; SQUEEZE drops the axis at the end.
    if np.isinf(porder):
        negate = porder < 0
        if negate:  # min |x| = -max(-|x|)
            steps.append(("negate", scalar_mul_step(-1.0)))
        steps.append(("max", _reduce_step(T.REDUCE_MAX, [axis], True)))
        if negate:
            steps.append(("negate_back", scalar_mul_step(-1.0)))
    else:
        if porder != 1.0:
            steps.append(("pow", _binary_step(T.POW, lambda ctx, x: ctx.const_like(porder, x))))
        steps.append(("sum", _reduce_step(T.REDUCE_SUM, [axis], True)))
        if porder != 1.0:
            steps.append(("root", _binary_step(T.POW, lambda ctx, x: ctx.const_like(1.0 / porder, x))))
    # With asvector Paddle's result is [1] * rank(x) under keepdim (0-D for a 0-D x), else 0-D; the
    # flattened reduction above has shape [1].
    rank = len(x.type.dims)
    if asvector and keepdim and rank > 1:
        steps.append(("keepdim", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([1] * rank)], [out])))
    elif not keepdim or (asvector and rank == 0):
        steps.append(("squeeze", lambda ctx, x, out: ctx.add(T.SQUEEZE, [x, ctx.const_i32([axis])], [out])))
    emit_chain(ctx, out_name, x, steps)


# -- softmax -----------------------------------------------------------------------------------------------------

@converter("softmax", emits=[T.SOFTMAX])
def convert_softmax(ctx, op):
    x = ctx.input(first_input(op, "X"))
    ctx.add(T.SOFTMAX, [x, ctx.const_i32(int(op.attr("axis", -1)))], [ctx.output(first_output(op, "Out"))])


@converter("log_softmax", emits=[T.LOG_SOFTMAX])
def convert_log_softmax(ctx, op):
    x = ctx.input(first_input(op, "X"))
    ctx.add(T.LOG_SOFTMAX, [x, ctx.const_i32(int(op.attr("axis", -1)))], [ctx.output(first_output(op, "Out"))])


# -- dropout -----------------------------------------------------------------------------------------------------

@converter("dropout", emits=[T.MUL])
def convert_dropout(ctx, op):
    # Inference: upscale_in_train already scaled while training (identity now); downgrade_in_infer
    # scales by the keep probability. Paddle Lite emits a MUL either way; so do we.
    x = ctx.input(first_input(op, "X"))
    if attr_str(op, "dropout_implementation", "downgrade_in_infer") == "upscale_in_train":
        factor = 1.0
    else:
        factor = 1.0 - float(op.attr("dropout_prob", 0.5))
    ctx.add(T.MUL, [x, ctx.const_like(factor, x), ctx.const_i32(0)], [ctx.output(first_output(op, "Out"))])


# -- matrix products --------------------------------------------------------------------------------------------

# Quantized products (an int8 persistable weight with Paddle Lite's scale attrs) go through conv_quant's
# QUANTIZE -> FULLY_CONNECTED -> DEQUANTIZE step; FULLY_CONNECTED flattens the input to rows, so the
# output is reshaped back to the input's leading dims.

def _quant_matmul_reason(op, ctx, x_slot: str, w_slot: str, out_slot: str, lead_count: Optional[int],
                         channel_dim: int) -> Optional[str]:
    """Why the quantized path cannot take this op (None when it can or the weight is not int8).
    `lead_count`: how many leading X dims the output keeps (None: all but the last)."""
    if not conv_quant.has_int8_weight(ctx, op, w_slot):
        return None
    w = ctx.param(first_input(op, w_slot))
    if w.ndim != 2:
        return f"a quantized {w_slot} must be 2-D, got shape {list(w.shape)}"
    dims = input_dims(ctx, op, x_slot)
    if dims is not None:
        lead = dims[:lead_count] if lead_count is not None else dims[:-1]
        if len(lead) == 0:
            return f"a quantized product needs {x_slot} of rank >= 2"
        if len(lead) > 1 and sum(1 for d in lead if not known_dims([d])) > 1:
            return f"{x_slot} needs at most one unknown leading dim to reshape the quantized product back"
    return conv_quant.product_quant_reason(ctx, op, x_slot, w_slot, out_slot, w.shape[channel_dim])


def _quant_matmul_steps(ctx, op, quant, x, w_slot: str, channel_dim: int, bias_name: Optional[str],
                        fuse: FuseCode, out_name: str, lead_count: Optional[int]) -> list:
    """Chain steps of a quantized product: the quantized FULLY_CONNECTED, then the reshape back."""
    steps = [("matmul_quant", conv_quant.quantized_fc_step(ctx, op, quant, first_input(op, w_slot), channel_dim,
                                                           bias_name, fuse, out_name))]
    lead = list(x.type.dims[:lead_count] if lead_count is not None else x.type.dims[:-1])
    if len(lead) > 1:
        units = ctx.param(first_input(op, w_slot)).shape[channel_dim]
        shape = [d if known_dims([d]) else -1 for d in lead] + [units]
        steps.append(("out_shape", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32(shape)], [out])))
    return steps


_QUANT_MATMUL_EMITS = [T.FULLY_CONNECTED, T.RESHAPE, *conv_quant.QUANT_EMITS]


def _check_fc(op, ctx) -> Optional[str]:
    if op.attr("padding_weights", False):
        return "padding_weights (W stored with 4 padding rows/columns) is not converted"
    w = first_input(op, "W")
    if w is None or not (ctx.is_param(w) or _is_constant_operand(ctx, w)):
        return "W must be a persistable 2-D weight"
    w_dims = ctx.param(w).shape if ctx.is_param(w) else ctx.dims(w)
    if len(w_dims) != 2:
        return f"W must be 2-D, got shape {list(w_dims)}"
    bias = first_input(op, "Bias")
    if conv_quant.has_int8_weight(ctx, op, "W") and bias and not ctx.is_param(bias):
        return "a quantized fc needs a persistable Bias (it becomes an int32 constant)"
    return (activation_reason(attr_str(op, "activation_type", ""))
            or _quant_matmul_reason(op, ctx, "Input", "W", "Out", int(op.attr("in_num_col_dims", 1)), 1))


def _is_constant_operand(ctx, name: str) -> bool:
    """True when `name` is bound to a constant operand (a weight folded by dequantize_linear)."""
    return ctx.has(name) and not ctx.is_param(name) and ctx.input(name).is_constant


@converter("fc", emits=[T.RESHAPE, T.MAT_MUL, T.ADD, *ACTIVATION_EMITS, *_QUANT_MATMUL_EMITS], check=_check_fc)
def convert_fc(ctx, op):
    out_name = first_output(op, "Out")
    x = ctx.input(first_input(op, "Input"))
    w = ctx.input(first_input(op, "W"))
    k, n = w.type.dims
    num_col_dims = int(op.attr("in_num_col_dims", 1))
    act_type = attr_str(op, "activation_type", "")
    fuse = fuse_code_of(act_type)
    fuse = FuseCode.FUSED_NONE if fuse is None else fuse
    quant = conv_quant.product_quant(ctx, op, "Input", "W", "Out")
    if quant is not None:  # quantized path: the bias and the fuse code go into FULLY_CONNECTED
        steps = _quant_matmul_steps(ctx, op, quant, x, "W", 1, first_input(op, "Bias"), fuse, out_name,
                                    num_col_dims)
        emit_chain(ctx, out_name, x, steps + activation_steps(op, act_type))
        return
    bias = bias_vector(ctx, op, "Bias", n, out_name)
    steps = []
    if len(x.type.dims) != num_col_dims + 1:
        # Rows are the first in_num_col_dims dims; the rest flatten into the K columns.
        steps.append(("reshape", lambda ctx, x, out: ctx.add(
            T.RESHAPE, [x, ctx.const_i32([0] * num_col_dims + [-1])], [out])))
    steps.append(("matmul", lambda ctx, x, out: ctx.add(
        T.MAT_MUL, [x, w, ctx.const_bool(False), ctx.const_bool(False)], [out])))
    steps.append(("add", lambda ctx, x, out: ctx.add(T.ADD, [x, bias, ctx.const_i32(int(fuse))], [out])))
    steps += activation_steps(op, act_type)
    emit_chain(ctx, out_name, x, steps)


def _check_mul(op, ctx) -> Optional[str]:
    for slot, attr in (("X", "x_num_col_dims"), ("Y", "y_num_col_dims")):
        dims = input_dims(ctx, op, slot)
        k = int(op.attr(attr, 1))
        if dims is not None and not 1 <= k < len(dims):
            return f"{attr} {k} must be in [1, rank({slot}) = {len(dims)})"
        if slot == "Y" and dims is not None and not known_dims(dims):
            return "Y needs known dims to flatten it into a matrix"
    return _quant_matmul_reason(op, ctx, "X", "Y", "Out", int(op.attr("x_num_col_dims", 1)), 1)


@converter("mul", emits=[T.RESHAPE, T.MAT_MUL, *_QUANT_MATMUL_EMITS], check=_check_mul)
def convert_mul(ctx, op):
    out_name = first_output(op, "Out")
    x_name, y_name = first_input(op, "X"), first_input(op, "Y")
    x = ctx.input(x_name)
    xk, yk = int(op.attr("x_num_col_dims", 1)), int(op.attr("y_num_col_dims", 1))
    quant = conv_quant.product_quant(ctx, op, "X", "Y", "Out")
    if quant is not None:  # quantized path; the check keeps Y 2-D, so y_num_col_dims is 1
        emit_chain(ctx, out_name, x, _quant_matmul_steps(ctx, op, quant, x, "Y", 1, None, FuseCode.FUSED_NONE,
                                                         out_name, xk))
        return
    y_dims = ctx.dims(y_name)
    rows, cols = int(np.prod(y_dims[:yk])), int(np.prod(y_dims[yk:]))
    if ctx.is_param(y_name):
        y = ctx.const(ctx.param(y_name).reshape(rows, cols), name=y_name)
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
    out_name = first_output(op, "Out")
    x, y = ctx.input(first_input(op, "X")), ctx.input(first_input(op, "Y"))
    quant = conv_quant.product_quant(ctx, op, "X", "Y", "Out")
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
    x, y = input_dims(ctx, op, "X"), input_dims(ctx, op, "Y")
    if x is not None and y is not None and len(x) == 1 and len(y) == 1:
        return "matmul (v1) of two 1-D vectors gives shape [1], which MAT_MUL (a 0-D result) does not"
    for name in ("fused_reshape_X", "fused_reshape_Y", "fused_reshape_Out", "fused_transpose_X",
                 "fused_transpose_Y", "fused_transpose_Out"):
        if attr_ints(op, name, []):
            return f"the oneDNN-fused attribute {name} is not converted"
    if int(op.attr("head_number", 1) or 1) != 1:
        return "head_number > 1 (multi-head matmul) is not converted"
    return _quant_matmul_v_reason(op, ctx, "transpose_X", "transpose_Y")


def _quant_matmul_v_reason(op, ctx, trans_x_attr: str, trans_y_attr: str) -> Optional[str]:
    """The quantized-path conditions of matmul / matmul_v2: X not transposed, a 2-D int8 Y."""
    if not conv_quant.has_int8_weight(ctx, op, "Y"):
        return None
    if op.attr(trans_x_attr, False):
        return f"a quantized matmul with {trans_x_attr} is not converted"
    return _quant_matmul_reason(op, ctx, "X", "Y", "Out", None, 0 if op.attr(trans_y_attr, False) else 1)


@converter("matmul", emits=[T.MAT_MUL, T.MUL, *_QUANT_MATMUL_EMITS], check=_check_matmul)
def convert_matmul(ctx, op):
    _matmul(ctx, op, bool(op.attr("transpose_X", False)), bool(op.attr("transpose_Y", False)),
            float(op.attr("alpha", 1.0)))


@converter("matmul_v2", emits=[T.MAT_MUL, *_QUANT_MATMUL_EMITS],
           check=lambda op, ctx: _quant_matmul_v_reason(op, ctx, "trans_x", "trans_y"))
def convert_matmul_v2(ctx, op):
    _matmul(ctx, op, bool(op.attr("trans_x", False)), bool(op.attr("trans_y", False)))


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
    # Sum of products along the last axis: [N] x [N] -> [], [B, N] x [B, N] -> [B].
    out_name = first_output(op, "Out")
    x, y = ctx.input(first_input(op, "X")), ctx.input(first_input(op, "Y"))
    emit_chain(ctx, out_name, x, [
        ("product", lambda ctx, x, out: ctx.add(T.MUL, [x, y, ctx.const_i32(0)], [out])),
        ("sum", _reduce_step(T.REDUCE_SUM, [-1], False)),
    ])
