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
runtime compiles has the concrete shapes. Only float32 tensors are built (quantized and integer operands are
declined); integer parameters are read as constants.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from nnadapter_bridge.errors import NNAdapterError, OperationError
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations.common import known
from nnadapter_bridge.nnadapter.types import Operand, Operation
from hal.common import OperationTable, Unsupported, operation_alone, unsupported_reason

PLAIN = "plain"  # NNAdapter's own axis order (NCHW for rank 4)
NHWC = "nhwc"
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

BuiltinOperator = schema.BuiltinOperator
BuiltinOptions = schema.BuiltinOptions


def inverse(perm: Sequence[int]) -> Tuple[int, ...]:
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
        self.opcodes: Dict[int, int] = {}  # builtin code -> index in operatorCodes
        self.opcode_list: list = []
        self.values: Dict[int, Value] = {}  # operand index -> its tensor
        self._constants: Dict[Tuple[int, str], int] = {}  # (operand index, layout) -> constant tensor
        self._converted: Dict[Tuple[int, str], int] = {}  # (operand index, layout) -> transposed tensor
        self.current: Optional[Operation] = None

    # -- tensors ------------------------------------------------------------------------------------
    def operand_dims(self, operand: Operand) -> Tuple[int, ...]:
        dims = tuple(operand.type.dims)
        if all(known(d) for d in dims):
            return tuple(int(d) for d in dims)
        if self.trial:
            return tuple(int(d) if known(d) else 1 for d in dims)
        raise Unsupported(f"dims {[d if known(d) else -1 for d in dims]} must be known (XNNPACK's tensors are static)")

    def tensor(self, shape: Sequence[int], hint: str = "t", dtype=np.float32) -> int:
        t = schema.TensorT()
        t.shape = [int(d) for d in shape]
        t.type = {np.dtype(np.float32): schema.TensorType.FLOAT32,
                  np.dtype(np.int32): schema.TensorType.INT32}[np.dtype(dtype)]
        t.buffer = 0
        label = self.current.label() if self.current is not None else "graph"
        t.name = f"{label}/{hint}{len(self.tensors)}".encode()
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, value, dtype=np.float32, hint: str = "c") -> int:
        array = np.array(value, dtype=dtype, order="C")
        index = self.tensor(array.shape, hint, dtype)
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(array.tobytes(), dtype=np.uint8)
        self.buffers.append(buffer)
        self.tensors[index].buffer = len(self.buffers) - 1
        return index

    def i32(self, values) -> int:
        return self.const(np.asarray(values, dtype=np.int32).reshape(-1), np.int32, "i")

    def shape_of(self, tensor: int) -> Tuple[int, ...]:
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
            output: Optional[int] = None) -> int:
        """Append one operator with one output of `shape` (a fresh tensor unless `output` is given)."""
        out = self.tensor(shape, hint=_code_name(code).lower()) if output is None else output
        self.operator(code, inputs, [out], options_type, options)
        return out

    def transpose(self, tensor: int, perm: Sequence[int]) -> int:
        shape = self.shape_of(tensor)
        return self.one(BuiltinOperator.TRANSPOSE, [tensor, self.i32(perm)], [shape[p] for p in perm])

    def reshape(self, tensor: int, shape: Sequence[int]) -> int:
        if tuple(shape) == self.shape_of(tensor):
            return tensor
        options = schema.ReshapeOptionsT()
        options.newShape = [int(d) for d in shape]
        return self.one(BuiltinOperator.RESHAPE, [tensor, self.i32(shape)], shape, BuiltinOptions.ReshapeOptions,
                        options)

    # -- operands of the current operation ------------------------------------------------------------
    def check_float(self, operand: Operand, what: str) -> None:
        if operand.type.is_quantized or np.dtype(operand.type.dtype) != np.float32:
            raise Unsupported(f"{what} is {operand.type.precision.name}: only float32 tensors are built")

    def stored(self, op: Operation, i: int) -> Value:
        """Input i as it is stored (its producer's layout); constants in NNAdapter's order."""
        operand = op.inputs[i]
        self.check_float(operand, f"input {i}")
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

    def value(self, op: Operation, i: int, layout: str = PLAIN) -> int:
        """Input i's tensor in `layout` (NHWC applies to rank 4 only; other ranks are always plain)."""
        operand = op.inputs[i]
        if operand.type.rank != 4:
            layout = PLAIN
        if operand.is_constant:
            self.check_float(operand, f"input {i}")
            return self._constant(operand, layout)
        value = self.stored(op, i)
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

    def _constant(self, operand: Operand, layout: str) -> int:
        key = (operand.index, layout)
        if key not in self._constants:
            array = np.asarray(operand.value, dtype=np.float32)
            if layout == NHWC:
                array = array.transpose(TO_NHWC)
            self._constants[key] = self.const(array, hint="w")
        return self._constants[key]

    def out_shape(self, op: Operation, j: int = 0, layout: str = PLAIN) -> Tuple[int, ...]:
        dims = self.operand_dims(op.outputs[j])
        if layout == NHWC and len(dims) == 4:
            return tuple(dims[p] for p in TO_NHWC)
        return dims

    def output(self, op: Operation, j: int = 0, layout: str = PLAIN) -> int:
        """A fresh tensor for output j stored in `layout` (the implementation writes it)."""
        operand = op.outputs[j]
        self.check_float(operand, f"output {j}")
        if operand.type.rank != 4:
            layout = PLAIN
        tensor = self.tensor(self.out_shape(op, j, layout), hint="out")
        self.values[operand.index] = Value(tensor, layout)
        return tensor

    def produced(self, op: Operation, j: int, tensor: int, layout: str = PLAIN) -> None:
        """Record `tensor` (already written) as output j, checking its shape against the operand's dims."""
        operand = op.outputs[j]
        self.check_float(operand, f"output {j}")
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

    def reshape_copy(self, tensor: int) -> int:
        """A copy of `tensor` (a RESHAPE to its own shape), for a subgraph output that must be its own tensor."""
        shape = self.shape_of(tensor)
        options = schema.ReshapeOptionsT()
        options.newShape = list(shape)
        return self.one(BuiltinOperator.RESHAPE, [tensor, self.i32(shape)], shape, BuiltinOptions.ReshapeOptions,
                        options)

    def _model_input(self, operand: Operand) -> Value:
        self.check_float(operand, f"model input {operand.index}")
        value = Value(self.tensor(self.operand_dims(operand), hint=f"input{operand.index}_"), PLAIN)
        self.values[operand.index] = value
        return value


def _code_name(code: int) -> str:
    for name, value in vars(BuiltinOperator).items():
        if value == code and not name.startswith("_"):
            return name
    return "op"


def convert_model(model: Model, table: OperationTable, trial: bool = False) -> bytes:
    """The `.tflite` bytes of `model` (raises Unsupported naming the operation that has no faithful form)."""
    g = TfliteBuilder(trial=trial)
    for operand in model.input_operands:
        g._model_input(operand)
    for op in model.operations:
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


def operation_unsupported_reason(op: Operation, table: OperationTable, trial_run) -> str:
    """hal.common.unsupported_reason with this builder's trial: the operation alone converts, and `trial_run`
    (the driver's: LiteRT builds it and XNNPACK takes every operator) accepts the bytes."""
    def trial(operation: Operation) -> None:
        trial_run(convert_model(operation_alone(operation), table, trial=True))

    return unsupported_reason(op, table, trial, TRIAL_ERRORS)


__all__: List[str] = ["TfliteBuilder", "Value", "convert_model", "operation_unsupported_reason", "PLAIN", "NHWC",
                      "TO_NHWC", "TO_NCHW", "inverse"]
