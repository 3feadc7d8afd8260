"""int64 on intel_openvino: which operations run exactly (the CPU plugin computes int64 as int32), which are
declined (`int64_reason`), and the run-time checks between (`input_flag`, `overflow_flag`, `needs_overflow_check`);
also `any_true`, the OR of a boolean tensor that every run-time check and fault flag of the driver reduces to.
Imports numpy, OpenVINO and the NNAdapter standard only (never converters, partition or the driver). What was
measured and the rule per operation: docs/architecture.md, "int64 on intel_openvino".
"""
from __future__ import annotations

import numpy as np
import openvino as ov

from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision

try:  # the opset graph.py builds with (imported here directly: graph imports this module)
    from openvino import opset16 as opset
except ImportError:  # pragma: no cover - older OpenVINO releases
    from openvino import opset15 as opset

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
WHY = "OpenVINO's CPU plugin computes int64 as int32 (values beyond +-2^31 would be wrong)"

# Operations whose int64 result may leave int32 with every input within it, and no cheap check bounds.
DECLINED = {
    T.POW: "a power may pass 2^31",
    T.MAT_MUL: "a sum of products may pass 2^31",
    T.FULLY_CONNECTED: "a sum of products may pass 2^31",
}

# Operations whose int64 result is checked at run time (overflow_flag), with their float32 counterparts.
CHECKED = frozenset({T.ADD, T.SUB, T.MUL, T.DIV, T.FLOOR_DIV, T.ABS, T.SQUARE, T.SUM, T.CUM_SUM})

# (operation, input position) of int64 constants that may lie beyond int32: SLICE's starts and ends (2^63 - 1 means
# "to the end"; the plugin saturates it to 2^31 - 1, which still is, since no dim reaches 2^31).
_SATURATION_KEEPS_MEANING = {(T.SLICE, 2), (T.SLICE, 3)}

# float32's error on the CHECKED results of values within int32 is below 512 (inputs round by at most 64 each,
# the result by at most 128, a product by 3 ulp); flagging from 2^31 - 2048 on catches every overflow.
_FLOAT_BOUND = np.float32(2**31 - 2048)
_SUM_SLACK_PER_TERM = 256


def is_int64(operand) -> bool:
    return operand is not None and operand.type.precision == Precision.INT64


def touches_int64(op) -> bool:
    return any(is_int64(o) for o in list(op.inputs) + list(op.outputs))


def int64_reason(op) -> str:
    """Why intel_openvino declines `op` for its int64 operands, or ""."""
    if not touches_int64(op):
        return ""
    name = f"{op.type.name} on INT64 operands"
    if op.type in DECLINED:
        return f"{name}: {WHY}, and {DECLINED[op.type]}"
    if op.type == T.CUM_SUM and _cum_sum_length(op) is None:
        return f"{name}: {WHY}, and a running sum along an axis of unknown length cannot be bounded"
    for position, operand in enumerate(op.inputs):
        if not is_int64(operand) or not operand.is_constant or (op.type, position) in _SATURATION_KEEPS_MEANING:
            continue
        values = np.asarray(operand.value)
        if values.size and (values.min() < INT32_MIN or values.max() > INT32_MAX):
            if _saturation_keeps_bound(op.type, values):
                continue
            return f"{name}: the constant {operand.label()} holds values beyond int32 ({WHY})"
    return ""


def _saturation_keeps_bound(op_type, values: np.ndarray) -> bool:
    """MIN with a constant beyond int32 only above it (paddle.clip(x, min=0) of an int64 x: max is float(int64 max)),
    or MAX with one only below it: the plugin saturates the constant to the int32 bound, and the other operand lies
    within int32 (input and overflow checks), so the answer, that operand, is the same."""
    if op_type == T.MIN:
        return bool(values.min() >= INT32_MIN)
    if op_type == T.MAX:
        return bool(values.max() <= INT32_MAX)
    return False


def _cum_sum_length(op):
    """The length of CUM_SUM's axis, None when unknown."""
    dims = op.inputs[0].type.dims
    if not dims:
        return None
    axis = op.inputs[1] if len(op.inputs) > 1 else None
    a = int(np.asarray(axis.value).reshape(-1)[0]) if axis is not None and axis.is_constant else -1
    if axis is not None and not axis.is_constant:
        return None
    length = dims[a % len(dims)]
    return int(length) if length >= 0 else None


