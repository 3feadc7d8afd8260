"""Loader formats against Paddle's own writer: every param dtype, every attribute type, every layout and
source (dir, files, bytes), and the ModelFormatError of each kind of bad input."""
from __future__ import annotations

import os
import shutil
import struct

import numpy as np
import pytest

from devtools import zoo
from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import BlockRef, VarRef, dtypes, load_model
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.params import encode_lod_tensor
from support.model_zoo_fixtures import ours_flat_op, paddle_load

PADDLE_DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"]


def _random_array(dtype: str, shape, rng) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "bfloat16":  # Paddle takes bf16 bit patterns as uint16
        return rng.integers(0, 1 << 16, shape, dtype=np.uint16)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _save_dtype_program(paddle, directory, dtype_names, filename):
    """Paddle builds persistable vars of `dtype_names` with random values and saves them with its own
    writer (save_vars); returns {name: the array in Paddle's scope}."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        variables = [paddle.static.create_global_var([2, 3, 5], 0, dt, persistable=True, name=f"g_{dt}")
                     for dt in dtype_names]
        variables.append(paddle.static.create_global_var([0, 4], 0, "float32", persistable=True, name="g_empty"))
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    rng = np.random.default_rng(7)
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        for dt, var in zip(dtype_names, variables):
            scope.find_var(var.name).get_tensor().set(_random_array(dt, (2, 3, 5), rng), paddle.CPUPlace())
        os.makedirs(directory)
        with open(os.path.join(directory, "__model__"), "wb") as f:
            f.write(main.desc.serialize_to_string())
        paddle.static.save_vars(exe, directory, main_program=main, vars=variables, filename=filename)
        return {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in variables}


@pytest.fixture(scope="module")
def all_dtypes_model(tmp_path_factory):
    """Programs whose persistable vars cover every dtype, saved by Paddle combined and per var."""
    import paddle

    was_dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        root = tmp_path_factory.mktemp("dtypes")
        expected = {
            "combined": _save_dtype_program(paddle, str(root / "combined"), PADDLE_DTYPES, "__params__"),
            # Paddle 3.3.1's per-var `save` op has no bool kernel, so its per-var files cannot hold a bool var.
            "per-var": _save_dtype_program(paddle, str(root / "per-var"),
                                           [d for d in PADDLE_DTYPES if d != "bool"], None),
        }
    finally:
        if was_dynamic:  # later tests in this worker may compare with eager paddle
            paddle.disable_static()
    return root, expected


@pytest.mark.parametrize("layout", ["combined", "per-var"])
def test_every_dtype_bitwise_equal_to_paddle(all_dtypes_model, layout):
    root, all_expected = all_dtypes_model
    expected = all_expected[layout]
    graph = load_model(str(root / layout))
    assert graph.layout == ("dir+__params__" if layout == "combined" else "dir+per-var")
    assert sorted(graph.params) == sorted(expected)
    for name, want in expected.items():
        got = graph.params[name]
        assert got.shape == want.shape, name
        if name == "g_bfloat16":
            assert graph.var(name).data_type == dtypes.VarTypeCode.BF16
            assert got.dtype == dtypes.BF16_DTYPE
            assert got.view(np.uint16).tobytes() == want.view(np.uint16).tobytes()
        else:
            assert got.dtype == want.dtype, name
            assert got.tobytes() == want.tobytes(), name


def test_bf16_widening_matches_bit_patterns():
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0000], dtype=np.uint16)  # 1, -2, inf, 0
    stored = bits.view(dtypes.BF16_DTYPE) if dtypes.BF16_IS_NATIVE else bits
    np.testing.assert_array_equal(dtypes.bf16_to_float32(stored), [1.0, -2.0, np.inf, 0.0])
    np.testing.assert_array_equal(dtypes.bf16_to_float32(bits), [1.0, -2.0, np.inf, 0.0])


ALL_ATTRS = {
    "a_int": 3, "a_long": 1 << 40, "a_float": 0.1, "a_str": "abc", "a_bool": True, "a_ints": [1, -2],
    "a_longs": [1 << 40, 2], "a_floats": [0.5, 0.1], "a_strs": ["a", "b"], "a_bools": [True, False],
    # a block attribute names a block nested in the op's own (loader.validate.check_sub_blocks): 1, not 0
    "a_block": BlockRef(1), "a_blocks": [BlockRef(1), BlockRef(1)], "a_var": VarRef("x"), "a_vars": [VarRef("x")],
    "a_f64": (pb.FLOAT64, 0.1), "a_f64s": (pb.FLOAT64S, [0.1, -3.5]),
}


@pytest.fixture(scope="module")
def handmade_model(tmp_path_factory):
    """A program written with zoo.write_program: one `scale` op carrying every AttrType, two blocks."""
    root = tmp_path_factory.mktemp("handmade")
    spec = [{"vars": [{"name": "x", "shape": [-1, 4], "need_check_feed": True}, {"name": "y", "shape": [-1, 4]},
                      {"name": "w", "shape": [4], "persistable": True},
                      {"name": "ids", "dtype": "int64", "shape": [-1, 1], "lod_level": 1}],
             "ops": [{"type": "scale", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]},
                      "attrs": dict(ALL_ATTRS, scale=2.0, bias=0.5, bias_after_scale=True)}]},
            {"parent_idx": 0, "vars": [{"name": "z", "shape": [4]}], "ops": []}]
    zoo.write_program(str(root / "__model__"), spec, feeds=["x"], fetches=["y"])
    zoo.write_combined_params(str(root / "__params__"), {"w": np.arange(4, dtype=np.float32)})
    return root


def test_every_attr_type_matches_paddle(handmade_model):
    graph = load_model(str(handmade_model))
    truth = paddle_load(str(handmade_model), "combined")
    op = graph.ops()[1]
    assert op.type == "scale"
    assert ours_flat_op(op) == truth["blocks"][0]["ops"][1]
    assert op.attr_types["a_long"] == pb.LONG and op.attr_types["a_f64s"] == pb.FLOAT64S
    assert op.attr("a_block") == BlockRef(1) and op.attr("a_var") == VarRef("x")
    assert op.attr("missing", 7) == 7 and not op.has_attr("missing") and op.has_attr("a_int")
    assert op.input("X") == ["x"] and op.input("Nope") == [] and op.output_names() == ["y"]
    assert op.label() == "scale#1 (out: y)"
    assert len(graph.blocks) == 2 and graph.blocks[1].parent_idx == 0 and graph.blocks[0].forward_block_idx == -1
    assert graph.var("z", block=1).shape == (4,)
    assert graph.var("x", block=1).need_check_feed  # found through the parent block
    assert graph.var("ids").lod_level == 1 and graph.var("ids").dtype == np.int64
    assert graph.var("feed").var_type == dtypes.VarTypeCode.FEED_MINIBATCH and graph.var("feed").dtype is None
    np.testing.assert_array_equal(graph.param("w"), np.arange(4, dtype=np.float32))


def test_feed_and_fetch_follow_col_not_file_order(tmp_path):
    spec = [{"vars": [{"name": n, "shape": [1]} for n in ("a", "b", "c", "d")],
             "ops": [{"type": "feed", "inputs": {"X": ["feed"]}, "outputs": {"Out": ["b"]}, "attrs": {"col": 1}},
                     {"type": "feed", "inputs": {"X": ["feed"]}, "outputs": {"Out": ["a"]}, "attrs": {"col": 0}},
                     {"type": "elementwise_add", "inputs": {"X": ["a"], "Y": ["b"]}, "outputs": {"Out": ["c"]}},
                     {"type": "relu", "inputs": {"X": ["c"]}, "outputs": {"Out": ["d"]}},
                     {"type": "fetch", "inputs": {"X": ["c"]}, "outputs": {"Out": ["fetch"]}, "attrs": {"col": 1}},
                     {"type": "fetch", "inputs": {"X": ["d"]}, "outputs": {"Out": ["fetch"]}, "attrs": {"col": 0}}]}]
    spec[0]["vars"] += [{"name": "feed", "dtype": None, "var_type": dtypes.VarTypeCode.FEED_MINIBATCH},
                        {"name": "fetch", "dtype": None, "var_type": dtypes.VarTypeCode.FETCH_LIST}]
    graph = load_model(model_bytes=zoo.write_program(None, spec))
    assert graph.inputs == ["a", "b"] and graph.outputs == ["d", "c"]
    assert graph.layout == "buffers" and graph.params == {}
    assert graph.producer("c").type == "elementwise_add" and [o.type for o in graph.consumers("c")] == ["relu",
                                                                                                       "fetch"]


# -- sources and layouts ------------------------------------------------------------------------------------

def test_all_sources_give_the_same_model(zoo_model, tmp_path):
    pdmodel = zoo_model("squeezenet1_0", "pdmodel")
    pdiparams = pdmodel[: -len(".pdmodel")] + ".pdiparams"
    combined_dir = zoo_model("squeezenet1_0", "combined")
    with open(pdmodel, "rb") as f:
        model_bytes = f.read()
    with open(pdiparams, "rb") as f:
        params_bytes = f.read()
    graphs = {
        "dir": load_model(os.path.dirname(pdmodel)),
        "pdmodel file": load_model(pdmodel),
        "files": load_model(pdmodel, pdiparams),
        "files (combined)": load_model(os.path.join(combined_dir, "__model__"), os.path.join(combined_dir,
                                                                                             "__params__")),
        "__model__ file": load_model(os.path.join(combined_dir, "__model__")),
        "bytes": load_model(model_bytes=model_bytes, params_bytes=params_bytes),
        "model path + params bytes": load_model(pdmodel, params_bytes=params_bytes),
    }
    layouts = {k: g.layout for k, g in graphs.items()}
    assert layouts == {"dir": "pdmodel+pdiparams", "pdmodel file": "pdmodel+pdiparams", "files": "files",
                       "files (combined)": "files", "__model__ file": "dir+__params__", "bytes": "buffers",
                       "model path + params bytes": "buffers"}
    ref = graphs["dir"]
    assert ref.params_path == pdiparams and ref.model_path == pdmodel
    for key, g in graphs.items():
        assert [o.type for o in g.ops()] == [o.type for o in ref.ops()], key
        assert sorted(g.params) == sorted(ref.params), key
        for pname, array in ref.params.items():
            assert g.params[pname].tobytes() == array.tobytes(), (key, pname)


def test_keep_extra_attrs_matches_paddle(tmp_path):
    """clip_extra=False keeps the "extra" attributes (use_mkldnn, ...). Paddle moves those out of the op's
    attribute list when it loads, so: the attributes Paddle shows are equal, and the ones only we show are
    exactly extras Paddle registers for that op type."""
    import paddle

    path = zoo.build_model("mobilenet_v1", str(tmp_path), layout="pdmodel", clip_extra=False)
    graph = load_model(path)
    truth = paddle_load(path, "pdmodel")
    extras_seen = 0
    for op, want in zip(graph.blocks[0].ops, truth["blocks"][0]["ops"]):
        ours = ours_flat_op(op)
        assert {k: v for k, v in ours.items() if not k.startswith("attr")} == \
            {k: v for k, v in want.items() if not k.startswith("attr")}
        shown = want["attrs"]
        assert {k: ours["attrs"][k] for k in shown} == shown, op.label()
        assert {k: ours["attr_types"][k] for k in shown} == want["attr_types"], op.label()
        hidden = set(ours["attrs"]) - set(shown)
        assert hidden <= set(paddle.base.core.get_op_extra_attrs(op.type)), op.label()
        extras_seen += len(hidden)
    assert extras_seen > 0


# -- bad input -----------------------------------------------------------------------------------------------

@pytest.fixture
def combined_copy(zoo_model, tmp_path):
    """A private copy of a small model's __model__ + __params__ to damage."""
    src = zoo_model("squeezenet1_0", "combined")
    dst = tmp_path / "m"
    shutil.copytree(src, dst)
    return dst


