"""The matrix products FULLY_CONNECTED and MAT_MUL: signatures, shape inference and numpy references.

The references compute in float32 (float64 for float64 operands) through BLAS (numpy.matmul).

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`, `common`,
the standard's codes and types and `errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    apply_optional_fuse_code,
    as_compute_float,
    broadcast_dims,
    compute_dtype,
    const_bool,
    known,
    map_shapes,
    param_bool,
    result_type,
)
from nnadapter_bridge.nnadapter.operations.registry import (
    BIAS,
    BOOL,
    FILTER,
    FLOATS_Q8,
    INT32,
    Slot,
    operation,
    reference,
)


# -- signatures and shape inference ------------------------------------------------------------------
@operation(T.FULLY_CONNECTED,
           inputs=[Slot("input", FLOATS_Q8), Slot("weight", FILTER), Slot("bias", BIAS, optional=True),
                   Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_fully_connected(op):
    """input flattened to [batch, input_size] times weight' [input_size, num_units] plus bias."""
    w = op.inputs[1].type.dims
    if len(w) != 2:
        raise OperationError(f"{op.type.name}: weight must be [num_units, input_size], got {list(w)}")
    num_units, input_size = w

    def dims_fn(dims):
        if len(dims) < 2:
            raise OperationError(f"{op.type.name}: input must have rank >= 2, got {list(dims)}")
        if all(known(d) for d in dims) and known(input_size):
            total = int(np.prod(dims))
            if total % input_size:
                raise OperationError(f"{op.type.name}: input {list(dims)} does not flatten to rows of {input_size}")
            return (total // input_size, num_units)
        if len(dims) == 2 and known(dims[1]) and dims[1] == input_size:
            return (dims[0], num_units)
        return (UNKNOWN, num_units)

    return [map_shapes(op.inputs[0].type, dims_fn)]


def matmul_dims(x: Sequence[int], y: Sequence[int], transpose_x: bool, transpose_y: bool, op=None) -> tuple:
    """numpy.matmul's output dims after the optional transposes of the last two axes (ignored for 1-D)."""
    x, y = list(x), list(y)
    if not x or not y:
        raise OperationError(f"{op.type.name if op else 'MAT_MUL'}: operands must have rank >= 1")
    if len(x) >= 2 and transpose_x:
        x[-2], x[-1] = x[-1], x[-2]
    if len(y) >= 2 and transpose_y:
        y[-2], y[-1] = y[-1], y[-2]
    x_vec, y_vec = len(x) == 1, len(y) == 1
    if x_vec:
        x = [1] + x
    if y_vec:
        y = y + [1]
    k_x, k_y = x[-1], y[-2]
    if known(k_x) and known(k_y) and k_x != k_y:
        raise OperationError(f"{op.type.name if op else 'MAT_MUL'}: inner dims differ: {k_x} vs {k_y} "
                             f"(x {x}, y {y} after transposes)")
    batch = broadcast_dims(x[:-2], y[:-2], op)
    out = list(batch) + [x[-2], y[-1]]
    if y_vec:
        out.pop(-1)
    if x_vec:
        out.pop(-2 if not y_vec else -1)
    return tuple(out)


@operation(T.MAT_MUL,
           inputs=[Slot("x", FLOATS_Q8), Slot("y", FLOATS_Q8), Slot("transpose_x", BOOL, optional=True),
                   Slot("transpose_y", BOOL, optional=True)],
           outputs=[Slot("output")])
def prepare_mat_mul(op):
    """numpy.matmul with optional transposes of the last two axes; batch dims broadcast."""
    tx, ty = const_bool(op, 2, False), const_bool(op, 3, False)
    x, y = op.inputs[0].type, op.inputs[1].type
    dims = matmul_dims(x.dims, y.dims, tx, ty, op)
    dynamic: tuple = ()
    if x.dynamic_dims or y.dynamic_dims:
        xs = x.dynamic_dims or (x.dims,) * len(y.dynamic_dims)
        ys = y.dynamic_dims or (y.dims,) * len(x.dynamic_dims)
        dynamic = tuple(matmul_dims(a, b, tx, ty, op) for a, b in zip(xs, ys))
    return [result_type(x, dims, dynamic_dims=dynamic)]


# -- references ------------------------------------------------------------------------------------------
@reference(T.FULLY_CONNECTED)
def fully_connected(op, inputs):
    ft = compute_dtype(inputs[0], inputs[1])
    x, w, bias = as_compute_float(inputs[0], ft), as_compute_float(inputs[1], ft), inputs[2]
    out = np.matmul(x.reshape(-1, w.shape[1]), w.T)  # w.T is a view; BLAS reads it transposed
    if bias is not None:
        out += as_compute_float(bias, ft)
    # The matmul result is fresh, so the activation may clamp it in place.
    return [apply_optional_fuse_code(out, inputs[3] if len(inputs) > 3 else None, in_place=True)]


@reference(T.MAT_MUL)
def mat_mul(op, inputs):
    ft = compute_dtype(inputs[0], inputs[1])
    x, y = as_compute_float(inputs[0], ft), as_compute_float(inputs[1], ft)
    if param_bool(inputs[2] if len(inputs) > 2 else None) and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    if param_bool(inputs[3] if len(inputs) > 3 else None) and y.ndim >= 2:
        y = np.swapaxes(y, -1, -2)
    return [np.asarray(np.matmul(x, y), dtype=ft)]
