"""Emission helpers every converter family shares: the operation forms converters would otherwise spell
out by hand, and the one table of Paddle activations.

- binary arithmetic with its fuse code, unary operations, comparisons, CAST into a given operand;
- Paddle's `axis` broadcasting of binary ops (`align_by_axis`);
- the quantized-output rule of elementwise-like ops (`output_for`);
- `emit_chain` and its steps, which name every intermediate operand after the op's output var;
- activations: `FUSE_CODES` (the Paddle activations that are an NNAdapter fuse code) and `ACTIVATIONS`
  (every other activation name -> the operations computing it). `emit_activation` is the one place an
  activation name becomes operations: the standalone activation ops, the fused activation of conv2d / fc
  (`fused_activation_steps`) and of fusion_elementwise_*_activation all go through it.

Imports the standard only (no other converter module), so every converter module can use it.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from nnadapter_bridge.nnadapter.codes import FuseCode, Precision, dtype_precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.types import Operand, OperandType

# The float precisions Paddle's kernels take (float64 as well as float32; float16 where Paddle has the
# kernel), plus the quantized form of float32 that Paddle Lite's quantized models carry.
FLOATS = frozenset({Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64, Precision.QUANT_INT8_SYMM_PER_LAYER})
INTS = frozenset({Precision.INT32, Precision.INT64})


# -- single operations -------------------------------------------------------------------------------------

def fuse_none(ctx) -> Operand:
    return ctx.const_i32(int(FuseCode.FUSED_NONE))


def binary(ctx, type: T, a: Operand, b: Operand, out: Operand, fuse: FuseCode = FuseCode.FUSED_NONE) -> Operand:
    """Emit a binary arithmetic operation (input0, input1, fuse_code) -> out."""
    ctx.add(type, [a, b, ctx.const_i32(int(fuse))], [out])
    return out


def unary(ctx, type: T, x: Operand, out: Operand) -> Operand:
    ctx.add(type, [x], [out])
    return out


def compare(ctx, type: T, a: Operand, b: Operand, out: Operand) -> Operand:
    """Emit a two-input operation without a fuse code (comparisons, logic) -> out."""
    ctx.add(type, [a, b], [out])
    return out


def cast_to(ctx, x: Operand, precision: Precision, out: Operand) -> Operand:
    """Emit a CAST of `x` to `precision` into `out` (always; `ctx.cast` skips a cast that changes nothing)."""
    ctx.add(T.CAST, [x, ctx.const_i32(int(precision))], [out])
    return out


def output_for(ctx, op, name: str, like: Operand, slot: str = "Out") -> Operand:
    """The output operand of `name`; quantized per layer with `<slot>0_scale` when the input is quantized.

    Paddle Lite's quantized models carry the output scale as an attr; a float input keeps a float output
    (the scale only describes how a fully quantized device would store it)."""
    scales = ctx.quant_scales(op, slot, 0)
    if scales and like.type.is_quantized:
        return ctx.output(name, OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=scales[0]))
    return ctx.output(name)


def _temp(ctx, out: Operand, purpose: str) -> Operand:
    return ctx.temp(out.name or "activation", purpose)


# -- Paddle axis broadcasting --------------------------------------------------------------------------

def _aligned_dims(low_dims, high_rank: int, axis: int):
    """The lower-rank dims placed at `axis` of a rank-`high_rank` shape, padded with 1s."""
    low_dims = list(low_dims)
    # Paddle drops trailing 1-dims of the lower-rank side when they would run past the higher rank.
    while low_dims and axis + len(low_dims) > high_rank and low_dims[-1] == 1:
        low_dims.pop()
    return [1] * axis + low_dims + [1] * (high_rank - axis - len(low_dims)), len(low_dims)


def align_by_axis(ctx, out_name: str, x_name: str, y_name: str, axis: int):
    """The operands of X and Y, broadcast-compatible under numpy rules, following Paddle's `axis`.

    The lower-rank operand is aligned with the higher-rank one starting at dim `axis` (negative:
    |rank(x) - rank(y)|, numpy's trailing alignment). When that is not numpy's alignment the lower-rank
    side gets trailing 1-dims: a parameter is reshaped as a constant, a variable goes through UNSQUEEZE
    (a `<out_name>/<var>/unsqueeze` temp)."""
    # A parameter is only looked at here: turning it into an operand before knowing whether it must be
    # reshaped would leave an unused constant in the model.
    def dims_of(name):
        return tuple(ctx.param(name).shape) if ctx.is_param(name) else ctx.dims(name)

    x_dims, y_dims = dims_of(x_name), dims_of(y_name)
    rx, ry = len(x_dims), len(y_dims)
    low_name, low_dims = (y_name, y_dims) if rx > ry else (x_name, x_dims)
    high_rank = max(rx, ry)
    if axis < 0:
        axis = abs(rx - ry)
    dims, kept = _aligned_dims(low_dims, high_rank, axis)
    if rx == ry or min(rx, ry) == 0 or (axis + kept == high_rank and kept == len(low_dims)):
        return ctx.input(x_name), ctx.input(y_name)  # numpy's trailing alignment already
    if axis + kept > high_rank:
        raise ctx.error(f"axis {axis} places the rank-{len(low_dims)} input '{low_name}' past the "
                        f"rank-{high_rank} other input")
    if ctx.is_param(low_name):
        value = ctx.param(low_name).reshape(dims)
        aligned = ctx.const(np.ascontiguousarray(value), dtype_precision(value.dtype))  # float64 stays float64
    else:
        low = ctx.input(low_name)
        if kept != len(low_dims):
            raise ctx.error(f"'{low_name}' has trailing 1-dims past the other input's rank at axis {axis}; "
                            "only a parameter can be reshaped for that")
        axes = list(range(axis)) + list(range(axis + kept, high_rank))
        aligned = ctx.temp(out_name, f"{low_name}/unsqueeze")
        ctx.add(T.UNSQUEEZE, [low, ctx.const_i32(axes)], [aligned])
    return (ctx.input(x_name), aligned) if rx > ry else (aligned, ctx.input(y_name))


# -- chains of operations ----------------------------------------------------------------------------------

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


def scalar_mul_step(value: float) -> Callable:
    """x * value, the constant in x's plain precision."""
    return lambda ctx, x, out: binary(ctx, T.MUL, x, ctx.const_like(value, x), out)


def binary_step(operation: T, other: Callable) -> Callable:
    """A binary arithmetic step whose second operand is `other(ctx, x)`."""
    return lambda ctx, x, out: binary(ctx, operation, x, other(ctx, x), out)


def reduce_step(operation: T, axes: Sequence[int], keepdim: bool) -> Callable:
    return lambda ctx, x, out: ctx.add(operation, [x, ctx.const_i32(list(axes)), ctx.const_bool(keepdim)], [out])


# -- fuse codes ------------------------------------------------------------------------------------------

# Paddle `act_type` values that are an NNAdapter fuse code rather than an extra operation.
FUSE_CODES = {"": FuseCode.FUSED_NONE, "relu": FuseCode.FUSED_RELU, "relu1": FuseCode.FUSED_RELU1,
              "relu6": FuseCode.FUSED_RELU6}


def fuse_code_of(act_type: str | None) -> FuseCode | None:
    """The fuse code for a Paddle activation name, or None when it needs an extra operation."""
    return FUSE_CODES.get(act_type or "")


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
        # Paddle's activation attrs are 32-bit floats (a default too): a float64 kernel sees that value.
        return float(np.float32(self.get(name, default)))


@dataclasses.dataclass(frozen=True)
class Activation:
    name: str
    emits: tuple
    emit: Callable  # (ctx, attrs, x, out) -> None
    check: Callable | None = None  # (attrs) -> reason | None
    float_only: bool = True  # the emitted operations take float (FLOAT16/32/64, QUANT_INT8) inputs only


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
    if spec.float_only and input_operand.type.precision not in FLOATS:
        raise ctx.error(f"activation '{act_type}' takes float input, got {input_operand.type.describe()}")
    spec.emit(ctx, attrs, input_operand, output_operand)
    return output_operand


def activation_emits(act_type: str) -> tuple:
    """The operations `emit_activation` may emit for `act_type` (for `emits=` of fused converters)."""
    spec = ACTIVATIONS.get(act_type)
    return spec.emits if spec is not None else ()


def activation_check(act_type: str, attrs_source) -> str | None:
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

    # Paddle's abs and square kernels take int32/int64 as well.
    _activation(name, [type], float_only=name not in ("abs", "square"))(emit)


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
    # In x's precision: float32 constants would round 1/threshold below a float64 x's precision.
    alpha, beta = ctx.const_like(1.0 / threshold, x), ctx.const_like(offset / threshold, x)
    factor = threshold / scale
    if threshold == scale:  # exactly: any other ratio is a real factor
        ctx.add(T.HARD_SWISH, [x, alpha, beta], [out])
        return
    swished = _temp(ctx, out, "hard_swish")
    ctx.add(T.HARD_SWISH, [x, alpha, beta], [swished])
    binary(ctx, T.MUL, swished, ctx.const_like(factor, swished), out)


@_activation("swish", [T.SWISH, T.MUL, T.SIGMOID])
def _emit_swish(ctx, attrs, x, out):
    # Paddle 3's swish has no beta (it is silu); older programs carry `beta`: x * sigmoid(beta * x).
    beta = attrs.f("beta", 1.0)
    if beta == 1.0:
        unary(ctx, T.SWISH, x, out)
        return
    scaled = binary(ctx, T.MUL, x, ctx.const_like(beta, x), _temp(ctx, out, "beta_x"))
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


@_activation("logsigmoid", [T.MUL, T.RELU, T.SUB, T.EXP, T.ADD, T.LOG])
def _emit_logsigmoid(ctx, attrs, x, out):
    # Paddle's max-shifted formula, m = max(-x, 0): -m - log(exp(-m) + exp(-x - m)). It stays finite
    # where sigmoid underflows, and gives NaN for -inf (inf - inf) as Paddle's kernel does.
    minus_one = ctx.const_like(-1.0, x)
    negated = binary(ctx, T.MUL, x, minus_one, _temp(ctx, out, "neg"))
    shift = unary(ctx, T.RELU, negated, _temp(ctx, out, "shift"))
    minus_shift = binary(ctx, T.MUL, shift, minus_one, _temp(ctx, out, "minus_shift"))
    first = unary(ctx, T.EXP, minus_shift, _temp(ctx, out, "exp_shift"))
    second = unary(ctx, T.EXP, binary(ctx, T.SUB, negated, shift, _temp(ctx, out, "neg_shifted")),
                   _temp(ctx, out, "exp_neg_shifted"))
    total = binary(ctx, T.ADD, first, second, _temp(ctx, out, "sum"))
    binary(ctx, T.SUB, minus_shift, unary(ctx, T.LOG, total, _temp(ctx, out, "log")), out)


def emit_where_positive(ctx, x, out, negative_branch: Operand):
    """out = x > 0 ? x : negative_branch."""
    positive = compare(ctx, T.GREATER, x, ctx.const_like(0.0, x), _temp(ctx, out, "positive"))
    ctx.add(T.WHERE, [positive, x, negative_branch], [out])


@_activation("elu", [T.EXP, T.SUB, T.MUL, T.GREATER, T.WHERE])
def _emit_elu(ctx, attrs, x, out):
    # Paddle: x > 0 ? x : alpha * (exp(x) - 1).
    alpha = attrs.f("alpha", 1.0)
    expm1 = binary(ctx, T.SUB, unary(ctx, T.EXP, x, _temp(ctx, out, "exp")), ctx.const_like(1.0, x),
                   _temp(ctx, out, "expm1"))
    negative = binary(ctx, T.MUL, expm1, ctx.const_like(alpha, x), _temp(ctx, out, "negative"))
    emit_where_positive(ctx, x, out, negative)


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


@_activation("selu", [T.EXP, T.SUB, T.MUL, T.GREATER, T.WHERE])
def _emit_selu(ctx, attrs, x, out):
    # Paddle: scale * (x > 0 ? x : alpha * exp(x) - alpha).
    scale, alpha = attrs.f("scale", _SELU_SCALE), attrs.f("alpha", _SELU_ALPHA)
    expm1 = binary(ctx, T.SUB, unary(ctx, T.EXP, x, _temp(ctx, out, "exp")), ctx.const_like(1.0, x),
                   _temp(ctx, out, "expm1"))
    negative = binary(ctx, T.MUL, expm1, ctx.const_like(alpha, x), _temp(ctx, out, "negative"))
    unscaled = _temp(ctx, out, "unscaled")
    emit_where_positive(ctx, x, unscaled, negative)
    binary(ctx, T.MUL, unscaled, ctx.const_like(scale, x), out)


@_activation("softsign", [T.ABS, T.ADD, T.DIV])
def _emit_softsign(ctx, attrs, x, out):
    denominator = binary(ctx, T.ADD, unary(ctx, T.ABS, x, _temp(ctx, out, "abs")), ctx.const_like(1.0, x),
                         _temp(ctx, out, "denominator"))
    binary(ctx, T.DIV, x, denominator, out)


@_activation("tanh_shrink", [T.TANH, T.SUB])
def _emit_tanh_shrink(ctx, attrs, x, out):
    binary(ctx, T.SUB, x, unary(ctx, T.TANH, x, _temp(ctx, out, "tanh")), out)


def _mask(ctx, type: T, a: Operand, b: Operand, out: Operand, purpose: str) -> Operand:
    """The comparison `a <type> b` as 0/1 in a's float precision (Paddle's `(cond).cast<T>()`)."""
    test = compare(ctx, type, a, b, _temp(ctx, out, purpose))
    plain = a.type.precision if not a.type.is_quantized else Precision.FLOAT32
    return cast_to(ctx, test, plain, _temp(ctx, out, purpose + "_mask"))


# The shrinks and thresholded_relu multiply by 0/1 masks as Paddle's kernels do, so NaN, and an infinity
# the mask zeroes, give NaN there (a select would give 0).

@_activation("thresholded_relu", [T.GREATER, T.LESS_EQUAL, T.CAST, T.MUL, T.ADD])
def _emit_thresholded_relu(ctx, attrs, x, out):
    # Paddle: (x > threshold) * x + (x <= threshold) * value.
    threshold = ctx.const_like(attrs.f("threshold", 1.0), x)
    value = attrs.f("value", 0.0)
    above = _mask(ctx, T.GREATER, x, threshold, out, "above")
    if value == 0.0:
        binary(ctx, T.MUL, above, x, out)
        return
    kept = binary(ctx, T.MUL, above, x, _temp(ctx, out, "kept"))
    below = _mask(ctx, T.LESS_EQUAL, x, threshold, out, "below")
    filled = binary(ctx, T.MUL, below, ctx.const_like(value, x), _temp(ctx, out, "filled"))
    binary(ctx, T.ADD, kept, filled, out)


@_activation("hard_shrink", [T.ABS, T.GREATER_EQUAL, T.CAST, T.MUL])
def _emit_hard_shrink(ctx, attrs, x, out):
    # Paddle: x * (x <= -t || x >= t), i.e. x * (|x| >= t): |x| == t keeps x.
    magnitude = unary(ctx, T.ABS, x, _temp(ctx, out, "abs"))
    keep = _mask(ctx, T.GREATER_EQUAL, magnitude, ctx.const_like(attrs.f("threshold", 0.5), x), out, "keep")
    binary(ctx, T.MUL, x, keep, out)


@_activation("softshrink", [T.GREATER, T.LESS, T.CAST, T.SUB, T.ADD, T.MUL])
def _emit_softshrink(ctx, attrs, x, out):
    # Paddle: (x > l) * (x - l) + (x < -l) * (x + l).
    lam = attrs.f("lambda", 0.5)
    low, high = ctx.const_like(-lam, x), ctx.const_like(lam, x)
    upper = binary(ctx, T.MUL, _mask(ctx, T.GREATER, x, high, out, "above"),
                   binary(ctx, T.SUB, x, high, _temp(ctx, out, "minus_l")), _temp(ctx, out, "upper"))
    lower = binary(ctx, T.MUL, _mask(ctx, T.LESS, x, low, out, "below"),
                   binary(ctx, T.ADD, x, high, _temp(ctx, out, "plus_l")), _temp(ctx, out, "lower"))
    binary(ctx, T.ADD, upper, lower, out)


@_activation("reciprocal", [T.DIV])
def _emit_reciprocal(ctx, attrs, x, out):
    binary(ctx, T.DIV, ctx.const_like(1.0, x), x, out)


@_activation("sqrt", [T.POW])
def _emit_sqrt(ctx, attrs, x, out):
    # As Paddle Lite: POW with exponent 0.5 (NNAdapter has no SQRT).
    binary(ctx, T.POW, x, ctx.const_like(0.5, x), out)


def _register_log_base(name, base):
    def emit(ctx, attrs, x, out):
        natural = unary(ctx, T.LOG, x, _temp(ctx, out, "ln"))
        binary(ctx, T.MUL, natural, ctx.const_like(1.0 / math.log(base), x), out)

    _activation(name, [T.LOG, T.MUL])(emit)


_register_log_base("log2", 2.0)
_register_log_base("log10", 10.0)


@_activation("log1p", [T.ADD, T.LOG])
def _emit_log1p(ctx, attrs, x, out):
    # ln(1 + x): for |x| << 1 the absolute error is ~1 ulp of 1 (6e-8), inside the op tolerance.
    unary(ctx, T.LOG, binary(ctx, T.ADD, x, ctx.const_like(1.0, x), _temp(ctx, out, "one_plus")), out)


@_activation("ceil", [T.MUL, T.FLOOR])
def _emit_ceil(ctx, attrs, x, out):
    minus_one = ctx.const_like(-1.0, x)
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

    half = ctx.const_like(0.5, x)
    magnitude = unary(ctx, T.ABS, x, t("abs"))
    whole = unary(ctx, T.FLOOR, magnitude, t("floor"))
    fraction = binary(ctx, T.SUB, magnitude, whole, t("fraction"))
    above_half = compare(ctx, T.GREATER, fraction, half, t("above_half"))
    tie = compare(ctx, T.EQUAL, fraction, half, t("tie"))
    halved = binary(ctx, T.MUL, whole, half, t("halved"))
    odd = compare(ctx, T.NOT_EQUAL, unary(ctx, T.FLOOR, halved, t("halved_floor")), halved, t("odd"))
    tie_to_even = compare(ctx, T.AND, tie, odd, t("tie_up"))
    up = compare(ctx, T.OR, above_half, tie_to_even, t("up"))
    plain = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
    rounded = binary(ctx, T.ADD, whole, cast_to(ctx, up, plain, t("step")), t("rounded"))
    negative = compare(ctx, T.LESS, x, ctx.const_like(0.0, x), t("negative"))
    mirrored = binary(ctx, T.MUL, rounded, ctx.const_like(-1.0, x), t("mirrored"))
    ctx.add(T.WHERE, [negative, mirrored, rounded], [out])


@_activation("sign", [T.GREATER, T.LESS, T.CAST, T.SUB, T.NOT_EQUAL, T.WHERE], float_only=False)
def _emit_sign(ctx, attrs, x, out):
    # (x > 0) - (x < 0) in the input's precision; a float NaN stays NaN (x != x picks it back).
    precision = x.type.precision if not x.type.is_quantized else Precision.FLOAT32
    zero = ctx.const_like(0, x)
    positive = cast_to(ctx, compare(ctx, T.GREATER, x, zero, _temp(ctx, out, "gt")), precision,
                       _temp(ctx, out, "positive"))
    negative = cast_to(ctx, compare(ctx, T.LESS, x, zero, _temp(ctx, out, "lt")), precision,
                       _temp(ctx, out, "negative"))
    if precision in INTS:
        binary(ctx, T.SUB, positive, negative, out)
        return
    difference = binary(ctx, T.SUB, positive, negative, _temp(ctx, out, "difference"))
    nan = compare(ctx, T.NOT_EQUAL, x, x, _temp(ctx, out, "nan"))
    ctx.add(T.WHERE, [nan, x, difference], [out])



# -- fused activations of conv2d / fc ---------------------------------------------------------------------

# The activations conv2d (with_act) and fc (activation_type) may carry beyond the fuse codes.
FUSED_PRODUCT_ACTIVATIONS = ("leaky_relu", "hard_swish", "sigmoid", "tanh", "log", "abs")
# What those may emit (for `emits=` of conv2d / fc).
FUSED_PRODUCT_EMITS = list(dict.fromkeys(t for act in FUSED_PRODUCT_ACTIVATIONS for t in ACTIVATIONS[act].emits))


def fused_activation_attrs(op, act_type: str) -> dict:
    """The attrs of a fused activation on conv2d / fc: only the `<act_type>_`-prefixed ones
    (`leaky_relu_alpha`, `hard_swish_threshold`), since the op's plain attrs belong to the op itself."""
    prefix = f"{act_type}_"
    return {name: value for name, value in op.attrs.items() if name.startswith(prefix)}


def fused_activation_reason(op, act_type: str) -> str | None:
    """Why conv2d / fc cannot carry the fused activation `act_type` (None when it can)."""
    if fuse_code_of(act_type) is not None:
        return None
    if act_type not in FUSED_PRODUCT_ACTIVATIONS:
        return f"fused activation '{act_type}' has no NNAdapter fuse code or operation here"
    return activation_check(act_type, fused_activation_attrs(op, act_type))


def fused_activation_steps(op, act_type: str) -> list:
    """Chain steps for a fused activation that is not a fuse code (none for relu/relu1/relu6)."""
    if fuse_code_of(act_type) is not None:
        return []
    attrs = fused_activation_attrs(op, act_type)
    return [(act_type, lambda ctx, x, out: emit_activation(ctx, act_type, attrs, x, out))]
