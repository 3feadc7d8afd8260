"""The microsoft_onnxruntime operation table: one implementation per NNAdapter operation, appending ONNX
nodes through `graph.GraphBuilder`.

An implementation takes the builder and the Operation and writes each output to the name `g.out(op, j)`
gives (the builder quantizes it when the output is quantized). Attributes are read by the signature's
slot names (`hal.common.unpack`). Anything ONNX cannot express with the NNAdapter meaning raises
`Unsupported`, so validate_program answers False for it.

Entry point: `OPERATIONS`. Imports this driver's `graph`, hal.common and the standard; never another driver.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from hal.common import (
    Operands,
    OperationTable,
    Unsupported,
    fuse_code_of,
    is_integer_product,
    reduces_an_empty_axis,
    unpack,
)
from hal.microsoft_onnxruntime.graph import RAW_QUANT_OPERATIONS, GraphBuilder, onnx_type
from nnadapter_bridge.nnadapter.codes import (
    UNKNOWN,
    AutoPad,
    FuseCode,
    InterpolateMode,
    PadMode,
    Precision,
    precision_dtype,
)
from nnadapter_bridge.nnadapter.codes import (
    OperationType as T,
)
from nnadapter_bridge.nnadapter.cpu_features import exact_int8_kernels
from nnadapter_bridge.nnadapter.operations.common import known, normalize_axis
from nnadapter_bridge.nnadapter.operations.pool import adaptive_bounds
from nnadapter_bridge.nnadapter.operations.resize import linear_taps
from nnadapter_bridge.nnadapter.operations.shape import squeeze_axes
from nnadapter_bridge.nnadapter.operations.tensor import split_sections
from nnadapter_bridge.nnadapter.operations.window import resolve_window, transpose_out_size
from nnadapter_bridge.nnadapter.types import Operation

OPERATIONS = OperationTable("microsoft_onnxruntime")


def _compute_dtype(op: Operation, i: int = 0):
    """The dtype the operation computes in for input i (float32 for quantized operands)."""
    t = op.inputs[i].type
    return np.dtype(np.float32) if t.is_quantized and op.type not in RAW_QUANT_OPERATIONS else t.dtype


def _fuse_code(args: Operands) -> int:
    code = args.int("fuse_code", 0)
    if code not in {int(c) for c in FuseCode}:
        raise Unsupported(f"fuse_code {code}")
    return code


# -- elementwise ----------------------------------------------------------------------------------------
_BINARY = {T.ADD: "Add", T.SUB: "Sub", T.MUL: "Mul", T.MAX: "Max", T.MIN: "Min"}


@OPERATIONS.implements(T.ADD, T.SUB, T.MUL, T.DIV, T.MAX, T.MIN, T.POW, T.FLOOR_DIV)
def _arithmetic(g: GraphBuilder, op: Operation):
    args = unpack(op)
    a, b = g.x(op, 0), g.x(op, 1)
    dtype = _compute_dtype(op)
    code = _fuse_code(args)
    is_int = dtype.kind in "iu"
    if op.type in _BINARY:
        result = g.one(_BINARY[op.type], [a, b])
    elif op.type == T.DIV:
        result = g.one("Div", [a, b])  # integer Div truncates toward zero, as builtin_device does
    elif op.type == T.POW:
        if is_int:
            raise Unsupported("integer POW (negative exponents truncate differently)")
        result = g.one("Pow", [a, b])
    else:
        result = _floor_divide(g, a, b, dtype)
    g.fuse(result, code, dtype, g.out(op))


def _floor_divide(g: GraphBuilder, a: str, b: str, dtype) -> str:
    """numpy.floor_divide: the quotient rounded toward -inf, computed from the C remainder so that it
    is exact where floor(a / b) would be off by one."""
    zero = g.scalar(0, dtype)
    remainder = g.one("Mod", [a, b], fmod=1)
    nonzero = g.one("Not", [g.one("Equal", [remainder, zero])])
    signs_differ = g.one("Xor", [g.one("Less", [remainder, zero]), g.one("Less", [b, zero])])
    adjust = g.one("Cast", [g.one("And", [nonzero, signs_differ])], to=onnx_type(dtype))
    if dtype.kind in "iu":
        return g.one("Sub", [g.one("Div", [a, b]), adjust])
    # numpy: div = (a - fmod(a, b)) / b, minus 1 when the remainder's sign differs from b's, then
    # snapped to the nearest integer (the subtraction is exact but the division may not be).
    div = g.one("Sub", [g.one("Div", [g.one("Sub", [a, remainder]), b]), adjust])
    floor = g.one("Floor", [div])
    snap = g.one("Cast", [g.one("Greater", [g.one("Sub", [div, floor]), g.scalar(0.5, dtype)])],
                 to=onnx_type(dtype))
    exact = g.one("Add", [floor, snap])
    # b == 0: numpy gives a / b (inf or nan).
    return g.one("Where", [g.one("Equal", [b, zero]), g.one("Div", [a, b]), exact])


@OPERATIONS.implements(T.SUM)
def _sum(g: GraphBuilder, op: Operation):
    total = g.x(op, 0)
    names = [g.x(op, i) for i in range(1, len(op.inputs))]
    for k, name in enumerate(names):
        total = g.one("Add", [total, name], g.out(op) if k == len(names) - 1 else None)
    if not names:
        g.one("Identity", [total], g.out(op))


_COMPARE = {T.EQUAL: "Equal", T.GREATER: "Greater", T.GREATER_EQUAL: "GreaterOrEqual", T.LESS: "Less",
            T.LESS_EQUAL: "LessOrEqual"}


@OPERATIONS.implements(*_COMPARE, T.NOT_EQUAL)
def _compare(g: GraphBuilder, op: Operation):
    a, b = g.x(op, 0), g.x(op, 1)
    if op.inputs[0].type.precision == Precision.BOOL8 and op.type not in (T.EQUAL, T.NOT_EQUAL):
        # ONNX orders numbers only; false < true holds for their int32 values too.
        a, b = (g.one("Cast", [n], to=TensorProto.INT32) for n in (a, b))
    if op.type == T.NOT_EQUAL:
        g.one("Not", [g.one("Equal", [a, b])], g.out(op))
    else:
        g.one(_COMPARE[op.type], [a, b], g.out(op))


@OPERATIONS.implements(T.AND, T.OR, T.XOR)
def _logic(g: GraphBuilder, op: Operation):
    g.one({T.AND: "And", T.OR: "Or", T.XOR: "Xor"}[op.type], [g.x(op, 0), g.x(op, 1)], g.out(op))


@OPERATIONS.implements(T.NOT)
def _not(g: GraphBuilder, op: Operation):
    g.one("Not", [g.x(op, 0)], g.out(op))


@OPERATIONS.implements(T.WHERE)
def _where(g: GraphBuilder, op: Operation):
    g.one("Where", [g.x(op, 0), g.x(op, 1), g.x(op, 2)], g.out(op))


_UNARY = {T.ABS: "Abs", T.COS: "Cos", T.EXP: "Exp", T.FLOOR: "Floor", T.LOG: "Log",
          T.SIN: "Sin", T.TANH: "Tanh", T.ASSIGN: "Identity"}


@OPERATIONS.implements(*_UNARY, T.RELU, T.RELU6, T.RSQRT, T.SIGMOID, T.SQUARE, T.SWISH)
def _unary(g: GraphBuilder, op: Operation):
    x, out = g.x(op, 0), g.out(op)
    dtype = _compute_dtype(op)
    if op.type in _UNARY:
        g.one(_UNARY[op.type], [x], out)
    elif op.type == T.SIGMOID and id(op) in g.sigmoid_gates:
        g.one("Sigmoid", [x], out)  # x * sigmoid(...): the absolute error is harmless there (graph.sigmoid_gates)
    elif op.type == T.SIGMOID:
        # 1 / (1 + e^-x), as Paddle computes it: onnxruntime's CPU Sigmoid is accurate to ~6e-8 absolute only, so
        # its small outputs are off by 1% at x = -13 and 0 below -17, where YOLOX's sqrt(class x objectness)
        # scores meet their 0.001 threshold. Exp overflowing to inf gives 0, as Paddle's kernel does. Four
        # elementwise passes where Sigmoid is one (3-6x its time): the sigmoids that gate a feature keep Sigmoid.
        g.one("Reciprocal", [g.one("Add", [g.one("Exp", [g.one("Neg", [x])]), g.scalar(1, dtype)])], out)
    elif op.type == T.RELU:
        g.relu(x, dtype, out)
    elif op.type == T.RELU6:
        g.one("Clip", [x, g.scalar(0, dtype), g.scalar(6, dtype)], out)
    elif op.type == T.RSQRT:
        g.one("Reciprocal", [g.one("Sqrt", [x])], out)
    elif op.type == T.SQUARE:
        g.one("Mul", [x, x], out)
    else:
        g.one("Mul", [x, g.one("Sigmoid", [x])], out)


@OPERATIONS.implements(T.CAST)
def _cast(g: GraphBuilder, op: Operation):
    args = unpack(op)
    target = precision_dtype(Precision(args.int("dtype")))
    x = g.x(op, 0)
    source = _compute_dtype(op)
    if source.kind == "f" and target.kind in "iu" and target.itemsize < 4:
        # Paddle's static_cast truncates into int32 (INT_MIN for NaN, inf and out of range), then keeps the
        # low bits for a narrower type; onnxruntime's Cast to int32/int64 is that static_cast itself.
        x = g.one("Cast", [x], to=TensorProto.INT32)
    g.one("Cast", [x], g.out(op), to=onnx_type(target))


@OPERATIONS.implements(T.CLIP)
def _clip(g: GraphBuilder, op: Operation):
    dtype = _compute_dtype(op)
    low, high = g.as_scalar(op, 1, dtype), g.as_scalar(op, 2, dtype)
    # min(max(x, low), high) spelled out: when low > high every element is `high`, as the spec says.
    g.one("Min", [g.one("Max", [g.x(op, 0), low]), high], g.out(op))


_SQRT_2 = 1.4142135623730951
_SQRT_2_OVER_PI = 0.7978845608028654


@OPERATIONS.implements(T.GELU)
def _gelu(g: GraphBuilder, op: Operation):
    args = unpack(op)
    x = g.x(op, 0)
    f = lambda v: g.scalar(v, np.float32)  # noqa: E731
    if args.bool("approximate", False):
        cube = g.one("Mul", [g.one("Mul", [x, x]), x])
        inner = g.one("Mul", [g.one("Add", [x, g.one("Mul", [cube, f(0.044715)])]), f(_SQRT_2_OVER_PI)])
        factor = g.one("Add", [g.one("Tanh", [inner]), f(1.0)])
    else:
        # x / sqrt(2), not x * sqrt(1/2): the form onnxruntime's GeluFusion matches (one Gelu kernel instead
        # of five elementwise passes)
        factor = g.one("Add", [g.one("Erf", [g.one("Div", [x, f(_SQRT_2)])]), f(1.0)])
    g.one("Mul", [g.one("Mul", [x, factor]), f(0.5)], g.out(op))


@OPERATIONS.implements(T.HARD_SIGMOID, T.HARD_SWISH)
def _hard_sigmoid(g: GraphBuilder, op: Operation):
    args = unpack(op)
    x = g.x(op, 0)
    alpha, beta = args.float("alpha"), args.float("beta")
    if op.type == T.HARD_SIGMOID:
        g.one("HardSigmoid", [x], g.out(op), alpha=alpha, beta=beta)
    elif alpha <= 0:
        g.one("Mul", [x, g.one("HardSigmoid", [x], alpha=alpha, beta=beta)], g.out(op))
    elif _compute_dtype(op) == np.float32 and abs(alpha - 1.0 / 6.0) < 1e-7 and abs(beta - 0.5) < 1e-7:
        # Paddle's default hard_swish is ONNX HardSwish, one kernel (mobilenet_v3 has 19 of them); it gives x
        # where Paddle's product overflows to inf (x > FLT_MAX / 6), as OpenVINO's HSwish does
        g.one("HardSwish", [x], g.out(op))
    else:
        # Paddle forms x * min(max(x + offset, 0), threshold) (offset = beta / alpha, threshold = 1 / alpha)
        # before scaling: a huge x overflows to inf there, as it does here (x * HardSigmoid(x) would not)
        dtype = _compute_dtype(op)
        shifted = g.one("Add", [x, g.scalar(beta / alpha, dtype)])
        gate = g.one("Min", [g.one("Max", [shifted, g.scalar(0.0, dtype)]), g.scalar(1.0 / alpha, dtype)])
        g.one("Mul", [g.one("Mul", [x, gate]), g.scalar(alpha, dtype)], g.out(op))


@OPERATIONS.implements(T.LEAKY_RELU)
def _leaky_relu(g: GraphBuilder, op: Operation):
    args = unpack(op)
    g.one("LeakyRelu", [g.x(op, 0)], g.out(op), alpha=args.float("alpha"))


@OPERATIONS.implements(T.PRELU)
def _prelu(g: GraphBuilder, op: Operation):
    rank = len(g.dims(op, 0))
    count = op.inputs[1].type.dims[0]
    slope = g.x(op, 1)
    # [C] slopes belong to axis 1; ONNX broadcasts from the right, so give them trailing 1s.
    shape = [-1] + [1] * (rank - 2) if count > 1 else []
    slope = g.one("Reshape", [slope, g.i64(shape)])
    g.one("PRelu", [g.x(op, 0), slope], g.out(op))


@OPERATIONS.implements(T.SOFTPLUS)
def _softplus(g: GraphBuilder, op: Operation):
    args = unpack(op)
    x = g.x(op, 0)
    beta, threshold = args.float("beta"), args.float("threshold")
    scaled = g.one("Mul", [x, g.scalar(beta, np.float32)])
    smooth = g.one("Div", [g.one("Softplus", [scaled]), g.scalar(beta, np.float32)])
    g.one("Where", [g.one("Greater", [scaled, g.scalar(threshold, np.float32)]), x, smooth], g.out(op))


# -- convolution and pooling ----------------------------------------------------------------------------
def _onnx_pads(pads) -> list:
    top, bottom, left, right = pads
    return [int(top), int(left), int(bottom), int(right)]


def _window(g: GraphBuilder, op: Operation, kernel, strides, dilations=(1, 1)):
    """(explicit NNAdapter pads, dilations) for a window op. SAME reads only the spatial dims; where those are
    unknown the pads are None: ONNX's auto_pad SAME_UPPER pads as Paddle's SAME does (ceil(in / stride) outputs,
    the odd element after, dilations reset to 1), whatever the sizes at run time (`_pad_attributes`)."""
    args = unpack(op)
    auto_pad = args.int("auto_pad", int(AutoPad.AUTO_PAD_NONE))
    pads = args.ints("pads", None)
    if pads is not None and len(pads) != 4:
        raise Unsupported(f"pads {pads}")
    if auto_pad == AutoPad.AUTO_PAD_SAME:
        spatial = g.dims(op, 0)[2:]
        if not all(known(d) for d in spatial):
            return None, (1, 1)
    else:
        spatial = (1, 1)
    return resolve_window(auto_pad, pads, spatial, kernel, strides, dilations)


def _pad_attributes(pads) -> dict:
    """The ONNX padding attributes of `_window`'s pads: explicit, or SAME_UPPER (None)."""
    return {"auto_pad": "SAME_UPPER"} if pads is None else {"pads": _onnx_pads(pads)}


