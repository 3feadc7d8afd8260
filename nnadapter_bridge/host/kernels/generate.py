"""Ops whose whole point is attributes Paddle also takes from tensors, run where those tensors are known:
crop_tensor (`shape`/`offsets` as attrs, the `Shape`/`Offsets` tensors or the `ShapeTensor`/`OffsetsTensor`
lists) and empty (`shape` as an attr, the `ShapeTensor` tensor or the `ShapeTensorList` list).

Neither has a converter: their output dims are the tensors' values, which a static NNAdapter model cannot
take when they are computed at run time.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, paddle_dtype


def ints_from(io: OpScope, attr: str, tensor: str, tensor_list: str) -> list:
    """An int-list attribute from the tensor list (each a one-element tensor), else the tensor, else the attr
    (Paddle's priority for crop_tensor and empty)."""
    if io.has_input(tensor_list):
        return [int(np.asarray(v).reshape(-1)[0]) for v in io.inputs(tensor_list)]
    if io.has_input(tensor):
        return [int(v) for v in io.input(tensor).reshape(-1)]
    value = io.attr(attr, [])
    return [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


@host_kernel("crop_tensor")
def crop_tensor(io: OpScope) -> None:
    x = io.input("X")
    shape = ints_from(io, "shape", "Shape", "ShapeTensor")
    offsets = ints_from(io, "offsets", "Offsets", "OffsetsTensor") or [0] * x.ndim
    if len(shape) != x.ndim or len(offsets) != x.ndim:
        raise io.error(f"shape {shape} and offsets {offsets} must have one value per dim of X {list(x.shape)}")
    window = []
    for axis, (size, offset, dim) in enumerate(zip(shape, offsets, x.shape)):
        if size == -1:  # Paddle: the rest of the dim after the offset
            size = dim - offset
        if size <= 0 or offset < 0 or offset + size > dim:
            raise io.error(f"axis {axis}: offset {offset} + size {size} is out of X's dim {dim}")
        window.append(slice(offset, offset + size))
    io.set_output("Out", x[tuple(window)].copy())


@host_kernel("empty")
def empty(io: OpScope) -> None:
    """Paddle leaves the values uninitialized; zeros are one such tensor (and reproducible)."""
    shape = ints_from(io, "shape", "ShapeTensor", "ShapeTensorList")
    if any(d < 0 for d in shape):
        raise io.error(f"shape {shape} has a negative dim")
    io.set_output("Out", np.zeros(shape, dtype=paddle_dtype(io.attr("dtype"), "float32")))
