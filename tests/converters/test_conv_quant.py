"""Quantized forms (quantization.py and the quantized paths of conv.py and matmul.py).

- Paddle Lite's scale attrs on conv2d / depthwise_conv2d / conv2d_transpose / fc / mul / matmul /
  matmul_v2 with an int8 weight: Paddle cannot run these int8-weight OpDescs, so the expectation is
  the definitions in numpy (quantize the input with its step, dequantize the weight, int32 bias with
  step in x w[i], requantize the output) around Paddle's float conv / matmul on the dequantized values.
- quantize_linear / dequantize_linear and the fake quant-dequant ops: Paddle 3.3.1 executes them, so
  it is the reference.
- A conv -> relu -> fc program in the quantize_linear/dequantize_linear form, against Paddle.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from nnadapter_bridge.errors import ConversionError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from support.converter_harness import (
    SavedProgram,
    _run_saved,
    check_program,
    convert_and_run,
    opdesc_program,
    paddle_static,
)
from support.tolerances import OP_ATOL, assert_model_close, assert_op_close

rng = np.random.default_rng(20240611)


def randn(*shape, scale=1.0, gen=None):
    return ((gen or rng).standard_normal(shape) * scale).astype(np.float32)


def int8_weight(*shape, gen=None):
    return (gen or rng).integers(-127, 128, size=shape).astype(np.int8)


def operation_types(result):
    return [op.type for op in result.model.operations]


def quantize(values, step):
    """Symmetric int8 quantization by definition: round half to even, saturate to [-128, 127]."""
    return np.clip(np.rint(np.asarray(values, np.float64) / step), -128, 127)


def assert_quantized_close(got, want_real, step, what=""):
    """`got` must be the output step grid value of `want_real` (the pre-rounding product). Where
    want_real / step lies within 1e-3 of a rounding tie, float summation order may pick either
    neighbour: those elements may differ by exactly one step."""
    got = np.asarray(got, np.float64)
    want = quantize(want_real, step) * step
    ratio = np.asarray(want_real, np.float64) / step
    near_tie = np.abs(np.abs(ratio - np.floor(ratio)) - 0.5) < 1e-3
    err = np.abs(got - want)
    bound = OP_ATOL + 1e-6 * np.abs(want)
    ok = (err <= bound) | (near_tie & (np.abs(err - step) <= bound))
    assert ok.all(), f"{what}: {int((~ok).sum())}/{ok.size} elements off; worst err {err.max()} (step {step})"


def paddle_float(fn, *arrays):
    """Paddle's float op (dygraph, inputs cast to float32) as float64: the float part of the oracle."""
    import paddle

    with paddle.base.dygraph.guard():
        return fn(*[paddle.to_tensor(np.asarray(a, np.float32)) for a in arrays]).numpy().astype(np.float64)


# -- Paddle Lite's scale attributes -----------------------------------------------------------------------

def _quant_conv_case(tmp_path, op_type, x, w, bias, scales, extra_attrs, filter_channel_dim=0):
    s_in, s_w, s_out = scales
    attrs = {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1,
             "padding_algorithm": "EXPLICIT", "data_format": "NCHW",
             "Input0_scale": [s_in], "Filter0_scale": list(s_w), "Output0_scale": [s_out]}
    attrs.update(extra_attrs)
    inputs = {"Input": ["x"], "Filter": ["w"]}
    params = {"w": w}
    if bias is not None:
        inputs["Bias"] = ["b"]
        params["b"] = bias
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Output": ["y"]}, attrs=attrs,
                           feeds={"x": x}, params=params, run_paddle=False)
    got, result, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    return got["y"], result


def _dequantized_filter(w, s_w, channel_dim):
    shape = [1] * w.ndim
    shape[channel_dim] = -1
    return w.astype(np.float64) * np.asarray(s_w, np.float64).reshape(shape)


def _quantized_bias(bias, s_in, s_w, channels):
    steps = s_in * np.broadcast_to(np.asarray(s_w, np.float64), (channels,))
    return np.rint(np.asarray(bias, np.float64) / steps) * steps


@pytest.mark.parametrize("per_channel", [False, True])
def test_quantized_conv2d(tmp_path, per_channel):
    import paddle.nn.functional as F

    x = randn(1, 3, 6, 6)
    w = int8_weight(4, 3, 3, 3)
    bias = randn(4)
    s_in, s_out = 0.02, 0.08
    s_w = [0.004, 0.006, 0.003, 0.005] if per_channel else [0.004]
    got, result = _quant_conv_case(tmp_path, "conv2d", x, w, bias, (s_in, s_w, s_out), {})
    types = operation_types(result)
    assert types == [T.QUANTIZE, T.CONV_2D, T.DEQUANTIZE], types
    conv = result.model.operations[1]
    want_filter = Precision.QUANT_INT8_SYMM_PER_CHANNEL if per_channel else Precision.QUANT_INT8_SYMM_PER_LAYER
    assert conv.inputs[1].type.precision == want_filter
    want_bias = Precision.QUANT_INT32_SYMM_PER_CHANNEL if per_channel else Precision.QUANT_INT32_SYMM_PER_LAYER
    assert conv.inputs[2].type.precision == want_bias
    assert np.allclose(conv.inputs[2].type.scales or [conv.inputs[2].type.scale], s_in * np.asarray(s_w), rtol=1e-6)
    assert conv.outputs[0].type.precision == Precision.QUANT_INT8_SYMM_PER_LAYER
    assert np.isclose(conv.outputs[0].type.scale, s_out, rtol=1e-6)  # the attr is stored as float32

    x_real = quantize(x, s_in) * s_in
    real = paddle_float(lambda a, b: F.conv2d(a, b, padding=1), x_real, _dequantized_filter(w, s_w, 0))
    real += _quantized_bias(bias, s_in, s_w, 4).reshape(1, -1, 1, 1)
    assert_quantized_close(got, real, s_out, "conv2d")


