"""The accuracy tolerances of DESIGN.md: when a result counts as equal to its reference.

One operation (NNAPI CTS), on inputs of magnitude ~1:   |got - want| <= OP_ATOL + OP_RTOL * |want|
A whole model against Paddle Inference:                 |got - want| <= 1e-4 * |want| + 1e-5 * max|want|

Non-finite values: a finite expectation is met only by a value within the bound (a NaN result fails); a
non-finite expectation only by the same value exactly (the same infinity, or NaN for NaN). max|want| is
taken over the finite expectations (0 when there is none). The test helpers, the CLI's comparison with
Paddle Inference and the peer benchmark all judge results with these functions.
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
