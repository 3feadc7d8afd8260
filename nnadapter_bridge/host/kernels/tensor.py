"""Indexing, scatter and slicing ops with no NNAdapter operation (the standard's tensor family): gather_nd,
scatter, scatter_nd_add, where_index, masked_select, unique, take_along_axis, index_sample; the updates
set_value (slice assignment), index_add, index_put, masked_fill, put_along_axis; partial_concat and
partial_sum (2-D column slices); repeat_interleave; crop_tensor (`shape`/`offsets` as attrs, the
`Shape`/`Offsets` tensors or the `ShapeTensor`/`OffsetsTensor` lists); the diagonals diag_embed, fill_diagonal
and fill_diagonal_tensor; is_empty and sequence_mask; shard_index (global ids to one shard's local ids); and the
pass-through and placement ops print, depend, nop, npu_identity, memcpy and memcpy_d2h.

Updates keep the input dtype and write into a copy (never into the input array); repeated indices
accumulate for the summing forms and the last write wins for assignment, as Paddle 3.3.1's CPU kernels do
(they walk the index in order). Out-of-range indices raise, naming the op. partial_*: each input's columns
[start_index, start_index + length) concatenated, or summed; length -1 means to the last column;
partial_concat counts a negative start_index from the end. repeat_interleave repeats each element along
`dim` by the int attr `Repeats` or by the per-element counts of a tensor (legacy slot `RepeatsTensor`;
`RepeatTensor` in PIR's repeat_interleave_with_tensor_index).

The pass-through ops bind their output to the input array itself (no copy: no kernel writes into an input):
print, depend (a control dependency on `Dep`), nop, npu_identity (an NPU storage format, `format`), memcpy and
memcpy_d2h (a copy to the device `dst_place_type` names) change nothing about the values, and the host holds
every value in host memory. depend, nop and npu_identity take the dtypes Paddle 3.3.1's CPU kernels register
(nop: float32 only) and raise on others; print and memcpy take any.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy, `generate`'s shape readers and the converters' index helpers
(`converters.tensor_index`); never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from converters.tensor_index import set_value_assign_layout, set_value_bounds, set_value_constant
from nnadapter_bridge.host.kernels.generate import ints_from
from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, paddle_dtype, require, slot


def _index_tuple(index: np.ndarray) -> tuple:
    """The last axis of `index` split into one integer array per indexed dim (numpy advanced indexing)."""
    return tuple(index[..., k] for k in range(index.shape[-1]))


@host_kernel("gather_nd")
def gather_nd(io: OpScope) -> None:
    x, index = io.input("X"), io.input("Index")
    if index.shape[-1] == 0:  # an empty index selects all of X once per index position
        out = np.broadcast_to(x, index.shape[:-1] + x.shape).copy()
    else:
        out = x[_index_tuple(index)]
    io.set_output("Out", out)


@host_kernel("scatter")
def scatter(io: OpScope) -> None:
    x, ids, updates = io.input("X"), io.input("Ids").reshape(-1), io.input("Updates")
    out = x.copy()
    if io.attr("overwrite", True):
        # Duplicate ids: the last update wins, as in Paddle's sequential CPU kernel.
        out[ids] = updates
    else:
        # Without overwrite Paddle zeroes every target row first, then sums all updates into it.
        out[ids] = 0
        np.add.at(out, ids, updates)
    io.set_output("Out", out)


@host_kernel("scatter_nd_add")
def scatter_nd_add(io: OpScope) -> None:
    x, index, updates = io.input("X"), io.input("Index"), io.input("Updates")
    out = x.copy()
    if index.shape[-1] == 0:
        out += updates.reshape((-1,) + x.shape).sum(axis=0).astype(x.dtype)
    else:
        np.add.at(out, _index_tuple(index), updates)
    io.set_output("Out", out)


@host_kernel("where_index")
def where_index(io: OpScope) -> None:
    io.set_output("Out", np.argwhere(io.input("Condition")).astype(np.int64))


@host_kernel("masked_select")
def masked_select(io: OpScope) -> None:
    x, mask = np.broadcast_arrays(io.input("X"), io.input("Mask"))
    io.set_output("Y", x[mask.astype(bool)])


@host_kernel("unique")
def unique(io: OpScope) -> None:
    x = io.input("X")
    axes = io.attr("axis", [])
    axis = int(axes[0]) if axes else None
    index_dtype = paddle_dtype(io.attr("dtype", -1), "int64")
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               axis=axis)
    inverse = inverse.reshape(-1)
    if not io.attr("is_sorted", False):
        # The legacy (unsorted) unique keeps the unique values in order of first appearance.
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    io.set_output("Out", values)
    io.set_output("Indices", first.astype(index_dtype))
    io.set_output("Index", inverse.astype(index_dtype))
    io.set_output("Counts", counts.astype(index_dtype))


@host_kernel("take_along_axis")
def take_along_axis(io: OpScope) -> None:
    """Result[p] = Input[p with `Axis` replaced by Index[p]] for every position p of Index (Paddle 3.3.1's
    kernel: Index may be smaller than Input on the other axes, and a negative index counts from the end).
    paddle.take_along_axis's broadcasting happens before the op, in the program."""
    x, index = io.input("Input"), io.input("Index")
    if index.dtype.kind not in "iu":
        raise io.error(f"Index must be an integer tensor, got {index.dtype}")
    if index.ndim != x.ndim:
        raise io.error(f"Index has rank {index.ndim}, Input rank {x.ndim}; they must be equal")
    axis = int(io.attr("Axis", 0))
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise io.error(f"Axis {axis} is out of range for rank {x.ndim}")
    axis %= max(x.ndim, 1)
    larger = [d for d in range(x.ndim) if d != axis and index.shape[d] > x.shape[d]]
    if larger:
        raise io.error(f"Index dims {list(index.shape)} exceed Input dims {list(x.shape)} on axes {larger}")
    size = x.shape[axis]
    index = index.astype(np.int64)
    if index.size and (index.min() < -size or index.max() >= size):
        raise io.error(f"Index holds a value outside [-{size}, {size}) (got {index.min()}..{index.max()})")
    block = x[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index.shape))]
    io.set_output("Result", np.take_along_axis(block, np.where(index < 0, index + size, index), axis=axis))


