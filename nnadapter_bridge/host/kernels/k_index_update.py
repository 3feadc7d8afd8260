"""Scatter-style updates and index/sequence generators with no NNAdapter operation: set_value (slice
assignment), index_add, index_put, masked_fill, put_along_axis, tril_indices, triu_indices, logspace and
label_smooth.

Updates keep the input dtype and write into a copy (never into the input array); repeated indices
accumulate for the summing forms and the last write wins for assignment, as Paddle 3.3.1's CPU kernels do
(they walk the index in order). Out-of-range indices raise, naming the op.
"""
from __future__ import annotations

import numpy as np

from converters.tensor_index import set_value_assign_layout, set_value_bounds, set_value_constant
from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, paddle_dtype


def slot(io: OpScope, legacy: str, new: str) -> str:
    """The slot name the op uses: ops absent from the compat table keep their PIR (lower-case) names."""
    return legacy if io.input_names(legacy) or io.output_names(legacy) else new


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


def triangle_indices(io: OpScope, rows: int, cols: int, offset: int, lower: bool) -> None:
    if rows < 0 or cols < 0:
        raise io.error(f"rows and cols must be non-negative, got {rows} and {cols}")
    fn = np.tril_indices if lower else np.triu_indices
    r, c = fn(rows, offset, cols)
    io.set_output(slot(io, "Out", "out"), np.stack([r, c]).astype(paddle_dtype(io.attr("dtype", 3), "int64")))


@host_kernel("tril_indices")
def tril_indices(io: OpScope) -> None:
    triangle_indices(io, int(io.attr("rows")), int(io.attr("cols")), int(io.attr("offset", 0)), True)


@host_kernel("triu_indices")
def triu_indices(io: OpScope) -> None:
    triangle_indices(io, int(io.attr("row")), int(io.attr("col")), int(io.attr("offset", 0)), False)


def scalar_input(io: OpScope, name: str) -> float:
    value = io.input(name)
    if value.size != 1:
        raise io.error(f"{name} must hold one element, got shape {list(value.shape)}")
    return value.reshape(()).item()


@host_kernel("logspace")
def logspace(io: OpScope) -> None:
    dtype = paddle_dtype(io.attr("dtype", 5), "float32")
    # Paddle reads start, stop and base in the output dtype before computing
    start, stop, base = (np.asarray(scalar_input(io, n)).astype(dtype).item() for n in ("Start", "Stop", "Base"))
    num = int(scalar_input(io, "Num"))
    if num <= 0:
        raise io.error(f"Num must be positive, got {num}")
    if num == 1:
        out = np.asarray([base ** start], np.float64)
    else:
        # Paddle's kernel: the first half steps up from start, the second half down from stop
        step = (stop - start) / (num - 1)
        i = np.arange(num, dtype=np.float64)
        exponent = np.where(i < num // 2, start + step * i, stop - step * (num - i - 1))
        with np.errstate(all="ignore"):
            out = np.power(float(base), exponent)
    io.set_output("Out", out.astype(dtype))


@host_kernel("label_smooth")
def label_smooth(io: OpScope) -> None:
    label = io.input("X")
    if label.dtype.kind != "f":
        raise io.error(f"X must be a float tensor, got {label.dtype}")
    epsilon = label.dtype.type(io.attr("epsilon", 0.0))
    one = label.dtype.type(1)
    prior = io.input("PriorDist", None)
    if prior is not None:
        # prior_dist broadcasts along label's rows; the result keeps label's shape (a 0-d label stays 0-d)
        out = ((one - epsilon) * label + epsilon * prior.reshape(-1).astype(label.dtype)).reshape(label.shape)
    else:
        classes = label.shape[-1] if label.ndim else 1
        out = (one - epsilon) * label + epsilon / label.dtype.type(classes)
    io.set_output("Out", np.asarray(out, dtype=label.dtype))
