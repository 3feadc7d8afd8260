"""The tolerance helpers themselves: every test's oracle must be able to fail, infinities and NaNs included."""
from __future__ import annotations

import numpy as np
import pytest

from support.tolerances import assert_model_close, assert_op_close

INF = np.inf


@pytest.mark.parametrize("check", [assert_op_close, assert_model_close])
@pytest.mark.parametrize("got, want", [
    ([1.0, 2.0], [1.0, 2.5]),                 # plainly wrong
    ([1.0, 1.0], [1.0, INF]),                 # finite where +inf is expected
    ([1.0, -INF], [1.0, INF]),                # the other infinity
    ([1.0, np.nan], [1.0, 2.0]),              # NaN where a number is expected
    ([1.0, 2.0], [1.0, np.nan]),              # a number where NaN is expected
    ([5.0, 1.0], [np.nan, 1.0]),              # a NaN in want must not disable the whole check
    ([INF, 1.0], [3.0, 1.0]),                 # an infinity where a number is expected
])
def test_helpers_reject(check, got, want):
    with pytest.raises(AssertionError):
        check(np.array(got, np.float32), np.array(want, np.float32), what="case")


@pytest.mark.parametrize("check", [assert_op_close, assert_model_close])
def test_helpers_accept_exact_specials_and_small_errors(check):
    want = np.array([1.0, INF, -INF, np.nan, 0.5], np.float32)
    got = want.copy()
    got[0] += 1e-7
    check(got, want, what="case")


def test_model_tolerance_of_the_cli_matches_non_finite_values_exactly():
    """nnadapter_bridge.validation.tolerances.model_out_of_tolerance (what `run --compare-paddle` uses): the same
    infinity
    and NaN for NaN pass, and they do not widen the bound of the finite elements (max|want| is finite-only)."""
    from nnadapter_bridge.validation.tolerances import model_out_of_tolerance

    want = np.array([INF, -INF, np.nan, 2.0], np.float32)
    assert not model_out_of_tolerance(want.copy(), want).any()
    assert model_out_of_tolerance(np.array([-INF, -INF, np.nan, 2.0], np.float32), want).tolist() == \
        [True, False, False, False]
    assert model_out_of_tolerance(np.array([INF, -INF, np.nan, 2.001], np.float32), want).tolist() == \
        [False, False, False, True]
