"""Resizing by interpolation that NNAdapter's RESIZE_LINEAR/RESIZE_NEAREST (2-D only) cannot express:
linear_interp_v2 (1-D), bicubic_interp_v2 (2-D), trilinear_interp_v2 (3-D); bilinear_interp_v2 shares the
linear code as a fallback when its converter refuses the op; interp_antialias (paddle.nn.functional.interpolate
with antialias=True, bilinear or bicubic).

Linear and cubic interpolation over a box grid are separable, so each spatial axis is resampled in turn
(a gather of the neighbour rows and a weighted sum, vectorized over every other axis). Source positions
follow Paddle's kernels: the scale ratio is computed in float32 (1/scale when a scale is given, in/out
otherwise), `align_corners` maps corner to corner, `align_mode` 0 uses half-pixel centres for linear.

interp_antialias is Pillow's (and PyTorch's) separable filter resize: each output position averages the input
positions within the filter's support, which a downscale widens by the scale (so every input contributes), with the
weights normalized to sum 1; a bicubic filter with a = -0.5 (not the -0.75 of bicubic_interp_v2). Paddle 3.3.1's CPU
kernel resamples along W, then H; the ratio is a float32 (1/scale when a scale is given, in/out otherwise, corner to
corner with `align_corners`; `align_mode` is not read), the weights and sums are in the input dtype (float32 for
float16, rounded to float16 after each axis), and only the taps of a position's support are summed, so an inf
reaches just the outputs whose support holds it (a zero weight on it gives NaN there). Paddle's uint8 form rounds in
a way not reproduced here (neither float sums rounded per axis nor Pillow's 16-bit fixed-point weights match it
everywhere: both are 1 off in places on upscales), so the kernel refuses uint8.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, slot
from nnadapter_bridge.nnadapter.interp_rules import cubic_taps, output_size, source_ratio


def _output_size(io: OpScope, in_dims: tuple) -> tuple[list[int], list[float]]:
    """Output spatial dims and the per-axis scale (0 where none), by Paddle's precedence (interp_rules)."""
    out, scales = output_size(in_dims, io.attr, lambda slot: io.inputs(slot) if io.has_input(slot) else None)
    if len(out) != len(in_dims) or any(d <= 0 for d in out):
        raise io.error(f"cannot determine the output size (got {out} for {len(in_dims)} spatial dims)")
    return out, scales


def _linear_axis(x: np.ndarray, axis: int, out_size: int, ratio: np.float32, half_pixel: bool,
                 src: str = "float") -> np.ndarray:
    """One axis of Paddle's linear kernels. The half-pixel source position is computed in float (`src`
    "float": trilinear, bilinear's columns), in double then stored as a float ("double_stored": bilinear's
    rows) or in double with the weight taken in double ("double": 1-D linear), so a position 1.5e-8 past an
    integer keeps that tiny weight only in the last two (checked against Paddle 3.3.1)."""
    in_size = x.shape[axis]
    if half_pixel and src != "float":
        position = float(ratio) * (np.arange(out_size, dtype=np.float64) + 0.5) - 0.5
        lower = np.minimum(np.maximum(np.trunc(position), 0).astype(np.int64), in_size - 1)
        if src == "double_stored":
            weight = np.maximum(position, 0).astype(np.float32) - lower.astype(np.float32)
        else:
            weight = (np.maximum(position, 0) - lower).astype(np.float32)
    else:
        dst = np.arange(out_size, dtype=np.float32)
        position = ratio * (dst + np.float32(0.5)) - np.float32(0.5) if half_pixel else ratio * dst
        position = np.maximum(position, np.float32(0.0))
        lower = np.minimum(position.astype(np.int64), in_size - 1)
        weight = position - lower
    upper = np.where(lower < in_size - 1, lower + 1, lower)
    weight = weight.astype(np.float64)
    shape = [1] * x.ndim
    shape[axis] = out_size
    weight = weight.reshape(shape)
    return np.take(x, lower, axis=axis) * (1.0 - weight) + np.take(x, upper, axis=axis) * weight


