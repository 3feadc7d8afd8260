"""Hostile hand-made models: every string and number a model file gives is checked at the loader boundary
(loader/validate.py), so a forged file is one ModelFormatError naming the file and the place, never a
TypeError, a RecursionError, a minute of work, or a silently wrong program.

One test (or parametrized case) per probe of issue 12 part 2:
  - a var / op / slot / attribute name that is not UTF-8 (protobuf hands it back as bytes);
  - 10,000 blocks nested through sub_block attributes (and block references that loop or share);
  - a VarDesc (or a stored tensor, or a PIR type) with more axes than NNAdapter holds;
  - values Paddle refuses that used to load: conv2d groups 0, softmax axis 1.5, feed col 5 / -3, duplicated
    fetch cols, a parameter declared [-5, 10] but stored [512, 10], pool2d ksize [0, 0];
  - names the partition config cannot hold: control characters are refused at load, ':' / ',' / '-' / '#'
    load and get a comment line in the dump;
  - a partition config (buffer or file) that is not UTF-8.
The value rules themselves are confirmed against Paddle Inference in test_model_validation.py.
"""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import nnadapter_bridge as nb
from devtools import zoo
from nnadapter_bridge.errors import ConfigError, ModelFormatError
from nnadapter_bridge.loader import dtypes, load_model
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.params import encode_lod_tensor
from nnadapter_bridge.loader.program import BlockRef
from nnadapter_bridge.loader.validate import MAX_BLOCK_DEPTH, MAX_RANK
from partition.config import PartitionConfig
from partition.dump import operator_lines

BAD = b"\xbb\x85QQ"  # not UTF-8; as long as the placeholder it replaces
PLACEHOLDER = b"QQQQ"


def relu_program(x="x", y="y", shape=(2, 3), extra_vars=(), ops=None, feeds=None, fetches=None) -> list:
    vars_ = [{"name": x, "shape": list(shape)}, {"name": y, "shape": list(shape)}] + list(extra_vars)
    ops = ops if ops is not None else [{"type": "relu", "inputs": {"X": [x]}, "outputs": {"Out": [y]}}]
    return [{"vars": vars_, "ops": ops}]


def program_bytes(blocks, feeds=("x",), fetches=("y",)) -> bytes:
    return zoo.write_program(None, blocks, feeds=list(feeds), fetches=list(fetches))


def refused(match: str, **load_kwargs) -> str:
    with pytest.raises(ModelFormatError, match=match) as info:
        load_model(**load_kwargs)
    return str(info.value)


# -- 1. names that are not UTF-8 --------------------------------------------------------------------------

NON_UTF8 = {
    # where the placeholder sits -> (the program, what the error must say)
    "var name": (relu_program(y="QQQQ"), ["y"], ["QQQQ"], "block 0, var #2: the name"),
    "slot var": (relu_program(ops=[{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["QQQQ"]}}],
                              extra_vars=[{"name": "q", "shape": [1]}]), ["y"], ["y"],
                 "block 0, op #1 \\(relu\\): output slot 'Out' var #0"),
    "op type": (relu_program(ops=[{"type": "QQQQ", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]}}]),
                ["y"], ["y"], "block 0, op #1: the op type"),
    "slot name": (relu_program(ops=[{"type": "relu", "inputs": {"QQQQ": ["x"]}, "outputs": {"Out": ["y"]}}]),
                  ["y"], ["y"], "block 0, op #1 \\(relu\\): input slot #0"),
    "attribute name": (relu_program(ops=[{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]},
                                          "attrs": {"QQQQ": 1}}]), ["y"], ["y"], "attribute #0's name"),
    "string attribute": (relu_program(ops=[{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]},
                                            "attrs": {"note": "QQQQ"}}]), ["y"], ["y"],
                         "attribute 'note' \\(a string\\)"),
    "strings attribute": (relu_program(ops=[{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]},
                                             "attrs": {"notes": ["ok", "QQQQ"]}}]), ["y"], ["y"],
                          "attribute 'notes' string #1"),
}


