"""Slicing, joining, splitting, gathering and padding: SLICE, CONCAT, STACK, SPLIT, UNSTACK, MESHGRID,
GATHER, ROLL and PAD; signatures, shape inference and numpy references.

The dim rules here (`slice_dims`, `split_sections`, ...) take plain ints, treat NNADAPTER_UNKNOWN as
"not known yet", and serve prepare, the references and the drivers alike. Like the reshaping operations
these carry INT32/INT64/BOOL8 shape tensors as well as data. Results are fresh C-ordered arrays
(`.copy()`, not np.ascontiguousarray, which turns a 0-d result into shape [1]).

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`); the dim rules above, which
drivers share. Imports only `registry`, `common`, the standard's codes and types and `errors`: never the model, the
reference, the runtime or anything above the ground.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, PadMode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    all_known,
    check_same_precision,
    const_int,
    const_ints,
    known,
    map_shapes,
    normalize_axis,
    operand_length,
    operation_error,
    param_int,
    param_ints,
    result_type,
    scalar_param,
    unknown_dims,
)
from nnadapter_bridge.nnadapter.operations.registry import (
    DATA_MOVEMENT,
    FLOATS_Q8,
    INT32,
    INT32_64,
    Slot,
    operation,
    reference,
)
from nnadapter_bridge.nnadapter.types import OperandType, Operation

_PAD_INPUT = FLOATS_Q8 | {Precision.INT32, Precision.INT64}


# -- dim rules ------------------------------------------------------------------------------------------


def _combine_dynamic(types: Sequence[OperandType], fn) -> tuple:
    """Dynamic shapes of a many-input operation: shape k of the output is fn(shape k of every input).

    An input without dynamic shapes contributes its static dims to every k; inputs that disagree on the
    number of dynamic shapes give none."""
    counts = {len(t.dynamic_dims) for t in types if t.dynamic_dims}
    if len(counts) != 1:
        return ()
    (count,) = counts
    return tuple(tuple(fn([t.dynamic_dims[k] if t.dynamic_dims else t.dims for t in types]))
                 for k in range(count))


def slice_dims(dims: Sequence[int], axes: Sequence[int], starts: Sequence[int], ends: Sequence[int],
               steps: Sequence[int], op: Operation | None = None) -> tuple:
    """Python slice semantics per axis (negative starts/ends count from the end, out of range clamps)."""
    if not (len(axes) == len(starts) == len(ends) == len(steps)):
        raise operation_error(op, f"axes {list(axes)}, starts {list(starts)}, ends {list(ends)} and steps "
                              f"{list(steps)} must have the same length")
    out = list(dims)
    for a, s, e, st in zip(axes, starts, ends, steps):
        axis = normalize_axis(int(a), len(dims), op, "axis")
        if int(st) == 0:
            raise operation_error(op, "a step of 0 is not allowed")
        if known(dims[axis]):
            out[axis] = len(range(*slice(int(s), int(e), int(st)).indices(dims[axis])))
        else:
            out[axis] = UNKNOWN
    return tuple(out)


def slice_axes(axes: Sequence[int] | None, n: int) -> list:
    """SLICE's axes operand, or [0, 1, ..., n-1] when it is null."""
    return list(range(n)) if axes is None else [int(a) for a in axes]


def split_sections(dim: int, split: Sequence[int], op: Operation | None = None) -> list:
    """SPLIT's sizes with one -1 inferred when the axis size is known."""
    sizes = [int(s) for s in split]
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise operation_error(op, f"split {sizes}: at most one -1 and no other negative size")
    if known(dim):
        if -1 in sizes:
            rest = sum(s for s in sizes if s != -1)
            if rest > dim:
                raise operation_error(op, f"split {sizes} exceeds the axis size {dim}")
            sizes[sizes.index(-1)] = dim - rest
        elif sum(sizes) != dim:
            raise operation_error(op, f"split {sizes} does not sum to the axis size {dim}")
    else:
        sizes = [UNKNOWN if s == -1 else s for s in sizes]
    return sizes


# -- signatures and shape inference ------------------------------------------------------------------


@operation(T.SLICE, inputs=[Slot("input", DATA_MOVEMENT), Slot("axes", INT32, optional=True), Slot("starts", INT32_64),
                            Slot("ends", INT32_64), Slot("steps", INT32_64, optional=True)],
           outputs=[Slot("output")])
