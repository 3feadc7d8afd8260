"""`nnadapter-bridge opt` (writes NAME.nb, optionally its .nnc programs beside it) and `inspect` / `run` on a `.nb`."""
from __future__ import annotations

import json
import os

import pytest

from nnadapter_bridge.cli import main
from nnadapter_bridge.loader import load_model
from support import paddlelite_env


def _opt_nb(name: str) -> str:
    try:
        return paddlelite_env.ensure_zoo_nb(name)
    except paddlelite_env.SideEnvError as exc:  # never a silent skip
        pytest.fail(str(exc))


def test_inspect_reports_the_nb_header(capsys):
    path = _opt_nb("yolo_detector")
    assert main(["inspect", path, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    with open(path, "rb") as f:
        head = f.read(18)
    assert (report["format"], report["layout"]) == ("naive_buffer", "naive_buffer")
    assert report["meta_version"] == report["format_version"] == int.from_bytes(head[:2], "little") == 2
    assert report["opt_version"] == head[2:].split(b"\0")[0].decode() == "v2.13-rc"
    assert [i["name"] for i in report["inputs"]] == ["image", "im_shape"]
    assert report["op_types"]["yolo_box"] == 1 and report["op_types"]["multiclass_nms3"] == 1
    assert main(["inspect", path]) == 0
    assert "naive_buffer (Paddle Lite optimized model, meta_version 2, written by opt v2.13-rc)" in \
        capsys.readouterr().out


def test_opt_writes_nb_and_its_nnc_programs(zoo_model, tmp_path, capsys):
    source = zoo_model("mobilenet_v1")
    out = tmp_path / "deploy" / "m1"
    assert main(["opt", source, "--optimize-out", str(out), "--with-nnc", "builtin_device", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nb_path = str(out) + ".nb"
    assert report["optimize_out"] == nb_path and os.path.getsize(nb_path) == report["bytes"]
    graph, written = load_model(source), load_model(nb_path)
    assert [op.type for op in written.blocks[0].ops] == [op.type for op in graph.blocks[0].ops]
    assert report["num_params"] == len(graph.params) == len(written.params)
    programs = report["nnc"]["programs"]
    assert programs and all(p["file"] and os.path.dirname(p["file"]) == str(tmp_path / "deploy") for p in programs)
    # the directory is a deployment: `run` with it as the cache restores the programs instead of compiling
    assert main(["run", nb_path, "--device", "builtin_device", "--cache-dir", str(tmp_path / "deploy"),
                 "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert "restored" in json.dumps(run) and "compiled" not in json.dumps(run.get("programs", run))


def test_opt_refuses_targets_it_cannot_write(zoo_model, tmp_path, capsys):
    code = main(["opt", zoo_model("mobilenet_v1"), "--optimize-out", str(tmp_path / "m"), "--valid-targets",
                 "x86,opencl"])
    assert code != 0
    assert "opencl not supported" in capsys.readouterr().err
    assert not (tmp_path / "m.nb").exists()


def test_every_command_takes_a_nb(capsys):
    path = _opt_nb("mobilenet_v1")
    assert main(["partition", path, "--device", "builtin_device"]) == 0
    assert "subgraph" in capsys.readouterr().out
    assert main(["run", path, "--device", "builtin_device", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "[1, 1000]" in json.dumps(report["outputs"]).replace("\n", "")
