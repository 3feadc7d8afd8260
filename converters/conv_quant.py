"""Quantization: Paddle's quantize_linear / dequantize_linear and fake quant-dequant ops, and the helpers
the NN family (conv_nn) calls for Paddle Lite's quantized conv / fc / mul / matmul forms.

Scale conventions (the two Paddle formats differ; both end in NNAdapter's "real = integer x scale",
facts §3):
- Paddle Lite's `<Slot><i>_scale` attributes (facts §5.2) hold the quantization *step*: Paddle Lite hands
  them to NNAdapter unchanged as operand scales, and its bias rule (int32 bias with scale
  in_scale x filter_scale[i], facts §5.3) is only right when the scales are steps.
- quantize_linear / dequantize_linear carry the *threshold* (max |x|); the step is threshold / qmax: Paddle
  3.3.1's kernels take the bin count from the `qmax` attr (default 127) and never read bit_length. Nor does
  quantize_linear read `qmin`: it clips its integers to [-qmax - 1, qmax] (round_type 0) or x to
  [-threshold, threshold] (round_type 1), as running the op with qmin -4 / qmax 100, qmin 0 / qmax 7 and
  qmin -127 / qmax 127 shows (tests). With qmax <= 127 a MAX/MIN on x before the int8 QUANTIZE expresses
  either; a larger qmax is declined (the host kernel runs it).
- the fake_* ops carry the threshold too, with step threshold / (2^(bit_length-1) - 1).

Quantized products (conv2d, depthwise_conv2d, conv2d_transpose, fc, mul, matmul, matmul_v2 with an int8
persistable weight and its scales): the input is QUANTIZEd to the per-layer input scale (unless it
already is that), the weight becomes a QUANT_INT8 constant (per channel only when the channel scales
really differ, else collapsed: Paddle Lite's IsValidSymmPerChannelQuantParams), the bias a QUANT_INT32
constant, the operation writes a per-layer QUANT_INT8 output with the output scale, and a DEQUANTIZE
gives the Paddle var a float value. Why the DEQUANTIZE: the Paddle var is declared float32 and the
engine hands subgraph outputs over as they are, so a float consumer (or the caller) must never see int8
storage; two quantized products in a row pay a DEQUANTIZE + QUANTIZE with the same scale, which is
lossless. Products with a float weight keep the float path in conv_nn.

quantize_linear's output is bound to the QUANTIZE result: an int8 operand whose storage is exactly the
integers Paddle's float Y holds, and whose NNAdapter value (q x step) is what the paired
dequantize_linear computes. Only dequantize_linear may read it (checked), since any other reader would
see q x step where Paddle's reads q.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from converters.emit import binary
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import FuseCode, OperationType as T, Precision
from nnadapter_bridge.nnadapter.types import Operand, OperandType

# Paddle Lite's IsValidSymmPerChannelQuantParams threshold: channel scales closer than this are one scale.
PER_CHANNEL_THRESHOLD = 1e-5
# The operations a quantized product adds around its main operation.
QUANT_EMITS = [T.QUANTIZE, T.DEQUANTIZE]
INT8_MIN, INT8_MAX = -128, 127


def collapse_scales(scales: Sequence[float]) -> list:
    """One scale when every channel scale equals the first within PER_CHANNEL_THRESHOLD, else all."""
    scales = [float(s) for s in scales]
    if all(abs(s - scales[0]) <= PER_CHANNEL_THRESHOLD for s in scales):
        return scales[:1]
    return scales


# -- Paddle Lite's scale attributes on conv / fc / mul / matmul -------------------------------------------

@dataclasses.dataclass
class ProductQuant:
    """The quantization of one product op: per-layer input and output steps, the weight's steps
    (one per layer, or one per output channel)."""
    input_scale: float
    weight_scales: list
    output_scale: float


def has_int8_weight(ctx, op, weight_slot: str) -> bool:
    """True when the op's weight is an int8 persistable var: Paddle Lite's quant mode (facts §5.3)."""
    name = OpView(op).optional_input(weight_slot)
    return bool(name) and ctx.is_param(name) and ctx.param(name).dtype == np.int8


def product_quant_reason(ctx, op, input_slot: str, weight_slot: str, output_slot: str,
                         channels: Optional[int], per_channel_ok: bool = True) -> Optional[str]:
    """Why an op with an int8 weight cannot take the quantized path (None when it can, or when the
    weight is not int8). `channels` is the weight's output-channel count for per-channel scales."""
    if not has_int8_weight(ctx, op, weight_slot):
        return None
    weight = OpView(op).optional_input(weight_slot)
    weight_scales = ctx.quant_scales(op, weight_slot, 0)
    if not weight_scales:
        return f"int8 {weight_slot} '{weight}' needs its scales in the {weight_slot}0_scale attr"
    for slot in (input_slot, output_slot):
        scales = ctx.quant_scales(op, slot, 0)
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


