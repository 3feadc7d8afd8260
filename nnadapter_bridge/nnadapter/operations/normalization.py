"""BATCH_NORMALIZATION, GROUP_NORMALIZATION, INSTANCE_NORMALIZATION, LAYER_NORMALIZATION,
LP_NORMALIZATION and LRN: signatures, shape inference and numpy references.

Channels are axis 1 (NCHW). The references compute in float32 (float64 for a float64 input, whose
parameters Paddle also holds in float64); mean and variance are reduced in that precision too, with the
standardized values written in place. GROUP_NORMALIZATION takes Paddle's one-pass variance E[x^2] - E[x]^2
(checked against Paddle 3.3.1: its instance_norm and layer_norm use the two-pass form, its group_norm not).

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`). Imports only `registry`, `common`,
the standard's codes and types and `errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    as_compute_float,
    compute_dtype,
    const_int,
    known,
    normalize_axis,
    param_float,
    param_int,
    same_as_input,
)
from nnadapter_bridge.nnadapter.operations.registry import FLOATS, FLOATS_Q8, INT32, Slot, operation, reference


# -- signatures and shape inference ------------------------------------------------------------------
def _check_channels(op, indices: Sequence[int]) -> None:
    """Per-channel parameters hold C values (C = input dim 1)."""
    if op.inputs[0].type.rank < 2:
        raise OperationError(f"{op.type.name}: input must be [N, C, ...], got {op.inputs[0].type.describe()}")
    c = op.inputs[0].type.dims[1]
    for i in indices:
        dims = op.inputs[i].type.dims
        if known(c) and len(dims) == 1 and known(dims[0]) and dims[0] != c:
            raise OperationError(f"{op.type.name}: input {i} ({op.inputs[i].label()}) has {dims[0]} values, "
                                 f"the input has {c} channels")


@operation(T.BATCH_NORMALIZATION,
           inputs=[Slot("input", FLOATS_Q8), Slot("scale", FLOATS), Slot("bias", FLOATS), Slot("mean", FLOATS),
                   Slot("variance", FLOATS), Slot("epsilon", FLOATS, optional=True)],
           outputs=[Slot("output")])
def prepare_batch_normalization(op):
    """(x - mean) / sqrt(variance + epsilon) * scale + bias, per channel (axis 1)."""
    _check_channels(op, (1, 2, 3, 4))
    return [same_as_input(op)]


@operation(T.GROUP_NORMALIZATION,
           inputs=[Slot("input", FLOATS_Q8), Slot("scale", FLOATS), Slot("bias", FLOATS),
                   Slot("epsilon", FLOATS, optional=True),
                   Slot("groups", INT32)],
           outputs=[Slot("output")])
def prepare_group_normalization(op):
    """Normalize each of `groups` channel groups of every sample, then the per-channel affine."""
    _check_channels(op, (1, 2))
    groups = const_int(op, 4)
    c = op.inputs[0].type.dims[1]
    if groups is not None and (groups <= 0 or (known(c) and c % groups)):
        raise OperationError(f"{op.type.name}: groups {groups} must be positive and divide the {c} channels")
    return [same_as_input(op)]


@operation(T.INSTANCE_NORMALIZATION,
           inputs=[Slot("input", FLOATS_Q8), Slot("scale", FLOATS), Slot("bias", FLOATS),
                   Slot("epsilon", FLOATS, optional=True)],
           outputs=[Slot("output")])
def prepare_instance_normalization(op):
    """Normalize every (sample, channel) plane, then the per-channel affine."""
    _check_channels(op, (1, 2))
    return [same_as_input(op)]


@operation(T.LAYER_NORMALIZATION,
           inputs=[Slot("input", FLOATS_Q8), Slot("scale", FLOATS), Slot("bias", FLOATS),
                   Slot("begin_norm_axis", INT32),
                   Slot("epsilon", FLOATS, optional=True)],
           outputs=[Slot("output")])
def prepare_layer_normalization(op):
    """Normalize over axes begin_norm_axis..R-1; scale and bias cover those axes (any shape of that size)."""
    rank = op.inputs[0].type.rank
    axis = const_int(op, 3)
    if axis is not None:
        axis = normalize_axis(axis, rank, op, "begin_norm_axis")
        dims = op.inputs[0].type.dims[axis:]
        if all(known(d) for d in dims):
            size = int(np.prod(dims))
            for i in (1, 2):
                t = op.inputs[i].type
                if not t.has_unknown_dims and t.numel() != size:
                    raise OperationError(f"{op.type.name}: input {i} ({op.inputs[i].label()}) has {t.numel()} "
                                         f"values, the normalized axes {list(dims)} hold {size}")
    return [same_as_input(op)]


@operation(T.LP_NORMALIZATION,
           inputs=[Slot("input", FLOATS_Q8), Slot("axis", INT32, optional=True), Slot("p", INT32, optional=True),
                   Slot("epsilon", FLOATS, optional=True)],
           outputs=[Slot("output")])
def prepare_lp_normalization(op):
    """p=1: x / (sum|x| + eps); p=2: x / (sqrt(sum x^2) + eps), along axis."""
    normalize_axis(const_int(op, 1, 1), op.inputs[0].type.rank, op)
    p = const_int(op, 2, 2)
    if p not in (1, 2):
        raise OperationError(f"{op.type.name}: p must be 1 or 2, got {p}")
    return [same_as_input(op)]


@operation(T.LRN,
           inputs=[Slot("input", FLOATS), Slot("size", INT32, optional=True), Slot("bias", FLOATS, optional=True),
                   Slot("alpha", FLOATS, optional=True), Slot("beta", FLOATS, optional=True)],
           outputs=[Slot("output")])
def prepare_lrn(op):
    """x / (bias + alpha * sum of x^2 over `size` neighbouring channels)^beta (AlexNet's form)."""
    if op.inputs[0].type.rank < 2:
        raise OperationError(f"{op.type.name}: input must be [N, C, ...], got {op.inputs[0].type.describe()}")
    size = const_int(op, 1, 5)
    if size <= 0:
        raise OperationError(f"{op.type.name}: size must be positive, got {size}")
    return [same_as_input(op)]


# -- references ------------------------------------------------------------------------------------------
def _channel_shape(x: np.ndarray) -> tuple:
    return (-1,) + (1,) * (x.ndim - 2)


def _floats(arrays) -> list:
    """The arrays in their compute precision (float64 when x is, else float32)."""
    ft = compute_dtype(arrays[0])
    return [None if a is None else as_compute_float(a, ft) for a in arrays]


def _standardize(v: np.ndarray, epsilon: float) -> np.ndarray:
    """(v - mean) / sqrt(var + eps) over the last axis, in v's (compute) precision."""
    ft = v.dtype.type
    mean = v.mean(axis=-1, keepdims=True, dtype=ft)
    centered = v - mean
    var = np.mean(np.square(centered), axis=-1, keepdims=True, dtype=ft)
    centered /= np.sqrt(var + ft(epsilon))
    return centered


@reference(T.BATCH_NORMALIZATION)
def batch_normalization(op, inputs):
    x, scale, bias, mean, var = _floats(inputs[:5])
    eps = x.dtype.type(param_float(inputs[5] if len(inputs) > 5 else None, 1e-5))
    # Fold into one multiply-add per element: x * a + b.
    a = scale / np.sqrt(var + eps)
    b = bias - mean * a
    out = x * a.reshape(_channel_shape(x))
    out += b.reshape(_channel_shape(x))
    return [out]


def _standardize_one_pass(v: np.ndarray, epsilon: float) -> np.ndarray:
    """Paddle's group_norm statistics over the last axis, in v's (compute) precision: sequential sums of x and
    x * x, var = max(E[x^2] - E[x]^2, 0) (NaN kept), then (x - mean) * (1 / sqrt(var + eps)). An inf or a
    square overflowing (1e300 in float64) makes the whole group NaN, as in Paddle."""
    ft = v.dtype.type
    count = ft(v.shape[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        # cumsum adds in order, in v's dtype (np.sum would add pairwise)
        total = (
            np.cumsum(v, axis=-1, dtype=v.dtype)[..., -1:] if v.shape[-1] else np.zeros(v.shape[:-1] + (1,), v.dtype)
        )
        squares = np.cumsum(v * v, axis=-1, dtype=v.dtype)[..., -1:] if v.shape[-1] else total
        mean = total / count
        var = squares / count - mean * mean
        var = np.where(var < 0, ft(0), var)
        inv = ft(1) / np.sqrt(var + ft(epsilon))
        return (v - mean) * inv


@reference(T.GROUP_NORMALIZATION)
def group_normalization(op, inputs):
    x, scale, bias = _floats(inputs[:3])
    eps = param_float(inputs[3], 1e-5)
    groups = param_int(inputs[4])
    n = x.shape[0]
    out = _standardize_one_pass(x.reshape(n, groups, -1), eps).reshape(x.shape)
    out *= scale.reshape(_channel_shape(x))
    out += bias.reshape(_channel_shape(x))
    return [out]


@reference(T.INSTANCE_NORMALIZATION)
def instance_normalization(op, inputs):
    x, scale, bias = _floats(inputs[:3])
    eps = param_float(inputs[3] if len(inputs) > 3 else None, 1e-5)
    out = _standardize(x.reshape(x.shape[0], x.shape[1], -1), eps).reshape(x.shape)
    out *= scale.reshape(_channel_shape(x))
    out += bias.reshape(_channel_shape(x))
    return [out]


@reference(T.LAYER_NORMALIZATION)
def layer_normalization(op, inputs):
    x, scale, bias = _floats(inputs[:3])
    axis = param_int(inputs[3])
    axis = axis + x.ndim if axis < 0 else axis
    eps = param_float(inputs[4] if len(inputs) > 4 else None, 1e-5)
    tail = x.shape[axis:]
    out = _standardize(x.reshape(x.shape[:axis] + (-1,)), eps).reshape(x.shape)
    out *= scale.reshape(tail)
    out += bias.reshape(tail)
    return [out]


@reference(T.LP_NORMALIZATION)
def lp_normalization(op, inputs):
    x = as_compute_float(inputs[0])
    ft = x.dtype.type
    axis = param_int(inputs[1] if len(inputs) > 1 else None, 1)
    p = param_int(inputs[2] if len(inputs) > 2 else None, 2)
    eps = ft(param_float(inputs[3] if len(inputs) > 3 else None, 1e-5))
    if p == 1:
        norm = np.abs(x).sum(axis=axis, keepdims=True, dtype=ft)
    else:
        norm = np.sqrt(np.square(x).sum(axis=axis, keepdims=True, dtype=ft))
    return [x / (norm + eps)]


@reference(T.LRN)
def lrn(op, inputs):
    x = as_compute_float(inputs[0])
    ft = x.dtype.type
    size = param_int(inputs[1] if len(inputs) > 1 else None, 5)
    bias = ft(param_float(inputs[2] if len(inputs) > 2 else None, 1.0))
    alpha = ft(param_float(inputs[3] if len(inputs) > 3 else None, 1e-4))
    beta = ft(param_float(inputs[4] if len(inputs) > 4 else None, 0.75))
    # Channel window [c - (size-1)//2, c + size//2], zeros beyond the edges (Paddle's lrn op).
    before = (size - 1) // 2
    after = size - 1 - before
    sq = np.square(x)
    widths = [(0, 0)] * x.ndim
    widths[1] = (before, after)
    padded = np.pad(sq, widths)
    acc = np.zeros_like(x)
    channels = x.shape[1]
    for k in range(size):
        acc += padded[:, k:k + channels]
    return [x / np.power(bias + alpha * acc, beta)]
