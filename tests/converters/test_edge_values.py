"""NaN, infinities, huge values and empty axes through the converters on builtin_device, each compared with
Paddle 3.3.1 running the same saved program (its CPU kernels: relu is `x > 0 ? x : 0`, the shrinks multiply
by 0/1 masks, logsigmoid uses a max-shifted formula, the softmaxes clip the shifted input at -64, max pooling
starts at -FLT_MAX and scans `y > v ? y : v`)."""
from __future__ import annotations

import numpy as np
import pytest

from support.converter_harness import check_program, opdesc_program, static_program

pytest.importorskip("paddle")

NAN, INF = np.nan, np.inf
EDGE = [NAN, INF, -INF, 3e38, -3e38, 2e38, -2e38, 5.7e37, 0.5, -0.5, 0.3, -0.3, 1.0, 7.0, 0.0, -2.0, 1e-3]


def _activations():
    import paddle
    import paddle.nn.functional as F

    return {
        "relu": F.relu, "relu6": F.relu6, "leaky_relu": lambda t: F.leaky_relu(t, 0.1),
        "clip": lambda t: paddle.clip(t, -1.0, 1.0), "hard_sigmoid": F.hardsigmoid,
        "hard_shrink": F.hardshrink, "hard_shrink_03": lambda t: F.hardshrink(t, 0.3),
        "softshrink": lambda t: F.softshrink(t, 0.3), "thresholded_relu": lambda t: F.thresholded_relu(t, 1.0),
        "logsigmoid": F.log_sigmoid, "hard_swish": F.hardswish, "elu": F.elu, "silu": F.silu,
    }


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(["relu", "relu6", "leaky_relu", "clip", "hard_sigmoid", "hard_shrink",
                                         "hard_shrink_03", "softshrink", "thresholded_relu", "logsigmoid",
                                         "hard_swish", "elu", "silu"]))
def test_activation_edge_values_match_paddle(tmp_path, name, dtype):
    x = np.array(EDGE, dtype=dtype)
    check_program(static_program(tmp_path, lambda x: _activations()[name](x), {"x": x}))


# Ops paddle 3.3.1 cannot build in legacy static mode: written as OpDescs, run by Paddle all the same.
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op_type, attrs", [
    ("gelu", {"approximate": False}), ("gelu", {"approximate": True}),
    ("softplus", {"beta": 1.0, "threshold": 20.0}),
], ids=["gelu", "gelu_tanh", "softplus"])
def test_opdesc_activation_edge_values_match_paddle(tmp_path, op_type, attrs, dtype):
    x = np.array(EDGE + [1e38, 1.7e38, 1.71e38], dtype=dtype)
    check_program(opdesc_program(tmp_path, op_type, inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs=attrs,
                                 feeds={"x": x}, extra_vars=[{"name": "out", "dtype": dtype, "shape": []}]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmaxes_clip_the_shifted_input_like_paddle(tmp_path, dtype):
    import paddle.nn.functional as F

    x = np.array([[3e38, 0, -1e30], [1, 2, 3], [-INF, 0, 1], [INF, 0, 1], [NAN, 0, 1]], dtype=dtype)
    check_program(static_program(tmp_path / "log", lambda x: F.log_softmax(x, -1), {"x": x}))
    check_program(static_program(tmp_path / "soft", lambda x: F.softmax(x, -1), {"x": x}))


def _pool_input(dtype):
    x = np.array([[[[NAN, 1, 2, 3, 5, NAN], [4, 5, NAN, 7, 1, 2], [1, 2, 3, 4, -1, -1],
                    [-INF, -INF, -INF, -INF, NAN, NAN], [-INF, -INF, 6, NAN, 1, 2], [-INF, -INF, 0, 2, 3, 4]]]],
                 dtype=dtype)
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", [
    dict(ksize=[2, 2], strides=[2, 2], paddings=[0, 0]),
    dict(ksize=[3, 3], strides=[1, 1], paddings=[1, 1]),
    dict(ksize=[2, 2], strides=[1, 1], paddings=[0, 0]),
    dict(ksize=[3, 3], strides=[3, 3], paddings=[0, 0]),
], ids=["k2s2", "k3p1", "k2s1", "k3s3"])
def test_max_pool2d_nan_and_minus_inf_windows_match_paddle(tmp_path, attrs, dtype):
    x = _pool_input(dtype)
    full = dict(dict(pooling_type="max", global_pooling=False, ceil_mode=False, exclusive=True, adaptive=False,
                     data_format="NCHW", padding_algorithm="EXPLICIT"), **attrs)
    saved = opdesc_program(tmp_path, "pool2d", inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs=full,
                           feeds={"x": x}, extra_vars=[{"name": "out", "dtype": dtype, "shape": []}])
    check_program(saved)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool2d_with_index_never_takes_nan_like_paddle(tmp_path, dtype):
    import paddle.nn.functional as F

    x = _pool_input(dtype)
    check_program(static_program(tmp_path / "k2", lambda x: F.max_pool2d(x, 2, 2, return_mask=True)[0],
                                 {"x": x}))
    check_program(static_program(tmp_path / "ad", lambda x: F.adaptive_max_pool2d(x, 2), {"x": x}))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_with_nan_match_paddle(tmp_path, dtype):
    import paddle

    r = np.array([[NAN, 1, 2], [1, NAN, 2], [1, 2, NAN], [-INF, -INF, -INF]], dtype=dtype)
    check_program(static_program(tmp_path / "max", lambda x: paddle.max(x, -1), {"x": r}))
    check_program(static_program(tmp_path / "min", lambda x: paddle.min(x, -1), {"x": r}))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logsumexp_over_an_empty_axis_is_minus_inf_like_paddle(tmp_path, dtype):
    x = np.zeros((2, 0), dtype=dtype)
    check_program(opdesc_program(tmp_path, "logsumexp", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                                 attrs={"axis": [-1], "keepdim": False, "reduce_all": False}, feeds={"x": x},
                                 extra_vars=[{"name": "out", "dtype": dtype, "shape": []}]))


