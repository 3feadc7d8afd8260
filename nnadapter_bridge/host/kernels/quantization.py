"""quantize_linear run standalone: its float "integer" output Y is computed as Paddle 3.3.1's CPU kernel
does (for an inference program: is_test=True), so a fetched Y matches Paddle's.

What Paddle 3.3.1 does (checked by running the op):
- the bin count is the `qmax` attr (default 127), not 2^(bit_length-1)-1: bit_length is not read;
- round_type 0: q = rint(qmax / s * x) (ties to even), clipped to [-qmax - 1, qmax]: the `qmin` attr is not
  read either (qmin 0 / qmax 7 gives -8);
- round_type 1: x is first clipped to [-s, s], then q = round(qmax / s * x) with ties away from zero, so
  q stays in [-qmax, qmax];
- quant_axis < 0 uses one scale, quant_axis 0 or 1 one scale per index of that axis; ZeroPoint is not read;
- a zero or negative Scale goes through the same formulas (`inverse` nudges it by 1e-6 first);
- NaN stays NaN; Y keeps X's dtype (float32: Paddle's CPU kernel has no float64 form);
- only_observer=True returns X unchanged.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


def inverse_scale(scale: np.ndarray) -> np.ndarray:
    # Paddle's `inverse`: a scale at or below 1e-30 is nudged by 1e-6 rather than divided by
    tiny = scale <= scale.dtype.type(1e-30)
    return (1 / np.where(tiny, scale + scale.dtype.type(1e-6), scale)).astype(scale.dtype)


@host_kernel("quantize_linear")
def quantize_linear(io: OpScope) -> None:
    x = io.input("X")
    if x.dtype != np.float32:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes float32)")
    if io.attr("only_observer", False):
        io.set_output("Y", x.copy())
        return
    if not io.attr("is_test", True):
        raise io.error("is_test=false is the training-time observer (it updates the scale from InAccum/"
                       "InState); save the model for inference")
    scale = io.input("Scale").astype(x.dtype).reshape(-1)
    axis = int(io.attr("quant_axis", 0))
    qmax = int(io.attr("qmax", 127))
    if axis >= 0:
        if axis >= x.ndim or x.shape[axis] != scale.size:
            raise io.error(f"quant_axis {axis} of X {list(x.shape)} needs one Scale value per index, "
                           f"got {scale.size}")
        shape = [1] * x.ndim
        shape[axis] = scale.size
        scale = scale.reshape(shape)
    else:
        scale = scale[:1]
    factor = (x.dtype.type(qmax) * inverse_scale(scale)).astype(x.dtype)
    with np.errstate(invalid="ignore"):
        if int(io.attr("round_type", 0)) == 0:
            q = np.clip(np.rint(factor * x), -qmax - 1, qmax)
        else:
            # Paddle's ClipFunctor: `x < -s ? -s : (x > s ? s : x)`; with a negative Scale s the bounds cross
            # (np.clip would send everything to s).
            clipped = np.where(x < -scale, -scale, np.where(x > scale, scale, x))
            scaled = factor * clipped
            whole = np.trunc(scaled)  # std::round, exactly: floor(|v| + 0.5) would round 0.49999997 up
            q = whole + np.sign(scaled) * (np.abs(scaled - whole) >= 0.5)
    io.set_output("Y", q.astype(x.dtype))
