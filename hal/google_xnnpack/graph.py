"""NNAdapter Model -> one TFLite subgraph (`.tflite` flatbuffer bytes) for the google_xnnpack driver.

`TfliteBuilder` holds the tensors, buffers, operator codes and operators of one subgraph, written with the
object API of the TFLite schema that ai-edge-litert ships (`ai_edge_litert.schema_py_generated`), so no
TensorFlow is needed. Each operation's implementation (in `operations.OPERATIONS`, which the driver passes in:
this module never imports it) appends the TFLite operators of one NNAdapter operation; an `Unsupported` raised
anywhere in it means validate_program answers False for that operation.

Layout: NNAdapter tensors are NCHW; XNNPACK's convolutions and pools are NHWC. A rank-4 value is stored in
whichever layout its producer wrote it in ("nhwc" after a conv or pool, "plain" (NNAdapter's order) after a
reshape or at a model input), and a consumer asks for the layout it needs: `value(op, i, NHWC)` inserts one
TRANSPOSE the first time a plain value is read as NHWC (cached, so a value feeding several convs is transposed
once), and constants are permuted in numpy, so filters are pre-transposed once and no transposes surround the
convolutions of a chain. Model inputs arrive and model outputs leave in NNAdapter's order.

Every dim must be known when the program is built (TFLite tensors here are static); a trial build for
validate_program on a model whose dims are declared -1 takes 1 for those (`trial=True`), since the program the
runtime compiles has the concrete shapes. Only float32 tensors are built, and for quantized models symmetric
per-layer int8 ones (a QUANTIZE result: a TFLite int8 tensor of the same scale) and the int32 sums of an integer
product (hal.common.is_integer_product), stored as their real values in float32, which is what the DEQUANTIZE
reading them gives; other integer operands are declined, and integer parameters are read as constants. A
quantized constant is read as its real values. Before the operations are converted, the quantized convolution
chains of the model (hal.quantized_chains) are found: the CONV_2D of a chain writes the chain's last QUANTIZE as
one TFLite int8 convolution, and the operations between are `absorbed` (operations.py); an integer product that
heads no chain is XNNPACK's dynamically quantized convolution on its int8 input (`real_with_range`), or (grouped)
a float one on the real values, with its float tail (DEQUANTIZE -> batch norm [-> relu]) folded in.
"""
from __future__ import annotations

from collections.abc import Sequence

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from hal.common import OperationTable, Unsupported, operation_alone, unsupported_reason
from hal.quantized_chains import ConvChain, FloatTail, find_conv_chains, find_float_tails
from nnadapter_bridge.errors import NNAdapterError, OperationError
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations.common import known
from nnadapter_bridge.nnadapter.operations.registry import dequantize
from nnadapter_bridge.nnadapter.types import Operand, Operation

PLAIN = "plain"  # NNAdapter's own axis order (NCHW for rank 4)
NHWC = "nhwc"
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

BuiltinOperator = schema.BuiltinOperator
BuiltinOptions = schema.BuiltinOptions


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


class Value:
    """The TFLite tensor holding one NNAdapter operand, and the axis order it is stored in."""

    __slots__ = ("tensor", "layout")

    def __init__(self, tensor: int, layout: str):
        self.tensor = tensor
        self.layout = layout


