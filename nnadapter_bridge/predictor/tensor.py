"""Predictor input/output tensors with Paddle Lite's Python Tensor methods, plus Lite's place enums.

A Tensor holds one numpy array (host memory). Inputs copy what `from_numpy` / `set_*_data` give them, so
the caller may reuse its array (from_numpy refills the same buffer when the shape and dtype stay, except
while a run reads it: then it takes a new one, so a run never sees a half-written input); their `numpy()` is a
copy. An output's `numpy()` is the run's own array, no copy, as Paddle Lite 2.13's is a view of the tensor's
memory: each call until the next run gives that array, and a write into it shows in the next call. Unlike Paddle
Lite's, the next run gives a new array and never changes one handed out before, and a write never reaches the
predictor: Predictor._run copies any result the predictor may still read (docs/lite_api.md). An input tensor
knows the dtype and shape its feed var declares; the predictor checks the dtype when it runs (not before: Paddle
Lite scripts often `resize` first and fill later). The declared shape is only a hint, as in Paddle: any shape
runs.
`set_lod` checks a LoD as Paddle Lite's CheckLoD does (the last level against dim 0 when the shape is known,
else at run); no op run here reads a LoD, so it is kept, not used. `Place` and the enums carry Paddle Lite
2.13's values (lite/api/paddle_place.h).

Entry points: `Tensor`, `Place` and the enums, `check_lod`. Imports only `errors`.
"""
from __future__ import annotations

import enum
import operator
import threading
from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import BridgeError, ConfigError, InputError
from nnadapter_bridge.nnadapter.record import plain_dataclass


class TargetType(enum.IntEnum):
    """Paddle Lite's TargetType, with the values of Paddle Lite 2.13's lite/api/paddle_place.h (the same numbers
    its Python module and its `.nb` kernel-type attributes use). Tensors live in host memory here; in
    Config.set_valid_places, NNAdapter is the target that lets the NNAdapter devices run (Config docs)."""

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


class PowerMode(enum.IntEnum):
    """Paddle Lite's PowerMode: which ARM cores its kernels bind to (Config.set_power_mode: no effect on x86)."""

    LITE_POWER_HIGH = 0
    LITE_POWER_LOW = 1
    LITE_POWER_FULL = 2
    LITE_POWER_NO_BIND = 3
    LITE_POWER_RAND_HIGH = 4
    LITE_POWER_RAND_LOW = 5


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


def _enum_member(enum_type, value, what: str):
    """`value` as a member of `enum_type` (a member, or its int value); ConfigError for anything else."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_type(value)
        except ValueError:
            pass
    raise ConfigError(f"{what}: expected a {enum_type.__name__} (one of "
                      f"{', '.join(m.name for m in enum_type)}), got {value!r}")


@plain_dataclass(frozen=True)
class Place:
    """Paddle Lite's Place(target, precision=FP32, layout=NCHW, device=0): where a kernel may run. Only
    Config.set_valid_places reads places here: a list with TargetType.NNAdapter lets the NNAdapter devices run,
    one without runs everything on the host executor. Members may be given as enum members or their ints;
    anything else is a ConfigError."""

    target: TargetType = TargetType.Host
    precision: PrecisionType = PrecisionType.FP32
    layout: DataLayoutType = DataLayoutType.NCHW
    device: int = 0

    def __post_init__(self):
        object.__setattr__(self, "target", _enum_member(TargetType, self.target, "Place target"))
        object.__setattr__(self, "precision", _enum_member(PrecisionType, self.precision, "Place precision"))
        object.__setattr__(self, "layout", _enum_member(DataLayoutType, self.layout, "Place layout"))
        if not isinstance(self.device, int) or isinstance(self.device, bool):
            raise ConfigError(f"Place device: expected an int device index, got {self.device!r}")

    def is_valid(self) -> bool:
        """Paddle Lite's Place::is_valid: target, precision and layout are all known (not Unk)."""
        return (self.target != TargetType.Unk and self.precision != PrecisionType.Unk
                and self.layout != DataLayoutType.Unk)


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


# Where tensor data may be put from Python: host memory (Paddle Lite's x86 build copies to Host or X86 alike).
_HOST_TARGETS = (TargetType.Host, TargetType.X86, TargetType.Any)


def _check_host_target(place, what: str) -> None:
    try:
        target = _enum_member(TargetType, place, what)
    except BridgeError as exc:
        raise InputError(str(exc)) from None
    if target not in _HOST_TARGETS:
        raise InputError(f"{what}: tensors live in host memory here; the data cannot be put on {target.name} "
                         f"(give TargetType.Host, the default)")


def check_lod(lod, what: str = "set_lod") -> list:
    """Paddle Lite's LoD as a list of levels of offsets, checked as Lite's CheckLoD does: each level starts at 0
    and never decreases, and every level but the last ends at the number of sequences of the next level
    (its length - 1). Returns the LoD as lists of ints; InputError naming the level otherwise."""
    if isinstance(lod, (str, bytes)) or not hasattr(lod, "__iter__"):
        raise InputError(f"{what}: expected a list of levels (lists of offsets), got {lod!r}")
    levels = []
    for k, level in enumerate(lod):
        if isinstance(level, (str, bytes)) or not hasattr(level, "__iter__"):
            raise InputError(f"{what}: level {k} must be a list of offsets, got {level!r}")
        try:
            offsets = [operator.index(v) for v in level]
        except TypeError:
            raise InputError(f"{what}: level {k} has a non-integer offset: {list(level)!r}") from None
        if len(offsets) < 2:
            raise InputError(f"{what}: level {k} is {offsets}; a level has at least two offsets ([0, n])")
        if offsets[0] != 0:
            raise InputError(f"{what}: level {k} {offsets} must start at 0")
        if any(b < a for a, b in zip(offsets, offsets[1:])):
            raise InputError(f"{what}: level {k} {offsets} decreases; offsets never decrease")
        levels.append(offsets)
    for k in range(len(levels) - 1):
        if levels[k][-1] != len(levels[k + 1]) - 1:
            raise InputError(f"{what}: level {k} ends at {levels[k][-1]}, but level {k + 1} holds "
                             f"{len(levels[k + 1]) - 1} sequences; they must be equal")
    return levels


