"""Builds a one-operation NNAdapter model, checks its inferred output types, and runs it.

Shared by the operation tests (they import it from here) and the conformance kit, which
an installed package (an out-of-tree driver's tests) uses without the repository's tests/.

    outs = run_op(OperationType.CONV_2D, [x, Const(w), Const(b), 0, Const([0,0,0,0]), ...])

An input given as a plain ndarray is a model input; `Const(array)` a constant operand; a Python
int/float/bool a shape-[1] INT32/FLOAT32/BOOL8 constant; None a null (omitted optional) operand;
`Quant(q, scale)` a quantized model input. Shape inference is checked against the computed outputs:
every dim the prepare step claims to know must equal the real one.

Entry points: `run_op`, `build_op`, `check_inferred`, `Const`, `Quant`. Imports the standard only (its reference
when a model runs).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.nnadapter.codes import UNKNOWN, OperationType, Precision, dtype_precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import OperandType


@dataclasses.dataclass
class Const:
    value: object
    precision: Precision | None = None


@dataclasses.dataclass
class Quant:
    """A quantized tensor: raw integers plus scale(s); a constant unless `is_input`."""

    value: np.ndarray
    scale: float | None = None
    scales: Sequence[float] | None = None
    channel_dim: int = 0
    zero_point: int = 0
    precision: Precision = Precision.QUANT_INT8_SYMM_PER_LAYER
    is_input: bool = True

    def operand_type(self) -> OperandType:
        return OperandType(precision=self.precision, dims=np.asarray(self.value).shape, scale=self.scale,
                           scales=tuple(self.scales) if self.scales is not None else None,
                           channel_dim=self.channel_dim, zero_point=self.zero_point)


def build_op(op_type: OperationType, inputs: Sequence, n_outputs: int = 1,
             output_types: Sequence[OperandType | None] | None = None,
             null_outputs: Sequence[int] = (), relu_before: Sequence[int] = ()):
    """Build a model with one operation; returns (model, input arrays in model-input order).
    `relu_before`: input positions (model inputs) that pass through a RELU on their way to the operation."""
    model = Model()
    operands = []
    feeds = []
    for i, item in enumerate(inputs):
        if item is None:
            operands.append(None)
        elif isinstance(item, Quant):
            if item.is_input:
                o = model.add_operand(item.operand_type(), f"in{i}")
                feeds.append((o, np.asarray(item.value)))
            else:
                o = model.add_operand(item.operand_type(), f"in{i}")
                model.set_operand_value(o, np.asarray(item.value))
            operands.append(o)
        elif isinstance(item, Const):
            operands.append(model.add_constant(item.value, item.precision, name=f"in{i}"))
        elif isinstance(item, (bool, np.bool_)):
            operands.append(model.add_constant(np.array([item], dtype=np.bool_), name=f"in{i}"))
        elif isinstance(item, (int, np.integer)):
            operands.append(model.add_constant(np.array([item], dtype=np.int32), name=f"in{i}"))
        elif isinstance(item, (float, np.floating)):
            operands.append(model.add_constant(np.array([item], dtype=np.float32), name=f"in{i}"))
        else:
            array = np.asarray(item)
            o = model.add_operand(OperandType(precision=dtype_precision(array.dtype), dims=array.shape), f"in{i}")
            feeds.append((o, array))
            if i in relu_before:
                activated = model.add_operand(OperandType(), f"relu{i}")
                model.add_operation(OperationType.RELU, [o], [activated])
                o = activated
            operands.append(o)
    outputs = []
    for j in range(n_outputs):
        if j in null_outputs:
            outputs.append(None)
            continue
        t = output_types[j] if output_types and output_types[j] is not None else OperandType()
        outputs.append(model.add_operand(t, f"out{j}"))
    model.add_operation(op_type, operands, outputs)
    model.identify_inputs_and_outputs([o for o, _ in feeds], [o for o in outputs if o is not None])
    model.finish()
    return model, [a for _, a in feeds]


def check_inferred(model: Model, results: Sequence[np.ndarray]) -> None:
    """Every known inferred dim and the rank must match the real output; so must the dtype."""
    for operand, array in zip(model.output_operands, results):
        t = operand.type
        assert t.precision != Precision.UNKNOWN, f"{operand.label()}: prepare left the precision unknown"
        assert len(t.dims) == array.ndim, (
            f"{operand.label()}: inferred rank {len(t.dims)} dims {t.dims}, real shape {array.shape}"
        )
        for d, real in zip(t.dims, array.shape):
            assert d == UNKNOWN or d == real, f"{operand.label()}: inferred dims {t.dims}, real shape {array.shape}"
        assert array.dtype == t.dtype, (
            f"{operand.label()}: inferred {t.precision.name} ({t.dtype}), kernel gave {array.dtype}"
        )


def run_op(op_type: OperationType, inputs: Sequence, n_outputs: int = 1,
           output_types: Sequence[OperandType | None] | None = None,
           null_outputs: Sequence[int] = (), check_shapes: bool = True) -> list:
    """Build, infer, run through the standard's reference (what builtin_device runs); returns the outputs."""
    from nnadapter_bridge.nnadapter.reference import run_model

    model, feeds = build_op(op_type, inputs, n_outputs, output_types, null_outputs)
    results = run_model(model, feeds)
    if check_shapes:
        check_inferred(model, results)
    return results