class TfliteBuilder:
    """Collects the tensors and operators of one subgraph; `finish` packs them into `.tflite` bytes."""

    def __init__(self, trial: bool = False):
        self.trial = trial
        self.tensors: list = []
        self.buffers: list = [schema.BufferT()]  # buffer 0: the empty buffer of every non-constant tensor
        self.operators: list = []
        self.opcodes: dict[int, int] = {}  # builtin code -> index in operatorCodes
        self.opcode_list: list = []
        self.values: dict[int, Value] = {}  # operand index -> its tensor
        self._constants: dict[tuple[int, str], int] = {}  # (operand index, layout) -> constant tensor
        self._converted: dict[tuple[int, str], int] = {}  # (operand index, layout) -> transposed tensor
        self.current: Operation | None = None
        self.chains: dict[int, ConvChain] = {}  # id(CONV_2D) -> its quantized chain (hal.quantized_chains)
        self.tails: dict[int, FloatTail] = {}  # id(CONV_2D) -> the float tail folded into it
        self.absorbed: set = set()  # ids of the operations a convolution already wrote (chains, tails)
        self._dequantized: dict[tuple[int, str], int] = {}  # (int8 operand index, layout) -> its float tensor
        self.dequantized_from: dict[int, tuple[Value, float]] = {}  # DEQUANTIZE result -> (its int8 value, scale)
        self._with_range: dict[int, int] = {}  # int8 operand index -> real_with_range's tensor
        self.consumers: dict[int, list] = {}  # operand index -> the operations reading it (convert_model's model)
        self.model_outputs: set = set()

    # -- tensors ------------------------------------------------------------------------------------
    def operand_dims(self, operand: Operand) -> tuple[int, ...]:
        dims = tuple(operand.type.dims)
        if all(known(d) for d in dims):
            return tuple(int(d) for d in dims)
        if self.trial:
            return tuple(int(d) if known(d) else 1 for d in dims)
        raise Unsupported(f"dims {[d if known(d) else -1 for d in dims]} must be known (XNNPACK's tensors are static)")

    def tensor(self, shape: Sequence[int], hint: str = "t", dtype=np.float32, like: int | None = None,
               quantization=None) -> int:
        """A fresh tensor of `shape`: of `dtype`, or of the type and quantization of tensor `like`."""
        t = schema.TensorT()
        t.shape = [int(d) for d in shape]
        if like is not None:
            t.type, t.quantization = self.tensors[like].type, self.tensors[like].quantization
        else:
            t.type = _TENSOR_TYPES[np.dtype(dtype)]
            t.quantization = quantization
        t.buffer = 0
        label = self.current.label() if self.current is not None else "graph"
        t.name = f"{label}/{hint}{len(self.tensors)}".encode()
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, value, dtype=np.float32, hint: str = "c", quantization=None) -> int:
        array = np.array(value, dtype=dtype, order="C")
        index = self.tensor(array.shape, hint, dtype, quantization=quantization)
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(array.tobytes(), dtype=np.uint8)
        self.buffers.append(buffer)
        self.tensors[index].buffer = len(self.buffers) - 1
        return index

    def i32(self, values) -> int:
        return self.const(np.asarray(values, dtype=np.int32).reshape(-1), np.int32, "i")

    def shape_of(self, tensor: int) -> tuple[int, ...]:
        return tuple(self.tensors[tensor].shape)

    # -- operators ----------------------------------------------------------------------------------
    def operator(self, code: int, inputs: Sequence[int], outputs: Sequence[int], options_type: int = 0,
                 options=None) -> None:
        if code not in self.opcodes:
            oc = schema.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)  # the int8 field; 127 = PLACEHOLDER_FOR_GREATER_OP_CODES
            oc.version = 1
            self.opcodes[code] = len(self.opcode_list)
            self.opcode_list.append(oc)
        o = schema.OperatorT()
        o.opcodeIndex = self.opcodes[code]
        o.inputs = [int(i) for i in inputs]
        o.outputs = [int(i) for i in outputs]
        if options is not None:
            o.builtinOptionsType = options_type
            o.builtinOptions = options
        self.operators.append(o)

    def one(self, code: int, inputs: Sequence[int], shape: Sequence[int], options_type: int = 0, options=None,
            output: int | None = None) -> int:
        """Append one operator with one output of `shape` (a fresh tensor unless `output` is given)."""
        out = self.tensor(shape, hint=_code_name(code).lower()) if output is None else output
        self.operator(code, inputs, [out], options_type, options)
        return out

    def transpose(self, tensor: int, perm: Sequence[int]) -> int:
        shape = self.shape_of(tensor)
        out = self.tensor([shape[p] for p in perm], "transpose", like=tensor)
        return self.one(BuiltinOperator.TRANSPOSE, [tensor, self.i32(perm)], (), output=out)

    def reshape(self, tensor: int, shape: Sequence[int]) -> int:
        if tuple(shape) == self.shape_of(tensor):
            return tensor
        return self.reshape_copy(tensor, shape)

    # -- operands of the current operation ------------------------------------------------------------
    def check_float(self, operand: Operand, what: str, quantized: bool = False) -> None:
        """Only float32 operands are built, and (where the implementation says `quantized`) symmetric per-layer
        int8 ones, stored as TFLite int8 tensors, plain int8 model inputs (int8 tensors of scale 1), and the int32
        sums of an integer product, stored as their real values in float32 (`real_valued`)."""
        if quantized and (int8_tensor_type(operand) or is_real_valued(operand)
                          or operand.type.precision == Precision.INT8):
            return
        if operand.type.is_quantized or np.dtype(operand.type.dtype) != np.float32:
            raise Unsupported(f"{what} is {operand.type.precision.name}: only float32 tensors are built"
                              + (" (and symmetric per-layer int8 ones)" if quantized else ""))

    def stored(self, op: Operation, i: int, quantized: bool = False) -> Value:
        """Input i as it is stored (its producer's layout); constants in NNAdapter's order."""
        operand = op.inputs[i]
        self.check_float(operand, f"input {i}", quantized)
        if operand.is_constant:
            return Value(self._constant(operand, PLAIN), PLAIN)
        value = self.values.get(operand.index)
        if value is None:
            raise Unsupported(f"input {i} (operand {operand.index}) is not produced before it is read")
        return value

    def layout_of(self, op: Operation, i: int) -> str:
        operand = op.inputs[i]
        if operand.is_constant or operand.index not in self.values:
            return PLAIN
        return self.values[operand.index].layout

    def value(self, op: Operation, i: int, layout: str = PLAIN, quantized: bool = False) -> int:
        """Input i's tensor in `layout` (NHWC applies to rank 4 only; other ranks are always plain)."""
        operand = op.inputs[i]
        if operand.type.rank != 4:
            layout = PLAIN
        if operand.is_constant:
            self.check_float(operand, f"input {i}")
            return self._constant(operand, layout)
        value = self.stored(op, i, quantized)
        if value.layout == layout:
            return value.tensor
        key = (operand.index, layout)
        if key not in self._converted:
            current, self.current = self.current, None
            try:
                self._converted[key] = self.transpose(value.tensor, TO_NHWC if layout == NHWC else TO_NCHW)
            finally:
                self.current = current
        return self._converted[key]

    def plain_memory(self, op: Operation, i: int) -> int:
        """A tensor whose memory holds input i in NNAdapter's order (its shape may be the stored one): an NHWC
        value whose H and W are 1, or whose C is 1, has the NCHW order already, and needs no transpose."""
        value = self.stored(op, i)
        if value.layout == NHWC:
            n, h, w, c = self.shape_of(value.tensor)
            if h * w == 1 or c == 1:
                return value.tensor
        return self.value(op, i, PLAIN)

    def real(self, op: Operation, i: int, layout: str = PLAIN) -> int:
        """Input i's real values in float32 in `layout`: an int8 operand through one DEQUANTIZE (made once)."""
        operand = op.inputs[i]
        if operand.is_constant or not int8_tensor_type(operand):
            return self.value(op, i, layout)
        layout = layout if operand.type.rank == 4 else PLAIN
        key = (operand.index, layout)
        if key not in self._dequantized:
            stored = self.stored(op, i, quantized=True)
            current, self.current = self.current, None
            try:
                real = self.one(BuiltinOperator.DEQUANTIZE, [stored.tensor], self.shape_of(stored.tensor))
                self._dequantized[(operand.index, stored.layout)] = real
                if stored.layout != layout:
                    self._dequantized[key] = self.transpose(real, TO_NHWC if layout == NHWC else TO_NCHW)
            finally:
                self.current = current
        return self._dequantized[key]

    def fit_trial_input(self, op: Operation, i: int, dims: Sequence[int | None]) -> None:
        """A trial build (`trial`: validate_program on declared -1 dims) gives every unknown dim 1, which need not
        agree with the operation's other operands (a reshape into 8 x 8 windows, a matmul contracting with a
        constant weight), where a compiled program's concrete dims do. Here input i of `op`, when it is a model
        input no operator has read yet, takes `dims` (None: kept) where its operand's dims are unknown, as a
        concrete program would; nothing changes outside a trial."""
        operand = op.inputs[i]
        if not self.trial or operand.is_constant or operand.index not in self.values:
            return
        tensor = self.values[operand.index].tensor
        if self.values[operand.index].layout != PLAIN or any(tensor in o.inputs for o in self.operators) \
                or tensor in self._converted.values():
            return
        shape = list(self.tensors[tensor].shape)
        for k, (declared, want) in enumerate(zip(operand.type.dims, dims)):
            if not known(declared) and want is not None:
                shape[k] = int(want)
        self.tensors[tensor].shape = shape

    def real_with_range(self, op: Operation, i: int) -> int:
        """Int8 input i in NHWC with two channels appended holding -128 and 127, dequantized (made once per
        operand): what XNNPACK's dynamically quantized convolution reads without rounding anything. That
        convolution (a float input, per-channel int8 weights, a float result) quantizes its input again, per
        pixel, to the int8 grid spanning the pixel's own minimum and maximum; with -128 and 127 in every pixel
        that grid is the input's own (its scale, zero point 0), so the int8 values come back exactly and the
        product is the exact int32 sums times the scales."""
        operand = op.inputs[i]
        if operand.is_constant or not int8_tensor_type(operand) or operand.type.rank != 4:
            raise Unsupported(f"input {i} is not an int8 rank-4 value")
        if operand.index not in self._with_range:
            x = self.value(op, i, NHWC, quantized=True)
            n, h, w, c = self.shape_of(x)
            current, self.current = self.current, None
            try:
                extremes = np.empty((n, h, w, 2), np.int8)
                extremes[..., 0], extremes[..., 1] = -128, 127
                tensor_quantization = self.tensors[x].quantization
                options = schema.ConcatenationOptionsT()
                options.axis = 3
                widened = self.tensor((n, h, w, c + 2), "range", like=x)
                self.operator(BuiltinOperator.CONCATENATION,
                              [x, self.const(extremes, np.int8, "range", quantization=tensor_quantization)],
                              [widened], BuiltinOptions.ConcatenationOptions, options)
                self._with_range[operand.index] = self.one(BuiltinOperator.DEQUANTIZE, [widened], (n, h, w, c + 2))
            finally:
                self.current = current
        return self._with_range[operand.index]

    def _constant(self, operand: Operand, layout: str) -> int:
        key = (operand.index, layout)
        if key not in self._constants:
            array = dequantize(np.asarray(operand.value), operand.type).astype(np.float32)  # real values
            if layout == NHWC:
                array = array.transpose(TO_NHWC)
            self._constants[key] = self.const(array, hint="w")
        return self._constants[key]

    def out_shape(self, op: Operation, j: int = 0, layout: str = PLAIN) -> tuple[int, ...]:
        dims = self.operand_dims(op.outputs[j])
        if layout == NHWC and len(dims) == 4:
            return tuple(dims[p] for p in TO_NHWC)
        return dims

    def output(self, op: Operation, j: int = 0, layout: str = PLAIN, quantized: bool = False) -> int:
        """A fresh tensor for output j stored in `layout` (the implementation writes it): int8 with the
        operand's scale for an int8 operand, float32 otherwise (the real values of an integer product's sums)."""
        operand = op.outputs[j]
        self.check_float(operand, f"output {j}", quantized)
        if operand.type.rank != 4:
            layout = PLAIN
        shape = self.out_shape(op, j, layout)
        if int8_tensor_type(operand):
            tensor = self.tensor(shape, "q", np.int8, quantization=quantization(operand.type.scale))
        else:
            tensor = self.tensor(shape, hint="out")
        self.values[operand.index] = Value(tensor, layout)
        return tensor

    def produced(self, op: Operation, j: int, tensor: int, layout: str = PLAIN, quantized: bool = False) -> None:
        """Record `tensor` (already written) as output j, checking its shape against the operand's dims."""
        operand = op.outputs[j]
        self.check_float(operand, f"output {j}", quantized)
        if operand.type.rank != 4:
            layout = PLAIN
        want = self.out_shape(op, j, layout)
        if self.shape_of(tensor) != want:
            raise Unsupported(f"TFLite's result has dims {list(self.shape_of(tensor))}, the operation's "
                              f"{list(want)} ({layout})")
        self.values[operand.index] = Value(tensor, layout)

    @staticmethod
    def constant(op: Operation, i: int, what: str) -> np.ndarray:
        operand = op.inputs[i] if i < len(op.inputs) else None
        if operand is None or not operand.is_constant:
            raise Unsupported(f"{what} must be a constant")
        return np.asarray(operand.value)

    # -- the whole model ------------------------------------------------------------------------------
    def convert(self, op: Operation, implementation) -> None:
        self.current = op
        try:
            implementation(self, op)
        finally:
            self.current = None

    def finish(self, model: Model) -> bytes:
        """The `.tflite` bytes: inputs and outputs in NNAdapter's order, in model order."""
        inputs = []
        for operand in model.input_operands:
            value = self.values.get(operand.index)
            inputs.append(value.tensor if value is not None else self._model_input(operand).tensor)
        outputs = []
        for operand in model.output_operands:
            value = self.values.get(operand.index)
            if value is None:
                raise Unsupported(f"model output operand {operand.index} is never written")
            if is_real_valued(operand):
                raise Unsupported(f"model output operand {operand.index} holds an integer product's int32 sums "
                                  "(XNNPACK's int8 operators write int8; only a DEQUANTIZE of them is built)")
            tensor = value.tensor
            if value.layout == NHWC:
                tensor = self.transpose(tensor, TO_NCHW)
            if tensor in outputs or tensor in inputs:  # a model output listed twice, or an input passed through
                tensor = self.reshape_copy(tensor)
            outputs.append(tensor)
        subgraph = schema.SubGraphT()
        subgraph.tensors = self.tensors
        subgraph.inputs = inputs
        subgraph.outputs = outputs
        subgraph.operators = self.operators
        subgraph.name = b"main"
        m = schema.ModelT()
        m.version = SCHEMA_VERSION
        m.operatorCodes = self.opcode_list
        m.subgraphs = [subgraph]
        m.buffers = self.buffers
        m.description = b"nnadapter-bridge google_xnnpack"
        builder = flatbuffers.Builder(1 << 16)
        builder.Finish(m.Pack(builder), file_identifier=FILE_IDENTIFIER)
        return bytes(builder.Output())

    def reshape_copy(self, tensor: int, shape: Sequence[int] | None = None) -> int:
        """`tensor` reshaped (a RESHAPE; to its own shape when `shape` is None: a copy, for a subgraph output that
        must be its own tensor), of its type and quantization."""
        shape = [int(d) for d in (self.shape_of(tensor) if shape is None else shape)]
        options = schema.ReshapeOptionsT()
        options.newShape = list(shape)
        out = self.tensor(shape, "reshape", like=tensor)
        return self.one(BuiltinOperator.RESHAPE, [tensor, self.i32(shape)], (), BuiltinOptions.ReshapeOptions,
                        options, output=out)

    def _model_input(self, operand: Operand) -> Value:
        if int8_tensor_type(operand) or operand.type.precision == Precision.INT8:
            # plain int8 storage (Paddle Lite's calib result) as an int8 tensor of scale 1: its integers themselves
            scale = operand.type.scale if int8_tensor_type(operand) else 1.0
            tensor = self.tensor(self.operand_dims(operand), f"input{operand.index}_", np.int8,
                                 quantization=quantization(scale))
        elif operand.index not in self.consumers and np.dtype(operand.type.dtype) in _UNREAD_INPUT_TYPES \
                and not operand.type.is_quantized:
            # An input no operator reads (a subgraph input whose shape alone was read, folded to a constant for
            # the concrete dims: a full_like of a bool mask) is a program input of its own type that nothing
            # touches; XNNPACK never sees it.
            tensor = len(self.tensors)
            self.tensor(self.operand_dims(operand), hint=f"input{operand.index}_")
            self.tensors[tensor].type = _UNREAD_INPUT_TYPES[np.dtype(operand.type.dtype)]
        else:
            self.check_float(operand, f"model input {operand.index}")
            tensor = self.tensor(self.operand_dims(operand), hint=f"input{operand.index}_")
        value = Value(tensor, PLAIN)
        self.values[operand.index] = value
        return value


