"""The reductions REDUCE_MEAN, REDUCE_MAX, REDUCE_SUM and CUM_SUM, and ARG_MAX, ARG_MIN and TOP_K;
signatures, shape inference and numpy references.

Parameters that decide the output rank or precision (keepdim, dtype) must be constants; the references
read every parameter from `inputs`. Ties go to the first occurrence (arg max/min) or the lower index
(top-k), as in Paddle.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`, `common`,
the standard's codes and types and `errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    const_ints,
    index_precision,
    known,
    map_shapes,
    normalize_axis,
    operand_length,
    operation_error,
    param_bool,
    param_int,
    param_ints,
    result_type,
    scalar_param,
    unknown_dims,
)
from nnadapter_bridge.nnadapter.operations.registry import BOOL, FLOATS_Q8, INT32, INT32_64, Slot, operation, reference
from nnadapter_bridge.nnadapter.types import Operation

# Values with an order (comparisons, sums).
_ORDERED = FLOATS_Q8 | {Precision.INT32, Precision.INT64}


def reduce_dims(dims: Sequence[int], axes: Sequence[int], keepdim: bool, op: Operation | None = None) -> tuple:
    """Dims after reducing over `axes` (empty: every axis)."""
    rank = len(dims)
    chosen = {normalize_axis(a, rank, op, "axis") for a in axes} if len(axes) else set(range(rank))
    if keepdim:
        return tuple(1 if i in chosen else d for i, d in enumerate(dims))
    return tuple(d for i, d in enumerate(dims) if i not in chosen)


# -- signatures and shape inference ------------------------------------------------------------------


def _prepare_arg(op):
    """Index of the max/min along `axis`; `keepdim` keeps it as size 1; `dtype` picks INT32/INT64."""
    t = op.inputs[0].type
    keepdim = bool(scalar_param(op, 2, "keepdim"))
    precision = index_precision(op, scalar_param(op, 3, "dtype", int(Precision.INT64)), "dtype")
    axis = op.input_value(1)
    if axis is None:
        return [result_type(t, unknown_dims(t.rank if keepdim else t.rank - 1), precision=precision)]
    axis = int(np.asarray(axis).reshape(-1)[0])
    normalize_axis(axis, t.rank, op)
    return [map_shapes(t, lambda d: reduce_dims(d, [axis], keepdim, op), precision=precision)]


_ARG_SIGNATURE: dict[str, Any] = dict(
    inputs=[Slot("input", _ORDERED), Slot("axis", INT32), Slot("keepdim", BOOL),
            Slot("dtype", INT32, optional=True)],
    outputs=[Slot("output")],
)
operation(T.ARG_MAX, **_ARG_SIGNATURE)(_prepare_arg)
operation(T.ARG_MIN, **_ARG_SIGNATURE)(_prepare_arg)


def _prepare_reduce(op):
    """Reduce over `axes` (empty: all axes); `keepdim` keeps reduced axes as size 1."""
    t = op.inputs[0].type
    keepdim = bool(scalar_param(op, 2, "keepdim"))
    axes = const_ints(op, 1)
    if axes is None:
        n = operand_length(op.inputs[1])
        if keepdim:
            return [result_type(t, unknown_dims(t.rank))]
        if n == UNKNOWN:
            raise operation_error(op, "axes computed at run time need a known length (or keepdim) to fix the rank")
        return [result_type(t, unknown_dims(t.rank - n if n else 0))]
    return [map_shapes(t, lambda d: reduce_dims(d, axes, keepdim, op))]


_REDUCE_OUTPUTS = [Slot("output")]
operation(T.REDUCE_MEAN, inputs=[Slot("input", _ORDERED), Slot("axes", INT32), Slot("keepdim", BOOL)],
          outputs=_REDUCE_OUTPUTS)(_prepare_reduce)
operation(T.REDUCE_MAX, inputs=[Slot("input", _ORDERED), Slot("axes", INT32), Slot("keepdim", BOOL)],
          outputs=_REDUCE_OUTPUTS)(_prepare_reduce)
operation(T.REDUCE_SUM, inputs=[Slot("input", _ORDERED), Slot("axes", INT32), Slot("keepdim", BOOL)],
          outputs=_REDUCE_OUTPUTS)(_prepare_reduce)


@operation(T.CUM_SUM, inputs=[Slot("input", _ORDERED), Slot("axis", INT32, optional=True),
                              Slot("exclusive", BOOL, optional=True), Slot("reverse", BOOL, optional=True)],
           outputs=[Slot("output")])
def prepare_cum_sum(op):
    """Running sum along `axis` (default -1); `exclusive` starts at 0, `reverse` runs from the end."""
    t = op.inputs[0].type
    axis = op.input_value(1)
    if axis is not None:
        normalize_axis(int(np.asarray(axis).reshape(-1)[0]), max(t.rank, 1), op)
    return [result_type(t)]


@operation(T.TOP_K, inputs=[Slot("input", _ORDERED), Slot("k", INT32_64), Slot("axis", INT32),
                            Slot("largest", BOOL), Slot("sorted", BOOL),
                            Slot("return_indices_dtype", INT32)],
           outputs=[Slot("output"), Slot("indices")])
def prepare_top_k(op):
    """The k largest (or smallest) values along `axis` and their indices."""
    t = op.inputs[0].type
    axis = normalize_axis(int(scalar_param(op, 2, "axis")), t.rank, op)
    precision = index_precision(op, scalar_param(op, 5, "return_indices_dtype"), "return_indices_dtype")
    k = op.input_value(1)
    k = None if k is None else int(np.asarray(k).reshape(-1)[0])
    if k is not None and (k < 0 or (known(t.dims[axis]) and k > t.dims[axis])):
        raise operation_error(op, f"k={k} is out of range for axis {axis} of size {t.dims[axis]}")

    def along(d):
        d = list(d)
        d[axis] = UNKNOWN if k is None else k
        return d

    return [map_shapes(t, along), map_shapes(t, along, precision=precision)]


# -- references ------------------------------------------------------------------------------------------


def _reduce_axes(op, axes_array, rank: int):
    axes = param_ints(axes_array)
    if not axes:
        return tuple(range(rank))
    return tuple(sorted({normalize_axis(a, rank, op) for a in axes}))


@reference(T.REDUCE_MEAN)
def reduce_mean(op, inputs):
    x, axes, keepdim = inputs
    axes = _reduce_axes(op, axes, x.ndim)
    keep = param_bool(keepdim, False)
    if x.dtype.kind in "iu":
        # Paddle's integer mean is the integer sum divided by the count, truncated toward zero.
        total = np.asarray(np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype))
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        quotient = np.abs(total) // max(count, 1)
        return [np.where(total < 0, -quotient, quotient).astype(x.dtype, copy=False)]
    return [np.mean(x, axis=axes, keepdims=keep, dtype=x.dtype).astype(x.dtype, copy=False)]


@reference(T.REDUCE_MAX)
def reduce_max(op, inputs):
    x, axes, keepdim = inputs
    axes = _reduce_axes(op, axes, x.ndim)
    # Over an empty axis the result is the identity of max (-inf; the type's minimum for integers), which
    # makes a composed logsumexp -inf there as Paddle's is (Paddle's own reduce_max refuses such axes).
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return [np.asarray(np.max(x, axis=axes, keepdims=param_bool(keepdim, False), initial=lowest))]


@reference(T.REDUCE_SUM)
def reduce_sum(op, inputs):
    x, axes, keepdim = inputs
    axes = _reduce_axes(op, axes, x.ndim)
    # dtype=x.dtype: the output keeps the input's type (numpy would widen int32 sums to int64); float16 sums
    # accumulate in float32, as Paddle's CPU kernel does, and are rounded once at the end.
    accumulate = np.float32 if x.dtype == np.float16 else x.dtype
    total = np.sum(x, axis=axes, keepdims=param_bool(keepdim, False), dtype=accumulate)
    return [np.asarray(total).astype(x.dtype, copy=False)]


def _arg(op, inputs, fn):
    x, axis, keepdim = inputs[:3]
    axis = normalize_axis(param_int(axis), x.ndim, op)
    # numpy's argmax/argmin return the first occurrence of the extreme, as Paddle does.
    result = fn(x, axis=axis, keepdims=param_bool(keepdim, False))
    return [np.asarray(result).astype(op.outputs[0].type.dtype)]


@reference(T.ARG_MAX)
def arg_max(op, inputs):
    return _arg(op, inputs, np.argmax)


@reference(T.ARG_MIN)
def arg_min(op, inputs):
    return _arg(op, inputs, np.argmin)


@reference(T.CUM_SUM)
def cum_sum(op, inputs):
    x = inputs[0]
    padded = list(inputs) + [None] * (4 - len(inputs))
    axis = -1 if padded[1] is None else param_int(padded[1])
    exclusive, reverse = param_bool(padded[2], False), param_bool(padded[3], False)
    if x.ndim == 0:
        return [np.zeros_like(x) if exclusive else x.copy()]
    axis = normalize_axis(axis, x.ndim, op)
    y = np.flip(x, axis) if reverse else x
    total = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        # Shift by one along the axis: element i holds the sum of elements before i.
        total = np.concatenate([np.zeros_like(np.take(total, [0], axis=axis)),
                                np.take(total, np.arange(total.shape[axis] - 1), axis=axis)], axis=axis)
    return [np.flip(total, axis) if reverse else total]


@reference(T.TOP_K)
def top_k(op, inputs):
    x, k, axis, largest, _sorted, _dtype = inputs
    axis = normalize_axis(param_int(axis), x.ndim, op)
    k = param_int(k)
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise OperationError(f"{op.label()}: k={k} is out of range for axis {axis} of size {n}")
    if param_bool(largest, True):
        # Descending with ties in ascending index order: a stable ascending sort of the reversed axis,
        # read backwards, then map the positions back (no negation, which overflows integer minima).
        order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        order = (n - 1) - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    # Results are always sorted; `sorted=false` leaves the order free, so sorted is a valid answer.
    indices = np.take(order, np.arange(k), axis=axis)
    values = np.take_along_axis(x, indices, axis=axis)
    return [values, indices.astype(op.outputs[1].type.dtype)]