@pytest.mark.parametrize("where", sorted(NON_UTF8))
def test_a_name_that_is_not_utf8_is_refused_naming_the_place(tmp_path, where):
    blocks, _, fetches, message = NON_UTF8[where]
    data = program_bytes(blocks, fetches=fetches)
    assert data.count(PLACEHOLDER) >= 1
    path = tmp_path / "__model__"
    path.write_bytes(data.replace(PLACEHOLDER, BAD))
    text = refused(message, model_path=str(path))
    assert str(path) in text and "not UTF-8" in text and repr(BAD) in text  # the bytes themselves are shown


def test_a_non_utf8_name_never_reaches_the_predictor(tmp_path):
    """The probe: such a name used to come back as bytes and raise TypeError (sorting vars, support decisions,
    the host executor). create_predictor now stops at the loader."""
    blocks, _, fetches, _ = NON_UTF8["var name"]
    path = tmp_path / "__model__"
    path.write_bytes(program_bytes(blocks, fetches=fetches).replace(PLACEHOLDER, BAD))
    config = nb.Config()
    config.set_model_file(str(path))
    config.set_nnadapter_device_names(["builtin_device"])
    with pytest.raises(ModelFormatError, match="not UTF-8"):
        nb.create_predictor(config)


def pir_doc(x="x", out="out", dims=(1, 4), param=None) -> dict:
    """A tiny PIR program: data `x`, relu, fetch `out` (and a parameter added to x when `param` is a name)."""
    tensor = {"#": "0.t_dtensor", "D": [{"#": "0.t_f32"}, list(dims), "NCHW", [], 0]}
    ops = [{"#": "1.data", "A": [{"AT": {"#": "0.a_str", "D": x}, "N": "name"},
                                 {"AT": {"#": "1.a_intarray", "D": list(dims)}, "N": "shape"},
                                 {"AT": {"#": "1.a_dtype", "D": "float32"}, "N": "dtype"}],
            "I": [], "O": [{"%": 1, "TT": tensor}]}]
    source = 1
    if param is not None:
        ops.insert(0, {"#": "p", "A": [0, 1, 1, param], "OA": [1, 0, 0], "O": {"%": 10, "TT": tensor}})
        ops.append({"#": "1.add", "A": [], "I": [{"%": 1}, {"%": 10}], "O": [{"%": 11, "TT": tensor}]})
        source = 11
    ops += [{"#": "1.relu", "A": [], "I": [{"%": source}], "O": [{"%": 2, "TT": tensor}]},
            {"#": "1.fetch", "A": [{"AT": {"#": "0.a_str", "D": out}, "N": "name"},
                                   {"AT": {"#": "0.a_i32", "D": 0}, "N": "col"}],
             "I": [{"%": 2}], "O": [{"%": 3, "TT": tensor}]}]
    return {"base_code": {"magic": "pir", "version": 4},
            "program": {"regions": [{"#": "region", "blocks": [{"#": "block", "args": [], "ops": ops}]}]}}


def test_pir_names_are_checked_too():
    load_model(model_bytes=json.dumps(pir_doc()).encode())  # the undamaged program loads
    bad_utf8 = json.dumps(pir_doc(out="QQQQ")).encode().replace(PLACEHOLDER, BAD)
    refused("not valid JSON", model_bytes=bad_utf8)  # bytes that are not UTF-8
    # a JSON escape can spell a lone surrogate: orjson refuses it as JSON, naming the missing low surrogate
    surrogate = json.dumps(pir_doc(x="a\ud800b")).encode()
    refused("not valid JSON \\(no low surrogate", model_bytes=surrogate)
    refused("pd_op.data: the feed name 'a\\\\nb' contains the control character",
            model_bytes=json.dumps(pir_doc(x="a\nb")).encode())
    refused("pd_op.fetch: the output name 'o\\\\x00' contains", model_bytes=json.dumps(pir_doc(out="o\0")).encode())