def test_quantized_conv2d_equal_channel_scales_collapse_to_per_layer(tmp_path):
    # Scales equal within 1e-5 of their magnitude are one scale (Paddle Lite's IsValidSymmPerChannelQuantParams
    # idea, with a relative bound).
    x = randn(1, 2, 5, 5)
    w = int8_weight(3, 2, 3, 3)
    got, result = _quant_conv_case(tmp_path, "conv2d", x, w, None, (0.03, [0.005, 0.005 + 1e-8, 0.005], 0.1), {})
    conv = result.model.operations[1]
    assert conv.inputs[1].type.precision == Precision.QUANT_INT8_SYMM_PER_LAYER
    assert conv.inputs[2].type.precision == Precision.QUANT_INT32_SYMM_PER_LAYER
    assert not np.asarray(conv.inputs[2].value).any()  # the missing Bias is an int32 zero bias


def test_small_channel_scales_that_differ_stay_per_channel(tmp_path):
    # An absolute threshold of 1e-5 would take 1e-5 and 2e-5 as one scale: a factor 2 on the second channel.
    x = randn(1, 2, 5, 5)
    w = int8_weight(3, 2, 3, 3)
    got, result = _quant_conv_case(tmp_path, "conv2d", x, w, None, (0.03, [1e-5, 2e-5, 1e-5], 1e-4), {})
    conv = result.model.operations[1]
    assert conv.inputs[1].type.precision == Precision.QUANT_INT8_SYMM_PER_CHANNEL
    assert conv.inputs[1].type.scales == pytest.approx((1e-5, 2e-5, 1e-5), rel=1e-6)


def test_quantized_depthwise_conv2d_with_fused_relu(tmp_path):
    import paddle.nn.functional as F

    x = randn(1, 4, 6, 6)
    w = int8_weight(4, 1, 3, 3)
    bias = randn(4, scale=0.2)
    s_in, s_w, s_out = 0.025, [0.003, 0.007, 0.004, 0.002], 0.05
    got, result = _quant_conv_case(tmp_path, "depthwise_conv2d", x, w, bias, (s_in, s_w, s_out),
                                   {"groups": 4, "with_act": True, "act_type": "relu"})
    assert operation_types(result) == [T.QUANTIZE, T.CONV_2D, T.DEQUANTIZE]
    real = paddle_float(lambda a, b: F.conv2d(a, b, padding=1, groups=4),
                        quantize(x, s_in) * s_in, _dequantized_filter(w, s_w, 0))
    real = np.maximum(real + _quantized_bias(bias, s_in, s_w, 4).reshape(1, -1, 1, 1), 0.0)
    assert_quantized_close(got, real, s_out, "depthwise_conv2d")


def test_quantized_conv2d_transpose_per_channel(tmp_path):
    import paddle.nn.functional as F

    x = randn(1, 3, 4, 4)
    w = int8_weight(3, 5, 3, 3)  # [C_in, C_out, kh, kw]: output channels on axis 1
    bias = randn(5, scale=0.3)
    s_in, s_w, s_out = 0.02, [0.002, 0.004, 0.003, 0.005, 0.001], 0.06
    got, result = _quant_conv_case(tmp_path, "conv2d_transpose", x, w, bias, (s_in, s_w, s_out),
                                   {"strides": [2, 2], "output_padding": [], "output_size": []})
    assert operation_types(result) == [T.QUANTIZE, T.CONV_2D_TRANSPOSE, T.DEQUANTIZE]
    conv = result.model.operations[1]
    assert conv.inputs[1].type.channel_dim == 1
    real = paddle_float(lambda a, b: F.conv2d_transpose(a, b, stride=2, padding=1),
                        quantize(x, s_in) * s_in, _dequantized_filter(w, s_w, 1))
    real += _quantized_bias(bias, s_in, s_w, 5).reshape(1, -1, 1, 1)
    assert_quantized_close(got, real, s_out, "conv2d_transpose")


@pytest.mark.parametrize("act", [None, "relu"])
def test_quantized_conv2d_without_output_scale_gives_the_float_sums(tmp_path, act):
    """Paddle Lite's last int8 conv before a float op has no Output0_scale: its output is the int32 sums
    dequantized at Input0_scale x Filter0_scale, plus the float bias, then the fused activation."""
    x, w, bias = randn(1, 2, 4, 4), int8_weight(3, 2, 1, 1), randn(3)
    attrs = {"Input0_scale": [0.1], "Filter0_scale": [0.01]}
    if act:
        attrs.update(with_act=True, act_type=act)
    saved = opdesc_program(tmp_path, "conv2d", inputs={"Input": ["x"], "Filter": ["w"], "Bias": ["b"]},
                           outputs={"Output": ["y"]}, attrs=attrs, feeds={"x": x},
                           params={"w": w, "b": bias}, run_paddle=False)
    got, result, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert T.DEQUANTIZE in operation_types(result)
    xq = quantize(x, 0.1)
    want = np.einsum("nchw,oc->nohw", xq * 0.1, w.reshape(3, 2).astype(np.float64) * 0.01) + bias.reshape(1, 3, 1, 1)
    if act:
        want = np.maximum(want, 0)
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)


