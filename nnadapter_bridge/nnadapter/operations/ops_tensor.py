"""Signatures and shape inference: shape and tensor manipulation (reshape, flatten, squeeze/unsqueeze,
transpose, slice, concat/stack/split/unstack, tile/expand, gather, roll, channel shuffle, meshgrid,
shape/fill/fill_like/range), reductions (REDUCE_MEAN/MAX/SUM, CUM_SUM) and ARG_MAX/ARG_MIN/TOP_K.

The pure dim functions here (`reshape_dims`, `slice_dims`, `squeeze_axes`, ...) take plain ints, treat
NNADAPTER_UNKNOWN as "not known yet", and are shared with the builtin_device kernels so that prepare
and execution agree on one rule.

Precisions are wider than the spec appendix (which lists FLOAT32 and QUANT_INT8_SYMM_PER_LAYER for most
of these): shape subgraphs (shape -> slice -> concat -> reshape) carry INT32/INT64 tensors through the
same data-movement operations, so those accept INT32, INT64 and BOOL8 as well.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, OperationType as T, Precision
from nnadapter_bridge.nnadapter.operations.common import (
    const_ints,
    known,
    map_shapes,
    normalize_axis,
    result_type,
    unknown_dims,
)
from nnadapter_bridge.nnadapter.operations.registry import (
    BOOL,
    F32_Q8,
    INT32,
    INT32_64,
    Slot,
    operation,
)
from nnadapter_bridge.nnadapter.types import Operation, OperandType

# Pure data movement: any value survives it unchanged.
_DATA = F32_Q8 | {Precision.INT32, Precision.INT64, Precision.BOOL8}
# Values with an order (comparisons, sums).
_ORDERED = F32_Q8 | {Precision.INT32, Precision.INT64}
_FILL_VALUE = frozenset({Precision.FLOAT32, Precision.INT32, Precision.INT64, Precision.BOOL8})
_RANGE = frozenset({Precision.FLOAT32, Precision.INT32, Precision.INT64})
_INDEX_DTYPES = (Precision.INT32, Precision.INT64)


# -- small helpers ------------------------------------------------------------------------------------


def _fail(op: Optional[Operation], message: str) -> OperationError:
    where = f"{op.type.name}: " if op is not None else ""
    return OperationError(where + message)


def _scalar_param(op: Operation, i: int, name: str, default=None):
    """The value of a shape-[1] parameter that shape inference needs; None operand -> default.

    Parameters like keepdim or dtype decide the output rank or precision, so they must be constants."""
    if i >= len(op.inputs) or op.inputs[i] is None:
        if default is None:
            raise _fail(op, f"parameter '{name}' is required")
        return default
    value = op.input_value(i)
    if value is None:
        raise _fail(op, f"parameter '{name}' must be a constant operand (it decides the output type)")
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise _fail(op, f"parameter '{name}' must hold one value, got {flat.size}")
    return flat[0].item()


def _index_precision(op: Operation, code: int, name: str) -> Precision:
    try:
        precision = Precision(int(code))
    except ValueError:
        precision = None
    if precision not in _INDEX_DTYPES:
        raise _fail(op, f"'{name}' must be the precision code of INT32 ({int(Precision.INT32)}) or "
                        f"INT64 ({int(Precision.INT64)}), got {code}")
    return precision


def _operand_length(operand) -> int:
    """Number of values in a 1-D parameter operand, or UNKNOWN."""
    dims = operand.type.dims
    if len(dims) == 0:
        return 1
    if len(dims) == 1 and known(dims[0]):
        return dims[0]
    return UNKNOWN


def _prod(dims: Sequence[int]) -> int:
    return math.prod(int(d) for d in dims)


def _all_known(dims: Sequence[int]) -> bool:
    return all(known(d) for d in dims)


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


# -- dim rules shared with the kernels ------------------------------------------------------------------


def reduce_dims(dims: Sequence[int], axes: Sequence[int], keepdim: bool, op: Optional[Operation] = None) -> tuple:
    """Dims after reducing over `axes` (empty: every axis)."""
    rank = len(dims)
    chosen = {normalize_axis(a, rank, op, "axis") for a in axes} if len(axes) else set(range(rank))
    if keepdim:
        return tuple(1 if i in chosen else d for i, d in enumerate(dims))
    return tuple(d for i, d in enumerate(dims) if i not in chosen)


def reshape_dims(in_dims: Sequence[int], shape: Sequence[int], op: Optional[Operation] = None) -> tuple:
    """RESHAPE's rule: 0 copies the input dim at that position, one -1 is inferred from the element count."""
    out = []
    inferred = None
    for i, s in enumerate(shape):
        s = int(s)
        if s == 0:
            if i >= len(in_dims):
                raise _fail(op, f"shape {list(shape)}: 0 at position {i} has no input dim to copy ({list(in_dims)})")
            out.append(in_dims[i])
        elif s == -1:
            if inferred is not None:
                raise _fail(op, f"shape {list(shape)} has more than one -1")
            inferred = i
            out.append(UNKNOWN)
        elif s > 0:
            out.append(s)
        else:
            raise _fail(op, f"shape {list(shape)} has the invalid value {s}")
    # An unknown input dim copied by 0 sits on both sides of the element count and cancels out.
    copied = {i for i, s in enumerate(shape) if int(s) == 0 and not known(in_dims[i])}
    in_rest = [d for i, d in enumerate(in_dims) if i not in copied]
    out_rest = [d for i, d in enumerate(out) if i != inferred and i not in copied]
    if _all_known(in_rest) and _all_known(out_rest):
        total, rest = _prod(in_rest), _prod(out_rest)
        if inferred is not None:
            if rest == 0 or total % rest:
                raise _fail(op, f"cannot reshape {list(in_dims)} to {list(shape)}: element count does not divide")
            out[inferred] = total // rest
        elif total != rest:
            raise _fail(op, f"cannot reshape {list(in_dims)} to {list(shape)}: element counts differ")
    return tuple(out)


