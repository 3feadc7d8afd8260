"""Reference semantics (numpy) of the tensor operations: shape and tensor manipulation, reductions, cumulative
sum, arg max/min, top-k.

Parameters arrive as arrays (constant or computed at run time), so every reference reads them from
`inputs`, never from the prepare step; the dim rules come from ops_tensor so both sides agree.
Results are fresh C-ordered arrays (`.copy()`, not np.ascontiguousarray, which turns a 0-d result
into shape [1]). Quantized inputs reach these references already dequantized (see the registry), which is
exact for the data-movement operations when the output carries the input's scale.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import OperationType as T, Precision, precision_dtype
from nnadapter_bridge.nnadapter.operations.common import normalize_axis
from nnadapter_bridge.nnadapter.operations.ops_tensor import (
    expand_dims,
    flatten_dims,
    range_length,
    reshape_dims,
    slice_axes,
    split_sections,
    squeeze_axes,
    tile_dims,
    unsqueeze_dims,
)
from nnadapter_bridge.nnadapter.operations.registry import reference


def _ints(array) -> list:
    return [int(v) for v in np.asarray(array).reshape(-1)]


def _int(array) -> int:
    return int(np.asarray(array).reshape(-1)[0])


def _flag(array, default: bool) -> bool:
    return default if array is None else bool(np.asarray(array).reshape(-1)[0])


# -- reductions and arg/top-k ----------------------------------------------------------------------------


def _reduce_axes(op, axes_array, rank: int):
    axes = _ints(axes_array)
    if not axes:
        return tuple(range(rank))
    return tuple(sorted({normalize_axis(a, rank, op) for a in axes}))


@reference(T.REDUCE_MEAN)
def reduce_mean(op, inputs):
    x, axes, keepdim = inputs
    axes = _reduce_axes(op, axes, x.ndim)
    return [np.mean(x, axis=axes, keepdims=_flag(keepdim, False)).astype(x.dtype, copy=False)]


@reference(T.REDUCE_MAX)
def reduce_max(op, inputs):
    x, axes, keepdim = inputs
    axes = _reduce_axes(op, axes, x.ndim)
    return [np.asarray(np.max(x, axis=axes, keepdims=_flag(keepdim, False)))]


@reference(T.REDUCE_SUM)
def reduce_sum(op, inputs):
    x, axes, keepdim = inputs
    axes = _reduce_axes(op, axes, x.ndim)
    # dtype=x.dtype: the output keeps the input's type (numpy would widen int32 sums to int64).
    return [np.asarray(np.sum(x, axis=axes, keepdims=_flag(keepdim, False), dtype=x.dtype))]


def _arg(op, inputs, fn):
    x, axis, keepdim = inputs[:3]
    axis = normalize_axis(_int(axis), x.ndim, op)
    # numpy's argmax/argmin return the first occurrence of the extreme, as Paddle does.
    result = fn(x, axis=axis, keepdims=_flag(keepdim, False))
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
    axis = -1 if padded[1] is None else _int(padded[1])
    exclusive, reverse = _flag(padded[2], False), _flag(padded[3], False)
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
    axis = normalize_axis(_int(axis), x.ndim, op)
    k = _int(k)
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise OperationError(f"{op.label()}: k={k} is out of range for axis {axis} of size {n}")
    if _flag(largest, True):
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


# -- reshaping ----------------------------------------------------------------------------------------


@reference(T.RESHAPE)
def reshape(op, inputs):
    x, shape = inputs
    return [x.reshape(reshape_dims(x.shape, _ints(shape), op))]


@reference(T.FLATTEN)
def flatten(op, inputs):
    x, start, end = inputs
    return [x.reshape(flatten_dims(x.shape, _int(start), _int(end), op))]


@reference(T.SQUEEZE)
def squeeze(op, inputs):
    x = inputs[0]
    axes = _ints(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
    # Decide with the declared dims, as prepare did: an axis prepare kept stays, whatever its size now.
    declared = op.inputs[0].type.dims
    removed = squeeze_axes(declared if len(declared) == x.ndim else x.shape, axes, op)
    for a in removed:
        if x.shape[a] != 1:
            raise OperationError(f"{op.label()}: axis {a} has size {x.shape[a]} and cannot be squeezed")
    return [np.squeeze(x, axis=tuple(removed)) if removed else x]


@reference(T.UNSQUEEZE)
def unsqueeze(op, inputs):
    x, axes = inputs
    return [x.reshape(unsqueeze_dims(x.shape, _ints(axes), op))]


@reference(T.TRANSPOSE)
def transpose(op, inputs):
    x, perm = inputs
    perm = _ints(perm) or list(range(x.ndim))[::-1]
    return [np.transpose(x, [normalize_axis(p, x.ndim, op) for p in perm]).copy()]


@reference(T.CHANNEL_SHUFFLE)
def channel_shuffle(op, inputs):
    x, group = inputs
    group = _int(group)
    n, c = x.shape[0], x.shape[1]
    rest = x.shape[2:]
    # [N, g, C/g, ...] -> swap the two channel factors -> [N, C, ...]
    grouped = x.reshape((n, group, c // group) + rest)
    return [np.swapaxes(grouped, 1, 2).reshape(x.shape)]


# -- slicing, joining, splitting -----------------------------------------------------------------------


@reference(T.SLICE)
def slice_(op, inputs):
    x, axes, starts, ends = inputs[:4]
    steps = inputs[4] if len(inputs) > 4 else None
    starts, ends = _ints(starts), _ints(ends)
    axes = slice_axes(None if axes is None else _ints(axes), len(starts))
    steps = [1] * len(starts) if steps is None else _ints(steps)
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise OperationError(f"{op.label()}: a step of 0 is not allowed")
        index[normalize_axis(a, x.ndim, op)] = slice(s, e, st)
    return [x[tuple(index)].copy()]


@reference(T.CONCAT)
def concat(op, inputs):
    *parts, axis = inputs
    return [np.concatenate(parts, axis=normalize_axis(_int(axis), parts[0].ndim, op))]


@reference(T.STACK)
def stack(op, inputs):
    *parts, axis = inputs
    return [np.stack(parts, axis=normalize_axis(_int(axis), parts[0].ndim + 1, op))]


@reference(T.SPLIT)
def split(op, inputs):
    x, axis, sections = inputs
    axis = normalize_axis(_int(axis), x.ndim, op)
    sizes = split_sections(x.shape[axis], _ints(sections), op)
    bounds = np.cumsum(sizes)[:-1]
    return [part.copy() for part in np.split(x, bounds, axis=axis)]


@reference(T.UNSTACK)
def unstack(op, inputs):
    x, axis, _num = inputs
    axis = normalize_axis(_int(axis), x.ndim, op)
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


@reference(T.MESHGRID)
def meshgrid(op, inputs):
    return [g.copy() for g in np.meshgrid(*inputs, indexing="ij")]


# -- broadcasting, gathering, moving ---------------------------------------------------------------------


@reference(T.TILE)
def tile(op, inputs):
    x, repeats = inputs
    repeats = _ints(repeats)
    tile_dims(x.shape, repeats, op)  # validates the repeats
    return [np.tile(x, repeats)]


@reference(T.EXPAND)
def expand(op, inputs):
    x, shape = inputs
    return [np.broadcast_to(x, expand_dims(x.shape, _ints(shape), op)).copy()]


@reference(T.GATHER)
def gather(op, inputs):
    x, indices, axis = inputs
    axis = normalize_axis(_int(axis), x.ndim, op)
    n = x.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise OperationError(f"{op.label()}: indices must lie in [{-n}, {n}) for axis {axis} of size {n}")
    return [np.take(x, indices, axis=axis)]


@reference(T.ROLL)
def roll(op, inputs):
    x, shifts = inputs[:2]
    axes = _ints(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else []
    shifts = _ints(shifts)
    if not axes:
        # No axes: roll the flattened tensor, then restore the shape.
        return [np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)]
    return [np.roll(x, shifts, axis=tuple(normalize_axis(a, x.ndim, op) for a in axes))]


# -- shapes and generated tensors ------------------------------------------------------------------------


@reference(T.SHAPE, raw_quant=True)
def shape(op, inputs):
    x, dtype = inputs
    return [np.array(x.shape, dtype=precision_dtype(Precision(_int(dtype))))]


@reference(T.FILL)
def fill(op, inputs):
    shape_, value = inputs
    value = np.asarray(value).reshape(-1)
    return [np.full(_ints(shape_), value[0], dtype=value.dtype)]


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