def _product_case(tmp_path, op_type, x, w, slots, attrs, bias=None):
    x_slot, w_slot = slots
    inputs = {x_slot: ["x"], w_slot: ["w"]}
    params = {"w": w}
    if bias is not None:
        inputs["Bias"] = ["b"]
        params["b"] = bias
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["y"]}, attrs=attrs,
                           feeds={"x": x}, params=params, run_paddle=False)
    got, result, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    return got["y"], result


@pytest.mark.parametrize("per_channel", [False, True])
def test_quantized_fc_with_relu(tmp_path, per_channel):
    x = randn(2, 3, 4)  # in_num_col_dims 2: rows [2, 3], K = 4
    w = int8_weight(4, 5)
    bias = randn(5, scale=0.5)
    s_in, s_out = 0.02, 0.03
    s_w = [0.01, 0.02, 0.015, 0.005, 0.012] if per_channel else [0.01]
    attrs = {"in_num_col_dims": 2, "activation_type": "relu", "Input0_scale": [s_in], "W0_scale": s_w,
             "Out0_scale": [s_out]}
    got, result = _product_case(tmp_path, "fc", x, w, ("Input", "W"), attrs, bias)
    assert operation_types(result) == [T.QUANTIZE, T.FULLY_CONNECTED, T.DEQUANTIZE, T.RESHAPE]
    real = (quantize(x, s_in) * s_in) @ _dequantized_filter(w, s_w, 1)
    real = np.maximum(real + _quantized_bias(bias, s_in, s_w, 5), 0.0)
    assert got.shape == (2, 3, 5)
    assert_quantized_close(got, real, s_out, "fc")


@pytest.mark.parametrize("op_type,attrs,transposed", [
    ("mul", {"x_num_col_dims": 1, "y_num_col_dims": 1}, False),
    ("matmul", {"transpose_X": False, "transpose_Y": True, "alpha": 1.0}, True),
    ("matmul_v2", {"trans_x": False, "trans_y": False}, False),
])
def test_quantized_mul_and_matmul(tmp_path, op_type, attrs, transposed):
    x = randn(3, 6)
    w = int8_weight(4, 6) if transposed else int8_weight(6, 4)
    s_in, s_w, s_out = 0.015, [0.01, 0.003, 0.02, 0.007], 0.05
    attrs = dict(attrs, X0_scale=[s_in], Y0_scale=s_w, Out0_scale=[s_out])
    got, result = _product_case(tmp_path, op_type, x, w, ("X", "Y"), attrs)
    assert operation_types(result) == [T.QUANTIZE, T.FULLY_CONNECTED, T.DEQUANTIZE]
    weight = _dequantized_filter(w, s_w, 0 if transposed else 1)
    real = (quantize(x, s_in) * s_in) @ (weight.T if transposed else weight)
    assert_quantized_close(got, real, s_out, op_type)


def test_float_weight_keeps_the_float_path(tmp_path):
    # Scale attrs on a float weight describe a device-side quantization only: conv.py's float path stays.
    saved = opdesc_program(tmp_path, "matmul_v2", inputs={"X": ["x"], "Y": ["w"]}, outputs={"Out": ["y"]},
                           attrs={"trans_x": False, "trans_y": False, "X0_scale": [0.1], "Y0_scale": [0.1],
                                  "Out0_scale": [0.1]},
                           feeds={"x": randn(2, 3)}, params={"w": randn(3, 2)})
    _, result = check_program(saved)
    assert operation_types(result) == [T.MAT_MUL]


# -- quantize_linear / dequantize_linear ------------------------------------------------------------------

def _write_ops(tmp_path, ops, feeds, params, fetches, run_paddle=True) -> SavedProgram:
    """A multi-op OpDesc program (intermediate vars float32), saved with its Paddle reference."""
    from devtools.zoo import write_combined_params, write_program

    names = {n for op in ops for slot in op["outputs"].values() for n in slot} - set(params)  # in-place params
    var_specs = [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in feeds.items()]
    var_specs += [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape), "persistable": True}
                  for n, a in params.items()]
    var_specs += [{"name": n, "dtype": "float32", "shape": []} for n in sorted(names)]
    model_path = os.path.join(str(tmp_path), "__model__")
    params_path = os.path.join(str(tmp_path), "__params__")
    write_program(model_path, [{"vars": var_specs, "ops": ops}], feeds=list(feeds), fetches=fetches)
    write_combined_params(params_path, params)
    want = None
    if run_paddle:
        with paddle_static() as paddle:
            want = _run_saved(paddle, str(tmp_path), "__model__", "__params__", feeds)
    return SavedProgram(model_path, params_path, dict(feeds), want)


