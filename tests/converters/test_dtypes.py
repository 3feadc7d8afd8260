"""Every dtype Paddle's CPU kernels take: single-op programs in float64, int32, int64 and bool, written as
OpDescs (the form Paddle Lite's op test generators write), converted to NNAdapter, run on builtin_device and
compared with Paddle running the same saved program.

Float64 programs are compared at float64 precision (rtol 1e-9): a reference that round-trips through
float32 fails them. Integer and bool outputs must match exactly, dtype included. Every case also runs
through the predictor on the SDK devices (intel_openvino, microsoft_onnxruntime): those drivers answer
`validate_program` false for what their SDK does not compute exactly, and the host takes it. Ops without a
converter run on the host, through the predictor on builtin_device.

Output vars are declared with Paddle's output dtype (`Case.out_dtypes`, else the first feed's): the host
casts results to the declared dtype, and Paddle's own programs declare it so.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from nnadapter_bridge.errors import ConversionError
from support.converter_harness import _run_saved, convert_and_run, paddle_static
from support.tolerances import assert_op_close

RNG = np.random.default_rng(20261124)

# Paddle VarType element codes (cast's in_dtype/out_dtype, fill_constant's dtype, arg_max's dtype).
VT = {"bool": 0, "int16": 1, "int32": 2, "int64": 3, "float16": 4, "float32": 5, "float64": 6, "uint8": 20,
      "int8": 21}

F64_RTOL = 1e-9
F64_ATOL = 1e-12


def randn(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


def positive(*shape, dtype="float64"):
    return (np.abs(RNG.standard_normal(shape)) + 0.1).astype(dtype)


def ints(*shape, low=-9, high=10, dtype="int32", nonzero=False):
    a = RNG.integers(low, high, size=shape).astype(dtype)
    if nonzero:
        a[a == 0] = 3
    return a


def distinct(*shape, dtype="float64"):
    n = int(np.prod(shape))
    values = RNG.permutation(n) - n // 2
    if np.dtype(dtype).kind == "f":
        return (values * 0.37).reshape(shape).astype(dtype)
    return values.reshape(shape).astype(dtype)


def bools(*shape):
    return RNG.integers(0, 2, size=shape).astype(bool)


def feed(dtype, *shape, kind="randn"):
    """A feed of `dtype`: normal floats, small ints (nonzero for divisors), random bools."""
    if dtype == "bool":
        return bools(*shape)
    if np.dtype(dtype).kind in "iu" and kind == "distinct":
        return distinct(*shape, dtype=dtype)
    if np.dtype(dtype).kind in "iu":
        return ints(*shape, dtype=dtype, nonzero=kind == "nonzero",
                    low=1 if kind == "positive" else -9)
    if kind == "positive":
        return positive(*shape, dtype=dtype)
    if kind == "nonzero":
        a = randn(*shape, dtype=dtype)
        return np.where(np.abs(a) < 0.2, 0.7, a).astype(dtype)
    if kind == "distinct":
        return distinct(*shape, dtype=dtype)
    return randn(*shape, dtype=dtype)


@dataclasses.dataclass
class Case:
    """One single-op program: `inputs`/`outputs` map slots to var names; `fetch` the outputs compared."""

    id: str
    op_type: str
    inputs: dict
    outputs: dict
    attrs: dict
    feeds: dict
    params: dict = dataclasses.field(default_factory=dict)
    fetch: list | None = None  # default: the first var of every output slot except XShape-like ones
    out_dtypes: dict = dataclasses.field(default_factory=dict)  # declared dtype per output var

    def fetches(self) -> list:
        if self.fetch is not None:
            return self.fetch
        return [n for slot, names in self.outputs.items() if slot not in ("XShape",) for n in names]


def write_case(tmp_path, case: Case):
    """Write `case` as a ProgramDesc (+ combined params); only `case.fetches()` are fetched."""
    from devtools.zoo import write_combined_params, write_program

    var_specs = []
    for name, a in case.feeds.items():
        var_specs.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape)})
    for name, a in case.params.items():
        var_specs.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape), "persistable": True})
    known = set(case.feeds) | set(case.params)
    first_in = next(iter(case.feeds.values()), None)
    for names in case.outputs.values():
        for name in names:
            if name not in known:
                dtype = case.out_dtypes.get(name, str(first_in.dtype) if first_in is not None else "float32")
                var_specs.append({"name": name, "dtype": dtype, "shape": []})
    op = {"type": case.op_type, "inputs": case.inputs, "outputs": case.outputs, "attrs": case.attrs}
    model_path = os.path.join(str(tmp_path), "__model__")
    params_path = os.path.join(str(tmp_path), "__params__") if case.params else None
    write_program(model_path, [{"vars": var_specs, "ops": [op]}], feeds=list(case.feeds), fetches=case.fetches())
    if case.params:
        write_combined_params(params_path, case.params)
    return model_path, params_path


def paddle_outputs(tmp_path, case: Case) -> list:
    with paddle_static() as paddle:
        return _run_saved(paddle, str(tmp_path), "__model__", "__params__" if case.params else None, case.feeds)


def assert_matches(got, want, what: str) -> None:
    """Exact for ints/bools (dtype kind too); float64 at float64 precision; float32 at the op tolerance."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != Paddle's {want.shape}"
    if want.dtype.kind in "biu":
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != Paddle's {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=what)
    elif want.dtype == np.float64:
        assert got.dtype == np.float64, f"{what}: dtype {got.dtype} != Paddle's float64"
        np.testing.assert_allclose(got, want, rtol=F64_RTOL, atol=F64_ATOL, err_msg=what)
    else:
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != Paddle's {want.dtype}"
        assert_op_close(got, want, what=what)


