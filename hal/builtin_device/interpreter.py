"""Runs an NNAdapter Model on numpy: operations in topological order through the kernel registry.

This is the execution core of builtin_device; the driver (hal.builtin_device.driver) wraps it with
the HAL protocol (contexts, programs, caching, shape checks).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import NNAdapterError, OperationError
from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import Operation
from hal.builtin_device.kernels import KERNELS, dequantize, quantize


def run_operation(op: Operation, inputs: list) -> list:
    """Run one operation on concrete input arrays; returns one array (or None) per output."""
    kern = KERNELS.get(op.type)
    if kern is None:
        raise NNAdapterError(f"builtin_device has no kernel for {op.type.name}", ResultCode.FEATURE_NOT_SUPPORTED)
    if not kern.raw_quant:
        inputs = [a if (a is None or o is None) else dequantize(a, o.type) for a, o in zip(inputs, op.inputs)]
    outputs = kern.fn(op, inputs)
    if len(outputs) != len(op.outputs):
        raise OperationError(f"{op.label()}: kernel returned {len(outputs)} outputs, expected {len(op.outputs)}")
    if not kern.raw_quant:
        outputs = [
            quantize(a, o.type) if (a is not None and o is not None and o.type.is_quantized) else a
            for a, o in zip(outputs, op.outputs)
        ]
    return outputs


def run_model(model: Model, inputs: Sequence[np.ndarray], order: Optional[list] = None) -> list:
    """Execute `model` on `inputs` (one array per model input); returns the model's output arrays."""
    if len(inputs) != len(model.input_operands):
        raise NNAdapterError(f"the model has {len(model.input_operands)} inputs, got {len(inputs)} arrays",
                             ResultCode.INVALID_PARAMETER)
    values: dict[int, np.ndarray] = {}
    for operand, array in zip(model.input_operands, inputs):
        values[operand.index] = array
    for op in order if order is not None else model.topological_operations():
        args = []
        for o in op.inputs:
            if o is None:
                args.append(None)
            elif o.is_constant:
                args.append(o.value)
            else:
                try:
                    args.append(values[o.index])
                except KeyError:
                    raise NNAdapterError(f"{op.label()}: input {o.label()} has no value (no producer ran)",
                                         ResultCode.INVALID_PARAMETER) from None
        results = run_operation(op, args)
        for o, array in zip(op.outputs, results):
            if o is not None and array is not None:
                values[o.index] = array
    outputs = []
    for operand in model.output_operands:
        if operand.is_constant:
            outputs.append(operand.value)
        else:
            outputs.append(values[operand.index])
    return outputs
