"""Quantization converters: Paddle's quantize_linear / dequantize_linear, the fake quant-dequant ops, the fake
quantizers and dequantizers around Paddle's fake quantized products, and Paddle Lite's calib (float <-> int8
with one scale). The quantized products themselves (conv, fc, mul, matmul with a quantized weight) are in
`quantized_products`, which conv.py and matmul.py call.

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

quantize_linear's output is bound to the QUANTIZE result: an int8 operand whose storage is exactly the
integers Paddle's float Y holds, and whose NNAdapter value (q x step) is what the paired
dequantize_linear computes. Only dequantize_linear may read it (checked), since any other reader would
see q x step where Paddle's reads q.

Imports the converter toolkit, `quantized_products` and the standard only.
"""
from __future__ import annotations

import numpy as np

from converters.context import ConversionContext
from converters.emit import binary, cast_to
from converters.op_view import OpView
from converters.quantized_products import (
    FAKE_ACTIVATION_QUANT_OPS,
    FAKE_DEQUANT_OPS,
    INT8_MAX,
    INT8_MIN,
    dequantized,
    fake_product_reason,
    int8_constant,
    keeps_float,
)
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.types import Operand

# -- quantize_linear / dequantize_linear -------------------------------------------------------------------

def _bin_count(op) -> int:
    """quantize_linear / dequantize_linear: the `qmax` attr (Paddle 3.3.1 ignores bit_length); the fake ops:
    2^(bit_length-1) - 1."""
    v = OpView(op)
    if op.type in ("quantize_linear", "dequantize_linear"):
        return v.attr_int("qmax", INT8_MAX)
    return (1 << (v.attr_int("bit_length", 8) - 1)) - 1


def _qrange_reason(op) -> str | None:
    qmax = OpView(op).attr_int("qmax", INT8_MAX)
    if qmax <= 0:
        return f"qmax {qmax}: the bin count must be positive"
    if op.type == "quantize_linear" and qmax > INT8_MAX:
        return f"qmax {qmax}: the integers [-qmax - 1, qmax] must fit QUANTIZE's int8 (qmax <= 127)"
    return None


def _linear_reason(op, ctx, needs_test: bool) -> str | None:
    v = OpView(op)
    reason = _qrange_reason(op)
    if reason:
        return reason
    if needs_test and not v.attr("is_test", False) and v.optional_input("InAccum") and v.optional_input("InState"):
        # Training mode updates the scale from each batch through InAccum/InState. Without them Paddle 3.3.1
        # quantizes with Scale whatever is_test says (what PostTrainingQuantization(onnx_format=True) saves:
        # quantize_linear without an is_test attr, which Paddle Inference and the static executor run so).
        return ("is_test=false with InAccum/InState (the training-time observer) is not converted; save the model "
                "for inference")
    if v.attr_int("round_type", 0) not in (0, 1):
        return f"round_type {v.attr('round_type')} is neither 0 (ties to even) nor 1 (ties away from zero)"
    scale = v.optional_input("Scale")
    if not scale or not ctx.is_param(scale):
        return "Scale must be a persistable var (the NNAdapter scale is a constant)"
    values = ctx.param(scale).reshape(-1)
    if values.size == 0:
        return "Scale holds no value"
    if op.type != "dequantize_linear" and np.any(values <= 0):
        # dequantize_linear multiplies by Scale / qmax whatever its sign (see convert_dequantize_linear);
        # QUANTIZE's scale must be positive, so a zero or negative one is quantized on the host, as Paddle does.
        return f"Scale values must be positive for QUANTIZE, got {values.tolist()}"
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


def _readers_reason(op, ctx) -> str | None:
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


def _check_quantize_linear(op, ctx) -> str | None:
    v = OpView(op)
    return _linear_reason(op, ctx, needs_test=True) or (None if v.attr("only_observer", False)
                                                          else _readers_reason(op, ctx))


