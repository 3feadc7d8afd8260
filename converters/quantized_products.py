"""Quantized products: the helpers conv.py and matmul.py call to convert a conv2d / depthwise_conv2d /
conv2d_transpose / fc / mul / matmul / matmul_v2 whose weight is quantized, in the three encodings Paddle
models carry (the scale conventions are in `quantization`'s docstring).

Paddle Lite's scale attributes (an int8 persistable weight and its scales): the input is QUANTIZEd to the
per-layer input scale (unless it already is that), the weight becomes a QUANT_INT8 constant (per channel only
when the channel scales really differ, else collapsed: Paddle Lite's IsValidSymmPerChannelQuantParams), the
bias a QUANT_INT32 constant, the operation writes a per-layer QUANT_INT8 output with the output scale, and a
DEQUANTIZE gives the Paddle var a float value. Why the DEQUANTIZE: the Paddle var is declared float32 and the
engine hands subgraph outputs over as they are, so a float consumer (or the caller) must never see int8
storage; two quantized products in a row pay a DEQUANTIZE + QUANTIZE with the same scale, which is lossless.
Products with a float weight keep the float path in conv.py and matmul.py.

Paddle's own post-training quantization (both encodings: quantize_linear / dequantize_linear pairs with int8
weights, and the fake quant/dequant ops) becomes int8 x int8 -> int32 products followed by a DEQUANTIZE
(`emit_integer_product`), which the SDK drivers run as integer kernels; the mixed-precision config
(`keeps_float`, `op_keeps_float`) keeps listed vars and ops in float. docs/quantization.md has the whole
picture.

Registers no converter; imports the converter toolkit (op_view, emit, layout) and the standard only.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from converters.emit import binary, cast_to
from converters.op_view import OpView
from nnadapter_bridge.nnadapter.codes import FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.types import Operand, OperandType

# Channel scales closer than this, relative to their own magnitude, are one scale: a channel's weights then
# move by at most 1e-5 of their value, far below int8's step of 1/254. Paddle Lite's
# IsValidSymmPerChannelQuantParams compares with an absolute 1e-5, which merges scales of 1e-5 and 2e-5
# (a factor 2 on a channel's weights).
PER_CHANNEL_THRESHOLD = 1e-5
# The operations a quantized product adds around its main operation.
QUANT_EMITS = [T.QUANTIZE, T.DEQUANTIZE]
INT8_MIN, INT8_MAX = -128, 127


def collapse_scales(scales: Sequence[float]) -> list:
    """One scale when every channel scale equals the first within PER_CHANNEL_THRESHOLD (relative), else all."""
    scales = [float(s) for s in scales]
    if all(abs(s - scales[0]) <= PER_CHANNEL_THRESHOLD * max(abs(s), abs(scales[0])) for s in scales):
        return scales[:1]
    return scales


# -- Paddle Lite's scale attributes on conv / fc / mul / matmul -------------------------------------------

@dataclasses.dataclass
class ProductQuant:
    """The quantization of one product op: per-layer input and output steps, the weight's steps
    (one per layer, or one per output channel)."""
    input_scale: float
    weight_scales: list
    output_scale: float | None  # None: the output stays float (product_quant_reason's float_output_ok)


def has_int8_weight(ctx, op, weight_slot: str) -> bool:
    """True when the op's weight is an int8 persistable var: Paddle Lite's quant mode (facts §5.3)."""
    name = OpView(op).optional_input(weight_slot)
    return bool(name) and ctx.is_param(name) and ctx.param(name).dtype == np.int8


def product_quant_reason(ctx, op, input_slot: str, weight_slot: str, output_slot: str,
                         channels: int | None, per_channel_ok: bool = True,
                         float_output_ok: bool = False) -> str | None:
    """Why an op with an int8 weight cannot take the quantized path (None when it can, or when the
    weight is not int8). `channels` is the weight's output-channel count for per-channel scales.
    `float_output_ok`: the op may lack an output scale (Paddle Lite's last int8 conv before a float op has
    none; its output is the dequantized int32 sums: ProductQuant.output_scale None)."""
    if not has_int8_weight(ctx, op, weight_slot):
        return None
    weight = OpView(op).optional_input(weight_slot)
    weight_scales = ctx.quant_scales(op, weight_slot, 0)
    if not weight_scales:
        return f"int8 {weight_slot} '{weight}' needs its scales in the {weight_slot}0_scale attr"
    for slot in (input_slot, output_slot):
        scales = ctx.quant_scales(op, slot, 0)
        if slot == output_slot and not scales and float_output_ok:
            continue
        if not scales or len(scales) != 1:
            return f"an int8 {weight_slot} needs one per-layer {slot}0_scale, got {scales}"
        if scales[0] <= 0:
            return f"{slot}0_scale must be positive, got {scales[0]}"
    if any(s <= 0 for s in weight_scales):
        return f"{weight_slot}0_scale values must be positive, got {weight_scales}"
    collapsed = collapse_scales(weight_scales)
    if len(collapsed) > 1:
        if not per_channel_ok:
            return f"per-channel {weight_slot}0_scale is not converted for this op form"
        if channels is not None and len(collapsed) != channels:
            return f"{len(collapsed)} {weight_slot}0_scale values for {channels} output channels"
    return None


def product_quant(ctx, op, input_slot: str, weight_slot: str, output_slot: str) -> ProductQuant | None:
    """The op's quantization when its weight is int8 (check with product_quant_reason first), else None; also
    None for an op the mixed-precision config lists (float_product_operands gives its float operands)."""
    if not has_int8_weight(ctx, op, weight_slot) or op_keeps_float(ctx, op):
        return None
    output_scales = ctx.quant_scales(op, output_slot, 0)
    return ProductQuant(ctx.quant_scales(op, input_slot, 0)[0],
                        collapse_scales(ctx.quant_scales(op, weight_slot, 0)),
                        output_scales[0] if output_scales else None)


def dequantized(ctx, x: Operand, var: str, purpose: str) -> Operand:
    """`x` as FLOAT32: a DEQUANTIZE when it is quantized, else `x` itself."""
    if not x.type.is_quantized:
        return x
    out = ctx.temp(var, purpose)
    ctx.add(T.DEQUANTIZE, [x], [out])
    return out


def float_input(ctx, x: Operand, scale: float, var: str) -> Operand:
    """The real values of a product's input `x`: a DEQUANTIZE of a quantized operand; for plain int8 storage
    (what Paddle Lite's `calib`, float -> int8 at this scale, hands an enable_int8 op in an optimized .nb,
    seen here without its producer: a support decision, or calib on the host) the integers widened and
    times `scale` (QUANTIZE at `scale` gives back exactly the integers); any other operand itself."""
    if x.type.precision == Precision.INT8:
        widened = cast_to(ctx, x, Precision.FLOAT32, ctx.temp(var, "input_int8_float"))
        x = ctx.temp(var, "input_float")
        binary(ctx, T.MUL, widened, ctx.const_f32(scale), x)
        return x
    return dequantized(ctx, x, var, "input_float")


def float_product_operands(ctx, op, input_slot: str, weight_slot: str, channel_dim: int,
                           var: str) -> tuple | None:
    """(input, weight) in float for a Paddle Lite scale-attribute product (int8 weight) that the
    mixed-precision config lists: the input's real values (float_input at Input0_scale) and the weight
    dequantized at conversion (the int8 values x Filter0_scale / Y0_scale / W0_scale, per layer or per channel
    along `channel_dim` of the stored weight) as a FLOAT32 constant. None for every other op (product_quant
    then says whether it is quantized)."""
    if not (op_keeps_float(ctx, op) and has_int8_weight(ctx, op, weight_slot)):
        return None
    v = OpView(op)
    weight_name = v.input(weight_slot)
    value = ctx.param(weight_name).astype(np.float32)
    steps = np.asarray(collapse_scales(ctx.quant_scales(op, weight_slot, 0)), dtype=np.float32)
    if steps.size > 1:
        shape = [1] * value.ndim
        shape[channel_dim] = steps.size
        steps = steps.reshape(shape)
    weight = ctx.const(np.ascontiguousarray(value * steps), Precision.FLOAT32, name=f"{weight_name}/float")
    x = float_input(ctx, ctx.input(v.input(input_slot)), ctx.quant_scales(op, input_slot, 0)[0], var)
    return x, weight


def quantized_input(ctx, x: Operand, scale: float, var: str) -> Operand:
    """`x` as QUANT_INT8_SYMM_PER_LAYER with `scale`: itself when it already is exactly that, else a
    QUANTIZE (after a DEQUANTIZE when it carries other quantization params)."""
    t = x.type
    if t.precision == Precision.QUANT_INT8_SYMM_PER_LAYER and t.scale is not None and np.isclose(
            t.scale, scale, rtol=1e-6, atol=0.0):
        return x
    x = float_input(ctx, x, scale, var)
    if x.type.precision != Precision.FLOAT32:
        raise ctx.error(f"a quantized product takes a float32 or int8 input, got {x.type.precision.name}")
    out = ctx.temp(var, "input_quant")
    ctx.add(T.QUANTIZE, [x, ctx.const_i32(1), ctx.const_f32(scale), ctx.const_i32(0)], [out])
    return out


def quantized_weight(ctx, name: str, scales: Sequence[float], channel_dim: int,
                     transpose: bool = False) -> Operand:
    """The int8 weight `name` as a QUANT_INT8 constant: per layer for one scale, else per channel along
    `channel_dim` (of the stored array; `transpose` swaps a 2-D weight, moving that axis to 0)."""
    value = ctx.param(name)
    if transpose:
        value = np.ascontiguousarray(value.T)
        channel_dim = 1 - channel_dim
    if len(scales) == 1:
        return ctx.const(value, Precision.QUANT_INT8_SYMM_PER_LAYER, name=name, scale=scales[0])
    return ctx.const(value, Precision.QUANT_INT8_SYMM_PER_CHANNEL, name=name, scales=tuple(scales),
                     channel_dim=channel_dim)


def int32_sums_type(steps, channel_dim: int) -> OperandType:
    """The type of an int8 x int8 product's int32 sums: their step is input step x weight step, per layer for
    one step, else per channel along `channel_dim` of the output."""
    steps = np.asarray(steps, dtype=np.float64).reshape(-1)
    if steps.size == 1:
        return OperandType(precision=Precision.QUANT_INT32_SYMM_PER_LAYER, scale=float(steps[0]))
    return OperandType(precision=Precision.QUANT_INT32_SYMM_PER_CHANNEL, scales=tuple(steps.tolist()),
                       channel_dim=channel_dim)


def quantized_bias(ctx, bias_name: str | None, quant: ProductQuant, size: int, var: str) -> Operand:
    """The bias as QUANT_INT32 with scale input_scale x weight_scale[i] (facts §5.3): per channel when the
    weight is; a zero bias when there is none."""
    bias = np.zeros(size, np.float64) if bias_name is None else ctx.param(bias_name).astype(np.float64).reshape(-1)
    if bias.size != size:
        raise ctx.error(f"Bias '{bias_name}' has {bias.size} values for {size} output channels")
    steps = quant.input_scale * np.asarray(quant.weight_scales, dtype=np.float64)
    info = np.iinfo(np.int32)
    q = np.clip(np.rint(bias / steps), info.min, info.max).astype(np.int32)
    name = bias_name or f"{var}/zero_bias"
    if steps.size == 1:
        return ctx.const(q, Precision.QUANT_INT32_SYMM_PER_LAYER, name=name, scale=float(steps[0]))
    return ctx.const(q, Precision.QUANT_INT32_SYMM_PER_CHANNEL, name=name, scales=tuple(steps.tolist()),
                     channel_dim=0)


def emit_quantized(ctx, operation: T, operands: list, out: Operand, output_scale: float, var: str) -> None:
    """`operation` writing a per-layer QUANT_INT8 temp with `output_scale`, then a DEQUANTIZE into `out`."""
    quant_out = ctx.temp(var, "output_quant",
                         OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=output_scale))
    ctx.add(operation, operands, [quant_out])
    ctx.add(T.DEQUANTIZE, [quant_out], [out])


def quantized_fc_step(ctx, op, quant: ProductQuant, weight_name: str, weight_channel_dim: int,
                      bias_name: str | None, fuse: FuseCode, var: str):
    """A chain step (ctx, x, out) emitting QUANTIZE -> FULLY_CONNECTED -> DEQUANTIZE for a stored 2-D
    weight; `weight_channel_dim` is its output-unit axis (1 for Paddle's [K, N], 0 for [N, K]).

    FULLY_CONNECTED rather than MAT_MUL because it takes the int32 bias and per-channel weights; it
    flattens the input to [rows, K], so the caller reshapes the output back when needed."""
    transpose = weight_channel_dim == 1  # FULLY_CONNECTED wants [num_units, input_size]
    weight = quantized_weight(ctx, weight_name, quant.weight_scales, weight_channel_dim, transpose=transpose)
    units = weight.type.dims[0]
    bias = quantized_bias(ctx, bias_name, quant, units, var)

    def step(ctx, x, out):
        x_quant = quantized_input(ctx, x, quant.input_scale, var)
        if quant.output_scale is not None:
            emit_quantized(ctx, T.FULLY_CONNECTED, [x_quant, weight, bias, ctx.const_i32(int(fuse))], out,
                           quant.output_scale, var)
            return
        # No output scale (Paddle Lite's last int8 product before a float op): the int32 sums dequantized,
        # then the float bias with the fused activation
        sums = ctx.temp(var, "int32_sums",
                        int32_sums_type(quant.input_scale * np.asarray(quant.weight_scales, dtype=np.float64), 1))
        ctx.add(T.FULLY_CONNECTED, [x_quant, weight, None, ctx.const_i32(int(FuseCode.FUSED_NONE))], [sums])
        bias_value = (np.zeros(units, np.float32) if bias_name is None
                      else ctx.param(bias_name).astype(np.float32).reshape(-1))
        if bias_name is None and fuse == FuseCode.FUSED_NONE:
            ctx.add(T.DEQUANTIZE, [sums], [out])
            return
        real = ctx.temp(var, "float_sums")
        ctx.add(T.DEQUANTIZE, [sums], [real])
        binary(ctx, T.ADD, real, ctx.model.add_constant(np.ascontiguousarray(bias_value.reshape(1, units))), out,
               fuse=fuse)

    return step


# -- int8 constants and mixed precision -------------------------------------------------------------------

def keeps_float(ctx, var: str) -> bool:
    """True when an op reading `var` is listed in the mixed-precision quantization config
    (Config.set_nnadapter_mixed_precision_quantization_config_*): such an op computes in float, so the
    quantized form is not emitted for it (its int8 weight is dequantized at conversion instead)."""
    float_ops = getattr(ctx, "float_ops", None)
    graph = getattr(ctx, "graph", None)
    if not float_ops or graph is None:
        return False
    return any(reader.block_idx == 0 and reader.index in float_ops for reader in graph.consumers(var))


def op_keeps_float(ctx, op) -> bool:
    """True when `op` itself is listed in the mixed-precision quantization config."""
    float_ops = getattr(ctx, "float_ops", None)
    if not float_ops:
        return False
    return getattr(op, "block_idx", 0) == 0 and getattr(op, "index", None) in float_ops


def int8_constant(ctx, value: np.ndarray, steps: np.ndarray, axis: int, name: str) -> Operand:
    """An int8 array as a QUANT_INT8 constant: per layer with one step, else per channel along `axis`."""
    steps = np.asarray(steps, dtype=np.float64).reshape(-1)
    value = np.asarray(value).astype(np.int8, copy=False)
    if steps.size == 1:
        return ctx.const(value, Precision.QUANT_INT8_SYMM_PER_LAYER, name=name, scale=float(steps[0]))
    return ctx.const(value, Precision.QUANT_INT8_SYMM_PER_CHANNEL, name=name, scales=tuple(steps.tolist()),
                     channel_dim=axis)


# -- Paddle's fake quantized form (PostTrainingQuantization / QAT saved with onnx_format=False) -------------
#
# fake_quantize_range_abs_max / fake_quantize_moving_average_abs_max turn an activation into integers held in
# float (round(clip(x, -s, s) / s x 127)); the weight of the product (conv2d, depthwise_conv2d, mul, matmul,
# matmul_v2) holds integers in float too; the product computes integer sums; fake_dequantize_max_abs
# (X x Scale / max_range) or fake_channel_wise_dequantize_max_abs (X x scale[c] x s_x / (127 x 127)) scales
# them back. Every Paddle var keeps its value here:
#   - the activation quantizer's Out is a QUANT_INT8 operand (storage: the integers Paddle holds) when every
#     reader is a product converted in the fake form in the same model, else float integers;
#   - such a product reads the int8 operand and an int8 weight constant and writes a QUANT_INT32 operand
#     whose storage is the integer sums and whose scale is the dequantizer's factor (so the real value is
#     what the dequantizer computes: it becomes a DEQUANTIZE), the int8 x int8 -> int32 form that
#     devices run as integer kernels.

FAKE_ACTIVATION_QUANT_OPS = ("fake_quantize_range_abs_max", "fake_quantize_moving_average_abs_max")
FAKE_DEQUANT_OPS = ("fake_dequantize_max_abs", "fake_channel_wise_dequantize_max_abs")
# Product op type -> (activation slot, weight slot, output slot).
FAKE_PRODUCTS = {
    "conv2d": ("Input", "Filter", "Output"),
    "depthwise_conv2d": ("Input", "Filter", "Output"),
    "mul": ("X", "Y", "Out"),
    "matmul": ("X", "Y", "Out"),
    "matmul_v2": ("X", "Y", "Out"),
}
FAKE_PRODUCT_EMITS = [T.CONV_2D, T.FULLY_CONNECTED]


def _integral_int8(ctx, name: str) -> bool:
    """True when parameter `name` holds integers in [-127, 127] (cached per conversion context)."""
    cache = ctx.__dict__.setdefault("_integral_int8", {})
    if name not in cache:
        value = ctx.param(name)
        if value.dtype == np.int8:
            cache[name] = True
        elif value.dtype.kind != "f":
            cache[name] = False
        else:
            cache[name] = bool(np.all(np.abs(value) <= 127) and np.all(value == np.round(value)))
    return cache[name]


def fake_dequant_factor(ctx, op) -> tuple | None:
    """(factor, axis) of a fake dequantizer that follows a product: Out = X x factor, factor one value
    (axis -1) or one per index of X's `axis`. None when the op is not of that kind (one scale per channel
    before a product, scales that are not parameters)."""
    v = OpView(op)
    if op.type == "fake_dequantize_max_abs":
        scale = v.optional_input("Scale")
        max_range = v.attr_float("max_range", 0.0)
        if not scale or not ctx.is_param(scale) or ctx.param(scale).size != 1 or max_range <= 0:
            return None
        return np.array([float(ctx.param(scale).reshape(-1)[0]) / max_range]), -1
    if op.type == "fake_channel_wise_dequantize_max_abs":
        scales = v.inputs("Scales")
        bits = v.attr_ints("quant_bits", [8] * len(scales))
        if len(scales) != 2 or len(bits) < 2 or not all(ctx.is_param(s) for s in scales):
            return None
        max_range = float(((1 << (bits[0] - 1)) - 1) * ((1 << (bits[1] - 1)) - 1))
        first = ctx.param(scales[0]).astype(np.float64).reshape(-1)
        second = float(ctx.param(scales[1]).reshape(-1)[0])
        x_num_col_dims = v.attr_int("x_num_col_dims", 1)
        return first * second / max_range, (x_num_col_dims if x_num_col_dims > 1 else 1)
    return None


def _fake_product_geometry(ctx, op) -> tuple[np.ndarray, int]:
    """(weight [C_out, ...] as int8, output channel axis) of a product in the fake form."""
    v = OpView(op)
    _, w_slot, _ = FAKE_PRODUCTS[op.type]
    w = ctx.param(v.input(w_slot))
    if op.type in ("conv2d", "depthwise_conv2d"):
        return w, 1
    if op.type == "matmul_v2":
        transpose_y = v.attr_bool("trans_y", False)
    elif op.type == "matmul":
        transpose_y = v.attr_bool("transpose_Y", False)
    else:
        transpose_y = False
    return (w if transpose_y else w.T), 1


def fake_product_reason(ctx, op, quantized_var: str | None = None, x_rank: int | None = None) -> str | None:
    """Why `op` cannot be converted in the fake quantized form (None when it can): its activation must be
    `quantized_var` (when given), its weight a parameter holding int8 integers, its output read only by fake
    dequantizers (and not handed out of the model), and its geometry plain (NCHW conv without a fused
    activation; a 2-D x 2-D matmul without transposed X or alpha)."""
    if op.type not in FAKE_PRODUCTS:
        return f"{op.type} is not a product the fake form quantizes"
    if op_keeps_float(ctx, op):
        return "listed in the mixed-precision quantization config"
    v = OpView(op)
    a_slot, w_slot, o_slot = FAKE_PRODUCTS[op.type]
    x_name, w_name, out_name = v.optional_input(a_slot), v.optional_input(w_slot), v.optional_output(o_slot)
    if not x_name or not w_name or not out_name:
        return "missing operands"
    if quantized_var is not None and x_name != quantized_var:
        return f"the quantized var is not the activation ({a_slot}) of {op.type}"
    if x_name == w_name or not ctx.is_param(w_name) or not _integral_int8(ctx, w_name):
        return f"{w_slot} must be a parameter holding int8 integers"
    graph = getattr(ctx, "graph", None)
    if graph is None:
        return "the program graph is needed to see the dequantizer"
    if out_name in ctx.output_names or out_name in graph.outputs:
        return f"{o_slot} '{out_name}' is handed out of the model"
    readers = graph.consumers(out_name)
    if not readers or any(r.type not in FAKE_DEQUANT_OPS or OpView(r).optional_input("X") != out_name
                          or fake_dequant_factor(ctx, r) is None for r in readers):
        return f"{o_slot} must be read by fake dequantizers only"
    w = ctx.param(w_name)
    if op.type in ("conv2d", "depthwise_conv2d"):
        if w.ndim != 4 or is_channel_last_op(op) or v.attr("with_act", False) or v.attr("fuse_relu", False):
            return "a fake-quantized conv needs an NCHW 4-D filter and no fused activation"
    else:
        if w.ndim != 2:
            return "a fake-quantized matmul needs a 2-D weight"
        if x_rank is None and ctx.has(x_name):
            x_rank = len(ctx.dims(x_name))
        if x_rank is not None and x_rank != 2:
            return "a fake-quantized matmul needs a 2-D activation"
        if op.type == "matmul" and (v.attr_bool("transpose_X", False) or v.attr_float("alpha", 1.0) != 1.0):
            return "a fake-quantized matmul with transpose_X or alpha is not converted"
        if op.type == "matmul_v2" and v.attr_bool("trans_x", False):
            return "a fake-quantized matmul_v2 with trans_x is not converted"
        if op.type == "mul" and (v.attr_int("x_num_col_dims", 1) != 1 or v.attr_int("y_num_col_dims", 1) != 1):
            return "a fake-quantized mul needs x_num_col_dims = y_num_col_dims = 1"
    channels = _fake_product_geometry(ctx, op)[0].shape[0]
    factors = [f for f in (fake_dequant_factor(ctx, r) for r in readers) if f is not None]  # all: checked above
    first, axis = factors[0]
    for factor, other_axis in factors:
        if factor.size not in (1, channels) or (factor.size > 1 and other_axis != 1):
            return f"the dequantizer's scales do not match the {channels} output channels"
        if factor.size != first.size or not np.allclose(factor, first, rtol=1e-6, atol=0.0):
            return "the dequantizers of one product disagree"
    return None


def is_channel_last_op(op) -> bool:
    return str(OpView(op).attr("data_format", "NCHW")) in ("NHWC", "NDHWC")


def takes_fake_product_path(ctx, op) -> bool:
    """True when the product `op` reads an activation its fake quantizer bound as a QUANT_INT8 operand
    (then convert it with emit_fake_product)."""
    if op.type not in FAKE_PRODUCTS:
        return False
    x_name = OpView(op).optional_input(FAKE_PRODUCTS[op.type][0])
    if not x_name or not ctx.has(x_name) or ctx.is_param(x_name):
        return False
    t = ctx.input(x_name).type
    if t.precision != Precision.QUANT_INT8_SYMM_PER_LAYER:
        return False
    producer = getattr(ctx, "graph", None) and ctx.graph.producer(x_name)
    if producer is None or producer.type not in FAKE_ACTIVATION_QUANT_OPS:
        return False
    reason = fake_product_reason(ctx, op)
    if reason is not None:  # the quantizer checked its readers with the same rules: this cannot happen
        raise ctx.error(f"reads the int8 output of {producer.type} but cannot take the fake quantized form: {reason}")
    return True


def emit_fake_product(ctx, op) -> None:
    """The product on the int8 activation and an int8 weight constant, writing QUANT_INT32 integer sums with
    the dequantizer's factor as their scale (see the section comment)."""
    v = OpView(op)
    a_slot, w_slot, o_slot = FAKE_PRODUCTS[op.type]
    out_name = v.output(o_slot)
    x = ctx.input(v.input(a_slot))
    step_x = float(x.type.scale)
    w, channel_axis = _fake_product_geometry(ctx, op)
    dequant = fake_dequant_factor(ctx, ctx.graph.consumers(out_name)[0])
    if dequant is None:  # fake_product_reason accepted only products whose readers have one
        raise ctx.error(f"{o_slot} '{out_name}' is not read by a fake dequantizer with a known factor")
    factor, _ = dequant
    w_steps = factor / step_x
    weight = int8_constant(ctx, np.ascontiguousarray(w), w_steps, 0, f"{v.input(w_slot)}/int8")
    out = ctx.output(out_name, int32_sums_type(factor, channel_axis))
    fuse = ctx.const_i32(int(FuseCode.FUSED_NONE))
    if op.type in ("conv2d", "depthwise_conv2d"):
        from converters.layout import AUTO_PAD_OF, explicit_pads

        pads = explicit_pads(v.attr_ints("paddings", [0, 0]))
        auto_pad = AUTO_PAD_OF[v.attr_str("padding_algorithm", "EXPLICIT")]
        ctx.add(T.CONV_2D, [x, weight, None, ctx.const_i32(int(auto_pad)), ctx.const_i32(pads),
                            ctx.const_i32(v.attr_ints("strides", [1, 1])), ctx.const_i32(int(v.attr("groups", 1) or 1)),
                            ctx.const_i32(v.attr_ints("dilations", [1, 1])), fuse], [out])
    else:
        ctx.add(T.FULLY_CONNECTED, [x, weight, None, fuse], [out])