def conv_attributes(g: GraphBuilder, op: Operation) -> dict:
    """The ONNX Conv attributes of a CONV_2D (also used by qdq.py's QLinearConv chains)."""
    args = unpack(op)
    filter_dims = g.known_dims(op, 1, "filter")
    strides = args.ints("strides", [1, 1])
    pads, dilations = _window(g, op, filter_dims[2:], strides, args.ints("dilations", [1, 1]))
    return {"kernel_shape": list(filter_dims[2:]), "strides": strides, "dilations": list(dilations),
            **_pad_attributes(pads), "group": args.int("group", 1)}


@OPERATIONS.implements(T.CONV_2D)
def _conv_2d(g: GraphBuilder, op: Operation):
    code = _fuse_code(unpack(op))
    attributes = conv_attributes(g, op)
    # No empty bias input when there is none: onnxruntime's Conv + BatchNormalization fusion skips a Conv
    # whose third input is the empty name.
    inputs = [g.x(op, 0), g.x(op, 1)] + ([g.x(op, 2)] if op.inputs[2] is not None else [])
    conv = g.one("Conv", inputs, **attributes)
    if is_integer_product(op):  # float on the dequantized int8 operands (graph.py's docstring says why)
        g.integer_product_result(op, conv)
        return
    g.fuse(conv, code, np.float32, g.out(op))


