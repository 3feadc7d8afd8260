"""NNAdapter Model -> ONNX ModelProto (opset 19) for the microsoft_onnxruntime driver: the graph builder.

`GraphBuilder` names tensors, holds initializers and appends nodes; each operation's implementation
(in `operations.OPERATIONS`, which the driver passes in: this module never imports it) appends the
nodes of one NNAdapter operation through it. The same implementation answers validate_program: it runs
against a throw-away builder, and an `Unsupported` raised anywhere in it (a parameter that must be
constant, an unknown dim the mapping needs, an attribute combination ONNX cannot express faithfully, a
missing mapping) means "False for this operation". So the claim and the conversion can never disagree.

Quantized operands follow builtin_device's rule: the operation computes on dequantized float32
values and requantizes its quantized outputs (DequantizeLinear / QuantizeLinear around the float
nodes; constants are dequantized here, in numpy, with the same float32 formula). SHAPE, FILL_LIKE,
QUANTIZE and DEQUANTIZE read raw values instead.

Integer products (hal.common.is_integer_product: int8 x int8 -> int32 sums, what the converters make of a
quantized Paddle conv / matmul): a FULLY_CONNECTED or MAT_MUL is MatMulInteger on uint8 activations (the int8
values + 128, a_zero_point 128) and the int8 weight initializer, onnxruntime's fast u8 x s8 kernel, writing
the exact int32 sums (on a CPU whose int8 dot product is exact, cpu_features.exact_int8_kernels; elsewhere Gemm /
MatMul in float on the dequantized operands). A CONV_2D whose result is requantized for the next quantized op
(through a dequantize, a batch norm and a relu) runs as QLinearConv (again only where the int8 dot product is
exact): the driver hands convert_model those chains (qdq.py, which folds
the batch norm and takes the next op's scale as the output scale). Any other CONV_2D computes in float on the
dequantized int8 operands (the same values; the float result is the sums times the scale): onnxruntime 1.32's
ConvInteger runs 5-25x slower than its float Conv here (no u8 x s8 fast path). The int32 storage of such a product is
materialized only where something reads it raw (a model output); a DEQUANTIZE reading it takes the float
result (`float_results`).

Entry points: `convert_model`, `operation_unsupported_reason` / `operation_supported`, `GraphBuilder`.
Imports hal.common, this driver's `nan_speculation` (which relus may stay plain) and the standard; never
another driver.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hal.common import OperationTable, Unsupported, first_output_name, unsupported_reason
from hal.microsoft_onnxruntime.nan_speculation import (
    METADATA_KEY,
    NAN_KEPT_RELU_SUFFIX,
    nan_kept_relus,
    nan_probe_nodes,
    nan_probe_operands,
)
from hal.protocol import fault_output_name
from nnadapter_bridge.errors import NNAdapterError, OperationError
from nnadapter_bridge.nnadapter.codes import FuseCode
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations import dequantize
from nnadapter_bridge.nnadapter.operations.common import known
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
RAW_QUANT_OPERATIONS = frozenset({T.SHAPE, T.FILL_LIKE, T.QUANTIZE, T.DEQUANTIZE})


def onnx_type(dtype) -> int:
    try:
        return _ONNX_TYPES[np.dtype(dtype)]
    except KeyError:
        raise Unsupported(f"dtype {np.dtype(dtype)} has no ONNX tensor type") from None


class GraphBuilder:
    """Collects the ONNX nodes and initializers of one model; names every tensor uniquely."""

    def __init__(self, relu_nan_to_zero: bool = True, nan_kept_relus: frozenset | set = frozenset()):
        # Paddle's relu maps NaN to 0 (context property MICROSOFT_ONNXRUNTIME_RELU_NAN_TO_ZERO; see relu)
        self.relu_nan_to_zero = relu_nan_to_zero
        self.nan_kept_relus = nan_kept_relus  # id() of operations whose relu stays plain (nan_speculation.py)
        self.sigmoid_gates: set = set()  # id() of SIGMOIDs that onnxruntime's own Sigmoid computes (sigmoid_gates)
        self.nodes: list = []
        self.initializers: list = []
        self._counter = 0
        self._float_views: dict[int, str] = {}  # operand index -> name of its dequantized float tensor
        self._constants: dict[int, str] = {}    # operand index -> initializer name
        self.current: Operation | None = None
        self._float_outputs: dict[int, str] = {}  # output position -> float temporary (current op)
        self.boundary_names: dict[int, str] = {}  # operand index -> graph input/output name
        # operand index -> float tensor holding an integer product's real value (see the module docstring)
        self.float_results: dict[int, str] = {}
        self.raw_read: set = set()  # operand indexes something reads raw (a raw-reading operation, a model output)
        self.producers: dict = {}  # operand index -> the operation writing it (Model.producers)
        # (boolean scalar tensor, what it says when true, the operation it belongs to): run-time checks of what
        # this device computes wrongly (nms.py: a candidate box without area); each becomes an extra graph output
        # (driver_protocol.fault_output_name), and a true one a device fault naming that operation, so the runtime
        # runs it elsewhere.
        self.faults: list = []
        self.producer_name = "nnadapter-bridge"  # the model's producer name; a fused chain may mark it (qdq.py)
        self.attention_biases: dict[int, str] = {}  # mask operand index -> the bias Attention takes (attention.py)

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

    def node(self, op_type: str, inputs: Sequence[str | None], outputs=1, **attrs) -> list[str]:
        """Append a node; `outputs` is a count (fresh names) or a list of names. Returns the outputs."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)] if isinstance(outputs, int) else list(outputs)
        self.nodes.append(helper.make_node(op_type, ["" if i is None else i for i in inputs], names,
                                           name=self.fresh("node"), **attrs))
        return names

    def any_true(self, flags: str) -> str:
        """A boolean scalar, true when some element of the boolean tensor `flags` is (a fault's flag). ReduceSum of
        it as INT64, not ReduceMax: an empty tensor sums to 0."""
        total = self.one("ReduceSum", [self.one("Cast", [flags], to=TensorProto.INT64)], keepdims=0)  # every axis
        return self.one("Greater", [total, self.scalar(0, np.int64)])

    def one(self, op_type: str, inputs: Sequence[str | None], output: str | None = None, **attrs) -> str:
        return self.node(op_type, inputs, 1 if output is None else [output], **attrs)[0]

    # -- operands of the current operation ------------------------------------------------------
    def raw(self, op: Operation, i: int) -> str | None:
        """The tensor holding input i exactly as stored (quantized integers stay integers)."""
        if i >= len(op.inputs) or op.inputs[i] is None:
            return None
        operand = op.inputs[i]
        if operand.is_constant:
            if operand.index not in self._constants:
                self._constants[operand.index] = self.const(operand.value, hint="w")
            return self._constants[operand.index]
        return self.operand_name(operand)

    def x(self, op: Operation, i: int) -> str | None:
        """Input i as the operation computes on it: quantized operands as dequantized float32."""
        if i >= len(op.inputs) or op.inputs[i] is None:
            return None
        operand = op.inputs[i]
        if not operand.type.is_quantized or op.type in RAW_QUANT_OPERATIONS:
            return self.raw(op, i)
        if operand.index in self.float_results:
            return self.float_results[operand.index]
        if operand.index not in self._float_views:
            if operand.is_constant:
                name = self.const(dequantize(np.asarray(operand.value), operand.type), hint="dq")
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

    def integer_product_result(self, op: Operation, real: str) -> None:
        """Record the float result `real` of an integer product as its output's real value (DEQUANTIZE reads
        it), and write the int32 storage (round(real / scale)) only where something reads it raw."""
        operand = op.outputs[0]
        self.float_results[operand.index] = real
        if operand.index not in self.raw_read:
            return
        t = operand.type
        if t.is_per_channel:
            shape = [1] * t.rank
            shape[t.channel_dim] = -1
            scale = self.const(np.asarray(t.scales, dtype=np.float32).reshape(shape))
        else:
            scale = self.scalar(t.scale, np.float32)
        rounded = self.one("Round", [self.one("Div", [real, scale])])
        self.one("Cast", [rounded], self.operand_name(operand), to=TensorProto.INT32)

    def out(self, op: Operation, j: int = 0) -> str | None:
        """The name the mapping writes output j to (a float temporary when the output is quantized;
        `finish_operation` quantizes it into the output operand)."""
        if j >= len(op.outputs) or op.outputs[j] is None:
            return None
        operand = op.outputs[j]
        if operand.type.is_quantized and op.type not in RAW_QUANT_OPERATIONS:
            if j not in self._float_outputs:
                self._float_outputs[j] = self.fresh("float_out")
            return self._float_outputs[j]
        return self.operand_name(operand)

    def convert(self, op: Operation, implementation: Implementation) -> None:
        """Append the nodes of one operation (raises Unsupported when it has no faithful form)."""
        self.current = op
        self._float_outputs = {}
        try:
            for operand in op.inputs + op.outputs:
                if operand is not None:
                    onnx_type(operand.type.dtype)  # every tensor needs an ONNX element type
            implementation(self, op)
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

    @staticmethod
    def dims(op: Operation, i: int) -> tuple:
        return tuple(op.inputs[i].type.dims)

    @staticmethod
    def known_dims(op: Operation, i: int, what: str = "input") -> tuple:
        """Input i's dims, every one of which the mapping needs (Unsupported when one is unknown)."""
        dims = tuple(op.inputs[i].type.dims)
        if not all(known(d) for d in dims):
            raise Unsupported(f"{what} dims {_shown(dims)} must be known")
        return dims

    @staticmethod
    def known_spatial_dims(op: Operation, i: int = 0, what: str = "input") -> tuple:
        """The spatial dims (after batch and channel) of input i, which a window or a resize needs; the batch
        and channel dims may stay unknown (a program compiled for a concrete signature knows these anyway)."""
        dims = tuple(op.inputs[i].type.dims)
        spatial = dims[2:]
        if not all(known(d) for d in spatial):
            raise Unsupported(f"{what} spatial dims {_shown(spatial)} (of {_shown(dims)}) must be known")
        return spatial

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
            array = dequantize(np.asarray(v), operand.type)
            return self.scalar(array.reshape(-1)[0], dtype)
        name = self.one("Reshape", [self.x(op, i), self.i64([])])
        if np.dtype(dtype) != (np.float32 if operand.type.is_quantized else operand.type.dtype):
            name = self.one("Cast", [name], to=onnx_type(dtype))
        return name

    def relu(self, name: str, dtype, output: str | None = None) -> str:
        """Paddle's relu, `x > 0 ? x : 0`: NaN becomes 0. ONNX Relu, Clip and Max all keep NaN, so one NaN pixel
        would spread to every output (Paddle, OpenVINO and builtin_device give finite results). ThresholdedRelu
        with alpha 0 is that formula; it follows a Relu, which onnxruntime fuses into a preceding Conv (MLAS
        activation), so the exact form costs one elementwise pass (mobilenet_v1: 6.0 ms, against 4.9 for a
        plain Relu and 10.1 for Where(Greater(x, 0), x, 0), which kept the Conv unfused). A relu whose kept NaN
        would show in an output is a plain Relu instead (`nan_kept_relus`, see nan_speculation.py)."""
        if np.dtype(dtype) == np.float32:
            if not self.relu_nan_to_zero:
                return self.one("Relu", [name], output)  # the user chose the SDK's NaN behaviour for speed
            if self.current is not None and id(self.current) in self.nan_kept_relus:
                # a NaN it keeps shows in an output, which the driver then runs exactly (nan_speculation.py)
                result = output or self.fresh("relu")
                self.nodes.append(helper.make_node("Relu", [name], [result],
                                                   name=self.fresh("node") + NAN_KEPT_RELU_SUFFIX))
                return result
            return self.one("ThresholdedRelu", [self.one("Relu", [name])], output, alpha=0.0)
        # other types (ThresholdedRelu is float32-only on the CPU provider, Relu has no int64 kernel)
        zero = self.scalar(0, dtype)
        return self.one("Where", [self.one("Greater", [name, zero]), name, zero], output)

    def fuse(self, name: str, fuse_code: int | None, dtype, output: str) -> str:
        """The fused activation (NNAdapter fuse_code) as a Clip; FUSED_NONE as an Identity."""
        code = FuseCode(int(fuse_code or 0))
        if code == FuseCode.FUSED_NONE:
            return self.one("Identity", [name], output)
        if code == FuseCode.FUSED_RELU:
            return self.relu(name, dtype, output)
        low, high = {FuseCode.FUSED_RELU1: (-1, 1), FuseCode.FUSED_RELU6: (0, 6)}[code]
        return self.one("Clip", [name, self.scalar(low, dtype), None if high is None else self.scalar(high, dtype)],
                        output)


