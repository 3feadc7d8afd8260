"""Quantized convolution chains as onnxruntime's QDQ pattern, so its CPU provider runs them as QLinearConv (int8
kernels) instead of float convolutions on dequantized values, for the chains hal.quantized_chains finds. Entry
points: `emit_conv_chain`, `marked_for_qdq` (QDQ_PRODUCER). Imports hal.quantized_chains and the standard only (the
graph builder comes in as an argument). The chain, the batch-norm folding and when a chain is taken:
docs/architecture.md, "Quantized convolutions on onnxruntime".
"""
from __future__ import annotations

import numpy as np

from hal.quantized_chains import ConvChain, fold_chain
from nnadapter_bridge.nnadapter.codes import OperationType as T

# The ONNX producer name of a model holding QDQ chains: serialized near the start of the bytes (ModelProto
# field 2), so the driver can tell without parsing the model.
QDQ_PRODUCER = "nnadapter-bridge qdq"
PRODUCER_PROBE_BYTES = 64


def marked_for_qdq(model_bytes) -> bool:
    """Whether ONNX model bytes carry QDQ_PRODUCER (only their first bytes are read)."""
    return bytes(memoryview(model_bytes)[:PRODUCER_PROBE_BYTES]).find(QDQ_PRODUCER.encode()) >= 0


def emit_conv_chain(g, chain: ConvChain, conv_attributes: dict) -> bool:
    """Append the QDQ nodes of `chain`, writing its QUANTIZE output, and mark the model with QDQ_PRODUCER; False
    (nothing appended) when the folded constants do not fit (then the chain converts op by op)."""
    folded = fold_chain(chain)
    if folded is None:
        return False
    g.producer_name = QDQ_PRODUCER
    weights, scales, bias, bias_scales = folded.weights, folded.scales, folded.bias, folded.bias_scales
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
