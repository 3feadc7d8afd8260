"""Discrete Fourier transforms and the complex values they give, which NNAdapter has no operation or element type
for (a host-only family): fft_r2c and fft_c2c (paddle.fft's n-dimensional transforms over `axes`), real, imag,
complex, as_complex and as_real, angle and conj; and the framing around short-time transforms, frame and overlap_add
(paddle.signal.frame / overlap_add, what paddle.signal.stft / istft build on). (fft_c2r, the inverse real
transform, is not here: the loader does not translate Paddle 3.3.1's PIR fft_c2r yet, pir_signatures.json's
`_untranslated`.)

Paddle's `normalization` names the scaling as numpy's `norm` does ("backward": none forward, 1/n inverse;
"forward": the reverse; "ortho": 1/sqrt(n) both ways), `forward` picks the transform's direction and `onesided`
keeps the n // 2 + 1 non-negative frequencies of the last axis (rfft). Results keep the input's width: complex64
from float32 / complex64, complex128 from float64 / complex128 (numpy computes in double).

angle is the argument atan2(imag, real) of a complex value (float32 from complex64, float64 from complex128); of a
real value it is pi below zero, NaN for NaN and 0 otherwise (-0.0 included), in the input's dtype. conj negates
the imaginary part of a complex value and leaves a real one as it is (int32, int64, float32 and float64 besides
the complex types, as Paddle's CPU kernel takes them).

frame and overlap_add work on the first (axis 0) or last (axis -1) axis only, as Paddle's do: frame gathers
every frame at once through one index grid, overlap_add scatter-adds every frame at once (np.add.at, frame by frame
in order, as Paddle accumulates them).

Entry points: its kernels, registered with `@host_kernel`. Imports the registry and numpy.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel, require

_NORMS = ("backward", "forward", "ortho")


def _complex_of(x: np.ndarray) -> type:
    return np.complex128 if x.dtype in (np.float64, np.complex128) else np.complex64


def _real_of(x: np.ndarray) -> type:
    return np.float64 if x.dtype in (np.float64, np.complex128) else np.float32


def _transform_attrs(io: OpScope) -> tuple:
    axes = [int(a) for a in io.attr("axes", [])]
    norm = str(io.attr("normalization", "backward"))
    if norm not in _NORMS:
        raise io.error(f"normalization {norm!r} is not one of {list(_NORMS)}")
    return axes, norm, bool(io.attr("forward", True))


@host_kernel("fft_r2c")
def fft_r2c(io: OpScope) -> None:
    x = io.input("X")
    axes, norm, forward = _transform_attrs(io)
    out = (np.fft.fftn if forward else np.fft.ifftn)(x, axes=axes, norm=norm)
    if io.attr("onesided", False) and axes:
        last = axes[-1]
        out = np.take(out, np.arange(x.shape[last] // 2 + 1), axis=last)
    io.set_output("Out", out.astype(_complex_of(x)))


@host_kernel("fft_c2c")
def fft_c2c(io: OpScope) -> None:
    x = io.input("X")
    axes, norm, forward = _transform_attrs(io)
    io.set_output("Out", (np.fft.fftn if forward else np.fft.ifftn)(x, axes=axes, norm=norm).astype(_complex_of(x)))


@host_kernel("real")
def real(io: OpScope) -> None:
    x = io.input("X")
    io.set_output("Out", np.real(x).astype(_real_of(x)))


@host_kernel("imag")
def imag(io: OpScope) -> None:
    x = io.input("X")
    io.set_output("Out", np.imag(x).astype(_real_of(x)))


@host_kernel("complex")
def complex_(io: OpScope) -> None:
    x, y = np.broadcast_arrays(io.input("X"), io.input("Y"))
    out = np.empty(x.shape, _complex_of(x))
    out.real, out.imag = x, y
    io.set_output("Out", out)


@host_kernel("as_complex")
def as_complex(io: OpScope) -> None:
    x = io.input("X")
    if x.ndim == 0 or x.shape[-1] != 2:
        raise io.error(f"as_complex needs a last axis of 2 (real, imaginary), X has dims {list(x.shape)}")
    out = np.empty(x.shape[:-1], _complex_of(x))
    out.real, out.imag = x[..., 0], x[..., 1]
    io.set_output("Out", out)


@host_kernel("as_real")
def as_real(io: OpScope) -> None:
    x = io.input("X")
    io.set_output("Out", np.stack([np.real(x), np.imag(x)], axis=-1).astype(_real_of(x)))


_ANGLE_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64", "complex128"))
_CONJ_DTYPES = frozenset(np.dtype(t) for t in ("int32", "int64", "float32", "float64", "complex64", "complex128"))


@host_kernel("angle")
def angle(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, _ANGLE_DTYPES)
    if x.dtype.kind == "c":
        out = np.arctan2(x.imag, x.real)
    else:
        # Paddle's real functor: pi below zero, else 0, NaN kept; numpy's angle would give pi for -0.0
        out = np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0.0))
    io.set_output("Out", out.astype(_real_of(x)))


@host_kernel("conj")
def conj(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, _CONJ_DTYPES)
    io.set_output("Out", np.conj(x) if x.dtype.kind == "c" else x)


def _frame_axis(io: OpScope, x: np.ndarray, least_rank: int) -> int:
    axis = int(io.attr("axis", -1))
    if axis not in (0, -1):
        raise io.error(f"axis {axis} is not 0 or -1 (the only axes Paddle frames along)")
    hop = int(io.attr("hop_length"))
    if hop <= 0:
        raise io.error(f"hop_length must be > 0, got {hop}")
    if x.ndim < least_rank:
        raise io.error(f"X must have at least {least_rank} dims, got shape {list(x.shape)}")
    return axis


def _frame_grid(frame_length: int, frames: int, hop: int) -> np.ndarray:
    """[frames, frame_length] positions in the signal: frame i's sample j is at i * hop + j."""
    return np.arange(frames)[:, None] * hop + np.arange(frame_length)[None, :]


