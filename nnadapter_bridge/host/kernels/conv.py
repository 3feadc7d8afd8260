"""3-D convolution and pooling (NNAdapter has only 2-D ones): conv3d, conv3d_transpose, pool3d,
max_pool3d_with_index; pool2d and max_pool2d_with_index over a unit depth axis where their converters decline.

conv3d is im2col + one contraction: a strided window view of the padded input (no copy) contracted with
the filter by einsum. conv3d_transpose is the reverse: one contraction gives every input voxel's
contribution per filter tap, and the taps are added into the output with one strided slice each (a loop
over the kd*kh*kw taps, never over voxels). Pooling windows are boxes, so a box sum is a sequence of 1-D
reductions along D, H and W, each looping over that axis's output positions only; a box max is Paddle's
scan (from -FLT_MAX, in row-major window order, its NaN rules) with one vectorized pass per tap offset.
Output sizes are Paddle's C++ integer divisions: a kernel past the padded input gives one position, or none.
"""
from __future__ import annotations


import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

SPATIAL = 3


def _triple(values) -> list[int]:
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    if len(values) == 1:
        values = values * SPATIAL
    return values


def _pads(io: OpScope, in_dims, kernel, strides, dilations) -> tuple[list, list, list]:
    """Paddle's UpdatePaddingAndDilation: (pads_before, pads_after, dilations) for the padding algorithm."""
    paddings = [int(p) for p in io.attr("paddings", [0, 0, 0])]
    algorithm = io.attr("padding_algorithm", "EXPLICIT")
    if algorithm == "VALID":
        return [0] * SPATIAL, [0] * SPATIAL, dilations
    if algorithm == "SAME":
        before, after = [], []
        for size, k, s in zip(in_dims, kernel, strides):
            out = (size + s - 1) // s
            total = max((out - 1) * s + k - size, 0)
            before.append(total // 2)
            after.append(total - total // 2)
        return before, after, [1] * SPATIAL  # SAME ignores dilation in Paddle
    if len(paddings) == SPATIAL:
        return paddings, list(paddings), dilations
    if len(paddings) == 2 * SPATIAL:
        return paddings[0::2], paddings[1::2], dilations
    raise io.error(f"paddings must have 3 or 6 values, got {paddings}")


def _channels_last(io: OpScope) -> bool:
    return io.attr("data_format", "NCDHW") in ("NDHWC", "NHWC")


def _window_view(x: np.ndarray, kernel, strides, dilations) -> np.ndarray:
    """[N, C, oD, oH, oW, kd, kh, kw] view of an already padded [N, C, D, H, W] input."""
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    view = np.lib.stride_tricks.sliding_window_view(x, spans, axis=(2, 3, 4))
    return view[:, :, ::strides[0], ::strides[1], ::strides[2], ::dilations[0], ::dilations[1], ::dilations[2]]


@host_kernel("conv3d", "depthwise_conv3d")
def conv3d(io: OpScope) -> None:
    x, w = io.input("Input"), io.input("Filter")
    if _channels_last(io):
        x = x.transpose(0, 4, 1, 2, 3)
    groups = int(io.attr("groups", 1)) or 1
    kernel = list(w.shape[2:])
    strides = _triple(io.attr("strides", [1, 1, 1]))
    dilations = _triple(io.attr("dilations", [1, 1, 1]))
    before, after, dilations = _pads(io, x.shape[2:], kernel, strides, dilations)
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(before, after)))
    cols = _window_view(padded, kernel, strides, dilations)
    n, c = x.shape[:2]
    o = w.shape[0]
    cols = cols.reshape(n, groups, c // groups, *cols.shape[2:])
    weight = w.astype(np.float64).reshape(groups, o // groups, c // groups, *kernel)
    out = np.einsum("ngcdhwxyz,gocxyz->ngodhw", cols, weight, optimize=True)
    out = out.reshape(n, o, *out.shape[3:]).astype(x.dtype)
    if _channels_last(io):
        out = out.transpose(0, 2, 3, 4, 1)
    io.set_output("Output", np.ascontiguousarray(out))


@host_kernel("conv3d_transpose")
def conv3d_transpose(io: OpScope) -> None:
    x, w = io.input("Input"), io.input("Filter")
    if _channels_last(io):
        x = x.transpose(0, 4, 1, 2, 3)
    groups = int(io.attr("groups", 1)) or 1
    kernel = list(w.shape[2:])
    strides = _triple(io.attr("strides", [1, 1, 1]))
    dilations = _triple(io.attr("dilations", [1, 1, 1]))
    before, after, dilations = _pads(io, x.shape[2:], kernel, strides, dilations)
    n, c = x.shape[:2]
    o_per_group = w.shape[1]
    in_dims = x.shape[2:]
    # Every input voxel's contribution through every tap: [N, G, O/G, D, H, W, kd, kh, kw].
    contributions = np.einsum("ngcdhw,gcoxyz->ngodhwxyz",
                              x.astype(np.float64).reshape(n, groups, c // groups, *in_dims),
                              w.astype(np.float64).reshape(groups, c // groups, o_per_group, *kernel), optimize=True)
    contributions = contributions.reshape(n, groups * o_per_group, *in_dims, *kernel)
    full = [(size - 1) * s + (k - 1) * d + 1 for size, s, k, d in zip(in_dims, strides, kernel, dilations)]
    out_size = [int(v) for v in io.attr("output_size", [])]
    output_padding = [int(v) for v in io.attr("output_padding", [])] or [0] * SPATIAL
    if not out_size:
        out_size = [f - b - a + p for f, b, a, p in zip(full, before, after, output_padding)]
    # The buffer must hold the cropped window even when output_size/output_padding reach past `full`.
    extent = [max(f, b + s) for f, b, s in zip(full, before, out_size)]
    buffer = np.zeros((n, groups * o_per_group, *extent), np.float64)
    for kd in range(kernel[0]):
        for kh in range(kernel[1]):
            for kw in range(kernel[2]):
                starts = (kd * dilations[0], kh * dilations[1], kw * dilations[2])
                region = tuple(slice(st, st + (size - 1) * s + 1, s) for st, size, s in zip(starts, in_dims, strides))
                buffer[(slice(None), slice(None)) + region] += contributions[..., kd, kh, kw]
    crop = tuple(slice(b, b + s) for b, s in zip(before, out_size))
    out = buffer[(slice(None), slice(None)) + crop].astype(x.dtype)
    if _channels_last(io):
        out = out.transpose(0, 2, 3, 4, 1)
    io.set_output("Output", np.ascontiguousarray(out))


# -- pooling ------------------------------------------------------------------------------------------------

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
    ksize = _triple(io.attr("ksize", [1, 1, 1]))
    strides = _triple(io.attr("strides", [1, 1, 1]))
    adaptive = bool(io.attr("adaptive", False))
    if io.attr("global_pooling", False):
        return list(in_dims), [1, 1, 1], [0] * SPATIAL, [0] * SPATIAL, [1, 1, 1], True
    if adaptive:
        return list(in_dims), strides, [0] * SPATIAL, [0] * SPATIAL, ksize, True
    before, after, _ = _pads(io, in_dims, ksize, strides, [1, 1, 1])
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
    spans = [_windows(size, out, k, s, b, adaptive) for size, out, k, s, b in zip(in_dims, outs, ksize, strides, before)]
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
    if _channels_last(io):
        x = x.transpose(0, 4, 1, 2, 3)
    spans, ksize, adaptive = _pool_spans(io, x.shape[2:])
    is_max = io.attr("pooling_type", "max") == "max"
    if not all(spans):  # Paddle's output has a 0-length axis: an empty tensor
        out = np.zeros(x.shape[:2] + tuple(len(axis) for axis in spans), x.dtype)
        io.set_output("Out", np.ascontiguousarray(out.transpose(0, 2, 3, 4, 1) if _channels_last(io) else out))
        return
    if is_max:
        out, _ = _max_pool_scan(x, spans, with_index=False)
        if _channels_last(io):
            out = out.transpose(0, 2, 3, 4, 1)
        io.set_output("Out", np.ascontiguousarray(out))
        return
    value = x.astype(np.float64)
    count = np.ones((1, 1, 1, 1, 1))
    for axis in (2, 3, 4):
        parts, counts = [], []
        for start, end in spans[axis - 2]:
            window = np.take(value, range(start, end), axis=axis)
            parts.append(window.max(axis=axis, keepdims=True) if is_max else window.sum(axis=axis, keepdims=True))
            counts.append(end - start)
        value = np.concatenate(parts, axis=axis)
        shape = [1] * 5
        shape[axis] = len(counts)
        count = count * np.asarray(counts, np.float64).reshape(shape)
    if not is_max:
        if io.attr("exclusive", True) or adaptive:
            value = value / count
        else:
            value = value / _padded_extents(io, x.shape[2:])
    out = value.astype(x.dtype)
    if _channels_last(io):
        out = out.transpose(0, 2, 3, 4, 1)
    io.set_output("Out", np.ascontiguousarray(out))


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