def _cubic_axis(x: np.ndarray, axis: int, out_size: int, ratio: np.float32, align_corners: bool) -> np.ndarray:
    """One axis of Paddle's bicubic kernel, in x's dtype (nnadapter.interp_rules: the source position computed in
    double from the float32 ratio and cast to x's dtype, so a float64 position can miss an integer by 1e-8 where
    float32 hits it), the 4 clamped neighbours summed in order."""
    indices, weights = cubic_taps(x.shape[axis], out_size, ratio, align_corners, x.dtype)
    shape = [1] * x.ndim
    shape[axis] = out_size
    out = None
    with np.errstate(invalid="ignore", over="ignore"):
        for index, weight in zip(indices, weights):
            term = np.take(x, index, axis=axis) * weight.reshape(shape)
            out = term if out is None else out + term
    return out


def _interpolate(io: OpScope, spatial_rank: int, cubic: bool) -> None:
    x = io.input("X")
    if x.ndim != spatial_rank + 2:
        raise io.error(f"X must have {spatial_rank + 2} dims, got shape {x.shape}")
    channels_last = io.attr("data_layout", "NCHW") in ("NWC", "NHWC", "NDHWC")
    if channels_last:
        x = np.moveaxis(x, -1, 1)
    out_dims, scales = _output_size(io, x.shape[2:])
    if list(out_dims) == list(x.shape[2:]):
        # Paddle's kernels copy the input when the output size equals it (an inf stays inf where interpolating
        # with a zero weight would give NaN)
        io.set_output("Out", np.array(io.input("X")))
        return
    align_corners = bool(io.attr("align_corners", True))
    half_pixel = int(io.attr("align_mode", 1)) == 0 and not align_corners
    if cubic:  # in x's dtype, as Paddle: along W first (each of the 4 rows), then along H
        value = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
        for k in reversed(range(spatial_rank)):
            ratio = source_ratio(x.shape[2 + k], out_dims[k], scales[k], align_corners, single_zero=spatial_rank == 2)
            value = _cubic_axis(value, 2 + k, out_dims[k], ratio, align_corners)
    else:
        value = x.astype(np.float64)
        for k in range(spatial_rank):
            ratio = source_ratio(x.shape[2 + k], out_dims[k], scales[k], align_corners, single_zero=spatial_rank == 2)
            src = {1: "double", 2: "double_stored" if k == 0 else "float"}.get(spatial_rank, "float")
            value = _linear_axis(value, 2 + k, out_dims[k], ratio, half_pixel, src)
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


# -- interp_antialias -------------------------------------------------------------------------------------------
ANTIALIAS_CUBIC_A = -0.5  # Pillow's (and PyTorch's) antialiasing bicubic filter, not CUBIC_A
ANTIALIAS_DTYPES = (np.float16, np.float32, np.float64)


def _antialias_filter(x: np.ndarray, cubic: bool) -> np.ndarray:
    """The filter at distances `x` (in x's dtype): the triangle for bilinear, Keys' cubic with a = -0.5."""
    ft = x.dtype.type
    x = np.abs(x)
    if not cubic:
        return np.where(x < ft(1), ft(1) - x, ft(0))
    a = ft(ANTIALIAS_CUBIC_A)
    near = ((a + ft(2)) * x - (a + ft(3))) * x * x + ft(1)
    far = (((x - ft(5)) * x + ft(8)) * x - ft(4)) * a
    return np.where(x < ft(1), near, np.where(x < ft(2), far, ft(0)))


