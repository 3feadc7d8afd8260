"""Sliding-window arithmetic shared by convolution and pooling (and by the SDK drivers' lowering).

Output sizes, SAME padding, the explicit pads an auto_pad mode amounts to, the output type of a 2-D window
operation, and the padded buffer / per-tap strided views the references reduce over. Prepare, references
and drivers use these same functions, so they agree by construction.

Imports `common`, the standard's codes and `errors` only; no operation is registered here.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, AutoPad
from nnadapter_bridge.nnadapter.operations.common import const_int, const_ints, known, map_shapes


# -- output sizes and pads -----------------------------------------------------------------------------
def same_pads(in_size: int, kernel: int, stride: int) -> tuple:
    """AUTO_PAD_SAME: output ceil(in/stride), the padding split with the odd element after."""
    out = -(-in_size // stride)
    total = max((out - 1) * stride + kernel - in_size, 0)
    return total // 2, total - total // 2


def resolve_window(auto_pad: int, pads: Sequence[int] | None, in_hw: Sequence[int],
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


# -- shape inference -------------------------------------------------------------------------------------
def check_4d(op, i: int = 0, what: str = "input") -> None:
    rank = op.inputs[i].type.rank
    if rank != 4:
        raise OperationError(f"{op.type.name}: {what} must be 4-D NCHW, got rank {rank} "
                             f"({op.inputs[i].type.describe()})")


def window_output_type(op, kernel_hw, strides, dilations, pads_index, ceil_mode=False, channels=None,
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
            (top, bottom, left, right), dil = resolve_window(
                auto_pad, pads, (h if known(h) else 1, w if known(w) else 1), kernel_hw, strides, dilations
            )
            before, after = ((top, bottom), (left, right))[axis]
            if transpose:
                value = transpose_out_size(size, kernel_hw[axis], strides[axis], before, after, dil[axis],
                                           output_padding[axis])
            else:
                value = window_out_size(size, kernel_hw[axis], strides[axis], before, after, dil[axis], ceil_mode)
            if value < 0 or (value == 0 and not transpose):  # Paddle's transposed conv gives an empty result
                raise OperationError(f"{op.type.name}: the window does not fit: input {list(dims)}, kernel "
                                     f"{list(kernel_hw)}, strides {list(strides)}, pads {pads} give size {value}")
            out.append(value)
        return (n, out_c, out[0], out[1])

    return map_shapes(op.inputs[0].type, dims_fn)


# -- references: the padded buffer and the kernel taps ------------------------------------------------
def pad_spatial(x: np.ndarray, top: int, bottom: int, left: int, right: int, fill: float = 0.0) -> np.ndarray:
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


def window_tap(xp: np.ndarray, i0: int, j0: int, out_h: int, out_w: int, sh: int, sw: int) -> np.ndarray:
    """The strided view of xp read by the kernel tap at padded offset (i0, j0) for every output pixel."""
    return xp[:, :, i0:i0 + (out_h - 1) * sh + 1:sh, j0:j0 + (out_w - 1) * sw + 1:sw]