def _linear_op(op_type, x, scale, zero_point, y, **attrs):
    full = {"quant_axis": -1, "bit_length": 8, "round_type": 0, "is_test": True}
    full.update(attrs)
    return {"type": op_type, "inputs": {"X": [x], "Scale": [scale], "ZeroPoint": [zero_point]},
            "outputs": {"Y": [y]}, "attrs": full}


def _off_ties(x, steps):
    """Nudge values whose quotient by the step is within 0.05 of a rounding tie: round_type 1 breaks ties
    away from zero, QUANTIZE to even (see quantization._quantize), so tests keep clear of exact ties."""
    ratio = x / steps
    near = np.abs(np.abs(ratio - np.floor(ratio)) - 0.5) < 0.05
    return np.where(near, x + 0.2 * steps, x).astype(np.float32)


@pytest.mark.parametrize("round_type", [0, 1])
@pytest.mark.parametrize("quant_axis", [-1, 1])
def test_quantize_then_dequantize_linear(tmp_path, round_type, quant_axis):
    thresholds = np.array([1.5], np.float32) if quant_axis < 0 else np.array([0.5, 2.0, 1.0], np.float32)
    steps = (thresholds / 127).reshape((1, -1, 1) if quant_axis >= 0 else (1,))
    x = _off_ties(randn(2, 3, 5, scale=1.5), steps)  # |x| past the threshold exercises the saturation
    ops = [_linear_op("quantize_linear", "x", "s", "z", "q", quant_axis=quant_axis, round_type=round_type),
           _linear_op("dequantize_linear", "q", "s", "z", "y", quant_axis=quant_axis, round_type=round_type)]
    zero = np.zeros(thresholds.shape, np.float32)
    saved = _write_ops(tmp_path, ops, {"x": x}, {"s": thresholds, "z": zero}, ["y"])
    got, result = check_program(saved)
    assert operation_types(result)[-2:] == [T.QUANTIZE, T.DEQUANTIZE]
    assert (T.MAX in operation_types(result)) == (round_type == 1)


@pytest.mark.parametrize("round_type", [0, 1])
@pytest.mark.parametrize("qmin, qmax", [(-8, 7), (0, 7), (-128, 127), (-127, 127), (-4, 100)])
@pytest.mark.parametrize("quant_axis", [-1, 1])
def test_quantize_linear_qmin_qmax(tmp_path, round_type, qmin, qmax, quant_axis):
    # Paddle 3.3.1: step = Scale / qmax (bit_length and qmin unread); round_type 0 clips the integers to
    # [-qmax - 1, qmax], 1 clips x to [-Scale, Scale]. bit_length 4 with qmax 7 is the 4-bit form; 8 would
    # be read the same.
    thresholds = np.array([1.5], np.float32) if quant_axis < 0 else np.array([0.5, 2.0, 1.0], np.float32)
    steps = (thresholds / qmax).reshape((1, -1, 1) if quant_axis >= 0 else (1,))
    x = _off_ties(randn(2, 3, 5, scale=1.5), steps)  # |x| past the threshold exercises both clips
    attrs = {"quant_axis": quant_axis, "round_type": round_type, "qmin": qmin, "qmax": qmax,
             "bit_length": 4 if qmax == 7 else 8}
    ops = [_linear_op("quantize_linear", "x", "s", "z", "q", **attrs),
           _linear_op("dequantize_linear", "q", "s", "z", "y", **attrs)]
    zero = np.zeros(thresholds.shape, np.float32)
    saved = _write_ops(tmp_path, ops, {"x": x}, {"s": thresholds, "z": zero}, ["y"])
    integers = np.rint(saved.outputs[0] / steps)
    low = -qmax if round_type == 1 else -qmax - 1
    assert integers.min() == low and integers.max() == qmax  # Paddle saturated at both ends
    got, result = check_program(saved)
    assert operation_types(result)[-2:] == [T.QUANTIZE, T.DEQUANTIZE]
    assert (T.MAX in operation_types(result)) == (low > -128)
    assert (T.MIN in operation_types(result)) == (qmax < 127)


@pytest.mark.parametrize("attrs, reason", [({"qmax": 255, "qmin": 0}, "qmax 255"),
                                           ({"qmax": 0}, "qmax 0")])
def test_quantize_linear_qmin_qmax_past_int8_is_declined(tmp_path, attrs, reason):
    ops = [_linear_op("quantize_linear", "x", "s", "z", "q", **attrs),
           _linear_op("dequantize_linear", "q", "s", "z", "y", **attrs)]
    saved = _write_ops(tmp_path, ops, {"x": randn(2, 3)}, {"s": np.array([1.0], np.float32),
                                                         "z": np.zeros([1], np.float32)}, ["y"], run_paddle=False)
    with pytest.raises(ConversionError, match=reason):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


@pytest.mark.parametrize("quant_axis", [-1, 0])
def test_dequantize_linear_of_float_integers(tmp_path, quant_axis):
    # Paddle's quantize_linear output is float integers; a subgraph input of that kind is multiplied.
    x = rng.integers(-128, 128, size=(4, 3)).astype(np.float32)
    scale = np.array([2.0], np.float32) if quant_axis < 0 else np.array([1.0, 0.5, 3.0, 0.25], np.float32)
    saved = opdesc_program(tmp_path, "dequantize_linear", inputs={"X": ["x"], "Scale": ["s"], "ZeroPoint": ["z"]},
                           outputs={"Y": ["y"]}, attrs={"quant_axis": quant_axis, "bit_length": 8, "is_test": True},
                           feeds={"x": x}, params={"s": scale, "z": np.zeros(scale.shape, np.float32)})
    _, result = check_program(saved)
    assert operation_types(result) == [T.MUL]


