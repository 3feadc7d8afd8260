"""Binary elementwise ops, comparisons, logic, where, sum and is* tests: single-op Paddle programs
converted to NNAdapter, run on builtin_device and compared with Paddle running the same program."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.codes import OperationType as T
from support.converter_harness import check_program, opdesc_program, static_program

RNG = np.random.default_rng(2024)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def ints(*shape, low=-9, high=10, dtype=np.int32, nonzero=False):
    a = RNG.integers(low, high, size=shape).astype(dtype)
    if nonzero:
        a[a == 0] = 3
    return a


def one_op(tmp_path, op_type, *, feeds, params=None, attrs=None, slots=None, out_dtype="float32", run_paddle=True):
    """A one-op program: inputs named after their slot (x -> X, y -> Y) unless `slots` says otherwise."""
    slots = slots or {name: [name.lower()] for name in ("X", "Y") if name.lower() in {**feeds, **(params or {})}}
    return opdesc_program(tmp_path, op_type, inputs=slots, outputs={"Out": ["out"]}, attrs=attrs or {},
                          feeds=feeds, params=params,
                          extra_vars=[{"name": "out", "dtype": out_dtype, "shape": []}], run_paddle=run_paddle)


def operation_types(result):
    return [op.type for op in result.model.operations]


# -- arithmetic: axis broadcasting ---------------------------------------------------------------------

# (x shape, y shape, axis): equal ranks, numpy trailing (-1 and its explicit value), mid-axis, leading axis,
# y of higher rank than x.
BROADCASTS = [
    ((2, 3, 4, 5), (2, 3, 4, 5), -1),
    ((2, 3, 4, 5), (5,), -1),
    ((2, 3, 4, 5), (4, 5), 2),
    ((2, 3, 4, 5), (3,), 1),
    ((2, 3, 4, 5), (3, 4), 1),
    ((2, 3, 4, 5), (2,), 0),
    ((2, 3, 4), (3, 1), 1),
    ((4, 5), (2, 3, 4, 5), -1),
    ((3,), (2, 3, 4), 1),
]


@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div"])
@pytest.mark.parametrize("x_shape,y_shape,axis", BROADCASTS)
def test_arithmetic_axis_broadcast_variable_y(tmp_path, op_type, x_shape, y_shape, axis):
    x, y = randn(*x_shape), randn(*y_shape)
    if op_type == "elementwise_div":
        y = np.where(np.abs(y) < 0.2, 0.7, y).astype(np.float32)
    saved = one_op(tmp_path, op_type, feeds={"x": x, "y": y}, attrs={"axis": axis})
    _, result = check_program(saved)
    needs_unsqueeze = len(x_shape) != len(y_shape) and axis != -1 and \
        axis + min(len(x_shape), len(y_shape)) != max(len(x_shape), len(y_shape))
    assert (T.UNSQUEEZE in operation_types(result)) == needs_unsqueeze


@pytest.mark.parametrize("x_shape,y_shape,axis", [((2, 3, 4, 5), (3,), 1), ((2, 3, 4, 5), (3, 4), 1),
                                                  ((2, 3, 4, 5), (5,), -1), ((2, 3, 4), (3, 1), 1)])
def test_arithmetic_axis_broadcast_param_y_is_reshaped_constant(tmp_path, x_shape, y_shape, axis):
    saved = one_op(tmp_path, "elementwise_add", feeds={"x": randn(*x_shape)}, params={"y": randn(*y_shape)},
                   attrs={"axis": axis})
    _, result = check_program(saved)
    assert operation_types(result) == [T.ADD]


def test_arithmetic_lower_rank_x_mid_axis_with_param(tmp_path):
    saved = one_op(tmp_path, "elementwise_mul", feeds={"y": randn(2, 3, 4)}, params={"x": randn(3)},
                   attrs={"axis": 1})
    check_program(saved)


@pytest.mark.parametrize("op_type", ["elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_floordiv"])
@pytest.mark.parametrize("x_shape,y_shape,axis", [((2, 3, 4), (2, 3, 4), -1), ((2, 3, 4), (3,), 1),
                                                  ((2, 3, 4), (4,), -1)])
def test_other_arithmetic_float(tmp_path, op_type, x_shape, y_shape, axis):
    x, y = randn(*x_shape) * 3, randn(*y_shape) * 2
    if op_type == "elementwise_pow":
        x = np.abs(x) + 0.1
    if op_type == "elementwise_floordiv":
        y = np.where(np.abs(y) < 0.3, 1.3, y).astype(np.float32)
    saved = one_op(tmp_path, op_type, feeds={"x": x.astype(np.float32), "y": y.astype(np.float32)},
                   attrs={"axis": axis})
    check_program(saved)


def test_float_elementwise_mod_is_declined_and_runs_exactly_on_the_host(tmp_path):
    """Paddle's float remainder is fmod with a sign fix; x - floor(x / y) * y, all NNAdapter can compose, is
    not that for huge x or y = +-inf, so the converter declines floats and the host kernel computes it."""
    import nnadapter_bridge as nb

    x = np.array([[7.5, -7.5, 3e38, -1e30, 2.0, 5.0], [0.0, -0.0, 1.0, -1.0, np.nan, np.inf]], np.float32)
    y = np.array([[2.0, 2.0, 7.0, 3.0, np.inf, -np.inf], [3.0, 3.0, -np.inf, np.inf, 2.0, 2.0]], np.float32)
    saved = one_op(tmp_path, "elementwise_mod", feeds={"x": x, "y": y}, attrs={"axis": -1})
    config = nb.Config()
    config.set_model_file(saved.model_path)
    if saved.params_path:
        config.set_param_file(saved.params_path)
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)
    assert predictor.stats.host_ops == 1
    for name in predictor.get_input_names():
        predictor.get_input_by_name(name).from_numpy(saved.feeds[name])
    predictor.run()
    got = predictor.get_output(0).numpy()
    want = saved.outputs[0]  # Paddle's
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                                     "elementwise_max", "elementwise_min", "elementwise_floordiv", "elementwise_mod",
                                     "elementwise_pow"])
def test_arithmetic_integers_exact(tmp_path, dtype, op_type):
    x = ints(3, 4, dtype=dtype)
    y = ints(4, dtype=dtype, nonzero=True)
    if op_type == "elementwise_pow":
        x, y = ints(3, 4, low=-3, high=4, dtype=dtype), ints(4, low=0, high=4, dtype=dtype)
    saved = one_op(tmp_path, op_type, feeds={"x": x, "y": y}, attrs={"axis": -1},
                   out_dtype=np.dtype(dtype).name)
    check_program(saved)


def test_elementwise_default_exporter_drops_axis(tmp_path):
    # paddle.add saves no explicit broadcast axis beyond -1; a missing attr means -1.
    saved = one_op(tmp_path, "elementwise_add", feeds={"x": randn(2, 3, 4), "y": randn(3, 4)})
    check_program(saved)


def test_elementwise_static_mode_build(tmp_path):
    def build(x, y):
        import paddle
        return (paddle.add(x, y) * y - y) / (y * y + 1.0)

    check_program(static_program(tmp_path, build, {"x": randn(2, 3, 4), "y": randn(3, 4)}))


# -- fusion_elementwise_*_activation (Paddle Lite ops; Paddle cannot run them: numpy oracle) ----------------

def _fused_reference(kind, x, y, act):
    base = {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y, "max": np.maximum(x, y),
            "min": np.minimum(x, y), "pow": np.power(x, y), "floordiv": np.floor_divide(x, y)}[kind]
    return {"": base, "relu": np.maximum(base, 0), "relu1": np.clip(base, -1, 1), "relu6": np.clip(base, 0, 6),
            "sigmoid": 1 / (1 + np.exp(-base.astype(np.float64))), "tanh": np.tanh(base),
            "leaky_relu": np.where(base >= 0, base, 0.02 * base)}[act].astype(np.float32)


@pytest.mark.parametrize("kind", ["add", "sub", "mul", "div", "max", "min", "pow", "floordiv"])
@pytest.mark.parametrize("act", ["relu", "relu6"])
def test_fusion_elementwise_activation_fuse_codes(tmp_path, kind, act):
    x, y = randn(2, 3, 4) * 4, randn(3, 4) * 2 + 0.5
    if kind == "pow":
        x = np.abs(x) + 0.1
    if kind in ("div", "floordiv"):
        y = np.where(np.abs(y) < 0.3, 1.3, y).astype(np.float32)
    op_type = f"fusion_elementwise_{kind}_activation"
    saved = one_op(tmp_path, op_type, feeds={"x": x, "y": y}, attrs={"axis": -1, "act_type": act}, run_paddle=False)
    _, result = check_program(saved, want=[_fused_reference(kind, x, y, act)])
    assert len(result.model.operations) == 1


@pytest.mark.parametrize("act", ["relu1", "", "sigmoid", "tanh", "leaky_relu"])
def test_fusion_elementwise_activation_unpacked(tmp_path, act):
    x, y = randn(2, 3, 4) * 2, randn(3)
    saved = one_op(tmp_path, "fusion_elementwise_add_activation", feeds={"x": x, "y": y},
                   attrs={"axis": 1, "act_type": act}, run_paddle=False)
    check_program(saved, want=[_fused_reference("add", x, y[:, None], act)])


@pytest.mark.parametrize("op_type", ["fusion_elementwise_sub_activation", "fusion_elementwise_mul_activation",
                                     "fusion_elementwise_div_activation", "fusion_elementwise_min_activation",
                                     "fusion_elementwise_max_activation", "fusion_elementwise_pow_activation",
                                     "fusion_elementwise_floordiv_activation", "fusion_elementwise_add_activation"])
def test_fusion_elementwise_unknown_activation_is_rejected(op_type):
    from converters.registry import get_converter
    from nnadapter_bridge.loader.program import OpInfo

    op = OpInfo(op_type, 0, 0, {"X": ["x"], "Y": ["y"]}, {"Out": ["out"]}, {"act_type": "no_such_act"}, {})
    assert "no_such_act" in get_converter(op_type).check(op, None)


# -- comparisons ----------------------------------------------------------------------------------------------

COMPARISONS = ["equal", "not_equal", "greater_than", "greater_equal", "less_than", "less_equal"]


@pytest.mark.parametrize("op_type", COMPARISONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_comparisons(tmp_path, op_type, dtype):
    # Small integers (also as floats) make equality cases frequent.
    x, y = ints(2, 3, 4, low=-2, high=3).astype(dtype), ints(3, 4, low=-2, high=3).astype(dtype)
    saved = one_op(tmp_path, op_type, feeds={"x": x, "y": y}, attrs={"axis": -1}, out_dtype="bool")
    got, _ = check_program(saved)
    assert got["out"].dtype == np.bool_


@pytest.mark.parametrize("op_type,fn", [("equal", np.equal), ("less_than", np.less)])
def test_comparison_mid_axis(tmp_path, op_type, fn):
    # Paddle 3 compare kernels broadcast numpy-style and reject this program; Paddle 2 programs carry a
    # meaningful `axis`, which the converter honours like elementwise ops (numpy oracle).
    x, y = ints(2, 3, 4, low=-2, high=3).astype(np.float32), ints(3, low=-2, high=3).astype(np.float32)
    saved = one_op(tmp_path, op_type, feeds={"x": x, "y": y}, attrs={"axis": 1}, out_dtype="bool",
                   run_paddle=False)
    check_program(saved, want=[fn(x, y[:, None])])


def test_comparison_bool_inputs(tmp_path):
    saved = one_op(tmp_path, "equal", feeds={"x": ints(2, 3, low=0, high=2).astype(bool),
                                             "y": ints(2, 3, low=0, high=2).astype(bool)}, out_dtype="bool")
    check_program(saved)


# -- logic -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op_type", ["logical_and", "logical_or", "logical_xor"])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float32])
def test_binary_logic(tmp_path, op_type, dtype):
    x = ints(2, 3, 4, low=0, high=2).astype(dtype)
    y = ints(3, 4, low=-1, high=2).astype(dtype) if dtype != np.bool_ else ints(3, 4, low=0, high=2).astype(bool)
    saved = one_op(tmp_path, op_type, feeds={"x": x, "y": y}, out_dtype="bool")
    check_program(saved)


@pytest.mark.parametrize("dtype", [np.bool_, np.int64, np.float32])
def test_logical_not(tmp_path, dtype):
    saved = one_op(tmp_path, "logical_not", feeds={"x": ints(2, 5, low=-1, high=2).astype(dtype)}, out_dtype="bool")
    check_program(saved)


# -- where, sum --------------------------------------------------------------------------------------------------

def _where_program(tmp_path, condition, x, y, run_paddle=True):
    return opdesc_program(tmp_path, "where", inputs={"Condition": ["c"], "X": ["x"], "Y": ["y"]},
                          outputs={"Out": ["out"]}, feeds={"c": condition, "x": x, "y": y},
                          extra_vars=[{"name": "out", "dtype": x.dtype.name, "shape": []}], run_paddle=run_paddle)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_where(tmp_path, dtype):
    condition = ints(2, 3, 4, low=0, high=2).astype(bool)
    check_program(_where_program(tmp_path, condition, ints(2, 3, 4).astype(dtype), ints(2, 3, 4).astype(dtype)))


def test_where_broadcasts(tmp_path):
    # Paddle 3's where op wants equal shapes; paddle.where broadcasts first. WHERE broadcasts itself.
    condition, x, y = ints(3, 1, low=0, high=2).astype(bool), randn(2, 3, 4), randn(4)
    check_program(_where_program(tmp_path, condition, x, y, run_paddle=False), want=[np.where(condition, x, y)])


@pytest.mark.parametrize("n", [1, 2, 4])
def test_sum(tmp_path, n):
    feeds = {f"x{i}": randn(2, 3, 4) for i in range(n)}
    saved = opdesc_program(tmp_path, "sum", inputs={"X": list(feeds)}, outputs={"Out": ["out"]}, feeds=feeds)
    check_program(saved)


def test_sum_with_param_and_ints(tmp_path):
    saved = opdesc_program(tmp_path, "sum", inputs={"X": ["a", "b"]}, outputs={"Out": ["out"]},
                           feeds={"a": ints(3, 4)}, params={"b": ints(3, 4)},
                           extra_vars=[{"name": "out", "dtype": "int32", "shape": []}])
    check_program(saved)


# -- isnan / isinf / isfinite ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op_type", ["isnan_v2", "isinf_v2", "isfinite_v2"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_is_tests(tmp_path, op_type, dtype):
    if dtype == np.float32:
        x = randn(3, 4)
        x[0, 0], x[1, 1], x[2, 2], x[0, 3] = np.nan, np.inf, -np.inf, 0.0
    else:
        x = ints(3, 4)
    saved = one_op(tmp_path, op_type, feeds={"x": x}, out_dtype="bool")
    got, _ = check_program(saved)
    assert got["out"].dtype == np.bool_


def test_elementwise_add_quantized_output_scale():
    from converters.context import convert_subgraph
    from nnadapter_bridge.loader.program import OpInfo
    from nnadapter_bridge.nnadapter.codes import Precision
    from nnadapter_bridge.nnadapter.reference import run_model
    from nnadapter_bridge.nnadapter.types import OperandType

    op = OpInfo("elementwise_add", 0, 0, {"X": ["x"], "Y": ["y"]}, {"Out": ["out"]},
                {"axis": -1, "X0_scale": [0.05], "Y0_scale": [0.1], "Out0_scale": [0.2]}, {})
    q8 = Precision.QUANT_INT8_SYMM_PER_LAYER
    result = convert_subgraph([op], {}, {"x": OperandType(precision=q8, dims=(2, 3), scale=0.05),
                                         "y": OperandType(precision=q8, dims=(2, 3), scale=0.1)}, ["out"])
    out_type = result.model.output_operands[0].type
    assert out_type.precision == q8 and out_type.scale == pytest.approx(0.2)
    a, b = RNG.integers(-100, 100, size=(2, 3)).astype(np.int8), RNG.integers(-100, 100, size=(2, 3)).astype(np.int8)
    (got,) = run_model(result.model, [a, b])
    want = np.clip(np.rint((a * 0.05 + b * 0.1) / 0.2), -128, 127)
    np.testing.assert_allclose(got.astype(int), want.astype(int), atol=1)  # one step: float rounding at .5
