"""Norms with no NNAdapter operation (the standard's normalization family): squared_l2_norm, l1_norm,
frobenius_norm, clip_by_norm and renorm; spectral_norm (a weight divided by its largest singular value, estimated
by power iteration).

float32 and float64 (l1_norm and clip_by_norm float32 only), as Paddle 3.3.1's CPU kernels take them; the
result keeps the input dtype. Sums run in the input dtype, so a float32 result may differ from Paddle's Eigen
reduction order in the last bits.

spectral_norm is the inference form of Paddle's kernel: the weight is read as a matrix W [h, w] (its `dim` axis,
0 or 1, first; the rest flattened), then `power_iters` rounds of v = W^T u / (|W^T u| + eps) and
u = W v / (|W v| + eps) start from the U [h] and V [w] inputs (0 rounds use them as they are), and Out = W / sigma
with sigma = u . (W v), back in the weight's layout. U and V are not updated (Paddle's kernel works on copies).

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, float_input, host_kernel


@host_kernel("squared_l2_norm")
def squared_l2_norm(io: OpScope) -> None:
    x = float_input(io)
    io.set_output("Out", np.asarray([np.sum(x * x)], dtype=x.dtype))


@host_kernel("l1_norm")
def l1_norm(io: OpScope) -> None:
    x = io.input("X")
    if x.dtype != np.float32:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes float32)")
    io.set_output("Out", np.asarray(np.sum(np.abs(x)), dtype=x.dtype))


@host_kernel("frobenius_norm")
def frobenius_norm(io: OpScope) -> None:
    x = float_input(io)
    dims = io.attr("dim", [])
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    if io.attr("reduce_all", False) or not dims or x.ndim == 0:
        axes = tuple(range(x.ndim))
    else:
        axes = tuple(sorted({d % x.ndim for d in dims}))
    out = np.sqrt(np.sum(x * x, axis=axes, keepdims=bool(io.attr("keep_dim", False))))
    io.set_output("Out", np.asarray(out, dtype=x.dtype))


@host_kernel("clip_by_norm")
def clip_by_norm(io: OpScope) -> None:
    x = io.input("X")
    if x.dtype != np.float32:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes float32)")
    t = x.dtype.type
    max_norm = t(io.attr("max_norm"))
    with np.errstate(all="ignore"):
        norm = np.sqrt(np.sum(x * x, dtype=x.dtype))
        # Paddle's kernel: within = (norm <= max_norm), eps = 1e-6 when norm <= 1e-30, and
        # scale = within + (1 - within) * max_norm / (norm + eps): a NaN norm gives a NaN scale (a NaN result),
        # an infinite one a zero scale (inf * 0 = NaN where x is infinite)
        within = t(norm <= max_norm)
        eps = t(1e-6) if norm <= t(1e-30) else t(0)
        scale = within + (t(1) - within) * max_norm / (norm + eps)
        out = x * scale
    io.set_output("Out", np.asarray(out, dtype=x.dtype))


@host_kernel("renorm")
def renorm(io: OpScope) -> None:
    x = float_input(io)
    p, max_norm = float(io.attr("p", 2.0)), float(io.attr("max_norm", 1.0))
    data = x.reshape(1) if x.ndim == 0 else x
    axis = int(io.attr("axis", 0)) % data.ndim
    others = tuple(d for d in range(data.ndim) if d != axis)
    with np.errstate(all="ignore"):
        norm = np.power(np.sum(np.power(np.abs(data.astype(np.float64)), p), axis=others, keepdims=True), 1.0 / p)
        # Paddle's kernel: slices whose p-norm exceeds max_norm are scaled by max_norm / (norm + 1e-7)
        scale = np.where(norm > max_norm, max_norm / (norm + 1e-7), 1.0)
    io.set_output("Out", (data * scale.astype(x.dtype)).astype(x.dtype).reshape(x.shape))


@host_kernel("spectral_norm")
def spectral_norm(io: OpScope) -> None:
    weight = float_input(io, "Weight")
    u, v = io.input("U").astype(weight.dtype, copy=False), io.input("V").astype(weight.dtype, copy=False)
    dim, power_iters = int(io.attr("dim", 0)), int(io.attr("power_iters", 1))
    eps = weight.dtype.type(io.attr("eps", 1e-12))
    if not 2 <= weight.ndim <= 5:
        raise io.error(f"Weight must have rank 2 to 5, got dims {list(weight.shape)}")
    if dim not in (0, 1):
        raise io.error(f"dim must be 0 or 1, got {dim}")
    if power_iters < 0:
        raise io.error(f"power_iters must be >= 0, got {power_iters}")
    rows = weight.shape[dim]
    columns = weight.size // rows
    if u.size != rows or v.size != columns:
        raise io.error(f"U and V must hold {rows} and {columns} values (Weight {list(weight.shape)} read as "
                       f"[{rows}, {columns}] along dim {dim}), got {u.size} and {v.size}")
    moved = np.moveaxis(weight, dim, 0)
    matrix = moved.reshape(rows, columns)
    u, v = u.reshape(rows), v.reshape(columns)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(power_iters):
            v = matrix.T @ u
            v = v / (np.sqrt(np.sum(v * v)) + eps)
            u = matrix @ v
            u = u / (np.sqrt(np.sum(u * u)) + eps)
        sigma = np.sum(u * (matrix @ v))
        out = (matrix / sigma).reshape(moved.shape)
    io.set_output("Out", np.ascontiguousarray(np.moveaxis(out, 0, dim)).astype(weight.dtype, copy=False))
