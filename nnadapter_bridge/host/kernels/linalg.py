"""Matrix factorizations, linear solvers and ranks, which NNAdapter has no operation for (a host-only family): solve,
triangular_solve, cholesky_solve, lu_solve, lstsq; qr, svd, svdvals, eigh, eigvalsh, eig, eigvals, lu, lu_unpack;
slogdet_v2, matrix_rank (also the PIR matrix_rank_tol) and matrix_rank_atol_rtol. (determinant, slogdeterminant,
inverse, cholesky and matrix_power live with the matmul family, in matmul.py; pinv is no op: Paddle builds it from
svd and elementwise ops.)

Each follows Paddle 3.3.1's CPU kernel: float32 and float64 inputs, the last two dimensions are the matrices and the
leading ones a batch (broadcast between the two operands of solve, triangular_solve, cholesky_solve and lu_solve, as
Paddle does; lstsq needs equal batches). Results keep the input's width; eig and eigvals give complex64 / complex128,
the complex values the spectral family handles too; lu's pivots and infos are int32, the ranks int64 (lstsq's int32).

Paddle's kernels are LAPACK's and Eigen's; these are numpy's LAPACK where numpy has the routine (gesv, geqrf,
gesdd, syevd, geev), so they agree to rounding and, for the factors fixed only up to sign, in the sign LAPACK gives.
Paddle returns values where LAPACK does, and so do these: a zero on a triangular diagonal gives inf / NaN (the
triangular solves substitute row by row as BLAS trsm does), a singular lu sets its info, slogdet_v2 computes the
determinant itself in the input's precision (an overflow shows as log|det| = inf, a NaN matrix as sign 0). Where
Paddle's kernel refuses (solve on a singular matrix, an svd that does not converge, lu without pivoting) the kernel
raises, naming the op.

Entry points: its kernels, registered with `@host_kernel`, and `matrices` (matmul's matrix kernels read their
input with it). Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import FLOATS, OpScope, host_kernel, require, slot

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


# -- shared helpers ---------------------------------------------------------------------------------------------------
def matrices(io: OpScope, slot_name: str, *, square: bool = False) -> np.ndarray:
    """Input `slot_name`, a float32/float64 batch of matrices (of square ones with `square`)."""
    x = io.input(slot_name)
    require(io, x, FLOATS)
    if x.ndim < 2:
        raise io.error(f"input '{slot_name}' must be a batch of matrices (rank >= 2), got shape {list(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise io.error(f"input '{slot_name}' must be a batch of square matrices, got shape {list(x.shape)}")
    return x


def _broadcast_batches(io: OpScope, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`a` and `b` with their batch dimensions (all but the last two) broadcast to one batch shape."""
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise io.error(f"the batch dimensions of {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    return np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])


def _empty(dtype) -> np.ndarray:
    """What Paddle gives for an output the op does not compute in a mode (an empty tensor)."""
    return np.zeros((0,), dtype)


def _substitute(t: np.ndarray, b: np.ndarray, *, lower: bool, unit: bool) -> np.ndarray:
    """x with t @ x = b for the lower (upper) triangle of `t` (batches already broadcast), reading nothing above
    (below) the diagonal and, with `unit`, not the diagonal either.

    Row by row in the input's precision, as BLAS trsm: a zero on the diagonal gives inf / NaN, Paddle's result,
    where a general solver would refuse the matrix."""
    n = t.shape[-1]
    x = np.empty(b.shape, b.dtype)
    with np.errstate(all="ignore"):
        for i in range(n) if lower else range(n - 1, -1, -1):
            solved = slice(0, i) if lower else slice(i + 1, n)
            rest = b[..., i, :] - (t[..., i:i + 1, solved] @ x[..., solved, :])[..., 0, :]
            x[..., i, :] = rest if unit else rest / t[..., i, i, None]
    return x


def _getrf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LAPACK getrf on a batch of [m, n] matrices in the input's precision: (the packed L\\U factors, the 0-based
    pivot rows [..., min(m, n)], the infos [...]: 0, or the 1-based column of the first zero pivot).

    numpy has no LU; this is getrf's partial pivoting step by step, which picks the row of the largest |value|
    (the first on a tie; a NaN is never picked unless it heads the column, as BLAS idamax does) and leaves a
    zero column unscaled, so a singular matrix factors as LAPACK's does instead of raising."""
    m, n = x.shape[-2:]
    steps = min(m, n)
    lu = np.array(x, copy=True).reshape((int(np.prod(x.shape[:-2])), m, n))  # -1 cannot size an empty batch
    batch = np.arange(lu.shape[0])
    pivots = np.empty((lu.shape[0], steps), np.int64)
    infos = np.zeros(lu.shape[0], np.int32)
    with np.errstate(all="ignore"):
        for j in range(steps):
            column = np.abs(lu[:, j:, j])
            nan = np.isnan(column)
            pivot_row = np.where(nan[:, 0], 0, np.argmax(np.where(nan, -1, column), axis=1)) + j
            pivots[:, j] = pivot_row
            row_j = lu[batch, j].copy()
            lu[batch, j] = lu[batch, pivot_row]
            lu[batch, pivot_row] = row_j
            pivot = lu[:, j, j]
            zero = pivot == 0
            infos[(infos == 0) & zero] = j + 1
            below = lu[:, j + 1:, j]
            multipliers = np.where(zero[:, None], below, below / np.where(zero, 1, pivot)[:, None])
            lu[:, j + 1:, j] = multipliers
            lu[:, j + 1:, j + 1:] -= multipliers[:, :, None] * lu[:, j, None, j + 1:]
    batch_shape = x.shape[:-2]
    return lu.reshape(x.shape), pivots.reshape(batch_shape + (steps,)), infos.reshape(batch_shape)


