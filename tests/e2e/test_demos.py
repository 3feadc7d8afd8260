"""The demos: classify.py (compile, then restore from the cache, top-5, PASS against Paddle Inference),
detect.py (post-processing forced to the host, detections, PASS), and quickstart.sh end to end."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_demo(name: str):
    spec = importlib.util.spec_from_file_location(f"demo_{name}", os.path.join(ROOT, "demos", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_classify_compiles_then_restores_and_matches_paddle(pir_model, paddle_reference, capsys):
    """The default: the PIR export (mobilenet_v1.json), the format Paddle 3 users have."""
    model_dir = os.path.dirname(pir_model("mobilenet_v1"))
    assert load_demo("classify").main(["--model-dir", model_dir]) == 0
    out = capsys.readouterr().out
    assert "mobilenet_v1.json" in out.splitlines()[0]
    _check_classify_output(out)


def test_classify_legacy_format(zoo_model, paddle_reference, capsys):
    model_dir = os.path.dirname(zoo_model("mobilenet_v1"))
    assert load_demo("classify").main(["--model-dir", model_dir, "--format", "legacy"]) == 0
    out = capsys.readouterr().out
    assert "mobilenet_v1.pdmodel" in out.splitlines()[0]
    _check_classify_output(out)


def _check_classify_output(out: str) -> None:
    first, second = out.split("predictor 2:")
    assert "subgraph 0 (85 ops): compiled" in first and "restored from cache" not in first
    assert "subgraph 0 (85 ops): restored from cache" in second
    assert len([line for line in out.splitlines() if line.strip().startswith(("1. class", "5. class"))]) == 2
    assert "identical logits" in out
    assert "Paddle Inference: max abs error" in out and out.rstrip().endswith("PASS (|got-want| <= 1e-4*|want| + "
                                                                             "1e-5*max|want|)")


def test_detect_keeps_post_processing_on_the_host(zoo_model, paddle_reference, capsys):
    model_dir = os.path.dirname(zoo_model("yolo_detector"))
    assert load_demo("detect").main(["--model-dir", model_dir]) == 0
    out = capsys.readouterr().out
    assert "12 on devices in 2 subgraphs, 2 on the host" in out
    for op_type in ("yolo_box", "multiclass_nms3"):
        line = next(line for line in out.splitlines() if f" {op_type} " in line)
        assert "forced to the host by the partition config" in line
    assert "detection(s) (class, score, box x1 y1 x2 y2)" in out
    assert out.count(": PASS") == 2 and "FAIL" not in out


def test_detect_bad_partition_config_is_one_line(zoo_model, capsys):
    model_dir = os.path.dirname(zoo_model("yolo_detector"))
    assert load_demo("detect").main(["--model-dir", model_dir, "--partition-config", "/no/such.txt"]) == 2
    assert capsys.readouterr().err == "detect: error: --partition-config /no/such.txt: no such file\n"


def test_quickstart_runs_the_classification_demo(pir_model, paddle_reference, tmp_path):
    """The README's main command, in the environment running this suite (NNADAPTER_BRIDGE_VENV)."""
    demo_dir = tmp_path / "demo"
    demo_dir.mkdir()
    shutil.copytree(os.path.dirname(pir_model("mobilenet_v1")), demo_dir / "mobilenet_v1")  # no zoo build
    env = dict(os.environ, NNADAPTER_BRIDGE_DEMO_DIR=str(demo_dir), NNADAPTER_BRIDGE_PROGRESS="0",
               NNADAPTER_BRIDGE_VENV=sys.prefix)
    proc = subprocess.run([os.path.join(ROOT, "demos", "quickstart.sh"), "--no-paddle"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "restored from cache" in proc.stdout and "top-5 classes" in proc.stdout