# -- the cases --------------------------------------------------------------------------------------------------

FLOATS = ["float64"]
INTS = ["int32", "int64"]


def unary(op_type, dtype, attrs=None, *, kind="randn", shape=(2, 3, 4), tag=""):
    return Case(f"{op_type}{tag}-{dtype}", op_type, {"X": ["x"]}, {"Out": ["out"]}, dict(attrs or {}),
                {"x": feed(dtype, *shape, kind=kind)})


def binary(op_type, dtype, *, kind="randn", y_kind="randn", y_shape=(3, 4), attrs=None, out_dtype=None):
    return Case(f"{op_type}-{dtype}", op_type, {"X": ["x"], "Y": ["y"]}, {"Out": ["out"]},
                {"axis": -1, **(attrs or {})},
                {"x": feed(dtype, 2, 3, 4, kind=kind), "y": feed(dtype, *y_shape, kind=y_kind)},
                out_dtypes={"out": out_dtype} if out_dtype else {})


def elementwise_cases():
    cases = []
    for dtype in FLOATS + INTS:
        cases += [binary("elementwise_add", dtype), binary("elementwise_sub", dtype),
                  binary("elementwise_mul", dtype),
                  binary("elementwise_div", dtype, y_kind="nonzero"),
                  binary("elementwise_max", dtype), binary("elementwise_min", dtype),
                  binary("elementwise_floordiv", dtype, y_kind="nonzero")]
    # float remainders run on the host (fmod; see test_conv_elementwise), the converter takes integers
    cases += [binary("elementwise_mod", dtype, y_kind="nonzero") for dtype in INTS]
    cases.append(binary("elementwise_pow", "float64", kind="positive"))
    for dtype in INTS:
        c = binary("elementwise_pow", dtype, kind="positive")
        c.feeds["x"] = ints(2, 3, 4, low=0, high=5, dtype=dtype)
        c.feeds["y"] = ints(3, 4, low=0, high=4, dtype=dtype)
        cases.append(c)
    for op_type in ("equal", "less_than"):
        for dtype in FLOATS + INTS:
            c = binary(op_type, dtype, out_dtype="bool")
            if op_type == "equal":
                c.feeds["y"] = np.where(bools(3, 4), c.feeds["x"][0], c.feeds["y"]).astype(dtype)
            cases.append(c)
    cases.append(binary("equal", "bool", out_dtype="bool"))
    cases.append(binary("logical_and", "bool", out_dtype="bool"))
    for dtype in FLOATS + INTS:
        c = Case(f"where-{dtype}", "where", {"Condition": ["c"], "X": ["x"], "Y": ["y"]}, {"Out": ["out"]}, {},
                 {"c": bools(2, 3, 4), "x": feed(dtype, 2, 3, 4), "y": feed(dtype, 2, 3, 4)},
                 out_dtypes={"out": dtype})
        cases.append(c)
    return cases


