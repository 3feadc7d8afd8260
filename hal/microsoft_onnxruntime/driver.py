"""The microsoft_onnxruntime HAL driver: contexts and their properties, ONNX Runtime sessions, program bytes,
execution. Entry point: `DRIVER` (OnnxRuntimeDriver). Imports the HAL protocol, hal.common, this driver's `graph`,
`operations`, `qdq` and `nan_speculation`, and the standard; never another driver, the converters or the
partitioner. Its properties, caching, validation and errors: docs/architecture.md, "microsoft_onnxruntime's driver".
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from hal.common import LOWERED_TYPES, Unsupported, lower, operation_alone
from hal.fusion import scalar_affine_as_depthwise_conv
from hal.microsoft_onnxruntime.attention import emit_attention, find_attention_chains
from hal.microsoft_onnxruntime.graph import FAULT_PREFIX, convert_model, operation_unsupported_reason
from hal.microsoft_onnxruntime.nan_speculation import METADATA_KEY, NAN_PROBE_OUTPUT, exact_model_bytes, probe_saw_nan
from hal.microsoft_onnxruntime.operations import OPERATIONS
from hal.microsoft_onnxruntime.qdq import emit_conv_chain, marked_for_qdq
from hal.protocol import Argument, Cache, ContextCallback, Driver, operation_fault, parse_fault_output_name
from hal.quantized_chains import find_conv_chains
from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import DeviceType, Precision, ResultCode
from nnadapter_bridge.nnadapter.cpu_features import exact_int8_kernels
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations.common import known
from nnadapter_bridge.nnadapter.properties import Properties
from nnadapter_bridge.nnadapter.types import OperandType, Operation

NUM_THREADS_KEY = "MICROSOFT_ONNXRUNTIME_NUM_THREADS"
EXECUTION_PROVIDERS_KEY = "MICROSOFT_ONNXRUNTIME_EXECUTION_PROVIDERS"
GRAPH_OPTIMIZATION_LEVEL_KEY = "MICROSOFT_ONNXRUNTIME_GRAPH_OPTIMIZATION_LEVEL"
RELU_NAN_TO_ZERO_KEY = "MICROSOFT_ONNXRUNTIME_RELU_NAN_TO_ZERO"

OPTIMIZATION_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
# Short spellings users type; anything else must be a full provider name.
PROVIDER_ALIASES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider",
}


# Precisions whose onnxruntime kernels exist for some operators only: an operation using one is tried.
KERNEL_TRIAL_PRECISIONS = frozenset({Precision.FLOAT64, Precision.FLOAT16})


def _needs_kernel_trial(op: Operation) -> bool:
    return any(o is not None and o.type.precision in KERNEL_TRIAL_PRECISIONS for o in [*op.inputs, *op.outputs])


def _qdq_chains(model: Model) -> list:
    """The quantized conv chains of `model` as convert_model's fused_chains (qdq.py); none where this CPU's int8
    kernels are not exact (cpu_features.exact_int8_kernels: QLinearConv would lose precision, the float path not)."""
    from hal.microsoft_onnxruntime.operations import conv_attributes

    if not exact_int8_kernels():
        return []
    return [(chain.conv, chain.operations(),
             lambda g, chain=chain: emit_conv_chain(g, chain, conv_attributes(g, chain.conv)))
            for chain in find_conv_chains(model)]


def _attention_chains(model: Model) -> list:
    """The self-attentions of `model` as convert_model's fused_chains, each emitted at its last operation as
    onnxruntime's Attention kernel (attention.py)."""
    return [(chain.last, chain.operations, lambda g, chain=chain: emit_attention(g, chain))
            for chain in find_attention_chains(model)]


def _fail(message: str, code: ResultCode = ResultCode.INVALID_PARAMETER) -> NNAdapterError:
    return NNAdapterError(f"microsoft_onnxruntime: {message}", code)


def _run_failure(exc: Exception) -> NNAdapterError:
    """A session run's exception as ours: onnxruntime's InvalidArgument is about the input values (gather indices
    out of range, say), the caller's error; anything else the device's."""
    code = ResultCode.INVALID_PARAMETER if isinstance(exc, _InvalidArgument) else ResultCode.DEVICE_INTERNAL_ERROR
    return _fail(f"onnxruntime failed: {type(exc).__name__}: {exc}", code)