Implementation = Callable[[GraphBuilder, Operation], None]


# The errors a trial conversion may raise for an operation ONNX cannot express: answered False.
TRIAL_ERRORS = (Unsupported, OperationError, NNAdapterError, ValueError, TypeError, IndexError, KeyError)


def operation_unsupported_reason(op: Operation, operations: OperationTable) -> str:
    """Why `op` cannot run as given ("" when it can): its signature check fails or it does not convert."""
    return unsupported_reason(op, operations, lambda o: GraphBuilder().convert(o, operations.get(o.type)),
                              TRIAL_ERRORS)


def operation_supported(op: Operation, operations: OperationTable) -> bool:
    """True iff `op` passes its signature check and converts without Unsupported."""
    return not operation_unsupported_reason(op, operations)


def _shown(dims) -> str:
    """Dims as a user reads them: '?' for an unknown one (NNADAPTER_UNKNOWN is -65535 inside)."""
    return "[" + ", ".join(str(d) if known(d) else "?" for d in dims) + "]"


# Name prefix of the extra boolean graph outputs that carry run-time faults (GraphBuilder.faults); the driver
# checks them after each run.
FAULT_PREFIX = "nnadapter_bridge_fault"


def _value_info(name: str, t: OperandType, symbolic_prefix: str, with_shape: bool = True):
    if not with_shape:
        return helper.make_tensor_value_info(name, onnx_type(t.dtype), None)
    shape = [d if known(d) else f"{symbolic_prefix}_d{k}" for k, d in enumerate(t.dims)]
    return helper.make_tensor_value_info(name, onnx_type(t.dtype), shape)