@converter("quantize_linear", emits=[T.QUANTIZE, T.MAX, T.MIN], check=_check_quantize_linear)
def convert_quantize_linear(ctx: ConversionContext, v: OpView) -> None:
    """Y = clip(round(X / step), -qmax - 1, qmax) (round_type 0) or round(clip(X, -Scale, Scale) / step)
    (round_type 1) with step = Scale / qmax (ZeroPoint and qmin are ignored by Paddle's kernel, so here
    too); only_observer passes X through."""
    y = v.output("Y")
    x = ctx.input(v.input("X"))
    if v.attr("only_observer", False):
        ctx.bind(y, x)  # the observer only records the scale; Paddle returns X unchanged
        return
    axis = v.attr_int("quant_axis", 0)
    _quantize(ctx, dequantized(ctx, x, y, "float"), _steps(ctx, v.op), axis, v.attr_int("round_type", 0),
              ctx.output(y), y, v.attr_int("qmax", INT8_MAX))


@converter(
    "dequantize_linear", emits=[T.DEQUANTIZE, T.MUL, T.CAST], check=lambda op, ctx: _linear_reason(op, ctx, False)
)
def convert_dequantize_linear(ctx: ConversionContext, v: OpView) -> None:
    """Y = X x step (per channel along quant_axis). A persistable X (an int8 or float weight) folds into
    a float constant; a quantized operand (a quantize_linear result) is DEQUANTIZEd; a float or integer X
    (Paddle's float-held integers) is multiplied by the step. Paddle multiplies by a zero or negative Scale
    too (X x Scale / qmax): such steps are no NNAdapter quantization scale, so they always take the multiply."""
    y = v.output("Y")
    x_name = v.input("X")
    steps = _steps(ctx, v.op)
    axis = v.attr_int("quant_axis", 0)
    if v.attr("only_observer", False):
        ctx.bind(y, ctx.input(x_name))
        return
    positive = bool(np.all(steps > 0))
    if ctx.is_param(x_name):
        value = ctx.param(x_name)
        if value.dtype == np.int8 and positive and not keeps_float(ctx, y):
            # An int8 weight stays int8 (a QUANT_INT8 constant) so the devices can run the product in int8;
            # its DEQUANTIZE computes the same q x step.
            ctx.add(T.DEQUANTIZE, [int8_constant(ctx, value, steps, axis, x_name)], [ctx.output(y)])
            return
        folded = value.astype(np.float64) * steps.reshape(_broadcast_shape(steps, axis, value.ndim))
        ctx.bind(y, ctx.const(folded.astype(np.float32), name=y))
        return
    x = ctx.input(x_name)
    if x.type.is_quantized:
        held = np.asarray(x.type.scales if x.type.is_per_channel else [x.type.scale], dtype=np.float64)
        factor = steps / held
        if positive and np.allclose(factor, 1.0, rtol=1e-6, atol=0.0):
            ctx.add(T.DEQUANTIZE, [x], [ctx.output(y)])
            return
        # Different steps: Paddle multiplies its integers by its own step, so rescale the real value.
        x, steps = dequantized(ctx, x, y, "float"), factor
    elif x.type.precision not in (Precision.FLOAT32, Precision.FLOAT64):
        x = ctx.cast(x, Precision.FLOAT32, y, "float")
    # Paddle's kernel also takes double: a float64 X is multiplied in float64.
    dtype = np.float64 if x.type.precision == Precision.FLOAT64 else np.float32
    shape = _broadcast_shape(steps, axis, x.type.rank)
    binary(ctx, T.MUL, x, ctx.const(steps.astype(dtype).reshape(shape)), ctx.output(y))


# -- fake quant-dequant ops ------------------------------------------------------------------------------

def _fake_reason(op, ctx, needs_test: bool) -> str | None:
    v = OpView(op)
    if v.attr_int("bit_length", 8) != 8:
        return f"bit_length {v.attr('bit_length')}: only 8-bit quantization maps to NNAdapter's int8 types"
    if v.attr_int("round_type", 1) not in (0, 1):
        return f"round_type {v.attr('round_type')} is neither 0 (ties to even) nor 1 (ties away from zero)"
    if needs_test and not v.attr("is_test", False):
        return "is_test=false (the training-time moving average) is not converted; save the model for inference"
    return None


def _check_fake_abs_max(op, ctx) -> str | None:
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
def convert_fake_quantize_dequantize_abs_max(ctx: ConversionContext, v: OpView) -> None:
    """A persistable X folds to its per-layer quant-dequant (threshold max |X|); OutScale is that threshold."""
    value = ctx.param(v.input("X"))
    threshold = np.array([np.max(np.abs(value))], dtype=np.float32)
    out = fake_quant_dequant(value, threshold, v.attr_int("round_type", 1))
    out_name = v.output("Out")
    ctx.bind(out_name, ctx.const(out.astype(np.float32), name=out_name))
    scale_name = v.optional_output("OutScale")
    if scale_name:
        ctx.bind(scale_name, ctx.const(threshold, name=scale_name))