def activation_cases():
    cases = []
    f64 = "float64"
    for op_type, attrs, kind in [
        ("relu", {}, "randn"), ("sigmoid", {}, "randn"), ("tanh", {}, "randn"), ("exp", {}, "randn"),
        ("log", {}, "positive"), ("sqrt", {}, "positive"), ("abs", {}, "randn"),
        ("gelu", {"approximate": False}, "randn"), ("leaky_relu", {"alpha": 0.1}, "randn"),
        ("softplus", {"beta": 1.0, "threshold": 20.0}, "randn"), ("swish", {"beta": 1.0}, "randn"),
        ("hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}, "randn"),
        ("hard_sigmoid", {"slope": 0.2, "offset": 0.5}, "randn"),
    ]:
        cases.append(unary(op_type, f64, attrs, kind=kind))
    cases.append(unary("gelu", f64, {"approximate": True}, tag="_tanh"))
    for dtype in INTS:
        cases.append(unary("abs", dtype))
    for dtype in FLOATS + INTS:
        cases.append(unary("scale", dtype, {"scale": 3.0, "bias": 2.0, "bias_after_scale": True}))
        cases.append(unary("scale", dtype, {"scale": -2.0, "bias": 1.0, "bias_after_scale": False}, tag="_before"))
        cases.append(unary("clip", dtype, {"min": -3.0, "max": 4.0}))
    for op_type in ("softmax", "log_softmax"):
        cases.append(unary(op_type, f64, {"axis": -1}))
        cases.append(unary(op_type, f64, {"axis": 1}, tag="_axis1"))
    return cases


def cast_cases():
    cases = []
    pairs = [("float64", "int32"), ("float64", "int64"), ("float64", "bool"), ("float64", "float32"),
             ("float32", "float64"), ("int32", "float64"), ("int64", "float64"), ("bool", "float64"),
             ("int64", "int32"), ("int32", "int64"), ("int32", "bool"), ("bool", "int64")]
    for src, dst in pairs:
        x = feed(src, 2, 3, 4) * (3 if src.startswith("float") else 1)
        cases.append(Case(f"cast-{src}-{dst}", "cast", {"X": ["x"]}, {"Out": ["out"]},
                          {"in_dtype": VT[src], "out_dtype": VT[dst]}, {"x": x.astype(src)},
                          out_dtypes={"out": dst}))
    return cases


def reduce_cases():
    cases = []
    for op_type in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"):
        for dtype in FLOATS + INTS:
            x = feed(dtype, 2, 3, 4)
            if op_type == "reduce_prod" and dtype in INTS:
                x = ints(2, 3, 4, low=-3, high=4, dtype=dtype)
            # Paddle sums int32 into int64 (the declared dtype of its output var).
            out_dtype = "int64" if op_type == "reduce_sum" and dtype == "int32" else dtype
            cases.append(Case(f"{op_type}-{dtype}", op_type, {"X": ["x"]}, {"Out": ["out"]},
                              {"dim": [1], "keep_dim": False, "reduce_all": False}, {"x": x},
                              out_dtypes={"out": out_dtype}))
        cases.append(Case(f"{op_type}_all-float64", op_type, {"X": ["x"]}, {"Out": ["out"]},
                          {"dim": [0], "keep_dim": True, "reduce_all": True}, {"x": feed("float64", 2, 3, 4)}))
    return cases


def nn_cases():
    cases = [
        Case("matmul_v2-float64", "matmul_v2", {"X": ["x"], "Y": ["y"]}, {"Out": ["out"]},
             {"trans_x": False, "trans_y": True}, {"x": randn(2, 3, 5), "y": randn(2, 4, 5)}),
        Case("mul-float64", "mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["out"]},
             {"x_num_col_dims": 1, "y_num_col_dims": 1}, {"x": randn(3, 2, 4)}, params={"w": randn(8, 5)}),
        Case("fc-float64", "fc", {"Input": ["x"], "W": ["w"], "Bias": ["b"]}, {"Out": ["out"]},
             {"in_num_col_dims": 1, "activation_type": ""}, {"x": randn(3, 6)},
             params={"w": randn(6, 4), "b": randn(4)}),
        Case("conv2d-float64", "conv2d", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["out"]},
             {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1, "data_format": "NCHW",
              "padding_algorithm": "EXPLICIT"},
             {"x": randn(1, 3, 6, 6)}, params={"w": randn(4, 3, 3, 3)}),
        Case("depthwise_conv2d-float64", "depthwise_conv2d", {"Input": ["x"], "Filter": ["w"]},
             {"Output": ["out"]},
             {"strides": [2, 2], "paddings": [1, 1], "dilations": [1, 1], "groups": 3, "data_format": "NCHW",
              "padding_algorithm": "EXPLICIT"},
             {"x": randn(1, 3, 7, 7)}, params={"w": randn(3, 1, 3, 3)}),
    ]
    for pooling in ("avg", "max"):
        cases.append(Case(f"pool2d_{pooling}-float64", "pool2d", {"X": ["x"]}, {"Out": ["out"]},
                          {"pooling_type": pooling, "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
                           "global_pooling": False, "exclusive": True, "adaptive": False, "ceil_mode": False,
                           "data_format": "NCHW", "padding_algorithm": "EXPLICIT"},
                          {"x": randn(1, 2, 7, 7)}))
    cases.append(Case("pool2d_global-float64", "pool2d", {"X": ["x"]}, {"Out": ["out"]},
                      {"pooling_type": "avg", "ksize": [1, 1], "global_pooling": True, "strides": [1, 1],
                       "paddings": [0, 0], "exclusive": True, "adaptive": False, "ceil_mode": False,
                       "data_format": "NCHW", "padding_algorithm": "EXPLICIT"}, {"x": randn(2, 3, 4, 4)}))
    cases.append(Case("batch_norm-float64", "batch_norm",
                      {"X": ["x"], "Scale": ["s"], "Bias": ["b"], "Mean": ["m"], "Variance": ["v"]},
                      {"Y": ["y"], "MeanOut": ["m"], "VarianceOut": ["v"], "SavedMean": ["sm"],
                       "SavedVariance": ["sv"]},
                      {"is_test": True, "epsilon": 1e-5, "momentum": 0.9, "data_layout": "NCHW"},
                      {"x": randn(2, 3, 4, 4)},
                      params={"s": randn(3), "b": randn(3), "m": randn(3), "v": positive(3)}, fetch=["y"]))
    cases.append(Case("layer_norm-float64", "layer_norm", {"X": ["x"], "Scale": ["s"], "Bias": ["b"]},
                      {"Y": ["y"], "Mean": ["mean"], "Variance": ["var"]},
                      {"begin_norm_axis": 1, "epsilon": 1e-5}, {"x": randn(2, 3, 4)},
                      params={"s": randn(12), "b": randn(12)}, fetch=["y"]))
    return cases