def product_quant(ctx, op, input_slot: str, weight_slot: str, output_slot: str) -> Optional[ProductQuant]:
    """The op's quantization when its weight is int8 (check with product_quant_reason first), else None."""
    if not has_int8_weight(ctx, op, weight_slot):
        return None
    return ProductQuant(ctx.quant_scales(op, input_slot, 0)[0],
                        collapse_scales(ctx.quant_scales(op, weight_slot, 0)),
                        ctx.quant_scales(op, output_slot, 0)[0])


def dequantized(ctx, x: Operand, var: str, purpose: str) -> Operand:
    """`x` as FLOAT32: a DEQUANTIZE when it is quantized, else `x` itself."""
    if not x.type.is_quantized:
        return x
    out = ctx.temp(var, purpose)
    ctx.add(T.DEQUANTIZE, [x], [out])
    return out


def quantized_input(ctx, x: Operand, scale: float, var: str) -> Operand:
    """`x` as QUANT_INT8_SYMM_PER_LAYER with `scale`: itself when it already is exactly that, else a
    QUANTIZE (after a DEQUANTIZE when it carries other quantization params)."""
    t = x.type
    if t.precision == Precision.QUANT_INT8_SYMM_PER_LAYER and t.scale is not None and np.isclose(
            t.scale, scale, rtol=1e-6, atol=0.0):
        return x
    x = dequantized(ctx, x, var, "input_float")
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


def quantized_bias(ctx, bias_name: Optional[str], quant: ProductQuant, size: int, var: str) -> Operand:
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
                      bias_name: Optional[str], fuse: FuseCode, var: str):
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
        emit_quantized(ctx, T.FULLY_CONNECTED, [x_quant, weight, bias, ctx.const_i32(int(fuse))], out,
                       quant.output_scale, var)

    return step


# -- quantize_linear / dequantize_linear -------------------------------------------------------------------

def _bin_count(op) -> int:
    """quantize_linear / dequantize_linear: the `qmax` attr (Paddle 3.3.1 ignores bit_length); the fake ops:
    2^(bit_length-1) - 1."""
    v = OpView(op)
    if op.type in ("quantize_linear", "dequantize_linear"):
        return v.attr_int("qmax", INT8_MAX)
    return (1 << (v.attr_int("bit_length", 8) - 1)) - 1


def _qrange_reason(op) -> Optional[str]:
    qmax = OpView(op).attr_int("qmax", INT8_MAX)
    if qmax <= 0:
        return f"qmax {qmax}: the bin count must be positive"
    if op.type == "quantize_linear" and qmax > INT8_MAX:
        return f"qmax {qmax}: the integers [-qmax - 1, qmax] must fit QUANTIZE's int8 (qmax <= 127)"
    return None