@host_kernel("index_sample")
def index_sample(io: OpScope) -> None:
    x, index = io.input("X"), io.input("Index")
    io.set_output("Out", np.take_along_axis(x, index.astype(np.int64), axis=1))


def check_range(io: OpScope, index: np.ndarray, size: int, what: str) -> np.ndarray:
    if index.size and (index.min() < -size or index.max() >= size):
        raise io.error(f"{what} holds a value outside [-{size}, {size}) (got {index.min()}..{index.max()})")
    return np.where(index < 0, index + size, index)


def _set_value_bounds(io: OpScope, slot: str, attr: str) -> list[int]:
    """starts / ends / steps: the `*TensorList` tensors read flattened in order (one value each in a legacy
    program, a whole run-time IntArray in one tensor from PIR), else the attribute."""
    if io.has_input(slot):
        return [int(v) for t in io.inputs(slot) for v in np.asarray(t).reshape(-1)]
    return [int(v) for v in io.attr(attr, [])]


@host_kernel("set_value")
def set_value(io: OpScope) -> None:
    """x[region] = value, Paddle 3.3.1's SetValueImpl: the region's bounds normalized by its slice rule (see
    converters.tensor_index.set_value_bounds), the value broadcast to the region's dims without the
    `decrease_axes` and with the `none_axes`, in x's dtype."""
    x = io.input("Input")
    axes = [int(a) % x.ndim for a in io.attr("axes", [])] if x.ndim else []
    starts = _set_value_bounds(io, "StartsTensorList", "starts")
    ends = _set_value_bounds(io, "EndsTensorList", "ends")
    steps = _set_value_bounds(io, "StepsTensorList", "steps") or [1] * len(axes)
    if not len(starts) == len(ends) == len(steps) == len(axes):
        raise io.error(f"{len(starts)} starts, {len(ends)} ends and {len(steps)} steps for {len(axes)} axes {axes}")
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        try:
            first, count = set_value_bounds(x.shape[axis], start, end, step)
        except ValueError as exc:
            raise io.error(f"axis {axis}: {exc}") from None
        stop = first + count * step
        index[axis] = slice(first, stop if stop >= 0 else None, step)
    if io.has_input("ValueTensor"):
        value = io.input("ValueTensor")
    else:
        value = set_value_constant(io.op)
        if value is None:
            raise io.error("neither a ValueTensor nor constant values are given")
    out = x.copy()
    region_shape = out[tuple(index)].shape
    layout = set_value_assign_layout(x.ndim, io.attr("decrease_axes", []), io.attr("none_axes", []))
    target = [1 if axis is None else region_shape[axis] for axis in layout]
    value = np.asarray(value).astype(x.dtype, copy=False)
    while value.ndim > len(target) and value.shape[0] == 1:  # leading 1s broadcast away
        value = value.reshape(value.shape[1:])
    try:
        placed = np.broadcast_to(value, target)
    except ValueError:
        raise io.error(f"the value's dims {list(np.shape(value))} do not broadcast to the region's dims "
                       f"{target}") from None
    out[tuple(index)] = placed.reshape(region_shape)
    io.set_output("Out", out)