def int8_tensor_type(operand: Operand) -> bool:
    """A symmetric per-layer int8 operand (a QUANTIZE result): a TFLite int8 tensor of the same scale."""
    t = operand.type
    return t.precision == Precision.QUANT_INT8_SYMM_PER_LAYER and not t.zero_point


def is_real_valued(operand: Operand) -> bool:
    """The int32 sums of an integer product (hal.common.is_integer_product): built as their real values in
    float32 (sums x scale), which is what the DEQUANTIZE reading them gives."""
    return operand.type.precision in (Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL)


_TENSOR_TYPES = {np.dtype(np.float32): schema.TensorType.FLOAT32, np.dtype(np.int32): schema.TensorType.INT32,
                 np.dtype(np.int8): schema.TensorType.INT8}
# The element types an unread model input may have (TfliteBuilder._model_input).
_UNREAD_INPUT_TYPES = {np.dtype(np.bool_): schema.TensorType.BOOL, np.dtype(np.int64): schema.TensorType.INT64,
                       np.dtype(np.int32): schema.TensorType.INT32, np.dtype(np.int16): schema.TensorType.INT16,
                       np.dtype(np.int8): schema.TensorType.INT8, np.dtype(np.uint8): schema.TensorType.UINT8,
                       np.dtype(np.float16): schema.TensorType.FLOAT16, np.dtype(np.float64): schema.TensorType.FLOAT64,
                       np.dtype(np.float32): schema.TensorType.FLOAT32}