def _linear_reason(op, ctx, needs_test: bool) -> Optional[str]:
    v = OpView(op)
    reason = _qrange_reason(op)
    if reason:
        return reason
    if needs_test and not v.attr("is_test", False):
        # Training mode updates the scale from each batch through InAccum/InState (Paddle fails without them).
        return "is_test=false (the training-time observer) is not converted; save the model for inference"
    if v.attr_int("round_type", 0) not in (0, 1):
        return f"round_type {v.attr('round_type')} is neither 0 (ties to even) nor 1 (ties away from zero)"
    scale = v.optional_input("Scale")
    if not scale or not ctx.is_param(scale):
        return "Scale must be a persistable var (the NNAdapter scale is a constant)"
    values = ctx.param(scale).reshape(-1)
    if values.size == 0 or np.any(values <= 0):
        return f"Scale values must be positive, got {values.tolist()}"
    axis = v.attr_int("quant_axis", 0)
    if axis < 0 and values.size != 1:
        return f"quant_axis {axis} (per layer) needs one Scale value, got {values.size}"
    x = v.optional_input("X")
    if axis >= 0 and x and ctx.has(x):
        dims = ctx.dims(x)
        if axis >= len(dims):
            return f"quant_axis {axis} is out of range for X of rank {len(dims)}"
        if dims[axis] >= 0 and dims[axis] != values.size:
            # Paddle reads one scale per index of quant_axis; fewer scales read past the tensor.
            return f"quant_axis {axis} has {dims[axis]} channels but Scale holds {values.size} values"
    return None


def _steps(ctx, op, slot: str = "Scale") -> np.ndarray:
    """The quantization steps (threshold / bin count) of the op's scale input, float64."""
    return ctx.param(OpView(op).input(slot)).astype(np.float64).reshape(-1) / _bin_count(op)


def _broadcast_shape(steps: np.ndarray, axis: int, rank: int) -> tuple:
    """A shape putting `steps` on `axis` of a rank-`rank` tensor (one step: [1], or [] for a 0-d tensor, so
    the result keeps its rank)."""
    if steps.size == 1 or axis < 0:
        return (1,) * min(rank, 1)
    return (steps.size,) + (1,) * (rank - 1 - axis)


def _quantize(ctx, x: Operand, steps: np.ndarray, axis: int, round_type: int, out: Operand, var: str,
              qmax: int = INT8_MAX) -> None:
    """QUANTIZE `x` to int8 with `steps` (threshold / qmax), saturating as Paddle does for `round_type`:
    0 clips the integers to [-qmax - 1, qmax], 1 clips x to [-threshold, threshold], so the integers to
    [-qmax, qmax]. QUANTIZE itself saturates to [-128, 127]; a tighter range is a MAX / MIN on x at the
    bound x step (the quotient then rounds to the bound exactly)."""
    low, high = (-qmax, qmax) if round_type == 1 else (-qmax - 1, qmax)
    # round_type 1 rounds ties away from zero in Paddle, QUANTIZE to even: an exact .5 quotient may differ by
    # one step.
    shape = _broadcast_shape(steps, axis, x.type.rank)
    if low > INT8_MIN:
        floor = (low * steps).astype(np.float32).reshape(shape)
        x = binary(ctx, T.MAX, x, ctx.const(floor), ctx.temp(var, "clip_low"))
    if high < INT8_MAX:
        ceiling = (high * steps).astype(np.float32).reshape(shape)
        x = binary(ctx, T.MIN, x, ctx.const(ceiling), ctx.temp(var, "clip_high"))
    axis_operand = ctx.const_i32(axis if steps.size > 1 else 1)
    zero_points = ctx.const_i32(np.zeros(steps.size, np.int32))  # QUANTIZE wants one per scale
    ctx.add(T.QUANTIZE, [x, axis_operand, ctx.const_f32(steps.astype(np.float32)), zero_points], [out])


def _readers_reason(op, ctx) -> Optional[str]:
    v = OpView(op)
    graph = getattr(ctx, "graph", None)
    y = v.optional_output("Y")
    if graph is None or not y:
        return None
    if y in graph.outputs:
        return f"Y '{y}' is a program output: Paddle's float integers would come back as int8 storage"
    others = sorted({c.type for c in graph.consumers(y) if c.type != "dequantize_linear"})
    if others:
        return f"Y '{y}' is read by {others}: only dequantize_linear reads a quantized value as Paddle does"
    return None


def _check_quantize_linear(op, ctx) -> Optional[str]:
    v = OpView(op)
    return _linear_reason(op, ctx, needs_test=True) or (None if v.attr("only_observer", False)
                                                          else _readers_reason(op, ctx))


