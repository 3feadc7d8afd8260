"""fusion.scalar_affine_as_depthwise_conv (microsoft_onnxruntime): a learnable affine block after an activation
(`scale * act(x) + bias`, one-element scale and bias, PP-HGNetV2 and PP-LCNetV3) becomes one depthwise 1x1
CONV_2D, which onnxruntime keeps in its NCHWc layout; what it must leave alone; the same answers (the reference
kernels and onnxruntime against Paddle Inference)."""
from __future__ import annotations

import numpy as np
import pytest

from hal.fusion import scalar_affine_as_depthwise_conv
from nnadapter_bridge.nnadapter.codes import FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.types import OperandType
from support.tolerances import assert_op_close

rng = np.random.default_rng(17)


def _input(model, dims=(2, 8, 5, 6)):
    return model.add_operand(OperandType(precision=Precision.FLOAT32, dims=dims))


def _op(model, op_type, inputs):
    out = model.add_output()
    model.add_operation(op_type, inputs, [out])
    return out


def _binary(model, op_type, a, b, fuse=FuseCode.FUSED_NONE):
    return _op(model, op_type, [a, b, model.add_constant(np.int32(fuse))])


def _scalar(model, value):
    return model.add_constant(np.array([value], np.float32))


def _conv(model, x, fuse):
    cin = x.type.dims[1]
    w = rng.standard_normal((cin, cin, 1, 1)).astype(np.float32)
    return _op(model, T.CONV_2D, [x, model.add_constant(w), model.add_constant(np.zeros(cin, np.float32)),
                                  model.add_constant(np.int32(0)), model.add_constant(np.zeros(4, np.int32)),
                                  model.add_constant(np.ones(2, np.int32)), model.add_constant(np.int32(1)),
                                  model.add_constant(np.ones(2, np.int32)), model.add_constant(np.int32(fuse))])


def _finish(model, inputs, outputs):
    model.identify_inputs_and_outputs(inputs, outputs)
    model.finish()
    return model


def _same_answers(model, fused, dims=(2, 8, 5, 6)):
    x = (rng.standard_normal(dims) * 3).astype(np.float32)
    for got, want in zip(run_model(fused, [x]), run_model(model, [x])):
        # one rounding (x * scale + bias) where MUL then ADD round twice
        assert_op_close(got, want, atol=1e-6, rtol=1e-6, what="fused")


@pytest.mark.parametrize("activation", [T.RELU, T.HARD_SWISH, T.SIGMOID], ids=["relu", "hard_swish", "sigmoid"])
def test_scale_and_bias_after_an_activation_become_one_depthwise_conv(activation):
    model = Model()
    x = _input(model)
    params = [_scalar(model, 1 / 6), _scalar(model, 0.5)] if activation == T.HARD_SWISH else []
    act = _op(model, activation, [x, *params])
    scaled = _binary(model, T.MUL, _scalar(model, 1.3), act)  # the constant first, as Paddle writes it
    out = _binary(model, T.ADD, scaled, _scalar(model, -0.2), FuseCode.FUSED_RELU6)
    _finish(model, [x], [out])
    fused = scalar_affine_as_depthwise_conv(model)
    assert [op.type for op in fused.operations] == [activation, T.CONV_2D]
    conv = fused.operations[1]
    assert conv.inputs[1].value.shape == (8, 1, 1, 1) and np.all(conv.inputs[1].value == np.float32(1.3))
    assert np.all(conv.inputs[2].value == np.float32(-0.2)) and int(conv.inputs[6].value[0]) == 8
    assert int(conv.inputs[8].value[0]) == FuseCode.FUSED_RELU6  # the ADD's fused activation
    assert [op.type for op in model.operations] == [activation, T.MUL, T.ADD]  # the caller's model as it was
    _same_answers(model, fused)


def test_a_lone_scale_or_shift_after_an_activation_is_one_too():
    model = Model()
    x = _input(model)
    scaled = _binary(model, T.MUL, _op(model, T.RELU, [x]), _scalar(model, 0.5))
    shifted = _binary(model, T.ADD, _op(model, T.SIGMOID, [x]), _scalar(model, 2.0))
    _finish(model, [x], [scaled, shifted])
    fused = scalar_affine_as_depthwise_conv(model)
    assert sorted(op.type.name for op in fused.operations) == ["CONV_2D", "CONV_2D", "RELU", "SIGMOID"]
    _same_answers(model, fused)