def flatten_dims(dims: Sequence[int], start: int, end: int, op: Optional[Operation] = None) -> tuple:
    rank = len(dims)
    if rank == 0:
        return (1,)
    s = normalize_axis(start, rank, op, "start_axis")
    e = normalize_axis(end, rank, op, "end_axis")
    if s > e:
        raise _fail(op, f"start_axis {start} is after end_axis {end} for rank {rank}")
    middle = dims[s:e + 1]
    merged = _prod(middle) if _all_known(middle) else UNKNOWN
    return tuple(dims[:s]) + (merged,) + tuple(dims[e + 1:])


def squeeze_axes(dims: Sequence[int], axes: Optional[Sequence[int]], op: Optional[Operation] = None) -> list:
    """The axes SQUEEZE removes, ascending.

    No axes (null or empty): every dim known to be 1. Named axes: removed unless known to be other than 1
    (Paddle ignores such axes); an unknown dim that was named is trusted to be 1."""
    rank = len(dims)
    if axes is None or len(axes) == 0:
        return [i for i, d in enumerate(dims) if d == 1]
    chosen = sorted({normalize_axis(int(a), rank, op, "axis") for a in axes})
    return [i for i in chosen if dims[i] == 1 or not known(dims[i])]


def unsqueeze_dims(dims: Sequence[int], axes: Sequence[int], op: Optional[Operation] = None) -> tuple:
    """Insert 1s one axis at a time; each axis counts in the rank reached so far (Paddle's rule)."""
    out = list(dims)
    for a in axes:
        a = int(a)
        rank = len(out)
        if not -(rank + 1) <= a <= rank:
            raise _fail(op, f"axis {a} is out of range for inserting into rank {rank}")
        out.insert(a + rank + 1 if a < 0 else a, 1)
    return tuple(out)


def slice_dims(dims: Sequence[int], axes: Sequence[int], starts: Sequence[int], ends: Sequence[int],
               steps: Sequence[int], op: Optional[Operation] = None) -> tuple:
    """Python slice semantics per axis (negative starts/ends count from the end, out of range clamps)."""
    if not (len(axes) == len(starts) == len(ends) == len(steps)):
        raise _fail(op, f"axes {list(axes)}, starts {list(starts)}, ends {list(ends)} and steps "
                        f"{list(steps)} must have the same length")
    out = list(dims)
    for a, s, e, st in zip(axes, starts, ends, steps):
        axis = normalize_axis(int(a), len(dims), op, "axis")
        if int(st) == 0:
            raise _fail(op, "a step of 0 is not allowed")
        if known(dims[axis]):
            out[axis] = len(range(*slice(int(s), int(e), int(st)).indices(dims[axis])))
        else:
            out[axis] = UNKNOWN
    return tuple(out)