def parse_providers(names: Sequence[str], available: Sequence[str]) -> list:
    """Full provider names for `names`; raises naming the available ones when one is missing."""
    chosen = []
    for name in names:
        full = PROVIDER_ALIASES.get(name.lower(), name)
        if full not in available:
            raise _fail(f"{EXECUTION_PROVIDERS_KEY}: execution provider '{name}' is not available in this "
                        f"onnxruntime build; available: {', '.join(available)}")
        if full not in chosen:
            chosen.append(full)
    return chosen


# onnxruntime 1.32 fusions that make our programs slower. A model built for concrete shapes (every program
# here is) gets its Add + LayerNormalization fused into SkipLayerNormalization and its 3-D MatMul + Add turned
# into Reshape -> Gemm -> Reshape; measured in one process, interleaved, 1 thread (benchmarks/RESULTS.md):
# ERNIE-3.0 seq-cls 0.48 -> 0.39 ms, DeiT 6.43 -> 6.19, SegFormer 59.8 -> 58.1; CNNs unchanged (they have neither).
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion", "MatMulAddFusion"]


@dataclasses.dataclass
class OnnxRuntimeDevice:
    opened: bool = True


@dataclasses.dataclass
class OnnxRuntimeContext:
    device: OnnxRuntimeDevice
    properties: Properties
    num_threads: int
    providers: list
    optimization_level: object
    callback: ContextCallback = None
    relu_nan_to_zero: bool = True  # Paddle's relu (NaN -> 0); False: ONNX Relu alone, which keeps NaN

    def session_options(self, level=None, qdq: bool = False) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.graph_optimization_level = self.optimization_level if level is None else level
        if self.num_threads > 0:
            options.intra_op_num_threads = self.num_threads
        # fatal only: warnings would go to stderr on every compile, and a failing run prints a raw colored
        # line before the error that we raise with the same message anyway
        options.log_severity_level = 4
        # NNAdapter quantized operations compute in float between a dequantize and a requantize; the
        # QDQ fusions would turn them into integer kernels whose rounding differs by a few steps. A model
        # holding quantized conv chains (qdq.py, marked by its producer name) wants exactly those kernels.
        if not qdq:
            options.add_session_config_entry("session.disable_quant_qdq", "1")
        return options


@dataclasses.dataclass
class InputSlot:
    """What execute_program needs per model input, computed once per program."""

    name: str
    type: OperandType
    fixed_shape: tuple | None  # the exact shape when every dim is known
    dims: tuple                   # the compiled dims, None for a symbolic axis
    dtype: np.dtype
    consumed: bool                # the session reads it (an unused input is not fed)


# After this many runs that needed the exact program, a program runs only that one (its outputs hold NaN for
# reasons of their own, e.g. a log of a negative: checking and running twice would only cost time).
EXACT_ONLY_AFTER = 3


@dataclasses.dataclass
class ExactFallback:
    """The exact form of a program with NaN-kept relus (nan_speculation.py), shared by its clones: the program's
    ONNX bytes until a run needs the exact session, then that session."""

    model_bytes: Any  # bytes, or the mapped .nnc array (driver_protocol.Cache.mapped_buffer); None once built
    probed_output_names: list  # the program's outputs and, last, the NaN probe (the speculative session's run)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    session: ort.InferenceSession | None = None
    runs: int = 0  # runs whose outputs held a NaN and were run again exactly
    exact_only: bool = False


@dataclasses.dataclass
class OnnxRuntimeProgram:
    context: OnnxRuntimeContext
    session: ort.InferenceSession | None
    inputs: list
    output_names: list
    output_types: list
    output_dtypes: list = dataclasses.field(default_factory=list)  # of output_types, for run_arrays
    exact: ExactFallback | None = None  # set when the session's relus keep NaN where an output shows it
    # the session's fault outputs (GraphBuilder.faults), fetched after the model's outputs, and what each says with
    # the operand naming its operation (driver_protocol.parse_fault_output_name)
    fault_names: list = dataclasses.field(default_factory=list)
    fault_messages: list = dataclasses.field(default_factory=list)

    run_names: list = dataclasses.field(default_factory=list)  # what a run fetches: the outputs, then the faults

    def __post_init__(self):
        self.output_dtypes = [t.dtype for t in self.output_types]
        self.run_names = [*self.output_names, *self.fault_names]


def _input_slot(name: str, t: OperandType, consumed: bool) -> InputSlot:
    dims = tuple(d if known(d) else None for d in t.dims)
    fixed = dims if all(d is not None for d in dims) else None
    return InputSlot(name, t, fixed, dims, t.dtype, consumed)


