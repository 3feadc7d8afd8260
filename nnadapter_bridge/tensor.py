"""Predictor input/output tensors with Paddle Lite's Python Tensor methods, plus Lite's place enums.

A Tensor holds one numpy array (host memory). Inputs copy what `from_numpy` / `set_*_data` give them, so
the caller may reuse its array (from_numpy refills the same buffer when the shape and dtype stay, except
while a run reads it: then it takes a new one, so a run never sees a half-written input); `numpy()` returns a copy, as Paddle Lite's does. An input tensor knows the
dtype and shape its feed var declares; the predictor checks the dtype when it runs (not before: Paddle Lite
scripts often `resize` first and fill later). The declared shape is only a hint, as in Paddle: any shape runs.
"""
from __future__ import annotations

import enum
import threading
from typing import Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import InputError


class TargetType(enum.IntEnum):
    """Paddle Lite's TargetType (only Host memory exists here; the others are accepted names)."""

    Unk = 0
    Host = 1
    X86 = 2
    CUDA = 3
    ARM = 4
    OpenCL = 5
    Any = 6
    FPGA = 7
    NPU = 8
    XPU = 9
    BM = 10
    MLU = 11
    RKNPU = 12
    APU = 13
    HUAWEI_ASCEND_NPU = 14
    IMAGINATION_NNA = 15
    INTEL_FPGA = 16
    Metal = 17
    NNAdapter = 18


class PrecisionType(enum.IntEnum):
    """Paddle Lite's PrecisionType."""

    Unk = 0
    FP32 = 1
    INT8 = 2
    INT32 = 3
    Any = 4
    FP16 = 5
    BOOL = 6
    INT64 = 7
    INT16 = 8
    UINT8 = 9
    FP64 = 10


class DataLayoutType(enum.IntEnum):
    """Paddle Lite's DataLayoutType."""

    Unk = 0
    NCHW = 1
    Any = 2
    NHWC = 3
    ImageDefault = 4
    ImageFolder = 5
    ImageNW = 6
    MetalTexture2DArray = 7
    MetalTexture2D = 8


_PRECISION_OF_DTYPE = {
    np.dtype(np.float32): PrecisionType.FP32,
    np.dtype(np.float16): PrecisionType.FP16,
    np.dtype(np.float64): PrecisionType.FP64,
    np.dtype(np.int8): PrecisionType.INT8,
    np.dtype(np.int16): PrecisionType.INT16,
    np.dtype(np.int32): PrecisionType.INT32,
    np.dtype(np.int64): PrecisionType.INT64,
    np.dtype(np.uint8): PrecisionType.UINT8,
    np.dtype(np.bool_): PrecisionType.BOOL,
}
_DTYPE_OF_PRECISION = {p: d for d, p in _PRECISION_OF_DTYPE.items()}


def precision_of_dtype(dtype) -> PrecisionType:
    return _PRECISION_OF_DTYPE.get(np.dtype(dtype), PrecisionType.Unk)