def _check_fake_channel_wise(op, ctx) -> str | None:
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
def convert_fake_channel_wise_quantize_dequantize_abs_max(ctx: ConversionContext, v: OpView) -> None:
    """A persistable X folds to its quant-dequant with one threshold (max |X|) per index of quant_axis."""
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


def _check_fake_moving_average(op, ctx) -> str | None:
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
def convert_fake_quantize_dequantize_moving_average_abs_max(ctx: ConversionContext, v: OpView) -> None:
    """Inference form: QUANTIZE with step InScale / 127, then DEQUANTIZE. OutScale stays unbound: Paddle
    does not write it when is_test is set."""
    out = v.output("Out")
    x = dequantized(ctx, ctx.input(v.input("X")), out, "float")
    quant = ctx.temp(out, "quant")
    _quantize(ctx, x, _steps(ctx, v.op, "InScale"), -1, v.attr_int("round_type", 1), quant, out)
    ctx.add(T.DEQUANTIZE, [quant], [ctx.output(out)])


# -- Paddle's fake quantized form: its quantizers and dequantizers (the products: quantized_products) ------

def _fake_readers_take_int8(ctx, op, out: str, x: Operand) -> bool:
    """True when the activation quantizer's Out (the shape of its input `x`) may be a QUANT_INT8 operand: it
    stays inside the model and every reader is a product in the fake form."""
    graph = getattr(ctx, "graph", None)
    if graph is None or out in ctx.output_names or out in graph.outputs:
        return False
    readers = graph.consumers(out)
    return bool(readers) and all(fake_product_reason(ctx, r, out, x.type.rank) is None for r in readers)


@converter(*FAKE_ACTIVATION_QUANT_OPS, emits=[T.MAX, T.MIN, T.QUANTIZE, T.DEQUANTIZE, T.MUL, T.ADD, T.FLOOR],
           check=_check_fake_moving_average)  # the same InScale rules
def convert_fake_quantize_activation(ctx: ConversionContext, v: OpView) -> None:
    """Inference form (is_test): Out = round(clip(X, -s, s) / s x 127) (round_type 1, the default: ties away
    from zero) or clip(round_half_even(X / s x 127), -128, 127) (round_type 0), s = InScale; OutScale and the
    moving-average state are not written. Out is the QUANTIZE result itself when every reader is a product
    in the fake form (see the section comment), else those integers as float32 (DEQUANTIZE, x 1/step, rounded)."""
    out = v.output("Out")
    x = dequantized(ctx, ctx.input(v.input("X")), out, "float")
    steps = _steps(ctx, v.op, "InScale")
    direct = _fake_readers_take_int8(ctx, v.op, out, x)
    quant = ctx.output(out) if direct else ctx.temp(out, "quant")
    _quantize(ctx, x, steps, -1, v.attr_int("round_type", 1), quant, out)
    if not direct:
        # The integers themselves: q x step x (1 / step) is q within a few ulp; floor(v + 0.5) makes it exact.
        real = ctx.temp(out, "real")
        ctx.add(T.DEQUANTIZE, [quant], [real])
        near = binary(ctx, T.MUL, real, ctx.const(np.array([1.0 / steps[0]], np.float32)), ctx.temp(out, "near"))
        half = binary(ctx, T.ADD, near, ctx.const(np.array([0.5], np.float32)), ctx.temp(out, "half_up"))
        ctx.add(T.FLOOR, [half], [ctx.output(out)])


