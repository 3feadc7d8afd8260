"""The google_xnnpack HAL driver: contexts, LiteRT interpreters with the XNNPACK delegate, program bytes, execution.

* Context property GOOGLE_XNNPACK_NUM_THREADS (Paddle Lite's name; also read from the environment variable of
  the same name, and what Config.set_threads fills): the threads of XNNPACK's pthreadpool; 0 or unset is one
  thread, LiteRT's default.
* create_program lowers the model (hal.common.lower), builds one TFLite subgraph (graph.convert_model with the
  operations.OPERATIONS table) and opens a LiteRT `Interpreter` on it, which applies the XNNPACK delegate. The
  program bytes in the `.nnc` are those `.tflite` bytes (the same model gives the same bytes); a program
  restored from a cache opens an interpreter on them without converting anything. Before the build, batch norms
  are folded into the convolutions before them and relu / relu6 into their fuse codes (hal.fusion, the
  model-to-model rewrite builtin_device applies too): XNNPACK fuses a clamp into a convolution but not a
  MUL + ADD (mobilenet_v2 at one thread 8.6 -> 4.x ms).
* XNNPACK takes the whole subgraph or the program is refused: after the interpreter is built, `delegate_gaps`
  reads its nodes and requires one DELEGATE node computing every subgraph output from subgraph inputs and
  constants only, so no operator runs silently on LiteRT's reference kernels. validate_program builds every
  operation alone the same way (a trial interpreter), so an operation XNNPACK would not take is declined with
  that reason and goes to another device; `unsupported_reasons` gives the reasons.
* execute_program / run_arrays: the interpreter's tensors are static; an input whose dims differ from the
  compiled ones is INVALID_DIMENSIONS ("recompile for these shapes"). A LiteRT failure is DEVICE_INTERNAL_ERROR.
* clone_program opens a second interpreter on the same bytes (an interpreter runs one invocation at a time).

Imports the standard, hal.common, graph.py, operations.py and ai_edge_litert; never Paddle or another driver.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import numpy as np
from ai_edge_litert import schema_py_generated as _schema
from ai_edge_litert.interpreter import Interpreter

from hal.common import Unsupported, is_integer_product, lower
from hal.fusion import fuse_operations
from hal.google_xnnpack.graph import convert_model, is_real_valued, operation_unsupported_reason
from hal.google_xnnpack.operations import OPERATIONS
from hal.protocol import Argument, Cache, ContextCallback, Driver
from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import DeviceType, OperationType, ResultCode
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.properties import Properties

NUM_THREADS_KEY = "GOOGLE_XNNPACK_NUM_THREADS"


def _fail(message: str, code: ResultCode = ResultCode.INVALID_PARAMETER) -> NNAdapterError:
    return NNAdapterError(f"google_xnnpack: {message}", code)


def open_interpreter(model_bytes: bytes, num_threads: int) -> Interpreter:
    """A LiteRT interpreter on `model_bytes` with XNNPACK applied, its tensors allocated; raises Unsupported
    naming the operators XNNPACK left to LiteRT's own kernels."""
    try:
        interpreter = Interpreter(model_content=model_bytes, num_threads=max(num_threads, 1))
        interpreter.allocate_tensors()
    except (RuntimeError, ValueError) as exc:
        raise Unsupported(f"LiteRT cannot build it: {exc}") from None
    gaps = delegate_gaps(interpreter)
    if gaps:
        raise Unsupported(f"XNNPACK does not take {gaps} (LiteRT's reference kernels would run it)")
    return interpreter


def delegate_gaps(interpreter: Interpreter) -> str:
    """'' when one XNNPACK DELEGATE node computes every subgraph output from the subgraph inputs and constants
    alone, else the names of the operators it left out. LiteRT lists the model's operators first and the
    delegate's nodes after them (`_get_ops_details`, the interpreter's node list)."""
    nodes = interpreter._get_ops_details()
    delegates = [n for n in nodes if n["op_name"] == "DELEGATE"]
    operators = [n for n in nodes if n["op_name"] != "DELEGATE"]
    if not operators:
        return ""
    produced_by = {int(t): n["op_name"] for n in operators for t in n["outputs"]}
    outputs = {int(d["index"]) for d in interpreter.get_output_details()}
    if len(delegates) == 1:
        delegate = delegates[0]
        fed_by = {produced_by[int(t)] for t in delegate["inputs"] if int(t) in produced_by}
        missing = outputs - {int(t) for t in delegate["outputs"]}
        if not fed_by and not missing:
            return ""
        left = fed_by | {produced_by[t] for t in missing if t in produced_by}
    else:
        covered = {int(t) for d in delegates for t in d["outputs"]}
        left = {n["op_name"] for n in operators if not {int(t) for t in n["outputs"]} <= covered} \
            or {n["op_name"] for n in operators}
    return ", ".join(sorted(left)) or "the subgraph"