def quantization(scales, axis: int = 0) -> schema.QuantizationParametersT:
    """TFLite's symmetric quantization parameters: one scale (per tensor) or one per index of `axis`."""
    q = schema.QuantizationParametersT()
    q.scale = [float(s) for s in np.asarray(scales, dtype=np.float32).reshape(-1)]
    q.zeroPoint = [0] * len(q.scale)
    q.quantizedDimension = int(axis)
    return q


def _code_name(code: int) -> str:
    for name, value in vars(BuiltinOperator).items():
        if value == code and not name.startswith("_"):
            return name
    return "op"


def convert_model(model: Model, table: OperationTable, trial: bool = False) -> bytes:
    """The `.tflite` bytes of `model` (raises Unsupported naming the operation that has no faithful form)."""
    g = TfliteBuilder(trial=trial)
    chains = find_conv_chains(model, with_pools=True)
    g.chains = {id(chain.conv): chain for chain in chains}
    g.tails = {id(tail.conv): tail for tail in find_float_tails(model, chains)}
    g.consumers = model.consumers()
    g.model_outputs = {o.index for o in model.output_operands}
    for operand in model.input_operands:
        g._model_input(operand)
    for op in model.operations:
        if id(op) in g.absorbed:
            continue
        implementation = table.get(op.type)
        if implementation is None:
            raise Unsupported(f"{op.label()}: {op.type.name} has no {table.device} implementation")
        try:
            g.convert(op, implementation)
        except Unsupported as exc:
            raise Unsupported(f"{op.label()}: {exc}") from None
    return g.finish(model)


