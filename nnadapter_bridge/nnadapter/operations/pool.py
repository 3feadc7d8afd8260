"""The 2-D poolings: AVERAGE_POOL_2D, MAX_POOL_2D, ADAPTIVE_AVERAGE_POOL_2D and ADAPTIVE_MAX_POOL_2D;
signatures, shape inference and numpy references.

Layout is NCHW. The references reduce tap by tap over strided views of the padded input (or over the
whole window view when there are more taps than outputs); max pooling's indices are flat positions
h * W_in + w within each input plane. Window arithmetic comes from `window`.

Max pooling follows Paddle's CPU kernels (checked against Paddle 3.3.1), float64 included: the running
maximum starts at -FLT_MAX, so a window of -inf gives -3.4e38. Without indices it is
`y = y > v ? y : v` over the window in row-major order, so a NaN replaces the maximum and the next element
replaces the NaN (only a NaN scanned last survives); with indices (max_pool2d_with_index) it is
`if (y < v) y = v`, which never takes a NaN, and whose index stays -1 when no element exceeds -FLT_MAX.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`); `adaptive_bounds`, which a
driver shares. Imports only `registry`, `common`, `window`, the standard's codes and types and `errors`: never the
model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.common import (
    apply_optional_fuse_code,
    as_compute_float,
    const_bool,
    const_int,
    const_ints,
    hw_pair,
    map_shapes,
    param_bool,
    param_int,
    param_ints,
    result_type,
)
from nnadapter_bridge.nnadapter.operations.registry import BOOL, FLOATS_Q8, INT32, INT32_64, Slot, operation, reference
from nnadapter_bridge.nnadapter.operations.window import (
    check_4d,
    pad_spatial,
    resolve_window,
    window_out_size,
    window_output_type,
    window_tap,
)

_F32 = np.float32


def _indices_precision(op, i: int) -> Precision:
    code = const_int(op, i, int(Precision.INT32))
    if code not in (Precision.INT32, Precision.INT64):
        raise OperationError(f"{op.type.name}: return_indices_dtype must be NNADAPTER_INT32 ({int(Precision.INT32)}) "
                             f"or NNADAPTER_INT64 ({int(Precision.INT64)}), got {code}")
    return Precision(code)


# -- signatures and shape inference ------------------------------------------------------------------
_POOL_HEAD = [Slot("input", FLOATS_Q8), Slot("auto_pad", INT32), Slot("pads", INT32, optional=True),
              Slot("kernel_shape", INT32), Slot("strides", INT32), Slot("ceil_mode", BOOL, optional=True)]


@operation(T.AVERAGE_POOL_2D,
           inputs=_POOL_HEAD + [Slot("count_include_pad", BOOL, optional=True),
                                Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_average_pool_2d(op):
    """2-D average pooling; count_include_pad counts the explicit pads (never the ceil_mode overhang)."""
    check_4d(op)
    return [window_output_type(op, hw_pair(const_ints(op, 3), "kernel_shape", op),
                               hw_pair(const_ints(op, 4), "strides", op), [1, 1], 2,
                               ceil_mode=const_bool(op, 5, False))]


@operation(T.MAX_POOL_2D,
           inputs=_POOL_HEAD + [Slot("return_indices", BOOL, optional=True),
                                Slot("return_indices_dtype", INT32, optional=True),
                                Slot("fuse_code", INT32, optional=True)],
           outputs=[Slot("output"), Slot("indices", optional=True)])
def prepare_max_pool_2d(op):
    """2-D max pooling; indices (when asked for) are flat positions h * W_in + w within each input plane."""
    check_4d(op)
    out = window_output_type(op, hw_pair(const_ints(op, 3), "kernel_shape", op),
                             hw_pair(const_ints(op, 4), "strides", op), [1, 1], 2,
                             ceil_mode=const_bool(op, 5, False))
    return [out] + _indices_types(op, out, 7)


def _indices_types(op, out, dtype_index) -> list:
    if len(op.outputs) < 2:
        return []
    if op.outputs[1] is None:
        return [None]
    return [result_type(out, precision=_indices_precision(op, dtype_index))]


def _adaptive_prepare(op):
    check_4d(op)
    size = hw_pair(const_ints(op, 1), "output_shape", op)
    if size is not None and any(s <= 0 for s in size):
        raise OperationError(f"{op.type.name}: output_shape must be positive, got {size}")
    hw = tuple(size) if size is not None else (UNKNOWN, UNKNOWN)
    return map_shapes(op.inputs[0].type, lambda d: (d[0], d[1]) + hw)


@operation(T.ADAPTIVE_AVERAGE_POOL_2D, inputs=[Slot("input", FLOATS_Q8), Slot("output_shape", INT32_64)],
           outputs=[Slot("output")])
def prepare_adaptive_average_pool_2d(op):
    """Output cell i averages input rows floor(i*H/H_out) .. ceil((i+1)*H/H_out) (same for columns)."""
    return [_adaptive_prepare(op)]


@operation(
    T.ADAPTIVE_MAX_POOL_2D,
    inputs=[
        Slot("input", FLOATS_Q8),
        Slot("output_shape", INT32_64),
        Slot("return_indices", BOOL, optional=True),
        Slot("return_indices_dtype", INT32, optional=True),
    ],
    outputs=[Slot("output"), Slot("indices", optional=True)],
)
def prepare_adaptive_max_pool_2d(op):
    """Adaptive max pooling over the same windows as ADAPTIVE_AVERAGE_POOL_2D; optional flat indices."""
    out = _adaptive_prepare(op)
    return [out] + _indices_types(op, out, 3)


# -- references ------------------------------------------------------------------------------------------
def _pool_geometry(x, inputs, ceil_mode):
    kh, kw = param_ints(inputs[3])
    strides = param_ints(inputs[4])
    (top, bottom, left, right), _ = resolve_window(param_int(inputs[1], 0), param_ints(inputs[2]), x.shape[2:],
                                                   (kh, kw), strides)
    oh = window_out_size(x.shape[2], kh, strides[0], top, bottom, 1, ceil_mode)
    ow = window_out_size(x.shape[3], kw, strides[1], left, right, 1, ceil_mode)
    return (kh, kw), strides, (top, bottom, left, right), (oh, ow)


def _overhang_pads(x, kernel, strides, pads, out_hw) -> tuple[int, int, int, int]:
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
    x = as_compute_float(inputs[0])
    ceil_mode = param_bool(inputs[5] if len(inputs) > 5 else None)
    include_pad = param_bool(inputs[6] if len(inputs) > 6 else None)
    kernel_hw, strides, pads, out_hw = _pool_geometry(x, inputs, ceil_mode)
    xp = pad_spatial(x, *_overhang_pads(x, kernel_hw, strides, pads, out_hw))
    if _many_taps(kernel_hw, out_hw):
        out = _windows(xp, kernel_hw, strides, out_hw).sum(axis=(-2, -1), dtype=x.dtype)
    else:
        out = np.zeros(x.shape[:2] + tuple(out_hw), dtype=x.dtype)
        for i in range(kernel_hw[0]):
            for j in range(kernel_hw[1]):
                out += window_tap(xp, i, j, out_hw[0], out_hw[1], strides[0], strides[1])
    top, bottom, left, right = pads
    count_h = _window_counts(x.shape[2], kernel_hw[0], strides[0], top, bottom, out_hw[0], include_pad)
    count_w = _window_counts(x.shape[3], kernel_hw[1], strides[1], left, right, out_hw[1], include_pad)
    # A window lying wholly in the ceil_mode overhang has no element; its average is 0, not NaN.
    out /= np.maximum(count_h[:, None] * count_w[None, :], 1)
    return [apply_optional_fuse_code(out, inputs[7] if len(inputs) > 7 else None)]


# Paddle's max pool kernels start every window at -FLT_MAX, in float64 too.
_MAX_POOL_START = -float(np.finfo(np.float32).max)


def _scan_max(out, value, valid=None):
    """Paddle's `out = out > value ? out : value` (NaN is taken, then replaced by the next element)."""
    take = ~(out > value)
    if valid is not None:
        take &= valid
    np.copyto(out, value, where=take)


