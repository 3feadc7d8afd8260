"""The elementwise binary operations: arithmetic with a fused activation (ADD, SUB, MUL, DIV, MAX, MIN,
POW, FLOOR_DIV), SUM, comparisons (EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL), logic
(AND, OR, XOR, NOT) and WHERE; signatures, shape inference and numpy references.

The output is the numpy broadcast of the inputs. Operand orders follow the NNAdapter spec appendix
(seeds/001) and the operations addendum. Binary arithmetic and SUM also accept INT32/INT64 (Paddle's
elementwise ops on integer tensors); WHERE accepts the integer types Paddle models route through it.
Quantized operands reach the references dequantized (float32) and leave requantized through the registry.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`, `common`,
the standard's codes and types and `errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

from functools import reduce

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    apply_fuse_code,
    broadcast_dims,
    const_int,
    in_dtype_of,
    result_type,
    same_as_input,
)
from nnadapter_bridge.nnadapter.operations.registry import BOOL, FLOATS_Q8, INT32, INT32_64, Slot, operation, reference

_ARITH = FLOATS_Q8 | INT32_64
_COMPARABLE = FLOATS_Q8 | INT32_64 | BOOL
_WHERE_VALUES = FLOATS_Q8 | INT32_64


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


def _register_arithmetic_signature(type, formula):
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
    _register_arithmetic_signature(_type, _formula)


@operation(T.SUM, inputs=[Slot("input", _ARITH, variadic=True)], outputs=[Slot("output")],
           validate=_same_precision())
def prepare_sum(op):
    """input0 + input1 + ... + input(n-1) with numpy broadcasting over all of them."""
    return [_broadcast_type(op, range(len(op.inputs)))]


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _truncating_divide(a, b):
    """Integer division rounded toward zero, as C (Paddle's integer elementwise_div kernels)."""
    quotient = np.floor_divide(a, b)
    remainder = np.remainder(a, b)
    # floor and truncation differ only for inexact quotients of opposite-signed operands.
    inexact_negative = (remainder != 0) & ((a < 0) != (b < 0))
    return quotient + inexact_negative.astype(quotient.dtype)


def _divide(a, b):
    if _is_int(a):
        return _truncating_divide(a, b)
    return np.divide(a, b)


def _integer_power(a, b):
    """Exact integer power; a negative exponent gives C's truncation of 1 / a^|b|: 1 and -1 keep
    their magnitude, every other base gives 0 (as paddle.pow on integer tensors)."""
    result = np.power(a, np.maximum(b, 0))
    negative = b < 0
    if np.any(negative):
        odd = (np.abs(b) % 2) == 1
        reciprocal = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(result.dtype)
        result = np.where(negative, reciprocal, result)
    return result


def _power(a, b):
    if _is_int(a):
        return _integer_power(a, b)
    return np.power(a, b)


_ARITHMETIC = {
    T.ADD: np.add,
    T.SUB: np.subtract,
    T.MUL: np.multiply,
    T.DIV: _divide,
    T.MAX: np.maximum,
    T.MIN: np.minimum,
    T.POW: _power,
    # numpy's floor_divide is paddle.floor_divide for floats (floor of the exact quotient, computed via
    # fmod) and for integers (floor, not truncation); a plain floor(a / b) can be off by one.
    T.FLOOR_DIV: np.floor_divide,
}


def _register_arithmetic_reference(type, fn):
    def run(op, inputs):
        a, b, fuse = inputs
        # Division by zero and overflow follow IEEE / wrap-around like the C kernels; no warnings.
        with np.errstate(all="ignore"):
            out = fn(a, b)
        # `out` is a fresh result (never a or b), so the activation may clamp it in place.
        return [apply_fuse_code(in_dtype_of(out, a), fuse, in_place=out is not a and out is not b)]

    run.__name__ = type.name.lower()
    reference(type)(run)


for _type, _fn in _ARITHMETIC.items():
    _register_arithmetic_reference(_type, _fn)


@reference(T.SUM)
def sum_inputs(op, inputs):
    return [in_dtype_of(reduce(np.add, inputs), inputs[0])]


# -- comparisons and logic ---------------------------------------------------------------------------

def _register_to_bool_signature(type, formula, precisions):
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
    _register_to_bool_signature(_type, _formula, _COMPARABLE)

for _type, _formula in [(T.AND, "input0 && input1"), (T.OR, "input0 || input1"), (T.XOR, "input0 ^ input1")]:
    _register_to_bool_signature(_type, _formula, BOOL)


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


_TO_BOOL = {
    T.EQUAL: np.equal,
    T.NOT_EQUAL: np.not_equal,
    T.GREATER: np.greater,
    T.GREATER_EQUAL: np.greater_equal,
    T.LESS: np.less,
    T.LESS_EQUAL: np.less_equal,
    T.AND: np.logical_and,
    T.OR: np.logical_or,
    T.XOR: np.logical_xor,
}


def _register_to_bool_reference(type, fn):
    def run(op, inputs):
        a, b = inputs
        return [np.asarray(fn(a, b), dtype=np.bool_)]

    run.__name__ = type.name.lower()
    reference(type)(run)


for _type, _fn in _TO_BOOL.items():
    _register_to_bool_reference(_type, _fn)


@reference(T.NOT)
def logical_not(op, inputs):
    return [np.logical_not(inputs[0])]


@reference(T.WHERE)
def where(op, inputs):
    condition, a, b = inputs
    return [in_dtype_of(np.where(condition, a, b), a)]