def needs_overflow_check(op) -> bool:
    return op.type in CHECKED and any(is_int64(o) for o in op.outputs)


# Operations that read only the shape of their first input.
_SHAPE_READERS = frozenset({T.SHAPE, T.FILL_LIKE})


def values_read(operand, readers) -> bool:
    """Whether any of `readers` (the operations reading `operand`) reads its values, not only its shape."""
    return any(r.type not in _SHAPE_READERS or any(o is operand for o in r.inputs[1:]) for r in readers)


def any_true(flags):
    """The logical OR of every element of `flags`, as a boolean scalar (a run-time check's or fault's flag)."""
    flat = opset.reshape(flags, opset.constant(np.array([-1], np.int64)), False).output(0)
    return opset.reduce_logical_or(flat, opset.constant(np.array([0], np.int64)), False).output(0)


def input_flag(value) -> ov.Output:
    """A boolean scalar, true when the int64 model input `value` holds a value beyond int32. Convert i64 -> f32 reads
    the int64 itself (measured), rounding: |x| >= 2^31 in float32 flags every value beyond int32, and also the few
    within 64 of the bounds, which then run elsewhere (exactly)."""
    magnitude = opset.abs(opset.convert(value, ov.Type.f32)).output(0)
    return any_true(opset.greater_equal(magnitude, opset.constant(np.float32(2**31))).output(0))


def input_message(k: int) -> str:
    return (f"input {k} holds int64 values beyond int32, and OpenVINO's CPU plugin computes int64 as int32 (the part "
            "runs elsewhere)")


def overflow_flag(op, values) -> ov.Output:
    """A boolean scalar, true when the int64 result of `op` (a CHECKED operation; `values` its input nodes) may
    leave int32: the operation recomputed in float32 (exact up to rounding for inputs within int32)."""
    floats = [opset.convert(v, ov.Type.f32).output(0) for v in values]
    if op.type in (T.ADD, T.SUM):
        shadow = floats[0]
        for other in floats[1:]:
            shadow = opset.add(shadow, other).output(0)
    elif op.type == T.SUB:
        shadow = opset.subtract(floats[0], floats[1]).output(0)
    elif op.type == T.MUL:
        shadow = opset.multiply(floats[0], floats[1]).output(0)
    elif op.type == T.SQUARE:
        shadow = opset.multiply(floats[0], floats[0]).output(0)
    elif op.type == T.ABS:
        shadow = floats[0]
    elif op.type == T.CUM_SUM:
        # every running sum is at most the sum of the magnitudes along the axis (float32 adds about 128 per term)
        length = _cum_sum_length(op)
        axis = int(np.asarray(op.inputs[1].value).reshape(-1)[0]) % op.inputs[0].type.rank if len(op.inputs) > 1 \
            and op.inputs[1] is not None else op.inputs[0].type.rank - 1
        shadow = opset.reduce_sum(opset.abs(floats[0]), opset.constant(np.array([axis], np.int64)), False).output(0)
        bound = _FLOAT_BOUND - np.float32(128 * (length + 1))
        return any_true(opset.greater_equal(shadow, opset.constant(np.float32(bound))).output(0))
    else:  # DIV, FLOOR_DIV: only INT32_MIN / -1 (and a division by 0) leaves int32
        shadow = opset.divide(floats[0], floats[1]).output(0)
    bound = _FLOAT_BOUND - np.float32(_SUM_SLACK_PER_TERM * max(0, len(values) - 2))
    # Two comparisons, not |shadow| >= bound: the CPU plugin's AbsSinking pass throws on an Abs whose input's
    # length comes from a run-time Range ("get_partial_shape().same_scheme(value.get_shape())" while compiling;
    # measured with set_value's index decomposition of PointRend's [1, k, 2] points, k a top-k count).
    high = opset.greater_equal(shadow, opset.constant(np.float32(bound))).output(0)
    low = opset.less_equal(shadow, opset.constant(np.float32(-bound))).output(0)
    return any_true(opset.logical_or(high, low).output(0))


def overflow_message(op) -> str:
    return (f"{op.label()}: an int64 result reaches beyond int32, and OpenVINO's CPU plugin computes int64 as int32 "
            "(the part runs elsewhere)")
