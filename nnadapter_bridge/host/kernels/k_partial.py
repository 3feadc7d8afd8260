"""Column-slice combinations of 2-D tensors: partial_concat and partial_sum (each input's columns
[start_index, start_index + length) concatenated, or summed; length -1 means to the last column;
partial_concat counts a negative start_index from the end)."""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


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
