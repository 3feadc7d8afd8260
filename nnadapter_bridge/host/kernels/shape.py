"""Spatial rearrangements of NCHW/NHWC images with no NNAdapter operation: unfold (im2col),
temporal_shift, pixel_unshuffle, maxout, affine_grid, and unpool where its converter declines."""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


def pair(io: OpScope, name: str, default) -> list:
    values = [int(v) for v in io.attr(name, default)]
    return values * 2 if len(values) == 1 else values


@host_kernel("unfold")
def unfold(io: OpScope) -> None:
    x = io.input("X")
    if x.ndim != 4:
        raise io.error(f"X must be 4-D [N, C, H, W], got shape {list(x.shape)}")
    kh, kw = pair(io, "kernel_sizes", [1, 1])
    sh, sw = pair(io, "strides", [1, 1])
    dh, dw = pair(io, "dilations", [1, 1])
    paddings = [int(p) for p in io.attr("paddings", [0, 0, 0, 0])]
    if len(paddings) == 1:
        paddings *= 4
    elif len(paddings) == 2:
        paddings = paddings * 2
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


@host_kernel("temporal_shift")
def temporal_shift(io: OpScope) -> None:
    x = io.input("X")
    seg_num = int(io.attr("seg_num"))
    shift_ratio = float(io.attr("shift_ratio", 0.25))
    channels_last = io.attr("data_format", "NCHW") == "NHWC"
    if x.ndim != 4 or x.shape[0] % seg_num:
        raise io.error(f"X must be 4-D with a batch divisible by seg_num={seg_num}, got {list(x.shape)}")
    if channels_last:
        x = x.transpose(0, 3, 1, 2)
    nt, c, h, w = x.shape
    frames = x.reshape(nt // seg_num, seg_num, c, h, w)
    c1, c2 = int(c * shift_ratio), int(c * 2 * shift_ratio)
    out = np.zeros_like(frames)
    # channels [0, c1) take the previous frame, [c1, c2) the next one, the rest stay; a frame shifted in
    # from outside the segment is zeros
    out[:, 1:, :c1] = frames[:, :-1, :c1]
    out[:, :-1, c1:c2] = frames[:, 1:, c1:c2]
    out[:, :, c2:] = frames[:, :, c2:]
    out = out.reshape(nt, c, h, w)
    io.set_output("Out", out.transpose(0, 2, 3, 1).copy() if channels_last else out)


@host_kernel("pixel_unshuffle")
def pixel_unshuffle(io: OpScope) -> None:
    x = io.input("X")
    r = int(io.attr("downscale_factor"))
    channels_last = io.attr("data_format", "NCHW") == "NHWC"
    if channels_last:
        x = x.transpose(0, 3, 1, 2)
    n, c, h, w = x.shape
    if h % r or w % r:
        raise io.error(f"height {h} and width {w} must be divisible by downscale_factor {r}")
    out = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4).reshape(n, c * r * r, h // r, w // r)
    io.set_output("Out", out.transpose(0, 2, 3, 1).copy() if channels_last else np.ascontiguousarray(out))


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


def _grid_line(count: int, align_corners: bool, dtype) -> np.ndarray:
    """Paddle's affine_grid Linspace over [-1, 1] in `dtype`: start + i * step with step 2 / (count - 1) (align
    corners; one point gives -1 + 0 * inf = NaN, as Paddle), else step 2 / count from -(count - 1) / count."""
    t = np.dtype(dtype).type
    with np.errstate(all="ignore"):
        if align_corners:
            start, step = t(-1), t(2) / t(count - 1)
        else:
            start, step = t(-1) * (t(count - 1) / t(count)), t(2) / t(count)
        return (start + np.arange(count).astype(dtype) * step).astype(dtype)


@host_kernel("affine_grid")
def affine_grid(io: OpScope) -> None:
    """The sampling grid of affine transforms `Theta` [N, 2, 3] (4-D OutputShape [N, C, H, W]: out [N, H, W, 2])
    or [N, 3, 4] (5-D [N, C, D, H, W]: out [N, D, H, W, 3]): each output point is Theta @ [x, y, (z,) 1] with
    x, y, z on Paddle's [-1, 1] lines."""
    theta = io.input("Theta")
    if theta.dtype not in (np.float32, np.float64):
        raise io.error(f"Paddle's CPU kernel has no {theta.dtype} form (it takes float32, float64)")
    if io.has_input("OutputShape"):
        shape = [int(v) for v in np.asarray(io.input("OutputShape")).reshape(-1)]
    else:
        shape = [int(v) for v in io.attr("output_shape", [])]
    align = bool(io.attr("align_corners", True))
    spatial = shape[2:]
    if len(shape) not in (4, 5) or theta.ndim != 3 or theta.shape != (shape[0], len(spatial), len(spatial) + 1):
        raise io.error(f"Theta {list(theta.shape)} does not fit the output shape {shape} (4-D needs Theta "
                       "[N, 2, 3], 5-D [N, 3, 4])")
    lines = [_grid_line(n, align, theta.dtype) for n in spatial]  # [D,] H, W
    mesh = np.meshgrid(*lines, indexing="ij")
    coords = list(mesh[::-1])  # x runs along W, y along H, z along D
    base = np.stack(coords + [np.ones_like(coords[0])], axis=-1)  # [(D,) H, W, k + 1]
    with np.errstate(all="ignore"):
        out = np.einsum("...j,nij->n...i", base.astype(np.float64), theta.astype(np.float64))
    io.set_output("Output", out.astype(theta.dtype))


@host_kernel("unpool")
def unpool(io: OpScope) -> None:
    """Paddle's max unpooling (Unpool2dMaxFunctor): zeros of [N, C, out_h, out_w], then each X value written at its
    flat h * out_w + w position in Indices, in input order (a later value overwrites an earlier one). The output
    size is `output_size` when given, else (in - 1) * stride - 2 * padding + ksize."""
    x, indices = io.input("X"), np.asarray(io.input("Indices"))
    if io.attr("unpooling_type", "max") != "max":
        raise io.error(f"unpooling_type '{io.attr('unpooling_type', 'max')}' is not max (Paddle has only max)")
    if io.attr("data_format", "NCHW") != "NCHW":
        raise io.error(f"data_format '{io.attr('data_format', 'NCHW')}' is not NCHW")
    if x.ndim != 4 or indices.shape != x.shape:
        raise io.error(f"X must be 4-D and Indices of its shape, got {list(x.shape)} and {list(indices.shape)}")
    output_size = [int(v) for v in io.attr("output_size", [])]
    if len(output_size) >= 2:
        out_h, out_w = output_size[-2:]
    else:
        kh, kw = pair(io, "ksize", [1, 1])
        sh, sw = pair(io, "strides", [1, 1])
        ph, pw = pair(io, "paddings", [0, 0])[:2]
        out_h, out_w = (x.shape[2] - 1) * sh - 2 * ph + kh, (x.shape[3] - 1) * sw - 2 * pw + kw
    n, c = x.shape[:2]
    flat_x, flat_index = x.reshape(n * c, -1), indices.reshape(n * c, -1).astype(np.int64)
    if flat_index.size and (flat_index.min() < 0 or flat_index.max() >= out_h * out_w):
        raise io.error(f"Indices hold positions outside the {out_h}x{out_w} output "
                       f"[{int(flat_index.min())}, {int(flat_index.max())}]")
    out = np.zeros((n * c, out_h * out_w), x.dtype)
    rows = np.repeat(np.arange(n * c), flat_index.shape[1])
    out[rows, flat_index.reshape(-1)] = flat_x.reshape(-1)  # numpy keeps the last of repeated positions
    io.set_output("Out", out.reshape(n, c, out_h, out_w))
