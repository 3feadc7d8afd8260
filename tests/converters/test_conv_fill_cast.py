"""cast, assign, share_data, assign_value and the fill ops: single-op Paddle programs converted to
NNAdapter, run on builtin_device and compared with Paddle running the same program (or numpy where
Paddle 3.3.1 can no longer run the op as written)."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from support.converter_harness import check_program, opdesc_program

RNG = np.random.default_rng(11)

VARTYPE = {"bool": 0, "int32": 2, "int64": 3, "float32": 5, "float64": 6, "uint8": 20, "int8": 21}


def sample(dtype, shape=(2, 3, 4)):
    if np.dtype(dtype) == np.bool_:
        return RNG.integers(0, 2, size=shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-5 if np.dtype(dtype).kind == "i" else 0, 6, size=shape).astype(dtype)
    # Fractions on both sides of zero exercise truncation toward zero in float -> int casts.
    return (RNG.standard_normal(shape) * 4).astype(dtype)


def program(tmp_path, op_type, *, inputs, attrs, feeds, out_dtype, params=None, run_paddle=True):
    return opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["out"]}, attrs=attrs, feeds=feeds,
                          params=params, run_paddle=run_paddle,
                          extra_vars=[{"name": "out", "dtype": out_dtype, "shape": []}])


def operation_types(result):
    return [op.type for op in result.model.operations]


# -- cast -----------------------------------------------------------------------------------------------------

DTYPES = ["float32", "int32", "int64", "bool"]


@pytest.mark.parametrize("in_dtype", DTYPES)
@pytest.mark.parametrize("out_dtype", DTYPES + ["float64", "uint8"])
def test_cast(tmp_path, in_dtype, out_dtype):
    x = sample(in_dtype)
    if out_dtype == "uint8" and in_dtype != "bool":
        x = np.abs(x)  # negative -> uint8 wraps in C; keep to the defined range
    saved = program(tmp_path, "cast", inputs={"X": ["x"]}, feeds={"x": x}, out_dtype=out_dtype,
                    attrs={"in_dtype": VARTYPE[in_dtype], "out_dtype": VARTYPE[out_dtype]})
    got, _ = check_program(saved)
    assert got["out"].dtype == np.dtype(out_dtype)


def test_cast_rejects_unknown_dtype():
    from converters.registry import get_converter
    from nnadapter_bridge.loader.program import OpInfo

    op = OpInfo("cast", 0, 0, {"X": ["x"]}, {"Out": ["out"]}, {"in_dtype": 5, "out_dtype": 23}, {})
    assert "out_dtype" in get_converter("cast").check(op, None)


# -- assign / share_data / assign_value -------------------------------------------------------------------

@pytest.mark.parametrize("op_type", ["assign", "share_data"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_assign(tmp_path, op_type, dtype):
    x = sample(dtype)
    saved = program(tmp_path, op_type, inputs={"X": ["x"]}, feeds={"x": x}, out_dtype=dtype, attrs={})
    check_program(saved)


def test_assign_of_parameter(tmp_path):
    w = sample("float32", (3, 4))
    saved = program(tmp_path, "assign", inputs={"X": ["w"]}, feeds={}, params={"w": w}, out_dtype="float32",
                    attrs={})
    check_program(saved)


@pytest.mark.parametrize("dtype,attr,values", [
    ("float32", "fp32_values", [0.5, -1.25, 3.0, 7.5, 0.0, -2.0]),
    ("int32", "int32_values", [1, -2, 3, 4, 5, 6]),
    ("int64", "int64_values", [2 ** 40, -3, 0, 1, 2, 3]),
    ("bool", "bool_values", [True, False, True, True, False, False]),
    ("float32", "values", [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]),
])
def test_assign_value(tmp_path, dtype, attr, values):
    # Paddle 3 keeps only the `values` attr (SCALARS, which our proto predates): numpy oracle.
    saved = program(tmp_path, "assign_value", inputs={}, feeds={}, out_dtype=dtype, run_paddle=False,
                    attrs={"shape": [2, 3], "dtype": VARTYPE[dtype], attr: values})
    got, _ = check_program(saved, want=[np.asarray(values, dtype=dtype).reshape(2, 3)])
    assert got["out"].dtype == np.dtype(dtype)


# -- fill_constant ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "bool", "float64", "int8"])
@pytest.mark.parametrize("shape", [[3], [2, 3, 4], [1, 1]])
def test_fill_constant_attrs(tmp_path, dtype, shape):
    saved = program(tmp_path, "fill_constant", inputs={}, feeds={}, out_dtype=dtype,
                    attrs={"shape": (11, shape), "dtype": VARTYPE[dtype], "value": 3.0})
    got, _ = check_program(saved)
    assert got["out"].dtype == np.dtype(dtype)


# Paddle 3 parses str_value as a double: 2^53 + 1 comes out as 2^53.
@pytest.mark.parametrize("dtype,text", [("int64", "9007199254740993"), ("float32", "inf"), ("float32", "-2.5"),
                                        ("int32", "-7")])
def test_fill_constant_str_value(tmp_path, dtype, text):
    saved = program(tmp_path, "fill_constant", inputs={}, feeds={}, out_dtype=dtype,
                    attrs={"shape": (11, [2, 2]), "dtype": VARTYPE[dtype], "value": 0.0, "str_value": text})
    check_program(saved)


@pytest.mark.parametrize("shape_dtype", [np.int32, np.int64])
def test_fill_constant_shape_tensor(tmp_path, shape_dtype):
    saved = program(tmp_path, "fill_constant", inputs={"ShapeTensor": ["s"]},
                    feeds={"s": np.array([2, 5], dtype=shape_dtype)}, out_dtype="float32",
                    attrs={"shape": (11, [9]), "dtype": 5, "value": 1.5})
    check_program(saved)


def test_fill_constant_shape_tensor_list(tmp_path):
    saved = program(tmp_path, "fill_constant", inputs={"ShapeTensorList": ["a", "b"]},
                    feeds={"a": np.array([3], np.int32)}, params={"b": np.array([4], np.int64)},
                    out_dtype="int32", attrs={"shape": (11, [1, 1]), "dtype": 2, "value": 7.0})
    check_program(saved)


@pytest.mark.parametrize("value_dtype,dtype", [(np.float32, "float32"), (np.float32, "int64"), (np.int32, "float32")])
def test_fill_constant_value_tensor(tmp_path, value_dtype, dtype):
    saved = program(tmp_path, "fill_constant", inputs={"ValueTensor": ["v"]},
                    feeds={"v": np.array([2.75], dtype=np.float32).astype(value_dtype)}, out_dtype=dtype,
                    attrs={"shape": (11, [2, 3]), "dtype": VARTYPE[dtype], "value": 0.0})
    check_program(saved)


# -- fill_any_like / fill_zeros_like ------------------------------------------------------------------------

@pytest.mark.parametrize("x_dtype", ["float32", "int32", "int64", "bool"])
@pytest.mark.parametrize("dtype", [-1, 5, 3, 0])
def test_fill_any_like(tmp_path, x_dtype, dtype):
    out_dtype = x_dtype if dtype == -1 else {5: "float32", 3: "int64", 0: "bool"}[dtype]
    saved = program(tmp_path, "fill_any_like", inputs={"X": ["x"]}, feeds={"x": sample(x_dtype)},
                    out_dtype=out_dtype, attrs={"value": 1.0 if out_dtype == "bool" else 2.0, "dtype": dtype})
    got, _ = check_program(saved)
    assert got["out"].dtype == np.dtype(out_dtype)


def test_fill_any_like_default_dtype(tmp_path):
    saved = program(tmp_path, "fill_any_like", inputs={"X": ["x"]}, feeds={"x": sample("int64")},
                    out_dtype="int64", attrs={"value": 1.0})
    check_program(saved)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_zeros_like(tmp_path, dtype):
    # Paddle 3 has no fill_zeros_like kernel any more: numpy oracle.
    x = sample(dtype)
    saved = program(tmp_path, "fill_zeros_like", inputs={"X": ["x"]}, feeds={"x": x}, out_dtype=dtype, attrs={},
                    run_paddle=False)
    check_program(saved, want=[np.zeros_like(x)])


# -- fill_constant_batch_size_like -----------------------------------------------------------------------------

@pytest.mark.parametrize("in_idx,out_idx,shape", [(0, 0, [-1, 5]), (1, 0, [1, 2, 3]), (2, 1, [4, 1]),
                                                 (0, 2, [2, 2, -1])])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_fill_constant_batch_size_like(tmp_path, in_idx, out_idx, shape, dtype):
    saved = program(tmp_path, "fill_constant_batch_size_like", inputs={"Input": ["x"]},
                    feeds={"x": sample("float32", (3, 4, 6))}, out_dtype=dtype,
                    attrs={"shape": shape, "input_dim_idx": in_idx, "output_dim_idx": out_idx,
                           "dtype": VARTYPE[dtype], "value": 4.0})
    check_program(saved)


@pytest.mark.parametrize("out_idx,shape", [(0, [-1, 5]), (1, [2, -1, 3]), (1, [7, -1])])
def test_fill_constant_batch_size_like_unknown_batch_reads_shape(out_idx, shape):
    """With an unknown batch dim the shape is assembled at run time (SHAPE, SLICE, CONCAT)."""
    from converters.context import convert_subgraph
    from nnadapter_bridge.loader.program import OpInfo
    from nnadapter_bridge.nnadapter.reference import run_model
    from nnadapter_bridge.nnadapter.types import OperandType

    op = OpInfo("fill_constant_batch_size_like", 0, 0, {"Input": ["x"]}, {"Out": ["out"]},
                {"shape": shape, "input_dim_idx": 0, "output_dim_idx": out_idx, "dtype": 5, "value": 1.5}, {})
    in_type = OperandType(precision=Precision.FLOAT32, dims=(UNKNOWN, 4))
    result = convert_subgraph([op], {}, {"x": in_type}, ["out"])
    assert T.SHAPE in operation_types(result)
    (got,) = run_model(result.model, [np.zeros((6, 4), np.float32)])
    want_shape = list(shape)
    want_shape[out_idx] = 6
    np.testing.assert_array_equal(got, np.full(want_shape, 1.5, np.float32))


def test_assign_value_paddle3_scalars_form(tmp_path):
    """"assign_value" as Paddle 3 saves it (`values` of AttrType SCALARS), against Paddle."""
    from support.converter_harness import check_program, static_program

    values = np.array([[1.5, -2.0, 3.25], [4.0, 5.5, -6.0]], np.float32)
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    saved = static_program(tmp_path, lambda x: x * __import__("paddle").assign(values), {"x": x})
    check_program(saved)


# -- linspace ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_linspace_of_a_sequence_length_runs_on_the_device(tmp_path, dtype, device):
    """ERNIE-CTM's positions: linspace(1, L - 2, L - 2) of the sequence length L, computed on the device as Paddle's
    kernel does (halves filled from each end; in FLOAT64 for an integer dtype), not by the host kernel."""
    if device == "intel_openvino" and dtype == "int64":
        pytest.skip("intel_openvino has no FLOAT64 arithmetic: an integer linspace stays on the host")
    import paddle

    from support.converter_harness import pir_program

    def build(ids):
        length = paddle.shape(ids)[1] - 2
        positions = paddle.linspace(1, length, length, dtype=dtype)
        return ids[:, 1:-1] + positions.astype("int64")

    import nnadapter_bridge as nb

    saved = pir_program(tmp_path, build, {"ids": np.arange(11, dtype=np.int64).reshape(1, 11)})
    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(saved.feeds["ids"])
    predictor.run()
    np.testing.assert_array_equal(predictor.get_output(0).numpy(), saved.outputs[0])
    assert "linspace" not in {op.type for op in predictor.host_ops}, predictor.unsupported_reasons()


@pytest.mark.parametrize("start,stop,num", [(0.0, 1.0, 7), (-2.5, 3.0, 10), (1.0, 1.0, 1), (3.0, -1.0, 4)])
def test_linspace_constants(tmp_path, start, stop, num):
    import paddle

    from support.converter_harness import run_pir

    run_pir(tmp_path, "linspace", lambda x: x + paddle.linspace(start, stop, num, dtype="float32"),
            {"x": np.zeros([num], np.float32)}, exact=False)


@pytest.mark.parametrize("start,stop,num", [(0.0, 1.0, 7), (-2.5, 3.0, 10), (2.0, 5.0, 1), (3.0, -1.0, 4),
                                            (0.0, 10.0, 4), (-7.25, 19.5, 13), (1.0, 2.0, 0)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_linspace_of_run_time_values(tmp_path, start, stop, num, dtype):
    """Start, Stop and Num fed, against Paddle bit for bit: float32 is computed in float32 (0.6666666 at 4 of
    linspace(0, 1, 7), not double's 0.6666667), an integer dtype truncates Start and Stop first (-2.5 -> -2), one
    point gives [start] and none an empty result."""
    check_program(opdesc_program(tmp_path, "linspace", inputs={"Start": ["s"], "Stop": ["e"], "Num": ["n"]},
                                 outputs={"Out": ["out"]}, attrs={"dtype": {"float32": 5, "int32": 2}[dtype]},
                                 feeds={"s": np.array([start], np.float32), "e": np.array([stop], np.float32),
                                        "n": np.array([num], np.int32)},
                                 extra_vars=[{"name": "out", "dtype": dtype, "shape": []}]), atol=0, rtol=0)


# -- size, eye ----------------------------------------------------------------------------------------------------


def test_size_of_a_weight_and_of_an_activation(tmp_path):
    """BiT's weight standardisation: numel of a parameter and of a reduced activation, both constants once the
    subgraph is converted for its input shapes."""
    import paddle

    from support.converter_harness import run_pir

    def build(x):
        weight = paddle.create_parameter([4, 3, 2], "float32")
        reduced = paddle.sum(x, axis=1, keepdim=True)
        return x * paddle.numel(weight).astype("float32") + paddle.numel(reduced).astype("float32")

    run_pir(tmp_path, "size", build, {"x": np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)})


@pytest.mark.parametrize("rows,cols,dtype", [(3, None, "float32"), (2, 5, "float32"), (4, 3, "int64")])
def test_eye(tmp_path, rows, cols, dtype):
    import paddle

    from support.converter_harness import run_pir

    shape = (rows, rows if cols is None else cols)
    feeds = {"x": np.ones(shape, dtype)}
    run_pir(tmp_path, "eye", lambda x: x + paddle.eye(rows, cols, dtype=dtype), feeds)


# -- empty ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape_from", ["attr", "tensor"])
@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_empty_then_written_runs_on_the_device(tmp_path, shape_from, device):
    """Falcon's (paddlenlp rw) causal mask: paddle.empty([L, L], bool) then every element written by set_value. The
    converter fills zeros (Paddle leaves the values uninitialized; the model reads only what it wrote), so the op
    runs on the device instead of the host kernel ("no converter for Paddle op 'empty'")."""
    import paddle

    from support.converter_harness import device_predictor, pir_program

    def build(ids):
        length = ids.shape[1] if shape_from == "attr" else paddle.shape(ids)[1]
        mask = paddle.empty([length, length], dtype="bool")
        seq = paddle.arange(ids.shape[1])
        # paddle.static.setitem: the written value (what to_static makes of `mask[:, :] = ...`); a plain in-place
        # `mask[:, :] =` in a static program gives the readers of `mask` no dependency on the write
        mask = paddle.static.setitem(mask, (slice(None), slice(None)), seq[:, None] < seq[None, :])
        return paddle.where(mask[None, :, :], ids[:, None, :] * 0, ids[:, None, :])

    saved = pir_program(tmp_path, build, {"ids": np.arange(1, 7, dtype=np.int64).reshape(1, 6)})
    predictor = device_predictor(saved.model_path, device)
    predictor.get_input(0).from_numpy(saved.feeds["ids"])
    predictor.run()
    np.testing.assert_array_equal(predictor.get_output(0).numpy(), saved.outputs[0])
    assert "empty" not in {op.type for op in predictor.host_ops}, predictor.unsupported_reasons()
