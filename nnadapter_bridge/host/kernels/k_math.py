"""Elementwise math, reductions and tensor factories with no NNAdapter operation: erf, the inverse and
hyperbolic trig functions, atan2, reduce_prod, size, linspace, eye, einsum, gaussian_random, uniform_random.

The random factories are deterministic given their `seed` attr (numpy's PCG64 seeded with it; seed 0,
which means "pick one" to Paddle, is seed 0 here so a host run is reproducible). Their values cannot match
Paddle's: that would need Paddle's own generator (an mt19937 fed to its distribution code), so only the
shape, dtype and distribution agree.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, paddle_dtype
from nnadapter_bridge.nnadapter.operations.activation import erf as erf_float64

_UNARY = {"acos": np.arccos, "asin": np.arcsin, "atan": np.arctan, "tan": np.tan, "cosh": np.cosh,
          "sinh": np.sinh}


@host_kernel(*_UNARY)
def unary_math(io: OpScope) -> None:
    x = io.input("X")
    with np.errstate(all="ignore"):  # out-of-domain inputs give NaN, as in Paddle, without a warning
        io.set_output("Out", _UNARY[io.op.type](x).astype(x.dtype, copy=False))


@host_kernel("erf")
def erf(io: OpScope) -> None:
    x = io.input("X")
    io.set_output("Out", erf_float64(x.astype(np.float64)).astype(x.dtype))


@host_kernel("atan2")
def atan2(io: OpScope) -> None:
    x1, x2 = io.input("X1"), io.input("X2")
    out = np.arctan2(x1, x2)
    # Paddle computes integer atan2 in float64 and returns float64.
    io.set_output("Out", out if x1.dtype.kind == "f" else out.astype(np.float64))


def reduce_axes(io: OpScope, rank: int):
    dims = io.attr("dim", [])
    dims = [dims] if isinstance(dims, int) else list(dims)
    if io.attr("reduce_all", False) or not dims or rank == 0:
        return None
    return tuple(sorted({d % rank for d in dims}))


@host_kernel("reduce_prod")
def reduce_prod(io: OpScope) -> None:
    x = io.input("X")
    axes = reduce_axes(io, x.ndim)
    out = np.prod(x, axis=axes, keepdims=bool(io.attr("keep_dim", False)))
    out_dtype = io.attr("out_dtype", -1)
    io.set_output("Out", np.asarray(out).astype(paddle_dtype(out_dtype, x.dtype)))


@host_kernel("size")
def size(io: OpScope) -> None:
    io.set_output("Out", np.asarray(io.input("Input").size, dtype=np.int64))


@host_kernel("linspace")
def linspace(io: OpScope) -> None:
    start = float(io.input("Start").reshape(-1)[0])
    stop = float(io.input("Stop").reshape(-1)[0])
    num = int(io.input("Num").reshape(-1)[0])
    dtype = paddle_dtype(io.attr("dtype"), "float32")
    if num < 0:
        raise io.error(f"Num must be non-negative, got {num}")
    if num == 0:
        io.set_output("Out", np.zeros([0], dtype))  # Paddle gives an empty result
        return
    if num == 1:
        io.set_output("Out", np.asarray([start]).astype(dtype))
        return
    # Paddle's kernel fills the first half from Start and the second half back from Stop, in double; the
    # result is symmetric and hits Stop exactly, which a single start + i*step would not.
    step = (stop - start) / (num - 1)
    i = np.arange(num, dtype=np.float64)
    values = np.where(i < num // 2, start + step * i, stop - step * (num - 1 - i))
    io.set_output("Out", values.astype(dtype))


@host_kernel("eye")
def eye(io: OpScope) -> None:
    # Either may come from a one-element tensor (a Variable-valued attribute, read as a list).
    rows = int(np.asarray(io.attr("num_rows", 0)).reshape(-1)[0])
    cols = int(np.asarray(io.attr("num_columns", -1)).reshape(-1)[0])
    cols = rows if cols < 0 else cols
    io.set_output("Out", np.eye(rows, cols, dtype=paddle_dtype(io.attr("dtype"), "float32")))


@host_kernel("einsum")
def einsum(io: OpScope) -> None:
    operands = io.inputs("Operands")
    equation = str(io.attr("equation")).replace(" ", "")
    out = np.einsum(equation, *operands, optimize=len(operands) > 2)
    io.set_output("Out", np.asarray(out).astype(np.result_type(*operands), copy=False))


def random_shape(io: OpScope) -> tuple:
    if io.has_input("ShapeTensor"):
        return tuple(int(d) for d in io.input("ShapeTensor").reshape(-1))
    if io.has_input("ShapeTensorList"):
        return tuple(int(np.asarray(t).reshape(-1)[0]) for t in io.inputs("ShapeTensorList"))
    return tuple(int(d) for d in io.attr("shape", []))


@host_kernel("gaussian_random")
def gaussian_random(io: OpScope) -> None:
    rng = np.random.default_rng(int(io.attr("seed", 0)))
    values = rng.normal(float(io.attr("mean", 0.0)), float(io.attr("std", 1.0)), size=random_shape(io))
    io.set_output("Out", values.astype(paddle_dtype(io.attr("dtype"), "float32")))


@host_kernel("uniform_random")
def uniform_random(io: OpScope) -> None:
    rng = np.random.default_rng(int(io.attr("seed", 0)))
    values = rng.uniform(float(io.attr("min", -1.0)), float(io.attr("max", 1.0)), size=random_shape(io))
    values = values.astype(paddle_dtype(io.attr("dtype"), "float32"))
    diag_num = int(io.attr("diag_num", 0))
    if diag_num > 0:
        # Paddle's diagonal initialisation: element i*diag_step + i of the flat tensor gets diag_val.
        flat = values.reshape(-1)
        positions = np.arange(diag_num) * (int(io.attr("diag_step", 0)) + 1)
        flat[positions[positions < flat.size]] = float(io.attr("diag_val", 1.0))
    io.set_output("Out", values)
