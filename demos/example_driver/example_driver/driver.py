"""The example device's HAL driver: the protocol of nnadapter_bridge.nnadapter.driver_protocol around
the numpy kernels of `kernels`.

* open_device / create_context: nothing to open; the context reads one property, EXAMPLE_DEVICE_TRACE
  (also from the environment): 1 or true prints a line for each program it compiles.
* validate_program: one flag per operation, from the same trial compile create_program does.
* create_program: "compiles" the model (a kernel per operation, constants laid out once, a fixed order).
  With a cache token and dir the program bytes go into cache.buffer; this template stores the model in
  the standard's serialized form (nnadapter.serialization); a real driver stores its SDK's compiled blob.
  With no model, restores from cache.buffer.
* execute_program: reads the inputs through their access functions, runs the kernels, writes the outputs.
* clone_program: programs hold no execution state, so a clone shares everything.
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

import numpy as np

from example_driver.kernels import COMPILERS, unsupported_reason
from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import DeviceType, ResultCode
from nnadapter_bridge.nnadapter.driver_protocol import Argument, Cache, ContextCallback, Driver
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.properties import Properties
from nnadapter_bridge.nnadapter.serialization import deserialize_model, serialize_model

TRACE_KEY = "EXAMPLE_DEVICE_TRACE"


@dataclasses.dataclass
class ExampleContext:
    trace: bool
    callback: ContextCallback = None


@dataclasses.dataclass
class ExampleProgram:
    steps: list            # (kernel, input operand indexes, output operand indexes) in topological order
    constants: dict        # operand index -> array
    inputs: list           # model input operand indexes
    outputs: list          # model output operand indexes
    input_types: list
    output_types: list


def _compile(model: Model, trace: bool) -> ExampleProgram:
    steps = []
    for op in model.topological_operations():
        reason = unsupported_reason(op)
        if reason:
            raise NNAdapterError(f"example_device cannot run {op.label()}: {reason}", ResultCode.FEATURE_NOT_SUPPORTED)
        kernel = COMPILERS[op.type](op)
        steps.append((kernel, [o.index if o is not None else None for o in op.inputs],
                      [o.index for o in op.outputs]))
    constants = {o.index: np.asarray(o.value) for o in model.operands if o.is_constant}
    if trace:
        print(f"example_device: compiled {len(steps)} operations", file=sys.stderr)
    return ExampleProgram(steps, constants, [o.index for o in model.input_operands],
                          [o.index for o in model.output_operands],
                          [o.type.copy() for o in model.input_operands], [o.type.copy() for o in model.output_operands])


class ExampleDriver(Driver):
    name = "example_device"
    vendor = "Example Inc."
    type = DeviceType.CPU
    version = 1
    property_keys = (TRACE_KEY,)

    def operation_types(self) -> list:
        return sorted(COMPILERS)

    def open_device(self):
        return object()

    def close_device(self, device) -> None:
        pass

    def create_context(self, device, properties: str, callback: ContextCallback = None) -> ExampleContext:
        return ExampleContext(Properties(properties).get_bool(TRACE_KEY), callback)  # the env is the fallback

    def destroy_context(self, context: ExampleContext) -> None:
        context.callback = None

    def validate_program(self, context: ExampleContext, model: Model) -> list:
        return [not unsupported_reason(op) for op in model.operations]

    def create_program(self, context: ExampleContext, model: Model | None, cache: Cache) -> ExampleProgram:
        if model is None:
            if not cache.buffer:
                raise NNAdapterError("example_device: no model and no cache buffer", ResultCode.INVALID_PARAMETER)
            model = deserialize_model(cache.buffer)  # raises INVALID_PARAMETER on bad bytes: a cache miss
            return _compile(model, context.trace)
        program = _compile(model, context.trace)
        if cache.wants_program_bytes:
            cache.buffer[:] = serialize_model(model)
        return program

    def destroy_program(self, program: ExampleProgram) -> None:
        program.steps = []

    def clone_program(self, program: ExampleProgram) -> ExampleProgram:
        return dataclasses.replace(program)

    def execute_program(self, program: ExampleProgram, inputs: Sequence[Argument], outputs: Sequence[Argument]) -> None:
        values = dict(program.constants)
        given = {arg.index: arg for arg in inputs}
        for k, (index, compiled) in enumerate(zip(program.inputs, program.input_types)):
            arg = given.get(k)
            if arg is None:
                raise NNAdapterError(f"example_device: input {k} was not set", ResultCode.INVALID_PARAMETER)
            array = np.asarray(arg.access(arg.memory, compiled.copy()))
            if array.ndim != compiled.rank:
                raise InvalidDimensionsError(f"example_device: input {k} has rank {array.ndim}, the program was "
                                             f"compiled for rank {compiled.rank}")
            values[index] = array
        for kernel, input_indexes, output_indexes in program.steps:
            results = kernel([values.get(i) if i is not None else None for i in input_indexes])
            for index, result in zip(output_indexes, results):
                values[index] = result
        for arg in outputs:
            result = np.asarray(values[program.outputs[arg.index]])
            buffer = np.asarray(arg.access(arg.memory, program.output_types[arg.index].copy(dims=tuple(result.shape))))
            np.copyto(buffer, result, casting="same_kind")


DRIVER = ExampleDriver()
