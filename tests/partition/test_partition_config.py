"""Partition config: parsing (every spec form, separators, lenient whitespace), matching, the four
sources and their precedence, and the warnings for specs that match nothing."""
from __future__ import annotations

import pathlib
import warnings

import pytest

from nnadapter_bridge.errors import ConfigError
from partition.config import (
    PartitionConfig,
    PartitionConfigWarning,
    PartitionSpec,
    resolve_partition_config,
)
from support.partition_programs import op


def specs_of(text):
    return [(s.op_type, s.inputs, s.outputs, s.line) for s in PartitionConfig.from_text(text).specs]


# -- parsing ----------------------------------------------------------------------------------------------

def test_every_spec_form():
    text = "softmax\nconv2d:x,w\nconv2d::y\nconv2d:x:y,z\n"
    assert specs_of(text) == [
        ("softmax", (), (), 1),
        ("conv2d", ("x", "w"), (), 2),
        ("conv2d", (), ("y",), 3),
        ("conv2d", ("x",), ("y", "z"), 4),
    ]


def test_hyphen_separates_specs_on_one_line():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the empty trailing fields of `softmax:a::` are not "extra"
        assert specs_of("relu-softmax:a::\npool2d") == [
            ("relu", (), (), 1),
            ("softmax", ("a",), (), 1),
            ("pool2d", (), (), 2),
        ]


def test_crlf_and_cr_line_ends():
    assert specs_of("relu:a\r\nsoftmax::b\r\nscale\rsigmoid") == [
        ("relu", ("a",), (), 1),
        ("softmax", (), ("b",), 2),
        ("scale", (), (), 3),
        ("sigmoid", (), (), 4),
    ]


def test_comments_blank_lines_and_whitespace():
    text = ("# forced to the host\n"
            "\n"
            "   \t\n"
            "  conv2d : x , w : y   # the first conv\n"
            "relu - softmax  \n"
            "#relu\n")
    assert specs_of(text) == [
        ("conv2d", ("x", "w"), ("y",), 4),
        ("relu", (), (), 5),
        ("softmax", (), (), 5),
    ]


def test_empty_names_and_repeated_names_are_dropped():
    assert specs_of("concat:a,,b,a,:") == [("concat", ("a", "b"), (), 1)]


def test_byte_order_mark_and_bytes_input():
    config = PartitionConfig.from_text("\ufeffsoftmax\n".encode("utf-8"))
    assert [s.op_type for s in config.specs] == ["softmax"]


def test_non_utf8_bytes_raise_config_error():
    with pytest.raises(ConfigError, match="not UTF-8"):
        PartitionConfig.from_text(b"soft\xffmax")


def test_extra_fields_warn_and_are_ignored():
    with pytest.warns(PartitionConfigWarning, match="<buffer>:2: 'relu:a:b:c' has 4"):
        assert specs_of("softmax\nrelu:a:b:c") == [("softmax", (), (), 1), ("relu", ("a",), ("b",), 2)]


def test_spec_without_op_type_warns_and_is_skipped():
    with pytest.warns(PartitionConfigWarning, match="<buffer>:1: ':x' has no op type"):
        assert specs_of(":x") == []


