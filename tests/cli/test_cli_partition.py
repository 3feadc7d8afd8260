"""`nnadapter-bridge partition`: the summary (JSON and table), Paddle Lite's dump, DOT/graphviz output, and
one-line errors, on the yolo_detector zoo model with and without a config forcing its post-processing to
the host."""
from __future__ import annotations

import json
import os

import pytest

from nnadapter_bridge.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YOLO_CONFIG = os.path.join(ROOT, "configs", "partition_yolo_detector.txt")


@pytest.fixture(scope="module")
def yolo(zoo_model):
    return zoo_model("yolo_detector")


def partition_json(capsys, *argv):
    assert main(["partition", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_whole_model_is_one_subgraph_without_a_config(yolo, capsys):
    data = partition_json(capsys, yolo)
    assert data["num_subgraphs"] == 1 and data["num_host_ops"] == 0
    assert data["subgraphs"][0]["inputs"] == ["im_shape", "image"]
    assert {"yolo_box", "multiclass_nms3"} <= set(data["subgraphs"][0]["op_types"])
    assert {h["type"] for h in data["host_ops"]} == {"feed", "fetch"}


def test_config_forces_post_processing_to_the_host(yolo, capsys):
    data = partition_json(capsys, yolo, "--partition-config", YOLO_CONFIG)
    # yolo_box and multiclass_nms3 leave; transpose2 between them becomes a second subgraph.
    assert data["num_subgraphs"] == 2
    assert [s["num_ops"] for s in data["subgraphs"]] == [11, 1]
    assert data["subgraphs"][1]["op_types"] == {"transpose2": 1}
    assert data["subgraphs"][0]["outputs"] == ["conv2d_2.tmp_1"]
    host = {h["type"]: h for h in data["host_ops"] if h["type"] not in ("feed", "fetch")}
    assert set(host) == {"yolo_box", "multiclass_nms3"}
    for h in host.values():
        assert h["forced"] and h["host_kernel"]
        assert "forced to the host by the partition config" in h["reason"] and YOLO_CONFIG in h["reason"]
    assert data["ops_on_devices"] + data["num_host_ops"] + 4 == data["num_ops"]  # 2 feeds, 2 fetches


def test_min_subgraph_size_sends_small_clusters_back(yolo, capsys):
    data = partition_json(capsys, yolo, "--partition-config", YOLO_CONFIG, "--min-subgraph-size", "2")
    assert data["num_subgraphs"] == 1
    transpose = next(h for h in data["host_ops"] if h["type"] == "transpose2")
    assert not transpose["forced"] and "fewer than 2 ops" in transpose["reason"]


def test_table_lists_subgraphs_and_host_ops_with_reasons(yolo, capsys):
    assert main(["partition", yolo, "--partition-config", YOLO_CONFIG]) == 0
    out = capsys.readouterr().out
    assert "12 on devices in 2 subgraphs, 2 on the host" in out
    header = next(line for line in out.splitlines() if line.startswith("subgraph"))
    assert header.split() == ["subgraph", "device", "ops", "op", "types", "inputs", "outputs"]
    nms = next(line for line in out.splitlines() if " multiclass_nms3 " in line)
    assert "yes" in nms and "forced to the host" in nms


def test_dump_is_paddle_lite_format_and_its_lines_are_valid_specs(yolo, capsys, tmp_path):
    assert main(["partition", yolo, "--partition-config", YOLO_CONFIG, "--dump"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("subgraph clusters: 2\ndigraph G {\n")
    head, ops = out.split("} // end G\nsubgraph operators: \n")
    assert ops.endswith("\n\n")
    lines = ops.rstrip("\n").split("\n")
    assert lines[0] == "feed:feed:im_shape" and lines[-1] == "fetch:multiclass_nms3_0.tmp_2:fetch"
    assert 'fillcolor="red"' in head and 'fillcolor="green"' in head  # subgraphs 0 and 1
    # A dump line pasted into a config forces exactly that op to the host.
    relu = [line for line in lines if line.startswith("relu:")][1]
    config = tmp_path / "one.txt"
    config.write_text(relu + "\n")
    data = partition_json(capsys, yolo, "--partition-config", str(config))
    forced = [h for h in data["host_ops"] if h["forced"]]
    assert [h["spec"] for h in forced] == [relu]
    assert data["num_subgraphs"] == 2


def test_dump_in_json(yolo, capsys):
    data = partition_json(capsys, yolo, "--dump")
    assert data["dump"].startswith("subgraph clusters: 1\n")


def test_dot_file_is_the_readable_picture(yolo, capsys, tmp_path):
    dot = tmp_path / "g.dot"
    data = partition_json(capsys, yolo, "--partition-config", YOLO_CONFIG, "--dot", str(dot))
    assert data["files"] == [str(dot)]
    text = dot.read_text()
    assert text.startswith("digraph partition {") and "legend" in text
    assert "subgraph 0 on builtin_device\\n11 ops (#" in text and "subgraph 1 on builtin_device\\n1 op (#" in text
    assert "why: forced to the host by the partition config" in text
    assert "conv2d_0.w_0" not in text  # weights are not drawn


@pytest.mark.parametrize("make_path, reason", [
    (lambda d: d / "missing" / "g.dot", "No such file or directory"),
    (lambda d: d, "Is a directory"),
])
def test_dot_file_that_cannot_be_written_is_one_line(yolo, capsys, tmp_path, make_path, reason):
    path = make_path(tmp_path)
    assert main(["partition", yolo, "--dot", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"nnadapter-bridge partition: error: --dot {path}: {reason}\n"


def test_svg_without_graphviz_is_one_line_with_a_hint(yolo, capsys, tmp_path, monkeypatch):
    import partition.picture

    monkeypatch.setattr(partition.picture.shutil, "which", lambda name: None)
    assert main(["partition", yolo, "--svg", str(tmp_path / "g.svg")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "install graphviz" in err


@pytest.mark.skipif(not __import__("shutil").which("dot"), reason="graphviz's dot is not installed")
def test_svg_with_graphviz(yolo, capsys, tmp_path):
    svg = tmp_path / "g.svg"
    assert main(["partition", yolo, "--svg", str(svg)]) == 0
    assert "<svg" in svg.read_text()


@pytest.mark.parametrize("argv, message", [
    (["--device", "no_such_device"], "no NNAdapter device named 'no_such_device'"),
    (["--partition-config", "/no/such/config.txt"], "--partition-config /no/such/config.txt: no such file"),
    (["--partition-config", ROOT], f"--partition-config {ROOT}: is a directory, not a file"),
    (["--min-subgraph-size", "0"], "--min-subgraph-size 0: must be at least 1"),
])
def test_errors_are_one_line(yolo, capsys, argv, message):
    assert main(["partition", yolo, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("nnadapter-bridge partition: error: ")


def test_missing_model_is_one_line(capsys, tmp_path):
    assert main(["partition", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"nnadapter-bridge partition: error: {tmp_path / 'nope'}: no such model file " \
                                      "or directory\n"


def test_a_spec_matching_nothing_is_a_one_line_warning(yolo, capsys, tmp_path):
    config = tmp_path / "typo.txt"
    config.write_text("yolo_boxx\n")
    message = f"{config}:1: 'yolo_boxx' matches no op: no op has type 'yolo_boxx'; did you mean op type 'yolo_box'?"
    assert main(["partition", yolo, "--partition-config", str(config)]) == 0
    assert capsys.readouterr().err == f"nnadapter-bridge partition: warning: {message}\n"
    # under --json the warning is in the document, so a script sees it, and stderr stays empty
    assert main(["partition", yolo, "--partition-config", str(config), "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert err == "" and data["num_subgraphs"] == 1
    assert [w["message"] for w in data["warnings"]] == [message]
