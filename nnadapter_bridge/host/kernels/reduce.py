"""Reductions, scans and order statistics with no NNAdapter operation (the standard's reduce family):
reduce_prod; the scans cumprod and logcumsumexp (with Paddle's exclusive / reverse / flatten forms); median,
nanmedian, kthvalue, mode, searchsorted, bincount, histogram, unique_consecutive, reduce_amax / reduce_amin, and
argsort and top_k / top_k_v2 of keys that tie (their converters' TOP_K orders equal keys by index); the moments
var, std and variance; nansum and reduce_as; the running extremes cummax / cummin; equal_all and allclose.

Values follow Paddle 3.3.1's CPU kernels (NaN sorts last; median gives NaN for a row holding one, nanmedian
skips them). Where Paddle returns the index of one of several equal elements, its pick comes from
std::nth_element / std::sort and is not a documented order: median replays its top_k's pick (paddle_top_k_order);
the others give the stable-order pick (first of equal elements for nanmedian and kthvalue, last for mode, which
is what Paddle's insertion sort gives on rows of up to 16 elements), so their indices of tied values can differ.

cumprod takes float32, float64, int32, int64 and the complex types, logcumsumexp float32/float64, as Paddle
3.3.1's CPU kernels do; both keep the input dtype. The scan runs step by step in the input dtype, as Paddle's
does, so rounding accumulates the same way.

argsort orders equal keys as Paddle 3.3.1's CPU kernel does: `stable` is std::stable_sort (equal keys in index
order); otherwise std::sort of (key, index) pairs compared by key alone, whose order of equal keys is libstdc++'s
introsort's (`std_sort_order` replays it step by step: median-of-three pivot, unguarded partition, heap sort past
the depth limit, insertion sort of runs of 16; checked against Paddle on 1200 arrays of tied keys). NaN comes last
ascending and first descending, as Paddle's comparator puts it.

top_k / top_k_v2 pick as Paddle 3.3.1's CPU kernel does: (key, index) pairs compared by key alone, std::partial_sort
of the first k when k * 64 < n, else std::nth_element at k - 1 and (sorted) std::sort of the k - 1 before it
(`paddle_top_k_order`; checked against Paddle on 6240 rows of tied keys, NaN and sorted=False included).

var / std divide the summed squared deviations by N - `correction` (Paddle 3.3.1's kernel reads `correction` and
ignores `unbiased`), variance by N; a negative quotient (correction > N) is 0, N = correction gives inf (0/0: NaN),
an empty reduction NaN. They take float32/float64, are computed in float64 and rounded once. (Paddle's float32 std
takes Eigen's fast vectorised square root, which may be 1 ulp off and turns an infinite variance into NaN in all but
the last size % 8 elements; here the square root is exact and std of inf is inf.) nansum is sum with
NaN read as 0 before the cast to `dtype`; it and reduce_as give sum's dtype (int64 for bool and int32 inputs, the
input's for the others) and accumulate float16 in float32. cummax / cummin: see the kernel. equal_all and allclose
give a 0-d bool; allclose uses elementwise's `close_mask` (Paddle's isclose test, not numpy's).

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`),
`std_sort_order` and `paddle_top_k_order`. Imports the registry, numpy and elementwise's closeness test; never a
driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import functools

import numpy as np

from nnadapter_bridge.host.kernels.elementwise import close_mask, close_operands, close_tolerances
from nnadapter_bridge.host.kernels.registry import FLOATS, OpScope, host_kernel, paddle_dtype, require, slot

NUMERIC = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64"))


def rows_along(x: np.ndarray, axes) -> tuple[np.ndarray, tuple]:
    """`x` with the reduced `axes` flattened into the last dimension, and the kept shape."""
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    kept_shape = tuple(x.shape[d] for d in kept)
    return moved.reshape(kept_shape + (-1,)), kept_shape


def reduced_shape(x: np.ndarray, axes, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    return tuple(n for d, n in enumerate(x.shape) if d not in axes)


def normalized_axes(io: OpScope, x: np.ndarray, axis) -> tuple:
    axis = [axis] if isinstance(axis, int) else list(axis or [])
    if not axis or x.ndim == 0:
        return tuple(range(x.ndim))
    for a in axis:
        if not -x.ndim <= a < x.ndim:
            raise io.error(f"axis {a} is out of range for a rank-{x.ndim} input")
    return tuple(sorted({a % x.ndim for a in axis}))


def median_rows(rows: np.ndarray, skip_nan: bool, mode: str):
    """Per row: the median and the index (avg: the two middle indices) of Paddle's median / nanmedian."""
    order = np.argsort(rows, axis=-1, kind="stable")  # NaN sorts last
    if not skip_nan and rows.size and rows.shape[-1] > 1:
        # Paddle's median picks among equal values as its top_k of the (n >> 1) + 1 smallest does (sorted):
        # checked against Paddle 3.3.1 on 800 rows of tied values, both modes, odd and even lengths.
        k = (rows.shape[-1] >> 1) + 1
        picked = np.stack([top_k_row(row, k, False, True) for row in rows.reshape(-1, rows.shape[-1])])
        head = order.reshape(-1, rows.shape[-1]).copy()
        head[:, :k] = picked
        order = head.reshape(rows.shape)
    ordered = np.take_along_axis(rows, order, axis=-1)
    nan_count = np.isnan(rows).sum(axis=-1) if rows.dtype.kind == "f" else np.zeros(rows.shape[:-1], int)
    n = rows.shape[-1] - (nan_count if skip_nan else np.zeros_like(nan_count))
    valid = np.maximum(n, 1)
    low_pos, high_pos = (valid - 1) // 2, valid // 2
    low = np.take_along_axis(ordered, low_pos[..., None], -1)[..., 0]
    high = np.take_along_axis(ordered, high_pos[..., None], -1)[..., 0]
    low_index = np.take_along_axis(order, low_pos[..., None], -1)[..., 0]
    high_index = np.take_along_axis(order, high_pos[..., None], -1)[..., 0]
    if mode == "avg":
        value = ((low + high) / 2).astype(rows.dtype) if rows.dtype.kind == "f" else (low + high) / 2
        index = np.stack([low_index, high_index], axis=-1)
    else:
        value, index = low, low_index
    has_nan = nan_count > 0
    all_nan = n == 0
    if rows.dtype.kind == "f":
        if skip_nan:
            value = np.where(all_nan, np.nan, value).astype(value.dtype)
        else:
            # median of a row holding NaN is NaN, indexed at its first NaN
            value = np.where(has_nan, np.nan, value).astype(value.dtype)
            first_nan = np.argmax(np.isnan(rows), axis=-1)
            index = np.where(has_nan[..., None] if mode == "avg" else has_nan,
                             first_nan[..., None] if mode == "avg" else first_nan, index)
    return value, index.astype(np.int64)


