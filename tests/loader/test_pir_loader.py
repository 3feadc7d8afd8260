"""The PIR program reader (loader/pir.py, the "json+pdiparams" layout) on real Paddle 3 exports.

Four tiny models are exported once per test session by `paddle.jit.save` in a child interpreter (PIR export
needs FLAGS_enable_pir_api unset; conftest sets it to 0 in this process):

  cnn      conv2d + bias, batch_norm, relu, pool2d, flatten, linear (matmul + add), softmax; 8 parameters
           set from a fixed seed and saved by the child as cnn_state.npz (the truth for the params checks)
  noparam  split, relu, slice, concat, reshape, scale, softmax: no parameters, so no .pdiparams at all
  cond     paddle.static.nn.cond on mean(x) > 0 (a pd_op.if with two regions)
  loop     a data-dependent to_static while loop (pd_op.while; fetches h and the trip count)

Covered: every layout a PIR program comes in (directory, .json, renamed params, no params, bytes, content
sniffing under another suffix, ambiguous directories); parameters read in sorted-name order and checked
against the program's types; one ModelFormatError naming the file for every kind of bad input; Hypothesis
fuzzing (truncation, byte flips, structural JSON edits) where the only outcomes are a ProgramGraph or a
ModelFormatError; and the models end to end through the predictor against Paddle Inference reading the same
.json (names and values).
"""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import traceback

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnadapter_bridge as nb
from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import ProgramGraph, load_model, pir
from nnadapter_bridge.loader.params import encode_lod_tensor
from nnadapter_bridge.loader.validate import MAX_BLOCK_DEPTH
from support.pir_export import export_in_child
from support.tolerances import assert_model_close

MODELS = ("cnn", "noparam", "cond", "loop")

_EXPORT = r'''
import os, sys
import numpy as np
import paddle

out = sys.argv[1]
paddle.disable_static()
paddle.seed(7)
nn = paddle.nn
spec = paddle.static.InputSpec


class Cnn(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2D(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        h = nn.functional.relu(self.bn(self.conv(x)))
        h = nn.functional.max_pool2d(h, 2)
        h = paddle.flatten(h, 1)
        return nn.functional.softmax(self.fc(h), -1)


class NoParam(nn.Layer):
    def forward(self, x):
        a, b = paddle.split(x, [4, 4], axis=1)
        c = paddle.concat([nn.functional.relu(a), b[:, 1:3]], axis=1)
        return nn.functional.softmax(paddle.reshape(c, [-1, 6]) + 1.0, -1)


class Cond(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        return paddle.static.nn.cond(paddle.mean(x) > 0.0, lambda: self.fc1(x) * 2.0,
                                     lambda: nn.functional.relu(self.fc2(x)) - 1.0)


class Loop(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, n):
        i = paddle.zeros([1], dtype="int64")
        h = x
        while i < n:
            h = paddle.tanh(self.fc(h)) + h * 0.5
            i = i + 1
        return h, i


cnn = Cnn()
rng = np.random.default_rng(3)
state = {}
for key, tensor in cnn.state_dict().items():
    value = rng.standard_normal(tensor.shape).astype("float32")
    if "variance" in key:
        value = np.abs(value) + 0.5
    tensor.set_value(value)
    state[tensor.name] = value
np.savez(os.path.join(out, "cnn_state.npz"), **state)

for name, net, specs in [
        ("cnn", cnn, [spec([-1, 3, 8, 8], "float32", "x")]),
        ("noparam", NoParam(), [spec([-1, 8], "float32", "x")]),
        ("cond", Cond(), [spec([-1, 8], "float32", "x")]),
        ("loop", Loop(), [spec([-1, 8], "float32", "x"), spec([1], "int64", "n")])]:
    net.eval()
    static = paddle.jit.to_static(net, input_spec=specs, full_graph=True)
    paddle.jit.save(static, os.path.join(out, name, name))
'''


class Exports:
    """Paths of the session's PIR exports (read-only: tests copy what they change)."""

    def __init__(self, root: str):
        self.root = root

    def dir(self, name: str) -> str:
        return os.path.join(self.root, name)

    def json(self, name: str) -> str:
        return os.path.join(self.root, name, f"{name}.json")

    def params(self, name: str) -> str:
        return os.path.join(self.root, name, f"{name}.pdiparams")

    def json_bytes(self, name: str) -> bytes:
        with open(self.json(name), "rb") as f:
            return f.read()

    def params_bytes(self, name: str) -> bytes:
        with open(self.params(name), "rb") as f:
            return f.read()

    def doc(self, name: str) -> dict:
        return json.loads(self.json_bytes(name))

    def state(self) -> dict:
        with np.load(os.path.join(self.root, "cnn_state.npz")) as z:
            return {k: z[k] for k in z.files}


@pytest.fixture(scope="session")
def exports(tmp_path_factory) -> Exports:
    if importlib.util.find_spec("paddle") is None:
        pytest.skip("paddlepaddle is not installed: no PIR exports")
    root = str(tmp_path_factory.mktemp("pir_loader_exports"))
    export_in_child(root, _EXPORT)
    found = Exports(root)
    for name in MODELS:
        assert os.path.isfile(found.json(name)), f"paddle.jit.save wrote no {name}.json (is PIR off?)"
    assert os.path.isfile(found.params("cnn"))
    assert not os.path.exists(found.params("noparam")), "a program without parameters should have no .pdiparams"
    return found


# ----------------------------------------------------------------------------------------------------------
# helpers


def _copy_model(exports: Exports, name: str, dst: str, stem: str | None = None, params: bool = True) -> str:
    """Copy `name`.json (and its .pdiparams) into directory `dst` as `stem`.json; returns the .json path."""
    os.makedirs(dst, exist_ok=True)
    stem = stem or name
    model = os.path.join(dst, f"{stem}.json")
    shutil.copyfile(exports.json(name), model)
    if params and os.path.exists(exports.params(name)):
        shutil.copyfile(exports.params(name), os.path.join(dst, f"{stem}.pdiparams"))
    return model


