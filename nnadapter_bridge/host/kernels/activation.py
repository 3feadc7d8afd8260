"""Unary math and activations with no NNAdapter operation (the standard's activation family): the special
functions lgamma (and its PIR name gammaln), digamma, polygamma, erfinv and the modified Bessel functions
i0 / i0e / i1 / i1e; erf, the inverse and hyperbolic trig functions (acos, asin, atan, tan, cosh, sinh, expm1,
asinh, acosh, atanh), trunc, rint and logit; the activations celu, stanh and rrelu (its inference form); and
fused_softmax_mask, softmax(X + Mask) over the last axis (paddle.incubate.softmax_mask_fuse).

Paddle 3.3.1's CPU kernels take float32 and float64 for the special functions (the result keeps the input
dtype); they are evaluated here in float64 and rounded once, so a float32 result may differ from Paddle's
float32 arithmetic in the last bits. The others: float32 and float64, float16 for expm1 and rrelu too (computed
in float32), int32/int64 for trunc and rint (rint rounds half to even). Paddle's dygraph API casts an integer
input of the float-only functions to float32 before the op, so a program never hands them one; the kernel raises
if it does.

fused_softmax_mask takes float32 or float64 X [batch, heads, query, key] and a Mask of X's dtype [batch, 1, query,
key] (Paddle's checks); its softmax is Paddle's CPU softmax: `x - max` clipped from below at -64 before exp, so a
masked (-inf) position gets exp(-64) / sum, not 0, and a row masked throughout is NaN.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy, and the standard's `erf`; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import math

import numpy as np

from nnadapter_bridge.host.kernels.registry import FLOATS, OpScope, float_input, host_kernel, require, slot
from nnadapter_bridge.nnadapter.operations.activation import erf as erf_float64

INT32_64 = frozenset(np.dtype(t) for t in ("int32", "int64"))


_TRIG = {"acos": np.arccos, "asin": np.arcsin, "atan": np.arctan, "tan": np.tan, "cosh": np.cosh,
          "sinh": np.sinh}


@host_kernel(*_TRIG)
def unary_math(io: OpScope) -> None:
    x = io.input("X")
    with np.errstate(all="ignore"):  # out-of-domain inputs give NaN, as in Paddle, without a warning
        io.set_output("Out", _TRIG[io.op.type](x).astype(x.dtype, copy=False))


@host_kernel("erf")
def erf(io: OpScope) -> None:
    x = io.input("X")
    io.set_output("Out", erf_float64(x.astype(np.float64)).astype(x.dtype))


_FLOAT_UNARY = {"expm1": np.expm1, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}


@host_kernel(*_FLOAT_UNARY)
def unary_float(io: OpScope) -> None:
    x = io.input("X")
    allowed = FLOATS | {np.dtype("float16")} if io.op.type == "expm1" else FLOATS
    require(io, x, allowed)
    compute = x.astype(np.float32) if x.dtype == np.float16 else x
    with np.errstate(all="ignore"):  # out-of-domain inputs give NaN (or inf at the poles), as in Paddle
        io.set_output("Out", _FLOAT_UNARY[io.op.type](compute).astype(x.dtype, copy=False))


@host_kernel("trunc")
def trunc(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, FLOATS | INT32_64)
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


@host_kernel("rint")
def rint(io: OpScope) -> None:
    """Round half to even (std::rint); an integer input is returned as it is."""
    x = io.input(slot(io, "X", "x"))
    require(io, x, FLOATS | INT32_64)
    io.set_output(slot(io, "Out", "out"), np.rint(x) if x.dtype.kind == "f" else x.copy())


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


@host_kernel("rrelu")
def rrelu(io: OpScope) -> None:
    """The inference form (is_test): x < 0 ? mid * x : x with mid = (lower + upper) / 2, and Noise the slope used
    (mid, or 1). Training draws a random slope per element from Paddle's generator, which cannot be reproduced."""
    x = io.input("X")
    require(io, x, FLOATS | {np.dtype("float16")})
    if not io.attr("is_test", False):
        raise io.error("only the inference form (is_test=True) runs on the host: training draws random slopes")
    # the attributes are C++ floats: the values the program holds are float32's
    lower, upper = float(np.float32(io.attr("lower", 1.0 / 8.0))), float(np.float32(io.attr("upper", 1.0 / 3.0)))
    if not 0.0 <= lower <= upper <= 1.0:
        raise io.error(f"lower and upper must satisfy 0 <= lower <= upper <= 1, got lower={lower}, upper={upper}")
    mid = x.dtype.type((lower + upper) / 2.0)  # the midpoint in double, stored in x's type
    negative = x < 0
    compute = np.float32 if x.dtype == np.float16 else x.dtype  # float16 products are float32 ones, rounded
    out = np.where(negative, mid.astype(compute) * x.astype(compute), x).astype(x.dtype)
    io.set_output("Out", out)
    io.set_output("Noise", np.where(negative, mid, x.dtype.type(1)).astype(x.dtype))


