"""Poolings with no NNAdapter operation (the standard's pool family): pool3d and max_pool3d_with_index; pool2d
and max_pool2d_with_index over a unit depth axis where their converters decline; lp_pool2d (power-average
pooling, paddle.nn.functional.lp_pool1d / lp_pool2d); maxout; unpool (max unpooling) where its converter declines,
and unpool3d.

Pooling windows are boxes, so a box sum is a sequence of 1-D reductions along D, H and W, each looping over
that axis's output positions only; a box max is Paddle's scan (from -FLT_MAX, in row-major window order, its
NaN rules) with one vectorized pass per tap offset. Output sizes are Paddle's C++ integer divisions: a kernel
past the padded input gives one position, or none.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy and `conv`'s window helpers; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.conv import SPATIAL, channels_last, triple, window_pads
from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


def _windows(size: int, out: int, k: int, s: int, pad: int, adaptive: bool) -> list[tuple[int, int]]:
    """[start, end) of each output position's window along one axis, clipped to the input (Paddle's rule)."""
    if adaptive:
        return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]
    spans = []
    for i in range(out):
        start = i * s - pad
        end = min(start + k, size)
        spans.append((max(start, 0), end))
    return spans


def _pool_geometry(io: OpScope, in_dims):
    ksize = triple(io.attr("ksize", [1, 1, 1]))
    strides = triple(io.attr("strides", [1, 1, 1]))
    adaptive = bool(io.attr("adaptive", False))
    if io.attr("global_pooling", False):
        return list(in_dims), [1, 1, 1], [0] * SPATIAL, [0] * SPATIAL, [1, 1, 1], True
    if adaptive:
        return list(in_dims), strides, [0] * SPATIAL, [0] * SPATIAL, ksize, True
    before, after, _ = window_pads(io, in_dims, ksize, strides, [1, 1, 1])
    ceil_mode = bool(io.attr("ceil_mode", False))
    outs = []
    for size, k, s, b, a in zip(in_dims, ksize, strides, before, after):
        span = size + b + a - k + (s - 1 if ceil_mode else 0)
        # C++ integer division, toward zero: a kernel past the padded input still gives one position (or none)
        out = (abs(span) // s) * (1 if span >= 0 else -1) + 1
        if out < 0:
            raise io.error(f"the output size must be >= 0 (Paddle's check), got {out} for input {list(in_dims)}, "
                           f"ksize {ksize}, strides {strides}")
        outs.append(out)
    return ksize, strides, before, after, outs, False


def _pool_spans(io: OpScope, in_dims):
    ksize, strides, before, _, outs, adaptive = _pool_geometry(io, in_dims)
    spans = [
        _windows(size, out, k, s, b, adaptive) for size, out, k, s, b in zip(in_dims, outs, ksize, strides, before)
    ]
    return spans, ksize, adaptive


# Paddle's max pool kernels start every window at -FLT_MAX (float64 too).
MAX_POOL_START = -float(np.finfo(np.float32).max)


def _max_pool_scan(x: np.ndarray, spans, with_index: bool):
    """Paddle's max pool over the [start, end) boxes `spans` (per axis D, H, W) of NCDHW `x`, scanning each
    window in row-major order from -FLT_MAX, vectorized over the output positions (one pass per tap offset).
    Without index: `y = y > v ? y : v` (a NaN is taken and replaced by the next element); with index
    (max_pool3d_with_index): `if (y < v) { y = v; index = position }` (never a NaN; index -1 when no element
    exceeds the start). Returns (values, flat d*H*W + h*W + w indices or None)."""
    d, h, w = x.shape[2:]
    starts = [np.asarray([a for a, _ in axis], np.int64) for axis in spans]
    ends = [np.asarray([b for _, b in axis], np.int64) for axis in spans]
    longest = [int((e - st).max()) if len(st) else 0 for st, e in zip(starts, ends)]
    out = np.full(x.shape[:2] + tuple(len(st) for st in starts), x.dtype.type(MAX_POOL_START), dtype=x.dtype)
    index = np.full(out.shape, -1, np.int64) if with_index else None
    for td in range(longest[0]):
        pd, vd = starts[0] + td, starts[0] + td < ends[0]
        for th in range(longest[1]):
            ph, vh = starts[1] + th, starts[1] + th < ends[1]
            for tw in range(longest[2]):
                pw, vw = starts[2] + tw, starts[2] + tw < ends[2]
                cd, ch, cw = np.minimum(pd, d - 1), np.minimum(ph, h - 1), np.minimum(pw, w - 1)
                value = x[:, :, cd][:, :, :, ch][:, :, :, :, cw]
                valid = vd[:, None, None] & vh[None, :, None] & vw[None, None, :]
                if with_index:
                    take = valid & (out < value)
                    flat = (cd[:, None, None] * h + ch[None, :, None]) * w + cw[None, None, :]
                    np.copyto(index, np.broadcast_to(flat, out.shape), where=take)
                else:
                    take = valid & ~(out > value)
                np.copyto(out, value, where=take)
    return out, index


@host_kernel("pool3d")
def pool3d(io: OpScope) -> None:
    x = io.input("X")
    if channels_last(io):
        x = x.transpose(0, 4, 1, 2, 3)
    spans, ksize, adaptive = _pool_spans(io, x.shape[2:])
    is_max = io.attr("pooling_type", "max") == "max"
    if not all(spans):  # Paddle's output has a 0-length axis: an empty tensor
        out = np.zeros(x.shape[:2] + tuple(len(axis) for axis in spans), x.dtype)
        io.set_output("Out", np.ascontiguousarray(out.transpose(0, 2, 3, 4, 1) if channels_last(io) else out))
        return
    if is_max:
        out, _ = _max_pool_scan(x, spans, with_index=False)
        if channels_last(io):
            out = out.transpose(0, 2, 3, 4, 1)
        io.set_output("Out", np.ascontiguousarray(out))
        return
    value, count = _box_sums(x.astype(np.float64), spans)
    if io.attr("exclusive", True) or adaptive:
        value = value / count
    else:
        value = value / _padded_extents(io, x.shape[2:])
    out = value.astype(x.dtype)
    if channels_last(io):
        out = out.transpose(0, 2, 3, 4, 1)
    io.set_output("Out", np.ascontiguousarray(out))


def _box_sums(value: np.ndarray, spans) -> tuple[np.ndarray, np.ndarray]:
    """The sums of [N, C, D, H, W] `value` over the [start, end) boxes `spans` (per axis D, H, W), one 1-D reduction
    per axis, and each box's element count ([1, 1, oD, oH, oW])."""
    count = np.ones((1, 1, 1, 1, 1))
    for axis in (2, 3, 4):
        parts, counts = [], []
        for start, end in spans[axis - 2]:
            parts.append(np.take(value, range(start, end), axis=axis).sum(axis=axis, keepdims=True))
            counts.append(end - start)
        value = np.concatenate(parts, axis=axis)
        shape = [1] * 5
        shape[axis] = len(counts)
        count = count * np.asarray(counts, np.float64).reshape(shape)
    return value, count


