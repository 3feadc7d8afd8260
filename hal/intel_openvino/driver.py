"""The intel_openvino HAL driver: contexts and their properties, compiled programs, the program cache and
execution. Entry point: `DRIVER` (IntelOpenVinoDriver). Imports the HAL protocol, hal.common, this driver's
`graph`, `operations` and `checks`, and the standard; never another driver, the converters or the partitioner.
Its properties, caching, threading and int64 behaviour: docs/architecture.md, "intel_openvino's driver".
"""
from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from hal.protocol import Argument, Cache, ContextCallback, Driver, operation_fault
from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError, PropertiesError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, DeviceType, ResultCode
from nnadapter_bridge.nnadapter.cpu_features import exact_int8_kernels
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.properties import Properties
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.types import OperandType

SELECT_DEVICE_NAMES_KEY = "INTEL_OPENVINO_SELECT_DEVICE_NAMES"
INFERENCE_NUM_THREADS_KEY = "INTEL_OPENVINO_INFERENCE_NUM_THREADS"
NUM_STREAMS_KEY = "INTEL_OPENVINO_NUM_STREAMS"
INFERENCE_PRECISION_KEY = "INTEL_OPENVINO_INFERENCE_PRECISION"
KEEP_NAN_IN_CLAMPS_KEY = "INTEL_OPENVINO_KEEP_NAN_IN_CLAMPS"
# Property value -> (INFERENCE_PRECISION_HINT, the OPTIMIZATION_CAPABILITIES entry the device needs for it).
INFERENCE_PRECISIONS = {"f32": ("f32", None), "bf16": ("bf16", "BF16"), "f16": ("f16", "FP16")}
DEFAULT_INFERENCE_PRECISION = "f32"
DEFAULT_DEVICE_NAMES = ["CPU"]
INSTALL_HINT = "install nnadapter-bridge[openvino]"


class _SkipModelConverter:
    """A meta-path finder that makes `openvino.tools.ovc` (OpenVINO's model converter) fail to import in the
    thread that imports openvino, so `import openvino` leaves out its optional `convert_model`: openvino's
    __init__ imports it under `except ImportError`, and it pulls in the converter's telemetry (urllib, http,
    email, ssl), importlib.metadata, numpy.ma and the TensorFlow frontend, ~90 ms of a 150 ms import, none of
    which running a compiled program uses. Other threads import it as usual."""

    def __init__(self):
        self.thread = threading.get_ident()

    def find_spec(self, name, path=None, target=None):
        if name == "openvino.tools.ovc" and threading.get_ident() == self.thread:
            raise ModuleNotFoundError("left out by intel_openvino (imported on first use)", name=name)
        return None


def _convert_model_on_first_use(openvino) -> None:
    """Give `openvino`, imported without its `convert_model`, a module __getattr__ that imports the converter when
    it is first asked for, so `openvino.convert_model` / `from openvino import convert_model` still work (an
    __getattr__ openvino has of its own answers every other name)."""
    previous = vars(openvino).get("__getattr__")

    def __getattr__(name: str):
        if name == "convert_model":
            from openvino.tools.ovc import convert_model

            openvino.convert_model = convert_model
            return convert_model
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module 'openvino' has no attribute '{name}'")

    openvino.__getattr__ = __getattr__


def _import_openvino():
    """The openvino package; imported here first, without its model converter (_SkipModelConverter), which is
    then loaded on first use of `openvino.convert_model`."""
    finder = None
    if "openvino" not in sys.modules:  # imported already (by the caller, say): as it is
        finder = _SkipModelConverter()
        sys.meta_path.insert(0, finder)
    try:
        import openvino
    except ImportError as exc:
        raise NNAdapterError(f"intel_openvino: the 'openvino' package cannot be imported ({exc}); {INSTALL_HINT}",
                             ResultCode.DEVICE_NOT_FOUND) from exc
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
    if finder is not None and "convert_model" not in vars(openvino):
        _convert_model_on_first_use(openvino)
    return openvino