def _write_json(path, doc) -> str:
    with open(path, "w") as f:
        json.dump(doc, f)
    return str(path)


def _top_ops(doc: dict) -> list:
    return doc["program"]["regions"][0]["blocks"][0]["ops"]


def _find(ops: list, short: str, nth: int = 0) -> dict:
    found = [op for op in ops if op.get("#") == short]
    assert len(found) > nth, f"no {short} #{nth} in {[op.get('#') for op in ops]}"
    return found[nth]


def _result(op: dict) -> dict:
    out = op["O"]
    return out if isinstance(out, dict) else out[0]


def _expect_format_error(*fragments, **kwargs) -> ModelFormatError:
    """load_model(**kwargs) must raise ModelFormatError whose message holds every fragment (case-insensitive);
    any other outcome fails with what happened."""
    try:
        graph = load_model(**kwargs)
    except ModelFormatError as exc:
        message = str(exc)
        for fragment in fragments:
            assert fragment.lower() in message.lower(), f"{fragment!r} not in the message: {message}"
        return exc
    except Exception:  # noqa: BLE001 - the point: nothing but ModelFormatError
        pytest.fail(f"load_model({_describe(kwargs)}) raised another exception:\n{traceback.format_exc()}")
    pytest.fail(f"load_model({_describe(kwargs)}) accepted the input: {graph!r}")


def _describe(kwargs: dict) -> str:
    return ", ".join(f"{k}={v!r}" if not isinstance(v, bytes) else f"{k}=<{len(v)} bytes>" for k, v in kwargs.items())


# ----------------------------------------------------------------------------------------------------------
# 1. layouts


def test_directory_with_json_pdiparams_and_inference_yml(exports, tmp_path):
    model = _copy_model(exports, "cnn", str(tmp_path / "m"))
    (tmp_path / "m" / "inference.yml").write_text("Global:\n  model_name: cnn\nPreProcess:\n  transform_ops: []\n")
    (tmp_path / "m" / "preprocess.json").write_text('{"mean": [0.5, 0.5, 0.5]}')  # other JSON beside it
    graph = load_model(str(tmp_path / "m"))
    assert isinstance(graph, ProgramGraph)
    assert graph.format == "pir"
    assert graph.format_version == exports.doc("cnn")["base_code"]["version"]
    assert graph.format_version in pir.SUPPORTED_VERSIONS
    assert graph.layout == "json+pdiparams"
    assert graph.program_desc is None
    assert graph.model_path == model
    assert graph.params_path == model[: -len(".json")] + ".pdiparams"
    assert graph.inputs == ["x"] and graph.outputs == ["fetch_name_0"]
    assert sorted(graph.params) == sorted(exports.state())


def test_json_file_with_its_pdiparams(exports):
    graph = load_model(exports.json("cnn"))
    assert (graph.format, graph.layout) == ("pir", "json+pdiparams")
    assert graph.model_path == exports.json("cnn") and graph.params_path == exports.params("cnn")
    assert len(graph.params) == 8


def test_json_file_with_params_renamed(exports, tmp_path):
    model = _copy_model(exports, "cnn", str(tmp_path), params=False)
    renamed = tmp_path / "weights.bin"
    shutil.copyfile(exports.params("cnn"), renamed)
    graph = load_model(model, params_path=str(renamed))
    assert graph.format == "pir" and graph.layout == "files"
    assert graph.params_path == str(renamed)
    state = exports.state()
    for name, value in state.items():
        np.testing.assert_array_equal(graph.params[name], value)
    # Without params_path the renamed file is not found: the error names the .pdiparams it expected.
    _expect_format_error(str(tmp_path / "cnn.pdiparams"), "8 parameters", model_path=model)


def test_json_without_params_for_a_program_without_parameters(exports, tmp_path):
    graph = load_model(exports.json("noparam"))
    assert (graph.format, graph.layout, graph.params) == ("pir", "json+pdiparams", {})
    assert graph.params_path is None
    graph = load_model(exports.dir("noparam"))  # the directory too
    assert graph.format == "pir" and graph.params == {}
    # Paddle Inference 3.3.1 runs it whatever params file its config names (paddle.jit.save wrote none), so a
    # params path that does not exist is no error for it; a program with parameters still says the file named is
    # not there (test_missing_params_file).
    graph = load_model(exports.json("noparam"), params_path=str(tmp_path / "noparam.pdiparams"))
    assert graph.params == {} and graph.params_path is None
    # Beside an inference.yml and a non-PIR .json, the PIR program is found by its content.
    _copy_model(exports, "noparam", str(tmp_path))
    (tmp_path / "inference.yml").write_text("Global: {}\n")
    (tmp_path / "labels.json").write_text('["cat", "dog"]')
    graph = load_model(str(tmp_path))
    assert graph.model_path == str(tmp_path / "noparam.json")


def test_model_and_params_as_bytes(exports):
    graph = load_model(model_bytes=exports.json_bytes("cnn"), params_bytes=exports.params_bytes("cnn"))
    assert (graph.format, graph.layout) == ("pir", "buffers")
    assert graph.format_version == exports.doc("cnn")["base_code"]["version"]
    for name, value in exports.state().items():
        np.testing.assert_array_equal(graph.params[name], value)
    graph = load_model(model_bytes=exports.json_bytes("noparam"))
    assert graph.format == "pir" and graph.params == {}
    # Leading whitespace is still JSON.
    graph = load_model(model_bytes=b" \n\t" + exports.json_bytes("noparam"))
    assert graph.format == "pir"
    exc = _expect_format_error("<model buffer>", "no params file", model_bytes=exports.json_bytes("cnn"))
    assert "8 parameters" in str(exc)


