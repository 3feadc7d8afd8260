"""0-d in, 0-d out: Paddle 3.3.1 keeps a 0-d input's result 0-d for every elementwise / unary op, so the
scalar constants a converter adds next to a 0-d operand (const_like), 0-d parameters and 0-d assign_value
constants must stay 0-d (a [1] operand would broadcast the result to [1]). Expectations are Paddle's
running the same program."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.codes import Precision
from support.converter_harness import check_program, convert_and_run, opdesc_program, pir_program, static_program

X0 = np.asarray(0.3, dtype=np.float32)


def _ops():
    import paddle

    F = paddle.nn.functional
    return {
        "scale": lambda x: paddle.scale(x, 2.0, 0.5), "sqrt": paddle.sqrt, "pow": lambda x: paddle.pow(x, 3.0),
        "elu": F.elu, "selu": F.selu, "reciprocal": paddle.reciprocal, "log1p": paddle.log1p,
        "sign": paddle.sign, "round": paddle.round, "ceil": paddle.ceil,
    }


@pytest.mark.parametrize("name", ["scale", "sqrt", "pow", "elu", "selu", "reciprocal", "log1p", "sign", "round",
                                  "ceil"])
def test_scalar_constants_next_to_a_0d_input_keep_it_0d(tmp_path, name):
    saved = pir_program(tmp_path, lambda x: _ops()[name](x), {"x": X0})
    assert saved.outputs[0].shape == ()
    got, result = check_program(saved)
    assert next(iter(got.values())).shape == ()
    floats = [o for op in result.model.operations for o in op.inputs
              if o is not None and o.is_constant and o.type.precision == Precision.FLOAT32]
    assert all(o.type.dims == () for o in floats), [o.type.dims for o in floats]


def test_scalar_constants_next_to_a_ranked_input_stay_shape_1(tmp_path):
    import paddle

    saved = static_program(
        tmp_path, lambda x: paddle.scale(x, 2.0, 0.5), {"x": np.asarray([0.1, 0.2, 0.3], np.float32)}
    )
    _, result = check_program(saved)
    constants = [o for op in result.model.operations for o in op.inputs if o is not None and o.is_constant]
    assert constants and all(o.type.dims == (1,) for o in constants)


@pytest.mark.parametrize("op_type, expected", [("softmax", 1.0), ("log_softmax", 0.0)])
@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("value", [0.3, np.nan, np.inf, -np.inf])
def test_softmax_of_a_0d_input(tmp_path, op_type, expected, axis, value):
    x = np.asarray(value, dtype=np.float32)
    saved = opdesc_program(tmp_path, op_type, inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs={"axis": axis},
                           feeds={"x": x})
    assert saved.outputs[0].shape == () and saved.outputs[0] == expected  # Paddle writes the constant
    got, _ = check_program(saved)
    assert got["out"].shape == () and got["out"] == expected


def test_softmax_of_a_0d_input_with_axis_1_is_declined(tmp_path):
    from nnadapter_bridge.errors import ConversionError

    saved = opdesc_program(tmp_path, "softmax", inputs={"X": ["x"]}, outputs={"Out": ["out"]}, attrs={"axis": 1},
                           feeds={"x": X0}, run_paddle=False)  # Paddle: axis must be in [-1, 0] for 0-d
    with pytest.raises(ConversionError, match="axis 1"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


def test_a_0d_parameter_stays_0d(tmp_path):
    w = np.asarray(1.75, dtype=np.float32)
    saved = opdesc_program(tmp_path, "elementwise_mul", inputs={"X": ["x"], "Y": ["w"]}, outputs={"Out": ["out"]},
                           attrs={"axis": -1}, feeds={"x": X0}, params={"w": w})
    assert saved.outputs[0].shape == ()
    got, result = check_program(saved)
    assert got["out"].shape == ()
    assert [o.type.dims for o in result.model.operations[0].inputs
            if o is not None and o.is_constant and o.type.precision == Precision.FLOAT32] == [()]


def test_a_0d_assign_value_stays_0d(tmp_path):
    import paddle

    saved = static_program(tmp_path, lambda x: x + paddle.assign(np.asarray(2.5, np.float32)), {"x": X0})
    assert saved.outputs[0].shape == ()
    got, result, graph = convert_and_run(saved.model_path, saved.feeds, saved.params_path)
    assert "assign_value" in {op.type for op in graph.ops()}
    assert next(iter(got.values())).shape == ()
    np.testing.assert_allclose(next(iter(got.values())), saved.outputs[0], rtol=1e-6)