@OPERATIONS.implements(T.CONV_2D_TRANSPOSE)
def _conv_2d_transpose(g: GraphBuilder, op: Operation):
    args = unpack(op)
    if 0 in op.outputs[0].type.dims:
        raise Unsupported("CONV_2D_TRANSPOSE with an empty result (onnxruntime's ConvTranspose rejects a 0 dim)")
    filter_dims = g.known_dims(op, 1, "filter")
    kernel = filter_dims[2:]
    strides = args.ints("strides", [1, 1])
    (pads, dilations) = _window(g, op, kernel, strides, args.ints("dilations", [1, 1]))
    if pads is None:  # ONNX's SAME_UPPER for ConvTranspose sizes the output otherwise than Paddle's SAME
        g.known_spatial_dims(op, 0)
    group = args.int("group", 1)
    output_padding = args.ints("output_padding", [0, 0])
    output_shape = args.ints("output_shape", None)
    code = _fuse_code(args)
    top, bottom, left, right = pads
    begin, end = [top, left], [bottom, right]
    if output_shape is not None:
        # builtin_device keeps the window [pad_begin, pad_begin + output) of the full result and
        # zero-extends past its end: ONNX gets the end pad (or output_padding) that makes that size.
        spatial = g.known_spatial_dims(op, 0)
        output_padding = [0, 0]
        for a in (0, 1):
            full = transpose_out_size(spatial[a], kernel[a], strides[a], 0, 0, dilations[a], 0)
            end[a] = full - begin[a] - output_shape[a]
            if end[a] < 0:
                output_padding[a], end[a] = -end[a], 0
    conv = g.one("ConvTranspose", [g.x(op, 0), g.x(op, 1), g.x(op, 2)], kernel_shape=list(kernel), strides=strides,
                 dilations=list(dilations), pads=[begin[0], begin[1], end[0], end[1]], group=group,
                 output_padding=list(output_padding))
    g.fuse(conv, code, np.float32, g.out(op))


def _pool_params(g: GraphBuilder, args: Operands):
    kernel = args.ints("kernel_shape")
    strides = args.ints("strides")
    pads, _ = _window(g, args.operation, kernel, strides)
    return kernel, strides, pads, args.bool("ceil_mode", False)


@OPERATIONS.implements(T.AVERAGE_POOL_2D)
def _average_pool(g: GraphBuilder, op: Operation):
    args = unpack(op)
    kernel, strides, pads, ceil_mode = _pool_params(g, args)
    include_pad = args.bool("count_include_pad", False)
    code = _fuse_code(args)
    if _is_global_window(g, op, kernel, pads):
        g.fuse(g.one("GlobalAveragePool", [g.x(op, 0)]), code, np.float32, g.out(op))
        return
    if ceil_mode:
        _check_no_empty_window(g, op, kernel, strides, pads)
    pooled = g.one("AveragePool", [g.x(op, 0)], kernel_shape=kernel, strides=strides, **_pad_attributes(pads),
                   ceil_mode=int(ceil_mode), count_include_pad=int(include_pad))
    g.fuse(pooled, code, np.float32, g.out(op))


def _is_global_window(g: GraphBuilder, op: Operation, kernel, pads) -> bool:
    """One unpadded window over the whole (known) plane: the pool is a global one. onnxruntime runs
    GlobalAveragePool / GlobalMaxPool about twice as fast as the same window as a plain pool (its NCHWc
    kernels too), which is how Paddle's global and adaptive [1, 1] pools of SE blocks and heads arrive."""
    spatial = g.dims(op, 0)[2:]
    return len(spatial) == 2 and all(known(d) for d in spatial) and list(kernel) == list(spatial) \
        and pads is not None and not any(pads) and tuple(op.outputs[0].type.dims[2:]) == (1, 1)


def _check_no_empty_window(g: GraphBuilder, op: Operation, kernel, strides, pads):
    """ceil_mode: NNAdapter (Paddle) keeps a last window that starts in the end padding; ONNX drops
    it (its last window must start inside the input or the begin padding). Claim only shapes where
    the two agree."""
    spatial = g.known_spatial_dims(op, 0)
    out = tuple(op.outputs[0].type.dims[2:])
    if not all(known(d) for d in out):
        raise Unsupported(f"ceil_mode needs the output's spatial dims {list(out)} known")
    for a in (0, 1):
        if (out[a] - 1) * strides[a] >= spatial[a] + pads[2 * a]:
            raise Unsupported("the last ceil_mode window starts in the end padding (ONNX drops it)")


@OPERATIONS.implements(T.MAX_POOL_2D)
def _max_pool(g: GraphBuilder, op: Operation):
    args = unpack(op)
    kernel, strides, pads, ceil_mode = _pool_params(g, args)
    with_indices = len(op.outputs) > 1 and op.outputs[1] is not None
    code = _fuse_code(args)
    if not with_indices and _is_global_window(g, op, kernel, pads):
        g.fuse(_from_lowest(g, op, g.one("GlobalMaxPool", [g.x(op, 0)])), code, np.float32, g.out(op))
        return
    if ceil_mode:
        _check_no_empty_window(g, op, kernel, strides, pads)
    x = _nan_as_minus_inf(g, op, g.x(op, 0)) if with_indices else g.x(op, 0)
    outputs = g.node("MaxPool", [x], 2 if with_indices else 1, kernel_shape=kernel, strides=strides,
                     **_pad_attributes(pads), ceil_mode=int(ceil_mode))
    # a window holding an input element cannot end at -inf when no element is -inf or NaN (a relu's output)
    real_in_every_window = pads is None or all(max(pads[2 * a], pads[2 * a + 1]) < kernel[a] for a in (0, 1))
    pooled = outputs[0] if real_in_every_window and _finite_from_below(g, op) else _from_lowest(g, op, outputs[0])
    g.fuse(pooled, code, np.float32, g.out(op))
    if with_indices:
        _plane_indices(g, op, outputs[1], outputs[0])


def _per_channel_affine(conv: Operation) -> bool:
    """A CONV_2D computing x * w[c] + b[c] with every w[c] positive and finite and every b[c] finite: a depthwise
    1x1 window of stride 1, no pads, over constants."""
    args = unpack(conv)
    filt, bias = args.value("filter"), args.value("bias") if args.has("bias") else np.zeros(1, np.float32)
    channels = conv.inputs[0].type.dims[1]
    try:
        window = (args.int("group") == channels and args.ints("strides") == [1, 1]
                  and args.ints("dilations", [1, 1]) == [1, 1] and not any(args.ints("pads", [0, 0, 0, 0]))
                  and args.int("auto_pad", 0) != int(AutoPad.AUTO_PAD_SAME))
    except Unsupported:
        return False
    if not window or filt is None or bias is None or filt.shape != (channels, 1, 1, 1):
        return False
    filt, bias = np.asarray(filt, np.float64), np.asarray(bias, np.float64)
    return bool(np.isfinite(filt).all() and (filt > 0).all() and np.isfinite(bias).all())


def _from_lowest(g: GraphBuilder, op: Operation, pooled: str) -> str:
    """Paddle's max pool starts every window at -FLT_MAX (float64 too), so a window of -inf gives -FLT_MAX
    where MaxPool gives -inf. Paddle's scan `x > v ? x : v` never takes NaN; onnxruntime's float32 MaxPool
    does the same, its float64 MaxPool returns NaN, so float64 goes elsewhere."""
    if _compute_dtype(op) == np.float64:
        raise Unsupported("onnxruntime's float64 MaxPool propagates NaN (Paddle's max pool skips it)")
    lowest = -float(np.finfo(np.float32).max)
    return g.one("Max", [pooled, g.scalar(lowest, _compute_dtype(op))])


def _finite_from_below(g: GraphBuilder, op: Operation) -> bool:
    """Whether no element of the pool's input can be -inf or NaN, so the -FLT_MAX fix-up of `_from_lowest` can
    change nothing, and leaving it out keeps onnxruntime's NCHWc layout through the pool (Max has no blocked
    kernel): the input is a relu's exact output, maybe scaled by positive finite constants and shifted by finite
    ones (PP-HGNetV2's learnable affine blocks, also as fusion.scalar_affine_as_depthwise_conv writes them). A
    relu before a max pool is exact (nan_speculation: a run whose outputs or watched relus hold a NaN is run again
    exactly, or the relu is written exactly) unless the user chose ONNX's Relu."""
    if not g.relu_nan_to_zero or _compute_dtype(op) != np.float32:
        return False
    operand = op.inputs[0]
    for _ in range(8):  # a few affine steps back at most
        producer = g.producers.get(operand.index)
        if producer is None:
            return False
        try:
            code = fuse_code_of(producer)
        except Unsupported:  # computed at run time: the producer's own conversion says so
            return False
        if producer.type == T.RELU or code == int(FuseCode.FUSED_RELU):
            return True
        if producer.type == T.CONV_2D and code == int(FuseCode.FUSED_NONE):
            # a learnable affine block as fusion.scalar_affine_as_depthwise_conv writes it: x * filter + bias
            if not _per_channel_affine(producer):
                return False
            operand = producer.inputs[0]
            continue
        if producer.type not in (T.ADD, T.SUB, T.MUL) or code != int(FuseCode.FUSED_NONE):
            return False
        constant = 1 if producer.inputs[1].is_constant else 0 if producer.type != T.SUB else None
        if constant is None or not producer.inputs[constant].is_constant:
            return False
        values = np.asarray(producer.inputs[constant].value, dtype=np.float64)
        if not np.isfinite(values).all() or (producer.type == T.MUL and not (values > 0).all()):
            return False  # +inf times 0 is NaN, times a negative -inf
        operand = producer.inputs[1 - constant]
    return False


