"""Quantized convolution chains a driver can run as one int8 convolution (google_xnnpack's TFLite int8
CONV_2D; microsoft_onnxruntime's qdq.py turns the same chains into QLinearConv).

What the converters make of a quantized Paddle conv (both PTQ encodings, docs/quantization.md) is a chain

    QUANTIZE(x) -> CONV_2D (int8 x int8 -> int32 sums) -> DEQUANTIZE -> [BATCH_NORMALIZATION]
        -> [RELU | RELU6 [-> MAX(x, c <= 0), the fake-quant encoding's lower clip, an identity after the relu]]
        -> QUANTIZE

whose last QUANTIZE is the next quantized op's input. An int8 convolution writing that QUANTIZE's int8 result
directly computes it when the batch normalization is folded in: per output channel a = gamma / sqrt(var + eps)
goes into the weight scale (|a|, the int8 weights negated where a < 0: exact) and the bias
b' = a * (conv bias - mean) + beta is quantized to int32 at the accumulator scale s_x * s_w * |a| (rounding
below one accumulator step); a relu / relu6 is the convolution's fused clamp (quantizing is monotonic, so
before or after the clamp is alike). The result differs from the operation-by-operation path only where
folding moves a value across a rounding boundary: one quantization step now and then.

A chain is taken only when each link's output has that one consumer and is not a model output, the weights and
bias are constants, every quantization is symmetric int8 with zero point 0, and no int8 weight is -128 (its
negation would not fit).

Imports the NNAdapter standard, hal.common and numpy only; never a driver or an SDK.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hal.common import is_integer_product, unpack
from nnadapter_bridge.nnadapter.codes import FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import Operation


@dataclasses.dataclass
class ConvChain:
    conv: Operation
    dequantize: Operation
    batch_norm: Operation | None
    relu: Operation | None
    quantize: Operation
    clip: Operation | None = None  # MAX(x, c <= 0) after the relu: an identity there
    pool: Operation | None = None  # a MAX_POOL_2D before the QUANTIZE (quantizing is monotonic: it commutes)

    def operations(self) -> list:
        return [op for op in (self.conv, self.dequantize, self.batch_norm, self.relu, self.clip, self.pool,
                              self.quantize) if op is not None]


@dataclasses.dataclass
class FoldedConv:
    """A chain's int8 convolution: weights [O, ...] (int8), their per-channel scales, the int32 bias and its
    per-channel scales (input scale x weight scales)."""
    weights: np.ndarray
    scales: np.ndarray
    bias: np.ndarray
    bias_scales: np.ndarray


def _sole_consumer(operand, consumers: dict, outputs: set) -> Operation | None:
    if operand is None or operand.index in outputs:
        return None
    users = consumers.get(operand.index, [])
    return users[0] if len(users) == 1 else None


def int8_symmetric(t) -> bool:
    return t.precision in (Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL) \
        and not t.zero_point


def find_conv_chains(model: Model, with_pools: bool = False) -> list:
    """Every CONV_2D chain (module docstring) in `model`; `with_pools`: also those with a MAX_POOL_2D before their
    last QUANTIZE (for a driver whose int8 max pool follows Paddle's windows)."""
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
        if not (int8_symmetric(x.type) and int8_symmetric(w.type)) or np.any(np.asarray(w.value) == -128):
            continue
        if int(unpack(conv).int("fuse_code", 0) or 0) != FuseCode.FUSED_NONE:
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
            identity, link = after, after
            after = _sole_consumer(link.outputs[0], consumers, outputs)
        pool = None
        if with_pools and after is not None and after.type == T.MAX_POOL_2D and after.inputs[0] is link.outputs[0] \
                and not (len(after.outputs) > 1 and after.outputs[1] is not None):
            pool, link = after, after
            after = _sole_consumer(link.outputs[0], consumers, outputs)
        if after is None or after.type != T.QUANTIZE:
            continue
        out_type = after.outputs[0].type
        if out_type.precision != Precision.QUANT_INT8_SYMM_PER_LAYER or out_type.zero_point:
            continue
        chains.append(ConvChain(conv, dequantize, batch_norm, relu, after, identity, pool))
    return chains


@dataclasses.dataclass
class FloatTail:
    """An integer product's float tail: DEQUANTIZE -> BATCH_NORMALIZATION (constant statistics) [-> RELU | RELU6],
    each link read by the next alone. Where the product cannot be an int8 operator (its result is not requantized
    right away) it runs in float on the real values, and the tail folds into it as a float batch norm folds into
    a float convolution (hal.fusion)."""
    conv: Operation
    dequantize: Operation
    batch_norm: Operation
    relu: Operation | None

    def operations(self) -> list:
        return [op for op in (self.conv, self.dequantize, self.batch_norm, self.relu) if op is not None]

    @property
    def last(self) -> Operation:
        return self.relu or self.batch_norm


def find_float_tails(model: Model, chains: list) -> list:
    """The FloatTail of every integer-product CONV_2D of `model` that heads none of `chains`."""
    consumers = model.consumers()
    outputs = {o.index for o in model.output_operands}
    taken = {id(chain.conv) for chain in chains}
    tails = []
    for conv in model.operations:
        if conv.type != T.CONV_2D or id(conv) in taken or not is_integer_product(conv) \
                or not conv.inputs[1].is_constant:
            continue
        dequantize = _sole_consumer(conv.outputs[0], consumers, outputs)
        if dequantize is None or dequantize.type != T.DEQUANTIZE:
            continue
        bn = _sole_consumer(dequantize.outputs[0], consumers, outputs)
        if bn is None or bn.type != T.BATCH_NORMALIZATION or bn.inputs[0] is not dequantize.outputs[0] \
                or not all(o is not None and o.is_constant for o in bn.inputs[1:5]) \
                or not (len(bn.inputs) < 6 or bn.inputs[5] is None or bn.inputs[5].is_constant):
            continue
        relu = _sole_consumer(bn.outputs[0], consumers, outputs) if bn.outputs[0].index not in outputs else None
        if relu is not None and (relu.type not in (T.RELU, T.RELU6) or relu.inputs[0] is not bn.outputs[0]):
            relu = None
        tails.append(FloatTail(conv, dequantize, bn, relu))
    return tails


def batch_norm_factors(bn: Operation) -> tuple:
    """(a, shift) per channel of a BATCH_NORMALIZATION with constant statistics: y = a * x + shift, in float64."""
    gamma, beta, mean, var = (np.asarray(bn.inputs[i].value, dtype=np.float64).reshape(-1) for i in range(1, 5))
    eps = float(np.asarray(bn.inputs[5].value).reshape(-1)[0]) if len(bn.inputs) > 5 and bn.inputs[5] is not None \
        else 1e-5
    a = gamma / np.sqrt(var + np.float64(np.float32(eps)))
    return a, beta - a * mean


def _per_channel(t, channels: int) -> np.ndarray:
    return (np.asarray(t.scales, dtype=np.float64) if t.scales is not None
            else np.full(channels, float(t.scale)))


@dataclasses.dataclass
class FoldedWeights:
    """An integer product's int8 weights with its batch norm folded in: the weights [O, ...] (int8, negated
    where the batch norm's factor a is negative), their per-channel scales (weight scale x |a|) and the real
    per-channel shift a * (conv bias) + (the batch norm's offset), in float64."""
    weights: np.ndarray
    scales: np.ndarray
    shift: np.ndarray


def fold_weights(conv: Operation, batch_norm: Operation | None) -> FoldedWeights | None:
    """`conv`'s int8 weights with `batch_norm` (constant statistics, reading the product's real values) folded
    in (module docstring): exact, since |a| goes into the scales and its sign into the int8 weights; None when
    they do not fit (a weight of -128 to negate, a zero or non-finite scale)."""
    weights = np.asarray(conv.inputs[1].value, dtype=np.int8)
    channels = weights.shape[0]
    w_scales = _per_channel(conv.inputs[1].type, channels)
    bias_operand = conv.inputs[2] if len(conv.inputs) > 2 else None
    shift = np.zeros(channels, dtype=np.float64)
    if bias_operand is not None:
        shift = np.asarray(bias_operand.value, dtype=np.float64).reshape(-1) * \
            _per_channel(bias_operand.type, channels)
    a = np.ones(channels)
    if batch_norm is not None:
        a, offset = batch_norm_factors(batch_norm)
        shift = a * shift + offset
    negate = a < 0
    if np.any(weights[negate] == -128):
        return None
    scales = (w_scales * np.abs(a)).astype(np.float32)
    if np.any(scales <= 0) or not np.all(np.isfinite(scales)) or not np.all(np.isfinite(shift)):
        return None
    sign = np.where(negate, -1, 1).astype(np.int8)
    folded = (weights * sign.reshape((-1,) + (1,) * (weights.ndim - 1))).astype(np.int8)
    return FoldedWeights(folded, scales, shift)


def fold_chain(chain: ConvChain) -> FoldedConv | None:
    """The chain's int8 convolution with the batch normalization folded in (module docstring); None when the
    folded constants do not fit (a zero or non-finite scale, a bias beyond int32)."""
    folded = fold_weights(chain.conv, chain.batch_norm)
    if folded is None:
        return None
    bias_scales = (np.float32(chain.conv.inputs[0].type.scale) * folded.scales).astype(np.float32)
    bias_q = np.round(folded.shift / bias_scales.astype(np.float64))
    if np.any(np.abs(bias_q) >= 2 ** 31 - 1) or not np.all(np.isfinite(bias_q)):
        return None
    return FoldedConv(folded.weights, folded.scales, bias_q.astype(np.int32), bias_scales)
