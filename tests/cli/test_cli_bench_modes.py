"""`bench` as benchmark_app users expect (p99, -t SECONDS, --requests N throughput in FPS, where a run's time goes)
and `run --top-k K` for classifiers."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from nnadapter_bridge.cli import main
from nnadapter_bridge.cli.cmd_run import top_k
from support.predictor_programs import add_relu_scale_model


@pytest.fixture(scope="module")
def with_host_op(tmp_path_factory):
    """2 * relu(x + w) + 0.5 on builtin_device, then i0, which only a host kernel runs."""
    return add_relu_scale_model(tmp_path_factory.mktemp("m"), extra_ops=["i0"])


def bench(capsys, *argv) -> dict:
    assert main(["bench", *argv, "--no-fresh-process", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_throughput_latency_and_where_the_time_goes(with_host_op, capsys):
    data = bench(capsys, with_host_op, "--runs", "6", "--requests", "2", "--profile-runs", "3")
    steady, rate, profile = data["steady"], data["throughput"], data["profile"]
    assert steady["runs"] == 6 and steady["min_seconds"] <= steady["median_seconds"] <= steady["p90_seconds"] \
        <= steady["p99_seconds"] <= steady["max_seconds"]
    assert (rate["requests"], rate["runs"], rate["latency"]["runs"]) == (2, 6, 6)
    assert rate["fps"] == pytest.approx(6 / rate["wall_seconds"])
    assert profile["runs"] == 3
    assert [(s["subgraph"], s["devices"], s["ops"]) for s in profile["subgraphs"]] == [(0, ["builtin_device"], 3)]
    assert [h["type"] for h in profile["host_ops"]] == ["i0"]
    split = profile["split_ms"]
    assert set(split) == {"device", "copies", "host", "python"} and min(split.values()) >= 0
    assert 0 < split["device"] <= profile["subgraphs"][0]["ms"] and split["host"] == profile["host_ops"][0]["ms"]
    assert sum(split.values()) == pytest.approx(profile["run_ms"], rel=0.05)
    assert main(["bench", with_host_op, "--runs", "2", "--requests", "2", "--no-fresh-process"]) == 0
    text = capsys.readouterr().out
    assert " FPS " in text and "where a run's" in text
    assert any(line.split()[:5] == ["host", "op", "4", "i0", "1"] for line in text.splitlines())


def test_a_time_limit_bounds_the_runs(with_host_op, capsys):
    data = bench(capsys, with_host_op, "-t", "0.3", "--profile-runs", "0")
    assert data["steady"]["time_limit_seconds"] == 0.3 and data["steady"]["runs"] >= 1
    assert data["profile"] is None and data["throughput"] is None
    assert main(["bench", with_host_op, "-t", "0", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["message"] == "-t 0: must be more than 0 seconds"


def test_top_k_orders_scores_and_puts_nan_last():
    scores = np.array([[1.0, 3.0, 3.0, np.nan], [0.5, -1.0, 2.0, 0.0]], np.float32)
    assert [[e["class"] for e in row] for row in top_k(scores, 3)] == [[1, 2, 0], [2, 0, 3]]
    assert top_k(scores[:1], 9)[0][-1]["class"] == 3  # K beyond the classes: every class, NaN last


def test_run_top_k_lists_the_largest_scores(with_host_op, capsys, tmp_path):
    assert main(["run", with_host_op, "--top-k", "2", "--output-dir", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (name, rows), = data["top_k"].items()
    saved = np.load(data["outputs"][name]["file"])
    want = np.argsort(-saved.astype(np.float64), axis=-1, kind="stable")[:, :2]
    assert [[e["class"] for e in row] for row in rows] == want.tolist()
    assert [[e["score"] for e in row] for row in rows] == np.take_along_axis(saved, want, -1).astype(float).tolist()


# -- convert --export-subgraphs -------------------------------------------------------------------------------
@pytest.mark.parametrize("device, package", [("microsoft_onnxruntime", "onnxruntime"), ("intel_openvino", "openvino"),
                                             ("builtin_device", None)])
def test_exported_subgraphs_open_in_their_own_tools_and_compute_the_model(device, package, tmp_path, capsys):
    """add_relu_scale is one subgraph, so the exported artifact is the whole model: the SDK itself (not
    nnadapter-bridge) runs it and must give the reference result."""
    from support.predictor_programs import reference_add_relu_scale

    if package:
        pytest.importorskip(package)
    model = add_relu_scale_model(tmp_path / "m")
    out = tmp_path / "exported"
    assert main(["convert", model, "--device", device, "--cache-dir", str(tmp_path / "c"), "--input-shape", "x:2,4",
                 "--export-subgraphs", str(out), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["exported"]
    assert entry["subgraph"] == 0 and entry["device"] == device and all(os.path.isfile(f) for f in entry["files"])
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    want = reference_add_relu_scale(x)
    if device == "microsoft_onnxruntime":
        import onnxruntime as ort

        session = ort.InferenceSession(entry["files"][0], providers=["CPUExecutionProvider"])
        got = session.run(None, {session.get_inputs()[0].name: x})[0]
    elif device == "intel_openvino":
        import openvino as ov

        assert [os.path.basename(f) for f in entry["files"]] == [
            "subgraph0.intel_openvino.xml", "subgraph0.intel_openvino.bin",
            "subgraph0.intel_openvino.runtime.xml", "subgraph0.intel_openvino.runtime.bin"]
        compiled = ov.Core().compile_model(entry["files"][0], "CPU")
        got = compiled(x)[compiled.outputs[0]]
    else:
        text = open(entry["files"][0]).read()
        assert "inputs  %0: FLOAT32[2,4]" in text and "= ADD(" in text and "= RELU(" in text
        return
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