def _row_order(pivots: np.ndarray, m: int) -> np.ndarray:
    """The row order [..., m] getrf's 0-based `pivots` [..., k] apply, one swap after another: row i of the
    factored matrix P'A is row order[i] of A (so A = P L U with P[order[i], i] = 1)."""
    order = np.broadcast_to(np.arange(m), pivots.shape[:-1] + (m,)).copy()
    for i in range(pivots.shape[-1]):
        target = pivots[..., i:i + 1]
        row_i = order[..., i:i + 1].copy()
        order[..., i:i + 1] = np.take_along_axis(order, target, axis=-1)
        np.put_along_axis(order, target, row_i, axis=-1)
    return order


def _lu_pivots(io: OpScope, pivots: np.ndarray, m: int, steps: int) -> np.ndarray:
    """Paddle's 1-based int pivots [..., steps] as 0-based rows, checked to be rows of an m-row matrix."""
    if pivots.dtype.kind not in "iu":
        raise io.error(f"the pivots must be integers (lu's int32 output), got {pivots.dtype}")
    if pivots.ndim < 1 or pivots.shape[-1] != steps:
        raise io.error(f"the pivots must be [..., {steps}] for these LU factors, got shape {list(pivots.shape)}")
    if pivots.size and (pivots.min() < 1 or pivots.max() > m):
        raise io.error(f"a pivot is out of the rows 1..{m} (pivots {pivots.min()}..{pivots.max()})")
    return pivots.astype(np.int64) - 1


def _singular_values(io: OpScope, x: np.ndarray, hermitian: bool) -> np.ndarray:
    """The singular values of each matrix, |eigenvalues| of its lower triangle for a hermitian one (Paddle reads
    only that triangle then)."""
    try:
        return np.abs(np.linalg.eigvalsh(x, UPLO="L")) if hermitian else np.linalg.svd(x, compute_uv=False)
    except np.linalg.LinAlgError as e:
        raise io.error(f"the singular values did not converge ({e})") from None