def test_directory_with_a_pdmodel_and_a_json_is_ambiguous(exports, tmp_path):
    _copy_model(exports, "cnn", str(tmp_path))
    (tmp_path / "legacy.pdmodel").write_bytes(b"\x0a\x00")
    (tmp_path / "legacy.pdiparams").write_bytes(b"")
    exc = _expect_format_error("ambiguous", "legacy.pdmodel", "cnn.json", "model file", model_path=str(tmp_path))
    assert str(tmp_path) in str(exc)
    # The advice works: naming the .json loads the PIR program.
    assert load_model(str(tmp_path / "cnn.json")).format == "pir"


def test_directory_with_legacy_model_and_json_is_ambiguous(exports, tmp_path):
    _copy_model(exports, "noparam", str(tmp_path))
    (tmp_path / "__model__").write_bytes(b"\x0a\x00")
    _expect_format_error("ambiguous", "__model__", "noparam.json", model_path=str(tmp_path))


def test_directory_with_two_pir_programs_is_ambiguous(exports, tmp_path):
    _copy_model(exports, "cnn", str(tmp_path))
    _copy_model(exports, "cond", str(tmp_path))
    exc = _expect_format_error("ambiguous", "2 PIR programs", "cnn.json", "cond.json", "model file",
                               model_path=str(tmp_path))
    assert str(tmp_path) in str(exc)
    # Two parameter-free programs (found by content, without .pdiparams twins) too.
    other = tmp_path / "other"
    _copy_model(exports, "noparam", str(other), stem="a")
    _copy_model(exports, "noparam", str(other), stem="b")
    _expect_format_error("ambiguous", "a.json", "b.json", model_path=str(other))


def test_pir_program_under_another_suffix_is_recognised_by_content(exports, tmp_path):
    # A .pdmodel that holds JSON: the .pdmodel layout finds its .pdiparams, the content says PIR.
    shutil.copyfile(exports.json("cnn"), tmp_path / "model.pdmodel")
    shutil.copyfile(exports.params("cnn"), tmp_path / "model.pdiparams")
    graph = load_model(str(tmp_path / "model.pdmodel"))
    assert graph.format == "pir" and len(graph.params) == 8
    assert graph.format_version == exports.doc("cnn")["base_code"]["version"]
    graph = load_model(str(tmp_path))  # the directory holding that .pdmodel
    assert graph.format == "pir" and len(graph.params) == 8
    # Any other name, with an explicit params file, or alone for a program without parameters.
    shutil.copyfile(exports.json("cnn"), tmp_path / "program.bin")
    graph = load_model(str(tmp_path / "program.bin"), params_path=str(tmp_path / "model.pdiparams"))
    assert graph.format == "pir" and len(graph.params) == 8
    shutil.copyfile(exports.json("noparam"), tmp_path / "program")
    graph = load_model(str(tmp_path / "program"))
    assert graph.format == "pir" and graph.inputs == ["x"]


def test_pir_params_directory_is_refused(exports, tmp_path):
    model = _copy_model(exports, "cnn", str(tmp_path / "m"), params=False)
    (tmp_path / "per_var").mkdir()
    _expect_format_error(str(tmp_path / "per_var"), ".pdiparams", model_path=model,
                         params_path=str(tmp_path / "per_var"))


# ----------------------------------------------------------------------------------------------------------
# 2. parameters


def test_params_are_read_in_sorted_name_order(exports):
    state = exports.state()
    doc_order = [op["A"][3] for op in _top_ops(exports.doc("cnn")) if op.get("#") == "p"]
    assert sorted(doc_order) == sorted(state)
    assert doc_order != sorted(doc_order), "the program lists its parameters unsorted (else this proves little)"
    # The file Paddle wrote is the records in sorted-name order, nothing else.
    expected = b"".join(encode_lod_tensor(state[name]) for name in sorted(state))
    assert exports.params_bytes("cnn") == expected
    graph = load_model(exports.json("cnn"))
    assert list(graph.params) == sorted(state)
    for name, value in state.items():
        got = graph.params[name]
        assert got.dtype == value.dtype and got.shape == value.shape, name
        assert got.tobytes() == value.tobytes(), f"{name}: not bitwise equal to the value the child set"


def test_params_in_another_order_are_read_by_sorted_name(exports):
    """Two same-shape records swapped: the reader still assigns by position in sorted-name order."""
    state = exports.state()
    names = sorted(state)
    a, b = "batch_norm2d_0.b_0", "batch_norm2d_0.w_0"
    assert state[a].shape == state[b].shape
    order = [b if n == a else a if n == b else n for n in names]
    buf = b"".join(encode_lod_tensor(state[n]) for n in order)
    graph = load_model(model_bytes=exports.json_bytes("cnn"), params_bytes=buf)
    np.testing.assert_array_equal(graph.params[a], state[b])
    np.testing.assert_array_equal(graph.params[b], state[a])


def test_params_file_too_short(exports, tmp_path):
    model = _copy_model(exports, "cnn", str(tmp_path), params=False)
    data = exports.params_bytes("cnn")
    state = exports.state()
    last = sorted(state)[-1]
    params = tmp_path / "cnn.pdiparams"
    params.write_bytes(data[:-4])  # cut inside the last record
    _expect_format_error(str(params), last, "truncated", model_path=model)
    params.write_bytes(data[: len(data) - len(encode_lod_tensor(state[last]))])  # the last record gone
    _expect_format_error(str(params), last, "ends before", model_path=model)
    params.write_bytes(b"")
    _expect_format_error(str(params), sorted(state)[0], model_path=model)