def test_a_fused_activation_of_the_producer_counts():
    model = Model()
    x = _input(model)
    out = _binary(model, T.ADD, _binary(model, T.MUL, _conv(model, x, FuseCode.FUSED_RELU), _scalar(model, 0.7)),
                  _scalar(model, 0.1))
    _finish(model, [x], [out])
    assert [op.type for op in scalar_affine_as_depthwise_conv(model).operations] == [T.CONV_2D, T.CONV_2D]


def test_what_is_left_alone():
    model = Model()
    x = _input(model)
    # onnxruntime folds a scale straight after a convolution into its filter by itself
    after_conv = _binary(model, T.MUL, _conv(model, x, FuseCode.FUSED_NONE), _scalar(model, 0.7))
    act = _op(model, T.RELU, [x])
    per_channel = _binary(model, T.MUL, act, model.add_constant(np.ones((1, 8, 1, 1), np.float32)))
    of_an_input = _binary(model, T.ADD, x, _scalar(model, 1.0))  # no activation before it
    y = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2, 5, 6)))
    three_d = _binary(model, T.MUL, _op(model, T.RELU, [y]), _scalar(model, 2.0))
    _finish(model, [x, y], [after_conv, per_channel, of_an_input, three_d])
    assert scalar_affine_as_depthwise_conv(model) is model


def test_a_scale_read_elsewhere_keeps_its_shift_apart():
    """The MUL's output is also a model output: the MUL alone becomes a convolution, the ADD stays."""
    model = Model()
    x = _input(model)
    scaled = _binary(model, T.MUL, _op(model, T.RELU, [x]), _scalar(model, 1.5))
    shifted = _binary(model, T.ADD, scaled, _scalar(model, 0.25))
    _finish(model, [x], [scaled, shifted])
    fused = scalar_affine_as_depthwise_conv(model)
    assert [op.type for op in fused.operations] == [T.RELU, T.CONV_2D, T.ADD]
    _same_answers(model, fused)


def _lab_net(x):
    """ConvBNAct with a learnable affine block, then a max pool and a 3x3 convolution (PP-HGNetV2's stem)."""
    import paddle
    import paddle.nn.functional as F

    scale, bias = paddle.to_tensor([1.2], "float32"), paddle.to_tensor([-0.05], "float32")
    a = F.relu(F.conv2d(x, paddle.create_parameter([16, 3, 3, 3], "float32"), padding=1)) * scale + bias
    b = F.conv2d(a, paddle.create_parameter([16, 16, 3, 3], "float32"), padding=1)
    return [F.max_pool2d(a, 2, ceil_mode=True), F.hardswish(b) * scale + bias]


def test_onnxruntime_runs_the_blocks_as_convolutions_with_paddles_answer(tmp_path):
    pytest.importorskip("paddle")
    import onnx

    import hal.microsoft_onnxruntime.driver as ort_driver
    import nnadapter_bridge as nb
    from support.converter_harness import pir_program

    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    saved = pir_program(tmp_path, _lab_net, {"x": x})
    built = []
    original = ort_driver.OnnxRuntimeDriver._open_session

    def keep(self, context, model_bytes):
        built.append(onnx.load_from_string(bytes(model_bytes)))
        return original(self, context, model_bytes)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ort_driver.OnnxRuntimeDriver, "_open_session", keep)
        config = nb.Config()
        config.set_model_file(saved.model_path)
        config.set_nnadapter_device_names(["microsoft_onnxruntime"])
        predictor = nb.create_predictor(config)
        predictor.get_input_by_name("x").from_numpy(x)
        predictor.run()
    kinds = [n.op_type for n in built[-1].graph.node]
    assert "Mul" not in kinds and "Add" not in kinds, kinds
    assert kinds.count("Conv") == 4
    for k, want in enumerate(saved.outputs):
        np.testing.assert_allclose(predictor.get_output(k).numpy(), want, rtol=1e-5, atol=1e-5, err_msg=f"output {k}")