def _shallow_copy(t: OperandType) -> OperandType:
    """A private OperandType for one access call, without dataclasses.replace's re-validation."""
    clone = object.__new__(OperandType)
    clone.__dict__.update(t.__dict__)
    return clone


try:  # the exception onnxruntime raises for bad input values (its pybind module; present since 1.x)
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument as _InvalidArgument
except ImportError:  # pragma: no cover - depends on the onnxruntime build
    _InvalidArgument = ()


class OnnxRuntimeDriver(Driver):
    name = "microsoft_onnxruntime"
    vendor = "Microsoft"
    type = DeviceType.CPU
    version = 1
    property_keys = (NUM_THREADS_KEY, EXECUTION_PROVIDERS_KEY, GRAPH_OPTIMIZATION_LEVEL_KEY, RELU_NAN_TO_ZERO_KEY)

    def cache_environment(self) -> str:
        """driver_protocol's cache_environment: whether integer products run on the SDK's int8 kernels here."""
        return f"int8_kernels={int(exact_int8_kernels())}"

    def sdk_version(self) -> str:
        return f"onnxruntime {ort.__version__}"  # keys the calibration

    def open_device(self) -> OnnxRuntimeDevice:
        return OnnxRuntimeDevice()

    def close_device(self, device: OnnxRuntimeDevice) -> None:
        device.opened = False

    def create_context(self, device: OnnxRuntimeDevice, properties: str,
                       callback: ContextCallback = None) -> OnnxRuntimeContext:
        parsed = Properties(properties)
        num_threads = parsed.get_int(NUM_THREADS_KEY, 0)
        if num_threads < 0:
            raise _fail(f"{NUM_THREADS_KEY}={num_threads}: expected 0 (onnxruntime's default) or a positive count")
        available = list(ort.get_available_providers())
        requested = parsed.get_list(EXECUTION_PROVIDERS_KEY, ["CPUExecutionProvider"])
        providers = parse_providers(requested, available)
        if "CPUExecutionProvider" not in providers:
            providers.append("CPUExecutionProvider")  # the fallback for nodes a GPU provider rejects
        level_name = (parsed.get(GRAPH_OPTIMIZATION_LEVEL_KEY) or "all").lower()
        if level_name not in OPTIMIZATION_LEVELS:
            raise _fail(f"{GRAPH_OPTIMIZATION_LEVEL_KEY}={level_name!r}: expected one of "
                        f"{', '.join(OPTIMIZATION_LEVELS)}")
        relu_nan_to_zero = parsed.get_int(RELU_NAN_TO_ZERO_KEY, 1)
        if relu_nan_to_zero not in (0, 1):
            raise _fail(f"{RELU_NAN_TO_ZERO_KEY}={relu_nan_to_zero}: expected 1 (Paddle's relu: NaN becomes 0) or 0 "
                        "(ONNX Relu, which keeps NaN)")
        return OnnxRuntimeContext(device, parsed, num_threads, providers, OPTIMIZATION_LEVELS[level_name], callback,
                                  relu_nan_to_zero=bool(relu_nan_to_zero))

    def destroy_context(self, context: OnnxRuntimeContext) -> None:
        context.callback = None

    def operation_types(self) -> list:
        return sorted(set(OPERATIONS.types()) | LOWERED_TYPES)

    def validate_program(self, context: OnnxRuntimeContext, model: Model) -> list:
        return [not reason for reason in self.unsupported_reasons(context, model)]

    def unsupported_reasons(self, context: OnnxRuntimeContext, model: Model) -> list:
        """Per operation, why this driver declines it ("" when it runs it): what validate_program answers,
        with the reason a user can act on."""
        reasons = []
        for op in model.operations:
            reason = operation_unsupported_reason(op, OPERATIONS)
            if not reason and _needs_kernel_trial(op) and not self._kernels_exist(context, op):
                reason = "onnxruntime has no kernel for its element types on these execution providers"
            reasons.append(reason)
        return reasons

    @staticmethod
    def _kernels_exist(context: OnnxRuntimeContext, op: Operation) -> bool:
        """onnxruntime opens a session on `op` alone (its kernels exist for these element types)."""
        try:
            model_bytes = convert_model(lower(operation_alone(op), OPERATIONS), OPERATIONS).SerializeToString()
            ort.InferenceSession(model_bytes, context.session_options(qdq=marked_for_qdq(model_bytes)),
                                 providers=context.providers)
        except Exception:  # Unsupported, or onnxruntime's own errors (NOT_IMPLEMENTED: no kernel for the type)
            return False
        return True

    # -- programs -----------------------------------------------------------------------------------
    def create_program(self, context: OnnxRuntimeContext, model: Model | None, cache: Cache) -> OnnxRuntimeProgram:
        if model is None:
            if not cache.buffer:
                raise _fail("neither a model nor a cache buffer to build a program from")
            model_bytes = bytes(cache.buffer)
            source = cache.mapped_buffer if cache.mapped_buffer is not None else model_bytes
            input_types = [t.copy() for t in cache.input_types]
            output_types = [t.copy() for t in cache.output_types]
        else:
            try:
                lowered = scalar_affine_as_depthwise_conv(lower(model, OPERATIONS))
                model_bytes = convert_model(lowered, OPERATIONS, relu_nan_to_zero=context.relu_nan_to_zero,
                                            fused_chains=_qdq_chains(lowered) + _attention_chains(lowered),
                                            keep_nan_where_visible=True).SerializeToString()
            except Unsupported as exc:
                raise _fail(f"cannot express the model in ONNX: {exc}", ResultCode.FEATURE_NOT_SUPPORTED) from None
            hook = getattr(model, "release_host_memory", None)  # the ONNX bytes hold their own copy of the weights
            if callable(hook):
                try:
                    hook()
                except Exception:  # pragma: no cover - a hint only
                    pass
            input_types = [o.type.copy() for o in model.input_operands]
            output_types = [o.type.copy() for o in model.output_operands]
            if cache.wants_program_bytes:
                portable = self._portable_bytes(context, model_bytes)
                try:
                    session = self._open_session(context, portable)
                except NNAdapterError:
                    if portable is model_bytes:
                        raise
                    # onnxruntime 1.32's extended optimizers can fail on a model its own basic level wrote
                    # ("AddInitializedOrtValue: Attempt to replace the existing tensor", a transformer
                    # encoder): the cache then keeps the model as built, which restores like any other
                    session = self._open_session(context, model_bytes)
                    portable = model_bytes
                cache.buffer = portable  # the program bytes themselves, not a copy (driver_protocol.Cache)
                return self._program(context, session, input_types, output_types, portable)
            source = model_bytes
        session = self._open_session(context, model_bytes)
        return self._program(context, session, input_types, output_types, source)

    def _open_session(self, context: OnnxRuntimeContext, model_bytes: bytes) -> ort.InferenceSession:
        try:
            return ort.InferenceSession(model_bytes, context.session_options(qdq=marked_for_qdq(model_bytes)),
                                        providers=context.providers, disabled_optimizers=DISABLED_OPTIMIZERS)
        except Exception as exc:  # onnxruntime raises its own exception types (Fail, InvalidGraph, ...)
            raise _fail(f"onnxruntime cannot load the program: {type(exc).__name__}: {exc}",
                        ResultCode.DEVICE_INTERNAL_ERROR) from exc

    def _portable_bytes(self, context: OnnxRuntimeContext, model_bytes: bytes) -> bytes:
        """The model after basic-level optimization (constant folding, redundant node removal), which
        holds standard ONNX only; the model itself when optimization is disabled."""
        if context.optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL:
            return model_bytes
        with tempfile.TemporaryDirectory(prefix="nnadapter_ort_") as folder:
            path = os.path.join(folder, "program.onnx")
            options = context.session_options(ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                              qdq=marked_for_qdq(model_bytes))
            options.optimized_model_filepath = path
            try:
                ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
                with open(path, "rb") as f:
                    return f.read()
            except Exception:  # the optimizer refused: the unoptimized model is still a valid program
                return model_bytes

    def _program(self, context, session, input_types, output_types, source) -> OnnxRuntimeProgram:
        session_inputs = [i.name for i in session.get_inputs()]
        session_outputs = [o.name for o in session.get_outputs()]
        # NaN-kept relus (nan_speculation.py): the bytes stay until a run needs the exact program, and the
        # session's last output is the NaN probe
        speculative = session.get_modelmeta().custom_metadata_map.get(METADATA_KEY) == "1"
        if speculative:
            if not session_outputs or session_outputs[-1] != NAN_PROBE_OUTPUT:
                raise _fail(f"the program is marked {METADATA_KEY} but its last output is not {NAN_PROBE_OUTPUT}",
                            ResultCode.INVALID_PARAMETER)
            session_outputs.pop()
        fault_names = [name for name in session_outputs if name.startswith(FAULT_PREFIX)]
        session_outputs = [name for name in session_outputs if not name.startswith(FAULT_PREFIX)]
        if len(session_outputs) != len(output_types) or len(session_inputs) > len(input_types):
            raise _fail(f"the program has {len(session_inputs)} inputs and {len(session_outputs)} outputs, the "
                        f"model {len(input_types)} and {len(output_types)}", ResultCode.INVALID_PARAMETER)
        # The graph builder names graph inputs input<k> (k = model input position); one the optimizer found
        # unused may be missing from the session, and is then not fed.
        names = [f"input{k}" for k in range(len(input_types))]
        unknown = set(session_inputs) - set(names)
        if unknown:
            raise _fail(f"the program has inputs {sorted(unknown)} that are not model inputs")
        slots = [_input_slot(name, t, name in session_inputs) for name, t in zip(names, input_types)]
        return OnnxRuntimeProgram(context, session, slots, session_outputs, output_types,
                                  exact=(ExactFallback(source, [*session_outputs, *fault_names, NAN_PROBE_OUTPUT])
                                         if speculative else None),
                                  fault_names=fault_names,
                                  fault_messages=[parse_fault_output_name(name, FAULT_PREFIX) for name in fault_names])

    def destroy_program(self, program: OnnxRuntimeProgram) -> None:
        program.session = None

    def clone_program(self, program: OnnxRuntimeProgram) -> OnnxRuntimeProgram:
        """The same session (InferenceSession.run is thread-safe) under a second handle."""
        if program.session is None:
            raise _fail("the program was destroyed")
        return dataclasses.replace(program)

    # -- execution ----------------------------------------------------------------------------------
    def execute_program(self, program: OnnxRuntimeProgram, inputs: Sequence[Argument],
                        outputs: Sequence[Argument]) -> None:
        slots = program.inputs
        if len(inputs) != len(slots):
            raise _fail(f"the program has {len(slots)} inputs, {len(inputs)} were given")
        arrays: list = [None] * len(slots)
        for arg in inputs:
            arrays[arg.index] = arg.access(arg.memory, _shallow_copy(slots[arg.index].type))
        if any(a is None for a in arrays):
            raise _fail(f"inputs {[k for k, a in enumerate(arrays) if a is None]} were not given")
        results = self._run_session(program, arrays)
        for arg in outputs:
            result = results[arg.index]
            actual = _shallow_copy(program.output_types[arg.index])
            actual.dims = result.shape
            adopt = getattr(arg.access, "adopt", None)
            if adopt is not None and result.dtype == actual.dtype and result.flags.c_contiguous:
                adopt(arg.memory, actual, result)  # a fresh array of the session's: handed over, not copied
                continue
            buffer = arg.access(arg.memory, actual)
            if buffer is None or buffer.shape != result.shape:
                raise _fail(f"the access function of output {arg.index} gave no buffer of shape {list(result.shape)}")
            np.copyto(buffer, result, casting="same_kind")
        return None

    def prepare_run(self, program: OnnxRuntimeProgram):
        """driver_protocol's prepare_run: run_arrays with the session's own run, the fetch list and the inputs'
        fixed shapes looked up once. For a program whose every input has a fixed shape and that has no fault
        outputs; None otherwise. A program with NaN-kept relus runs its speculative session and reads the probe, as
        _run_session does (a run whose probe is NaN is run again exactly; once the program runs only its exact
        form, every run goes through run_arrays). An input that is not exactly as the program was built (shape,
        dtype, layout) goes through run_arrays, which says what is wrong or copies it."""
        raw = getattr(program.session, "_sess", None)
        exact = program.exact
        if raw is None or program.fault_names or any(slot.fixed_shape is None for slot in program.inputs) \
                or (exact is not None and exact.exact_only):
            return None
        slots = [(slot.name, slot.fixed_shape, slot.dtype, slot.consumed) for slot in program.inputs]
        names, dtypes, count = program.run_names, program.output_dtypes, len(program.inputs)
        fetched = names if exact is None else exact.probed_output_names
        run_arrays = self.run_arrays

        def run(arrays: Sequence[np.ndarray]) -> list:
            if program.session is None or len(arrays) != count or (exact is not None and exact.exact_only):
                return run_arrays(program, arrays)  # its error, or the exact program alone
            feeds = {}
            for (name, shape, dtype, consumed), array in zip(slots, arrays):
                if array.shape != shape or array.dtype != dtype or not array.flags.c_contiguous:
                    return run_arrays(program, arrays)
                if consumed:
                    feeds[name] = array
            try:
                results = raw.run(fetched, feeds, None)
            except Exception as exc:
                raise _run_failure(exc) from exc
            if exact is not None and probe_saw_nan(results.pop()):  # as _run_session: Paddle's answer, exactly
                results = self._session_run(self._exact_session(program.context, exact), names, feeds)
            for k, (result, dtype) in enumerate(zip(results, dtypes)):
                if result.dtype != dtype:  # (onnxruntime's arrays are C-contiguous)
                    results[k] = np.array(result, dtype=dtype, order="C")
            return results

        return run

    def run_arrays(self, program: OnnxRuntimeProgram, arrays: Sequence[np.ndarray]) -> list:
        """driver_protocol's run_arrays: execute_program's checks and run, without the access callbacks;
        the session's result arrays are fresh, so they are handed over (cast where the model says another
        dtype, as execute_program's copy does)."""
        if len(arrays) != len(program.inputs):
            raise _fail(f"the program has {len(program.inputs)} inputs, {len(arrays)} were given")
        results = self._run_session(program, arrays)
        for k, (result, dtype) in enumerate(zip(results, program.output_dtypes)):
            if result.dtype != dtype or not result.flags.c_contiguous:
                results[k] = np.array(result, dtype=dtype, order="C")
        return results

    def _run_session(self, program: OnnxRuntimeProgram, arrays: Sequence[np.ndarray]) -> list:
        """Check every input against the program (shape, dtype) and run the session on them."""
        session = program.session
        if session is None:
            raise _fail("the program was destroyed")
        feeds = {}
        for index, (slot, array) in enumerate(zip(program.inputs, arrays)):
            shape = array.shape
            if shape != slot.fixed_shape and not self._fits(shape, slot.dims):
                raise InvalidDimensionsError(f"microsoft_onnxruntime: input {index} has shape {list(shape)}, "
                                             f"the program was built for {list(slot.type.dims)}")
            if array.dtype != slot.dtype:
                raise _fail(f"input {index} has dtype {array.dtype}, expected {slot.dtype} "
                            f"({slot.type.precision.name})")
            if slot.consumed:
                feeds[slot.name] = array if array.flags.c_contiguous else np.ascontiguousarray(array)
        exact = program.exact
        names = program.run_names
        if exact is None:
            results = self._session_run(session, names, feeds)
        elif exact.exact_only:
            results = self._session_run(exact.session, names, feeds)
        else:
            results = self._session_run(session, exact.probed_output_names, feeds)
            if probe_saw_nan(results.pop()):  # a NaN-kept relu may have met it: the exact program gives Paddle's answer
                results = self._session_run(self._exact_session(program.context, exact), names, feeds)
        if program.fault_names:
            faults = results[len(program.output_names):]
            del results[len(program.output_names):]
            for fault, (message, operand) in zip(faults, program.fault_messages):
                if bool(fault):  # a value this device computes wrongly (GraphBuilder.faults): it runs elsewhere
                    raise operation_fault(f"microsoft_onnxruntime: {message}", operand)
        return results

    def _exact_session(self, context: OnnxRuntimeContext, exact: ExactFallback) -> ort.InferenceSession:
        with exact.lock:
            if exact.session is None:
                exact.session = self._open_session(context, exact_model_bytes(exact.model_bytes))
                exact.model_bytes = None  # the session holds what it needs
            exact.runs += 1
            exact.exact_only = exact.runs >= EXACT_ONLY_AFTER
            return exact.session

    @staticmethod
    def _session_run(session: ort.InferenceSession, output_names: list, feeds: dict) -> list:
        # The binding's own run, under InferenceSession.run's checks: those cover feeds this driver never makes
        # (missing inputs, OrtValues of another session, graph capture; _run_session checked every input) and
        # cost about 10 us a run, measured right after a session run, when the caches are cold.
        raw = getattr(session, "_sess", None)
        try:
            return raw.run(output_names, feeds, None) if raw is not None else session.run(output_names, feeds)
        except Exception as exc:
            raise _run_failure(exc) from exc

    @staticmethod
    def _fits(shape: tuple, dims: tuple) -> bool:
        if len(shape) != len(dims):
            return False
        return all(d is None or d == s for d, s in zip(dims, shape))


DRIVER = OnnxRuntimeDriver()