@pytest.mark.parametrize("quant_axis", [0, 1])
def test_dequantize_linear_of_int8_weight_stays_int8(tmp_path, quant_axis):
    w = int8_weight(4, 3, 2, 2)
    scale = rng.uniform(0.5, 2.0, size=w.shape[quant_axis]).astype(np.float32)
    # The int8 weight stays an int8 constant (per channel along quant_axis) read through a DEQUANTIZE, so the
    # devices can run the product reading it in int8.
    saved = _write_ops(tmp_path, [_linear_op("dequantize_linear", "w", "s", "z", "y", quant_axis=quant_axis)],
                       {}, {"w": w, "s": scale, "z": np.zeros(scale.shape, np.float32)}, ["y"])
    got, result, _ = convert_and_run(saved.model_path, {}, saved.params_path)
    assert operation_types(result) == [T.DEQUANTIZE]
    weight = result.model.operations[0].inputs[0]
    assert weight.is_constant and weight.type.precision == Precision.QUANT_INT8_SYMM_PER_CHANNEL
    assert weight.type.channel_dim == quant_axis
    assert_op_close(got["y"], saved.outputs[0], what="dequantize_linear of an int8 weight")


def test_dequantize_linear_of_float_weight_folds(tmp_path):
    w = int8_weight(4, 3).astype(np.float32)
    scale = np.array([0.5], np.float32)
    saved = _write_ops(tmp_path, [_linear_op("dequantize_linear", "w", "s", "z", "y")],
                       {}, {"w": w, "s": scale, "z": np.zeros(scale.shape, np.float32)}, ["y"])
    got, result, _ = convert_and_run(saved.model_path, {}, saved.params_path)
    assert operation_types(result) == [T.ASSIGN]  # the folded constant, copied out as the program output
    assert_op_close(got["y"], saved.outputs[0], what="dequantize_linear folded")


