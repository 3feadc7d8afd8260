"""Model fusions a driver applies before it builds a program (builtin_device and google_xnnpack; Paddle Lite's
builtin device does the same, its NNAdapter optimizer passes):

* CONV_2D followed by BATCH_NORMALIZATION with constant statistics -> one CONV_2D with folded
  filter and bias (the batch norm is a per-output-channel affine map);
* CONV_2D / FULLY_CONNECTED followed by RELU or RELU6 -> the fuse code of the first operation.

A fusion applies only where the intermediate operand has exactly one consumer and is not a model output,
every operand involved is plain FLOAT32 (quantized operations keep their own rounding points), and the
parameters are constants. The caller's model is never modified: `fuse_operations` returns a new Model
that shares the unchanged constant arrays and leaves out operands nothing uses any more.

Only the NNAdapter standard and numpy are imported here, never a driver or an SDK.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.nnadapter.codes import FuseCode, Lifetime, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import Operand, OperandType, Operation

_CONV_FILTER, _CONV_BIAS, _CONV_FUSE = 1, 2, 8
_FC_WEIGHT, _FC_BIAS, _FC_FUSE = 1, 2, 3
_ACTIVATION_FUSE = {T.RELU: FuseCode.FUSED_RELU, T.RELU6: FuseCode.FUSED_RELU6}


def _float32(operand: Operand | None) -> bool:
    return operand is None or operand.type.precision == Precision.FLOAT32


def _const(operand: Operand | None) -> bool:
    return operand is not None and operand.is_constant


def _fuse_code(op: Operation, index: int) -> int:
    if index >= len(op.inputs) or op.inputs[index] is None:
        return FuseCode.FUSED_NONE
    return int(np.asarray(op.inputs[index].value).reshape(-1)[0])


class _Rewrite:
    """The new inputs and final output of one fused operation."""

    def __init__(self, op: Operation, fuse_index: int):
        self.op = op
        self.inputs: list = list(op.inputs) + [None] * max(0, fuse_index + 1 - len(op.inputs))
        self.output: Operand = op.outputs[0]
        self.fuse_index = fuse_index
        self.new_constants: dict = {}  # input position -> ndarray replacing that operand's value

    def fuse_code(self) -> int:
        if self.fuse_index in self.new_constants:
            return int(self.new_constants[self.fuse_index][0])
        return _fuse_code(self.op, self.fuse_index)


def _fold_batch_norm(rewrite: _Rewrite, bn: Operation) -> bool:
    scale, bias, mean, var = bn.inputs[1:5]
    eps_operand = bn.inputs[5] if len(bn.inputs) > 5 else None
    if not all(_const(o) and _float32(o) for o in (scale, bias, mean, var)):
        return False
    if eps_operand is not None and not _const(eps_operand):
        return False
    conv = rewrite.op
    filt = rewrite.new_constants.get(_CONV_FILTER, conv.inputs[_CONV_FILTER].value)
    old_bias = conv.inputs[_CONV_BIAS] if len(conv.inputs) > _CONV_BIAS else None
    if old_bias is not None and not _const(old_bias):
        return False
    c_out = filt.shape[0]
    b = rewrite.new_constants.get(_CONV_BIAS, old_bias.value if old_bias is not None else np.zeros(c_out, np.float32))
    eps = float(np.asarray(eps_operand.value).reshape(-1)[0]) if eps_operand is not None else 1e-5
    # Computed in float64 and rounded once, so the folded conv is as close to conv-then-BN as float32 allows.
    factor = np.asarray(scale.value, np.float64) / np.sqrt(np.asarray(var.value, np.float64) + eps)
    if factor.shape != (c_out,):
        return False
    rewrite.new_constants[_CONV_FILTER] = (filt.astype(np.float64) * factor.reshape(-1, 1, 1, 1)).astype(np.float32)
    rewrite.new_constants[_CONV_BIAS] = ((np.asarray(b, np.float64) - np.asarray(mean.value, np.float64)) * factor
                                         + np.asarray(bias.value, np.float64)).astype(np.float32)
    return True


def fuse_operations(model: Model) -> Model:
    """A new Model with the fusions above applied (the input model is left as it is)."""
    consumers = model.consumers()
    model_outputs = {o.index for o in model.output_operands}
    rewrites: dict[int, _Rewrite] = {}
    absorbed: set = set()
    for op in model.topological_operations():
        if op.type == T.CONV_2D:
            fuse_index, foldable = _CONV_FUSE, True
        elif op.type == T.FULLY_CONNECTED:
            fuse_index, foldable = _FC_FUSE, False
        else:
            continue
        if id(op) in absorbed or not all(_float32(o) for o in op.inputs[:3] + op.outputs):
            continue
        if op.type == T.CONV_2D and not _const(op.inputs[_CONV_FILTER]):
            foldable = False
        rewrite = _Rewrite(op, fuse_index)
        while rewrite.fuse_code() == FuseCode.FUSED_NONE:
            out = rewrite.output
            users = consumers.get(out.index, [])
            if out.index in model_outputs or len(users) != 1:
                break
            user = users[0]
            if user.inputs[0] is not out or not all(_float32(o) for o in user.outputs):
                break
            if user.type == T.BATCH_NORMALIZATION and foldable and _fold_batch_norm(rewrite, user):
                pass
            elif user.type in _ACTIVATION_FUSE:
                rewrite.new_constants[fuse_index] = np.array([_ACTIVATION_FUSE[user.type]], np.int32)
            else:
                break
            absorbed.add(id(user))
            rewrite.output = user.outputs[0]
        if rewrite.output is not op.outputs[0]:
            rewrites[id(op)] = rewrite
    if not rewrites:
        return model
    return _rebuild(model, rewrites, absorbed)


def _rebuild(model: Model, rewrites: dict, absorbed: set) -> Model:
    fused = Model()
    mapping: dict[int, Operand] = {}

    def carry(operand: Operand | None) -> Operand | None:
        if operand is None:
            return None
        new = mapping.get(operand.index)
        if new is None:
            new = Operand(operand.type.copy(), operand.value, operand.name, len(fused.operands))
            fused.operands.append(new)
            mapping[operand.index] = new
        return new

    def constant(value: np.ndarray, name: str) -> Operand:
        t = OperandType(precision=Precision.FLOAT32 if value.dtype == np.float32 else Precision.INT32,
                        dims=value.shape, lifetime=Lifetime.CONSTANT_COPY)
        operand = Operand(t, value, name, len(fused.operands))
        fused.operands.append(operand)
        return operand

    for operand in model.input_operands:
        carry(operand)
    for op in model.operations:
        if id(op) in absorbed:
            continue
        rewrite = rewrites.get(id(op))
        if rewrite is None:
            inputs, outputs = [carry(o) for o in op.inputs], [carry(o) for o in op.outputs]
        else:
            # New constants are operands of the fused model already: only the original ones are carried.
            inputs = [constant(rewrite.new_constants[k], f"{rewrite.output.label()}/fused{k}")
                      if k in rewrite.new_constants else carry(o) for k, o in enumerate(rewrite.inputs)]
            outputs = [carry(rewrite.output)]
        new_op = Operation(op.type, inputs, outputs, len(fused.operations))
        fused.operations.append(new_op)
    fused.input_operands = [carry(o) for o in model.input_operands]
    fused.output_operands = [carry(o) for o in model.output_operands]
    fused.finished = True
    return fused
