"""3-D convolution (NNAdapter has only 2-D ones), unfold (im2col) and fold (col2im), with no NNAdapter operation
(the standard's conv family): conv3d, depthwise_conv3d, conv3d_transpose, unfold, fold (converters/conv.py converts
unfold as strided slices, and a fold whose blocks tile the output as a reshape and transpose; these kernels run
them where a device declines those); im2sequence (the legacy im2col of OCR models: one row per window) and row_conv
(DeepSpeech's lookahead convolution over time).

conv3d is im2col + one contraction: a strided window view of the padded input (no copy) contracted with
the filter by einsum. conv3d_transpose is the reverse: one contraction gives every input voxel's
contribution per filter tap, and the taps are added into the output with one strided slice each (a loop
over the kd*kh*kw taps, never over voxels). Output sizes are Paddle's C++ integer divisions: a kernel past
the padded input gives one position, or none. The window helpers (`triple`, `window_pads`, `channels_last`,
`pair`) serve the 3-D poolings of `pool` too.

im2sequence gathers one strided slice per kernel tap (as unfold) and lays the windows out as rows. row_conv adds one
shifted, weighted copy of the input per lookahead step (a loop over the filter's rows, never over time steps); its
LoD form (sequences stacked by a LoD) is read as one sequence, as the host carries no LoD.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

SPATIAL = 3


def triple(values) -> list[int]:
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    if len(values) == 1:
        values = values * SPATIAL
    return values


def window_pads(io: OpScope, in_dims, kernel, strides, dilations) -> tuple[list, list, list]:
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


def channels_last(io: OpScope) -> bool:
    return io.attr("data_format", "NCDHW") in ("NDHWC", "NHWC")


def _window_view(x: np.ndarray, kernel, strides, dilations) -> np.ndarray:
    """[N, C, oD, oH, oW, kd, kh, kw] view of an already padded [N, C, D, H, W] input."""
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    view = np.lib.stride_tricks.sliding_window_view(x, spans, axis=(2, 3, 4))
    return view[:, :, ::strides[0], ::strides[1], ::strides[2], ::dilations[0], ::dilations[1], ::dilations[2]]


@host_kernel("conv3d", "depthwise_conv3d")
def conv3d(io: OpScope) -> None:
    x, w = io.input("Input"), io.input("Filter")
    if channels_last(io):
        x = x.transpose(0, 4, 1, 2, 3)
    groups = int(io.attr("groups", 1)) or 1
    kernel = list(w.shape[2:])
    strides = triple(io.attr("strides", [1, 1, 1]))
    dilations = triple(io.attr("dilations", [1, 1, 1]))
    before, after, dilations = window_pads(io, x.shape[2:], kernel, strides, dilations)
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(before, after)))
    cols = _window_view(padded, kernel, strides, dilations)
    n, c = x.shape[:2]
    o = w.shape[0]
    cols = cols.reshape(n, groups, c // groups, *cols.shape[2:])
    weight = w.astype(np.float64).reshape(groups, o // groups, c // groups, *kernel)
    out = np.einsum("ngcdhwxyz,gocxyz->ngodhw", cols, weight, optimize=True)
    out = out.reshape(n, o, *out.shape[3:]).astype(x.dtype)
    if channels_last(io):
        out = out.transpose(0, 2, 3, 4, 1)
    io.set_output("Output", np.ascontiguousarray(out))


@host_kernel("conv3d_transpose")
def conv3d_transpose(io: OpScope) -> None:
    x, w = io.input("Input"), io.input("Filter")
    if channels_last(io):
        x = x.transpose(0, 4, 1, 2, 3)
    groups = int(io.attr("groups", 1)) or 1
    kernel = list(w.shape[2:])
    strides = triple(io.attr("strides", [1, 1, 1]))
    dilations = triple(io.attr("dilations", [1, 1, 1]))
    before, after, dilations = window_pads(io, x.shape[2:], kernel, strides, dilations)
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
    if channels_last(io):
        out = out.transpose(0, 2, 3, 4, 1)
    io.set_output("Output", np.ascontiguousarray(out))


def pair(io: OpScope, name: str, default) -> list:
    values = [int(v) for v in io.attr(name, default)]
    return values * 2 if len(values) == 1 else values


def _four_paddings(io: OpScope) -> list:
    """unfold's and fold's `paddings`: 1, 2 or 4 values, as 4."""
    paddings = [int(p) for p in io.attr("paddings", [0, 0, 0, 0])]
    return paddings * 4 if len(paddings) == 1 else paddings * 2 if len(paddings) == 2 else paddings


@host_kernel("unfold")
def unfold(io: OpScope) -> None:
    x = io.input("X")
    if x.ndim != 4:
        raise io.error(f"X must be 4-D [N, C, H, W], got shape {list(x.shape)}")
    kh, kw = pair(io, "kernel_sizes", [1, 1])
    sh, sw = pair(io, "strides", [1, 1])
    dh, dw = pair(io, "dilations", [1, 1])
    paddings = _four_paddings(io)
    top, left, bottom, right = paddings  # Paddle's order: [top, left, bottom, right]
    n, c, h, w = x.shape
    out_h = (h + top + bottom - (dh * (kh - 1) + 1)) // sh + 1
    out_w = (w + left + right - (dw * (kw - 1) + 1)) // sw + 1
    if out_h <= 0 or out_w <= 0:
        raise io.error(f"the sliding blocks do not fit: output spatial size {out_h}x{out_w} for input "
                       f"{h}x{w}, kernel {kh}x{kw}, paddings {paddings}")
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    cols = np.empty((n, c, kh, kw, out_h, out_w), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = padded[:, :, i * dh: i * dh + sh * (out_h - 1) + 1: sh,
                                      j * dw: j * dw + sw * (out_w - 1) + 1: sw]
    io.set_output("Y", cols.reshape(n, c * kh * kw, out_h * out_w))


@host_kernel("fold")
def fold(io: OpScope) -> None:
    """col2im, Paddle's fold: X [N, C*kh*kw, L] holds L sliding blocks; each block's values are added into the
    [N, C, H, W] output (output_sizes) at its window, overlaps summing, the padding cut away."""
    x = io.input("X")
    if x.ndim != 3:
        raise io.error(f"X must be 3-D [N, C*kh*kw, L], got shape {list(x.shape)}")
    out_h, out_w = pair(io, "output_sizes", [1, 1])
    kh, kw = pair(io, "kernel_sizes", [1, 1])
    sh, sw = pair(io, "strides", [1, 1])
    dh, dw = pair(io, "dilations", [1, 1])
    paddings = _four_paddings(io)
    # Paddle's fold sizes its blocks with H padded by paddings[0] on both sides and W by paddings[1] (FoldInferMeta)
    # and refuses paddings[2] / [3] that differ from them (its col2im).
    top, left = paddings[0], paddings[1]
    bottom, right = top, left
    n, ckk, length = x.shape
    blocks_h = (out_h + top + bottom - (dh * (kh - 1) + 1)) // sh + 1
    blocks_w = (out_w + left + right - (dw * (kw - 1) + 1)) // sw + 1
    if ckk % (kh * kw) or blocks_h <= 0 or blocks_w <= 0 or blocks_h * blocks_w != length:
        raise io.error(f"X {list(x.shape)} does not hold {kh}x{kw} blocks of a {out_h}x{out_w} output with "
                       f"strides {[sh, sw]}, paddings {paddings}, dilations {[dh, dw]}")
    c = ckk // (kh * kw)
    cols = x.reshape(n, c, kh, kw, blocks_h, blocks_w)
    padded = np.zeros((n, c, out_h + top + bottom, out_w + left + right), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            padded[:, :, i * dh: i * dh + sh * (blocks_h - 1) + 1: sh,
                   j * dw: j * dw + sw * (blocks_w - 1) + 1: sw] += cols[:, :, i, j]
    io.set_output("Y", padded[:, :, top: top + out_h, left: left + out_w])


def _c_output_size(size: int, before: int, after: int, kernel: int, stride: int) -> int:
    """Paddle's Im2SeqOutputSize: (size + paddings - kernel) / stride + 1 with C's division (toward zero)."""
    span = size + before + after - kernel
    return (span // stride if span >= 0 else -(-span // stride)) + 1


def _image_windows(image: np.ndarray, out_h: int, out_w: int, kernel, strides, top: int, left: int) -> np.ndarray:
    """[out_h * out_w, C * kh * kw]: image [C, H, W]'s windows in row-major order, each (channel, row, column);
    positions outside the image (the padding, or an output size past the image) read 0."""
    kh, kw = kernel
    sh, sw = strides
    channels, height, width = image.shape
    need_h = max((out_h - 1) * sh + kh, 0)  # rows the windows span, from the top padding on
    need_w = max((out_w - 1) * sw + kw, 0)
    canvas = np.zeros((channels, max(need_h, top + height), max(need_w, left + width)), image.dtype)
    canvas[:, top:top + height, left:left + width] = image
    rows = np.empty((out_h, out_w, channels, kh, kw), image.dtype)
    for i in range(kh):
        for j in range(kw):
            rows[:, :, :, i, j] = canvas[:, i: i + sh * (out_h - 1) + 1: sh,
                                         j: j + sw * (out_w - 1) + 1: sw].transpose(1, 2, 0)
    return rows.reshape(out_h * out_w, channels * kh * kw)


@host_kernel("im2sequence")
def im2sequence(io: OpScope) -> None:
    """Paddle's Im2SequenceKernel: X [N, C, H, W] float32 -> Out [windows, C * kh * kw], every image's windows in
    row-major order; `paddings` is [top, left, bottom, right]. With Y (each image's real [height, width], float32)
    and more than one image, an image's windows cover only its real size divided by `out_stride` (rounded up); with
    one image Paddle ignores Y."""
    x = io.input("X")
    if x.dtype != np.float32:
        raise io.error(f"X must be float32 (Paddle's CPU kernel), got {x.dtype}")
    if x.ndim != 4:
        raise io.error(f"X must be 4-D [N, C, H, W], got shape {list(x.shape)}")
    kernel = pair(io, "kernels", [1, 1])
    strides = pair(io, "strides", [1, 1])
    top, left, bottom, right = _four_paddings(io)
    if min(kernel) <= 0 or min(strides) <= 0:
        raise io.error(f"kernels {kernel} and strides {strides} must be > 0")
    n, _, height, width = x.shape
    if io.has_input("Y") and n > 1:
        real = io.input("Y")
        if real.dtype != x.dtype or real.shape[0] != n or real.size != 2 * n:
            raise io.error(f"Y must hold each image's [height, width] as float32, [{n}, 2], got {real.dtype} "
                           f"{list(real.shape)}")
        out_stride = pair(io, "out_stride", [1, 1])
        if min(out_stride) <= 0:
            raise io.error(f"out_stride {out_stride} must be > 0")
        real = real.reshape(n, 2).astype(np.int64)  # C's float-to-int cast: toward zero
        if real.min() < 0:
            raise io.error(f"Y holds a negative image size: {real.tolist()}")
        real = -(-real // np.array(out_stride))  # divided by out_stride, rounded up
        sizes = [(_c_output_size(int(h), top, bottom, kernel[0], strides[0]),
                  _c_output_size(int(w), left, right, kernel[1], strides[1])) for h, w in real]
    else:
        sizes = [(_c_output_size(height, top, bottom, kernel[0], strides[0]),
                  _c_output_size(width, left, right, kernel[1], strides[1]))] * n
    if any(min(size) < 0 for size in sizes):
        raise io.error(f"the windows do not fit: output sizes {sizes} for images of {height}x{width}, kernels "
                       f"{kernel}, paddings {[top, left, bottom, right]}")
    rows = [_image_windows(x[i], out_h, out_w, kernel, strides, top, left) for i, (out_h, out_w) in enumerate(sizes)]
    columns = x.shape[1] * kernel[0] * kernel[1]
    io.set_output("Out", np.concatenate(rows) if rows else np.zeros((0, columns), x.dtype))


@host_kernel("row_conv")
def row_conv(io: OpScope) -> None:
    """Paddle's RowConvKernel (float32): Out[t] = sum over k < F of X[t + k] * Filter[k] (per feature), the steps
    past a sequence's end left out. X [batch, time, D] (the padded form) or [time, D] (the LoD form, read as one
    sequence); Filter [F, D], F = future_context_size + 1. The products are added in k order, as Paddle's loop."""
    x, weights = io.input("X"), io.input("Filter")
    for name, value in (("X", x), ("Filter", weights)):
        if value.dtype != np.float32:
            raise io.error(f"{name} must be float32 (Paddle's CPU kernel), got {value.dtype}")
    if x.ndim not in (2, 3):
        raise io.error(f"X must be [batch, time, D] or one sequence [time, D], got shape {list(x.shape)}")
    if weights.ndim != 2 or weights.shape[1] != x.shape[-1]:
        raise io.error(f"Filter must be [future_context_size + 1, {x.shape[-1]}], got shape {list(weights.shape)}")
    sequences = x if x.ndim == 3 else x[None]
    steps = sequences.shape[1]
    out = sequences * weights[0]
    for k in range(1, min(weights.shape[0], steps)):
        out[:, :steps - k] += sequences[:, k:] * weights[k]
    io.set_output("Out", out if x.ndim == 3 else out[0])