def _check_fake_dequant(op, ctx) -> str | None:
    v = OpView(op)
    if op.type == "fake_dequantize_max_abs":
        scale = v.optional_input("Scale")
        if not scale or not ctx.is_param(scale) or ctx.param(scale).size != 1:
            return "Scale must be a persistable var holding one value"
        if v.attr_float("max_range", 0.0) <= 0:
            return f"max_range must be positive, got {v.attr('max_range')}"
        return None
    scales = v.inputs("Scales")
    if len(scales) not in (1, 2) or not all(ctx.is_param(s) for s in scales):
        return "Scales must be one or two persistable vars"
    bits = v.attr_ints("quant_bits", [8] * len(scales))
    if len(bits) < len(scales) or any(b < 2 or b > 16 for b in bits[:len(scales)]):
        return f"quant_bits {bits} must give a bit length in [2, 16] per scale"
    if len(scales) == 2 and ctx.param(scales[1]).size != 1:
        return "the second of two Scales must hold one value"
    x = v.optional_input("X")
    axis = _fake_channel_axis(op)
    if x and ctx.has(x):
        dims = ctx.dims(x)
        count = ctx.param(scales[0]).size
        if axis >= len(dims) or (dims[axis] >= 0 and dims[axis] != count):
            return f"{count} channel scales for axis {axis} of X {list(dims)}"
    return None


def _fake_channel_axis(op) -> int:
    """The axis of X fake_channel_wise_dequantize_max_abs applies its channel scales along (Paddle's
    ChannelDequantizeFunctor): quant_axis for one scale, else x_num_col_dims (1 when it is 1)."""
    v = OpView(op)
    if len(v.inputs("Scales")) == 1:
        return v.attr_int("quant_axis", 0)
    x_num_col_dims = v.attr_int("x_num_col_dims", 1)
    return x_num_col_dims if x_num_col_dims > 1 else 1


@converter(*FAKE_DEQUANT_OPS, emits=[T.DEQUANTIZE, T.MUL, T.CAST], check=_check_fake_dequant)
def convert_fake_dequantize(ctx: ConversionContext, v: OpView) -> None:
    """Out = X x Scale / max_range (fake_dequantize_max_abs), X x scale[c] / max_range along quant_axis (one
    channel-wise scale) or X x scale[c] x s / max_range along x_num_col_dims (two), with max_range the product
    of 2^(bits-1) - 1 over quant_bits. X from a fake-form product (QUANT_INT32 with exactly that factor as its
    scale) becomes a DEQUANTIZE; a parameter folds; anything else is multiplied."""
    out = v.output("Out")
    x_name = v.input("X")
    if v.op.type == "fake_dequantize_max_abs":
        factor = np.array([float(ctx.param(v.input("Scale")).reshape(-1)[0]) / v.attr_float("max_range", 1.0)])
        axis = -1
    else:
        scales = v.inputs("Scales")
        bits = v.attr_ints("quant_bits", [8] * len(scales))
        max_range = float(np.prod([(1 << (b - 1)) - 1 for b in bits[:len(scales)]]))
        factor = ctx.param(scales[0]).astype(np.float64).reshape(-1) / max_range
        if len(scales) == 2:
            factor = factor * float(ctx.param(scales[1]).reshape(-1)[0])
        axis = _fake_channel_axis(v.op) if factor.size > 1 else -1
    if ctx.is_param(x_name):
        value = ctx.param(x_name)
        folded = value.astype(np.float64) * factor.reshape(_broadcast_shape(factor, axis, value.ndim))
        ctx.bind(out, ctx.const(folded.astype(np.float32), name=out))
        return
    x = ctx.input(x_name)
    if x.type.is_quantized:
        held = np.asarray(x.type.scales if x.type.is_per_channel else [x.type.scale], dtype=np.float64)
        same_axis = (held.size == 1) or (x.type.channel_dim == axis)
        if same_axis and held.size == factor.size and np.allclose(factor / held, 1.0, rtol=1e-6, atol=0.0):
            ctx.add(T.DEQUANTIZE, [x], [ctx.output(out)])
            return
        if not same_axis and held.size > 1:
            raise ctx.error("the quantized X is per channel along another axis than the dequantizer's scales")
        # Other scales: Paddle multiplies the integers by its own factor, so rescale the real value.
        x = dequantized(ctx, x, out, "float")
        if held.size > 1:
            axis = x.type.channel_dim if factor.size == 1 else axis
        factor = factor / held
        if factor.size > 1 and axis < 0:
            axis = x.type.channel_dim
    elif x.type.precision != Precision.FLOAT32:
        x = ctx.cast(x, Precision.FLOAT32, out, "float")
    shape = _broadcast_shape(factor, axis, x.type.rank)
    binary(ctx, T.MUL, x, ctx.const(factor.astype(np.float32).reshape(shape)), ctx.output(out))