def test_params_file_too_long(exports, tmp_path):
    model = _copy_model(exports, "cnn", str(tmp_path), params=False)
    params = tmp_path / "cnn.pdiparams"
    params.write_bytes(exports.params_bytes("cnn") + encode_lod_tensor(np.zeros(3, np.float32)))
    _expect_format_error(str(params), "left after the last of 8 parameters", model_path=model)


@pytest.mark.parametrize("edit", ["dtype", "shape", "rank"])
def test_param_type_disagreeing_with_the_params_file(exports, tmp_path, edit):
    doc = exports.doc("cnn")
    target = "conv2d_0.w_0"
    p_op = next(op for op in _top_ops(doc) if op.get("#") == "p" and op["A"][3] == target)
    data = _result(p_op)["TT"]["D"]
    if edit == "dtype":
        data[0]["#"] = "0.t_f64"
    elif edit == "shape":
        data[1] = [4, 3, 3, 2]
    else:
        data[1] = [4, 27]
    model = _write_json(tmp_path / "cnn.json", doc)
    shutil.copyfile(exports.params("cnn"), tmp_path / "cnn.pdiparams")
    _expect_format_error(str(tmp_path / "cnn.pdiparams"), f"var '{target}'", "disagree", model_path=model)


def test_missing_params_file(exports, tmp_path):
    model = _copy_model(exports, "cnn", str(tmp_path), params=False)
    expected = str(tmp_path / "cnn.pdiparams")
    _expect_format_error(expected, "8 parameters", "no params file", model_path=model)
    _expect_format_error(expected, "8 parameters", model_path=str(tmp_path))  # the directory
    _expect_format_error("params file not found", str(tmp_path / "nope.pdiparams"), model_path=model,
                         params_path=str(tmp_path / "nope.pdiparams"))


# ----------------------------------------------------------------------------------------------------------
# 3. bad input: one ModelFormatError naming the file and what is wrong


def _edit_magic(doc):
    doc["base_code"]["magic"] = "pirx"
    return ["magic", "pirx"]


def _edit_version(doc):
    doc["base_code"]["version"] = 99
    return ["version 99", ", ".join(map(str, pir.SUPPORTED_VERSIONS))]


def _edit_version_string(doc):
    doc["base_code"]["version"] = "4"
    return ["version '4'", "not supported"]


def _edit_no_base_code(doc):
    del doc["base_code"]
    return ["base_code"]


def _edit_no_regions(doc):
    doc["program"]["regions"] = []
    return ["regions"]


def _edit_use_before_define(doc):
    ops = _top_ops(doc)
    softmax = _find(ops, "1.softmax")
    ops.remove(softmax)
    ops.insert(1, softmax)  # right after pd_op.data, before the op producing its operand
    return ["before it is defined", f"%{softmax['I'][0]['%']}"]


def _edit_never_defined(doc):
    _find(_top_ops(doc), "1.relu")["I"][0]["%"] = 4242
    return ["%4242", "defined"]


def _edit_unknown_dialect(doc):
    _find(_top_ops(doc), "1.relu")["#"] = "9.relu"
    return ["'9.relu'", "dialect"]


def _edit_unknown_op(doc):
    _find(_top_ops(doc), "1.relu")["#"] = "1.frobnicate"
    return ["frobnicate"]


def _edit_unknown_builtin(doc):
    _find(_top_ops(doc), "1.relu")["#"] = "0.frobnicate"
    return ["builtin.frobnicate"]


def _edit_bad_type(doc):
    _result(_find(_top_ops(doc), "1.data"))["TT"]["D"][0]["#"] = "0.t_f99"
    return ["0.t_f99"]


def _edit_bad_type_kind(doc):
    _result(_find(_top_ops(doc), "1.relu"))["TT"]["#"] = "0.t_sparse_coo"
    return ["0.t_sparse_coo"]


def _edit_bad_dims(doc):
    _result(_find(_top_ops(doc), "1.relu"))["TT"]["D"][1] = [2, "x"]
    return ["dims"]


def _edit_duplicate_id(doc):
    ops = _top_ops(doc)
    _result(_find(ops, "1.relu"))["%"] = _result(_find(ops, "1.data"))["%"]
    return ["twice", f"%{_result(_find(ops, '1.data'))['%']}"]


def _edit_ops_not_list(doc):
    doc["program"]["regions"][0]["blocks"][0]["ops"] = {"0": {}}
    return ["ops"]


def _edit_op_without_name(doc):
    del _find(_top_ops(doc), "1.relu")["#"]
    return ["without a name"]


def _edit_bad_attr_kind(doc):
    op = _find(_top_ops(doc), "1.softmax")
    op["A"][0]["AT"]["#"] = "0.a_quaternion"
    return ["0.a_quaternion", "'axis'"]


def _edit_bad_attr_value(doc):
    op = _find(_top_ops(doc), "1.softmax")
    op["A"][0]["AT"]["D"] = "minus one"
    return ["'axis'", "minus one"]


def _float_attr(doc):
    for op in _top_ops(doc):
        for a in op.get("A", []):
            if a["AT"]["#"] in ("0.a_f32", "0.a_f64"):
                return a
    raise AssertionError("the noparam export has no float attribute")


def _edit_bad_special_float(doc):
    a = _float_attr(doc)
    a["AT"] = {"#": a["AT"]["#"], "VD": "HUGE"}
    return [f"'{a['N']}'", "HUGE", "INF"]


def _edit_float_attr_string(doc):
    a = _float_attr(doc)
    a["AT"] = {"#": a["AT"]["#"], "D": "one point five"}
    return [f"'{a['N']}'", "one point five", "not a number"]


