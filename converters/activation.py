"""Converters for Paddle's activations and unary math.

Owns: relu, relu6, sigmoid, tanh, abs, exp, log, floor, square, sin, cos, rsqrt, sqrt, silu, swish,
leaky_relu, hard_sigmoid, hard_swish, gelu, softplus, prelu, swiglu, pow, clip, scale, and the activations
composed from NNAdapter operations (brelu, elu, selu, mish, logsigmoid, softsign, tanh_shrink,
thresholded_relu, hard_shrink, softshrink, reciprocal, log2, log10, log1p, ceil, round, sign), softmax and
log_softmax, dropout, and the copies and conversions of the standard's activation family: cast (CAST),
assign and share_data (ASSIGN).

What each activation name becomes is `emit.ACTIVATIONS`; the converters here bind it to op slots.

Imports only the converter toolkit (op_view, attrs, emit, context, registry) and the standard.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import check_dtype_attr, var_precision
from converters.context import ConversionContext
from converters.emit import (
    ACTIVATIONS,
    FLOATS,
    INTS,
    ActivationAttrs,
    binary,
    cast_to,
    emit_activation,
    emit_where_positive,
    output_for,
)
from converters.op_view import OpView, vartype_precision
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision, dtype_precision, precision_dtype
from nnadapter_bridge.nnadapter.types import Operand

# -- converters: one per activation op type ------------------------------------------------------------

# Paddle op types that are a plain activation of X into Out.
_ACTIVATION_OPS = [
    "relu", "relu6", "sigmoid", "tanh", "abs", "exp", "log", "floor", "square", "sin", "cos", "rsqrt", "sqrt",
    "silu", "swish", "leaky_relu", "hard_sigmoid", "hard_swish", "gelu", "softplus", "mish", "logsigmoid",
    "elu", "selu", "brelu", "softsign", "tanh_shrink", "thresholded_relu", "hard_shrink", "softshrink",
    "reciprocal", "log2", "log10", "log1p", "ceil", "round", "sign",
]


# The reference is Paddle Inference 3.3.1, whose relu6 kernel ignores `threshold` (always 6) and whose
# hard_swish kernel ignores `threshold`, `scale` and `offset` (always 6, 6, 3); Paddle Lite and Paddle 2
# applied them. So the standalone ops read no attrs (Paddle's fixed values are the defaults) and emit the
# one operation those values give. The fused activation of conv2d/fc/fusion_elementwise_*
# (`hard_swish_threshold` etc., written only by Paddle Lite's fusion passes) keeps its attrs.
_STANDALONE_IGNORES_ATTRS = {"relu6": (T.RELU6,), "hard_swish": (T.HARD_SWISH,)}


def _standalone_attrs(op):
    """The attrs source of a standalone activation op."""
    return {} if op.type in _STANDALONE_IGNORES_ATTRS else op


def _make_activation_check(act_type):
    spec = ACTIVATIONS[act_type]

    def check(op, ctx):
        v = OpView(op)
        if spec.check is not None:
            reason = spec.check(ActivationAttrs(act_type, _standalone_attrs(op)))
            if reason:
                return reason
        precision = var_precision(ctx, v.optional_input("X"))
        if spec.float_only and precision is not None and precision not in FLOATS:
            return f"{act_type} is emitted with operations that take float input, X is {precision.name}"
        if not spec.float_only and precision is not None and precision not in FLOATS | INTS:
            return f"{act_type} takes float, int32 or int64 input, X is {precision.name}"
        return None

    return check


def _convert_activation(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    out = output_for(ctx, v.op, v.output("Out"), x)
    emit_activation(ctx, v.type, _standalone_attrs(v.op), x, out)


for _name in _ACTIVATION_OPS:
    converter(_name, emits=_STANDALONE_IGNORES_ATTRS.get(_name, ACTIVATIONS[_name].emits),
              check=_make_activation_check(_name))(_convert_activation)


# -- prelu --------------------------------------------------------------------------------------------

def _check_prelu(op, ctx):
    v = OpView(op)
    mode = v.attr("mode", "all")
    if mode not in ("all", "channel", "element"):
        return f"prelu mode '{mode}' is not one of all/channel/element"
    precision = var_precision(ctx, v.optional_input("X"))
    if precision is not None and precision not in FLOATS:
        return f"prelu takes float input, X is {precision.name}"
    return None


@converter("prelu", emits=[T.PRELU, T.GREATER, T.MUL, T.WHERE, T.UNSQUEEZE, T.RESHAPE], check=_check_prelu)
def convert_prelu(ctx: ConversionContext, v: OpView) -> None:
    """x > 0 ? x : alpha * x. PRELU (slope [1] or [C] on axis 1) where it fits, else composed."""
    x_name, alpha_name = v.input("X"), v.input("Alpha")
    x = ctx.input(x_name)
    out = output_for(ctx, v.op, v.output("Out"), x)
    mode = v.attr("mode", "all")
    channels_last = v.attr("data_format", "NCHW") in ("NHWC", "NLC", "NDHWC")
    rank = x.type.rank
    if ctx.is_param(alpha_name):
        # Alpha in x's float width (a float64 prelu has a float64 Alpha).
        alpha = ctx.param(alpha_name).astype(np.float64 if x.type.precision == Precision.FLOAT64 else np.float32)
        if mode == "all" or (mode == "channel" and not channels_last and rank >= 2):
            values = alpha.reshape(-1)
            if mode == "all":
                values = values[:1]
            ctx.add(T.PRELU, [x, ctx.const(np.ascontiguousarray(values), dtype_precision(values.dtype))], [out])
            return
        # Channels-last channel mode ([C] on the last axis) and element mode ([1, ...x.shape[1:]] or
        # x.shape[1:]) line up with x under numpy's trailing alignment as they are.
        slope = ctx.const(np.ascontiguousarray(alpha.reshape(-1) if mode == "channel" else alpha),
                          dtype_precision(alpha.dtype))
    else:
        slope = ctx.input(alpha_name)
        if mode == "channel" and not channels_last and slope.type.rank == 1 and rank > 2:
            # [C] -> [C, 1, ..., 1] so it lines up with axis 1 under numpy broadcasting.
            unsqueezed = ctx.temp(v.output("Out"), "alpha")
            ctx.add(T.UNSQUEEZE, [slope, ctx.const_i32(list(range(1, rank - 1)))], [unsqueezed])
            slope = unsqueezed
    if rank == 0 and slope.type.rank == 1 and slope.type.dims[0] == 1:  # [1] against 0-d would give [1]
        scalar = ctx.temp(v.output("Out"), "alpha_0d")
        ctx.add(T.RESHAPE, [slope, ctx.const_i32([])], [scalar])
        slope = scalar
    scaled = binary(ctx, T.MUL, x, slope, ctx.temp(out.name, "scaled"))
    emit_where_positive(ctx, x, out, scaled)


# -- swiglu ----------------------------------------------------------------------------------------------

def _check_swiglu(op, ctx):
    v = OpView(op)
    precision = var_precision(ctx, v.optional_input("x"))
    if precision is not None and precision not in FLOATS:
        return f"swiglu takes float input, x is {precision.name}"
    return None


@converter("swiglu", emits=[T.SWISH, T.MUL, T.SPLIT], check=_check_swiglu)
def convert_swiglu(ctx: ConversionContext, v: OpView) -> None:
    """SwiGLU (Llama's feed-forward gate, paddle.nn.functional.swiglu): silu(x) * y, or without y silu(a) * b for
    the halves a, b of x's last axis."""
    x = ctx.input(v.input("x"))
    var = v.output("out")
    y_name = v.optional_input("y")
    if y_name is None:
        last = ctx.dims(x)[-1] if ctx.rank(x) else -1
        if last < 0 or last % 2:
            raise ctx.error(f"swiglu without y halves x's last dim, which must be known and even "
                            f"(x dims {list(ctx.dims(x))})")
        gate, y = ctx.temp(var, "gate"), ctx.temp(var, "up")
        ctx.add(T.SPLIT, [x, ctx.const_i32(ctx.rank(x) - 1), ctx.const_i32([last // 2, last // 2])], [gate, y])
        x = gate
    else:
        y = ctx.input(y_name)
    activated = ctx.temp(var, "silu")
    emit_activation(ctx, "silu", {}, x, activated)
    binary(ctx, T.MUL, activated, y, ctx.output(var))


# -- pow -------------------------------------------------------------------------------------------------

def _check_pow(op, ctx):
    v = OpView(op)
    precision = var_precision(ctx, v.optional_input("X"))
    if precision is None:
        return None
    if precision not in FLOATS | INTS:
        return f"pow takes float, int32 or int64 input, X is {precision.name}"
    factor = v.attr_float("factor", 1.0)
    if precision in INTS and not v.optional_input("FactorTensor") and factor != int(factor):
        # Paddle computes pow(x, 1.5) in floating point before truncating; POW on integers cannot.
        return f"pow of an integer tensor with the non-integer factor {factor}"
    return None


@converter("pow", emits=[T.POW, T.CAST], check=_check_pow)
def convert_pow(ctx: ConversionContext, v: OpView) -> None:
    """x ^ factor; factor from `FactorTensor` when given, else the `factor` attr (default 1)."""
    x = ctx.input(v.input("X"))
    out = output_for(ctx, v.op, v.output("Out"), x)
    factor_name = v.optional_input("FactorTensor")
    if factor_name:
        factor = ctx.input(factor_name)
        want = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
        if factor.type.precision != want:
            factor = cast_to(ctx, factor, want, ctx.temp(v.output("Out"), "factor"))
    else:
        factor = ctx.const_like(v.attr_float("factor", 1.0), x)
    binary(ctx, T.POW, x, factor, out)


# -- clip ------------------------------------------------------------------------------------------------

def _check_clip(op, ctx):
    v = OpView(op)
    precision = var_precision(ctx, v.optional_input("X"))
    if precision is not None and precision not in FLOATS | INTS:
        return f"clip takes float, int32 or int64 input, X is {precision.name}"
    return None


@converter("clip", emits=[T.CLIP, T.MAX, T.MIN, T.CAST], check=_check_clip)
def convert_clip(ctx: ConversionContext, v: OpView) -> None:
    """min(max(x, min), max); the `Min`/`Max` tensor inputs win over the `min`/`max` attrs."""
    x = ctx.input(v.input("X"))
    out_name = v.output("Out")
    out = output_for(ctx, v.op, out_name, x)
    plain = x.type.precision if not x.type.is_quantized else Precision.FLOAT32

    def bound(slot, attr):
        name = v.optional_input(slot)
        if name:
            operand = ctx.input(name)
            if operand.type.precision != plain:
                operand = cast_to(ctx, operand, plain, ctx.temp(out_name, f"{attr}_cast"))
            return operand
        return ctx.const_like(v.attr_float(attr, 0.0), x)

    low, high = bound("Min", "min"), bound("Max", "max")
    if plain in INTS:
        # CLIP takes float32 only; integer tensors clamp through MAX then MIN.
        raised = binary(ctx, T.MAX, x, low, ctx.temp(out_name, "max"))
        binary(ctx, T.MIN, raised, high, out)
        return
    ctx.add(T.CLIP, [x, low, high], [out])


# -- scale -----------------------------------------------------------------------------------------------

def _quant_sign_constant(ctx, value: float) -> Operand:
    """A per-layer int8 constant representing `value` (Paddle Lite's +-1 with scale |value|)."""
    magnitude = abs(value)
    return ctx.const(np.array([1 if value >= 0 else -1], dtype=np.int8), Precision.QUANT_INT8_SYMM_PER_LAYER,
                     scale=magnitude if magnitude > 0 else 1.0)


def _check_scale(op, ctx):
    v = OpView(op)
    precision = var_precision(ctx, v.optional_input("X"))
    identity = (not v.optional_input("ScaleTensor") and not v.optional_input("BiasTensor")
                and v.attr_float("scale", 1.0) == 1.0 and v.attr_float("bias", 0.0) == 0.0)
    # The identity of any dtype binds its input (paddle 2.6.2's save_inference_model appends one to every
    # fetched var, int8 and uint8 ones included).
    if precision is not None and precision not in FLOATS | INTS and not identity:
        return f"scale takes float, int32 or int64 input, X is {precision.name}"
    return None


@converter("scale", emits=[T.MUL, T.ADD, T.CAST], check=_check_scale)
def convert_scale(ctx: ConversionContext, v: OpView) -> None:
    """scale * x + bias (bias_after_scale, the default) or scale * (x + bias).

    `ScaleTensor` replaces the `scale` attr, `BiasTensor` the `bias` attr. Only a constant scale of exactly
    1 and bias of exactly 0 make the op the identity (the output var is bound to the input operand): the
    comparison is exact, because a small bias is meaningful (`var + 1e-5` before an rsqrt)."""
    x = ctx.input(v.input("X"))
    out_name = v.output("Out")
    plain = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
    scale_name, bias_name = v.optional_input("ScaleTensor"), v.optional_input("BiasTensor")
    scale = v.attr_float("scale", 1.0)
    bias = v.attr_float("bias", 0.0)
    after = v.attr_bool("bias_after_scale", True)
    if plain in INTS:
        # Paddle's integer scale kernel casts scale and bias to the element type first (2.5 -> 2).
        scale, bias = float(int(scale)), float(int(bias))

    def tensor(name, purpose):
        operand = ctx.input(name)
        if operand.type.precision != plain:
            operand = cast_to(ctx, operand, plain, ctx.temp(out_name, f"{purpose}_cast"))
        return operand

    if not scale_name and not bias_name:
        if not after:
            bias *= scale
        if scale == 1.0 and bias == 0.0:
            ctx.bind(out_name, x)
            return
    do_scale = bool(scale_name) or scale != 1.0
    do_bias = bool(bias_name) or bias != 0.0

    def const(value):
        if x.type.is_quantized:
            return _quant_sign_constant(ctx, value)
        return ctx.const_like(value, x)

    scale_operand = tensor(scale_name, "scale") if scale_name else (const(scale) if do_scale else None)
    bias_operand = tensor(bias_name, "bias") if bias_name else (const(bias) if do_bias else None)
    # Only a tensor scale with bias before it needs the (x + bias) * scale order; constant bias was
    # already folded into bias * scale above.
    bias_first = not after and bool(scale_name)
    steps = [(T.ADD, bias_operand), (T.MUL, scale_operand)] if bias_first else \
        [(T.MUL, scale_operand), (T.ADD, bias_operand)]
    if not after and not scale_name and bias_name:
        # bias tensor before a constant scale: scale * x + scale * bias == scale * (x + bias).
        steps = [(T.ADD, bias_operand), (T.MUL, scale_operand)]
    applied: list[tuple[T, Operand]] = [(type, operand) for type, operand in steps if operand is not None]
    current = x
    for i, (type, value) in enumerate(applied):
        last = i == len(applied) - 1
        target = output_for(ctx, v.op, out_name, x) if last else ctx.temp(out_name, type.name.lower())
        current = binary(ctx, type, current, value, target)


# -- softmax -----------------------------------------------------------------------------------------------------

# Paddle's CPU softmax over the last axis of float32 rows runs a vectorised path that clips `x - max` at -64 with
# _mm256_max_ps, 8 floats at a time, and the rest of a row (n % 8 entries) with a scalar `x < -64 ? -64 : x`. The
# vector max returns the -64 for a NaN, the scalar form keeps the NaN: a row whose every entry is -inf (-inf - -inf
# is NaN) comes out uniform, 1 / n, when n is a multiple of 8, and NaN otherwise, on another axis or in float64
# (measured with Paddle 3.3.1 on an AVX2 CPU: n = 8, 16, 32 uniform; 3, 7, 9, 33 NaN). Attention that masks with
# -inf (DeBERTa-v2's softmax_with_mask) meets such rows at every padded query, and a NaN there would reach every
# token through the next layer's values (0 * NaN).
_AVX_FLOAT_BLOCK = 8


def _uniform_when_all_minus_inf(ctx, op, x: Operand, axis: int) -> Operand:
    """`x` raised to float32's lowest finite value when Paddle's vectorised path covers whole rows (above): a row of
    -inf then becomes a row of equal finite values, which every runtime turns into 1 / n, and a -inf beside finite
    values still gives exp(-64) or less, as before. Otherwise (or with the row length unknown) `x` as it is."""
    dims = x.type.dims
    if (x.type.precision != Precision.FLOAT32 or x.type.is_quantized or axis not in (-1, len(dims) - 1)
            or dims[-1] <= 0 or dims[-1] % _AVX_FLOAT_BLOCK):
        return x
    lowest = ctx.const_like(np.finfo(np.float32).min, x)
    return binary(ctx, T.MAX, x, lowest, ctx.temp(OpView(op).output("Out"), "finite"))


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
    axis = v.attr_int("axis", -1)
    if operation == T.SOFTMAX:
        x = _uniform_when_all_minus_inf(ctx, op, x, axis)
    ctx.add(operation, [x, ctx.const_i32(axis)], [out])


def _check_softmax(op, ctx) -> str | None:
    v = OpView(op)
    x = v.optional_input("X")
    if x and ctx.has(x) and ctx.rank(x) == 0 and v.attr_int("axis", -1) not in (-1, 0):
        return f"axis {v.attr('axis')} is out of range for a 0-d X (Paddle takes -1 or 0)"
    return None


@converter("softmax", emits=[T.SOFTMAX, T.FILL_LIKE, T.MAX], check=_check_softmax)
def convert_softmax(ctx: ConversionContext, v: OpView) -> None:
    _softmax(ctx, v.op, T.SOFTMAX, 1.0)


@converter("log_softmax", emits=[T.LOG_SOFTMAX, T.FILL_LIKE], check=_check_softmax)
def convert_log_softmax(ctx: ConversionContext, v: OpView) -> None:
    _softmax(ctx, v.op, T.LOG_SOFTMAX, 0.0)


# -- dropout -----------------------------------------------------------------------------------------------------

@converter("dropout", emits=[T.MUL])
def convert_dropout(ctx: ConversionContext, v: OpView) -> None:
    # Inference: upscale_in_train already scaled while training (identity now); downgrade_in_infer
    # scales by the keep probability. Paddle Lite emits a MUL either way; so do we.
    x = ctx.input(v.input("X"))
    if v.attr_str("dropout_implementation", "downgrade_in_infer") == "upscale_in_train":
        factor = 1.0
    else:
        factor = 1.0 - v.attr_float("dropout_prob", 0.5)
    binary(ctx, T.MUL, x, ctx.const_like(factor, x), ctx.output(v.output("Out")))


# -- cast ------------------------------------------------------------------------------------------------

def _check_cast(op, ctx):
    return check_dtype_attr(op, "out_dtype", 5)


@converter("cast", emits=[T.CAST], check=_check_cast)
def convert_cast(ctx: ConversionContext, v: OpView) -> None:
    """CAST to the precision of `out_dtype` (in_dtype is implied by the input operand)."""
    target = vartype_precision(v.attr("out_dtype", 5), "out_dtype")
    cast_to(ctx, ctx.input(v.input("X")), target, ctx.output(v.output("Out")))


# -- copies -----------------------------------------------------------------------------------------------

@converter("assign", "share_data", emits=[T.ASSIGN])
def convert_assign(ctx: ConversionContext, v: OpView) -> None:
    ctx.add(T.ASSIGN, [ctx.input(v.input("X"))], [ctx.output(v.output("Out"))])
