"""Runs NNAdapter operations and models on numpy through the standard's reference implementations.

This is the executable definition of the standard: `run_operation` applies one operation's registered
reference (`operations.REFERENCES`), dequantizing quantized inputs first and requantizing quantized outputs
unless the reference handles quantized storage itself; `run_model` runs a whole model in topological order.
builtin_device, the host executor and the lowering passes (nnadapter.lowering) all compute through here.

Entry points: `run_operation`, `run_model`, `supports`. Imports the standard only; never a driver (a driver
runs the reference, not the reverse).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import NNAdapterError, OperationError
from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations import REFERENCES, check_signature, dequantize, get_spec, quantize
from nnadapter_bridge.nnadapter.types import Operation


def supports(op: Operation) -> bool:
    """True iff the reference can run `op` as given: a reference exists, its `supports(op)` (if any)
    accepts, and the operation's signature check (plus its extra validation, if registered) passes."""
    ref = REFERENCES.get(op.type)
    if ref is None:
        return False
    try:
        if ref.supports is not None and not ref.supports(op):
            return False
        spec = get_spec(op.type)
        check_signature(op, spec)
        if spec.validate is not None:
            spec.validate(op)
    except (OperationError, NNAdapterError, ValueError, TypeError, IndexError):
        return False
    return True


def run_operation(op: Operation, inputs: list) -> list:
    """Run one operation on concrete input arrays; returns one array (or None) per output."""
    ref = REFERENCES.get(op.type)
    if ref is None:
        raise NNAdapterError(f"the NNAdapter standard has no reference for {op.type.name}",
                             ResultCode.FEATURE_NOT_SUPPORTED)
    if not ref.raw_quant:
        inputs = [a if (a is None or o is None) else dequantize(a, o.type) for a, o in zip(inputs, op.inputs)]
    outputs = ref.fn(op, inputs)
    if len(outputs) != len(op.outputs):
        raise OperationError(f"{op.label()}: reference returned {len(outputs)} outputs, expected {len(op.outputs)}")
    if not ref.raw_quant:
        outputs = [
            quantize(a, o.type) if (a is not None and o is not None and o.type.is_quantized) else a
            for a, o in zip(outputs, op.outputs)
        ]
    return [_in_declared_float(a, o) for a, o in zip(outputs, op.outputs)]


def _in_declared_float(array, operand):
    """A float result in its operand's float width: references compute float16 in float32 (as Paddle's CPU
    kernels do) and round once here."""
    if array is None or operand is None or operand.type.is_quantized:
        return array
    array = np.asarray(array)
    if array.dtype.kind != "f":
        return array
    try:
        dtype = operand.type.dtype
    except (ValueError, KeyError):
        return array
    return array.astype(dtype) if dtype.kind == "f" and dtype != array.dtype else array


def run_model(model: Model, inputs: Sequence[np.ndarray], order: list | None = None) -> list:
    """Execute `model` on `inputs` (one array per model input); returns the model's output arrays.
    `order` is the operations in topological order, when the caller has it already."""
    if len(inputs) != len(model.input_operands):
        raise NNAdapterError(f"the model has {len(model.input_operands)} inputs, got {len(inputs)} arrays",
                             ResultCode.INVALID_PARAMETER)
    values: dict[int, np.ndarray] = {}
    for operand, array in zip(model.input_operands, inputs):
        values[operand.index] = array
    for op in order if order is not None else model.topological_operations():
        args: list[np.ndarray | None] = []
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