BAD_NOPARAM_EDITS = {
    "special float value paddle never writes": _edit_bad_special_float,
    "float attribute as a non-numeric string": _edit_float_attr_string,
    "wrong magic": _edit_magic,
    "unsupported version": _edit_version,
    "version as a string": _edit_version_string,
    "no base_code": _edit_no_base_code,
    "no regions": _edit_no_regions,
    "value used before it is defined": _edit_use_before_define,
    "value never defined": _edit_never_defined,
    "unknown dialect": _edit_unknown_dialect,
    "unknown pd_op": _edit_unknown_op,
    "unknown builtin op": _edit_unknown_builtin,
    "unreadable element type": _edit_bad_type,
    "unknown type kind": _edit_bad_type_kind,
    "dims not integers": _edit_bad_dims,
    "duplicated value id": _edit_duplicate_id,
    "ops not a list": _edit_ops_not_list,
    "op without a name": _edit_op_without_name,
    "unknown attribute kind": _edit_bad_attr_kind,
    "attribute value of the wrong type": _edit_bad_attr_value,
}


@pytest.mark.parametrize("case", sorted(BAD_NOPARAM_EDITS))
def test_bad_program(exports, tmp_path, case):
    doc = exports.doc("noparam")
    fragments = BAD_NOPARAM_EDITS[case](doc)
    path = _write_json(tmp_path / "bad.json", doc)
    exc = _expect_format_error(path, *fragments, model_path=path)
    assert exc.path == path
    # The same bytes in memory: the message names the buffer instead.
    with open(path, "rb") as f:
        _expect_format_error("<model buffer>", *fragments, model_bytes=f.read())


@pytest.mark.parametrize("where", ["full_int_array value", "full value"])
def test_integer_out_of_range(exports, tmp_path, where):
    """An integer attribute beyond int64 (JSON integers are unbounded): a ModelFormatError, not OverflowError."""
    if where == "full_int_array value":
        name = "cnn"
        doc = exports.doc(name)
        op = _find(_top_ops(doc), "1.full_int_array")
        op["A"][0]["AT"]["D"][0]["D"] = 2 ** 63 + 5
    else:
        name = "cond"
        doc = exports.doc(name)
        op = _find(_top_ops(doc), "1.full")
        attrs = {a["N"]: a for a in op["A"]}
        attrs["value"]["AT"] = {"#": "1.a_scalar", "D": {"#": "0.a_i64", "D": 2 ** 63 + 5}}
        attrs["dtype"]["AT"]["D"] = "int64"
    path = _write_json(tmp_path / f"{name}.json", doc)
    shutil.copyfile(exports.params(name), tmp_path / f"{name}.pdiparams")
    _expect_format_error(path, "value", model_path=path)


@pytest.mark.parametrize("how", ["missing", "empty", "one", "three", "not a list", "two blocks"])
def test_if_with_bad_regions(exports, tmp_path, how):
    doc = exports.doc("cond")
    op = _find(_top_ops(doc), "1.if")
    if how == "missing":
        del op["regions"]
    elif how == "empty":
        op["regions"] = []
    elif how == "one":
        op["regions"] = op["regions"][:1]
    elif how == "three":
        op["regions"] = op["regions"] + op["regions"][:1]
    elif how == "not a list":
        op["regions"] = {"0": op["regions"][0]}
    else:
        op["regions"][0]["blocks"] = op["regions"][0]["blocks"] * 2
    path = _write_json(tmp_path / "cond.json", doc)
    shutil.copyfile(exports.params("cond"), tmp_path / "cond.pdiparams")
    _expect_format_error(path, "1.if", "region", model_path=path)


def test_if_branch_without_yield(exports, tmp_path):
    doc = exports.doc("cond")
    op = _find(_top_ops(doc), "1.if")
    op["regions"][1]["blocks"][0]["ops"].pop()  # the false branch's cf.yield
    path = _write_json(tmp_path / "cond.json", doc)
    shutil.copyfile(exports.params("cond"), tmp_path / "cond.pdiparams")
    _expect_format_error(path, "yield", model_path=path)


def test_value_of_a_branch_used_outside_it(exports, tmp_path):
    """PIR values are scoped to their region: a value the true branch defines does not exist after the if."""
    doc = exports.doc("cond")
    ops = _top_ops(doc)
    inner = _result(_find(_find(ops, "1.if")["regions"][0]["blocks"][0]["ops"], "1.matmul"))["%"]
    _find(ops, "1.fetch")["I"][0]["%"] = inner
    path = _write_json(tmp_path / "cond.json", doc)
    shutil.copyfile(exports.params("cond"), tmp_path / "cond.pdiparams")
    _expect_format_error(path, f"%{inner}", model_path=path)


def test_while_with_mismatched_block_arguments(exports, tmp_path):
    doc = exports.doc("loop")
    op = _find(_top_ops(doc), "1.while")
    op["regions"][0]["blocks"][0]["args"].pop()
    path = _write_json(tmp_path / "loop.json", doc)
    shutil.copyfile(exports.params("loop"), tmp_path / "loop.pdiparams")
    _expect_format_error(path, "1.while", "arguments", model_path=path)


@pytest.mark.parametrize("how", ["A too short", "empty name", "name not a string", "no A"])
def test_parameter_without_a_name(exports, tmp_path, how):
    doc = exports.doc("cnn")
    p_op = _find(_top_ops(doc), "p")
    if how == "A too short":
        p_op["A"] = p_op["A"][:3]
    elif how == "empty name":
        p_op["A"][3] = ""
    elif how == "name not a string":
        p_op["A"][3] = 17
    else:
        del p_op["A"]
    path = _write_json(tmp_path / "cnn.json", doc)
    shutil.copyfile(exports.params("cnn"), tmp_path / "cnn.pdiparams")
    _expect_format_error(path, "parameter", "name", model_path=path)


