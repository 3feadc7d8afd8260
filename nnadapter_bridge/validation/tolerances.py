"""The accuracy tolerances of DESIGN.md: when a result counts as equal to its reference.

One operation (NNAPI CTS), on inputs of magnitude ~1:   |got - want| <= OP_ATOL + OP_RTOL * |want|
A whole model against Paddle Inference:                 |got - want| <= 1e-4 * |want| + 1e-5 * max|want|
A quantized model, or bf16 / f16 inference:             cosine >= 0.999 and top-1 agreement >= 99% (below)

Non-finite values: a finite expectation is met only by a value within the bound (a NaN result fails); a
non-finite expectation only by the same value exactly (the same infinity, or NaN for NaN). max|want| is
taken over the finite expectations (0 when there is none). The test helpers, the CLI's comparison with
Paddle Inference and the peer benchmark all judge results with these functions.

Entry points: `model_out_of_tolerance`, `op_bound`, `model_bound`, `within_reduced_precision`, `cosine_similarity`,
`top1_agreement`. Imports numpy only.
"""
from __future__ import annotations

import numpy as np

OP_ATOL = 1e-5
OP_RTOL = 5 * 2.0 ** -23
MODEL_RTOL = 1e-4
MODEL_SCALE_ATOL = 1e-5


def out_of_bound(got64: np.ndarray, want64: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Elements that fail: finite expectations by |got - want| > bound (a NaN result fails), and
    non-finite expectations unless matched exactly (the same infinity, or NaN for NaN)."""
    finite = np.isfinite(want64)
    with np.errstate(invalid="ignore", over="ignore"):
        within = np.abs(got64 - want64) <= bound
    exact = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))
    return np.where(finite, ~within, ~exact)


def op_bound(want64: np.ndarray, atol: float = OP_ATOL, rtol: float = OP_RTOL) -> np.ndarray:
    """The per-element bound of one operation's output (0-based magnitude for non-finite expectations)."""
    return atol + rtol * np.abs(np.where(np.isfinite(want64), want64, 0.0))


def model_scale(want64: np.ndarray) -> float:
    """max|want| over the finite expectations, 0 when there is none."""
    finite = np.isfinite(want64)
    return float(np.max(np.abs(want64[finite]))) if finite.any() else 0.0


def model_bound(want64: np.ndarray, scale: float) -> np.ndarray:
    """The per-element bound of a whole model's output: 1e-4*|want| + 1e-5*max|want|."""
    return MODEL_RTOL * np.abs(np.where(np.isfinite(want64), want64, 0.0)) + MODEL_SCALE_ATOL * scale


def model_out_of_tolerance(got, want) -> np.ndarray:
    """The elements of a whole model's output `got` (same shape as `want`) outside the model tolerance."""
    got64 = np.asarray(got).astype(np.float64)
    want64 = np.asarray(want).astype(np.float64)
    return out_of_bound(got64, want64, model_bound(want64, model_scale(want64)))


# -- reduced precision: quantized models, bf16 / f16 inference ------------------------------------------------
#
# A quantized model rounds every activation to its int8 grid. Paddle Inference and a device compute the float
# sums in between in different orders (and an SDK's int8 kernels requantize with their own arithmetic), so a
# value within a few ulp of a rounding tie lands one step apart now and then, and that one-step difference
# travels through the following layers. The per-element tolerances above cannot hold then; what holds is the
# agreement of the whole output: cosine similarity >= REDUCED_COSINE over each output, and the same top-1
# class for >= REDUCED_TOP1 of the rows of a classifier's [batch, classes] output. bf16 / f16 inference
# (INTEL_OPENVINO_INFERENCE_PRECISION) is judged the same way.
REDUCED_COSINE = 0.999
REDUCED_TOP1 = 0.99


def cosine_similarity(got, want) -> float:
    """Cosine similarity of the two outputs flattened (float64); 1.0 when both are all zeros, 0.0 when only
    one is, NaN when either holds a non-finite value."""
    a = np.asarray(got, dtype=np.float64).reshape(-1)
    b = np.asarray(want, dtype=np.float64).reshape(-1)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


def top1_agreement(got, want):
    """The fraction of rows (every axis but the last) whose argmax over the last axis agrees, for an output of
    rank >= 2 with more than one class; None otherwise (no classes to agree on)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.ndim < 2 or got.shape[-1] < 2 or got.size == 0:
        return None
    rows_got = got.reshape(-1, got.shape[-1])
    rows_want = want.reshape(-1, want.shape[-1])
    return float(np.mean(np.argmax(rows_got, axis=1) == np.argmax(rows_want, axis=1)))


def within_reduced_precision(got, want) -> bool:
    """Whether `got` agrees with `want` at the reduced-precision tolerance (module comment above)."""
    cosine = cosine_similarity(got, want)
    if not cosine >= REDUCED_COSINE:  # NaN fails too
        return False
    top1 = top1_agreement(got, want)
    return top1 is None or top1 >= REDUCED_TOP1


# Per-type tolerances of one operation in the NNAPI CTS, for types other than float32 (the conformance kit,
# nnadapter_bridge.conformance): float16 5 x 2^-10 absolute and relative, as the CTS's relaxed precision;
# float64 tight enough that a result rounded through float32 (~1e-7 relative) fails; a quantized 8-bit result
# within one quantization step; other integers and booleans exactly.
FLOAT16_ATOL = FLOAT16_RTOL = 5 * 2.0 ** -10
FLOAT64_ATOL = 1e-12
FLOAT64_RTOL = 1e-9
QUANT_STEPS = 1