@host_kernel("index_add")
def index_add(io: OpScope) -> None:
    x, index, add_value = io.input("X"), io.input("Index"), io.input("AddValue")
    if index.dtype not in (np.int32, np.int64):
        raise io.error(f"Index must be int32 or int64, got {index.dtype}")
    data = x.reshape(1) if x.ndim == 0 else x
    axis = int(io.attr("axis", 0)) % data.ndim
    index = check_range(io, index.reshape(-1), data.shape[axis], "Index")
    out = data.copy()
    moved, values = np.moveaxis(out, axis, 0), np.moveaxis(add_value.reshape(-1) if x.ndim == 0 else add_value, axis, 0)
    np.add.at(moved, index, values.astype(x.dtype, copy=False))
    io.set_output("Out", out.reshape(x.shape))


@host_kernel("index_put")
def index_put(io: OpScope) -> None:
    x = io.input(slot(io, "X", "x"))
    indices = io.inputs(slot(io, "Indices", "indices"))
    value = io.input(slot(io, "Value", "value")).astype(x.dtype, copy=False)
    if not indices:
        raise io.error("indices is empty")
    if len(indices) == 1 and indices[0].dtype == np.bool_:
        mask = indices[0]
        if mask.shape != x.shape[:mask.ndim]:
            raise io.error(f"the bool index {list(mask.shape)} does not match x {list(x.shape)}")
        index = tuple(np.nonzero(mask))
    else:
        if len(indices) > x.ndim:
            raise io.error(f"{len(indices)} index tensors for a rank-{x.ndim} input")
        index = []
        for d, idx in enumerate(indices):
            if idx.dtype not in (np.int32, np.int64):
                raise io.error(f"index tensors must be int32, int64 or one bool tensor, got {idx.dtype}")
            index.append(check_range(io, idx.astype(np.int64), x.shape[d], f"indices[{d}]"))
        index = tuple(np.broadcast_arrays(*index))
    out = x.copy()
    target_shape = out[index].shape
    value = np.broadcast_to(value, target_shape)
    if io.attr("accumulate", False):
        np.add.at(out, index, value)
    else:
        out[index] = value
    io.set_output(slot(io, "Out", "out"), out)


@host_kernel("masked_fill")
def masked_fill(io: OpScope) -> None:
    x = io.input(slot(io, "X", "x"))
    mask = io.input(slot(io, "Mask", "mask"))
    value = io.input(slot(io, "Value", "value"))
    if mask.dtype != np.bool_:
        raise io.error(f"mask must be bool, got {mask.dtype}")
    out = np.where(mask, value.astype(x.dtype), x)
    io.set_output(slot(io, "Out", "out"), np.asarray(out, dtype=x.dtype))


