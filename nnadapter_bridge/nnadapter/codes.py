"""Every code of the NNAdapter standard (nnadapter.h) with its numeric value: result codes, operand
precisions, layouts, lifetimes, fuse codes, auto-pad, pad and interpolate modes, device types and the
96 operation codes. The numbers are part of the .nnc format and must never change.

Imports only `errors` (whose `ResultCode` it names); every other module of the standard builds on it.
"""
from __future__ import annotations

import enum

import numpy as np

# The result codes are defined with the errors that carry them (errors is the ground's lowest module, and imports
# nothing of the project); they are codes of the standard all the same.
from nnadapter_bridge.errors import ResultCode  # noqa: F401

VERSION = 1
UNKNOWN = -65535  # NNADAPTER_UNKNOWN: an unknown dimension or an unknown code
MAX_SIZE_OF_DIMENSIONS = 8
MAX_SIZE_OF_DYNAMIC_DIMENSIONS = 8



class Precision(enum.IntEnum):
    UNKNOWN = UNKNOWN
    BOOL8 = 0
    INT8 = 1
    UINT8 = 2
    INT16 = 3
    UINT16 = 4
    INT32 = 5
    UINT32 = 6
    INT64 = 7
    UINT64 = 8
    FLOAT16 = 9
    FLOAT32 = 10
    FLOAT64 = 11
    QUANT_INT8_SYMM_PER_LAYER = 24
    QUANT_INT8_SYMM_PER_CHANNEL = 25
    QUANT_UINT8_ASYMM_PER_LAYER = 26
    QUANT_INT16_SYMM_PER_LAYER = 27
    QUANT_INT16_SYMM_PER_CHANNEL = 28
    QUANT_UINT16_ASYMM_PER_LAYER = 29
    QUANT_INT32_SYMM_PER_LAYER = 30
    QUANT_INT32_SYMM_PER_CHANNEL = 31
    QUANT_UINT32_ASYMM_PER_LAYER = 32


class Layout(enum.IntEnum):
    NCHW = 0
    NHWC = 1
    HWCN = 2
    HWNC = 3


class Lifetime(enum.IntEnum):
    TEMPORARY_VARIABLE = 0
    TEMPORARY_SHAPE = 1
    CONSTANT_COPY = 2
    CONSTANT_REFERENCE = 3
    MODEL_INPUT = 4
    MODEL_OUTPUT = 5


class FuseCode(enum.IntEnum):
    FUSED_NONE = 0
    FUSED_RELU = 1
    FUSED_RELU1 = 2
    FUSED_RELU6 = 3


class AutoPad(enum.IntEnum):
    AUTO_PAD_NONE = 0
    AUTO_PAD_SAME = 1
    AUTO_PAD_VALID = 2


class DeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    ACCELERATOR = 2


class PadMode(enum.IntEnum):
    NONE = 0
    CONSTANT = 1
    REFLECT = 2
    REPLICATE = 3
    EDGE = 4


class InterpolateMode(enum.IntEnum):
    NONE = 0
    BILINEAR = 1
    NEAREST = 2


@enum.unique
class OperationType(enum.IntEnum):
    """The 96 NNAdapter operation codes (NNAdapterOperationCode): ABS = 0, then +1 in declaration order.
    Explicit values so that type checkers see the members; `enum.unique` rejects a repeated number and
    tests/nnadapter/test_operation_coverage.py pins every (code, name) pair against nnadapter.h's list."""

    ABS = 0
    ADAPTIVE_AVERAGE_POOL_2D = 1
    ADAPTIVE_MAX_POOL_2D = 2
    ADD = 3
    AND = 4
    ARG_MAX = 5
    ARG_MIN = 6
    ASSIGN = 7
    AVERAGE_POOL_2D = 8
    BATCH_NORMALIZATION = 9
    CAST = 10
    CHANNEL_SHUFFLE = 11
    CLIP = 12
    CONCAT = 13
    CONV_2D = 14
    CONV_2D_TRANSPOSE = 15
    COS = 16
    CUM_SUM = 17
    DEFORMABLE_CONV_2D = 18
    DEQUANTIZE = 19
    DIV = 20
    EQUAL = 21
    EXP = 22
    EXPAND = 23
    FILL = 24
    FILL_LIKE = 25
    FLATTEN = 26
    FLOOR = 27
    FLOOR_DIV = 28
    FULLY_CONNECTED = 29
    GATHER = 30
    GELU = 31
    GREATER = 32
    GREATER_EQUAL = 33
    GRID_SAMPLE = 34
    GROUP_NORMALIZATION = 35
    HARD_SIGMOID = 36
    HARD_SWISH = 37
    INSTANCE_NORMALIZATION = 38
    LAYER_NORMALIZATION = 39
    LEAKY_RELU = 40
    LESS = 41
    LESS_EQUAL = 42
    LOG = 43
    LOG_SOFTMAX = 44
    LP_NORMALIZATION = 45
    LRN = 46
    MAT_MUL = 47
    MAX = 48
    MAX_POOL_2D = 49
    MESHGRID = 50
    MIN = 51
    MUL = 52
    NOT = 53
    NOT_EQUAL = 54
    OR = 55
    PAD = 56
    POW = 57
    PRIOR_BOX = 58
    PRELU = 59
    QUANTIZE = 60
    RANGE = 61
    REDUCE_MEAN = 62
    REDUCE_MAX = 63
    REDUCE_SUM = 64
    RELU = 65
    RELU6 = 66
    RESHAPE = 67
    RESIZE_NEAREST = 68
    RESIZE_LINEAR = 69
    ROI_ALIGN = 70
    ROLL = 71
    RSQRT = 72
    SHAPE = 73
    SIGMOID = 74
    SIN = 75
    SLICE = 76
    SOFTMAX = 77
    SOFTPLUS = 78
    SPLIT = 79
    SQUARE = 80
    SQUEEZE = 81
    STACK = 82
    SUB = 83
    SUM = 84
    SWISH = 85
    TANH = 86
    TILE = 87
    TOP_K = 88
    TRANSPOSE = 89
    UNSQUEEZE = 90
    UNSTACK = 91
    WHERE = 92
    XOR = 93
    NON_MAX_SUPPRESSION = 94
    YOLO_BOX = 95