def _count_rank(singular_values: np.ndarray, atol: np.ndarray, rtol: np.ndarray) -> np.ndarray:
    """int64 ranks: the singular values above max(atol, rtol * the largest one), atol and rtol broadcasting
    against the batch (a negative atol is a zero one: the zero matrix has rank 0 whatever the tolerance)."""
    largest = singular_values.max(axis=-1, initial=0)
    tolerance = np.maximum(atol, rtol * largest)
    return np.count_nonzero(singular_values > tolerance[..., None], axis=-1).astype(np.int64)


# -- solvers -----------------------------------------------------------------------------------------------------------
@host_kernel("solve")
def solve(io: OpScope) -> None:
    a = matrices(io, "X", square=True)
    b = io.input("Y")
    require(io, b, FLOATS)
    # Paddle's rule (solve_kernel_impl.h): Y is a (batch of) vector(s) when it is 1-D or shaped X.shape[:-1]
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    rhs = b[..., None] if vector else b
    if rhs.ndim < 2 or rhs.shape[-2] != a.shape[-1]:
        raise io.error(f"Y {list(b.shape)} does not fit X {list(a.shape)} (Y must be [..., {a.shape[-1]}, K])")
    a, rhs = _broadcast_batches(io, a, rhs)
    try:
        out = np.linalg.solve(a, rhs)
    except np.linalg.LinAlgError:
        raise io.error("the matrix is not invertible (a zero pivot in its LU factorization)") from None
    io.set_output("Out", (out[..., 0] if vector else out).astype(a.dtype, copy=False))


@host_kernel("triangular_solve")
def triangular_solve(io: OpScope) -> None:
    a = matrices(io, "X", square=True)
    b = matrices(io, "Y")
    if b.shape[-2] != a.shape[-1]:
        raise io.error(f"Y {list(b.shape)} does not fit X {list(a.shape)} (Y must be [..., {a.shape[-1]}, K])")
    upper, transpose = bool(io.attr("upper", True)), bool(io.attr("transpose", False))
    unit = bool(io.attr("unitriangular", False))
    a, b = _broadcast_batches(io, a, b)
    # op(A) = A^T is triangular the other way round
    matrix, lower = (np.swapaxes(a, -1, -2), upper) if transpose else (a, not upper)
    io.set_output("Out", _substitute(matrix, b.astype(a.dtype), lower=lower, unit=unit))


@host_kernel("cholesky_solve")
def cholesky_solve(io: OpScope) -> None:
    b = matrices(io, "X")
    factor = matrices(io, "Y", square=True)
    if b.shape[-2] != factor.shape[-1]:
        raise io.error(f"X {list(b.shape)} does not fit the factor Y {list(factor.shape)}")
    factor, b = _broadcast_batches(io, factor, b.astype(factor.dtype))
    transposed = np.swapaxes(factor, -1, -2)
    if io.attr("upper", False):  # A = U^T U
        out = _substitute(factor, _substitute(transposed, b, lower=True, unit=False), lower=False, unit=False)
    else:  # A = L L^T
        out = _substitute(transposed, _substitute(factor, b, lower=True, unit=False), lower=False, unit=False)
    io.set_output("Out", out)


@host_kernel("lu_solve")
def lu_solve(io: OpScope) -> None:
    b = matrices(io, "b")
    lu = matrices(io, "lu", square=True)
    m = lu.shape[-1]
    rows = _row_order(_lu_pivots(io, io.input("pivots"), m, m), m)
    if b.shape[-2] != m:
        raise io.error(f"b {list(b.shape)} does not fit the LU factors {list(lu.shape)}")
    trans = str(io.attr("trans", "N")).upper()
    if trans not in ("N", "T", "C"):
        raise io.error(f"trans must be 'N', 'T' or 'C', got {trans!r}")
    lu, b = _broadcast_batches(io, lu, b.astype(lu.dtype))
    rows = np.broadcast_to(rows, lu.shape[:-1])
    if trans == "N":  # A = P L U: L U x = P^T b
        permuted = np.take_along_axis(b, rows[..., None], axis=-2)
        y = _substitute(lu, permuted, lower=True, unit=True)
        out = _substitute(lu, y, lower=False, unit=False)
    else:  # A^T = U^T L^T P^T (real matrices: 'C' is 'T')
        lu_t = np.swapaxes(lu, -1, -2)
        z = _substitute(lu_t, _substitute(lu_t, b, lower=True, unit=False), lower=False, unit=True)
        out = np.empty_like(z)
        np.put_along_axis(out, np.broadcast_to(rows[..., None], z.shape), z, axis=-2)
    io.set_output("out", out)