@host_kernel("put_along_axis")
def put_along_axis(io: OpScope) -> None:
    arr, index, value = io.input("Input"), io.input("Index"), io.input("Value")
    reduce = str(io.attr("Reduce", "assign"))
    include_self = bool(io.attr("Include_self", True))
    if index.dtype not in (np.int32, np.int64):
        raise io.error(f"Index must be int32 or int64, got {index.dtype}")
    if index.ndim != arr.ndim:
        raise io.error(f"Index must have the rank of Input ({arr.ndim}), got {index.ndim}")
    axis = int(io.attr("Axis", 0)) % max(arr.ndim, 1)
    index = check_range(io, index.astype(np.int64), arr.shape[axis], "Index")
    if value.ndim == 0 or value.size == 1:
        value = np.broadcast_to(value.reshape(()), index.shape)
    value = value[tuple(slice(0, n) for n in index.shape)].astype(arr.dtype, copy=False)
    grid = list(np.indices(index.shape, sparse=True))
    grid[axis] = index
    target = tuple(np.broadcast_arrays(*grid))
    out = arr.copy()
    if reduce == "assign":
        out[target] = value  # numpy assigns in C order, so the last duplicate wins, as in Paddle's loop
    elif reduce in ("add", "mean"):
        hits = np.zeros(arr.shape, np.int64)
        np.add.at(hits, target, 1)
        if not include_self:
            out[hits > 0] = 0
        integer = arr.dtype.kind in "iub"
        sums = out.astype(np.float64) if reduce == "mean" and not integer else out
        np.add.at(sums, target, value)
        if reduce == "mean":
            counts = np.maximum(hits + (1 if include_self else 0), 1).astype(sums.dtype)
            # an integer mean is floored, as Paddle's kernel gives (-5 / 3 -> -2, 5 / 2 -> 2)
            divided = np.floor_divide(sums, counts) if integer else sums / counts
            out = np.where(hits > 0, divided, sums).astype(arr.dtype)
        else:
            out = sums
    elif reduce in ("mul", "multiply"):
        if not include_self:
            hits = np.zeros(arr.shape, bool)
            hits[target] = True
            out[hits] = 1
        np.multiply.at(out, target, value)
    elif reduce in ("amax", "amin"):
        ufunc = np.maximum if reduce == "amax" else np.minimum
        if include_self:
            ufunc.at(out, target, value)
        else:
            # the first value written to a position replaces it, the later ones reduce with it
            seen = np.zeros(arr.shape, bool)
            for pos, v in zip(zip(*(t.reshape(-1) for t in target)), value.reshape(-1)):
                out[pos] = ufunc(out[pos], v) if seen[pos] else v
                seen[pos] = True
    else:
        raise io.error(f"Reduce must be assign, add, mul, multiply, mean, amax or amin, got {reduce!r}")
    io.set_output("Result", out)


def column_slices(io: OpScope) -> list:
    xs = io.inputs("X")
    if not xs:
        raise io.error("input slot 'X' is empty")
    start, length = int(io.attr("start_index", 0)), int(io.attr("length", -1))
    columns = xs[0].shape[1] if xs[0].ndim == 2 else None
    for x in xs:
        if x.ndim != 2 or x.shape != xs[0].shape:
            raise io.error(f"every input must be 2-D and of one shape, got {[list(a.shape) for a in xs]}")
    if start < 0:
        if io.op.type == "partial_sum":
            # Paddle's partial_sum kernel does not wrap a negative start: it reads before each row (memory
            # outside the tensor), so there is no defined result to reproduce
            raise io.error(f"start_index {start} is negative; Paddle's partial_sum reads outside the input "
                           f"for it (only partial_concat counts a negative start from the end)")
        start += columns
    end = columns if length < 0 else start + length
    if not 0 <= start < columns or end > columns:
        raise io.error(f"start_index {io.attr('start_index', 0)} with length {length} is out of the "
                       f"{columns} columns")
    return [x[:, start:end] for x in xs]


@host_kernel("partial_concat")
def partial_concat(io: OpScope) -> None:
    io.set_output("Out", np.concatenate(column_slices(io), axis=1))


@host_kernel("partial_sum")
def partial_sum(io: OpScope) -> None:
    slices = column_slices(io)
    out = slices[0].copy()
    for part in slices[1:]:
        out += part
    io.set_output("Out", out)


