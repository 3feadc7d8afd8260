"""Converters for Paddle's binary elementwise ops, comparisons, logic, where, sum and the is* tests.

Owns: elementwise_{add,sub,mul,div,max,min,pow,floordiv,mod}, fusion_elementwise_*_activation,
equal, not_equal, greater_than, greater_equal, less_than, less_equal, logical_{not,and,or,xor}, where,
sum, isnan_v2, isinf_v2, isfinite_v2.

Paddle's `axis` broadcasting (`align_by_axis`): the lower-rank operand is aligned with the higher-rank
one starting at dim `axis` (negative: |rank(x) - rank(y)|, numpy's trailing alignment). When that is not
numpy's alignment the lower-rank side gets trailing 1-dims: a parameter is reshaped as a constant, a
variable goes through UNSQUEEZE.
"""
from __future__ import annotations

import numpy as np

from converters.conv_activation import (
    activation_check,
    activation_emits,
    binary,
    cast_to,
    compare,
    emit_activation,
    first_input,
    first_output,
    output_for,
    scalar_like,
    var_precision,
)
from converters.context import fuse_code_of
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T, Precision
from nnadapter_bridge.nnadapter.types import Operand

_FLOATS = frozenset({Precision.FLOAT32, Precision.QUANT_INT8_SYMM_PER_LAYER})
_INTS = frozenset({Precision.INT32, Precision.INT64})


# -- Paddle axis broadcasting --------------------------------------------------------------------------

def _aligned_dims(low_dims, high_rank: int, axis: int):
    """The lower-rank dims placed at `axis` of a rank-`high_rank` shape, padded with 1s."""
    low_dims = list(low_dims)
    # Paddle drops trailing 1-dims of the lower-rank side when they would run past the higher rank.
    while low_dims and axis + len(low_dims) > high_rank and low_dims[-1] == 1:
        low_dims.pop()
    return [1] * axis + low_dims + [1] * (high_rank - axis - len(low_dims)), len(low_dims)


def align_by_axis(ctx, op, x_name: str, y_name: str, axis: int):
    """The operands of X and Y, broadcast-compatible under numpy rules, following Paddle's `axis`."""
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
        aligned = ctx.const(np.ascontiguousarray(ctx.param(low_name).reshape(dims)))
    else:
        low = ctx.input(low_name)
        if kept != len(low_dims):
            raise ctx.error(f"'{low_name}' has trailing 1-dims past the other input's rank at axis {axis}; "
                            "only a parameter can be reshaped for that")
        axes = list(range(axis)) + list(range(axis + kept, high_rank))
        aligned = ctx.temp(first_output(op), f"{low_name}/unsqueeze")
        ctx.add(T.UNSQUEEZE, [low, ctx.const_i32(axes)], [aligned])
    return (ctx.input(x_name), aligned) if rx > ry else (aligned, ctx.input(y_name))


# -- binary arithmetic -----------------------------------------------------------------------------------

_ARITHMETIC = {
    "add": T.ADD, "sub": T.SUB, "mul": T.MUL, "div": T.DIV, "max": T.MAX, "min": T.MIN, "pow": T.POW,
    "floordiv": T.FLOOR_DIV,
}


def _check_arithmetic(op, ctx):
    precision = var_precision(ctx, first_input(op))
    if precision is not None and precision not in _FLOATS | _INTS:
        return f"{op.type} takes float32, int32 or int64 inputs, X is {precision.name}"
    act = op.attr("act_type", "") or ""
    if op.type.startswith("fusion_") and fuse_code_of(act) is None:
        return activation_check(act, op)
    return None