# -- gamma family -----------------------------------------------------------------------------------------
def lgamma_float64(x: np.ndarray) -> np.ndarray:
    def one(v: float) -> float:
        if math.isnan(v):
            return v
        if math.isinf(v) or (v <= 0 and v == math.floor(v)):
            return math.inf  # the poles and both infinities, as std::lgamma
        return math.lgamma(v)

    return np.vectorize(one, otypes=[np.float64])(x) if x.size else x.astype(np.float64)


def digamma_float64(x: np.ndarray) -> np.ndarray:
    """Cephes' psi (Eigen's digamma, which Paddle calls): reflection for x <= 0, recurrence up to 10,
    asymptotic series after; NaN at the poles."""
    x = np.array(x, dtype=np.float64)
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        pole = (x <= 0) & (x == np.floor(x))
        negative = x <= 0
        q = x
        p = np.floor(q)
        nz = q - p
        p = np.where(nz > 0.5, p + 1, p)
        nz = np.where(nz > 0.5, q - p, nz)
        reflect = np.where(nz == 0.5, 0.0, np.pi / np.tan(np.pi * nz))
        s = np.where(negative, 1.0 - x, x)
        w = np.zeros_like(s)
        while True:
            small = s < 10
            if not small.any():
                break
            w = np.where(small, w + 1.0 / s, w)
            s = np.where(small, s + 1.0, s)
        z = 1.0 / (s * s)
        coeffs = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                  -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                  8.33333333333333333333E-2)
        poly = np.zeros_like(s)
        for c in coeffs:
            poly = poly * z + c
        poly = np.where(s < 1e17, z * poly, 0.0)
        y = np.log(s) - 0.5 / s - poly - w
        out[...] = np.where(negative, y - reflect, y)
        out[pole] = np.nan
        # at zero Paddle answers the one-sided limit, -inf for +0 and +inf for -0 (at the other poles NaN)
        zero = x == 0
        out[zero] = -np.copysign(np.inf, x[zero])
    return out


_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def hurwitz_zeta(s: float, q: float) -> float:
    """Cephes' zeta(s, q) = sum_k (k + q)^-s by Euler-Maclaurin summation (Eigen's zeta)."""
    eps = 1.11022302462515654042e-16
    if s == 1.0:
        return math.inf
    if s < 1.0 or math.isnan(s) or math.isnan(q):
        return math.nan
    if q == math.inf:
        return math.nan  # Paddle answers NaN at +inf (the limit would be 0)
    if q <= 0:
        if q == math.floor(q):
            return math.inf
        if s != math.floor(s):
            return math.nan  # q^-s is not real
    total = q ** -s
    a, i, b = q, 0, 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -s
        total += b
        if total == 0 or abs(b / total) < eps:
            return total
    w = a
    total += b * w / (s - 1.0)
    total -= 0.5 * b
    a, k = 1.0, 0.0
    for coeff in _ZETA_A:
        a *= s + k
        b /= w
        t = a * b / coeff
        total += t
        if abs(t / total) < eps:
            return total
        k += 1.0
        a *= s + k
        b /= w
        k += 1.0
    return total


@host_kernel("lgamma", "gammaln")
def lgamma(io: OpScope) -> None:
    x = float_input(io, slot(io, "X", "x"))
    io.set_output(slot(io, "Out", "out"), lgamma_float64(x.astype(np.float64)).astype(x.dtype))


@host_kernel("digamma")
def digamma(io: OpScope) -> None:
    x = float_input(io, "X")
    io.set_output("Out", digamma_float64(x).astype(x.dtype))


@host_kernel("polygamma")
def polygamma(io: OpScope) -> None:
    x = float_input(io, slot(io, "X", "x"))
    n = int(io.attr("n", 0))
    if n < 0:
        raise io.error(f"n must be non-negative, got {n}")
    if n == 0:
        out = digamma_float64(x)
    else:
        # psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x), as Paddle's kernel
        factor = (-1.0) ** (n + 1) * math.exp(math.lgamma(n + 1.0))
        zeta = np.vectorize(lambda v: hurwitz_zeta(n + 1.0, float(v)), otypes=[np.float64])
        with np.errstate(all="ignore"):
            out = factor * (zeta(x) if x.size else x.astype(np.float64))
    io.set_output(slot(io, "Out", "out"), np.asarray(out).astype(x.dtype))