@pytest.fixture
def per_var_copy(zoo_model, tmp_path):
    src = zoo_model("squeezenet1_0", "per-var")
    dst = tmp_path / "pv"
    shutil.copytree(src, dst)
    return dst


def _raises_naming(path, match=None, var=None, **kwargs):
    with pytest.raises(ModelFormatError, match=match) as info:
        load_model(**kwargs)
    assert str(path) in str(info.value)
    if var is not None:
        assert info.value.var == var and f"var '{var}'" in str(info.value)
    return info.value


def test_truncated_model_file(combined_copy):
    model = combined_copy / "__model__"
    model.write_bytes(model.read_bytes()[:1000])
    _raises_naming(model, "not a Paddle ProgramDesc", model_path=str(combined_copy))


def test_garbage_and_empty_model_file(combined_copy):
    model = combined_copy / "__model__"
    model.write_bytes(b"\xff" * 64)
    _raises_naming(model, "not a Paddle ProgramDesc", model_path=str(combined_copy))
    model.write_bytes(b"")
    _raises_naming(model, "empty model file", model_path=str(combined_copy))


def test_params_too_short(combined_copy):
    params = combined_copy / "__params__"
    params.write_bytes(params.read_bytes()[:-10])
    err = _raises_naming(params, "truncated", model_path=str(combined_copy))
    assert err.var is not None  # the last parameter, the one cut short