def _make_elementwise(kind: str, type: T, fused: bool):
    def convert(ctx, op):
        x, y = align_by_axis(ctx, op, first_input(op), first_input(op, "Y"), int(op.attr("axis", -1)))
        out_name = first_output(op)
        act = (op.attr("act_type", "") or "") if fused else ""
        fuse = fuse_code_of(act)
        if fuse is not None:
            binary(ctx, type, x, y, output_for(ctx, op, out_name, x), fuse)
            return
        # An activation that is no fuse code becomes its own operation(s) after the arithmetic.
        result = binary(ctx, type, x, y, ctx.temp(out_name, kind))
        emit_activation(ctx, act, op, result, output_for(ctx, op, out_name, x))

    convert.__name__ = f"convert_elementwise_{kind}" + ("_activation" if fused else "")
    return convert


# Unpacked activations a fused elementwise op may carry (Paddle Lite fuses relu family only; the rest
# come from hand-written or other-framework programs).
_FUSABLE_EXTRA = ("leaky_relu", "sigmoid", "tanh", "hard_swish", "abs", "log", "swish", "gelu")

for _kind, _type in _ARITHMETIC.items():
    converter(f"elementwise_{_kind}", emits=[_type, T.UNSQUEEZE], check=_check_arithmetic)(
        _make_elementwise(_kind, _type, False))
    _extra = sorted({t for act in _FUSABLE_EXTRA for t in activation_emits(act)} | {T.CLIP})
    converter(f"fusion_elementwise_{_kind}_activation", emits=[_type, T.UNSQUEEZE, *_extra],
              check=_check_arithmetic)(_make_elementwise(_kind, _type, True))


@converter("elementwise_mod", emits=[T.FLOOR_DIV, T.MUL, T.SUB, T.UNSQUEEZE], check=_check_arithmetic)
def convert_elementwise_mod(ctx, op):
    """x - floor(x / y) * y: the remainder takes the divisor's sign, as Paddle's mod (exact for integers;
    for floats within a few ulps of x, see the report)."""
    x, y = align_by_axis(ctx, op, first_input(op), first_input(op, "Y"), int(op.attr("axis", -1)))
    out_name = first_output(op)
    quotient = binary(ctx, T.FLOOR_DIV, x, y, ctx.temp(out_name, "floor_div"))
    product = binary(ctx, T.MUL, quotient, y, ctx.temp(out_name, "product"))
    binary(ctx, T.SUB, x, product, output_for(ctx, op, out_name, x))


# -- comparisons -------------------------------------------------------------------------------------------

_COMPARISONS = {
    "equal": T.EQUAL, "not_equal": T.NOT_EQUAL, "greater_than": T.GREATER, "greater_equal": T.GREATER_EQUAL,
    "less_than": T.LESS, "less_equal": T.LESS_EQUAL,
}


def _make_comparison(type: T):
    def convert(ctx, op):
        x, y = align_by_axis(ctx, op, first_input(op), first_input(op, "Y"), int(op.attr("axis", -1)))
        if x.type.precision != y.type.precision:
            # Paddle compares mixed dtypes after promotion; here the right side follows the left.
            y = cast_to(ctx, y, x.type.precision, ctx.temp(first_output(op), "y_cast"))
        compare(ctx, type, x, y, ctx.output(first_output(op)))

    convert.__name__ = f"convert_{type.name.lower()}"
    return convert


for _name, _type in _COMPARISONS.items():
    converter(_name, emits=[_type, T.UNSQUEEZE, T.CAST])(_make_comparison(_type))


# -- logic -----------------------------------------------------------------------------------------------

def _as_bool(ctx, operand: Operand, out_name: str, purpose: str) -> Operand:
    """Paddle's logical ops take any dtype (non-zero is true); NNAdapter's take BOOL8."""
    if operand.type.precision == Precision.BOOL8:
        return operand
    return cast_to(ctx, operand, Precision.BOOL8, ctx.temp(out_name, purpose))


def _make_logical(type: T):
    def convert(ctx, op):
        out_name = first_output(op)
        x = _as_bool(ctx, ctx.input(first_input(op)), out_name, "x_bool")
        y = _as_bool(ctx, ctx.input(first_input(op, "Y")), out_name, "y_bool")
        compare(ctx, type, x, y, ctx.output(out_name))

    convert.__name__ = f"convert_logical_{type.name.lower()}"
    return convert