def _antialias_axis(x: np.ndarray, axis: int, out_size: int, ratio: np.float32, cubic: bool) -> np.ndarray:
    """One axis of the antialiasing resize, in x's dtype: output i averages the inputs [first, first + taps) around
    centre ratio * (i + 0.5), weighted by the filter at (j - centre + 0.5) / ratio (the filter widened by the ratio
    on a downscale), the weights divided by their sum; the taps are summed in order, one numpy pass per tap."""
    ft = x.dtype.type
    in_size = x.shape[axis]
    scale = ft(ratio)
    half_width = ft(2.0 if cubic else 1.0)  # half the filter's support (interp_size / 2)
    support = half_width * scale if scale >= ft(1) else half_width
    inverse = ft(1) / scale if scale >= ft(1) else ft(1)
    centre = scale * (np.arange(out_size).astype(x.dtype) + ft(0.5))
    first = np.maximum((centre - support + ft(0.5)).astype(np.int64), 0)  # C's truncation toward zero
    taps = np.minimum((centre + support + ft(0.5)).astype(np.int64), in_size) - first
    tap = np.arange(max(int(taps.max()), 0))
    live = tap[None, :] < taps[:, None]
    index = first[:, None] + tap[None, :]
    weights = np.where(live, _antialias_filter((index.astype(x.dtype) - centre[:, None] + ft(0.5)) * inverse, cubic),
                       ft(0))
    total = np.zeros(out_size, x.dtype)
    for k in tap:  # summed in tap order, as Paddle's loop does
        total = total + weights[:, k]
    weights = np.where(total[:, None] != ft(0), weights / np.where(total == ft(0), ft(1), total)[:, None], weights)
    shape = [1] * x.ndim
    shape[axis] = out_size
    out = np.zeros(x.shape[:axis] + (out_size,) + x.shape[axis + 1:], x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in tap:
            term = np.take(x, np.minimum(index[:, k], in_size - 1), axis=axis) * weights[:, k].reshape(shape)
            out = np.where(live[:, k].reshape(shape), term if k == 0 else out + term, out)
    return out


def _antialias_output_size(io: OpScope, in_dims: tuple) -> tuple[list[int], list[float]]:
    """Output (H, W) and the per-axis scale (0 where none) of interp_antialias: size_tensor, else out_size, else
    out_h / out_w, else the scale (scale_tensor before the `scale` attribute) times the input size, truncated."""
    scales = [0.0, 0.0]
    out = [int(io.attr("out_h", -1)), int(io.attr("out_w", -1))]
    sizes_slot, size_slot = slot(io, "SizeTensor", "size_tensor"), slot(io, "OutSize", "out_size")
    scale_slot = slot(io, "Scale", "scale_tensor")
    if io.has_input(sizes_slot):
        out = [int(np.asarray(t).reshape(-1)[0]) for t in io.inputs(sizes_slot)]
    else:
        values = ([float(v) for v in io.input(scale_slot).reshape(-1)] if io.has_input(scale_slot)
                  else [float(v) for v in io.attr("scale", []) or []])
        if values:
            scales = values * 2 if len(values) == 1 else values[:2]
            if any(s <= 0 for s in scales):
                raise io.error(f"scale {values} must be > 0")
            out = [int(size * s) for size, s in zip(in_dims, scales)]
        if io.has_input(size_slot):
            out = [int(v) for v in io.input(size_slot).reshape(-1)]
    if len(out) != 2 or any(d <= 0 for d in out):
        raise io.error(f"cannot determine the output size: got {out}, expects 2 sizes > 0 (out_h, out_w)")
    return out, scales


@host_kernel("interp_antialias")
def interp_antialias(io: OpScope) -> None:
    x = io.input(slot(io, "X", "x"))
    method = str(io.attr("interp_method", "bilinear"))
    if method not in ("bilinear", "bicubic"):
        raise io.error(f"interp_method '{method}' is not one Paddle antialiases (bilinear, bicubic)")
    if x.ndim != 4:
        raise io.error(f"x must be 4-D (NCHW or NHWC), got shape {list(x.shape)}")
    if x.dtype not in ANTIALIAS_DTYPES:
        raise io.error(f"x is {x.dtype}: the host kernel takes float16, float32 and float64 (Paddle's uint8 form "
                       "rounds in a way this kernel does not reproduce)")
    layout = str(io.attr("data_format", io.attr("data_layout", "NCHW")))
    if layout not in ("NCHW", "NHWC"):
        raise io.error(f"data_format '{layout}' is not NCHW or NHWC")
    value = np.moveaxis(x, -1, 1) if layout == "NHWC" else x
    out_dims, scales = _antialias_output_size(io, value.shape[2:])
    align_corners = bool(io.attr("align_corners", True))
    work = np.float32 if x.dtype == np.float16 else x.dtype  # float16 is computed in float32, as Paddle's kernel
    for k in (1, 0):  # W, then H
        ratio = source_ratio(value.shape[2 + k], out_dims[k], scales[k], align_corners, single_zero=False)
        value = _antialias_axis(value.astype(work), 2 + k, out_dims[k], ratio, method == "bicubic").astype(x.dtype)
    if layout == "NHWC":
        value = np.moveaxis(value, 1, -1)
    io.set_output(slot(io, "Out", "output"), np.ascontiguousarray(value))
