"""Debug dump: Paddle Lite's exact text (facts §4.6) for a hand-built graph, colours, the GLOG_v switch,
DOT files and rendering through graphviz."""
from __future__ import annotations

import io
import os
import shutil
import stat
import warnings

import pytest

from nnadapter_bridge.errors import ConfigError
from partition.config import PartitionConfig
from partition.detector import detect_subgraphs
from partition.dump import (
    SUBGRAPH_COLORS,
    dot_text,
    dump_text,
    print_dump_if_verbose,
    render,
    write_dot,
)
from partition.picture import GraphvizNotFoundError
from support.partition_programs import chain_ops, real_program


def small_program():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("conv2d", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["c"]}),
        ("relu", ["c"], ["r"]),
        ("conv2d", {"Input": ["r"], "Filter": ["w2"]}, {"Output": ["d"]}),
        ("fetch", ["d"], ["fetch"]),
    ]), params=["w", "w2"])
    return program, detect_subgraphs(program, lambda o: o.type == "conv2d")


# Written by hand from facts §4.6: ids in creation order (op, then its new inputs, then its new outputs),
# nodes sorted by name, edges in creation order, a space after "subgraph operators:", a final empty line.
EXPECTED_DUMP = """\
subgraph clusters: 2
digraph G {
   node_5[label="c"]
   node_3[label="conv2d_0_op_subgraph_0" shape="box" style="filled" color="black" fillcolor="red"]
   node_8[label="conv2d_1_op_subgraph_1" shape="box" style="filled" color="black" fillcolor="green"]
   node_10[label="d"]
   node_1[label="feed"]
   node_0[label="feed_0_op" shape="box" style="filled" color="black" fillcolor="white"]
   node_12[label="fetch"]
   node_11[label="fetch_0_op" shape="box" style="filled" color="black" fillcolor="white"]
   node_7[label="r"]
   node_6[label="relu_0_op" shape="box" style="filled" color="black" fillcolor="white"]
   node_4[label="w"]
   node_9[label="w2"]
   node_2[label="x"]
   node_1->node_0
   node_0->node_2
   node_2->node_3
   node_4->node_3
   node_3->node_5
   node_5->node_6
   node_6->node_7
   node_7->node_8
   node_9->node_8
   node_8->node_10
   node_10->node_11
   node_11->node_12
} // end G
subgraph operators: 
feed:feed:x
conv2d:x,w:c
relu:c:r
conv2d:r,w2:d
fetch:d:fetch

"""


def test_dump_text_is_paddle_lites_format():
    program, result = small_program()
    assert dump_text(program, result) == EXPECTED_DUMP


def test_dump_is_the_same_every_time():
    program, result = small_program()
    assert dump_text(program, result) == dump_text(program, result)


def test_operator_lines_are_specs_matching_their_own_op():
    program, result = small_program()
    lines = dump_text(program, result).split("subgraph operators: \n", 1)[1].splitlines()
    ops = program.ops()
    assert lines[-1] == ""  # the dump's closing empty line
    lines = lines[:-1]
    assert len(lines) == len(ops)
    for line, op in zip(lines, ops):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert ("op", op.index) in PartitionConfig.from_text(line).match(ops)


def test_colour_table_and_wraparound():
    assert len(SUBGRAPH_COLORS) == 48
    assert (SUBGRAPH_COLORS[0], SUBGRAPH_COLORS[3], SUBGRAPH_COLORS[34], SUBGRAPH_COLORS[47]) == (
        "red", "bisque3", "skyblue3", "salmon2")
    specs = [("feed", ["feed"], ["v0"])]
    for i in range(50):
        specs += [("relu", [f"v{i}"], [f"r{i}"]), ("host_op", [f"r{i}"], [f"v{i + 1}"])]
    program = real_program(chain_ops(specs))
    result = detect_subgraphs(program, lambda o: o.type == "relu")
    text = dot_text(program, result)
    assert 'label="relu_47_op_subgraph_47" shape="box" style="filled" color="black" fillcolor="salmon2"]' in text
    assert 'label="relu_48_op_subgraph_48" shape="box" style="filled" color="black" fillcolor="red"]' in text
    assert 'label="relu_49_op_subgraph_49" shape="box" style="filled" color="black" fillcolor="green"]' in text
    assert 'label="host_op_49_op" shape="box" style="filled" color="black" fillcolor="white"]' in text


@pytest.mark.parametrize("level, printed", [("5", True), ("9", True), ("4", False), ("", False), ("x", False)])
def test_print_dump_if_verbose_follows_glog_v(level, printed):
    program, result = small_program()
    out = io.StringIO()
    assert print_dump_if_verbose(program, result, environ={"GLOG_v": level}, stream=out) is printed
    assert out.getvalue() == (EXPECTED_DUMP if printed else "")


def test_print_dump_if_verbose_writes_to_stdout(capsys, monkeypatch):
    program, result = small_program()
    monkeypatch.setenv("GLOG_v", "5")
    print_dump_if_verbose(program, result)
    assert capsys.readouterr().out == EXPECTED_DUMP


def test_write_dot(tmp_path):
    program, result = small_program()
    path = tmp_path / "g.dot"
    write_dot(program, result, path)
    dot = EXPECTED_DUMP.split("\n", 1)[1].split("subgraph operators:", 1)[0]
    assert path.read_text() == dot


def test_render_without_graphviz_says_how_to_install(monkeypatch, tmp_path):
    program, result = small_program()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizNotFoundError, match="install graphviz: apt-get install graphviz"):
        render(program, result, tmp_path / "g.svg")
    assert issubclass(GraphvizNotFoundError, ConfigError)


def test_render_rejects_unknown_format(tmp_path):
    program, result = small_program()
    with pytest.raises(ConfigError, match="choose 'svg' or 'png'"):
        render(program, result, tmp_path / "g.pdf", fmt="pdf")


def fake_dot(directory, body):
    """A stand-in `dot` on PATH: a shell script, so these tests run where graphviz is not installed."""
    script = directory / "dot"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(directory)


def test_render_measures_then_pipes_the_dot_text_to_dot(monkeypatch, tmp_path):
    program, result = small_program()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Records its arguments; without -o it answers an SVG of 100 x 50 pt (the size check), with -o it copies
    # stdin to the file.
    script_dir = fake_dot(bin_dir, 'echo "$@" >> "$0.args"\n'
                                   'if [ "$2" = "-o" ]; then cat > "$3"; else cat > /dev/null; '
                                   'echo \'<svg width="100pt" height="50pt" viewBox="0 0 100 50">\'; fi\n')
    monkeypatch.setenv("PATH", script_dir + os.pathsep + os.environ["PATH"])
    out = tmp_path / "g.png"
    render(program, result, out, fmt="png")
    assert (bin_dir / "dot.args").read_text().splitlines() == ["-Tsvg", f"-Tpng -o {out}"]
    assert out.read_text() == dot_text(program, result)


def test_render_reports_dot_failure(monkeypatch, tmp_path):
    program, result = small_program()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", fake_dot(bin_dir, 'echo "syntax error in line 3" >&2\nexit 2\n') + os.pathsep
                       + os.environ["PATH"])
    with pytest.raises(ConfigError, match=r"exit 2\): syntax error in line 3"):
        render(program, result, tmp_path / "g.svg")


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz is not installed on this machine")
def test_render_svg_with_real_graphviz(tmp_path):
    program, result = small_program()
    out = tmp_path / "g.svg"
    render(program, result, out)
    assert "<svg" in out.read_text()