def data_cases():
    cases = []
    for dtype in FLOATS + INTS + ["bool"]:
        a, b = feed(dtype, 2, 3, 4), feed(dtype, 2, 2, 4)
        cases += [
            Case(f"concat-{dtype}", "concat", {"X": ["a", "b"]}, {"Out": ["out"]}, {"axis": 1},
                 {"a": a, "b": b}),
            Case(f"split-{dtype}", "split", {"X": ["x"]}, {"Out": ["o1", "o2"]},
                 {"axis": 2, "num": 0, "sections": [1, 3]}, {"x": feed(dtype, 2, 3, 4)}),
            Case(f"slice-{dtype}", "slice", {"Input": ["x"]}, {"Out": ["out"]},
                 {"axes": [1, 2], "starts": [1, 0], "ends": [3, -1], "decrease_axis": [], "infer_flags": [1, 1]},
                 {"x": feed(dtype, 2, 3, 4)}),
            Case(f"reshape2-{dtype}", "reshape2", {"X": ["x"]}, {"Out": ["out"], "XShape": ["xs"]},
                 {"shape": [4, -1]}, {"x": feed(dtype, 2, 3, 4)}),
            Case(f"transpose2-{dtype}", "transpose2", {"X": ["x"]}, {"Out": ["out"], "XShape": ["xs"]},
                 {"axis": [2, 0, 1]}, {"x": feed(dtype, 2, 3, 4)}),
            Case(f"squeeze2-{dtype}", "squeeze2", {"X": ["x"]}, {"Out": ["out"], "XShape": ["xs"]},
                 {"axes": [1]}, {"x": feed(dtype, 2, 1, 4)}),
            Case(f"unsqueeze2-{dtype}", "unsqueeze2", {"X": ["x"]}, {"Out": ["out"], "XShape": ["xs"]},
                 {"axes": [0, 2]}, {"x": feed(dtype, 3, 4)}),
            Case(f"expand_v2-{dtype}", "expand_v2", {"X": ["x"]}, {"Out": ["out"]}, {"shape": [2, 3, 4]},
                 {"x": feed(dtype, 3, 1)}),
            Case(f"tile-{dtype}", "tile", {"X": ["x"]}, {"Out": ["out"]}, {"repeat_times": [2, 1, 2]},
                 {"x": feed(dtype, 2, 3)}),
            Case(f"gather-{dtype}", "gather", {"X": ["x"], "Index": ["i"]}, {"Out": ["out"]}, {"axis": 0},
                 {"x": feed(dtype, 4, 3), "i": np.array([3, 0, 2, 2], dtype=np.int64)}),
        ]
    for dtype in FLOATS + INTS:
        cases += [
            Case(f"cumsum-{dtype}", "cumsum", {"X": ["x"]}, {"Out": ["out"]},
                 {"axis": 1, "flatten": False, "exclusive": False, "reverse": False}, {"x": feed(dtype, 2, 3, 4)}),
            Case(f"arg_max-{dtype}", "arg_max", {"X": ["x"]}, {"Out": ["out"]},
                 {"axis": 1, "keepdims": False, "flatten": False, "dtype": VT["int64"]},
                 {"x": feed(dtype, 2, 5, 3, kind="distinct")}, out_dtypes={"out": "int64"}),
            Case(f"arg_min-{dtype}", "arg_min", {"X": ["x"]}, {"Out": ["out"]},
                 {"axis": -1, "keepdims": True, "flatten": False, "dtype": VT["int32"]},
                 {"x": feed(dtype, 2, 5, 3, kind="distinct")}, out_dtypes={"out": "int32"}),
            Case(f"top_k_v2-{dtype}", "top_k_v2", {"X": ["x"]}, {"Out": ["out"], "Indices": ["idx"]},
                 {"k": 2, "axis": -1, "largest": True, "sorted": True},
                 {"x": feed(dtype, 2, 3, 5, kind="distinct")}, out_dtypes={"idx": "int64"}),
            Case(f"fill_any_like-{dtype}", "fill_any_like", {"X": ["x"]}, {"Out": ["out"]},
                 {"value": 3.0, "dtype": -1}, {"x": feed(dtype, 2, 3)}),
        ]
    for dtype in FLOATS + INTS + ["bool"]:
        cases.append(Case(f"fill_constant-{dtype}", "fill_constant", {}, {"Out": ["out"]},
                          {"dtype": VT[dtype], "shape": [2, 3], "value": 1.0 if dtype == "bool" else 2.5,
                           "str_value": ""},
                          {}, out_dtypes={"out": dtype}))
    cases.append(Case("fill_any_like-float64_from_float32", "fill_any_like", {"X": ["x"]}, {"Out": ["out"]},
                      {"value": 0.1, "dtype": VT["float64"]}, {"x": randn(2, 3, dtype="float32")},
                      out_dtypes={"out": "float64"}))
    for dtype, (start, end, step) in [("float64", (0.5, 3.7, 0.3)), ("int64", (-3, 11, 2)), ("int32", (7, -5, -3))]:
        cases.append(Case(f"range-{dtype}", "range", {"Start": ["s"], "End": ["e"], "Step": ["st"]},
                          {"Out": ["out"]}, {},
                          {"s": np.array([start], dtype), "e": np.array([end], dtype),
                           "st": np.array([step], dtype)}))
    return cases


