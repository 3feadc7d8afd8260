"""Tensor factories with no NNAdapter operation (the standard's generate family): size, linspace, logspace,
eye, tril_indices, triu_indices, gaussian_random, uniform_random, and empty (`shape` as an attr, the
`ShapeTensor` tensor or the `ShapeTensorList` list: its output dims are the tensors' values, which a static
NNAdapter model cannot take when they are computed at run time).

The random factories are deterministic given their `seed` attr (numpy's PCG64 seeded with it; seed 0,
which means "pick one" to Paddle, is seed 0 here so a host run is reproducible). Their values cannot match
Paddle's: that would need Paddle's own generator (an mt19937 fed to its distribution code), so only the
shape, dtype and distribution agree.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry, numpy and the converters' `linspace_values` (Paddle's linspace, shared with its converter); never
a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from converters.generate import linspace_values
from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, paddle_dtype, slot


def ints_from(io: OpScope, attr: str, tensor: str, tensor_list: str) -> list:
    """An int-list attribute from the tensor list (each a one-element tensor), else the tensor, else the attr
    (Paddle's priority for crop_tensor and empty)."""
    if io.has_input(tensor_list):
        return [int(np.asarray(v).reshape(-1)[0]) for v in io.inputs(tensor_list)]
    if io.has_input(tensor):
        return [int(v) for v in io.input(tensor).reshape(-1)]
    value = io.attr(attr, [])
    return [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


@host_kernel("empty")
def empty(io: OpScope) -> None:
    """Paddle leaves the values uninitialized; zeros are one such tensor (and reproducible)."""
    shape = ints_from(io, "shape", "ShapeTensor", "ShapeTensorList")
    if any(d < 0 for d in shape):
        raise io.error(f"shape {shape} has a negative dim")
    io.set_output("Out", np.zeros(shape, dtype=paddle_dtype(io.attr("dtype"), "float32")))


@host_kernel("size")
def size(io: OpScope) -> None:
    io.set_output("Out", np.asarray(io.input("Input").size, dtype=np.int64))


@host_kernel("linspace")
def linspace(io: OpScope) -> None:
    start, stop = io.input("Start").reshape(-1)[0], io.input("Stop").reshape(-1)[0]
    num = int(io.input("Num").reshape(-1)[0])
    try:
        io.set_output("Out", linspace_values(start, stop, num, paddle_dtype(io.attr("dtype"), "float32")))
    except ValueError as exc:
        raise io.error(str(exc)) from None


@host_kernel("eye")
def eye(io: OpScope) -> None:
    # Either may come from a one-element tensor (a Variable-valued attribute, read as a list).
    rows = int(np.asarray(io.attr("num_rows", 0)).reshape(-1)[0])
    cols = int(np.asarray(io.attr("num_columns", -1)).reshape(-1)[0])
    cols = rows if cols < 0 else cols
    io.set_output("Out", np.eye(rows, cols, dtype=paddle_dtype(io.attr("dtype"), "float32")))


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


def triangle_indices(io: OpScope, rows: int, cols: int, offset: int, lower: bool) -> None:
    if rows < 0 or cols < 0:
        raise io.error(f"rows and cols must be non-negative, got {rows} and {cols}")
    fn = np.tril_indices if lower else np.triu_indices
    r, c = fn(rows, offset, cols)
    io.set_output(slot(io, "Out", "out"), np.stack([r, c]).astype(paddle_dtype(io.attr("dtype", 3), "int64")))


@host_kernel("tril_indices")
def tril_indices(io: OpScope) -> None:
    triangle_indices(io, int(io.attr("rows")), int(io.attr("cols")), int(io.attr("offset", 0)), True)


@host_kernel("triu_indices")
def triu_indices(io: OpScope) -> None:
    triangle_indices(io, int(io.attr("row")), int(io.attr("col")), int(io.attr("offset", 0)), False)


def scalar_input(io: OpScope, name: str) -> float:
    value = io.input(name)
    if value.size != 1:
        raise io.error(f"{name} must hold one element, got shape {list(value.shape)}")
    return value.reshape(()).item()


@host_kernel("logspace")
def logspace(io: OpScope) -> None:
    dtype = paddle_dtype(io.attr("dtype", 5), "float32")
    # Paddle reads start, stop and base in the output dtype before computing
    start, stop, base = (np.asarray(scalar_input(io, n)).astype(dtype).item() for n in ("Start", "Stop", "Base"))
    num = int(scalar_input(io, "Num"))
    if num <= 0:
        raise io.error(f"Num must be positive, got {num}")
    if num == 1:
        out = np.asarray([base ** start], np.float64)
    else:
        # Paddle's kernel: the first half steps up from start, the second half down from stop
        step = (stop - start) / (num - 1)
        i = np.arange(num, dtype=np.float64)
        exponent = np.where(i < num // 2, start + step * i, stop - step * (num - i - 1))
        with np.errstate(all="ignore"):
            out = np.power(float(base), exponent)
    io.set_output("Out", out.astype(dtype))
