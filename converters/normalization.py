"""Converters for the normalizations: batch_norm, sync_batch_norm, instance_norm, group_norm, layer_norm,
lrn (the *_NORMALIZATION operations and LRN, channel-last inputs through a TRANSPOSE), affine_channel, norm
and p_norm (compositions of elementwise and reduce operations).

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry) and the standard.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from converters.attrs import float_param_const, input_dims, known_dims
from converters.context import ConversionContext
from converters.emit import (
    binary,
    binary_step,
    cast_to,
    compare,
    emit_chain,
    reduce_step,
    scalar_mul_step,
    transpose_step,
    unary_step,
)
from converters.layout import (
    channel_last_perm,
    is_channel_last,
    layout_reason,
    to_channel_first,
)
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import (
    UNKNOWN,
    precision_dtype,
)
from nnadapter_bridge.nnadapter.codes import (
    OperationType as T,
)
from nnadapter_bridge.nnadapter.types import Operand

# -- normalization ---------------------------------------------------------------------------------------------

def _param_or_default(ctx, op, slot: str, size: int | None, fill: float, out_name: str, purpose: str,
                      like: Operand | None = None):
    """The op's per-channel/per-element parameter operand, or a constant `fill` of `size` values, in the
    float precision that goes with the input `like`."""
    v = OpView(op)
    name = v.optional_input(slot)
    if name is not None:
        if ctx.is_param(name):
            return float_param_const(ctx, ctx.param(name).reshape(-1), like, name)
        return ctx.input(name)
    if size is None:  # the checks ask for the parameter when the dims are unknown
        raise ctx.error(f"'{slot}' is missing and the normalized dims are unknown")
    return float_param_const(ctx, np.full(size, fill), like, f"{out_name}/{purpose}")


def _check_channel_norm(layout_attr: str, default_layout: str = "NCHW", needs_affine_dims: bool = False):
    def check(op, ctx) -> str | None:
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
           check=_check_channel_norm("data_layout", needs_affine_dims=True))
def convert_batch_norm(ctx: ConversionContext, v: OpView) -> None:
    """Inference form: the running Mean/Variance normalize; MeanOut, SavedMean etc. are unused. A batch norm built
    with weight_attr=False / bias_attr=False (AdaFace's output BatchNorm1D) has no Scale / Bias input: Paddle then
    scales by 1 and shifts by 0."""
    def emit(ctx, x, out):
        channels = x.type.dims[1]
        out_name = v.output("Y")
        operands = [_param_or_default(ctx, v.op, "Scale", channels, 1.0, out_name, "scale", x),
                    _param_or_default(ctx, v.op, "Bias", channels, 0.0, out_name, "bias", x),
                    *(ctx.input(v.input(slot)) for slot in ("Mean", "Variance"))]
        ctx.add(T.BATCH_NORMALIZATION, [x, *operands, ctx.const_f32(v.attr_float("epsilon", 1e-5))], [out])

    _channel_norm(ctx, v.op, "data_layout", "NCHW", emit)


@converter("instance_norm", emits=[T.INSTANCE_NORMALIZATION, T.TRANSPOSE],
           check=_check_channel_norm("data_format", needs_affine_dims=True))
def convert_instance_norm(ctx: ConversionContext, v: OpView) -> None:
    def emit(ctx, x, out):
        channels = x.type.dims[1]
        out_name = v.output("Y")
        scale = _param_or_default(ctx, v.op, "Scale", channels, 1.0, out_name, "scale", x)
        bias = _param_or_default(ctx, v.op, "Bias", channels, 0.0, out_name, "bias", x)
        ctx.add(T.INSTANCE_NORMALIZATION, [x, scale, bias, ctx.const_f32(v.attr_float("epsilon", 1e-5))], [out])

    _channel_norm(ctx, v.op, "data_format", "NCHW", emit)


def _check_group_norm(op, ctx) -> str | None:
    v = OpView(op)
    reason = _check_channel_norm("data_layout", needs_affine_dims=True)(op, ctx)
    if reason:
        return reason
    if int(v.attr("groups", 1) or 0) <= 0:
        return f"groups {v.attr('groups')} must be positive"
    return None


@converter("group_norm", emits=[T.GROUP_NORMALIZATION, T.TRANSPOSE], check=_check_group_norm)
def convert_group_norm(ctx: ConversionContext, v: OpView) -> None:
    def emit(ctx, x, out):
        channels = x.type.dims[1]
        out_name = v.output("Y")
        scale = _param_or_default(ctx, v.op, "Scale", channels, 1.0, out_name, "scale", x)
        bias = _param_or_default(ctx, v.op, "Bias", channels, 0.0, out_name, "bias", x)
        ctx.add(T.GROUP_NORMALIZATION, [x, scale, bias, ctx.const_f32(v.attr_float("epsilon", 1e-5)),
                                        ctx.const_i32(v.attr_int("groups", 1))], [out])

    _channel_norm(ctx, v.op, "data_layout", "NCHW", emit)


def _check_affine_channel(op, ctx) -> str | None:
    reason = layout_reason(op, "data_layout", "NCHW")
    if reason:
        return reason
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) < 2:
        return f"X must have a channel axis, got rank {len(dims)}"
    return None


@converter("affine_channel", emits=[T.MUL, T.ADD, T.UNSQUEEZE], check=_check_affine_channel)
def convert_affine_channel(ctx: ConversionContext, v: OpView) -> None:
    """x * scale + bias with one scale and bias per channel (axis 1, or the last axis for NHWC)."""
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    rank = x.type.rank
    channel_last = is_channel_last(v.op, "data_layout")
    trailing = 0 if channel_last else rank - 2  # 1-dims after the channel so it lines up with axis 1

    def per_channel(slot):
        name = v.input(slot)
        if ctx.is_param(name):
            value = ctx.param(name).reshape((-1,) + (1,) * trailing)
            return float_param_const(ctx, value, x, name)
        operand = ctx.input(name)
        if trailing:
            unsqueezed = ctx.temp(out_name, f"{slot.lower()}_per_channel")
            ctx.add(T.UNSQUEEZE, [operand, ctx.const_i32(list(range(1, trailing + 1)))], [unsqueezed])
            operand = unsqueezed
        return operand

    scaled = binary(ctx, T.MUL, x, per_channel("Scale"), ctx.temp(out_name, "scaled"))
    binary(ctx, T.ADD, scaled, per_channel("Bias"), ctx.output(out_name))


def _check_layer_norm(op, ctx) -> str | None:
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
def convert_layer_norm(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Y")
    x = ctx.input(v.input("X"))
    axis = v.attr_int("begin_norm_axis", 1)
    axis = axis + len(x.type.dims) if axis < 0 else axis
    size = int(np.prod(x.type.dims[axis:])) if known_dims(x.type.dims[axis:]) else None
    scale = _param_or_default(ctx, v.op, "Scale", size, 1.0, out_name, "scale", x)
    bias = _param_or_default(ctx, v.op, "Bias", size, 0.0, out_name, "bias", x)
    epsilon = ctx.const_f32(v.attr_float("epsilon", 1e-5))
    ctx.add(T.LAYER_NORMALIZATION, [x, scale, bias, ctx.const_i32(axis), epsilon], [ctx.output(out_name)])


def _check_lrn(op, ctx) -> str | None:
    v = OpView(op)
    reason = layout_reason(op, "data_format", "AnyLayout")
    if reason:
        return reason
    if v.attr_int("n", 5) <= 0:
        return f"n {v.attr('n')} must be positive"
    return None


@converter("lrn", emits=[T.LRN, T.TRANSPOSE], check=_check_lrn)
def convert_lrn(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = is_channel_last(v.op, "data_format", "AnyLayout")
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
def convert_norm(ctx: ConversionContext, v: OpView) -> None:
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
def convert_p_norm(ctx: ConversionContext, v: OpView) -> None:
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