def test_params_too_long(combined_copy):
    params = combined_copy / "__params__"
    params.write_bytes(params.read_bytes() + b"\0" * 16)
    _raises_naming(params, "16 bytes left after the last", model_path=str(combined_copy))


def test_params_of_another_model(combined_copy, zoo_model):
    shutil.copy(os.path.join(zoo_model("mobilenet_v1", "combined"), "__params__"), combined_copy / "__params__")
    _raises_naming(combined_copy / "__params__", "disagree with the model's VarDesc", model_path=str(combined_copy))


def test_param_dims_disagree_with_vardesc(per_var_copy):
    graph = load_model(str(per_var_copy))
    name = next(n for n, a in graph.params.items() if a.ndim == 4)
    wrong = np.zeros(graph.params[name].shape[::-1], dtype=np.float32)
    (per_var_copy / name).write_bytes(encode_lod_tensor(wrong))
    _raises_naming(per_var_copy / name, "stored dims .* disagree", var=name, model_path=str(per_var_copy))


def test_missing_per_var_file(per_var_copy):
    name = sorted(load_model(str(per_var_copy)).params)[3]
    os.remove(per_var_copy / name)
    _raises_naming(per_var_copy / name, "missing parameter file", var=name, model_path=str(per_var_copy))


def test_unknown_dtype_in_record(per_var_copy):
    name = sorted(load_model(str(per_var_copy)).params)[0]
    data = (per_var_copy / name).read_bytes()
    desc_size = struct.unpack_from("<i", data, 16)[0]
    desc = pb.VarType.TensorDesc()
    desc.ParseFromString(data[20:20 + desc_size])
    desc.data_type = pb.VarType.LOD_TENSOR  # a var kind, not an element type
    new_desc = desc.SerializeToString()
    (per_var_copy / name).write_bytes(data[:16] + struct.pack("<i", len(new_desc)) + new_desc + data[20 + desc_size:])
    _raises_naming(per_var_copy / name, "unknown or non-tensor data type LOD_TENSOR", var=name,
                   model_path=str(per_var_copy))


