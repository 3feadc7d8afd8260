"""The reshaping operations RESHAPE, FLATTEN, SQUEEZE, UNSQUEEZE, TRANSPOSE and CHANNEL_SHUFFLE, and the
broadcasting ones TILE and EXPAND; signatures, shape inference and numpy references.

The dim rules here (`reshape_dims`, `squeeze_axes`, ...) take plain ints, treat NNADAPTER_UNKNOWN as
"not known yet", and serve prepare, the references and the drivers alike, so all agree on one rule.
Precisions are wider than the spec appendix: shape subgraphs (shape -> slice -> concat -> reshape) carry
INT32/INT64 tensors through the same data-movement operations, so they accept INT32, INT64 and BOOL8 too.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`); the dim rules above, which
drivers share. Imports only `registry`, `common`, the standard's codes and types and `errors`: never the model, the
reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    all_known,
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
from nnadapter_bridge.nnadapter.operations.registry import DATA_MOVEMENT, INT32, INT32_64, Slot, operation, reference
from nnadapter_bridge.nnadapter.types import Operation

# -- dim rules ------------------------------------------------------------------------------------------


def _prod(dims: Sequence[int]) -> int:
    return math.prod(int(d) for d in dims)


def reshape_dims(in_dims: Sequence[int], shape: Sequence[int], op: Operation | None = None) -> tuple:
    """RESHAPE's rule: 0 copies the input dim at that position, one -1 is inferred from the element count."""
    out = []
    inferred = None
    for i, s in enumerate(shape):
        s = int(s)
        if s == 0:
            if i >= len(in_dims):
                raise operation_error(op, f"shape {list(shape)}: 0 at position {i} has no input dim to copy "
                                          f"({list(in_dims)})")
            out.append(in_dims[i])
        elif s == -1:
            if inferred is not None:
                raise operation_error(op, f"shape {list(shape)} has more than one -1")
            inferred = i
            out.append(UNKNOWN)
        elif s > 0:
            out.append(s)
        else:
            raise operation_error(op, f"shape {list(shape)} has the invalid value {s}")
    # An unknown input dim copied by 0 sits on both sides of the element count and cancels out.
    copied = {i for i, s in enumerate(shape) if int(s) == 0 and not known(in_dims[i])}
    in_rest = [d for i, d in enumerate(in_dims) if i not in copied]
    out_rest = [d for i, d in enumerate(out) if i != inferred and i not in copied]
    if all_known(in_rest) and all_known(out_rest):
        total, rest = _prod(in_rest), _prod(out_rest)
        if inferred is not None:
            if rest == 0 or total % rest:
                raise operation_error(op, f"cannot reshape {list(in_dims)} to {list(shape)}: "
                                          "element count does not divide")
            out[inferred] = total // rest
        elif total != rest:
            raise operation_error(op, f"cannot reshape {list(in_dims)} to {list(shape)}: element counts differ")
    return tuple(out)


def flatten_dims(dims: Sequence[int], start: int, end: int, op: Operation | None = None) -> tuple:
    rank = len(dims)
    if rank == 0:
        return (1,)
    s = normalize_axis(start, rank, op, "start_axis")
    e = normalize_axis(end, rank, op, "end_axis")
    if s > e:
        raise operation_error(op, f"start_axis {start} is after end_axis {end} for rank {rank}")
    middle = dims[s:e + 1]
    merged = _prod(middle) if all_known(middle) else UNKNOWN
    return tuple(dims[:s]) + (merged,) + tuple(dims[e + 1:])


def squeeze_axes(dims: Sequence[int], axes: Sequence[int] | None, op: Operation | None = None) -> list:
    """The axes SQUEEZE removes, ascending.

    No axes (null or empty): every dim known to be 1. Named axes: removed unless known to be other than 1
    (Paddle ignores such axes); an unknown dim that was named is trusted to be 1."""
    rank = len(dims)
    if axes is None or len(axes) == 0:
        return [i for i, d in enumerate(dims) if d == 1]
    chosen = sorted({normalize_axis(int(a), rank, op, "axis") for a in axes})
    return [i for i in chosen if dims[i] == 1 or not known(dims[i])]


def unsqueeze_dims(dims: Sequence[int], axes: Sequence[int], op: Operation | None = None) -> tuple:
    """Insert 1s one axis at a time; each axis counts in the rank reached so far (Paddle's rule)."""
    out = list(dims)
    for a in axes:
        a = int(a)
        rank = len(out)
        if not -(rank + 1) <= a <= rank:
            raise operation_error(op, f"axis {a} is out of range for inserting into rank {rank}")
        out.insert(a + rank + 1 if a < 0 else a, 1)
    return tuple(out)