for _name, _type in {"logical_and": T.AND, "logical_or": T.OR, "logical_xor": T.XOR}.items():
    converter(_name, emits=[_type, T.CAST])(_make_logical(_type))


@converter("logical_not", emits=[T.NOT, T.CAST])
def convert_logical_not(ctx, op):
    out_name = first_output(op)
    x = _as_bool(ctx, ctx.input(first_input(op)), out_name, "x_bool")
    ctx.add(T.NOT, [x], [ctx.output(out_name)])


# -- where, sum ---------------------------------------------------------------------------------------------

def _check_where(op, ctx):
    precision = var_precision(ctx, first_input(op))
    if precision == Precision.BOOL8:
        return "NNAdapter WHERE takes float32/int32/int64 values, X is BOOL8"
    return None


@converter("where", emits=[T.WHERE, T.CAST], check=_check_where)
def convert_where(ctx, op):
    """Condition ? X : Y with numpy broadcasting of all three."""
    out_name = first_output(op)
    condition = _as_bool(ctx, ctx.input(first_input(op, "Condition")), out_name, "condition_bool")
    x, y = ctx.input(first_input(op)), ctx.input(first_input(op, "Y"))
    if x.type.precision == Precision.BOOL8:
        raise ctx.error("where on bool X/Y: NNAdapter WHERE takes float32/int32/int64 values")
    ctx.add(T.WHERE, [condition, x, y], [ctx.output(out_name)])


@converter("sum", emits=[T.SUM])
def convert_sum(ctx, op):
    """The sum of every X input (numpy broadcasting)."""
    names = op.input("X")
    if not names:
        raise ctx.error("sum has no X inputs")
    inputs = [ctx.input(n) for n in names]
    ctx.add(T.SUM, inputs, [output_for(ctx, op, first_output(op), inputs[0])])


# -- isnan / isinf / isfinite -------------------------------------------------------------------------------

def _constant_bool_like(ctx, x: Operand, value: bool, out: Operand) -> None:
    ctx.add(T.FILL_LIKE, [x, ctx.const_bool(value)], [out])


@converter("isnan_v2", emits=[T.NOT_EQUAL, T.FILL_LIKE])
def convert_isnan(ctx, op):
    """x != x (only NaN differs from itself); integers are never NaN."""
    x = ctx.input(first_input(op))
    out = ctx.output(first_output(op))
    if x.type.precision in _FLOATS:
        compare(ctx, T.NOT_EQUAL, x, x, out)
    else:
        _constant_bool_like(ctx, x, False, out)


def _compare_magnitude_with_inf(ctx, op, operation, integer_answer: bool) -> None:
    """`|x| <operation> inf` for floats; a constant `integer_answer` for integers (never NaN or infinite)."""
    x = ctx.input(first_input(op))
    out = ctx.output(first_output(op))
    if x.type.precision in _FLOATS:
        magnitude = ctx.temp(first_output(op), "abs")
        ctx.add(T.ABS, [x], [magnitude])
        compare(ctx, operation, magnitude, scalar_like(ctx, np.inf, x), out)
    else:
        _constant_bool_like(ctx, x, integer_answer, out)


@converter("isinf_v2", emits=[T.ABS, T.EQUAL, T.FILL_LIKE])
def convert_isinf(ctx, op):
    """|x| == inf; integers are never infinite."""
    _compare_magnitude_with_inf(ctx, op, T.EQUAL, False)


@converter("isfinite_v2", emits=[T.ABS, T.LESS, T.FILL_LIKE])
def convert_isfinite(ctx, op):
    """|x| < inf: false for +-inf and for NaN (every comparison with NaN is false); integers: true."""
    _compare_magnitude_with_inf(ctx, op, T.LESS, True)

