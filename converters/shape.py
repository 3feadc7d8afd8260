"""Converters for the reshaping ops: reshape(2), flatten(2), flatten_contiguous_range, squeeze(2),
unsqueeze(2), transpose(2), shuffle_channel, channel_shuffle, pixel_shuffle (RESHAPE, FLATTEN, SQUEEZE,
UNSQUEEZE, TRANSPOSE, CHANNEL_SHUFFLE), and the broadcasting ones expand, expand_v2, expand_as_v2,
broadcast_tensors and tile (TILE, EXPAND), and repeat_interleave (TILE and FLATTEN, or GATHER).

Attributes Paddle also accepts as tensors go through `ctx.ints_operand` (params fold into constants). Where
an emitted operation needs a constant that a run-time tensor would supply (UNSQUEEZE axes), the op's `check`
says so and the op stays on the host.

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry) and the standard.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import input_dims, known_dim, known_dims, needs_constant
from converters.context import ConversionContext
from converters.emit import emit_chain, transpose_step
from converters.layout import is_channel_last, layout_reason
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


# -- reshape family ---------------------------------------------------------------------------------


@converter("reshape", "reshape2", emits=[T.RESHAPE, T.CONCAT, T.CAST])
def convert_reshape(ctx: ConversionContext, v: OpView) -> None:
    """Shape source priority: the `ShapeTensor` list, then the `Shape` tensor, then the `shape` attr
    (0 copies the input dim, -1 is inferred: RESHAPE's own rule). `XShape` is not produced."""
    x = ctx.input(v.input("X"))
    shape = ctx.ints_operand(v.op, "shape", tensor="Shape", tensor_list="ShapeTensor", list_first=True)
    ctx.add(T.RESHAPE, [x, shape], [ctx.output(v.output("Out"))])


@converter("flatten", "flatten2", emits=[T.RESHAPE, T.FLATTEN])
def convert_flatten(ctx: ConversionContext, v: OpView) -> None:
    """A 2-D result [prod(dims[:axis]), prod(dims[axis:])]; `axis` (default 1) lies in [0, rank]."""
    x = ctx.input(v.input("X"))
    rank = ctx.rank(x)
    axis = v.attr_int("axis", 1)
    if not 0 <= axis <= rank:
        raise ctx.error(f"axis {axis} must lie in [0, {rank}] for an input of rank {rank}")
    out = ctx.output(v.output("Out"))
    if axis == 0:
        ctx.add(T.RESHAPE, [x, ctx.const_i32([1, -1])], [out])
    elif axis == rank:
        ctx.add(T.RESHAPE, [x, ctx.const_i32([-1, 1])], [out])
    else:
        head = x
        if axis > 1:
            head = ctx.temp(v.output("Out"), "flatten_head")
            ctx.add(T.FLATTEN, [x, ctx.const_i32(0), ctx.const_i32(axis - 1)], [head])
        ctx.add(T.FLATTEN, [head, ctx.const_i32(1), ctx.const_i32(-1)], [out])


@converter("flatten_contiguous_range", emits=[T.FLATTEN])
def convert_flatten_contiguous_range(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    start, stop = v.attr_int("start_axis", 1), v.attr_int("stop_axis", 1)
    if ctx.rank(x) == 0:
        start = stop = 0  # Paddle flattens a 0-D tensor to [1]; FLATTEN does the same for rank 0
    ctx.add(T.FLATTEN, [x, ctx.const_i32(start), ctx.const_i32(stop)], [ctx.output(v.output("Out"))])


@converter("squeeze", "squeeze2", emits=[T.SQUEEZE])
def convert_squeeze(ctx: ConversionContext, v: OpView) -> None:
    """`axes` empty (the default) removes every size-1 dim; named axes whose dim is not 1 are kept."""
    x = ctx.input(v.input("X"))
    axes = v.attr_ints("axes")
    ctx.add(T.SQUEEZE, [x, ctx.const_i32(axes) if axes else None], [ctx.output(v.output("Out"))])


@converter("unsqueeze", "unsqueeze2", emits=[T.UNSQUEEZE, T.CONCAT, T.CAST],
           check=needs_constant("AxesTensor", "AxesTensorList", what="UNSQUEEZE's axes"))
def convert_unsqueeze(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    axes = ctx.ints_operand(v.op, "axes", tensor="AxesTensor", tensor_list="AxesTensorList", list_first=False)
    ctx.add(T.UNSQUEEZE, [x, axes], [ctx.output(v.output("Out"))])


@converter("transpose", "transpose2", emits=[T.TRANSPOSE])
def convert_transpose(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    perm = v.attr_ints("axis")
    if not perm:  # Paddle 3.3.1 takes an empty axis list as "keep the order", at any rank
        perm = list(range(ctx.rank(x)))
    ctx.add(T.TRANSPOSE, [x, ctx.const_i32(perm)], [ctx.output(v.output("Out"))])


# -- broadcasting and repeating -----------------------------------------------------------------------


@converter("expand", emits=[T.TILE, T.CONCAT, T.CAST])
def convert_expand(ctx: ConversionContext, v: OpView) -> None:
    """expand (v1) repeats each dim `expand_times[i]` times: TILE. `ExpandTimes` wins over the
    `expand_times_tensor` list, which wins over the attr."""
    x = ctx.input(v.input("X"))
    times = ctx.ints_operand(v.op, "expand_times", tensor="ExpandTimes", tensor_list="expand_times_tensor",
                             list_first=False)
    ctx.add(T.TILE, [x, times], [ctx.output(v.output("Out"))])


@converter("expand_v2", emits=[T.EXPAND, T.CONCAT, T.CAST])
def convert_expand_v2(ctx: ConversionContext, v: OpView) -> None:
    """Broadcast to `shape` (-1 keeps the input dim): `Shape`, then `expand_shapes_tensor`, then the attr."""
    x = ctx.input(v.input("X"))
    shape = ctx.ints_operand(v.op, "shape", tensor="Shape", tensor_list="expand_shapes_tensor", list_first=False)
    ctx.add(T.EXPAND, [x, shape], [ctx.output(v.output("Out"))])


def _check_broadcast_tensors(op, ctx) -> str | None:
    if ctx is None:
        return None
    dims = [ctx.dims(ctx.input(n)) for n in OpView(op).inputs("X") if ctx.has(n)]
    if not all(known_dims(d) for d in dims):
        return "the broadcast shape needs every input's dims (the host broadcasts at run time)"
    return None


@converter("broadcast_tensors", emits=[T.EXPAND, T.ASSIGN], check=_check_broadcast_tensors)
def convert_broadcast_tensors(ctx: ConversionContext, v: OpView) -> None:
    """Every X broadcast to the inputs' common shape (numpy's rule, as paddle.broadcast_tensors): an EXPAND each."""
    parts = [ctx.input(n) for n in v.inputs("X")]
    outs = v.outputs("Out")
    if len(parts) != len(outs):
        raise ctx.error(f"{len(parts)} inputs X but {len(outs)} outputs Out")
    try:
        shape = np.broadcast_shapes(*(tuple(ctx.dims(p)) for p in parts))
    except ValueError as exc:
        raise ctx.error(f"the inputs do not broadcast: {exc}") from exc
    for part, out in zip(parts, outs):
        if tuple(ctx.dims(part)) == tuple(shape):
            ctx.add(T.ASSIGN, [part], [ctx.output(out)])
        else:
            ctx.add(T.EXPAND, [part, ctx.const_i32(list(shape))], [ctx.output(out)])


@converter("expand_as_v2", emits=[T.EXPAND, T.SHAPE])
def convert_expand_as(ctx: ConversionContext, v: OpView) -> None:
    """Broadcast X to the dims of Y when given (its static dims, else its SHAPE at run time), else to
    the `target_shape` attr."""
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    target_names = v.inputs("Y") or v.inputs("target_tensor")
    if target_names:
        target = ctx.input(target_names[0])
        dims = ctx.dims(target)
        if all(known_dim(d) for d in dims):
            shape = ctx.const_i32(list(dims))
        else:
            shape = ctx.temp(v.output("Out"), "target_shape")
            ctx.add(T.SHAPE, [target, ctx.const_i32(int(Precision.INT32))], [shape])
    else:
        shape = ctx.const_i32(v.attr_ints("target_shape"))
    ctx.add(T.EXPAND, [x, shape], [out])


@converter("tile", emits=[T.TILE, T.CONCAT, T.CAST, T.ASSIGN])
def convert_tile(ctx: ConversionContext, v: OpView) -> None:
    """`RepeatTimes`, then `repeat_times_tensor`, then the attr; the shorter of repeats and dims gets
    leading 1s (TILE's rule, as paddle.tile)."""
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    repeats = ctx.ints_operand(v.op, "repeat_times", tensor="RepeatTimes", tensor_list="repeat_times_tensor",
                               list_first=False)
    if repeats.is_constant and repeats.value is not None and repeats.value.size < ctx.rank(x):
        # Spelled out (OpenVINO's Tile reads an empty repeats list as garbage rather than "repeat nothing").
        times = [1] * (ctx.rank(x) - repeats.value.size) + [int(t) for t in repeats.value.reshape(-1)]
        if all(t == 1 for t in times):
            ctx.add(T.ASSIGN, [x], [out])
            return
        repeats = ctx.const_i32(times)
    ctx.add(T.TILE, [x, repeats], [out])


# -- repeat_interleave ------------------------------------------------------------------------------------------

def _repeat_counts_name(op) -> str | None:
    view = OpView(op)
    return view.optional_input("RepeatTensor") or view.optional_input("RepeatsTensor")


def _check_repeat_interleave(op, ctx) -> str | None:
    name = _repeat_counts_name(op)
    if name is None or ctx is None or ctx.constant_value(name) is not None or not ctx.has(name):
        return None
    if int(np.prod(ctx.dims(name))) != 1:
        return ("repeat counts per element computed at run time give an output length known only at run time "
                "(NNAdapter's shapes follow the inputs' dims)")
    return None


@converter("repeat_interleave", "repeat_interleave_with_tensor_index",
           emits=[T.RESHAPE, T.UNSQUEEZE, T.TILE, T.FLATTEN, T.CAST, T.CONCAT, T.GATHER],
           check=_check_repeat_interleave)
def convert_repeat_interleave(ctx: ConversionContext, v: OpView) -> None:
    """numpy.repeat(x, repeats, axis=dim) (a 0-D x read as one element). One count for every element (the
    `Repeats` attr, or a one-element `RepeatTensor`, known now or computed at run time: SegNeXt repeats its bases
    by the batch size) tiles x along a new axis after `dim` and merges the two (UNSQUEEZE, TILE, FLATTEN); counts
    per element, known now, GATHER each element's index as often as its count says."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    out = ctx.output(var)
    if ctx.rank(x) == 0:
        vector = ctx.temp(var, "vector")
        ctx.add(T.RESHAPE, [x, ctx.const_i32([1])], [vector])
        x = vector
    rank = ctx.rank(x)
    dim = v.attr_int("dim", 0)
    if not -rank <= dim < rank:
        raise ctx.error(f"dim {dim} is out of range for an input of rank {rank}")
    dim %= rank
    name = _repeat_counts_name(v.op)
    counts = np.asarray([v.attr_int("Repeats", 1)]) if name is None else ctx.constant_value(name)
    if counts is not None:
        counts = counts.reshape(-1).astype(np.int64)
        if np.any(counts < 0) or counts.sum() == 0 or (counts.size == 1 and counts[0] == 0):
            raise ctx.error(f"repeat counts must be non-negative and give a non-empty result, got {counts.tolist()}")
        if counts.size > 1:
            size = ctx.dims(x)[dim]
            if counts.size != size:
                raise ctx.error(f"{counts.size} repeat counts for axis {dim} of size {size}")
            index = np.repeat(np.arange(counts.size), counts)
            ctx.add(T.GATHER, [x, ctx.const_i32(index), ctx.const_i32(dim)], [out])
            return
        times = ctx.const_i32([1] * (dim + 1) + [int(counts[0])] + [1] * (rank - dim - 1))
    else:
        assert name is not None  # the attr's count is always known
        count = ctx.cast(ctx.input(name), Precision.INT32, var, "count")
        if ctx.rank(count) != 1:
            as_vector = ctx.temp(var, "count_vector")
            ctx.add(T.RESHAPE, [count, ctx.const_i32([1])], [as_vector])
            count = as_vector
        times = ctx.temp(var, "times")
        ctx.add(T.CONCAT, [ctx.const_i32([1] * (dim + 1)), count, ctx.const_i32([1] * (rank - dim - 1)),
                           ctx.const_i32(0)], [times])
    spread = ctx.temp(var, "spread")
    ctx.add(T.UNSQUEEZE, [x, ctx.const_i32([dim + 1])], [spread])
    tiled = ctx.temp(var, "tiled")
    ctx.add(T.TILE, [spread, times], [tiled])
    ctx.add(T.FLATTEN, [tiled, ctx.const_i32(dim), ctx.const_i32(dim + 1)], [out])


# -- moving elements -----------------------------------------------------------------------------------


@converter("shuffle_channel", emits=[T.CHANNEL_SHUFFLE])
def convert_shuffle_channel(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    ctx.add(T.CHANNEL_SHUFFLE, [x, ctx.const_i32(v.attr_int("group", 1))], [ctx.output(v.output("Out"))])


def check_channel_shuffle(op, ctx) -> str | None:
    v = OpView(op)
    layout = v.attr("data_format", "NCHW")
    if layout not in ("NCHW", "AnyLayout", "NHWC"):
        return f"data_format '{layout}' is neither NCHW nor NHWC"
    return None


@converter("channel_shuffle", emits=[T.CHANNEL_SHUFFLE, T.TRANSPOSE], check=check_channel_shuffle)
def convert_channel_shuffle(ctx: ConversionContext, v: OpView) -> None:
    """paddle.nn.functional.channel_shuffle: `groups` on an NCHW input (the same regrouping); an NHWC input is
    transposed to NCHW and back (CHANNEL_SHUFFLE regroups axis 1)."""
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    groups = ctx.const_i32(v.attr_int("groups", 1))
    if v.attr("data_format", "NCHW") != "NHWC":
        ctx.add(T.CHANNEL_SHUFFLE, [x, groups], [out])
        return
    first, shuffled = ctx.temp(v.output("Out"), "channel_first"), ctx.temp(v.output("Out"), "shuffled")
    ctx.add(T.TRANSPOSE, [x, ctx.const_i32([0, 3, 1, 2])], [first])
    ctx.add(T.CHANNEL_SHUFFLE, [first, groups], [shuffled])
    ctx.add(T.TRANSPOSE, [shuffled, ctx.const_i32([0, 2, 3, 1])], [out])


# -- pixel_shuffle ------------------------------------------------------------------------------------------------

def _check_pixel_shuffle(op, ctx) -> str | None:
    v = OpView(op)
    reason = layout_reason(op, "data_format")
    if reason:
        return reason
    factor = v.attr_int("upscale_factor", 1)
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return None
    if len(dims) != 4 or not known_dims(dims[1:]):
        return "pixel_shuffle needs a 4-D input with known channel and spatial dims"
    channels = dims[3] if is_channel_last(op, "data_format") else dims[1]
    if factor <= 0 or channels % (factor * factor):
        return f"{channels} channels do not split by upscale_factor {factor} squared"
    return None


@converter("pixel_shuffle", emits=[T.RESHAPE, T.TRANSPOSE], check=_check_pixel_shuffle)
def convert_pixel_shuffle(ctx: ConversionContext, v: OpView) -> None:
    # [N, C*r*r, H, W] -> [N, C, r, r, H, W] -> [N, C, H, r, W, r] -> [N, C, H*r, W*r] (channel-first).
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    r = v.attr_int("upscale_factor", 1)
    if is_channel_last(v.op, "data_format"):
        _, h, w, c = x.type.dims
        split, perm, merged = [0, h, w, c // (r * r), r, r], [0, 1, 4, 2, 5, 3], [0, h * r, w * r, c // (r * r)]
    else:
        _, c, h, w = x.type.dims
        split, perm, merged = [0, c // (r * r), r, r, h, w], [0, 1, 4, 2, 5, 3], [0, c // (r * r), h * r, w * r]
    emit_chain(ctx, out_name, x, [
        ("split", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32(split)], [out])),
        ("interleave", transpose_step(perm)),
        ("merge", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32(merged)], [out])),
    ])
