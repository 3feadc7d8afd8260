"""The tolerances of DESIGN.md, as assertion helpers used by every test."""
from __future__ import annotations

import numpy as np

# One operation (NNAPI CTS): |got - want| <= atol + rtol * |want| on inputs of magnitude ~1.
OP_ATOL = 1e-5
OP_RTOL = 5 * 2.0 ** -23


def _out_of_bound(got64: np.ndarray, want64: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Elements that fail: finite expectations by |got - want| > bound (a NaN result fails), and
    non-finite expectations unless matched exactly (the same infinity, or NaN for NaN)."""
    finite = np.isfinite(want64)
    with np.errstate(invalid="ignore", over="ignore"):
        within = np.abs(got64 - want64) <= bound
    exact = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))
    return np.where(finite, ~within, ~exact)


def assert_op_close(got, want, *, atol: float = OP_ATOL, rtol: float = OP_RTOL, what: str = "") -> None:
    """One operation's output against an independent expectation; integers and booleans exact."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != expected {want.shape}"
    if want.dtype.kind in "biu" or got.dtype.kind in "biu":
        assert got.dtype.kind == want.dtype.kind or (got.dtype.kind in "iu" and want.dtype.kind in "iu"), \
            f"{what}: dtype {got.dtype} != expected {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    got64 = got.astype(np.float64)
    want64 = want.astype(np.float64)
    bound = atol + rtol * np.abs(np.where(np.isfinite(want64), want64, 0.0))
    bad = _out_of_bound(got64, want64, bound)
    if bad.any():
        with np.errstate(invalid="ignore"):
            excess = np.where(bad, np.nan_to_num(np.abs(got64 - want64) - bound, nan=np.inf, posinf=np.inf), -np.inf)
        i = np.unravel_index(np.argmax(excess), want.shape) if want.ndim else ()
        raise AssertionError(f"{what}: {int(bad.sum())}/{want.size} elements out of tolerance "
                             f"(atol={atol}, rtol={rtol}); worst at {i}: got {got64[i]!r}, want {want64[i]!r}")


def assert_model_close(got, want, *, what: str = "") -> None:
    """A whole model against Paddle Inference: |got-want| <= 1e-4*|want| + 1e-5*max|want| elementwise."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != expected {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    got64 = got.astype(np.float64)
    want64 = want.astype(np.float64)
    finite = np.isfinite(want64)
    scale = float(np.max(np.abs(want64[finite]))) if finite.any() else 0.0
    bound = 1e-4 * np.abs(np.where(finite, want64, 0.0)) + 1e-5 * scale
    bad = _out_of_bound(got64, want64, bound)
    if bad.any():
        with np.errstate(invalid="ignore"):
            err = np.where(bad, np.nan_to_num(np.abs(got64 - want64), nan=np.inf, posinf=np.inf), -np.inf)
        i = np.unravel_index(np.argmax(err), want.shape)
        raise AssertionError(f"{what}: {int(bad.sum())}/{want.size} elements out of tolerance; worst at {i}: "
                             f"got {got64[i]!r}, want {want64[i]!r} (max|want|={scale:g})")