# Weight quantizers (the per-weight ops of a QAT program saved without freezing): a persistable X folds to its
# integers (held in float, as Paddle's Out) and OutScale to the thresholds.

def fake_quant_integers(values: np.ndarray, thresholds: np.ndarray, round_type: int, bin_cnt: int = INT8_MAX):
    """Paddle's ClipAndFakeQuant of `values` with max-abs `thresholds` (broadcast already): round_type 0 rounds
    ties to even and saturates to [-bin_cnt - 1, bin_cnt]; 1 clips to [-threshold, threshold] and rounds ties
    away from zero."""
    values = values.astype(np.float64)
    safe = np.where(thresholds > 0, thresholds.astype(np.float64), 1.0)
    if round_type == 0:
        q = np.clip(np.rint(values / safe * bin_cnt), -bin_cnt - 1, bin_cnt)
    else:
        scaled = np.clip(values, -safe, safe) / safe * bin_cnt
        q = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    return np.where(thresholds > 0, q, 0.0)


def _check_fake_weight_quant(op, ctx) -> str | None:
    if op.type == "fake_channel_wise_quantize_abs_max" and OpView(op).attr("is_test", False):
        return "is_test=true quantizes with the OutScale the op was given, not max |X|; not converted"
    return _check_fake_channel_wise(op, ctx) if op.type.startswith("fake_channel") else _check_fake_abs_max(op, ctx)


@converter("fake_quantize_abs_max", "fake_channel_wise_quantize_abs_max", emits=[T.ASSIGN],
           check=_check_fake_weight_quant)
def convert_fake_quantize_weight(ctx: ConversionContext, v: OpView) -> None:
    """A persistable X folds to its integers with threshold max |X| (per layer, or per index of quant_axis)."""
    value = ctx.param(v.input("X"))
    if v.op.type == "fake_channel_wise_quantize_abs_max":
        axis = v.attr_int("quant_axis", 0)
        others = tuple(a for a in range(value.ndim) if a != axis)
        thresholds = np.max(np.abs(value), axis=others, keepdims=True).astype(np.float32)
    else:
        thresholds = np.array(np.max(np.abs(value)), dtype=np.float32).reshape((1,) * value.ndim)
    bin_cnt = (1 << (v.attr_int("bit_length", 8) - 1)) - 1
    q = fake_quant_integers(value, thresholds, v.attr_int("round_type", 1), bin_cnt)
    out_name = v.output("Out")
    ctx.bind(out_name, ctx.const(q.astype(np.float32), name=out_name))
    scale_name = v.optional_output("OutScale")
    if scale_name:
        ctx.bind(scale_name, ctx.const(thresholds.reshape(-1), name=scale_name))


# -- calib -----------------------------------------------------------------------------------------------------

def _check_calib(op, ctx) -> str | None:
    v = OpView(op)
    if v.attr_float("scale", 1.0) <= 0:
        return f"scale {v.attr('scale')} must be positive"
    name = v.optional_input("Input")
    if name is not None and ctx.has(name):
        precision = ctx.input(name).type.precision
        if precision not in (Precision.FLOAT32, Precision.INT8, Precision.QUANT_INT8_SYMM_PER_LAYER):
            return f"calib converts float32 <-> int8, the input is {precision.name}"
    return None


@converter("calib", emits=[T.QUANTIZE, T.DEQUANTIZE, T.CAST, T.MUL], check=_check_calib)
def convert_calib(ctx: ConversionContext, v: OpView) -> None:
    # Paddle Lite's calib: float -> int8 is round(x / scale); int8 -> float is q * scale.
    x = ctx.input(v.input("Input"))
    out_name = v.output("Out")
    scale = v.attr_float("scale", 1.0)
    if x.type.precision == Precision.FLOAT32:
        ctx.add(T.QUANTIZE, [x, ctx.const_i32(1), ctx.const_f32(scale), ctx.const_i32(0)], [ctx.output(out_name)])
    elif x.type.is_quantized:
        ctx.add(T.DEQUANTIZE, [x], [ctx.output(out_name)])
    else:
        # Plain int8 storage (no scale on the operand): widen, then scale.
        widened = cast_to(ctx, x, Precision.FLOAT32, ctx.temp(out_name, "float"))
        binary(ctx, T.MUL, widened, ctx.const_f32(scale), ctx.output(out_name))