@dataclasses.dataclass
class XnnpackDevice:
    opened: bool = True


@dataclasses.dataclass
class XnnpackContext:
    device: XnnpackDevice
    properties: Properties
    num_threads: int
    callback: ContextCallback = None


@dataclasses.dataclass
class XnnpackProgram:
    context: XnnpackContext
    model_bytes: bytes
    interpreter: Interpreter | None
    input_types: list
    output_types: list
    input_tensors: list = dataclasses.field(default_factory=list)   # interpreter tensor index per model input
    output_tensors: list = dataclasses.field(default_factory=list)
    input_shapes: list = dataclasses.field(default_factory=list)
    output_dtypes: list = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    infinity_safe: bool = False  # every operator passes a NaN on (_NAN_PASSING): an infinite input may come in


class XnnpackDriver(Driver):
    name = "google_xnnpack"
    vendor = "Google"
    type = DeviceType.CPU
    version = 2  # 2: quantized operations (int8) and convolutions with a filter computed at run time
    property_keys = (NUM_THREADS_KEY,)

    def open_device(self) -> XnnpackDevice:
        return XnnpackDevice()

    def close_device(self, device: XnnpackDevice) -> None:
        device.opened = False

    def create_context(self, device: XnnpackDevice, properties: str,
                       callback: ContextCallback = None) -> XnnpackContext:
        parsed = Properties(properties)
        num_threads = parsed.get_int(NUM_THREADS_KEY, 0)
        if num_threads < 0:
            raise _fail(f"{NUM_THREADS_KEY}={num_threads}: expected 0 (one thread, LiteRT's default) or a "
                        "positive count")
        return XnnpackContext(device, parsed, num_threads, callback)

    def destroy_context(self, context: XnnpackContext) -> None:
        context.callback = None

    def operation_types(self) -> list:
        # PRIOR_BOX folds to constants (hal.common.lower); YOLO_BOX's decomposition needs operations not built here
        return sorted(set(OPERATIONS.types()) | {OperationType.PRIOR_BOX})

    def validate_program(self, context: XnnpackContext, model: Model) -> list:
        return [not reason for reason in self.unsupported_reasons(context, model)]

    def unsupported_reasons(self, context: XnnpackContext, model: Model) -> list:
        """Per operation, why XNNPACK does not run it ("" when it does): the operation alone must convert and
        XNNPACK must take every operator of it. Answers are cached per operation signature (types,
        constants), since a CNN repeats the same few."""
        cache: dict[tuple, str] = {}
        producers, consumers = model.producers(), model.consumers()
        outputs = {o.index for o in model.output_operands}
        reasons = []
        for op in model.operations:
            together, reason = _built_together(op, producers, consumers, outputs)
            reasons.append(reason or self._reason(op, cache, together))
        return reasons

    @staticmethod
    def _reason(op, cache: dict, together: Sequence = ()) -> str:
        key = tuple(_signature(o) for o in together) or _signature(op)
        if key not in cache:
            cache[key] = operation_unsupported_reason(op, OPERATIONS, lambda data: open_interpreter(data, 1),
                                                      together)
        return cache[key]

    # -- programs -----------------------------------------------------------------------------------
    def create_program(self, context: XnnpackContext, model: Model | None, cache: Cache) -> XnnpackProgram:
        if model is None:
            if not cache.buffer:
                raise _fail("neither a model nor a cache buffer to build a program from")
            model_bytes = bytes(cache.buffer)
            input_types = [t.copy() for t in cache.input_types]
            output_types = [t.copy() for t in cache.output_types]
        else:
            try:
                model_bytes = convert_model(fuse_operations(lower(model, OPERATIONS)), OPERATIONS)
            except Unsupported as exc:
                raise _fail(f"cannot express the model in TFLite: {exc}", ResultCode.FEATURE_NOT_SUPPORTED) from None
            input_types = [o.type.copy() for o in model.input_operands]
            output_types = [o.type.copy() for o in model.output_operands]
        program = self._program(context, model_bytes, input_types, output_types)
        if model is not None and cache.wants_program_bytes:
            cache.buffer = model_bytes  # the program bytes themselves (driver_protocol.Cache)
        return program

    def _program(self, context, model_bytes: bytes, input_types, output_types) -> XnnpackProgram:
        try:
            interpreter = open_interpreter(model_bytes, context.num_threads)
        except Unsupported as exc:
            raise _fail(str(exc), ResultCode.FEATURE_NOT_SUPPORTED) from None
        inputs, outputs = interpreter.get_input_details(), interpreter.get_output_details()
        if len(inputs) != len(input_types) or len(outputs) != len(output_types):
            raise _fail(f"the program has {len(inputs)} inputs and {len(outputs)} outputs, the model "
                        f"{len(input_types)} and {len(output_types)}")
        return XnnpackProgram(context, model_bytes, interpreter, input_types, output_types,
                              [int(d["index"]) for d in inputs], [int(d["index"]) for d in outputs],
                              [tuple(int(s) for s in d["shape"]) for d in inputs],
                              [t.dtype for t in output_types], infinity_safe=_passes_nan_on(model_bytes))

    def destroy_program(self, program: XnnpackProgram) -> None:
        program.interpreter = None

    def clone_program(self, program: XnnpackProgram) -> XnnpackProgram:
        """A second interpreter on the same program bytes: its own tensors, run independently."""
        if program.interpreter is None:
            raise _fail("the program was destroyed")
        return self._program(program.context, program.model_bytes, program.input_types, program.output_types)

    # -- execution ----------------------------------------------------------------------------------
    def execute_program(self, program: XnnpackProgram, inputs: Sequence[Argument],
                        outputs: Sequence[Argument]) -> None:
        count = len(program.input_types)
        if len(inputs) != count:
            raise _fail(f"the program has {count} inputs, {len(inputs)} were given")
        arrays: list = [None] * count
        for arg in inputs:
            arrays[arg.index] = arg.access(arg.memory, program.input_types[arg.index].copy())
        if any(a is None for a in arrays):
            raise _fail(f"inputs {[k for k, a in enumerate(arrays) if a is None]} were not given")
        results = self._run(program, arrays)
        for arg in outputs:
            result = results[arg.index]
            actual = program.output_types[arg.index].copy()
            actual.dims = result.shape
            adopt = getattr(arg.access, "adopt", None)
            if adopt is not None and result.dtype == actual.dtype:
                adopt(arg.memory, actual, result)  # get_tensor gave a fresh copy: handed over
                continue
            buffer = arg.access(arg.memory, actual)
            if buffer is None or buffer.shape != result.shape:
                raise _fail(f"the access function of output {arg.index} gave no buffer of shape {list(result.shape)}")
            np.copyto(buffer, result, casting="same_kind")

    def run_arrays(self, program: XnnpackProgram, arrays: Sequence[np.ndarray]) -> list:
        """driver_protocol's run_arrays: execute_program's checks and run, the results as fresh arrays."""
        if len(arrays) != len(program.input_types):
            raise _fail(f"the program has {len(program.input_types)} inputs, {len(arrays)} were given")
        return self._run(program, arrays)

    def _run(self, program: XnnpackProgram, arrays: Sequence[np.ndarray]) -> list:
        interpreter = program.interpreter
        if interpreter is None:
            raise _fail("the program was destroyed")
        for index, (array, shape, t) in enumerate(zip(arrays, program.input_shapes, program.input_types)):
            if tuple(array.shape) != shape:
                raise InvalidDimensionsError(f"google_xnnpack: input {index} has shape {list(array.shape)}, the "
                                             f"program was built for {list(shape)}")
            if array.dtype != t.dtype:
                raise _fail(f"input {index} has dtype {array.dtype}, expected {t.dtype} ({t.precision.name})")
            if not np.isfinite(array).all() and (not program.infinity_safe or np.isnan(array).any()):
                raise _fail(f"input {index} holds NaN or infinity: {_NAN_FAULT}", ResultCode.DEVICE_INTERNAL_ERROR)
        with program.lock:  # one invocation at a time per interpreter
            try:
                for tensor, array in zip(program.input_tensors, arrays):
                    interpreter.set_tensor(tensor, array)
                interpreter.invoke()
                results = [interpreter.get_tensor(tensor) for tensor in program.output_tensors]
            except (RuntimeError, ValueError) as exc:
                raise _fail(f"LiteRT failed: {exc}", ResultCode.DEVICE_INTERNAL_ERROR) from exc
        for index, result in enumerate(results):
            if np.isnan(result).any():
                raise _fail(f"output {index} holds NaN: {_NAN_FAULT}", ResultCode.DEVICE_INTERNAL_ERROR)
        return results


