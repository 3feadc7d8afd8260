"""Helpers shared by the prepare (shape inference) functions of every operation group."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Lifetime, Precision
from nnadapter_bridge.nnadapter.types import Operation, OperandType


def result_type(base: OperandType, dims: Sequence[int] | None = None, *, precision: Precision | None = None,
                dynamic_dims: Sequence[Sequence[int]] | None = None) -> OperandType:
    """A temporary-variable type derived from `base` with new dims and/or precision.

    A new precision that is not quantized drops the quantization params."""
    changes = {"lifetime": Lifetime.TEMPORARY_VARIABLE}
    if dims is not None:
        changes["dims"] = tuple(int(d) for d in dims)
    if dynamic_dims is not None:
        changes["dynamic_dims"] = tuple(tuple(s) for s in dynamic_dims)
    elif dims is not None:
        changes["dynamic_dims"] = ()
    if precision is not None:
        changes["precision"] = Precision(precision)
        if not base.is_quantized or changes["precision"] != base.precision:
            changes.update(scale=None, scales=None, channel_dim=0, zero_point=0)
    return base.copy(**changes)


def map_shapes(base: OperandType, fn: Callable[[tuple], Sequence[int]], *, precision: Precision | None = None) -> OperandType:
    """Apply a dims -> dims function to the dims and to every dynamic shape of `base`."""
    dims = tuple(fn(base.dims))
    dynamic = tuple(tuple(fn(s)) for s in base.dynamic_dims)
    return result_type(base, dims, precision=precision, dynamic_dims=dynamic)


def same_as_input(op: Operation, i: int = 0) -> OperandType:
    return result_type(op.inputs[i].type)


def known(d: int) -> bool:
    return d != UNKNOWN and d >= 0


def broadcast_dims(a: Sequence[int], b: Sequence[int], op: Optional[Operation] = None) -> tuple:
    """numpy broadcasting of two dim lists; an unknown axis stays unknown unless the other is > 1."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif not known(x):
            out.append(y if known(y) else UNKNOWN)
        elif not known(y):
            out.append(x)
        elif x == y:
            out.append(x)
        else:
            where = f"{op.type.name}: " if op is not None else ""
            raise OperationError(f"{where}shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


def normalize_axis(axis: int, rank: int, op: Optional[Operation] = None, what: str = "axis") -> int:
    """Map axis in [-rank, rank) to [0, rank); raise OperationError outside."""
    if not -rank <= axis < max(rank, 1):
        where = f"{op.type.name}: " if op is not None else ""
        raise OperationError(f"{where}{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def const_array(op: Operation, i: int) -> Optional[np.ndarray]:
    """The constant value of input i, or None when absent or computed at run time."""
    return op.input_value(i)


def const_int(op: Operation, i: int, default: Optional[int] = None) -> Optional[int]:
    v = op.input_value(i)
    if v is None:
        return default
    return int(np.asarray(v).reshape(-1)[0])


def const_float(op: Operation, i: int, default: Optional[float] = None) -> Optional[float]:
    v = op.input_value(i)
    if v is None:
        return default
    return float(np.asarray(v).reshape(-1)[0])


def const_bool(op: Operation, i: int, default: Optional[bool] = None) -> Optional[bool]:
    v = op.input_value(i)
    if v is None:
        return default
    return bool(np.asarray(v).reshape(-1)[0])


def const_ints(op: Operation, i: int) -> Optional[list]:
    v = op.input_value(i)
    if v is None:
        return None
    return [int(x) for x in np.asarray(v).reshape(-1)]


def unknown_dims(rank: int) -> tuple:
    return (UNKNOWN,) * rank