def _max_pool(x, kernel_hw, strides, pads, out_hw, with_indices: bool):
    """Max over each window; with indices, the first maximum's flat position h * W + w in the input."""
    if not with_indices and np.isnan(x).any():
        return _max_pool_scan(x, kernel_hw, strides, pads, out_hw), None
    if with_indices:
        x = np.where(np.isnan(x), x.dtype.type(-np.inf), x)  # `if (y < v)` never takes a NaN
    out, indices = _max_pool_taps(x, kernel_hw, strides, pads, out_hw, with_indices)
    if with_indices:  # no element above the -FLT_MAX start: Paddle's index stays -1
        indices = np.where(out > x.dtype.type(_MAX_POOL_START), indices, -1)
    # Windows of -inf (or wholly in the padding) keep the -FLT_MAX start.
    np.maximum(out, x.dtype.type(_MAX_POOL_START), out=out)
    return out, indices


def _max_pool_scan(x, kernel_hw, strides, pads, out_hw):
    """Paddle's running maximum tap by tap in row-major window order, padding skipped (NaN inputs)."""
    overhang = _overhang_pads(x, kernel_hw, strides, pads, out_hw)
    xp = pad_spatial(x, *overhang)
    inside = pad_spatial(np.ones((1, 1) + x.shape[2:], dtype=np.float32), *overhang) > 0
    oh, ow = out_hw
    out = np.full(x.shape[:2] + (oh, ow), _MAX_POOL_START, dtype=x.dtype)
    for i in range(kernel_hw[0]):
        for j in range(kernel_hw[1]):
            _scan_max(out, window_tap(xp, i, j, oh, ow, strides[0], strides[1]),
                      window_tap(inside, i, j, oh, ow, strides[0], strides[1]))
    return out