def prepare_slice(op):
    """input[starts:ends:steps] along `axes` (null: the first len(starts) axes), Python slice rules."""
    t = op.inputs[0].type
    has_axes = op.inputs[1] is not None
    axes = const_ints(op, 1) if has_axes else None
    starts, ends = const_ints(op, 2), const_ints(op, 3)
    has_steps = len(op.inputs) > 4 and op.inputs[4] is not None
    steps = const_ints(op, 4) if has_steps else None
    if has_axes and axes is None:
        return [result_type(t, unknown_dims(t.rank))]
    if starts is None or ends is None or (has_steps and steps is None):
        # Only the sliced axes become unknown.
        n = len(axes) if axes is not None else operand_length(op.inputs[2])
        if n == UNKNOWN:
            return [result_type(t, unknown_dims(t.rank))]
        dims = list(t.dims)
        for a in slice_axes(axes, n):
            dims[normalize_axis(a, t.rank, op)] = UNKNOWN
        return [result_type(t, dims)]
    axes = slice_axes(axes, len(starts))
    steps = steps if steps is not None else [1] * len(starts)
    return [map_shapes(t, lambda d: slice_dims(d, axes, starts, ends, steps, op))]


@operation(T.CONCAT, inputs=[Slot("input", DATA_MOVEMENT, variadic=True), Slot("axis", INT32)],
           outputs=[Slot("output")])
def prepare_concat(op):
    """Join the inputs along `axis`; every other dim must agree."""
    types = [o.type for o in op.inputs[:-1]]
    check_same_precision(op, types)
    rank = types[0].rank
    if rank == 0:
        raise operation_error(op, "0-d inputs have no axis to join along (reshape them to [1] first)")
    axis = normalize_axis(int(scalar_param(op, len(op.inputs) - 1, "axis")), rank, op)

    def join(shapes):
        for s in shapes:
            if len(s) != rank:
                raise operation_error(op, f"inputs have different ranks: {[list(x) for x in shapes]}")
        out = []
        for i in range(rank):
            column = [s[i] for s in shapes]
            if i == axis:
                out.append(sum(column) if all_known(column) else UNKNOWN)
            else:
                known_values = {d for d in column if known(d)}
                if len(known_values) > 1:
                    raise operation_error(op, f"inputs differ on axis {i}: {[list(x) for x in shapes]}")
                out.append(known_values.pop() if known_values else UNKNOWN)
        return out

    dims = join([t.dims for t in types])
    return [result_type(types[0], dims, dynamic_dims=_combine_dynamic(types, join))]


@operation(T.STACK, inputs=[Slot("input", DATA_MOVEMENT, variadic=True), Slot("axis", INT32)], outputs=[Slot("output")])
def prepare_stack(op):
    """Stack same-shape inputs along a new axis in [-(R+1), R+1)."""
    types = [o.type for o in op.inputs[:-1]]
    check_same_precision(op, types)
    rank = types[0].rank
    axis = normalize_axis(int(scalar_param(op, len(op.inputs) - 1, "axis")), rank + 1, op)
    n = len(types)

    def stack(shapes):
        for s in shapes:
            if len(s) != rank:
                raise operation_error(op, f"inputs have different ranks: {[list(x) for x in shapes]}")
        merged = []
        for i in range(rank):
            known_values = {s[i] for s in shapes if known(s[i])}
            if len(known_values) > 1:
                raise operation_error(op, f"inputs differ on axis {i}: {[list(x) for x in shapes]}")
            merged.append(known_values.pop() if known_values else UNKNOWN)
        return merged[:axis] + [n] + merged[axis:]

    dims = stack([t.dims for t in types])
    return [result_type(types[0], dims, dynamic_dims=_combine_dynamic(types, stack))]


@operation(T.SPLIT, inputs=[Slot("input", DATA_MOVEMENT), Slot("axis", INT32), Slot("split", INT32)],
           outputs=[Slot("output", variadic=True)])