CAST_EDGES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, NAN, INF, -INF, 3e9, -3e9, 1e20, -1e20, 255.9, 256.0, -129.0,
              65535.0, 40000.0]


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
@pytest.mark.parametrize("source", ["float32", "float64"])
def test_cast_of_nan_inf_and_out_of_range_to_integers_matches_paddle(tmp_path, source, device):
    """Paddle's static_cast on x86: truncation into int32 (int64 for int64), INT_MIN for NaN/inf/out of range,
    the low bits for narrower types; NaN is true as a bool."""
    import paddle

    from support.converter_harness import pir_program, run_predictor

    targets = ["int8", "int32", "int64", "uint8", "bool"]  # Paddle Inference cannot hand back int16 outputs
    x = np.array(CAST_EDGES, dtype=source)
    saved = pir_program(tmp_path, lambda x: [paddle.cast(x, t) for t in targets], {"x": x})
    got = run_predictor(saved, device)
    for target, g, want in zip(targets, got, saved.outputs):
        assert g.dtype == want.dtype, f"{target}: dtype {g.dtype}, Paddle {want.dtype}"
        np.testing.assert_array_equal(g, want, err_msg=f"cast {source} -> {target} on {device}")


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_round_ties_go_away_from_zero_like_paddle(tmp_path, device):
    import paddle

    from support.converter_harness import pir_program, run_predictor

    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, NAN, INF, -INF, 3e9, 0.49999997, -0.0], np.float32)
    saved = pir_program(tmp_path, lambda x: paddle.round(x), {"x": x})
    np.testing.assert_array_equal(run_predictor(saved, device)[0], saved.outputs[0])


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack"])
@pytest.mark.parametrize("length", [7, 8, 9, 32])
def test_softmax_of_a_row_of_minus_inf_matches_paddle(tmp_path, device, length):
    """Paddle's float32 last-axis softmax gives a row of -inf 1 / n when the row is whole AVX blocks (n % 8 == 0:
    its vector clip turns -inf - -inf into -64) and NaN otherwise, also on another axis; what DeBERTa-v2's
    -inf attention mask gives every padded query. A row with some -inf entries is an ordinary softmax."""
    import paddle

    from support.converter_harness import pir_program, run_predictor
    from support.tolerances import assert_op_close

    x = np.random.default_rng(7).standard_normal((3, 4, length)).astype(np.float32)
    x[0, 1, :] = -INF
    x[1, 2, ::2] = -INF
    x[2, :, 3] = -INF  # a column of -inf: the axis-1 softmax's row of -inf
    saved = pir_program(tmp_path, lambda x: [paddle.nn.functional.softmax(x, -1),
                                             paddle.nn.functional.softmax(x, 1)], {"x": x})
    got = run_predictor(saved, device)
    assert np.isnan(saved.outputs[0][0, 1]).all() == (length % 8 != 0)  # the case this test is about is Paddle's
    for k, (g, want) in enumerate(zip(got, saved.outputs)):
        assert_op_close(g, want, what=f"softmax {k} of rows of {length} on {device}")
