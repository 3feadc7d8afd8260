"""Devices for the placement tests: builtin_device under another name that declines some NNAdapter operations
(validate_program says no, as a real SDK does for what it lacks), or fails to compile; and the small model they
run, with sigmoid and tanh after add/relu/scale."""
from __future__ import annotations

import numpy as np

from hal.builtin_device.driver import BuiltinDeviceDriver
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

PICKY = "picky_device"
EXTRA_OPS = ("sigmoid", "tanh")


class DecliningDevice(BuiltinDeviceDriver):
    """builtin_device that declines every operation whose type is in `declines` (names of OperationType)."""

    def __init__(self, name: str, declines=("RELU",)):
        self.name = name
        self.vendor = "tests"
        self.declines = frozenset(declines)

    def validate_program(self, context, model):
        flags = super().validate_program(context, model)
        return [ok and op.type.name not in self.declines for op, ok in zip(model.operations, flags)]


class ConcreteDecliningDevice(BuiltinDeviceDriver):
    """builtin_device that accepts a RELU while its input dims are unknown (the support decision, made on the
    declared [-1, 4]) and declines it, in validate_program and in its compiler, once they are all known (the
    program compiled for the fed shape): the engine then splits the subgraph and runs the relu on the host."""

    def __init__(self, name: str):
        self.name = name
        self.vendor = "tests"

    @staticmethod
    def _declines(op) -> bool:
        return op.type.name == "RELU" and all(d >= 0 for d in op.inputs[0].type.dims)

    def validate_program(self, context, model):
        flags = super().validate_program(context, model)
        return [ok and not self._declines(op) for op, ok in zip(model.operations, flags)]

    def create_program(self, context, model, cache):
        if model is not None and any(self._declines(op) for op in model.operations):
            raise RuntimeError(f"{self.name}: RELU with known dims is not supported")
        return super().create_program(context, model, cache)


class SizesDecliningDevice(BuiltinDeviceDriver):
    """builtin_device that declines a RELU while any of its input dims is unknown and takes it once they are all
    known (a check that needs the sizes, as google_xnnpack's of TFLite's conv window): what the support decision
    sees of the declared [-1, 4] until it asks with the dims made concrete."""

    def __init__(self, name: str):
        self.name = name
        self.vendor = "tests"

    def validate_program(self, context, model):
        flags = super().validate_program(context, model)
        return [ok and not (op.type.name == "RELU" and any(d < 0 for d in op.inputs[0].type.dims))
                for op, ok in zip(model.operations, flags)]


class FailingCompileDevice(BuiltinDeviceDriver):
    """builtin_device whose compiler fails on every model (a device fault: the subgraph falls to the host)."""

    def __init__(self, name: str):
        self.name = name
        self.vendor = "tests"

    def create_program(self, context, model, cache):
        raise RuntimeError(f"{self.name}: simulated compiler crash")


class FailingRunDevice(BuiltinDeviceDriver):
    """builtin_device whose programs fail every run with a device fault (as intel_openvino's int64 range check
    does for values beyond int32): the subgraph runs on the host for those input shapes."""

    def __init__(self, name: str):
        self.name = name
        self.vendor = "tests"

    def execute_program(self, program, inputs, outputs):
        from nnadapter_bridge.errors import NNAdapterError
        from nnadapter_bridge.nnadapter.codes import ResultCode

        raise NNAdapterError(f"{self.name}: simulated run fault", ResultCode.DEVICE_INTERNAL_ERROR)


def placement_model(directory) -> str:
    """add -> relu -> scale -> sigmoid -> tanh (ops #1-#5 after feed #0)."""
    return add_relu_scale_model(directory, extra_ops=EXTRA_OPS)


def placement_reference(x: np.ndarray) -> np.ndarray:
    return np.tanh(1.0 / (1.0 + np.exp(-reference_add_relu_scale(x).astype(np.float64)))).astype(np.float32)