def expand_dims(dims: Sequence[int], shape: Sequence[int], op: Operation | None = None) -> tuple:
    """EXPAND: numpy broadcasting of the input to `shape`; -1 keeps the input dim."""
    n, rank = len(shape), len(dims)
    if n < rank:
        raise operation_error(op, f"shape {list(shape)} has fewer dims than the input {list(dims)}")
    aligned = (1,) * (n - rank) + tuple(dims)
    out = []
    for i, (s, d) in enumerate(zip(shape, aligned)):
        s = int(s)
        if s == -1:
            if i < n - rank:
                raise operation_error(op, f"shape {list(shape)}: -1 at position {i} has no input dim to keep")
            out.append(d)
        elif s < 0:
            raise operation_error(op, f"shape {list(shape)} has the invalid value {s}")
        else:
            if known(d) and d != 1 and d != s:
                raise operation_error(op, f"cannot expand {list(dims)} to {list(shape)}")
            out.append(s)
    return tuple(out)


def tile_dims(dims: Sequence[int], repeats: Sequence[int], op: Operation | None = None) -> tuple:
    """TILE: the shorter of dims and repeats is padded with leading 1s (numpy.tile / paddle.tile)."""
    n = max(len(dims), len(repeats))
    dims = (1,) * (n - len(dims)) + tuple(dims)
    repeats = (1,) * (n - len(repeats)) + tuple(int(r) for r in repeats)
    if any(r < 0 for r in repeats):
        raise operation_error(op, f"repeats {list(repeats)} must not be negative")
    return tuple(d * r if known(d) else UNKNOWN for d, r in zip(dims, repeats))


# -- signatures and shape inference ------------------------------------------------------------------


def _dims_from_shape_operand(op, dims_fn, what: str, min_rank: int = 0) -> list:
    """Output type of an operation whose dims follow a shape-like operand (input 1): exact when it is a
    constant, otherwise unknown dims of the operand's length (which must be known: it fixes the rank)."""
    t = op.inputs[0].type
    values = const_ints(op, 1)
    if values is None:
        n = operand_length(op.inputs[1])
        if n == UNKNOWN:
            raise operation_error(op, f"{what} computed at run time need{'s' if what.startswith('a ') else ''} a known "
                                  "length to fix the output rank")
        return [result_type(t, unknown_dims(max(n, min_rank)))]
    return [map_shapes(t, lambda d: dims_fn(d, values, op))]


@operation(T.RESHAPE, inputs=[Slot("input", DATA_MOVEMENT), Slot("shape", INT32_64)], outputs=[Slot("output")])
def prepare_reshape(op):
    """New dims with the same elements: 0 copies the input dim, one -1 is inferred."""
    return _dims_from_shape_operand(op, reshape_dims, "a shape")


@operation(T.FLATTEN, inputs=[Slot("input", DATA_MOVEMENT), Slot("start_axis", INT32), Slot("end_axis", INT32)],
           outputs=[Slot("output")])
def prepare_flatten(op):
    """Merge the dims start_axis..end_axis (inclusive) into one."""
    t = op.inputs[0].type
    start = int(scalar_param(op, 1, "start_axis"))
    end = int(scalar_param(op, 2, "end_axis"))
    return [map_shapes(t, lambda d: flatten_dims(d, start, end, op))]


