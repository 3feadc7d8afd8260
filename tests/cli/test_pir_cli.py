"""The CLI on a Paddle 3 (PIR `.json`) model: `inspect`, `partition` (with a config, and with a `--dump` line
pasted back as a config: PIR value names are what users write there), `convert` (compile, then restore from
the cache), `run --compare-paddle` (Paddle Inference reading the same `.json`) and `bench`. The model is the
yolo_detector zoo model exported the Paddle 3 default way, so every answer can be set beside the legacy
export's (tests/test_cli_*.py)."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from nnadapter_bridge.cli import main
from support.tolerances import assert_model_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YOLO_CONFIG = os.path.join(ROOT, "configs", "partition_yolo_detector.txt")
TOKEN = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def yolo_pir(pir_model):
    return pir_model("yolo_detector")


@pytest.fixture
def feeds(tmp_path):
    image = np.random.default_rng(11).standard_normal((1, 3, 64, 64)).astype(np.float32)
    im_shape = np.array([[64, 64]], dtype=np.int32)
    np.save(tmp_path / "image.npy", image)
    np.save(tmp_path / "im_shape.npy", im_shape)
    return {"image": image, "im_shape": im_shape}, ["--input", f"image={tmp_path / 'image.npy'}",
                                                    "--input", f"im_shape={tmp_path / 'im_shape.npy'}"]


def cli_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_inspect_reports_the_pir_format_and_version(yolo_pir, capsys):
    data = cli_json(capsys, "inspect", yolo_pir)
    assert data["format"] == "pir" and data["format_version"] == 4  # what paddle 3.3.1 writes
    assert data["inputs"] and {"yolo_box", "multiclass_nms3"} <= set(data["op_types"])


def test_partition_with_the_config_matches_the_legacy_export(yolo_pir, zoo_model, capsys):
    pir = cli_json(capsys, "partition", yolo_pir, "--partition-config", YOLO_CONFIG)
    legacy = cli_json(capsys, "partition", zoo_model("yolo_detector"), "--partition-config", YOLO_CONFIG)
    assert pir["num_subgraphs"] == legacy["num_subgraphs"] == 2
    # The same ops but one: the legacy export writes the head conv's bias as reshape2 + elementwise_add, which
    # the PIR reader reads as Paddle Lite's conv + elementwise_add(axis=1) (tests/loader/test_pir_zoo.py says why).
    legacy_types = [{t: n for t, n in s["op_types"].items() if t != "reshape2"} for s in legacy["subgraphs"]]
    assert [s["op_types"] for s in pir["subgraphs"]] == legacy_types
    assert legacy["subgraphs"][0]["op_types"]["reshape2"] == 1
    host = {h["type"] for h in pir["host_ops"] if h["type"] not in ("feed", "fetch")}
    assert host == {"yolo_box", "multiclass_nms3"}
    assert all(h["forced"] for h in pir["host_ops"] if h["type"] in host)


def test_a_dump_line_of_a_pir_model_is_a_valid_config_line(yolo_pir, capsys, tmp_path):
    assert main(["partition", yolo_pir, "--dump"]) == 0
    out = capsys.readouterr().out
    lines = out.split("subgraph operators: \n")[1].rstrip("\n").split("\n")
    relu = [line for line in lines if line.startswith("relu:")][1]
    config = tmp_path / "one.txt"
    config.write_text(relu + "\n")
    data = cli_json(capsys, "partition", yolo_pir, "--partition-config", str(config))
    assert [h["spec"] for h in data["host_ops"] if h["forced"]] == [relu]
    assert data["num_subgraphs"] == 2


def test_convert_compiles_then_restores(yolo_pir, capsys, tmp_path):
    cache = tmp_path / "cache"
    first = cli_json(capsys, "convert", yolo_pir, "--cache-dir", str(cache), "--partition-config", YOLO_CONFIG)
    assert (first["num_subgraphs"], first["compiled"], first["restored"]) == (2, 2, 0)
    for p in first["programs"]:
        assert TOKEN.match(p["token"]) and os.path.getsize(p["file"]) == p["bytes"] > 0
    second = cli_json(capsys, "convert", yolo_pir, "--cache-dir", str(cache), "--partition-config", YOLO_CONFIG)
    assert (second["compiled"], second["restored"]) == (0, 2)
    assert [p["token"] for p in second["programs"]] == [p["token"] for p in first["programs"]]


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_run_compare_paddle_passes(yolo_pir, feeds, device, capsys, tmp_path, paddle_reference):
    arrays, inputs = feeds
    out_dir = tmp_path / "out"
    data = cli_json(capsys, "run", yolo_pir, *inputs, "--device", device, "--partition-config", YOLO_CONFIG,
                    "--compare-paddle", "--output-dir", str(out_dir))
    assert data["passed"] is True and data["compare_paddle"]
    assert all(c["passed"] for c in data["compare_paddle"].values())
    # Check the saved outputs against Paddle Inference ourselves, in fetch order.
    want = paddle_reference(yolo_pir, arrays)
    names = list(data["outputs"])
    assert len(names) == len(want)
    for name, w in zip(names, want):
        assert_model_close(np.load(out_dir / f"{name}.npy"), w, what=f"{name} on {device}")


def test_bench_runs_on_a_pir_model(yolo_pir, capsys):
    data = cli_json(capsys, "bench", yolo_pir, "--partition-config", YOLO_CONFIG, "--runs", "2", "--warmup", "0",
                    "--no-fresh-process")
    assert data["subgraphs"] == 2 and data["host_ops"] == 2
    assert data["load_seconds"] > 0 and data["steady"]["runs"] == 2
