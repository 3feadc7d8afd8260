"""Linear-algebra ops with no NNAdapter operation: dist, mv, kron, cross, trace, diag_v2, diagonal.

Each follows Paddle 3.3.1's CPU kernel dtype by dtype: dist and mv take float32/float64 only; kron, trace,
diag_v2 and diagonal also take the integer (and bool, where Paddle does) types and keep the input dtype.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

FLOAT_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64"))
NUMERIC_DTYPES = FLOAT_DTYPES | frozenset(np.dtype(t) for t in ("int32", "int64"))


def require_dtype(io: OpScope, x: np.ndarray, allowed) -> None:
    if x.dtype not in allowed:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes {sorted(map(str, allowed))})")


@host_kernel("dist")
def dist(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    require_dtype(io, x, FLOAT_DTYPES)
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
    require_dtype(io, x, FLOAT_DTYPES)
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
