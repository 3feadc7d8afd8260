"""Assertion helpers over the tolerances of DESIGN.md (nnadapter_bridge.validation.tolerances), used by every test."""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.validation.tolerances import OP_ATOL, OP_RTOL, model_bound, model_scale, op_bound, out_of_bound


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
    bound = op_bound(want64, atol, rtol)
    bad = out_of_bound(got64, want64, bound)
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
    scale = model_scale(want64)
    bad = out_of_bound(got64, want64, model_bound(want64, scale))
    if bad.any():
        with np.errstate(invalid="ignore"):
            err = np.where(bad, np.nan_to_num(np.abs(got64 - want64), nan=np.inf, posinf=np.inf), -np.inf)
        i = np.unravel_index(np.argmax(err), want.shape)
        raise AssertionError(f"{what}: {int(bad.sum())}/{want.size} elements out of tolerance; worst at {i}: "
                             f"got {got64[i]!r}, want {want64[i]!r} (max|want|={scale:g})")
