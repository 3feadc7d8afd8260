"""Indexing ops with data-dependent shapes or scattered writes: gather_nd, scatter, scatter_nd_add,
where_index, masked_select, unique, take_along_axis, index_sample (set_value: k_index_update).
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, paddle_dtype


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
