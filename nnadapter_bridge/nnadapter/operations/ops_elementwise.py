"""Signatures and shape inference: elementwise binary arithmetic, comparisons, logic, unary math and
activations (the operations whose output is the input shape or the broadcast of two inputs).

Operand orders follow the NNAdapter spec appendix (seeds/001) and the operations addendum. Where the
appendix is known to be wrong (SOFTPLUS lists an `alpha`; nnadapter.h has `beta`, `threshold`) the
header's order is used. Binary arithmetic and SUM also accept INT32/INT64 (Paddle's elementwise ops on
integer tensors); ASSIGN and WHERE accept the integer types Paddle models route through them.
"""
from __future__ import annotations

from functools import reduce

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import FuseCode, OperationType as T, Precision
from nnadapter_bridge.nnadapter.operations.common import (
    broadcast_dims,
    const_int,
    known,
    result_type,
    same_as_input,
)
from nnadapter_bridge.nnadapter.operations.registry import BOOL, F32, F32_Q8, INT32, Slot, operation

_INTS = frozenset({Precision.INT32, Precision.INT64})
_ARITH = F32_Q8 | _INTS
_COMPARABLE = F32_Q8 | _INTS | BOOL
_CASTABLE = frozenset({
    Precision.BOOL8, Precision.INT8, Precision.UINT8, Precision.INT16, Precision.INT32, Precision.INT64,
    Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64,
})
_ASSIGNABLE = F32_Q8 | _INTS | BOOL
_WHERE_VALUES = F32_Q8 | _INTS


# -- shared checks and shape rules ------------------------------------------------------------------

def _same_precision(*indices):
    """A validate step: the listed inputs (None = every input) share one precision.

    The spec says "same type as input0"; quantized operands may still differ in scale."""

    def validate(op):
        picked = range(len(op.inputs)) if not indices else indices
        operands = [op.inputs[i] for i in picked if i < len(op.inputs) and op.inputs[i] is not None]
        first = operands[0]
        for other in operands[1:]:
            if other.type.precision != first.type.precision:
                raise OperationError(
                    f"{op.type.name}: {other.label()} is {other.type.precision.name} but {first.label()} is "
                    f"{first.type.precision.name}; insert a CAST so both inputs have one precision")

    return validate


def _check_fuse_code(op, index):
    code = const_int(op, index)
    if code is not None and code not in {int(c) for c in FuseCode}:
        raise OperationError(f"{op.type.name}: fuse_code {code} is not one of "
                             f"{', '.join(f'{c.name}={int(c)}' for c in FuseCode)}")


def _broadcast_type(op, indices, *, precision=None):
    """The type of the numpy broadcast of inputs `indices`, based on the first of them.

    Dynamic shapes are broadcast position by position; an input without dynamic shapes takes part
    with its static dims. Inputs with differing numbers of dynamic shapes cannot be paired, so the
    result then carries none."""
    types = [op.inputs[i].type for i in indices]
    dims = reduce(lambda a, b: broadcast_dims(a, b, op), (t.dims for t in types))
    counts = {len(t.dynamic_dims) for t in types if t.dynamic_dims}
    dynamic = ()
    if len(counts) == 1:
        (n,) = counts
        per_input = [t.dynamic_dims if t.dynamic_dims else (t.dims,) * n for t in types]
        dynamic = tuple(reduce(lambda a, b: broadcast_dims(a, b, op), shapes) for shapes in zip(*per_input))
    return result_type(types[0], dims, precision=precision, dynamic_dims=dynamic)


# -- binary arithmetic with a fused activation -------------------------------------------------------

def _validate_arithmetic(op):
    _same_precision(0, 1)(op)
    _check_fuse_code(op, 2)


