"""Elementwise math with no NNAdapter operation: trunc, expm1, asinh, acosh, atanh, logit, lerp,
elementwise_fmax / elementwise_fmin (NaN-ignoring max / min), elementwise_heaviside, celu and stanh.

Dtypes as Paddle 3.3.1's CPU kernels take them: float32 and float64 everywhere, float16 for expm1 too (computed
in float32), and int32/int64 for trunc, fmax, fmin and heaviside; the result keeps the input dtype. Paddle's
dygraph API casts an integer input of the float-only functions to float32 before the op, so a program never
hands them one; the kernel raises if it does.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

FLOATS = frozenset(np.dtype(t) for t in ("float32", "float64"))
INTS = frozenset(np.dtype(t) for t in ("int32", "int64"))


def require(io: OpScope, x: np.ndarray, allowed) -> None:
    if x.dtype not in allowed:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes {sorted(map(str, allowed))})")


_UNARY = {"expm1": np.expm1, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}


@host_kernel(*_UNARY)
def unary_float(io: OpScope) -> None:
    x = io.input("X")
    allowed = FLOATS | {np.dtype("float16")} if io.op.type == "expm1" else FLOATS
    require(io, x, allowed)
    compute = x.astype(np.float32) if x.dtype == np.float16 else x
    with np.errstate(all="ignore"):  # out-of-domain inputs give NaN (or inf at the poles), as in Paddle
        io.set_output("Out", _UNARY[io.op.type](compute).astype(x.dtype, copy=False))


@host_kernel("trunc")
def trunc(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, FLOATS | INTS)
    io.set_output("Out", np.trunc(x) if x.dtype.kind == "f" else x.copy())


@host_kernel("logit")
def logit(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, FLOATS)
    eps = float(io.attr("eps", 0.0))
    if eps > 0:
        # clipped to [eps, 1 - eps] in x's dtype (so float32 logit(0) and logit(1) differ in the last bit)
        low, high = x.dtype.type(eps), x.dtype.type(1) - x.dtype.type(eps)
        x = np.where(x < low, low, np.where(x > high, high, x))
    with np.errstate(all="ignore"):  # outside [0, 1] without eps: NaN, and +-inf at 0 and 1, as in Paddle
        io.set_output("Out", np.log(x / (x.dtype.type(1) - x)).astype(x.dtype, copy=False))


@host_kernel("lerp")
def lerp(io: OpScope) -> None:
    x, y, weight = io.input("X"), io.input("Y"), io.input("Weight")
    require(io, x, FLOATS)
    weight = weight.astype(x.dtype, copy=False)
    with np.errstate(invalid="ignore"):  # inf - inf gives NaN, as in Paddle
        io.set_output("Out", (x + weight * (y - x)).astype(x.dtype, copy=False))


def aligned(io: OpScope, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`y` placed at the legacy `axis` of `x` (axis -1: numpy's trailing alignment)."""
    axis = int(io.attr("axis", -1))
    if axis == -1 or y.ndim >= x.ndim:
        return y
    return y.reshape(y.shape + (1,) * (x.ndim - axis - y.ndim))


@host_kernel("elementwise_fmax", "elementwise_fmin")
def fmax_fmin(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOATS | INTS)
    fn = np.fmax if io.op.type == "elementwise_fmax" else np.fmin
    io.set_output("Out", fn(x, aligned(io, x, y)).astype(x.dtype, copy=False))


@host_kernel("elementwise_heaviside")
def heaviside(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOATS | INTS)
    y = aligned(io, x, y)
    # Paddle's functor: x == 0 ? y : (x > 0), so a NaN x gives 0 (numpy's heaviside would give NaN)
    io.set_output("Out", np.where(x == 0, y, x > 0).astype(x.dtype))


@host_kernel("elementwise_mod")
def elementwise_mod(io: OpScope) -> None:
    """Paddle's remainder: r = fmod(x, y), then r += y where r != 0 and r's sign differs from y's (so the result
    takes the divisor's sign). fmod is exact, which x - floor(x / y) * y is not for huge x or y = +-inf (the
    converter composes that form only for integers). Integer division by zero raises, as Paddle does."""
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOATS | INTS)
    y = aligned(io, x, y).astype(x.dtype, copy=False)
    if x.dtype.kind in "iu" and (y == 0).any():
        raise io.error("integer division by zero")
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.fmod(x, y)
        fix = (r != 0) & ((r < 0) != (y < 0))
        io.set_output("Out", np.where(fix, r + y, r).astype(x.dtype, copy=False))


@host_kernel("celu")
def celu(io: OpScope) -> None:
    """Paddle's CELU functor: x < 0 ? alpha * (exp(x / alpha) - 1) : x (so -0.0 and NaN pass through)."""
    x = io.input("X")
    require(io, x, FLOATS)
    alpha = x.dtype.type(io.attr("alpha", 1.0))
    with np.errstate(all="ignore"):
        negative = alpha * (np.exp(x / alpha) - x.dtype.type(1))  # exp - 1 as Paddle (not expm1)
    io.set_output("Out", np.where(x < 0, negative, x).astype(x.dtype, copy=False))


@host_kernel("stanh")
def stanh(io: OpScope) -> None:
    """scale_b * tanh(scale_a * x), as Paddle's STanh functor."""
    x = io.input("X")
    require(io, x, FLOATS)
    a, b = x.dtype.type(io.attr("scale_a", 0.67)), x.dtype.type(io.attr("scale_b", 1.7159))
    with np.errstate(all="ignore"):
        io.set_output("Out", (b * np.tanh(a * x)).astype(x.dtype, copy=False))