def _nan_as_minus_inf(g: GraphBuilder, op: Operation, x: str) -> str:
    """Paddle's max pool with indices takes `if (y < v)` from -FLT_MAX, which never takes a NaN: as -inf (never
    taken either) MaxPool cannot pick it (a window of NaN alone gives -FLT_MAX and index -1 after the fixes)."""
    return g.one("Where", [g.one("IsNaN", [x]), g.scalar(-np.inf, _compute_dtype(op)), x])


def _plane_indices(g: GraphBuilder, op: Operation, flat: str, pooled: str):
    """ONNX indices count over the whole NCHW tensor; NNAdapter's within each H x W plane. Where no element of
    the window exceeds Paddle's -FLT_MAX start (`pooled`, MaxPool's value, is not above it), Paddle's index
    stays -1."""
    h, w = g.known_spatial_dims(op, 0)
    within = g.one("Mod", [flat, g.scalar(h * w, np.int64)])
    taken = g.one("Greater", [pooled, g.scalar(-float(np.finfo(np.float32).max), _compute_dtype(op))])
    within = g.one("Where", [taken, within, g.scalar(-1, np.int64)])
    g.one("Cast", [within], g.out(op, 1), to=onnx_type(op.outputs[1].type.dtype))


def _adaptive_average_by_bins(g: GraphBuilder, op: Operation, in_hw, out_hw) -> None:
    """Adaptive average pooling whose bins are not one regular window (PSPNet's 3x3 and 6x6 bins of a 16x16
    map overlap and differ in size): the bin sums as two products with constant 0/1 bin matrices,
    rows [out_h, H] @ x [N, C, H, W] @ columns [W, out_w], divided by each bin's element count as Paddle divides."""
    dtype = _compute_dtype(op)
    (h, w), (out_h, out_w) = in_hw, out_hw
    starts_h, ends_h = adaptive_bounds(h, out_h)
    starts_w, ends_w = adaptive_bounds(w, out_w)
    positions_h, positions_w = np.arange(h), np.arange(w)
    rows = ((positions_h >= starts_h[:, None]) & (positions_h < ends_h[:, None])).astype(dtype)
    columns = ((positions_w[:, None] >= starts_w) & (positions_w[:, None] < ends_w)).astype(dtype)
    counts = ((ends_h - starts_h)[:, None] * (ends_w - starts_w)[None, :]).astype(dtype)
    sums = g.one("MatMul", [g.one("MatMul", [g.const(rows, dtype), g.x(op, 0)]), g.const(columns, dtype)])
    g.one("Div", [sums, g.const(counts, dtype)], g.out(op))


def _adaptive_max_by_bins(g: GraphBuilder, op: Operation, in_hw, out_hw, with_indices: bool) -> None:
    """Adaptive max pooling whose bins are not one regular window (RTFormer's cross-attention pools a 4x4 map to
    8x8: bins of one element, each read twice; 16 -> 6 gives overlapping bins of 3 and 4), as Paddle's kernel
    scans a bin: from -FLT_MAX and index -1, row by row, an element strictly greater than the best so far takes
    its place (so NaN is never taken and the first of equal maxima wins). Each step is the Gather of every bin's
    element at one offset (a shorter bin repeats its last row or column, which comes after the original in the
    scan and so is never strictly greater), a Greater and two Wheres."""
    dtype = _compute_dtype(op)
    (h, w), (out_h, out_w) = in_hw, out_hw
    starts_h, ends_h = adaptive_bounds(h, out_h)
    starts_w, ends_w = adaptive_bounds(w, out_w)
    x = g.x(op, 0)
    best = g.scalar(-float(np.finfo(np.float32).max), dtype)
    index = g.scalar(-1, np.int64)
    for dy in range(int(np.max(ends_h - starts_h))):
        rows = np.minimum(starts_h + dy, ends_h - 1)
        row_values = g.one("Gather", [x, g.i64(rows)], axis=2)
        for dx in range(int(np.max(ends_w - starts_w))):
            columns = np.minimum(starts_w + dx, ends_w - 1)
            values = g.one("Gather", [row_values, g.i64(columns)], axis=3)
            taken = g.one("Greater", [values, best])
            best = g.one("Where", [taken, values, best])
            if with_indices:
                index = g.one("Where", [taken, g.const(rows[:, None] * w + columns[None, :], np.int64), index])
    g.one("Identity", [best], g.out(op))
    if with_indices:
        g.one("Cast", [index], g.out(op, 1), to=onnx_type(op.outputs[1].type.dtype))