def _padded_extents(io: OpScope, in_dims) -> np.ndarray:
    """The non-exclusive average's divisor per output position, [1, 1, D, H, W]: Paddle's 2-D and 3-D kernels
    bound each window by the input plus the leading pad on both sides (they take one pad per axis), so pads
    count and the ceil_mode overhang does not."""
    ksize, strides, before, _, outs, _ = _pool_geometry(io, in_dims)
    divisor = np.ones((1, 1, 1, 1, 1))
    for axis, size, out, k, stride, pad_before in zip((2, 3, 4), in_dims, outs, ksize, strides, before):
        starts = np.arange(out) * stride - pad_before
        shape = [1] * 5
        shape[axis] = out
        divisor = divisor * (np.minimum(starts + k, size + pad_before) - starts).astype(np.float64).reshape(shape)
    return divisor


@host_kernel("max_pool3d_with_index")
def max_pool3d_with_index(io: OpScope) -> None:
    x = io.input("X")
    spans, _, _ = _pool_spans(io, x.shape[2:])
    value, index = _max_pool_scan(x, spans, with_index=True)
    io.set_output("Out", value)
    io.set_output("Mask", index.astype(np.int32))


class _Pool2dAsPool3d:
    """A pool2d op seen as a pool3d over a unit depth axis (attrs and tensors lifted, outputs lowered)."""

    def __init__(self, io: OpScope):
        self.io = io
        self.channels_last = io.attr("data_format", "NCHW") == "NHWC"

    def input(self, slot: str):
        x = self.io.input(slot)
        return x[:, None] if self.channels_last else x[:, :, None]

    def attr(self, name: str, default=None):
        value = self.io.attr(name, None)
        if name in ("ksize", "strides") and value is not None:
            return [1] + [int(v) for v in value]
        if name == "paddings":
            pads = [int(p) for p in (value if value is not None else [0, 0])]
            return [0] + pads if len(pads) == 2 else [0, 0] + pads
        if name == "data_format":
            return "NDHWC" if self.channels_last else "NCDHW"
        return default if value is None else value

    def set_output(self, slot: str, value) -> None:
        self.io.set_output(slot, np.ascontiguousarray(value[:, 0] if self.channels_last else value[:, :, 0]))

    def error(self, message: str):
        return self.io.error(message)


