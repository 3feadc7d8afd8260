"""Sampling with no NNAdapter operation, or where its converter declines (the standard's sampling family):
affine_grid, and grid_sampler for what GRID_SAMPLE cannot take (float64, whose coordinates Paddle computes
in double).

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


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


# -- grid_sampler (what its converter declines: float64, whose coordinates Paddle computes in double) ----------
def _unnormalize(coord: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    """Paddle's Unnormalize in the grid's dtype: (g + 1) * (size - 1) / 2, or (g + 1) * size / 2 - 0.5."""
    t = coord.dtype.type
    if align_corners:
        return (coord + t(1)) * t((size - 1) * 0.5)
    return (coord + t(1)) * t(size * 0.5) - t(0.5)


def _reflect_coords(coord: np.ndarray, twice_low: int, twice_high: int) -> np.ndarray:
    """Paddle's Reflect: mirror into [twice_low / 2, twice_high / 2] any number of times."""
    t = coord.dtype.type
    if twice_low == twice_high:
        return np.zeros_like(coord)
    low, span = t(twice_low) / t(2), t(twice_high - twice_low) / t(2)
    distance = np.abs(coord - low)
    flips = np.floor(distance / span)
    extra = distance - flips * span
    return np.where(np.fmod(flips, 2) == 0, extra + low, span + low - extra)


@host_kernel("grid_sampler")
def grid_sampler(io: OpScope) -> None:
    """Sample X [N, C, H, W] at Grid [N, Ho, Wo, 2] (x, y in [-1, 1]) -> [N, C, Ho, Wo], as Paddle's CPU kernel:
    coordinates unnormalized in the grid's dtype, then border (clip) or reflection (mirror, clip) padding;
    bilinear weights (a neighbour outside the image reads 0) or nearest (rounded half to even)."""
    x, grid = io.input("X"), io.input("Grid")
    if x.dtype not in (np.float32, np.float64) or grid.dtype != x.dtype:
        raise io.error(f"X and Grid must both be float32 or float64, got {x.dtype} and {grid.dtype}")
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]:
        raise io.error(f"only 4-D sampling is supported: X [N, C, H, W] and Grid [N, Ho, Wo, 2], got "
                       f"{list(x.shape)} and {list(grid.shape)}")
    mode, padding = str(io.attr("mode", "bilinear")), str(io.attr("padding_mode", "zeros"))
    align = bool(io.attr("align_corners", True))
    if mode not in ("bilinear", "nearest") or padding not in ("zeros", "border", "reflection"):
        raise io.error(f"mode '{mode}' / padding_mode '{padding}' is not supported")
    n, c, h, w = x.shape
    with np.errstate(all="ignore"):
        coords = []
        for k, size in ((0, w), (1, h)):
            g = _unnormalize(grid[..., k], size, align)
            if padding == "reflection":
                g = _reflect_coords(g, 0, 2 * (size - 1)) if align else _reflect_coords(g, -1, 2 * size - 1)
            if padding in ("border", "reflection"):
                g = np.clip(g, 0, size - 1)
            coords.append(g.reshape(n, -1).astype(np.float64))
        gx, gy = coords
        flat = x.reshape(n, c, h * w)
        batch = np.arange(n)[:, None]

        def read(yi, xi):  # [N, C, P]; a neighbour outside the image reads 0
            inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
            index = np.where(inside, np.clip(yi, 0, h - 1) * w + np.clip(xi, 0, w - 1), 0)
            values = np.moveaxis(flat[batch, :, index], -1, 1).astype(np.float64)
            return np.where(inside[:, None], values, 0.0)

        if mode == "nearest":
            out = read(np.rint(gy).astype(np.int64), np.rint(gx).astype(np.int64))
        else:
            x0, y0 = np.floor(gx), np.floor(gy)
            dw, de, dn, ds = gx - x0, x0 + 1 - gx, gy - y0, y0 + 1 - gy
            xw, yn = x0.astype(np.int64), y0.astype(np.int64)
            out = (read(yn, xw) * (de * ds)[:, None] + read(yn, xw + 1) * (dw * ds)[:, None]
                   + read(yn + 1, xw) * (de * dn)[:, None] + read(yn + 1, xw + 1) * (dw * dn)[:, None])
    io.set_output("Output", out.reshape(n, c, *grid.shape[1:3]).astype(x.dtype))
