"""Rearrangements with no NNAdapter operation (the standard's shape family): temporal_shift,
pixel_unshuffle, and broadcast_tensors where the inputs' dims are known only at run time.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


@host_kernel("temporal_shift")
def temporal_shift(io: OpScope) -> None:
    x = io.input("X")
    seg_num = int(io.attr("seg_num"))
    shift_ratio = float(io.attr("shift_ratio", 0.25))
    channels_last = io.attr("data_format", "NCHW") == "NHWC"
    if x.ndim != 4 or x.shape[0] % seg_num:
        raise io.error(f"X must be 4-D with a batch divisible by seg_num={seg_num}, got {list(x.shape)}")
    if channels_last:
        x = x.transpose(0, 3, 1, 2)
    nt, c, h, w = x.shape
    frames = x.reshape(nt // seg_num, seg_num, c, h, w)
    c1, c2 = int(c * shift_ratio), int(c * 2 * shift_ratio)
    out = np.zeros_like(frames)
    # channels [0, c1) take the previous frame, [c1, c2) the next one, the rest stay; a frame shifted in
    # from outside the segment is zeros
    out[:, 1:, :c1] = frames[:, :-1, :c1]
    out[:, :-1, c1:c2] = frames[:, 1:, c1:c2]
    out[:, :, c2:] = frames[:, :, c2:]
    out = out.reshape(nt, c, h, w)
    io.set_output("Out", out.transpose(0, 2, 3, 1).copy() if channels_last else out)


@host_kernel("pixel_unshuffle")
def pixel_unshuffle(io: OpScope) -> None:
    x = io.input("X")
    r = int(io.attr("downscale_factor"))
    channels_last = io.attr("data_format", "NCHW") == "NHWC"
    if channels_last:
        x = x.transpose(0, 3, 1, 2)
    n, c, h, w = x.shape
    if h % r or w % r:
        raise io.error(f"height {h} and width {w} must be divisible by downscale_factor {r}")
    out = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4).reshape(n, c * r * r, h // r, w // r)
    io.set_output("Out", out.transpose(0, 2, 3, 1).copy() if channels_last else np.ascontiguousarray(out))


@host_kernel("broadcast_tensors")
def broadcast_tensors(io: OpScope) -> None:
    xs = io.inputs("X")
    try:
        outs = np.broadcast_arrays(*xs)
    except ValueError as exc:
        raise io.error(f"the inputs {[list(x.shape) for x in xs]} do not broadcast: {exc}") from exc
    io.set_outputs("Out", [np.array(o, copy=True) for o in outs])
