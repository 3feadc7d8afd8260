"""Converters for the poolings: pool2d and max_pool2d_with_index (AVERAGE_POOL_2D, MAX_POOL_2D and their
adaptive forms; where Paddle's windows differ from the operation's, the input is padded first and an average
corrected), pool3d (strided slices combined axis by axis, see below), and unpool (max unpooling: GATHERs of the
pooled values compared with their indices, see below).

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry), `conv` and the standard;
unpool reads its run-time output size as conv2d_transpose does (`conv.run_time_hw`).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from converters.attrs import input_dims, known_dim, known_dims
from converters.context import ConversionContext
from converters.conv import run_time_hw
from converters.emit import (
    binary,
    cast_to,
    compare,
    emit_chain,
    fuse_none,
    transpose_step,
)
from converters.layout import (
    AUTO_PAD_OF,
    channel_last_perm,
    explicit_pads,
    is_channel_last,
    layout_reason,
    padding_reason,
    to_channel_first,
)
from converters.op_view import OpView, var_attr_names
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import (
    AutoPad,
    PadMode,
    Precision,
    precision_dtype,
)
from nnadapter_bridge.nnadapter.codes import (
    OperationType as T,
)
from nnadapter_bridge.nnadapter.operations.window import window_out_size

# -- pooling ---------------------------------------------------------------------------------------------------

def _pool_geometry(op, dims):
    """(kind, kernel, strides, pads, auto_pad) where kind is 'window', 'global' or 'adaptive'."""
    v = OpView(op)
    ksize = v.attr_ints("ksize", [1, 1])
    strides = v.attr_ints("strides", [1, 1])
    pads = explicit_pads(v.attr_ints("paddings", [0, 0]))
    auto_pad = AUTO_PAD_OF[v.attr_str("padding_algorithm", "EXPLICIT")]
    if v.attr("global_pooling", False) or (v.attr("adaptive", False) and ksize == [1, 1]):
        return "global", ksize, strides, [0, 0, 0, 0], AutoPad.AUTO_PAD_NONE
    if v.attr("adaptive", False):
        return "adaptive", ksize, strides, pads, auto_pad
    return "window", ksize, strides, pads, auto_pad


def _pool_check_common(op, ctx) -> str | None:
    v = OpView(op)
    reason = padding_reason(op)
    if reason:
        return reason
    if len(v.attr_ints("ksize", [1, 1])) != 2 or len(v.attr_ints("strides", [1, 1])) != 2:
        return "ksize and strides must hold 2 values"
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 4:
        return f"only 2-D pooling on 4-D inputs is converted, X has rank {len(dims)}"
    return layout_reason(op, "data_format")


def _overhang(size, kernel, stride, before, after) -> bool:
    """True when ceil_mode adds a window that reaches past the explicit padding."""
    span = size + before + after - kernel
    return span % stride != 0


def _trunc_div(a: int, b: int) -> int:
    """C++ integer division (toward zero), which Paddle's output-size formulas use."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _paddle_pool_windows(size: int, k: int, s: int, before: int, after: int, ceil_mode: bool, exclusive: bool):
    """Paddle's 2-D pooling along one axis: (output length, divisor per output position). The length is
    (size - k + before + after [+ s - 1]) / s + 1 in C++ integers (a kernel past the padded input still gives
    one position); window i spans [i*s - before, min(i*s - before + k, size + before)) (the leading pad bounds
    both ends: Paddle's kernel takes one pad per axis), its divisor is that span (exclusive=false) or the part
    inside the input (exclusive)."""
    out = _trunc_div(size - k + before + after + (s - 1 if ceil_mode else 0), s) + 1
    start = np.arange(max(out, 0)) * s - before
    end = np.minimum(start + k, size + before)
    if exclusive:
        return out, np.minimum(end, size) - np.maximum(start, 0)
    return out, end - start