@OPERATIONS.implements(T.ADAPTIVE_AVERAGE_POOL_2D, T.ADAPTIVE_MAX_POOL_2D)
def _adaptive_pool(g: GraphBuilder, op: Operation):
    args = unpack(op)
    out_h, out_w = args.ints("output_shape")
    with_indices = op.type == T.ADAPTIVE_MAX_POOL_2D and len(op.outputs) > 1 and op.outputs[1] is not None
    h, w = g.dims(op, 0)[2:]
    x = g.x(op, 0)
    if (out_h, out_w) == (1, 1) and not with_indices:
        if op.type == T.ADAPTIVE_AVERAGE_POOL_2D:
            g.one("GlobalAveragePool", [x], g.out(op))
        else:
            g.one("Identity", [_from_lowest(g, op, g.one("GlobalMaxPool", [x]))], g.out(op))
        return
    if not (known(h) and known(w)):
        raise Unsupported(f"adaptive pooling of a {h}x{w} input needs its sizes (ONNX has no adaptive pool)")
    if (h % out_h or w % out_w) and op.type == T.ADAPTIVE_AVERAGE_POOL_2D:
        _adaptive_average_by_bins(g, op, (h, w), (out_h, out_w))
        return
    if h % out_h or w % out_w:
        _adaptive_max_by_bins(g, op, (h, w), (out_h, out_w), with_indices)
        return
    kernel = [h // out_h, w // out_w]
    if op.type == T.ADAPTIVE_AVERAGE_POOL_2D:
        g.one("AveragePool", [x], g.out(op), kernel_shape=kernel, strides=kernel)
        return
    if with_indices:
        x = _nan_as_minus_inf(g, op, x)
    outputs = g.node("MaxPool", [x], 2 if with_indices else 1, kernel_shape=kernel, strides=kernel)
    g.one("Identity", [_from_lowest(g, op, outputs[0])], g.out(op))
    if with_indices:
        _plane_indices(g, op, outputs[1], outputs[0])


# -- normalization ---------------------------------------------------------------------------------------
@OPERATIONS.implements(T.BATCH_NORMALIZATION)
def _batch_norm(g: GraphBuilder, op: Operation):
    args = unpack(op)
    eps = args.float("epsilon", 1e-5)
    g.one("BatchNormalization", [g.x(op, i) for i in range(5)], g.out(op), epsilon=eps)


def _standardize(g: GraphBuilder, x: str, axes: list, eps: float) -> str:
    """(x - mean) / sqrt(var + eps) over `axes`, var as the mean of squared deviations."""
    axes_name = g.i64(axes)
    centered = g.one("Sub", [x, g.one("ReduceMean", [x, axes_name], keepdims=1)])
    var = g.one("ReduceMean", [g.one("Mul", [centered, centered]), axes_name], keepdims=1)
    return g.one("Div", [centered, g.one("Sqrt", [g.one("Add", [var, g.scalar(eps, np.float32)])])])


def _channel_affine(g: GraphBuilder, op: Operation, normalized: str, rank: int):
    shape = g.i64([-1] + [1] * (rank - 2))
    scaled = g.one("Mul", [normalized, g.one("Reshape", [g.x(op, 1), shape])])
    g.one("Add", [scaled, g.one("Reshape", [g.x(op, 2), shape])], g.out(op))


@OPERATIONS.implements(T.GROUP_NORMALIZATION)
def _group_norm(g: GraphBuilder, op: Operation):
    args = unpack(op)
    groups = args.int("groups")
    eps = args.float("epsilon", 1e-5)
    x = g.x(op, 0)
    grouped = g.one("Reshape", [x, g.i64([0, groups, -1])])
    normalized = g.one("Reshape", [_standardize(g, grouped, [2], eps), g.one("Shape", [x])])
    _channel_affine(g, op, normalized, len(g.dims(op, 0)))


@OPERATIONS.implements(T.INSTANCE_NORMALIZATION)
def _instance_norm(g: GraphBuilder, op: Operation):
    args = unpack(op)
    rank = len(g.dims(op, 0))
    eps = args.float("epsilon", 1e-5)
    _channel_affine(g, op, _standardize(g, g.x(op, 0), list(range(2, rank)), eps), rank)


@OPERATIONS.implements(T.LAYER_NORMALIZATION)
def _layer_norm(g: GraphBuilder, op: Operation):
    args = unpack(op)
    dims = g.dims(op, 0)
    axis = normalize_axis(args.int("begin_norm_axis"), len(dims))
    eps = args.float("epsilon", 1e-5)
    tail = dims[axis:]
    if all(known(d) for d in tail):
        tail_shape = g.i64(tail)
    else:  # scale and bias take the normalized dims the input has at run time
        tail_shape = g.one("Slice", [g.one("Shape", [g.x(op, 0)]), g.i64([axis]), g.i64([len(dims)])])
    scale = g.one("Reshape", [g.x(op, 1), tail_shape])
    bias = g.one("Reshape", [g.x(op, 2), tail_shape])
    g.node("LayerNormalization", [g.x(op, 0), scale, bias], [g.out(op)], axis=axis, epsilon=eps)


@OPERATIONS.implements(T.LP_NORMALIZATION)
def _lp_norm(g: GraphBuilder, op: Operation):
    args = unpack(op)
    axis = args.int("axis", 1)
    p = args.int("p", 2)
    eps = args.float("epsilon", 1e-5)
    x = g.x(op, 0)
    norm = g.one("ReduceL1" if p == 1 else "ReduceL2", [x, g.i64([axis])], keepdims=1)
    g.one("Div", [x, g.one("Add", [norm, g.scalar(eps, np.float32)])], g.out(op))


@OPERATIONS.implements(T.LRN)
def _lrn(g: GraphBuilder, op: Operation):
    args = unpack(op)
    size = args.int("size", 5)
    bias = args.float("bias", 1.0)
    alpha = args.float("alpha", 1e-4)
    beta = args.float("beta", 0.75)
    # ONNX divides alpha by size; NNAdapter (Paddle) does not.
    g.one("LRN", [g.x(op, 0)], g.out(op), size=size, bias=bias, alpha=alpha * size, beta=beta)


# -- matrix products and softmax --------------------------------------------------------------------------
@OPERATIONS.implements(T.FULLY_CONNECTED)
def _fully_connected(g: GraphBuilder, op: Operation):
    args = unpack(op)
    input_size = g.known_dims(op, 1, "weight")[1]
    code = _fuse_code(args)
    if is_integer_product(op) and exact_int8_kernels():  # int8 x int8 -> the int32 sums the output operand stores
        rows = g.one("Reshape", [_as_uint8(g, op, 0), g.i64([-1, input_size])])
        weight = op.inputs[1]
        transposed = g.const(np.ascontiguousarray(np.asarray(weight.value).T)) if weight.is_constant else \
            g.one("Transpose", [g.raw(op, 1)], perm=[1, 0])
        g.one("MatMulInteger", [rows, transposed, g.scalar(128, np.uint8)], g.operand_name(op.outputs[0]))
        return
    rows = g.one("Reshape", [g.x(op, 0), g.i64([-1, input_size])])
    inputs = [rows, g.x(op, 1)] + ([g.x(op, 2)] if op.inputs[2] is not None else [])
    product = g.one("Gemm", inputs, transB=1)
    if is_integer_product(op):  # in float on the dequantized operands: this CPU's int8 kernels are not exact
        g.integer_product_result(op, product)
        return
    g.fuse(product, code, np.float32, g.out(op))


def _as_uint8(g: GraphBuilder, op: Operation, i: int) -> str:
    """The int8 (symmetric, per layer) input i as uint8 q + 128: MatMulInteger's fast kernel takes uint8
    activations (with a_zero_point 128 the products are the int8 ones). DequantizeLinear -> QuantizeLinear
    with the same scale gives exactly q + 128."""
    t = op.inputs[i].type
    real = g.dequantize(g.raw(op, i), t)
    return g.one("QuantizeLinear", [real, g.scalar(t.scale, np.float32), g.scalar(128, np.uint8)])


def _swap_last_two(g: GraphBuilder, name: str, rank: int) -> str:
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return g.one("Transpose", [name], perm=perm)


@OPERATIONS.implements(T.MAT_MUL)
def _mat_mul(g: GraphBuilder, op: Operation):
    args = unpack(op)
    # int8 x int8 -> the int32 sums the output operand stores, on onnxruntime's int8 kernel where it is exact (else
    # in float on the dequantized operands)
    integer = is_integer_product(op) and exact_int8_kernels()
    x, y = (_as_uint8(g, op, 0), g.raw(op, 1)) if integer else (g.x(op, 0), g.x(op, 1))
    x_rank, y_rank = len(g.dims(op, 0)), len(g.dims(op, 1))
    if (x_rank == y_rank == 2 and op.inputs[1].is_constant and not is_integer_product(op)
            and _compute_dtype(op) == np.float32):
        # A classifier head's matmul (nn.Linear exports matmul + add): onnxruntime's Gemm ran PP-HGNet and
        # ResNet50-vd 1-2% faster than MatMul with the same weight (a 2048 x 1000 product at one row, paired
        # interleaved sessions); MatMulAddFusion, which would make it, stays off (driver.DISABLED_OPTIMIZERS).
        g.one("Gemm", [x, y], g.out(op), transA=int(args.bool("transpose_x", False)),
              transB=int(args.bool("transpose_y", False)))
        return
    if args.bool("transpose_x", False) and x_rank >= 2:
        x = _swap_last_two(g, x, x_rank)
    if args.bool("transpose_y", False) and y_rank >= 2:
        y = _swap_last_two(g, y, y_rank)
    if integer:
        g.one("MatMulInteger", [x, y, g.scalar(128, np.uint8)], g.operand_name(op.outputs[0]))
        return
    if is_integer_product(op):
        g.integer_product_result(op, g.one("MatMul", [x, y]))
        return
    g.one("MatMul", [x, y], g.out(op))


@OPERATIONS.implements(T.SOFTMAX, T.LOG_SOFTMAX)
def _softmax(g: GraphBuilder, op: Operation):
    args = unpack(op)
    axis = args.int("axis", 1)
    g.one("Softmax" if op.type == T.SOFTMAX else "LogSoftmax", [g.x(op, 0)], g.out(op), axis=axis)


# -- pad and resize --------------------------------------------------------------------------------------
_ONNX_PAD_MODES = {PadMode.CONSTANT: "constant", PadMode.REFLECT: "reflect", PadMode.REPLICATE: "edge",
                   PadMode.EDGE: "edge"}


@OPERATIONS.implements(T.PAD)
def _pad(g: GraphBuilder, op: Operation):
    args = unpack(op)
    pads = args.ints("pads")
    mode = PadMode(args.int("mode"))
    if mode not in _ONNX_PAD_MODES:
        raise Unsupported(f"pad mode {mode.name}")
    rank = len(g.dims(op, 0))
    x = g.x(op, 0)
    befores, afters = pads[0::2], pads[1::2]
    if any(p < 0 for p in pads):
        # Negative amounts crop first (as builtin_device does), then the rest pads.
        ends = [a if a < 0 else np.iinfo(np.int64).max for a in afters]
        x = g.one("Slice", [x, g.i64([max(-b, 0) for b in befores]), g.i64(ends), g.i64(list(range(rank)))])
    widths = g.i64([max(b, 0) for b in befores] + [max(a, 0) for a in afters])
    value = None
    if mode == PadMode.CONSTANT and len(op.inputs) > 3 and op.inputs[3] is not None:
        value = g.as_scalar(op, 3, _compute_dtype(op))
    g.one("Pad", [x, widths, value], g.out(op), mode=_ONNX_PAD_MODES[mode])


def _resize(g: GraphBuilder, op: Operation, nearest: bool):
    dims = g.dims(op, 0)
    rank = len(dims)
    out_dims = op.outputs[0].type.dims
    if all(known(d) for d in list(dims[-2:]) + list(out_dims[-2:])) and list(dims[-2:]) == list(out_dims[-2:]):
        # Paddle's interpolate kernels copy the input when the output size equals it (an inf stays inf where
        # interpolating with a zero weight would give NaN)
        g.one("Identity", [g.x(op, 0)], g.out(op))
        return
    args = unpack(op)
    align_corners = args.bool("align_corners", False)
    align_mode = 1 if nearest else args.int("align_mode", 1)
    x = g.x(op, 0)
    sizes = scales = None
    if args.has("shape"):
        shape = args.shape_value
        if shape is not None:
            head = [int(d) for d in dims[:-2]]
            if not all(known(d) for d in head):
                head_name = g.one("Slice", [g.one("Shape", [x]), g.i64([0]), g.i64([rank - 2])])
                sizes = g.one("Concat", [head_name, g.i64(np.asarray(shape).reshape(-1))], axis=0)
            else:
                sizes = g.i64(head + [int(s) for s in np.asarray(shape).reshape(-1)])
        else:
            head_name = g.one("Slice", [g.one("Shape", [x]), g.i64([0]), g.i64([rank - 2])])
            sizes = g.one("Concat", [head_name, g.as_i64(op, 1)], axis=0)
    else:
        factors = args.scales_value
        if factors is None:
            raise Unsupported("scales must be a constant")
        factors = [float(s) for s in np.asarray(factors).reshape(-1)]
        # Paddle truncates float32(in * scale); ONNX floors the same product, and both read source
        # coordinates as out / scale: the input's sizes need not be known when the model is built.
        scales = g.const(np.float32([1.0] * (rank - 2) + factors))
    if align_corners and not nearest and _resize_linear_by_taps(g, op):
        return
    if align_corners:
        transform = "align_corners"
    elif nearest or align_mode == 1:
        transform = "asymmetric"
    elif all(known(d) and int(d) > 1 for d in out_dims[-2:]):
        # the same coordinates as pytorch_half_pixel when no output axis has length 1; onnxruntime's NCHWc layout
        # pass takes a half_pixel linear Resize into its blocked Upsample (BiSeNetV2's last 8x resize: 1.9 ->
        # 1.5 ms), and a pytorch_half_pixel one not
        transform = "half_pixel"
    else:
        transform = "pytorch_half_pixel"  # half-pixel, but a single output row reads row 0 (as Paddle)
    attrs = dict(coordinate_transformation_mode=transform, mode="nearest" if nearest else "linear")
    if nearest:
        attrs["nearest_mode"] = "round_prefer_ceil" if align_corners else "floor"
    g.one("Resize", [x, None, scales, sizes], g.out(op), **attrs)


def _resize_linear_by_taps(g: GraphBuilder, op: Operation) -> bool:
    """A bilinear align_corners resize between known sizes as Paddle's kernel computes it: the source rows and
    columns GATHERed at the taps Paddle picks, weighted by its float32 weights, summed term by term in its order.
    onnxruntime's Resize places a source coordinate at out * (in - 1) / (out - 1), one rounding; Paddle at
    float32((in - 1) / (out - 1)) * out, two: a position one ulp apart, which a steep input turns into 3e-5 on
    values of 1 (128 -> 32 px) and LPSNet's align_corners resizes into 4e-4 on its logits. False (nothing built)
    when a size is unknown."""
    dims, out_dims = g.dims(op, 0), op.outputs[0].type.dims
    sizes = [int(d) for d in list(dims[-2:]) + list(out_dims[-2:]) if known(d)]
    if len(dims) < 2 or len(sizes) != 4:
        return False
    h, w, oh, ow = sizes
    dtype = _compute_dtype(op)
    rank = len(dims)

    def taps(size, out):
        ratio = np.float32(size - 1) / np.float32(out - 1) if out > 1 else np.float32(0)
        return linear_taps(size, out, ratio, half_pixel=False, src_in_double=False)

    y_n, y_s, d_n, d_s = taps(h, oh)
    x_w, x_e, d_w, d_e = taps(w, ow)
    x = g.x(op, 0)
    rows_n, rows_s = (g.one("Gather", [x, g.i64(index)], axis=rank - 2) for index in (y_n, y_s))
    row_weights = [g.const(d.astype(dtype).reshape(-1, 1)) for d in (d_s, d_n)]
    column_weights = [g.const(d.astype(dtype).reshape(1, -1)) for d in (d_e, d_w)]
    terms = []  # Paddle's order: nw*d_s*d_e + sw*d_n*d_e + ne*d_s*d_w + se*d_n*d_w
    for column, column_weight in zip((x_w, x_e), column_weights):
        for rows, row_weight in zip((rows_n, rows_s), row_weights):
            corner = g.one("Gather", [rows, g.i64(column)], axis=rank - 1)
            terms.append(g.one("Mul", [g.one("Mul", [corner, row_weight]), column_weight]))
    total = g.one("Add", [terms[0], terms[1]])
    total = g.one("Add", [total, terms[2]])
    g.one("Add", [total, terms[3]], g.out(op))
    return True


@OPERATIONS.implements(T.RESIZE_NEAREST)
def _resize_nearest(g: GraphBuilder, op: Operation):
    _resize(g, op, True)


@OPERATIONS.implements(T.RESIZE_LINEAR)
def _resize_linear(g: GraphBuilder, op: Operation):
    _resize(g, op, False)


# -- quantization ---------------------------------------------------------------------------------------
@OPERATIONS.implements(T.QUANTIZE)
def _quantize(g: GraphBuilder, op: Operation):
    g.quantize(g.x(op, 0), op.outputs[0].type, g.out(op))


@OPERATIONS.implements(T.DEQUANTIZE)
def _dequantize(g: GraphBuilder, op: Operation):
    real = g.float_results.get(op.inputs[0].index)  # an integer product's float result (graph.py)
    if real is None:
        real = g.dequantize(g.raw(op, 0), op.inputs[0].type)
    g.one("Identity", [real], g.out(op))


# -- reductions, arg, top-k, cum-sum ----------------------------------------------------------------------
@OPERATIONS.implements(T.REDUCE_MEAN, T.REDUCE_MAX, T.REDUCE_SUM)
def _reduce(g: GraphBuilder, op: Operation):
    args = unpack(op)
    keepdim = args.bool("keepdim", False)
    onnx_op = {T.REDUCE_MEAN: "ReduceMean", T.REDUCE_MAX: "ReduceMax", T.REDUCE_SUM: "ReduceSum"}[op.type]
    if op.type == T.REDUCE_MEAN and _compute_dtype(op).kind != "f":
        raise Unsupported("integer mean")
    if op.type == T.REDUCE_MEAN and reduces_an_empty_axis(op):
        raise Unsupported("a mean over an empty axis (ReduceMean gives 0, Paddle NaN)")
    if op.type == T.REDUCE_SUM and _compute_dtype(op) == np.int64 and not reduces_an_empty_axis(op):
        _int64_sum(g, op, keepdim)
        return
    g.one(onnx_op, [g.x(op, 0), g.as_i64(op, 1)], g.out(op), keepdims=int(keepdim))


def _int64_sum(g: GraphBuilder, op: Operation, keepdim: bool) -> None:
    """REDUCE_SUM of int64, exactly: onnxruntime's ReduceSum (and ReduceProd) accumulate int64 in double (measured
    with onnxruntime 1.32, benchmarks/probe_int64_onnxruntime.py: 2 x (2^53 + 1) gives 2^54, a sum beyond int64
    INT64_MIN), where its CumSum adds in int64 and wraps as Paddle's kernel does: the sum along each reduced axis is
    the last running sum. (A sum over an empty axis is 0 either way and stays a ReduceSum.)"""
    dims = g.dims(op, 0)
    axes = unpack(op).ints("axes")
    axes = sorted({normalize_axis(a, len(dims)) for a in axes}) if axes else list(range(len(dims)))
    if any(not known(dims[a]) for a in axes):
        raise Unsupported("an int64 sum along an axis of unknown length (onnxruntime's ReduceSum adds int64 in "
                          "double; the exact form needs the length)")
    x = g.x(op, 0)
    for axis in axes:
        running = g.one("CumSum", [x, g.scalar(axis, np.int64)])
        x = g.one("Slice", [running, g.i64([-1]), g.i64([np.iinfo(np.int64).max]), g.i64([axis])])
    if keepdim or not axes:
        g.one("Identity", [x], g.out(op))
    else:
        g.one("Squeeze", [x, g.i64(axes)], g.out(op))


@OPERATIONS.implements(T.ARG_MAX, T.ARG_MIN)
def _arg(g: GraphBuilder, op: Operation):
    args = unpack(op)
    axis = args.int("axis")
    keepdim = args.bool("keepdim", False)
    index = g.one("ArgMax" if op.type == T.ARG_MAX else "ArgMin", [g.x(op, 0)], axis=axis, keepdims=int(keepdim))
    g.one("Cast", [index], g.out(op), to=onnx_type(op.outputs[0].type.dtype))


@OPERATIONS.implements(T.CUM_SUM)
def _cum_sum(g: GraphBuilder, op: Operation):
    args = unpack(op)
    if not g.dims(op, 0):
        raise Unsupported("cumulative sum of a 0-d tensor")
    axis = args.int("axis", -1)
    g.one("CumSum", [g.x(op, 0), g.scalar(axis, np.int64)], g.out(op),
          exclusive=int(args.bool("exclusive", False)), reverse=int(args.bool("reverse", False)))


@OPERATIONS.implements(T.TOP_K)
def _top_k(g: GraphBuilder, op: Operation):
    args = unpack(op)
    axis = args.int("axis")
    largest = args.bool("largest", True)
    k = g.as_i64(op, 1)
    if g.value(op, 1) is None:
        # ONNX TopK takes K of shape [1] only; a run-time K may be 0-d (Paddle's top_k_v2 takes a 0-d K tensor:
        # PointRend's point count is the min of a concat), which onnxruntime refuses at run time.
        k = g.one("Reshape", [k, g.i64([1])])
    values, indices = g.node("TopK", [g.x(op, 0), k], 2, axis=axis, largest=int(largest), sorted=1)
    g.one("Identity", [values], g.out(op, 0))
    g.one("Cast", [indices], g.out(op, 1), to=onnx_type(op.outputs[1].type.dtype))


# -- reshaping ----------------------------------------------------------------------------------------
@OPERATIONS.implements(T.RESHAPE)
def _reshape(g: GraphBuilder, op: Operation):
    # ONNX Reshape (allowzero=0) has NNAdapter's meaning: 0 copies the input dim, one -1 is inferred.
    g.one("Reshape", [g.x(op, 0), g.as_i64(op, 1)], g.out(op))


@OPERATIONS.implements(T.FLATTEN)
def _flatten(g: GraphBuilder, op: Operation):
    args = unpack(op)
    dims = g.dims(op, 0)
    rank = len(dims)
    if rank == 0:
        g.one("Reshape", [g.x(op, 0), g.i64([1])], g.out(op))
        return
    start = normalize_axis(args.int("start_axis"), rank)
    end = normalize_axis(args.int("end_axis"), rank)
    after = dims[end + 1:]
    x = g.x(op, 0)
    if all(known(d) for d in after):
        target = g.i64([0] * start + [-1] + list(after))
    else:  # the trailing dims as the input has them at run time (Reshape's 0 would copy the wrong positions)
        tail = g.one("Slice", [g.one("Shape", [x]), g.i64([end + 1]), g.i64([rank])])
        target = g.one("Concat", [g.i64([0] * start + [-1]), tail], axis=0)
    g.one("Reshape", [x, target], g.out(op))


@OPERATIONS.implements(T.SQUEEZE)
def _squeeze(g: GraphBuilder, op: Operation):
    args = unpack(op)
    has_axes = len(op.inputs) > 1 and op.inputs[1] is not None
    axes = args.ints("axes", None) if has_axes else None
    removed = squeeze_axes(g.dims(op, 0), axes)
    if not removed:
        g.one("Identity", [g.x(op, 0)], g.out(op))
    else:
        g.one("Squeeze", [g.x(op, 0), g.i64(removed)], g.out(op))


@OPERATIONS.implements(T.UNSQUEEZE)
def _unsqueeze(g: GraphBuilder, op: Operation):
    args = unpack(op)
    axes = args.ints("axes")
    rank = len(g.dims(op, 0))
    x = g.x(op, 0)
    # Paddle inserts one axis at a time, each counted in the rank reached so far.
    for k, a in enumerate(axes):
        position = a + rank + 1 if a < 0 else a
        x = g.one("Unsqueeze", [x, g.i64([position])], g.out(op) if k == len(axes) - 1 else None)
        rank += 1
    if not axes:
        g.one("Identity", [x], g.out(op))


@OPERATIONS.implements(T.TRANSPOSE)
def _transpose(g: GraphBuilder, op: Operation):
    args = unpack(op)
    rank = len(g.dims(op, 0))
    perm = args.ints("perm") or list(range(rank))[::-1]
    g.one("Transpose", [g.x(op, 0)], g.out(op), perm=[normalize_axis(p, rank) for p in perm])


@OPERATIONS.implements(T.CHANNEL_SHUFFLE)
def _channel_shuffle(g: GraphBuilder, op: Operation):
    args = unpack(op)
    group = args.int("group")
    channels = g.dims(op, 0)[1]
    if not known(channels):
        raise Unsupported("the channel count must be known")
    x = g.x(op, 0)
    grouped = g.one("Reshape", [x, g.i64([0, group, channels // group, -1])])
    swapped = g.one("Transpose", [grouped], perm=[0, 2, 1, 3])
    g.one("Reshape", [swapped, g.one("Shape", [x])], g.out(op))


# -- slicing, joining, splitting -----------------------------------------------------------------------
@OPERATIONS.implements(T.SLICE)
def _slice(g: GraphBuilder, op: Operation):
    args = unpack(op)
    rank = len(g.dims(op, 0))
    starts = g.as_i64(op, 2)
    count = op.inputs[2].type.dims[0] if op.inputs[2].type.dims else 1
    if op.inputs[1] is None:
        if not known(count):
            raise Unsupported("starts of unknown length without axes")
        axes = g.i64(list(range(count)))
    else:
        axes = g.i64([normalize_axis(a, rank) for a in args.ints("axes", None)])
    steps = g.as_i64(op, 4) if len(op.inputs) > 4 and op.inputs[4] is not None else None
    g.one("Slice", [g.x(op, 0), starts, g.as_i64(op, 3), axes, steps], g.out(op))


@OPERATIONS.implements(T.CONCAT)
def _concat(g: GraphBuilder, op: Operation):
    args = unpack(op)
    n = len(op.inputs) - 1
    axis = normalize_axis(args.int("axis"), len(g.dims(op, 0)))
    g.one("Concat", [g.x(op, i) for i in range(n)], g.out(op), axis=axis)


@OPERATIONS.implements(T.STACK)
def _stack(g: GraphBuilder, op: Operation):
    args = unpack(op)
    n = len(op.inputs) - 1
    axis = normalize_axis(args.int("axis"), len(g.dims(op, 0)) + 1)
    parts = [g.one("Unsqueeze", [g.x(op, i), g.i64([axis])]) for i in range(n)]
    g.one("Concat", parts, g.out(op), axis=axis)


@OPERATIONS.implements(T.SPLIT)
def _split(g: GraphBuilder, op: Operation):
    args = unpack(op)
    dims = g.dims(op, 0)
    axis = normalize_axis(args.int("axis"), len(dims))
    sizes = split_sections(dims[axis], args.ints("split"))
    if not all(known(s) for s in sizes):
        raise Unsupported("an inferred (-1) split size needs the axis size")
    g.node("Split", [g.x(op, 0), g.i64(sizes)], [g.out(op, j) for j in range(len(op.outputs))], axis=axis)


@OPERATIONS.implements(T.UNSTACK)
def _unstack(g: GraphBuilder, op: Operation):
    args = unpack(op)
    dims = g.dims(op, 0)
    axis = normalize_axis(args.int("axis"), len(dims))
    num = args.int("num")
    parts = g.node("Split", [g.x(op, 0), g.i64([1] * num)], num, axis=axis)
    for j, part in enumerate(parts):
        g.one("Squeeze", [part, g.i64([axis])], g.out(op, j))


@OPERATIONS.implements(T.MESHGRID)
def _meshgrid(g: GraphBuilder, op: Operation):
    n = len(op.inputs)
    vectors = [g.x(op, i) for i in range(n)]
    full = g.one("Concat", [g.one("Shape", [v]) for v in vectors], axis=0)
    for i, v in enumerate(vectors):
        shape = [1] * n
        shape[i] = -1
        g.one("Expand", [g.one("Reshape", [v, g.i64(shape)]), full], g.out(op, i))


# -- broadcasting, gathering, moving ---------------------------------------------------------------------
@OPERATIONS.implements(T.TILE)
def _tile(g: GraphBuilder, op: Operation):
    args = unpack(op)
    rank = len(g.dims(op, 0))
    x = g.x(op, 0)
    if args.repeats_value is None:
        # numpy.tile's rule as below, by the count of run-time repeats, which their operand's dims give
        count = op.inputs[1].type.dims[0] if op.inputs[1].type.rank == 1 else UNKNOWN
        if not known(count):
            raise Unsupported("run-time repeats of unknown count")
        repeats = g.as_i64(op, 1)
        if count > rank:
            x = g.one("Unsqueeze", [x, g.i64(list(range(count - rank)))])
        elif count < rank:
            repeats = g.one("Concat", [g.i64([1] * (rank - count)), repeats], axis=0)
        g.one("Tile", [x, repeats], g.out(op))
        return
    repeats = args.ints("repeats")
    # numpy.tile: the shorter of (dims, repeats) gets leading 1s.
    if len(repeats) > rank:
        x = g.one("Unsqueeze", [x, g.i64(list(range(len(repeats) - rank)))])
    repeats = [1] * (rank - len(repeats)) + repeats
    g.one("Tile", [x, g.i64(repeats)], g.out(op))


@OPERATIONS.implements(T.EXPAND)
def _expand(g: GraphBuilder, op: Operation):
    # ONNX Expand broadcasts both ways, so NNAdapter's -1 ("keep the input dim") becomes 1.
    shape = unpack(op).shape_value
    if shape is not None:
        target = g.i64([1 if int(s) == -1 else int(s) for s in np.asarray(shape).reshape(-1)])
    else:
        given = g.as_i64(op, 1)
        target = g.one("Where", [g.one("Equal", [given, g.i64([-1])]), g.i64([1]), given])
    g.one("Expand", [g.x(op, 0), target], g.out(op))


@OPERATIONS.implements(T.GATHER)
def _gather(g: GraphBuilder, op: Operation):
    args = unpack(op)
    axis = normalize_axis(args.int("axis"), len(g.dims(op, 0)))
    g.one("Gather", [g.x(op, 0), g.raw(op, 1)], g.out(op), axis=axis)


@OPERATIONS.implements(T.ROLL)
def _roll(g: GraphBuilder, op: Operation):
    args = unpack(op)
    shifts = args.ints("shifts")
    axes = args.ints("axes", None) if len(op.inputs) > 2 else None
    x = g.x(op, 0)
    if not axes:  # over the flattened tensor: its size decides where it wraps
        dims = g.known_dims(op, 0, "input")
        flat = g.one("Reshape", [x, g.i64([-1])])
        rolled = _roll_axis(g, flat, 0, int(np.prod(dims)), shifts[0])
        g.one("Reshape", [rolled, g.i64(list(dims))], g.out(op))
        return
    dims = g.dims(op, 0)
    for shift, axis in zip(shifts, axes):
        axis = normalize_axis(axis, len(dims))
        if not known(dims[axis]):  # only the rolled axes' sizes decide where they wrap
            raise Unsupported(f"ROLL along axis {axis}, whose size is unknown")
        x = _roll_axis(g, x, axis, dims[axis], shift)
    g.one("Identity", [x], g.out(op))


def _roll_axis(g: GraphBuilder, x: str, axis: int, size: int, shift: int) -> str:
    """numpy.roll along one axis: the last `shift` entries move to the front (two slices, one concat)."""
    shift = shift % size if size else 0
    if shift == 0:
        return x
    axes = g.i64([axis])
    tail = g.one("Slice", [x, g.i64([size - shift]), g.i64([size]), axes])
    head = g.one("Slice", [x, g.i64([0]), g.i64([size - shift]), axes])
    return g.one("Concat", [tail, head], axis=axis)


# -- shapes and generated tensors ------------------------------------------------------------------------
@OPERATIONS.implements(T.SHAPE)
def _shape(g: GraphBuilder, op: Operation):
    g.one("Cast", [g.one("Shape", [g.raw(op, 0)])], g.out(op), to=onnx_type(op.outputs[0].type.dtype))


@OPERATIONS.implements(T.FILL)
def _fill(g: GraphBuilder, op: Operation):
    value = g.as_scalar(op, 1, op.inputs[1].type.dtype)
    g.one("Expand", [value, g.as_i64(op, 0)], g.out(op))


@OPERATIONS.implements(T.FILL_LIKE)
def _fill_like(g: GraphBuilder, op: Operation):
    value = g.as_scalar(op, 1, op.inputs[1].type.dtype)
    g.one("Expand", [value, g.one("Shape", [g.raw(op, 0)])], g.out(op))


@OPERATIONS.implements(T.RANGE)
def _range(g: GraphBuilder, op: Operation):
    dtype = op.inputs[0].type.dtype
    start, end, step = (g.as_scalar(op, i, dtype) for i in range(3))
    if dtype.kind != "f":
        g.one("Range", [start, end, step], g.out(op))
        return
    # onnxruntime accumulates start + step + step ...; builtin_device (as Paddle) computes start + i * step.
    count = g.one("Size", [g.one("Range", [start, end, step])])
    index = g.one("Cast", [g.one("Range", [g.scalar(0, np.int64), count, g.scalar(1, np.int64)])],
                  to=onnx_type(dtype))
    g.one("Add", [g.one("Mul", [index, step]), start], g.out(op))


# -- sampling and detection ---------------------------------------------------------------------------
_GRID_PAD_MODES = {PadMode.NONE: "zeros", PadMode.CONSTANT: "zeros", PadMode.EDGE: "border",
                   PadMode.REPLICATE: "border", PadMode.REFLECT: "reflection"}
_GRID_MODES = {InterpolateMode.NONE: "bilinear", InterpolateMode.BILINEAR: "bilinear",
               InterpolateMode.NEAREST: "nearest"}


@OPERATIONS.implements(T.GRID_SAMPLE)
def _grid_sample(g: GraphBuilder, op: Operation):
    args = unpack(op)
    align_corners = args.bool("align_corners", False)
    mode = InterpolateMode(args.int("mode"))
    pad_mode = PadMode(args.int("pad_mode"))
    if mode == InterpolateMode.NEAREST and pad_mode == PadMode.REFLECT:
        # onnxruntime 1.2x rounds a coordinate reflected onto an exact half pixel (2.5) up; Paddle rounds it
        # half to even: a whole-pixel difference (grid y = -2.5 on a 4-row input, align_corners false)
        raise Unsupported("GRID_SAMPLE nearest with reflection (a reflected half-pixel tie rounds the other way)")
    grid = g.x(op, 1)
    # onnxruntime's GridSample reads 0 (or the border) at an infinite or NaN coordinate, where Paddle's kernel gives
    # NaN: a grid holding one is a run-time fault, and the part runs elsewhere for it
    g.faults.append((g.any_true(g.one("Or", [g.one("IsNaN", [grid]), g.one("IsInf", [grid])])),
                     f"{op.label()}: the grid holds infinity or NaN, where onnxruntime's GridSample reads 0 or the "
                     "border and Paddle gives NaN (the part runs elsewhere)", op))
    g.one("GridSample", [g.x(op, 0), grid], g.out(op), align_corners=int(align_corners),
          mode=_GRID_MODES[mode], padding_mode=_GRID_PAD_MODES[pad_mode])


@OPERATIONS.implements(T.ROI_ALIGN)
def _roi_align(g: GraphBuilder, op: Operation):
    args = unpack(op)
    out_h, out_w = args.int("output_height"), args.int("output_width")
    sampling_ratio = args.int("sampling_ratio")
    spatial_scale = args.float("spatial_scale")
    aligned = args.bool("aligned", False)
    batch = g.one("Cast", [g.raw(op, 2)], to=TensorProto.INT64)
    g.one("RoiAlign", [g.x(op, 0), g.x(op, 1), batch], g.out(op), output_height=out_h, output_width=out_w,
          sampling_ratio=max(sampling_ratio, 0), spatial_scale=spatial_scale, mode="avg",
          coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel")


@OPERATIONS.implements(T.DEFORMABLE_CONV_2D)
def _deformable_conv(g: GraphBuilder, op: Operation):
    args = unpack(op)
    # ONNX DeformConv reads offsets as Paddle does: per offset group, per kernel tap, a (dy, dx) pair.
    filter_dims = g.known_dims(op, 3, "filter")
    pads = args.ints("pads", [0, 0, 0, 0])
    strides = args.ints("strides", [1, 1])
    group = args.int("group", 1)
    offset_group = args.int("deformable_group", 1)
    dilations = args.ints("dilations", [1, 1])
    code = _fuse_code(args)
    inputs = [g.x(op, 0), g.x(op, 3), g.x(op, 1), g.x(op, 4), g.x(op, 2)]
    conv = g.one("DeformConv", inputs, kernel_shape=list(filter_dims[2:]), pads=_onnx_pads(pads),
                 strides=strides, dilations=dilations, group=group, offset_group=offset_group)
    g.fuse(conv, code, np.float32, g.out(op))


# NON_MAX_SUPPRESSION (Paddle's multiclass_nms3) is composed around ONNX NonMaxSuppression in nms.py, which
# registers itself into OPERATIONS (it needs the table defined above).
from hal.microsoft_onnxruntime import nms as _nms  # noqa: E402,F401