# -- 2. nesting --------------------------------------------------------------------------------------------


def nested_program(depth: int) -> list:
    """Block i (1..depth) is the sub_block of a conditional_block in block i - 1; the innermost runs relu."""
    blocks = [{"vars": [{"name": "x", "shape": [1, 4]}, {"name": "c", "shape": [1], "dtype": "bool"},
                        {"name": "y", "shape": [1, 4]}], "ops": []}]
    for i in range(1, depth + 1):
        blocks.append({"vars": [], "ops": [], "parent_idx": i - 1})
    for i in range(depth):
        blocks[i]["ops"].append({"type": "conditional_block", "inputs": {"Cond": ["c"], "Input": ["x"]},
                                 "outputs": {"Out": ["y"], "Scope": []},
                                 "attrs": {"sub_block": BlockRef(i + 1), "is_scalar_condition": True}})
    blocks[depth]["ops"].append({"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]}})
    return blocks


def test_ten_thousand_nested_blocks_are_refused_at_once():
    """The probe: RecursionError after 36 s. Now the depth is read from the parent indices in one pass."""
    data = program_bytes(nested_program(10_000), feeds=("x", "c"))
    start = time.perf_counter()
    text = refused(f"nested {MAX_BLOCK_DEPTH + 1} blocks deep; this loader reads at most {MAX_BLOCK_DEPTH}",
                   model_bytes=data)
    assert time.perf_counter() - start < 5, "the check must not walk the chain once per block"
    assert "<model buffer>" in text


def test_the_deepest_accepted_nesting_runs_and_one_more_is_refused():
    data = program_bytes(nested_program(MAX_BLOCK_DEPTH), feeds=("x", "c"))
    config = nb.Config()
    config.set_model_buffer(data, b"")
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)  # the host executor runs 64 levels well inside Python's stack
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
    predictor.get_input_by_name("x").from_numpy(x)
    predictor.get_input_by_name("c").from_numpy(np.array([True]))
    predictor.run()
    np.testing.assert_array_equal(predictor.get_output_by_name("y").numpy(), np.maximum(x, 0))
    refused("at most 64", model_bytes=program_bytes(nested_program(MAX_BLOCK_DEPTH + 1), feeds=("x", "c")))


def _edit_blocks(data: bytes, edit) -> bytes:
    program = pb.ProgramDesc()
    program.ParseFromString(data)
    edit(program)
    return program.SerializeToString()


def _set_sub_block(program, block: int, op: int, target: int) -> None:
    for a in program.blocks[block].ops[op].attrs:
        if a.name == "sub_block":
            a.block_idx = target


@pytest.mark.parametrize("case, edit, message", [
    ("self", lambda p: _set_sub_block(p, 1, 0, 1), "names block 1, which is not nested in the op's block 1"),
    ("loop", lambda p: _set_sub_block(p, 2, 0, 1), "names block 1, which is not nested in the op's block 2"),
    ("parent later", lambda p: setattr(p.blocks[1], "parent_idx", 2), "a block's parent is an earlier block"),
    ("shared", lambda p: p.blocks[1].ops.append(p.blocks[1].ops[0]), "names block 2, which op conditional_block"),
])
def test_block_references_that_loop_or_share_are_refused(case, edit, message):
    data = program_bytes(nested_program(3), feeds=("x", "c"))
    load_model(model_bytes=data)
    refused(message, model_bytes=_edit_blocks(data, edit))


# -- 3. rank ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rank", [MAX_RANK + 1, 100])
def test_a_var_with_more_axes_than_nnadapter_holds_is_refused(rank):
    """The probe: 100 dims raised a bare ValueError from the operand types. Paddle's DDim holds 9 axes and
    refuses 10+ (checked: "Now only supports access to dimension 0 to 9"); NNAdapter holds 8."""
    blocks = relu_program(extra_vars=[{"name": "big", "shape": [1] * rank}])
    text = refused(f"has {rank} dims; NNAdapter holds at most {MAX_RANK}", model_bytes=program_bytes(blocks))
    assert "var 'big'" in text
    load_model(model_bytes=program_bytes(relu_program(extra_vars=[{"name": "ok", "shape": [1] * MAX_RANK}])))


def test_stored_dims_and_pir_types_have_the_same_rank_limit(tmp_path):
    blocks = relu_program(extra_vars=[{"name": "w", "shape": [1] * MAX_RANK, "persistable": True}])
    record = encode_lod_tensor(np.zeros((1,) * MAX_RANK, np.float32))
    desc = pb.VarType.TensorDesc(data_type=dtypes.VarTypeCode.FP32, dims=[1] * (MAX_RANK + 1)).SerializeToString()
    forged = record[:16] + len(desc).to_bytes(4, "little") + desc + record[20 + int.from_bytes(record[16:20],
                                                                                                 "little"):]
    refused("stored dims have 9 axes", model_bytes=program_bytes(blocks), params_bytes=forged)
    refused("has 9 dims; NNAdapter holds at most 8",
            model_bytes=json.dumps(pir_doc(dims=[1] * (MAX_RANK + 1))).encode())


def test_a_negative_size_other_than_minus_one_is_refused():
    refused("a size must be -1 \\(unknown\\) or 0..2\\^62", model_bytes=program_bytes(relu_program(shape=(-5, 3))))


# -- 4. values Paddle refuses -----------------------------------------------------------------------------

X4 = {"name": "x", "shape": [1, 4, 8, 8]}


def conv_program(**attrs) -> tuple:
    attrs = {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1, "data_format": "NCHW",
             **attrs}
    blocks = [{"vars": [X4, {"name": "w", "shape": [4, 4, 3, 3], "persistable": True}, {"name": "y", "shape": []}],
               "ops": [{"type": "conv2d", "inputs": {"Input": ["x"], "Filter": ["w"]}, "outputs": {"Output": ["y"]},
                        "attrs": attrs}]}]
    return program_bytes(blocks), zoo.write_combined_params(None, {"w": np.ones((4, 4, 3, 3), np.float32)})


def test_conv2d_groups_zero_is_refused():
    model, params = conv_program()
    load_model(model_bytes=model, params_bytes=params)
    model, params = conv_program(groups=0)
    text = refused("attribute 'groups' is 0; Paddle requires groups >= 1", model_bytes=model, params_bytes=params)
    assert "op conv2d#1 (out: y)" in text


def test_softmax_axis_given_as_a_float_is_refused():
    blocks = relu_program(ops=[{"type": "softmax", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]},
                                "attrs": {"axis": (pb.FLOAT, 1.5)}}])
    refused("op softmax#1 \\(out: y\\): attribute 'axis' is a float but Paddle declares it an int \\(value 1.5\\)",
            model_bytes=program_bytes(blocks))