@host_kernel("pool2d")
def pool2d(io: OpScope) -> None:
    """Paddle's pool2d, for the cases its converter cannot express: pool3d over a unit depth axis (the same
    windows and divisors: Paddle's 2-D kernel bounds a non-exclusive window by the input plus the leading pad)."""
    pool3d(_Pool2dAsPool3d(io))


@host_kernel("max_pool2d_with_index")
def max_pool2d_with_index(io: OpScope) -> None:
    """max_pool2d_with_index (Out and the flat h * W + w Mask) as max_pool3d_with_index over a unit depth axis:
    the same windows, and the depth index is 0 so the flat index is the 2-D one."""
    max_pool3d_with_index(_Pool2dAsPool3d(io))


@host_kernel("maxout")
def maxout(io: OpScope) -> None:
    x = io.input("X")
    groups = int(io.attr("groups"))
    axis = int(io.attr("axis", 1)) % x.ndim
    channels = x.shape[axis]
    if channels % groups:
        raise io.error(f"the channel count {channels} must be divisible by groups {groups}")
    shape = x.shape[:axis] + (channels // groups, groups) + x.shape[axis + 1:]
    grouped = np.moveaxis(x.reshape(shape), axis + 1, 0)
    # Paddle's running max starts at -FLT_MAX and keeps `max > value ? max : value`: a NaN replaces the max
    # and is itself replaced by the next element, and a group of -inf gives -FLT_MAX
    out = np.full(grouped.shape[1:], -np.finfo(np.float32).max, dtype=x.dtype)
    for value in grouped:
        out = np.where(out > value, out, value)
    io.set_output("Out", out)


def _max_unpool(io: OpScope, layout: str) -> None:
    """Max unpooling over the spatial axes of `layout` (NCHW or NCDHW): zeros of [N, C, *out], then each X value
    written at its flat row-major position in Indices, in input order (a later value overwrites an earlier one).
    The output size is the last spatial values of `output_size` when given, else (in - 1) * stride - 2 * padding
    + ksize per axis."""
    x, indices = io.input("X"), np.asarray(io.input("Indices"))
    spatial = len(layout) - 2
    if io.attr("unpooling_type", "max") != "max":
        raise io.error(f"unpooling_type '{io.attr('unpooling_type', 'max')}' is not max (Paddle has only max)")
    if io.attr("data_format", layout) != layout:
        raise io.error(f"data_format '{io.attr('data_format', layout)}' is not {layout}")
    if x.ndim != spatial + 2 or indices.shape != x.shape:
        raise io.error(f"X must be {spatial + 2}-D and Indices of its shape, got {list(x.shape)} and "
                       f"{list(indices.shape)}")

    def per_axis(name: str, default: int) -> list[int]:
        values = [int(v) for v in io.attr(name, [default] * spatial)]
        return values * spatial if len(values) == 1 else values[:spatial]

    output_size = [int(v) for v in io.attr("output_size", [])]
    if len(output_size) >= spatial:
        out_dims = output_size[-spatial:]
    else:
        out_dims = [(size - 1) * stride - 2 * pad + k for size, stride, pad, k in
                    zip(x.shape[2:], per_axis("strides", 1), per_axis("paddings", 0), per_axis("ksize", 1))]
    n, c = x.shape[:2]
    plane = int(np.prod(out_dims))
    flat_x, flat_index = x.reshape(n * c, -1), indices.reshape(n * c, -1).astype(np.int64)
    if flat_index.size and (flat_index.min() < 0 or flat_index.max() >= plane):
        raise io.error(f"Indices hold positions outside the {'x'.join(map(str, out_dims))} output "
                       f"[{int(flat_index.min())}, {int(flat_index.max())}]")
    out = np.zeros((n * c, plane), x.dtype)
    rows = np.repeat(np.arange(n * c), flat_index.shape[1])
    out[rows, flat_index.reshape(-1)] = flat_x.reshape(-1)  # numpy keeps the last of repeated positions
    io.set_output("Out", out.reshape(n, c, *out_dims))


@host_kernel("unpool")
def unpool(io: OpScope) -> None:
    """Paddle's max unpooling (Unpool2dMaxFunctor): flat h * out_w + w positions in Indices."""
    _max_unpool(io, "NCHW")


@host_kernel("unpool3d")
def unpool3d(io: OpScope) -> None:
    """Paddle's 3-D max unpooling (Unpool3dMaxFunctor, paddle.nn.functional.max_unpool3d): flat
    (d * out_h + h) * out_w + w positions in Indices, as max_pool3d_with_index gives them."""
    _max_unpool(io, "NCDHW")


class _LpPool2dAsPool3d(_Pool2dAsPool3d):
    """An lp_pool2d op seen as a pool3d over a unit depth axis: its window attribute is `kernel_size`."""

    def attr(self, name: str, default=None):
        if name == "ksize":
            return [1] + [int(v) for v in self.io.attr("kernel_size", [1, 1])]
        return super().attr(name, default)


@host_kernel("lp_pool2d")
def lp_pool2d(io: OpScope) -> None:
    """Paddle's lp_pool2d: (sum of x ** norm_type over each window) ** (1 / norm_type), in X's dtype, over
    pool2d's windows (padding never counts); a negative x with a non-integer norm_type, or a negative sum with
    an odd one, gives NaN as C's pow does. norm_type inf is the window max, scanned as max pooling does (from
    -FLT_MAX; a NaN is replaced by the next element)."""
    view = _LpPool2dAsPool3d(io)
    x = view.input("x")
    if x.dtype not in (np.float32, np.float64):
        raise io.error(f"x must be float32 or float64, got {x.dtype}")
    if channels_last(view):
        x = x.transpose(0, 4, 1, 2, 3)
    spans, _, _ = _pool_spans(view, x.shape[2:])
    norm = float(io.attr("norm_type", 2.0))
    if not all(spans):
        out = np.zeros(x.shape[:2] + tuple(len(axis) for axis in spans), x.dtype)
    elif norm == np.inf:
        out, _ = _max_pool_scan(x, spans, with_index=False)
    else:
        real = x.dtype.type
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            sums, _ = _box_sums(np.power(x, real(norm)), spans)
            out = np.power(sums.astype(x.dtype), real(1.0) / real(norm))
    if channels_last(view):
        out = out.transpose(0, 2, 3, 4, 1)
    view.set_output("out", np.ascontiguousarray(out))
