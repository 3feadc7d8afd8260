"""Signatures and shape inference: the neural-network layer operations.

Owns CONV_2D, CONV_2D_TRANSPOSE, the four 2-D poolings, BATCH/GROUP/INSTANCE/LAYER/LP normalization, LRN,
FULLY_CONNECTED, MAT_MUL, SOFTMAX, LOG_SOFTMAX, PAD, RESIZE_NEAREST and RESIZE_LINEAR, plus the window
arithmetic (output sizes, SAME padding) that builtin_device's kernels reuse so both agree by construction.

Layout is NCHW throughout. Spatial parameters (pads, strides, kernel shapes, ...) are read from constant
operands; when one is computed at run time the affected output dims become NNADAPTER_UNKNOWN.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, AutoPad, OperationType as T, PadMode, Precision
from nnadapter_bridge.nnadapter.operations.common import (
    broadcast_dims,
    const_array,
    const_bool,
    const_int,
    const_ints,
    known,
    map_shapes,
    normalize_axis,
    result_type,
    same_as_input,
)
from nnadapter_bridge.nnadapter.operations.registry import (
    BOOL,
    F32,
    F32_Q8,
    INT32,
    INT32_64,
    Slot,
    operation,
)

# Filters and weights may be quantized per layer or per output channel; biases then are int32 with
# scale = input_scale * filter_scale (per channel when the filter is).
_FILTER = F32_Q8 | {Precision.QUANT_INT8_SYMM_PER_CHANNEL}
_BIAS = F32 | {Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL}
_PAD_INPUT = F32_Q8 | {Precision.INT32, Precision.INT64}


# -- window arithmetic shared with the kernels ---------------------------------------------------------
def same_pads(in_size: int, kernel: int, stride: int) -> tuple:
    """AUTO_PAD_SAME: output ceil(in/stride), the padding split with the odd element after."""
    out = -(-in_size // stride)
    total = max((out - 1) * stride + kernel - in_size, 0)
    return total // 2, total - total // 2


def resolve_window(auto_pad: int, pads: Optional[Sequence[int]], in_hw: Sequence[int],
                   kernel_hw: Sequence[int], strides: Sequence[int],
                   dilations: Sequence[int] = (1, 1)) -> tuple:
    """The explicit (top, bottom, left, right) pads and the dilations an auto_pad mode amounts to.

    SAME also resets the dilations to 1, as Paddle's UpdatePaddingAndDilation does (the converted
    models were trained with that meaning)."""
    mode = AutoPad(int(auto_pad))
    if mode == AutoPad.AUTO_PAD_VALID:
        return (0, 0, 0, 0), tuple(dilations)
    if mode == AutoPad.AUTO_PAD_SAME:
        top, bottom = same_pads(in_hw[0], kernel_hw[0], strides[0])
        left, right = same_pads(in_hw[1], kernel_hw[1], strides[1])
        return (top, bottom, left, right), (1, 1)
    if pads is None:
        return (0, 0, 0, 0), tuple(dilations)
    return tuple(int(p) for p in pads), tuple(dilations)


def window_out_size(in_size: int, kernel: int, stride: int, pad_before: int, pad_after: int,
                    dilation: int = 1, ceil_mode: bool = False) -> int:
    """Output length of a sliding window (convolution and pooling), floor or ceil rounding."""
    span = in_size + pad_before + pad_after - (dilation * (kernel - 1) + 1)
    if ceil_mode:
        return -(-span // stride) + 1
    return span // stride + 1


def transpose_out_size(in_size: int, kernel: int, stride: int, pad_before: int, pad_after: int,
                       dilation: int = 1, output_padding: int = 0) -> int:
    return (in_size - 1) * stride - pad_before - pad_after + dilation * (kernel - 1) + 1 + output_padding


def _pair(values: Optional[list], what: str, op) -> Optional[list]:
    if values is not None and len(values) != 2:
        raise OperationError(f"{op.type.name}: {what} must hold 2 values (height, width), got {values}")
    return values


def _check_4d(op, i: int = 0, what: str = "input") -> None:
    rank = op.inputs[i].type.rank
    if rank != 4:
        raise OperationError(f"{op.type.name}: {what} must be 4-D NCHW, got rank {rank} "
                             f"({op.inputs[i].type.describe()})")


def _spatial_prepare(op, kernel_hw, strides, dilations, pads_index, ceil_mode=False, channels=None,
                     transpose=False, output_padding=(0, 0), output_shape=None):
    """Output type of a 2-D window operation on input 0; unknown where a parameter is not constant."""
    auto_pad = const_int(op, pads_index - 1, int(AutoPad.AUTO_PAD_NONE))
    pads = const_ints(op, pads_index)
    if pads is not None and len(pads) != 4:
        raise OperationError(f"{op.type.name}: pads must hold 4 values (top, bottom, left, right), got {pads}")
    if auto_pad is None or kernel_hw is None or strides is None or dilations is None:
        resolvable = False
    elif op.inputs[pads_index] is not None and pads is None and auto_pad == AutoPad.AUTO_PAD_NONE:
        resolvable = False  # explicit pads computed at run time
    else:
        resolvable = True
    if strides is not None and any(s <= 0 for s in strides):
        raise OperationError(f"{op.type.name}: strides must be positive, got {strides}")

    def dims_fn(dims):
        n, c, h, w = dims
        out_c = c if channels is None else channels
        if transpose and output_shape is not None:
            return (n, out_c, int(output_shape[0]), int(output_shape[1]))
        if not resolvable:
            return (n, out_c, UNKNOWN, UNKNOWN)
        out = []
        for axis in (0, 1):
            size = (h, w)[axis]
            if not known(size):
                out.append(UNKNOWN)
                continue
            (top, bottom, left, right), dil = resolve_window(auto_pad, pads, (h if known(h) else 1, w if known(w) else 1),
                                                              kernel_hw, strides, dilations)
            before, after = ((top, bottom), (left, right))[axis]
            if transpose:
                value = transpose_out_size(size, kernel_hw[axis], strides[axis], before, after, dil[axis],
                                           output_padding[axis])
            else:
                value = window_out_size(size, kernel_hw[axis], strides[axis], before, after, dil[axis], ceil_mode)
            if value <= 0:
                raise OperationError(f"{op.type.name}: the window does not fit: input {list(dims)}, kernel "
                                     f"{list(kernel_hw)}, strides {list(strides)}, pads {pads} give size {value}")
            out.append(value)
        return (n, out_c, out[0], out[1])

    return map_shapes(op.inputs[0].type, dims_fn)


def _indices_precision(op, i: int) -> Precision:
    code = const_int(op, i, int(Precision.INT32))
    if code not in (Precision.INT32, Precision.INT64):
        raise OperationError(f"{op.type.name}: return_indices_dtype must be NNADAPTER_INT32 ({int(Precision.INT32)}) "
                             f"or NNADAPTER_INT64 ({int(Precision.INT64)}), got {code}")
    return Precision(code)


# -- convolution -----------------------------------------------------------------------------------------
_CONV_INPUTS = [
    Slot("input", F32_Q8), Slot("filter", _FILTER), Slot("bias", _BIAS, optional=True), Slot("auto_pad", INT32),
    Slot("pads", INT32, optional=True), Slot("strides", INT32), Slot("group", INT32), Slot("dilations", INT32),
]


@operation(T.CONV_2D, inputs=_CONV_INPUTS + [Slot("fuse_code", INT32, optional=True)], outputs=[Slot("output")])
def prepare_conv_2d(op):
    """2-D convolution; filter [C_out, C_in/group, kh, kw] (depthwise: group = C_in, C_out = k * C_in)."""
    _check_4d(op)
    _check_4d(op, 1, "filter")
    filt = op.inputs[1].type.dims
    group = const_int(op, 6, 1)
    c_in = op.inputs[0].type.dims[1]
    if group is not None and group <= 0:
        raise OperationError(f"{op.type.name}: group must be positive, got {group}")
    if group is not None and known(c_in) and known(filt[1]) and filt[1] * group != c_in:
        raise OperationError(f"{op.type.name}: filter {list(filt)} with group {group} needs {filt[1] * group} "
                             f"input channels, input has {c_in}")
    if group is not None and known(filt[0]) and filt[0] % group:
        raise OperationError(f"{op.type.name}: {filt[0]} output channels are not divisible by group {group}")
    kernel = list(filt[2:]) if all(known(d) for d in filt[2:]) else None
    return [_spatial_prepare(op, kernel, _pair(const_ints(op, 5), "strides", op),
                             _pair(const_ints(op, 7), "dilations", op), 4, channels=filt[0])]


@operation(T.CONV_2D_TRANSPOSE,
           inputs=_CONV_INPUTS + [Slot("output_padding", INT32, optional=True),
                                  Slot("output_shape", INT32_64, optional=True),
                                  Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_conv_2d_transpose(op):
    """Transposed convolution. The filter is Paddle's [C_in, C_out/group, kh, kw] (what conv2d_transpose
    stores and what Paddle Lite passes through); C_out = filter[1] * group."""
    _check_4d(op)
    _check_4d(op, 1, "filter")
    filt = op.inputs[1].type.dims
    group = const_int(op, 6, 1)
    c_in = op.inputs[0].type.dims[1]
    if group is not None and group <= 0:
        raise OperationError(f"{op.type.name}: group must be positive, got {group}")
    if known(c_in) and known(filt[0]) and filt[0] != c_in:
        raise OperationError(f"{op.type.name}: filter {list(filt)} expects {filt[0]} input channels "
                             f"(layout [C_in, C_out/group, kh, kw]), input has {c_in}")
    channels = filt[1] * group if (group is not None and known(filt[1])) else UNKNOWN
    output_padding = _pair(const_ints(op, 8), "output_padding", op) or [0, 0]
    output_shape = None
    if len(op.inputs) > 9 and op.inputs[9] is not None:
        output_shape = _pair(const_ints(op, 9), "output_shape", op)
        if output_shape is None:
            # Computed at run time: only the spatial dims are unknown.
            return [map_shapes(op.inputs[0].type, lambda d: (d[0], channels, UNKNOWN, UNKNOWN))]
    kernel = list(filt[2:]) if all(known(d) for d in filt[2:]) else None
    return [_spatial_prepare(op, kernel, _pair(const_ints(op, 5), "strides", op),
                             _pair(const_ints(op, 7), "dilations", op), 4, channels=channels, transpose=True,
                             output_padding=output_padding, output_shape=output_shape)]


# -- pooling -----------------------------------------------------------------------------------------------
_POOL_HEAD = [Slot("input", F32_Q8), Slot("auto_pad", INT32), Slot("pads", INT32, optional=True),
              Slot("kernel_shape", INT32), Slot("strides", INT32), Slot("ceil_mode", BOOL, optional=True)]


@operation(T.AVERAGE_POOL_2D,
           inputs=_POOL_HEAD + [Slot("count_include_pad", BOOL, optional=True), Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_average_pool_2d(op):
    """2-D average pooling; count_include_pad counts the explicit pads (never the ceil_mode overhang)."""
    _check_4d(op)
    return [_spatial_prepare(op, _pair(const_ints(op, 3), "kernel_shape", op), _pair(const_ints(op, 4), "strides", op),
                             [1, 1], 2, ceil_mode=const_bool(op, 5, False))]


@operation(T.MAX_POOL_2D,
           inputs=_POOL_HEAD + [Slot("return_indices", BOOL, optional=True),
                                Slot("return_indices_dtype", INT32, optional=True),
                                Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output"), Slot("indices", optional=True)])
def prepare_max_pool_2d(op):
    """2-D max pooling; indices (when asked for) are flat positions h * W_in + w within each input plane."""
    _check_4d(op)
    out = _spatial_prepare(op, _pair(const_ints(op, 3), "kernel_shape", op), _pair(const_ints(op, 4), "strides", op),
                           [1, 1], 2, ceil_mode=const_bool(op, 5, False))
    return [out] + _indices_types(op, out, 7)


def _indices_types(op, out, dtype_index) -> list:
    if len(op.outputs) < 2:
        return []
    if op.outputs[1] is None:
        return [None]
    return [result_type(out, precision=_indices_precision(op, dtype_index))]


def _adaptive_prepare(op):
    _check_4d(op)
    size = _pair(const_ints(op, 1), "output_shape", op)
    if size is not None and any(s <= 0 for s in size):
        raise OperationError(f"{op.type.name}: output_shape must be positive, got {size}")
    hw = tuple(size) if size is not None else (UNKNOWN, UNKNOWN)
    return map_shapes(op.inputs[0].type, lambda d: (d[0], d[1]) + hw)


@operation(T.ADAPTIVE_AVERAGE_POOL_2D, inputs=[Slot("input", F32_Q8), Slot("output_shape", INT32_64)],
           outputs=[Slot("output")])
def prepare_adaptive_average_pool_2d(op):
    """Output cell i averages input rows floor(i*H/H_out) .. ceil((i+1)*H/H_out) (same for columns)."""
    return [_adaptive_prepare(op)]


@operation(T.ADAPTIVE_MAX_POOL_2D,
           inputs=[Slot("input", F32_Q8), Slot("output_shape", INT32_64), Slot("return_indices", BOOL, optional=True),
                   Slot("return_indices_dtype", INT32, optional=True)],
           outputs=[Slot("output"), Slot("indices", optional=True)])
def prepare_adaptive_max_pool_2d(op):
    """Adaptive max pooling over the same windows as ADAPTIVE_AVERAGE_POOL_2D; optional flat indices."""
    out = _adaptive_prepare(op)
    return [out] + _indices_types(op, out, 3)


# -- normalization -------------------------------------------------------------------------------------------
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
           inputs=[Slot("input", F32_Q8), Slot("scale", F32), Slot("bias", F32), Slot("mean", F32),
                   Slot("variance", F32), Slot("epsilon", F32, optional=True)],
           outputs=[Slot("output")])
def prepare_batch_normalization(op):
    """(x - mean) / sqrt(variance + epsilon) * scale + bias, per channel (axis 1)."""
    _check_channels(op, (1, 2, 3, 4))
    return [same_as_input(op)]


@operation(T.GROUP_NORMALIZATION,
           inputs=[Slot("input", F32_Q8), Slot("scale", F32), Slot("bias", F32), Slot("epsilon", F32, optional=True),
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
           inputs=[Slot("input", F32_Q8), Slot("scale", F32), Slot("bias", F32), Slot("epsilon", F32, optional=True)],
           outputs=[Slot("output")])
def prepare_instance_normalization(op):
    """Normalize every (sample, channel) plane, then the per-channel affine."""
    _check_channels(op, (1, 2))
    return [same_as_input(op)]


@operation(T.LAYER_NORMALIZATION,
           inputs=[Slot("input", F32_Q8), Slot("scale", F32), Slot("bias", F32), Slot("begin_norm_axis", INT32),
                   Slot("epsilon", F32, optional=True)],
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
           inputs=[Slot("input", F32_Q8), Slot("axis", INT32, optional=True), Slot("p", INT32, optional=True),
                   Slot("epsilon", F32, optional=True)],
           outputs=[Slot("output")])
def prepare_lp_normalization(op):
    """p=1: x / (sum|x| + eps); p=2: x / (sqrt(sum x^2) + eps), along axis."""
    normalize_axis(const_int(op, 1, 1), op.inputs[0].type.rank, op)
    p = const_int(op, 2, 2)
    if p not in (1, 2):
        raise OperationError(f"{op.type.name}: p must be 1 or 2, got {p}")
    return [same_as_input(op)]


@operation(T.LRN,
           inputs=[Slot("input", F32), Slot("size", INT32, optional=True), Slot("bias", F32, optional=True),
                   Slot("alpha", F32, optional=True), Slot("beta", F32, optional=True)],
           outputs=[Slot("output")])
def prepare_lrn(op):
    """x / (bias + alpha * sum of x^2 over `size` neighbouring channels)^beta (AlexNet's form)."""
    if op.inputs[0].type.rank < 2:
        raise OperationError(f"{op.type.name}: input must be [N, C, ...], got {op.inputs[0].type.describe()}")
    size = const_int(op, 1, 5)
    if size <= 0:
        raise OperationError(f"{op.type.name}: size must be positive, got {size}")
    return [same_as_input(op)]


# -- matrix products -----------------------------------------------------------------------------------------
@operation(T.FULLY_CONNECTED,
           inputs=[Slot("input", F32_Q8), Slot("weight", _FILTER), Slot("bias", _BIAS, optional=True),
                   Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_fully_connected(op):
    """input flattened to [batch, input_size] times weight' [input_size, num_units] plus bias."""
    w = op.inputs[1].type.dims
    if len(w) != 2:
        raise OperationError(f"{op.type.name}: weight must be [num_units, input_size], got {list(w)}")
    num_units, input_size = w

    def dims_fn(dims):
        if len(dims) < 2:
            raise OperationError(f"{op.type.name}: input must have rank >= 2, got {list(dims)}")
        if all(known(d) for d in dims) and known(input_size):
            total = int(np.prod(dims))
            if total % input_size:
                raise OperationError(f"{op.type.name}: input {list(dims)} does not flatten to rows of {input_size}")
            return (total // input_size, num_units)
        if len(dims) == 2 and known(dims[1]) and dims[1] == input_size:
            return (dims[0], num_units)
        return (UNKNOWN, num_units)

    return [map_shapes(op.inputs[0].type, dims_fn)]


def matmul_dims(x: Sequence[int], y: Sequence[int], transpose_x: bool, transpose_y: bool, op=None) -> tuple:
    """numpy.matmul's output dims after the optional transposes of the last two axes (ignored for 1-D)."""
    x, y = list(x), list(y)
    if not x or not y:
        raise OperationError(f"{op.type.name if op else 'MAT_MUL'}: operands must have rank >= 1")
    if len(x) >= 2 and transpose_x:
        x[-2], x[-1] = x[-1], x[-2]
    if len(y) >= 2 and transpose_y:
        y[-2], y[-1] = y[-1], y[-2]
    x_vec, y_vec = len(x) == 1, len(y) == 1
    if x_vec:
        x = [1] + x
    if y_vec:
        y = y + [1]
    k_x, k_y = x[-1], y[-2]
    if known(k_x) and known(k_y) and k_x != k_y:
        raise OperationError(f"{op.type.name if op else 'MAT_MUL'}: inner dims differ: {k_x} vs {k_y} "
                             f"(x {x}, y {y} after transposes)")
    batch = broadcast_dims(x[:-2], y[:-2], op)
    out = list(batch) + [x[-2], y[-1]]
    if y_vec:
        out.pop(-1)
    if x_vec:
        out.pop(-2 if not y_vec else -1)
    return tuple(out)


@operation(T.MAT_MUL,
           inputs=[Slot("x", F32_Q8), Slot("y", F32_Q8), Slot("transpose_x", BOOL, optional=True),
                   Slot("transpose_y", BOOL, optional=True)],
           outputs=[Slot("output")])
def prepare_mat_mul(op):
    """numpy.matmul with optional transposes of the last two axes; batch dims broadcast."""
    tx, ty = const_bool(op, 2, False), const_bool(op, 3, False)
    x, y = op.inputs[0].type, op.inputs[1].type
    dims = matmul_dims(x.dims, y.dims, tx, ty, op)
    dynamic = ()
    if x.dynamic_dims or y.dynamic_dims:
        xs = x.dynamic_dims or (x.dims,) * len(y.dynamic_dims)
        ys = y.dynamic_dims or (y.dims,) * len(x.dynamic_dims)
        dynamic = tuple(matmul_dims(a, b, tx, ty, op) for a, b in zip(xs, ys))
    return [result_type(x, dims, dynamic_dims=dynamic)]


# -- softmax ----------------------------------------------------------------------------------------------------
def _softmax_prepare(op):
    normalize_axis(const_int(op, 1, 1), op.inputs[0].type.rank, op)
    return [same_as_input(op)]


@operation(T.SOFTMAX, inputs=[Slot("input", F32_Q8), Slot("axis", INT32, optional=True)], outputs=[Slot("output")])
def prepare_softmax(op):
    """exp(x) / sum(exp(x)) along axis (default 1)."""
    return _softmax_prepare(op)


@operation(T.LOG_SOFTMAX, inputs=[Slot("input", F32_Q8), Slot("axis", INT32, optional=True)], outputs=[Slot("output")])
def prepare_log_softmax(op):
    """log(softmax(x)) along axis (default 1)."""
    return _softmax_prepare(op)


# -- pad ------------------------------------------------------------------------------------------------------------
@operation(T.PAD,
           inputs=[Slot("input", _PAD_INPUT), Slot("pads", INT32), Slot("mode", INT32),
                   Slot("value", _PAD_INPUT, optional=True)],
           outputs=[Slot("output")])
def prepare_pad(op):
    """Pad (or, for negative amounts, crop) every axis by pads = [x0_begin, x0_end, x1_begin, ...]."""
    mode = const_int(op, 2)
    if mode is not None and mode not in (PadMode.CONSTANT, PadMode.REFLECT, PadMode.REPLICATE, PadMode.EDGE):
        raise OperationError(f"{op.type.name}: mode must be CONSTANT, REFLECT, REPLICATE or EDGE, got {mode}")
    rank = op.inputs[0].type.rank
    pads = const_ints(op, 1)
    if pads is not None and len(pads) != 2 * rank:
        raise OperationError(f"{op.type.name}: pads must hold 2 * rank = {2 * rank} values, got {len(pads)}")

    def dims_fn(dims):
        if pads is None:
            return (UNKNOWN,) * len(dims)
        return tuple(d + pads[2 * i] + pads[2 * i + 1] if known(d) else UNKNOWN for i, d in enumerate(dims))

    return [map_shapes(op.inputs[0].type, dims_fn)]


# -- resize ---------------------------------------------------------------------------------------------------------
def resize_out_size(in_size: int, shape_value, scale_value) -> int:
    """Output length from the shape operand (wins) or the scale; Paddle truncates float32 in * scale."""
    if shape_value is not None:
        return int(shape_value)
    return int(np.float32(in_size) * np.float32(scale_value))


def _resize_prepare(op):
    t = op.inputs[0].type
    if t.rank < 3:
        raise OperationError(f"{op.type.name}: input must be [N, C, (D...,) H, W], got {t.describe()}")
    has_shape = op.inputs[1] is not None
    has_scales = len(op.inputs) > 2 and op.inputs[2] is not None
    if not has_shape and not has_scales:
        raise OperationError(f"{op.type.name}: at least one of shape and scales must be given")
    shape = _pair(const_ints(op, 1), "shape", op) if has_shape else None
    scales_arr = const_array(op, 2) if has_scales else None
    scales = _pair([float(s) for s in np.asarray(scales_arr).reshape(-1)], "scales", op) if scales_arr is not None else None

    def dims_fn(dims):
        head = tuple(dims[:-2])
        if shape is not None:
            return head + tuple(shape)
        if has_shape or scales is None:
            return head + (UNKNOWN, UNKNOWN)
        return head + tuple(resize_out_size(d, None, s) if known(d) else UNKNOWN for d, s in zip(dims[-2:], scales))

    return map_shapes(t, dims_fn)


@operation(T.RESIZE_NEAREST,
           inputs=[Slot("input", F32_Q8), Slot("shape", INT32_64, optional=True), Slot("scales", F32, optional=True),
                   Slot("align_corners", BOOL, optional=True)],
           outputs=[Slot("output")])
def prepare_resize_nearest(op):
    """Nearest-neighbour resize of the last two axes to `shape`, else to floor(in * scales)."""
    return [_resize_prepare(op)]


@operation(T.RESIZE_LINEAR,
           inputs=[Slot("input", F32_Q8), Slot("shape", INT32_64, optional=True), Slot("scales", F32, optional=True),
                   Slot("align_corners", BOOL, optional=True), Slot("align_mode", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_resize_linear(op):
    """Bilinear resize of the last two axes; align_corners, else align_mode 0 (half-pixel) or 1."""
    align_mode = const_int(op, 4, 1)
    if align_mode not in (0, 1):
        raise OperationError(f"{op.type.name}: align_mode must be 0 or 1, got {align_mode}")
    return [_resize_prepare(op)]