@converter("quantize_linear", emits=[T.QUANTIZE, T.MAX, T.MIN], check=_check_quantize_linear)
def convert_quantize_linear(ctx, op):
    """Y = clip(round(X / step), -qmax - 1, qmax) (round_type 0) or round(clip(X, -Scale, Scale) / step)
    (round_type 1) with step = Scale / qmax (ZeroPoint and qmin are ignored by Paddle's kernel, so here
    too); only_observer passes X through."""
    v = OpView(op)
    y = v.output("Y")
    x = ctx.input(v.input("X"))
    if v.attr("only_observer", False):
        ctx.bind(y, x)  # the observer only records the scale; Paddle returns X unchanged
        return
    axis = v.attr_int("quant_axis", 0)
    _quantize(ctx, dequantized(ctx, x, y, "float"), _steps(ctx, op), axis, v.attr_int("round_type", 0),
              ctx.output(y), y, v.attr_int("qmax", INT8_MAX))


@converter("dequantize_linear", emits=[T.DEQUANTIZE, T.MUL, T.CAST], check=lambda op, ctx: _linear_reason(op, ctx, False))
def convert_dequantize_linear(ctx, op):
    """Y = X x step (per channel along quant_axis). A persistable X (an int8 or float weight) folds into
    a float constant; a quantized operand (a quantize_linear result) is DEQUANTIZEd; a float or integer X
    (Paddle's float-held integers) is multiplied by the step."""
    v = OpView(op)
    y = v.output("Y")
    x_name = v.input("X")
    steps = _steps(ctx, op)
    axis = v.attr_int("quant_axis", 0)
    if v.attr("only_observer", False):
        ctx.bind(y, ctx.input(x_name))
        return
    if ctx.is_param(x_name):
        value = ctx.param(x_name)
        folded = value.astype(np.float64) * steps.reshape(_broadcast_shape(steps, axis, value.ndim))
        ctx.bind(y, ctx.const(folded.astype(np.float32), name=y))
        return
    x = ctx.input(x_name)
    if x.type.is_quantized:
        held = np.asarray(x.type.scales if x.type.is_per_channel else [x.type.scale], dtype=np.float64)
        factor = steps / held
        if np.allclose(factor, 1.0, rtol=1e-6, atol=0.0):
            ctx.add(T.DEQUANTIZE, [x], [ctx.output(y)])
            return
        # Different steps: Paddle multiplies its integers by its own step, so rescale the real value.
        x, steps = dequantized(ctx, x, y, "float"), factor
    elif x.type.precision != Precision.FLOAT32:
        x = ctx.cast(x, Precision.FLOAT32, y, "float")
    shape = _broadcast_shape(steps, axis, x.type.rank)
    binary(ctx, T.MUL, x, ctx.const(steps.astype(np.float32).reshape(shape)), ctx.output(y))


# -- fake quant-dequant ops ------------------------------------------------------------------------------

def _fake_reason(op, ctx, needs_test: bool) -> Optional[str]:
    v = OpView(op)
    if v.attr_int("bit_length", 8) != 8:
        return f"bit_length {v.attr('bit_length')}: only 8-bit quantization maps to NNAdapter's int8 types"
    if v.attr_int("round_type", 1) not in (0, 1):
        return f"round_type {v.attr('round_type')} is neither 0 (ties to even) nor 1 (ties away from zero)"
    if needs_test and not v.attr("is_test", False):
        return "is_test=false (the training-time moving average) is not converted; save the model for inference"
    return None


