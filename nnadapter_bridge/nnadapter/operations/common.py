"""Helpers shared by the operation family modules.

Shape inference: derived result types, broadcasting, axis normalization, constant-operand readers and
the checks several families make on parameter operands. References: readers of parameter arrays (the
values a reference receives in `inputs`), float32 conversion and the fused activation (fuse_code).

Imports the standard's codes and types and `errors` only; every family module imports it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, FuseCode, Lifetime, Precision
from nnadapter_bridge.nnadapter.types import OperandType, Operation


def result_type(base: OperandType, dims: Sequence[int] | None = None, *, precision: Precision | None = None,
                dynamic_dims: Sequence[Sequence[int]] | None = None) -> OperandType:
    """A temporary-variable type derived from `base` with new dims and/or precision.

    A new precision that is not quantized drops the quantization params."""
    changes: dict[str, Any] = {"lifetime": Lifetime.TEMPORARY_VARIABLE}
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


def map_shapes(
    base: OperandType, fn: Callable[[tuple], Sequence[int]], *, precision: Precision | None = None
) -> OperandType:
    """Apply a dims -> dims function to the dims and to every dynamic shape of `base`."""
    dims = tuple(fn(base.dims))
    dynamic = tuple(tuple(fn(s)) for s in base.dynamic_dims)
    return result_type(base, dims, precision=precision, dynamic_dims=dynamic)


def same_as_input(op: Operation, i: int = 0) -> OperandType:
    return result_type(op.input(i).type)


def known(d: int) -> bool:
    return d != UNKNOWN and d >= 0


def broadcast_dims(a: Sequence[int], b: Sequence[int], op: Operation | None = None) -> tuple:
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


def normalize_axis(axis: int, rank: int, op: Operation | None = None, what: str = "axis") -> int:
    """Map axis in [-rank, rank) to [0, rank); raise OperationError outside.

    A 0-d tensor takes axis 0 or -1 (both mean its one element), as Paddle's ops on 0-d inputs do."""
    span = max(rank, 1)
    if not -span <= axis < span:
        where = f"{op.type.name}: " if op is not None else ""
        raise OperationError(f"{where}{what} {axis} is out of range for rank {rank}")
    return axis + span if axis < 0 else axis


def const_array(op: Operation, i: int) -> np.ndarray | None:
    """The constant value of input i, or None when absent or computed at run time."""
    return op.input_value(i)


@overload
def const_int(op: Operation, i: int, default: int) -> int: ...
@overload
def const_int(op: Operation, i: int, default: None = None) -> int | None: ...
def const_int(op: Operation, i: int, default: int | None = None) -> int | None:
    v = op.input_value(i)
    if v is None:
        return default
    return int(np.asarray(v).reshape(-1)[0])


@overload
def const_bool(op: Operation, i: int, default: bool) -> bool: ...
@overload
def const_bool(op: Operation, i: int, default: None = None) -> bool | None: ...
def const_bool(op: Operation, i: int, default: bool | None = None) -> bool | None:
    v = op.input_value(i)
    if v is None:
        return default
    return bool(np.asarray(v).reshape(-1)[0])


def const_ints(op: Operation, i: int) -> list | None:
    v = op.input_value(i)
    if v is None:
        return None
    return [int(x) for x in np.asarray(v).reshape(-1)]


def unknown_dims(rank: int) -> tuple:
    return (UNKNOWN,) * rank


def all_known(dims: Sequence[int]) -> bool:
    return all(known(d) for d in dims)


# -- checks on parameter operands (shape inference) -----------------------------------------------------

_INDEX_DTYPES = (Precision.INT32, Precision.INT64)


def operation_error(op: Operation | None, message: str) -> OperationError:
    """An OperationError whose message starts with the operation's name (when there is an operation)."""
    where = f"{op.type.name}: " if op is not None else ""
    return OperationError(where + message)


def scalar_param(op: Operation, i: int, name: str, default=None):
    """The value of a shape-[1] parameter that shape inference needs; None operand -> default.

    Parameters like keepdim or dtype decide the output rank or precision, so they must be constants."""
    if i >= len(op.inputs) or op.inputs[i] is None:
        if default is None:
            raise operation_error(op, f"parameter '{name}' is required")
        return default
    value = op.input_value(i)
    if value is None:
        raise operation_error(op, f"parameter '{name}' must be a constant operand (it decides the output type)")
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise operation_error(op, f"parameter '{name}' must hold one value, got {flat.size}")
    return flat[0].item()


def index_precision(op: Operation, code: int, name: str) -> Precision:
    """The INT32/INT64 precision an index-dtype parameter names; OperationError for any other code."""
    try:
        precision = Precision(int(code))
    except ValueError:
        precision = None
    if precision not in _INDEX_DTYPES:
        raise operation_error(op, f"'{name}' must be the precision code of INT32 ({int(Precision.INT32)}) or "
                                  f"INT64 ({int(Precision.INT64)}), got {code}")
    return precision