@host_kernel("repeat_interleave", "repeat_interleave_with_tensor_index")
def repeat_interleave(io: OpScope) -> None:
    x = io.input("X")
    dim = int(io.attr("dim", 0))
    if x.ndim == 0:
        x = x.reshape(1)
    dim %= x.ndim
    slot = next((s for s in ("RepeatsTensor", "RepeatTensor") if io.has_input(s)), None)
    if slot is not None:
        repeats = io.input(slot).reshape(-1).astype(np.int64)
        if repeats.size not in (1, x.shape[dim]):
            raise io.error(f"{repeats.size} repeat counts for axis {dim} of size {x.shape[dim]}")
    else:
        repeats = int(io.attr("Repeats", 1))
        if repeats <= 0:
            raise io.error(f"repeats should be larger than zero, got {repeats}")  # Paddle's check too
    if np.any(np.asarray(repeats) < 0):
        raise io.error(f"repeat counts must be non-negative, got {np.asarray(repeats).tolist()}")
    io.set_output("Out", np.repeat(x, repeats, axis=dim))


@host_kernel("crop_tensor")
def crop_tensor(io: OpScope) -> None:
    x = io.input("X")
    shape = ints_from(io, "shape", "Shape", "ShapeTensor")
    offsets = ints_from(io, "offsets", "Offsets", "OffsetsTensor") or [0] * x.ndim
    if len(shape) != x.ndim or len(offsets) != x.ndim:
        raise io.error(f"shape {shape} and offsets {offsets} must have one value per dim of X {list(x.shape)}")
    window = []
    for axis, (size, offset, dim) in enumerate(zip(shape, offsets, x.shape)):
        if size == -1:  # Paddle: the rest of the dim after the offset
            size = dim - offset
        if size <= 0 or offset < 0 or offset + size > dim:
            raise io.error(f"axis {axis}: offset {offset} + size {size} is out of X's dim {dim}")
        window.append(slice(offset, offset + size))
    io.set_output("Out", x[tuple(window)].copy())


# -- diagonals ------------------------------------------------------------------------------------------------
DIAG_EMBED_DTYPES = frozenset(np.dtype(t) for t in ("int32", "int64", "float32", "float64"))


@host_kernel("diag_embed")
def diag_embed(io: OpScope) -> None:
    """Each last-axis vector of Input placed on the `offset` diagonal of a new (dim1, dim2) square: dim1 indexes
    its elements, dim2 them shifted by offset; the square's side is the vector's length + |offset|."""
    x = io.input(slot(io, "Input", "input"))
    require(io, x, DIAG_EMBED_DTYPES)
    offset, dim1, dim2 = int(io.attr("offset", 0)), int(io.attr("dim1", -2)), int(io.attr("dim2", -1))
    rank = x.ndim + 1
    for name, dim in (("dim1", dim1), ("dim2", dim2)):
        if not -rank <= dim < rank:
            raise io.error(f"{name} {dim} is out of range for a rank-{x.ndim} input (it takes [-{rank}, {rank - 1}])")
    if x.ndim == 0:
        raise io.error("Input must have at least one dimension")
    dim1, dim2 = dim1 % rank, dim2 % rank
    if dim1 == dim2:
        raise io.error(f"dim1 and dim2 name one dimension ({dim1})")
    length = x.shape[-1]
    side = length + abs(offset)
    out = np.zeros(x.shape[:-1] + (side, side), dtype=x.dtype)
    index = np.arange(length)
    out[..., index + max(-offset, 0), index + max(offset, 0)] = x
    io.set_output(slot(io, "Out", "out"), np.ascontiguousarray(np.moveaxis(out, (-2, -1), (dim1, dim2))))


FILL_DIAGONAL_DTYPES = frozenset(np.dtype(t) for t in ("bool", "int32", "int64", "float16", "float32", "float64"))