def prepare_split(op):
    """Cut the input along `axis` into len(split) parts of the given sizes (one -1 inferred)."""
    t = op.inputs[0].type
    axis = normalize_axis(int(scalar_param(op, 1, "axis")), t.rank, op)
    split = const_ints(op, 2)
    if split is None:
        raise operation_error(op, "split must be a constant operand")
    if len(split) != len(op.outputs):
        raise operation_error(op, f"split {split} has {len(split)} parts but there are {len(op.outputs)} outputs")
    split_sections(t.dims[axis], split, op)  # validates the sizes against a known axis
    results = []
    for k in range(len(split)):
        def part(d, k=k):
            d = list(d)
            d[axis] = split_sections(d[axis], split, op)[k]
            return d
        results.append(map_shapes(t, part))
    return results


@operation(T.UNSTACK, inputs=[Slot("input", DATA_MOVEMENT), Slot("axis", INT32), Slot("num", INT32)],
           outputs=[Slot("output", variadic=True)])
def prepare_unstack(op):
    """One rank R-1 output per slice along `axis` (num of them)."""
    t = op.inputs[0].type
    axis = normalize_axis(int(scalar_param(op, 1, "axis")), t.rank, op)
    num = int(scalar_param(op, 2, "num"))
    if num != len(op.outputs) or (known(t.dims[axis]) and t.dims[axis] != num):
        raise operation_error(op, f"num={num}, axis {axis} has size {t.dims[axis]}, {len(op.outputs)} outputs: "
                              "all three must agree")
    return [map_shapes(t, lambda d: list(d[:axis]) + list(d[axis + 1:])) for _ in op.outputs]


@operation(T.MESHGRID, inputs=[Slot("input", DATA_MOVEMENT, variadic=True)], outputs=[Slot("output", variadic=True)])
def prepare_meshgrid(op):
    """n 1-D inputs of sizes d0..dn-1 give n grids of dims [d0, ..., dn-1] ("ij" indexing)."""
    types = [o.type for o in op.inputs]
    check_same_precision(op, types)
    if len(op.outputs) != len(types):
        raise operation_error(op, f"{len(types)} inputs need {len(types)} outputs, got {len(op.outputs)}")
    for i, t in enumerate(types):
        if t.rank != 1:
            raise operation_error(op, f"input {i} must be 1-D, got dims {list(t.dims)}")
    grid = lambda shapes: [s[0] for s in shapes]  # noqa: E731
    dims = grid([t.dims for t in types])
    dynamic = _combine_dynamic(types, grid)
    return [result_type(t, dims, dynamic_dims=dynamic) for t in types]


@operation(T.GATHER, inputs=[Slot("input", DATA_MOVEMENT), Slot("indices", INT32_64), Slot("axis", INT32)],
           outputs=[Slot("output")])
def prepare_gather(op):
    """Entries of `input` along `axis` at `indices` (any rank Q): output rank Q + R - 1."""
    t, index_type = op.inputs[0].type, op.inputs[1].type
    axis = normalize_axis(int(scalar_param(op, 2, "axis")), t.rank, op)
    index_dims = tuple(index_type.dims)
    return [map_shapes(t, lambda d: list(d[:axis]) + list(index_dims) + list(d[axis + 1:]))]


