"""Bitwise ops on bool and integer tensors: bitwise_and, bitwise_or, bitwise_xor, bitwise_not and the shifts
bitwise_left_shift / bitwise_right_shift (arithmetic or logical).

Paddle's CPU kernels take bool, uint8, int8, int16, int32 and int64 (the shifts: the integer types only) and
broadcast the two operands numpy-style; the result keeps the operand dtype.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

_BITWISE_DTYPES = frozenset(np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "int32", "int64"))
_BINARY = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


def slot_value(io: OpScope, *slots: str) -> np.ndarray:
    """The first of `slots` the op fills (the PIR-only shift ops keep their lower-case slot names)."""
    for slot in slots:
        if io.has_input(slot):
            return io.input(slot)
    raise io.error(f"none of the input slots {list(slots)} is filled")


def set_out(io: OpScope, value) -> None:
    io.set_output("Out" if io.has_output("Out") else "out", value)


def check_dtype(io: OpScope, *arrays: np.ndarray, allowed=_BITWISE_DTYPES) -> np.dtype:
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) != 1:
        raise io.error(f"operands must share one dtype, got {sorted(map(str, dtypes))}")
    dtype = dtypes.pop()
    if dtype not in allowed:
        raise io.error(f"Paddle's CPU kernel has no {dtype} form (it takes {sorted(map(str, allowed))})")
    return dtype


@host_kernel(*_BINARY)
def bitwise_binary(io: OpScope) -> None:
    x, y = slot_value(io, "X", "x"), slot_value(io, "Y", "y")
    check_dtype(io, x, y)
    set_out(io, _BINARY[io.op.type](x, y))


@host_kernel("bitwise_not")
def bitwise_not(io: OpScope) -> None:
    x = slot_value(io, "X", "x")
    check_dtype(io, x)
    set_out(io, np.invert(x))


_SHIFT_DTYPES = _BITWISE_DTYPES - {np.dtype(bool)}


def shift_operands(io: OpScope):
    x, y = slot_value(io, "X", "x"), slot_value(io, "Y", "y")
    dtype = check_dtype(io, x, y, allowed=_SHIFT_DTYPES)
    x, y = np.broadcast_arrays(x, y)
    # Paddle's functors treat a shift count outside [0, bits) specially instead of leaving it undefined.
    bits = dtype.itemsize * 8
    out_of_range = (y < 0) | (y >= bits)
    safe_y = np.where(out_of_range, 0, y).astype(dtype)
    return x, safe_y, out_of_range, dtype


@host_kernel("bitwise_left_shift")
def bitwise_left_shift(io: OpScope) -> None:
    x, y, out_of_range, dtype = shift_operands(io)
    # arithmetic and logical left shifts agree; a count out of range gives 0
    set_out(io, np.where(out_of_range, 0, np.left_shift(x, y)).astype(dtype))


@host_kernel("bitwise_right_shift")
def bitwise_right_shift(io: OpScope) -> None:
    x, y, out_of_range, dtype = shift_operands(io)
    if io.attr("is_arithmetic", True):
        # a count out of range keeps only the sign: -1 for a negative value, 0 otherwise
        fill = np.where(x < 0, -1, 0).astype(dtype)
        out = np.where(out_of_range, fill, np.right_shift(x, y))
    else:
        unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
        shifted = np.right_shift(np.ascontiguousarray(x).view(unsigned), y.astype(unsigned)).view(dtype)
        out = np.where(out_of_range, 0, shifted)
    set_out(io, out.astype(dtype))