def more_cases():
    """Every activation converter in float64, and more op types across the converter families (ops without a
    converter run on the host through the predictor)."""
    f64 = "float64"
    acts = ["relu", "relu6", "sigmoid", "tanh", "abs", "exp", "log", "floor", "square", "sin", "cos", "rsqrt",
            "sqrt", "silu", "swish", "leaky_relu", "hard_sigmoid", "hard_swish", "gelu", "softplus", "mish",
            "logsigmoid", "elu", "selu", "brelu", "softsign", "tanh_shrink", "thresholded_relu", "hard_shrink",
            "softshrink", "reciprocal", "log2", "log10", "log1p", "ceil", "round", "sign"]
    cases = []
    for a in acts:
        kind = "positive" if a in ("log", "rsqrt", "sqrt", "log2", "log10", "log1p", "reciprocal") else "randn"
        cases.append(unary(a, f64, {}, kind=kind, tag="_defaults"))
    cases += [unary("sign", "int32", {}, tag="_defaults"), unary("square", "int64", {}, tag="_defaults")]
    x23, x34 = randn(2, 3), randn(3, 4)

    def one(id, op_type, inputs, outputs, attrs, feeds, **extra):
        return Case(id, op_type, inputs, outputs, attrs, feeds, **extra)

    X, OUT = {"X": ["x"]}, {"Out": ["out"]}
    XY = {"X": ["x"], "Y": ["y"]}
    cases += [
        one("pow-float64", "pow", X, OUT, {"factor": 2.5}, {"x": positive(2, 3)}),
        one("pow-int32", "pow", X, OUT, {"factor": 2.0}, {"x": ints(2, 3)}),
        one("prelu-float64", "prelu", {"X": ["x"], "Alpha": ["a"]}, OUT, {"mode": "channel", "data_format": "NCHW"},
            {"x": randn(1, 3, 2, 2)}, params={"a": randn(3)}),
        one("matmul-float64", "matmul", XY, OUT, {"transpose_X": False, "transpose_Y": False, "alpha": 1.0},
            {"x": x23, "y": x34}),
        one("bmm-float64", "bmm", XY, OUT, {}, {"x": randn(2, 2, 3), "y": randn(2, 3, 4)}),
        one("flatten_contiguous_range-float64", "flatten_contiguous_range", X, {"Out": ["out"], "XShape": ["xs"]},
            {"start_axis": 1, "stop_axis": 2}, {"x": randn(2, 3, 4)}),
        one("stack-float64", "stack", {"X": ["a", "b"]}, {"Y": ["out"]}, {"axis": 1}, {"a": x23, "b": randn(2, 3)}),
        one("unstack-float64", "unstack", X, {"Y": ["o1", "o2"]}, {"axis": 0, "num": 2}, {"x": x23}),
        one("pad3d-float64", "pad3d", X, OUT,
            {"paddings": [1, 1, 1, 1, 0, 0], "mode": "constant", "value": 0.5, "data_format": "NCDHW"},
            {"x": randn(1, 2, 2, 3, 3)}),
        one("pad-float64", "pad", X, OUT, {"paddings": [1, 0, 0, 2], "pad_value": 1.5}, {"x": x23}),
        one("gather_nd-float64", "gather_nd", {"X": ["x"], "Index": ["i"]}, OUT, {},
            {"x": x34, "i": np.array([[0, 1], [2, 3]], np.int64)}),
        one("index_select-float64", "index_select", {"X": ["x"], "Index": ["i"]}, OUT, {"dim": 1},
            {"x": x34, "i": np.array([0, 3], np.int64)}),
        one("flip-float64", "flip", X, OUT, {"axis": [1]}, {"x": x34}),
        one("roll-float64", "roll", X, OUT, {"shifts": [1], "axis": [1]}, {"x": x34}),
        one("p_norm-float64", "p_norm", X, OUT,
            {"porder": 2.0, "axis": 1, "epsilon": 1e-12, "keepdim": False, "asvector": False}, {"x": x34}),
        one("sum-float64", "sum", {"X": ["a", "b"]}, OUT, {}, {"a": x23, "b": randn(2, 3)}),
        one("assign-float64", "assign", X, OUT, {}, {"x": x23}),
        one("shape-float64", "shape", {"Input": ["x"]}, OUT, {}, {"x": x23}, out_dtypes={"out": "int32"}),
        one("instance_norm-float64", "instance_norm", {"X": ["x"], "Scale": ["s"], "Bias": ["b"]},
            {"Y": ["y"], "SavedMean": ["sm"], "SavedVariance": ["sv"]}, {"epsilon": 1e-5}, {"x": randn(2, 3, 4, 4)},
            params={"s": randn(3), "b": randn(3)}, fetch=["y"]),
        one("group_norm-float64", "group_norm", {"X": ["x"], "Scale": ["s"], "Bias": ["b"]},
            {"Y": ["y"], "Mean": ["m"], "Variance": ["v"]}, {"epsilon": 1e-5, "groups": 2, "data_layout": "NCHW"},
            {"x": randn(2, 4, 3, 3)}, params={"s": randn(4), "b": randn(4)}, fetch=["y"]),
        one("bilinear_interp_v2-float64", "bilinear_interp_v2", X, OUT,
            {"out_h": -1, "out_w": -1, "scale": [2.0, 2.0], "align_corners": False, "align_mode": 0,
             "interp_method": "bilinear", "data_layout": "NCHW"}, {"x": randn(1, 2, 3, 3)}),
        one("nearest_interp_v2-float64", "nearest_interp_v2", X, OUT,
            {"out_h": -1, "out_w": -1, "scale": [2.0, 2.0], "align_corners": False, "align_mode": 1,
             "interp_method": "nearest", "data_layout": "NCHW"}, {"x": randn(1, 2, 3, 3)}),
        one("lookup_table_v2-float64", "lookup_table_v2", {"W": ["w"], "Ids": ["i"]}, OUT, {"padding_idx": -1},
            {"i": np.array([[0, 2], [1, 1]], np.int64)}, params={"w": randn(4, 3)}, out_dtypes={"out": "float64"}),
        one("one_hot_v2-float64", "one_hot_v2", X, OUT,
            {"depth": 4, "dtype": VT["float64"], "allow_out_of_range": False}, {"x": np.array([0, 3, 1], np.int64)},
            out_dtypes={"out": "float64"}),
        one("fill_constant_batch_size_like-float64", "fill_constant_batch_size_like", {"Input": ["x"]}, OUT,
            {"shape": [-1, 3], "value": 1.5, "dtype": VT["float64"], "input_dim_idx": 0, "output_dim_idx": 0,
             "str_value": ""}, {"x": randn(2, 5)}, out_dtypes={"out": "float64"}),
        one("greater_equal-float64", "greater_equal", XY, OUT, {"axis": -1}, {"x": x23, "y": randn(2, 3)},
            out_dtypes={"out": "bool"}),
        one("not_equal-int64", "not_equal", XY, OUT, {"axis": -1},
            {"x": ints(2, 3, dtype="int64"), "y": ints(2, 3, dtype="int64")}, out_dtypes={"out": "bool"}),
        one("logical_or-bool", "logical_or", XY, OUT, {}, {"x": bools(2, 3), "y": bools(2, 3)}),
        one("logical_not-bool", "logical_not", X, OUT, {}, {"x": bools(2, 3)}),
        one("isnan_v2-float64", "isnan_v2", X, OUT, {}, {"x": x23}, out_dtypes={"out": "bool"}),
        one("strided_slice-float64", "strided_slice", {"Input": ["x"]}, OUT,
            {"axes": [1], "starts": [0], "ends": [4], "strides": [2], "infer_flags": [1], "decrease_axis": []},
            {"x": x34}),
        one("unbind-float64", "unbind", X, {"Out": ["o1", "o2"]}, {"axis": 0}, {"x": x23}),
        one("pixel_shuffle-float64", "pixel_shuffle", X, OUT, {"upscale_factor": 2, "data_format": "NCHW"},
            {"x": randn(1, 4, 2, 2)}),
        one("arg_min_flatten-float64", "arg_min", X, OUT,
            {"axis": 0, "keepdims": False, "flatten": True, "dtype": VT["int64"]}, {"x": distinct(3, 4)},
            out_dtypes={"out": "int64"}),
        one("reduce_any-bool", "reduce_any", X, OUT, {"dim": [1], "keep_dim": False, "reduce_all": False},
            {"x": bools(2, 3)}),
        one("reduce_sum-bool", "reduce_sum", X, OUT,
            {"dim": [1], "keep_dim": False, "reduce_all": False, "out_dtype": -1}, {"x": bools(2, 3)},
            out_dtypes={"out": "int64"}),
        one("mean-float64", "mean", X, OUT, {}, {"x": x23}),
        one("linspace-float64", "linspace", {"Start": ["s"], "Stop": ["e"], "Num": ["n"]}, OUT,
            {"dtype": VT["float64"]}, {"s": np.array([0.5]), "e": np.array([3.0]), "n": np.array([7], np.int32)}),
        one("meshgrid-float64", "meshgrid", {"X": ["a", "b"]}, {"Out": ["o1", "o2"]}, {},
            {"a": randn(3), "b": randn(2)}),
        one("scatter-float64", "scatter", {"X": ["x"], "Ids": ["i"], "Updates": ["u"]}, OUT, {"overwrite": True},
            {"x": randn(4, 3), "i": np.array([1, 3], np.int64), "u": x23}),
        one("conv2d_transpose-float64", "conv2d_transpose", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["out"]},
            {"strides": [2, 2], "paddings": [1, 1], "dilations": [1, 1], "groups": 1, "data_format": "NCHW",
             "padding_algorithm": "EXPLICIT", "output_padding": [], "output_size": []},
            {"x": randn(1, 2, 3, 3)}, params={"w": randn(2, 3, 3, 3)}),
        one("affine_channel-float64", "affine_channel", {"X": ["x"], "Scale": ["s"], "Bias": ["b"]}, OUT,
            {"data_layout": "NCHW"}, {"x": randn(1, 3, 2, 2)}, params={"s": randn(3), "b": randn(3)}),
        one("elementwise_add_axis-float64", "elementwise_add", XY, OUT, {"axis": 1},
            {"x": randn(2, 3, 4), "y": randn(3)}),
        one("elementwise_mul_param-float64", "elementwise_mul", XY, OUT, {"axis": 1},
            {"x": randn(2, 3, 4)}, params={"y": randn(3)}),
        one("where_index-bool", "where_index", {"Condition": ["c"]}, OUT, {}, {"c": bools(2, 3)},
            out_dtypes={"out": "int64"}),
        one("cast-float64-float16", "cast", X, OUT, {"in_dtype": VT["float64"], "out_dtype": VT["float16"]},
            {"x": x23}, out_dtypes={"out": "float16"}),
        one("cast-uint8-float64", "cast", X, OUT, {"in_dtype": VT["uint8"], "out_dtype": VT["float64"]},
            {"x": np.array([1, 2, 250], np.uint8)}, out_dtypes={"out": "float64"}),
        one("expand_as_v2-float64", "expand_as_v2", XY, OUT, {"target_shape": [2, 3]},
            {"x": randn(1, 3), "y": randn(2, 3)}),
        one("masked_select-float64", "masked_select", {"X": ["x"], "Mask": ["m"]}, {"Y": ["out"]}, {},
            {"x": x23, "m": bools(2, 3)}),
        one("clip_tensors-float64", "clip", {"X": ["x"], "Min": ["lo"], "Max": ["hi"]}, OUT, {"min": 0.0, "max": 0.0},
            {"x": x23, "lo": np.array([-0.5]), "hi": np.array([0.5])}),
        one("scale_tensor-float64", "scale", {"X": ["x"], "ScaleTensor": ["st"]}, OUT,
            {"bias": 0.3, "bias_after_scale": True}, {"x": x23, "st": np.array([1.7], np.float32)}),
        one("fill_constant_str-float64", "fill_constant", {}, OUT,
            {"dtype": VT["float64"], "shape": [2], "value": 0.1, "str_value": "0.1"}, {},
            out_dtypes={"out": "float64"}),
    ]
    return cases