def _set_col(data: bytes, op_type: str, nth: int, col: int) -> bytes:
    def edit(program):
        ops = [op for op in program.blocks[0].ops if op.type == op_type]
        for a in ops[nth].attrs:
            if a.name == "col":
                a.i = col
    return _edit_blocks(data, edit)


def two_outputs() -> bytes:
    blocks = relu_program(extra_vars=[{"name": "z", "shape": [2, 3]}],
                          ops=[{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]}},
                               {"type": "relu", "inputs": {"X": ["y"]}, "outputs": {"Out": ["z"]}}])
    return program_bytes(blocks, fetches=("y", "z"))


@pytest.mark.parametrize("case, data, message", [
    ("feed col 5", lambda: _set_col(program_bytes(relu_program()), "feed", 0, 5),
     "the feed ops have columns \\[5\\]"),
    ("feed col -3", lambda: _set_col(program_bytes(relu_program()), "feed", 0, -3),
     "the feed ops have columns \\[-3\\]"),
    ("duplicated fetch col", lambda: _set_col(two_outputs(), "fetch", 1, 0),
     "attribute 'col' is 0, the column of fetch#"),
    ("fetch col gap", lambda: _set_col(two_outputs(), "fetch", 1, 3), "the fetch ops have columns \\[0, 3\\]"),
])
def test_feed_and_fetch_columns_are_dense_and_unique(case, data, message):
    """Paddle Inference 3.3.1 itself: feed col -3 fails (vector::_M_default_append); feed col 5 of one feed,
    a fetch col gap and a duplicated fetch col run (the duplicate silently drops an output). Paddle's
    save_inference_model writes 0..n-1, so anything else is a damaged or edited file."""
    load_model(model_bytes=two_outputs())
    refused(message, model_bytes=data())