def _one_param_model(tmp_path, dims):
    spec = [{"vars": [{"name": "w", "shape": dims, "persistable": True}], "ops": []}]
    zoo.write_program(str(tmp_path / "__model__"), spec)
    return tmp_path


@pytest.mark.parametrize("forged", ["huge dims", "huge lod", "huge desc", "negative desc", "bad version"])
def test_forged_sizes_fail_before_allocating(tmp_path, forged):
    """Sizes that would ask for terabytes are refused from the bytes left, fast and without allocating."""
    _one_param_model(tmp_path, [1 << 20, 1 << 20])
    desc = pb.VarType.TensorDesc(data_type=pb.VarType.FP32, dims=[1 << 20, 1 << 20]).SerializeToString()
    header = {
        "huge dims": struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + b"\0" * 64,
        "huge lod": struct.pack("<IQ", 0, 1 << 60) + b"\0" * 64,
        "huge desc": struct.pack("<IQIi", 0, 0, 0, (1 << 31) - 1) + b"\0" * 64,
        "negative desc": struct.pack("<IQIi", 0, 0, 0, -5) + b"\0" * 64,
        "bad version": struct.pack("<IQIi", 7, 0, 0, len(desc)) + desc,
    }[forged]
    (tmp_path / "w").write_bytes(header)
    _raises_naming(tmp_path / "w", var="w", model_path=str(tmp_path))