def operand_length(operand) -> int:
    """Number of values in a 1-D parameter operand, or UNKNOWN."""
    dims = operand.type.dims
    if len(dims) == 0:
        return 1
    if len(dims) == 1 and known(dims[0]):
        return dims[0]
    return UNKNOWN


def check_same_precision(op, types):
    """All `types` share the precision of the first; OperationError naming the first that does not."""
    first = types[0].precision
    for i, other in enumerate(types[1:], 1):
        if other.precision != first:
            raise operation_error(op, f"input {i} has precision {other.precision.name}, input 0 has {first.name}")


def hw_pair(values: list | None, what: str, op) -> list | None:
    """A (height, width) parameter: None stays None, anything but 2 values is an OperationError."""
    if values is not None and len(values) != 2:
        raise OperationError(f"{op.type.name}: {what} must hold 2 values (height, width), got {values}")
    return values


# -- readers of parameter arrays (references) -------------------------------------------------------------

def first_value(array):
    """The single value of a shape-[1] parameter operand, as a numpy scalar of its dtype."""
    return np.asarray(array).reshape(-1)[0]


# A reference receives a parameter as an array, or None for an omitted optional operand: the readers return
# `default` for None. Typed so that a present value (or a non-None default) gives a plain value back.
_Present = np.ndarray | np.generic | int | float | Sequence


@overload
def param_int(value: _Present, default: int | None = None) -> int: ...
@overload
def param_int(value: None, default: int) -> int: ...
@overload
def param_int(value: None, default: None = None) -> None: ...
def param_int(value, default: int | None = None) -> int | None:
    return default if value is None else int(np.asarray(value).reshape(-1)[0])


@overload
def param_float(value: _Present, default: float | None = None) -> float: ...
@overload
def param_float(value: None, default: float) -> float: ...
@overload
def param_float(value: None, default: None = None) -> None: ...
def param_float(value, default: float | None = None) -> float | None:
    return default if value is None else float(np.asarray(value).reshape(-1)[0])


def param_bool(value, default: bool = False) -> bool:
    return default if value is None else bool(np.asarray(value).reshape(-1)[0])


@overload
def param_ints(value: _Present, default: list | None = None) -> list[int]: ...
@overload
def param_ints(value: None, default: list) -> list: ...
@overload
def param_ints(value: None, default: None = None) -> None: ...
def param_ints(value, default=None) -> list | None:
    return default if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def compute_dtype(*arrays) -> np.dtype:
    """The float precision a reference computes in: float64 when any input is float64 (Paddle's double
    kernels), else float32 (float32 itself, float16 as Paddle's CPU kernels widen it, dequantized values)."""
    if any(a is not None and np.asarray(a).dtype == np.float64 for a in arrays):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def as_compute_float(x: np.ndarray, dtype=None) -> np.ndarray:
    """x in `dtype` (default: compute_dtype(x)), not copied when it has it already."""
    dtype = compute_dtype(x) if dtype is None else np.dtype(dtype)
    return x if x.dtype == dtype else x.astype(dtype)


def in_dtype_of(result, x: np.ndarray) -> np.ndarray:
    """`result` in x's dtype (float64 intermediates back to float32, numpy scalars back to arrays)."""
    return np.asarray(result).astype(x.dtype, copy=False)


def apply_fuse_code(x: np.ndarray, fuse_code, in_place: bool = False) -> np.ndarray:
    """The fused activation of `fuse_code` applied to x. `in_place=True` clamps x itself, for callers
    whose x is a result they just computed (never an input array: that would change the caller's data)."""
    code = FuseCode(int(first_value(fuse_code)))
    if code == FuseCode.FUSED_NONE:
        return x
    low, high = {FuseCode.FUSED_RELU: (0, None), FuseCode.FUSED_RELU1: (-1, 1), FuseCode.FUSED_RELU6: (0, 6)}[code]
    # FUSED_RELU is Paddle's relu `x > 0 ? x : 0`: fmax, not maximum, so that NaN becomes 0 (a NaN pixel
    # must not spread to every logit).
    if in_place and x.flags.writeable and x.ndim:
        if high is None:
            return np.fmax(x, low, out=x)
        return np.clip(x, low, high, out=x)
    if high is None:
        return np.fmax(x, low).astype(x.dtype, copy=False)
    return np.clip(x, low, high).astype(x.dtype, copy=False)


def apply_optional_fuse_code(x: np.ndarray, fuse_code, in_place: bool = False) -> np.ndarray:
    """apply_fuse_code for an optional fuse_code operand: a null one leaves x as it is."""
    return x if fuse_code is None else apply_fuse_code(x, fuse_code, in_place)