def _import_program(core, buffer, context: OpenVinoContext, mapped=None) -> tuple:
    """(compiled model, the memory it may read for its lifetime): core.import_model on the program bytes.

    With `mapped` (Cache.mapped_buffer: the bytes in a private map of the .nnc file) through an ov.Tensor
    sharing that memory: the CPU plugin then reads its constants in place (no copy of the weights, and the
    pages are file-backed, as with OpenVINO's own CACHE_DIR), so the program must keep `mapped` alive, which
    the returned second item is for. Otherwise (any bytes-like `buffer`, read-only included) through an
    ov.Tensor that owns one copy of the bytes: `import_model(bytes)` converts them to a C++ string and a
    stream (two more copies, and `bytes(view)` a third); shared_memory=False, so nothing OpenVINO keeps can
    point into `buffer`, which the runtime frees after the first run."""
    from openvino import Tensor

    if mapped is not None:
        try:
            return core.import_model(Tensor(mapped, shared_memory=True), context.device_name, context.config), mapped
        except TypeError:  # an OpenVINO whose import_model takes no Tensor (before 2025): the bytes, below
            pass
    blob = Tensor(np.frombuffer(buffer, dtype=np.uint8), shared_memory=False)
    try:
        return core.import_model(blob, context.device_name, context.config), None
    except TypeError:  # an OpenVINO whose import_model takes no Tensor (before 2025): bytes or a stream only
        return core.import_model(bytes(buffer), context.device_name, context.config), None


def _no_trial(op) -> None:
    """unsupported_reason without the trial conversion (create_program's build is that trial)."""


def _release_host_memory(hook) -> None:
    """Model.release_host_memory, when the model's builder set one: a hint, whose failure changes nothing."""
    if callable(hook):
        try:
            hook()
        except Exception:  # pragma: no cover - a hint only
            pass


@plain_dataclass
class OpenVinoDevice:
    core: Any  # openvino.Core
    opened: bool = True


@plain_dataclass
class OpenVinoContext:
    device: OpenVinoDevice
    properties: Properties
    device_name: str  # the OpenVINO device programs compile for, e.g. "CPU"
    config: dict      # the compile/import configuration
    callback: ContextCallback = None
    keep_nan_in_clamps: bool = True


@plain_dataclass
class _InputSlot:
    """What execute_program checks for one input: the compiled type, its dtype, its static dims."""

    type: OperandType
    dtype: np.dtype
    static_dims: list  # (axis, size) for every dim the program was compiled for exactly
    scratch: OperandType  # handed to the access function; reset before every call
    bound_array: Any = None  # the array whose memory the request reads now (kept alive while bound)
    bound_shape: tuple = ()


@plain_dataclass
class OpenVinoProgram:
    context: OpenVinoContext
    compiled_model: Any
    request: Any
    inputs: list[_InputSlot]
    output_types: list[OperandType]
    output_scratch: list[OperandType]
    seconds_to_build: float  # compile_model or import_model wall time
    restored: bool
    tensor_class: Any  # openvino.Tensor, looked up once instead of on every run
    checks: list = dataclasses.field(default_factory=list)  # (position, message, code, operand): check_outputs
    # Outputs the program hands out as [N, H, W, C] (checks.channels_last_outputs): transposed back when copied out
    channels_last: frozenset = frozenset()
    # The memory the compiled model reads its constants from when it was imported in place (_import_program):
    # kept as long as the program (and its clones, which copy this reference) may run. The last field, so a
    # program dropped without destroy_program releases its compiled model and request before this memory.
    blob_memory: Any = None


def select_device(core, names: Sequence[str]) -> str:
    """The first of `names` OpenVINO offers ("GPU" also matches "GPU.0"); an error lists what exists."""
    if names and names[0] == "CPU":
        # The default: asking the CPU plugin for its properties loads only that plugin (which every compile
        # loads anyway), where `available_devices` loads and probes every plugin installed (~20-40 ms).
        try:
            core.get_property("CPU", "SUPPORTED_PROPERTIES")
        except Exception:  # no CPU plugin: the general path below says what there is
            pass
        else:
            return "CPU"
    available = list(core.available_devices)
    for name in names:
        for candidate in available:
            if candidate == name or candidate.split(".")[0] == name:
                return name
    raise NNAdapterError(f"intel_openvino: none of the devices {', '.join(names)} ({SELECT_DEVICE_NAMES_KEY}) is "
                         f"available; OpenVINO offers: {', '.join(available) or 'none'}", ResultCode.DEVICE_NOT_FOUND)