class Tensor:
    """One predictor input or output (Paddle Lite's Python Tensor)."""

    def __init__(self, name: str, dtype=None, declared_shape: Sequence[int] = (), *, is_input: bool = True):
        self.name = name
        self.declared_dtype = None if dtype is None else np.dtype(dtype)
        self.declared_shape = tuple(int(d) for d in declared_shape)
        self.is_input = is_input
        self._array: np.ndarray | None = None
        # _array is a C-contiguous buffer this tensor allocated (or a reshape of one): from_numpy may refill it
        self._refillable = False
        self._shape: tuple | None = None
        self._lod: list = []
        self._lock = threading.Lock()
        self._readers = 0  # runs reading the current buffer (Predictor.run): from_numpy must not refill it

    # -- data in -------------------------------------------------------------------------------------
    def from_numpy(self, array, place=TargetType.Host) -> None:
        """Copy `array` into the tensor (its shape becomes the tensor's shape). `place`: Host (X86 and Any are
        host memory too); another target is an InputError, there is no device memory to copy to here."""
        if place is not TargetType.Host:  # the default needs no check (a run's per-input path)
            _check_host_target(place, f"tensor '{self.name}' from_numpy place")
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        with self._lock:
            current = self._array
            if self._refillable and current.shape == array.shape and current.dtype == array.dtype \
                    and current is not array and not self._readers:
                # Same shape and dtype as the last call: refill the same buffer. Saves an allocation per run,
                # and devices that bind input memory (intel_openvino) see the same address again.
                current[...] = array  # np.copyto's dispatch costs as much as the copy of a small input
                return
            if array.dtype not in _PRECISION_OF_DTYPE:
                raise InputError(f"input '{self.name}': numpy dtype {array.dtype} is not supported; use one of "
                                 f"{', '.join(sorted(d.name for d in _PRECISION_OF_DTYPE))}")
            self._array = np.array(array, copy=True, order="C")
            self._refillable = True
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
            self._refillable = False

    def _set_data(self, values, dtype, place) -> None:
        _check_host_target(place, f"tensor '{self.name}' set_*_data type")
        array = np.asarray(values, dtype=dtype).reshape(-1)
        if self._shape is not None:
            numel = int(np.prod(self._shape, dtype=np.int64))
            if array.size != numel:
                raise InputError(f"tensor '{self.name}': {array.size} values given, its shape {list(self._shape)} "
                                 f"holds {numel}; call resize() first")
            array = array.reshape(self._shape)
        self._array = np.array(array, copy=True, order="C")
        self._refillable = True
        self._shape = tuple(self._array.shape)

    def set_float_data(self, values, type=TargetType.Host) -> None:  # noqa: A002 - Paddle Lite's name
        self._set_data(values, np.float32, type)

    def set_int8_data(self, values, type=TargetType.Host) -> None:  # noqa: A002 - Paddle Lite's name
        self._set_data(values, np.int8, type)

    def set_uint8_data(self, values, type=TargetType.Host) -> None:  # noqa: A002 - Paddle Lite's name
        self._set_data(values, np.uint8, type)

    def set_int32_data(self, values, type=TargetType.Host) -> None:  # noqa: A002 - Paddle Lite's name
        self._set_data(values, np.int32, type)

    def set_int64_data(self, values, type=TargetType.Host) -> None:  # noqa: A002 - Paddle Lite's name
        self._set_data(values, np.int64, type)

    def set_lod(self, lod) -> None:
        """Paddle Lite's LoD: levels of sequence offsets (check_lod). When the tensor has a shape the last
        level must end at its dim 0; when it gets its data later, the predictor checks that at run. No op that
        nnadapter-bridge runs reads an input's LoD (no sequence_* ops), so it is kept and checked, not used."""
        levels = check_lod(lod, f"tensor '{self.name}' set_lod")
        if levels and self._shape is not None:
            self._check_lod_fits(levels, self._shape)
        self._lod = levels

    def _check_lod_fits(self, levels, shape) -> None:
        rows = shape[0] if len(shape) else 1
        if rows > 0 and levels[-1][-1] != rows:  # Lite's CheckLoD skips an empty tensor
            raise InputError(f"tensor '{self.name}': its LoD's last level {levels[-1]} ends at {levels[-1][-1]}, "
                             f"but its dim 0 is {rows} (shape {list(shape)}); they must be equal")

    def check_lod(self) -> None:
        """The LoD against the current shape (the predictor calls it at run)."""
        if self._lod and self._shape is not None:
            self._check_lod_fits(self._lod, self._shape)

    # -- set by the predictor -------------------------------------------------------------------------
    def _set_result(self, array: np.ndarray) -> None:
        self._array = np.asarray(array)
        self._refillable = False
        self._shape = tuple(self._array.shape)

    def _value(self) -> np.ndarray | None:
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
        if self.is_input:  # from_numpy refills this buffer: the caller gets a copy
            return self._array.copy()
        return self._array  # the run's own array (Predictor._run copied anything it shares with the predictor)

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
