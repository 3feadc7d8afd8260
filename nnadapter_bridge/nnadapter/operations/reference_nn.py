"""Reference semantics (numpy) of the network operations: convolution, transposed convolution, pooling,
normalization, fully connected, matmul, softmax, pad and resize.

These carry whole CNNs, so they stay in float32 and go through BLAS: convolution is im2col built with one
strided copy per kernel tap plus one (batched) matmul for all groups; depthwise convolution accumulates one
multiply-add per tap; pooling reduces tap by tap over strided views. No loop ever runs per pixel or per
channel. Window arithmetic (output sizes, SAME pads) comes from ops_nn so prepare and reference agree.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from nnadapter_bridge.nnadapter.codes import AutoPad, OperationType as T, PadMode
from nnadapter_bridge.nnadapter.operations.ops_nn import (
    resize_out_size,
    resolve_window,
    transpose_out_size,
    window_out_size,
)
from nnadapter_bridge.nnadapter.operations.reference_elementwise import apply_fuse_code
from nnadapter_bridge.nnadapter.operations.registry import reference

_F32 = np.float32


# -- small readers for scalar / list operands ----------------------------------------------------------------
def _int(value, default: Optional[int] = None) -> Optional[int]:
    return default if value is None else int(np.asarray(value).reshape(-1)[0])


def _float(value, default: Optional[float] = None) -> Optional[float]:
    return default if value is None else float(np.asarray(value).reshape(-1)[0])


def _bool(value, default: bool = False) -> bool:
    return default if value is None else bool(np.asarray(value).reshape(-1)[0])


def _ints(value, default=None) -> Optional[list]:
    return default if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def _fuse(x: np.ndarray, fuse_code, in_place: bool = False) -> np.ndarray:
    return x if fuse_code is None else apply_fuse_code(x, fuse_code, in_place)


def _as_f32(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == _F32 else x.astype(_F32)


def _pad_spatial(x: np.ndarray, top: int, bottom: int, left: int, right: int, fill: float = 0.0) -> np.ndarray:
    """x padded on H and W with `fill` (negative bottom/right amounts crop; the ceil_mode overhang is
    expressed as extra bottom/right padding by the callers)."""
    if top == bottom == left == right == 0:
        return x
    n, c, h, w = x.shape
    out = np.full((n, c, h + top + max(bottom, 0), w + left + max(right, 0)), fill, dtype=x.dtype)
    out[:, :, top:top + h, left:left + w] = x
    if bottom < 0 or right < 0:
        out = out[:, :, :out.shape[2] + min(bottom, 0), :out.shape[3] + min(right, 0)]
    return out


def _tap(xp: np.ndarray, i0: int, j0: int, out_h: int, out_w: int, sh: int, sw: int) -> np.ndarray:
    """The strided view of xp read by the kernel tap at padded offset (i0, j0) for every output pixel."""
    return xp[:, :, i0:i0 + (out_h - 1) * sh + 1:sh, j0:j0 + (out_w - 1) * sw + 1:sw]


# -- convolution ----------------------------------------------------------------------------------------------
def conv2d(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray], pads, strides, dilations, group: int) -> np.ndarray:
    """NCHW convolution with explicit (top, bottom, left, right) pads; filter [C_out, C_in/group, kh, kw]."""
    x, w = _as_f32(x), _as_f32(w)
    n, c_in, h, wd = x.shape
    c_out, c_in_g, kh, kw = w.shape
    top, bottom, left, right = pads
    sh, sw = strides
    dh, dw = dilations
    oh = window_out_size(h, kh, sh, top, bottom, dh)
    ow = window_out_size(wd, kw, sw, left, right, dw)
    xp = _pad_spatial(x, top, bottom, left, right)
    if c_in_g == 1 and group == c_in and group > 1:
        out = _depthwise(xp, w, oh, ow, strides, dilations)
    elif kh == kw == 1 and group == 1:
        cols = _tap(xp, 0, 0, oh, ow, sh, sw).reshape(n, c_in, oh * ow)  # a copy only when strided
        out = np.matmul(w.reshape(c_out, c_in), cols)
    else:
        cols = np.empty((n, c_in, kh, kw, oh, ow), dtype=_F32)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, i, j] = _tap(xp, i * dh, j * dw, oh, ow, sh, sw)
        k = c_in_g * kh * kw
        if group == 1:
            out = np.matmul(w.reshape(c_out, k), cols.reshape(n, k, oh * ow))
        else:
            # One batched matmul: [G, C_out/G, K] x [N, G, K, P] -> [N, G, C_out/G, P].
            out = np.matmul(w.reshape(group, c_out // group, k), cols.reshape(n, group, k, oh * ow))
    out = out.reshape(n, c_out, oh, ow)
    if bias is not None:
        out += _as_f32(bias).reshape(c_out, 1, 1)
    return out


def _depthwise(xp: np.ndarray, w: np.ndarray, oh: int, ow: int, strides, dilations) -> np.ndarray:
    """group = C_in, channel multiplier m = C_out / C_in: one broadcast multiply-add per kernel tap."""
    n, c_in = xp.shape[:2]
    c_out, _, kh, kw = w.shape
    mult = c_out // c_in
    sh, sw = strides
    dh, dw = dilations
    coef = w.reshape(c_in, mult, kh, kw)
    out = np.zeros((n, c_in, mult, oh, ow), dtype=_F32)
    scratch = np.empty_like(out)
    for i in range(kh):
        for j in range(kw):
            tap = _tap(xp, i * dh, j * dw, oh, ow, sh, sw)[:, :, None]
            np.multiply(tap, coef[:, :, i, j][:, :, None, None], out=scratch)
            out += scratch
    return out.reshape(n, c_out, oh, ow)


def conv2d_transpose(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray], pads, strides, dilations,
                     group: int, out_hw) -> np.ndarray:
    """Transposed convolution (filter [C_in, C_out/group, kh, kw]): one matmul to the per-tap
    contributions, then col2im as one strided accumulate per tap, cropped to the output window."""
    x, w = _as_f32(x), _as_f32(w)
    n, c_in, h, wd = x.shape
    _, c_out_g, kh, kw = w.shape
    c_in_g = c_in // group
    c_out = c_out_g * group
    top, _, left, _ = pads
    sh, sw = strides
    dh, dw = dilations
    oh, ow = out_hw
    wt = w.reshape(group, c_in_g, c_out_g * kh * kw).transpose(0, 2, 1)
    contrib = np.matmul(wt, x.reshape(n, group, c_in_g, h * wd)).reshape(n, c_out, kh, kw, h, wd)
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, top + oh)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, left + ow)
    buf = np.zeros((n, c_out, full_h, full_w), dtype=_F32)
    for i in range(kh):
        for j in range(kw):
            _tap(buf, i * dh, j * dw, h, wd, sh, sw)[...] += contrib[:, :, i, j]
    out = buf[:, :, top:top + oh, left:left + ow]
    if bias is not None:
        out = out + _as_f32(bias).reshape(c_out, 1, 1)
    return np.ascontiguousarray(out)


def _conv_window(op, inputs, x, kh, kw):
    auto_pad = _int(inputs[3], int(AutoPad.AUTO_PAD_NONE))
    strides = _ints(inputs[5], [1, 1])
    dilations = _ints(inputs[7], [1, 1])
    return resolve_window(auto_pad, _ints(inputs[4]), x.shape[2:], (kh, kw), strides, dilations), strides


@reference(T.CONV_2D)
def conv_2d(op, inputs):
    x, w, bias = inputs[0], inputs[1], inputs[2]
    (pads, dilations), strides = _conv_window(op, inputs, x, w.shape[2], w.shape[3])
    out = conv2d(x, w, bias, pads, strides, dilations, _int(inputs[6], 1))
    return [_fuse(out, inputs[8] if len(inputs) > 8 else None, in_place=True)]  # conv2d's result is fresh


@reference(T.CONV_2D_TRANSPOSE)
def conv_2d_transpose(op, inputs):
    x, w, bias = inputs[0], inputs[1], inputs[2]
    kh, kw = w.shape[2:]
    (pads, dilations), strides = _conv_window(op, inputs, x, kh, kw)
    output_padding = _ints(inputs[8] if len(inputs) > 8 else None, [0, 0])
    output_shape = _ints(inputs[9] if len(inputs) > 9 else None)
    if output_shape is None:
        output_shape = [transpose_out_size(x.shape[2 + a], (kh, kw)[a], strides[a], pads[2 * a], pads[2 * a + 1],
                                           dilations[a], output_padding[a]) for a in (0, 1)]
    out = conv2d_transpose(x, w, bias, pads, strides, dilations, _int(inputs[6], 1), output_shape)
    return [_fuse(out, inputs[10] if len(inputs) > 10 else None)]


# -- pooling ------------------------------------------------------------------------------------------------------
def _pool_geometry(x, inputs, ceil_mode):
    kh, kw = _ints(inputs[3])
    strides = _ints(inputs[4])
    (top, bottom, left, right), _ = resolve_window(_int(inputs[1], 0), _ints(inputs[2]), x.shape[2:], (kh, kw), strides)
    oh = window_out_size(x.shape[2], kh, strides[0], top, bottom, 1, ceil_mode)
    ow = window_out_size(x.shape[3], kw, strides[1], left, right, 1, ceil_mode)
    return (kh, kw), strides, (top, bottom, left, right), (oh, ow)


def _overhang_pads(x, kernel, strides, pads, out_hw):
    """Bottom/right padding that makes every window (ceil_mode ones included) fit in the buffer."""
    top, _, left, _ = pads
    need_h = (out_hw[0] - 1) * strides[0] + kernel[0] - top - x.shape[2]
    need_w = (out_hw[1] - 1) * strides[1] + kernel[1] - left - x.shape[3]
    return top, need_h, left, need_w


def _window_counts(size, kernel, stride, before, after, out, include_pad) -> np.ndarray:
    """Per-output-position element count of a window along one axis (the average's divisor)."""
    start = np.arange(out) * stride - before
    end = start + kernel
    if include_pad:
        return (np.minimum(end, size + after) - start).astype(_F32)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(_F32)


def _windows(xp, kernel, strides, out_hw):
    """[N, C, OH, OW, kh, kw] view of every window (used when there are more taps than outputs)."""
    view = np.lib.stride_tricks.sliding_window_view(xp, kernel, axis=(2, 3))
    return view[:, :, ::strides[0], ::strides[1]][:, :, :out_hw[0], :out_hw[1]]


def _many_taps(kernel, out_hw) -> bool:
    # Tap-by-tap costs one numpy call per tap; for global-like kernels over tiny outputs, reduce the
    # window view in one call instead.
    return kernel[0] * kernel[1] > 64 and kernel[0] * kernel[1] > out_hw[0] * out_hw[1]


@reference(T.AVERAGE_POOL_2D)
def average_pool_2d(op, inputs):
    x = _as_f32(inputs[0])
    ceil_mode = _bool(inputs[5] if len(inputs) > 5 else None)
    include_pad = _bool(inputs[6] if len(inputs) > 6 else None)
    kernel_hw, strides, pads, out_hw = _pool_geometry(x, inputs, ceil_mode)
    xp = _pad_spatial(x, *_overhang_pads(x, kernel_hw, strides, pads, out_hw))
    if _many_taps(kernel_hw, out_hw):
        out = _windows(xp, kernel_hw, strides, out_hw).sum(axis=(-2, -1), dtype=_F32)
    else:
        out = np.zeros(x.shape[:2] + tuple(out_hw), dtype=_F32)
        for i in range(kernel_hw[0]):
            for j in range(kernel_hw[1]):
                out += _tap(xp, i, j, out_hw[0], out_hw[1], strides[0], strides[1])
    top, bottom, left, right = pads
    count_h = _window_counts(x.shape[2], kernel_hw[0], strides[0], top, bottom, out_hw[0], include_pad)
    count_w = _window_counts(x.shape[3], kernel_hw[1], strides[1], left, right, out_hw[1], include_pad)
    # A window lying wholly in the ceil_mode overhang has no element; its average is 0, not NaN.
    out /= np.maximum(count_h[:, None] * count_w[None, :], 1)
    return [_fuse(out, inputs[7] if len(inputs) > 7 else None)]


def _max_pool(x, kernel_hw, strides, pads, out_hw, with_indices: bool):
    """Max over each window; with indices, the first maximum's flat position h * W + w in the input."""
    xp = _pad_spatial(x, *_overhang_pads(x, kernel_hw, strides, pads, out_hw), fill=-np.inf)
    top, _, left, _ = pads
    oh, ow = out_hw
    width = x.shape[3]
    if _many_taps(kernel_hw, out_hw):
        windows = _windows(xp, kernel_hw, strides, out_hw)
        if not with_indices:
            return windows.max(axis=(-2, -1)), None
        flat = windows.reshape(windows.shape[:4] + (-1,))
        pos = flat.argmax(axis=-1)
        out = np.take_along_axis(flat, pos[..., None], axis=-1)[..., 0]
        rows = (np.arange(oh) * strides[0] - top)[:, None] + pos // kernel_hw[1]
        cols = (np.arange(ow) * strides[1] - left)[None, :] + pos % kernel_hw[1]
        return out, rows * width + cols
    out = _tap(xp, 0, 0, oh, ow, strides[0], strides[1]).copy()
    indices = None
    if with_indices:
        base = (np.arange(oh) * strides[0] - top)[:, None] * width + (np.arange(ow) * strides[1] - left)[None, :]
        indices = np.broadcast_to(base, out.shape).astype(np.int64)
    for i in range(kernel_hw[0]):
        for j in range(kernel_hw[1]):
            if i == j == 0:
                continue
            tap = _tap(xp, i, j, oh, ow, strides[0], strides[1])
            if with_indices:
                better = tap > out  # strict: ties keep the earlier tap, as Paddle's mask does
                np.copyto(out, tap, where=better)
                np.copyto(indices, base + (i * width + j), where=better)
            else:
                np.maximum(out, tap, out=out)
    return out, indices


def _wants_indices(op) -> bool:
    return len(op.outputs) > 1 and op.outputs[1] is not None


@reference(T.MAX_POOL_2D)
def max_pool_2d(op, inputs):
    x = _as_f32(inputs[0])
    ceil_mode = _bool(inputs[5] if len(inputs) > 5 else None)
    kernel_hw, strides, pads, out_hw = _pool_geometry(x, inputs, ceil_mode)
    out, indices = _max_pool(x, kernel_hw, strides, pads, out_hw, _wants_indices(op))
    out = _fuse(out, inputs[8] if len(inputs) > 8 else None)
    if len(op.outputs) < 2:
        return [out]
    return [out, None if indices is None else indices.astype(op.outputs[1].type.dtype)]


def _adaptive_bounds(size: int, out: int):
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_reduce(x: np.ndarray, out_hw, reduce) -> np.ndarray:
    """Separable adaptive reduction: bins along H, then along W (sum and max both separate)."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    if h % oh == 0 and w % ow == 0:
        return reduce(x.reshape(n, c, oh, h // oh, ow, w // ow), axis=(3, 5))
    hs, he = _adaptive_bounds(h, oh)
    ws, we = _adaptive_bounds(w, ow)
    rows = np.stack([reduce(x[:, :, a:b, :], axis=2) for a, b in zip(hs, he)], axis=2)
    return np.stack([reduce(rows[:, :, :, a:b], axis=3) for a, b in zip(ws, we)], axis=3)


@reference(T.ADAPTIVE_AVERAGE_POOL_2D)
def adaptive_average_pool_2d(op, inputs):
    x = _as_f32(inputs[0])
    oh, ow = _ints(inputs[1])
    out = _adaptive_reduce(x, (oh, ow), lambda a, axis: a.sum(axis=axis, dtype=_F32))
    hs, he = _adaptive_bounds(x.shape[2], oh)
    ws, we = _adaptive_bounds(x.shape[3], ow)
    out /= ((he - hs)[:, None] * (we - ws)[None, :]).astype(_F32)
    return [out]


@reference(T.ADAPTIVE_MAX_POOL_2D)
def adaptive_max_pool_2d(op, inputs):
    x = _as_f32(inputs[0])
    oh, ow = _ints(inputs[1])
    if not _wants_indices(op):
        out = _adaptive_reduce(x, (oh, ow), np.max)
        return [out] + ([None] if len(op.outputs) > 1 else [])
    n, c, h, w = x.shape
    hs, he = _adaptive_bounds(h, oh)
    ws, we = _adaptive_bounds(w, ow)
    out = np.empty((n, c, oh, ow), dtype=_F32)
    indices = np.empty((n, c, oh, ow), dtype=np.int64)
    # One vectorized argmax per output cell (adaptive outputs are small, e.g. 1x1 or 7x7).
    for a in range(oh):
        for b in range(ow):
            cell = x[:, :, hs[a]:he[a], ws[b]:we[b]].reshape(n, c, -1)
            pos = cell.argmax(axis=-1)
            out[:, :, a, b] = np.take_along_axis(cell, pos[..., None], axis=-1)[..., 0]
            span = we[b] - ws[b]
            indices[:, :, a, b] = (hs[a] + pos // span) * w + ws[b] + pos % span
    return [out, indices.astype(op.outputs[1].type.dtype)]


# -- normalization -----------------------------------------------------------------------------------------------
def _channel_shape(x: np.ndarray) -> tuple:
    return (-1,) + (1,) * (x.ndim - 2)


def _standardize(v: np.ndarray, epsilon: float) -> np.ndarray:
    """(v - mean) / sqrt(var + eps) over the last axis, in float32."""
    mean = v.mean(axis=-1, keepdims=True, dtype=_F32)
    centered = v - mean
    var = np.mean(np.square(centered), axis=-1, keepdims=True, dtype=_F32)
    centered /= np.sqrt(var + _F32(epsilon))
    return centered


@reference(T.BATCH_NORMALIZATION)
def batch_normalization(op, inputs):
    x, scale, bias, mean, var = (_as_f32(a) for a in inputs[:5])
    eps = _F32(_float(inputs[5] if len(inputs) > 5 else None, 1e-5))
    # Fold into one multiply-add per element: x * a + b.
    a = scale / np.sqrt(var + eps)
    b = bias - mean * a
    out = x * a.reshape(_channel_shape(x))
    out += b.reshape(_channel_shape(x))
    return [out]


@reference(T.GROUP_NORMALIZATION)
def group_normalization(op, inputs):
    x, scale, bias = (_as_f32(a) for a in inputs[:3])
    eps = _float(inputs[3], 1e-5)
    groups = _int(inputs[4])
    n = x.shape[0]
    out = _standardize(x.reshape(n, groups, -1), eps).reshape(x.shape)
    out *= scale.reshape(_channel_shape(x))
    out += bias.reshape(_channel_shape(x))
    return [out]


@reference(T.INSTANCE_NORMALIZATION)
def instance_normalization(op, inputs):
    x, scale, bias = (_as_f32(a) for a in inputs[:3])
    eps = _float(inputs[3] if len(inputs) > 3 else None, 1e-5)
    out = _standardize(x.reshape(x.shape[0], x.shape[1], -1), eps).reshape(x.shape)
    out *= scale.reshape(_channel_shape(x))
    out += bias.reshape(_channel_shape(x))
    return [out]


@reference(T.LAYER_NORMALIZATION)
def layer_normalization(op, inputs):
    x, scale, bias = (_as_f32(a) for a in inputs[:3])
    axis = _int(inputs[3])
    axis = axis + x.ndim if axis < 0 else axis
    eps = _float(inputs[4] if len(inputs) > 4 else None, 1e-5)
    tail = x.shape[axis:]
    out = _standardize(x.reshape(x.shape[:axis] + (-1,)), eps).reshape(x.shape)
    out *= scale.reshape(tail)
    out += bias.reshape(tail)
    return [out]


@reference(T.LP_NORMALIZATION)
def lp_normalization(op, inputs):
    x = _as_f32(inputs[0])
    axis = _int(inputs[1] if len(inputs) > 1 else None, 1)
    p = _int(inputs[2] if len(inputs) > 2 else None, 2)
    eps = _F32(_float(inputs[3] if len(inputs) > 3 else None, 1e-5))
    if p == 1:
        norm = np.abs(x).sum(axis=axis, keepdims=True, dtype=_F32)
    else:
        norm = np.sqrt(np.square(x).sum(axis=axis, keepdims=True, dtype=_F32))
    return [x / (norm + eps)]


@reference(T.LRN)
def lrn(op, inputs):
    x = _as_f32(inputs[0])
    size = _int(inputs[1] if len(inputs) > 1 else None, 5)
    bias = _F32(_float(inputs[2] if len(inputs) > 2 else None, 1.0))
    alpha = _F32(_float(inputs[3] if len(inputs) > 3 else None, 1e-4))
    beta = _F32(_float(inputs[4] if len(inputs) > 4 else None, 0.75))
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


# -- matrix products ---------------------------------------------------------------------------------------------
@reference(T.FULLY_CONNECTED)
def fully_connected(op, inputs):
    x, w, bias = _as_f32(inputs[0]), _as_f32(inputs[1]), inputs[2]
    out = np.matmul(x.reshape(-1, w.shape[1]), w.T)  # w.T is a view; BLAS reads it transposed
    if bias is not None:
        out += _as_f32(bias)
    return [_fuse(out, inputs[3] if len(inputs) > 3 else None, in_place=True)]  # the matmul result is fresh


@reference(T.MAT_MUL)
def mat_mul(op, inputs):
    x, y = _as_f32(inputs[0]), _as_f32(inputs[1])
    if _bool(inputs[2] if len(inputs) > 2 else None) and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    if _bool(inputs[3] if len(inputs) > 3 else None) and y.ndim >= 2:
        y = np.swapaxes(y, -1, -2)
    return [np.asarray(np.matmul(x, y), dtype=_F32)]


# -- softmax ---------------------------------------------------------------------------------------------------------
@reference(T.SOFTMAX)
def softmax(op, inputs):
    x = _as_f32(inputs[0])
    axis = _int(inputs[1] if len(inputs) > 1 else None, 1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True, dtype=_F32)
    return [e]


@reference(T.LOG_SOFTMAX)
def log_softmax(op, inputs):
    x = _as_f32(inputs[0])
    axis = _int(inputs[1] if len(inputs) > 1 else None, 1)
    shifted = x - x.max(axis=axis, keepdims=True)
    shifted -= np.log(np.exp(shifted).sum(axis=axis, keepdims=True, dtype=_F32))
    return [shifted]


# -- pad --------------------------------------------------------------------------------------------------------------
_NUMPY_PAD_MODES = {PadMode.CONSTANT: "constant", PadMode.REFLECT: "reflect", PadMode.REPLICATE: "edge",
                    PadMode.EDGE: "edge"}


@reference(T.PAD)
def pad(op, inputs):
    x, pads = inputs[0], _ints(inputs[1])
    mode = PadMode(_int(inputs[2]))
    value = inputs[3] if len(inputs) > 3 else None
    # Negative amounts crop first; the rest is numpy's pad.
    crop = tuple(slice(max(-pads[2 * i], 0), x.shape[i] - max(-pads[2 * i + 1], 0)) for i in range(x.ndim))
    x = x[crop]
    widths = [(max(pads[2 * i], 0), max(pads[2 * i + 1], 0)) for i in range(x.ndim)]
    if mode == PadMode.CONSTANT:
        fill = 0 if value is None else np.asarray(value).reshape(-1)[0]
        return [np.pad(x, widths, mode="constant", constant_values=np.asarray(fill).astype(x.dtype))]
    return [np.pad(x, widths, mode=_NUMPY_PAD_MODES[mode])]


# -- resize -----------------------------------------------------------------------------------------------------------
def _resize_plan(op, inputs):
    """Output size and source-coordinate ratio per resized axis, computed the way Paddle's
    interpolate kernels do (float32 ratios; 1/scale when the size came from scales)."""
    x = inputs[0]
    shape = _ints(inputs[1])
    scales = None if inputs[2] is None else [float(s) for s in np.asarray(inputs[2]).reshape(-1)]
    align_corners = _bool(inputs[3] if len(inputs) > 3 else None)
    plan = []
    for a in (0, 1):
        size = x.shape[x.ndim - 2 + a]
        out = resize_out_size(size, None if shape is None else shape[a], None if scales is None else scales[a])
        if out <= 1:
            ratio = _F32(0)  # a single output row reads source row 0
        elif align_corners:
            ratio = _F32(size - 1) / _F32(out - 1)
        elif shape is None and scales[a] > 0:
            ratio = _F32(1.0 / scales[a])
        else:
            ratio = _F32(size) / _F32(out)
        plan.append((size, out, ratio))
    return plan, align_corners


@reference(T.RESIZE_NEAREST)
def resize_nearest(op, inputs):
    x = inputs[0]
    plan, align_corners = _resize_plan(op, inputs)
    index = []
    for size, out, ratio in plan:
        k = np.arange(out, dtype=_F32)
        src = ratio * k  # float32 product, as the reference kernel
        src = np.floor(src.astype(np.float64) + 0.5) if align_corners else np.floor(src)
        index.append(np.minimum(src.astype(np.int64), size - 1))
    return [np.ascontiguousarray(x[..., index[0][:, None], index[1][None, :]])]


def _linear_taps(size, out, ratio, half_pixel):
    """Per output position: the two source indices and the weight of the second one."""
    k = np.arange(out, dtype=np.float64)
    if half_pixel:
        src = float(ratio) * (k + 0.5) - 0.5
        lo = np.maximum(np.trunc(src), 0).astype(np.int64)
        frac = np.maximum(src, 0).astype(_F32) - lo.astype(_F32)
    else:
        src = ratio * k.astype(_F32)
        lo = src.astype(np.int64)
        frac = src - lo.astype(_F32)
    hi = np.minimum(lo + 1, size - 1)
    lo = np.minimum(lo, size - 1)
    return lo, hi, frac.astype(_F32)


@reference(T.RESIZE_LINEAR)
def resize_linear(op, inputs):
    x = _as_f32(inputs[0])
    plan, align_corners = _resize_plan(op, inputs)
    align_mode = _int(inputs[4] if len(inputs) > 4 else None, 1)
    half_pixel = align_mode == 0 and not align_corners
    (h, oh, rh), (w, ow, rw) = plan
    lo, hi, frac = _linear_taps(h, oh, rh, half_pixel)
    f = frac[:, None]
    rows = x[..., lo, :] * (1 - f) + x[..., hi, :] * f
    lo, hi, frac = _linear_taps(w, ow, rw, half_pixel)
    return [rows[..., lo] * (1 - frac) + rows[..., hi] * frac]
