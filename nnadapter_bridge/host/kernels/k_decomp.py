"""Matrix functions and fused matmul-adds with no NNAdapter operation: determinant, slogdeterminant, inverse,
cholesky, matrix_power, addmm and baddbmm.

float32 and float64, as Paddle 3.3.1's CPU kernels take them, on the last two dimensions (leading ones are a
batch); the result keeps the input dtype. The factorizations are LAPACK's (through numpy), Paddle's Eigen's,
so results agree to rounding, not bit for bit. Where Paddle's kernel refuses an input (a singular matrix to
invert, a matrix that is not positive definite for cholesky) the kernel raises, naming the op. An overflow
to inf (a determinant or power of large values) or a NaN from one is Paddle's result too: numpy's warning
about it is not shown.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

FLOATS = frozenset(np.dtype(t) for t in ("float32", "float64"))


def square_input(io: OpScope, slot: str) -> np.ndarray:
    x = io.input(slot)
    if x.dtype not in FLOATS:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes float32, float64)")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise io.error(f"the input must be a batch of square matrices, got shape {list(x.shape)}")
    return x


@host_kernel("determinant")
def determinant(io: OpScope) -> None:
    x = square_input(io, "Input")
    with np.errstate(all="ignore"):
        out = np.linalg.det(x.astype(np.float64)) if x.size else np.ones(x.shape[:-2])
    io.set_output("Out", np.asarray(out).astype(x.dtype))


@host_kernel("slogdeterminant")
def slogdeterminant(io: OpScope) -> None:
    x = square_input(io, "Input")
    with np.errstate(all="ignore"):  # a singular matrix: log|det| = -inf
        sign, logdet = np.linalg.slogdet(x.astype(np.float64))
    io.set_output("Out", np.stack([np.asarray(sign), np.asarray(logdet)]).astype(x.dtype))


@host_kernel("inverse")
def inverse(io: OpScope) -> None:
    x = square_input(io, "Input")
    try:
        out = np.linalg.inv(x)
    except np.linalg.LinAlgError as e:
        raise io.error(f"the matrix is not invertible ({e})") from None
    io.set_output("Output", out.astype(x.dtype, copy=False))


@host_kernel("cholesky")
def cholesky(io: OpScope) -> None:
    x = square_input(io, "X")
    try:
        lower = np.linalg.cholesky(x)
    except np.linalg.LinAlgError as e:
        raise io.error(f"the matrix is not positive definite ({e})") from None
    out = np.swapaxes(lower, -1, -2) if io.attr("upper", False) else lower
    io.set_output("Out", np.ascontiguousarray(out).astype(x.dtype, copy=False))


@host_kernel("matrix_power")
def matrix_power(io: OpScope) -> None:
    x = square_input(io, "X")
    n = int(io.attr("n", 1))
    try:
        with np.errstate(all="ignore"):
            out = np.linalg.matrix_power(x, n)
    except np.linalg.LinAlgError as e:
        raise io.error(f"a negative power needs an invertible matrix ({e})") from None
    io.set_output("Out", np.asarray(out).astype(x.dtype, copy=False))


def matmul_add(io: OpScope, batched: bool) -> None:
    base, x, y = io.input("Input"), io.input("X"), io.input("Y")
    if x.dtype not in FLOATS:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes float32, float64)")
    rank = 3 if batched else 2
    if x.ndim != rank or y.ndim != rank or x.shape[-1] != y.shape[-2] or (batched and x.shape[0] != y.shape[0]):
        raise io.error(f"X {list(x.shape)} and Y {list(y.shape)} do not multiply as rank-{rank} matrices")
    alpha, beta = x.dtype.type(io.attr("Alpha", 1.0)), x.dtype.type(io.attr("Beta", 1.0))
    with np.errstate(all="ignore"):  # a NaN or inf operand: NaN / inf products, as BLAS gives them
        product = np.matmul(x, y)
    try:
        base = np.broadcast_to(base.astype(x.dtype, copy=False), product.shape)
    except ValueError:
        raise io.error(f"Input {list(base.shape)} does not broadcast to {list(product.shape)}") from None
    # Paddle computes it with BLAS GEMM (C = alpha*A@B + beta*C), which reads neither C when beta is 0 nor A@B
    # when alpha is 0: a NaN or inf there does not reach the result (0 * inf would be NaN)
    with np.errstate(all="ignore"):
        scaled_base = np.zeros_like(product) if beta == 0 else beta * base
        out = scaled_base if alpha == 0 else scaled_base + alpha * product
    io.set_output("Out", np.asarray(out).astype(x.dtype, copy=False))


@host_kernel("addmm")
def addmm(io: OpScope) -> None:
    matmul_add(io, batched=False)


@host_kernel("baddbmm")
def baddbmm(io: OpScope) -> None:
    matmul_add(io, batched=True)