def _check_fake_abs_max(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = _fake_reason(op, ctx, needs_test=False)
    if reason:
        return reason
    x = v.optional_input("X")
    if x and not ctx.is_param(x):
        return ("the scale is max |X| of each run; QUANTIZE needs a constant scale, so only a persistable X "
                "(a weight, folded at conversion) is converted")
    return None


def fake_quant_dequant(values: np.ndarray, thresholds: np.ndarray, round_type: int) -> np.ndarray:
    """Paddle's quant-dequant of `values` with max-abs `thresholds` (broadcast already), 8 bits:
    round_type 0 rounds ties to even and saturates to [-128, 127]; 1 clips to [-threshold, threshold]
    and rounds ties away from zero (so [-127, 127])."""
    values = values.astype(np.float64)
    thresholds = thresholds.astype(np.float64)
    safe = np.where(thresholds > 0, thresholds, 1.0)
    if round_type == 0:
        q = np.clip(np.rint(values / safe * 127.0), INT8_MIN, INT8_MAX)
    else:
        scaled = np.clip(values, -safe, safe) / safe * 127.0
        q = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    return np.where(thresholds > 0, q * safe / 127.0, 0.0)


# Folded into a constant weight; ASSIGN only when that constant is itself a subgraph output (as assign_value).
@converter("fake_quantize_dequantize_abs_max", emits=[T.ASSIGN], check=_check_fake_abs_max)
def convert_fake_quantize_dequantize_abs_max(ctx, op):
    """A persistable X folds to its per-layer quant-dequant (threshold max |X|); OutScale is that threshold."""
    v = OpView(op)
    value = ctx.param(v.input("X"))
    threshold = np.array([np.max(np.abs(value))], dtype=np.float32)
    out = fake_quant_dequant(value, threshold, v.attr_int("round_type", 1))
    out_name = v.output("Out")
    ctx.bind(out_name, ctx.const(out.astype(np.float32), name=out_name))
    scale_name = v.optional_output("OutScale")
    if scale_name:
        ctx.bind(scale_name, ctx.const(threshold, name=scale_name))


def _check_fake_channel_wise(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = _check_fake_abs_max(op, ctx)
    if reason:
        return reason
    x = v.optional_input("X")
    axis = v.attr_int("quant_axis", 0)
    if x and axis not in range(ctx.param(x).ndim):
        return f"quant_axis {axis} is out of range for X of rank {ctx.param(x).ndim}"
    return None


@converter("fake_channel_wise_quantize_dequantize_abs_max", emits=[T.ASSIGN], check=_check_fake_channel_wise)
def convert_fake_channel_wise_quantize_dequantize_abs_max(ctx, op):
    """A persistable X folds to its quant-dequant with one threshold (max |X|) per index of quant_axis."""
    v = OpView(op)
    value = ctx.param(v.input("X"))
    axis = v.attr_int("quant_axis", 0)
    others = tuple(a for a in range(value.ndim) if a != axis)
    thresholds = np.max(np.abs(value), axis=others, keepdims=True).astype(np.float32)
    out = fake_quant_dequant(value, thresholds, v.attr_int("round_type", 1))
    out_name = v.output("Out")
    ctx.bind(out_name, ctx.const(out.astype(np.float32), name=out_name))
    scale_name = v.optional_output("OutScale")
    if scale_name:
        ctx.bind(scale_name, ctx.const(thresholds.reshape(-1), name=scale_name))


def _check_fake_moving_average(op, ctx) -> Optional[str]:
    v = OpView(op)
    reason = _fake_reason(op, ctx, needs_test=True)
    if reason:
        return reason
    scale = v.optional_input("InScale")
    if not scale or not ctx.is_param(scale):
        return "InScale must be a persistable var (the NNAdapter scale is a constant)"
    values = ctx.param(scale).reshape(-1)
    if values.size != 1 or values[0] <= 0:
        return f"InScale must hold one positive threshold, got {values.tolist()}"
    return None


@converter("fake_quantize_dequantize_moving_average_abs_max", emits=[T.MAX, T.QUANTIZE, T.DEQUANTIZE],
           check=_check_fake_moving_average)
def convert_fake_quantize_dequantize_moving_average_abs_max(ctx, op):
    """Inference form: QUANTIZE with step InScale / 127, then DEQUANTIZE. OutScale stays unbound: Paddle
    does not write it when is_test is set."""
    v = OpView(op)
    out = v.output("Out")
    x = dequantized(ctx, ctx.input(v.input("X")), out, "float")
    quant = ctx.temp(out, "quant")
    _quantize(ctx, x, _steps(ctx, op, "InScale"), -1, v.attr_int("round_type", 1), quant, out)
    ctx.add(T.DEQUANTIZE, [quant], [ctx.output(out)])