@operation(T.SQUEEZE, inputs=[Slot("input", DATA_MOVEMENT), Slot("axes", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_squeeze(op):
    """Remove size-1 dims: the named axes, or every size-1 dim when axes is null or empty."""
    t = op.inputs[0].type
    has_axes = len(op.inputs) > 1 and op.inputs[1] is not None
    axes = const_ints(op, 1) if has_axes else None
    if has_axes and axes is None:
        raise operation_error(op, "axes must be a constant operand (it decides the output rank)")
    removed = set(squeeze_axes(t.dims, axes, op))
    return [map_shapes(t, lambda d: [x for i, x in enumerate(d) if i not in removed])]


@operation(T.UNSQUEEZE, inputs=[Slot("input", DATA_MOVEMENT), Slot("axes", INT32)], outputs=[Slot("output")])
def prepare_unsqueeze(op):
    """Insert size-1 dims at `axes`, one at a time."""
    t = op.inputs[0].type
    axes = const_ints(op, 1)
    if axes is None:
        raise operation_error(op, "axes must be a constant operand (it decides the output rank)")
    return [map_shapes(t, lambda d: unsqueeze_dims(d, axes, op))]


@operation(T.TRANSPOSE, inputs=[Slot("input", DATA_MOVEMENT), Slot("perm", INT32)], outputs=[Slot("output")])
def prepare_transpose(op):
    """output_dims[i] = input_dims[perm[i]]; an empty perm reverses the axes."""
    t = op.inputs[0].type
    perm = const_ints(op, 1)
    if perm is None:
        raise operation_error(op, "perm must be a constant operand")
    perm = perm or list(range(t.rank))[::-1]
    if sorted(normalize_axis(p, t.rank, op, "perm entry") for p in perm) != list(range(t.rank)):
        raise operation_error(op, f"perm {perm} is not a permutation of the {t.rank} input axes")
    perm = [normalize_axis(p, t.rank, op) for p in perm]
    return [map_shapes(t, lambda d: [d[p] for p in perm])]


@operation(T.CHANNEL_SHUFFLE, inputs=[Slot("input", DATA_MOVEMENT), Slot("group", INT32)], outputs=[Slot("output")])
def prepare_channel_shuffle(op):
    """Regroup the channels (axis 1): out[k * group + g] = in[g * (C / group) + k].

    The spec appendix types `group` FLOAT32, a typo: a group count is an integer (INT32 here)."""
    t = op.inputs[0].type
    group = int(scalar_param(op, 1, "group"))
    if t.rank < 2:
        raise operation_error(op, f"the input needs a channel axis (rank >= 2), got rank {t.rank}")
    if group <= 0 or (known(t.dims[1]) and t.dims[1] % group):
        raise operation_error(op, f"group {group} must be positive and divide the {t.dims[1]} channels")
    return [result_type(t)]


@operation(T.TILE, inputs=[Slot("input", DATA_MOVEMENT), Slot("repeats", INT32_64)], outputs=[Slot("output")])
def prepare_tile(op):
    """output_dims[i] = input_dims[i] * repeats[i] (the shorter side padded with leading 1s)."""
    return _dims_from_shape_operand(op, tile_dims, "repeats", min_rank=op.inputs[0].type.rank)


@operation(T.EXPAND, inputs=[Slot("input", DATA_MOVEMENT), Slot("shape", INT32_64)], outputs=[Slot("output")])
def prepare_expand(op):
    """Broadcast the input to `shape` (numpy rules; -1 keeps the input dim)."""
    return _dims_from_shape_operand(op, expand_dims, "a shape")


# -- references ------------------------------------------------------------------------------------------


@reference(T.RESHAPE)
def reshape(op, inputs):
    x, shape = inputs
    return [x.reshape(reshape_dims(x.shape, param_ints(shape), op))]


@reference(T.FLATTEN)
def flatten(op, inputs):
    x, start, end = inputs
    return [x.reshape(flatten_dims(x.shape, param_int(start), param_int(end), op))]


@reference(T.SQUEEZE)
def squeeze(op, inputs):
    x = inputs[0]
    axes = param_ints(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
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
    return [x.reshape(unsqueeze_dims(x.shape, param_ints(axes), op))]


@reference(T.TRANSPOSE)
def transpose(op, inputs):
    x, perm = inputs
    perm = param_ints(perm) or list(range(x.ndim))[::-1]
    return [np.transpose(x, [normalize_axis(p, x.ndim, op) for p in perm]).copy()]


@reference(T.CHANNEL_SHUFFLE)
def channel_shuffle(op, inputs):
    x, group = inputs
    group = param_int(group)
    n, c = x.shape[0], x.shape[1]
    rest = x.shape[2:]
    # [N, g, C/g, ...] -> swap the two channel factors -> [N, C, ...]
    grouped = x.reshape((n, group, c // group) + rest)
    return [np.swapaxes(grouped, 1, 2).reshape(x.shape)]


@reference(T.TILE)
def tile(op, inputs):
    x, repeats = inputs
    repeats = param_ints(repeats)
    tile_dims(x.shape, repeats, op)  # validates the repeats
    return [np.tile(x, repeats)]


@reference(T.EXPAND)
def expand(op, inputs):
    x, shape = inputs
    return [np.broadcast_to(x, expand_dims(x.shape, param_ints(shape), op)).copy()]
