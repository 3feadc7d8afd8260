"""Model fusions a driver applies before it builds a program (builtin_device and google_xnnpack; Paddle Lite's
builtin device does the same, its NNAdapter optimizer passes):

* CONV_2D followed by BATCH_NORMALIZATION with constant statistics -> one CONV_2D with folded
  filter and bias (the batch norm is a per-output-channel affine map);
* CONV_2D / FULLY_CONNECTED followed by RELU or RELU6 -> the fuse code of the first operation;
* CONV_2D followed by a SLICE (step 1) of its rows and columns -> one CONV_2D computing only those windows, its
  pads reduced (Paddle's EfficientNet writes TensorFlow's SAME padding as symmetric pads and a crop of the first
  row and column: the crop and the extra row of windows cost a copy each, and the batch norm after the crop could
  not fold).

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

_CONV_FILTER, _CONV_BIAS, _CONV_AUTO_PAD, _CONV_PADS, _CONV_STRIDES, _CONV_DILATIONS, _CONV_FUSE = 1, 2, 3, 4, 5, 7, 8
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


def _ints(operand: Operand | None, default: list) -> list:
    return default if operand is None else [int(v) for v in np.asarray(operand.value).reshape(-1)]


def _known(dims) -> bool:
    return all(d is not None and d > 0 for d in dims)


def _fold_crop(rewrite: _Rewrite, crop: Operation) -> bool:
    """The conv's output cropped by `crop` (a step-1 SLICE of rows and columns) is the conv with only those
    windows: dropping `begin` leading rows moves the first window down by begin * stride, i.e. takes as many
    rows off the top pad, and the bottom pad becomes what the last kept window needs."""
    conv = rewrite.op
    params = [conv.inputs[i] if i < len(conv.inputs) else None
              for i in (_CONV_AUTO_PAD, _CONV_PADS, _CONV_STRIDES, _CONV_DILATIONS)]
    slicing = list(crop.inputs[1:5]) + [None] * (5 - len(crop.inputs))
    if params[1] is None or not (_const(slicing[1]) and _const(slicing[2])) \
            or not all(o is None or _const(o) for o in params + [slicing[0], slicing[3]]):
        return False
    if _ints(params[0], [0]) != [0]:  # auto_pad SAME / VALID: the driver resolves those pads itself
        return False
    pads = [int(p) for p in np.asarray(rewrite.new_constants.get(_CONV_PADS, params[1].value)).reshape(-1)]
    strides, dilations = _ints(params[2], [1, 1]), _ints(params[3], [1, 1])
    in_dims, out_dims = conv.inputs[0].type.dims, rewrite.output.type.dims
    kernel = conv.inputs[_CONV_FILTER].type.dims[2:]
    if len(pads) != 4 or len(in_dims) != 4 or len(out_dims) != 4 or not _known(in_dims[2:]) \
            or not _known(out_dims[2:]) or not _known(kernel):
        return False
    starts, ends = _ints(slicing[1], []), _ints(slicing[2], [])
    axes = _ints(slicing[0], list(range(len(starts))))
    steps = _ints(slicing[3], [1] * len(starts))
    axes = [a + 4 if a < 0 else a for a in axes]
    if not (len(axes) == len(starts) == len(ends) == len(steps)) or len(set(axes)) != len(axes) \
            or any(a not in (2, 3) for a in axes) or any(s != 1 for s in steps):
        return False
    new_pads = list(pads)
    for axis, start, end in zip(axes, starts, ends):
        begin, stop, _ = slice(start, end).indices(out_dims[axis])  # NNAdapter's SLICE: Python slice rules
        size, k = stop - begin, axis - 2
        stride, extent = strides[k], (kernel[k] - 1) * dilations[k] + 1
        top = pads[2 * k] - begin * stride
        bottom = max(0, (size - 1) * stride + extent - in_dims[axis] - top)
        if size <= 0 or top < 0 or (in_dims[axis] + top + bottom - extent) // stride + 1 != size:
            return False  # windows the input's own rows cannot reach, or more windows than kept
        new_pads[2 * k], new_pads[2 * k + 1] = top, bottom
    rewrite.new_constants[_CONV_PADS] = np.array(new_pads, np.int32)
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
            elif user.type == T.SLICE and op.type == T.CONV_2D and _fold_crop(rewrite, user):
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
