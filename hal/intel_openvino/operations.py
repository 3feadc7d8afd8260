"""The intel_openvino operation table: one implementation per NNAdapter operation, as OpenVINO opset nodes.

An implementation takes the GraphBuilder and the Operation and returns one real-valued `ov.Output` (or None
for an absent optional output) per operation output; the builder handles quantized storage. Attributes are read by the
signature's slot names (`hal.common.unpack`). An implementation raises `Unsupported` for every attribute
combination OpenVINO cannot express with the NNAdapter meaning (builtin_device's kernels are the
reference), so validate_program answers False for it. NON_MAX_SUPPRESSION lives in nms.py (MulticlassNms
with the attribute mapping that gives Paddle's answer), registered by the import at the end.

Entry point: `OPERATIONS`. Imports this driver's `graph`, hal.common and the standard; never another driver.
"""
from __future__ import annotations

import numpy as np
import openvino as ov

from hal.common import Operands, OperationTable, Unsupported, reduces_an_empty_axis, unpack
from hal.intel_openvino.graph import (
    ELEMENT_TYPES,
    f32,
    i64,
    like,
    opset,
    to_scalar,
)
from hal.intel_openvino.int64 import any_true
from nnadapter_bridge.nnadapter.codes import (
    UNKNOWN,
    AutoPad,
    FuseCode,
    InterpolateMode,
    PadMode,
    Precision,
)
from nnadapter_bridge.nnadapter.codes import (
    OperationType as T,
)
from nnadapter_bridge.nnadapter.operations.common import normalize_axis
from nnadapter_bridge.nnadapter.operations.shape import squeeze_axes
from nnadapter_bridge.nnadapter.operations.window import resolve_window, transpose_out_size

OPERATIONS = OperationTable("intel_openvino")


def _out(node) -> ov.Output:
    return node.output(0) if hasattr(node, "output") and not isinstance(node, ov.Output) else node


def _rank(op, i: int = 0) -> int:
    return op.inputs[i].type.rank


def _is_float(x: ov.Output) -> bool:
    return x.get_element_type().is_real()


def _known(d: int) -> bool:
    return d != UNKNOWN and d >= 0


def fuse(args: Operands, x: ov.Output) -> ov.Output:
    """Apply the operation's fused activation (its fuse_code; absent: none)."""
    code = args.int("fuse_code", 0)
    if code == FuseCode.FUSED_NONE:
        return x
    if code == FuseCode.FUSED_RELU:
        return _out(opset.relu(x))  # Relu, not Maximum: the CPU plugin fuses it into the conv (NaN -> 0 either way)
    if code == FuseCode.FUSED_RELU1:
        return _out(opset.minimum(opset.maximum(x, like(-1, x)), like(1, x)))
    if code == FuseCode.FUSED_RELU6:
        return _out(opset.minimum(opset.maximum(x, like(0, x)), like(6, x)))
    raise Unsupported(f"{args.operation.label()}: fuse_code {code}")


# -- elementwise binary arithmetic -----------------------------------------------------------------------
def _truncating_divide(a, b_):
    node = opset.divide(a, b_)
    # Integer Divide floors when m_pythondiv is set (the op's default); NNAdapter's DIV truncates.
    node.set_attribute("m_pythondiv", False)
    return _out(node)


def _integer_floor_divide(a, b_):
    # The CPU plugin truncates whatever m_pythondiv says, so floor explicitly: one less where the
    # quotient is inexact and the operands have opposite signs.
    q = _truncating_divide(a, b_)
    inexact = opset.not_equal(opset.multiply(q, b_), a)
    opposite = opset.not_equal(opset.less(a, like(0, a)), opset.less(b_, like(0, b_)))
    correction = opset.convert(opset.logical_and(inexact, opposite), a.get_element_type())
    return _out(opset.subtract(q, correction))


def _float_floor_divide(a, b_):
    # numpy/paddle floor_divide for floats: (a - mod(a, b)) / b is an exact integer in real arithmetic;
    # rounding it (rather than flooring a / b) avoids the off-by-one of an inexact quotient.
    return _out(opset.round(opset.divide(opset.subtract(a, opset.floor_mod(a, b_)), b_), "half_to_even"))


_BINARY = {
    T.ADD: opset.add,
    T.SUB: opset.subtract,
    T.MUL: opset.multiply,
    T.MAX: opset.maximum,
    T.MIN: opset.minimum,
}


@OPERATIONS.implements(T.ADD, T.SUB, T.MUL, T.DIV, T.MAX, T.MIN, T.POW, T.FLOOR_DIV)
def binary_arithmetic(b, op):
    args = unpack(op)
    x, y = b.value(op.inputs[0]), b.value(op.inputs[1])
    if op.type in _BINARY:
        out = _out(_BINARY[op.type](x, y))
    elif op.type == T.DIV:
        out = _truncating_divide(x, y) if not _is_float(x) else _out(opset.divide(x, y))
    elif op.type == T.FLOOR_DIV:
        out = _float_floor_divide(x, y) if _is_float(x) else _integer_floor_divide(x, y)
    else:  # POW
        if not _is_float(x):
            raise Unsupported("POW on integers (negative exponents truncate in NNAdapter)")
        out = _out(opset.power(x, y))
    return [fuse(args, out)]


@OPERATIONS.implements(T.SUM)
def sum_inputs(b, op):
    total = b.value(op.inputs[0])
    for operand in op.inputs[1:]:
        total = _out(opset.add(total, b.value(operand)))
    return [total]


_COMPARE = {
    T.EQUAL: opset.equal,
    T.NOT_EQUAL: opset.not_equal,
    T.GREATER: opset.greater,
    T.GREATER_EQUAL: opset.greater_equal,
    T.LESS: opset.less,
    T.LESS_EQUAL: opset.less_equal,
    T.AND: opset.logical_and,
    T.OR: opset.logical_or,
    T.XOR: opset.logical_xor,
}


@OPERATIONS.implements(*_COMPARE)
def compare(b, op):
    return [_out(_COMPARE[op.type](b.value(op.inputs[0]), b.value(op.inputs[1])))]


@OPERATIONS.implements(T.NOT)
def logical_not(b, op):
    return [_out(opset.logical_not(b.value(op.inputs[0])))]


@OPERATIONS.implements(T.WHERE)
def where(b, op):
    return [_out(opset.select(b.value(op.inputs[0]), b.value(op.inputs[1]), b.value(op.inputs[2])))]


# -- unary math and activations ----------------------------------------------------------------------------
_UNARY = {
    T.ABS: opset.abs,
    T.COS: opset.cos,
    T.EXP: opset.exp,
    T.FLOOR: opset.floor,
    T.LOG: opset.log,
    T.SIGMOID: opset.sigmoid,
    T.SIN: opset.sin,
    T.TANH: opset.tanh,
    T.SWISH: opset.swish,
}