def slice_axes(axes: Optional[Sequence[int]], n: int) -> list:
    """SLICE's axes operand, or [0, 1, ..., n-1] when it is null."""
    return list(range(n)) if axes is None else [int(a) for a in axes]


def expand_dims(dims: Sequence[int], shape: Sequence[int], op: Optional[Operation] = None) -> tuple:
    """EXPAND: numpy broadcasting of the input to `shape`; -1 keeps the input dim."""
    n, rank = len(shape), len(dims)
    if n < rank:
        raise _fail(op, f"shape {list(shape)} has fewer dims than the input {list(dims)}")
    aligned = (1,) * (n - rank) + tuple(dims)
    out = []
    for i, (s, d) in enumerate(zip(shape, aligned)):
        s = int(s)
        if s == -1:
            if i < n - rank:
                raise _fail(op, f"shape {list(shape)}: -1 at position {i} has no input dim to keep")
            out.append(d)
        elif s < 0:
            raise _fail(op, f"shape {list(shape)} has the invalid value {s}")
        else:
            if known(d) and d != 1 and d != s:
                raise _fail(op, f"cannot expand {list(dims)} to {list(shape)}")
            out.append(s)
    return tuple(out)


def tile_dims(dims: Sequence[int], repeats: Sequence[int], op: Optional[Operation] = None) -> tuple:
    """TILE: the shorter of dims and repeats is padded with leading 1s (numpy.tile / paddle.tile)."""
    n = max(len(dims), len(repeats))
    dims = (1,) * (n - len(dims)) + tuple(dims)
    repeats = (1,) * (n - len(repeats)) + tuple(int(r) for r in repeats)
    if any(r < 0 for r in repeats):
        raise _fail(op, f"repeats {list(repeats)} must not be negative")
    return tuple(d * r if known(d) else UNKNOWN for d, r in zip(dims, repeats))


def split_sections(dim: int, split: Sequence[int], op: Optional[Operation] = None) -> list:
    """SPLIT's sizes with one -1 inferred when the axis size is known."""
    sizes = [int(s) for s in split]
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise _fail(op, f"split {sizes}: at most one -1 and no other negative size")
    if known(dim):
        if -1 in sizes:
            rest = sum(s for s in sizes if s != -1)
            if rest > dim:
                raise _fail(op, f"split {sizes} exceeds the axis size {dim}")
            sizes[sizes.index(-1)] = dim - rest
        elif sum(sizes) != dim:
            raise _fail(op, f"split {sizes} does not sum to the axis size {dim}")
    else:
        sizes = [UNKNOWN if s == -1 else s for s in sizes]
    return sizes


def range_length(start, end, step, op: Optional[Operation] = None) -> int:
    """RANGE's element count: ceil(|end - start| / |step|), computed in the operands' own type."""
    if step == 0:
        raise _fail(op, "step must not be 0")
    if isinstance(start, (np.floating, float)):
        return max(int(np.ceil(np.abs((end - start) / step))), 0) if (end - start) * step > 0 else 0
    start, end, step = int(start), int(end), int(step)
    return len(range(start, end, step))


# -- reductions and arg/top-k ----------------------------------------------------------------------------


def _prepare_arg(op):
    """Index of the max/min along `axis`; `keepdim` keeps it as size 1; `dtype` picks INT32/INT64."""
    t = op.inputs[0].type
    keepdim = bool(_scalar_param(op, 2, "keepdim"))
    precision = _index_precision(op, _scalar_param(op, 3, "dtype", int(Precision.INT64)), "dtype")
    axis = op.input_value(1)
    if axis is None:
        return [result_type(t, unknown_dims(t.rank if keepdim else t.rank - 1), precision=precision)]
    axis = int(np.asarray(axis).reshape(-1)[0])
    normalize_axis(axis, t.rank, op)
    return [map_shapes(t, lambda d: reduce_dims(d, [axis], keepdim, op), precision=precision)]