@host_kernel("fill_diagonal")
def fill_diagonal(io: OpScope) -> None:
    """Paddle's walk over the flat data: every `step` elements (step = 1 + d[-1] + d[-1] * d[-2] + ..., the
    distance between x[i, i, ...] and x[i + 1, i + 1, ...]), position i + offset is set when i's column
    (i mod d[1]) + offset stays in [0, d[1]); without `wrap` the walk stops after d[1] * d[1] elements, so a tall
    matrix gets one square's diagonal and a higher-rank input only x[0, 0, ...]. `value` is a float attribute,
    cast to x's type (truncated for integers)."""
    x = io.input("X")
    require(io, x, FILL_DIAGONAL_DTYPES)
    if x.ndim < 2:
        raise io.error(f"X must have at least 2 dimensions, got shape {list(x.shape)}")
    offset, wrap = int(io.attr("offset", 0)), bool(io.attr("wrap", False))
    with np.errstate(invalid="ignore"):  # NaN or out-of-range values become what the C++ cast gives
        value = np.asarray(np.float32(io.attr("value", 0.0))).astype(x.dtype)
    out = x.copy().reshape(-1)
    columns = x.shape[1]
    step = int(sum(np.prod(x.shape[d + 1:], dtype=np.int64) for d in range(x.ndim)))
    size = x.size if wrap else min(x.size, columns * columns)
    if size:
        start = np.arange(0, size, step)
        column = start % columns + offset
        out[start[(column >= 0) & (column < columns)] + offset] = value
    io.set_output("Out", out.reshape(x.shape))


@host_kernel("fill_diagonal_tensor")
def fill_diagonal_tensor(io: OpScope) -> None:
    """Y written on the `offset` diagonal of X's (dim1, dim2) planes: Y, read as [prod(Y.shape[:-1]),
    Y.shape[-1]], must be [the product of X's other dimensions, the diagonal's length]."""
    x, y = io.input("X"), io.input("Y")
    if y.dtype != x.dtype:
        raise io.error(f"X and Y must have one dtype, got {x.dtype} and {y.dtype}")
    offset, dim1, dim2 = int(io.attr("offset", 0)), int(io.attr("dim1", 0)), int(io.attr("dim2", 1))
    if x.ndim < 2:
        raise io.error(f"X must have at least 2 dimensions, got shape {list(x.shape)}")
    for name, dim in (("dim1", dim1), ("dim2", dim2)):
        # Paddle's API makes them non-negative; its kernel reads out of bounds for a negative one
        if not 0 <= dim < x.ndim:
            raise io.error(f"{name} {dim} must be in [0, {x.ndim}) (a non-negative dimension of X)")
    if dim1 == dim2:
        raise io.error(f"dim1 and dim2 name one dimension ({dim1})")
    rows, columns = x.shape[dim1], x.shape[dim2]
    length = min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns)
    batch_shape = tuple(n for d, n in enumerate(x.shape) if d not in (dim1, dim2))
    batch = int(np.prod(batch_shape, dtype=np.int64))
    y_rows = int(np.prod(y.shape[:-1], dtype=np.int64))
    if y.ndim == 0 or (y_rows, y.shape[-1]) != (batch, length):
        raise io.error(f"Y {list(y.shape)} must read as [{batch}, {length}] (the other dimensions of X "
                       f"{list(x.shape)} by the length of its diagonal)")
    out = x.copy()
    planes = np.moveaxis(out, (dim1, dim2), (-2, -1))  # a view: writing it writes `out`
    index = np.arange(length)
    planes[..., index + max(-offset, 0), index + max(offset, 0)] = y.reshape(batch_shape + (length,))
    io.set_output("Out", out)


# -- shape predicates and masks -------------------------------------------------------------------------------
REAL_NUMERIC = frozenset(np.dtype(t) for t in ("int32", "int64", "float32", "float64"))


@host_kernel("is_empty")
def is_empty(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, REAL_NUMERIC)
    io.set_output("Out", np.array(x.size == 0))


@host_kernel("sequence_mask")
def sequence_mask(io: OpScope) -> None:
    """Y[..., j] = j < X[...] for j < maxlen (`MaxLenTensor` when given, else the attribute; negative: X's maximum,
    truncated), in `out_dtype` (int64 by default)."""
    x = io.input("X")
    require(io, x, REAL_NUMERIC)
    if io.has_input("MaxLenTensor"):
        maxlen = int(np.asarray(io.input("MaxLenTensor")).reshape(-1)[0])
    else:
        maxlen = int(io.attr("maxlen", -1))
    if maxlen < 0:
        maxlen = int(x.max()) if x.size else 0
        if maxlen < 0:
            raise io.error(f"maxlen is negative: it was not given and the largest length in X is {maxlen}")
    out_dtype = paddle_dtype(io.attr("out_dtype", 3), "int64")
    io.set_output("Y", (np.arange(maxlen) < x[..., None]).astype(out_dtype))


