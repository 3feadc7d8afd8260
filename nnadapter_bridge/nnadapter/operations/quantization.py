"""QUANTIZE and DEQUANTIZE: signatures, shape inference and numpy references.

QUANTIZE's output quantization params come from its constant scale/zero_point operands; both references
work on the quantized storage arrays themselves (raw_quant) through the registry's quantize/dequantize.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`, `common`,
the standard's codes and types and `errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.operations.common import (
    const_array,
    const_int,
    known,
    normalize_axis,
    operation_error,
    result_type,
)
from nnadapter_bridge.nnadapter.operations.registry import F32, INT32, Slot, dequantize, operation, quantize, reference

_QUANTIZE_OUTPUTS = frozenset({
    Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL,
    Precision.QUANT_UINT8_ASYMM_PER_LAYER,
})
_DEQUANTIZE_INPUTS = frozenset({
    Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL,
    Precision.QUANT_UINT8_ASYMM_PER_LAYER, Precision.QUANT_INT16_SYMM_PER_LAYER,
    Precision.QUANT_INT16_SYMM_PER_CHANNEL, Precision.QUANT_UINT16_ASYMM_PER_LAYER,
    Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL,
    Precision.QUANT_UINT32_ASYMM_PER_LAYER,
})
_F32_OR_INT32 = F32 | INT32


# -- signatures and shape inference ------------------------------------------------------------------

def quantize_params(op) -> tuple:
    """(precision, scale, scales, channel_dim, zero_point) of QUANTIZE's output, from its constant
    axis/scale/zero_point operands: several scales make it per-channel along `axis`, a non-zero zero
    point makes it asymmetric uint8, otherwise symmetric int8."""
    scale = const_array(op, 2)
    zero_point = const_array(op, 3)
    if scale is None:
        raise operation_error(op, "input 'scale' must be a constant (it becomes the output's quantization params)")
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    zero_point = np.zeros_like(scale) if zero_point is None else np.asarray(zero_point, np.float64).reshape(-1)
    if scale.size == 0 or not np.all(scale > 0):
        raise operation_error(op, f"every scale must be > 0, got {scale.tolist()}")
    if zero_point.size != scale.size:
        raise operation_error(op, f"zero_point has {zero_point.size} values but scale has {scale.size}; "
                                  "they must match")
    if np.any(zero_point != np.round(zero_point)):
        raise operation_error(op, f"zero_point must hold integers, got {zero_point.tolist()}")
    if scale.size > 1:
        # axis only matters per channel (the spec: "only valid for per-channel quantization").
        rank = op.inputs[0].type.rank
        axis = normalize_axis(const_int(op, 1, 1), max(rank, 1), op)
        if np.any(zero_point != 0):
            raise operation_error(op, "per-channel quantization is symmetric only: zero_point must be all 0")
        channels = op.inputs[0].type.dims[axis] if rank else 1
        if known(channels) and channels != scale.size:
            raise operation_error(op, f"{scale.size} scales for axis {axis} of size {channels}")
        return Precision.QUANT_INT8_SYMM_PER_CHANNEL, None, tuple(scale.tolist()), axis, 0
    zp = int(zero_point[0])
    if zp != 0:
        if not 0 <= zp <= 255:
            raise operation_error(op, f"an asymmetric uint8 zero_point must be in [0, 255], got {zp}")
        return Precision.QUANT_UINT8_ASYMM_PER_LAYER, float(scale[0]), None, 0, zp
    return Precision.QUANT_INT8_SYMM_PER_LAYER, float(scale[0]), None, 0, 0


@operation(T.QUANTIZE, inputs=[Slot("input", F32), Slot("axis", INT32, optional=True), Slot("scale", F32),
                               Slot("zero_point", _F32_OR_INT32, optional=True)],
           outputs=[Slot("output", _QUANTIZE_OUTPUTS)])
def prepare_quantize(op):
    """output = round(input / scale + zero_point), saturated; quantization params from the operands."""
    precision, scale, scales, channel_dim, zero_point = quantize_params(op)
    out = result_type(op.inputs[0].type, precision=precision)
    return [out.copy(scale=scale, scales=scales, channel_dim=channel_dim, zero_point=zero_point)]


@operation(T.DEQUANTIZE, inputs=[Slot("input", _DEQUANTIZE_INPUTS)], outputs=[Slot("output")])
def prepare_dequantize(op):
    """output = (input - zero_point) * scale as FLOAT32, same shape."""
    return [result_type(op.inputs[0].type, precision=Precision.FLOAT32)]


# -- references ------------------------------------------------------------------------------------------

@reference(T.QUANTIZE, raw_quant=True)
def quantize_reference(op, inputs):
    # The output type carries the params prepare derived from scale/zero_point; the shared helper
    # rounds half to even (as ONNX QuantizeLinear, which the other drivers lower to) and saturates.
    x = np.asarray(inputs[0], dtype=np.float32)
    return [quantize(x, op.outputs[0].type)]


@reference(T.DEQUANTIZE, raw_quant=True)
def dequantize_reference(op, inputs):
    return [dequantize(inputs[0], op.inputs[0].type).astype(np.float32, copy=False)]