def test_quantize_linear_read_by_other_op_is_rejected(tmp_path):
    saved = opdesc_program(tmp_path, "quantize_linear", inputs={"X": ["x"], "Scale": ["s"], "ZeroPoint": ["z"]},
                           outputs={"Y": ["y"]}, attrs={"quant_axis": -1, "bit_length": 8, "is_test": True},
                           feeds={"x": randn(2, 3)}, params={"s": np.array([1.0], np.float32),
                                                             "z": np.zeros([1], np.float32)}, run_paddle=False)
    with pytest.raises(ConversionError, match="program output"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


def test_quantize_linear_training_mode_is_rejected(tmp_path):
    ops = [_linear_op("quantize_linear", "x", "s", "z", "q", is_test=False),
           _linear_op("dequantize_linear", "q", "s", "z", "y")]
    ops[0]["inputs"].update({"InAccum": ["accum"], "InState": ["state"]})  # the training-time observer
    saved = _write_ops(tmp_path, ops, {"x": randn(2, 3)}, {"s": np.array([1.0], np.float32),
                                                         "z": np.zeros([1], np.float32),
                                                         "accum": np.ones([1], np.float32),
                                                         "state": np.ones([1], np.float32)}, ["y"], run_paddle=False)
    with pytest.raises(ConversionError, match="is_test"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


def test_quantize_linear_without_is_test_quantizes_with_its_scale(tmp_path):
    # What PostTrainingQuantization(onnx_format=True) saves: no is_test attr (false) and no observer state;
    # Paddle quantizes with Scale (x past 1.0 saturates).
    ops = [_linear_op("quantize_linear", "x", "s", "z", "q"), _linear_op("dequantize_linear", "q", "s", "z", "y")]
    for op in ops:
        del op["attrs"]["is_test"]
    x = _off_ties(np.linspace(-3, 3, 12, dtype=np.float32).reshape(2, 6), np.float32(1.0 / 127))
    saved = _write_ops(tmp_path, ops, {"x": x}, {"s": np.array([1.0], np.float32), "z": np.zeros([1], np.float32)},
                       ["y"])
    assert saved.outputs[0].max() == 1.0
    check_program(saved)


def test_quantize_linear_only_observer_passes_x_through(tmp_path):
    ops = [_linear_op("quantize_linear", "x", "s", "z", "q", only_observer=True),
           {"type": "relu", "inputs": {"X": ["q"]}, "outputs": {"Out": ["y"]}, "attrs": {}}]
    saved = _write_ops(tmp_path, ops, {"x": randn(2, 3)}, {"s": np.array([1.0], np.float32),
                                                         "z": np.zeros([1], np.float32)}, ["y"])
    _, result = check_program(saved)
    assert operation_types(result) == [T.RELU]


# -- fake quant-dequant ops ----------------------------------------------------------------------------------

@pytest.mark.parametrize("round_type", [0, 1])
def test_fake_quantize_dequantize_moving_average_abs_max(tmp_path, round_type):
    threshold = np.array([1.2], np.float32)
    x = _off_ties(randn(2, 4, 3, scale=1.2), threshold / 127)
    saved = opdesc_program(tmp_path, "fake_quantize_dequantize_moving_average_abs_max",
                           inputs={"X": ["x"], "InScale": ["s"]}, outputs={"Out": ["y"], "OutScale": ["s_out"]},
                           attrs={"moving_rate": 0.9, "bit_length": 8, "is_test": True, "round_type": round_type},
                           feeds={"x": x}, params={"s": threshold})
    # Paddle leaves OutScale unwritten at inference (is_test); only Out is compared.
    got, result, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert_op_close(got["y"], saved.outputs[0], what="fake_quantize_dequantize_moving_average_abs_max")
    assert "s_out" not in got
    assert operation_types(result)[-2:] == [T.QUANTIZE, T.DEQUANTIZE]


@pytest.mark.parametrize("round_type", [0, 1])
def test_fake_quantize_dequantize_abs_max_of_weight(tmp_path, round_type):
    w = randn(3, 4)
    saved = _write_ops(tmp_path, [{"type": "fake_quantize_dequantize_abs_max", "inputs": {"X": ["w"]},
                                   "outputs": {"Out": ["y"], "OutScale": ["s"]},
                                   "attrs": {"bit_length": 8, "round_type": round_type}}],
                       {}, {"w": w}, ["y", "s"])
    got, _, _ = convert_and_run(saved.model_path, {}, saved.params_path)
    assert_op_close(got["y"], saved.outputs[0], what="Out")
    assert_op_close(got["s"], saved.outputs[1], what="OutScale")


@pytest.mark.parametrize("quant_axis,round_type", [(0, 1), (1, 0), (1, 1)])
def test_fake_channel_wise_quantize_dequantize_abs_max_of_weight(tmp_path, quant_axis, round_type):
    w = randn(3, 4, 2)
    saved = _write_ops(tmp_path, [{"type": "fake_channel_wise_quantize_dequantize_abs_max", "inputs": {"X": ["w"]},
                                   "outputs": {"Out": ["y"], "OutScale": ["s"]},
                                   "attrs": {"bit_length": 8, "round_type": round_type, "quant_axis": quant_axis}}],
                       {}, {"w": w}, ["y", "s"])
    got, _, _ = convert_and_run(saved.model_path, {}, saved.params_path)
    assert_op_close(got["y"], saved.outputs[0], what="Out")
    assert_op_close(got["s"], saved.outputs[1], what="OutScale")


def test_fake_quantize_dequantize_abs_max_of_activation_is_rejected(tmp_path):
    saved = opdesc_program(tmp_path, "fake_quantize_dequantize_abs_max", inputs={"X": ["x"]},
                           outputs={"Out": ["y"], "OutScale": ["s"]}, attrs={"bit_length": 8, "round_type": 1},
                           feeds={"x": randn(2, 3)}, run_paddle=False)
    with pytest.raises(ConversionError, match="constant scale"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


# -- end to end --------------------------------------------------------------------------------------------

def test_conv_relu_fc_in_quantize_linear_form(tmp_path):
    """feed -> quantize_linear/dequantize_linear -> conv2d (int8 weight + dequantize_linear) -> relu ->
    quantize_linear/dequantize_linear -> fc (int8 weight + dequantize_linear, float bias) -> fetch."""
    # Its own generator: the data must not depend on which tests ran before it (see the tie note below).
    gen = np.random.default_rng(1)
    x = randn(2, 3, 6, 6, gen=gen)
    conv_w = int8_weight(4, 3, 3, 3, gen=gen)
    fc_w = int8_weight(4 * 6 * 6, 5, gen=gen)
    params = {
        "x_scale": np.array([2.5], np.float32), "act_scale": np.array([3.0], np.float32),
        "conv_w": conv_w, "conv_w_scale": gen.uniform(0.2, 0.6, size=4).astype(np.float32),
        "fc_w": fc_w, "fc_w_scale": gen.uniform(0.05, 0.1, size=5).astype(np.float32),
        "fc_b": randn(5, gen=gen), "zero1": np.zeros([1], np.float32), "zero4": np.zeros([4], np.float32),
        "zero5": np.zeros([5], np.float32),
    }
    ops = [
        _linear_op("quantize_linear", "x", "x_scale", "zero1", "x_q"),
        _linear_op("dequantize_linear", "x_q", "x_scale", "zero1", "x_dq"),
        _linear_op("dequantize_linear", "conv_w", "conv_w_scale", "zero4", "conv_w_dq", quant_axis=0),
        {"type": "conv2d", "inputs": {"Input": ["x_dq"], "Filter": ["conv_w_dq"]}, "outputs": {"Output": ["c"]},
         "attrs": {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1,
                   "padding_algorithm": "EXPLICIT", "data_format": "NCHW"}},
        {"type": "relu", "inputs": {"X": ["c"]}, "outputs": {"Out": ["r"]}, "attrs": {}},
        _linear_op("quantize_linear", "r", "act_scale", "zero1", "r_q"),
        _linear_op("dequantize_linear", "r_q", "act_scale", "zero1", "r_dq"),
        _linear_op("dequantize_linear", "fc_w", "fc_w_scale", "zero5", "fc_w_dq", quant_axis=1),
        {"type": "fc", "inputs": {"Input": ["r_dq"], "W": ["fc_w_dq"], "Bias": ["fc_b"]}, "outputs": {"Out": ["y"]},
         "attrs": {"in_num_col_dims": 1, "activation_type": ""}},
    ]
    saved = _write_ops(tmp_path, ops, {"x": x}, params, ["y"])
    got, result, _ = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    types = operation_types(result)
    # The conv is an int8 x int8 -> int32 product (then DEQUANTIZE); the fc reads its weight's DEQUANTIZE and
    # the activation's.
    assert types.count(T.QUANTIZE) == 2 and types.count(T.DEQUANTIZE) == 3 and T.CONV_2D in types
    conv = next(op for op in result.model.operations if op.type == T.CONV_2D)
    assert [o.type.precision for o in conv.inputs[:2]] == [Precision.QUANT_INT8_SYMM_PER_LAYER,
                                                           Precision.QUANT_INT8_SYMM_PER_CHANNEL]
    assert conv.outputs[0].type.precision == Precision.QUANT_INT32_SYMM_PER_CHANNEL
    want = saved.outputs[0]
    # Both quantizers round half to even, so the float sums only differ in order; an activation whose
    # quotient lands on a tie could still flip by one step (a 3/127 change feeding ~144 weights), which
    # would show up as a far larger error than this bound: this data has none.
    assert_model_close(got["y"], want, what="conv-relu-fc")


# -- Paddle's fake quantized form (PostTrainingQuantization(onnx_format=False)) --------------------------------

def _fake_act_quant(op_type, x, scale, out, **attrs):
    full = {"bit_length": 8, "is_test": True}
    full.update(attrs)
    inputs = {"X": [x], "InScale": [scale]}
    # OutScale is the InScale var itself, as PTQ saves it (Paddle needs the slot set).
    return {"type": op_type, "inputs": inputs, "outputs": {"Out": [out], "OutScale": [scale]}, "attrs": full}


def _int_weight(*shape, gen):
    """A weight as PTQ freezes it: integers in [-127, 127] held in float32."""
    return gen.integers(-127, 128, size=shape).astype(np.float32)


def _off_ties_fake(x, threshold):
    """Keep x / threshold x 127 clear of rounding ties (Paddle multiplies by 127 / threshold, we divide by the
    step: an exact tie could round either way by an ulp)."""
    return _off_ties(x, np.float32(threshold) / 127)


@pytest.mark.parametrize("channel_wise", [True, False])
@pytest.mark.parametrize("quant_op", ["fake_quantize_range_abs_max", "fake_quantize_moving_average_abs_max"])
def test_fake_quantized_conv_is_an_int8_product(tmp_path, channel_wise, quant_op):
    """fake quantizer -> conv2d on float integers -> fake (channel-wise) dequantizer, as PTQ saves it:
    an int8 x int8 -> int32 CONV_2D, then one DEQUANTIZE; the values are Paddle's."""
    gen = np.random.default_rng(5)
    threshold = 2.0
    x = _off_ties_fake(randn(2, 3, 6, 6, gen=gen), threshold)
    w = _int_weight(4, 3, 3, 3, gen=gen)
    w_thresholds = gen.uniform(0.2, 0.6, size=4).astype(np.float32)
    params = {"x_scale": np.array([threshold], np.float32), "w": w}
    attrs = {"moving_rate": 0.9} if "moving" in quant_op else {"window_size": 10000}
    ops = [_fake_act_quant(quant_op, "x", "x_scale", "x_q", **attrs),
           {"type": "conv2d", "inputs": {"Input": ["x_q"], "Filter": ["w"]}, "outputs": {"Output": ["c"]},
            "attrs": {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1,
                      "padding_algorithm": "EXPLICIT", "data_format": "NCHW"}}]
    if channel_wise:
        params["w_scale"] = w_thresholds
        ops.append({"type": "fake_channel_wise_dequantize_max_abs",
                    "inputs": {"X": ["c"], "Scales": ["w_scale", "x_scale"]},
                    "outputs": {"Out": ["y"]}, "attrs": {"quant_bits": [8, 8], "quant_axis": 0, "x_num_col_dims": 1}})
    else:
        ops.append({"type": "fake_dequantize_max_abs", "inputs": {"X": ["c"], "Scale": ["x_scale"]},
                    "outputs": {"Out": ["y"]}, "attrs": {"max_range": float(127 * 127 / 0.4)}})
    saved = _write_ops(tmp_path, ops, {"x": x}, params, ["y"])
    got, result = check_program(saved, model_tolerance=True)
    assert operation_types(result)[-2:] == [T.CONV_2D, T.DEQUANTIZE]
    conv = result.model.operations[-2]
    assert conv.inputs[0].type.precision == Precision.QUANT_INT8_SYMM_PER_LAYER
    assert conv.inputs[1].type.precision == (Precision.QUANT_INT8_SYMM_PER_CHANNEL if channel_wise
                                             else Precision.QUANT_INT8_SYMM_PER_LAYER)
    assert conv.outputs[0].type.precision in (Precision.QUANT_INT32_SYMM_PER_CHANNEL,
                                              Precision.QUANT_INT32_SYMM_PER_LAYER)


def test_fake_quantized_matmul_v2_is_an_int8_product(tmp_path):
    gen = np.random.default_rng(6)
    threshold = 1.5
    x = _off_ties_fake(randn(3, 8, gen=gen), threshold)
    ops = [_fake_act_quant("fake_quantize_range_abs_max", "x", "x_scale", "x_q", window_size=10000),
           {"type": "matmul_v2", "inputs": {"X": ["x_q"], "Y": ["w"]}, "outputs": {"Out": ["m"]},
            "attrs": {"trans_x": False, "trans_y": False}},
           {"type": "fake_channel_wise_dequantize_max_abs", "inputs": {"X": ["m"], "Scales": ["w_scale", "x_scale"]},
            "outputs": {"Out": ["y"]}, "attrs": {"quant_bits": [8, 8], "quant_axis": 1, "x_num_col_dims": 1}}]
    params = {"x_scale": np.array([threshold], np.float32), "w": _int_weight(8, 5, gen=gen),
              "w_scale": gen.uniform(0.2, 0.6, size=5).astype(np.float32)}
    saved = _write_ops(tmp_path, ops, {"x": x}, params, ["y"])
    got, result = check_program(saved, model_tolerance=True)
    assert operation_types(result)[-2:] == [T.FULLY_CONNECTED, T.DEQUANTIZE]
    assert result.model.operations[-2].outputs[0].type.precision == Precision.QUANT_INT32_SYMM_PER_CHANNEL


@pytest.mark.parametrize("round_type", [None, 0])
def test_fake_quantize_read_by_another_op_gives_float_integers(tmp_path, round_type):
    # relu reads the integers Paddle holds: the quantizer hands out float integers (exact), not an int8 operand.
    threshold = 1.2
    x = _off_ties_fake(randn(2, 4, 3, scale=1.5), threshold)  # past the threshold: the clip shows
    attrs = {"window_size": 10000} if round_type is None else {"window_size": 10000, "round_type": round_type}
    ops = [_fake_act_quant("fake_quantize_range_abs_max", "x", "s", "q", **attrs),
           {"type": "relu", "inputs": {"X": ["q"]}, "outputs": {"Out": ["y"]}, "attrs": {}}]
    saved = _write_ops(tmp_path, ops, {"x": x}, {"s": np.array([threshold], np.float32)}, ["y"])
    assert np.array_equal(saved.outputs[0], np.round(saved.outputs[0]))  # Paddle's integers
    assert saved.outputs[0].max() == 127
    got, result = check_program(saved)
    assert np.array_equal(got["y"], saved.outputs[0])
    assert T.FLOOR in operation_types(result)


@pytest.mark.parametrize("quant_axis", [0, 1])
def test_fake_channel_wise_dequantize_of_a_weight_folds(tmp_path, quant_axis):
    w = _int_weight(4, 3, 2, 2, gen=np.random.default_rng(7))
    scale = rng.uniform(0.5, 2.0, size=w.shape[quant_axis]).astype(np.float32)
    saved = _write_ops(tmp_path, [{"type": "fake_channel_wise_dequantize_max_abs",
                                   "inputs": {"X": ["w"], "Scales": ["s"]}, "outputs": {"Out": ["y"]},
                                   "attrs": {"quant_bits": [8], "quant_axis": quant_axis, "x_num_col_dims": 1}}],
                       {}, {"w": w, "s": scale}, ["y"])
    got, result, _ = convert_and_run(saved.model_path, {}, saved.params_path)
    assert operation_types(result) == [T.ASSIGN]
    assert_op_close(got["y"], saved.outputs[0], what="fake_channel_wise_dequantize_max_abs folded")


def test_fake_dequantize_max_abs_of_float_input_multiplies(tmp_path):
    x = rng.integers(-5000, 5000, size=(2, 6)).astype(np.float32)
    saved = opdesc_program(tmp_path, "fake_dequantize_max_abs", inputs={"X": ["x"], "Scale": ["s"]},
                           outputs={"Out": ["y"]}, attrs={"max_range": 16129.0 / 0.75},
                           feeds={"x": x}, params={"s": np.array([2.0], np.float32)})
    _, result = check_program(saved)
    assert operation_types(result) == [T.MUL]


@pytest.mark.parametrize("op_type", ["fake_quantize_abs_max", "fake_channel_wise_quantize_abs_max"])
def test_fake_weight_quantizers_fold_to_integers(tmp_path, op_type):
    w = randn(4, 3, 2, 2)
    attrs = {"bit_length": 8, "round_type": 1}
    if op_type == "fake_channel_wise_quantize_abs_max":
        attrs.update(quant_axis=0)
    saved = _write_ops(tmp_path, [{"type": op_type, "inputs": {"X": ["w"]},
                                   "outputs": {"Out": ["q"], "OutScale": ["s"]}, "attrs": attrs},
                                  {"type": "scale", "inputs": {"X": ["q"]}, "outputs": {"Out": ["y"]},
                                   "attrs": {"scale": 1.0, "bias": 0.0, "bias_after_scale": True}}],
                       {}, {"w": w}, ["y", "s"])
    got, result, _ = convert_and_run(saved.model_path, {}, saved.params_path)
    assert np.array_equal(got["y"], saved.outputs[0])
    assert_op_close(got["s"], saved.outputs[1], what=f"{op_type} OutScale")