@host_kernel("erfinv")
def erfinv(io: OpScope) -> None:
    x = float_input(io, "X")
    v = x.astype(np.float64)
    with np.errstate(all="ignore"):
        # Giles' single-precision approximation as the start, then Newton steps on erf in float64
        w = -np.log((1.0 - v) * (1.0 + v))
        central = w < 5.0
        wc, wt = w - 2.5, np.sqrt(w) - 3.0
        pc = np.full_like(v, 2.81022636e-08)
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941):
            pc = c + pc * wc
        pt = np.full_like(v, -0.000200214257)
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                  0.00943887047, 1.00167406, 2.83297682):
            pt = c + pt * wt
        y = np.where(central, pc, pt) * v
        for _ in range(3):
            y = y - (erf_float64(y) - v) / (2.0 / np.sqrt(np.pi) * np.exp(-y * y))
        y = np.where(v == 1.0, np.inf, np.where(v == -1.0, -np.inf, y))
        # Paddle computes ndtri((x + 1) / 2) / sqrt(2), and Cephes' ndtri saturates: +-inf beyond +-1
        y = np.where(v > 1.0, np.inf, np.where(v < -1.0, -np.inf, y))
    io.set_output("Out", y.astype(x.dtype))


# -- modified Bessel functions --------------------------------------------------------------------------
def bessel_scaled(x: np.ndarray, order: int) -> np.ndarray:
    """exp(-|x|) I_order(|x|) for order 0 or 1, in float64: the power series (positive terms, no
    cancellation) below 50, the asymptotic expansion above."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    out = np.empty_like(a)
    low = a <= 50.0
    if low.any():
        v = a[low]
        half_sq = (v / 2.0) ** 2
        term = np.ones_like(v) if order == 0 else v / 2.0
        total = term.copy()
        for k in range(1, 200):
            term = term * half_sq / (k * (k + order))
            total = total + term
        out[low] = total * np.exp(-v)
    high = ~low
    if high.any():
        v = a[high]
        mu = 4.0 * order * order
        term = np.ones_like(v)
        total = term.copy()
        with np.errstate(all="ignore"):
            for k in range(1, 30):
                term = term * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * v)
                total = total + term
            out[high] = np.where(np.isinf(v), 0.0, total / np.sqrt(2.0 * np.pi * v))
    out[np.isnan(a)] = np.nan
    return out


@host_kernel("i0", "i0e", "i1", "i1e")
def bessel(io: OpScope) -> None:
    x = float_input(io, slot(io, "X", "x"))
    op = io.op.type
    order = 1 if op.startswith("i1") else 0
    out = bessel_scaled(x, order)
    if order == 1:
        out = np.asarray(np.sign(x.astype(np.float64)) * out)  # I1 is odd (an array for 0-d x too)
        out[np.isnan(x)] = np.nan
    if not op.endswith("e"):
        # exp overflows past 1420; at x = +-inf the scaled value is 0 and 0 * inf is NaN, which the line below
        # sets as Paddle gives it: neither is a warning to show a user
        with np.errstate(over="ignore", invalid="ignore"):
            half = np.exp(np.abs(x.astype(np.float64)) / 2.0)  # in two halves: I0(710) is finite, exp(710) not
            out = out * half * half
        # Paddle's Chebyshev form computes exp(|x|) * c / sqrt(|x|), inf / inf at the infinities
        out = np.where(np.isinf(x), np.nan, out)
    with np.errstate(over="ignore"):  # I0(x) beyond float32's range is inf in float32, as Paddle's
        io.set_output(slot(io, "Out", "out"), out.astype(x.dtype))


SOFTMAX_SHIFT_FLOOR = -64.0  # Paddle's ValueClip in its CPU SoftmaxFunctor


@host_kernel("fused_softmax_mask")
def fused_softmax_mask(io: OpScope) -> None:
    x, mask = float_input(io), io.input("Mask")
    if mask.dtype != x.dtype:
        raise io.error(f"Mask must have X's dtype {x.dtype}, got {mask.dtype}")
    if x.ndim != 4 or mask.ndim != 4:
        raise io.error(f"X and Mask must be 4-D, got dims {list(x.shape)} and {list(mask.shape)}")
    if mask.shape[1] != 1 or tuple(mask.shape[i] for i in (0, 2, 3)) != tuple(x.shape[i] for i in (0, 2, 3)):
        raise io.error(f"Mask must be [batch, 1, query, key] = {[x.shape[0], 1, *x.shape[2:]]} for X "
                       f"{list(x.shape)}, got {list(mask.shape)}")
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf gives NaN, as Paddle's kernel does
        logits = x + mask
        shifted = logits - np.max(logits, axis=-1, keepdims=True)
        exps = np.exp(np.where(shifted < SOFTMAX_SHIFT_FLOOR, x.dtype.type(SOFTMAX_SHIFT_FLOOR), shifted))
        out = exps / np.sum(exps, axis=-1, keepdims=True)
    io.set_output("Out", out.astype(x.dtype, copy=False))