# -- global ids to shard-local ids ----------------------------------------------------------------------------
INT32_64 = frozenset(np.dtype(t) for t in ("int32", "int64"))


@host_kernel("shard_index")
def shard_index(io: OpScope) -> None:
    """Ids in [0, index_num) split into `nshards` ranges of ceil(index_num / nshards) ids: an id in shard
    `shard_id`'s range becomes its offset in that range, any other id `ignore_value`. Paddle's checks: X is int32
    or int64 of rank >= 2 with a last dim of 1, nshards > 0, 0 <= shard_id < nshards, every id in range."""
    x = io.input("X")
    require(io, x, INT32_64)
    if x.ndim < 2 or x.shape[-1] != 1:
        raise io.error(f"X must have rank >= 2 and a last dim of 1 (one id per row), got dims {list(x.shape)}")
    index_num, nshards = int(io.attr("index_num")), int(io.attr("nshards"))
    shard_id, ignore_value = int(io.attr("shard_id")), int(io.attr("ignore_value", -1))
    if nshards <= 0:
        raise io.error(f"nshards must be > 0, got {nshards}")
    if not 0 <= shard_id < nshards:
        raise io.error(f"shard_id must be in [0, {nshards}) (nshards), got {shard_id}")
    if x.size and (x.min() < 0 or x.max() >= index_num):
        raise io.error(f"every id must be in [0, {index_num}) (index_num), got {x.min()}..{x.max()}")
    shard_size = (index_num + nshards - 1) // nshards
    out = np.where(x // shard_size == shard_id, x % shard_size, ignore_value)
    io.set_output("Out", out.astype(x.dtype))


# -- pass-through and placement -------------------------------------------------------------------------------
DEPEND_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64", "complex64", "complex128"))
NPU_IDENTITY_DTYPES = frozenset(np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                                                      "float32", "float64"))


@host_kernel("print")
def print_(io: OpScope) -> None:
    """Out is In. Paddle prints the tensor (its name, dtype, shape, layout, LoD and the first `summarize` values
    after `message`) to stdout each time the op runs, up to `first_n` times; this kernel prints nothing: writing
    into the hosting application's stdout on every inference is a debugging side effect a deployment does not
    want, and the tensor stays observable by fetching the var (Paddle's own printing has no bearing on Out)."""
    io.set_output("Out", io.input("In"))


@host_kernel("depend")
def depend(io: OpScope) -> None:
    """Out is X; `Dep` only orders the op after the ops producing it (which the host runs in program order).
    Paddle's kernel requires Out to be X's own var, as a legacy program writes it (depend X -> X); from a PIR
    program (a new value for Out) Paddle Inference 3.3.1 fails, while this kernel binds Out to X's array."""
    x = io.input("X")
    require(io, x, DEPEND_DTYPES)
    io.set_output("Out", x)


@host_kernel("nop")
def nop(io: OpScope) -> None:
    """Out is X. Paddle's kernel (float32 only) does nothing, which works when Out is X's var (a legacy program);
    from a PIR program Paddle Inference 3.3.1 fails on an Out that holds no memory, while this kernel binds it."""
    x = io.input("X")
    require(io, x, frozenset({np.dtype("float32")}))
    io.set_output("Out", x)


@host_kernel("npu_identity")
def npu_identity(io: OpScope) -> None:
    """Out is x: `format` is an NPU storage format, which Paddle's CPU kernel ignores (a plain copy)."""
    x = io.input(slot(io, "X", "x"))
    require(io, x, NPU_IDENTITY_DTYPES)
    io.set_output(slot(io, "Out", "out"), x)


@host_kernel("memcpy", "memcpy_d2h")
def memcpy(io: OpScope) -> None:
    """Out is X: a copy to the place `dst_place_type` names (memcpy: 0 CPU, 1 CUDA, 2 CUDA pinned, ...;
    memcpy_d2h: 0 CPU, 1 CUDA pinned). Paddle's CPU build runs only the CPU destination (0) and fails for a device
    one; the host keeps every value in host memory, so every destination is the identity here and a program
    placed for a device still runs."""
    io.set_output("Out", io.input("X"))
