"""Converters of the NN layers: convolutions (conv.py), pooling (pool.py), normalizations (normalization.py),
matrix products (matmul.py), softmax and dropout (activation.py). Each test is a one-op Paddle program
converted, run on builtin_device and compared with what Paddle computes for the same saved program (DESIGN.md
single-operation tolerance unless a comment says why not).
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import ConversionError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from support.converter_harness import check_program, convert_and_run, opdesc_program, pir_program, static_program
from support.tolerances import assert_op_close

rng = np.random.default_rng(20240607)

# Convolutions and matmuls sum tens to hundreds of products of ~1-magnitude terms; float32 summation
# order differs from Paddle's (im2col + BLAS vs. its own kernels), so the absolute error grows with the
# number of terms: 1e-4 covers ~300 terms at these magnitudes.
SUM_ATOL = 1e-4


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def sub(tmp_path, name):
    """A fresh directory for one of several programs a test saves."""
    path = tmp_path / name
    path.mkdir()
    return path


def operation_types(result):
    return [op.type for op in result.model.operations]


# -- conv2d / depthwise_conv2d ------------------------------------------------------------------------

CONV_CASES = [
    # (op type, input shape, filter shape, attrs)
    ("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), {}),
    ("conv2d", (2, 4, 9, 7), (6, 4, 3, 3), {"strides": [2, 1], "paddings": [1, 1], "dilations": [1, 1]}),
    ("conv2d", (1, 4, 9, 9), (4, 2, 3, 3), {"paddings": [1, 2, 0, 1], "groups": 2, "dilations": [2, 1]}),
    ("conv2d", (1, 3, 10, 9), (5, 3, 3, 2), {"strides": [2, 3], "padding_algorithm": "SAME", "dilations": [2, 2]}),
    ("conv2d", (1, 3, 10, 9), (5, 3, 3, 3), {"strides": [2, 2], "paddings": [3, 3], "padding_algorithm": "VALID"}),
    ("depthwise_conv2d", (1, 6, 8, 8), (6, 1, 3, 3), {"groups": 6, "paddings": [1, 1], "strides": [2, 2]}),
    ("depthwise_conv2d", (2, 4, 7, 7), (8, 1, 3, 3), {"groups": 4, "paddings": [1, 1]}),
]


def _conv_attrs(attrs):
    full = {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
            "padding_algorithm": "EXPLICIT", "data_format": "NCHW"}
    full.update(attrs)
    return full


@pytest.mark.parametrize("op_type,x_shape,w_shape,attrs", CONV_CASES)
def test_conv2d(tmp_path, op_type, x_shape, w_shape, attrs):
    saved = opdesc_program(tmp_path, op_type, inputs={"Input": ["x"], "Filter": ["w"]}, outputs={"Output": ["out"]},
                           attrs=_conv_attrs(attrs), feeds={"x": randn(*x_shape)}, params={"w": randn(*w_shape)})
    _, result = check_program(saved, atol=SUM_ATOL)
    assert operation_types(result) == [T.CONV_2D]


def test_conv2d_missing_attrs_take_paddle_defaults(tmp_path):
    # An exporter that drops default attributes: strides/paddings/dilations/groups fall back to Paddle's.
    feeds, params = {"x": randn(1, 2, 6, 6)}, {"w": randn(3, 2, 3, 3)}
    full = opdesc_program(sub(tmp_path, "full"), "conv2d", inputs={"Input": ["x"], "Filter": ["w"]},
                          outputs={"Output": ["out"]}, attrs=_conv_attrs({}), feeds=feeds, params=params)
    bare = opdesc_program(sub(tmp_path, "bare"), "conv2d", inputs={"Input": ["x"], "Filter": ["w"]},
                          outputs={"Output": ["out"]}, attrs={}, feeds=feeds, params=params, run_paddle=False)
    check_program(bare, want=full.outputs, atol=SUM_ATOL)


def _act_oracle(act, y, attrs):
    if act in ("relu", ""):
        return np.maximum(y, 0)
    if act == "relu6":
        return np.clip(y, 0, 6)
    if act == "relu1":
        return np.clip(y, -1, 1)
    if act == "leaky_relu":
        return np.where(y >= 0, y, y * attrs.get("leaky_relu_alpha", 0.02))
    if act == "hard_swish":
        t, s, o = (
            attrs.get("hard_swish_threshold", 6.0),
            attrs.get("hard_swish_scale", 6.0),
            attrs.get("hard_swish_offset", 3.0),
        )
        return y * np.minimum(np.maximum(y + o, 0), t) / s
    if act == "sigmoid":
        return 1 / (1 + np.exp(-y))
    if act == "tanh":
        return np.tanh(y)
    if act == "abs":
        return np.abs(y)
    raise AssertionError(act)


@pytest.mark.parametrize("act_attrs,extra_ops", [
    ({"with_act": True, "act_type": "relu"}, []),
    ({"fuse_relu": True}, []),
    ({"with_act": True, "act_type": "relu6"}, []),
    ({"with_act": True, "act_type": "relu1"}, []),
    ({"with_act": True, "act_type": "leaky_relu", "leaky_relu_alpha": 0.1}, [T.LEAKY_RELU]),
    ({"with_act": True, "act_type": "hard_swish"}, [T.HARD_SWISH]),
    ({"with_act": True, "act_type": "hard_swish", "hard_swish_threshold": 5.0, "hard_swish_scale": 6.5,
      "hard_swish_offset": 2.5}, [T.HARD_SWISH, T.MUL]),
    ({"with_act": True, "act_type": "sigmoid"}, [T.SIGMOID]),
    ({"with_act": True, "act_type": "tanh"}, [T.TANH]),
    ({"with_act": True, "act_type": "abs"}, [T.ABS]),
])
def test_conv2d_fused_activation(tmp_path, act_attrs, extra_ops):
    # Paddle's own conv2d kernel ignores these fusion attributes (they come from Paddle Lite's fuse
    # passes), so the expectation is Paddle's plain conv2d followed by the activation in numpy.
    feeds, params = {"x": randn(1, 3, 7, 7, scale=2.0)}, {"w": randn(4, 3, 3, 3)}
    attrs = _conv_attrs({"paddings": [1, 1]})
    plain = opdesc_program(sub(tmp_path, "plain"), "conv2d", inputs={"Input": ["x"], "Filter": ["w"]},
                           outputs={"Output": ["out"]}, attrs=attrs, feeds=feeds, params=params)
    fused = opdesc_program(sub(tmp_path, "fused"), "conv2d", inputs={"Input": ["x"], "Filter": ["w"]},
                           outputs={"Output": ["out"]}, attrs={**attrs, **act_attrs}, feeds=feeds, params=params,
                           run_paddle=False)
    act = act_attrs.get("act_type", "relu")
    want = _act_oracle(act, plain.outputs[0].astype(np.float64), act_attrs).astype(np.float32)
    _, result = check_program(fused, want=[want], atol=SUM_ATOL)
    assert operation_types(result) == [T.CONV_2D] + extra_ops


def test_conv2d_with_bias_input(tmp_path):
    # Paddle Lite's fused conv2d carries a Bias input; the expectation adds it to Paddle's plain conv2d.
    feeds, w, b = {"x": randn(1, 3, 6, 6)}, randn(5, 3, 3, 3), randn(5)
    plain = opdesc_program(sub(tmp_path, "plain"), "conv2d", inputs={"Input": ["x"], "Filter": ["w"]},
                           outputs={"Output": ["out"]}, attrs=_conv_attrs({}), feeds=feeds, params={"w": w})
    biased = opdesc_program(sub(tmp_path, "biased"), "conv2d", inputs={"Input": ["x"], "Filter": ["w"], "Bias": ["b"]},
                            outputs={"Output": ["out"]}, attrs=_conv_attrs({}), feeds=feeds,
                            params={"w": w, "b": b}, run_paddle=False)
    check_program(biased, want=[plain.outputs[0] + b.reshape(1, 5, 1, 1)], atol=SUM_ATOL)


def test_conv2d_nhwc(tmp_path):
    saved = opdesc_program(tmp_path, "conv2d", inputs={"Input": ["x"], "Filter": ["w"]}, outputs={"Output": ["out"]},
                           attrs=_conv_attrs({"data_format": "NHWC", "paddings": [1, 1], "strides": [2, 2]}),
                           feeds={"x": randn(2, 7, 6, 3)}, params={"w": randn(4, 3, 3, 3)})
    _, result = check_program(saved, atol=SUM_ATOL)
    assert operation_types(result) == [T.TRANSPOSE, T.CONV_2D, T.TRANSPOSE]


def test_conv2d_static_builder(tmp_path):
    # The same op as paddle's static API writes it (its own attribute set), with a bias add after it.
    import paddle

    def build(x):
        conv = paddle.nn.Conv2D(3, 4, 3, stride=2, padding=1, groups=1)
        return conv(x)

    check_program(static_program(tmp_path, build, {"x": randn(1, 3, 9, 9)}), atol=SUM_ATOL)


def test_conv2d_unsupported_activation_is_rejected(tmp_path):
    saved = opdesc_program(tmp_path, "conv2d", inputs={"Input": ["x"], "Filter": ["w"]}, outputs={"Output": ["out"]},
                           attrs=_conv_attrs({"with_act": True, "act_type": "softsign"}),
                           feeds={"x": randn(1, 3, 5, 5)}, params={"w": randn(2, 3, 3, 3)}, run_paddle=False)
    with pytest.raises(ConversionError, match="softsign"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


# -- conv2d_transpose -------------------------------------------------------------------------------

CONV_T_CASES = [
    ("conv2d_transpose", (1, 3, 5, 5), (3, 4, 3, 3), {}),
    ("conv2d_transpose", (2, 4, 4, 5), (4, 2, 3, 3), {"strides": [2, 2], "paddings": [1, 1], "groups": 2}),
    ("conv2d_transpose", (1, 3, 4, 4), (3, 2, 4, 3), {"strides": [2, 3], "paddings": [1, 0, 1, 2],
                                                      "dilations": [1, 2]}),
    ("conv2d_transpose", (1, 3, 5, 5), (3, 2, 3, 3), {"strides": [2, 2], "paddings": [1, 1],
                                                      "output_padding": [1, 1]}),
    ("conv2d_transpose", (1, 3, 5, 5), (3, 2, 3, 3), {"strides": [2, 2], "paddings": [1, 1],
                                                      "output_size": [10, 10]}),
    ("conv2d_transpose", (1, 3, 5, 6), (3, 2, 3, 3), {"strides": [2, 2], "padding_algorithm": "SAME"}),
    ("conv2d_transpose", (1, 3, 5, 6), (3, 2, 3, 3), {"strides": [2, 1], "padding_algorithm": "VALID"}),
    ("depthwise_conv2d_transpose", (1, 4, 5, 5), (4, 1, 3, 3), {"groups": 4, "strides": [2, 2], "paddings": [1, 1]}),
]


@pytest.mark.parametrize("op_type,x_shape,w_shape,attrs", CONV_T_CASES)
def test_conv2d_transpose(tmp_path, op_type, x_shape, w_shape, attrs):
    full = _conv_attrs({"output_padding": [], "output_size": []})
    full.update(attrs)
    saved = opdesc_program(tmp_path, op_type, inputs={"Input": ["x"], "Filter": ["w"]}, outputs={"Output": ["out"]},
                           attrs=full, feeds={"x": randn(*x_shape)}, params={"w": randn(*w_shape)})
    _, result = check_program(saved, atol=SUM_ATOL)
    assert operation_types(result) == [T.CONV_2D_TRANSPOSE]


def test_conv2d_transpose_static_builder(tmp_path):
    import paddle

    def build(x):
        return paddle.nn.Conv2DTranspose(3, 2, 3, stride=2, padding=1, output_padding=1)(x)

    check_program(static_program(tmp_path, build, {"x": randn(1, 3, 4, 4)}), atol=SUM_ATOL)


# -- unfold -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,strides,paddings,dilations", [
    ([2, 2], 1, 0, 1),
    ([3, 2], [2, 1], [1, 0, 2, 1], [1, 2]),  # per-side paddings [top, left, bottom, right], dilated columns
    ([2, 3], 2, [1, 2], 1),  # a stride that leaves the last rows and columns out
    ([7, 7], 1, 3, 1),  # RedNet's involution (kernel 7, padding 3)
])
def test_unfold(tmp_path, kernel, strides, paddings, dilations):
    """'unfold' (RedNet's involution, TNT's inner patches) is slices of the padded input: exact, like Paddle's
    im2col, and the whole op converts (no host kernel)."""
    import paddle

    x = randn(2, 3, 9, 8)
    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.unfold(x, kernel, strides, paddings, dilations),
                        {"x": x})
    _, result = check_program(saved, atol=0.0, rtol=0.0)
    assert set(operation_types(result)) <= {T.PAD, T.SLICE, T.STACK, T.RESHAPE}


@pytest.mark.parametrize("output_sizes,kernel", [([8, 6], [2, 2]), ([6, 6], [3, 1])])
def test_fold_of_tiling_blocks(tmp_path, output_sizes, kernel):
    """'fold' of blocks that tile the output (MobileViTV2 folds its patches back) is a reshape and a transpose."""
    import paddle

    blocks = (output_sizes[0] // kernel[0]) * (output_sizes[1] // kernel[1])
    x = randn(2, 3 * kernel[0] * kernel[1], blocks)
    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.fold(x, output_sizes, kernel, kernel), {"x": x})
    _, result = check_program(saved, atol=0.0, rtol=0.0)
    assert set(operation_types(result)) <= {T.RESHAPE, T.TRANSPOSE}


def test_fold_of_overlapping_blocks_is_left_to_the_host(tmp_path):
    import paddle

    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.fold(x, [5, 6], [3, 3], 1, 1), {"x": randn(1, 18, 30)})
    with pytest.raises(ConversionError, match="tile the output"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


# -- pool2d -------------------------------------------------------------------------------------------

def _pool_attrs(attrs):
    full = {"pooling_type": "max", "ksize": [2, 2], "strides": [1, 1], "paddings": [0, 0], "global_pooling": False,
            "adaptive": False, "ceil_mode": False, "exclusive": True, "padding_algorithm": "EXPLICIT",
            "data_format": "NCHW"}
    full.update(attrs)
    return full


POOL_CASES = [
    ({"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, (1, 3, 9, 9), [T.MAX_POOL_2D]),
    (
        {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
        (1, 3, 9, 9),
        [T.AVERAGE_POOL_2D],
    ),
    (
        {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1], "exclusive": False},
        (2, 2, 9, 8),
        [T.AVERAGE_POOL_2D],
    ),
    (
        {"pooling_type": "avg", "ksize": [3, 2], "strides": [2, 2], "paddings": [1, 0, 0, 1]},
        (1, 2, 8, 7),
        [T.AVERAGE_POOL_2D],
    ),
    ({"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "ceil_mode": True}, (1, 2, 8, 8), [T.MAX_POOL_2D]),
    ({"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "ceil_mode": True}, (1, 2, 8, 8), [T.AVERAGE_POOL_2D]),
    (
        {
            "pooling_type": "avg",
            "ksize": [3, 3],
            "strides": [2, 2],
            "ceil_mode": True,
            "exclusive": False,
            "paddings": [1, 1],
        },
        (1, 2, 7, 7),
        [T.AVERAGE_POOL_2D],
    ),  # ceil adds no partial window here
    (
        {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "padding_algorithm": "SAME"},
        (1, 2, 8, 7),
        [T.MAX_POOL_2D],
    ),
    (
        {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "padding_algorithm": "SAME"},
        (1, 2, 8, 7),
        [T.AVERAGE_POOL_2D],
    ),
    (
        {"pooling_type": "avg", "ksize": [2, 3], "strides": [1, 2], "paddings": [1, 1], "padding_algorithm": "VALID"},
        (1, 2, 6, 7),
        [T.AVERAGE_POOL_2D],
    ),
    ({"pooling_type": "max", "global_pooling": True, "paddings": [1, 1]}, (2, 3, 5, 6), [T.MAX_POOL_2D]),
    ({"pooling_type": "avg", "global_pooling": True}, (2, 3, 5, 6), [T.AVERAGE_POOL_2D]),
    ({"pooling_type": "avg", "adaptive": True, "ksize": [1, 1]}, (2, 3, 5, 6), [T.AVERAGE_POOL_2D]),
    ({"pooling_type": "avg", "adaptive": True, "ksize": [3, 2]}, (1, 3, 7, 6), [T.ADAPTIVE_AVERAGE_POOL_2D]),
    (
        {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "data_format": "NHWC"},
        (1, 6, 6, 3),
        [T.TRANSPOSE, T.MAX_POOL_2D, T.TRANSPOSE],
    ),
    (
        {"pooling_type": "avg", "adaptive": True, "ksize": [2, 2], "data_format": "NHWC"},
        (1, 6, 5, 3),
        [T.TRANSPOSE, T.ADAPTIVE_AVERAGE_POOL_2D, T.TRANSPOSE],
    ),
]


@pytest.mark.parametrize("attrs,x_shape,ops", POOL_CASES)
def test_pool2d(tmp_path, attrs, x_shape, ops):
    saved = opdesc_program(tmp_path, "pool2d", inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs=_pool_attrs(attrs),
                           feeds={"x": randn(*x_shape)})
    _, result = check_program(saved)
    assert operation_types(result) == ops


# -- pool3d (strided slices axis by axis) ---------------------------------------------------------------

POOL3D_CASES = [
    # UHRNet's channel-pair average: avg_pool3d of x.unsqueeze(1) with kernel (2, 1, 1), stride (2, 1, 1)
    ((1, 1, 6, 5, 4), dict(kernel_size=(2, 1, 1), stride=(2, 1, 1))),
    ((2, 3, 7, 6, 5), dict(kernel_size=3, stride=2)),
    ((2, 3, 7, 6, 5), dict(kernel_size=(3, 2, 2), stride=(1, 2, 3))),
    ((1, 4, 5, 6, 2), dict(kernel_size=(2, 2, 2), stride=2, data_format="NDHWC")),
    ((1, 2, 9, 6, 6), dict(kernel_size=(3, 2, 2), stride=(3, 2, 2), ceil_mode=True)),  # no partial window
]


@pytest.mark.parametrize("x_shape,kwargs", POOL3D_CASES)
def test_pool3d_average_window(tmp_path, x_shape, kwargs):
    import paddle

    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.avg_pool3d(x, **kwargs), {"x": randn(*x_shape)})
    _, result = check_program(saved)
    assert {origin.type for origin in result.operation_origin if origin is not None} == {"pool3d"}
    assert T.SLICE in operation_types(result)


def test_pool3d_global_average(tmp_path):
    import paddle  # (adaptive_max_pool3d lowers to max_pool3d_with_index, not pool3d)

    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.adaptive_avg_pool3d(x, 1), {"x": randn(2, 3, 4, 5, 6)})
    _, result = check_program(saved)
    assert operation_types(result) == [T.REDUCE_MEAN]


@pytest.mark.parametrize("kind,kwargs,reason", [("avg", dict(padding=1), "padding"), ("max", {}, "NaN")])
def test_pool3d_declines_padding_and_max(tmp_path, kind, kwargs, reason):
    import paddle

    pool = getattr(paddle.nn.functional, f"{kind}_pool3d")
    saved = pir_program(tmp_path, lambda x: pool(x, 3, 2, **kwargs), {"x": randn(1, 2, 5, 5, 5)})
    with pytest.raises(ConversionError, match=reason):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


def test_pool3d_kernel_beyond_the_input_declines(tmp_path):
    attrs = {"pooling_type": "avg", "ksize": [3, 1, 1], "strides": [1, 1, 1], "paddings": [0, 0, 0],
             "global_pooling": False, "adaptive": False, "ceil_mode": False, "exclusive": True,
             "padding_algorithm": "EXPLICIT", "data_format": "NCDHW"}
    saved = opdesc_program(tmp_path, "pool3d", inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs=attrs,
                           feeds={"x": randn(1, 2, 2, 3, 3)}, run_paddle=False)
    with pytest.raises(ConversionError, match="larger than the input"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


def test_pool2d_adaptive_max(tmp_path):
    # Paddle's API lowers adaptive max pooling to max_pool2d_with_index; a pool2d op with adaptive max
    # (old fluid programs) runs through the legacy pool2d CPU kernel, whose windows for this combination
    # disagree with paddle.nn.functional.adaptive_max_pool2d. The expectation is the API's meaning (the
    # adaptive bins, as Paddle Lite's kernels and ADAPTIVE_MAX_POOL_2D define them).
    import paddle

    x = randn(1, 3, 8, 9)
    saved = opdesc_program(
        tmp_path,
        "pool2d",
        inputs={"X": ["x"]},
        outputs={"Out": ["out"]},
        attrs=_pool_attrs({"pooling_type": "max", "adaptive": True, "ksize": [3, 4]}),
        feeds={"x": x},
        run_paddle=False,
    )
    want = paddle.nn.functional.adaptive_max_pool2d(paddle.to_tensor(x), [3, 4]).numpy()
    _, result = check_program(saved, want=[want])
    assert operation_types(result) == [T.ADAPTIVE_MAX_POOL_2D]


def test_pool2d_defaults(tmp_path):
    # No attributes at all but ksize: max pooling, stride 1, no padding.
    feeds = {"x": randn(1, 2, 5, 5)}
    full = opdesc_program(sub(tmp_path, "full"), "pool2d", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                          attrs=_pool_attrs({}), feeds=feeds)
    bare = opdesc_program(sub(tmp_path, "bare"), "pool2d", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                          attrs={"ksize": [2, 2]}, feeds=feeds, run_paddle=False)
    check_program(bare, want=full.outputs)


@pytest.mark.parametrize("attrs, ops", [
    # The ceil_mode window past the input: Paddle's divisor (extent bounded by size + leading pad) is
    # AVERAGE_POOL_2D's count_include_pad here.
    ({"ceil_mode": True}, [T.AVERAGE_POOL_2D]),
    # A trailing pad larger than the leading one: Paddle still bounds the window by the leading pad, so the
    # converter pools the zero-padded input by the ksize area and corrects each position's divisor.
    ({"paddings": [0, 1, 0, 1]}, [T.PAD, T.AVERAGE_POOL_2D, T.MUL]),
], ids=["ceil", "trailing_pad"])
def test_pool2d_non_exclusive_partial_window_takes_paddles_divisor(tmp_path, attrs, ops):
    saved = opdesc_program(tmp_path, "pool2d", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs=_pool_attrs({"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2],
                                              "exclusive": False, **attrs}),
                           feeds={"x": randn(1, 2, 5, 5)})
    _, result = check_program(saved)
    assert operation_types(result) == ops


def test_pool2d_static_builder(tmp_path):
    import paddle

    def build(x):
        a = paddle.nn.functional.max_pool2d(x, 3, stride=2, padding=1)
        b = paddle.nn.functional.avg_pool2d(x, 2, stride=2, ceil_mode=True)
        c = paddle.nn.functional.adaptive_avg_pool2d(x, 1)
        return a, b, c

    check_program(static_program(tmp_path, build, {"x": randn(2, 3, 7, 7)}))


@pytest.mark.parametrize("attrs,x_shape", [
    ({"ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}, (1, 3, 6, 6)),
    ({"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, (2, 2, 7, 8)),
    ({"ksize": [3, 2], "adaptive": True}, (1, 2, 7, 6)),
    ({"ksize": [1, 1], "global_pooling": True}, (1, 2, 5, 4)),
])
def test_max_pool2d_with_index(tmp_path, attrs, x_shape):
    full = {"ksize": [2, 2], "strides": [1, 1], "paddings": [0, 0], "global_pooling": False, "adaptive": False}
    full.update(attrs)
    saved = opdesc_program(tmp_path, "max_pool2d_with_index", inputs={"X": ["x"]},
                           outputs={"Out": ["out"], "Mask": ["mask"]}, attrs=full, feeds={"x": randn(*x_shape)},
                           extra_vars=[{"name": "mask", "dtype": "int32", "shape": []}])
    check_program(saved)


# -- normalizations ---------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape,layout", [((2, 3, 4, 5), "NCHW"), ((3, 4), "NCHW"), ((2, 3, 5), "NCHW"),
                                            ((2, 4, 5, 3), "NHWC")])
@pytest.mark.parametrize("op_type", ["batch_norm", "sync_batch_norm"])
def test_batch_norm(tmp_path, x_shape, layout, op_type):
    # sync_batch_norm has no CPU kernel in Paddle; at inference it means batch_norm, whose Paddle
    # result is the expectation for both.
    c = x_shape[-1] if layout == "NHWC" else x_shape[1]
    params = {"scale": randn(c), "bias": randn(c), "mean": randn(c), "var": np.abs(randn(c)) + 0.1}
    outs = {"Y": ["y"], "MeanOut": ["mean"], "VarianceOut": ["var"], "SavedMean": ["sm"], "SavedVariance": ["sv"]}
    # MeanOut/VarianceOut share Mean/Variance's vars (Paddle requires it): declare them once, persistable.
    declared = [
        {"name": n, "dtype": "float32", "shape": [c], "persistable": True} for n in ("scale", "bias", "mean", "var")
    ]
    inputs = {"X": ["x"], "Scale": ["scale"], "Bias": ["bias"], "Mean": ["mean"], "Variance": ["var"]}
    attrs = {"epsilon": 1e-3, "is_test": True, "data_layout": layout, "use_global_stats": True, "momentum": 0.9}
    feeds = {"x": randn(*x_shape)}
    reference = opdesc_program(sub(tmp_path, "reference"), "batch_norm", inputs=inputs, outputs=outs, attrs=attrs,
                               feeds=feeds, params=params, extra_vars=declared)
    saved = opdesc_program(sub(tmp_path, "model"), op_type, inputs=inputs, outputs=outs, attrs=attrs, feeds=feeds,
                           params=params, extra_vars=declared, run_paddle=False)
    saved.outputs = reference.outputs[:1]
    got, result, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["y"], saved.outputs[0], what="y")
    assert T.BATCH_NORMALIZATION in operation_types(result)


def test_batch_norm_static_builder(tmp_path):
    import paddle

    def build(x):
        bn = paddle.nn.BatchNorm2D(3, epsilon=1e-4)
        bn.eval()
        return bn(x)

    check_program(static_program(tmp_path, build, {"x": randn(2, 3, 4, 4)}))


@pytest.mark.parametrize("x_shape", [(2, 6), (2, 6, 5)])
def test_batch_norm_without_scale_and_bias(tmp_path, x_shape):
    """A batch norm made with weight_attr=False and bias_attr=False (AdaFace's output layer) exports a PIR batch_norm
    whose Scale and Bias inputs are null: Paddle scales by 1 and shifts by 0."""
    import paddle

    def build(x):
        bn = paddle.nn.BatchNorm1D(6, epsilon=0.5, weight_attr=False, bias_attr=False)  # running stats 0 and 1
        bn.eval()
        return bn(x)

    _, result = check_program(pir_program(tmp_path, build, {"x": randn(*x_shape)}))
    assert T.BATCH_NORMALIZATION in operation_types(result)


@pytest.mark.parametrize("with_affine", [True, False])
def test_instance_norm(tmp_path, with_affine):
    inputs = {"X": ["x"]}
    params = {}
    if with_affine:
        inputs.update(Scale=["scale"], Bias=["bias"])
        params = {"scale": randn(3), "bias": randn(3)}
    saved = opdesc_program(tmp_path, "instance_norm", inputs=inputs,
                           outputs={"Y": ["y"], "SavedMean": ["sm"], "SavedVariance": ["sv"]},
                           attrs={"epsilon": 1e-5}, feeds={"x": randn(2, 3, 4, 5)}, params=params)
    saved.outputs = saved.outputs[:1]
    got, _, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["y"], saved.outputs[0], what="y")


@pytest.mark.parametrize(
    "x_shape,axis,with_affine",
    [((2, 3, 4), 1, True), ((2, 3, 4), 2, True), ((2, 3, 4, 5), 3, True), ((4, 6), 1, False), ((2, 3, 4), 2, False)],
)
def test_layer_norm(tmp_path, x_shape, axis, with_affine):
    norm_size = int(np.prod(x_shape[axis:]))
    inputs, params = {"X": ["x"]}, {}
    if with_affine:
        inputs.update(Scale=["scale"], Bias=["bias"])
        params = {"scale": randn(norm_size), "bias": randn(norm_size)}
    saved = opdesc_program(
        tmp_path,
        "layer_norm",
        inputs=inputs,
        outputs={"Y": ["y"], "Mean": ["m"], "Variance": ["v"]},
        attrs={"begin_norm_axis": axis, "epsilon": 1e-5},
        feeds={"x": randn(*x_shape)},
        params=params,
    )
    saved.outputs = saved.outputs[:1]
    got, _, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["y"], saved.outputs[0], what="y")


def test_layer_norm_static_builder(tmp_path):
    import paddle

    check_program(static_program(tmp_path, lambda x: paddle.nn.LayerNorm([4, 5])(x), {"x": randn(2, 3, 4, 5)}))


@pytest.mark.parametrize("groups,layout,with_affine", [(2, "NCHW", True), (3, "NCHW", False), (1, "NCHW", True),
                                                       (2, "NHWC", True)])
def test_group_norm(tmp_path, groups, layout, with_affine):
    x_shape = (2, 6, 3, 4) if layout == "NCHW" else (2, 3, 4, 6)
    inputs, params = {"X": ["x"]}, {}
    if with_affine:
        inputs.update(Scale=["scale"], Bias=["bias"])
        params = {"scale": randn(6), "bias": randn(6)}
    saved = opdesc_program(
        tmp_path,
        "group_norm",
        inputs=inputs,
        outputs={"Y": ["y"], "Mean": ["m"], "Variance": ["v"]},
        attrs={"groups": groups, "epsilon": 1e-5, "data_layout": layout},
        feeds={"x": randn(*x_shape)},
        params=params,
    )
    saved.outputs = saved.outputs[:1]
    got, _, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["y"], saved.outputs[0], what="y")


@pytest.mark.parametrize(
    "attrs",
    [
        {"n": 5, "k": 2.0, "alpha": 1e-4, "beta": 0.75},
        {"n": 3, "k": 1.0, "alpha": 0.1, "beta": 0.5},
        {"n": 7, "k": 1.5, "alpha": 0.05, "beta": 1.0},
        {},
    ],
)
def test_lrn(tmp_path, attrs):
    saved = opdesc_program(tmp_path, "lrn", inputs={"X": ["x"]}, outputs={"Out": ["out"], "MidOut": ["mid"]},
                           attrs=attrs, feeds={"x": randn(2, 7, 3, 4)})
    saved.outputs = saved.outputs[:1]
    got, _, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["out"], saved.outputs[0], what="out")


@pytest.mark.parametrize("axis,x_shape,scale", [(1, (2, 3, 4), 1.0), (-1, (2, 3, 4), 1.0), (0, (3, 5), 1.0),
                                                (1, (2, 3, 4), 1e-4)])
def test_norm(tmp_path, axis, x_shape, scale):
    # scale 1e-4: tiny vectors, where epsilon inside the root (Paddle) and outside it differ.
    saved = opdesc_program(tmp_path, "norm", inputs={"X": ["x"]}, outputs={"Out": ["out"], "Norm": ["n"]},
                           attrs={"axis": axis, "epsilon": 1e-10, "is_test": True},
                           feeds={"x": randn(*x_shape, scale=scale)})
    # With is_test Paddle leaves Norm uncomputed; Out is the result.
    got, _, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["out"], saved.outputs[0], what="out")


@pytest.mark.parametrize("attrs", [
    {"porder": 2.0, "axis": -1, "keepdim": False},
    {"porder": 2.0, "axis": 1, "keepdim": True},
    {"porder": 1.0, "axis": 0, "keepdim": False},
    {"porder": 3.0, "axis": 2, "keepdim": False},
    {"porder": float("inf"), "axis": 1, "keepdim": False},
    {"porder": float("-inf"), "axis": -1, "keepdim": True},
    {"porder": 2.0, "axis": 0, "asvector": True, "keepdim": False},
])
def test_p_norm(tmp_path, attrs):
    full = {"epsilon": 1e-12, "asvector": False}
    full.update(attrs)
    saved = opdesc_program(tmp_path, "p_norm", inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs=full,
                           feeds={"x": randn(2, 3, 4)})
    check_program(saved)


@pytest.mark.parametrize("porder", [2.0, float("inf"), 3.0])
@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("x_shape", [(1, 3, 9, 9), (5,), ()])
def test_p_norm_asvector_shape(tmp_path, porder, keepdim, x_shape):
    # asvector: Paddle's result is [1] * rank(x) with keepdim (0-D for a 0-D x) and 0-D without it
    # (check_program compares shapes too).
    saved = opdesc_program(tmp_path, "p_norm", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"porder": porder, "axis": -1, "epsilon": 1e-12, "asvector": True, "keepdim": keepdim},
                           feeds={"x": randn(*x_shape)})
    assert saved.outputs[0].shape == ((1,) * len(x_shape) if keepdim else ())
    check_program(saved)


@pytest.mark.parametrize("keepdim", [True, False])
def test_p_norm_linalg_norm_whole_tensor(tmp_path, keepdim):
    import paddle

    saved = static_program(tmp_path, lambda x: paddle.linalg.norm(x, p=3, axis=None, keepdim=keepdim),
                           {"x": randn(1, 3, 9, 9)})
    check_program(saved)


# -- softmax / log_softmax / dropout -----------------------------------------------------------------

@pytest.mark.parametrize("op_type", ["softmax", "log_softmax"])
@pytest.mark.parametrize(
    "axis,x_shape", [(-1, (2, 5)), (1, (2, 3, 4)), (0, (3, 4)), (-2, (2, 3, 4, 2)), (None, (2, 3, 4))]
)
def test_softmax(tmp_path, op_type, axis, x_shape):
    attrs = {} if axis is None else {"axis": axis}
    saved = opdesc_program(tmp_path, op_type, inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs=attrs,
                           feeds={"x": randn(*x_shape, scale=3.0)})
    check_program(saved)


def test_softmax_static_builder(tmp_path):
    import paddle

    check_program(static_program(tmp_path, lambda x: paddle.nn.functional.softmax(x, axis=1), {"x": randn(2, 3, 4)}))


@pytest.mark.parametrize(
    "impl,prob", [("upscale_in_train", 0.3), ("downgrade_in_infer", 0.3), (None, 0.5), (None, None)]
)
def test_dropout(tmp_path, impl, prob):
    attrs = {"is_test": True}
    if impl is not None:
        attrs["dropout_implementation"] = impl
    if prob is not None:
        attrs["dropout_prob"] = prob
    saved = opdesc_program(tmp_path, "dropout", inputs={"X": ["x"]}, outputs={"Out": ["out"], "Mask": ["mask"]},
                           attrs=attrs, feeds={"x": randn(2, 3)},
                           extra_vars=[{"name": "mask", "dtype": "uint8", "shape": []}])
    saved.outputs = saved.outputs[:1]
    got, result, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["out"], saved.outputs[0], what="out")
    assert operation_types(result) == [T.MUL]


# -- matrix products --------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape,y_shape,attrs", [
    ((3, 4), (4, 5), {}),
    ((2, 3, 4), (2, 4, 5), {}),
    ((2, 3, 4), (4, 5), {"transpose_X": False, "transpose_Y": False, "alpha": 0.5}),
    ((2, 4, 3), (2, 5, 4), {"transpose_X": True, "transpose_Y": True}),
    ((3, 4), (5, 4), {"transpose_Y": True, "alpha": 2.0}),
    ((2, 2, 3, 4), (4, 6), {}),
    ((4,), (4, 3), {}),
])
def test_matmul(tmp_path, x_shape, y_shape, attrs):
    saved = opdesc_program(tmp_path, "matmul", inputs={"X": ["x"], "Y": ["y"]}, outputs={"Out": ["out"]}, attrs=attrs,
                           feeds={"x": randn(*x_shape), "y": randn(*y_shape)})
    _, result = check_program(saved)
    assert operation_types(result) == ([T.MAT_MUL, T.MUL] if attrs.get("alpha", 1.0) != 1.0 else [T.MAT_MUL])


def test_matmul_two_vectors_is_rejected(tmp_path):
    saved = opdesc_program(tmp_path, "matmul", inputs={"X": ["x"], "Y": ["y"]}, outputs={"Out": ["out"]}, attrs={},
                           feeds={"x": randn(4), "y": randn(4)}, run_paddle=False)
    with pytest.raises(ConversionError, match="1-D"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


@pytest.mark.parametrize("x_shape,y_shape,attrs", [
    ((3, 4), (4, 5), {}),
    ((2, 3, 4), (4, 5), {"trans_x": False, "trans_y": False}),
    ((2, 4, 3), (5, 4), {"trans_x": True, "trans_y": True}),
    ((1, 3, 4), (2, 4, 5), {}),
    ((4,), (4,), {}),
    ((4,), (2, 4, 3), {}),
    ((2, 3, 4), (4,), {}),
])
def test_matmul_v2(tmp_path, x_shape, y_shape, attrs):
    saved = opdesc_program(tmp_path, "matmul_v2", inputs={"X": ["x"], "Y": ["y"]}, outputs={"Out": ["out"]},
                           attrs=attrs, feeds={"x": randn(*x_shape), "y": randn(*y_shape)})
    check_program(saved)


def test_matmul_v2_with_weight_static_builder(tmp_path):
    import paddle

    check_program(static_program(tmp_path, lambda x: paddle.nn.Linear(6, 3)(x), {"x": randn(2, 6)}))


def test_bmm(tmp_path):
    saved = opdesc_program(tmp_path, "bmm", inputs={"X": ["x"], "Y": ["y"]}, outputs={"Out": ["out"]},
                           feeds={"x": randn(3, 2, 4), "y": randn(3, 4, 2)})
    check_program(saved)


@pytest.mark.parametrize("shape", [(5,), (3, 5)])
def test_dot(tmp_path, shape):
    saved = opdesc_program(tmp_path, "dot", inputs={"X": ["x"], "Y": ["y"]}, outputs={"Out": ["out"]},
                           feeds={"x": randn(*shape), "y": randn(*shape)})
    check_program(saved)


# (equation, operand shapes): XLNet's relative attention, ChatGLM's / CodeGen's rotary tables (an outer product),
# and the other forms: a plain and a batched product, a transpose, a sum, an implicit output, two contracted
# labels, a label summed out of one side, a dot product to a 0-D result.
EINSUM_CASES = [
    ("ibnd,jbnd->bnij", [(5, 2, 3, 4), (6, 2, 3, 4)]), ("ibnd,snd->ibns", [(5, 2, 3, 4), (7, 3, 4)]),
    ("ijbs,ibns->bnij", [(5, 6, 2, 7), (5, 2, 3, 7)]), ("bnij,jbnd->ibnd", [(2, 3, 5, 6), (6, 2, 3, 4)]),
    ("ibm,hm->ibh", [(5, 2, 8), (6, 8)]), ("i,j->ij", [(5,), (8,)]), ("i,d->id", [(5,), (8,)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]),
    ("ijk->j", [(2, 3, 4)]), ("ij,jk", [(3, 4), (4, 5)]), ("abcd,cd->ab", [(2, 3, 4, 5), (4, 5)]),
    ("ij,k->i", [(3, 4), (5,)]), ("i,i->", [(6,), (6,)]), ("bij,bkj->bki", [(2, 3, 4), (2, 5, 4)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum(tmp_path, equation, shapes):
    import paddle

    from support.converter_harness import run_pir

    feeds = {f"x{k}": randn(*shape) for k, shape in enumerate(shapes)}
    run_pir(tmp_path, "einsum", lambda **xs: paddle.einsum(equation, *xs.values()), feeds, exact=True)


@pytest.mark.parametrize("equation,reason", [("...ij,jk->...ik", "ellipsis"), ("ii->i", "diagonal"),
                                             ("ij,jk->il", "no operand has")])
def test_einsum_forms_not_converted_say_why(equation, reason):
    from converters.matmul import einsum_labels

    parsed = einsum_labels(equation, 1 if "," not in equation else 2)
    assert isinstance(parsed, str) and reason in parsed


@pytest.mark.parametrize("x_shape,y_shape,attrs", [
    ((3, 4), (4, 5), {}),
    ((2, 3, 4), (12, 5), {"x_num_col_dims": 1, "y_num_col_dims": 1}),
    ((2, 3, 4), (4, 5), {"x_num_col_dims": 2}),
    ((2, 3, 2, 2), (4, 5), {"x_num_col_dims": 2}),
    ((2, 6), (2, 3, 4), {"x_num_col_dims": 1, "y_num_col_dims": 2}),
    ((2, 6), (6, 2, 2), {"y_num_col_dims": 1}),
])
@pytest.mark.parametrize("y_is_param", [True, False])
def test_mul(tmp_path, x_shape, y_shape, attrs, y_is_param):
    feeds, params = {"x": randn(*x_shape)}, {}
    (params if y_is_param else feeds)["y"] = randn(*y_shape)
    saved = opdesc_program(tmp_path, "mul", inputs={"X": ["x"], "Y": ["y"]}, outputs={"Out": ["out"]}, attrs=attrs,
                           feeds=feeds, params=params)
    check_program(saved)


@pytest.mark.parametrize("x_shape,num_col_dims,act,with_bias", [
    ((3, 6), 1, "", True),
    ((2, 3, 2, 2), 1, "relu", True),
    ((2, 3, 4), 2, "", False),
    ((2, 3, 4), 2, "relu", True),
])
def test_fc(tmp_path, x_shape, num_col_dims, act, with_bias):
    k = int(np.prod(x_shape[num_col_dims:]))
    inputs, params = {"Input": ["x"], "W": ["w"]}, {"w": randn(k, 5)}
    if with_bias:
        inputs["Bias"] = ["b"]
        params["b"] = randn(5)
    saved = opdesc_program(tmp_path, "fc", inputs=inputs, outputs={"Out": ["out"]},
                           attrs={"in_num_col_dims": num_col_dims, "activation_type": act},
                           feeds={"x": randn(*x_shape)}, params=params)
    _, result = check_program(saved)
    assert T.MAT_MUL in operation_types(result)


@pytest.mark.parametrize("act", ["relu6", "sigmoid", "leaky_relu"])
def test_fc_unpacked_activation(tmp_path, act):
    # Paddle's fc kernel only applies relu; other activations (fused by Paddle Lite's passes) are
    # checked against Paddle's plain fc followed by the activation in numpy.
    feeds, params = {"x": randn(3, 6, scale=2.0)}, {"w": randn(6, 4), "b": randn(4)}
    inputs = {"Input": ["x"], "W": ["w"], "Bias": ["b"]}
    plain = opdesc_program(sub(tmp_path, "plain"), "fc", inputs=inputs, outputs={"Out": ["out"]},
                           attrs={"in_num_col_dims": 1}, feeds=feeds, params=params)
    fused = opdesc_program(sub(tmp_path, "fused"), "fc", inputs=inputs, outputs={"Out": ["out"]},
                           attrs={"in_num_col_dims": 1, "activation_type": act}, feeds=feeds, params=params,
                           run_paddle=False)
    want = _act_oracle(act, plain.outputs[0].astype(np.float64), {}).astype(np.float32)
    check_program(fused, want=[want])


def test_fc_missing_attrs_take_defaults(tmp_path):
    feeds, params = {"x": randn(2, 3, 2)}, {"w": randn(6, 4), "b": randn(4)}
    inputs = {"Input": ["x"], "W": ["w"], "Bias": ["b"]}
    full = opdesc_program(sub(tmp_path, "full"), "fc", inputs=inputs, outputs={"Out": ["out"]},
                          attrs={"in_num_col_dims": 1, "activation_type": ""}, feeds=feeds, params=params)
    bare = opdesc_program(sub(tmp_path, "bare"), "fc", inputs=inputs, outputs={"Out": ["out"]}, attrs={},
                          feeds=feeds, params=params, run_paddle=False)
    check_program(bare, want=full.outputs)
