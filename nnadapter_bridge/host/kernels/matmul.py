"""Matrix products and linear algebra with no NNAdapter operation (the standard's matmul family): einsum,
dist, mv, kron, cross, trace, diag_v2, diagonal; the matrix functions determinant, slogdeterminant, inverse,
cholesky, matrix_power and the fused matmul-adds addmm and baddbmm.

Each follows Paddle 3.3.1's CPU kernel dtype by dtype: dist and mv take float32/float64 only; kron, trace,
diag_v2 and diagonal also take the integer (and bool, where Paddle does) types and keep the input dtype.

The matrix functions and matmul-adds take float32 and float64, as Paddle 3.3.1's CPU kernels do, on the last
two dimensions (leading ones are a batch); the result keeps the input dtype. The factorizations are LAPACK's
(through numpy), Paddle's Eigen's, so results agree to rounding, not bit for bit. Where Paddle's kernel refuses
an input (a singular matrix to invert, a matrix that is not positive definite for cholesky) the kernel raises,
naming the op. An overflow to inf (a determinant or power of large values) or a NaN from one is Paddle's
result too: numpy's warning about it is not shown.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry, numpy and linalg's `matrices`; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.linalg import matrices
from nnadapter_bridge.host.kernels.registry import FLOATS, OpScope, host_kernel, require


@host_kernel("einsum")
def einsum(io: OpScope) -> None:
    operands = io.inputs("Operands")
    equation = str(io.attr("equation")).replace(" ", "")
    out = np.einsum(equation, *operands, optimize=len(operands) > 2)
    io.set_output("Out", np.asarray(out).astype(np.result_type(*operands), copy=False))


FLOAT_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64"))


NUMERIC_DTYPES = FLOAT_DTYPES | frozenset(np.dtype(t) for t in ("int32", "int64"))


@host_kernel("dist")
def dist(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOAT_DTYPES)
    p = float(io.attr("p", 2.0))
    diff = np.abs(x - y)
    if diff.size == 0:
        out = 0.0
    elif p == 0:
        out = np.count_nonzero(diff)  # a NaN difference counts as non-zero, as in Paddle
    elif p == np.inf:
        out = diff.max()
    elif p == -np.inf:
        out = diff.min()
    else:
        with np.errstate(all="ignore"):
            out = np.sum(diff ** p) ** (1.0 / p)
    io.set_output("Out", np.asarray(out, dtype=x.dtype))


@host_kernel("mv")
def mv(io: OpScope) -> None:
    x, vec = io.input("X"), io.input("Vec")
    require(io, x, FLOAT_DTYPES)
    if x.ndim != 2 or vec.ndim != 1 or x.shape[1] != vec.shape[0]:
        raise io.error(f"X must be [M, N] and Vec [N], got {list(x.shape)} and {list(vec.shape)}")
    io.set_output("Out", np.matmul(x, vec).astype(x.dtype, copy=False))


@host_kernel("kron")
def kron(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    io.set_output("Out", np.kron(x, y).astype(np.result_type(x, y), copy=False))


@host_kernel("cross")
def cross(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    if x.shape != y.shape:
        raise io.error(f"X and Y must have one shape, got {list(x.shape)} and {list(y.shape)}")
    dim = int(io.attr("dim", 9))
    if dim == 9:
        # 9 (DDim::kMaxRank) is Paddle's axis=None: the first axis of size 3
        sizes = [i for i, d in enumerate(x.shape) if d == 3]
        if not sizes:
            raise io.error(f"no axis of size 3 in the input shape {list(x.shape)}")
        dim = sizes[0]
    if x.shape[dim] != 3:
        raise io.error(f"axis {dim} must have size 3, got {x.shape[dim]}")
    io.set_output("Out", np.cross(x, y, axis=dim).astype(x.dtype, copy=False))


@host_kernel("trace")
def trace(io: OpScope) -> None:
    x = io.input("Input")
    offset, axis1, axis2 = (int(io.attr(k, d)) for k, d in (("offset", 0), ("axis1", 0), ("axis2", 1)))
    out = np.trace(x, offset=offset, axis1=axis1, axis2=axis2, dtype=x.dtype)
    io.set_output("Out", np.asarray(out, dtype=x.dtype))


@host_kernel("diag_v2")
def diag_v2(io: OpScope) -> None:
    x = io.input("X")
    offset = int(io.attr("offset", 0))
    if x.ndim <= 1:
        x = x.reshape(-1)
        n = x.size + abs(offset)
        out = np.full((n, n), io.attr("padding_value", 0.0), dtype=x.dtype)
        rows = np.arange(x.size) + max(-offset, 0)
        out[rows, rows + offset] = x
    elif x.ndim == 2:
        out = np.diagonal(x, offset).copy()
    else:
        raise io.error(f"X must be 0-D, 1-D or 2-D, got rank {x.ndim}")
    io.set_output("Out", out)


@host_kernel("diagonal")
def diagonal(io: OpScope) -> None:
    x = io.input("Input")
    offset, axis1, axis2 = (int(io.attr(k, d)) for k, d in (("offset", 0), ("axis1", 0), ("axis2", 1)))
    io.set_output("Out", np.diagonal(x, offset, axis1, axis2).copy())


@host_kernel("determinant")
def determinant(io: OpScope) -> None:
    x = matrices(io, "Input", square=True)
    with np.errstate(all="ignore"):
        out = np.linalg.det(x.astype(np.float64)) if x.size else np.ones(x.shape[:-2])
    io.set_output("Out", np.asarray(out).astype(x.dtype))


@host_kernel("slogdeterminant")
def slogdeterminant(io: OpScope) -> None:
    x = matrices(io, "Input", square=True)
    with np.errstate(all="ignore"):  # a singular matrix: log|det| = -inf
        sign, logdet = np.linalg.slogdet(x.astype(np.float64))
    io.set_output("Out", np.stack([np.asarray(sign), np.asarray(logdet)]).astype(x.dtype))


@host_kernel("inverse")
def inverse(io: OpScope) -> None:
    x = matrices(io, "Input", square=True)
    try:
        out = np.linalg.inv(x)
    except np.linalg.LinAlgError as e:
        raise io.error(f"the matrix is not invertible ({e})") from None
    io.set_output("Output", out.astype(x.dtype, copy=False))


@host_kernel("cholesky")
def cholesky(io: OpScope) -> None:
    x = matrices(io, "X", square=True)
    try:
        lower = np.linalg.cholesky(x)
    except np.linalg.LinAlgError as e:
        raise io.error(f"the matrix is not positive definite ({e})") from None
    out = np.swapaxes(lower, -1, -2) if io.attr("upper", False) else lower
    io.set_output("Out", np.ascontiguousarray(out).astype(x.dtype, copy=False))


@host_kernel("matrix_power")
def matrix_power(io: OpScope) -> None:
    x = matrices(io, "X", square=True)
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