@host_kernel("median", "nanmedian")
def median(io: OpScope) -> None:
    x = io.input(slot(io, "X", "x"))
    require(io, x, NUMERIC | {np.dtype("float16")})
    mode = str(io.attr("mode", "avg"))
    if mode not in ("avg", "min"):
        raise io.error(f"mode must be 'avg' or 'min', got {mode!r}")
    axes = normalized_axes(io, x, io.attr("axis", []))
    if x.size == 0:
        raise io.error("the input is empty (Paddle's kernel takes no empty input)")
    rows, _ = rows_along(x, axes)
    value, index = median_rows(rows, io.op.type == "nanmedian", mode)
    out_shape = reduced_shape(x, axes, bool(io.attr("keepdim", False)))
    if mode == "avg" and x.dtype.kind != "f":
        value = value.astype(np.float64 if x.dtype == np.int64 else np.float32)
    io.set_output(slot(io, "Out", "out"), np.asarray(value).reshape(out_shape))
    index_shape = out_shape + ((2,) if mode == "avg" else ())
    index_slot = "MedianIndex" if io.has_output("MedianIndex") else "medians"
    io.set_output(index_slot, index.reshape(index_shape))


@host_kernel("kthvalue")
def kthvalue(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, NUMERIC | {np.dtype("float16")})
    k, axis, keepdim = int(io.attr("k", 1)), int(io.attr("axis", -1)), bool(io.attr("keepdim", False))
    data = x.reshape(1) if x.ndim == 0 else x
    axis = normalized_axes(io, data, axis)[0]
    if not 1 <= k <= data.shape[axis]:
        raise io.error(f"k must be in [1, {data.shape[axis]}] (the size of axis {axis}), got {k}")
    order = np.argsort(data, axis=axis, kind="stable")
    index = np.take(order, [k - 1], axis=axis)
    value = np.take_along_axis(data, index, axis=axis)
    if not keepdim:
        value, index = value.squeeze(axis), index.squeeze(axis)
    shape = x.shape if x.ndim == 0 else value.shape
    io.set_output("Out", value.reshape(shape))
    io.set_output("Indices", index.astype(np.int64).reshape(shape))


