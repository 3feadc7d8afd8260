"""Model fusions a driver applies before it builds a program (builtin_device and google_xnnpack; Paddle Lite's
builtin device does the same, its NNAdapter optimizer passes):

* CONV_2D followed by BATCH_NORMALIZATION with constant statistics -> one CONV_2D with folded
  filter and bias (the batch norm is a per-output-channel affine map);
* CONV_2D / FULLY_CONNECTED followed by RELU or RELU6 -> the fuse code of the first operation;
* CONV_2D followed by a SLICE (step 1) of its rows and columns -> one CONV_2D computing only those windows, its
  pads reduced (Paddle's EfficientNet writes TensorFlow's SAME padding as symmetric pads and a crop of the first
  row and column: the crop and the extra row of windows cost a copy each, and the batch norm after the crop could
  not fold).

`scalar_affine_as_depthwise_conv` (microsoft_onnxruntime) writes a MUL by a one-element constant, maybe followed
by an ADD of one, after an activation on a 4-D tensor (PP-HGNetV2's and PP-LCNetV3's learnable affine blocks,
`scale * act(x) + bias`) as one depthwise 1x1 CONV_2D (filter = scale, bias = bias per channel). onnxruntime
keeps a convolution in its blocked NCHWc layout, where a Mul or Add by a scalar leaves it: a reorder out and one
back around each block (PP-HGNetV2: 29 + 35 reorders, 12% of its time at one thread). The convolution computes
`scale * x + bias` with one rounding where Paddle rounds twice (at most an ulp apart).

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
    """The new inputs and final output of one fused operation (of `type`, the operation's own by default)."""

    def __init__(self, op: Operation, fuse_index: int, type: T | None = None):
        self.op = op
        self.type = op.type if type is None else type
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


# The activations after which a learnable affine block comes; onnxruntime folds a MUL or ADD by a constant into
# the CONV_2D, FULLY_CONNECTED or BATCH_NORMALIZATION before it by itself (ConvMulFusion, ConvAddFusion).
_ACTIVATIONS = frozenset({T.RELU, T.RELU6, T.HARD_SWISH, T.HARD_SIGMOID, T.SIGMOID, T.SWISH, T.LEAKY_RELU, T.PRELU,
                          T.GELU, T.TANH})
_BINARY_FUSE = 2  # ADD / MUL: input0, input1, fuse_code


def _one_element(operand: Operand | None) -> float | None:
    """The value of a one-element FLOAT32 constant, else None."""
    if operand is None or not operand.is_constant or operand.type.precision != Precision.FLOAT32:
        return None
    value = np.asarray(operand.value)
    return float(value.reshape(-1)[0]) if value.size == 1 else None


def _scalar_operand(op: Operation) -> tuple | None:
    """(the 4-D operand, the one-element constant's value) of an ADD or MUL whose output has that operand's shape."""
    if op.type not in (T.ADD, T.MUL) or len(op.inputs) < 2 or not _float32(op.outputs[0]):
        return None
    for k in (0, 1):
        value, x = _one_element(op.inputs[1 - k]), op.inputs[k]
        if value is not None and x is not None and not x.is_constant and _float32(x) and len(x.type.dims) == 4 \
                and tuple(op.outputs[0].type.dims) == tuple(x.type.dims) and x.type.dims[1] > 0:
            return x, value
    return None


def _after_an_activation(operand: Operand, producers: dict) -> bool:
    producer = producers.get(operand.index)
    if producer is None:
        return False
    if producer.type in _ACTIVATIONS:
        return True
    fuse_index = {T.CONV_2D: _CONV_FUSE, T.FULLY_CONNECTED: _FC_FUSE, T.ADD: _BINARY_FUSE, T.MUL: _BINARY_FUSE,
                  T.SUB: _BINARY_FUSE, T.DIV: _BINARY_FUSE}.get(producer.type)
    try:
        return fuse_index is not None and _fuse_code(producer, fuse_index) != FuseCode.FUSED_NONE
    except (TypeError, ValueError):  # a fuse code computed at run time: not this pattern
        return False


def scalar_affine_as_depthwise_conv(model: Model) -> Model:
    """A new Model with each learnable affine block after an activation written as a depthwise 1x1 CONV_2D (module
    docstring); the model itself when it has none."""
    producers, consumers = model.producers(), model.consumers()
    model_outputs = {o.index for o in model.output_operands}
    rewrites: dict[int, _Rewrite] = {}
    absorbed: set = set()
    for op in model.topological_operations():
        found = _scalar_operand(op) if id(op) not in absorbed else None
        if found is None or not _after_an_activation(found[0], producers):
            continue
        x, value = found
        scale, bias = (value, 0.0) if op.type == T.MUL else (1.0, value)
        rewrite = _Rewrite(op, _CONV_FUSE, T.CONV_2D)
        fuse = _fuse_code(op, _BINARY_FUSE)
        users = consumers.get(op.outputs[0].index, [])
        if op.type == T.MUL and fuse == FuseCode.FUSED_NONE and len(users) == 1 \
                and op.outputs[0].index not in model_outputs:
            then = _scalar_operand(users[0])
            if then is not None and users[0].type == T.ADD and then[0] is op.outputs[0]:
                bias, fuse = then[1], _fuse_code(users[0], _BINARY_FUSE)
                absorbed.add(id(users[0]))
                rewrite.output = users[0].outputs[0]
        channels = int(x.type.dims[1])
        rewrite.inputs = [x] + [None] * 8
        rewrite.new_constants = {
            1: np.full((channels, 1, 1, 1), scale, np.float32), 2: np.full((channels,), bias, np.float32),
            3: np.array([0], np.int32), 4: np.zeros(4, np.int32), 5: np.ones(2, np.int32),
            6: np.array([channels], np.int32), 7: np.ones(2, np.int32), 8: np.array([int(fuse)], np.int32)}
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
        new_op = Operation(op.type if rewrite is None else rewrite.type, inputs, outputs, len(fused.operations))
        fused.operations.append(new_op)
    fused.input_operands = [carry(o) for o in model.input_operands]
    fused.output_operands = [carry(o) for o in model.output_operands]
    fused.finished = True
    return fused
