"""quantize_linear run standalone: its float "integer" output Y is computed as Paddle 3.3.1's CPU kernel
does (for an inference program: is_test=True), so a fetched Y matches Paddle's; and the legacy weight
dequantizers dequantize_abs_max and dequantize_log.

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

The dequantizers give float32, as Paddle's CPU kernels do:
- dequantize_abs_max: Out = Scale[0] * X / max_range, in float32 and in that order (max_range 0 gives +-inf, and
  NaN for a 0), for int8 or int16 X; Scale must be float32 (Paddle's kernel rejects another dtype);
- dequantize_log: Out = Dict[X] for X >= 0 and -Dict[X + 128] below, for int8 X and a float32 Dict of 128 values;
  Paddle does not check that Dict holds the entry (it reads past a short Dict), this kernel raises instead.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, require


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


_DEQUANTIZE_ABS_MAX_DTYPES = frozenset(np.dtype(t) for t in ("int8", "int16"))


def _float32_input(io: OpScope, slot: str) -> np.ndarray:
    value = io.input(slot)
    if value.dtype != np.float32:
        raise io.error(f"{slot} must be float32 (the only dtype Paddle's kernel reads it in), got {value.dtype}")
    return value


@host_kernel("dequantize_abs_max")
def dequantize_abs_max(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, _DEQUANTIZE_ABS_MAX_DTYPES)
    scale = _float32_input(io, "Scale").reshape(-1)
    if scale.size == 0:
        raise io.error("Scale is empty (it needs one value)")
    with np.errstate(divide="ignore", invalid="ignore"):
        out = scale[0] * x.astype(np.float32) / np.float32(io.attr("max_range"))
    io.set_output("Out", out.astype(np.float32, copy=False))


@host_kernel("dequantize_log")
def dequantize_log(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, frozenset({np.dtype("int8")}))
    table = _float32_input(io, "Dict").reshape(-1)
    negative = x < 0
    index = np.where(negative, x.astype(np.int64) + 128, x)
    if index.size and index.max() >= table.size:
        raise io.error(f"Dict holds {table.size} values; X needs entry {index.max()} (128 cover every int8)")
    io.set_output("Out", np.where(negative, -table[index], table[index]).astype(np.float32, copy=False))