@pytest.mark.parametrize("declared, stored, outcome", [
    ([512, 10], (512, 10), None),
    ([1], (), None),  # a 0-d tensor stored for a [1] var: Paddle runs it, quantized models have it
    ([], (1,), None),
    ([-5, 10], (512, 10), "a size must be -1"),  # the probe: used to load, -5 read as "unknown"
    ([-1, 10], (512, 10), "a persistable var's dims are its stored tensor's"),
    ([256, 10], (512, 10), "stored dims \\[512, 10\\] disagree"),
    ([5120], (512, 10), "stored dims \\[512, 10\\] disagree"),
])
def test_parameter_dims_match_the_stored_tensor(declared, stored, outcome):
    """Paddle Inference runs every one of these (it takes the stored dims and never compares); a VarDesc that
    disagrees with its tensor is a damaged file or a params file of another model, which this loader says."""
    blocks = [{"vars": [{"name": "x", "shape": [-1, 10]}, {"name": "w", "shape": declared, "persistable": True},
                        {"name": "y", "shape": [-1, 10]}],
               "ops": [{"type": "elementwise_add", "inputs": {"X": ["x"], "Y": ["w"]}, "outputs": {"Out": ["y"]},
                        "attrs": {"axis": -1}}]}]
    params = zoo.write_combined_params(None, {"w": np.ones(stored, np.float32)})
    if outcome is None:
        assert load_model(model_bytes=program_bytes(blocks), params_bytes=params).param("w").shape == stored
    else:
        assert "'w'" in refused(outcome, model_bytes=program_bytes(blocks), params_bytes=params)


def test_a_persistable_var_an_op_writes_first_is_a_run_time_value(tmp_path, paddle_reference):
    """Legacy dy2static (FLAGS_enable_pir_api=0) keeps an eager tensor a model holds between calls as a persistable
    var with unknown dims that an op assigns from the traced value (ppdet's SOLOv2 head: `eager_tmp_4 =
    assign(relu_24.tmp_0)`, [-1, 256, -1, -1]); the params file holds the tensor it had at export. Paddle loads
    that tensor and the assign overwrites it before its first reader: the model's value is the op's."""
    blocks = [{"vars": [{"name": "x", "shape": [-1, 4]}, {"name": "t", "shape": [-1, 4], "persistable": True},
                        {"name": "y", "shape": [-1, 4]}],
               "ops": [{"type": "assign", "inputs": {"X": ["x"]}, "outputs": {"Out": ["t"]}},
                       {"type": "scale", "inputs": {"X": ["t"]}, "outputs": {"Out": ["y"]},
                        "attrs": {"scale": 2.0, "bias": 1.0, "bias_after_scale": True}}]}]
    model, params = tmp_path / "m.pdmodel", tmp_path / "m.pdiparams"
    model.write_bytes(program_bytes(blocks))
    params.write_bytes(zoo.write_combined_params(None, {"t": np.full((1, 4), 100.0, np.float32)}))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = paddle_reference(str(model), {"x": x}, str(params))[0]
    np.testing.assert_array_equal(want, 2 * x + 1)  # the assign's value, not the stored tensor's

    graph = load_model(str(model), str(params))
    assert "t" not in graph.params
    config = nb.Config()
    config.set_model_file(str(model))
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)
    predictor.get_input_by_name("x").from_numpy(x)
    predictor.run()
    np.testing.assert_array_equal(predictor.get_output(0).numpy(), want)
    # Read before any op writes it, an unknown-dims persistable var is still a damaged parameter.
    blocks[0]["ops"].reverse()
    blocks[0]["ops"][0]["inputs"] = {"X": ["t"]}
    refused("a persistable var's dims are its stored tensor's", model_bytes=program_bytes(blocks),
            params_bytes=params.read_bytes())