def _register_arithmetic(type, formula):
    def prepare(op):
        return [_broadcast_type(op, (0, 1))]

    prepare.__doc__ = f"{formula} with numpy broadcasting, then the fused activation (fuse_code)."
    prepare.__name__ = f"prepare_{type.name.lower()}"
    operation(type, inputs=[Slot("input0", _ARITH), Slot("input1", _ARITH), Slot("fuse_code", INT32)],
              outputs=[Slot("output")], validate=_validate_arithmetic)(prepare)


for _type, _formula in [
    (T.ADD, "input0 + input1"),
    (T.SUB, "input0 - input1"),
    (T.MUL, "input0 * input1"),
    (T.DIV, "input0 / input1 (integers: truncated toward zero)"),
    (T.MAX, "max(input0, input1)"),
    (T.MIN, "min(input0, input1)"),
    (T.POW, "input0 ^ input1"),
    (T.FLOOR_DIV, "floor(input0 / input1) (as paddle.floor_divide)"),
]:
    _register_arithmetic(_type, _formula)


@operation(T.SUM, inputs=[Slot("input", _ARITH, variadic=True)], outputs=[Slot("output")],
           validate=_same_precision())
def prepare_sum(op):
    """input0 + input1 + ... + input(n-1) with numpy broadcasting over all of them."""
    return [_broadcast_type(op, range(len(op.inputs)))]


# -- comparisons and logic ---------------------------------------------------------------------------

def _register_binary_to_bool(type, formula, precisions):
    def prepare(op):
        return [_broadcast_type(op, (0, 1), precision=Precision.BOOL8)]

    prepare.__doc__ = f"{formula} elementwise with numpy broadcasting; the output is BOOL8."
    prepare.__name__ = f"prepare_{type.name.lower()}"
    operation(type, inputs=[Slot("input0", precisions), Slot("input1", precisions)], outputs=[Slot("output")],
              validate=_same_precision(0, 1))(prepare)


for _type, _formula in [
    (T.EQUAL, "input0 == input1"),
    (T.NOT_EQUAL, "input0 != input1"),
    (T.GREATER, "input0 > input1"),
    (T.GREATER_EQUAL, "input0 >= input1"),
    (T.LESS, "input0 < input1"),
    (T.LESS_EQUAL, "input0 <= input1"),
]:
    _register_binary_to_bool(_type, _formula, _COMPARABLE)

for _type, _formula in [(T.AND, "input0 && input1"), (T.OR, "input0 || input1"), (T.XOR, "input0 ^ input1")]:
    _register_binary_to_bool(_type, _formula, BOOL)


@operation(T.NOT, inputs=[Slot("input", BOOL)], outputs=[Slot("output")])
def prepare_not(op):
    """!input; output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.WHERE, inputs=[Slot("condition", BOOL), Slot("input0", _WHERE_VALUES), Slot("input1", _WHERE_VALUES)],
           outputs=[Slot("output")], validate=_same_precision(1, 2))
def prepare_where(op):
    """condition ? input0 : input1 (numpy.where), all three broadcast; the type of input0."""
    t = _broadcast_type(op, (0, 1, 2))
    return [result_type(op.inputs[1].type, t.dims, dynamic_dims=t.dynamic_dims)]


# -- unary math and parameterless activations ----------------------------------------------------------

def _register_unary(type, formula, precisions=F32_Q8):
    def prepare(op):
        return [same_as_input(op)]

    prepare.__doc__ = f"{formula}; output has the input's type and shape."
    prepare.__name__ = f"prepare_{type.name.lower()}"
    operation(type, inputs=[Slot("input", precisions)], outputs=[Slot("output")])(prepare)


for _type, _formula in [
    (T.ABS, "abs(input)"),
    (T.COS, "cos(input)"),
    (T.EXP, "e ^ input"),
    (T.FLOOR, "floor(input)"),
    (T.LOG, "ln(input)"),
    (T.RELU, "max(0, input)"),
    (T.RELU6, "min(6, max(0, input))"),
    (T.RSQRT, "1 / sqrt(input)"),
    (T.SIGMOID, "1 / (1 + e ^ -input)"),
    (T.SIN, "sin(input)"),
    (T.SQUARE, "input ^ 2"),
    (T.SWISH, "input / (1 + e ^ -input)"),
    (T.TANH, "tanh(input)"),
]:
    _register_unary(_type, _formula)

_register_unary(T.ASSIGN, "a copy of input", _ASSIGNABLE)


# -- activations and conversions with parameters -----------------------------------------------------

@operation(T.CAST, inputs=[Slot("input", _CASTABLE), Slot("dtype", INT32)], outputs=[Slot("output")])
def prepare_cast(op):
    """input converted to the precision code given by the constant `dtype`; the input's shape."""
    code = const_int(op, 1)
    if code is None:
        raise OperationError(f"{op.type.name}: dtype must be a constant INT32 precision code")
    allowed = {int(p) for p in _CASTABLE}
    if code not in allowed:
        names = ", ".join(p.name for p in sorted(_CASTABLE, key=int))
        raise OperationError(f"{op.type.name}: dtype {code} is not a supported target precision ({names})")
    return [result_type(op.inputs[0].type, precision=Precision(code))]