def test_parameter_declared_twice_and_duplicated_parameter_ids(exports, tmp_path):
    doc = exports.doc("cnn")
    params = [op for op in _top_ops(doc) if op.get("#") == "p"]
    params[1]["A"][3] = params[0]["A"][3]
    path = _write_json(tmp_path / "cnn.json", doc)
    _expect_format_error(path, f"var '{params[0]['A'][3]}'", "twice", model_path=path)
    doc = exports.doc("cnn")
    params = [op for op in _top_ops(doc) if op.get("#") == "p"]
    params[1]["O"]["%"] = params[0]["O"]["%"]
    path = _write_json(tmp_path / "cnn2.json", doc)
    _expect_format_error(path, "twice", f"%{params[0]['O']['%']}", model_path=path)


def test_truncated_json(exports, tmp_path):
    data = exports.json_bytes("cnn")
    for cut in (1, 40, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{cut}.json"
        path.write_bytes(data[:cut])
        _expect_format_error(str(path), "JSON", model_path=str(path))


def test_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    _expect_format_error(str(path), "empty", model_path=str(path))
    _expect_format_error("<model buffer>", "empty", model_bytes=b"")


@pytest.mark.parametrize("content", [b"[1, 2, 3]", b'  [{"base_code": {"magic": "pir", "version": 4}}]', b"[]"],
                         ids=["numbers", "wrapped program", "empty array"])
def test_json_array_instead_of_an_object(tmp_path, content):
    """A .json holding a JSON array is JSON, not a ProgramDesc: the error says it is no PIR program (an object
    with base_code), not that protobuf wire format is corrupt."""
    path = tmp_path / "model.json"
    path.write_bytes(content)
    exc = _expect_format_error(str(path), model_path=str(path))
    message = str(exc)
    assert "PIR" in message and ("base_code" in message or "object" in message), message
    assert "Wire format" not in message and "FLAGS_enable_pir_api=0" not in message, message


@pytest.mark.parametrize("shape", ["bare list", "list inside program", "objects inside program"])
def test_deeply_nested_json(tmp_path, shape):
    """JSON nested far beyond any PIR program: orjson's depth limit, reported as a ModelFormatError naming it."""
    depth = 100_000
    if shape == "bare list":
        data = b"[" * depth + b"]" * depth
    elif shape == "list inside program":
        data = (b'{"base_code": {"magic": "pir", "version": 4}, "program": ' + b"[" * depth + b"]" * depth + b"}")
    else:
        data = (b'{"base_code": {"magic": "pir", "version": 4}, "program": ' + b'{"a":' * depth + b"0"
                + b"}" * depth + b"}")
    path = tmp_path / "deep.json"
    path.write_bytes(data)
    _expect_format_error(str(path), "deeper than 1024 levels", model_path=str(path))


def _nested_ifs(depth: int) -> str:
    """A valid program (as JSON text: too deep for json.dumps): data x, a bool condition, `depth` pd_op.if
    nested in each other's true branch (no results), then relu(x) fetched."""
    tensor = '{"#":"0.t_dtensor","D":[{"#":"0.t_f32"},[1],"NCHW",[],0]}'
    boolean = '{"#":"0.t_dtensor","D":[{"#":"0.t_bool"},[],"NCHW",[],0]}'
    data = ('{"#":"1.data","A":[{"AT":{"#":"0.a_str","D":"x"},"N":"name"},{"AT":{"#":"1.a_intarray","D":[1]},'
            '"N":"shape"},{"AT":{"#":"1.a_dtype","D":"float32"},"N":"dtype"}],"I":[],'
            '"O":[{"%":1,"TT":' + tensor + '}]}')
    full = ('{"#":"1.full","A":[{"AT":{"#":"0.a_array","D":[]},"N":"shape"},{"AT":{"#":"0.a_f64","D":1.0},'
            '"N":"value"},{"AT":{"#":"1.a_dtype","D":"bool"},"N":"dtype"}],"I":[],'
            '"O":[{"%":2,"TT":' + boolean + '}]}')
    relu = '{"#":"1.relu","A":[],"I":[{"%":1}],"O":[{"%":3,"TT":' + tensor + '}]}'
    fetch = ('{"#":"1.fetch","A":[{"AT":{"#":"0.a_str","D":"out"},"N":"name"},{"AT":{"#":"0.a_i32","D":0},"N":"col"}],'
             '"I":[{"%":3}],"O":[{"%":4,"TT":' + tensor + '}]}')
    yield_op = '{"#":"2.yield","A":[],"I":[],"O":[]}'
    open_region = '{"#":"region","blocks":[{"#":"block","args":[],"ops":['
    close_region = ']}]}'
    open_if = '{"#":"1.if","A":[],"I":[{"%":2}],"O":[],"regions":[' + open_region
    close_if = close_region + "," + open_region + yield_op + close_region + "]}"
    nest = open_if * depth + yield_op + (close_if + "," + yield_op) * (depth - 1) + close_if
    top = ",".join([data, full, nest, relu, fetch])
    return ('{"base_code":{"magic":"pir","version":4},"program":{"regions":[' + open_region + top + close_region
            + "]}}")


def test_deeply_nested_regions(tmp_path):
    """Ifs nested up to loader.validate.MAX_BLOCK_DEPTH load; one level more, or as deep as the JSON parser
    allows and beyond, is a ModelFormatError naming the file (never a RecursionError)."""
    (tmp_path / "shallow.json").write_text(_nested_ifs(3))
    shallow = load_model(str(tmp_path / "shallow.json"))
    assert shallow.format == "pir" and len(shallow.blocks) == 1 + 2 * 3
    outcomes = {}
    for depth in (MAX_BLOCK_DEPTH, MAX_BLOCK_DEPTH + 1, 160, 2000):
        path = str(tmp_path / f"deep{depth}.json")
        with open(path, "w") as f:
            f.write(_nested_ifs(depth))
        try:
            graph = load_model(path)
        except ModelFormatError as exc:
            assert path in str(exc)
            outcomes[depth] = str(exc)
        except Exception:  # noqa: BLE001
            pytest.fail(f"nested ifs, depth {depth}:\n{traceback.format_exc()}")
        else:
            assert len(graph.blocks) == 1 + 2 * depth
            outcomes[depth] = "graph"
    assert outcomes[MAX_BLOCK_DEPTH] == "graph"
    assert f"at most {MAX_BLOCK_DEPTH}" in outcomes[MAX_BLOCK_DEPTH + 1]
    # 160 ifs nest the JSON ~970 levels deep: orjson parses it, the block depth check refuses it; 2000 (~12000
    # levels) is beyond orjson's 1024
    assert f"at most {MAX_BLOCK_DEPTH}" in outcomes[160]
    assert "deeper than 1024 levels" in outcomes[2000]


# ----------------------------------------------------------------------------------------------------------
# 4. fuzzing real .json files: a ProgramGraph or a ModelFormatError, nothing else

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
FUZZ_MODELS = ("cnn", "cond", "loop")


@pytest.fixture(scope="module")
def fuzz_sources(exports) -> dict:
    """name -> (json bytes, params bytes); each pair loads undamaged."""
    sources = {}
    for name in FUZZ_MODELS:
        model, params = exports.json_bytes(name), exports.params_bytes(name)
        load_model(model_bytes=model, params_bytes=params)
        sources[name] = (model, params)
    return sources


def _load_or_format_error(model: bytes, params: bytes, what: str) -> None:
    try:
        result = load_model(model_bytes=model, params_bytes=params)
    except ModelFormatError as exc:
        assert "<model buffer>" in str(exc) or "<params buffer>" in str(exc), f"{what}: {exc}"
        return
    except Exception:  # noqa: BLE001
        pytest.fail(f"{what}: load_model raised another exception:\n{traceback.format_exc()}")
    assert isinstance(result, ProgramGraph), what


@FUZZ
@given(data=st.data())
def test_fuzz_truncated_json(fuzz_sources, data):
    name = data.draw(st.sampled_from(FUZZ_MODELS), label="model")
    model, params = fuzz_sources[name]
    cut = data.draw(st.integers(0, len(model) - 1), label="cut")
    _load_or_format_error(model[:cut], params, f"{name}.json cut at {cut}")


@FUZZ
@given(data=st.data())
def test_fuzz_byte_flips(fuzz_sources, data):
    name = data.draw(st.sampled_from(FUZZ_MODELS), label="model")
    model, params = fuzz_sources[name]
    buf = bytearray(model)
    flips = []
    for _ in range(data.draw(st.integers(1, 6), label="flips")):
        pos = data.draw(st.integers(0, len(buf) - 1))
        if data.draw(st.booleans()):  # a JSON-significant character, often still valid JSON
            buf[pos] = data.draw(st.sampled_from(b'0123456789-{}[]",:.etn '))
        else:
            buf[pos] ^= data.draw(st.integers(1, 255))
        flips.append(pos)
    _load_or_format_error(bytes(buf), params, f"{name}.json with bytes changed at {flips}")


_ATTR_KINDS = ["0.a_bool", "0.a_i32", "0.a_i64", "0.a_f32", "0.a_f64", "0.a_str", "0.a_array", "1.a_intarray",
               "1.a_dtype", "1.a_place", "1.a_scalar", "0.a_type", "0.a_pointer", "1.a_layout", "0.a_weird"]
_JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                         st.floats(allow_nan=False), st.text(max_size=8),
                         st.sampled_from(["p", "1.relu", "0.t_f32", "2.yield", "1.if", "0.t_vec", "0.t_dtensor"]),
                         st.just([]), st.just({}), st.lists(st.integers(-2, 30), max_size=4),
                         st.just({"%": 1}), st.just({"#": "0.a_i32", "D": 1}))