# Bytes per element (GetOperandPrecisionDataLength) and the numpy dtype that holds the raw values.
_PRECISION_DTYPES = {
    Precision.BOOL8: np.bool_,
    Precision.INT8: np.int8,
    Precision.UINT8: np.uint8,
    Precision.INT16: np.int16,
    Precision.UINT16: np.uint16,
    Precision.INT32: np.int32,
    Precision.UINT32: np.uint32,
    Precision.INT64: np.int64,
    Precision.UINT64: np.uint64,
    Precision.FLOAT16: np.float16,
    Precision.FLOAT32: np.float32,
    Precision.FLOAT64: np.float64,
    Precision.QUANT_INT8_SYMM_PER_LAYER: np.int8,
    Precision.QUANT_INT8_SYMM_PER_CHANNEL: np.int8,
    Precision.QUANT_UINT8_ASYMM_PER_LAYER: np.uint8,
    Precision.QUANT_INT16_SYMM_PER_LAYER: np.int16,
    Precision.QUANT_INT16_SYMM_PER_CHANNEL: np.int16,
    Precision.QUANT_UINT16_ASYMM_PER_LAYER: np.uint16,
    Precision.QUANT_INT32_SYMM_PER_LAYER: np.int32,
    Precision.QUANT_INT32_SYMM_PER_CHANNEL: np.int32,
    Precision.QUANT_UINT32_ASYMM_PER_LAYER: np.uint32,
}
_DTYPE_OF_PRECISION = {precision: np.dtype(t) for precision, t in _PRECISION_DTYPES.items()}

QUANT_PRECISIONS = frozenset(p for p in Precision if p.name.startswith("QUANT_"))
PER_CHANNEL_PRECISIONS = frozenset(p for p in QUANT_PRECISIONS if p.name.endswith("PER_CHANNEL"))
ASYMM_PRECISIONS = frozenset(p for p in QUANT_PRECISIONS if "ASYMM" in p.name)
FLOAT_PRECISIONS = frozenset({Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64})
INT_PRECISIONS = frozenset({
    Precision.INT8, Precision.UINT8, Precision.INT16, Precision.UINT16, Precision.INT32,
    Precision.UINT32, Precision.INT64, Precision.UINT64,
})


def precision_dtype(precision: Precision) -> np.dtype:
    """The numpy dtype that stores raw values of `precision` (quantized types store integers)."""
    found = _DTYPE_OF_PRECISION.get(precision)  # on every run (OperandType.dtype): a dict hit, nothing else
    if found is not None:
        return found
    try:
        return np.dtype(_PRECISION_DTYPES[Precision(precision)])
    except (KeyError, ValueError):
        raise ValueError(f"NNAdapter precision {precision!r} has no storage type") from None


_DTYPE_PRECISIONS = {
    np.dtype(np.bool_): Precision.BOOL8,
    np.dtype(np.int8): Precision.INT8,
    np.dtype(np.uint8): Precision.UINT8,
    np.dtype(np.int16): Precision.INT16,
    np.dtype(np.uint16): Precision.UINT16,
    np.dtype(np.int32): Precision.INT32,
    np.dtype(np.uint32): Precision.UINT32,
    np.dtype(np.int64): Precision.INT64,
    np.dtype(np.uint64): Precision.UINT64,
    np.dtype(np.float16): Precision.FLOAT16,
    np.dtype(np.float32): Precision.FLOAT32,
    np.dtype(np.float64): Precision.FLOAT64,
}


def dtype_precision(dtype) -> Precision:
    """The plain (non-quantized) precision for a numpy dtype."""
    try:
        return _DTYPE_PRECISIONS[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"numpy dtype {np.dtype(dtype)} has no NNAdapter precision") from None