_ARG_SIGNATURE = dict(
    inputs=[Slot("input", _ORDERED), Slot("axis", INT32), Slot("keepdim", BOOL),
            Slot("dtype", INT32, optional=True)],
    outputs=[Slot("output")],
)
operation(T.ARG_MAX, **_ARG_SIGNATURE)(_prepare_arg)
operation(T.ARG_MIN, **_ARG_SIGNATURE)(_prepare_arg)


def _prepare_reduce(op):
    """Reduce over `axes` (empty: all axes); `keepdim` keeps reduced axes as size 1."""
    t = op.inputs[0].type
    keepdim = bool(_scalar_param(op, 2, "keepdim"))
    axes = const_ints(op, 1)
    if axes is None:
        n = _operand_length(op.inputs[1])
        if keepdim:
            return [result_type(t, unknown_dims(t.rank))]
        if n == UNKNOWN:
            raise _fail(op, "axes computed at run time need a known length (or keepdim) to fix the rank")
        return [result_type(t, unknown_dims(t.rank - n if n else 0))]
    return [map_shapes(t, lambda d: reduce_dims(d, axes, keepdim, op))]


_REDUCE_OUTPUTS = [Slot("output")]
operation(T.REDUCE_MEAN, inputs=[Slot("input", F32_Q8), Slot("axes", INT32), Slot("keepdim", BOOL)],
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
    axis = normalize_axis(int(_scalar_param(op, 2, "axis")), t.rank, op)
    precision = _index_precision(op, _scalar_param(op, 5, "return_indices_dtype"), "return_indices_dtype")
    k = op.input_value(1)
    k = None if k is None else int(np.asarray(k).reshape(-1)[0])
    if k is not None and (k < 0 or (known(t.dims[axis]) and k > t.dims[axis])):
        raise _fail(op, f"k={k} is out of range for axis {axis} of size {t.dims[axis]}")

    def along(d):
        d = list(d)
        d[axis] = UNKNOWN if k is None else k
        return d

    return [map_shapes(t, along), map_shapes(t, along, precision=precision)]


# -- reshaping ----------------------------------------------------------------------------------------


def _dims_from_shape_operand(op, dims_fn, what: str, min_rank: int = 0) -> list:
    """Output type of an operation whose dims follow a shape-like operand (input 1): exact when it is a
    constant, otherwise unknown dims of the operand's length (which must be known: it fixes the rank)."""
    t = op.inputs[0].type
    values = const_ints(op, 1)
    if values is None:
        n = _operand_length(op.inputs[1])
        if n == UNKNOWN:
            raise _fail(op, f"{what} computed at run time need{'s' if what.startswith('a ') else ''} a known "
                            "length to fix the output rank")
        return [result_type(t, unknown_dims(max(n, min_rank)))]
    return [map_shapes(t, lambda d: dims_fn(d, values, op))]


@operation(T.RESHAPE, inputs=[Slot("input", _DATA), Slot("shape", INT32_64)], outputs=[Slot("output")])
def prepare_reshape(op):
    """New dims with the same elements: 0 copies the input dim, one -1 is inferred."""
    return _dims_from_shape_operand(op, reshape_dims, "a shape")


@operation(T.FLATTEN, inputs=[Slot("input", _DATA), Slot("start_axis", INT32), Slot("end_axis", INT32)],
           outputs=[Slot("output")])
def prepare_flatten(op):
    """Merge the dims start_axis..end_axis (inclusive) into one."""
    t = op.inputs[0].type
    start = int(_scalar_param(op, 1, "start_axis"))
    end = int(_scalar_param(op, 2, "end_axis"))
    return [map_shapes(t, lambda d: flatten_dims(d, start, end, op))]


@operation(T.SQUEEZE, inputs=[Slot("input", _DATA), Slot("axes", INT32, optional=True)], outputs=[Slot("output")])
def prepare_squeeze(op):
    """Remove size-1 dims: the named axes, or every size-1 dim when axes is null or empty."""
    t = op.inputs[0].type
    has_axes = len(op.inputs) > 1 and op.inputs[1] is not None
    axes = const_ints(op, 1) if has_axes else None
    if has_axes and axes is None:
        raise _fail(op, "axes must be a constant operand (it decides the output rank)")
    removed = set(squeeze_axes(t.dims, axes, op))
    return [map_shapes(t, lambda d: [x for i, x in enumerate(d) if i not in removed])]


@operation(T.UNSQUEEZE, inputs=[Slot("input", _DATA), Slot("axes", INT32)], outputs=[Slot("output")])
def prepare_unsqueeze(op):
    """Insert size-1 dims at `axes`, one at a time."""
    t = op.inputs[0].type
    axes = const_ints(op, 1)
    if axes is None:
        raise _fail(op, "axes must be a constant operand (it decides the output rank)")
    return [map_shapes(t, lambda d: unsqueeze_dims(d, axes, op))]


@operation(T.TRANSPOSE, inputs=[Slot("input", _DATA), Slot("perm", INT32)], outputs=[Slot("output")])
def prepare_transpose(op):
    """output_dims[i] = input_dims[perm[i]]; an empty perm reverses the axes."""
    t = op.inputs[0].type
    perm = const_ints(op, 1)
    if perm is None:
        raise _fail(op, "perm must be a constant operand")
    perm = perm or list(range(t.rank))[::-1]
    if sorted(normalize_axis(p, t.rank, op, "perm entry") for p in perm) != list(range(t.rank)):
        raise _fail(op, f"perm {perm} is not a permutation of the {t.rank} input axes")
    perm = [normalize_axis(p, t.rank, op) for p in perm]
    return [map_shapes(t, lambda d: [d[p] for p in perm])]


@operation(T.CHANNEL_SHUFFLE, inputs=[Slot("input", _DATA), Slot("group", INT32)], outputs=[Slot("output")])
def prepare_channel_shuffle(op):
    """Regroup the channels (axis 1): out[k * group + g] = in[g * (C / group) + k].

    The spec appendix types `group` FLOAT32, a typo: a group count is an integer (INT32 here)."""
    t = op.inputs[0].type
    group = int(_scalar_param(op, 1, "group"))
    if t.rank < 2:
        raise _fail(op, f"the input needs a channel axis (rank >= 2), got rank {t.rank}")
    if group <= 0 or (known(t.dims[1]) and t.dims[1] % group):
        raise _fail(op, f"group {group} must be positive and divide the {t.dims[1]} channels")
    return [result_type(t)]


# -- slicing, joining, splitting -----------------------------------------------------------------------


@operation(T.SLICE, inputs=[Slot("input", _DATA), Slot("axes", INT32, optional=True), Slot("starts", INT32_64),
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
        n = len(axes) if axes is not None else _operand_length(op.inputs[2])
        if n == UNKNOWN:
            return [result_type(t, unknown_dims(t.rank))]
        dims = list(t.dims)
        for a in slice_axes(axes, n):
            dims[normalize_axis(a, t.rank, op)] = UNKNOWN
        return [result_type(t, dims)]
    axes = slice_axes(axes, len(starts))
    steps = steps if steps is not None else [1] * len(starts)
    return [map_shapes(t, lambda d: slice_dims(d, axes, starts, ends, steps, op))]


def _check_same_precision(op, types):
    first = types[0].precision
    for i, other in enumerate(types[1:], 1):
        if other.precision != first:
            raise _fail(op, f"input {i} has precision {other.precision.name}, input 0 has {first.name}")


@operation(T.CONCAT, inputs=[Slot("input", _DATA, variadic=True), Slot("axis", INT32)], outputs=[Slot("output")])
def prepare_concat(op):
    """Join the inputs along `axis`; every other dim must agree."""
    types = [o.type for o in op.inputs[:-1]]
    _check_same_precision(op, types)
    rank = types[0].rank
    axis = normalize_axis(int(_scalar_param(op, len(op.inputs) - 1, "axis")), rank, op)

    def join(shapes):
        for s in shapes:
            if len(s) != rank:
                raise _fail(op, f"inputs have different ranks: {[list(x) for x in shapes]}")
        out = []
        for i in range(rank):
            column = [s[i] for s in shapes]
            if i == axis:
                out.append(sum(column) if _all_known(column) else UNKNOWN)
            else:
                known_values = {d for d in column if known(d)}
                if len(known_values) > 1:
                    raise _fail(op, f"inputs differ on axis {i}: {[list(x) for x in shapes]}")
                out.append(known_values.pop() if known_values else UNKNOWN)
        return out

    dims = join([t.dims for t in types])
    return [result_type(types[0], dims, dynamic_dims=_combine_dynamic(types, join))]


@operation(T.STACK, inputs=[Slot("input", _DATA, variadic=True), Slot("axis", INT32)], outputs=[Slot("output")])
def prepare_stack(op):
    """Stack same-shape inputs along a new axis in [-(R+1), R+1)."""
    types = [o.type for o in op.inputs[:-1]]
    _check_same_precision(op, types)
    rank = types[0].rank
    axis = normalize_axis(int(_scalar_param(op, len(op.inputs) - 1, "axis")), rank + 1, op)
    n = len(types)

    def stack(shapes):
        for s in shapes:
            if len(s) != rank:
                raise _fail(op, f"inputs have different ranks: {[list(x) for x in shapes]}")
        merged = []
        for i in range(rank):
            known_values = {s[i] for s in shapes if known(s[i])}
            if len(known_values) > 1:
                raise _fail(op, f"inputs differ on axis {i}: {[list(x) for x in shapes]}")
            merged.append(known_values.pop() if known_values else UNKNOWN)
        return merged[:axis] + [n] + merged[axis:]

    dims = stack([t.dims for t in types])
    return [result_type(types[0], dims, dynamic_dims=_combine_dynamic(types, stack))]


@operation(T.SPLIT, inputs=[Slot("input", _DATA), Slot("axis", INT32), Slot("split", INT32)],
           outputs=[Slot("output", variadic=True)])
def prepare_split(op):
    """Cut the input along `axis` into len(split) parts of the given sizes (one -1 inferred)."""
    t = op.inputs[0].type
    axis = normalize_axis(int(_scalar_param(op, 1, "axis")), t.rank, op)
    split = const_ints(op, 2)
    if split is None:
        raise _fail(op, "split must be a constant operand")
    if len(split) != len(op.outputs):
        raise _fail(op, f"split {split} has {len(split)} parts but there are {len(op.outputs)} outputs")
    split_sections(t.dims[axis], split, op)  # validates the sizes against a known axis
    results = []
    for k in range(len(split)):
        def part(d, k=k):
            d = list(d)
            d[axis] = split_sections(d[axis], split, op)[k]
            return d
        results.append(map_shapes(t, part))
    return results


@operation(T.UNSTACK, inputs=[Slot("input", _DATA), Slot("axis", INT32), Slot("num", INT32)],
           outputs=[Slot("output", variadic=True)])
def prepare_unstack(op):
    """One rank R-1 output per slice along `axis` (num of them)."""
    t = op.inputs[0].type
    axis = normalize_axis(int(_scalar_param(op, 1, "axis")), t.rank, op)
    num = int(_scalar_param(op, 2, "num"))
    if num != len(op.outputs) or (known(t.dims[axis]) and t.dims[axis] != num):
        raise _fail(op, f"num={num}, axis {axis} has size {t.dims[axis]}, {len(op.outputs)} outputs: "
                        "all three must agree")
    return [map_shapes(t, lambda d: list(d[:axis]) + list(d[axis + 1:])) for _ in op.outputs]


@operation(T.MESHGRID, inputs=[Slot("input", _DATA, variadic=True)], outputs=[Slot("output", variadic=True)])
def prepare_meshgrid(op):
    """n 1-D inputs of sizes d0..dn-1 give n grids of dims [d0, ..., dn-1] ("ij" indexing)."""
    types = [o.type for o in op.inputs]
    _check_same_precision(op, types)
    if len(op.outputs) != len(types):
        raise _fail(op, f"{len(types)} inputs need {len(types)} outputs, got {len(op.outputs)}")
    for i, t in enumerate(types):
        if t.rank != 1:
            raise _fail(op, f"input {i} must be 1-D, got dims {list(t.dims)}")
    grid = lambda shapes: [s[0] for s in shapes]  # noqa: E731
    dims = grid([t.dims for t in types])
    dynamic = _combine_dynamic(types, grid)
    return [result_type(t, dims, dynamic_dims=dynamic) for t in types]


# -- broadcasting, gathering, moving ---------------------------------------------------------------------


@operation(T.TILE, inputs=[Slot("input", _DATA), Slot("repeats", INT32_64)], outputs=[Slot("output")])
def prepare_tile(op):
    """output_dims[i] = input_dims[i] * repeats[i] (the shorter side padded with leading 1s)."""
    return _dims_from_shape_operand(op, tile_dims, "repeats", min_rank=op.inputs[0].type.rank)


@operation(T.EXPAND, inputs=[Slot("input", _DATA), Slot("shape", INT32_64)], outputs=[Slot("output")])
def prepare_expand(op):
    """Broadcast the input to `shape` (numpy rules; -1 keeps the input dim)."""
    return _dims_from_shape_operand(op, expand_dims, "a shape")


@operation(T.GATHER, inputs=[Slot("input", _DATA), Slot("indices", INT32_64), Slot("axis", INT32)],
           outputs=[Slot("output")])
def prepare_gather(op):
    """Entries of `input` along `axis` at `indices` (any rank Q): output rank Q + R - 1."""
    t, index_type = op.inputs[0].type, op.inputs[1].type
    axis = normalize_axis(int(_scalar_param(op, 2, "axis")), t.rank, op)
    index_dims = tuple(index_type.dims)
    return [map_shapes(t, lambda d: list(d[:axis]) + list(index_dims) + list(d[axis + 1:]))]


@operation(T.ROLL, inputs=[Slot("input", _DATA), Slot("shifts", INT32_64), Slot("axes", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_roll(op):
    """Rotate elements along `axes` by `shifts`; with no axes the flattened tensor rolls."""
    t = op.inputs[0].type
    shifts = const_ints(op, 1)
    axes = const_ints(op, 2)
    if axes and shifts is not None and len(shifts) != len(axes):
        raise _fail(op, f"shifts {shifts} and axes {axes} must have the same length")
    for a in axes or ():
        normalize_axis(a, t.rank, op)
    return [result_type(t)]


# -- shapes and generated tensors ------------------------------------------------------------------------


@operation(T.SHAPE, inputs=[Slot("input"), Slot("dtype", INT32)], outputs=[Slot("output")])
def prepare_shape(op):
    """The input's dims as a 1-D INT32/INT64 tensor of length R."""
    t = op.inputs[0].type
    precision = _index_precision(op, _scalar_param(op, 1, "dtype"), "dtype")
    return [result_type(t, [t.rank], precision=precision)]


@operation(T.FILL, inputs=[Slot("shape", INT32_64), Slot("value", _FILL_VALUE)], outputs=[Slot("output")])
def prepare_fill(op):
    """A tensor of dims `shape` whose every element is `value` (and of its type)."""
    value_type = op.inputs[1].type
    shape = const_ints(op, 0)
    if shape is None:
        n = _operand_length(op.inputs[0])
        if n == UNKNOWN:
            raise _fail(op, "a shape computed at run time needs a known length to fix the output rank")
        return [result_type(value_type, unknown_dims(n))]
    if any(s < 0 for s in shape):
        raise _fail(op, f"shape {shape} must not be negative")
    return [result_type(value_type, shape)]


@operation(T.FILL_LIKE, inputs=[Slot("input"), Slot("value", _FILL_VALUE)], outputs=[Slot("output")])
def prepare_fill_like(op):
    """A tensor of the input's dims filled with `value` (and of its type)."""
    t, value_type = op.inputs[0].type, op.inputs[1].type
    dims_only = result_type(t)
    return [result_type(value_type, dims_only.dims, dynamic_dims=dims_only.dynamic_dims)]


@operation(T.RANGE, inputs=[Slot("start", _RANGE), Slot("end", _RANGE), Slot("step", _RANGE)],
           outputs=[Slot("output")])
def prepare_range(op):
    """start, start + step, ... up to (not including) end; 1-D, of start's type."""
    types = [o.type for o in op.inputs]
    _check_same_precision(op, types)
    values = [op.input_value(i) for i in range(3)]
    if any(v is None for v in values):
        return [result_type(types[0], [UNKNOWN])]
    start, end, step = (np.asarray(v).reshape(-1)[0] for v in values)
    return [result_type(types[0], [range_length(start, end, step, op)])]
