"""The builtin_device HAL driver: the HAL protocol around the NNAdapter standard's numpy reference
(nnadapter_bridge.nnadapter.reference), which interprets the model (facts §6.5).

* Programs compiled from a model keep a reference to the (finished) model; when the cache has a token
  and a dir, the program bytes (the serialized model, nnadapter.serialization) go into cache.buffer.
  A model is first fused (hal.fusion: conv+batch norm, conv/fc+relu), as Paddle Lite's
  builtin device does; the stored program is the fused model.
  Programs restored from a cache deserialize those bytes; nothing else is ever read from them.
* validate_program is truthful per operation: the standard's reference can run it (a reference exists,
  its `supports(op)` (if any) accepts, and the operation's signature check passes).
* execute_program accepts other dims of the same rank; an input rank change is INVALID_DIMENSIONS.
* clone_program shares the model and its operation order (nothing in them changes while a program runs).
* Context property BUILTIN_DEVICE_NUM_THREADS (also read from the environment; 0, the default, is automatic:
  the cores no other process is busy on, as OMP_DYNAMIC does, or the BLAS's own OMP_NUM_THREADS /
  OPENBLAS_NUM_THREADS when the user set one; blas_threads.resolve_thread_count):
  it caps the BLAS thread pool while a program runs (nnadapter_bridge.nnadapter.blas_threads, shared with the host
  executor: numpy's matmul/einsum paths are the only multi-threaded parts of the references). Should
  threadpoolctl be missing, the value is validated and kept on the context but has no effect. The BLAS pool
  is global to the process: while programs run on several threads at once, the limit of the first one to
  start holds until the last one ends, and the original limits are restored then (never left capped).

Entry point: `DRIVER`. Imports the HAL protocol, hal.fusion and the standard only; never another driver.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from hal.fusion import fuse_operations
from hal.protocol import Argument, Cache, ContextCallback, Driver
from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError
from nnadapter_bridge.nnadapter.blas_threads import limit_blas_threads
from nnadapter_bridge.nnadapter.codes import DeviceType, ResultCode
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations import REFERENCES
from nnadapter_bridge.nnadapter.properties import Properties
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.reference import supports as operation_supported
from nnadapter_bridge.nnadapter.serialization import deserialize_model, serialize_model
from nnadapter_bridge.nnadapter.types import OperandType

NUM_THREADS_KEY = "BUILTIN_DEVICE_NUM_THREADS"

@plain_dataclass
class BuiltinDeviceHandle:
    opened: bool = True


@plain_dataclass
class BuiltinContext:
    device: BuiltinDeviceHandle
    properties: Properties
    num_threads: int
    callback: ContextCallback = None


@plain_dataclass
class BuiltinProgram:
    context: BuiltinContext
    model: Model
    order: list  # operations in topological order, computed once
    input_types: list
    output_types: list


def _check_restored(model: Model, cache: Cache) -> None:
    """Program bytes that deserialize are still checked like a new model: every operation must pass its
    signature check and have a reference, and the I/O must match the types the cache record declares. A
    failure is INVALID_PARAMETER, which the runtime turns into a cache miss."""
    bad = [op.label() for op in model.operations if not operation_supported(op)]
    if bad:
        raise NNAdapterError(f"builtin_device: the cached program has invalid operations: {', '.join(bad[:5])}",
                             ResultCode.INVALID_PARAMETER)
    for side, operands, declared in (("input", model.input_operands, cache.input_types),
                                     ("output", model.output_operands, cache.output_types)):
        if declared and (len(operands) != len(declared) or any(
                o.type.precision != t.precision or o.type.rank != t.rank for o, t in zip(operands, declared))):
            raise NNAdapterError(f"builtin_device: the cached program's {side}s do not match the cache record",
                                 ResultCode.INVALID_PARAMETER)


class BuiltinDeviceDriver(Driver):
    name = "builtin_device"
    vendor = "Paddle"
    type = DeviceType.CPU
    version = 1
    property_keys = (NUM_THREADS_KEY,)

    def sdk_version(self) -> str:
        return f"numpy {np.__version__}"  # the reference computes with numpy (keys the calibration)

    def open_device(self) -> BuiltinDeviceHandle:
        return BuiltinDeviceHandle()

    def close_device(self, device: BuiltinDeviceHandle) -> None:
        device.opened = False

    def create_context(
        self, device: BuiltinDeviceHandle, properties: str, callback: ContextCallback = None
    ) -> BuiltinContext:
        parsed = Properties(properties)
        num_threads = parsed.get_int(NUM_THREADS_KEY, 0)
        if num_threads < 0:
            raise NNAdapterError(f"{NUM_THREADS_KEY}={num_threads}: expected 0 (automatic) or a "
                                 "positive thread count", ResultCode.INVALID_PARAMETER)
        return BuiltinContext(device, parsed, num_threads, callback)

    def destroy_context(self, context: BuiltinContext) -> None:
        context.callback = None

    def operation_types(self) -> list:
        return sorted(REFERENCES)

    def validate_program(self, context: BuiltinContext, model: Model) -> list:
        return [operation_supported(op) for op in model.operations]

    def create_program(self, context: BuiltinContext, model: Model | None, cache: Cache) -> BuiltinProgram:
        if model is None:
            if not cache.buffer:
                raise NNAdapterError("builtin_device: neither a model nor a cache buffer to build a program from",
                                     ResultCode.INVALID_PARAMETER)
            model = deserialize_model(cache.buffer)  # any bytes-like: parsed in place, not copied
            _check_restored(model, cache)
        else:
            unsupported = [op.label() for op in model.operations if not operation_supported(op)]
            if unsupported:
                raise NNAdapterError(f"builtin_device cannot run {', '.join(unsupported)}",
                                     ResultCode.FEATURE_NOT_SUPPORTED)
            model = fuse_operations(model)
            if cache.wants_program_bytes:
                cache.buffer = serialize_model(model)  # the bytes themselves, not a copy (driver_protocol.Cache)
        order = model.topological_operations()
        return BuiltinProgram(context, model, order,
                              [o.type.copy() for o in model.input_operands],
                              [o.type.copy() for o in model.output_operands])

    def destroy_program(self, program: BuiltinProgram) -> None:
        program.order = []

    def clone_program(self, program: BuiltinProgram) -> BuiltinProgram:
        """Programs hold no execution state: a clone is a second handle on the same model and order."""
        return dataclasses.replace(program)

    def execute_program(self, program: BuiltinProgram, inputs: Sequence[Argument], outputs: Sequence[Argument]) -> None:
        by_index = {arg.index: arg for arg in inputs}
        arrays = []
        for k, compiled in enumerate(program.input_types):
            arg = by_index.get(k)
            if arg is None:
                raise NNAdapterError(f"builtin_device: input {k} was not set", ResultCode.INVALID_PARAMETER)
            requested = compiled.copy()
            array = np.asarray(arg.access(arg.memory, requested))
            if array.ndim != compiled.rank:
                raise InvalidDimensionsError(f"builtin_device: input {k} has rank {array.ndim} (shape "
                                             f"{list(array.shape)}), the program was built for rank "
                                             f"{compiled.rank} {list(compiled.dims)}")
            if array.dtype != compiled.dtype:
                raise NNAdapterError(f"builtin_device: input {k} has dtype {array.dtype}, expected "
                                     f"{compiled.dtype} ({compiled.precision.name})", ResultCode.INVALID_PARAMETER)
            arrays.append(array)
        with limit_blas_threads(program.context.num_threads):
            results = run_model(program.model, arrays, program.order)
        for arg in outputs:
            if not 0 <= arg.index < len(results):
                raise NNAdapterError(f"builtin_device: output {arg.index} does not exist "
                                     f"(the program has {len(results)})", ResultCode.INVALID_PARAMETER)
            result = np.asarray(results[arg.index])
            actual: OperandType = program.output_types[arg.index].copy(dims=tuple(result.shape))
            buffer = arg.access(arg.memory, actual)
            if buffer is None:
                raise NNAdapterError(f"builtin_device: the access function of output {arg.index} gave no buffer",
                                     ResultCode.INVALID_PARAMETER)
            buffer = np.asarray(buffer)
            if tuple(buffer.shape) != tuple(result.shape):
                raise NNAdapterError(f"builtin_device: output {arg.index} buffer has shape {list(buffer.shape)}, "
                                     f"the result has {list(result.shape)}", ResultCode.INVALID_PARAMETER)
            np.copyto(buffer, result, casting="same_kind")
        return None


DRIVER = BuiltinDeviceDriver()
