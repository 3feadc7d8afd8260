"""The operations that make a tensor from parameters: SHAPE, FILL, FILL_LIKE and RANGE; signatures, shape
inference and numpy references.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`, `common`,
the standard's codes and types and `errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision, precision_dtype
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    check_same_precision,
    const_ints,
    index_precision,
    operand_length,
    operation_error,
    param_int,
    param_ints,
    result_type,
    scalar_param,
    unknown_dims,
)
from nnadapter_bridge.nnadapter.operations.registry import FLOATS, INT32, INT32_64, Slot, operation, reference
from nnadapter_bridge.nnadapter.types import Operation

# Paddle's full / full_like / arange kernels produce every float width and the integer types.
_FILL_VALUE = FLOATS | {Precision.INT8, Precision.UINT8, Precision.INT16, Precision.INT32, Precision.INT64,
                        Precision.BOOL8}
_RANGE = FLOATS | {Precision.INT32, Precision.INT64}


def range_length(start, end, step, op: Operation | None = None) -> int:
    """RANGE's element count: ceil(|end - start| / |step|), computed in the operands' own type."""
    if step == 0:
        raise operation_error(op, "step must not be 0")
    if isinstance(start, (np.floating, float)):
        return max(int(np.ceil(np.abs((end - start) / step))), 0) if (end - start) * step > 0 else 0
    start, end, step = int(start), int(end), int(step)
    return len(range(start, end, step))


# -- signatures and shape inference ------------------------------------------------------------------


@operation(T.SHAPE, inputs=[Slot("input"), Slot("dtype", INT32)], outputs=[Slot("output")])
def prepare_shape(op):
    """The input's dims as a 1-D INT32/INT64 tensor of length R."""
    t = op.inputs[0].type
    precision = index_precision(op, scalar_param(op, 1, "dtype"), "dtype")
    return [result_type(t, [t.rank], precision=precision)]


@operation(T.FILL, inputs=[Slot("shape", INT32_64), Slot("value", _FILL_VALUE)], outputs=[Slot("output")])
def prepare_fill(op):
    """A tensor of dims `shape` whose every element is `value` (and of its type)."""
    value_type = op.inputs[1].type
    shape = const_ints(op, 0)
    if shape is None:
        n = operand_length(op.inputs[0])
        if n == UNKNOWN:
            raise operation_error(op, "a shape computed at run time needs a known length to fix the output rank")
        return [result_type(value_type, unknown_dims(n))]
    if any(s < 0 for s in shape):
        raise operation_error(op, f"shape {shape} must not be negative")
    return [result_type(value_type, shape)]


@operation(T.FILL_LIKE, inputs=[Slot("input"), Slot("value", _FILL_VALUE)], outputs=[Slot("output")])
def prepare_fill_like(op):
    """A tensor of the input's dims filled with `value` (and of its type)."""
    t, value_type = op.inputs[0].type, op.inputs[1].type
    dims_only = result_type(t)
    return [result_type(value_type, dims_only.dims, dynamic_dims=dims_only.dynamic_dims)]


@operation(T.RANGE, inputs=[Slot("start", _RANGE), Slot("end", _RANGE), Slot("step", _RANGE)],
           outputs=[Slot("output")])
def prepare_range(op):
    """start, start + step, ... up to (not including) end; 1-D, of start's type."""
    types = [o.type for o in op.inputs]
    check_same_precision(op, types)
    values = [op.input_value(i) for i in range(3)]
    if any(v is None for v in values):
        return [result_type(types[0], [UNKNOWN])]
    start, end, step = (np.asarray(v).reshape(-1)[0] for v in values)
    return [result_type(types[0], [range_length(start, end, step, op)])]


# -- references ------------------------------------------------------------------------------------------


@reference(T.SHAPE, raw_quant=True)
def shape(op, inputs):
    x, dtype = inputs
    return [np.array(x.shape, dtype=precision_dtype(Precision(param_int(dtype))))]


@reference(T.FILL)
def fill(op, inputs):
    shape_, value = inputs
    value = np.asarray(value).reshape(-1)
    return [np.full(param_ints(shape_), value[0], dtype=value.dtype)]


@reference(T.FILL_LIKE, raw_quant=True)
def fill_like(op, inputs):
    x, value = inputs
    value = np.asarray(value).reshape(-1)
    return [np.full(x.shape, value[0], dtype=value.dtype)]


@reference(T.RANGE)
def range_(op, inputs):
    start, end, step = (np.asarray(v).reshape(-1)[0] for v in inputs)
    dtype = np.asarray(inputs[0]).dtype
    count = range_length(start, end, step, op)
    # start + i * step in the operands' type, as Paddle's arange fills its output.
    return [(start + np.arange(count, dtype=dtype) * step).astype(dtype, copy=False)]
