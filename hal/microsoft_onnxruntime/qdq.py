"""Quantized convolution chains as onnxruntime's QDQ pattern, so its CPU provider runs them as QLinearConv (int8
kernels) instead of float convolutions on dequantized values. Entry points: `find_conv_chains`, `emit_conv_chain`,
`marked_for_qdq` (QDQ_PRODUCER). Imports hal.common and the standard only (the graph builder comes in as an
argument). The chain, the batch-norm folding and when a chain is taken: docs/architecture.md, "Quantized
convolutions on onnxruntime".
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hal.common import is_integer_product, unpack
from nnadapter_bridge.nnadapter.codes import FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import Operation

# The ONNX producer name of a model holding QDQ chains: serialized near the start of the bytes (ModelProto
# field 2), so the driver can tell without parsing the model.
QDQ_PRODUCER = "nnadapter-bridge qdq"
PRODUCER_PROBE_BYTES = 64


def marked_for_qdq(model_bytes) -> bool:
    """Whether ONNX model bytes carry QDQ_PRODUCER (only their first bytes are read)."""
    return bytes(memoryview(model_bytes)[:PRODUCER_PROBE_BYTES]).find(QDQ_PRODUCER.encode()) >= 0


@dataclasses.dataclass
class ConvChain:
    conv: Operation
    dequantize: Operation
    batch_norm: Operation | None
    relu: Operation | None
    quantize: Operation
    clip: Operation | None = None  # MAX(x, c <= 0) after the relu: an identity there

    def operations(self) -> list:
        return [op for op in (self.conv, self.dequantize, self.batch_norm, self.relu, self.clip, self.quantize)
                if op is not None]


def _sole_consumer(operand, consumers: dict, outputs: set) -> Operation | None:
    if operand is None or operand.index in outputs:
        return None
    users = consumers.get(operand.index, [])
    return users[0] if len(users) == 1 else None


def _int8_symmetric(t) -> bool:
    return t.precision in (Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL) \
        and not t.zero_point


def find_conv_chains(model: Model) -> list:
    """Every CONV_2D chain (module docstring) in `model` that can run as QLinearConv."""
    consumers = model.consumers()
    outputs = {o.index for o in model.output_operands}
    chains = []
    for conv in model.operations:
        if conv.type != T.CONV_2D or not is_integer_product(conv):
            continue
        x, w = conv.inputs[0], conv.inputs[1]
        bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        if x.is_constant or not w.is_constant or (bias is not None and not bias.is_constant):
            continue
        if not (_int8_symmetric(x.type) and _int8_symmetric(w.type)) or np.any(np.asarray(w.value) == -128):
            continue
        args = unpack(conv)
        if int(args.int("fuse_code", 0) or 0) != FuseCode.FUSED_NONE:
            continue
        dequantize = _sole_consumer(conv.outputs[0], consumers, outputs)
        if dequantize is None or dequantize.type != T.DEQUANTIZE:
            continue
        link, batch_norm, relu = dequantize, None, None
        after = _sole_consumer(link.outputs[0], consumers, outputs)
        if after is not None and after.type == T.BATCH_NORMALIZATION and after.inputs[0] is link.outputs[0] \
                and all(o is not None and o.is_constant for o in after.inputs[1:5]) \
                and (len(after.inputs) < 6 or after.inputs[5] is None or after.inputs[5].is_constant):
            batch_norm, link = after, after
            after = _sole_consumer(link.outputs[0], consumers, outputs)
        if after is not None and after.type in (T.RELU, T.RELU6):
            relu, link = after, after
            after = _sole_consumer(link.outputs[0], consumers, outputs)
        identity = None
        if relu is not None and after is not None and after.type == T.MAX and after.inputs[0] is link.outputs[0] \
                and after.inputs[1] is not None and after.inputs[1].is_constant \
                and np.all(np.asarray(after.inputs[1].value) <= 0) and np.asarray(after.inputs[1].value).size == 1:
            # the fake-quant encoding's lower clip max(x, -range): after the relu it changes nothing
            identity, link = after, after
            after = _sole_consumer(link.outputs[0], consumers, outputs)
        if after is None or after.type != T.QUANTIZE:
            continue
        out_type = after.outputs[0].type
        if out_type.precision != Precision.QUANT_INT8_SYMM_PER_LAYER or out_type.zero_point:
            continue
        chains.append(ConvChain(conv, dequantize, batch_norm, relu, after, identity))
    return chains


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
