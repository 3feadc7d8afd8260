"""Activations, unary math, prelu, pow, clip and scale: single-op Paddle programs converted to NNAdapter,
run on builtin_device and compared with Paddle running the same program."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from support.converter_harness import check_program, opdesc_program, static_program

RNG = np.random.default_rng(7)


def randn(*shape, scale=3.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def positive(*shape):
    return (np.abs(RNG.standard_normal(shape)) * 2 + 0.05).astype(np.float32)


def unary_op(tmp_path, op_type, x, attrs=None, *, out_dtype=None, extra_inputs=None, feeds=None, params=None,
             run_paddle=True):
    inputs = {"X": ["x"], **(extra_inputs or {})}
    return opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["out"]}, attrs=attrs or {},
                          feeds={"x": x, **(feeds or {})}, params=params, run_paddle=run_paddle,
                          extra_vars=[{"name": "out", "dtype": out_dtype or x.dtype.name, "shape": []}])


def operation_types(result):
    return [op.type for op in result.model.operations]


# -- activations with default attributes (default exporters drop "extra" attrs) ----------------------------

ANY_SIGN = ["relu", "relu6", "sigmoid", "tanh", "abs", "exp", "floor", "square", "sin", "cos", "silu", "swish",
            "leaky_relu", "hard_sigmoid", "hard_swish", "gelu", "softplus", "mish", "logsigmoid", "elu", "selu",
            "brelu", "softsign", "tanh_shrink", "thresholded_relu", "hard_shrink", "softshrink", "reciprocal",
            "ceil", "round", "sign"]
POSITIVE_ONLY = ["log", "rsqrt", "sqrt", "log2", "log10", "log1p"]


@pytest.mark.parametrize("op_type", ANY_SIGN + POSITIVE_ONLY)
def test_activation_default_attrs(tmp_path, op_type):
    x = positive(2, 3, 4, 5) if op_type in POSITIVE_ONLY else randn(2, 3, 4, 5)
    if op_type == "reciprocal":
        x = np.where(np.abs(x) < 0.1, 0.5, x).astype(np.float32)
    check_program(unary_op(tmp_path, op_type, x))


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("op_type", ["relu", "sigmoid", "hard_swish", "elu"])
def test_activation_ranks(tmp_path, op_type, shape):
    check_program(unary_op(tmp_path, op_type, randn(*shape)))


@pytest.mark.parametrize("op_type,attrs", [
    ("relu6", {"threshold": 6.0}),
    ("leaky_relu", {"alpha": 0.1}),
    ("leaky_relu", {"alpha": 0.02}),
    ("hard_sigmoid", {"slope": 0.1666667, "offset": 0.5}),
    ("hard_sigmoid", {"slope": 0.25, "offset": 0.3}),
    ("hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    ("swish", {"beta": 1.0}),
    ("gelu", {"approximate": False}),
    ("gelu", {"approximate": True}),
    ("softplus", {"beta": 2.0, "threshold": 3.0}),
    ("softplus", {"beta": 0.5, "threshold": 20.0}),
    ("mish", {"threshold": 2.0}),
    ("elu", {"alpha": 0.5}),
    ("selu", {"scale": 1.2, "alpha": 1.5}),
    ("brelu", {"t_min": -1.0, "t_max": 2.0}),
    ("thresholded_relu", {"threshold": 0.5, "value": 0.0}),
    ("thresholded_relu", {"threshold": -1.0, "value": 2.0}),
    ("hard_shrink", {"threshold": 1.5}),
    ("softshrink", {"lambda": 1.0}),
])
def test_activation_attrs(tmp_path, op_type, attrs):
    check_program(unary_op(tmp_path, op_type, randn(2, 3, 4, 5), attrs))


# The reference is Paddle Inference 3.3.1, whose relu6 and hard_swish kernels ignore these attrs (fixed 6 /
# 6, 6, 3); Paddle Lite and Paddle 2 applied them. Paddle executing the op is the expectation.
@pytest.mark.parametrize("threshold", [4.0, 8.0, 0.0])
def test_relu6_threshold_is_ignored_as_paddle_does(tmp_path, threshold):
    x = randn(3, 4)
    saved = unary_op(tmp_path, "relu6", x, {"threshold": threshold})
    np.testing.assert_allclose(saved.outputs[0], np.clip(x, 0, 6))  # Paddle: always 6
    _, result = check_program(saved)
    assert operation_types(result) == [T.RELU6]


@pytest.mark.parametrize("attrs", [{"threshold": 4.0, "scale": 5.0, "offset": 2.0}, {"threshold": 0.0, "scale": 0.0},
                                   {"offset": 1.0}])
def test_hard_swish_attrs_are_ignored_as_paddle_does(tmp_path, attrs):
    x = randn(3, 4)
    saved = unary_op(tmp_path, "hard_swish", x, attrs)
    np.testing.assert_allclose(saved.outputs[0], x * np.clip(x + 3.0, 0, 6.0) / 6.0, rtol=1e-6, atol=1e-6)
    _, result = check_program(saved)
    assert operation_types(result) == [T.HARD_SWISH]


def test_standalone_relu6_hard_swish_emits():
    from converters.registry import get_converter

    assert get_converter("relu6").emits == (T.RELU6,)
    assert get_converter("hard_swish").emits == (T.HARD_SWISH,)


def test_swish_with_beta_composes(tmp_path):
    # Paddle 3's swish has no beta (it is silu); an older program's beta still means x * sigmoid(beta * x).
    x = randn(3, 4)
    saved = unary_op(tmp_path, "swish", x, {"beta": 2.0}, run_paddle=False)
    want = (x * (1 / (1 + np.exp(-2.0 * x.astype(np.float64))))).astype(np.float32)
    _, result = check_program(saved, want=[want])
    assert T.SIGMOID in operation_types(result)


def test_round_halves_to_even(tmp_path):
    # Paddle 3.3.1 rounds halves to even (not away from zero as std::round would).
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 3.7, -3.2, 0.0, 1e8 + 8,
                  -0.50000006, 4.5, 5.5], dtype=np.float32)
    got, _ = check_program(unary_op(tmp_path, "round", x))
    np.testing.assert_array_equal(got["out"][:6], [-2, -2, 0, 0, 2, 2])


def test_round_with_decimals_is_rejected():
    from converters.registry import get_converter
    from nnadapter_bridge.loader.program import OpInfo

    op = OpInfo("round", 0, 0, {"X": ["x"]}, {"Out": ["out"]}, {"decimals": 2}, {})
    assert "decimals" in get_converter("round").check(op, None)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_sign_integers(tmp_path, dtype):
    x = RNG.integers(-3, 4, size=(3, 4)).astype(dtype)
    check_program(unary_op(tmp_path, "sign", x))


def test_static_mode_activations(tmp_path):
    def build(x):
        import paddle.nn.functional as F
        return [F.relu(x), F.leaky_relu(x), F.hardswish(x), F.hardsigmoid(x), F.relu6(x)]

    check_program(static_program(tmp_path, build, {"x": randn(2, 3, 8)}))


# -- emit_activation with prefixed (fused) attribute names --------------------------------------------------

def test_emit_activation_reads_prefixed_attrs():
    from converters.activation import ActivationAttrs

    attrs = ActivationAttrs("leaky_relu", {"leaky_relu_alpha": 0.3, "alpha": 0.9})
    assert attrs.f("alpha", 0.02) == pytest.approx(0.3)
    assert ActivationAttrs("hard_swish", {}).f("threshold", 6.0) == 6.0


# -- quantized relu -----------------------------------------------------------------------------------------

def test_relu_with_quant_scales_keeps_output_quantized():
    from converters.context import convert_subgraph
    from nnadapter_bridge.loader.program import OpInfo
    from nnadapter_bridge.nnadapter.reference import run_model
    from nnadapter_bridge.nnadapter.types import OperandType

    op = OpInfo("relu", 0, 0, {"X": ["x"]}, {"Out": ["out"]}, {"X0_scale": [0.05], "Out0_scale": [0.025]}, {})
    in_type = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, dims=(2, 6), scale=0.05)
    result = convert_subgraph([op], {}, {"x": in_type}, ["out"])
    out_type = result.model.output_operands[0].type
    assert out_type.precision == Precision.QUANT_INT8_SYMM_PER_LAYER and out_type.scale == pytest.approx(0.025)
    q = RNG.integers(-128, 128, size=(2, 6)).astype(np.int8)
    (got,) = run_model(result.model, [q])
    want = np.clip(np.rint(np.maximum(q.astype(np.float32) * 0.05, 0) / 0.025), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(got, want)


# -- prelu ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,alpha_shape", [("all", (1,)), ("channel", (3,)), ("channel", (1, 3, 1, 1)),
                                              ("element", (1, 3, 4, 5))])
def test_prelu_param_alpha(tmp_path, mode, alpha_shape):
    alpha = (RNG.random(alpha_shape) * 0.5).astype(np.float32)
    saved = unary_op(tmp_path, "prelu", randn(2, 3, 4, 5), {"mode": mode, "data_format": "NCHW"},
                     extra_inputs={"Alpha": ["alpha"]}, params={"alpha": alpha})
    _, result = check_program(saved)
    assert (operation_types(result) == [T.PRELU]) == (mode != "element")


def test_prelu_channel_nhwc(tmp_path):
    alpha = (RNG.random(5) * 0.5).astype(np.float32)
    saved = unary_op(tmp_path, "prelu", randn(2, 3, 4, 5), {"mode": "channel", "data_format": "NHWC"},
                     extra_inputs={"Alpha": ["alpha"]}, params={"alpha": alpha})
    check_program(saved)


def test_prelu_default_mode_and_variable_alpha(tmp_path):
    x, alpha = randn(2, 3, 4), (RNG.random(3) * 0.5).astype(np.float32)
    saved = unary_op(tmp_path, "prelu", x, {"mode": "channel"}, extra_inputs={"Alpha": ["alpha"]},
                     feeds={"alpha": alpha})
    check_program(saved)


# -- pow ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("factor", [2.0, 0.5, -1.0, 3.0])
def test_pow_factor(tmp_path, factor):
    check_program(unary_op(tmp_path, "pow", positive(2, 3, 4), {"factor": factor}))


def test_pow_factor_tensor(tmp_path):
    saved = unary_op(tmp_path, "pow", positive(2, 3), {"factor": 1.0}, extra_inputs={"FactorTensor": ["f"]},
                     feeds={"f": np.array([2.5], dtype=np.float32)})
    check_program(saved)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_integers(tmp_path, dtype):
    x = RNG.integers(-4, 5, size=(3, 4)).astype(dtype)
    check_program(unary_op(tmp_path, "pow", x, {"factor": 3.0}))


def test_pow_integer_with_fractional_factor_is_rejected(tmp_path):
    from converters.context import ConversionContext
    from converters.registry import get_converter
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.nnadapter.model import Model

    saved = unary_op(tmp_path, "pow", np.ones((2, 2), np.int32), {"factor": 1.5}, run_paddle=False)
    graph = load_model(saved.model_path)
    (op,) = [o for o in graph.ops() if o.type == "pow"]
    assert "non-integer factor" in get_converter("pow").check(op, ConversionContext(Model(), {}, graph))


def test_sign_float_with_nan_and_zero(tmp_path):
    x = np.array([-2.0, -0.0, 0.0, 3.5, np.nan, np.inf, -np.inf], dtype=np.float32)
    check_program(unary_op(tmp_path, "sign", x))


def test_pow_default_factor(tmp_path):
    check_program(unary_op(tmp_path, "pow", positive(4, 5)))


# -- clip -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{"min": -1.0, "max": 1.0}, {"min": 0.0, "max": 6.0}, {"min": -2.5, "max": -0.5}])
def test_clip_attrs(tmp_path, attrs):
    check_program(unary_op(tmp_path, "clip", randn(2, 3, 4), attrs))


def test_clip_tensor_bounds(tmp_path):
    saved = unary_op(tmp_path, "clip", randn(2, 3, 4), {"min": -100.0, "max": 100.0},
                     extra_inputs={"Min": ["lo"], "Max": ["hi"]},
                     feeds={"lo": np.array([-0.5], np.float32), "hi": np.array([1.5], np.float32)})
    check_program(saved)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_clip_integers(tmp_path, dtype):
    x = RNG.integers(-9, 10, size=(3, 4)).astype(dtype)
    _, result = check_program(unary_op(tmp_path, "clip", x, {"min": -3.0, "max": 5.0}))
    assert operation_types(result) == [T.MAX, T.MIN]


# -- scale ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [
    {"scale": 2.0, "bias": 0.5, "bias_after_scale": True},
    {"scale": 2.0, "bias": 0.5, "bias_after_scale": False},
    {"scale": -0.3, "bias": 0.0, "bias_after_scale": True},
    {"scale": 1.0, "bias": 1.5, "bias_after_scale": True},
    {"scale": 3.0},
])
def test_scale(tmp_path, attrs):
    check_program(unary_op(tmp_path, "scale", randn(2, 3, 4), attrs))


def test_scale_identity_emits_nothing(tmp_path):
    _, result = check_program(unary_op(tmp_path, "scale", randn(2, 3), {"scale": 1.0, "bias": 0.0}))
    # The output is the input: the only operation is the copy the conversion adds for a subgraph output.
    assert operation_types(result) == [T.ASSIGN]


@pytest.mark.parametrize("attrs, emitted", [
    ({"scale": 1.0, "bias": 1e-5}, [T.ADD]),  # RT-DETR's frozen batch norm: (var + 1e-5).rsqrt(), 80 times
    ({"scale": 1.0, "bias": 1e-7}, [T.ADD]),
    ({"scale": 1.0, "bias": -3e-9, "bias_after_scale": False}, [T.ADD]),
    ({"scale": 1.0000001, "bias": 0.0}, [T.MUL]),  # the float32 just above 1
    ({"scale": 1e-6, "bias": 0.0}, [T.MUL]),
])
def test_scale_near_identity_is_not_identity(tmp_path, attrs, emitted):
    """A scale or bias a hair away from the identity is computed, never dropped: on inputs of the bias's own
    magnitude, `x + 1e-5` taken as `x` is off by 10x (and by inf after an rsqrt of a zero variance)."""
    x = (RNG.random((2, 3, 4)) * 1e-6).astype(np.float32)
    x[0, 0, 0] = 0.0
    _, result = check_program(unary_op(tmp_path, "scale", x, attrs), atol=0.0, rtol=1e-6)
    assert operation_types(result) == emitted


@pytest.mark.parametrize("after", [True, False])
def test_scale_tensor(tmp_path, after):
    saved = unary_op(tmp_path, "scale", randn(2, 3, 4), {"scale": 7.0, "bias": 0.25, "bias_after_scale": after},
                     extra_inputs={"ScaleTensor": ["s"]}, feeds={"s": np.array([1.5], np.float32)})
    check_program(saved)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("attrs", [{"scale": 3.0, "bias": 2.0, "bias_after_scale": True},
                                   {"scale": 2.5, "bias": 0.5, "bias_after_scale": False},
                                   {"scale": -1.5, "bias": 1.7}])
def test_scale_integers(tmp_path, dtype, attrs):
    # Paddle truncates scale and bias to the integer type before computing.
    x = RNG.integers(-9, 10, size=(3, 4)).astype(dtype)
    check_program(unary_op(tmp_path, "scale", x, attrs))


def _quantized_single_op(op, in_scale, shape=(2, 6)):
    from converters.context import convert_subgraph
    from nnadapter_bridge.nnadapter.types import OperandType

    in_type = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, dims=shape, scale=in_scale)
    return convert_subgraph([op], {}, {"x": in_type}, ["out"])


@pytest.mark.parametrize("scale,bias", [(2.0, 0.0), (-0.5, 0.3)])
def test_scale_quantized_input_uses_int8_constants(scale, bias):
    from nnadapter_bridge.loader.program import OpInfo
    from nnadapter_bridge.nnadapter.reference import run_model

    op = OpInfo("scale", 0, 0, {"X": ["x"]}, {"Out": ["out"]},
                {"scale": scale, "bias": bias, "X0_scale": [0.05], "Out0_scale": [0.04]}, {})
    result = _quantized_single_op(op, 0.05)
    constants = [o for operation in result.model.operations for o in operation.inputs[:2] if o.is_constant]
    assert constants and all(c.type.precision == Precision.QUANT_INT8_SYMM_PER_LAYER for c in constants)
    q = RNG.integers(-40, 40, size=(2, 6)).astype(np.int8)
    (got,) = run_model(result.model, [q])
    want = np.clip(np.rint((q.astype(np.float32) * 0.05 * scale + bias) / 0.04), -128, 127).astype(np.int8)
    np.testing.assert_allclose(got.astype(int), want.astype(int), atol=1)  # one step: requantize rounding


# -- swiglu (Llama's feed-forward gate) ------------------------------------------------------------------------


@pytest.mark.parametrize("with_y", [True, False])
def test_swiglu(tmp_path, with_y):
    import paddle

    from support.converter_harness import run_pir

    feeds = {"x": randn(2, 3, 8), "y": randn(2, 3, 8)} if with_y else {"x": randn(2, 3, 8)}

    def build(x, y=None):
        return paddle.nn.functional.swiglu(x, y)

    _, result, _ = run_pir(tmp_path, "swiglu", build, feeds, exact=True)
    assert T.SWISH in operation_types(result) and (T.SPLIT in operation_types(result)) != with_y
