"""The google_xnnpack operation table: one implementation per NNAdapter operation, appending TFLite operators
through `graph.TfliteBuilder`.

An implementation reads its attributes by the signature's slot names (`hal.common.unpack`), asks the builder
for its inputs in the layout it needs (NHWC for convolutions and pools, NNAdapter's order for reshapes, either
for elementwise operations) and records its outputs with `g.produced` / `g.output`. A case TFLite cannot
express with the NNAdapter (Paddle) meaning raises `Unsupported` with the reason; whether XNNPACK then takes
every operator written is the driver's check (driver.py), not this module's. Imports the standard, numpy,
the TFLite schema and graph.py only.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hal.common import Operands, OperationTable, Unsupported, is_integer_product, reduces_an_empty_axis, unpack
from hal.google_xnnpack.graph import (
    NHWC,
    PLAIN,
    TO_NHWC,
    TfliteBuilder,
    int8_tensor_type,
    inverse,
    is_real_valued,
    quantization,
    schema,
)
from hal.google_xnnpack.graph import BuiltinOperator as B
from hal.google_xnnpack.graph import BuiltinOptions as O
from hal.quantized_chains import ConvChain, FoldedConv, batch_norm_factors, fold_chain, fold_weights, int8_symmetric
from nnadapter_bridge.nnadapter.codes import FuseCode, PadMode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import known, normalize_axis
from nnadapter_bridge.nnadapter.operations.registry import dequantize
from nnadapter_bridge.nnadapter.operations.window import resolve_window
from nnadapter_bridge.nnadapter.types import Operation

OPERATIONS = OperationTable("google_xnnpack")

# NNAdapter's fuse codes are TFLite's ActivationFunctionType values for the same clamps.
_ACTIVATIONS = {int(FuseCode.FUSED_NONE): schema.ActivationFunctionType.NONE,
                int(FuseCode.FUSED_RELU): schema.ActivationFunctionType.RELU,
                int(FuseCode.FUSED_RELU1): schema.ActivationFunctionType.RELU_N1_TO_1,
                int(FuseCode.FUSED_RELU6): schema.ActivationFunctionType.RELU6}


def _activation(args: Operands) -> int:
    code = args.int("fuse_code", 0)
    if code not in _ACTIVATIONS:
        raise Unsupported(f"fuse_code {code}")
    return _ACTIVATIONS[code]


_CLAMPS = {schema.ActivationFunctionType.RELU: B.RELU, schema.ActivationFunctionType.RELU6: B.RELU6,
           schema.ActivationFunctionType.RELU_N1_TO_1: B.RELU_N1_TO_1}


def _fused_clamp(g: TfliteBuilder, result: int, args: Operands, shape, copy: bool = True) -> int:
    """`result` with the operation's fuse code applied as its own clamp operator (for a result the operators
    written have no fused activation for); without one, a copy when `copy` (a tensor that may be another
    value's, such as a reshape of an input)."""
    clamp = _CLAMPS.get(_activation(args))
    if clamp is not None:
        return g.one(clamp, [result], shape)
    return g.reshape_copy(result) if copy else result


def _axis_in(layout: str, axis: int) -> int:
    """The stored axis of NNAdapter axis `axis` of a rank-4 value in `layout`."""
    return inverse(TO_NHWC)[axis] if layout == NHWC else axis


# -- elementwise ------------------------------------------------------------------------------------------
_BINARY = {T.ADD: (B.ADD, O.AddOptions, schema.AddOptionsT), T.SUB: (B.SUB, O.SubOptions, schema.SubOptionsT),
           T.MUL: (B.MUL, O.MulOptions, schema.MulOptionsT), T.DIV: (B.DIV, O.DivOptions, schema.DivOptionsT),
           T.MAX: (B.MAXIMUM, 0, None), T.MIN: (B.MINIMUM, 0, None)}


def _broadcast_layout(g: TfliteBuilder, op: Operation, indices: Sequence[int]) -> str:
    """NHWC when the output has rank 4 and a rank-4 input computed at run time is stored NHWC."""
    if op.outputs[0].type.rank != 4:
        return PLAIN
    for i in indices:
        operand = op.inputs[i]
        if not operand.is_constant and operand.type.rank == 4 and g.layout_of(op, i) == NHWC:
            return NHWC
    return PLAIN


def _broadcast_input(g: TfliteBuilder, op: Operation, i: int, layout: str) -> int:
    """Input i for an elementwise operation computing in `layout`; a lower-rank input is first given the
    output's rank (numpy's leading 1s) so that its axes line up in NHWC too."""
    operand = op.inputs[i]
    rank = op.outputs[0].type.rank
    if layout == PLAIN or operand.type.rank == 4:
        return g.value(op, i, layout)
    dims = (1,) * (rank - operand.type.rank) + g.operand_dims(operand)
    if operand.is_constant:
        g.check_float(operand, f"input {i}")
        array = np.asarray(operand.value, dtype=np.float32).reshape(dims).transpose(TO_NHWC)
        return g.const(array, hint="w")
    return g.transpose(g.reshape(g.value(op, i, PLAIN), dims), TO_NHWC)


def _int8_arithmetic(g: TfliteBuilder, op: Operation, code: int, options) -> None:
    """ADD / SUB / MUL of two int8 values computed at run time, of the same shape, into an int8 result: TFLite's
    int8 operators rescale each input to the result's scale as the standard's dequantize-compute-quantize does."""
    for i in (0, 1):
        operand = op.inputs[i]
        if operand.is_constant or not int8_tensor_type(operand):
            raise Unsupported(f"input {i} is {'a constant' if operand.is_constant else operand.type.precision.name}"
                              " (an int8 result needs two int8 values computed at run time)")
    if tuple(op.inputs[0].type.dims) != tuple(op.inputs[1].type.dims):
        raise Unsupported("int8 inputs of different shapes (broadcasting is built in float only)")
    layout = _broadcast_layout(g, op, (0, 1))
    a, b = g.value(op, 0, layout, quantized=True), g.value(op, 1, layout, quantized=True)
    g.operator(code, [a, b], [g.output(op, 0, layout, quantized=True)], _BINARY[op.type][1], options)


@OPERATIONS.implements(*_BINARY)
def _arithmetic(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    code, options_type, options_class = _BINARY[op.type]
    activation = _activation(args)
    if int8_tensor_type(op.outputs[0]):
        if op.type not in (T.ADD, T.SUB, T.MUL):
            raise Unsupported(f"an int8 {op.type.name} (XNNPACK's int8 elementwise operators: ADD, SUB, MUL)")
        options = options_class()
        options.fusedActivationFunction = activation
        _int8_arithmetic(g, op, code, options)
        return
    layout = _broadcast_layout(g, op, (0, 1))
    a, b = _broadcast_input(g, op, 0, layout), _broadcast_input(g, op, 1, layout)
    out = g.output(op, 0, layout)
    if options_class is not None:
        options = options_class()
        options.fusedActivationFunction = activation
        g.operator(code, [a, b], [out], options_type, options)
        return
    clamp = {schema.ActivationFunctionType.RELU: B.RELU, schema.ActivationFunctionType.RELU_N1_TO_1: B.RELU_N1_TO_1,
             schema.ActivationFunctionType.RELU6: B.RELU6}.get(activation)
    if clamp is None:  # MAXIMUM / MINIMUM have no fused activation
        g.operator(code, [a, b], [out])
        return
    g.operator(clamp, [g.one(code, [a, b], g.shape_of(out))], [out])


_UNARY = {T.RELU: B.RELU, T.RELU6: B.RELU6, T.SIGMOID: B.LOGISTIC, T.TANH: B.TANH, T.ABS: B.ABS, T.FLOOR: B.FLOOR,
          T.SQUARE: B.SQUARE, T.RSQRT: B.RSQRT, T.EXP: B.EXP, T.LOG: B.LOG, T.SIN: B.SIN, T.COS: B.COS}


@OPERATIONS.implements(*_UNARY)
def _unary(g: TfliteBuilder, op: Operation):
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    g.operator(_UNARY[op.type], [x], [g.output(op, 0, layout)])


@OPERATIONS.implements(T.HARD_SWISH)
def _hard_swish(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    alpha, beta = args.float("alpha"), args.float("beta")
    # TFLite's HARD_SWISH is x * relu6(x + 3) / 6: Paddle's hard_swish with its default attributes only.
    if not (math.isclose(alpha, 1 / 6, rel_tol=1e-6) and math.isclose(beta, 0.5, rel_tol=1e-6)):
        raise Unsupported(f"alpha {alpha:.6g} and beta {beta:.6g}: TFLite's HARD_SWISH is x * relu6(x + 3) / 6 "
                          "(alpha 1/6, beta 0.5)")
    _unary_as(g, op, B.HARD_SWISH)


def _unary_as(g: TfliteBuilder, op: Operation, code: int, options_type: int = 0, options=None) -> None:
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    g.operator(code, [x], [g.output(op, 0, layout)], options_type, options)


def _scalar(g: TfliteBuilder, value: float, shape) -> int:
    """A float32 constant broadcasting against a value of `shape` without raising its rank (a 0-d value stays
    0-d: a [1] constant would make the result [1])."""
    return g.const(np.full([1] * len(shape), value, dtype=np.float32))


@OPERATIONS.implements(T.HARD_SIGMOID)
def _hard_sigmoid(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    out = g.output(op, 0, layout)
    shape = g.shape_of(out)
    scaled = g.one(B.MUL, [x, _scalar(g, args.float("alpha"), shape)], shape, O.MulOptions, schema.MulOptionsT())
    shifted = g.one(B.ADD, [scaled, _scalar(g, args.float("beta"), shape)], shape, O.AddOptions,
                    schema.AddOptionsT())
    # max(0, min(1, .)): two clamps with constants (TFLite's fused clamps are [0, 6] and [-1, 1] only)
    g.operator(B.MINIMUM, [g.one(B.MAXIMUM, [shifted, _scalar(g, 0.0, shape)], shape), _scalar(g, 1.0, shape)],
               [out])


@OPERATIONS.implements(T.ASSIGN)
def _assign(g: TfliteBuilder, op: Operation):
    value = g.stored(op, 0)
    g.produced(op, 0, g.reshape_copy(value.tensor), value.layout)


@OPERATIONS.implements(T.LEAKY_RELU)
def _leaky_relu(g: TfliteBuilder, op: Operation):
    options = schema.LeakyReluOptionsT()
    options.alpha = unpack(op).float("alpha")
    _unary_as(g, op, B.LEAKY_RELU, O.LeakyReluOptions, options)


@OPERATIONS.implements(T.SWISH)
def _swish(g: TfliteBuilder, op: Operation):
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    out = g.output(op, 0, layout)
    gate = g.one(B.LOGISTIC, [x], g.shape_of(out))
    g.operator(B.MUL, [x, gate], [out], O.MulOptions, schema.MulOptionsT())


@OPERATIONS.implements(T.GELU)
def _gelu(g: TfliteBuilder, op: Operation):
    options = schema.GeluOptionsT()
    options.approximate = bool(unpack(op).bool("approximate", False))
    _unary_as(g, op, B.GELU, O.GeluOptions, options)


@OPERATIONS.implements(T.PRELU)
def _prelu(g: TfliteBuilder, op: Operation):
    slope = TfliteBuilder.constant(op, 1, "slope").astype(np.float32).reshape(-1)
    rank = op.inputs[0].type.rank
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    if slope.size == 1:
        alpha = slope.reshape([1] * rank)  # a 0-d input takes a 0-d slope: a [1] one made the result [1]
    elif rank < 2:
        raise Unsupported("a per-channel slope needs an input of rank >= 2")
    elif layout == NHWC:
        alpha = slope.reshape(1, 1, 1, -1)
    else:
        shape = [1] * rank
        shape[1] = -1
        alpha = slope.reshape(shape)
    g.operator(B.PRELU, [x, g.const(alpha, hint="slope")], [g.output(op, 0, layout)])


@OPERATIONS.implements(T.CLIP)
def _clip(g: TfliteBuilder, op: Operation):
    low = float(TfliteBuilder.constant(op, 1, "min").reshape(-1)[0])
    high = float(TfliteBuilder.constant(op, 2, "max").reshape(-1)[0])
    named = {(0.0, 6.0): B.RELU6, (-1.0, 1.0): B.RELU_N1_TO_1}.get((low, high))
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    out = g.output(op, 0, layout)
    if named is not None:
        g.operator(named, [x], [out])
        return
    if low > high:
        raise Unsupported(f"min {low:.6g} > max {high:.6g}")
    shape = g.shape_of(out)
    raised = g.one(B.MAXIMUM, [x, _scalar(g, low, shape)], shape)
    g.operator(B.MINIMUM, [raised, _scalar(g, high, shape)], [out])


@OPERATIONS.implements(T.SOFTMAX)
def _softmax(g: TfliteBuilder, op: Operation):
    """TFLite's softmax runs over the last axis: NNAdapter's channel axis of a rank-4 input is NHWC's last one,
    another axis is transposed to the end and back. (XNNPACK leaves LOG_SOFTMAX to LiteRT's kernels: not built.)"""
    rank = op.inputs[0].type.rank
    axis = normalize_axis(unpack(op).int("axis", 1), rank)
    options = schema.SoftmaxOptionsT()
    options.beta = 1.0
    code, options_type = B.SOFTMAX, O.SoftmaxOptions
    if rank == 4 and axis == 1:
        g.operator(code, [g.value(op, 0, NHWC)], [g.output(op, 0, NHWC)], options_type, options)
        return
    x = g.value(op, 0, PLAIN)
    if axis == rank - 1:
        g.operator(code, [x], [g.output(op, 0, PLAIN)], options_type, options)
        return
    perm = [k for k in range(rank) if k != axis] + [axis]
    moved = g.transpose(x, perm)
    result = g.one(code, [moved], g.shape_of(moved), options_type, options)
    g.operator(B.TRANSPOSE, [result, g.i32(inverse(perm))], [g.output(op, 0, PLAIN)])


# -- convolution, fully connected, matmul -------------------------------------------------------------------
def _same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple:
    """TFLite's SAME padding of one axis: (before, after)."""
    effective = (kernel - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def _window_padding(g: TfliteBuilder, x: int, pads: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                    dilations: Sequence[int], pad_allowed: bool) -> tuple:
    """(the NHWC input, TFLite padding) for explicit (top, bottom, left, right) pads: VALID for none, SAME when
    they are TFLite's SAME pads, else (`pad_allowed`) a zero PAD before a VALID window."""
    _, h, w, _ = g.shape_of(x)
    top, bottom, left, right = (int(p) for p in pads)
    if not any(pads):
        return x, schema.Padding.VALID
    if (top, bottom) == _same_pads(h, kernel[0], strides[0], dilations[0]) and \
            (left, right) == _same_pads(w, kernel[1], strides[1], dilations[1]):
        return x, schema.Padding.SAME
    if not pad_allowed:
        raise Unsupported(f"pads {list(pads)} are neither none nor TFLite's SAME pads")
    if min(pads) < 0:
        raise Unsupported(f"negative pads {list(pads)}")
    n, _, _, c = g.shape_of(x)
    padded = g.tensor([n, h + top + bottom, w + left + right, c], "pad", like=x)  # int8 pads with its zero point
    g.operator(B.PAD, [x, g.const(np.int32([[0, 0], [top, bottom], [left, right], [0, 0]]), np.int32)], [padded])
    return padded, schema.Padding.VALID


@OPERATIONS.implements(T.CONV_2D)
def _conv_2d(g: TfliteBuilder, op: Operation):
    """A float convolution; an integer product (int8 x int8 -> int32 sums) is the int8 convolution of its chain
    when it heads one (quantized.int8_conv), else a float convolution of the real values (the int8 input
    dequantized, the weights read as their real values), which is what Paddle computes."""
    integer = is_integer_product(op)
    if integer and id(op) in g.chains and int8_conv(g, g.chains[id(op)]):
        return
    if not op.inputs[1].is_constant:
        _conv_runtime_filter(g, op)
        return
    if int8_tensor_type(op.outputs[0]):
        _int8_conv_operation(g, op)
        return
    if integer and _dynamic_int8_conv(g, op):
        return
    args = unpack(op)
    weights = _real_weights(op, 1, "filter")  # [O, I / group, kh, kw]
    out_channels, group_channels, kh, kw = weights.shape
    tail = g.tails.get(id(op)) if integer else None
    if tail is not None:  # y = a * conv + shift: a into the filter, shift the bias
        factor, shift = batch_norm_factors(tail.batch_norm)
        weights = (weights * factor.reshape(-1, 1, 1, 1)).astype(np.float32)
    group = args.int("group", 1)
    x = g.real(op, 0, NHWC)
    _, h, w, in_channels = g.shape_of(x)
    strides = args.ints("strides", [1, 1])
    pads, dilations = resolve_window(args.int("auto_pad", 0), args.ints("pads", None), (h, w), (kh, kw), strides,
                                     args.ints("dilations", [1, 1]))
    activation = _activation(args)
    x, padding = _window_padding(g, x, pads, (kh, kw), strides, dilations, pad_allowed=True)
    bias = g.const(_real_weights(op, 2, "bias").reshape(-1) if op.inputs[2] is not None
                   else np.zeros(out_channels, np.float32), hint="bias")
    if tail is not None:
        bias = g.const(shift.astype(np.float32), hint="bias")  # an integer product has no bias of its own
    out, activation = _product_output(g, op, tail, activation)
    if group > 1 and group == in_channels and group_channels == 1:
        options = schema.DepthwiseConv2DOptionsT()
        options.depthMultiplier = out_channels // in_channels
        filt = g.const(weights.reshape(out_channels, kh, kw).transpose(1, 2, 0)[np.newaxis], hint="filter")
        code, options_type = B.DEPTHWISE_CONV_2D, O.DepthwiseConv2DOptions
    else:
        options = schema.Conv2DOptionsT()  # a grouped conv: the filter's input channels are C / group
        filt = g.const(weights.transpose(0, 2, 3, 1), hint="filter")
        code, options_type = B.CONV_2D, O.Conv2DOptions
    _window_options(options, padding, strides, dilations, activation)
    g.operator(code, [x, filt, bias], [out], options_type, options)
    _check_window_out(g, op, x, padding, (kh, kw), strides, dilations)


def _product_output(g: TfliteBuilder, op: Operation, tail, activation: int) -> tuple:
    """(the float NHWC tensor a convolution computing in float writes, its fused activation): with a float tail
    (an integer product's DEQUANTIZE -> batch norm [-> relu], folded into the convolution) the tail's last
    result and the tail's relu, which the convolution then writes for the whole tail."""
    if tail is None:
        return g.output(op, 0, NHWC, quantized=is_integer_product(op)), activation
    g.absorbed.update(id(link) for link in tail.operations())
    return g.output(tail.last, 0, NHWC), _CHAIN_ACTIVATIONS[None if tail.relu is None else tail.relu.type]


def _window_options(options, padding: int, strides, dilations, activation: int) -> None:
    options.padding = padding
    options.strideH, options.strideW = (int(s) for s in strides)
    options.dilationHFactor, options.dilationWFactor = (int(d) for d in dilations)
    options.fusedActivationFunction = activation


def _dynamic_int8_conv(g: TfliteBuilder, op: Operation) -> bool:
    """An integer product heading no chain (its result is not requantized right away: a projection a float
    residual add reads, the last conv before a float pool) as XNNPACK's dynamically quantized convolution: its
    int8 input with the two range channels (TfliteBuilder.real_with_range, which make XNNPACK's own
    quantization of it exact), the int8 weights per channel with the float tail's batch norm folded into their
    scales (hal.quantized_chains.fold_weights) and zero weights for the range channels, a float bias and a
    float result. That is the exact int32 sums times the scales, what Paddle computes in float on the real
    values, in XNNPACK's int8 arithmetic. False (nothing written) where it does not apply: a grouped
    convolution, an input other than symmetric per-layer int8, weights that do not fold."""
    args = unpack(op)
    if not int8_tensor_type(op.inputs[0]) or op.inputs[0].type.rank != 4 or args.int("group", 1) != 1 \
            or not int8_symmetric(op.inputs[1].type) \
            or (op.inputs[2] is not None and not (op.inputs[2].is_constant and is_real_valued(op.inputs[2]))):
        return False
    tail = g.tails.get(id(op))
    folded = fold_weights(op, None if tail is None else tail.batch_norm)
    if folded is None or min(args.ints("pads", None) or [0]) < 0:
        return False
    out_channels, _, kh, kw = folded.weights.shape
    x = g.real_with_range(op, 0)
    _, h, w, _ = g.shape_of(x)
    strides = args.ints("strides", [1, 1])
    pads, dilations = resolve_window(args.int("auto_pad", 0), args.ints("pads", None), (h, w), (kh, kw), strides,
                                     args.ints("dilations", [1, 1]))
    x, padding = _window_padding(g, x, pads, (kh, kw), strides, dilations, pad_allowed=True)
    weights = np.concatenate([folded.weights.transpose(0, 2, 3, 1), np.zeros((out_channels, kh, kw, 2), np.int8)],
                             axis=3)
    filt = g.const(weights, np.int8, "filter", quantization(folded.scales, 0))
    bias = g.const(folded.shift.astype(np.float32), hint="bias")
    out, activation = _product_output(g, op, tail, _activation(args))
    options = schema.Conv2DOptionsT()
    _window_options(options, padding, strides, dilations, activation)
    g.operator(B.CONV_2D, [x, filt, bias], [out], O.Conv2DOptions, options)
    _check_window_out(g, op, x, padding, (kh, kw), strides, dilations)
    return True


# XNNPACK concatenates at most this many inputs in one operator (its concatenate2 ... concatenate5)
_MAX_CONCAT_INPUTS = 5


def _concatenate(g: TfliteBuilder, parts: Sequence[int], axis: int, output: int | None = None) -> int:
    """`parts` concatenated along `axis` (into `output` when given), in CONCATENATIONs of at most
    _MAX_CONCAT_INPUTS inputs: XNNPACK leaves a longer one to LiteRT's kernels, and a one-input one too (RetinaNet
    stacks the boxes of its single image): that is a copy, a RESHAPE to the same shape."""
    parts = list(parts)
    if len(parts) == 1:
        if output is None:
            return parts[0]
        shape = list(g.shape_of(parts[0]))
        options = schema.ReshapeOptionsT()
        options.newShape = shape
        return g.one(B.RESHAPE, [parts[0], g.i32(shape)], (), O.ReshapeOptions, options, output=output)
    while True:
        last = len(parts) <= _MAX_CONCAT_INPUTS
        grouped = []
        for k in range(0, len(parts), _MAX_CONCAT_INPUTS):
            group = parts[k:k + _MAX_CONCAT_INPUTS]
            if len(group) == 1 and not last:
                grouped.append(group[0])
                continue
            shape = list(g.shape_of(group[0]))
            shape[axis] = sum(g.shape_of(t)[axis] for t in group)
            options = schema.ConcatenationOptionsT()
            options.axis = axis
            out = output if last and output is not None else g.tensor(shape, "concatenation", like=group[0])
            grouped.append(g.one(B.CONCATENATION, group, (), O.ConcatenationOptions, options, output=out))
        if last:
            return grouped[0]
        parts = grouped


def _conv_runtime_filter(g: TfliteBuilder, op: Operation):
    """A convolution whose filter is computed at run time (XNNPACK's convolutions take constant filters only):
    the input's window taps gathered (SLICEs; a stride through a 6-D reshape and a step-1 SLICE) and either one
    BATCH_MATMUL of all taps against the filter as a [kh * kw * C, O] matrix, or, depthwise, one MUL + ADD per
    tap. (A quantized Paddle conv decided alone has this form: its filter is a dequantize_linear's result.)"""
    args = unpack(op)
    filt = g.value(op, 1, PLAIN)
    out_channels, group_channels, kh, kw = g.operand_dims(op.inputs[1])
    group = args.int("group", 1)
    x = g.value(op, 0, NHWC)
    n, h, w, channels = g.shape_of(x)
    depthwise = group > 1 and group == channels == out_channels and group_channels == 1
    if group != 1 and not depthwise:
        raise Unsupported(f"group {group} with a filter computed at run time (only 1 or depthwise)")
    strides = [int(v) for v in args.ints("strides", [1, 1])]
    pads, dilations = resolve_window(args.int("auto_pad", 0), args.ints("pads", None), (h, w), (kh, kw), strides,
                                     args.ints("dilations", [1, 1]))
    if min(pads) < 0:
        raise Unsupported(f"negative pads {list(pads)}")
    _, out_h, out_w, _ = g.out_shape(op, 0, NHWC)
    # zero pads around, and below / right as many rows as the last tap's strided window reads
    extra_h = max((kh - 1) * dilations[0] + out_h * strides[0] - (h + pads[0] + pads[1]), 0)
    extra_w = max((kw - 1) * dilations[1] + out_w * strides[1] - (w + pads[2] + pads[3]), 0)
    if any(pads) or extra_h or extra_w:
        shape = [n, h + pads[0] + pads[1] + extra_h, w + pads[2] + pads[3] + extra_w, channels]
        x = g.one(B.PAD, [x, g.const(np.int32([[0, 0], [pads[0], pads[1] + extra_h], [pads[2], pads[3] + extra_w],
                                               [0, 0]]), np.int32)], shape)
    taps = []
    for i in range(kh):
        for j in range(kw):
            size = [n, out_h * strides[0], out_w * strides[1], channels]
            tap = g.one(B.SLICE, [x, g.i32([0, i * dilations[0], j * dilations[1], 0]), g.i32(size)], size)
            if strides != [1, 1]:
                split = g.reshape(tap, [n, out_h, strides[0], out_w, strides[1], channels])
                tap = g.reshape(g.one(B.SLICE, [split, g.i32([0] * 6), g.i32([n, out_h, 1, out_w, 1, channels])],
                                      [n, out_h, 1, out_w, 1, channels]), [n, out_h, out_w, channels])
            taps.append(tap)
    shape = [n, out_h, out_w, out_channels]
    if depthwise:  # filter [C, 1, kh, kw] -> [kh * kw, C]: one row per tap
        rows = g.reshape(g.transpose(g.reshape(filt, [channels, kh * kw]), [1, 0]), [kh * kw, channels])
        result = None
        for k, tap in enumerate(taps):
            weight = g.reshape(g.one(B.SLICE, [rows, g.i32([k, 0]), g.i32([1, channels])], [1, channels]),
                               [channels])
            product = g.one(B.MUL, [tap, weight], shape, O.MulOptions, schema.MulOptionsT())
            result = product if result is None else g.one(B.ADD, [result, product], shape, O.AddOptions,
                                                          schema.AddOptionsT())
    else:  # patches [N, OH * OW, kh * kw * C] @ filter [kh * kw * C, O]
        patches = _concatenate(g, taps, 3) if len(taps) > 1 else taps[0]
        matrix = g.reshape(g.transpose(filt, [2, 3, 1, 0]), [kh * kw * channels, out_channels])
        product = g.one(B.BATCH_MATMUL, [g.reshape(patches, [n, out_h * out_w, kh * kw * channels]), matrix],
                        [n, out_h * out_w, out_channels], O.BatchMatMulOptions, schema.BatchMatMulOptionsT())
        result = g.reshape(product, shape)
    if op.inputs[2] is not None:
        bias = g.reshape(g.value(op, 2, PLAIN), [out_channels]) if not op.inputs[2].is_constant else \
            g.const(_real_weights(op, 2, "bias").reshape(-1), hint="bias")
        result = g.one(B.ADD, [result, bias], shape, O.AddOptions, schema.AddOptionsT())
    g.produced(op, 0, _fused_clamp(g, result, args, shape), NHWC)


@OPERATIONS.implements(T.CONV_2D_TRANSPOSE)
def _conv_2d_transpose(g: TfliteBuilder, op: Operation):
    """TFLite's VALID TRANSPOSE_CONV writes the full (in - 1) * stride + k rows; Paddle's pads crop it (a SLICE),
    and its output_padding rows must fall inside what the full result holds."""
    args = unpack(op)
    weights = TfliteBuilder.constant(op, 1, "filter").astype(np.float32)  # [C_in, C_out / group, kh, kw]
    if args.int("group", 1) != 1:
        raise Unsupported("groups (TFLite's TRANSPOSE_CONV has none)")
    dilations = args.ints("dilations", [1, 1])
    if list(dilations) != [1, 1]:
        raise Unsupported(f"dilations {dilations} (TFLite's TRANSPOSE_CONV has none)")
    in_channels, out_channels, kh, kw = weights.shape
    x = g.value(op, 0, NHWC)
    n, h, w, _ = g.shape_of(x)
    strides = [int(v) for v in args.ints("strides", [1, 1])]
    pads, _ = resolve_window(args.int("auto_pad", 0), args.ints("pads", None), (h, w), (kh, kw), strides)
    if min(pads) < 0:
        raise Unsupported(f"negative pads {list(pads)}")
    full = [n, (h - 1) * strides[0] + kh, (w - 1) * strides[1] + kw, out_channels]
    out_shape = g.out_shape(op, 0, NHWC)
    top, left = int(pads[0]), int(pads[2])
    # output_padding rows past the full result hold the bias alone: zero rows padded on, the bias added after
    beyond = (max(top + out_shape[1] - full[1], 0), max(left + out_shape[2] - full[2], 0))
    options = schema.TransposeConvOptionsT()
    options.padding = schema.Padding.VALID
    options.strideH, options.strideW = strides
    bias = TfliteBuilder.constant(op, 2, "bias").astype(np.float32).reshape(-1) if op.inputs[2] is not None \
        else np.zeros(out_channels, np.float32)
    filt = g.const(weights.transpose(1, 2, 3, 0), hint="filter")  # [C_out, kh, kw, C_in]
    result = g.tensor(full, "tconv")
    bias_inside = not any(beyond)
    g.operator(B.TRANSPOSE_CONV, [g.i32(full), filt, x, g.const(bias if bias_inside else 0 * bias, hint="bias")],
               [result], O.TransposeConvOptions, options)
    if not bias_inside:
        padded = [n, full[1] + beyond[0], full[2] + beyond[1], out_channels]
        result = g.one(B.PAD, [result, g.const(np.int32([[0, 0], [0, beyond[0]], [0, beyond[1]], [0, 0]]), np.int32)],
                       padded)
    if list(out_shape) != list(g.shape_of(result)):
        result = g.one(B.SLICE, [result, g.i32([0, top, left, 0]), g.i32(out_shape)], out_shape)
    if not bias_inside:
        result = g.one(B.ADD, [result, g.const(bias.reshape(1, 1, 1, -1), hint="bias")], out_shape, O.AddOptions,
                       schema.AddOptionsT())
    g.produced(op, 0, _fused_clamp(g, result, args, out_shape, copy=False), NHWC)


def _check_window_out(g: TfliteBuilder, op: Operation, x: int, padding: int, kernel, strides, dilations) -> None:
    """TFLite sizes the window's output itself: it must be the operation's (ceil_mode, odd pads)."""
    _, h, w, _ = g.shape_of(x)
    sizes = []
    for size, k, s, d in zip((h, w), kernel, strides, dilations):
        effective = (k - 1) * d + 1
        sizes.append(-(-size // s) if padding == schema.Padding.SAME else (size - effective) // s + 1)
    want = g.out_shape(op, 0, NHWC)[1:3]
    if tuple(sizes) != tuple(want):
        raise Unsupported(f"TFLite's window gives {sizes[0]}x{sizes[1]}, the operation {want[0]}x{want[1]}")


def _real_weights(op: Operation, i: int, what: str) -> np.ndarray:
    """Constant input i as its real values in float32 (a quantized constant dequantized)."""
    return dequantize(TfliteBuilder.constant(op, i, what), op.inputs[i].type).astype(np.float32)


@OPERATIONS.implements(T.FULLY_CONNECTED)
def _fully_connected(g: TfliteBuilder, op: Operation):
    """A float FULLY_CONNECTED; an integer product computes on the real values (as _conv_2d's)."""
    args = unpack(op)
    integer = is_integer_product(op)
    if not op.inputs[1].is_constant:  # XNNPACK's FULLY_CONNECTED takes constant weights only: x @ W^T
        dims = g.operand_dims(op.inputs[1])
        rows = int(np.prod(g.operand_dims(op.inputs[0]))) // max(dims[1], 1)
        x = g.reshape(g.plain_memory(op, 0), [rows, dims[1]])
        options = schema.BatchMatMulOptionsT()
        options.adjY = True
        shape = g.out_shape(op, 0)
        result = g.one(B.BATCH_MATMUL, [x, g.value(op, 1, PLAIN)], shape, O.BatchMatMulOptions, options)
        if op.inputs[2] is not None:
            result = g.one(B.ADD, [result, g.value(op, 2, PLAIN)], shape, O.AddOptions, schema.AddOptionsT())
        g.produced(op, 0, _fused_clamp(g, result, args, shape))
        return
    weights = _real_weights(op, 1, "weight")  # [units, K], TFLite's own layout
    units = weights.shape[0]
    bias = _real_weights(op, 2, "bias").reshape(-1) if op.inputs[2] is not None else np.zeros(units, np.float32)
    options = schema.FullyConnectedOptionsT()
    options.fusedActivationFunction = _activation(args)
    options.keepNumDims = False
    # TFLite flattens the input to [-1, K] as NNAdapter does
    x = g.real(op, 0, g.layout_of(op, 0)) if integer else g.plain_memory(op, 0)
    if integer and op.inputs[0].type.rank == 4 and g.layout_of(op, 0) == NHWC:
        x = g.real(op, 0, PLAIN)
    g.operator(B.FULLY_CONNECTED, [x, g.const(weights, hint="weight"), g.const(bias, hint="bias")],
               [g.output(op, 0, PLAIN, quantized=integer)], O.FullyConnectedOptions, options)


@OPERATIONS.implements(T.MAT_MUL)
def _mat_mul(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    transpose_x, transpose_y = args.bool("transpose_x", False), args.bool("transpose_y", False)
    x_rank, y_rank = op.inputs[0].type.rank, op.inputs[1].type.rank
    if x_rank < 2 or y_rank < 2:
        raise Unsupported("a 1-D operand (matmul's vector case)")
    y = op.inputs[1]
    out = g.output(op, 0, PLAIN)
    if y.is_constant and y_rank == 2 and not transpose_x:
        # x @ W as FULLY_CONNECTED keeping x's leading dims: XNNPACK's packed-weight GEMM
        weights = np.asarray(y.value, dtype=np.float32)
        weights = weights if transpose_y else weights.T
        g.fit_trial_input(op, 0, [None] * (x_rank - 1) + [weights.shape[1]])  # the contracted dim is the weight's
        options = schema.FullyConnectedOptionsT()
        options.keepNumDims = True
        g.operator(B.FULLY_CONNECTED, [g.value(op, 0), g.const(np.ascontiguousarray(weights), hint="weight"), -1],
                   [out], O.FullyConnectedOptions, options)
        return
    options = schema.BatchMatMulOptionsT()
    options.adjX, options.adjY = bool(transpose_x), bool(transpose_y)
    g.operator(B.BATCH_MATMUL, [g.value(op, 0), g.value(op, 1)], [out], O.BatchMatMulOptions, options)


# -- pools and means ----------------------------------------------------------------------------------------
def _pool_window(g: TfliteBuilder, op: Operation, x: int):
    args = unpack(op)
    kernel = args.ints("kernel_shape")
    strides = args.ints("strides", [1, 1])
    _, h, w, _ = g.shape_of(x)
    pads, _ = resolve_window(args.int("auto_pad", 0), args.ints("pads", None), (h, w), kernel, strides)
    return args, kernel, strides, pads


def _mean(g: TfliteBuilder, x: int, axes: Sequence[int], out: int, keep_dims: bool = True) -> None:
    options = schema.ReducerOptionsT()
    options.keepDims = keep_dims
    g.operator(B.MEAN, [x, g.i32(axes)], [out], O.ReducerOptions, options)


def _int8_pool(g: TfliteBuilder, op: Operation) -> None:
    """A pool of int8 values into int8 values of the same scale: MAX_POOL_2D where TFLite's own window is the
    operation's, a global average as MEAN; XNNPACK does not take int8 AVERAGE_POOL_2D, so other averages are
    declined."""
    x_operand, out_operand = op.inputs[0], op.outputs[0]
    if not int8_tensor_type(x_operand) or x_operand.is_constant or \
            not np.isclose(x_operand.type.scale, out_operand.type.scale, rtol=1e-6, atol=0):
        raise Unsupported("an int8 pool reads an int8 value of its result's scale")
    x = g.value(op, 0, NHWC, quantized=True)
    args, kernel, strides, pads = _pool_window(g, op, x)
    _, h, w, _ = g.shape_of(x)
    out_hw = g.out_shape(op, 0, NHWC)[1:3]
    activation = _activation(args)
    if op.type == T.AVERAGE_POOL_2D:
        if list(kernel) == [h, w] and not any(pads) and out_hw == (1, 1) \
                and activation == schema.ActivationFunctionType.NONE:
            _mean(g, x, [1, 2], g.output(op, 0, NHWC, quantized=True))
            return
        raise Unsupported("an int8 average pool other than a global one (XNNPACK does not take int8 AVERAGE_POOL_2D)")
    _int8_max_pool(g, op, x, op)


def _int8_max_pool(g: TfliteBuilder, op: Operation, x: int, writer: Operation) -> None:
    """MAX_POOL_2D `op` of int8 tensor `x` (NHWC) writing `writer`'s int8 output: TFLite's window where it is the
    operation's, else Paddle's -inf padding as edge copies (_edge_padded) before a VALID window."""
    args, kernel, strides, pads = _pool_window(g, op, x)
    out_hw = g.out_shape(op, 0, NHWC)[1:3]
    padding = schema.Padding.SAME if any(pads) else schema.Padding.VALID
    if not _pool_fits(g, x, pads, kernel, strides, out_hw):
        x, padding = _edge_padded(g, x, pads, kernel, strides, out_hw), schema.Padding.VALID
    options = schema.Pool2DOptionsT()
    options.padding = padding
    options.strideH, options.strideW = (int(s) for s in strides)
    options.filterHeight, options.filterWidth = (int(k) for k in kernel)
    options.fusedActivationFunction = _activation(args)
    g.operator(B.MAX_POOL_2D, [x], [g.output(writer, 0, NHWC, quantized=True)], O.Pool2DOptions, options)
    _check_window_out(g, op, x, padding, kernel, strides, (1, 1))


@OPERATIONS.implements(T.AVERAGE_POOL_2D, T.MAX_POOL_2D)
def _pool(g: TfliteBuilder, op: Operation):
    if op.type == T.MAX_POOL_2D and len(op.outputs) > 1 and op.outputs[1] is not None:
        raise Unsupported("the indices output (TFLite's MAX_POOL_2D has none)")
    if int8_tensor_type(op.outputs[0]):
        _int8_pool(g, op)
        return
    x = g.value(op, 0, NHWC)
    args, kernel, strides, pads = _pool_window(g, op, x)
    activation = _activation(args)
    _, h, w, c = g.shape_of(x)
    out_hw = g.out_shape(op, 0, NHWC)[1:3]
    if op.type == T.MAX_POOL_2D and list(kernel) == [1, 1] and not any(pads) and max(strides) > 1:
        # XNNPACK takes no 1x1 pool with a stride (FPN's extra level P6 subsamples P5 so): the max of one element
        # is the element, and a DEPTHWISE_CONV_2D by ones (x * 1 + 0, exact) picks the same elements
        options = schema.DepthwiseConv2DOptionsT()
        options.depthMultiplier = 1
        _window_options(options, schema.Padding.VALID, strides, (1, 1), activation)
        g.operator(B.DEPTHWISE_CONV_2D, [x, g.const(np.ones((1, 1, 1, c), np.float32), hint="filter"),
                                         g.const(np.zeros(c, np.float32), hint="bias")],
                   [g.output(op, 0, NHWC)], O.DepthwiseConv2DOptions, options)
        _check_window_out(g, op, x, schema.Padding.VALID, kernel, strides, (1, 1))
        return
    if op.type == T.AVERAGE_POOL_2D and list(kernel) == [h, w] and not any(pads) and out_hw == (1, 1) \
            and activation == schema.ActivationFunctionType.NONE:
        _mean(g, x, [1, 2], g.output(op, 0, NHWC))  # a global average pool: XNNPACK's global mean
        return
    include_pad = op.type == T.AVERAGE_POOL_2D and args.bool("count_include_pad", False)
    if include_pad and any(pads):
        # TFLite's SAME average excludes the padding; with the padding counted it is a zero PAD + VALID
        x, padding = _window_padding(g, x, pads, kernel, strides, (1, 1), pad_allowed=True)
        if padding == schema.Padding.SAME:
            n, ph, pw, c = g.shape_of(x)
            t, b, left, r = pads
            x = g.one(B.PAD, [x, g.const(np.int32([[0, 0], [t, b], [left, r], [0, 0]]), np.int32)],
                      [n, ph + t + b, pw + left + r, c])
            padding = schema.Padding.VALID
    elif op.type == T.MAX_POOL_2D and not _pool_fits(g, x, pads, kernel, strides, out_hw):
        x, padding = _edge_padded(g, x, pads, kernel, strides, out_hw), schema.Padding.VALID
    elif op.type == T.AVERAGE_POOL_2D and not _pool_fits(g, x, pads, kernel, strides, out_hw):
        _exclusive_average_pool(g, op, x, pads, kernel, strides, out_hw, activation)
        return
    else:
        x, padding = _window_padding(g, x, pads, kernel, strides, (1, 1), pad_allowed=False)
    options = schema.Pool2DOptionsT()
    options.padding = padding
    options.strideH, options.strideW = (int(s) for s in strides)
    options.filterHeight, options.filterWidth = (int(k) for k in kernel)
    options.fusedActivationFunction = activation
    code = B.AVERAGE_POOL_2D if op.type == T.AVERAGE_POOL_2D else B.MAX_POOL_2D
    g.operator(code, [x], [g.output(op, 0, NHWC)], O.Pool2DOptions, options)
    _check_window_out(g, op, x, padding, kernel, strides, (1, 1))


def _exclusive_average_pool(g: TfliteBuilder, op: Operation, x: int, pads, kernel, strides, out_hw,
                            activation: int) -> None:
    """An average pool that counts only the input elements of each window (Paddle's exclusive average) with pads
    TFLite's SAME would not choose (stride 2 on an even size, ceil_mode): a zero PAD, a VALID AVERAGE_POOL_2D
    (which divides by the whole window) and a MUL by window size / input elements per output position."""
    n, h, w, c = g.shape_of(x)
    top, _, left, _ = (int(p) for p in pads)
    counts = []
    for size, before, out, k, stride in ((h, top, out_hw[0], kernel[0], strides[0]),
                                         (w, left, out_hw[1], kernel[1], strides[1])):
        starts = np.arange(out) * stride
        inside = np.minimum(starts + k, before + size) - np.maximum(starts, before)
        if before < 0 or (inside <= 0).any():
            raise Unsupported(f"an average pool window would hold padding only (pads {list(pads)})")
        counts.append((inside, max((out - 1) * stride + k - size - before, 0)))
    (rows, after_h), (cols, after_w) = counts
    padded = g.one(B.PAD, [x, g.const(np.int32([[0, 0], [top, after_h], [left, after_w], [0, 0]]), np.int32)],
                   [n, h + top + after_h, w + left + after_w, c])
    options = schema.Pool2DOptionsT()
    options.padding = schema.Padding.VALID
    options.strideH, options.strideW = (int(s) for s in strides)
    options.filterHeight, options.filterWidth = (int(k) for k in kernel)
    shape = [n, int(out_hw[0]), int(out_hw[1]), c]
    pooled = g.one(B.AVERAGE_POOL_2D, [padded], shape, O.Pool2DOptions, options)
    _check_window_out(g, op, padded, schema.Padding.VALID, kernel, strides, (1, 1))
    factor = (kernel[0] * kernel[1] / np.outer(rows, cols)).astype(np.float32).reshape(1, shape[1], shape[2], 1)
    mul = schema.MulOptionsT()
    mul.fusedActivationFunction = activation
    g.operator(B.MUL, [pooled, g.const(factor, hint="count")], [g.output(op, 0, NHWC)], O.MulOptions, mul)


def _pool_fits(g: TfliteBuilder, x: int, pads, kernel, strides, out_hw) -> bool:
    """TFLite's own VALID or SAME window gives the operation's pads and output size."""
    _, h, w, _ = g.shape_of(x)
    top, bottom, left, right = (int(p) for p in pads)
    if not any(pads):
        return ((h - kernel[0]) // strides[0] + 1, (w - kernel[1]) // strides[1] + 1) == tuple(out_hw)
    return (top, bottom) == _same_pads(h, kernel[0], strides[0], 1) and \
        (left, right) == _same_pads(w, kernel[1], strides[1], 1) and \
        (-(-h // strides[0]), -(-w // strides[1])) == tuple(out_hw)


def _edge_padded(g: TfliteBuilder, x: int, pads, kernel, strides, out_hw) -> int:
    """x (NHWC) with its first / last rows and columns repeated (SLICE + CONCATENATION) so that a VALID max pool
    gives the operation's windows: its pads before, and after them as many as the output size needs (ceil_mode
    included). Paddle pads a max pool with -inf (and clips a ceil_mode window to the input); when every window
    holds an input element, repeating the window's own edge element gives the same maxima."""
    for axis, before, size, k, stride in ((1, int(pads[0]), out_hw[0], kernel[0], strides[0]),
                                          (2, int(pads[2]), out_hw[1], kernel[1], strides[1])):
        shape = list(g.shape_of(x))
        after = (size - 1) * stride + k - shape[axis] - before
        if before < 0 or after < 0 or before >= k or (size - 1) * stride - before > shape[axis] - 1:
            raise Unsupported(f"a max pool window would hold padding only (pads {list(pads)}, window {list(kernel)})")
        if not before and not after:
            continue
        edge = shape[:axis] + [1] + shape[axis + 1:]
        first = g.one(B.SLICE, [x, g.i32([0] * 4), g.i32(edge)], (), output=g.tensor(edge, "slice", like=x))
        begin = [0] * 4
        begin[axis] = shape[axis] - 1
        last = g.one(B.SLICE, [x, g.i32(begin), g.i32(edge)], (), output=g.tensor(edge, "slice", like=x))
        parts = [first] * before + [x] + [last] * after
        shape[axis] += before + after
        options = schema.ConcatenationOptionsT()
        options.axis = axis
        x = g.one(B.CONCATENATION, parts, (), O.ConcatenationOptions, options,
                  output=g.tensor(shape, "concatenation", like=x))  # an int8 value's copies keep its scale
    return x


@OPERATIONS.implements(T.ADAPTIVE_AVERAGE_POOL_2D)
def _adaptive_average_pool(g: TfliteBuilder, op: Operation):
    """A global mean for a 1x1 output; for an output that divides the input evenly, Paddle's bins (from
    floor(i * in / out) to ceil((i + 1) * in / out)) are the windows of a VALID AVERAGE_POOL_2D with kernel and
    stride in / out (ERNIE-Layout's 7x7 pool of its ResNet features)."""
    out_hw = tuple(int(d) for d in unpack(op).ints("output_shape"))
    if out_hw != (1, 1):
        if int8_tensor_type(op.outputs[0]):
            raise Unsupported("an int8 adaptive pool other than 1x1 (XNNPACK does not take int8 AVERAGE_POOL_2D)")
        x = g.value(op, 0, NHWC)
        _, h, w, _ = g.shape_of(x)
        if len(out_hw) != 2 or min(out_hw) <= 0 or h % out_hw[0] or w % out_hw[1]:
            raise Unsupported(f"an output {list(out_hw)} that does not divide the input {[h, w]} (TFLite has no "
                              "adaptive pool)")
        options = schema.Pool2DOptionsT()
        options.padding = schema.Padding.VALID
        options.strideH, options.strideW = options.filterHeight, options.filterWidth = h // out_hw[0], w // out_hw[1]
        g.operator(B.AVERAGE_POOL_2D, [x], [g.output(op, 0, NHWC)], O.Pool2DOptions, options)
        return
    int8 = int8_tensor_type(op.outputs[0])
    if int8 and not np.isclose(op.inputs[0].type.scale, op.outputs[0].type.scale, rtol=1e-6, atol=0):
        raise Unsupported("an int8 pool reads an int8 value of its result's scale")
    _mean(g, g.value(op, 0, NHWC, quantized=int8), [1, 2], g.output(op, 0, NHWC, quantized=int8))


@OPERATIONS.implements(T.REDUCE_MEAN)
def _reduce_mean(g: TfliteBuilder, op: Operation):
    if reduces_an_empty_axis(op):
        raise Unsupported("a mean over an empty axis (Paddle's is NaN)")
    args = unpack(op)
    rank = op.inputs[0].type.rank
    axes = args.ints("axes")
    axes = sorted({normalize_axis(a, rank) for a in axes}) if axes else list(range(rank))
    keep = bool(args.bool("keepdim", True))
    layout = g.layout_of(op, 0)
    if layout == NHWC and not keep:
        kept_plain = [k for k in range(4) if k not in axes]
        kept_stored = [k for k in TO_NHWC if k not in axes]
        if kept_plain != kept_stored:  # the result's axes would come out in another order
            layout = PLAIN
    x = g.value(op, 0, layout)
    stored_axes = sorted(_axis_in(layout, a) for a in axes) if rank == 4 else axes
    _mean(g, x, stored_axes, g.output(op, 0, layout if keep else PLAIN), keep)


@OPERATIONS.implements(T.REDUCE_SUM, T.REDUCE_MAX)
def _reduce(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    rank = op.inputs[0].type.rank
    if any(d == 0 for d in g.operand_dims(op.inputs[0])):
        raise Unsupported("a reduction over an empty tensor")
    axes = args.ints("axes")
    axes = sorted({normalize_axis(a, rank) for a in axes}) if axes else list(range(rank))
    options = schema.ReducerOptionsT()
    options.keepDims = bool(args.bool("keepdim", True))
    code = B.SUM if op.type == T.REDUCE_SUM else B.REDUCE_MAX
    g.operator(code, [g.value(op, 0, PLAIN), g.i32(axes)], [g.output(op, 0, PLAIN)], O.ReducerOptions, options)


@OPERATIONS.implements(T.SUM)
def _sum(g: TfliteBuilder, op: Operation):
    layout = _broadcast_layout(g, op, range(len(op.inputs)))
    parts = [_broadcast_input(g, op, i, layout) for i in range(len(op.inputs))]
    out = g.output(op, 0, layout)
    if len(parts) == 1:
        g.produced(op, 0, g.reshape_copy(parts[0]), layout)
        return
    total = parts[0]
    for k, part in enumerate(parts[1:]):
        last = k == len(parts) - 2
        shape = g.shape_of(out) if last else np.broadcast_shapes(g.shape_of(total), g.shape_of(part))
        total = g.one(B.ADD, [total, part], shape, O.AddOptions, schema.AddOptionsT(), output=out if last else None)


@OPERATIONS.implements(T.LAYER_NORMALIZATION)
def _layer_norm(g: TfliteBuilder, op: Operation):
    """(x - mean) / sqrt(var + eps) * scale + bias over the axes from begin_norm_axis on, composed: two MEANs,
    as Paddle computes the (biased) variance from the centered values."""
    args = unpack(op)
    dims = g.operand_dims(op.inputs[0])
    begin = normalize_axis(args.int("begin_norm_axis"), len(dims))
    tail = dims[begin:]
    scale = TfliteBuilder.constant(op, 1, "scale").astype(np.float32).reshape(tail)
    bias = TfliteBuilder.constant(op, 2, "bias").astype(np.float32).reshape(tail)
    epsilon = np.float32(args.float("epsilon", 1e-5))
    x = g.value(op, 0, PLAIN)
    axes = list(range(begin, len(dims)))
    stats_shape = dims[:begin] + (1,) * len(tail)
    options = schema.ReducerOptionsT()
    options.keepDims = True
    mean = g.one(B.MEAN, [x, g.i32(axes)], stats_shape, O.ReducerOptions, options)
    centered = g.one(B.SUB, [x, mean], dims, O.SubOptions, schema.SubOptionsT())
    variance = g.one(B.MEAN, [g.one(B.SQUARE, [centered], dims), g.i32(axes)], stats_shape, O.ReducerOptions,
                     options)
    shifted = g.one(B.ADD, [variance, g.const(epsilon.reshape(1))], stats_shape, O.AddOptions, schema.AddOptionsT())
    normalized = g.one(B.MUL, [centered, g.one(B.RSQRT, [shifted], stats_shape)], dims, O.MulOptions,
                       schema.MulOptionsT())
    scaled = g.one(B.MUL, [normalized, g.const(scale, hint="scale")], dims, O.MulOptions, schema.MulOptionsT())
    g.operator(B.ADD, [scaled, g.const(bias, hint="bias")], [g.output(op, 0, PLAIN)], O.AddOptions,
               schema.AddOptionsT())


@OPERATIONS.implements(T.GROUP_NORMALIZATION)
def _group_norm(g: TfliteBuilder, op: Operation):
    """Each sample's channel groups standardized, then the per-channel affine, composed on NHWC (FCOS's and SOLOv2's
    head towers): the channels last, [N, H, W, C] is [N, H * W, G, C / G] and a group's statistics are MEANs over
    axes 1 and 3. Paddle's one-pass variance E[x^2] - E[x]^2 (see the operation's reference)."""
    args = unpack(op)
    if op.inputs[0].type.rank != 4:
        raise Unsupported(f"a rank-{op.inputs[0].type.rank} input (NCHW only)")
    groups = args.int("groups")
    scale = TfliteBuilder.constant(op, 1, "scale").astype(np.float32).reshape(-1)
    bias = TfliteBuilder.constant(op, 2, "bias").astype(np.float32).reshape(-1)
    epsilon = np.float32(args.float("epsilon", 1e-5))
    x = g.value(op, 0, NHWC)
    n, h, w, c = g.shape_of(x)
    grouped_shape, stats_shape = (n, h * w, groups, c // groups), (n, 1, groups, 1)
    grouped = g.reshape(x, grouped_shape)
    options = schema.ReducerOptionsT()
    options.keepDims = True
    mean = g.one(B.MEAN, [grouped, g.i32([1, 3])], stats_shape, O.ReducerOptions, options)
    mean_square = g.one(B.MEAN, [g.one(B.SQUARE, [grouped], grouped_shape), g.i32([1, 3])], stats_shape,
                        O.ReducerOptions, options)
    variance = g.one(B.SUB, [mean_square, g.one(B.SQUARE, [mean], stats_shape)], stats_shape, O.SubOptions,
                     schema.SubOptionsT())
    shifted = g.one(B.ADD, [variance, g.const(epsilon.reshape(1))], stats_shape, O.AddOptions, schema.AddOptionsT())
    centered = g.one(B.SUB, [grouped, mean], grouped_shape, O.SubOptions, schema.SubOptionsT())
    normalized = g.one(B.MUL, [centered, g.one(B.RSQRT, [shifted], stats_shape)], grouped_shape, O.MulOptions,
                       schema.MulOptionsT())
    scaled = g.one(B.MUL, [g.reshape(normalized, (n, h, w, c)), g.const(scale, hint="scale")], (n, h, w, c),
                   O.MulOptions, schema.MulOptionsT())
    g.operator(B.ADD, [scaled, g.const(bias, hint="bias")], [g.output(op, 0, NHWC)], O.AddOptions,
               schema.AddOptionsT())


# -- data movement --------------------------------------------------------------------------------------------
@OPERATIONS.implements(T.RESHAPE, T.FLATTEN, T.SQUEEZE, T.UNSQUEEZE)
def _reshape(g: TfliteBuilder, op: Operation):
    shape = g.out_shape(op, 0)
    unknown = [k for k, d in enumerate(op.inputs[0].type.dims) if not known(d)]
    if g.trial and unknown:  # the input's last unknown dim making it as many elements as the result has
        size, result = int(np.prod(g.operand_dims(op.inputs[0]))), int(np.prod(shape))
        if result % max(size, 1) == 0:
            g.fit_trial_input(op, 0, [result // size if k == unknown[-1] else None
                                      for k in range(len(op.inputs[0].type.dims))])
    x = g.plain_memory(op, 0)
    options = schema.ReshapeOptionsT()
    options.newShape = list(shape)
    g.operator(B.RESHAPE, [x, g.i32(shape)], [g.output(op, 0, PLAIN)], O.ReshapeOptions, options)


@OPERATIONS.implements(T.TRANSPOSE)
def _transpose(g: TfliteBuilder, op: Operation):
    rank = op.inputs[0].type.rank
    perm = unpack(op).ints("perm") or list(reversed(range(rank)))
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    if layout == NHWC:  # output axis j is input axis perm[j], stored at inverse(TO_NHWC)[perm[j]]
        perm = [inverse(TO_NHWC)[p] for p in perm]
    if list(perm) == list(range(rank)):
        g.produced(op, 0, g.reshape_copy(x))
        return
    g.operator(B.TRANSPOSE, [x, g.i32(perm)], [g.output(op, 0, PLAIN)])


@OPERATIONS.implements(T.STACK)
def _stack(g: TfliteBuilder, op: Operation):
    count = len(op.inputs) - 1
    out_dims = g.out_shape(op, 0)
    axis = normalize_axis(unpack(op).int("axis"), len(out_dims))
    part_dims = out_dims[:axis] + (1,) + out_dims[axis + 1:]
    parts = [g.reshape(g.value(op, i, PLAIN), part_dims) for i in range(count)]
    _concatenate(g, parts, axis, g.output(op, 0, PLAIN))  # more than 5 parts as a tree, which XNNPACK takes


@OPERATIONS.implements(T.CHANNEL_SHUFFLE)
def _channel_shuffle(g: TfliteBuilder, op: Operation):
    """[N, C, H, W] -> [N, G, C / G, H, W] -> swap the two channel axes -> back: on NHWC, the channels last."""
    group = unpack(op).int("group")
    x = g.value(op, 0, NHWC)
    n, h, w, c = g.shape_of(x)
    if group <= 0 or c % group:
        raise Unsupported(f"group {group} does not divide {c} channels")
    split = g.reshape(x, (n, h, w, group, c // group))
    swapped = g.one(B.TRANSPOSE, [split, g.i32([0, 1, 2, 4, 3])], (n, h, w, c // group, group))
    options = schema.ReshapeOptionsT()
    options.newShape = [n, h, w, c]
    g.operator(B.RESHAPE, [swapped, g.i32([n, h, w, c])], [g.output(op, 0, NHWC)], O.ReshapeOptions, options)


@OPERATIONS.implements(T.CONCAT)
def _concat(g: TfliteBuilder, op: Operation):
    count = len(op.inputs) - 1
    rank = op.outputs[0].type.rank
    axis = normalize_axis(unpack(op).int("axis"), rank)
    layout = _broadcast_layout(g, op, range(count))
    inputs = [g.value(op, i, layout) for i in range(count)]
    _concatenate(g, inputs, _axis_in(layout, axis) if rank == 4 else axis, g.output(op, 0, layout))


@OPERATIONS.implements(T.PAD)
def _pad(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    if args.int("mode") != int(PadMode.CONSTANT):
        raise Unsupported("only the constant mode (XNNPACK has no reflect or edge padding)")
    pads = np.asarray(args.ints("pads"), dtype=np.int32).reshape(-1, 2)
    if (pads < 0).any():
        raise Unsupported(f"negative pads {pads.reshape(-1).tolist()} (a crop)")
    value = args.float("value", 0.0) if len(op.inputs) > 3 and op.inputs[3] is not None else 0.0
    if value != 0.0:
        raise Unsupported(f"a non-zero pad value {value:.6g} (XNNPACK leaves PADV2 to LiteRT's kernels)")
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    if layout == NHWC:
        pads = pads[list(TO_NHWC)]
    g.operator(B.PAD, [x, g.const(pads, np.int32)], [g.output(op, 0, layout)])


@OPERATIONS.implements(T.SLICE)
def _slice(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    rank = op.inputs[0].type.rank
    dims = g.operand_dims(op.inputs[0])
    starts, ends = args.ints("starts"), args.ints("ends")
    axes = args.ints("axes", None) or list(range(len(starts)))
    steps = args.ints("steps", None) or [1] * len(starts)
    if any(s != 1 for s in steps):
        raise Unsupported(f"steps {steps} (XNNPACK slices with step 1 only)")
    begin, size = [0] * rank, list(dims)
    for axis, start, end in zip(axes, starts, ends):
        axis = normalize_axis(axis, rank)
        n = dims[axis]
        start = max(0, min(n, start + n if start < 0 else start))
        end = max(start, min(n, end + n if end < 0 else end))
        begin[axis], size[axis] = start, end - start
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    if layout == NHWC:
        begin, size = [begin[p] for p in TO_NHWC], [size[p] for p in TO_NHWC]
    g.operator(B.SLICE, [x, g.i32(begin), g.i32(size)], [g.output(op, 0, layout)])


@OPERATIONS.implements(T.SPLIT)
def _split(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    rank = op.inputs[0].type.rank
    axis = normalize_axis(args.int("axis"), rank)
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    stored_axis = _axis_in(layout, axis) if rank == 4 else axis
    stored = list(g.shape_of(x))
    start = 0
    for j, operand in enumerate(op.outputs):
        size = g.out_shape(op, j, layout)
        begin = [0] * rank
        begin[stored_axis] = start
        start += size[stored_axis]
        if operand is None:
            continue
        g.operator(B.SLICE, [x, g.i32(begin), g.i32(size)], [g.output(op, j, layout)])
    if start != stored[stored_axis]:
        raise Unsupported(f"the parts cover {start} of {stored[stored_axis]} along axis {axis}")


@OPERATIONS.implements(T.BATCH_NORMALIZATION)
def _batch_norm(g: TfliteBuilder, op: Operation):
    args = unpack(op)
    scale, bias, mean, variance = (TfliteBuilder.constant(op, i, name).astype(np.float32).reshape(-1)
                                   for i, name in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "variance")))
    epsilon = np.float32(args.float("epsilon", 1e-5))
    multiplier = scale / np.sqrt(variance + epsilon)
    offset = bias - mean * multiplier
    rank = op.inputs[0].type.rank
    if rank < 2:
        raise Unsupported("an input of rank < 2 (no channel axis)")
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    shape: list[int] = [1] * rank
    shape[3 if layout == NHWC and rank == 4 else 1] = -1
    out = g.output(op, 0, layout)
    scaled = g.one(B.MUL, [x, g.const(multiplier.reshape(shape))], g.shape_of(out), O.MulOptions, schema.MulOptionsT())
    g.operator(B.ADD, [scaled, g.const(offset.reshape(shape))], [out], O.AddOptions, schema.AddOptionsT())


@OPERATIONS.implements(T.RESIZE_LINEAR)
def _resize(g: TfliteBuilder, op: Operation):
    """RESIZE_BILINEAR. (XNNPACK leaves RESIZE_NEAREST_NEIGHBOR to LiteRT's kernels: RESIZE_NEAREST is not built.)"""
    args = unpack(op)
    if op.inputs[0].type.rank != 4:
        raise Unsupported("an input of rank other than 4 (TFLite resizes NHWC images)")
    align_corners = bool(args.bool("align_corners", False))
    x = g.value(op, 0, NHWC)
    out_h, out_w = g.out_shape(op, 0, NHWC)[1:3]
    if not align_corners and not args.has("shape") and args.has("scales"):
        # Paddle steps through the source by 1 / scale (its kernels' ratio when a scale is given), TFLite by
        # in / out, which differ when in * scale is not a whole number (11 rows at scale 0.5: 2 and 2.2).
        scales = np.asarray(args.constant("scales"), dtype=np.float32).reshape(-1)
        in_hw = g.shape_of(x)[1:3]
        for size, out, scale in zip(in_hw, (out_h, out_w), scales[-2:]):
            if out > 1 and np.float32(1.0 / float(scale)) != np.float32(size / out):
                raise Unsupported(f"a scale of {float(scale):g} from {size} to {out}: Paddle samples every "
                                  f"1 / scale = {1.0 / float(scale):g} source rows, TFLite's RESIZE_BILINEAR every "
                                  f"in / out = {size / out:g}")
    # Paddle's kernels sample an output axis of length 1 at source 0 (their ratio is 0 there), where TFLite's
    # half-pixel centers read source (in - 1) / 2, between the middle rows: such an axis is sliced to its first
    # row (or column) first, which a resize to length 1 then copies.
    in_shape = list(g.shape_of(x))
    first = [in_shape[0], 1 if out_h == 1 else in_shape[1], 1 if out_w == 1 else in_shape[2], in_shape[3]]
    if first != in_shape:
        x = g.one(B.SLICE, [x, g.i32([0, 0, 0, 0]), g.i32(first)], first)
    options = schema.ResizeBilinearOptionsT()
    options.alignCorners = align_corners
    # Paddle's align_mode 0 (without align_corners) samples at half-pixel centers, 1 at the corners' grid
    options.halfPixelCenters = not align_corners and args.int("align_mode", 1) == 0
    g.operator(B.RESIZE_BILINEAR, [x, g.i32([out_h, out_w])], [g.output(op, 0, NHWC)], O.ResizeBilinearOptions,
               options)



# -- quantized models -----------------------------------------------------------------------------------------
@OPERATIONS.implements(T.QUANTIZE)
def _quantize(g: TfliteBuilder, op: Operation):
    """float32 -> symmetric per-layer int8 (TFLite's QUANTIZE: round to nearest, saturate to [-128, 127]), in
    its input's layout."""
    if not int8_tensor_type(op.outputs[0]):
        raise Unsupported(f"a {op.outputs[0].type.precision.name} result (only symmetric per-layer int8 is built)")
    source = g.dequantized_from.get(op.inputs[0].index)
    if source is not None and source[1] == op.outputs[0].type.scale:
        # QUANTIZE(DEQUANTIZE(q)) at q's own scale is q (an int8 conv's result read by the next one in a .nb)
        g.produced(op, 0, source[0].tensor, source[0].layout, quantized=True)
        return
    layout = g.layout_of(op, 0)
    x = g.value(op, 0, layout)
    g.operator(B.QUANTIZE, [x], [g.output(op, 0, layout, quantized=True)])


@OPERATIONS.implements(T.DEQUANTIZE)
def _dequantize(g: TfliteBuilder, op: Operation):
    """int8 -> float32 (TFLite's DEQUANTIZE); the int32 sums of an integer product are built as their real
    values already, so their DEQUANTIZE writes nothing; a quantized constant is dequantized here."""
    operand = op.inputs[0]
    if operand.is_constant:
        g.produced(op, 0, g.reshape_copy(g.const(_real_weights(op, 0, "input"), hint="w")))
        return
    if not (int8_tensor_type(operand) or is_real_valued(operand)):
        raise Unsupported(f"a {operand.type.precision.name} input (symmetric per-layer int8, or an integer "
                          "product's int32 sums)")
    value = g.stored(op, 0, quantized=True)
    if is_real_valued(operand):
        g.produced(op, 0, value.tensor, value.layout)
        return
    result = op.outputs[0]
    g.dequantized_from[result.index] = (value, operand.type.scale)
    readers = g.consumers.get(result.index, [])
    if readers and result.index not in g.model_outputs and all(
            r.type == T.QUANTIZE and r.outputs[0].type.scale == operand.type.scale for r in readers):
        return  # every reader takes the int8 value itself (_quantize): no float result is needed
    g.operator(B.DEQUANTIZE, [value.tensor], [g.output(op, 0, value.layout)])


_CHAIN_ACTIVATIONS = {None: schema.ActivationFunctionType.NONE, T.RELU: schema.ActivationFunctionType.RELU,
                      T.RELU6: schema.ActivationFunctionType.RELU6}


def _plain_or_depthwise(op: Operation) -> bool:
    """A CONV_2D of group 1, or depthwise (one input channel per group): the int8 convolutions built here."""
    group = unpack(op).int("group", 1)
    filter_dims = op.inputs[1].type.dims
    return group == 1 or (filter_dims[1] == 1 and group == op.inputs[0].type.dims[1])


def _int8_conv_operation(g: TfliteBuilder, op: Operation):
    """A quantized CONV_2D of the standard (int8 input, int8 weights per layer or per channel, an int32 bias at
    the input scale x the weight scales, an int8 result): TFLite's int8 convolution computes it so."""
    x_type, w_type = op.inputs[0].type, op.inputs[1].type
    if not int8_tensor_type(op.inputs[0]) or w_type.precision not in (Precision.QUANT_INT8_SYMM_PER_LAYER,
                                                                       Precision.QUANT_INT8_SYMM_PER_CHANNEL):
        raise Unsupported(f"a {x_type.precision.name} input and a {w_type.precision.name} filter for an int8 result "
                          "(symmetric per-layer int8 input, int8 filter)")
    if not _plain_or_depthwise(op):
        raise Unsupported("an int8 grouped convolution (only group 1 or depthwise are built in int8)")
    weights = np.asarray(op.inputs[1].value, dtype=np.int8)
    channels = weights.shape[0]
    w_scales = np.asarray(w_type.scales if w_type.scales is not None else [w_type.scale] * channels, np.float32)
    bias = np.zeros(channels, np.int32)
    bias_operand = op.inputs[2]
    if bias_operand is not None:
        b_type = bias_operand.type
        b_scales = np.asarray(b_type.scales if b_type.scales is not None else [b_type.scale] * channels, np.float64)
        want = np.float64(x_type.scale) * w_scales.astype(np.float64)
        if b_type.precision not in (Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL) \
                or not np.allclose(b_scales, want, rtol=1e-5, atol=0):
            raise Unsupported("a bias other than int32 at the input scale x the filter scales")
        bias = np.asarray(bias_operand.value, np.int32).reshape(-1)
    folded = FoldedConv(weights, w_scales, bias, (np.float32(x_type.scale) * w_scales).astype(np.float32))
    _write_int8_conv(g, op, folded, op, _activation(unpack(op)))


def int8_conv(g: TfliteBuilder, chain: ConvChain) -> bool:
    """The chain's one TFLite int8 CONV_2D / DEPTHWISE_CONV_2D (per-channel weights, int32 bias, the relu as its
    fused clamp) writing the chain's last QUANTIZE; False (nothing written) when the folded constants do not fit
    or the convolution is not one TFLite writes directly, and then the chain converts operation by operation."""
    op = chain.conv
    folded = fold_chain(chain)
    if folded is None or min(unpack(op).ints("pads", None) or [0]) < 0 or not _plain_or_depthwise(op):
        return False
    activation = _CHAIN_ACTIVATIONS[None if chain.relu is None else chain.relu.type]
    if chain.pool is None:
        _write_int8_conv(g, op, folded, chain.quantize, activation)
    else:  # quantizing is monotonic: the max pool of the quantized values is the quantized max pool
        pooled = _write_int8_conv(g, op, folded, None, activation, scale=chain.quantize.outputs[0].type.scale)
        _int8_max_pool(g, chain.pool, pooled, chain.quantize)
    g.absorbed.update(id(link) for link in chain.operations())
    return True


def _write_int8_conv(g: TfliteBuilder, op: Operation, folded: FoldedConv, writer: Operation | None,
                     activation: int, scale: float = 0.0) -> int:
    """One TFLite int8 CONV_2D / DEPTHWISE_CONV_2D of CONV_2D `op` with `folded`'s constants, writing `writer`'s
    int8 output (the operation's own, or its chain's last QUANTIZE), or without a writer a fresh int8 NHWC tensor
    of `scale`; returns the tensor written."""
    args = unpack(op)
    out_channels, group_channels, kh, kw = folded.weights.shape
    group = args.int("group", 1)
    x = g.value(op, 0, NHWC, quantized=True)
    _, h, w, in_channels = g.shape_of(x)
    strides = args.ints("strides", [1, 1])
    pads, dilations = resolve_window(args.int("auto_pad", 0), args.ints("pads", None), (h, w), (kh, kw), strides,
                                     args.ints("dilations", [1, 1]))
    x, padding = _window_padding(g, x, pads, (kh, kw), strides, dilations, pad_allowed=True)
    depthwise = group > 1 and group == in_channels and group_channels == 1
    if depthwise:
        options = schema.DepthwiseConv2DOptionsT()
        options.depthMultiplier = out_channels // in_channels
        filt = g.const(folded.weights.reshape(out_channels, kh, kw).transpose(1, 2, 0)[np.newaxis], np.int8,
                       "filter", quantization(folded.scales, 3))
        code, options_type = B.DEPTHWISE_CONV_2D, O.DepthwiseConv2DOptions
    else:
        options = schema.Conv2DOptionsT()
        filt = g.const(folded.weights.transpose(0, 2, 3, 1), np.int8, "filter", quantization(folded.scales, 0))
        code, options_type = B.CONV_2D, O.Conv2DOptions
    bias = g.const(folded.bias, np.int32, "bias", quantization(folded.bias_scales, 0))
    _window_options(options, padding, strides, dilations, activation)
    if writer is not None:
        out = g.output(writer, 0, NHWC, quantized=True)
    else:
        out = g.tensor(g.out_shape(op, 0, NHWC), "q", np.int8, quantization=quantization(scale))
    g.operator(code, [x, filt, bias], [out], options_type, options)
    _check_window_out(g, op, x, padding, (kh, kw), strides, dilations)
    return out


@OPERATIONS.implements(T.CAST)
def _cast(g: TfliteBuilder, op: Operation):
    """int8 -> float32 (what a Paddle Lite int8 product reads of calib's int8 storage): the int8 tensor has scale 1,
    so TFLite's DEQUANTIZE gives its integers exactly; and float32 -> float32 (Paddle's cast to the dtype a value
    has already, CLIP's vision embeddings), a copy. XNNPACK leaves CAST itself to LiteRT's kernels."""
    source, target = op.inputs[0], op.outputs[0]
    if source.type.precision == target.type.precision == Precision.FLOAT32 and not source.type.is_quantized:
        _assign(g, op)
        return
    if source.is_constant or source.type.precision != Precision.INT8 or target.type.precision != Precision.FLOAT32:
        raise Unsupported(f"{source.type.precision.name} -> {target.type.precision.name} (only int8 -> float32, "
                          "as a DEQUANTIZE at scale 1; XNNPACK leaves CAST to LiteRT's kernels)")
    value = g.stored(op, 0, quantized=True)
    g.operator(B.DEQUANTIZE, [value.tensor], [g.output(op, 0, value.layout)])
