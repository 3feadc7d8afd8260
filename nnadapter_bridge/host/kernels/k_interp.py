"""Resizing by interpolation that NNAdapter's RESIZE_LINEAR/RESIZE_NEAREST (2-D only) cannot express:
linear_interp_v2 (1-D), bicubic_interp_v2 (2-D), trilinear_interp_v2 (3-D); bilinear_interp_v2 shares the
linear code as a fallback when its converter refuses the op.

Linear and cubic interpolation over a box grid are separable, so each spatial axis is resampled in turn
(a gather of the neighbour rows and a weighted sum, vectorized over every other axis). Source positions
follow Paddle's kernels: the scale ratio is computed in float32 (1/scale when a scale is given, in/out
otherwise), `align_corners` maps corner to corner, `align_mode` 0 uses half-pixel centres for linear.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

CUBIC_A = -0.75  # the cubic convolution coefficient Paddle (and OpenCV) use


def _output_size(io: OpScope, in_dims: tuple) -> tuple[list[int], list[float]]:
    """Output spatial dims and the per-axis scale (0 where none), by Paddle's precedence."""
    rank = len(in_dims)
    names = {1: ["out_w"], 2: ["out_h", "out_w"], 3: ["out_d", "out_h", "out_w"]}[rank]
    out = [int(io.attr(n, -1)) for n in names]
    scales = [0.0] * rank
    if io.has_input("Scale"):
        values = [float(v) for v in io.input("Scale").reshape(-1)]
    else:
        values = [float(v) for v in io.attr("scale", []) or []]
    if values:
        scales = values * rank if len(values) == 1 else values[:rank]
        if all(s > 0 for s in scales):
            out = [int(size * s) for size, s in zip(in_dims, scales)]
        else:
            scales = [0.0] * rank
    if io.has_input("OutSize"):
        out = [int(v) for v in io.input("OutSize").reshape(-1)]
    if io.has_input("SizeTensor"):
        out = [int(np.asarray(t).reshape(-1)[0]) for t in io.inputs("SizeTensor")]
    if len(out) != rank or any(d <= 0 for d in out):
        raise io.error(f"cannot determine the output size (got {out} for {rank} spatial dims)")
    return out, scales


def _ratio(in_size: int, out_size: int, scale: float, align_corners: bool) -> np.float32:
    if align_corners:
        return np.float32((in_size - 1) / (out_size - 1)) if out_size > 1 else np.float32(0.0)
    if scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size / out_size)


def _linear_axis(x: np.ndarray, axis: int, out_size: int, ratio: np.float32, half_pixel: bool) -> np.ndarray:
    in_size = x.shape[axis]
    dst = np.arange(out_size, dtype=np.float32)
    src = ratio * (dst + np.float32(0.5)) - np.float32(0.5) if half_pixel else ratio * dst
    src = np.maximum(src, np.float32(0.0))
    lower = np.minimum(src.astype(np.int64), in_size - 1)
    upper = np.where(lower < in_size - 1, lower + 1, lower)
    weight = (src - lower).astype(np.float64)
    shape = [1] * x.ndim
    shape[axis] = out_size
    weight = weight.reshape(shape)
    return np.take(x, lower, axis=axis) * (1.0 - weight) + np.take(x, upper, axis=axis) * weight


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Cubic convolution weights of the 4 neighbours at offsets -1, 0, 1, 2 for fractions t."""
    a = CUBIC_A

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _cubic_axis(x: np.ndarray, axis: int, out_size: int, ratio: np.float32, align_corners: bool) -> np.ndarray:
    in_size = x.shape[axis]
    dst = np.arange(out_size, dtype=np.float32)
    src = ratio * dst if align_corners else ratio * (dst + np.float32(0.5)) - np.float32(0.5)
    base = np.floor(src).astype(np.int64)
    t = (src - base).astype(np.float64)
    shape = [1] * x.ndim
    shape[axis] = out_size
    out = 0.0
    for offset, weight in zip(range(-1, 3), _cubic_weights(t)):
        index = np.clip(base + offset, 0, in_size - 1)
        out = out + np.take(x, index, axis=axis) * weight.reshape(shape)
    return out


def _interpolate(io: OpScope, spatial_rank: int, cubic: bool) -> None:
    x = io.input("X")
    if x.ndim != spatial_rank + 2:
        raise io.error(f"X must have {spatial_rank + 2} dims, got shape {x.shape}")
    channels_last = io.attr("data_layout", "NCHW") in ("NWC", "NHWC", "NDHWC")
    if channels_last:
        x = np.moveaxis(x, -1, 1)
    out_dims, scales = _output_size(io, x.shape[2:])
    align_corners = bool(io.attr("align_corners", True))
    half_pixel = int(io.attr("align_mode", 1)) == 0 and not align_corners
    value = x.astype(np.float64)
    for k in range(spatial_rank):
        ratio = _ratio(x.shape[2 + k], out_dims[k], scales[k], align_corners)
        if cubic:
            value = _cubic_axis(value, 2 + k, out_dims[k], ratio, align_corners)
        else:
            value = _linear_axis(value, 2 + k, out_dims[k], ratio, half_pixel)
    out = value.astype(x.dtype)
    if channels_last:
        out = np.moveaxis(out, 1, -1)
    io.set_output("Out", np.ascontiguousarray(out))


@host_kernel("linear_interp_v2")
def linear_interp_v2(io: OpScope) -> None:
    _interpolate(io, 1, cubic=False)


@host_kernel("bilinear_interp_v2")
def bilinear_interp_v2(io: OpScope) -> None:
    _interpolate(io, 2, cubic=False)


@host_kernel("trilinear_interp_v2")
def trilinear_interp_v2(io: OpScope) -> None:
    _interpolate(io, 3, cubic=False)


@host_kernel("bicubic_interp_v2")
def bicubic_interp_v2(io: OpScope) -> None:
    _interpolate(io, 2, cubic=True)
