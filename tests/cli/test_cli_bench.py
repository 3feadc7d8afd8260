"""`nnadapter-bridge bench`: every measure present and positive, the cold start compiles, the warm start in a
fresh process restores everything from the cache, --threads and --cache-dir behave, bad values are errors."""
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


def test_bench_json_with_a_fresh_process(yolo, capsys, tmp_path):
    cache = tmp_path / "cache"
    assert main(["bench", yolo, "--partition-config", YOLO_CONFIG, "--runs", "3", "--warmup", "1",
                 "--threads", "1", "--cache-dir", str(cache), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["subgraphs"] == 2 and data["host_ops"] == 2
    assert data["context_properties"] == "BUILTIN_DEVICE_NUM_THREADS=1;"
    assert data["load_seconds"] > 0
    cold, warm, steady = data["cold"], data["warm"], data["steady"]
    assert cold["builds"] == 2
    assert cold["total_seconds"] == pytest.approx(cold["create_seconds"] + cold["first_run_seconds"])
    assert (warm["builds"], warm["cache_hits"]) == (0, 2)
    assert warm["process_seconds"] > warm["total_seconds"] > 0
    assert (steady["runs"], steady["warmup"]) == (3, 1)
    assert 0 < steady["min_seconds"] <= steady["median_seconds"] <= steady["p90_seconds"]
    assert len([f for f in os.listdir(cache) if f.endswith(".nnc")]) == 2  # kept: the user named it


def test_bench_table_without_fresh_process(yolo, capsys):
    assert main(["bench", yolo, "--runs", "2", "--warmup", "0", "--no-fresh-process"]) == 0
    out = capsys.readouterr().out
    table = out.split("\n\n")[1]  # then the profile: where a run's time goes
    measures = [line.split("  ")[0] for line in table.splitlines()[2:]]
    assert measures == ["load", "cold start", "steady median", "steady p90"]
    assert "1 program(s) compiled" in out


@pytest.mark.parametrize("argv, message", [
    (["--runs", "0"], "--runs 0: must be at least 1"),
    (["--threads", "0"], "--threads 0: must be at least 1"),
    (["--input-shape", "image:1,3"], "input 'image' expects float32"),
    (["--seed", "-1"], "--seed -1: must be 0 or more"),
    (["--cache-dir", "/proc/nnadapter-bridge-test"], "--cache-dir /proc/nnadapter-bridge-test: cannot create the "
                                                     "directory: "),
    (["--dynamic-shape", "image:-1,3,64,64"], "the first shape [-1, 3, 64, 64] has -1 axes"),
])
def test_errors_are_one_line(yolo, capsys, argv, message):
    assert main(["bench", yolo, "--no-fresh-process", "--runs", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_cache_dir_must_be_empty(yolo, capsys, tmp_path):
    (tmp_path / "old.nnc").write_bytes(b"x")
    assert main(["bench", yolo, "--cache-dir", str(tmp_path)]) == 2
    assert "not empty; the cold start needs an empty cache dir" in capsys.readouterr().err


def test_dynamic_shape_reaches_the_warm_start(yolo, capsys, tmp_path):
    cache = tmp_path / "cache"
    dynamic = ["--dynamic-shape", "image:1,3,64,64;2,3,64,64"]
    assert main(["bench", yolo, *dynamic, "--input-shape", "image:2,3,64,64", "--runs", "1", "--warmup", "0",
                 "--cache-dir", str(cache), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cold"]["builds"] == 1
    assert (data["warm"]["builds"], data["warm"]["cache_hits"]) == (0, 1)
    # The program is the one convert makes with the same dynamic shape info.
    assert main(["convert", yolo, "--cache-dir", str(cache), *dynamic, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["restored"] == 1


def test_bench_reports_accuracy_against_paddle_and_the_float_model(quant_model, zoo_model, capsys):
    from support.quant_fixtures import CHANNEL

    quantized = quant_model("mobilenet_v1", True, CHANNEL)
    float_model = zoo_model("mobilenet_v1")
    assert main(["bench", quantized, "--device", "intel_openvino", "--runs", "2", "--warmup", "0",
                 "--no-fresh-process", "--compare-paddle", "--compare-float", float_model, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (name, paddle), = data["accuracy"]["paddle"].items()
    against_float = data["accuracy"]["float"][name]
    assert paddle["passed"] and paddle["tolerance"] == "reduced precision"
    assert paddle["cosine"] > 0.999 and 0.9 < against_float["cosine"] < 1.0
    assert against_float["max_abs_error"] > paddle["max_abs_error"] > 0  # int8 rounding, and the quantization


def test_bench_float_params_needs_compare_float(yolo, capsys):
    assert main(["bench", yolo, "--float-params", "x.pdiparams"]) == 2
    assert "--float-params: give it with --compare-float" in capsys.readouterr().err