def sigmoid_gates(model: Model) -> set:
    """id() of the SIGMOID operations whose every reader multiplies the sigmoid by a feature it gates:
    - x * sigmoid(x), a SiLU written out (YOLOX's and CSPDarkNet's activations), as in the SWISH operation;
    - x * sigmoid(s) where the sigmoid has fewer elements than x (broadcast over it) and x is no sigmoid's: a
      channel attention's gate (EfficientNet's squeeze-and-excitation, PP-HGNet's ESE).
    onnxruntime's Sigmoid is accurate to about 6e-8 absolute only (operations.py computes SIGMOID as 1 / (1 + e^-x)
    for that), but in such a product the error is at most 6e-8 |x| absolute, the rounding of x itself: those keep
    the one fast Sigmoid, which onnxruntime also fuses into the convolution before it (PP-HGNet: four elementwise
    passes and a reorder out of the blocked layout and back, five times). A product of two sigmoids (YOLOX's class
    x objectness, a score near its threshold), a sigmoid read otherwise or of unknown size keeps the exact form."""
    consumers = model.consumers()
    producers = model.producers()
    outputs = {o.index for o in model.output_operands}
    gates = set()

    def gated(op: Operation, reader: Operation) -> bool:
        if reader.type != T.MUL:
            return False
        pair = [o for o in reader.inputs[:2] if o is not None]
        if len(pair) != 2 or op.outputs[0].index not in {o.index for o in pair}:
            return False
        if pair[0].index == pair[1].index:
            return False  # sigmoid(x) squared
        other = pair[1] if pair[0].index == op.outputs[0].index else pair[0]
        if other.index == op.inputs[0].index:
            return True  # x * sigmoid(x)
        source = producers.get(other.index)
        if source is not None and source.type in (T.SIGMOID, T.HARD_SIGMOID):
            return False
        gate, product = op.outputs[0].type, reader.outputs[0].type
        if gate.has_unknown_dims or product.has_unknown_dims or other.type.has_unknown_dims:
            return False
        return gate.numel() < product.numel() == other.type.numel()

    for op in model.operations:
        if op.type != T.SIGMOID or op.outputs[0].index in outputs:
            continue
        readers = consumers.get(op.outputs[0].index, [])
        if readers and all(gated(op, r) for r in readers):
            gates.add(id(op))
    return gates