@host_kernel("lstsq")
def lstsq(io: OpScope) -> None:
    x, y = matrices(io, "X"), matrices(io, "Y")
    if x.shape[:-2] != y.shape[:-2] or x.shape[-2] != y.shape[-2]:
        raise io.error(f"X {list(x.shape)} and Y {list(y.shape)} must be [*, M, N] and [*, M, K] with one batch")
    driver = str(io.attr("driver", "gelsy"))
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise io.error(f"driver must be gels, gelsy, gelsd or gelss on the CPU, got {driver!r}")
    m, n = x.shape[-2:]
    # One SVD in double serves every driver: on a matrix of full rank they all give the least-squares (m >= n) or
    # minimum-norm (m < n) solution; on a rank-deficient one gelsy/gelsd/gelss give the minimum-norm solution of
    # the matrix cut at rcond * sigma_max (gelsy by a pivoted QR's condition estimate, the SVD cut elsewhere),
    # gels (which assumes full rank) no meaningful value.
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    try:
        u, s, vh = np.linalg.svd(x64, full_matrices=False)
    except np.linalg.LinAlgError as e:
        raise io.error(f"the SVD did not converge ({e})") from None
    rcond = float(io.attr("rcond", -1.0))
    if driver == "gels":
        kept = s > 0
    else:
        cut = (rcond if rcond >= 0 else np.finfo(x.dtype).eps) * s.max(axis=-1, initial=0)[..., None]
        kept = s > cut
    with np.errstate(all="ignore"):
        inverse_s = np.where(kept, 1.0 / np.where(kept, s, 1.0), 0.0)
        solution = np.swapaxes(vh, -1, -2) @ (inverse_s[..., None] * (np.swapaxes(u, -1, -2) @ y64))
    rank = np.count_nonzero(kept, axis=-1).astype(np.int32)
    io.set_output("Solution", solution.astype(x.dtype))
    # Paddle reports the residuals only where LAPACK leaves them (M > N, a full-rank batch) and gelsy never does
    if m > n and driver != "gelsy" and (driver == "gels" or bool(np.all(rank == n))):
        with np.errstate(all="ignore"):
            residuals = np.sum((x64 @ solution - y64) ** 2, axis=-2)
        io.set_output("Residuals", residuals.astype(x.dtype))
    else:
        io.set_output("Residuals", _empty(x.dtype))
    io.set_output("Rank", _empty(np.int32) if driver == "gels" else rank)
    io.set_output("SingularValues", s.astype(x.dtype) if driver in ("gelsd", "gelss") else _empty(x.dtype))