@operation(T.ROLL, inputs=[Slot("input", DATA_MOVEMENT), Slot("shifts", INT32_64), Slot("axes", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_roll(op):
    """Rotate elements along `axes` by `shifts`; with no axes the flattened tensor rolls."""
    t = op.inputs[0].type
    shifts = const_ints(op, 1)
    axes = const_ints(op, 2)
    if axes and shifts is not None and len(shifts) != len(axes):
        raise operation_error(op, f"shifts {shifts} and axes {axes} must have the same length")
    for a in axes or ():
        normalize_axis(a, t.rank, op)
    return [result_type(t)]


@operation(T.PAD,
           inputs=[Slot("input", _PAD_INPUT), Slot("pads", INT32), Slot("mode", INT32),
                   Slot("value", _PAD_INPUT, optional=True)],
           outputs=[Slot("output")])
def prepare_pad(op):
    """Pad (or, for negative amounts, crop) every axis by pads = [x0_begin, x0_end, x1_begin, ...]."""
    mode = const_int(op, 2)
    if mode is not None and mode not in (PadMode.CONSTANT, PadMode.REFLECT, PadMode.REPLICATE, PadMode.EDGE):
        raise OperationError(f"{op.type.name}: mode must be CONSTANT, REFLECT, REPLICATE or EDGE, got {mode}")
    rank = op.inputs[0].type.rank
    pads = const_ints(op, 1)
    if pads is not None and len(pads) != 2 * rank:
        raise OperationError(f"{op.type.name}: pads must hold 2 * rank = {2 * rank} values, got {len(pads)}")

    def dims_fn(dims):
        if pads is None:
            return (UNKNOWN,) * len(dims)
        return tuple(d + pads[2 * i] + pads[2 * i + 1] if known(d) else UNKNOWN for i, d in enumerate(dims))

    return [map_shapes(op.inputs[0].type, dims_fn)]


# -- references ------------------------------------------------------------------------------------------


@reference(T.SLICE)
def slice_(op, inputs):
    x, axes, starts, ends = inputs[:4]
    steps = inputs[4] if len(inputs) > 4 else None
    starts, ends = param_ints(starts), param_ints(ends)
    axes = slice_axes(None if axes is None else param_ints(axes), len(starts))
    steps = [1] * len(starts) if steps is None else param_ints(steps)
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise OperationError(f"{op.label()}: a step of 0 is not allowed")
        index[normalize_axis(a, x.ndim, op)] = slice(s, e, st)
    return [x[tuple(index)].copy()]


@reference(T.CONCAT)
def concat(op, inputs):
    *parts, axis = inputs
    return [np.concatenate(parts, axis=normalize_axis(param_int(axis), parts[0].ndim, op))]


@reference(T.STACK)
def stack(op, inputs):
    *parts, axis = inputs
    return [np.stack(parts, axis=normalize_axis(param_int(axis), parts[0].ndim + 1, op))]


@reference(T.SPLIT)
def split(op, inputs):
    x, axis, sections = inputs
    axis = normalize_axis(param_int(axis), x.ndim, op)
    sizes = split_sections(x.shape[axis], param_ints(sections), op)
    bounds = np.cumsum(sizes)[:-1]
    return [part.copy() for part in np.split(x, bounds, axis=axis)]


@reference(T.UNSTACK)
def unstack(op, inputs):
    x, axis, _num = inputs
    axis = normalize_axis(param_int(axis), x.ndim, op)
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


@reference(T.MESHGRID)
def meshgrid(op, inputs):
    return [g.copy() for g in np.meshgrid(*inputs, indexing="ij")]


@reference(T.GATHER)
def gather(op, inputs):
    x, indices, axis = inputs
    axis = normalize_axis(param_int(axis), x.ndim, op)
    n = x.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise OperationError(f"{op.label()}: indices must lie in [{-n}, {n}) for axis {axis} of size {n}")
    return [np.take(x, indices, axis=axis)]


@reference(T.ROLL)
def roll(op, inputs):
    x, shifts = inputs[:2]
    axes = param_ints(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else []
    shifts = param_ints(shifts)
    if not axes:
        # No axes: roll the flattened tensor, then restore the shape.
        return [np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)]
    return [np.roll(x, shifts, axis=tuple(normalize_axis(a, x.ndim, op) for a in axes))]


_NUMPY_PAD_MODES: dict[PadMode, Literal["constant", "reflect", "edge"]] = {
    PadMode.CONSTANT: "constant", PadMode.REFLECT: "reflect", PadMode.REPLICATE: "edge", PadMode.EDGE: "edge"}


@reference(T.PAD)
def pad(op, inputs):
    x, pads = inputs[0], param_ints(inputs[1])
    mode = PadMode(param_int(inputs[2]))
    value = inputs[3] if len(inputs) > 3 else None
    # Negative amounts crop first; the rest is numpy's pad.
    crop = tuple(slice(max(-pads[2 * i], 0), x.shape[i] - max(-pads[2 * i + 1], 0)) for i in range(x.ndim))
    x = x[crop]
    widths = [(max(pads[2 * i], 0), max(pads[2 * i + 1], 0)) for i in range(x.ndim)]
    if mode == PadMode.CONSTANT:
        fill = 0 if value is None else np.asarray(value).reshape(-1)[0]
        return [np.pad(x, widths, mode="constant", constant_values=np.asarray(fill).astype(x.dtype))]
    return [np.pad(x, widths, mode=_NUMPY_PAD_MODES[mode])]