# What a trial build may raise for an operation it cannot take (the SDK's own errors are the driver's trial_run's).
TRIAL_ERRORS = (Unsupported, OperationError, NNAdapterError, ValueError, TypeError, IndexError, KeyError)


def operation_unsupported_reason(op: Operation, table: OperationTable, trial_run,
                                 together: Sequence[Operation] = ()) -> str:
    """hal.common.unsupported_reason with this builder's trial: the operation alone (with the operations
    `together`, when it is only built with them) converts, and `trial_run` (the driver's: LiteRT builds it and
    XNNPACK takes every operator) accepts the bytes."""
    def trial(operation: Operation) -> None:
        model = operations_alone(together) if together else operation_alone(operation)
        trial_run(convert_model(model, table, trial=True))

    return unsupported_reason(op, table, trial, TRIAL_ERRORS)


def operations_alone(ops: Sequence[Operation]) -> Model:
    """hal.common.operation_alone for several operations (in this order): inputs no operation of `ops` writes
    become model inputs, outputs none of them reads become model outputs (an integer product and the
    DEQUANTIZE reading its int32 sums are only built together)."""
    model = Model()
    copies: dict[int, Operand] = {}
    model_inputs, model_outputs = [], []
    read = {o.index for op in ops for o in op.inputs if o is not None}
    for op in ops:
        for operand in op.inputs:
            if operand is None or operand.index in copies:
                continue
            copy = copies[operand.index] = model.add_operand(operand.type, operand.name)
            if operand.is_constant:
                model.set_operand_value(copy, operand.value)
            else:
                model_inputs.append(copy)
        outputs = []
        for operand in op.outputs:
            copy = None if operand is None else model.add_operand(operand.type, operand.name)
            if operand is not None:
                copies[operand.index] = copy
                if operand.index not in read:
                    model_outputs.append(copy)
            outputs.append(copy)
        model.add_operation(op.type, [None if o is None else copies[o.index] for o in op.inputs], outputs)
    model.identify_inputs_and_outputs(model_inputs, model_outputs)
    model.finish()
    return model


__all__: list[str] = ["TfliteBuilder", "Value", "convert_model", "quantization", "int8_tensor_type", "is_real_valued",
                      "operation_unsupported_reason", "operations_alone", "PLAIN", "NHWC",
                      "TO_NHWC", "TO_NCHW", "inverse"]