# -- the QDQ form (quantize_linear / dequantize_linear, onnx_format=True) as integer products -------------
#
# A product whose activation is dequantize_linear(quantize_linear(x)) and whose weight is dequantize_linear of
# an int8 weight computes on grid values: it becomes the same int8 x int8 -> int32 product (scale: the
# product of the two steps) followed by a DEQUANTIZE into the Paddle var, which is its float value. Paddle
# 3's PTQ saves conv outputs with only_observer quantize_linear (no requantization after the product), so
# this is the only form in which the devices see an integer product.

def _dequantize_source(ctx, operand: Operand) -> Operand | None:
    """The quantized operand `operand` is the DEQUANTIZE of, or None."""
    if operand.is_constant or operand.type.precision != Precision.FLOAT32:
        return None
    for operation in reversed(ctx.model.operations):
        if any(o is operand for o in operation.outputs):
            return operation.inputs[0] if operation.type == T.DEQUANTIZE else None
    return None


def is_dequantized_constant(ctx, operand: Operand) -> bool:
    """True when `operand` is the DEQUANTIZE of a quantized constant (an int8 weight's float value)."""
    source = _dequantize_source(ctx, operand)
    return source is not None and source.is_constant


def _qdq_product_operands(ctx, op) -> tuple | None:
    """(int8 activation, int8 weight constant [C_out, ...], output channel axis) when `op` is a product in the
    QDQ form that converts to an integer product, else None."""
    if op.type not in FAKE_PRODUCTS or op_keeps_float(ctx, op):
        return None
    v = OpView(op)
    a_slot, w_slot, o_slot = FAKE_PRODUCTS[op.type]
    x_name, w_name = v.optional_input(a_slot), v.optional_input(w_slot)
    if not x_name or not w_name or not ctx.has(x_name) or not ctx.has(w_name) or ctx.is_param(w_name):
        return None
    xq = _dequantize_source(ctx, ctx.input(x_name))
    wq = _dequantize_source(ctx, ctx.input(w_name))
    if xq is None or wq is None or xq.type.precision != Precision.QUANT_INT8_SYMM_PER_LAYER or not wq.is_constant:
        return None
    if wq.type.precision not in (Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL):
        return None
    per_channel = wq.type.is_per_channel
    if op.type in ("conv2d", "depthwise_conv2d"):
        if (wq.type.rank != 4 or xq.type.rank != 4 or is_channel_last_op(op) or v.attr("with_act", False)
                or v.attr("fuse_relu", False) or v.optional_input("Bias")
                or (per_channel and wq.type.channel_dim != 0)):
            return None
        return xq, wq, 1
    if wq.type.rank != 2 or xq.type.rank != 2:
        return None
    if op.type == "matmul":
        if v.attr_bool("transpose_X", False) or v.attr_float("alpha", 1.0) != 1.0:
            return None
        transpose_y = v.attr_bool("transpose_Y", False)
    elif op.type == "matmul_v2":
        if v.attr_bool("trans_x", False):
            return None
        transpose_y = v.attr_bool("trans_y", False)
    else:
        if v.attr_int("x_num_col_dims", 1) != 1 or v.attr_int("y_num_col_dims", 1) != 1:
            return None
        transpose_y = False
    units_axis = 0 if transpose_y else 1
    if per_channel and wq.type.channel_dim != units_axis:
        return None
    if not transpose_y:  # FULLY_CONNECTED takes [num_units, input_size]
        value = np.ascontiguousarray(np.asarray(wq.value).T)
        steps = np.asarray(wq.type.scales if per_channel else [wq.type.scale])
        wq = int8_constant(ctx, value, steps, 0, f"{w_name}/int8_t")
    return xq, wq, 1