# -- factorizations ----------------------------------------------------------------------------------------------------
@host_kernel("qr")
def qr(io: OpScope) -> None:
    x = matrices(io, "X")
    mode = str(io.attr("mode", "reduced"))
    if mode not in ("reduced", "complete", "r"):
        raise io.error(f"mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    # LAPACK geqrf (numpy) and Eigen's HouseholderQR (Paddle) pick the same reflectors: R's diagonal has the
    # opposite sign of the column head it eliminates, so Q and R agree with Paddle's, not just up to sign
    if mode == "r":
        q, r = _empty(x.dtype), np.linalg.qr(x, mode="r")
    else:
        q, r = np.linalg.qr(x, mode=mode)
    io.set_output("Q", np.asarray(q, x.dtype))
    io.set_output("R", np.asarray(r, x.dtype))


def _svd(io: OpScope, x: np.ndarray, **kw):
    try:
        return np.linalg.svd(x, **kw)
    except np.linalg.LinAlgError as e:  # a NaN or inf input: Paddle's gesdd reports an illegal value
        raise io.error(f"the SVD did not converge ({e})") from None


@host_kernel("svd")
def svd(io: OpScope) -> None:
    x = matrices(io, "X")
    u, s, vh = _svd(io, x, full_matrices=bool(io.attr("full_matrices", False)))
    io.set_output("U", u.astype(x.dtype, copy=False))
    io.set_output("S", s.astype(x.dtype, copy=False))
    io.set_output("VH", vh.astype(x.dtype, copy=False))


@host_kernel("svdvals")
def svdvals(io: OpScope) -> None:
    x = matrices(io, slot(io, "X", "x"))
    io.set_output(slot(io, "S", "s"), _svd(io, x, compute_uv=False).astype(x.dtype, copy=False))


def _uplo(io: OpScope, name: str) -> str:
    uplo = str(io.attr(name, "L")).upper()
    if uplo not in ("L", "U"):
        raise io.error(f"{name} must be 'L' or 'U', got {uplo!r}")
    return uplo


@host_kernel("eigh")
def eigh(io: OpScope) -> None:
    x = matrices(io, "X", square=True)
    values, vectors = np.linalg.eigh(x, UPLO=_uplo(io, "UPLO"))  # a NaN gives NaNs, as in Paddle
    io.set_output("Eigenvalues", values.astype(x.dtype, copy=False))
    io.set_output("Eigenvectors", vectors.astype(x.dtype, copy=False))


@host_kernel("eigvalsh")
def eigvalsh(io: OpScope) -> None:
    x = matrices(io, "X", square=True)
    uplo = _uplo(io, "UPLO")
    if io.attr("is_test", True):  # inference: Paddle computes no eigenvectors (it needs them only for a gradient)
        io.set_output("Eigenvalues", np.linalg.eigvalsh(x, UPLO=uplo).astype(x.dtype, copy=False))
        return
    values, vectors = np.linalg.eigh(x, UPLO=uplo)
    io.set_output("Eigenvalues", values.astype(x.dtype, copy=False))
    io.set_output("Eigenvectors", vectors.astype(x.dtype, copy=False))


def _eig(io: OpScope, x: np.ndarray, vectors: bool):
    try:
        return np.linalg.eig(x) if vectors else np.linalg.eigvals(x)
    except np.linalg.LinAlgError as e:
        raise io.error(f"the eigenvalues did not converge ({e})") from None


@host_kernel("eig")
def eig(io: OpScope) -> None:
    x = matrices(io, "X", square=True)
    # LAPACK geev, as Paddle's CPU kernel: unit-norm eigenvectors whose largest component is real; always complex
    # (numpy gives a real array when every eigenvalue is real)
    values, vectors = _eig(io, x, vectors=True)
    io.set_output("Eigenvalues", values.astype(_COMPLEX_OF[x.dtype]))
    io.set_output("Eigenvectors", vectors.astype(_COMPLEX_OF[x.dtype]))


@host_kernel("eigvals")
def eigvals(io: OpScope) -> None:
    x = matrices(io, "X", square=True)
    io.set_output("Out", _eig(io, x, vectors=False).astype(_COMPLEX_OF[x.dtype]))


@host_kernel("lu")
def lu(io: OpScope) -> None:
    x = matrices(io, "X")
    if not io.attr("pivots", io.attr("pivot", True)):
        raise io.error("lu without pivoting is not implemented on the CPU (Paddle's kernel refuses pivot=False)")
    factors, pivots, infos = _getrf(x)
    io.set_output("Out", factors)
    io.set_output("Pivots", (pivots + 1).astype(np.int32))  # LAPACK's 1-based rows
    io.set_output("Infos", infos)


@host_kernel("lu_unpack")
def lu_unpack(io: OpScope) -> None:
    factors = matrices(io, "X")
    m, n = factors.shape[-2:]
    steps = min(m, n)
    # Paddle leaves the outputs of a part it does not unpack unallocated: they are not bound here either
    if io.attr("unpack_ludata", True):
        lower = np.tril(factors[..., :, :steps], -1) + np.eye(m, steps, dtype=factors.dtype)
        io.set_output("L", lower.astype(factors.dtype, copy=False))
        io.set_output("U", np.triu(factors[..., :steps, :]))
    if io.attr("unpack_pivots", True):
        rows = _row_order(_lu_pivots(io, io.input("Pivots"), m, steps), m)
        permutation = np.zeros(rows.shape + (m,), factors.dtype)
        np.put_along_axis(permutation, rows[..., :, None], 1, axis=-1)  # P'[i, rows[i]] = 1
        io.set_output("Pmat", np.swapaxes(permutation, -1, -2).copy())  # P = P'^T, A = P L U


@host_kernel("slogdet_v2")
def slogdet_v2(io: OpScope) -> None:
    x = matrices(io, slot(io, "X", "x"), square=True)
    factors, pivots, _ = _getrf(x)
    swaps = np.count_nonzero(pivots != np.arange(pivots.shape[-1]), axis=-1)
    # Paddle takes sign and log|det| of the determinant itself, in the input's precision: a product that
    # overflows (underflows) gives log|det| = inf (-inf, sign 0) and a NaN one sign 0 and log|det| NaN
    with np.errstate(all="ignore"):
        det = np.prod(np.diagonal(factors, axis1=-2, axis2=-1), axis=-1) * np.where(swaps % 2, -1, 1).astype(x.dtype)
        sign = np.where(np.isnan(det), 0, np.sign(det))
        logdet = np.log(np.abs(det))
    io.set_output(slot(io, "Sign", "sign"), np.asarray(sign, x.dtype))
    io.set_output(slot(io, "Logdet", "logdet"), np.asarray(logdet, x.dtype))


# -- ranks -------------------------------------------------------------------------------------------------------------
@host_kernel("matrix_rank")
def matrix_rank(io: OpScope) -> None:
    """The legacy op and PIR's matrix_rank_tol (its tolerance tensor in 'atol_tensor'): absolute tolerance `tol`
    (or the tensor); with use_default_tol, eps * max(M, N) * sigma_max instead."""
    x = matrices(io, "X")
    eps_rtol = np.finfo(x.dtype).eps * max(x.shape[-2:])
    rtol = x.dtype.type(eps_rtol if io.attr("use_default_tol", True) else 0)
    tol_slot = "TolTensor" if io.has_input("TolTensor") else "atol_tensor"
    if io.has_input(tol_slot):
        atol = io.input(tol_slot).astype(x.dtype)
    else:
        atol = np.asarray(0 if io.attr("use_default_tol", True) else io.attr("tol", 0.0), x.dtype)
    io.set_output("Out", _count_rank(_singular_values(io, x, bool(io.attr("hermitian", False))), atol, rtol))


@host_kernel("matrix_rank_atol_rtol")
def matrix_rank_atol_rtol(io: OpScope) -> None:
    x = matrices(io, "x")
    atol = io.input("atol").astype(x.dtype)
    if io.has_input("rtol"):
        rtol = io.input("rtol").astype(x.dtype)
    else:
        # Paddle's kernel: rtol = eps * max(M, N) where atol is exactly 0, else 0 (its docstring says "where atol
        # is not above 0", but a negative atol gets rtol 0 in 3.3.1)
        rtol = np.where(atol == 0, np.finfo(x.dtype).eps * max(x.shape[-2:]), 0).astype(x.dtype)
    io.set_output("out", _count_rank(_singular_values(io, x, bool(io.attr("hermitian", False))), atol, rtol))