def test_from_path_reads_file_and_names_source(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(b"softmax\r\nrelu:a\r\n")
    config = PartitionConfig.from_path(path)
    assert config.source == str(path)
    assert [(s.op_type, s.inputs) for s in config.specs] == [("softmax", ()), ("relu", ("a",))]


def test_from_path_missing_file_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the partition config"):
        PartitionConfig.from_path(tmp_path / "absent.txt")


# -- matching ---------------------------------------------------------------------------------------------

OPS = [
    op(0, "feed", ["feed"], ["x"]),
    op(1, "conv2d", {"Input": ["x"], "Filter": ["w1"]}, {"Output": ["c1"]}),
    op(2, "conv2d", {"Input": ["c1"], "Filter": ["w2"]}, {"Output": ["c2"]}),
    op(3, "relu", ["c2"], ["r"]),
    op(4, "softmax", ["r"], ["s"]),
    op(5, "split", ["s"], {"Out": ["p", "q"]}),
    op(6, "fetch", ["p"], ["fetch"]),
]


def match(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PartitionConfigWarning)
        return PartitionConfig.from_text(text).match(OPS)


def test_bare_op_type_matches_every_op_of_that_type():
    assert match("conv2d") == {("op", 1), ("op", 2)}


def test_inputs_are_a_subset_test_and_weights_count():
    assert match("conv2d:w2") == {("op", 2)}
    assert match("conv2d:w1,x") == {("op", 1)}  # order does not matter
    assert match("conv2d:x,w2") == set()  # both names must belong to one op


def test_outputs_only_and_both():
    assert match("split::q") == {("op", 5)}
    assert match("split::q,p") == {("op", 5)}
    assert match("split:s:p") == {("op", 5)}
    assert match("split:r:p") == set()


def test_listing_more_names_than_the_op_has_does_not_match():
    assert match("relu:c2,c1") == set()


def test_several_specs_union_and_crlf_lines_all_apply():
    # Paddle Lite keeps "\r" in every name but the last line's, so only the last spec worked (GH#9607).
    assert match("conv2d::c1\r\nrelu:c2\r\nsoftmax::s\r\n") == {("op", 1), ("op", 3), ("op", 4)}


def test_match_specs_reports_each_spec():
    config = PartitionConfig.from_text("conv2d\nrelu:nothing")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # match_specs itself never warns
        results = config.match_specs(OPS)
    assert [(r.spec.op_type, sorted(r.op_keys)) for r in results] == [
        ("conv2d", [("op", 1), ("op", 2)]),
        ("relu", []),
    ]


def test_spec_str_is_config_syntax():
    assert str(PartitionSpec("conv2d", ("x", "w"), ("y",), 1, "")) == "conv2d:x,w:y"


# -- warnings for specs that match nothing ---------------------------------------------------------------

def test_typo_in_op_type_names_line_and_suggestion():
    config = PartitionConfig.from_text("conv2d\n# comment\nsofmax\n", source="force.txt")
    with pytest.warns(PartitionConfigWarning) as record:
        assert config.match(OPS) == {("op", 1), ("op", 2)}
    messages = [str(w.message) for w in record]
    assert len(messages) == 1
    assert messages[0].startswith("force.txt:3: 'sofmax' matches no op")
    assert "did you mean op type 'softmax'?" in messages[0]


def test_typo_in_var_name_names_line_and_suggestion():
    config = PartitionConfig.from_text("relu - conv2d:x:c11", source="force.txt")
    with pytest.warns(PartitionConfigWarning) as record:
        assert config.match(OPS) == {("op", 3)}
    messages = [str(w.message) for w in record]
    assert len(messages) == 1
    assert messages[0].startswith("force.txt:1: 'conv2d:x:c11' matches no op")
    assert "no conv2d op has output 'c11'" in messages[0]
    assert "did you mean var name 'c1'?" in messages[0]


def test_input_given_where_an_output_belongs_is_explained():
    config = PartitionConfig.from_text("relu:r")
    with pytest.warns(PartitionConfigWarning, match="'r' is an output of a relu op, not an input"):
        config.match(OPS)


def test_names_from_different_ops_are_explained():
    config = PartitionConfig.from_text("conv2d:x,w2")
    with pytest.warns(PartitionConfigWarning, match="no single one has all of"):
        config.match(OPS)


def test_no_warning_when_every_spec_matches_or_warn_is_off():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert PartitionConfig.from_text("conv2d:x\nsplit::q").match(OPS) == {("op", 1), ("op", 5)}
        assert PartitionConfig.from_text("nothing_like_it").match(OPS, warn=False) == set()


# -- sources and precedence -------------------------------------------------------------------------------

@pytest.fixture()
def sources(tmp_path):
    api_path = tmp_path / "api.txt"
    api_path.write_text("from_api_path\n")
    env_path = tmp_path / "env.txt"
    env_path.write_text("from_env_file\n")
    return api_path, env_path


def first_op_type(config):
    return config.specs[0].op_type


def test_api_buffer_beats_everything(sources):
    api_path, env_path = sources
    environ = {"SUBGRAPH_PARTITION_CONFIG_FILE": str(env_path), "SUBGRAPH_PARTITION_CONFIG_BUFFER": "from_env_buffer"}
    config = resolve_partition_config(buffer="from_api_buffer", path=api_path, environ=environ)
    assert first_op_type(config) == "from_api_buffer"
    assert config.source == "<api buffer>"


def test_api_path_beats_env(sources):
    api_path, env_path = sources
    environ = {"SUBGRAPH_PARTITION_CONFIG_FILE": str(env_path), "SUBGRAPH_PARTITION_CONFIG_BUFFER": "from_env_buffer"}
    config = resolve_partition_config(path=str(api_path), environ=environ)
    assert first_op_type(config) == "from_api_path"
    assert config.source == str(api_path)


def test_missing_api_path_warns_and_falls_through_to_env_file(sources, tmp_path):
    _, env_path = sources
    environ = {"SUBGRAPH_PARTITION_CONFIG_FILE": str(env_path), "SUBGRAPH_PARTITION_CONFIG_BUFFER": "from_env_buffer"}
    missing = tmp_path / "missing.txt"
    with pytest.warns(PartitionConfigWarning, match="missing.txt .*does not exist"):
        config = resolve_partition_config(path=str(missing), environ=environ)
    assert first_op_type(config) == "from_env_file"


def test_env_file_beats_env_buffer(sources):
    _, env_path = sources
    environ = {"SUBGRAPH_PARTITION_CONFIG_FILE": str(env_path), "SUBGRAPH_PARTITION_CONFIG_BUFFER": "from_env_buffer"}
    assert first_op_type(resolve_partition_config(environ=environ)) == "from_env_file"


def test_missing_env_file_warns_and_falls_through_to_env_buffer(tmp_path):
    environ = {"SUBGRAPH_PARTITION_CONFIG_FILE": str(tmp_path / "gone.txt"),
               "SUBGRAPH_PARTITION_CONFIG_BUFFER": "from_env_buffer"}
    with pytest.warns(PartitionConfigWarning, match="SUBGRAPH_PARTITION_CONFIG_FILE"):
        config = resolve_partition_config(environ=environ)
    assert first_op_type(config) == "from_env_buffer"


def test_env_buffer_alone():
    config = resolve_partition_config(environ={"SUBGRAPH_PARTITION_CONFIG_BUFFER": "relu\nsoftmax"})
    assert [s.op_type for s in config.specs] == ["relu", "softmax"]


def test_empty_values_count_as_unset():
    environ = {"SUBGRAPH_PARTITION_CONFIG_FILE": "", "SUBGRAPH_PARTITION_CONFIG_BUFFER": ""}
    assert resolve_partition_config(buffer="", path="", environ=environ) is None


def test_no_source_gives_none():
    assert resolve_partition_config(environ={}) is None


def test_example_configs_parse_and_match_their_ops():
    path = pathlib.Path(__file__).resolve().parents[2] / "configs" / "partition_force_host_example.txt"
    config = PartitionConfig.from_path(path)
    ops = [  # the tail of mobilenet_v1, the README's example model
        op(0, "feed", ["feed"], ["x"]),
        op(1, "pool2d", ["relu_26.tmp_0"], ["pool2d_0.tmp_0"]),
        op(2, "flatten_contiguous_range", ["pool2d_0.tmp_0"], ["flatten_0.tmp_0"]),
        op(3, "matmul_v2", {"X": ["flatten_0.tmp_0"], "Y": ["linear_0.w_0"]}, {"Out": ["linear_0.tmp_0"]}),
        op(4, "matmul_v2", {"X": ["linear_0.tmp_0"], "Y": ["other.w_0"]}, {"Out": ["other.tmp_0"]}),
        op(5, "fetch", ["other.tmp_0"], ["fetch"]),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config.match(ops) == {("op", 1), ("op", 3)}