def _operation_pool_windows(size: int, k: int, s: int, before: int, after: int, ceil_mode: bool, exclusive: bool):
    """The same for AVERAGE_POOL_2D / MAX_POOL_2D (nnadapter.operations.pool): floor/ceil length, divisor
    bounded by the trailing pad (count_include_pad) or the input."""
    out = window_out_size(size, k, s, before, after, 1, ceil_mode)
    start = np.arange(max(out, 0)) * s - before
    if exclusive:
        return out, np.minimum(start + k, size) - np.maximum(start, 0)
    return out, np.minimum(start + k, size + after) - start


def _paddle_pool_form(ctx, op, x, ksize, strides, pads, auto_pad, pooling_type):
    """None when the pooling operation computes what Paddle's kernel does for `x`; else (out_hw, correction):
    the output size and, for an average, the factor ksize-area / Paddle's divisor (NaN where that divisor is
    0: Paddle's 0 / 0) that turns an average over zero-padded ksize windows into Paddle's. Needs the spatial dims
    (unknown: None, the operation's own rule applies)."""
    v = OpView(op)
    dims = x.type.dims
    if auto_pad not in (AutoPad.AUTO_PAD_NONE, AutoPad.AUTO_PAD_VALID) or not known_dims(dims[2:4]) \
            or x.type.is_quantized:
        return None
    if auto_pad == AutoPad.AUTO_PAD_VALID:
        pads = [0, 0, 0, 0]
    ceil_mode = v.attr_bool("ceil_mode", False)
    exclusive = v.attr_bool("exclusive", True)
    paddle, ours = [], []
    for a in (0, 1):
        args = (int(dims[2 + a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1], ceil_mode, exclusive)
        paddle.append(_paddle_pool_windows(*args))
        ours.append(_operation_pool_windows(*args))
    out_hw = [paddle[0][0], paddle[1][0]]
    if min(out_hw) <= 0:  # _check_pool2d sends these to the host
        raise ctx.error(f"Paddle's pool2d output would be {out_hw} for an input of {list(dims)}")
    same_size = out_hw == [ours[0][0], ours[1][0]]
    if pooling_type == "max":
        return None if same_size else (out_hw, None)
    divisor = paddle[0][1][:, None] * paddle[1][1][None, :]
    if same_size and np.array_equal(divisor, ours[0][1][:, None] * ours[1][1][None, :]) and np.all(divisor > 0):
        return None
    with np.errstate(divide="ignore"):
        correction = np.where(divisor != 0, float(ksize[0] * ksize[1]) / np.where(divisor != 0, divisor, 1), np.nan)
    return out_hw, correction


def _paddle_pool_steps(ctx, op, x, ksize, strides, pads, auto_pad, pooling_type, form) -> list:
    """Chain steps for _paddle_pool_form's case: the input padded so every window of Paddle's output fits
    (zeros for an average, which then divides by the ksize area and is corrected; a max pools with that
    padding as its own, which it skips), then the pooling without ceil_mode."""
    out_hw, correction = form
    dims = x.type.dims
    if auto_pad == AutoPad.AUTO_PAD_VALID:
        pads = [0, 0, 0, 0]
    top, left = pads[0], pads[2]
    extra = [max((out_hw[a] - 1) * strides[a] + ksize[a] - pads[2 * a] - int(dims[2 + a]), 0) for a in (0, 1)]
    none = ctx.const_i32(int(AutoPad.AUTO_PAD_NONE))
    if pooling_type == "max":
        return [("pool", lambda ctx, x, out: ctx.add(
            T.MAX_POOL_2D, [x, none, ctx.const_i32([top, extra[0], left, extra[1]]), ctx.const_i32(ksize),
                            ctx.const_i32(strides), ctx.const_bool(False), ctx.const_bool(False),
                            ctx.const_i32(int(Precision.INT32)), fuse_none(ctx)], [out, None]))]
    steps = [
        ("padded", lambda ctx, x, out: ctx.add(
            T.PAD, [x, ctx.const_i32([0, 0, 0, 0, top, extra[0], left, extra[1]]),
                    ctx.const_i32(int(PadMode.CONSTANT)), ctx.const_like(0.0, x)], [out])),
        ("pool", lambda ctx, x, out: ctx.add(
            T.AVERAGE_POOL_2D, [x, none, ctx.const_i32([0, 0, 0, 0]), ctx.const_i32(ksize), ctx.const_i32(strides),
                                ctx.const_bool(False), ctx.const_bool(True), fuse_none(ctx)], [out])),
    ]
    if not np.all(correction == 1.0):
        dtype = precision_dtype(x.type.precision)
        factor = np.asarray(correction, dtype=dtype).reshape(1, 1, *out_hw)
        steps.append(("paddle_divisor", lambda ctx, x, out: binary(ctx, T.MUL, x, ctx.const(factor), out)))
    return steps


def _check_pool2d(op, ctx) -> str | None:
    v = OpView(op)
    reason = _pool_check_common(op, ctx)
    if reason:
        return reason
    pooling_type = v.attr_str("pooling_type", "max")
    if pooling_type not in ("max", "avg"):
        return f"pooling_type '{pooling_type}' is not max or avg"
    dims = input_dims(ctx, op, "X")
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, dims or ())
    if dims is not None and known_dims(dims):
        if kind == "window" and auto_pad in (AutoPad.AUTO_PAD_NONE, AutoPad.AUTO_PAD_VALID):
            hw = dims[1:3] if is_channel_last(op, "data_format") else dims[2:4]
            pads = pads if auto_pad == AutoPad.AUTO_PAD_NONE else [0, 0, 0, 0]
            out_hw = [_paddle_pool_windows(int(hw[a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1],
                                           v.attr_bool("ceil_mode", False), True)[0] for a in (0, 1)]
            if min(out_hw) <= 0:
                return (f"the kernel {ksize} leaves Paddle an output of {out_hw} for an input of {list(dims)} (an "
                        f"empty tensor, or Paddle's error below 0), which the host kernel gives")
        return None  # the spatial dims are known: convert_pool2d takes Paddle's windows exactly
    if (pooling_type == "avg" and kind == "window" and v.attr("ceil_mode", False)
            and not v.attr("exclusive", True) and auto_pad == AutoPad.AUTO_PAD_NONE):
        # Paddle divides a non-exclusive average by the full ksize area even for the window ceil_mode
        # adds past the padding; AVERAGE_POOL_2D's count_include_pad never counts that overhang.
        if dims is None or not known_dims(dims):
            return "ceil_mode with exclusive=false needs known spatial dims to rule out a partial last window"
        hw = dims[1:3] if is_channel_last(op, "data_format") else dims[2:4]
        if any(_overhang(hw[a], ksize[a], strides[a], pads[2 * a], pads[2 * a + 1]) for a in (0, 1)):
            return ("avg pool2d with ceil_mode and exclusive=false over a partial last window: Paddle's divisor "
                    "(the whole ksize) differs from AVERAGE_POOL_2D's count_include_pad")
    return None


def _pool_steps(ctx, op, x, kind, ksize, strides, pads, auto_pad, pooling_type, index_operand=None):
    """The pooling operation (as a chain step) for an NCHW operand x."""
    v = OpView(op)
    ceil_mode = v.attr_bool("ceil_mode", False)
    dims = x.type.dims
    with_index = index_operand is not None
    if kind == "global" and known_dims(dims[2:4]):
        kind, ksize, strides, pads = "window", [dims[2], dims[3]], [1, 1], [0, 0, 0, 0]
        ceil_mode = False
    elif kind == "global":
        kind, ksize = "adaptive", [1, 1]  # one window over an unknown plane

    if kind == "adaptive":
        if pooling_type == "avg":
            return lambda ctx, x, out: ctx.add(T.ADAPTIVE_AVERAGE_POOL_2D, [x, ctx.const_i32(ksize)], [out])
        return lambda ctx, x, out: ctx.add(
            T.ADAPTIVE_MAX_POOL_2D,
            [x, ctx.const_i32(ksize), ctx.const_bool(with_index), ctx.const_i32(int(Precision.INT32))],
            [out, index_operand])
    head = lambda ctx: [ctx.const_i32(int(auto_pad)), ctx.const_i32(pads), ctx.const_i32(ksize),  # noqa: E731
                        ctx.const_i32(strides), ctx.const_bool(ceil_mode)]
    if pooling_type == "avg":
        include_pad = not v.attr_bool("exclusive", True)
        return lambda ctx, x, out: ctx.add(
            T.AVERAGE_POOL_2D, [x] + head(ctx) + [ctx.const_bool(include_pad), fuse_none(ctx)], [out])
    return lambda ctx, x, out: ctx.add(
        T.MAX_POOL_2D,
        [x] + head(ctx) + [ctx.const_bool(with_index), ctx.const_i32(int(Precision.INT32)), fuse_none(ctx)],
        [out, index_operand],
    )


_POOL_EMITS = [T.AVERAGE_POOL_2D, T.MAX_POOL_2D, T.ADAPTIVE_AVERAGE_POOL_2D, T.ADAPTIVE_MAX_POOL_2D, T.TRANSPOSE,
               T.PAD, T.MUL]


@converter("pool2d", emits=_POOL_EMITS, check=_check_pool2d)
def convert_pool2d(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    channel_last = is_channel_last(v.op, "data_format")
    if channel_last:
        x = to_channel_first(ctx, x, out_name)
    kind, ksize, strides, pads, auto_pad = _pool_geometry(v.op, x.type.dims)
    pooling_type = v.attr_str("pooling_type", "max")
    form = _paddle_pool_form(ctx, v.op, x, ksize, strides, pads, auto_pad, pooling_type) if kind == "window" else None
    if form is not None:
        steps = _paddle_pool_steps(ctx, v.op, x, ksize, strides, pads, auto_pad, pooling_type, form)
    else:
        steps = [("pool", _pool_steps(ctx, v.op, x, kind, ksize, strides, pads, auto_pad, pooling_type))]
    if channel_last:
        steps.append(("channel_last", transpose_step(channel_last_perm(4))))
    emit_chain(ctx, out_name, x, steps)


def _check_max_pool_with_index(op, ctx) -> str | None:
    v = OpView(op)
    reason = _pool_check_common(op, ctx)
    if reason:
        return reason
    if v.attr_str("padding_algorithm", "EXPLICIT") == "SAME":
        return "max_pool2d_with_index has no SAME padding"
    dims = input_dims(ctx, op, "X")
    kind, ksize, strides, pads, auto_pad = _pool_geometry(op, dims or ())
    if dims is not None and known_dims(dims[2:4]) and kind == "window":
        pads = pads if auto_pad == AutoPad.AUTO_PAD_NONE else [0, 0, 0, 0]
        ceil_mode = v.attr_bool("ceil_mode", False)
        sizes = [(_paddle_pool_windows(int(dims[2 + a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1], ceil_mode,
                                       True)[0],
                  window_out_size(int(dims[2 + a]), ksize[a], strides[a], pads[2 * a], pads[2 * a + 1], 1, ceil_mode))
                 for a in (0, 1)]
        if any(paddle != ours for paddle, ours in sizes):
            return (f"the kernel {ksize} reaches past the padded input {list(dims)}: Paddle's output size "
                    f"{[p for p, _ in sizes]} (C++ integer division) is not MAX_POOL_2D's (the host kernel gives it)")
    return None


@converter("max_pool2d_with_index", emits=[T.MAX_POOL_2D, T.ADAPTIVE_MAX_POOL_2D], check=_check_max_pool_with_index)
def convert_max_pool2d_with_index(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    kind, ksize, strides, pads, auto_pad = _pool_geometry(v.op, x.type.dims)
    if kind == "global" and not v.attr("global_pooling", False):
        kind = "adaptive"  # adaptive [1, 1] keeps its flat argmax indices either way
    mask_name = v.optional_output("Mask")
    mask = ctx.output(mask_name) if mask_name else ctx.temp(out_name, "mask")
    step = _pool_steps(ctx, v.op, x, kind, ksize, strides, pads, auto_pad, "max", index_operand=mask)
    emit_chain(ctx, out_name, x, [("pool", step)])


# -- max unpooling ----------------------------------------------------------------------------------------------
#
# Paddle's unpool (F.max_unpool2d; ENet's decoder) writes each X value at its flat h * W_out + w position in
# Indices, zeros elsewhere. NNAdapter has no scatter. When the windows tile the input (ksize == strides, no
# padding) and Indices is the Mask of a max_pool2d_with_index with those same windows, every index lies in its
# own window: output position (h, w) can only receive the cell (h // kh, w // kw), and receives it exactly when
# that cell's index is h * W_out + w. So X and Indices are GATHERed at the clamped cell of every output position
# (rows past the tiled input clamp to the last cell, whose index never names them: zeros, as Paddle leaves them),
# compared with the flat positions (RANGE), and WHERE(equal, X, 0). The output size is the run-time
# `output_size` tensor (ENet passes the pooled tensor's shape), the constant one, or Paddle's default H * k.
# Other indices (from elsewhere, or overlapping windows) could land outside their window: the host kernel.

def _unpool_indices_source(op, ctx) -> str | None:
    """Why Indices is not the Mask of a max_pool2d_with_index over the same ksize/strides (None when it is)."""
    v = OpView(op)
    graph, current = getattr(ctx, "graph", None), getattr(ctx, "current_op", None)
    if graph is None or current is None:
        return "the op producing Indices is not known here"
    name = v.input("Indices")
    writers = [w for w in graph.writers(name, current.block_idx) if w.index < current.index]
    pool = writers[-1] if writers else None
    if pool is None or pool.type != "max_pool2d_with_index" or name not in pool.output("Mask"):
        return "Indices is not the Mask of a max_pool2d_with_index (its indices may leave their windows)"
    p = OpView(ctx.resolved(pool))
    same = (p.attr_ints("ksize", []) == v.attr_ints("ksize", []) and p.attr_ints("strides", []) == v.attr_ints(
        "strides", []) and not any(p.attr_ints("paddings", [0, 0])) and not p.attr_bool("global_pooling")
        and not p.attr_bool("adaptive"))
    if not same:
        return "Indices comes from a max_pool2d_with_index whose windows are not the unpool's"
    return None


def _check_unpool(op, ctx) -> str | None:
    v = OpView(op)
    if v.attr_str("unpooling_type", "max") != "max":
        return f"unpooling_type '{v.attr_str('unpooling_type', 'max')}' is not max"
    if v.attr_str("data_format", "NCHW") != "NCHW":
        return f"data_format '{v.attr_str('data_format', 'NCHW')}' is not NCHW"
    ksize, strides = v.attr_ints("ksize", []), v.attr_ints("strides", [])
    if len(ksize) != 2 or ksize != strides or any(v.attr_ints("paddings", [0, 0])):
        return (f"the windows (ksize {ksize}, strides {strides}, paddings {v.attr_ints('paddings', [0, 0])}) "
                "do not tile the input")
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 4:
        return f"X must be 4-D, got dims {list(dims)}"
    return _unpool_indices_source(op, ctx)


@converter(
    "unpool",
    emits=[
        T.SHAPE,
        T.SLICE,
        T.CONCAT,
        T.RESHAPE,
        T.MUL,
        T.CAST,
        T.RANGE,
        T.FLOOR_DIV,
        T.SUB,
        T.MIN,
        T.GATHER,
        T.UNSQUEEZE,
        T.ADD,
        T.EQUAL,
        T.WHERE,
    ],
    check=_check_unpool,
)
def convert_unpool(ctx: ConversionContext, v: OpView) -> None:
    var = v.output("Out")
    x = ctx.input(v.input("X"))
    indices = ctx.input(v.input("Indices"))
    kernel = v.attr_ints("ksize", [])

    def out(type_, inputs, purpose):
        result = ctx.temp(var, purpose)
        ctx.add(type_, inputs, [result])
        return result

    def as_i32(value, purpose):
        return value if value.type.precision == Precision.INT32 else cast_to(
            ctx, value, Precision.INT32, ctx.temp(var, purpose))

    in_shape = out(T.SHAPE, [x, ctx.const_i32(int(Precision.INT32))], "in_shape")
    if var_attr_names(v.op.attrs.get("output_size")):  # a run-time size (ENet: the pooled tensor's shape)
        size = run_time_hw(ctx, v.op, "output_size", var)
    elif v.attr_ints("output_size", []):
        size = ctx.const_i32(v.attr_ints("output_size", [])[-2:])
    else:  # Paddle's default (in - 1) * stride - 2 * padding + ksize, which is in * k here
        in_hw = out(T.SLICE, [in_shape, ctx.const_i32([0]), ctx.const_i32([2]), ctx.const_i32([4]), None], "in_hw")
        size = binary(ctx, T.MUL, in_hw, ctx.const_i32(kernel), ctx.temp(var, "out_hw"))
    size_w = out(T.SLICE, [size, ctx.const_i32([0]), ctx.const_i32([1]), ctx.const_i32([2]), None], "out_w")

    def source_cells(axis):
        """RANGE over output axis `axis` (2: rows, 3: columns), and the input cell each reads, clamped."""
        count = out(T.SLICE, [size, ctx.const_i32([0]), ctx.const_i32([axis - 2]), ctx.const_i32([axis - 1]),
                              None], f"count{axis}")
        positions = out(T.RANGE, [ctx.const_i32(0), count, ctx.const_i32(1)], f"positions{axis}")
        cell = binary(ctx, T.FLOOR_DIV, positions, ctx.const_i32(kernel[axis - 2]), ctx.temp(var, f"cell{axis}"))
        last = out(T.SLICE, [in_shape, ctx.const_i32([0]), ctx.const_i32([axis]), ctx.const_i32([axis + 1]), None],
                   f"in_count{axis}")
        last = binary(ctx, T.SUB, last, ctx.const_i32(1), ctx.temp(var, f"last{axis}"))
        return positions, binary(ctx, T.MIN, cell, last, ctx.temp(var, f"source{axis}"))

    rows, source_rows = source_cells(2)
    cols, source_cols = source_cells(3)

    def spread(value, purpose):
        by_row = out(T.GATHER, [value, source_rows, ctx.const_i32(2)], f"{purpose}_rows")
        return out(T.GATHER, [by_row, source_cols, ctx.const_i32(3)], purpose)

    row_starts = binary(ctx, T.MUL, out(T.UNSQUEEZE, [rows, ctx.const_i32([1])], "rows_column"), size_w,
                        ctx.temp(var, "row_starts"))
    positions = binary(ctx, T.ADD, row_starts, cols, ctx.temp(var, "positions"))
    chosen = compare(ctx, T.EQUAL, spread(as_i32(indices, "indices_i32"), "indices"), positions,
                     ctx.temp(var, "chosen"))
    ctx.add(T.WHERE, [chosen, spread(x, "values"), ctx.const_like(0, x)], [ctx.output(var)])


# -- pool3d ----------------------------------------------------------------------------------------------------
# No NNAdapter operation pools in 3-D. A box window is separable: Paddle's average (all window elements summed, then
# divided once by the window's count) is the same sums axis by axis and one DIV. Along one axis, window offset i of a
# kernel k with stride s is the strided slice [i : n - (k - 1 - i) : s], which holds exactly Paddle's
# (n - k) // s + 1 positions (floor mode, no padding) without knowing n (unfold's trick, conv.py). Global average
# pooling (and adaptive to a 1x1x1 output) is a REDUCE_MEAN over the three spatial axes. UHRNet pools channel pairs
# this way (avg_pool3d of x.unsqueeze(1) with kernel (2, 1, 1)). A max pool3d stays with the host kernel: Paddle's
# scan `y > v ? y : v` from -FLT_MAX replaces a NaN by the next element, which MAX / REDUCE_MAX do not.

def _pool3d_spatial_axes(op) -> list[int]:
    return [1, 2, 3] if OpView(op).attr_str("data_format", "NCDHW") == "NDHWC" else [2, 3, 4]


def _check_pool3d(op, ctx) -> str | None:
    v = OpView(op)
    if v.attr_str("data_format", "NCDHW") not in ("NCDHW", "NDHWC"):
        return f"data_format '{v.attr_str('data_format', '')}' is not NCDHW or NDHWC"
    pooling_type = v.attr_str("pooling_type", "max")
    if pooling_type == "max":
        return "max pool3d is left to the host kernel (Paddle's max scan replaces a NaN by the next element)"
    if pooling_type != "avg":
        return f"pooling_type '{pooling_type}' is not max or avg"
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 5:
        return f"pool3d needs a 5-D input, X has rank {len(dims)}"
    ksize = v.attr_ints("ksize", [1, 1, 1])
    if v.attr("global_pooling", False) or (v.attr("adaptive", False) and ksize == [1, 1, 1]):
        return None
    if v.attr("adaptive", False):
        return "adaptive pool3d to an output other than 1x1x1 is not converted (its bins are not one strided window)"
    strides = v.attr_ints("strides", [1, 1, 1])
    if len(ksize) != 3 or len(strides) != 3:
        return "ksize and strides must hold 3 values"
    algorithm = v.attr_str("padding_algorithm", "EXPLICIT")
    if algorithm == "SAME" or (algorithm != "VALID" and any(v.attr_ints("paddings", [0, 0, 0]))):
        return "pool3d with padding is not converted (only unpadded windows decompose into strided slices)"
    if dims is not None and any(known_dim(dims[a]) and int(dims[a]) < k
                                for a, k in zip(_pool3d_spatial_axes(op), ksize)):
        return (f"the kernel {ksize} is larger than the input {list(dims)} (an empty output or Paddle's error), "
                f"which the host kernel gives")
    if v.attr_bool("ceil_mode", False):
        if dims is None or not all(known_dim(dims[a]) for a in _pool3d_spatial_axes(op)):
            return "ceil_mode needs the spatial dims known to rule out a partial last window"
        sizes = [int(dims[a]) for a in _pool3d_spatial_axes(op)]
        if any((n - k) % s for n, k, s in zip(sizes, ksize, strides)):
            return "ceil_mode adds a partial last window, which strided slices of whole windows do not give"
    return None


@converter("pool3d", emits=[T.SLICE, T.ADD, T.DIV, T.REDUCE_MEAN], check=_check_pool3d)
def convert_pool3d(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x = ctx.input(v.input("X"))
    axes = _pool3d_spatial_axes(v.op)
    ksize = v.attr_ints("ksize", [1, 1, 1])
    if v.attr("global_pooling", False) or (v.attr("adaptive", False) and ksize == [1, 1, 1]):
        ctx.add(T.REDUCE_MEAN, [x, ctx.const_i32(axes), ctx.const_bool(True)], [ctx.output(out_name)])
        return
    strides = v.attr_ints("strides", [1, 1, 1])
    end = np.iinfo(np.int32).max
    passes = [(axis, k, s) for axis, k, s in zip(axes, ksize, strides) if (k, s) != (1, 1)]
    count = int(np.prod(ksize))
    steps: list[tuple[str, Callable]] = []
    for axis, k, s in passes:
        def window(ctx, x, out, axis=axis, k=k, s=s):
            acc = None
            for i in range(k):
                stop = k - 1 - i
                part = out if k == 1 else ctx.temp(out_name, f"axis{axis}_offset{i}")
                ctx.add(T.SLICE, [x, ctx.const_i32([axis]), ctx.const_i32([i]), ctx.const_i32([-stop if stop else end]),
                                  ctx.const_i32([s])], [part])
                if acc is not None:
                    combined = out if i == k - 1 else ctx.temp(out_name, f"axis{axis}_upto{i}")
                    binary(ctx, T.ADD, acc, part, combined)
                    part = combined
                acc = part
        steps.append((f"axis{axis}", window))
    if count != 1:
        steps.append(("average", lambda ctx, x, out: binary(ctx, T.DIV, x, ctx.const_like(float(count), x), out)))
    if not steps:  # a 1x1x1 window with unit strides: the input itself
        steps.append(("copy", lambda ctx, x, out: ctx.add(
            T.SLICE, [x, ctx.const_i32([axes[0]]), ctx.const_i32([0]), ctx.const_i32([end]), ctx.const_i32([1])],
            [out])))
    emit_chain(ctx, out_name, x, steps)