def inference_precision(parsed: Properties) -> str:
    """The INTEL_OPENVINO_INFERENCE_PRECISION value (f32 when unset); PropertiesError for another word."""
    value = parsed.get(INFERENCE_PRECISION_KEY, DEFAULT_INFERENCE_PRECISION).strip().lower()
    if value not in INFERENCE_PRECISIONS:
        where = "context property" if INFERENCE_PRECISION_KEY in parsed.values else "environment variable"
        raise PropertiesError(f"{where} {INFERENCE_PRECISION_KEY}={value!r}: expected one of "
                              f"{', '.join(INFERENCE_PRECISIONS)}")
    return value


def compile_config(core, device_name: str, num_threads: int, num_streams: int = 0,
                   precision: str = DEFAULT_INFERENCE_PRECISION) -> dict:
    supported = set(core.get_property(device_name, "SUPPORTED_PROPERTIES"))
    config = {}
    if num_threads > 0:
        if "INFERENCE_NUM_THREADS" not in supported:
            raise NNAdapterError(f"intel_openvino: device {device_name} has no INFERENCE_NUM_THREADS setting "
                                 f"({INFERENCE_NUM_THREADS_KEY}={num_threads})", ResultCode.INVALID_PARAMETER)
        config["INFERENCE_NUM_THREADS"] = num_threads
    if num_streams > 0:
        if "NUM_STREAMS" not in supported:
            raise NNAdapterError(f"intel_openvino: device {device_name} has no NUM_STREAMS setting "
                                 f"({NUM_STREAMS_KEY}={num_streams})", ResultCode.INVALID_PARAMETER)
        config["NUM_STREAMS"] = num_streams
    hint, capability = INFERENCE_PRECISIONS[precision]
    if capability is not None:
        capabilities = set(core.get_property(device_name, "OPTIMIZATION_CAPABILITIES")) \
            if "OPTIMIZATION_CAPABILITIES" in supported else set()
        if capability not in capabilities or "INFERENCE_PRECISION_HINT" not in supported:
            raise NNAdapterError(f"intel_openvino: {INFERENCE_PRECISION_KEY}={precision}: device {device_name} does "
                                 f"not compute in {precision} (its OPTIMIZATION_CAPABILITIES: "
                                 f"{', '.join(sorted(capabilities)) or 'none'})", ResultCode.INVALID_PARAMETER)
        config["INFERENCE_PRECISION_HINT"] = hint
    elif device_name == "CPU" and "INFERENCE_PRECISION_HINT" in supported:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    if device_name == "CPU":
        # The CPU plugin's snippets (its generated kernels for attention and elementwise chains; an internal
        # property, absent from SUPPORTED_PROPERTIES) compute a wrong attention in OpenVINO 2026.4: q, k and v
        # sliced from one transposed qkv tensor, softmax(q k^T) v, then transposed [0, 2, 1, 3] (MobileViT's and
        # ViT-style blocks) comes out off by more than the outputs' own magnitude. Off, the plugin's plain kernels
        # compute it exactly (tests/hal/test_openvino_driver.py).
        config["SNIPPETS_MODE"] = "DISABLE"
    if "PERFORMANCE_HINT" in supported and num_streams <= 0:  # the LATENCY hint means one stream
        config["PERFORMANCE_HINT"] = "LATENCY"
    return config


def _input_slot(t: OperandType) -> _InputSlot:
    static = [(axis, d) for axis, d in enumerate(t.dims) if d != UNKNOWN and d >= 0]
    return _InputSlot(t, t.dtype, static, t.copy())