def _max_pool_taps(x, kernel_hw, strides, pads, out_hw, with_indices: bool):
    xp = pad_spatial(x, *_overhang_pads(x, kernel_hw, strides, pads, out_hw), fill=-np.inf)
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
    out = window_tap(xp, 0, 0, oh, ow, strides[0], strides[1]).copy()
    indices = None
    if with_indices:
        base = (np.arange(oh) * strides[0] - top)[:, None] * width + (np.arange(ow) * strides[1] - left)[None, :]
        indices = np.broadcast_to(base, out.shape).astype(np.int64)
    for i in range(kernel_hw[0]):
        for j in range(kernel_hw[1]):
            if i == j == 0:
                continue
            tap = window_tap(xp, i, j, oh, ow, strides[0], strides[1])
            if indices is not None:  # with_indices
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
    x = as_compute_float(inputs[0])
    ceil_mode = param_bool(inputs[5] if len(inputs) > 5 else None)
    kernel_hw, strides, pads, out_hw = _pool_geometry(x, inputs, ceil_mode)
    out, indices = _max_pool(x, kernel_hw, strides, pads, out_hw, _wants_indices(op))
    out = apply_optional_fuse_code(out, inputs[8] if len(inputs) > 8 else None)
    if len(op.outputs) < 2:
        return [out]
    return [out, None if indices is None else indices.astype(op.outputs[1].type.dtype)]


def adaptive_bounds(size: int, out: int):
    """Paddle's adaptive bins over `size` elements into `out`: bin i is [floor(i * size / out),
    ceil((i + 1) * size / out)) (as arrays of starts and ends)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_reduce(x: np.ndarray, out_hw, reduce) -> np.ndarray:
    """Separable adaptive reduction: bins along H, then along W (sum and max both separate)."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    if h % oh == 0 and w % ow == 0:
        return reduce(x.reshape(n, c, oh, h // oh, ow, w // ow), axis=(3, 5))
    hs, he = adaptive_bounds(h, oh)
    ws, we = adaptive_bounds(w, ow)
    rows = np.stack([reduce(x[:, :, a:b, :], axis=2) for a, b in zip(hs, he)], axis=2)
    return np.stack([reduce(rows[:, :, :, a:b], axis=3) for a, b in zip(ws, we)], axis=3)


@reference(T.ADAPTIVE_AVERAGE_POOL_2D)
def adaptive_average_pool_2d(op, inputs):
    x = as_compute_float(inputs[0])
    oh, ow = param_ints(inputs[1])
    out = _adaptive_reduce(x, (oh, ow), lambda a, axis: a.sum(axis=axis, dtype=x.dtype))
    hs, he = adaptive_bounds(x.shape[2], oh)
    ws, we = adaptive_bounds(x.shape[3], ow)
    out /= ((he - hs)[:, None] * (we - ws)[None, :]).astype(_F32)
    return [out]


@reference(T.ADAPTIVE_MAX_POOL_2D)
def adaptive_max_pool_2d(op, inputs):
    x = as_compute_float(inputs[0])
    oh, ow = param_ints(inputs[1])
    start = x.dtype.type(_MAX_POOL_START)
    n, c, h, w = x.shape
    hs, he = adaptive_bounds(h, oh)
    ws, we = adaptive_bounds(w, ow)
    if not _wants_indices(op):
        if not np.isnan(x).any():
            out = np.maximum(_adaptive_reduce(x, (oh, ow), np.max), start)
        else:
            out = np.full((n, c, oh, ow), start, dtype=x.dtype)
            for a in range(oh):
                for b in range(ow):
                    cell = x[:, :, hs[a]:he[a], ws[b]:we[b]].reshape(n, c, -1)
                    peak = out[:, :, a, b].copy()
                    for k in range(cell.shape[-1]):
                        _scan_max(peak, cell[:, :, k])
                    out[:, :, a, b] = peak
        return [out] + ([None] if len(op.outputs) > 1 else [])
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    indices = np.empty((n, c, oh, ow), dtype=np.int64)
    # One vectorized argmax per output cell (adaptive outputs are small, e.g. 1x1 or 7x7).
    for a in range(oh):
        for b in range(ow):
            cell = x[:, :, hs[a]:he[a], ws[b]:we[b]].reshape(n, c, -1)
            # argmax takes a NaN; Paddle's `if (y < v)` from -FLT_MAX never does.
            pos = np.where(np.isnan(cell), -np.inf, cell).argmax(axis=-1)
            peak = np.take_along_axis(cell, pos[..., None], axis=-1)[..., 0]
            out[:, :, a, b] = np.fmax(peak, start)
            span = we[b] - ws[b]
            # no element above the -FLT_MAX start (all NaN, -inf or <= -FLT_MAX): Paddle's index stays -1
            indices[:, :, a, b] = np.where(peak > start, (hs[a] + pos // span) * w + ws[b] + pos % span, -1)
    return [out, indices.astype(op.outputs[1].type.dtype)]
