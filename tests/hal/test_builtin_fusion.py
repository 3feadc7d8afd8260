"""builtin_device's fusions (conv + batch norm, conv/fc + relu): fewer operations, same results."""
from __future__ import annotations

import numpy as np
import pytest

from hal.fusion import fuse_operations
from nnadapter_bridge.nnadapter.codes import FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.types import OperandType
from support.tolerances import assert_op_close

rng = np.random.default_rng(11)


def _conv(model, x, cout, cin, fuse=FuseCode.FUSED_NONE, bias=True):
    out = model.add_output()
    w = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.3
    b = model.add_constant(rng.standard_normal(cout).astype(np.float32)) if bias else None
    model.add_operation(T.CONV_2D, [x, model.add_constant(w), b, model.add_constant(np.int32(0)),
                                    model.add_constant(np.array([1, 1, 1, 1], np.int32)),
                                    model.add_constant(np.array([1, 1], np.int32)), model.add_constant(np.int32(1)),
                                    model.add_constant(np.array([1, 1], np.int32)), model.add_constant(np.int32(fuse))],
                        [out])
    return out


def _bn(model, x, c):
    out = model.add_output()
    params = [rng.uniform(0.5, 1.5, c), rng.standard_normal(c), rng.standard_normal(c) * 0.1, rng.uniform(0.5, 2, c)]
    model.add_operation(T.BATCH_NORMALIZATION, [x] + [model.add_constant(p.astype(np.float32)) for p in params]
                        + [model.add_constant(np.float32(1e-3))], [out])
    return out


def _unary(model, op_type, x):
    out = model.add_output()
    model.add_operation(op_type, [x], [out])
    return out


def _finish(model, x, outs):
    model.identify_inputs_and_outputs([x], outs)
    model.finish()
    return model


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [T.RELU, T.RELU6, None])
def test_conv_bn_act_chain_fuses_to_one_conv(bias, act):
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2, 3, 9, 9)))
    y = _bn(model, _conv(model, x, 4, 3, bias=bias), 4)
    if act is not None:
        y = _unary(model, act, y)
    _finish(model, x, [y])
    fused = fuse_operations(model)
    assert [op.type for op in fused.operations] == [T.CONV_2D]
    want_code = {T.RELU: FuseCode.FUSED_RELU, T.RELU6: FuseCode.FUSED_RELU6, None: FuseCode.FUSED_NONE}[act]
    assert int(fused.operations[0].inputs[8].value[0]) == want_code
    feed = rng.standard_normal((2, 3, 9, 9)).astype(np.float32) * 3
    # Folding changes float32 rounding order (w*s instead of conv then *s): a few ulps of the output scale.
    assert_op_close(run_model(fused, [feed])[0], run_model(model, [feed])[0], atol=1e-5, rtol=1e-5, what="fused")
    # The unfused filter and bias and the batch norm's params are gone: only what the fused conv uses is left.
    used = {id(o) for op in fused.operations for o in op.inputs + op.outputs if o is not None}
    assert len(fused.operands) == len(used)
    original = next(o for o in model.operations[0].inputs[1:2])
    assert all(o.value is not original.value for o in fused.operands)
    # The original model is untouched.
    assert [op.type for op in model.operations][:2] == [T.CONV_2D, T.BATCH_NORMALIZATION]


def test_no_fusion_when_the_intermediate_has_two_consumers_or_is_an_output():
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 3, 5, 5)))
    c = _conv(model, x, 4, 3)
    a = _unary(model, T.RELU, c)
    b = _unary(model, T.SIGMOID, c)
    _finish(model, x, [a, b])
    assert fuse_operations(model) is model
    model2 = Model()
    x2 = model2.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 3, 5, 5)))
    c2 = _conv(model2, x2, 4, 3)
    r2 = _unary(model2, T.RELU, c2)
    _finish(model2, x2, [c2, r2])
    assert fuse_operations(model2) is model2


def test_already_fused_conv_is_not_fused_again():
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 3, 5, 5)))
    y = _unary(model, T.RELU6, _conv(model, x, 4, 3, fuse=FuseCode.FUSED_RELU))
    _finish(model, x, [y])
    assert fuse_operations(model) is model


def test_fully_connected_relu_fuses():
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(3, 8)))
    fc = model.add_output()
    model.add_operation(T.FULLY_CONNECTED, [x, model.add_constant(rng.standard_normal((5, 8)).astype(np.float32)),
                                            model.add_constant(rng.standard_normal(5).astype(np.float32)),
                                            model.add_constant(np.int32(0))], [fc])
    y = _unary(model, T.RELU, fc)
    _finish(model, x, [y])
    fused = fuse_operations(model)
    assert [op.type for op in fused.operations] == [T.FULLY_CONNECTED]
    feed = rng.standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_array_equal(run_model(fused, [feed])[0], run_model(model, [feed])[0])
