"""Converters for Paddle's binary elementwise ops, comparisons, logic, where, sum and the is* tests.

Owns: elementwise_{add,sub,mul,div,max,min,pow,floordiv,mod}, fusion_elementwise_*_activation,
equal, not_equal, greater_than, greater_equal, less_than, less_equal, logical_{not,and,or,xor}, where,
sum, isnan_v2, isinf_v2, isfinite_v2.

Binary ops follow Paddle's `axis` broadcasting (`emit.align_by_axis`).

Imports only the converter toolkit (op_view, attrs, emit, context, registry) and the standard.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import var_precision
from converters.context import ConversionContext
from converters.emit import (
    FLOATS,
    INTS,
    activation_check,
    activation_emits,
    align_by_axis,
    binary,
    cast_to,
    compare,
    emit_activation,
    fuse_code_of,
    output_for,
)
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.types import Operand

# -- binary arithmetic -----------------------------------------------------------------------------------

_ARITHMETIC = {
    "add": T.ADD, "sub": T.SUB, "mul": T.MUL, "div": T.DIV, "max": T.MAX, "min": T.MIN, "pow": T.POW,
    "floordiv": T.FLOOR_DIV,
}


# Paddle's CPU add and multiply kernels also take bool (C++ bool arithmetic: a sum is an OR, a product an AND).
_BOOL_ARITHMETIC = {"add": T.OR, "mul": T.AND}
# Narrow integers some of Paddle's CPU kernels take (add and floor_divide: int8, uint8, int16): computed in INT32
# and cast back, which wraps as C++'s conversion of the promoted result does.
_NARROW_INTS = frozenset({Precision.INT8, Precision.UINT8, Precision.INT16})


def _check_arithmetic(op, ctx):
    v = OpView(op)
    precision = var_precision(ctx, v.optional_input("X"))
    kind = v.type.removeprefix("fusion_").removeprefix("elementwise_").removesuffix("_activation")
    if precision == Precision.BOOL8 and kind in _BOOL_ARITHMETIC and not v.attr_str("act_type", ""):
        return None
    if precision in _NARROW_INTS and kind in ("add", "floordiv") and not v.attr_str("act_type", ""):
        return None
    if precision is not None and precision not in FLOATS | INTS:
        return f"{v.type} takes float, int32 or int64 inputs, X is {precision.name}"
    act = v.attr_str("act_type", "")
    if v.type.startswith("fusion_") and fuse_code_of(act) is None:
        return activation_check(act, op)
    return None


def _make_elementwise(kind: str, type: T, fused: bool):
    def convert(ctx: ConversionContext, v: OpView) -> None:
        out_name = v.output("Out")
        x, y = align_by_axis(ctx, out_name, v.input("X"), v.input("Y"), v.attr_int("axis", -1))
        act = v.attr_str("act_type", "") if fused else ""
        if x.type.precision == Precision.BOOL8 and kind in _BOOL_ARITHMETIC:
            y = (
                y
                if y.type.precision == Precision.BOOL8
                else cast_to(ctx, y, Precision.BOOL8, ctx.temp(out_name, "y_bool"))
            )
            compare(ctx, _BOOL_ARITHMETIC[kind], x, y, ctx.output(out_name))
            return
        if x.type.precision in _NARROW_INTS:
            narrow = x.type.precision
            wide = [cast_to(ctx, operand, Precision.INT32, ctx.temp(out_name, f"{slot}_int32"))
                    for operand, slot in ((x, "x"), (y, "y"))]
            result = binary(ctx, type, wide[0], wide[1], ctx.temp(out_name, f"{kind}_int32"))
            cast_to(ctx, result, narrow, ctx.output(out_name))
            return
        fuse = fuse_code_of(act)
        if fuse is not None:
            binary(ctx, type, x, y, output_for(ctx, v.op, out_name, x), fuse)
            return
        # An activation that is no fuse code becomes its own operation(s) after the arithmetic.
        result = binary(ctx, type, x, y, ctx.temp(out_name, kind))
        emit_activation(ctx, act, v.op, result, output_for(ctx, v.op, out_name, x))

    convert.__name__ = f"convert_elementwise_{kind}" + ("_activation" if fused else "")
    return convert


# Unpacked activations a fused elementwise op may carry (Paddle Lite fuses relu family only; the rest
# come from hand-written or other-framework programs).
_FUSABLE_EXTRA = ("leaky_relu", "sigmoid", "tanh", "hard_swish", "abs", "log", "swish", "gelu")

for _kind, _type in _ARITHMETIC.items():
    _bool_emits = [_BOOL_ARITHMETIC[_kind]] if _kind in _BOOL_ARITHMETIC else []
    _bool_emits += [T.CAST] if _kind in _BOOL_ARITHMETIC or _kind in ("add", "floordiv") else []
    converter(f"elementwise_{_kind}", emits=[_type, T.UNSQUEEZE, *_bool_emits], check=_check_arithmetic)(
        _make_elementwise(_kind, _type, False))
    _extra = sorted({t for act in _FUSABLE_EXTRA for t in activation_emits(act)} | {T.CLIP})
    converter(f"fusion_elementwise_{_kind}_activation", emits=[_type, T.UNSQUEEZE, *_extra],
              check=_check_arithmetic)(_make_elementwise(_kind, _type, True))


def _check_mod(op, ctx):
    reason = _check_arithmetic(op, ctx)
    if reason:
        return reason
    precision = var_precision(ctx, OpView(op).optional_input("X"))
    if precision is None or precision in FLOATS:
        # Paddle computes fmod with a sign fix; x - floor(x / y) * y is not that for huge x or y = +-inf, and
        # NNAdapter has no remainder operation: the host kernel computes it exactly.
        return "a float remainder is exact only as fmod, which NNAdapter cannot express (the host computes it)"
    return None


@converter("elementwise_mod", emits=[T.FLOOR_DIV, T.MUL, T.SUB, T.UNSQUEEZE], check=_check_mod)
def convert_elementwise_mod(ctx: ConversionContext, v: OpView) -> None:
    """Integers: x - floor(x / y) * y, the remainder with the divisor's sign, as Paddle's mod (exact)."""
    x, y = align_by_axis(ctx, v.output("Out"), v.input("X"), v.input("Y"), v.attr_int("axis", -1))
    out_name = v.output("Out")
    quotient = binary(ctx, T.FLOOR_DIV, x, y, ctx.temp(out_name, "floor_div"))
    product = binary(ctx, T.MUL, quotient, y, ctx.temp(out_name, "product"))
    binary(ctx, T.SUB, x, product, output_for(ctx, v.op, out_name, x))


# -- comparisons -------------------------------------------------------------------------------------------

_COMPARISONS = {
    "equal": T.EQUAL, "not_equal": T.NOT_EQUAL, "greater_than": T.GREATER, "greater_equal": T.GREATER_EQUAL,
    "less_than": T.LESS, "less_equal": T.LESS_EQUAL,
}


def _make_comparison(type: T):
    def convert(ctx: ConversionContext, v: OpView) -> None:
        x, y = align_by_axis(ctx, v.output("Out"), v.input("X"), v.input("Y"), v.attr_int("axis", -1))
        if x.type.precision != y.type.precision:
            # Paddle compares mixed dtypes after promotion; here the right side follows the left.
            y = cast_to(ctx, y, x.type.precision, ctx.temp(v.output("Out"), "y_cast"))
        compare(ctx, type, x, y, ctx.output(v.output("Out")))

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
    def convert(ctx: ConversionContext, v: OpView) -> None:
        out_name = v.output("Out")
        x = _as_bool(ctx, ctx.input(v.input("X")), out_name, "x_bool")
        y = _as_bool(ctx, ctx.input(v.input("Y")), out_name, "y_bool")
        compare(ctx, type, x, y, ctx.output(out_name))

    convert.__name__ = f"convert_logical_{type.name.lower()}"
    return convert


for _name, _type in {"logical_and": T.AND, "logical_or": T.OR, "logical_xor": T.XOR}.items():
    converter(_name, emits=[_type, T.CAST])(_make_logical(_type))


def _check_bitwise_on_bools(op, ctx):
    v = OpView(op)
    for slot in ("X", "Y"):
        precision = var_precision(ctx, v.optional_input(slot))
        if precision is not None and precision != Precision.BOOL8:
            return f"{slot} is {precision.name}: NNAdapter's logic operations take BOOL8, bitwise integers have none"
    return None


# On bool tensors the bitwise ops are the logical ones (RT-DETR's anchor mask is `(a > 0.01) & (a < 0.99)`).
for _name, _type in {"bitwise_and": T.AND, "bitwise_or": T.OR, "bitwise_xor": T.XOR}.items():
    converter(_name, emits=[_type, T.CAST], check=_check_bitwise_on_bools)(_make_logical(_type))


@converter("bitwise_not", emits=[T.NOT, T.CAST], check=_check_bitwise_on_bools)
def convert_bitwise_not(ctx: ConversionContext, v: OpView) -> None:
    convert_logical_not(ctx, v)


@converter("logical_not", emits=[T.NOT, T.CAST])
def convert_logical_not(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = _as_bool(ctx, ctx.input(v.input("X")), out_name, "x_bool")
    ctx.add(T.NOT, [x], [ctx.output(out_name)])


# -- where, sum ---------------------------------------------------------------------------------------------

@converter("where", emits=[T.WHERE, T.CAST])
def convert_where(ctx: ConversionContext, v: OpView) -> None:
    """Condition ? X : Y with numpy broadcasting of all three. Bool X/Y (Paddle's kernel takes them) select as
    INT32 and come back as BOOL8: NNAdapter WHERE takes no BOOL8 values."""
    out_name = v.output("Out")
    condition = _as_bool(ctx, ctx.input(v.input("Condition")), out_name, "condition_bool")
    x, y = ctx.input(v.input("X")), ctx.input(v.input("Y"))
    if x.type.precision != Precision.BOOL8:
        ctx.add(T.WHERE, [condition, x, y], [ctx.output(out_name)])
        return
    x = cast_to(ctx, x, Precision.INT32, ctx.temp(out_name, "x_int"))
    y = cast_to(ctx, y, Precision.INT32, ctx.temp(out_name, "y_int"))
    selected = ctx.temp(out_name, "selected_int")
    ctx.add(T.WHERE, [condition, x, y], [selected])
    cast_to(ctx, selected, Precision.BOOL8, ctx.output(out_name))


@converter("sum", emits=[T.SUM])
def convert_sum(ctx: ConversionContext, v: OpView) -> None:
    """The sum of every X input (numpy broadcasting)."""
    names = v.inputs("X")
    if not names:
        raise ctx.error("sum has no X inputs")
    inputs = [ctx.input(n) for n in names]
    ctx.add(T.SUM, inputs, [output_for(ctx, v.op, v.output("Out"), inputs[0])])


# -- isnan / isinf / isfinite -------------------------------------------------------------------------------

def _constant_bool_like(ctx, x: Operand, value: bool, out: Operand) -> None:
    ctx.add(T.FILL_LIKE, [x, ctx.const_bool(value)], [out])


@converter("isnan_v2", emits=[T.NOT_EQUAL, T.FILL_LIKE])
def convert_isnan(ctx: ConversionContext, v: OpView) -> None:
    """x != x (only NaN differs from itself); integers are never NaN."""
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    if x.type.precision in FLOATS:
        compare(ctx, T.NOT_EQUAL, x, x, out)
    else:
        _constant_bool_like(ctx, x, False, out)


def _compare_magnitude_with_inf(ctx, op, operation, integer_answer: bool) -> None:
    """`|x| <operation> inf` for floats; a constant `integer_answer` for integers (never NaN or infinite)."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    if x.type.precision in FLOATS:
        magnitude = ctx.temp(v.output("Out"), "abs")
        ctx.add(T.ABS, [x], [magnitude])
        compare(ctx, operation, magnitude, ctx.const_like(np.inf, x), out)
    else:
        _constant_bool_like(ctx, x, integer_answer, out)


@converter("isinf_v2", emits=[T.ABS, T.EQUAL, T.FILL_LIKE])
def convert_isinf(ctx: ConversionContext, v: OpView) -> None:
    """|x| == inf; integers are never infinite."""
    _compare_magnitude_with_inf(ctx, v.op, T.EQUAL, False)


@converter("isfinite_v2", emits=[T.ABS, T.LESS, T.FILL_LIKE])
def convert_isfinite(ctx: ConversionContext, v: OpView) -> None:
    """|x| < inf: false for +-inf and for NaN (every comparison with NaN is false); integers: true."""
    _compare_magnitude_with_inf(ctx, v.op, T.LESS, True)