# XNNPACK's clamps (relu, relu6, the activations fused into convolutions) and its maximum/minimum pass a NaN on,
# where Paddle's relu gives 0 (`x > 0 ? x : 0`), and its average pool drops one where Paddle's keeps it (measured
# on ai-edge-litert 2.3.0: no operator XNNPACK takes turns NaN into 0 as Paddle's relu does). So a run whose inputs
# hold NaN or infinity (which meets another inside as NaN; infinity is taken by some programs, below) is a device
# fault, and so is a run whose outputs hold NaN: the runtime runs that part on the next device or the host for these
# input shapes (a DeviceFallbackWarning says so). Not caught: a float32 overflow to infinity inside a model fed
# finite inputs, whose NaN a pool drops before any output.
_NAN_FAULT = ("XNNPACK passes NaN through its clamps where Paddle's relu gives 0, so this part runs on the next "
              "device or the host for these input shapes")

# An infinite input (a causal attention mask's -inf, which Paddle's decoders add to the scores) is taken by a
# program whose every operator passes a NaN on to its result, as these do: a NaN the infinity makes inside then
# reaches an output, where the NaN check above catches it, so only a program holding an operator that can drop
# one (a pool, a reduction to the maximum, a comparison, a quantization) has such inputs run elsewhere. LOG is not
# among them: XNNPACK's AVX2 log kernel takes +inf to a finite 88.4 (its AVX-512 one gives inf), no NaN to catch.
_NAN_PASSING = frozenset(getattr(_schema.BuiltinOperator, name) for name in (
    "ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "NEG", "ABS", "SQUARE", "SQRT", "RSQRT", "EXP",
    "LOGISTIC", "TANH", "GELU", "HARD_SWISH", "ELU", "PRELU", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
    "LEAKY_RELU", "MAXIMUM", "MINIMUM", "SOFTMAX", "LOG_SOFTMAX", "MEAN", "SUM", "FULLY_CONNECTED",
    "BATCH_MATMUL", "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "RESHAPE", "SQUEEZE", "EXPAND_DIMS",
    "TRANSPOSE", "CONCATENATION", "PACK", "UNPACK", "SPLIT", "SPLIT_V", "SLICE", "STRIDED_SLICE", "PAD",
    "TILE", "BROADCAST_TO", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"))


def _passes_nan_on(model_bytes) -> bool:
    """Whether every operator of the TFLite model (its operator codes) is in _NAN_PASSING."""
    model = _schema.Model.GetRootAs(bytes(model_bytes), 0)
    for k in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(k)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin not in _NAN_PASSING:
            return False
    return True


def _built_together(op, producers: dict, consumers: dict, outputs: set) -> tuple:
    """(the operations `op` is only built with, why it cannot be built): an integer product's int32 sums are built
    as their real values (graph.is_real_valued), which only the DEQUANTIZE reading them gives out, so the product
    is judged with its DEQUANTIZEs, and such a DEQUANTIZE with its product."""
    product = op
    if op.type == OperationType.DEQUANTIZE and not op.inputs[0].is_constant and is_real_valued(op.inputs[0]):
        product = producers.get(op.inputs[0].index)
        if product is None or not is_integer_product(product):
            return (), "its int32 input is not an integer product's sums (only those are built)"
    elif not is_integer_product(op):
        return (), ""
    sums = product.outputs[0]
    readers = consumers.get(sums.index, [])
    if sums.index in outputs or any(r.type != OperationType.DEQUANTIZE for r in readers):
        return (), (f"{product.label()}'s int32 sums are read other than by a DEQUANTIZE (XNNPACK's int8 operators "
                    "write int8; only the real values of the sums are built)")
    return [product] + list(readers), ""


def _signature(op) -> tuple:
    """What decides one operation's answer: its type and, per operand, the type and (for a small constant) the
    value; a large constant (weights) counts by its dims only, since no answer depends on weight values."""
    parts = [int(op.type)]
    for operand in list(op.inputs) + list(op.outputs):
        if operand is None:
            parts.append(None)
            continue
        t = operand.type
        value = None
        if operand.is_constant:
            array = np.asarray(operand.value)
            value = array.tobytes() if array.size <= 64 else ("large", array.shape, str(array.dtype))
        parts.append((int(t.precision), tuple(t.dims), operand.is_constant, value, repr(t.scales) if t.is_quantized
                      else None))
    return tuple(parts)


DRIVER = XnnpackDriver()
