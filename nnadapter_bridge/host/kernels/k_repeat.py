"""repeat_interleave: each element along `dim` repeated by the int attr `Repeats` or by the per-element
counts of a tensor (legacy slot `RepeatsTensor`; `RepeatTensor` in PIR's repeat_interleave_with_tensor_index);
broadcast_tensors where the inputs' dims are known only at run time."""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


@host_kernel("repeat_interleave", "repeat_interleave_with_tensor_index")
def repeat_interleave(io: OpScope) -> None:
    x = io.input("X")
    dim = int(io.attr("dim", 0))
    if x.ndim == 0:
        x = x.reshape(1)
    dim %= x.ndim
    slot = next((s for s in ("RepeatsTensor", "RepeatTensor") if io.has_input(s)), None)
    if slot is not None:
        repeats = io.input(slot).reshape(-1).astype(np.int64)
        if repeats.size not in (1, x.shape[dim]):
            raise io.error(f"{repeats.size} repeat counts for axis {dim} of size {x.shape[dim]}")
    else:
        repeats = int(io.attr("Repeats", 1))
        if repeats <= 0:
            raise io.error(f"repeats should be larger than zero, got {repeats}")  # Paddle's check too
    if np.any(np.asarray(repeats) < 0):
        raise io.error(f"repeat counts must be non-negative, got {np.asarray(repeats).tolist()}")
    io.set_output("Out", np.repeat(x, repeats, axis=dim))


@host_kernel("broadcast_tensors")
def broadcast_tensors(io: OpScope) -> None:
    xs = io.inputs("X")
    try:
        outs = np.broadcast_arrays(*xs)
    except ValueError as exc:
        raise io.error(f"the inputs {[list(x.shape) for x in xs]} do not broadcast: {exc}") from exc
    io.set_outputs("Out", [np.array(o, copy=True) for o in outs])