def test_pir_parameter_with_unknown_dims_is_refused():
    params = encode_lod_tensor(np.ones((1, 4), np.float32))
    load_model(model_bytes=json.dumps(pir_doc(param="w")).encode(), params_bytes=params)
    refused("parameter 'w' declares dims \\[-1, 4\\]",
            model_bytes=json.dumps(pir_doc(param="w", dims=(-1, 4))).encode(), params_bytes=params)


def test_pool2d_ksize_zero_is_refused():
    blocks = [{"vars": [X4, {"name": "y", "shape": []}],
               "ops": [{"type": "pool2d", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]},
                        "attrs": {"pooling_type": "max", "ksize": [0, 0], "strides": [1, 1], "paddings": [0, 0]}}]}]
    refused("attribute 'ksize' is \\[0, 0\\]; every window size must be > 0", model_bytes=program_bytes(blocks))


# -- 5. names and the partition config ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a\nb", "a\rb", "a\0b", "a\tb", "a\x85b", "a\u2028b"])
def test_control_characters_in_names_are_refused(name):
    """Paddle runs a program whose var is called "a\\nb" (checked); this loader refuses it: the partition
    config, the dump and the error messages are line-oriented, and Paddle Lite's format has no escaping."""
    text = refused("contains the control character", model_bytes=program_bytes(relu_program(y=name),
                                                                                fetches=(name,)))
    assert "\n" not in text and "\0" not in text  # the message itself shows the name escaped


@pytest.mark.parametrize("name", ["a:b", "a,b", "a-b", "a#b", " a"])
def test_names_the_config_syntax_cannot_hold_load_and_get_a_comment_in_the_dump(name):
    graph = load_model(model_bytes=program_bytes(relu_program(y=name), fetches=(name,)))
    lines = operator_lines(graph)
    relu_line, fetch_line = lines[1:]
    assert relu_line.startswith("# 'relu' op #1: var ") and repr(name) in relu_line
    assert fetch_line.startswith("# 'fetch' op #2: var ") and repr(name) in fetch_line
    assert "\n" not in "".join(lines)
    config = PartitionConfig.from_text("\n".join(lines))
    assert [spec.op_type for spec in config.specs] == ["feed"]  # the comments name nothing


def test_dump_lines_read_back_as_the_same_ops():
    blocks = relu_program(extra_vars=[{"name": "save_infer_model/scale_0.tmp_1", "shape": [2, 3]}],
                          ops=[{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]}},
                               {"type": "scale", "inputs": {"X": ["y"]},
                                "outputs": {"Out": ["save_infer_model/scale_0.tmp_1"]},
                                "attrs": {"scale": 1.0, "bias": 0.0, "bias_after_scale": True}}])
    graph = load_model(model_bytes=program_bytes(blocks, fetches=("save_infer_model/scale_0.tmp_1",)))
    lines = operator_lines(graph)
    assert not any(line.startswith("#") for line in lines)
    config = PartitionConfig.from_text("\n".join(lines))
    for spec, op in zip(config.specs, graph.ops()):
        assert spec.matches(op)


def test_partition_config_that_is_not_utf8(tmp_path):
    config = nb.Config()
    with pytest.raises(ConfigError, match="not UTF-8"):
        config.set_nnadapter_subgraph_partition_config_buffer(b"\xbb\x85")
    path = tmp_path / "partition.txt"
    path.write_bytes(b"conv2d:\xbb\x85:out\n")
    with pytest.raises(ConfigError, match="not UTF-8") as info:
        PartitionConfig.from_path(str(path))
    assert str(path) in str(info.value)
