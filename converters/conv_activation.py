"""Converters for Paddle's activations and unary math, plus the helpers the elementwise family shares.

Owns: relu, relu6, sigmoid, tanh, abs, exp, log, floor, square, sin, cos, rsqrt, sqrt, silu, swish,
leaky_relu, hard_sigmoid, hard_swish, gelu, softplus, prelu, pow, clip, scale, and the activations
composed from NNAdapter operations (brelu, elu, selu, mish, logsigmoid, softsign, tanh_shrink,
thresholded_relu, hard_shrink, softshrink, reciprocal, log2, log10, log1p, ceil, round, sign).

`emit_activation(ctx, act_type, attrs_source, input_operand, output_operand)` is the one place an
activation name becomes operations; converters with a fused activation that is no fuse code (conv2d,
fc, fusion_elementwise_*_activation) call it for the unpacked activation.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping, Optional

import numpy as np

from converters.registry import converter
from nnadapter_bridge.errors import BridgeError, ConversionError
from nnadapter_bridge.nnadapter.codes import FuseCode, OperationType as T, Precision, dtype_precision
from nnadapter_bridge.nnadapter.types import Operand, OperandType

_FLOATS = frozenset({Precision.FLOAT32, Precision.QUANT_INT8_SYMM_PER_LAYER})
_INTS = frozenset({Precision.INT32, Precision.INT64})


# -- helpers shared by the elementwise family -----------------------------------------------------------

def var_precision(ctx, name: str) -> Optional[Precision]:
    """The precision of var `name` when it is already known (an operand or a declared var), else None.

    Checks run with a context during conversion; during partitioning there may be none."""
    if ctx is None or not name:
        return None
    try:
        if ctx.has(name):
            return ctx.input(name).type.precision
    except ConversionError:  # an unmapped var: fall back to the program's declaration
        pass
    graph = getattr(ctx, "graph", None)
    if graph is None:
        return None
    try:
        dtype = graph.var(name).dtype
        return dtype_precision(dtype) if dtype is not None else None
    except (BridgeError, KeyError, ValueError):  # undeclared var, or a dtype with no NNAdapter precision
        return None


def first_input(op, slot: str = "X") -> str:
    names = op.input(slot)
    return names[0] if names else ""


def first_output(op, slot: str = "Out") -> str:
    return op.output(slot)[0]


def output_for(ctx, op, name: str, like: Operand, slot: str = "Out") -> Operand:
    """The output operand of `name`; quantized per layer with `<slot>0_scale` when the input is quantized.

    Paddle Lite's quantized models carry the output scale as an attr; a float input keeps a float output
    (the scale only describes how a fully quantized device would store it)."""
    scales = ctx.quant_scales(op, slot, 0)
    if scales and like.type.is_quantized:
        return ctx.output(name, OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=scales[0]))
    return ctx.output(name)


def scalar_like(ctx, value, like: Operand) -> Operand:
    """A shape-[1] constant holding `value` in the plain precision of `like` (float32 for quantized)."""
    return ctx.const_like(value, like)


def binary(ctx, type: T, a: Operand, b: Operand, out: Operand, fuse: FuseCode = FuseCode.FUSED_NONE) -> Operand:
    """Emit a binary arithmetic operation (input0, input1, fuse_code) -> out."""
    ctx.add(type, [a, b, ctx.const_i32(int(fuse))], [out])
    return out


def unary(ctx, type: T, x: Operand, out: Operand) -> Operand:
    ctx.add(type, [x], [out])
    return out


def compare(ctx, type: T, a: Operand, b: Operand, out: Operand) -> Operand:
    ctx.add(type, [a, b], [out])
    return out


def cast_to(ctx, x: Operand, precision: Precision, out: Operand) -> Operand:
    ctx.add(T.CAST, [x, ctx.const_i32(int(precision))], [out])
    return out


def _temp(ctx, out: Operand, purpose: str) -> Operand:
    return ctx.temp(out.name or "activation", purpose)


# -- activation attributes --------------------------------------------------------------------------------

class ActivationAttrs:
    """Reads an activation's attributes from an OpInfo or a mapping.

    A fused activation's attrs carry the activation name as a prefix (`leaky_relu_alpha`,
    `hard_swish_threshold`): the prefixed name wins over the plain one; a missing attr takes Paddle's
    default."""

    def __init__(self, act_type: str, source):
        self.act_type = act_type
        self.source = source

    def _lookup(self, key):
        if self.source is None:
            return None
        if isinstance(self.source, Mapping):
            return self.source.get(key)
        return self.source.attr(key)

    def get(self, name: str, default):
        for key in (f"{self.act_type}_{name}", name):
            value = self._lookup(key)
            if value is not None:
                return value
        return default

    def f(self, name: str, default: float) -> float:
        return float(self.get(name, default))


@dataclasses.dataclass(frozen=True)
class Activation:
    name: str
    emits: tuple
    emit: Callable  # (ctx, attrs, x, out) -> None
    check: Optional[Callable] = None  # (attrs) -> reason | None
    float_only: bool = True  # the emitted operations take FLOAT32 / QUANT_INT8 inputs only


ACTIVATIONS: dict[str, Activation] = {}


def _activation(name: str, emits, *, check=None, float_only=True):
    def register(fn):
        ACTIVATIONS[name] = Activation(name, tuple(emits), fn, check, float_only)
        return fn

    return register


def emit_activation(ctx, act_type: str, attrs_source, input_operand: Operand, output_operand: Operand) -> Operand:
    """Emit the operations computing Paddle activation `act_type` from input_operand into output_operand.

    attrs_source: the OpInfo or a mapping holding the activation's attributes (plain or prefixed with
    `<act_type>_`). Raises the context's ConversionError for an unknown activation or attributes that
    cannot be expressed."""
    spec = ACTIVATIONS.get(act_type)
    if spec is None:
        raise ctx.error(f"activation '{act_type}' has no NNAdapter equivalent here "
                        f"(known: {', '.join(sorted(ACTIVATIONS))})")
    attrs = ActivationAttrs(act_type, attrs_source)
    if spec.check is not None:
        reason = spec.check(attrs)
        if reason:
            raise ctx.error(f"activation '{act_type}': {reason}")
    if spec.float_only and input_operand.type.precision not in _FLOATS:
        raise ctx.error(f"activation '{act_type}' takes float32 input, got {input_operand.type.describe()}")
    spec.emit(ctx, attrs, input_operand, output_operand)
    return output_operand


def activation_emits(act_type: str) -> tuple:
    """The operations `emit_activation` may emit for `act_type` (for `emits=` of fused converters)."""
    spec = ACTIVATIONS.get(act_type)
    return spec.emits if spec is not None else ()


def activation_check(act_type: str, attrs_source) -> Optional[str]:
    """Why `act_type` with these attrs cannot be emitted, or None."""
    spec = ACTIVATIONS.get(act_type)
    if spec is None:
        return f"activation '{act_type}' has no NNAdapter equivalent"
    return spec.check(ActivationAttrs(act_type, attrs_source)) if spec.check is not None else None


# -- one-operation activations --------------------------------------------------------------------------

_ONE_OPERATION = {
    "relu": T.RELU, "sigmoid": T.SIGMOID, "tanh": T.TANH, "abs": T.ABS, "exp": T.EXP, "log": T.LOG,
    "floor": T.FLOOR, "square": T.SQUARE, "sin": T.SIN, "cos": T.COS, "rsqrt": T.RSQRT, "silu": T.SWISH,
}


def _register_one_operation(name, type):
    def emit(ctx, attrs, x, out):
        unary(ctx, type, x, out)

    _activation(name, [type])(emit)


for _name, _type in _ONE_OPERATION.items():
    _register_one_operation(_name, _type)


@_activation("relu6", [T.RELU6, T.CLIP])
def _emit_relu6(ctx, attrs, x, out):
    threshold = attrs.f("threshold", 6.0)
    if threshold == 6.0:
        unary(ctx, T.RELU6, x, out)
    else:
        ctx.add(T.CLIP, [x, ctx.const_f32(0.0), ctx.const_f32(threshold)], [out])


@_activation("relu1", [T.CLIP])
def _emit_relu1(ctx, attrs, x, out):
    # FUSED_RELU1 as an operation: clamp to [-1, 1].
    ctx.add(T.CLIP, [x, ctx.const_f32(-1.0), ctx.const_f32(1.0)], [out])


@_activation("brelu", [T.CLIP])
def _emit_brelu(ctx, attrs, x, out):
    ctx.add(T.CLIP, [x, ctx.const_f32(attrs.f("t_min", 0.0)), ctx.const_f32(attrs.f("t_max", 24.0))], [out])


@_activation("leaky_relu", [T.LEAKY_RELU])
def _emit_leaky_relu(ctx, attrs, x, out):
    ctx.add(T.LEAKY_RELU, [x, ctx.const_f32(attrs.f("alpha", 0.02))], [out])


@_activation("hard_sigmoid", [T.HARD_SIGMOID])
def _emit_hard_sigmoid(ctx, attrs, x, out):
    ctx.add(T.HARD_SIGMOID, [x, ctx.const_f32(attrs.f("slope", 0.2)), ctx.const_f32(attrs.f("offset", 0.5))], [out])


def _check_hard_swish(attrs):
    if attrs.f("threshold", 6.0) == 0.0 or attrs.f("scale", 6.0) == 0.0:
        return "hard_swish threshold and scale must be non-zero"
    return None


@_activation("hard_swish", [T.HARD_SWISH, T.MUL], check=_check_hard_swish)
def _emit_hard_swish(ctx, attrs, x, out):
    # Paddle: x * min(max(x + offset, 0), threshold) / scale. HARD_SWISH with alpha = 1/threshold and
    # beta = offset/threshold is x * clip((x + offset)/threshold, 0, 1); the rest is a factor threshold/scale.
    threshold = attrs.f("threshold", 6.0)
    scale = attrs.f("scale", 6.0)
    offset = attrs.f("offset", 3.0)
    alpha, beta = ctx.const_f32(1.0 / threshold), ctx.const_f32(offset / threshold)
    factor = threshold / scale
    if abs(factor - 1.0) < 1e-6:
        ctx.add(T.HARD_SWISH, [x, alpha, beta], [out])
        return
    swished = _temp(ctx, out, "hard_swish")
    ctx.add(T.HARD_SWISH, [x, alpha, beta], [swished])
    binary(ctx, T.MUL, swished, scalar_like(ctx, factor, swished), out)


@_activation("swish", [T.SWISH, T.MUL, T.SIGMOID])
def _emit_swish(ctx, attrs, x, out):
    # Paddle 3's swish has no beta (it is silu); older programs carry `beta`: x * sigmoid(beta * x).
    beta = attrs.f("beta", 1.0)
    if beta == 1.0:
        unary(ctx, T.SWISH, x, out)
        return
    scaled = binary(ctx, T.MUL, x, scalar_like(ctx, beta, x), _temp(ctx, out, "beta_x"))
    gate = unary(ctx, T.SIGMOID, scaled, _temp(ctx, out, "sigmoid"))
    binary(ctx, T.MUL, x, gate, out)


@_activation("gelu", [T.GELU])
def _emit_gelu(ctx, attrs, x, out):
    ctx.add(T.GELU, [x, ctx.const_bool(bool(attrs.get("approximate", False)))], [out])


@_activation("softplus", [T.SOFTPLUS])
def _emit_softplus(ctx, attrs, x, out):
    ctx.add(T.SOFTPLUS, [x, ctx.const_f32(attrs.f("beta", 1.0)), ctx.const_f32(attrs.f("threshold", 20.0))], [out])


@_activation("mish", [T.SOFTPLUS, T.TANH, T.MUL])
def _emit_mish(ctx, attrs, x, out):
    # x * tanh(softplus(x)); Paddle's softplus inside mish returns x itself above `threshold`.
    soft = _temp(ctx, out, "softplus")
    ctx.add(T.SOFTPLUS, [x, ctx.const_f32(1.0), ctx.const_f32(attrs.f("threshold", 20.0))], [soft])
    binary(ctx, T.MUL, x, unary(ctx, T.TANH, soft, _temp(ctx, out, "tanh")), out)


@_activation("logsigmoid", [T.MUL, T.SOFTPLUS])
def _emit_logsigmoid(ctx, attrs, x, out):
    # log(sigmoid(x)) = -softplus(-x): stays finite where sigmoid underflows (SOFTPLUS returns its input
    # past the threshold, as Paddle's stable formula does).
    minus_one = scalar_like(ctx, -1.0, x)
    negated = binary(ctx, T.MUL, x, minus_one, _temp(ctx, out, "neg"))
    soft = _temp(ctx, out, "softplus")
    ctx.add(T.SOFTPLUS, [negated, ctx.const_f32(1.0), ctx.const_f32(20.0)], [soft])
    binary(ctx, T.MUL, soft, minus_one, out)


def _emit_where_positive(ctx, x, out, negative_branch: Operand):
    """out = x > 0 ? x : negative_branch."""
    positive = compare(ctx, T.GREATER, x, scalar_like(ctx, 0.0, x), _temp(ctx, out, "positive"))
    ctx.add(T.WHERE, [positive, x, negative_branch], [out])


@_activation("elu", [T.EXP, T.SUB, T.MUL, T.GREATER, T.WHERE])
def _emit_elu(ctx, attrs, x, out):
    # Paddle: x > 0 ? x : alpha * (exp(x) - 1).
    alpha = attrs.f("alpha", 1.0)
    expm1 = binary(ctx, T.SUB, unary(ctx, T.EXP, x, _temp(ctx, out, "exp")), scalar_like(ctx, 1.0, x),
                   _temp(ctx, out, "expm1"))
    negative = binary(ctx, T.MUL, expm1, scalar_like(ctx, alpha, x), _temp(ctx, out, "negative"))
    _emit_where_positive(ctx, x, out, negative)


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


@_activation("selu", [T.EXP, T.SUB, T.MUL, T.GREATER, T.WHERE])
def _emit_selu(ctx, attrs, x, out):
    # Paddle: scale * (x > 0 ? x : alpha * exp(x) - alpha).
    scale, alpha = attrs.f("scale", _SELU_SCALE), attrs.f("alpha", _SELU_ALPHA)
    expm1 = binary(ctx, T.SUB, unary(ctx, T.EXP, x, _temp(ctx, out, "exp")), scalar_like(ctx, 1.0, x),
                   _temp(ctx, out, "expm1"))
    negative = binary(ctx, T.MUL, expm1, scalar_like(ctx, alpha, x), _temp(ctx, out, "negative"))
    unscaled = _temp(ctx, out, "unscaled")
    _emit_where_positive(ctx, x, unscaled, negative)
    binary(ctx, T.MUL, unscaled, scalar_like(ctx, scale, x), out)


@_activation("softsign", [T.ABS, T.ADD, T.DIV])
def _emit_softsign(ctx, attrs, x, out):
    denominator = binary(ctx, T.ADD, unary(ctx, T.ABS, x, _temp(ctx, out, "abs")), scalar_like(ctx, 1.0, x),
                         _temp(ctx, out, "denominator"))
    binary(ctx, T.DIV, x, denominator, out)


@_activation("tanh_shrink", [T.TANH, T.SUB])
def _emit_tanh_shrink(ctx, attrs, x, out):
    binary(ctx, T.SUB, x, unary(ctx, T.TANH, x, _temp(ctx, out, "tanh")), out)


@_activation("thresholded_relu", [T.GREATER, T.WHERE])
def _emit_thresholded_relu(ctx, attrs, x, out):
    # Paddle: x > threshold ? x : value.
    above = compare(ctx, T.GREATER, x, scalar_like(ctx, attrs.f("threshold", 1.0), x), _temp(ctx, out, "above"))
    ctx.add(T.WHERE, [above, x, scalar_like(ctx, attrs.f("value", 0.0), x)], [out])


@_activation("hard_shrink", [T.ABS, T.GREATER, T.WHERE])
def _emit_hard_shrink(ctx, attrs, x, out):
    # Paddle: (x < -t || x > t) ? x : 0, i.e. |x| > t ? x : 0.
    magnitude = unary(ctx, T.ABS, x, _temp(ctx, out, "abs"))
    keep = compare(ctx, T.GREATER, magnitude, scalar_like(ctx, attrs.f("threshold", 0.5), x), _temp(ctx, out, "keep"))
    ctx.add(T.WHERE, [keep, x, scalar_like(ctx, 0.0, x)], [out])


@_activation("softshrink", [T.CLIP, T.SUB])
def _emit_softshrink(ctx, attrs, x, out):
    # x > l ? x - l : x < -l ? x + l : 0  ==  x - clip(x, -l, l).
    lam = attrs.f("lambda", 0.5)
    clipped = _temp(ctx, out, "clip")
    ctx.add(T.CLIP, [x, ctx.const_f32(-lam), ctx.const_f32(lam)], [clipped])
    binary(ctx, T.SUB, x, clipped, out)


@_activation("reciprocal", [T.DIV])
def _emit_reciprocal(ctx, attrs, x, out):
    binary(ctx, T.DIV, scalar_like(ctx, 1.0, x), x, out)


@_activation("sqrt", [T.POW])
def _emit_sqrt(ctx, attrs, x, out):
    # As Paddle Lite: POW with exponent 0.5 (NNAdapter has no SQRT).
    binary(ctx, T.POW, x, scalar_like(ctx, 0.5, x), out)


def _register_log_base(name, base):
    def emit(ctx, attrs, x, out):
        natural = unary(ctx, T.LOG, x, _temp(ctx, out, "ln"))
        binary(ctx, T.MUL, natural, scalar_like(ctx, 1.0 / math.log(base), x), out)

    _activation(name, [T.LOG, T.MUL])(emit)


_register_log_base("log2", 2.0)
_register_log_base("log10", 10.0)


@_activation("log1p", [T.ADD, T.LOG])
def _emit_log1p(ctx, attrs, x, out):
    # ln(1 + x): for |x| << 1 the absolute error is ~1 ulp of 1 (6e-8), inside the op tolerance.
    unary(ctx, T.LOG, binary(ctx, T.ADD, x, scalar_like(ctx, 1.0, x), _temp(ctx, out, "one_plus")), out)


@_activation("ceil", [T.MUL, T.FLOOR])
def _emit_ceil(ctx, attrs, x, out):
    minus_one = scalar_like(ctx, -1.0, x)
    negated = binary(ctx, T.MUL, x, minus_one, _temp(ctx, out, "neg"))
    binary(ctx, T.MUL, unary(ctx, T.FLOOR, negated, _temp(ctx, out, "floor")), minus_one, out)


def _check_round(attrs):
    decimals = int(attrs.get("decimals", 0))
    if decimals != 0:
        return f"round with decimals={decimals} is not supported (only 0)"
    return None


@_activation("round", [T.ABS, T.FLOOR, T.SUB, T.GREATER, T.EQUAL, T.MUL, T.NOT_EQUAL, T.AND, T.OR, T.CAST,
                       T.ADD, T.LESS, T.WHERE], check=_check_round)
def _emit_round(ctx, attrs, x, out):
    # Paddle 3 rounds halves to even (std::nearbyint; 2.5 -> 2, -0.5 -> -0). On |x|: whole = floor(|x|),
    # fraction = |x| - whole is exact, round up when fraction > 0.5, or == 0.5 and whole is odd; the
    # sign is restored at the end. (floor(|x| + 0.5) would also round 0.49999997 up: the sum rounds.)
    def t(purpose):
        return _temp(ctx, out, purpose)

    half = scalar_like(ctx, 0.5, x)
    magnitude = unary(ctx, T.ABS, x, t("abs"))
    whole = unary(ctx, T.FLOOR, magnitude, t("floor"))
    fraction = binary(ctx, T.SUB, magnitude, whole, t("fraction"))
    above_half = compare(ctx, T.GREATER, fraction, half, t("above_half"))
    tie = compare(ctx, T.EQUAL, fraction, half, t("tie"))
    halved = binary(ctx, T.MUL, whole, half, t("halved"))
    odd = compare(ctx, T.NOT_EQUAL, unary(ctx, T.FLOOR, halved, t("halved_floor")), halved, t("odd"))
    tie_to_even = compare(ctx, T.AND, tie, odd, t("tie_up"))
    up = compare(ctx, T.OR, above_half, tie_to_even, t("up"))
    rounded = binary(ctx, T.ADD, whole, cast_to(ctx, up, Precision.FLOAT32, t("step")), t("rounded"))
    negative = compare(ctx, T.LESS, x, scalar_like(ctx, 0.0, x), t("negative"))
    mirrored = binary(ctx, T.MUL, rounded, scalar_like(ctx, -1.0, x), t("mirrored"))
    ctx.add(T.WHERE, [negative, mirrored, rounded], [out])


@_activation("sign", [T.GREATER, T.LESS, T.CAST, T.SUB, T.NOT_EQUAL, T.WHERE], float_only=False)
def _emit_sign(ctx, attrs, x, out):
    # (x > 0) - (x < 0) in the input's precision; a float NaN stays NaN (x != x picks it back).
    precision = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
    zero = scalar_like(ctx, 0, x)
    positive = cast_to(ctx, compare(ctx, T.GREATER, x, zero, _temp(ctx, out, "gt")), precision,
                       _temp(ctx, out, "positive"))
    negative = cast_to(ctx, compare(ctx, T.LESS, x, zero, _temp(ctx, out, "lt")), precision,
                       _temp(ctx, out, "negative"))
    if precision in _INTS:
        binary(ctx, T.SUB, positive, negative, out)
        return
    difference = binary(ctx, T.SUB, positive, negative, _temp(ctx, out, "difference"))
    nan = compare(ctx, T.NOT_EQUAL, x, x, _temp(ctx, out, "nan"))
    ctx.add(T.WHERE, [nan, x, difference], [out])


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
        if spec.check is not None:
            reason = spec.check(ActivationAttrs(act_type, _standalone_attrs(op)))
            if reason:
                return reason
        precision = var_precision(ctx, first_input(op))
        if spec.float_only and precision is not None and precision not in _FLOATS:
            return f"{act_type} is emitted with operations that take float32 input, X is {precision.name}"
        if not spec.float_only and precision is not None and precision not in _FLOATS | _INTS:
            return f"{act_type} takes float32, int32 or int64 input, X is {precision.name}"
        return None

    return check


def _convert_activation(ctx, op):
    x = ctx.input(first_input(op))
    out = output_for(ctx, op, first_output(op), x)
    emit_activation(ctx, op.type, _standalone_attrs(op), x, out)


for _name in _ACTIVATION_OPS:
    converter(_name, emits=_STANDALONE_IGNORES_ATTRS.get(_name, ACTIVATIONS[_name].emits),
              check=_make_activation_check(_name))(_convert_activation)


# -- prelu --------------------------------------------------------------------------------------------

def _check_prelu(op, ctx):
    mode = op.attr("mode", "all")
    if mode not in ("all", "channel", "element"):
        return f"prelu mode '{mode}' is not one of all/channel/element"
    precision = var_precision(ctx, first_input(op))
    if precision is not None and precision not in _FLOATS:
        return f"prelu takes float32 input, X is {precision.name}"
    return None


@converter("prelu", emits=[T.PRELU, T.GREATER, T.MUL, T.WHERE, T.UNSQUEEZE], check=_check_prelu)
def convert_prelu(ctx, op):
    """x > 0 ? x : alpha * x. PRELU (slope [1] or [C] on axis 1) where it fits, else composed."""
    x_name, alpha_name = first_input(op), first_input(op, "Alpha")
    x = ctx.input(x_name)
    out = output_for(ctx, op, first_output(op), x)
    mode = op.attr("mode", "all")
    channels_last = op.attr("data_format", "NCHW") in ("NHWC", "NLC", "NDHWC")
    rank = x.type.rank
    if ctx.is_param(alpha_name):
        alpha = ctx.param(alpha_name).astype(np.float32)
        if mode == "all" or (mode == "channel" and not channels_last and rank >= 2):
            slope = alpha.reshape(-1)
            if mode == "all":
                slope = slope[:1]
            ctx.add(T.PRELU, [x, ctx.const(np.ascontiguousarray(slope))], [out])
            return
        # Channels-last channel mode ([C] on the last axis) and element mode ([1, ...x.shape[1:]] or
        # x.shape[1:]) line up with x under numpy's trailing alignment as they are.
        slope = ctx.const(np.ascontiguousarray(alpha.reshape(-1) if mode == "channel" else alpha))
    else:
        slope = ctx.input(alpha_name)
        if mode == "channel" and not channels_last and slope.type.rank == 1 and rank > 2:
            # [C] -> [C, 1, ..., 1] so it lines up with axis 1 under numpy broadcasting.
            unsqueezed = ctx.temp(first_output(op), "alpha")
            ctx.add(T.UNSQUEEZE, [slope, ctx.const_i32(list(range(1, rank - 1)))], [unsqueezed])
            slope = unsqueezed
    scaled = binary(ctx, T.MUL, x, slope, _temp(ctx, out, "scaled"))
    _emit_where_positive(ctx, x, out, scaled)


# -- pow -------------------------------------------------------------------------------------------------

def _check_pow(op, ctx):
    precision = var_precision(ctx, first_input(op))
    if precision is None:
        return None
    if precision not in _FLOATS | _INTS:
        return f"pow takes float32, int32 or int64 input, X is {precision.name}"
    factor = float(op.attr("factor", 1.0))
    if precision in _INTS and not first_input(op, "FactorTensor") and factor != int(factor):
        # Paddle computes pow(x, 1.5) in floating point before truncating; POW on integers cannot.
        return f"pow of an integer tensor with the non-integer factor {factor}"
    return None


@converter("pow", emits=[T.POW, T.CAST], check=_check_pow)
def convert_pow(ctx, op):
    """x ^ factor; factor from `FactorTensor` when given, else the `factor` attr (default 1)."""
    x = ctx.input(first_input(op))
    out = output_for(ctx, op, first_output(op), x)
    factor_name = first_input(op, "FactorTensor")
    if factor_name:
        factor = ctx.input(factor_name)
        want = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
        if factor.type.precision != want:
            factor = cast_to(ctx, factor, want, ctx.temp(first_output(op), "factor"))
    else:
        factor = scalar_like(ctx, float(op.attr("factor", 1.0)), x)
    binary(ctx, T.POW, x, factor, out)


# -- clip ------------------------------------------------------------------------------------------------

def _check_clip(op, ctx):
    precision = var_precision(ctx, first_input(op))
    if precision is not None and precision not in _FLOATS | _INTS:
        return f"clip takes float32, int32 or int64 input, X is {precision.name}"
    return None


@converter("clip", emits=[T.CLIP, T.MAX, T.MIN, T.CAST], check=_check_clip)
def convert_clip(ctx, op):
    """min(max(x, min), max); the `Min`/`Max` tensor inputs win over the `min`/`max` attrs."""
    x = ctx.input(first_input(op))
    out_name = first_output(op)
    out = output_for(ctx, op, out_name, x)
    plain = x.type.precision if not x.type.is_quantized else Precision.FLOAT32

    def bound(slot, attr):
        name = first_input(op, slot)
        if name:
            operand = ctx.input(name)
            if operand.type.precision != plain:
                operand = cast_to(ctx, operand, plain, ctx.temp(out_name, f"{attr}_cast"))
            return operand
        return scalar_like(ctx, float(op.attr(attr, 0.0)), x)

    low, high = bound("Min", "min"), bound("Max", "max")
    if plain in _INTS:
        # CLIP takes float32 only; integer tensors clamp through MAX then MIN.
        raised = binary(ctx, T.MAX, x, low, ctx.temp(out_name, "max"))
        binary(ctx, T.MIN, raised, high, out)
        return
    ctx.add(T.CLIP, [x, low, high], [out])


# -- scale -----------------------------------------------------------------------------------------------

_IDENTITY_EPSILON = 1e-5


def _quant_sign_constant(ctx, value: float) -> Operand:
    """A per-layer int8 constant representing `value` (Paddle Lite's +-1 with scale |value|)."""
    magnitude = abs(value)
    return ctx.const(np.array([1 if value >= 0 else -1], dtype=np.int8), Precision.QUANT_INT8_SYMM_PER_LAYER,
                     scale=magnitude if magnitude > 0 else 1.0)


def _check_scale(op, ctx):
    precision = var_precision(ctx, first_input(op))
    if precision is not None and precision not in _FLOATS | _INTS:
        return f"scale takes float32, int32 or int64 input, X is {precision.name}"
    return None


@converter("scale", emits=[T.MUL, T.ADD, T.CAST], check=_check_scale)
def convert_scale(ctx, op):
    """scale * x + bias (bias_after_scale, the default) or scale * (x + bias).

    `ScaleTensor` replaces the `scale` attr, `BiasTensor` the `bias` attr. With constant scale ~1 and
    bias ~0 the op is the identity: the output var is bound to the input operand."""
    x_name, out_name = first_input(op), first_output(op)
    x = ctx.input(x_name)
    plain = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
    scale_name, bias_name = first_input(op, "ScaleTensor"), first_input(op, "BiasTensor")
    scale = float(op.attr("scale", 1.0))
    bias = float(op.attr("bias", 0.0))
    after = bool(op.attr("bias_after_scale", True))
    if plain in _INTS:
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
        if abs(scale - 1.0) < _IDENTITY_EPSILON and abs(bias) < _IDENTITY_EPSILON:
            ctx.bind(out_name, x)
            return
    do_scale = bool(scale_name) or abs(scale - 1.0) >= _IDENTITY_EPSILON
    do_bias = bool(bias_name) or abs(bias) >= _IDENTITY_EPSILON

    def const(value):
        if x.type.is_quantized:
            return _quant_sign_constant(ctx, value)
        return scalar_like(ctx, value, x)

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
    steps = [(t, v) for t, v in steps if v is not None]
    current = x
    for i, (type, value) in enumerate(steps):
        last = i == len(steps) - 1
        target = output_for(ctx, op, out_name, x) if last else ctx.temp(out_name, type.name.lower())
        current = binary(ctx, type, current, value, target)