class Tensor:
    """One predictor input or output (Paddle Lite's Python Tensor)."""

    def __init__(self, name: str, dtype=None, declared_shape: Sequence[int] = (), *, is_input: bool = True):
        self.name = name
        self.declared_dtype = None if dtype is None else np.dtype(dtype)
        self.declared_shape = tuple(int(d) for d in declared_shape)
        self.is_input = is_input
        self._array: Optional[np.ndarray] = None
        self._shape: Optional[tuple] = None
        self._lod: list = []
        self._lock = threading.Lock()
        self._readers = 0  # runs reading the current buffer (Predictor.run): from_numpy must not refill it

    # -- data in -------------------------------------------------------------------------------------
    def from_numpy(self, array, place=TargetType.Host) -> None:
        """Copy `array` into the tensor (its shape becomes the tensor's shape)."""
        array = np.asarray(array)
        if array.dtype not in _PRECISION_OF_DTYPE:
            raise InputError(f"input '{self.name}': numpy dtype {array.dtype} is not supported; use one of "
                             f"{', '.join(sorted(d.name for d in _PRECISION_OF_DTYPE))}")
        with self._lock:
            current = self._array
            if current is not None and current.shape == array.shape and current.dtype == array.dtype \
                    and current.flags.writeable and current.flags.c_contiguous and current is not array \
                    and not self._readers:
                # Same shape and dtype as the last call: refill the same buffer. Saves an allocation per run,
                # and devices that bind input memory (intel_openvino) see the same address again.
                np.copyto(current, array)
            else:
                self._array = np.array(array, copy=True, order="C")
            self._shape = tuple(self._array.shape)

    def resize(self, shape: Sequence[int]) -> None:
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InputError(f"tensor '{self.name}': resize({list(shape)}) has a negative dim")
        self._shape = shape
        if self._array is not None and self._array.size == int(np.prod(shape, dtype=np.int64)):
            self._array = self._array.reshape(shape)
        elif self._array is not None:
            self._array = None  # refilled by from_numpy / set_*_data

    def _set_data(self, values, dtype) -> None:
        array = np.asarray(values, dtype=dtype).reshape(-1)
        if self._shape is not None:
            numel = int(np.prod(self._shape, dtype=np.int64))
            if array.size != numel:
                raise InputError(f"tensor '{self.name}': {array.size} values given, its shape {list(self._shape)} "
                                 f"holds {numel}; call resize() first")
            array = array.reshape(self._shape)
        self._array = np.array(array, copy=True)
        self._shape = tuple(self._array.shape)

    def set_float_data(self, values) -> None:
        self._set_data(values, np.float32)

    def set_int8_data(self, values) -> None:
        self._set_data(values, np.int8)

    def set_uint8_data(self, values) -> None:
        self._set_data(values, np.uint8)

    def set_int32_data(self, values) -> None:
        self._set_data(values, np.int32)

    def set_int64_data(self, values) -> None:
        self._set_data(values, np.int64)

    def set_lod(self, lod) -> None:
        self._lod = [list(int(v) for v in level) for level in lod]

    # -- set by the predictor -------------------------------------------------------------------------
    def _set_result(self, array: np.ndarray) -> None:
        self._array = np.asarray(array)
        self._shape = tuple(self._array.shape)

    def _value(self) -> Optional[np.ndarray]:
        return self._array

    def _hold(self) -> None:
        """A run starts reading this input: from_numpy takes a new buffer until _release."""
        with self._lock:
            self._readers += 1

    def _release(self) -> None:
        with self._lock:
            self._readers -= 1

    # -- data out ------------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        if self._array is None:
            what = "was not set (call from_numpy)" if self.is_input else "has no value yet (call run())"
            raise InputError(f"tensor '{self.name}' {what}")
        return np.array(self._array, copy=True)

    def shape(self) -> list:
        if self._shape is not None:
            return list(self._shape)
        return list(self.declared_shape)

    def precision(self) -> PrecisionType:
        if self._array is not None:
            return precision_of_dtype(self._array.dtype)
        return precision_of_dtype(self.declared_dtype) if self.declared_dtype is not None else PrecisionType.Unk

    def target(self) -> TargetType:
        return TargetType.Host

    def lod(self) -> list:
        return [list(level) for level in self._lod]

    def _data(self, dtype) -> list:
        return self.numpy().astype(dtype, copy=False).reshape(-1).tolist()

    def float_data(self) -> list:
        return self._data(np.float32)

    def int8_data(self) -> list:
        return self._data(np.int8)

    def uint8_data(self) -> list:
        return self._data(np.uint8)

    def int32_data(self) -> list:
        return self._data(np.int32)

    def int64_data(self) -> list:
        return self._data(np.int64)

    def __repr__(self) -> str:
        dtype = self._array.dtype if self._array is not None else self.declared_dtype
        return f"Tensor({self.name!r}, {dtype}, shape={self.shape()})"
