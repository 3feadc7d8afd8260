"""Every code of the NNAdapter standard (nnadapter.h) with its numeric value: result codes, operand
precisions, layouts, lifetimes, fuse codes, auto-pad, pad and interpolate modes, device types and the
96 operation codes. The numbers are part of the .nnc format and must never change."""
from __future__ import annotations

import enum

import numpy as np

VERSION = 1
UNKNOWN = -65535  # NNADAPTER_UNKNOWN: an unknown dimension or an unknown code
MAX_SIZE_OF_DIMENSIONS = 8
MAX_SIZE_OF_DYNAMIC_DIMENSIONS = 8


class ResultCode(enum.IntEnum):
    NO_ERROR = 0
    OUT_OF_MEMORY = 1
    INVALID_DIMENSIONS = 2
    INVALID_PARAMETER = 3
    DEVICE_NOT_FOUND = 4
    DEVICE_INTERNAL_ERROR = 5
    FEATURE_NOT_SUPPORTED = 6


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


_OPERATION_NAMES = """
ABS ADAPTIVE_AVERAGE_POOL_2D ADAPTIVE_MAX_POOL_2D ADD AND ARG_MAX ARG_MIN ASSIGN AVERAGE_POOL_2D
BATCH_NORMALIZATION CAST CHANNEL_SHUFFLE CLIP CONCAT CONV_2D CONV_2D_TRANSPOSE COS CUM_SUM
DEFORMABLE_CONV_2D DEQUANTIZE DIV EQUAL EXP EXPAND FILL FILL_LIKE FLATTEN FLOOR FLOOR_DIV
FULLY_CONNECTED GATHER GELU GREATER GREATER_EQUAL GRID_SAMPLE GROUP_NORMALIZATION HARD_SIGMOID
HARD_SWISH INSTANCE_NORMALIZATION LAYER_NORMALIZATION LEAKY_RELU LESS LESS_EQUAL LOG LOG_SOFTMAX
LP_NORMALIZATION LRN MAT_MUL MAX MAX_POOL_2D MESHGRID MIN MUL NOT NOT_EQUAL OR PAD POW PRIOR_BOX
PRELU QUANTIZE RANGE REDUCE_MEAN REDUCE_MAX REDUCE_SUM RELU RELU6 RESHAPE RESIZE_NEAREST
RESIZE_LINEAR ROI_ALIGN ROLL RSQRT SHAPE SIGMOID SIN SLICE SOFTMAX SOFTPLUS SPLIT SQUARE SQUEEZE
STACK SUB SUM SWISH TANH TILE TOP_K TRANSPOSE UNSQUEEZE UNSTACK WHERE XOR NON_MAX_SUPPRESSION
YOLO_BOX
""".split()

# NNAdapterOperationCode: ABS = 0, then +1 in declaration order (96 codes, 0..95).
OperationType = enum.IntEnum("OperationType", [(name, code) for code, name in enumerate(_OPERATION_NAMES)])
OperationType.__doc__ = "The 96 NNAdapter operation codes (NNAdapterOperationCode)."
OperationType.__module__ = __name__
assert len(OperationType) == 96

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
