"""Paddle's interpolation rules that the bicubic_interp_v2 converter (which composes the resize from GATHER, MUL and
ADD, the taps summed in Paddle's order) and the host kernels (nnadapter_bridge.host.kernels.resize) share, so both
follow one rule: the output size by Paddle's precedence, the source-coordinate ratio, and bicubic resampling along
one axis as taps (for each output position the four clamped source indices and their cubic-convolution weights).

The output size: out_h/out_w, replaced by the input size times the scales when every scale (the Scale tensor, else
the `scale` attribute; one value for every axis) is positive, then by OutSize, then by SizeTensor. Source positions
follow Paddle 3.3.1's CPU kernel: the ratio is a float32 (0 for a single output position; corner
to corner with `align_corners`; 1/scale when a scale is given; in/out otherwise), the source position is computed
in double from it and then cast to the data's dtype, floored, and the fraction t gives the weights of the
neighbours at offsets -1, 0, 1, 2 with the cubic coefficient a = -0.75 (Paddle's and OpenCV's), computed in the
data's dtype; a neighbour beyond the edge reads the edge.

Entry points: `CUBIC_A`, `output_size`, `source_ratio`, `cubic_weights`, `cubic_taps`. Imports numpy only.
"""
from __future__ import annotations

import numpy as np

CUBIC_A = -0.75  # the cubic convolution coefficient Paddle (and OpenCV) use


def output_size(in_dims, attr, tensors) -> tuple[list[int], list[float]]:
    """(output spatial dims, the per-axis scale or 0 where none) of an interpolation of spatial dims `in_dims`, by
    Paddle's precedence (module docstring). `attr(name, default)` reads an attribute; `tensors(slot)` gives the
    values of an input slot's tensors (a list of arrays), None when the slot is empty. The dims are not checked."""
    rank = len(in_dims)
    names = {1: ["out_w"], 2: ["out_h", "out_w"], 3: ["out_d", "out_h", "out_w"]}[rank]
    out = [int(attr(n, -1)) for n in names]
    scales = [0.0] * rank
    scale_tensor = tensors("Scale")
    if scale_tensor is not None:
        values = [float(v) for v in np.asarray(scale_tensor[0]).reshape(-1)]
    else:
        values = [float(v) for v in attr("scale", []) or []]
    if values:
        scales = values * rank if len(values) == 1 else values[:rank]
        if all(s > 0 for s in scales):
            out = [int(size * s) for size, s in zip(in_dims, scales)]
        else:
            scales = [0.0] * rank
    out_size = tensors("OutSize")
    if out_size is not None:
        out = [int(v) for v in np.asarray(out_size[0]).reshape(-1)]
    size_tensor = tensors("SizeTensor")
    if size_tensor is not None:
        out = [int(np.asarray(t).reshape(-1)[0]) for t in size_tensor]
    return out, scales


def source_ratio(in_size: int, out_size: int, scale: float, align_corners: bool, single_zero: bool) -> np.float32:
    """Paddle's source-coordinate ratio. A single output position: its 2-D kernels (bilinear, bicubic) take
    ratio 0 in every mode; its 1-D and 3-D ones (linear, trilinear) keep 1/scale or in/out unless aligning
    corners (checked against Paddle 3.3.1)."""
    if out_size <= 1 and (single_zero or align_corners):
        return np.float32(0.0)
    if align_corners:
        return np.float32((in_size - 1) / (out_size - 1))
    if scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size / out_size)


def cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Cubic convolution weights of the 4 neighbours at offsets -1, 0, 1, 2 for fractions t, in t's dtype
    (Paddle's get_cubic_upsample_coefficients in MT: float for float32, double for float64)."""
    ft = t.dtype.type
    a = ft(CUBIC_A)

    def near(d):  # |d| <= 1
        return ((a + ft(2)) * d - (a + ft(3))) * d * d + ft(1)

    def far(d):  # 1 < |d| < 2
        return ((a * d - ft(5) * a) * d + ft(8) * a) * d - ft(4) * a

    return [far(t + ft(1)), near(t), near(ft(1) - t), far((ft(1) - t) + ft(1))]


def cubic_taps(in_size: int, out_size: int, ratio: np.float32, align_corners: bool,
               dtype=np.float32) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(indices, weights): four int64 arrays of source indices (clamped to the axis) and four arrays of weights in
    `dtype`, one entry per output position, for the neighbours at offsets -1, 0, 1, 2 (module docstring)."""
    dst = np.arange(out_size, dtype=np.float64)
    r = float(ratio)
    src = (r * dst if align_corners else r * (dst + 0.5) - 0.5).astype(dtype)
    base = np.floor(src).astype(np.int64)
    t = (src - base.astype(dtype)).astype(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        weights = cubic_weights(t)
    indices = [np.clip(base + offset, 0, in_size - 1) for offset in range(-1, 3)]
    return indices, weights