class IntelOpenVinoDriver(Driver):
    name = "intel_openvino"
    vendor = "Intel"
    type = DeviceType.CPU
    version = 1
    property_keys = (SELECT_DEVICE_NAMES_KEY, INFERENCE_NUM_THREADS_KEY, NUM_STREAMS_KEY, INFERENCE_PRECISION_KEY,
                     KEEP_NAN_IN_CLAMPS_KEY)

    def cache_environment(self) -> str:
        """driver_protocol's cache_environment: whether integer products run on the SDK's int8 kernels here."""
        return f"int8_kernels={int(exact_int8_kernels())}"

    def sdk_version(self) -> str:
        return f"openvino {_import_openvino().__version__}"  # keys the calibration

    def preference_properties(self, preference: str, relax_float32: bool) -> dict:
        """NNAPI's execution preference as OpenVINO's streams (one stream answers one request fastest; a stream
        per core sustains the most requests with clones), and the relaxed float path as its inference precision:
        bf16 where the CPU computes bf16 (this machine's AMD EPYC does), else f16 where it computes f16."""
        import os

        found = {}
        if preference == "fast_single_answer":
            found[NUM_STREAMS_KEY] = "1"
        elif preference == "sustained_speed":
            found[NUM_STREAMS_KEY] = str(os.cpu_count() or 1)
        if relax_float32:
            capabilities = set(_import_openvino().Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
            for value, (_, capability) in INFERENCE_PRECISIONS.items():
                if value in ("bf16", "f16") and capability in capabilities:
                    found[INFERENCE_PRECISION_KEY] = value
                    break
        return found

    def unavailable_reason(self) -> str:
        try:
            _import_openvino()
        except NNAdapterError:
            return INSTALL_HINT
        return ""

    def open_device(self) -> OpenVinoDevice:
        ov = _import_openvino()
        return OpenVinoDevice(ov.Core())

    def close_device(self, device: OpenVinoDevice) -> None:
        device.opened = False
        device.core = None

    def create_context(
        self, device: OpenVinoDevice, properties: str, callback: ContextCallback = None
    ) -> OpenVinoContext:
        if device.core is None:
            raise NNAdapterError("intel_openvino: the device is closed", ResultCode.INVALID_PARAMETER)
        parsed = Properties(properties)
        names = parsed.get_list(SELECT_DEVICE_NAMES_KEY, DEFAULT_DEVICE_NAMES)
        num_threads = parsed.get_int(INFERENCE_NUM_THREADS_KEY, 0)
        if num_threads < 0:
            raise NNAdapterError(f"{INFERENCE_NUM_THREADS_KEY}={num_threads}: expected 0 (OpenVINO's default) or a "
                                 "positive thread count", ResultCode.INVALID_PARAMETER)
        num_streams = parsed.get_int(NUM_STREAMS_KEY, 0)
        if num_streams < 0:
            raise NNAdapterError(f"{NUM_STREAMS_KEY}={num_streams}: expected 0 (one stream) or a positive stream "
                                 "count", ResultCode.INVALID_PARAMETER)
        precision = inference_precision(parsed)
        keep_nan = parsed.get_int(KEEP_NAN_IN_CLAMPS_KEY, 1)
        if keep_nan not in (0, 1):
            raise NNAdapterError(f"{KEEP_NAN_IN_CLAMPS_KEY}={keep_nan}: expected 1 (NaN passes through, as in "
                                 "Paddle) or 0 (OpenVINO's fused clamp)", ResultCode.INVALID_PARAMETER)
        device_name = select_device(device.core, names)
        return OpenVinoContext(device, parsed, device_name,
                               compile_config(device.core, device_name, num_threads, num_streams, precision), callback,
                               keep_nan_in_clamps=bool(keep_nan))

    def destroy_context(self, context: OpenVinoContext) -> None:
        context.callback = None

    def operation_types(self) -> list:
        from hal.common import LOWERED_TYPES
        from hal.intel_openvino.operations import OPERATIONS

        return sorted(set(OPERATIONS.types()) | LOWERED_TYPES)

    def validate_program(self, context: OpenVinoContext, model: Model) -> list:
        return [not reason for reason in self.unsupported_reasons(context, model)]

    def unsupported_reasons(self, context: OpenVinoContext, model: Model) -> list:
        """Per operation, why this driver declines it ("" when it runs it): what validate_program answers,
        with the reason a user can act on."""
        from hal.intel_openvino.graph import unsupported_reason
        from hal.intel_openvino.operations import OPERATIONS

        return [unsupported_reason(op, OPERATIONS) for op in model.operations]

    def create_program(self, context: OpenVinoContext, model: Model | None, cache: Cache) -> OpenVinoProgram:
        core = context.device.core
        if core is None:
            raise NNAdapterError("intel_openvino: the device is closed", ResultCode.INVALID_PARAMETER)
        start = time.perf_counter()
        if model is None:
            if not cache.buffer:
                raise NNAdapterError("intel_openvino: neither a model nor a cache buffer to build a program from",
                                     ResultCode.INVALID_PARAMETER)
            try:
                compiled, blob_memory = _import_program(core, cache.buffer, context, cache.mapped_buffer)
            except Exception as exc:  # a blob from another OpenVINO build or device: a cache miss, not a crash
                raise NNAdapterError(f"intel_openvino: cannot import the cached program on {context.device_name}: "
                                     f"{exc}", ResultCode.INVALID_PARAMETER) from exc
            input_types = [t.copy() for t in cache.input_types]
            output_types = [t.copy() for t in cache.output_types]
            from hal.intel_openvino.checks import check_outputs

            checks = check_outputs(compiled.outputs)
            if len(compiled.inputs) != len(input_types) or len(compiled.outputs) - len(checks) != len(output_types):
                raise NNAdapterError(f"intel_openvino: the cached program has {len(compiled.inputs)} inputs and "
                                     f"{len(compiled.outputs)} outputs, the cache record {len(input_types)} and "
                                     f"{len(output_types)}", ResultCode.INVALID_PARAMETER)
            restored = True
        else:
            # Imported here: a start that restores every program from the cache never needs the operation
            # tables or the graph builder (hal.common imports the standard's 96 operations).
            from hal.common import lower, unsupported_reason
            from hal.intel_openvino.checks import check_outputs
            from hal.intel_openvino.graph import (
                build_ov_model,
                channels_last_reorders,
                hand_out_channels_last,
                operation_supported,
            )
            from hal.intel_openvino.operations import OPERATIONS

            release_host_memory = getattr(model, "release_host_memory", None)
            model = lower(model, OPERATIONS)
            # The signature checks here; the trial conversion of every operation alone is the build itself
            # (it converts each one the same way), so it runs op by op only to name what failed.
            unsupported = [op.label() for op in model.operations if unsupported_reason(op, OPERATIONS, _no_trial)]
            if not unsupported:
                try:
                    ov_model = build_ov_model(model, OPERATIONS, keep_nan_in_clamps=context.keep_nan_in_clamps)
                except Exception:
                    unsupported = [op.label() for op in model.operations if not operation_supported(op, OPERATIONS)]
                    if not unsupported:
                        raise
            if unsupported:
                raise NNAdapterError(f"intel_openvino cannot run {', '.join(unsupported)}",
                                     ResultCode.FEATURE_NOT_SUPPORTED)
            _release_host_memory(release_host_memory)  # OpenVINO holds its own copy of every constant now
            compiled = core.compile_model(ov_model, context.device_name, context.config)
            channels_last = channels_last_reorders(compiled, len(model.output_operands))
            if channels_last:  # compiled again, the outputs handed out as computed (graph.py: channels-last)
                hand_out_channels_last(ov_model, channels_last)
                compiled = core.compile_model(ov_model, context.device_name, context.config)
            del ov_model
            checks = check_outputs(compiled.outputs)
            if cache.wants_program_bytes:
                # Exported when the runtime writes the .nnc (after the first run, driver_protocol.Cache), not
                # now, while the compile's scratch memory is still held; a view of OpenVINO's export stream
                # itself, written into the file piece by piece, never copied.
                cache.exporter = lambda: compiled.export_model().getbuffer()
            input_types = [o.type.copy() for o in model.input_operands]
            output_types = [o.type.copy() for o in model.output_operands]
            restored = False
            blob_memory = None
        seconds = time.perf_counter() - start
        from openvino import Tensor

        from hal.intel_openvino.checks import channels_last_outputs

        return OpenVinoProgram(context, compiled, compiled.create_infer_request(),
                               [_input_slot(t) for t in input_types], output_types,
                               [t.copy() for t in output_types], seconds, restored, Tensor, checks,
                               channels_last_outputs(compiled.outputs), blob_memory)

    def clone_program(self, program: OpenVinoProgram) -> OpenVinoProgram:
        """The same CompiledModel with a new InferRequest and fresh input slots (OpenVINO runs several
        requests of one compiled model at once; one request runs one inference at a time)."""
        if program.compiled_model is None:
            raise NNAdapterError("intel_openvino: the program was destroyed", ResultCode.INVALID_PARAMETER)
        return dataclasses.replace(program, request=program.compiled_model.create_infer_request(),
                                   inputs=[_input_slot(slot.type) for slot in program.inputs],
                                   output_scratch=[t.copy() for t in program.output_types])

    def destroy_program(self, program: OpenVinoProgram) -> None:
        for slot in program.inputs:
            slot.bound_array = None
        program.request = None
        program.compiled_model = None
        program.blob_memory = None  # after the compiled model: a clone still running it holds its own reference

    def execute_program(
        self, program: OpenVinoProgram, inputs: Sequence[Argument], outputs: Sequence[Argument]
    ) -> None:
        request = self._request(program)
        slots = program.inputs
        if len(inputs) != len(slots):
            raise NNAdapterError(f"intel_openvino: the program has {len(slots)} inputs, {len(inputs)} were given",
                                 ResultCode.INVALID_PARAMETER)
        for arg in inputs:
            slot = slots[arg.index]
            scratch = slot.scratch
            scratch.dims = slot.type.dims
            self._bind_input(program, arg.index, arg.access(arg.memory, scratch))
        self._infer(program, request)
        for arg in outputs:
            if not 0 <= arg.index < len(program.output_types):
                raise NNAdapterError(f"intel_openvino: output {arg.index} does not exist (the program has "
                                     f"{len(program.output_types)})", ResultCode.INVALID_PARAMETER)
            data = request.get_output_tensor(arg.index).data
            if arg.index in program.channels_last:
                data = data.transpose(0, 3, 1, 2)
            scratch = program.output_scratch[arg.index]
            scratch.dims = data.shape
            buffer = arg.access(arg.memory, scratch)
            if buffer is None or buffer.shape != data.shape:
                raise NNAdapterError(f"intel_openvino: the access function of output {arg.index} gave no buffer of "
                                     f"shape {list(data.shape)}", ResultCode.INVALID_PARAMETER)
            np.copyto(buffer, data, casting="same_kind")
        return None

    def run_arrays(self, program: OpenVinoProgram, arrays: Sequence[np.ndarray]) -> list:
        """driver_protocol's run_arrays: execute_program's checks and run without the access callbacks; each
        output is copied out of the request (which the next run overwrites) at the model's dtype."""
        request = self._request(program)
        if len(arrays) != len(program.inputs):
            raise NNAdapterError(f"intel_openvino: the program has {len(program.inputs)} inputs, {len(arrays)} "
                                 "were given", ResultCode.INVALID_PARAMETER)
        for index, array in enumerate(arrays):
            self._bind_input(program, index, array)
        self._infer(program, request)
        outputs = []
        for k, scratch in enumerate(program.output_scratch):
            data = request.get_output_tensor(k).data
            if k in program.channels_last:
                data = data.transpose(0, 3, 1, 2)
            outputs.append(np.array(data, dtype=scratch.dtype, order="C"))
        return outputs

    @staticmethod
    def _request(program: OpenVinoProgram):
        request = program.request
        if request is None:
            raise NNAdapterError("intel_openvino: the program was destroyed", ResultCode.INVALID_PARAMETER)
        return request

    @staticmethod
    def _bind_input(program: OpenVinoProgram, index: int, array: np.ndarray) -> None:
        """Check input `index` against the program (rank, static dims, dtype) and bind it to the request."""
        slot = program.inputs[index]
        if array.ndim != len(slot.type.dims):
            raise InvalidDimensionsError(f"intel_openvino: input {index} has rank {array.ndim} (shape "
                                         f"{list(array.shape)}), the program was built for {list(slot.type.dims)}")
        shape = array.shape
        for axis, size in slot.static_dims:
            if shape[axis] != size:
                raise InvalidDimensionsError(f"intel_openvino: input {index} has shape {list(shape)}, the "
                                             f"program was built for {list(slot.type.dims)}")
        if array.dtype != slot.dtype:
            raise NNAdapterError(f"intel_openvino: input {index} has dtype {array.dtype}, expected "
                                 f"{slot.dtype} ({slot.type.precision.name})", ResultCode.INVALID_PARAMETER)
        if array is slot.bound_array and shape == slot.bound_shape:
            return  # the request already reads this very buffer (its current contents)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        # shared_memory: OpenVINO reads the caller's buffer in place (no copy before the run).
        program.request.set_input_tensor(index, program.tensor_class(array, shared_memory=True))
        slot.bound_array, slot.bound_shape = array, shape

    @staticmethod
    def _infer(program: OpenVinoProgram, request) -> None:
        # share_outputs: the results dict holds views, not copies of every output (which the default makes, and
        # which nothing here reads: the outputs are read from the request's tensors, copied once, by the caller)
        request.infer(share_outputs=True)
        for position, message, code, operand in program.checks:  # check_outputs; a fault: int64.py, nms.py
            if request.get_output_tensor(position).data.item():
                if code == ResultCode.FEATURE_NOT_SUPPORTED:  # the device's fault, naming its operation if it has one
                    raise operation_fault(f"intel_openvino: {message}", operand)
                raise NNAdapterError(f"intel_openvino: {message}", code)


DRIVER = IntelOpenVinoDriver()
