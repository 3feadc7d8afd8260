"""The one table from Paddle's `VarType.Type` element types to numpy dtypes and element sizes.

bfloat16 (BF16 = 22): numpy has no native bfloat16. When the optional `ml_dtypes` package is importable
the loader returns `ml_dtypes.bfloat16` arrays; otherwise it returns the raw 16-bit patterns as `uint16`
(same bytes, same shape; `bf16_to_float32` widens them). `BF16_IS_NATIVE` says which one is in effect.

Entry points: `numpy_dtype`, `var_type_of_dtype`, `type_name`, `bf16_to_float32`. Imports nothing of the
project (converters derive the NNAdapter precision table from it).
"""
from __future__ import annotations

import enum

import numpy as np

_BF16: tuple | None = None  # (dtype, is native), resolved on first need: ml_dtypes costs ~8 ms to import


def _bf16() -> tuple:
    global _BF16
    if _BF16 is None:
        try:  # optional: a real bfloat16 dtype
            import ml_dtypes

            _BF16 = (np.dtype(ml_dtypes.bfloat16), True)
        except ImportError:  # pragma: no cover - depends on the environment
            _BF16 = (np.dtype(np.uint16), False)
    return _BF16


def __getattr__(name: str):
    """BF16_DTYPE (ml_dtypes.bfloat16, else uint16) and BF16_IS_NATIVE, resolved on first use: a model without
    bfloat16 does not load ml_dtypes."""
    if name == "BF16_DTYPE":
        return _bf16()[0]
    if name == "BF16_IS_NATIVE":
        return _bf16()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class VarTypeCode(enum.IntEnum):
    """`paddle.framework.proto.VarType.Type` (facts §7.1): element types and variable kinds."""

    BOOL = 0
    INT16 = 1
    INT32 = 2
    INT64 = 3
    FP16 = 4
    FP32 = 5
    FP64 = 6
    LOD_TENSOR = 7
    SELECTED_ROWS = 8
    FEED_MINIBATCH = 9
    FETCH_LIST = 10
    STEP_SCOPES = 11
    LOD_RANK_TABLE = 12
    LOD_TENSOR_ARRAY = 13
    PLACE_LIST = 14
    READER = 15
    RAW = 17
    TUPLE = 18
    SIZE_T = 19
    UINT8 = 20
    INT8 = 21
    BF16 = 22
    COMPLEX64 = 23
    COMPLEX128 = 24
    STRING = 25
    STRINGS = 26
    VOCAB = 27
    FEED_LIST = 28
    PSTRING = 29
    SPARSE_COO = 30


# Element type -> numpy dtype. Little-endian explicitly: the files are written in host order and every
# supported host is little-endian (facts §7.2); '<' keeps the meaning right on a big-endian reader too.
_NUMPY_DTYPES: dict[int, np.dtype] = {
    VarTypeCode.BOOL: np.dtype(np.bool_),
    VarTypeCode.INT16: np.dtype("<i2"),
    VarTypeCode.INT32: np.dtype("<i4"),
    VarTypeCode.INT64: np.dtype("<i8"),
    VarTypeCode.FP16: np.dtype("<f2"),
    VarTypeCode.FP32: np.dtype("<f4"),
    VarTypeCode.FP64: np.dtype("<f8"),
    VarTypeCode.SIZE_T: np.dtype("<u8"),  # 8 bytes on LP64, the only ABI Paddle ships for
    VarTypeCode.UINT8: np.dtype(np.uint8),
    VarTypeCode.INT8: np.dtype(np.int8),
    VarTypeCode.COMPLEX64: np.dtype("<c8"),
    VarTypeCode.COMPLEX128: np.dtype("<c16"),
}  # and BF16: _bf16()

# The codes that are tensor element types (the rest are variable kinds: LOD_TENSOR, FEED_MINIBATCH, ...).
TENSOR_ELEMENT_TYPES = frozenset(_NUMPY_DTYPES) | {VarTypeCode.BF16}


def is_element_type(code: int) -> bool:
    """True when `code` names a tensor element type this loader can hold in a numpy array."""
    return code in TENSOR_ELEMENT_TYPES


def numpy_dtype(code: int) -> np.dtype:
    """The numpy dtype of a VarType.Type element type; KeyError for kinds that are not element types."""
    if code == VarTypeCode.BF16:
        return _bf16()[0]
    return _NUMPY_DTYPES[code]


def type_name(code: int) -> str:
    """`FP32`, `LOD_TENSOR`, ...; `UNKNOWN(<n>)` for a value outside the enum."""
    try:
        return VarTypeCode(code).name
    except ValueError:
        return f"UNKNOWN({code})"


def var_type_of_dtype(dtype) -> int:
    """The VarType.Type element code of a numpy dtype (uint16 maps to BF16 only when ml_dtypes is absent)."""
    dtype = np.dtype(dtype)
    for code, candidate in _NUMPY_DTYPES.items():
        if code == VarTypeCode.SIZE_T:
            continue  # uint64 arrays are written as nothing else; SIZE_T is read-only here
        if candidate == dtype:
            return int(code)
    if _bf16()[0] == dtype:
        return int(VarTypeCode.BF16)
    raise KeyError(f"no Paddle element type for numpy dtype {dtype}")


def bf16_to_float32(array: np.ndarray) -> np.ndarray:
    """Widen a BF16 array (ml_dtypes.bfloat16 or raw uint16 patterns) to float32."""
    if array.dtype == np.uint16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32)