CASES = (elementwise_cases() + activation_cases() + cast_cases() + reduce_cases() + nn_cases() + data_cases()
         + more_cases())


def _has_converter(op_type: str) -> bool:
    from converters.registry import get_converter

    return get_converter(op_type) is not None


def predictor_outputs(model_path: str, params_path: str | None, case: Case, device: str) -> list:
    """`case` through nnadapter_bridge's predictor on `device` (the host takes what the device refuses)."""
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(model_path)
    if params_path:
        config.set_param_file(params_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    for name in predictor.get_input_names():
        predictor.get_input_by_name(name).from_numpy(np.asarray(case.feeds[name]))
    predictor.run()
    return [np.asarray(predictor.get_output(k).numpy()) for k in range(len(predictor.get_output_names()))]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_builtin_device_matches_paddle(tmp_path, case):
    model_path, params_path = write_case(tmp_path, case)
    want = paddle_outputs(tmp_path, case)
    left_to_host = False
    if _has_converter(case.op_type):
        try:
            got, result, _ = convert_and_run(model_path, case.feeds, params_path)
        except ConversionError as exc:  # e.g. a top_k of integer keys: its converter leaves it to the host kernel
            if "host kernel" not in str(exc):
                raise
            left_to_host = True
        else:
            converted = {origin.type for origin in result.operation_origin if origin is not None}
            assert converted <= {case.op_type}
            got = [got[name] for name in case.fetches()]
    if left_to_host or not _has_converter(case.op_type):  # the predictor runs it on the host
        got = predictor_outputs(model_path, params_path, case, "builtin_device")
    assert len(got) == len(want)
    for name, g, w in zip(case.fetches(), got, want):
        assert_matches(g, w, f"{case.id}:{name}")


SDK_CASES = CASES  # cheap enough to run every case (~3 s per device)


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_sdk_devices_match_paddle(tmp_path, device):
    """The predictor on an SDK device: what the SDK does not compute exactly in these dtypes goes to the
    host, so the outputs still equal Paddle's (float64 at float64 precision)."""
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    if device not in DeviceManager.instance().names():
        pytest.skip(f"{device} is not installed here")
    failures = []
    for k, case in enumerate(SDK_CASES):
        where = tmp_path / f"case{k}"
        where.mkdir()
        model_path, params_path = write_case(where, case)
        want = paddle_outputs(where, case)
        try:
            got = predictor_outputs(model_path, params_path, case, device)
            assert len(got) == len(want)
            for name, g, w in zip(case.fetches(), got, want):
                assert_matches(g, w, f"{case.id}:{name}")
        except Exception as exc:  # collected: one report lists every case that differs
            failures.append(f"{case.id}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}")
    assert not failures, (f"{len(failures)}/{len(SDK_CASES)} cases differ from Paddle on {device}:\n"
                          + "\n".join(failures))