@host_kernel("frame")
def frame(io: OpScope) -> None:
    """Paddle's frame: 1 + (seq_length - frame_length) // hop_length frames of the signal along `axis`; axis -1
    gives [..., frame_length, frames], axis 0 gives [frames, frame_length, ...]."""
    x = io.input("X")
    axis = _frame_axis(io, x, 1)
    frame_length, hop = int(io.attr("frame_length")), int(io.attr("hop_length"))
    length = x.shape[axis]
    if not 0 < frame_length <= length:
        raise io.error(f"frame_length must lie in [1, {length}] (the signal's length along axis {axis}), "
                       f"got {frame_length}")
    grid = _frame_grid(frame_length, 1 + (length - frame_length) // hop, hop)
    out = x[..., grid.T] if axis == -1 else x[grid]
    io.set_output("Out", np.ascontiguousarray(out))


@host_kernel("overlap_add")
def overlap_add(io: OpScope) -> None:
    """Paddle's overlap_add, frame's reverse: frames [..., frame_length, frames] (axis -1) or [frames,
    frame_length, ...] (axis 0) added into a signal of (frames - 1) * hop_length + frame_length samples where they
    overlap."""
    x = io.input("X")
    axis = _frame_axis(io, x, 2)
    hop = int(io.attr("hop_length"))
    # frames first: [frames, frame_length, rest...]
    framed = np.moveaxis(x, (-1, -2), (0, 1)) if axis == -1 else x
    frames, frame_length = framed.shape[:2]
    length = (frames - 1) * hop + frame_length if frames else 0
    out = np.zeros((length,) + framed.shape[2:], x.dtype)
    np.add.at(out, _frame_grid(frame_length, frames, hop), framed)
    io.set_output("Out", np.ascontiguousarray(np.moveaxis(out, 0, -1) if axis == -1 else out))