@operation(T.CLIP, inputs=[Slot("input", F32_Q8), Slot("min", F32_Q8), Slot("max", F32_Q8)],
           outputs=[Slot("output")])
def prepare_clip(op):
    """min(max(input, min), max); output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.GELU, inputs=[Slot("input", F32_Q8), Slot("approximate", BOOL)], outputs=[Slot("output")])
def prepare_gelu(op):
    """input * Phi(input) (erf form), or its tanh approximation when `approximate` is true."""
    return [same_as_input(op)]


@operation(T.HARD_SIGMOID, inputs=[Slot("input", F32_Q8), Slot("alpha", F32), Slot("beta", F32)],
           outputs=[Slot("output")])
def prepare_hard_sigmoid(op):
    """max(0, min(1, alpha * input + beta)); output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.HARD_SWISH, inputs=[Slot("input", F32_Q8), Slot("alpha", F32), Slot("beta", F32)],
           outputs=[Slot("output")])
def prepare_hard_swish(op):
    """input * max(0, min(1, alpha * input + beta)); output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.LEAKY_RELU, inputs=[Slot("input", F32_Q8), Slot("alpha", F32)], outputs=[Slot("output")])
def prepare_leaky_relu(op):
    """input if input >= 0 else alpha * input; output has the input's type and shape."""
    return [same_as_input(op)]


def _validate_prelu(op):
    slope = op.inputs[1].type
    if slope.rank != 1 or not known(slope.dims[0]):
        raise OperationError(f"{op.type.name}: slope must have shape [1] or [C], got {slope.describe()}")
    count = slope.dims[0]
    if count == 1:
        return
    data = op.inputs[0].type
    if data.rank < 2:
        raise OperationError(f"{op.type.name}: a per-channel slope of {count} values needs an input of rank >= 2 "
                             f"(channels on axis 1), got {data.describe()}")
    if known(data.dims[1]) and data.dims[1] != count:
        raise OperationError(f"{op.type.name}: slope has {count} values but the input {data.describe()} "
                             f"has {data.dims[1]} channels on axis 1")


@operation(T.PRELU, inputs=[Slot("input", F32_Q8), Slot("slope", F32)], outputs=[Slot("output")],
           validate=_validate_prelu)
def prepare_prelu(op):
    """input if input >= 0 else slope * input, slope shared ([1]) or per channel on axis 1 ([C])."""
    return [same_as_input(op)]


@operation(T.SOFTPLUS, inputs=[Slot("input", F32_Q8), Slot("beta", F32), Slot("threshold", F32)],
           outputs=[Slot("output")])
def prepare_softplus(op):
    """log(1 + e ^ (beta * input)) / beta, or input where beta * input > threshold."""
    return [same_as_input(op)]

