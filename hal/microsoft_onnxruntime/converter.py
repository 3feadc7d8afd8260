"""NNAdapter Model -> ONNX ModelProto (opset 19) for the microsoft_onnxruntime driver.

One function per NNAdapter operation appends ONNX nodes to a `GraphBuilder`. The same function
answers validate_program: it runs against a throw-away builder, and an `Unsupported` raised anywhere
in it (a parameter that must be constant, an unknown dim the mapping needs, an attribute combination
ONNX cannot express faithfully, a missing mapping) means "False for this operation". So the claim
and the conversion can never disagree.

Quantized operands follow builtin_device's rule: the operation computes on dequantized float32
values and requantizes its quantized outputs (DequantizeLinear / QuantizeLinear around the float
nodes; constants are dequantized here, in numpy, with the same float32 formula). SHAPE, FILL_LIKE,
QUANTIZE and DEQUANTIZE read raw values instead.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nnadapter_bridge.errors import NNAdapterError, OperationError
from nnadapter_bridge.nnadapter.codes import (
    AutoPad,
    FuseCode,
    InterpolateMode,
    OperationType as T,
    PadMode,
    Precision,
    precision_dtype,
)
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations import check_signature, get_spec
from nnadapter_bridge.nnadapter.operations.common import known, normalize_axis
from nnadapter_bridge.nnadapter.operations.ops_nn import resolve_window, transpose_out_size
from nnadapter_bridge.nnadapter.operations.ops_tensor import split_sections, squeeze_axes
from nnadapter_bridge.nnadapter.types import Operand, OperandType, Operation

OPSET = 19  # DeformConv needs 19; nothing used here changed meaning between 18 and 19
# The IR version every onnxruntime >= 1.17 reads (an opset-19 model needs IR >= 9).
IR_VERSION = 9

_ONNX_TYPES = {
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
}

# Operations whose kernels read quantized values raw (no dequantize/requantize around them).
_RAW_QUANT = frozenset({T.SHAPE, T.FILL_LIKE, T.QUANTIZE, T.DEQUANTIZE})


class Unsupported(Exception):
    """This operation (as given) cannot be expressed faithfully in ONNX."""


def onnx_type(dtype) -> int:
    try:
        return _ONNX_TYPES[np.dtype(dtype)]
    except KeyError:
        raise Unsupported(f"dtype {np.dtype(dtype)} has no ONNX tensor type") from None


def dequantize_array(values: np.ndarray, t: OperandType) -> np.ndarray:
    """The float32 real values of a quantized constant, computed as builtin_device computes them."""
    real = np.asarray(values).astype(np.float32)
    if t.is_per_channel:
        shape = [1] * real.ndim
        if real.ndim:
            shape[t.channel_dim] = -1
        return real * np.asarray(t.scales, dtype=np.float32).reshape(shape)
    return (real - np.float32(t.zero_point)) * np.float32(t.scale)


class GraphBuilder:
    """Collects the ONNX nodes and initializers of one model; names every tensor uniquely."""

    def __init__(self):
        self.nodes: list = []
        self.initializers: list = []
        self._counter = 0
        self._float_views: Dict[int, str] = {}  # operand index -> name of its dequantized float tensor
        self._constants: Dict[int, str] = {}    # operand index -> initializer name
        self.current: Optional[Operation] = None
        self._float_outputs: Dict[int, str] = {}  # output position -> float temporary (current op)
        self.boundary_names: Dict[int, str] = {}  # operand index -> graph input/output name

    # -- names and constants --------------------------------------------------------------------
    def fresh(self, hint: str = "t") -> str:
        self._counter += 1
        label = self.current.label() if self.current is not None else "graph"
        return f"{label}/{hint}{self._counter}"

    def const(self, value, dtype=None, hint: str = "c") -> str:
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        # np.array(order="C"), not np.ascontiguousarray: the latter turns a 0-d array into shape [1].
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), name))
        return name

    def i64(self, values) -> str:
        return self.const(np.asarray(values, dtype=np.int64).reshape(-1))

    def scalar(self, value, dtype) -> str:
        """A 0-d constant (what Clip, Pad's constant_value and Range need)."""
        return self.const(np.asarray(value, dtype=dtype).reshape(()))

    def operand_name(self, operand: Operand) -> str:
        """Model inputs and outputs are input<k> / output<k> (their position); the rest operand<index>."""
        return self.boundary_names.get(operand.index) or f"operand{operand.index}"

    def node(self, op_type: str, inputs: Sequence[Optional[str]], outputs=1, **attrs) -> List[str]:
        """Append a node; `outputs` is a count (fresh names) or a list of names. Returns the outputs."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)] if isinstance(outputs, int) else list(outputs)
        self.nodes.append(helper.make_node(op_type, ["" if i is None else i for i in inputs], names,
                                           name=self.fresh("node"), **attrs))
        return names

    def one(self, op_type: str, inputs: Sequence[Optional[str]], output: Optional[str] = None, **attrs) -> str:
        return self.node(op_type, inputs, 1 if output is None else [output], **attrs)[0]

    # -- operands of the current operation ------------------------------------------------------
    def raw(self, op: Operation, i: int) -> Optional[str]:
        """The tensor holding input i exactly as stored (quantized integers stay integers)."""
        if i >= len(op.inputs) or op.inputs[i] is None:
            return None
        operand = op.inputs[i]
        if operand.is_constant:
            if operand.index not in self._constants:
                self._constants[operand.index] = self.const(operand.value, hint="w")
            return self._constants[operand.index]
        return self.operand_name(operand)

    def x(self, op: Operation, i: int) -> Optional[str]:
        """Input i as the operation computes on it: quantized operands as dequantized float32."""
        if i >= len(op.inputs) or op.inputs[i] is None:
            return None
        operand = op.inputs[i]
        if not operand.type.is_quantized or op.type in _RAW_QUANT:
            return self.raw(op, i)
        if operand.index not in self._float_views:
            if operand.is_constant:
                name = self.const(dequantize_array(operand.value, operand.type), hint="dq")
            else:
                name = self.dequantize(self.raw(op, i), operand.type)
            self._float_views[operand.index] = name
        return self._float_views[operand.index]

    def dequantize(self, name: str, t: OperandType) -> str:
        """(q - zero_point) * scale in float32, per channel along channel_dim when the type says so."""
        dtype = t.dtype
        if t.is_per_channel:
            if dtype not in (np.int8, np.int32):
                raise Unsupported(f"per-channel dequantization of {t.precision.name}")
            zero = self.const(np.zeros(len(t.scales), dtype=dtype))
            return self.one("DequantizeLinear", [name, self.const(np.float32(t.scales)), zero], axis=t.channel_dim)
        if dtype in (np.int8, np.uint8) or (dtype == np.int32 and t.zero_point == 0):
            return self.one("DequantizeLinear", [name, self.scalar(t.scale, np.float32),
                                                 self.scalar(t.zero_point, dtype)])
        # int16 / uint16 / uint32 storage: DequantizeLinear takes them only from opset 21 on.
        real = self.one("Cast", [name], to=TensorProto.FLOAT)
        if t.zero_point:
            real = self.one("Sub", [real, self.scalar(t.zero_point, np.float32)])
        return self.one("Mul", [real, self.scalar(t.scale, np.float32)])

    def quantize(self, name: str, t: OperandType, output: str) -> str:
        """round-half-even(x / scale) + zero_point, saturated: ONNX QuantizeLinear."""
        if t.dtype not in (np.int8, np.uint8):
            raise Unsupported(f"requantizing to {t.precision.name}")
        if t.is_per_channel:
            zero = self.const(np.zeros(len(t.scales), dtype=t.dtype))
            return self.one("QuantizeLinear", [name, self.const(np.float32(t.scales)), zero], output,
                            axis=t.channel_dim)
        return self.one("QuantizeLinear", [name, self.scalar(t.scale, np.float32), self.scalar(t.zero_point, t.dtype)],
                        output)

    def out(self, op: Operation, j: int = 0) -> Optional[str]:
        """The name the mapping writes output j to (a float temporary when the output is quantized;
        `finish_operation` quantizes it into the output operand)."""
        if j >= len(op.outputs) or op.outputs[j] is None:
            return None
        operand = op.outputs[j]
        if operand.type.is_quantized and op.type not in _RAW_QUANT:
            if j not in self._float_outputs:
                self._float_outputs[j] = self.fresh("float_out")
            return self._float_outputs[j]
        return self.operand_name(operand)

    def convert(self, op: Operation, converter: "Converter") -> None:
        """Append the nodes of one operation (raises Unsupported when it has no faithful form)."""
        self.current = op
        self._float_outputs = {}
        try:
            for operand in op.inputs + op.outputs:
                if operand is not None:
                    onnx_type(operand.type.dtype)  # every tensor needs an ONNX element type
            converter(self, op)
            for j, name in sorted(self._float_outputs.items()):
                self.quantize(name, op.outputs[j].type, self.operand_name(op.outputs[j]))
        finally:
            self.current = None

    # -- parameters that must be known at conversion time --------------------------------------
    @staticmethod
    def value(op: Operation, i: int):
        if i >= len(op.inputs) or op.inputs[i] is None:
            return None
        operand = op.inputs[i]
        return operand.value if operand.is_constant else None

    def ints(self, op: Operation, i: int, default=None, what: str = "") -> Optional[list]:
        if i >= len(op.inputs) or op.inputs[i] is None:
            return default
        v = self.value(op, i)
        if v is None:
            raise Unsupported(f"{what or f'input {i}'} must be a constant")
        return [int(a) for a in np.asarray(v).reshape(-1)]

    def int(self, op: Operation, i: int, default=None, what: str = "") -> Optional[int]:
        values = self.ints(op, i, None, what)
        return default if values is None else values[0]

    def float(self, op: Operation, i: int, default=None, what: str = "") -> Optional[float]:
        if i >= len(op.inputs) or op.inputs[i] is None:
            return default
        v = self.value(op, i)
        if v is None:
            raise Unsupported(f"{what or f'input {i}'} must be a constant")
        operand = op.inputs[i]
        array = dequantize_array(v, operand.type) if operand.type.is_quantized else np.asarray(v)
        return float(array.reshape(-1)[0])

    def bool(self, op: Operation, i: int, default: bool = False, what: str = "") -> bool:
        values = self.ints(op, i, None, what)
        return default if values is None else bool(values[0])

    @staticmethod
    def dims(op: Operation, i: int) -> tuple:
        return tuple(op.inputs[i].type.dims)

    @staticmethod
    def known_dims(op: Operation, i: int, what: str = "input") -> tuple:
        dims = tuple(op.inputs[i].type.dims)
        if not all(known(d) for d in dims):
            raise Unsupported(f"{what} dims {dims} must be known")
        return dims

    def as_i64(self, op: Operation, i: int) -> str:
        """Input i as an int64 1-D tensor (ONNX shape/axes/index inputs are int64)."""
        v = self.value(op, i)
        if v is not None:
            return self.i64(np.asarray(v).reshape(-1))
        name = self.raw(op, i)
        if op.inputs[i].type.dtype != np.int64:
            name = self.one("Cast", [name], to=TensorProto.INT64)
        return name

    def as_scalar(self, op: Operation, i: int, dtype) -> str:
        """Input i (a shape-[1] parameter) as a 0-d tensor of `dtype`."""
        v = self.value(op, i)
        operand = op.inputs[i]
        if v is not None:
            array = dequantize_array(v, operand.type) if operand.type.is_quantized else np.asarray(v)
            return self.scalar(array.reshape(-1)[0], dtype)
        name = self.one("Reshape", [self.x(op, i), self.i64([])])
        if np.dtype(dtype) != (np.float32 if operand.type.is_quantized else operand.type.dtype):
            name = self.one("Cast", [name], to=onnx_type(dtype))
        return name

    def fuse(self, name: str, fuse_code: Optional[int], dtype, output: str) -> str:
        """The fused activation (NNAdapter fuse_code) as a Clip; FUSED_NONE as an Identity."""
        code = FuseCode(int(fuse_code or 0))
        if code == FuseCode.FUSED_NONE:
            return self.one("Identity", [name], output)
        low, high = {FuseCode.FUSED_RELU: (0, None), FuseCode.FUSED_RELU1: (-1, 1), FuseCode.FUSED_RELU6: (0, 6)}[code]
        return self.one("Clip", [name, self.scalar(low, dtype), None if high is None else self.scalar(high, dtype)],
                        output)


Converter = Callable[[GraphBuilder, Operation], None]
CONVERTERS: Dict[T, Converter] = {}


def converts(*types: T):
    def register(fn):
        for t in types:
            if t in CONVERTERS:
                raise ValueError(f"{t.name} has two ONNX mappings")
            CONVERTERS[t] = fn
        return fn

    return register


def _compute_dtype(op: Operation, i: int = 0):
    """The dtype the operation computes in for input i (float32 for quantized operands)."""
    t = op.inputs[i].type
    return np.dtype(np.float32) if t.is_quantized and op.type not in _RAW_QUANT else t.dtype


def _fuse_code(g: GraphBuilder, op: Operation, i: int) -> int:
    code = g.int(op, i, 0, "fuse_code")
    if code not in {int(c) for c in FuseCode}:
        raise Unsupported(f"fuse_code {code}")
    return code


# -- elementwise ----------------------------------------------------------------------------------------
_BINARY = {T.ADD: "Add", T.SUB: "Sub", T.MUL: "Mul", T.MAX: "Max", T.MIN: "Min"}


@converts(T.ADD, T.SUB, T.MUL, T.DIV, T.MAX, T.MIN, T.POW, T.FLOOR_DIV)
def _arithmetic(g: GraphBuilder, op: Operation):
    a, b = g.x(op, 0), g.x(op, 1)
    dtype = _compute_dtype(op)
    code = _fuse_code(g, op, 2)
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


@converts(T.SUM)
def _sum(g: GraphBuilder, op: Operation):
    total = g.x(op, 0)
    names = [g.x(op, i) for i in range(1, len(op.inputs))]
    for k, name in enumerate(names):
        total = g.one("Add", [total, name], g.out(op) if k == len(names) - 1 else None)
    if not names:
        g.one("Identity", [total], g.out(op))


_COMPARE = {T.EQUAL: "Equal", T.GREATER: "Greater", T.GREATER_EQUAL: "GreaterOrEqual", T.LESS: "Less",
            T.LESS_EQUAL: "LessOrEqual"}


@converts(*_COMPARE, T.NOT_EQUAL)
def _compare(g: GraphBuilder, op: Operation):
    a, b = g.x(op, 0), g.x(op, 1)
    if op.inputs[0].type.precision == Precision.BOOL8 and op.type not in (T.EQUAL, T.NOT_EQUAL):
        # ONNX orders numbers only; false < true holds for their int32 values too.
        a, b = (g.one("Cast", [n], to=TensorProto.INT32) for n in (a, b))
    if op.type == T.NOT_EQUAL:
        g.one("Not", [g.one("Equal", [a, b])], g.out(op))
    else:
        g.one(_COMPARE[op.type], [a, b], g.out(op))


@converts(T.AND, T.OR, T.XOR)
def _logic(g: GraphBuilder, op: Operation):
    g.one({T.AND: "And", T.OR: "Or", T.XOR: "Xor"}[op.type], [g.x(op, 0), g.x(op, 1)], g.out(op))


@converts(T.NOT)
def _not(g: GraphBuilder, op: Operation):
    g.one("Not", [g.x(op, 0)], g.out(op))


@converts(T.WHERE)
def _where(g: GraphBuilder, op: Operation):
    g.one("Where", [g.x(op, 0), g.x(op, 1), g.x(op, 2)], g.out(op))


_UNARY = {T.ABS: "Abs", T.COS: "Cos", T.EXP: "Exp", T.FLOOR: "Floor", T.LOG: "Log", T.RELU: "Relu",
          T.SIGMOID: "Sigmoid", T.SIN: "Sin", T.TANH: "Tanh", T.ASSIGN: "Identity"}


@converts(*_UNARY, T.RELU6, T.RSQRT, T.SQUARE, T.SWISH)
def _unary(g: GraphBuilder, op: Operation):
    x, out = g.x(op, 0), g.out(op)
    dtype = _compute_dtype(op)
    if op.type in _UNARY:
        g.one(_UNARY[op.type], [x], out)
    elif op.type == T.RELU6:
        g.one("Clip", [x, g.scalar(0, dtype), g.scalar(6, dtype)], out)
    elif op.type == T.RSQRT:
        g.one("Reciprocal", [g.one("Sqrt", [x])], out)
    elif op.type == T.SQUARE:
        g.one("Mul", [x, x], out)
    else:
        g.one("Mul", [x, g.one("Sigmoid", [x])], out)


@converts(T.CAST)
def _cast(g: GraphBuilder, op: Operation):
    target = precision_dtype(Precision(g.int(op, 1, what="dtype")))
    x = g.x(op, 0)
    source = _compute_dtype(op)
    if source.kind == "f" and target.kind in "iu" and target != np.int64:
        # builtin_device truncates to int64 first, then wraps into the narrower type (a C cast chain).
        x = g.one("Cast", [x], to=TensorProto.INT64)
    g.one("Cast", [x], g.out(op), to=onnx_type(target))


@converts(T.CLIP)
def _clip(g: GraphBuilder, op: Operation):
    dtype = _compute_dtype(op)
    low, high = g.as_scalar(op, 1, dtype), g.as_scalar(op, 2, dtype)
    # min(max(x, low), high) spelled out: when low > high every element is `high`, as the spec says.
    g.one("Min", [g.one("Max", [g.x(op, 0), low]), high], g.out(op))


_SQRT_HALF = 0.7071067811865476
_SQRT_2_OVER_PI = 0.7978845608028654


@converts(T.GELU)
def _gelu(g: GraphBuilder, op: Operation):
    x = g.x(op, 0)
    f = lambda v: g.scalar(v, np.float32)  # noqa: E731
    if g.bool(op, 1, False, "approximate"):
        cube = g.one("Mul", [g.one("Mul", [x, x]), x])
        inner = g.one("Mul", [g.one("Add", [x, g.one("Mul", [cube, f(0.044715)])]), f(_SQRT_2_OVER_PI)])
        factor = g.one("Add", [g.one("Tanh", [inner]), f(1.0)])
    else:
        factor = g.one("Add", [g.one("Erf", [g.one("Mul", [x, f(_SQRT_HALF)])]), f(1.0)])
    g.one("Mul", [g.one("Mul", [x, factor]), f(0.5)], g.out(op))


@converts(T.HARD_SIGMOID, T.HARD_SWISH)
def _hard_sigmoid(g: GraphBuilder, op: Operation):
    x = g.x(op, 0)
    alpha, beta = g.float(op, 1, what="alpha"), g.float(op, 2, what="beta")
    if op.type == T.HARD_SIGMOID:
        g.one("HardSigmoid", [x], g.out(op), alpha=alpha, beta=beta)
    else:
        g.one("Mul", [x, g.one("HardSigmoid", [x], alpha=alpha, beta=beta)], g.out(op))


@converts(T.LEAKY_RELU)
def _leaky_relu(g: GraphBuilder, op: Operation):
    g.one("LeakyRelu", [g.x(op, 0)], g.out(op), alpha=g.float(op, 1, what="alpha"))


@converts(T.PRELU)
def _prelu(g: GraphBuilder, op: Operation):
    rank = len(g.dims(op, 0))
    count = op.inputs[1].type.dims[0]
    slope = g.x(op, 1)
    # [C] slopes belong to axis 1; ONNX broadcasts from the right, so give them trailing 1s.
    shape = [-1] + [1] * (rank - 2) if count > 1 else []
    slope = g.one("Reshape", [slope, g.i64(shape)])
    g.one("PRelu", [g.x(op, 0), slope], g.out(op))


@converts(T.SOFTPLUS)
def _softplus(g: GraphBuilder, op: Operation):
    x = g.x(op, 0)
    beta, threshold = g.float(op, 1, what="beta"), g.float(op, 2, what="threshold")
    scaled = g.one("Mul", [x, g.scalar(beta, np.float32)])
    smooth = g.one("Div", [g.one("Softplus", [scaled]), g.scalar(beta, np.float32)])
    g.one("Where", [g.one("Greater", [scaled, g.scalar(threshold, np.float32)]), x, smooth], g.out(op))


# -- convolution and pooling ----------------------------------------------------------------------------
def _onnx_pads(pads) -> list:
    top, bottom, left, right = pads
    return [int(top), int(left), int(bottom), int(right)]


def _window(g: GraphBuilder, op: Operation, auto_pad_index: int, kernel, strides, dilations=(1, 1)):
    """(explicit NNAdapter pads, dilations) for a window op; needs the spatial dims for SAME."""
    auto_pad = g.int(op, auto_pad_index, int(AutoPad.AUTO_PAD_NONE), "auto_pad")
    pads = g.ints(op, auto_pad_index + 1, None, "pads")
    if auto_pad == AutoPad.AUTO_PAD_SAME:
        spatial = g.known_dims(op, 0, "input")[2:]
    else:
        spatial = (1, 1)
    if pads is not None and len(pads) != 4:
        raise Unsupported(f"pads {pads}")
    return resolve_window(auto_pad, pads, spatial, kernel, strides, dilations)


@converts(T.CONV_2D)
def _conv_2d(g: GraphBuilder, op: Operation):
    filter_dims = g.known_dims(op, 1, "filter")
    strides = g.ints(op, 5, [1, 1], "strides")
    (pads, dilations), group = _window(g, op, 3, filter_dims[2:], strides, g.ints(op, 7, [1, 1], "dilations")), \
        g.int(op, 6, 1, "group")
    code = _fuse_code(g, op, 8)
    conv = g.one("Conv", [g.x(op, 0), g.x(op, 1), g.x(op, 2)], kernel_shape=list(filter_dims[2:]),
                 strides=strides, dilations=list(dilations), pads=_onnx_pads(pads), group=group)
    g.fuse(conv, code, np.float32, g.out(op))


@converts(T.CONV_2D_TRANSPOSE)
def _conv_2d_transpose(g: GraphBuilder, op: Operation):
    filter_dims = g.known_dims(op, 1, "filter")
    kernel = filter_dims[2:]
    strides = g.ints(op, 5, [1, 1], "strides")
    (pads, dilations) = _window(g, op, 3, kernel, strides, g.ints(op, 7, [1, 1], "dilations"))
    group = g.int(op, 6, 1, "group")
    output_padding = g.ints(op, 8, [0, 0], "output_padding")
    output_shape = g.ints(op, 9, None, "output_shape")
    code = _fuse_code(g, op, 10)
    top, bottom, left, right = pads
    begin, end = [top, left], [bottom, right]
    if output_shape is not None:
        # builtin_device keeps the window [pad_begin, pad_begin + output) of the full result and
        # zero-extends past its end: ONNX gets the end pad (or output_padding) that makes that size.
        spatial = g.known_dims(op, 0, "input")[2:]
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


def _pool_params(g: GraphBuilder, op: Operation):
    kernel = g.ints(op, 3, what="kernel_shape")
    strides = g.ints(op, 4, what="strides")
    pads, _ = _window(g, op, 1, kernel, strides)
    return kernel, strides, pads, g.bool(op, 5, False, "ceil_mode")


@converts(T.AVERAGE_POOL_2D)
def _average_pool(g: GraphBuilder, op: Operation):
    kernel, strides, pads, ceil_mode = _pool_params(g, op)
    include_pad = g.bool(op, 6, False, "count_include_pad")
    code = _fuse_code(g, op, 7)
    if _is_global_window(g, op, kernel, pads):
        g.fuse(g.one("GlobalAveragePool", [g.x(op, 0)]), code, np.float32, g.out(op))
        return
    if ceil_mode:
        _check_no_empty_window(g, op, kernel, strides, pads)
    pooled = g.one("AveragePool", [g.x(op, 0)], kernel_shape=kernel, strides=strides, pads=_onnx_pads(pads),
                   ceil_mode=int(ceil_mode), count_include_pad=int(include_pad))
    g.fuse(pooled, code, np.float32, g.out(op))


def _is_global_window(g: GraphBuilder, op: Operation, kernel, pads) -> bool:
    """One unpadded window over the whole (known) plane: the pool is a global one. onnxruntime runs
    GlobalAveragePool / GlobalMaxPool about twice as fast as the same window as a plain pool (its NCHWc
    kernels too), which is how Paddle's global and adaptive [1, 1] pools of SE blocks and heads arrive."""
    spatial = g.dims(op, 0)[2:]
    return len(spatial) == 2 and all(known(d) for d in spatial) and list(kernel) == list(spatial) \
        and not any(pads) and tuple(op.outputs[0].type.dims[2:]) == (1, 1)


def _check_no_empty_window(g: GraphBuilder, op: Operation, kernel, strides, pads):
    """ceil_mode: NNAdapter (Paddle) keeps a last window that starts in the end padding; ONNX drops
    it (its last window must start inside the input or the begin padding). Claim only shapes where
    the two agree."""
    spatial = g.known_dims(op, 0, "input")[2:]
    out = tuple(op.outputs[0].type.dims[2:])
    if not all(known(d) for d in out):
        raise Unsupported("ceil_mode output dims unknown")
    for a in (0, 1):
        if (out[a] - 1) * strides[a] >= spatial[a] + pads[2 * a]:
            raise Unsupported("the last ceil_mode window starts in the end padding (ONNX drops it)")


@converts(T.MAX_POOL_2D)
def _max_pool(g: GraphBuilder, op: Operation):
    kernel, strides, pads, ceil_mode = _pool_params(g, op)
    with_indices = len(op.outputs) > 1 and op.outputs[1] is not None
    code = _fuse_code(g, op, 8)
    if not with_indices and _is_global_window(g, op, kernel, pads):
        g.fuse(g.one("GlobalMaxPool", [g.x(op, 0)]), code, np.float32, g.out(op))
        return
    if ceil_mode:
        _check_no_empty_window(g, op, kernel, strides, pads)
    outputs = g.node("MaxPool", [g.x(op, 0)], 2 if with_indices else 1, kernel_shape=kernel, strides=strides,
                     pads=_onnx_pads(pads), ceil_mode=int(ceil_mode))
    g.fuse(outputs[0], code, np.float32, g.out(op))
    if with_indices:
        _plane_indices(g, op, outputs[1])


def _plane_indices(g: GraphBuilder, op: Operation, flat: str):
    """ONNX indices count over the whole NCHW tensor; NNAdapter's within each H x W plane."""
    h, w = g.known_dims(op, 0, "input")[2:]
    within = g.one("Mod", [flat, g.scalar(h * w, np.int64)])
    g.one("Cast", [within], g.out(op, 1), to=onnx_type(op.outputs[1].type.dtype))


@converts(T.ADAPTIVE_AVERAGE_POOL_2D, T.ADAPTIVE_MAX_POOL_2D)
def _adaptive_pool(g: GraphBuilder, op: Operation):
    out_h, out_w = g.ints(op, 1, what="output_shape")
    with_indices = op.type == T.ADAPTIVE_MAX_POOL_2D and len(op.outputs) > 1 and op.outputs[1] is not None
    h, w = g.dims(op, 0)[2:]
    x = g.x(op, 0)
    if (out_h, out_w) == (1, 1) and not with_indices:
        g.one("GlobalAveragePool" if op.type == T.ADAPTIVE_AVERAGE_POOL_2D else "GlobalMaxPool", [x], g.out(op))
        return
    if not (known(h) and known(w)) or h % out_h or w % out_w:
        raise Unsupported(f"adaptive pooling {h}x{w} -> {out_h}x{out_w} is not a regular window")
    kernel = [h // out_h, w // out_w]
    if op.type == T.ADAPTIVE_AVERAGE_POOL_2D:
        g.one("AveragePool", [x], g.out(op), kernel_shape=kernel, strides=kernel)
        return
    outputs = g.node("MaxPool", [x], 2 if with_indices else 1, kernel_shape=kernel, strides=kernel)
    g.one("Identity", [outputs[0]], g.out(op))
    if with_indices:
        _plane_indices(g, op, outputs[1])


# -- normalization ---------------------------------------------------------------------------------------
@converts(T.BATCH_NORMALIZATION)
def _batch_norm(g: GraphBuilder, op: Operation):
    eps = g.float(op, 5, 1e-5, "epsilon")
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


@converts(T.GROUP_NORMALIZATION)
def _group_norm(g: GraphBuilder, op: Operation):
    groups = g.int(op, 4, what="groups")
    eps = g.float(op, 3, 1e-5, "epsilon")
    x = g.x(op, 0)
    grouped = g.one("Reshape", [x, g.i64([0, groups, -1])])
    normalized = g.one("Reshape", [_standardize(g, grouped, [2], eps), g.one("Shape", [x])])
    _channel_affine(g, op, normalized, len(g.dims(op, 0)))


@converts(T.INSTANCE_NORMALIZATION)
def _instance_norm(g: GraphBuilder, op: Operation):
    rank = len(g.dims(op, 0))
    eps = g.float(op, 3, 1e-5, "epsilon")
    _channel_affine(g, op, _standardize(g, g.x(op, 0), list(range(2, rank)), eps), rank)


@converts(T.LAYER_NORMALIZATION)
def _layer_norm(g: GraphBuilder, op: Operation):
    dims = g.dims(op, 0)
    axis = normalize_axis(g.int(op, 3, what="begin_norm_axis"), len(dims))
    eps = g.float(op, 4, 1e-5, "epsilon")
    tail = dims[axis:]
    if not all(known(d) for d in tail):
        raise Unsupported("normalized dims must be known to shape scale and bias")
    scale = g.one("Reshape", [g.x(op, 1), g.i64(tail)])
    bias = g.one("Reshape", [g.x(op, 2), g.i64(tail)])
    g.node("LayerNormalization", [g.x(op, 0), scale, bias], [g.out(op)], axis=axis, epsilon=eps)


@converts(T.LP_NORMALIZATION)
def _lp_norm(g: GraphBuilder, op: Operation):
    axis = g.int(op, 1, 1, "axis")
    p = g.int(op, 2, 2, "p")
    eps = g.float(op, 3, 1e-5, "epsilon")
    x = g.x(op, 0)
    norm = g.one("ReduceL1" if p == 1 else "ReduceL2", [x, g.i64([axis])], keepdims=1)
    g.one("Div", [x, g.one("Add", [norm, g.scalar(eps, np.float32)])], g.out(op))


@converts(T.LRN)
def _lrn(g: GraphBuilder, op: Operation):
    size = g.int(op, 1, 5, "size")
    bias = g.float(op, 2, 1.0, "bias")
    alpha = g.float(op, 3, 1e-4, "alpha")
    beta = g.float(op, 4, 0.75, "beta")
    # ONNX divides alpha by size; NNAdapter (Paddle) does not.
    g.one("LRN", [g.x(op, 0)], g.out(op), size=size, bias=bias, alpha=alpha * size, beta=beta)


# -- matrix products and softmax --------------------------------------------------------------------------
@converts(T.FULLY_CONNECTED)
def _fully_connected(g: GraphBuilder, op: Operation):
    input_size = g.known_dims(op, 1, "weight")[1]
    code = _fuse_code(g, op, 3)
    rows = g.one("Reshape", [g.x(op, 0), g.i64([-1, input_size])])
    inputs = [rows, g.x(op, 1)] + ([g.x(op, 2)] if op.inputs[2] is not None else [])
    product = g.one("Gemm", inputs, transB=1)
    g.fuse(product, code, np.float32, g.out(op))


def _swap_last_two(g: GraphBuilder, name: str, rank: int) -> str:
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return g.one("Transpose", [name], perm=perm)


@converts(T.MAT_MUL)
def _mat_mul(g: GraphBuilder, op: Operation):
    x, y = g.x(op, 0), g.x(op, 1)
    x_rank, y_rank = len(g.dims(op, 0)), len(g.dims(op, 1))
    if g.bool(op, 2, False, "transpose_x") and x_rank >= 2:
        x = _swap_last_two(g, x, x_rank)
    if g.bool(op, 3, False, "transpose_y") and y_rank >= 2:
        y = _swap_last_two(g, y, y_rank)
    g.one("MatMul", [x, y], g.out(op))


@converts(T.SOFTMAX, T.LOG_SOFTMAX)
def _softmax(g: GraphBuilder, op: Operation):
    axis = g.int(op, 1, 1, "axis")
    g.one("Softmax" if op.type == T.SOFTMAX else "LogSoftmax", [g.x(op, 0)], g.out(op), axis=axis)


# -- pad and resize --------------------------------------------------------------------------------------
_ONNX_PAD_MODES = {PadMode.CONSTANT: "constant", PadMode.REFLECT: "reflect", PadMode.REPLICATE: "edge",
                   PadMode.EDGE: "edge"}


@converts(T.PAD)
def _pad(g: GraphBuilder, op: Operation):
    pads = g.ints(op, 1, what="pads")
    mode = PadMode(g.int(op, 2, what="mode"))
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
    align_corners = g.bool(op, 3, False, "align_corners")
    align_mode = 1 if nearest else g.int(op, 4, 1, "align_mode")
    x = g.x(op, 0)
    sizes = scales = None
    if op.inputs[1] is not None:
        shape = g.value(op, 1)
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
        factors = g.value(op, 2)
        if factors is None:
            raise Unsupported("scales must be a constant")
        factors = [float(s) for s in np.asarray(factors).reshape(-1)]
        spatial = dims[-2:]
        if not all(known(d) for d in spatial):
            raise Unsupported("resizing by scales needs known input dims")
        # Paddle truncates float32(in * scale); ONNX floors the same product, and both read source
        # coordinates as out / scale.
        scales = g.const(np.float32([1.0] * (rank - 2) + factors))
    if align_corners:
        transform = "align_corners"
    elif nearest or align_mode == 1:
        transform = "asymmetric"
    else:
        transform = "pytorch_half_pixel"  # half-pixel, but a single output row reads row 0 (as Paddle)
    attrs = dict(coordinate_transformation_mode=transform, mode="nearest" if nearest else "linear")
    if nearest:
        attrs["nearest_mode"] = "round_prefer_ceil" if align_corners else "floor"
    g.one("Resize", [x, None, scales, sizes], g.out(op), **attrs)


@converts(T.RESIZE_NEAREST)
def _resize_nearest(g: GraphBuilder, op: Operation):
    _resize(g, op, True)


@converts(T.RESIZE_LINEAR)
def _resize_linear(g: GraphBuilder, op: Operation):
    _resize(g, op, False)


# -- quantization ---------------------------------------------------------------------------------------
@converts(T.QUANTIZE)
def _quantize(g: GraphBuilder, op: Operation):
    g.quantize(g.x(op, 0), op.outputs[0].type, g.out(op))


@converts(T.DEQUANTIZE)
def _dequantize(g: GraphBuilder, op: Operation):
    g.one("Identity", [g.dequantize(g.raw(op, 0), op.inputs[0].type)], g.out(op))


# -- reductions, arg, top-k, cum-sum ----------------------------------------------------------------------
@converts(T.REDUCE_MEAN, T.REDUCE_MAX, T.REDUCE_SUM)
def _reduce(g: GraphBuilder, op: Operation):
    keepdim = g.bool(op, 2, False, "keepdim")
    onnx_op = {T.REDUCE_MEAN: "ReduceMean", T.REDUCE_MAX: "ReduceMax", T.REDUCE_SUM: "ReduceSum"}[op.type]
    if op.type == T.REDUCE_MEAN and _compute_dtype(op).kind != "f":
        raise Unsupported("integer mean")
    g.one(onnx_op, [g.x(op, 0), g.as_i64(op, 1)], g.out(op), keepdims=int(keepdim))


@converts(T.ARG_MAX, T.ARG_MIN)
def _arg(g: GraphBuilder, op: Operation):
    axis = g.int(op, 1, what="axis")
    keepdim = g.bool(op, 2, False, "keepdim")
    index = g.one("ArgMax" if op.type == T.ARG_MAX else "ArgMin", [g.x(op, 0)], axis=axis, keepdims=int(keepdim))
    g.one("Cast", [index], g.out(op), to=onnx_type(op.outputs[0].type.dtype))


@converts(T.CUM_SUM)
def _cum_sum(g: GraphBuilder, op: Operation):
    if not g.dims(op, 0):
        raise Unsupported("cumulative sum of a 0-d tensor")
    axis = g.int(op, 1, -1, "axis")
    g.one("CumSum", [g.x(op, 0), g.scalar(axis, np.int64)], g.out(op),
          exclusive=int(g.bool(op, 2, False, "exclusive")), reverse=int(g.bool(op, 3, False, "reverse")))


@converts(T.TOP_K)
def _top_k(g: GraphBuilder, op: Operation):
    axis = g.int(op, 2, what="axis")
    largest = g.bool(op, 3, True, "largest")
    k = g.as_i64(op, 1)
    values, indices = g.node("TopK", [g.x(op, 0), k], 2, axis=axis, largest=int(largest), sorted=1)
    g.one("Identity", [values], g.out(op, 0))
    g.one("Cast", [indices], g.out(op, 1), to=onnx_type(op.outputs[1].type.dtype))


# -- reshaping ----------------------------------------------------------------------------------------
@converts(T.RESHAPE)
def _reshape(g: GraphBuilder, op: Operation):
    # ONNX Reshape (allowzero=0) has NNAdapter's meaning: 0 copies the input dim, one -1 is inferred.
    g.one("Reshape", [g.x(op, 0), g.as_i64(op, 1)], g.out(op))


@converts(T.FLATTEN)
def _flatten(g: GraphBuilder, op: Operation):
    dims = g.dims(op, 0)
    rank = len(dims)
    if rank == 0:
        g.one("Reshape", [g.x(op, 0), g.i64([1])], g.out(op))
        return
    start = normalize_axis(g.int(op, 1, what="start_axis"), rank)
    end = normalize_axis(g.int(op, 2, what="end_axis"), rank)
    after = dims[end + 1:]
    if not all(known(d) for d in after):
        raise Unsupported("dims after end_axis must be known")
    g.one("Reshape", [g.x(op, 0), g.i64([0] * start + [-1] + list(after))], g.out(op))


@converts(T.SQUEEZE)
def _squeeze(g: GraphBuilder, op: Operation):
    has_axes = len(op.inputs) > 1 and op.inputs[1] is not None
    axes = g.ints(op, 1, None, "axes") if has_axes else None
    removed = squeeze_axes(g.dims(op, 0), axes)
    if not removed:
        g.one("Identity", [g.x(op, 0)], g.out(op))
    else:
        g.one("Squeeze", [g.x(op, 0), g.i64(removed)], g.out(op))


@converts(T.UNSQUEEZE)
def _unsqueeze(g: GraphBuilder, op: Operation):
    axes = g.ints(op, 1, what="axes")
    rank = len(g.dims(op, 0))
    x = g.x(op, 0)
    # Paddle inserts one axis at a time, each counted in the rank reached so far.
    for k, a in enumerate(axes):
        position = a + rank + 1 if a < 0 else a
        x = g.one("Unsqueeze", [x, g.i64([position])], g.out(op) if k == len(axes) - 1 else None)
        rank += 1
    if not axes:
        g.one("Identity", [x], g.out(op))


@converts(T.TRANSPOSE)
def _transpose(g: GraphBuilder, op: Operation):
    rank = len(g.dims(op, 0))
    perm = g.ints(op, 1, what="perm") or list(range(rank))[::-1]
    g.one("Transpose", [g.x(op, 0)], g.out(op), perm=[normalize_axis(p, rank) for p in perm])


@converts(T.CHANNEL_SHUFFLE)
def _channel_shuffle(g: GraphBuilder, op: Operation):
    group = g.int(op, 1, what="group")
    channels = g.dims(op, 0)[1]
    if not known(channels):
        raise Unsupported("the channel count must be known")
    x = g.x(op, 0)
    grouped = g.one("Reshape", [x, g.i64([0, group, channels // group, -1])])
    swapped = g.one("Transpose", [grouped], perm=[0, 2, 1, 3])
    g.one("Reshape", [swapped, g.one("Shape", [x])], g.out(op))


# -- slicing, joining, splitting -----------------------------------------------------------------------
@converts(T.SLICE)
def _slice(g: GraphBuilder, op: Operation):
    rank = len(g.dims(op, 0))
    starts = g.as_i64(op, 2)
    count = op.inputs[2].type.dims[0] if op.inputs[2].type.dims else 1
    if op.inputs[1] is None:
        if not known(count):
            raise Unsupported("starts of unknown length without axes")
        axes = g.i64(list(range(count)))
    else:
        axes = g.i64([normalize_axis(a, rank) for a in g.ints(op, 1, what="axes")])
    steps = g.as_i64(op, 4) if len(op.inputs) > 4 and op.inputs[4] is not None else None
    g.one("Slice", [g.x(op, 0), starts, g.as_i64(op, 3), axes, steps], g.out(op))


@converts(T.CONCAT)
def _concat(g: GraphBuilder, op: Operation):
    n = len(op.inputs) - 1
    axis = normalize_axis(g.int(op, n, what="axis"), len(g.dims(op, 0)))
    g.one("Concat", [g.x(op, i) for i in range(n)], g.out(op), axis=axis)


@converts(T.STACK)
def _stack(g: GraphBuilder, op: Operation):
    n = len(op.inputs) - 1
    axis = normalize_axis(g.int(op, n, what="axis"), len(g.dims(op, 0)) + 1)
    parts = [g.one("Unsqueeze", [g.x(op, i), g.i64([axis])]) for i in range(n)]
    g.one("Concat", parts, g.out(op), axis=axis)


@converts(T.SPLIT)
def _split(g: GraphBuilder, op: Operation):
    dims = g.dims(op, 0)
    axis = normalize_axis(g.int(op, 1, what="axis"), len(dims))
    sizes = split_sections(dims[axis], g.ints(op, 2, what="split"))
    if not all(known(s) for s in sizes):
        raise Unsupported("an inferred (-1) split size needs the axis size")
    g.node("Split", [g.x(op, 0), g.i64(sizes)], [g.out(op, j) for j in range(len(op.outputs))], axis=axis)


@converts(T.UNSTACK)
def _unstack(g: GraphBuilder, op: Operation):
    dims = g.dims(op, 0)
    axis = normalize_axis(g.int(op, 1, what="axis"), len(dims))
    num = g.int(op, 2, what="num")
    parts = g.node("Split", [g.x(op, 0), g.i64([1] * num)], num, axis=axis)
    for j, part in enumerate(parts):
        g.one("Squeeze", [part, g.i64([axis])], g.out(op, j))


@converts(T.MESHGRID)
def _meshgrid(g: GraphBuilder, op: Operation):
    n = len(op.inputs)
    vectors = [g.x(op, i) for i in range(n)]
    full = g.one("Concat", [g.one("Shape", [v]) for v in vectors], axis=0)
    for i, v in enumerate(vectors):
        shape = [1] * n
        shape[i] = -1
        g.one("Expand", [g.one("Reshape", [v, g.i64(shape)]), full], g.out(op, i))


# -- broadcasting, gathering, moving ---------------------------------------------------------------------
@converts(T.TILE)
def _tile(g: GraphBuilder, op: Operation):
    rank = len(g.dims(op, 0))
    x = g.x(op, 0)
    if g.value(op, 1) is None:
        if op.inputs[1].type.dims != (rank,):
            raise Unsupported("run-time repeats must have one value per input axis")
        g.one("Tile", [x, g.as_i64(op, 1)], g.out(op))
        return
    repeats = g.ints(op, 1)
    # numpy.tile: the shorter of (dims, repeats) gets leading 1s.
    if len(repeats) > rank:
        x = g.one("Unsqueeze", [x, g.i64(list(range(len(repeats) - rank)))])
    repeats = [1] * (rank - len(repeats)) + repeats
    g.one("Tile", [x, g.i64(repeats)], g.out(op))


@converts(T.EXPAND)
def _expand(g: GraphBuilder, op: Operation):
    # ONNX Expand broadcasts both ways, so NNAdapter's -1 ("keep the input dim") becomes 1.
    shape = g.value(op, 1)
    if shape is not None:
        target = g.i64([1 if int(s) == -1 else int(s) for s in np.asarray(shape).reshape(-1)])
    else:
        given = g.as_i64(op, 1)
        target = g.one("Where", [g.one("Equal", [given, g.i64([-1])]), g.i64([1]), given])
    g.one("Expand", [g.x(op, 0), target], g.out(op))


@converts(T.GATHER)
def _gather(g: GraphBuilder, op: Operation):
    axis = normalize_axis(g.int(op, 2, what="axis"), len(g.dims(op, 0)))
    g.one("Gather", [g.x(op, 0), g.raw(op, 1)], g.out(op), axis=axis)


@converts(T.ROLL)
def _roll(g: GraphBuilder, op: Operation):
    dims = g.known_dims(op, 0, "input")
    shifts = g.ints(op, 1, what="shifts")
    axes = g.ints(op, 2, None, "axes") if len(op.inputs) > 2 else None
    x = g.x(op, 0)
    if not axes:
        flat = g.one("Reshape", [x, g.i64([-1])])
        rolled = _roll_axis(g, flat, 0, int(np.prod(dims)), shifts[0])
        g.one("Reshape", [rolled, g.i64(list(dims))], g.out(op))
        return
    for k, (shift, axis) in enumerate(zip(shifts, axes)):
        axis = normalize_axis(axis, len(dims))
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
@converts(T.SHAPE)
def _shape(g: GraphBuilder, op: Operation):
    g.one("Cast", [g.one("Shape", [g.raw(op, 0)])], g.out(op), to=onnx_type(op.outputs[0].type.dtype))


@converts(T.FILL)
def _fill(g: GraphBuilder, op: Operation):
    value = g.as_scalar(op, 1, op.inputs[1].type.dtype)
    g.one("Expand", [value, g.as_i64(op, 0)], g.out(op))


@converts(T.FILL_LIKE)
def _fill_like(g: GraphBuilder, op: Operation):
    value = g.as_scalar(op, 1, op.inputs[1].type.dtype)
    g.one("Expand", [value, g.one("Shape", [g.raw(op, 0)])], g.out(op))


@converts(T.RANGE)
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


@converts(T.GRID_SAMPLE)
def _grid_sample(g: GraphBuilder, op: Operation):
    align_corners = g.bool(op, 2, False, "align_corners")
    mode = InterpolateMode(g.int(op, 3, what="mode"))
    pad_mode = PadMode(g.int(op, 4, what="pad_mode"))
    g.one("GridSample", [g.x(op, 0), g.x(op, 1)], g.out(op), align_corners=int(align_corners),
          mode=_GRID_MODES[mode], padding_mode=_GRID_PAD_MODES[pad_mode])


@converts(T.ROI_ALIGN)
def _roi_align(g: GraphBuilder, op: Operation):
    out_h, out_w = g.int(op, 3, what="output_height"), g.int(op, 4, what="output_width")
    sampling_ratio = g.int(op, 5, what="sampling_ratio")
    spatial_scale = g.float(op, 6, what="spatial_scale")
    aligned = g.bool(op, 7, False, "aligned")
    batch = g.one("Cast", [g.raw(op, 2)], to=TensorProto.INT64)
    g.one("RoiAlign", [g.x(op, 0), g.x(op, 1), batch], g.out(op), output_height=out_h, output_width=out_w,
          sampling_ratio=max(sampling_ratio, 0), spatial_scale=spatial_scale, mode="avg",
          coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel")


@converts(T.DEFORMABLE_CONV_2D)
def _deformable_conv(g: GraphBuilder, op: Operation):
    # ONNX DeformConv reads offsets as Paddle does: per offset group, per kernel tap, a (dy, dx) pair.
    filter_dims = g.known_dims(op, 3, "filter")
    pads = g.ints(op, 5, [0, 0, 0, 0], "pads")
    strides = g.ints(op, 6, [1, 1], "strides")
    group = g.int(op, 7, 1, "group")
    offset_group = g.int(op, 8, 1, "deformable_group")
    dilations = g.ints(op, 9, [1, 1], "dilations")
    code = _fuse_code(g, op, 10)
    inputs = [g.x(op, 0), g.x(op, 3), g.x(op, 1), g.x(op, 4), g.x(op, 2)]
    conv = g.one("DeformConv", inputs, kernel_shape=list(filter_dims[2:]), pads=_onnx_pads(pads),
                 strides=strides, dilations=dilations, group=group, offset_group=offset_group)
    g.fuse(conv, code, np.float32, g.out(op))


@converts(T.PRIOR_BOX)
def _prior_box(g: GraphBuilder, op: Operation):
    """The boxes depend only on the input/image dims and constant attributes: with static dims they
    are folded to constants here by builtin_device's kernel (the numpy reference)."""
    from hal.builtin_device.interpreter import run_operation

    for i in (0, 1):
        g.known_dims(op, i, "input and image")
    arrays = []
    for i, operand in enumerate(op.inputs):
        if operand is None:
            arrays.append(None)
        elif i < 2:
            arrays.append(np.zeros(operand.type.dims, dtype=operand.type.dtype))
        else:
            value = g.value(op, i)
            if value is None:
                raise Unsupported("prior box attributes must be constants")
            arrays.append(value)
    boxes, variances = run_operation(op, arrays)
    g.one("Identity", [g.const(boxes, hint="prior_boxes")], g.out(op, 0))
    g.one("Identity", [g.const(variances, hint="prior_variances")], g.out(op, 1))


@converts(T.YOLO_BOX)
def _yolo_box(g: GraphBuilder, op: Operation):
    """YOLOv3 head decoding, step for step as builtin_device's kernel: in float64 (sigmoid spelled
    1 / (1 + exp(-x)) as there), rounded to float32 at the end. The grid offsets are constants, so H
    and W must be known; the batch may be symbolic and the image sizes run-time values."""
    anchors = g.ints(op, 2, what="anchors")
    class_num = g.int(op, 3, what="class_num")
    conf_thresh = g.float(op, 4, what="conf_thresh")
    downsample = g.int(op, 5, what="downsample_ratio")
    clip_bbox = g.bool(op, 6, what="clip_bbox")
    scale = g.float(op, 7, what="scale_x_y")
    iou_aware = g.bool(op, 8, what="iou_aware")
    iou_factor = g.float(op, 9, what="iou_aware_factor")
    h, w = g.dims(op, 0)[2:]
    if not (known(h) and known(w)):
        raise Unsupported("the grid needs known H and W")
    if not anchors or len(anchors) % 2 or class_num < 1:
        raise Unsupported(f"{len(anchors)} anchor values, {class_num} classes")
    a = len(anchors) // 2
    f64 = TensorProto.DOUBLE
    d = lambda v: g.scalar(v, np.float64)  # noqa: E731

    def sigmoid(name: str) -> str:
        return g.one("Div", [d(1.0), g.one("Add", [d(1.0), g.one("Exp", [g.one("Neg", [name])])])])

    x = g.one("Cast", [g.x(op, 0)], to=f64)
    iou = None
    if iou_aware:
        channels = g.i64([1])
        iou = sigmoid(g.one("Slice", [x, g.i64([0]), g.i64([a]), channels]))
        iou = g.one("Unsqueeze", [iou, g.i64([2])])  # [N, A, 1, H, W]
        x = g.one("Slice", [x, g.i64([a]), g.i64([np.iinfo(np.int64).max]), channels])
    pred = g.one("Reshape", [x, g.i64([0, a, 5 + class_num, h, w])])
    tx, ty, tw, th, tconf, tcls = g.node("Split", [pred, g.i64([1, 1, 1, 1, 1, class_num])], 6, axis=2)
    conf = sigmoid(tconf)  # [N, A, 1, H, W]
    if iou is not None:
        conf = g.one("Mul", [g.one("Pow", [conf, d(1.0 - iou_factor)]), g.one("Pow", [iou, d(iou_factor)])])
    img_h, img_w = g.node("Split", [g.one("Reshape", [g.one("Cast", [g.x(op, 1)], to=f64),
                                                      g.i64([-1, 2, 1, 1, 1])]), g.i64([1, 1])], 2, axis=1)
    bias = d(-0.5 * (scale - 1.0))
    grid_x = g.const(np.arange(w, dtype=np.float64).reshape(1, 1, 1, 1, w), hint="grid_x")
    grid_y = g.const(np.arange(h, dtype=np.float64).reshape(1, 1, 1, h, 1), hint="grid_y")

    def center(grid: str, t: str, img: str, size: int) -> str:
        shifted = g.one("Add", [g.one("Add", [grid, g.one("Mul", [sigmoid(t), d(scale)])]), bias])
        return g.one("Div", [g.one("Mul", [shifted, img]), d(size)])

    def extent(t: str, column: int, img: str, size: int) -> str:
        anchor = g.const(np.float64(anchors[column::2]).reshape(1, a, 1, 1, 1), hint="anchors")
        scaled = g.one("Mul", [g.one("Mul", [g.one("Exp", [t]), anchor]), img])
        return g.one("Div", [g.one("Div", [scaled, d(downsample * size)]), d(2.0)])

    cx, cy = center(grid_x, tx, img_w, w), center(grid_y, ty, img_h, h)
    half_w, half_h = extent(tw, 0, img_w, w), extent(th, 1, img_h, h)
    corners = [g.one("Sub", [cx, half_w]), g.one("Sub", [cy, half_h]),
               g.one("Add", [cx, half_w]), g.one("Add", [cy, half_h])]
    if clip_bbox:
        corners = [g.one("Max", [corners[0], d(0.0)]), g.one("Max", [corners[1], d(0.0)]),
                   g.one("Min", [corners[2], g.one("Sub", [img_w, d(1.0)])]),
                   g.one("Min", [corners[3], g.one("Sub", [img_h, d(1.0)])])]
    # Under the confidence threshold boxes and scores are multiplied by 0 (so inf * 0 stays NaN, as there).
    keep = g.one("Cast", [g.one("GreaterOrEqual", [conf, d(conf_thresh)])], to=f64)
    boxes = g.one("Mul", [g.one("Concat", corners, axis=2), keep])  # [N, A, 4, H, W]
    last = [0, 1, 3, 4, 2]
    boxes = g.one("Transpose", [g.one("Cast", [boxes], to=TensorProto.FLOAT)], perm=last)
    g.one("Reshape", [boxes, g.i64([0, a * h * w, 4])], g.out(op, 0))
    if g.out(op, 1) is not None:
        scores = g.one("Mul", [sigmoid(tcls), g.one("Mul", [conf, keep])])  # [N, A, K, H, W]
        scores = g.one("Transpose", [g.one("Cast", [scores], to=TensorProto.FLOAT)], perm=last)
        g.one("Reshape", [scores, g.i64([0, a * h * w, class_num])], g.out(op, 1))


# NON_MAX_SUPPRESSION (Paddle's multiclass_nms3: per-class eta-adaptive NMS, keep_top_k across classes,
# data-dependent row layout) has no faithful ONNX form here: not registered, so False.


# -- the model ---------------------------------------------------------------------------------------------
def operation_supported(op: Operation) -> bool:
    """True iff `op` passes its signature check and converts without Unsupported."""
    converter = CONVERTERS.get(op.type)
    if converter is None:
        return False
    try:
        spec = get_spec(op.type)
        check_signature(op, spec)
        if spec.validate is not None:
            spec.validate(op)
        GraphBuilder().convert(op, converter)
    except (Unsupported, OperationError, NNAdapterError, ValueError, TypeError, IndexError, KeyError):
        return False
    return True


def _value_info(name: str, t: OperandType, symbolic_prefix: str, with_shape: bool = True):
    if not with_shape:
        return helper.make_tensor_value_info(name, onnx_type(t.dtype), None)
    shape = [d if known(d) else f"{symbolic_prefix}_d{k}" for k, d in enumerate(t.dims)]
    return helper.make_tensor_value_info(name, onnx_type(t.dtype), shape)


def convert_model(model: Model) -> onnx.ModelProto:
    """The whole model as ONNX; raises Unsupported naming the first operation that cannot convert."""
    g = GraphBuilder()
    for k, operand in enumerate(model.input_operands):
        g.boundary_names[operand.index] = f"input{k}"
    for k, operand in enumerate(model.output_operands):
        g.boundary_names.setdefault(operand.index, f"output{k}")
    for op in model.topological_operations():
        converter = CONVERTERS.get(op.type)
        if converter is None:
            raise Unsupported(f"{op.label()}: no ONNX mapping")
        try:
            g.convert(op, converter)
        except Unsupported as exc:
            raise Unsupported(f"{op.label()}: {exc}") from None
    inputs = []
    for k, operand in enumerate(model.input_operands):
        inputs.append(_value_info(g.operand_name(operand), operand.type, f"input{k}"))
    outputs = []
    for k, operand in enumerate(model.output_operands):
        name = g.operand_name(operand)
        if operand.is_constant:
            name = f"output{k}"
            g.one("Identity", [g.const(operand.value)], name)
        elif name != f"output{k}":  # a model input (or an earlier output) passed straight through
            name = g.one("Identity", [name], f"output{k}")
        outputs.append(_value_info(name, operand.type, f"output{k}", with_shape=False))
    graph = helper.make_graph(g.nodes, "nnadapter_model", inputs, outputs, initializer=g.initializers)
    proto = helper.make_model(graph, producer_name="nnadapter-bridge",
                              opset_imports=[helper.make_operatorsetid("", OPSET)])
    proto.ir_version = IR_VERSION
    return proto