def _convert_one(g: GraphBuilder, op: Operation, operations: OperationTable) -> None:
    implementation = operations.get(op.type)
    if implementation is None:
        raise Unsupported(f"{op.label()}: no ONNX mapping")
    try:
        g.convert(op, implementation)
    except Unsupported as exc:
        raise Unsupported(f"{op.label()}: {exc}") from None


def convert_model(model: Model, operations: OperationTable, relu_nan_to_zero: bool = True,
                  fused_chains: Sequence = (), keep_nan_where_visible: bool = False) -> onnx.ModelProto:
    """The whole model as ONNX; raises Unsupported naming the first operation that cannot convert.

    `keep_nan_where_visible`: the relus after which a NaN would reach a float output are plain Relus (named
    with nan_speculation.NAN_KEPT_RELU_SUFFIX, the model marked with its METADATA_KEY); the driver runs such a
    model with an exact fallback (nan_speculation.py).

    `fused_chains`: (head operation, the chain's operations, emit(g) -> bool) for chains emitted as one
    pattern at their head (qdq.py: the conv that starts it; attention.py: the reshape that ends it). Operations of
    a chain met before its head wait for it; when emit returns False they and the rest convert one by one. An
    emitter may set the model's producer name (g.producer_name: qdq.py marks the models that hold its pattern)."""
    fused_ops = [o for _, ops, _ in fused_chains for o in ops]
    watched: list = []  # the results of NaN-kept relus whose NaN the probe must sum to see (nan_speculation.py)
    kept = nan_kept_relus(model, fused_ops, watched) if relu_nan_to_zero and keep_nan_where_visible else set()
    g = GraphBuilder(relu_nan_to_zero, kept)
    heads = {id(head): (ops, emit) for head, ops, emit in fused_chains}
    head_of = {id(o): id(head) for head, ops, _ in fused_chains for o in ops if o is not head}
    waiting: dict[int, list] = {}  # head -> its chain's operations met before it, in order
    reached: set = set()
    skipped: set = set()
    g.producers = model.producers()
    g.sigmoid_gates = sigmoid_gates(model)
    g.raw_read = {o.index for o in model.output_operands}
    g.raw_read |= {o.index for op in model.operations if op.type != T.DEQUANTIZE for o in op.inputs if o is not None}
    for k, operand in enumerate(model.input_operands):
        g.boundary_names[operand.index] = f"input{k}"
    for k, operand in enumerate(model.output_operands):
        g.boundary_names.setdefault(operand.index, f"output{k}")
    for op in model.topological_operations():
        if id(op) in skipped:
            continue
        if id(op) in heads:
            reached.add(id(op))
            ops, emit = heads[id(op)]
            earlier_ops = waiting.pop(id(op), [])
            if emit(g):
                skipped.update(id(o) for o in ops)
                continue
            for earlier in earlier_ops:  # the chain converts op by op after all
                _convert_one(g, earlier, operations)
        elif id(op) in head_of and head_of[id(op)] not in reached:
            waiting.setdefault(head_of[id(op)], []).append(op)
            continue
        _convert_one(g, op, operations)
    for ops in waiting.values():  # pragma: no cover - every head is an operation of the model
        for op in ops:
            _convert_one(g, op, operations)
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
    for k, (flag, message, op) in enumerate(g.faults):
        name = g.one("Identity", [flag], fault_output_name(FAULT_PREFIX, k, message, first_output_name(op)))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.BOOL, []))
    speculative = any(node.name.endswith(NAN_KEPT_RELU_SUFFIX) for node in g.nodes)
    if speculative:  # the last output says whether the float outputs hold a NaN (nan_speculation.py)
        float_outputs = [info.name for info, operand in zip(outputs, model.output_operands)
                         if not operand.type.is_quantized and operand.type.dtype == np.float32]
        output_names = {operand.index: info.name for info, operand in zip(outputs, model.output_operands)}
        written = {name for node in g.nodes for name in node.output}
        probed = [output_names.get(operand.index, g.operand_name(operand))
                  for operand in nan_probe_operands(model, kept, fused_ops)]
        if not probed or not all(name in written or name in float_outputs for name in probed):
            probed = float_outputs  # an operand written under another name (in a fused pattern): the outputs
        # a watched relu is never part of a fused pattern (nan_kept_relus skips those): its own node wrote its result
        watched_names = [output_names.get(operand.index, g.operand_name(operand)) for operand in watched]
        probed = list(dict.fromkeys([*probed, *watched_names]))
        probe_nodes, probe_output = nan_probe_nodes(probed)
        g.nodes.extend(probe_nodes)
        outputs.append(probe_output)
    graph = helper.make_graph(g.nodes, "nnadapter_model", inputs, outputs, initializer=g.initializers)
    proto = helper.make_model(
        graph,
        producer_name=g.producer_name,
        opset_imports=[helper.make_operatorsetid("", OPSET)],
    )
    proto.ir_version = IR_VERSION
    if speculative:
        helper.set_model_props(proto, {METADATA_KEY: "1"})
    return proto