def test_path_traversal_var_name_is_refused(tmp_path):
    spec = [{"vars": [{"name": "../outside", "shape": [1], "persistable": True}], "ops": []}]
    zoo.write_program(str(tmp_path / "__model__"), spec)
    _raises_naming(tmp_path, "not a file name inside", var="../outside", model_path=str(tmp_path))


def test_op_naming_undeclared_var(tmp_path):
    spec = [{"vars": [{"name": "x", "shape": [1]}],
             "ops": [{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["ghost"]}}]}]
    data = zoo.write_program(None, spec)
    with pytest.raises(ModelFormatError, match="no enclosing block declares") as info:
        load_model(model_bytes=data)
    assert "<model buffer>" in str(info.value) and info.value.var == "ghost"


def test_ambiguous_and_incomplete_directories(zoo_model, tmp_path):
    pdmodel = zoo_model("squeezenet1_0", "pdmodel")
    two = tmp_path / "two"
    os.makedirs(two)
    for stem in ("a", "b"):
        shutil.copy(pdmodel, two / f"{stem}.pdmodel")
    _raises_naming(two, "ambiguous model directory: 2 .pdmodel files", model_path=str(two))

    both = tmp_path / "both"
    shutil.copytree(zoo_model("squeezenet1_0", "combined"), both)
    shutil.copy(pdmodel, both / "x.pdmodel")
    _raises_naming(both, "both __model__ and x.pdmodel", model_path=str(both))

    lone = tmp_path / "lone"
    os.makedirs(lone)
    shutil.copy(pdmodel, lone / "net.pdmodel")
    _raises_naming(lone / "net.pdiparams", "no params file was found", model_path=str(lone))

    empty = tmp_path / "empty"
    os.makedirs(empty)
    _raises_naming(empty, "no Paddle model here", model_path=str(empty))
    _raises_naming(tmp_path / "nope", "not found", model_path=str(tmp_path / "nope"))
    _raises_naming(tmp_path / "nope.pdiparams", "not found", model_path=pdmodel,
                   params_path=str(tmp_path / "nope.pdiparams"))


def test_missing_param_name_raises_model_format_error(zoo_model):
    graph = load_model(zoo_model("squeezenet1_0", "pdmodel"))
    with pytest.raises(ModelFormatError, match="not a parameter") as info:
        graph.param("x")
    assert info.value.var == "x"
    with pytest.raises(ModelFormatError, match="no var 'nope'"):
        graph.var("nope")


def test_paddle3_scalars_attribute_is_decoded(tmp_path):
    """Paddle 3 writes assign_value's `values` as AttrType SCALARS (typed scalars, not in the facts'
    field list); the loader decodes them to Python values equal to what paddle reports."""
    import numpy as np

    from nnadapter_bridge.loader import load_model
    from support.converter_harness import paddle_static

    values = np.array([[1.5, -2.0, 3.25], [4.0, 5.5, -6.0]], np.float32)
    with paddle_static() as paddle:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [2, 3], "float32")
            y = x + paddle.assign(values)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        paddle.static.save_inference_model(str(tmp_path / "m"), [x], [y], exe, program=main)
        program, _, _ = paddle.static.load_inference_model(str(tmp_path / "m"), exe)
        theirs = [op for op in program.global_block().ops if op.type == "assign_value"][0]
        want = [float(v.value()) for v in theirs.attr("values")]
    ours = [op for op in load_model(str(tmp_path / "m.pdmodel")).ops() if op.type == "assign_value"][0]
    assert ours.attr("values") == want == [float(v) for v in values.reshape(-1)]