_EXTREME_NUMBERS = [0, -1, -2, 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 63 - 1, 2 ** 63 + 5, -(2 ** 63), 2 ** 64 + 1, 1e308,
                    -1e308, 1e-320, -0.0, 0.5, 2 ** 40]


def _positions(node, out: list) -> list:
    """Every (container, key) in the document: the places an edit can touch."""
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((node, k))
            _positions(v, out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append((node, i))
            _positions(v, out)
    return out


def _edit(doc: dict, draw) -> str:
    """One random structural edit of `doc` in place; returns what it did."""
    positions = _positions(doc, [])
    if not positions:
        return "nothing left to edit"
    kind = draw(st.sampled_from(["delete key", "retype", "number", "value id", "duplicate op", "drop op",
                                 "move op", "attr kind", "op name"]))
    if kind == "delete key":
        keyed = [(c, k) for c, k in positions if isinstance(c, dict)]
        if not keyed:
            return "no key to delete"
        c, k = keyed[draw(st.integers(0, len(keyed) - 1))]
        del c[k]
        return f"deleted key {k!r}"
    if kind == "retype":
        c, k = positions[draw(st.integers(0, len(positions) - 1))]
        old = c[k]
        new = draw(_JSON_VALUES.filter(lambda v: type(v) is not type(old)))
        c[k] = new
        return f"replaced {type(old).__name__} at {k!r} by {new!r}"
    if kind == "number":
        numbers = [(c, k) for c, k in positions if isinstance(c[k], (int, float)) and not isinstance(c[k], bool)]
        if not numbers:
            return "no number left"
        c, k = numbers[draw(st.integers(0, len(numbers) - 1))]
        old, c[k] = c[k], draw(st.sampled_from(_EXTREME_NUMBERS))
        return f"number {old!r} at {k!r} -> {c[k]!r}"
    if kind == "value id":
        refs = [c for c, k in positions if isinstance(c, dict) and k == "%"]
        args = [c for c, k in positions if isinstance(c, dict) and k == "#" and isinstance(c[k], int)]
        holders = [(r, "%") for r in refs] + [(a, "#") for a in args]
        if not holders:
            return "no value id left"
        c, k = holders[draw(st.integers(0, len(holders) - 1))]
        old, c[k] = c[k], draw(st.integers(-4, 40))
        return f"value id {old} -> {c[k]}"
    ops_lists = [c[k] for c, k in positions if isinstance(c, dict) and k == "ops" and isinstance(c[k], list) and c[k]]
    if not ops_lists:
        return "no ops left"
    if kind in ("duplicate op", "drop op", "move op"):
        ops = ops_lists[draw(st.integers(0, len(ops_lists) - 1))]
        i = draw(st.integers(0, len(ops) - 1))
        if kind == "duplicate op":
            ops.insert(draw(st.integers(0, len(ops))), copy.deepcopy(ops[i]))
            return f"duplicated op {ops[i].get('#')} #{i}"
        op = ops.pop(i)
        if kind == "move op":
            ops.insert(draw(st.integers(0, len(ops))), op)
            return f"moved op {op.get('#')} #{i}"
        return f"dropped op {op.get('#')} #{i}"
    if kind == "attr kind":
        attrs = [c for c, k in positions if isinstance(c, dict) and k == "#" and isinstance(c[k], str)
                 and c[k][:4] in ("0.a_", "1.a_")]
        if not attrs:
            return "no attribute left"
        c = attrs[draw(st.integers(0, len(attrs) - 1))]
        old, c["#"] = c["#"], draw(st.sampled_from(_ATTR_KINDS))
        return f"attribute kind {old} -> {c['#']}"
    ops = [op for lst in ops_lists for op in lst if isinstance(op, dict)]
    if not ops:
        return "no op object left"
    op = ops[draw(st.integers(0, len(ops) - 1))]
    old, op["#"] = op.get("#"), draw(st.sampled_from(["p", "1.if", "1.while", "2.yield", "0.combine", "0.split",
                                                      "0.slice", "1.fetch", "1.data", "1.full", "1.relu", "1.",
                                                      ".relu", "1.concat", "1.create_array", "1.array_write_"]))
    return f"op {old} renamed {op['#']}"


@FUZZ
@given(data=st.data())
def test_fuzz_structural_edits(fuzz_sources, data):
    name = data.draw(st.sampled_from(FUZZ_MODELS), label="model")
    model, params = fuzz_sources[name]
    doc = json.loads(model)
    done = [_edit(doc, data.draw) for _ in range(data.draw(st.integers(1, 3), label="edits"))]
    _load_or_format_error(json.dumps(doc).encode(), params, f"{name}.json with edits {done}")


# ----------------------------------------------------------------------------------------------------------
# 5. end to end: the predictor against Paddle Inference reading the same .json


def _paddle_inference(model: str, feeds: dict, params: str) -> tuple:
    """(input names, output names, outputs) from Paddle Inference on CPU, the program as written."""
    import paddle.inference as paddle_infer

    config = paddle_infer.Config(model, params)
    config.disable_gpu()
    config.disable_mkldnn()
    config.switch_ir_optim(False)
    config.set_cpu_math_library_num_threads(1)
    predictor = paddle_infer.create_predictor(config)
    inputs = predictor.get_input_names()
    for name in inputs:
        handle = predictor.get_input_handle(name)
        handle.reshape(list(feeds[name].shape))
        handle.copy_from_cpu(np.ascontiguousarray(feeds[name]))
    predictor.run()
    outputs = predictor.get_output_names()
    return inputs, outputs, [predictor.get_output_handle(n).copy_to_cpu() for n in outputs]


def _feeds(name: str) -> list:
    rng = np.random.default_rng(5)
    x8 = rng.standard_normal((2, 8)).astype(np.float32)
    if name == "cnn":
        return [{"x": rng.standard_normal((b, 3, 8, 8)).astype(np.float32)} for b in (1, 3)]
    if name == "noparam":
        return [{"x": x8}, {"x": x8[:1]}]
    if name == "cond":
        return [{"x": np.abs(x8) + 0.1}, {"x": -np.abs(x8) - 0.1}]
    return [{"x": x8, "n": np.array([n], np.int64)} for n in (3, 0)]


@pytest.mark.parametrize("name", MODELS)
def test_predictor_matches_paddle_inference(exports, name):
    model = exports.json(name)
    params = exports.params(name)  # noparam has none: Paddle Inference only warns
    graph = load_model(model)
    config = nb.Config()
    config.set_model_file(model)
    predictor = nb.create_predictor(config)
    for feeds in _feeds(name):
        pi_inputs, pi_outputs, want = _paddle_inference(model, feeds, params)
        assert graph.inputs == pi_inputs
        assert predictor.get_input_names() == pi_inputs
        assert predictor.get_output_names() == pi_outputs
        assert graph.outputs == pi_outputs
        for input_name, array in feeds.items():
            predictor.get_input_by_name(input_name).from_numpy(array)
        predictor.run()
        for k, expected in enumerate(want):
            assert_model_close(predictor.get_output(k).numpy(), expected,
                               what=f"{name} output {pi_outputs[k]} for inputs {[a.shape for a in feeds.values()]}")
    if name == "cond":  # the two inputs really took different branches in Paddle
        first = _paddle_inference(model, _feeds(name)[0], params)[2][0]
        second = _paddle_inference(model, _feeds(name)[1], params)[2][0]
        assert (second >= -1.0).all() and not np.allclose(first, second)
    if name == "loop":
        trips = [int(_paddle_inference(model, f, params)[2][1][0]) for f in _feeds(name)]
        assert trips == [3, 0]
