"""`nnadapter-bridge run`: .npy and seeded random inputs, output summaries and files, cache reporting,
--compare-paddle (PASS on the real model, FAIL and exit 1 on a wrong reference, a clear message without
paddle), one-line errors, and one real subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nnadapter_bridge.cli import main
from nnadapter_bridge.validation import paddle_reference
from support.tolerances import assert_model_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YOLO_CONFIG = os.path.join(ROOT, "configs", "partition_yolo_detector.txt")
NMS_ROWS, NMS_COUNT = "multiclass_nms3_0.tmp_0", "multiclass_nms3_0.tmp_2"


@pytest.fixture(scope="module")
def yolo(zoo_model):
    return zoo_model("yolo_detector")


@pytest.fixture
def im_shape(tmp_path):
    path = tmp_path / "im_shape.npy"
    np.save(path, np.array([[64, 64]], dtype=np.int32))
    return str(path)


def run_json(capsys, *argv, status=0):
    assert main(["run", *argv, "--json"]) == status
    return json.loads(capsys.readouterr().out)


def test_compare_paddle_passes_and_outputs_are_saved(yolo, im_shape, capsys, tmp_path, paddle_reference):
    image = np.random.default_rng(7).standard_normal((1, 3, 64, 64)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    out_dir = tmp_path / "out"
    data = run_json(capsys, yolo, "--input", f"image={tmp_path / 'image.npy'}", "--input", f"im_shape={im_shape}",
                    "--partition-config", YOLO_CONFIG, "--compare-paddle", "--output-dir", str(out_dir))
    assert data["passed"] is True
    assert set(data["compare_paddle"]) == {NMS_ROWS, NMS_COUNT}
    assert all(c["passed"] for c in data["compare_paddle"].values())
    assert data["inputs"]["image"]["from"] == f"file {tmp_path / 'image.npy'}"
    # The saved files hold what the model produced: check them against Paddle Inference ourselves.
    want = paddle_reference(yolo, {"image": image, "im_shape": np.array([[64, 64]], dtype=np.int32)})
    rows = np.load(out_dir / f"{NMS_ROWS}.npy")
    count = np.load(out_dir / f"{NMS_COUNT}.npy")
    assert list(rows.shape) == data["outputs"][NMS_ROWS]["shape"]
    assert data["outputs"][NMS_ROWS]["max"] == pytest.approx(float(rows.max()))
    assert_model_close(rows, want[0], what=NMS_ROWS)
    np.testing.assert_array_equal(count, want[1])


def test_compare_paddle_table(yolo, im_shape, capsys):
    assert main(["run", yolo, "--input", f"im_shape={im_shape}", "--compare-paddle"]) == 0
    out = capsys.readouterr().out
    assert "PASS: every output matches Paddle Inference" in out
    assert next(line for line in out.splitlines() if line.startswith(NMS_COUNT) and "PASS" in line)


def test_a_wrong_reference_fails_with_exit_1(yolo, im_shape, capsys, monkeypatch, tmp_path):
    assert main(["run", yolo, "--input", f"im_shape={im_shape}", "--output-dir", str(tmp_path), "--json"]) == 0
    capsys.readouterr()
    rows = np.load(tmp_path / f"{NMS_ROWS}.npy")
    count = np.load(tmp_path / f"{NMS_COUNT}.npy")
    perturbed = rows.copy()
    perturbed[0, 1] *= 1.001  # one score off by 0.1%: beyond 1e-4*|want| + 1e-5*max|want|
    fake = {NMS_ROWS: perturbed, NMS_COUNT: count + 1}
    monkeypatch.setattr(paddle_reference, "paddle_outputs", lambda model, params, feeds: fake)
    monkeypatch.setattr(paddle_reference, "paddle_available", lambda: True)
    data = run_json(capsys, yolo, "--input", f"im_shape={im_shape}", "--compare-paddle", status=1)
    assert data["passed"] is False
    assert not data["compare_paddle"][NMS_ROWS]["passed"] and not data["compare_paddle"][NMS_COUNT]["passed"]
    assert data["compare_paddle"][NMS_ROWS]["max_abs_error"] == pytest.approx(abs(rows[0, 1]) * 1e-3, rel=1e-3)
    assert data["compare_paddle"][NMS_COUNT]["max_abs_error"] == 1.0


def test_without_paddle_compare_is_a_clear_error(yolo, capsys, monkeypatch):
    monkeypatch.setattr(paddle_reference, "paddle_available", lambda: False)
    assert main(["run", yolo, "--compare-paddle"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "paddlepaddle is not installed" in err


def test_random_inputs_follow_the_seed(yolo, capsys):
    a = run_json(capsys, yolo, "--seed", "3")
    b = run_json(capsys, yolo, "--seed", "3")
    c = run_json(capsys, yolo, "--seed", "4")
    assert a["outputs"] == b["outputs"]
    assert a["outputs"][NMS_ROWS] != c["outputs"][NMS_ROWS]
    assert a["inputs"]["im_shape"] == {"shape": [1, 2], "dtype": "int32", "from": "random"}


def test_second_run_restores_from_the_cache(yolo, capsys, tmp_path):
    argv = [yolo, "--cache-dir", str(tmp_path), "--partition-config", YOLO_CONFIG]
    first = run_json(capsys, *argv)
    second = run_json(capsys, *argv)
    assert (first["compiled"], first["restored"]) == (2, 0)
    assert (second["compiled"], second["restored"]) == (0, 2)
    assert [p["source"] for p in second["programs"]] == ["restored from cache"] * 2
    assert second["outputs"] == first["outputs"]
    assert main(["run", *argv]) == 0
    assert "restored from cache" in capsys.readouterr().out


@pytest.mark.parametrize("make_argv, message", [
    (lambda d: ["--input", f"im_shape={d}/missing.npy"], "--input im_shape: {d}/missing.npy: no such file"),
    (lambda d: ["--input", "im_shape"], "--input 'im_shape': expected NAME=FILE.npy"),
    (lambda d: ["--input", f"boxes={d}/i64.npy"], "--input: the model has no input 'boxes'"),
    (lambda d: ["--input", f"im_shape={d}/big.npy"], "--input im_shape: {d}/big.npy: holds int64 values that int32 "
                                                     "(what the model's input takes) cannot hold"),
    (lambda d: ["--input", f"im_shape={d}/bad.npy"], "--input im_shape: {d}/bad.npy: not a .npy file"),
    (lambda d: ["--input", f"im_shape={d}/shape.txt"], "--input im_shape: {d}/shape.txt: not a .npy file"),
    (lambda d: ["--input", f"im_shape={d}/cut.npy"], "--input im_shape: {d}/cut.npy: not a readable .npy array"),
    (lambda d: ["--input", f"im_shape={d}/two.npz"], "{d}/two.npz: holds several arrays (.npz)"),
    (lambda d: ["--input", f"im_shape={d}"], "--input im_shape: {d}: is a directory, not a file"),
    (lambda d: ["--partition-config", str(d)], "--partition-config {d}: is a directory, not a file"),
    (lambda d: ["--input", f"im_shape={d}/i64.npy", "--input-shape", "im_shape:2,2"], "has shape [1, 2], but"),
    (lambda d: ["--seed", "-1"], "--seed -1: must be 0 or more"),
    (lambda d: ["--cache-dir", "/proc/nnadapter-bridge-test"], "--cache-dir /proc/nnadapter-bridge-test: cannot "
                                                               "create the directory: "),
    (lambda d: ["--output-dir", f"{d}/i64.npy/out"], "--output-dir {d}/i64.npy/out: cannot create the directory: "),
    (lambda d: ["--output-dir", f"{d}/i64.npy"], "--output-dir {d}/i64.npy: exists and is not a directory"),
    (lambda d: ["--cache-dir", f"{d}/i64.npy"], "--cache-dir {d}/i64.npy: exists and is not a directory"),
    (lambda d: ["--dynamic-shape", "image:-1,3,64,64"], "--dynamic-shape image: the first shape [-1, 3, 64, 64] "
                                                        "has -1 axes"),
    (lambda d: ["--dynamic-shape", "image:1,3,64,64", "--dynamic-shape", "image:2,3,64,64"],
     "--dynamic-shape image: given twice"),
    (lambda d: ["--dynamic-shape", "photo:1,3,64,64"], "'photo'"),
])
def test_errors_are_one_line(yolo, capsys, tmp_path, make_argv, message):
    np.save(tmp_path / "i64.npy", np.array([[64, 64]], dtype=np.int64))
    np.save(tmp_path / "big.npy", np.array([[2 ** 40, 64]], dtype=np.int64))
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    (tmp_path / "shape.txt").write_text("64 64\n")
    (tmp_path / "cut.npy").write_bytes((tmp_path / "i64.npy").read_bytes()[:-4])  # the header, not all the data
    np.savez(tmp_path / "two.npz", a=np.zeros(2), b=np.ones(2))
    assert main(["run", yolo, *make_argv(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(d=tmp_path) in err, err


def test_dynamic_shape_restores_what_convert_wrote(yolo, capsys, tmp_path):
    dynamic = ["--dynamic-shape", "image:1,3,64,64;2,3,64,64"]
    assert main(["convert", yolo, "--cache-dir", str(tmp_path), *dynamic, "--json"]) == 0
    converted = json.loads(capsys.readouterr().out)
    assert converted["compiled"] == 1
    # The second listed shape, fed as random data and from a file: the program convert wrote serves both.
    data = run_json(capsys, yolo, "--cache-dir", str(tmp_path), *dynamic, "--input-shape", "image:2,3,64,64")
    assert data["inputs"]["image"]["shape"] == [2, 3, 64, 64]
    assert data["dynamic_shapes"] == {"image": [[1, 3, 64, 64], [2, 3, 64, 64]]}
    assert (data["compiled"], data["restored"]) == (0, 1)
    assert [p["token"] for p in data["programs"]] == [converted["programs"][0]["token"]]
    np.save(tmp_path / "image.npy", np.zeros((2, 3, 64, 64), dtype=np.float32))
    image = f"image={tmp_path / 'image.npy'}"
    assert main(["run", yolo, "--cache-dir", str(tmp_path), *dynamic, "--input", image]) == 0
    assert "restored from cache" in capsys.readouterr().out
    # Without the dynamic shape info the token differs, so the program is compiled anew.
    plain = run_json(capsys, yolo, "--cache-dir", str(tmp_path))
    assert (plain["compiled"], plain["restored"]) == (1, 0)


def test_output_dir_is_created_before_the_run(yolo, capsys, tmp_path):
    out = tmp_path / "a" / "b"
    data = run_json(capsys, yolo, "--output-dir", str(out))
    assert sorted(os.listdir(out)) == sorted(f"{name}.npy" for name in data["outputs"])


def test_subprocess_smoke(yolo, tmp_path):
    env = dict(os.environ, NNADAPTER_BRIDGE_PROGRESS="0")
    proc = subprocess.run([sys.executable, "-m", "nnadapter_bridge", "run", yolo, "--json"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outputs"][NMS_COUNT]["dtype"] == "int32"
    proc = subprocess.run([sys.executable, "-m", "nnadapter_bridge", "run", str(tmp_path / "none")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"nnadapter-bridge run: error: {tmp_path / 'none'}: no such model file or directory\n"


# -- non-finite outputs and Paddle-side failures -------------------------------------------------------------


@pytest.fixture
def division(tmp_path):
    """x / y saved by paddle (legacy static), with inputs making +inf, -inf and NaN (0/0) outputs."""
    from support.converter_harness import static_program

    x = np.array([[1.0, -2.0, 0.0, 3.0]], np.float32)
    y = np.array([[0.0, 0.0, 0.0, 2.0]], np.float32)
    saved = static_program(tmp_path / "model", lambda x, y: x / y, {"x": x, "y": y})
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return saved.model_path, ["--input", f"x={tmp_path / 'x.npy'}", "--input", f"y={tmp_path / 'y.npy'}"]


def test_compare_paddle_passes_identical_infinities_and_nans(division, capsys):
    model, inputs = division
    data = run_json(capsys, model, *inputs, "--compare-paddle")
    (name, entry), = data["compare_paddle"].items()
    # statistics of the finite values; the non-finite ones counted (1/0, -2/0, 0/0)
    assert data["outputs"][name] == {"shape": [1, 4], "dtype": "float32", "nan": 1, "posinf": 1, "neginf": 1,
                                     "min": 1.5, "max": 1.5, "mean": 1.5, "std": 0.0}
    assert data["passed"] is True and entry["passed"] is True
    # the same inf, -inf and NaN differ by 0 (inf - inf would be NaN)
    assert entry["max_abs_error"] == 0.0 and entry["max_rel_error"] == 0.0


def test_run_table_counts_non_finite_outputs_beside_finite_statistics(division, capsys):
    import warnings

    model, inputs = division
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "invalid value in subtract" from the statistics
        assert main(["run", model, *inputs]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "[1, 4]" in line and "nan" in line)
    assert row.endswith("1 nan, 1 posinf, 1 neginf"), row
    assert row.split()[4:8] == ["1.5", "1.5", "1.5", "0"], row  # min, max, mean, std of the finite values


@pytest.mark.parametrize("got, want", [
    ([np.inf, 1.0], [-np.inf, 1.0]),   # the other infinity
    ([np.nan, 1.0], [np.inf, 1.0]),    # NaN where inf is expected
    ([2.0, 1.0], [np.nan, 1.0]),       # a number where NaN is expected
    ([np.inf, 1.0], [3.0, 1.0]),       # inf where a number is expected
])
def test_compare_fails_on_a_non_finite_mismatch(got, want):
    entry = paddle_reference.compare(np.array(got, np.float32), np.array(want, np.float32))
    assert entry["passed"] is False
    assert entry["max_abs_error"] == np.inf


def test_compare_measures_errors_beside_matching_infinities():
    entry = paddle_reference.compare(np.array([np.inf, 1.5, -np.inf], np.float32),
                                     np.array([np.inf, 1.0, -np.inf], np.float32))
    assert entry["passed"] is False
    assert entry["max_abs_error"] == pytest.approx(0.5)
    assert entry["max_rel_error"] == pytest.approx(0.5)  # relative to max|want| over the finite values


def test_paddle_inference_failure_is_one_line(tmp_path, capsys):
    """A model Paddle Inference cannot run (a Paddle Lite fused op that Paddle itself does not register) while
    we can: one line naming Paddle Inference and its reason, exit status 2, no traceback."""
    from support.converter_harness import opdesc_program

    x = np.array([[1.0, -2.0, 0.5]], np.float32)
    saved = opdesc_program(tmp_path, "fusion_elementwise_add_activation", inputs={"X": ["x"], "Y": ["y"]},
                           outputs={"Out": ["out"]}, attrs={"axis": -1, "act_type": "relu"},
                           feeds={"x": x, "y": x}, run_paddle=False)
    np.save(tmp_path / "x.npy", x)
    inputs = ["--input", f"x={tmp_path / 'x.npy'}", "--input", f"y={tmp_path / 'x.npy'}"]
    assert main(["run", saved.model_path, *inputs]) == 0  # we run it
    capsys.readouterr()
    assert main(["run", saved.model_path, *inputs, "--compare-paddle"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("nnadapter-bridge run: error: Paddle Inference could not run this model: ")
    assert "fusion_elementwise_add_activation" in err and "not registered" in err


def test_paddle_reference_keeps_a_0d_input_0d(tmp_path):
    """np.ascontiguousarray would feed a 0-d input as shape [1], and Paddle would answer for that shape."""
    from support.converter_harness import static_program

    x = np.array(3.0, np.float32)
    saved = static_program(tmp_path, lambda x: x * 2.0, {"x": x})
    assert saved.outputs[0].shape == ()  # Paddle's executor keeps it 0-d
    out, = paddle_reference.paddle_outputs(saved.model_path, saved.params_path, {"x": x}).values()
    assert out.shape == () and float(out) == 6.0


# -- quantized models: against the float model, over several inputs -------------------------------------------------
def test_compare_float_reports_what_quantization_costs_over_several_inputs(quant_model, zoo_model, capsys):
    from support.quant_fixtures import CHANNEL

    quantized = quant_model("mobilenet_v2", True, CHANNEL)
    float_model = zoo_model("mobilenet_v2")
    data = run_json(capsys, quantized, "--device", "intel_openvino", "--compare-paddle", "--compare-float",
                    float_model, "--samples", "3")
    assert data["samples"] == 3 and data["reduced_precision"] == "quantized model" and data["passed"]
    (name, against_paddle), = data["compare_paddle"].items()
    assert against_paddle["shape"] == [3, 1, 1000]  # three input sets judged together
    against_float = data["compare_float"]["outputs"][name]
    assert against_float["shape"] == [3, 1, 1000] and "passed" not in against_float
    # quantization moves the output away from the float model more than our int8 kernels move it away from
    # Paddle Inference running the same quantized model
    assert 0.99 < against_float["cosine"] <= against_paddle["cosine"]
    assert against_float["max_abs_error"] > 0

    main(["run", quantized, "--device", "intel_openvino", "--compare-float", float_model])
    text = capsys.readouterr().out
    assert "vs the float model" in text and "vs Paddle Inference" not in text


@pytest.mark.parametrize("argv, message", [
    (["--samples", "0", "--compare-paddle"], "--samples 0: expected 1 or more"),
    (["--samples", "2"], "--samples: runs several input sets only to compare them"),
    (["--float-params", "p.pdiparams"], "--float-params: give it with --compare-float"),
])
def test_sample_and_float_arguments_are_checked(yolo, capsys, argv, message):
    assert main(["run", yolo, *argv]) == 2
    assert message in capsys.readouterr().err


def test_compare_paddle_on_a_nb_is_refused_before_running(zoo_model, capsys, tmp_path, monkeypatch):
    """Paddle Inference crashes (SIGSEGV) on a Paddle Lite .nb: the CLI says so before it compiles anything,
    and --compare-float against the source model is the way to compare."""
    from nnadapter_bridge import lite
    from nnadapter_bridge.predictor import predictor
    source = zoo_model("mobilenet_v1")
    opt = lite.Opt()
    opt.set_model_file(source)
    opt.set_optimize_out(str(tmp_path / "m"))
    nb_path = opt.run()
    created = []
    original = predictor.create_predictor
    monkeypatch.setattr(predictor, "create_predictor", lambda config: created.append(1) or original(config))
    for argv in (["run", nb_path, "--compare-paddle"], ["bench", nb_path, "--compare-paddle", "--runs", "1"]):
        assert main(argv) == 2
        assert "a Paddle Lite .nb is not a Paddle Inference model" in capsys.readouterr().err
    assert not created
    data = run_json(capsys, nb_path, "--compare-float", source)
    (name, against), = data["compare_float"]["outputs"].items()
    assert against["cosine"] > 0.99999 and against["max_rel_error"] < 1e-4


def test_samples_refuse_an_output_whose_shape_changes():
    from nnadapter_bridge.cli.cmd_run import _stacked
    from nnadapter_bridge.commands.options import CliError

    same = [{"y": np.zeros((1, 3))}, {"y": np.ones((1, 3))}]
    assert _stacked(same)["y"].shape == (2, 1, 3)
    with pytest.raises(CliError, match="output boxes changes shape between the input sets"):
        _stacked([{"boxes": np.zeros((2, 6))}, {"boxes": np.zeros((5, 6))}])