@host_kernel("mode")
def mode(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, NUMERIC)
    axis, keepdim = int(io.attr("axis", -1)), bool(io.attr("keepdim", False))
    data = x.reshape(1) if x.ndim == 0 else x
    axis = normalized_axes(io, data, axis)[0]
    rows = np.moveaxis(data, axis, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    values = np.empty(flat.shape[0], dtype=x.dtype)
    indices = np.empty(flat.shape[0], dtype=np.int64)
    for r, row in enumerate(flat):
        order = np.argsort(row, kind="stable")
        best_value, best_index, best_count, count = None, -1, 0, 0
        for pos, i in enumerate(order):
            # a new run starts where the value changes (NaN != NaN, so each NaN is its own run)
            count = 1 if pos == 0 or row[i] != row[order[pos - 1]] else count + 1
            if count > best_count:
                best_value, best_index, best_count = row[i], i, count
        values[r], indices[r] = best_value, best_index
    shape = rows.shape[:-1]
    values, indices = values.reshape(shape), indices.reshape(shape)
    if keepdim and x.ndim:
        values, indices = np.expand_dims(values, axis), np.expand_dims(indices, axis)
    io.set_output("Out", values)
    io.set_output("Indices", indices)


def bound_search(sequence: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """std::lower_bound / std::upper_bound per row, step for step (so NaN compares as the C++ code does)."""
    n = sequence.shape[-1]
    first = np.zeros(values.shape, dtype=np.int64)
    count = np.full(values.shape, n, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        while (count > 0).any():
            step = count // 2
            probe = np.minimum(first + step, max(n - 1, 0))
            item = np.take_along_axis(sequence, probe, axis=-1) if n else np.zeros(values.shape, sequence.dtype)
            go_right = (~(values < item)) if right else (item < values)
            go_right &= count > 0
            first = np.where(go_right, first + step + 1, first)
            count = np.where(go_right, count - step - 1, np.where(count > 0, step, count))
    return first


@host_kernel("searchsorted")
def searchsorted(io: OpScope) -> None:
    sequence, values = io.input("SortedSequence"), io.input("Values")
    require(io, sequence, NUMERIC)
    if sequence.ndim == 0:
        raise io.error("SortedSequence must have at least one dimension")
    if sequence.ndim > 1 and sequence.shape[:-1] != values.shape[:-1]:
        raise io.error(f"SortedSequence {list(sequence.shape)} and Values {list(values.shape)} must match in all "
                       f"but the last dimension")
    # Paddle's kernel answers the sequence length for a NaN or infinite value, without searching
    not_finite = ~np.isfinite(values) if values.dtype.kind == "f" else np.zeros(values.shape, bool)
    vals = values.astype(np.result_type(sequence, values), copy=False)
    seq = sequence.astype(vals.dtype, copy=False)
    if seq.ndim == 1:
        flat = vals.reshape(1, -1)
        out = bound_search(np.broadcast_to(seq, (1, seq.size)), flat, bool(io.attr("right", False)))
    else:
        flat = vals.reshape(-1, vals.shape[-1] if vals.ndim else 1)
        out = bound_search(seq.reshape(-1, seq.shape[-1]), flat, bool(io.attr("right", False)))
    out = np.where(not_finite, sequence.shape[-1], out.reshape(values.shape))
    out_dtype = np.int32 if io.attr("out_int32", False) else np.int64
    io.set_output("Out", out.astype(out_dtype))


@host_kernel("bincount")
def bincount(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, frozenset(np.dtype(t) for t in ("int32", "int64")))
    weights = io.input("Weights", None)
    minlength = io.input("MinLength", None) if io.has_input("MinLength") else io.attr("minlength", 0)
    minlength = int(np.asarray(minlength).reshape(-1)[0]) if np.ndim(minlength) else int(minlength)
    if minlength < 0:
        raise io.error(f"minlength must be non-negative, got {minlength}")
    flat = x.reshape(-1)
    if flat.size and flat.min() < 0:
        raise io.error("the input holds negative values (bincount counts non-negative integers)")
    if weights is None:
        out = np.bincount(flat, minlength=minlength).astype(np.int64)
    else:
        require(io, weights, NUMERIC)
        if weights.shape != x.shape:
            raise io.error(f"Weights {list(weights.shape)} must have the shape of X {list(x.shape)}")
        # float weights keep their dtype; integer weights are summed into float64, as Paddle's kernel does
        out_dtype = weights.dtype if weights.dtype.kind == "f" else np.dtype(np.float64)
        out = np.zeros(max(minlength, int(flat.max()) + 1 if flat.size else 0), dtype=out_dtype)
        np.add.at(out, flat, weights.reshape(-1).astype(out_dtype))
    io.set_output("Out", out)


@host_kernel("histogram")
def histogram(io: OpScope) -> None:
    """Paddle's CPU histogram: `bins` equal bins over [min, max] (min == max: the data's range; still equal:
    widened by 1 each way), values outside skipped, bin (x - min) * bins / (max - min) in X's type with the
    maximum in the last bin; counts int64, or the summed Weight, or a density (count / total / bin width)."""
    x = io.input("X")
    require(io, x, NUMERIC)
    bins = int(io.attr("bins", 100))
    if bins < 1:
        raise io.error(f"bins must be >= 1, got {bins}")
    low, high = x.dtype.type(io.attr("min", 0)), x.dtype.type(io.attr("max", 0))
    if low > high:
        raise io.error(f"max {high} must be >= min {low}")
    flat = x.reshape(-1)
    if low == high and flat.size:
        low, high = flat.min(), flat.max()
    if low == high:
        low, high = low - x.dtype.type(1), high + x.dtype.type(1)
    if not (np.isfinite(low) and np.isfinite(high)):
        raise io.error(f"the range [{low}, {high}] is not finite")
    inside = (flat >= low) & (flat <= high)
    values = flat[inside]
    with np.errstate(invalid="ignore", over="ignore"):
        index = ((values - low) * x.dtype.type(bins) / (high - low)).astype(np.int64)
    index = np.minimum(index, bins - 1)
    weight = io.input("Weight", None) if io.has_input("Weight") else None
    if weight is None:
        out = np.bincount(index, minlength=bins).astype(np.int64)
    else:
        out = np.zeros(bins, weight.dtype)
        np.add.at(out, index, weight.reshape(-1)[inside])
    if io.attr("density", False):
        total = out.sum()
        out = (out / total / ((high - low) / bins)).astype(weight.dtype if weight is not None else np.float32)
    io.set_output("Out", out)


@host_kernel("unique_consecutive")
def unique_consecutive(io: OpScope) -> None:
    x = io.input("X")
    axis = io.attr("axis", [])
    axis = [axis] if isinstance(axis, int) else list(axis or [])
    index_dtype = paddle_dtype(io.attr("dtype", 3), "int64")
    if not axis:
        data = x.reshape(-1)
        change = data[1:] != data[:-1]
        ax = 0
    else:
        ax = axis[0] % max(x.ndim, 1)
        data = x
        moved = np.moveaxis(x, ax, 0).reshape(x.shape[ax], -1)
        change = (moved[1:] != moved[:-1]).any(axis=1)
    n = data.shape[ax] if data.ndim else 1
    starts = np.concatenate([[True], change]) if n else np.zeros(0, bool)
    keep = np.flatnonzero(starts)
    io.set_output("Out", np.take(data, keep, axis=ax))
    io.set_output("Index", (np.cumsum(starts) - 1).astype(index_dtype))
    io.set_output("Counts", np.diff(np.append(keep, n)).astype(index_dtype))


@host_kernel("reduce_amax", "reduce_amin")
def reduce_amax_amin(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, NUMERIC)
    dims = io.attr("dim", [])
    axes = None if io.attr("reduce_all", False) else normalized_axes(io, x, dims)
    axes = tuple(range(x.ndim)) if axes is None else axes
    if x.size == 0 and any(x.shape[a] == 0 for a in axes):
        raise io.error("cannot reduce an empty axis (Paddle's kernel has no identity for max/min)")
    fn = np.max if io.op.type == "reduce_amax" else np.min
    out = fn(x, axis=axes, keepdims=bool(io.attr("keep_dim", False))) if x.ndim else x.copy()
    io.set_output("Out", np.asarray(out, dtype=x.dtype))


def reduce_axes(io: OpScope, rank: int):
    dims = io.attr("dim", [])
    dims = [dims] if isinstance(dims, int) else list(dims)
    if io.attr("reduce_all", False) or not dims or rank == 0:
        return None
    return tuple(sorted({d % rank for d in dims}))


@host_kernel("reduce_prod")
def reduce_prod(io: OpScope) -> None:
    x = io.input("X")
    axes = reduce_axes(io, x.ndim)
    out = np.prod(x, axis=axes, keepdims=bool(io.attr("keep_dim", False)))
    out_dtype = io.attr("out_dtype", -1)
    io.set_output("Out", np.asarray(out).astype(paddle_dtype(out_dtype, x.dtype)))


CUMPROD_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64", "complex64", "complex128"))


def scan(x: np.ndarray, axis: int, step, init, exclusive: bool, reverse: bool) -> np.ndarray:
    """Inclusive or exclusive scan of `step(acc, item)` along `axis` (0-d handled by the caller)."""
    moved = np.moveaxis(x, axis, 0)
    if reverse:
        moved = moved[::-1]
    out = np.empty_like(moved)
    acc = np.full(moved.shape[1:], init, dtype=x.dtype)
    with np.errstate(all="ignore"):
        for i in range(moved.shape[0]):
            if exclusive:
                out[i] = acc
                acc = step(acc, moved[i])
            else:
                acc = step(acc, moved[i])
                out[i] = acc
    if reverse:
        out = out[::-1]
    return np.ascontiguousarray(np.moveaxis(out, 0, axis))


def scan_axis(io: OpScope, x: np.ndarray, axis: int) -> int:
    rank = max(x.ndim, 1)
    if not -rank <= axis < rank:
        raise io.error(f"axis {axis} is out of range for a rank-{x.ndim} input")
    return axis % rank


@host_kernel("cumprod")
def cumprod(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, CUMPROD_DTYPES)
    axis = scan_axis(io, x, int(io.attr("dim", -1)))
    flat = x.reshape(-1) if x.ndim == 0 else x
    out = scan(flat, axis, lambda acc, v: acc * v, 1, bool(io.attr("exclusive", False)),
               bool(io.attr("reverse", False)))
    io.set_output("Out", out.reshape(x.shape))


def log_add_exp(acc: np.ndarray, item: np.ndarray) -> np.ndarray:
    # Paddle's functor: max + log1p(exp(min - max)) with std::max / std::min(acc, item), which return acc when
    # item is NaN, so a NaN item adds log(2) to the running value instead of poisoning it
    hi = np.where(acc < item, item, acc)
    lo = np.where(item < acc, item, acc)
    return (hi + np.log1p(np.exp(lo - hi))).astype(acc.dtype, copy=False)


@host_kernel("logcumsumexp")
def logcumsumexp(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, FLOATS)
    flatten = bool(io.attr("flatten", False))
    data = x.reshape(-1) if flatten or x.ndim == 0 else x
    axis = 0 if flatten else scan_axis(io, x, int(io.attr("axis", -1)))
    # the scan starts from the dtype's lowest finite value, as Paddle's (so exclusive scans start there)
    out = scan(
        data,
        axis,
        log_add_exp,
        np.finfo(x.dtype).min,
        bool(io.attr("exclusive", False)),
        bool(io.attr("reverse", False)),
    )
    io.set_output("Out", out if flatten else out.reshape(x.shape))


# -- argsort ------------------------------------------------------------------------------------------------

_SORT_THRESHOLD = 16  # libstdc++'s _S_threshold
_LONG_ROW = 1 << 16  # top_k_row: longer rows are not sorted whole nor turned into lists
_SCAN_BLOCK = 4096  # positions a heap select scans per numpy comparison (_StdRange._heap_select)


class _StdRange:
    """A list of positions 0 .. n - 1 rearranged step by step as libstdc++'s algorithms rearrange the elements first
    at those positions, `less(i, j)` comparing the elements first at positions i and j: std::sort (introsort, then
    the final insertion sort), std::nth_element (introselect) and std::partial_sort (heap select, then heap sort)."""

    def __init__(self, less, n: int, outranking=None):
        self.less, self.a = less, list(range(n))
        # Optional outranking(j, start, stop): the positions p in [start, stop), in order, with less(p, j), as a
        # numpy array: a heap select over positions nothing has moved yet then skips the ones that cannot enter.
        self.outranking = outranking

    def _unguarded_linear_insert(self, last: int) -> None:
        a, less = self.a, self.less
        value, previous = a[last], last - 1
        while less(value, a[previous]):
            a[last] = a[previous]
            last, previous = previous, previous - 1
        a[last] = value

    def _insertion_sort(self, first: int, last: int) -> None:
        a, less = self.a, self.less
        for i in range(first + 1, last):
            if less(a[i], a[first]):
                value = a[i]
                a[first + 1:i + 1] = a[first:i]
                a[first] = value
            else:
                self._unguarded_linear_insert(i)

    def _move_median_to_first(self, result: int, x: int, y: int, z: int) -> None:
        a, less = self.a, self.less
        if less(a[x], a[y]):
            pick = y if less(a[y], a[z]) else (z if less(a[x], a[z]) else x)
        else:
            pick = x if less(a[x], a[z]) else (z if less(a[y], a[z]) else y)
        a[result], a[pick] = a[pick], a[result]

    def _unguarded_partition(self, first: int, last: int, pivot: int) -> int:
        a, less = self.a, self.less
        while True:
            while less(a[first], a[pivot]):
                first += 1
            last -= 1
            while less(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    def _partition_pivot(self, first: int, last: int) -> int:  # std::__unguarded_partition_pivot
        self._move_median_to_first(first, first + 1, first + (last - first) // 2, last - 1)
        return self._unguarded_partition(first + 1, last, first)

    def _adjust_heap(self, first: int, hole: int, length: int, value: int) -> None:
        a, less = self.a, self.less
        top = child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole, parent = parent, (parent - 1) // 2
        a[first + hole] = value

    def _pop_heap(self, first: int, last: int, result: int) -> None:
        a = self.a
        value = a[result]
        a[result] = a[first]
        self._adjust_heap(first, 0, last - first, value)

    def _heap_select(self, first: int, middle: int, last: int, unmoved_tail: bool = False) -> None:
        """std::__heap_select. `unmoved_tail`: positions middle .. last - 1 still hold themselves, so with
        `outranking` the scan visits only those that outrank the heap's top when their block starts: the top only
        rises, so the others would be skipped one by one anyway, and each visited one is compared again."""
        a, less = self.a, self.less
        length = middle - first
        if length > 1:  # std::__make_heap
            for parent in range((length - 2) // 2, -1, -1):
                self._adjust_heap(first, parent, length, a[first + parent])
        if unmoved_tail and self.outranking is not None:
            for start in range(middle, last, _SCAN_BLOCK):
                for i in self.outranking(a[first], start, min(start + _SCAN_BLOCK, last)).tolist():
                    if less(i, a[first]):
                        self._pop_heap(first, middle, i)
            return
        for i in range(middle, last):
            if less(a[i], a[first]):
                self._pop_heap(first, middle, i)

    def _sort_heap(self, first: int, last: int) -> None:
        while last - first > 1:
            last -= 1
            self._pop_heap(first, last, last)

    def _introsort_loop(self, first: int, last: int, depth: int) -> None:
        while last - first > _SORT_THRESHOLD:
            if depth == 0:
                self.partial_sort(first, last, last)
                return
            depth -= 1
            cut = self._partition_pivot(first, last)
            self._introsort_loop(cut, last, depth)
            last = cut

    def sort(self, first: int, last: int) -> None:
        """std::sort: introsort with depth limit 2 * floor(log2 n), then std::__final_insertion_sort."""
        n = last - first
        if n > 1:
            self._introsort_loop(first, last, 2 * (n.bit_length() - 1))
            if n > _SORT_THRESHOLD:
                self._insertion_sort(first, first + _SORT_THRESHOLD)
                for i in range(first + _SORT_THRESHOLD, last):
                    self._unguarded_linear_insert(i)
            else:
                self._insertion_sort(first, last)

    def partial_sort(self, first: int, middle: int, last: int, unmoved: bool = False) -> None:
        """std::partial_sort; `unmoved`: nothing has moved the positions of [first, last) yet (_heap_select)."""
        self._heap_select(first, middle, last, unmoved)
        self._sort_heap(first, middle)

    def nth_element(self, first: int, nth: int, last: int) -> None:
        """std::nth_element: introselect with depth limit 2 * floor(log2 n), heap select past it."""
        if first == last or nth == last:
            return
        depth = 2 * ((last - first).bit_length() - 1)
        while last - first > 3:
            if depth == 0:
                self._heap_select(first, nth + 1, last)
                self.a[first], self.a[nth] = self.a[nth], self.a[first]
                return
            depth -= 1
            cut = self._partition_pivot(first, last)
            if cut <= nth:
                first = cut
            else:
                last = cut
        self._insertion_sort(first, last)


def std_sort_order(less, n: int) -> list:
    """The positions 0 .. n - 1 in the order libstdc++'s std::sort leaves them, `less(i, j)` comparing the elements
    first at positions i and j."""
    order = _StdRange(less, n)
    order.sort(0, n)
    return order.a


def paddle_top_k_order(less, n: int, k: int, sorted_: bool, outranking=None) -> list:
    """The positions Paddle 3.3.1's CPU top_k picks, in its order, `less` being its comparator ("comes first"):
    std::partial_sort of the first k when k * 64 < n; otherwise std::nth_element at k - 1 and, when `sorted_`,
    std::sort of the k - 1 before it (the k-th is in place already). `outranking`: _StdRange's, which makes the
    partial sort of a long row fast."""
    order = _StdRange(less, n, outranking)
    if k * 64 < n:
        order.partial_sort(0, k, n, unmoved=True)
    else:
        order.nth_element(0, k - 1, n)
        if sorted_:
            order.sort(0, k - 1)
    return order.a[:k]


def argsort_row(row: np.ndarray, descending: bool, stable: bool) -> np.ndarray:
    """Paddle's argsort of one row (module docstring)."""
    keys = row.tolist()
    nan = [k != k for k in keys]  # float NaN; never true for integers and bools

    def less(i: int, j: int) -> bool:
        if descending:
            return (nan[i] and not nan[j]) or keys[i] > keys[j]
        return (not nan[i] and nan[j]) or keys[i] < keys[j]

    if not any(nan) and len(set(keys)) == len(keys):  # no ties: the one sorted order
        order = np.argsort(row, kind="stable")
        return order[::-1].copy() if descending else order
    if stable:
        return np.asarray(sorted(range(len(keys)), key=functools.cmp_to_key(
            lambda i, j: -1 if less(i, j) else (1 if less(j, i) else 0))), np.int64)
    return np.asarray(std_sort_order(less, len(keys)), np.int64)


@host_kernel("argsort")
def argsort(io: OpScope) -> None:
    x = io.input("X")
    if x.ndim == 0:
        io.set_output("Out", x.copy())
        io.set_output("Indices", np.zeros((), np.int64))
        return
    axis = int(io.attr("axis", -1))
    if not -x.ndim <= axis < x.ndim:
        raise io.error(f"axis {axis} is out of range for a rank-{x.ndim} input")
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, moved.shape[-1])
    descending, stable = bool(io.attr("descending", False)), bool(io.attr("stable", False))
    indices = np.stack([argsort_row(row, descending, stable) for row in rows]) if len(rows) else \
        np.zeros(rows.shape, np.int64)
    indices = np.moveaxis(indices.reshape(moved.shape).astype(np.int64), -1, axis)
    io.set_output("Out", np.take_along_axis(x, indices, axis=axis))
    io.set_output("Indices", indices)


def top_k_row(row: np.ndarray, k: int, largest: bool, sorted_: bool) -> np.ndarray:
    """Paddle's top_k indices of one row (paddle_top_k_order). When the k picked keys are distinct, hold no NaN and
    the (k+1)-th is below them, and the result is sorted, there is one answer and numpy gives it; otherwise the
    libstdc++ steps are replayed, so tied keys come out in Paddle's order."""
    nan_row = np.isnan(row) if row.dtype.kind == "f" else np.zeros(row.shape, bool)
    n = row.size
    if sorted_ and not nan_row.any():
        if n <= _LONG_ROW or k + 1 >= n:
            best = np.arange(n)
        else:  # the k + 1 best of a long row (argpartition: it is not sorted whole)
            best = np.argpartition(row, n - k - 1)[n - k - 1:] if largest else np.argpartition(row, k)[:k + 1]
        order = best[np.argsort(row[best], kind="stable")]
        order = order[::-1] if largest else order
        picked = row[order[:k + 1]]
        if np.unique(picked).size == picked.size:
            return order[:k].astype(np.int64)
    # Python lists compare fastest; a long row stays numpy (converting it costs more than the few comparisons its
    # vectorised heap select makes).
    keys, nan = (row.tolist(), nan_row.tolist()) if n <= _LONG_ROW else (row, nan_row)

    def less(i: int, j: int) -> bool:
        if largest:
            return (nan[i] and not nan[j]) or keys[i] > keys[j]
        return (not nan[i] and nan[j]) or keys[i] < keys[j]

    def outranking(j: int, start: int, stop: int) -> np.ndarray:
        # less(p, j) for every p in [start, stop), vectorised: NaN comes first when largest, last otherwise.
        part = row[start:stop]
        if largest:
            mask = np.zeros(part.shape, bool) if nan[j] else (nan_row[start:stop] | (part > keys[j]))
        else:
            mask = ~nan_row[start:stop] if nan[j] else (part < keys[j])
        return np.flatnonzero(mask) + start

    return np.asarray(paddle_top_k_order(less, len(keys), k, sorted_, outranking), np.int64)


@host_kernel("top_k", "top_k_v2")
def top_k(io: OpScope) -> None:
    """top_k (the last axis, largest first, sorted) and top_k_v2 (`axis`, `largest`, `sorted`); `K`, when given,
    overrides the `k` attribute. Ties come out in Paddle's order (top_k_row)."""
    x = io.input("X")
    k = int(np.asarray(io.input("K")).reshape(-1)[0]) if io.has_input("K") else int(io.attr("k", 1))
    if k < 1:
        raise io.error(f"k must be at least 1, got {k}")
    if x.dtype.kind not in "fiu":
        raise io.error(f"top_k takes float and integer inputs, got {x.dtype}")
    if x.ndim == 0:
        if k != 1:
            raise io.error(f"a 0-d input has 1 element, k is {k}")
        io.set_output("Out", x.copy())
        io.set_output("Indices", np.zeros((), np.int64))
        return
    axis = int(io.attr("axis", -1)) if io.op.type == "top_k_v2" else -1
    if not -x.ndim <= axis < x.ndim:
        raise io.error(f"axis {axis} is out of range for a rank-{x.ndim} input")
    moved = np.moveaxis(x, axis, -1)
    if k > moved.shape[-1]:
        raise io.error(f"the axis has {moved.shape[-1]} elements, k is {k}")
    largest = bool(io.attr("largest", True)) if io.op.type == "top_k_v2" else True
    sorted_ = bool(io.attr("sorted", True)) if io.op.type == "top_k_v2" else True
    rows = moved.reshape(-1, moved.shape[-1])
    indices = (np.stack([top_k_row(row, k, largest, sorted_) for row in rows]) if len(rows)
               else np.zeros((0, k), np.int64))
    indices = np.moveaxis(indices.reshape(moved.shape[:-1] + (k,)), -1, axis)
    io.set_output("Out", np.take_along_axis(x, indices, axis=axis))
    io.set_output("Indices", indices)


# -- moments, NaN-skipping and shape-matching sums ---------------------------------------------------------
def distinct_axes(io: OpScope, x: np.ndarray, axis) -> tuple:
    """`axis` (an int or a list; empty: every axis) as sorted non-negative axes, rejecting what Paddle's reduce
    infermeta rejects: an axis out of [-rank, rank) and an axis named twice. A 0-d input takes 0 and -1."""
    axis = [axis] if isinstance(axis, int) else list(axis or [])
    rank = max(x.ndim, 1)
    for a in axis:
        if not -rank <= a < rank:
            raise io.error(f"axis {a} is out of range for a rank-{x.ndim} input (it takes [-{rank}, {rank}))")
    normalized = [a % rank for a in axis]
    if len(set(normalized)) != len(normalized):
        raise io.error(f"axis {axis} names a dimension twice")
    if not axis or x.ndim == 0:
        return tuple(range(x.ndim))
    return tuple(sorted(normalized))


def variance_along(io: OpScope, correction: float) -> np.ndarray:
    """The variance of `x` along the op's `axis` with divisor N - correction (module docstring)."""
    x = io.input(slot(io, "X", "x"))
    require(io, x, FLOATS)
    axes = distinct_axes(io, x, io.attr("axis", []))
    keepdim = bool(io.attr("keepdim", False))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    out_shape = reduced_shape(x, axes, keepdim)
    if count == 0:  # Paddle's mean of nothing is NaN, and so is every moment around it
        return np.full(out_shape, np.nan, dtype=x.dtype)
    data = x.astype(np.float64)
    divisor = count - correction
    with np.errstate(all="ignore"):
        centred = data - data.mean(axis=axes, keepdims=True)
        out = (centred * centred).sum(axis=axes) / divisor
    if divisor < 0:  # a correction past N: Paddle answers +0 (and NaN stays NaN)
        out = np.where(np.isnan(out), out, 0.0)
    return out.astype(x.dtype).reshape(out_shape)


def correction_of(io: OpScope) -> float:
    # Paddle's kernel divides by N - correction and ignores `unbiased` when `correction` is set (it always is in
    # a 3.x program); a program without it falls back to unbiased's N - 1 or N
    correction = io.attr("correction", None)
    if correction is None:
        return 1.0 if io.attr("unbiased", True) else 0.0
    return float(correction)


@host_kernel("var")
def var(io: OpScope) -> None:
    io.set_output(slot(io, "Out", "out"), variance_along(io, correction_of(io)))


@host_kernel("std")
def std(io: OpScope) -> None:
    io.set_output(slot(io, "Out", "out"), np.sqrt(variance_along(io, correction_of(io))))


@host_kernel("variance")
def variance(io: OpScope) -> None:
    io.set_output(slot(io, "Out", "out"), variance_along(io, 0.0))


SUM_DTYPES = frozenset(np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                                             "float32", "float64"))


def sum_dtype(x: np.ndarray, code=None) -> np.dtype:
    """The dtype Paddle's sum gives: the `dtype` attribute, else int64 for bool and int32 and x's own otherwise."""
    if code is not None and int(code) >= 0:
        return paddle_dtype(code)
    return np.dtype(np.int64) if x.dtype in (np.dtype(bool), np.dtype(np.int32)) else x.dtype


def summed(x: np.ndarray, axes: tuple, out_dtype: np.dtype, keepdims: bool) -> np.ndarray:
    """x cast to `out_dtype`, then summed over `axes` in it (float16 accumulates in float32, as Paddle's does)."""
    accumulate = np.dtype(np.float32) if out_dtype == np.float16 else out_dtype
    with np.errstate(all="ignore"):  # integer sums wrap and float casts saturate, as in Paddle's kernel
        cast = x.astype(out_dtype).astype(accumulate, copy=False)
        return np.asarray(cast.sum(axis=axes, dtype=accumulate, keepdims=keepdims)).astype(out_dtype)


@host_kernel("nansum")
def nansum(io: OpScope) -> None:
    x = io.input(slot(io, "X", "x"))
    require(io, x, SUM_DTYPES)
    axes = distinct_axes(io, x, io.attr("axis", []))
    out_dtype = sum_dtype(x, io.attr("dtype", -1))
    # NaN becomes 0 before the cast to `dtype`, so an integer dtype never sees one
    values = np.where(np.isnan(x), x.dtype.type(0), x) if x.dtype.kind == "f" else x
    keepdim = bool(io.attr("keepdim", False))
    out = summed(values, axes, out_dtype, keepdim)
    io.set_output(slot(io, "Out", "out"), out.reshape(reduced_shape(x, axes, keepdim)))


@host_kernel("reduce_as")
def reduce_as(io: OpScope) -> None:
    """x summed to target's shape: x's leading dimensions beyond target's rank, and the ones where target has 1,
    are summed away (the reverse of broadcasting target to x); the dtype is sum's (int64 for bool and int32) when
    something is summed."""
    x, target = io.input(slot(io, "X", "x")), io.input("target")
    require(io, x, SUM_DTYPES | {np.dtype("complex64"), np.dtype("complex128")})
    lead = x.ndim - target.ndim
    if lead < 0 or any(t not in (n, 1) for n, t in zip(x.shape[lead:], target.shape)):
        raise io.error(f"x {list(x.shape)} does not broadcast from target {list(target.shape)} (each of target's "
                       f"dimensions must be x's trailing one or 1)")
    axes = tuple(range(lead)) + tuple(lead + d for d, t in enumerate(target.shape) if t == 1 and x.shape[lead + d] != 1)
    # nothing to sum (x has target's shape): Paddle copies x, keeping its dtype even where a sum would widen it
    out = summed(x, axes, sum_dtype(x), False) if axes else x.copy()
    io.set_output(slot(io, "Out", "out"), out.reshape(target.shape))


# -- running extremes ---------------------------------------------------------------------------------------
INDEX_DTYPES = frozenset(np.dtype(t) for t in ("int32", "int64"))


@host_kernel("cummax", "cummin")
def cummax_cummin(io: OpScope) -> None:
    """Paddle's scan: an element replaces the running extreme when it is NaN, or when the extreme is not NaN and the
    element is >= it (cummax; <= for cummin), so ties take the later index and NaN, once met, stays (each further
    NaN taking its index)."""
    x = io.input(slot(io, "X", "x"))
    require(io, x, NUMERIC)
    index_dtype = paddle_dtype(io.attr("dtype", 3), "int64")
    if index_dtype not in INDEX_DTYPES:
        raise io.error(f"dtype of the indices must be int32 or int64, got {index_dtype}")
    axis = scan_axis(io, x, int(io.attr("axis", -1)))
    moved = np.moveaxis(x.reshape(1) if x.ndim == 0 else x, axis, 0)
    values = np.empty_like(moved)
    indices = np.zeros(moved.shape, dtype=index_dtype)
    replaces = np.greater_equal if io.op.type == "cummax" else np.less_equal
    nan = np.isnan if x.dtype.kind == "f" else (lambda a: np.zeros(a.shape, bool))
    if moved.shape[0]:
        best = moved[0].copy()
        best_index = np.zeros(moved.shape[1:], dtype=index_dtype)
        with np.errstate(invalid="ignore"):
            for i, item in enumerate(moved):
                take = nan(item) | (~nan(best) & replaces(item, best))
                best = np.where(take, item, best)
                best_index = np.where(take, index_dtype.type(i), best_index)
                values[i], indices[i] = best, best_index
    io.set_output(slot(io, "Out", "out"), np.moveaxis(values, 0, axis).reshape(x.shape))
    io.set_output("indices", np.moveaxis(indices, 0, axis).reshape(x.shape))


# -- whole-tensor comparisons -------------------------------------------------------------------------------
EQUAL_ALL_DTYPES = frozenset(np.dtype(t) for t in ("bool", "int32", "int64", "float32", "float64"))


@host_kernel("equal_all")
def equal_all(io: OpScope) -> None:
    """True when X and Y have one shape and equal elements (no broadcasting; NaN equals nothing; 0-d)."""
    x, y = io.input("X"), io.input("Y")
    require(io, x, EQUAL_ALL_DTYPES)
    if y.dtype != x.dtype:
        raise io.error(f"X and Y must have one dtype, got {x.dtype} and {y.dtype}")
    io.set_output("Out", np.array(x.shape == y.shape and bool(np.all(x == y))))


@host_kernel("allclose")
def allclose(io: OpScope) -> None:
    x, y = close_operands(io, EQUAL_ALL_DTYPES)
    rtol, atol = close_tolerances(io)
    io.set_output("Out", np.array(bool(np.all(close_mask(x, y, rtol, atol, bool(io.attr("equal_nan", False)))))))
