"""The mixed-precision quantization config: ops of a quantized model that stay in float.

Paddle Lite's `set_nnadapter_mixed_precision_quantization_config_path` / `_buffer` name, in the partition
config's syntax (`op_type`, `op_type:in1,in2`, `op_type::out`, `op_type:in:out`; one or more specs per line
separated by `-`, `#` comments; partition.PartitionConfig parses both), the ops whose quantized form is not
used. Here that means the converters do not emit the int8 form for a listed op:

  - a product (conv2d, depthwise_conv2d, mul, matmul, matmul_v2) reading dequantize_linear(int8 weight)
    gets the dequantized float weight (folded at conversion) and computes in float on the dequantized
    activation, instead of the int8 x int8 -> int32 product (converters.quantized_products.emit_integer_product);
  - in the fake form (onnx_format=False), a listed product computes in float on the integers Paddle holds
    (the activation quantizer then hands out float integers instead of an int8 operand);
  - in Paddle Lite's own form (enable_int8 ops with int8 weights and scale attributes, from opt), a listed
    product computes in float on its input's real values with its weight times its scale attribute
    (converters.quantized_products.float_product_operands), and its output is not rounded to Output0_scale.

The activations keep Paddle's quantize-dequantize rounding (the program computes it; dropping it would
change the result), so a listed op computes exactly what Paddle computes, in float. The listed ops are
part of the cache key (the subgraph fingerprint). The buffer wins over the path, as for the partition
config; a path that does not exist is a ConfigError (unlike the partition config, nothing later could
stand in for it).

Entry points: `resolve_mixed_precision_config`, `float_op_indices`, `listed_op_indices`, `is_quantized_model`.
Imports partition's config parser and `errors` only.
"""
from __future__ import annotations

import os

from nnadapter_bridge.errors import ConfigError
from partition import PartitionConfig


def resolve_mixed_precision_config(buffer: str | bytes | None = None, path: str | os.PathLike | None = None):
    """The parsed config (a partition.PartitionConfig) from the buffer, else the path; None when neither is set."""
    if buffer:
        return PartitionConfig.from_text(buffer, source="<mixed precision buffer>")
    if path:
        if not os.path.isfile(path):
            raise ConfigError(f"mixed-precision quantization config {os.fspath(path)} "
                              f"(set_nnadapter_mixed_precision_quantization_config_path) does not exist")
        return PartitionConfig.from_path(path)
    return None


def listed_op_indices(parsed: PartitionConfig | None, graph) -> frozenset:
    """The indices (in block 0) of the ops a parsed mixed-precision config lists; empty without one (None). A
    spec that matches no op is warned about (partition.PartitionConfigWarning)."""
    if parsed is None:
        return frozenset()
    return frozenset(key[1] for key in parsed.match(graph.blocks[0].ops))


def float_op_indices(config, graph) -> frozenset:
    """listed_op_indices for the mixed-precision config of `config` (a Config; a predictor reads its settings'
    parsed config instead, predictor.settings)."""
    return listed_op_indices(resolve_mixed_precision_config(
        config.nnadapter_mixed_precision_quantization_config_buffer(),
        config.nnadapter_mixed_precision_quantization_config_path()), graph)


# Paddle ops that make a program a quantized one (its outputs are judged at the reduced-precision tolerance).
QUANT_OP_TYPES = frozenset({
    "quantize_linear", "dequantize_linear", "fake_quantize_abs_max", "fake_quantize_range_abs_max",
    "fake_quantize_moving_average_abs_max", "fake_channel_wise_quantize_abs_max", "fake_dequantize_max_abs",
    "fake_channel_wise_dequantize_max_abs", "fake_quantize_dequantize_abs_max",
    "fake_quantize_dequantize_moving_average_abs_max", "fake_channel_wise_quantize_dequantize_abs_max",
})


def is_quantized_model(graph) -> bool:
    """True when the program quantizes: a quantize/dequantize op, or an int8 weight (Paddle Lite's form)."""
    if any(op.type in QUANT_OP_TYPES for block in graph.blocks for op in block.ops):
        return True
    return any(getattr(array, "dtype", None) == "int8" for array in graph.params.values())
