"""The kernel registry of builtin_device: one numpy function per NNAdapter operation.

A kernel is `fn(op, inputs) -> outputs`: `op` is the Operation (for its operand types), `inputs` the
input arrays in signature order (None for a null operand), the result one array (or None) per output.
Unless registered with `raw_quant=True`, a kernel never sees quantized integers: the executor
dequantizes quantized inputs to float32 first and requantizes outputs whose operand type is quantized
(dequantize -> float -> requantize with saturation).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from nnadapter_bridge.nnadapter.codes import OperationType
from nnadapter_bridge.nnadapter.types import Operation, OperandType


@dataclasses.dataclass(frozen=True)
class Kernel:
    type: OperationType
    fn: Callable[[Operation, list], list]
    raw_quant: bool = False
    # Optional finer answer for validate_program: False when this kernel cannot run `op` as given.
    supports: Optional[Callable[[Operation], bool]] = None


KERNELS: dict[OperationType, Kernel] = {}


def kernel(type: OperationType, *, raw_quant: bool = False, supports: Optional[Callable[[Operation], bool]] = None):
    def register(fn):
        if type in KERNELS:
            raise ValueError(f"builtin_device: kernel for {type.name} registered twice")
        KERNELS[type] = Kernel(type, fn, raw_quant, supports)
        return fn

    return register


def dequantize(array: np.ndarray, t: OperandType) -> np.ndarray:
    """Real values of a quantized array: (q - zero_point) * scale (per channel along channel_dim)."""
    if not t.is_quantized:
        return array
    values = array.astype(np.float32)
    if t.is_per_channel:
        scales = np.asarray(t.scales, dtype=np.float32)
        shape = [1] * values.ndim
        if values.ndim:
            shape[t.channel_dim] = -1
        return values * scales.reshape(shape)
    return (values - np.float32(t.zero_point)) * np.float32(t.scale)


def quantize(values: np.ndarray, t: OperandType) -> np.ndarray:
    """Quantize real values into the storage type of `t`, rounding to nearest and saturating."""
    info = np.iinfo(t.dtype)
    values = np.asarray(values, dtype=np.float32)
    if t.is_per_channel:
        scales = np.asarray(t.scales, dtype=np.float32)
        shape = [1] * values.ndim
        if values.ndim:
            shape[t.channel_dim] = -1
        q = np.rint(values / scales.reshape(shape))
    else:
        q = np.rint(values / np.float32(t.scale)) + t.zero_point
    return np.clip(q, info.min, info.max).astype(t.dtype)
