"""Quantized convolution chains as onnxruntime's QDQ pattern, so its CPU provider runs them as QLinearConv (int8
kernels) instead of float convolutions on dequantized values, for the chains hal.quantized_chains finds. Entry
points: `emit_conv_chain`, `marked_for_qdq` (QDQ_PRODUCER). Imports hal.quantized_chains and the standard only (the
graph builder comes in as an argument). The chain, the batch-norm folding and when a chain is taken:
docs/architecture.md, "Quantized convolutions on onnxruntime".
"""
from __future__ import annotations

import numpy as np

from hal.quantized_chains import ConvChain
from nnadapter_bridge.nnadapter.codes import OperationType as T

# The ONNX producer name of a model holding QDQ chains: serialized near the start of the bytes (ModelProto
# field 2), so the driver can tell without parsing the model.
QDQ_PRODUCER = "nnadapter-bridge qdq"
PRODUCER_PROBE_BYTES = 64


def marked_for_qdq(model_bytes) -> bool:
    """Whether ONNX model bytes carry QDQ_PRODUCER (only their first bytes are read)."""
    return bytes(memoryview(model_bytes)[:PRODUCER_PROBE_BYTES]).find(QDQ_PRODUCER.encode()) >= 0


def _folded_constants(chain: ConvChain):
    """(int8 weights, per-channel weight scales, int32 bias, per-channel bias scales) with the batch
    normalization folded in (module docstring)."""
    conv = chain.conv
    x_scale = float(conv.inputs[0].type.scale)
    w_type = conv.inputs[1].type
    weights = np.asarray(conv.inputs[1].value, dtype=np.int8)
    channels = weights.shape[0]
    w_scales = (np.asarray(w_type.scales, dtype=np.float64) if w_type.scales is not None
                else np.full(channels, float(w_type.scale)))
    bias_operand = conv.inputs[2] if len(conv.inputs) > 2 else None
    conv_bias = np.zeros(channels, dtype=np.float64)
    if bias_operand is not None:
        b_type = bias_operand.type
        b_scales = (np.asarray(b_type.scales, dtype=np.float64) if b_type.scales is not None
                    else np.full(channels, float(b_type.scale)))
        conv_bias = np.asarray(bias_operand.value, dtype=np.float64).reshape(-1) * b_scales
    a = np.ones(channels)
    shift = conv_bias
    if chain.batch_norm is not None:
        bn = chain.batch_norm
        gamma, beta, mean, var = (np.asarray(bn.inputs[i].value, dtype=np.float64).reshape(-1) for i in range(1, 5))
        eps = float(np.asarray(bn.inputs[5].value).reshape(-1)[0]) if len(bn.inputs) > 5 and bn.inputs[5] is not None \
            else 1e-5
        a = gamma / np.sqrt(var + np.float64(np.float32(eps)))
        shift = a * (conv_bias - mean) + beta
    sign = np.where(a < 0, -1, 1).astype(np.int8)
    scales = (w_scales * np.abs(a)).astype(np.float32)
    if np.any(scales <= 0) or not np.all(np.isfinite(scales)):
        return None
    folded = (weights * sign.reshape((-1,) + (1,) * (weights.ndim - 1))).astype(np.int8)
    bias_scales = (np.float32(x_scale) * scales).astype(np.float32)
    bias_q = np.round(shift / bias_scales.astype(np.float64))
    if np.any(np.abs(bias_q) >= 2 ** 31 - 1) or not np.all(np.isfinite(bias_q)):
        return None
    return folded, scales, bias_q.astype(np.int32), bias_scales


def emit_conv_chain(g, chain: ConvChain, conv_attributes: dict) -> bool:
    """Append the QDQ nodes of `chain`, writing its QUANTIZE output; False (nothing appended) when the folded
    constants do not fit (then the chain converts op by op)."""
    constants = _folded_constants(chain)
    if constants is None:
        return False
    weights, scales, bias, bias_scales = constants
    channels = len(scales)
    x = g.x(chain.conv, 0)  # DequantizeLinear of the int8 input: the pattern's first DQ
    w = g.one("DequantizeLinear", [g.const(weights, hint="qw"), g.const(scales),
                                   g.const(np.zeros(channels, np.int8))], axis=0)
    b = g.one("DequantizeLinear", [g.const(bias, hint="qb"), g.const(bias_scales),
                                   g.const(np.zeros(channels, np.int32))], axis=0)
    conv = g.one("Conv", [x, w, b], **conv_attributes)
    out_type = chain.quantize.outputs[0].type
    out_name = g.operand_name(chain.quantize.outputs[0])
    scale, zero = g.scalar(out_type.scale, np.float32), g.scalar(0, np.int8)
    if chain.relu is None:
        g.one("QuantizeLinear", [conv, scale, zero], out_name)
        return True
    quantized = g.one("QuantizeLinear", [conv, scale, zero])
    real = g.one("DequantizeLinear", [quantized, scale, zero])
    if chain.relu.type == T.RELU6:  # min(max(x, 0), 6): quantizing is monotonic, so before or after is alike
        activated = g.one("Clip", [real, g.scalar(0.0, np.float32), g.scalar(6.0, np.float32)])
    else:
        activated = g.one("Relu", [real])
    g.one("QuantizeLinear", [activated, scale, zero], out_name)
    return True