def emit_integer_product(ctx, op) -> bool:
    """Emit a product op (conv2d, depthwise_conv2d, mul, matmul, matmul_v2) as an int8 x int8 -> int32
    product when it is in Paddle's fake quantized form or in the QDQ form; False (nothing emitted) otherwise."""
    if takes_fake_product_path(ctx, op):
        emit_fake_product(ctx, op)
        return True
    found = _qdq_product_operands(ctx, op)
    if found is None:
        return False
    xq, wq, channel_axis = found
    v = OpView(op)
    out_name = v.output(FAKE_PRODUCTS[op.type][2])
    w_steps = np.asarray(wq.type.scales if wq.type.is_per_channel else [wq.type.scale], dtype=np.float64)
    sums = ctx.temp(out_name, "int32_sums", int32_sums_type(float(xq.type.scale) * w_steps, channel_axis))
    fuse = ctx.const_i32(int(FuseCode.FUSED_NONE))
    if op.type in ("conv2d", "depthwise_conv2d"):
        from converters.layout import AUTO_PAD_OF, explicit_pads

        pads = explicit_pads(v.attr_ints("paddings", [0, 0]))
        auto_pad = AUTO_PAD_OF[v.attr_str("padding_algorithm", "EXPLICIT")]
        ctx.add(T.CONV_2D, [xq, wq, None, ctx.const_i32(int(auto_pad)), ctx.const_i32(pads),
                            ctx.const_i32(v.attr_ints("strides", [1, 1])), ctx.const_i32(int(v.attr("groups", 1) or 1)),
                            ctx.const_i32(v.attr_ints("dilations", [1, 1])), fuse], [sums])
    else:
        ctx.add(T.FULLY_CONNECTED, [xq, wq, None, fuse], [sums])
    ctx.add(T.DEQUANTIZE, [sums], [ctx.output(out_name)])
    return True