@OPERATIONS.implements(*_UNARY)
def unary(b, op):
    x = b.value(op.inputs[0])
    if op.type == T.EXP and _is_float(x) and b.keeps_nan(op):
        # The CPU plugin's Exp gives +inf for NaN (its input clamp drops the NaN); Paddle's gives NaN, and so
        # does every ELU, SELU or softplus built on it. An IsNaN and a Select: a chain of four Exps over 200K
        # elements ran 1.26 -> 1.66 ms at 1 thread (INTEL_OPENVINO_KEEP_NAN_IN_CLAMPS=0 trades it away, with the
        # clamps' Selects).
        return [_keep_nan(b, op, x, opset.exp(x))]
    return [_out(_UNARY[op.type](x))]


def _keep_nan(b, op, x, clamped):
    """OpenVINO's Minimum, Maximum and Clamp drop NaN, and its Exp turns it into +inf; Paddle's clip, relu6,
    hard_sigmoid and exp keep it (unless the context chose OpenVINO's fusable clamp, or only QUANTIZE reads the
    result: GraphBuilder.keeps_nan)."""
    if not _is_float(x) or not b.keeps_nan(op):
        return _out(clamped)
    return _out(opset.select(opset.is_nan(x), x, clamped))


@OPERATIONS.implements(T.RELU, T.RELU6, T.RSQRT, T.SQUARE, T.ASSIGN)
def simple_activation(b, op):
    x = b.value(op.inputs[0])
    if op.type == T.RELU:
        return [_out(opset.relu(x))]  # fused into a preceding conv by the CPU plugin, as Maximum is not
    if op.type == T.RELU6:
        if not b.keeps_nan(op) and _is_float(x):
            return [_out(opset.clamp(x, 0.0, 6.0))]  # the form the CPU plugin fuses into a convolution
        return [_keep_nan(b, op, x, opset.minimum(opset.maximum(x, like(0, x)), like(6, x)))]
    if op.type == T.RSQRT:
        return [_out(opset.divide(like(1, x), opset.sqrt(x)))]
    if op.type == T.SQUARE:
        return [_out(opset.multiply(x, x))]
    return [x]  # ASSIGN


@OPERATIONS.implements(T.CAST)
def cast(b, op):
    args = unpack(op)
    code = args.int("dtype")
    target = ELEMENT_TYPES.get(Precision(code)) if code in {int(p) for p in Precision} else None
    if target is None or Precision(code).name.startswith("QUANT_"):
        raise Unsupported(f"CAST to precision code {code}")
    x = b.value(op.inputs[0])
    source = op.inputs[0].type
    if target == ov.Type.boolean and not source.is_quantized and source.dtype.kind in "fiu":
        # Paddle: x != 0. For floats NaN is true, where Convert gives false. For integers the result is the same,
        # but the CPU plugin fails to compile a Convert to boolean right after a TopK ("Default output not
        # supported", OpenVINO 2026.4; _integer_max writes REDUCE_MAX as TopK, and reduce_any/all cast it back).
        return [_out(opset.not_equal(x, opset.constant(np.zeros((), source.dtype))))]
    if not source.is_quantized and source.dtype.kind == "f":
        if target in (ov.Type.i64, ov.Type.u64):
            # The CPU plugin computes i64 in i32: 3e9 or NaN cast to int64 gives INT32_MIN (Paddle: 3e9 and
            # INT64_MIN).
            raise Unsupported("CAST float -> int64: the CPU plugin converts through int32")
        if target in (ov.Type.u8, ov.Type.i8, ov.Type.i16, ov.Type.u16):
            # The plugin's own float -> u8 saturates (-15.7 -> 0; Paddle 241) once its snippets are off (driver.py
            # turns them off): through int32, whose narrowing keeps the low bits.
            x = opset.convert(x, ov.Type.i32)
    # Convert truncates float -> integer toward zero (INT_MIN for NaN, inf and out of range) and keeps the low
    # bits for a narrower type, as Paddle's static_cast does.
    return [_out(opset.convert(x, target))]


@OPERATIONS.implements(T.CLIP)
def clip(b, op):
    x = b.value(op.inputs[0])
    low, high = to_scalar(b.value(op.inputs[1])), to_scalar(b.value(op.inputs[2]))
    # min(max(x, low), high): when low > high every element becomes high, as the spec writes it.
    return [_keep_nan(b, op, x, opset.minimum(opset.maximum(x, low), high))]


@OPERATIONS.implements(T.GELU)
def gelu(b, op):
    args = unpack(op)
    approximate = args.bool("approximate", False)
    return [_out(opset.gelu(b.value(op.inputs[0]), "tanh" if approximate else "erf"))]


def _hard_sigmoid(b, op, args: Operands, x):
    alpha = args.float("alpha")
    beta = args.float("beta")
    return _keep_nan(b, op, x, opset.clamp(opset.add(opset.multiply(x, f32(alpha)), f32(beta)), 0.0, 1.0))


@OPERATIONS.implements(T.HARD_SIGMOID)
def hard_sigmoid(b, op):
    args = unpack(op)
    return [_hard_sigmoid(b, op, args, b.value(op.inputs[0]))]


