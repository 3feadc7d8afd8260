"""Scans with no NNAdapter operation: cumprod and logcumsumexp (with Paddle's exclusive / reverse / flatten forms).

cumprod takes float32, float64, int32, int64 and the complex types, logcumsumexp float32/float64, as Paddle
3.3.1's CPU kernels do; both keep the input dtype. The scan runs step by step in the input dtype, as Paddle's
does, so rounding accumulates the same way.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

CUMPROD_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64", "complex64", "complex128"))
FLOATS = frozenset(np.dtype(t) for t in ("float32", "float64"))


def require(io: OpScope, x: np.ndarray, allowed) -> None:
    if x.dtype not in allowed:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes {sorted(map(str, allowed))})")


def scan(x: np.ndarray, axis: int, step, init, exclusive: bool, reverse: bool) -> np.ndarray:
    """Inclusive or exclusive scan of `step(acc, item)` along `axis` (0-d handled by the caller)."""
    moved = np.moveaxis(x, axis, 0)
    if reverse:
        moved = moved[::-1]
    out = np.empty_like(moved)
    acc = np.full(moved.shape[1:], init, dtype=x.dtype)
    with np.errstate(all="ignore"):
        for i in range(moved.shape[0]):
            if exclusive:
                out[i] = acc
                acc = step(acc, moved[i])
            else:
                acc = step(acc, moved[i])
                out[i] = acc
    if reverse:
        out = out[::-1]
    return np.ascontiguousarray(np.moveaxis(out, 0, axis))


def scan_axis(io: OpScope, x: np.ndarray, axis: int) -> int:
    rank = max(x.ndim, 1)
    if not -rank <= axis < rank:
        raise io.error(f"axis {axis} is out of range for a rank-{x.ndim} input")
    return axis % rank


@host_kernel("cumprod")
def cumprod(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, CUMPROD_DTYPES)
    axis = scan_axis(io, x, int(io.attr("dim", -1)))
    flat = x.reshape(-1) if x.ndim == 0 else x
    out = scan(flat, axis, lambda acc, v: acc * v, 1, bool(io.attr("exclusive", False)),
               bool(io.attr("reverse", False)))
    io.set_output("Out", out.reshape(x.shape))


def log_add_exp(acc: np.ndarray, item: np.ndarray) -> np.ndarray:
    # Paddle's functor: max + log1p(exp(min - max)) with std::max / std::min(acc, item), which return acc when
    # item is NaN, so a NaN item adds log(2) to the running value instead of poisoning it
    hi = np.where(acc < item, item, acc)
    lo = np.where(item < acc, item, acc)
    return (hi + np.log1p(np.exp(lo - hi))).astype(acc.dtype, copy=False)


@host_kernel("logcumsumexp")
def logcumsumexp(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, FLOATS)
    flatten = bool(io.attr("flatten", False))
    data = x.reshape(-1) if flatten or x.ndim == 0 else x
    axis = 0 if flatten else scan_axis(io, x, int(io.attr("axis", -1)))
    # the scan starts from the dtype's lowest finite value, as Paddle's (so exclusive scans start there)
    out = scan(data, axis, log_add_exp, np.finfo(x.dtype).min, bool(io.attr("exclusive", False)), bool(io.attr("reverse", False)))
    io.set_output("Out", out if flatten else out.reshape(x.shape))