@OPERATIONS.implements(T.HARD_SWISH)
def hard_swish(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    alpha, beta = args.float("alpha"), args.float("beta")
    if _is_float(x) and abs(alpha - 1.0 / 6.0) < 1e-7 and abs(beta - 0.5) < 1e-7:
        # Paddle's default hard_swish is OpenVINO's HSwish, x * min(max(x + 3, 0), 6) / 6 (the CPU plugin's
        # fused kernel; it overflows at 3e38 and carries NaN as Paddle does)
        return [_out(opset.hswish(x))]
    # no NaN select here: the product with x carries a NaN through anyway
    gate = opset.clamp(opset.add(opset.multiply(x, f32(alpha)), f32(beta)), 0.0, 1.0)
    if alpha <= 0 or not _is_float(x):
        return [_out(opset.multiply(x, gate))]
    # Paddle forms x * min(max(x + offset, 0), threshold) (threshold = 1 / alpha) before scaling: a huge x
    # overflows to inf there, as it does here
    widened = opset.multiply(x, opset.divide(gate, like(alpha, x)))
    return [_out(opset.multiply(widened, like(alpha, x)))]


@OPERATIONS.implements(T.LEAKY_RELU)
def leaky_relu(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    alpha = f32(np.float32(args.float("alpha")))
    return [_out(opset.select(opset.greater_equal(x, like(0, x)), x, opset.multiply(x, alpha)))]


@OPERATIONS.implements(T.PRELU)
def prelu(b, op):
    x = b.value(op.inputs[0])
    slope = b.value(op.inputs[1])
    count = op.inputs[1].type.dims[0]
    rank = _rank(op)
    if count > 1:
        slope = _out(opset.reshape(slope, i64([1, -1] + [1] * (rank - 2)), False))
    else:
        slope = to_scalar(slope)
    return [_out(opset.select(opset.greater_equal(x, like(0, x)), x, opset.multiply(x, slope)))]


@OPERATIONS.implements(T.SOFTPLUS)
def softplus(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    beta = args.float("beta")
    threshold = args.float("threshold")
    if beta == 0:
        raise Unsupported("SOFTPLUS with beta 0")
    scaled = _out(opset.multiply(x, f32(beta)))
    smooth = opset.divide(opset.softplus(scaled), f32(beta))
    return [_out(opset.select(opset.greater(scaled, f32(threshold)), x, smooth))]


# -- convolution and pooling --------------------------------------------------------------------------------
def _spatial_known(args: Operands) -> bool:
    return all(_known(d) for d in args.input.type.dims[2:])


def _window(args: Operands, kernel, strides, dilations):
    """(pads_begin, pads_end, dilations, ov auto_pad) with NNAdapter's meaning of auto_pad.

    SAME pads like Paddle (odd element after, dilations reset to 1): explicit when the spatial dims are
    known, OpenVINO's same_upper (the same rule) otherwise. VALID is zero padding."""
    auto_pad = args.int("auto_pad", int(AutoPad.AUTO_PAD_NONE))
    pads = args.ints("pads", None)
    if pads is not None and len(pads) != 4:
        raise Unsupported("pads must hold 4 values")
    if auto_pad == AutoPad.AUTO_PAD_SAME and not _spatial_known(args):
        return [0, 0], [0, 0], [1, 1], "same_upper"
    in_hw = [d if _known(d) else 1 for d in args.input.type.dims[2:]]
    (top, bottom, left, right), dil = resolve_window(auto_pad, pads, in_hw, kernel, strides, dilations)
    return [top, left], [bottom, right], list(dil), "explicit"


def _add_channel_bias(b, args: Operands, out):
    if not args.has("bias"):
        return out
    if args.bias.is_constant and not args.bias.type.is_quantized and not np.any(args.bias.value):
        return out  # a zero bias (Paddle's conv2d has none): no Add, so the plugin sees Paddle's Conv -> BN
    bias = b.value(args.bias)
    return _out(opset.add(out, opset.reshape(bias, i64([1, -1, 1, 1]), False)))


@OPERATIONS.implements(T.CONV_2D)
def conv_2d(b, op):
    args = unpack(op)
    x, w = b.value(op.inputs[0]), b.value(op.inputs[1])
    filt = op.inputs[1].type.dims
    if not all(_known(d) for d in filt):
        raise Unsupported("CONV_2D with a filter of unknown dims")
    group = args.int("group", 1)
    strides = args.ints("strides", [1, 1])
    dilations = args.ints("dilations", [1, 1])
    begin, end, dil, auto_pad = _window(args, filt[2:], strides, dilations)
    if group == 1:
        out = opset.convolution(x, w, strides, begin, end, dil, auto_pad)
    else:
        grouped = opset.reshape(w, i64([group, filt[0] // group] + list(filt[1:])), False)
        out = opset.group_convolution(x, grouped, strides, begin, end, dil, auto_pad)
    out = _add_channel_bias(b, args, _out(out))
    return [fuse(args, out)]


@OPERATIONS.implements(T.CONV_2D_TRANSPOSE)
def conv_2d_transpose(b, op):
    args = unpack(op)
    x, w = b.value(op.inputs[0]), b.value(op.inputs[1])
    filt = op.inputs[1].type.dims
    if not all(_known(d) for d in filt):
        raise Unsupported("CONV_2D_TRANSPOSE with a filter of unknown dims")
    group = args.int("group", 1)
    strides = args.ints("strides", [1, 1])
    dilations = args.ints("dilations", [1, 1])
    auto_pad = args.int("auto_pad", int(AutoPad.AUTO_PAD_NONE))
    if auto_pad == AutoPad.AUTO_PAD_SAME and not _spatial_known(args):
        raise Unsupported("CONV_2D_TRANSPOSE SAME padding needs known spatial dims")
    begin, end, dil, _ = _window(args, filt[2:], strides, dilations)
    output_padding = args.ints("output_padding", [0, 0])
    if args.has("output_shape"):
        # An explicit output size: express it as the output padding of the computed size.
        shape = args.ints("output_shape")
        if not _spatial_known(args):
            raise Unsupported("CONV_2D_TRANSPOSE output_shape needs known spatial dims")
        in_hw = op.inputs[0].type.dims[2:]
        output_padding = [shape[a] - transpose_out_size(in_hw[a], filt[2 + a], strides[a], begin[a], end[a], dil[a])
                          for a in (0, 1)]
    if any(p < 0 or p >= max(s, d) for p, s, d in zip(output_padding, strides, dil)):
        raise Unsupported(f"CONV_2D_TRANSPOSE output padding {output_padding}")
    if group == 1:
        out = opset.convolution_backprop_data(x, w, strides, None, begin, end, dil, "explicit", output_padding)
    else:
        grouped = opset.reshape(w, i64([group, filt[0] // group] + list(filt[1:])), False)
        out = opset.group_convolution_backprop_data(x, grouped, strides, None, begin, end, dil, "explicit",
                                                    output_padding)
    out = _add_channel_bias(b, args, _out(out))
    return [fuse(args, out)]


def _pool_window(args: Operands):
    kernel = args.ints("kernel_shape")
    strides = args.ints("strides")
    ceil_mode = args.bool("ceil_mode", False)
    begin, end, _, auto_pad = _window(args, kernel, strides, [1, 1])
    return kernel, strides, begin, end, auto_pad, ceil_mode


@OPERATIONS.implements(T.AVERAGE_POOL_2D)
def average_pool_2d(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    kernel, strides, begin, end, auto_pad, ceil_mode = _pool_window(args)
    include_pad = args.bool("count_include_pad", False)
    if ceil_mode and include_pad:
        # OpenVINO counts the ceil_mode overhang in the divisor; NNAdapter counts only explicit pads.
        raise Unsupported("AVERAGE_POOL_2D with ceil_mode and count_include_pad")
    # Dilations passed explicitly: AvgPool-16 built with none crashes the CPU plugin at compile time.
    out = opset.avg_pool(x, strides, begin, end, kernel, not include_pad, "ceil" if ceil_mode else "floor",
                         auto_pad, [1, 1])
    return [fuse(args, _out(out))]


def _index_type(args: Operands):
    code = args.int("return_indices_dtype", int(Precision.INT32))
    return "i64" if code == Precision.INT64 else "i32"


@OPERATIONS.implements(T.MAX_POOL_2D)
def max_pool_2d(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    kernel, strides, begin, end, auto_pad, ceil_mode = _pool_window(args)
    if len(op.outputs) > 1 and op.outputs[1] is not None:
        x = _nan_as_minus_inf(x)
    # axis=2: indices count positions within each (H, W) plane, h * W + w, as NNAdapter defines them.
    node = opset.max_pool(x, strides, [1, 1], begin, end, kernel, "ceil" if ceil_mode else "floor", auto_pad,
                          _index_type(args), 2)
    out, indices = _from_lowest(node)
    out = fuse(args, out)
    if len(op.outputs) < 2:
        return [out]
    return [out, indices if op.outputs[1] is not None else None]


def _nan_as_minus_inf(x):
    """Paddle's max pool with indices takes `if (y < v)` from -FLT_MAX, which never takes a NaN: as -inf (never
    taken either) MaxPool cannot pick it."""
    return _out(opset.select(opset.is_nan(x), like(-np.inf, x), x))


def _from_lowest(node):
    """Paddle's max pool starts every window at -FLT_MAX (float64 too): a window of -inf (or at most -FLT_MAX)
    gives -FLT_MAX, where MaxPool gives -inf, and its index (max_pool2d_with_index) stays -1."""
    raw = node.output(0)
    lowest = like(-float(np.finfo(np.float32).max), raw)
    indices = node.output(1)
    taken = opset.greater(raw, lowest)
    indices = _out(opset.select(taken, indices, like(-1, indices)))
    return _out(opset.maximum(raw, lowest)), indices


@OPERATIONS.implements(T.ADAPTIVE_AVERAGE_POOL_2D)
def adaptive_average_pool_2d(b, op):
    return [_out(opset.adaptive_avg_pool(b.value(op.inputs[0]), b.index_tensor(op, 1)))]


@OPERATIONS.implements(T.ADAPTIVE_MAX_POOL_2D)
def adaptive_max_pool_2d(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    if len(op.outputs) > 1 and op.outputs[1] is not None:
        x = _nan_as_minus_inf(x)
    node = opset.adaptive_max_pool(x, b.index_tensor(op, 1), _index_type(args))
    out, indices = _from_lowest(node)
    if len(op.outputs) < 2:
        return [out]
    return [out, indices if op.outputs[1] is not None else None]


# -- normalization ------------------------------------------------------------------------------------------
def _epsilon(args: Operands):
    return args.float("epsilon", 1e-5)


def _per_channel(node, rank):
    return opset.reshape(node, i64([1, -1] + [1] * (rank - 2)), False)


@OPERATIONS.implements(T.BATCH_NORMALIZATION)
def batch_normalization(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    scale, bias, mean, var = (b.value(op.inputs[i]) for i in range(1, 5))
    return [_out(opset.batch_norm_inference(x, scale, bias, mean, var, _epsilon(args)))]


@OPERATIONS.implements(T.GROUP_NORMALIZATION)
def group_normalization(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    groups = args.int("groups")
    return [_out(opset.group_normalization(x, b.value(op.inputs[1]), b.value(op.inputs[2]), groups,
                                           _epsilon(args)))]


@OPERATIONS.implements(T.INSTANCE_NORMALIZATION)
def instance_normalization(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    rank = _rank(op)
    if rank < 3:
        raise Unsupported("INSTANCE_NORMALIZATION needs spatial axes")
    normalized = opset.mvn(x, i64(list(range(2, rank))), True, _epsilon(args), "inside_sqrt")
    out = opset.multiply(normalized, _per_channel(b.value(op.inputs[1]), rank))
    return [_out(opset.add(out, _per_channel(b.value(op.inputs[2]), rank)))]


@OPERATIONS.implements(T.LAYER_NORMALIZATION)
def layer_normalization(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    rank = _rank(op)
    axis = normalize_axis(args.int("begin_norm_axis"), rank)
    tail = op.inputs[0].type.dims[axis:]
    # scale and bias take the normalized dims: as declared, or as the input has them at run time
    tail_shape = i64(tail) if all(_known(d) for d in tail) else _dims_of(x, list(range(axis, rank)))
    normalized = opset.mvn(x, i64(list(range(axis, rank))), True, _epsilon(args), "inside_sqrt")
    scale = opset.reshape(b.value(op.inputs[1]), tail_shape, False)
    bias = opset.reshape(b.value(op.inputs[2]), tail_shape, False)
    return [_out(opset.add(opset.multiply(normalized, scale), bias))]


@OPERATIONS.implements(T.LP_NORMALIZATION)
def lp_normalization(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    axis = args.int("axis", 1)
    p = args.int("p", 2)
    reduce = {1: opset.reduce_l1, 2: opset.reduce_l2}.get(p)
    if reduce is None:
        raise Unsupported(f"LP_NORMALIZATION p={p}")
    norm = reduce(x, i64([axis]), True)
    return [_out(opset.divide(x, opset.add(norm, f32(_epsilon(args)))))]


@OPERATIONS.implements(T.LRN)
def lrn(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    size = args.int("size", 5)
    if size % 2 == 0:
        # OpenVINO centres an even window differently from NNAdapter ((size-1)//2 before, the rest after).
        raise Unsupported("LRN with an even size")
    bias = args.float("bias", 1.0)
    alpha = args.float("alpha", 1e-4)
    beta = args.float("beta", 0.75)
    # OpenVINO's LRN divides alpha by size; NNAdapter's (Paddle's) does not.
    return [_out(opset.lrn(x, i64([1]), alpha * size, beta, bias, size))]


# -- matrix products and softmax -----------------------------------------------------------------------------
@OPERATIONS.implements(T.FULLY_CONNECTED)
def fully_connected(b, op):
    args = unpack(op)
    x, w = b.value(op.inputs[0]), b.value(op.inputs[1])
    input_size = op.inputs[1].type.dims[1]
    rows = opset.reshape(x, i64([-1, input_size]), False)
    out = _out(opset.matmul(rows, w, False, True))
    if args.has("bias"):
        out = _out(opset.add(out, b.value(op.inputs[2])))
    return [fuse(args, out)]


def _from_constants(x: ov.Output) -> bool:
    """Whether `x` is computed from constants alone (a weight, or a transpose of one: the CPU plugin folds it)."""
    pending, seen = [x.get_node()], set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.get_type_name() == "Parameter":
            return False
        pending.extend(source.get_node() for source in node.input_values())
    return True


@OPERATIONS.implements(T.MAT_MUL)
def mat_mul(b, op):
    args = unpack(op)
    tx = args.bool("transpose_x", False)
    ty = args.bool("transpose_y", False)
    # Transposes of a 1-D operand are no-ops in NNAdapter; say so explicitly.
    tx = tx and _rank(op, 0) >= 2
    ty = ty and _rank(op, 1) >= 2
    x, y = b.value(op.inputs[0]), b.value(op.inputs[1])
    x_dims, y_dims = tuple(op.inputs[0].type.dims), tuple(op.inputs[1].type.dims)
    y_batch = y_dims[:-2]
    if len(x_dims) >= 2 and int(np.prod(y_batch, dtype=np.int64)) > 1 \
            and not (len(x_dims) == len(y_dims) and x_dims[:-2] == y_batch) and _from_constants(y):
        # The CPU plugin turns a MatMul by a constant into a FullyConnected, which mishandles constant batch dims
        # that x broadcasts against when x has unknown dims (OpenVINO 2026: x [1, ?, K] by [4, K, N] fails to run,
        # "Can not clone with new dims"; x [?, K] by [4, K, N] fails to compile, "argument shapes ranks are not
        # equal": Funnel's `td,dnh->tnh` einsum, whose weight is transposed first). x broadcast to the constant's
        # batch dims first is an ordinary batched product.
        target = [1] * max(len(x_dims) - len(y_dims), 0) + [*y_batch, 1, 1]
        x = _out(opset.broadcast(x, i64(target), broadcast_spec="BIDIRECTIONAL"))
    return [_out(opset.matmul(x, y, tx, ty))]


@OPERATIONS.implements(T.SOFTMAX, T.LOG_SOFTMAX)
def softmax(b, op):
    args = unpack(op)
    axis = args.int("axis", 1)
    axis = normalize_axis(axis, _rank(op))
    fn = opset.softmax if op.type == T.SOFTMAX else opset.log_softmax
    return [_out(fn(b.value(op.inputs[0]), axis))]


# -- pad and resize ---------------------------------------------------------------------------------------------
_PAD_MODES = {PadMode.CONSTANT: "constant", PadMode.REFLECT: "reflect", PadMode.REPLICATE: "edge",
              PadMode.EDGE: "edge"}


@OPERATIONS.implements(T.PAD)
def pad(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    pads = args.ints("pads")
    mode = PadMode(args.int("mode"))
    if mode not in _PAD_MODES:
        raise Unsupported(f"PAD mode {mode.name}")
    value = None
    if mode == PadMode.CONSTANT:
        value = to_scalar(b.value(op.inputs[3])) if args.has("value") else like(0, x)
    elif any(p < 0 for p in pads):
        raise Unsupported("PAD with negative amounts outside CONSTANT mode")
    return [_out(opset.pad(x, i64(pads[0::2]), i64(pads[1::2]), _PAD_MODES[mode], value))]


def _same_size_resize(op) -> bool:
    """Paddle's interpolate kernels copy the input when the output size equals it (so an inf stays inf where
    interpolating with a zero weight would give NaN)."""
    in_dims, out_dims = op.inputs[0].type.dims, op.outputs[0].type.dims
    return all(_known(d) for d in list(in_dims[-2:]) + list(out_dims[-2:])) and \
        list(in_dims[-2:]) == list(out_dims[-2:])


@OPERATIONS.implements(T.RESIZE_NEAREST, T.RESIZE_LINEAR)
def resize(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    rank = _rank(op)
    if _same_size_resize(op):
        return [x]
    align_corners = args.bool("align_corners", False)
    if op.type == T.RESIZE_NEAREST:
        mode = "nearest"
        # Paddle: floor(ratio * k), or floor(ratio * k + 0.5) with align_corners.
        nearest = "round_prefer_ceil" if align_corners else "floor"
        transform = "align_corners" if align_corners else "asymmetric"
    else:
        mode, nearest = "linear_onnx", "floor"
        align_mode = args.int("align_mode", 1)
        # align_mode 0 is half-pixel with negative source coordinates clamped to 0, which is what
        # pytorch_half_pixel computes (and a single output row reads row 0).
        transform = "align_corners" if align_corners else ("pytorch_half_pixel" if align_mode == 0 else "asymmetric")
    axes = i64([rank - 2, rank - 1])
    if args.has("shape"):
        sizes = b.index_tensor(op, 1)
        node = opset.interpolate(x, sizes, mode, "sizes", None, None, transform, nearest, False, -0.75, axes)
    else:
        scales = args.constant("scales").astype(np.float32).reshape(-1)
        node = opset.interpolate(x, f32(scales), mode, "scales", None, None, transform, nearest, False, -0.75, axes)
    return [_out(node)]


# -- reshaping -------------------------------------------------------------------------------------------------
@OPERATIONS.implements(T.RESHAPE)
def reshape(b, op):
    # special_zero: a 0 copies the input dim at that position, as in NNAdapter.
    return [_out(opset.reshape(b.value(op.inputs[0]), b.index_tensor(op, 1), True))]


def _dims_of(x, positions):
    shape = opset.shape_of(x, "i64")
    return _out(opset.gather(shape, i64(positions), i64([0]))) if positions else None


@OPERATIONS.implements(T.FLATTEN)
def flatten(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    rank = _rank(op)
    if rank == 0:
        return [_out(opset.reshape(x, i64([1]), False))]
    start = normalize_axis(args.int("start_axis"), rank)
    end = normalize_axis(args.int("end_axis"), rank)
    parts = []
    head = _dims_of(x, list(range(start)))
    if head is not None:
        parts.append(head)
    parts.append(_out(opset.reduce_prod(_dims_of(x, list(range(start, end + 1))), i64([0]), True)))
    tail = _dims_of(x, list(range(end + 1, rank)))
    if tail is not None:
        parts.append(tail)
    shape = parts[0] if len(parts) == 1 else _out(opset.concat(parts, 0))
    return [_out(opset.reshape(x, shape, False))]


@OPERATIONS.implements(T.SQUEEZE)
def squeeze(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    axes = args.ints("axes", None)
    # The axes shape inference removed (decided on the declared dims), so the result matches them.
    removed = squeeze_axes(op.inputs[0].type.dims, axes)
    if not removed:
        return [x]
    return [_out(opset.squeeze(x, i64(removed)))]


@OPERATIONS.implements(T.UNSQUEEZE)
def unsqueeze(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    rank = _rank(op)
    for a in args.ints("axes"):
        # Paddle's rule: one axis at a time, each counted in the rank reached so far.
        x = _out(opset.unsqueeze(x, i64([a + rank + 1 if a < 0 else a])))
        rank += 1
    return [x]


@OPERATIONS.implements(T.TRANSPOSE)
def transpose(b, op):
    args = unpack(op)
    rank = _rank(op)
    if 0 in op.inputs[0].type.dims:
        raise Unsupported("TRANSPOSE of an empty tensor (OpenVINO gives the 0 dim back as 1)")
    perm = args.ints("perm") or list(range(rank))[::-1]
    return [_out(opset.transpose(b.value(op.inputs[0]), i64([normalize_axis(p, rank) for p in perm])))]


@OPERATIONS.implements(T.CHANNEL_SHUFFLE)
def channel_shuffle(b, op):
    args = unpack(op)
    return [_out(opset.shuffle_channels(b.value(op.inputs[0]), 1, args.int("group")))]


# -- slicing, joining, splitting --------------------------------------------------------------------------------
@OPERATIONS.implements(T.SLICE)
def slice_(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    starts = b.index_tensor(op, 2)
    ends = b.index_tensor(op, 3)
    count = op.inputs[2].type.dims[0] if op.inputs[2].type.rank == 1 else 1
    if args.has("steps"):
        steps = b.index_tensor(op, 4)
        step_values = args.value("steps")
        if step_values is not None and np.any(np.asarray(step_values) == 0):
            raise Unsupported("SLICE with a step of 0")
    else:
        if not _known(count):
            raise Unsupported("SLICE with starts of unknown length and no steps")
        steps = i64([1] * count)
    if args.has("axes"):
        axes = b.index_tensor(op, 1)
    else:
        if not _known(count):
            raise Unsupported("SLICE with starts of unknown length and no axes")
        axes = i64(list(range(count)))
    return [_out(opset.slice(x, starts, ends, steps, axes))]


@OPERATIONS.implements(T.CONCAT)
def concat(b, op):
    args = unpack(op)
    rank = _rank(op)
    axis = normalize_axis(args.int("axis"), rank)
    return [_out(opset.concat([b.value(o) for o in op.inputs[:-1]], axis))]


@OPERATIONS.implements(T.STACK)
def stack(b, op):
    args = unpack(op)
    rank = _rank(op)
    axis = normalize_axis(args.int("axis"), rank + 1)
    parts = [_out(opset.unsqueeze(b.value(o), i64([axis]))) for o in op.inputs[:-1]]
    return [_out(opset.concat(parts, axis))]


@OPERATIONS.implements(T.SPLIT)
def split(b, op):
    args = unpack(op)
    axis = normalize_axis(args.int("axis"), _rank(op))
    sizes = args.ints("split")
    node = opset.variadic_split(b.value(op.inputs[0]), opset.constant(np.int64(axis)), i64(sizes))
    return [node.output(k) for k in range(len(sizes))]


@OPERATIONS.implements(T.UNSTACK)
def unstack(b, op):
    args = unpack(op)
    axis = normalize_axis(args.int("axis"), _rank(op))
    num = args.int("num")
    node = opset.split(b.value(op.inputs[0]), opset.constant(np.int64(axis)), num)
    return [_out(opset.squeeze(node.output(k), i64([axis]))) for k in range(num)]


@OPERATIONS.implements(T.MESHGRID)
def meshgrid(b, op):
    values = [b.value(o) for o in op.inputs]
    n = len(values)
    target = _out(opset.concat([_out(opset.shape_of(v, "i64")) for v in values], 0))
    grids = []
    for k, v in enumerate(values):
        shaped = opset.reshape(v, i64([-1 if j == k else 1 for j in range(n)]), False)
        grids.append(_out(opset.broadcast(shaped, target)))
    return grids


# -- broadcasting, gathering, moving -----------------------------------------------------------------------------
@OPERATIONS.implements(T.TILE)
def tile(b, op):
    args = unpack(op)
    if args.value("repeats") is not None and any(r < 0 for r in args.ints("repeats")):
        raise Unsupported("TILE with negative repeats")
    return [_out(opset.tile(b.value(op.inputs[0]), b.index_tensor(op, 1)))]


@OPERATIONS.implements(T.EXPAND)
def expand(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    shape = args.value("shape")
    # -1 keeps the input dim: as 1 in a bidirectional broadcast it yields the input's dim.
    if shape is None:  # computed at run time: its -1s become 1 there
        if op.inputs[1].type.dims in ((0,), ()):
            raise Unsupported("EXPAND to a 0-d shape computed at run time")
        given = b.index_tensor(op, 1)
        target = _out(opset.select(opset.equal(given, i64([-1])), i64([1]), given))
        return [_out(opset.broadcast(x, target, None, "BIDIRECTIONAL"))]
    target = [1 if int(s) == -1 else int(s) for s in np.asarray(shape).reshape(-1)]
    if not target:  # a 0-d result (of a 0-d input): OpenVINO's Broadcast to an empty shape crashes the process
        return [_out(opset.reshape(x, i64([]), False))]
    return [_out(opset.broadcast(x, i64(target), None, "BIDIRECTIONAL"))]


@OPERATIONS.implements(T.GATHER)
def gather(b, op):
    args = unpack(op)
    axis = normalize_axis(args.int("axis"), _rank(op))
    x, indices = b.value(op.inputs[0]), b.value(op.inputs[1])
    if not op.inputs[1].is_constant:
        # Gather-8 gives zeros for an index outside [-size, size); Paddle raises. The range check becomes a
        # run-time check output that execute_program turns into an error (constant indices were checked when
        # the operation was built).
        size = opset.convert(opset.gather(opset.shape_of(x, "i64"), i64([axis]), i64([0])), indices.get_element_type())
        bad = opset.logical_or(opset.less(indices, opset.negative(size)), opset.greater_equal(indices, size))
        flat = opset.reshape(bad, i64([-1]), False)
        b.checks.append((opset.reduce_logical_or(flat, i64([0]), False).output(0),
                         f"{op.label()}: an index lies outside [-size, size) of axis {axis} of the input"))
    # Gather-8 accepts negative indices counted from the end, as NNAdapter's GATHER does.
    return [_out(opset.gather(x, indices, i64([axis])))]


@OPERATIONS.implements(T.ROLL)
def roll(b, op):
    args = unpack(op)
    x = b.value(op.inputs[0])
    shifts = b.index_tensor(op, 1)
    axes = args.ints("axes", [])
    if axes:
        return [_out(opset.roll(x, shifts, i64(axes)))]
    # No axes: the flattened tensor rolls, then takes the input's shape back.
    flat = opset.reshape(x, i64([-1]), False)
    rolled = opset.roll(flat, opset.gather(shifts, i64([0]), i64([0])), i64([0]))
    return [_out(opset.reshape(rolled, opset.shape_of(x, "i64"), False))]


# -- shapes and generated tensors -------------------------------------------------------------------------------
def _dtype_name(args: Operands, name):
    code = args.int(name)
    if code == Precision.INT32:
        return "i32"
    if code == Precision.INT64:
        return "i64"
    raise Unsupported(f"{name} {code}")


@OPERATIONS.implements(T.SHAPE)
def shape(b, op):
    args = unpack(op)
    return [_out(opset.shape_of(b.raw_value(op.inputs[0]), _dtype_name(args, "dtype")))]


def _zero_d_result(op) -> bool:
    """The operation's result is 0-d (OpenVINO's Broadcast to an empty shape crashes the process: reshape)."""
    return op.outputs[0].type.rank == 0


@OPERATIONS.implements(T.FILL)
def fill(b, op):
    if _zero_d_result(op):
        return [_out(opset.reshape(to_scalar(b.value(op.inputs[1])), i64([]), False))]
    return [_out(opset.broadcast(to_scalar(b.value(op.inputs[1])), b.index_tensor(op, 0)))]


@OPERATIONS.implements(T.FILL_LIKE)
def fill_like(b, op):
    if _zero_d_result(op):
        return [_out(opset.reshape(to_scalar(b.value(op.inputs[1])), i64([]), False))]
    target = opset.shape_of(b.raw_value(op.inputs[0]), "i64")
    return [_out(opset.broadcast(to_scalar(b.value(op.inputs[1])), target))]


@OPERATIONS.implements(T.RANGE)
def range_(b, op):
    args = unpack(op)
    start, end, step = (to_scalar(b.value(o)) for o in op.inputs[:3])
    step_value = args.value("step")
    if step_value is not None and np.asarray(step_value).reshape(-1)[0] == 0:
        raise Unsupported("RANGE with step 0")
    return [_out(opset.range(start, end, step, start.get_element_type().get_type_name()))]


# -- reductions, arg and top-k -----------------------------------------------------------------------------------
_REDUCE = {T.REDUCE_MEAN: opset.reduce_mean, T.REDUCE_MAX: opset.reduce_max, T.REDUCE_SUM: opset.reduce_sum}


@OPERATIONS.implements(*_REDUCE)
def reduce(b, op):
    integer = op.inputs[0].type.precision in (Precision.INT32, Precision.INT64)
    if integer and op.type != T.REDUCE_MAX:
        # The CPU plugin fuses an integer reduction with the eltwise op after it and then leaves part of the
        # output zero (seen with OpenVINO 2026.4 on [2, 3, 4] int32: max over axis 1, then x * -1); integer
        # REDUCE_MEAN's rounding is not specified either. REDUCE_MAX has an exact form (_integer_max).
        raise Unsupported(f"{op.type.name} of {op.inputs[0].type.precision.name} is not computed exactly "
                          "by the CPU plugin")
    if op.type == T.REDUCE_MEAN and reduces_an_empty_axis(op):
        raise Unsupported("a mean over an empty axis (ReduceMean gives 0, Paddle NaN)")
    args = unpack(op)
    rank = _rank(op)
    axes = args.ints("axes")
    # NNAdapter: no axes means every axis (OpenVINO would reduce none).
    axes = sorted({normalize_axis(a, rank) for a in axes}) if axes else list(range(rank))
    keepdim = args.bool("keepdim")
    if integer:
        if reduces_an_empty_axis(op):
            raise Unsupported(f"{op.type.name} over an empty axis")
        return [_integer_max(b.value(op.inputs[0]), rank, axes, keepdim)]
    return [_out(_REDUCE[op.type](b.value(op.inputs[0]), i64(axes), keepdim))]


def _integer_max(x, rank: int, axes: list, keepdim: bool):
    """REDUCE_MAX of integers as TopK (k = 1) over the reduced axes brought last and flattened into one: exact,
    where the plugin's integer ReduceMax fused with the eltwise op after it leaves part of the output zero (reduce_all
    and reduce_any become an integer max, RT-DETR has one)."""
    if not axes:
        return x
    kept = [a for a in range(rank) if a not in axes]
    if len(axes) == 1:
        source, axis = x, axes[0]
    else:
        moved = _out(opset.transpose(x, i64(kept + axes)))
        flat = _out(opset.concat([_dims_of(moved, list(range(len(kept)))), i64([-1])], 0)) if kept else i64([-1])
        source, axis = _out(opset.reshape(moved, flat, False)), len(kept)
    top = opset.topk(source, opset.constant(np.int64(1)), axis, "max", "none", "i32").output(0)
    if not keepdim:
        return _out(opset.squeeze(top, i64([axis])))
    if len(axes) == 1:
        return _out(top)
    reduced = np.zeros(rank, dtype=bool)
    reduced[axes] = True
    shape = opset.select(opset.constant(reduced), i64([1] * rank), opset.shape_of(x, "i64"))
    return _out(opset.reshape(top, shape, False))


@OPERATIONS.implements(T.CUM_SUM)
def cum_sum(b, op):
    args = unpack(op)
    rank = _rank(op)
    if rank == 0:
        raise Unsupported("CUM_SUM of a scalar")
    axis = normalize_axis(args.int("axis", -1), rank)
    exclusive = args.bool("exclusive", False)
    reverse = args.bool("reverse", False)
    return [_out(opset.cum_sum(b.value(op.inputs[0]), opset.constant(np.int64(axis)), exclusive, reverse))]


@OPERATIONS.implements(T.ARG_MAX, T.ARG_MIN)
def arg_max_min(b, op):
    args = unpack(op)
    rank = _rank(op)
    axis = normalize_axis(args.int("axis"), rank)
    keepdim = args.bool("keepdim")
    index_type = _dtype_name(args, "dtype") if args.has("dtype") else "i64"
    mode = "max" if op.type == T.ARG_MAX else "min"
    # stable: among equal extremes the first index wins, as numpy and Paddle pick it.
    node = opset.topk(b.value(op.inputs[0]), opset.constant(np.int64(1)), axis, mode, "value", index_type, True)
    indices = node.output(1)
    if not keepdim:
        indices = _out(opset.squeeze(indices, i64([axis])))
    return [indices]


@OPERATIONS.implements(T.TOP_K)
def top_k(b, op):
    args = unpack(op)
    rank = _rank(op)
    axis = normalize_axis(args.int("axis"), rank)
    largest = args.bool("largest")
    index_type = _dtype_name(args, "return_indices_dtype")
    k = to_scalar(b.index_tensor(op, 1))
    # Always sorted by value with ties in index order (what builtin_device returns for either `sorted`).
    x = b.value(op.inputs[0])
    if _is_float(x):
        # The CPU plugin's TopK leaves a NaN where it is (topk([1, nan, 3, 2, nan, 0], 3) gives 1, nan, 3); Paddle
        # puts NaN above every number when largest, below when smallest: an input holding NaN is a device fault,
        # and the part runs elsewhere for it.
        b.faults.append((any_true(opset.is_nan(x)),
                         "TOP_K's input holds NaN, which OpenVINO's TopK leaves in place (it runs elsewhere)", op))
    node = opset.topk(x, k, axis, "max" if largest else "min", "value", index_type, True)
    return [node.output(0), node.output(1)]


# -- quantization ------------------------------------------------------------------------------------------------
@OPERATIONS.implements(T.QUANTIZE, T.DEQUANTIZE)
def quantize_dequantize(b, op):
    # The builder dequantizes quantized inputs and quantizes quantized outputs with their types'
    # params (which prepare derived from the scale / zero_point operands), so both are the identity.
    x = b.value(op.inputs[0])
    if op.type == T.QUANTIZE and op.inputs[0].type.precision != Precision.FLOAT32:
        raise Unsupported("QUANTIZE of a non-float input")
    return [x]


# -- sampling: GRID_SAMPLE, ROI_ALIGN, DEFORMABLE_CONV_2D ------------------------------------------------------
# NNAdapter pad modes -> GridSample-9 padding; NONE means the spec's default (zeros outside).
_GRID_PADDING = {PadMode.NONE: "zeros", PadMode.CONSTANT: "zeros", PadMode.REPLICATE: "border",
                 PadMode.EDGE: "border", PadMode.REFLECT: "reflection"}


@OPERATIONS.implements(T.GRID_SAMPLE)
def grid_sample(b, op):
    args = unpack(op)
    align_corners = args.bool("align_corners")
    mode_code = args.int("mode")
    pad_code = args.int("pad_mode")
    if mode_code not in {int(m) for m in InterpolateMode}:
        raise Unsupported(f"GRID_SAMPLE mode {mode_code}")
    if pad_code not in {int(m) for m in _GRID_PADDING}:
        raise Unsupported(f"GRID_SAMPLE pad_mode {pad_code}")
    if InterpolateMode(mode_code) == InterpolateMode.NEAREST:
        # Both round half to even, but Paddle maps a grid value to a pixel as (g + 1) * (size / 2) - 0.5
        # in float32 and OpenVINO's CPU plugin refolds that arithmetic (g * (size / 2) + (size - 1) / 2,
        # in GridSample-9 and in an explicit composition alike), so a near-tie such as 1.4999999 lands
        # on the other neighbour: a whole-pixel difference, not a rounding error.
        raise Unsupported("GRID_SAMPLE nearest (near-tie pixels round to the other neighbour than Paddle's)")
    # NONE samples bilinearly with zeros outside, as builtin_device does; bilinear differs by rounding only.
    attrs = {"align_corners": align_corners, "mode": "bilinear", "padding_mode": _GRID_PADDING[PadMode(pad_code)]}
    grid = b.value(op.inputs[1])
    # OpenVINO's GridSample clamps an infinite coordinate (border padding) or reads 0, where Paddle's kernel computes
    # NaN weights (inf - floor(inf)): a grid holding infinity or NaN is a run-time fault, and the part runs elsewhere
    b.faults.append((any_true(opset.logical_not(opset.is_finite(grid))),
                     "GRID_SAMPLE's grid holds infinity or NaN, where OpenVINO's GridSample clamps or reads 0 and "
                     "Paddle gives NaN (the part runs elsewhere)", op))
    return [_out(opset.grid_sample(b.value(op.inputs[0]), grid, attrs))]


@OPERATIONS.implements(T.ROI_ALIGN)
def roi_align(b, op):
    args = unpack(op)
    out_h = args.int("output_height")
    out_w = args.int("output_width")
    sampling_ratio = args.int("sampling_ratio")
    spatial_scale = args.float("spatial_scale")
    aligned = args.bool("aligned")
    if out_h < 1 or out_w < 1:
        raise Unsupported(f"ROI_ALIGN output size {out_h}x{out_w}")
    # Paddle's roi_align: aligned shifts the scaled box by -0.5 pixel (ROIAlign-9's half_pixel_for_nn,
    # which also keeps boxes narrower than a pixel); otherwise boxes are clamped to at least 1x1
    # (asymmetric). A sampling ratio <= 0 is adaptive, ceil(roi size / output size), ROIAlign's 0.
    if not spatial_scale > 0:
        raise Unsupported(f"ROI_ALIGN spatial_scale {spatial_scale}")
    mode = "half_pixel_for_nn" if aligned else "asymmetric"
    rois = b.value(op.inputs[1])
    node = _out(opset.roi_align(b.value(op.inputs[0]), rois, b.value(op.inputs[2]), out_h, out_w,
                                max(sampling_ratio, 0), spatial_scale, "avg", mode))
    if aligned and sampling_ratio <= 0:
        # An aligned box of zero or negative width/height gets an adaptive grid of 0 samples: Paddle's
        # average over max(0, 1) samples is 0, ROIAlign divides 0 by 0. Zero those rows explicitly
        # (with a positive scale the scaled size is positive exactly when x2 > x1 and y2 > y1).
        corners = opset.split(rois, opset.constant(np.int64(1)), 2)  # [R, 2] x1 y1 | x2 y2
        positive = opset.reduce_logical_and(opset.greater(corners.output(1), corners.output(0)), i64([1]), False)
        keep = opset.reshape(positive, i64([-1, 1, 1, 1]), False)
        node = _out(opset.select(keep, node, like(0, node)))
    return [node]


@OPERATIONS.implements(T.DEFORMABLE_CONV_2D)
def deformable_conv_2d(b, op):
    args = unpack(op)
    x, offset, w = b.value(op.inputs[0]), b.value(op.inputs[1]), b.value(op.inputs[3])
    filt = op.inputs[3].type.dims
    if not all(_known(d) for d in filt):
        raise Unsupported("DEFORMABLE_CONV_2D with a filter of unknown dims")
    pads = args.ints("pads", [0, 0, 0, 0])
    strides = args.ints("strides")
    group = args.int("group")
    deformable_group = args.int("deformable_group")
    dilations = args.ints("dilations")
    if len(pads) != 4 or len(strides) != 2 or len(dilations) != 2:
        raise Unsupported("DEFORMABLE_CONV_2D pads must hold 4 values, strides and dilations 2")
    mask = b.value(op.inputs[2]) if args.has("mask") else None
    # Offsets per deformable group and kernel tap as (dy, dx), the layout Paddle uses. With
    # bilinear_interpolation_pad a sample point between -1 and 0 (or size-1 and size) still reads its
    # in-image neighbours, the others counting zero: Paddle's (and builtin_device's) rule.
    node = opset.deformable_convolution(x, offset, w, strides, [pads[0], pads[2]], [pads[1], pads[3]], dilations,
                                        mask, "explicit", group, deformable_group, True)
    out = _add_channel_bias(b, args, _out(node))
    return [fuse(args, out)]


# NON_MAX_SUPPRESSION registers itself into OPERATIONS (it needs the table defined above).
from hal.intel_openvino import nms as _nms  # noqa: E402,F401
