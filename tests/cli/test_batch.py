"""`nnadapter-bridge batch`: a manifest of zoo models (legacy and PIR) x the three devices converted into the
cache and validated against Paddle Inference in the local process pool; killed (SIGKILL) mid-way and rerun,
it resumes without doing any finished entry twice; a bad entry is reported and the rest done; the same
manifest on Ray (started in the test) gives the same report except timings."""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from nnadapter_bridge.batch import (
    BatchError,
    Entry,
    InvalidEntry,
    ManifestError,
    RayEngine,
    load_manifest,
    parse_resources,
)
from nnadapter_bridge.cli import main

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
GOOD = [f"{model}@{device}" for model in ("mobilenet_v3_small", "squeezenet1_0") for device in DEVICES]


def _manifest(tmp_path, zoo_model, pir_model) -> str:
    """mobilenet_v3_small (legacy .pdmodel) and squeezenet1_0 (PIR .json) on each device, an entry naming a
    device that does not exist (invalid), and a model file that is not a model (an error when it runs)."""
    garbage = tmp_path / "garbage.pdmodel"
    garbage.write_bytes(b"not a Paddle program\n")
    manifest = {
        # One thread per SDK, as the tasks run side by side (and so the same on every engine).
        "defaults": {"seed": 3, "context_properties": "INTEL_OPENVINO_INFERENCE_NUM_THREADS=1;"
                                                      "MICROSOFT_ONNXRUNTIME_NUM_THREADS=1;"},
        "models": {
            "mobilenet_v3_small": zoo_model("mobilenet_v3_small"),
            "squeezenet1_0": {"path": pir_model("squeezenet1_0"), "input_shapes": {"x": [1, 3, 224, 224]}},
        },
        "devices": DEVICES,
        "entries": [
            {"model": "mobilenet_v3_small", "name": "typo", "devices": "intel_openvin"},
            {"model": str(garbage), "devices": ["builtin_device"]},
        ],
    }
    path = tmp_path / "zoo.json"
    path.write_text(json.dumps(manifest, indent=2))
    return str(path)


def _cli(*args, timeout=600) -> subprocess.CompletedProcess:
    env = dict(os.environ, NNADAPTER_BRIDGE_PROGRESS="0")
    return subprocess.run([sys.executable, "-m", "nnadapter_bridge", "batch", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _events(out_dir) -> list:
    with open(os.path.join(out_dir, "batch.log")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _comparable(entry: dict) -> dict:
    """An entry result without what differs between runs and engines: timings, which worker ran it, whether
    its programs were compiled or restored (an entry in flight when a batch is killed may have written its
    .nnc already, and the rerun restores it), the .nnc sizes (OpenVINO's exported compiled model is not
    byte-stable: two compiles of one model differed by a few hundred bytes under load), and the error magnitudes
    against Paddle Inference, whose last bits depend on the BLAS threads of the process that ran the entry (a Ray
    worker runs with OMP_NUM_THREADS set from its task's CPUs; builtin_device's outputs differed by float32 rounding
    between the two engines in 3 of 8 runs): whether each output passed stays compared."""
    errors = ("max_abs_error", "max_rel_error", "cosine")
    entry = {k: v for k, v in entry.items() if k not in ("timings", "run", "compiled", "restored") + errors}
    if isinstance(entry.get("outputs"), dict):
        entry["outputs"] = {name: {k: v for k, v in o.items() if k not in errors} if isinstance(o, dict) else o
                            for name, o in entry["outputs"].items()}
    if entry.get("programs"):
        entry["programs"] = [{k: v for k, v in p.items() if k not in ("source", "bytes")} for p in entry["programs"]]
    return entry


def _differences(a: list, b: list) -> list:
    found = []
    for x, y in zip(a, b):
        x, y = _comparable(x), _comparable(y)
        for k in sorted(set(x) | set(y)):
            if k == "programs" and x.get(k) and y.get(k) and len(x[k]) == len(y[k]):
                found += [f"{x['id']}.programs[{i}].{f}: {p.get(f)!r} != {q.get(f)!r}" for i, (p, q)
                          in enumerate(zip(x[k], y[k])) for f in sorted(set(p) | set(q)) if p.get(f) != q.get(f)]
            elif x.get(k) != y.get(k):
                found.append(f"{x.get('id')}.{k}: {x.get(k)!r} != {y.get(k)!r}"[:300])
    return found + ([f"{len(a)} != {len(b)} entries"] if len(a) != len(b) else [])


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory, zoo_model, pir_model):
    """The batch in the local pool, SIGKILLed as soon as its first entry is recorded, then run again."""
    tmp_path = tmp_path_factory.mktemp("batch")
    manifest = _manifest(tmp_path, zoo_model, pir_model)
    out = str(tmp_path / "out")
    env = dict(os.environ, NNADAPTER_BRIDGE_PROGRESS="0")
    process = subprocess.Popen([sys.executable, "-m", "nnadapter_bridge", "batch", manifest, "--out", out,
                                "--jobs", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                               start_new_session=True)
    entries = os.path.join(out, "entries")
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if os.path.isdir(entries) and [n for n in os.listdir(entries) if n.endswith(".json")
                                           and not n.startswith(".")]:
                break
            time.sleep(0.02)
        assert process.poll() is None, "the batch finished (or died) before it could be killed: " + \
            process.stderr.read().decode()[-2000:]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        try:  # the pool workers the killed coordinator leaves behind (our process group)
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.stderr.close()
    done_before = sorted(n[: -len(".json")] for n in os.listdir(entries)
                         if n.endswith(".json") and not n.startswith("."))  # not a killed writer's temp file
    resumed = _cli(manifest, "--out", out, "--jobs", "2")
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    return {"manifest": manifest, "out": out, "done_before": done_before, "resumed": resumed, "report": report,
            "tmp_path": tmp_path}


def test_batch_resumes_after_a_kill_without_redoing_entries(killed_and_resumed):
    run = killed_and_resumed
    done_before, report, out = run["done_before"], run["report"], run["out"]
    assert 1 <= len(done_before) < len(GOOD) + 1, done_before
    assert run["resumed"].returncode == 1, run["resumed"].stderr  # the bad entries make it a failure
    counts = report["counts"]
    assert (counts["total"], counts["pass"], counts["invalid"], counts["error"], counts["fail"]) == (8, 6, 1, 1, 0)
    assert counts["reused"] == len(done_before) and counts["ran"] == 8 - 1 - len(done_before)
    by_id = {e["id"]: e for e in report["entries"]}
    assert sorted(by_id) == sorted(GOOD + ["typo", "garbage@builtin_device"])
    # No entry finished twice: one "done" per entry over both runs, and the second run skipped the first's.
    events = _events(out)
    done = collections.Counter(e["entry"] for e in events if e["event"] == "done")
    assert set(done.values()) == {1} and set(done) == set(GOOD + ["garbage@builtin_device"])
    skips = [e for e in events if e["event"] == "skip"]  # only the second run skips (the first had a fresh dir)
    assert sorted(e["entry"] for e in skips) == done_before
    second_run = skips[0]["pid"]
    restarted = {e["entry"] for e in events if e["event"] == "start" and e["pid"] == second_run}
    assert restarted == set(GOOD + ["garbage@builtin_device"]) - set(done_before)
    for entry in done_before:
        assert by_id[entry]["run"]["reused"] is True
    for entry in GOOD:
        result = by_id[entry]
        assert result["status"] == "pass", result
        assert result["reference"] == "Paddle Inference" and result["outputs"]
        assert result["num_subgraphs"] >= 1 and result["programs"]
        for program in result["programs"]:
            assert program["valid"] and os.path.isfile(os.path.join(out, "cache", program["file"]))
            assert program["bytes"] == os.path.getsize(os.path.join(out, "cache", program["file"]))
        assert os.path.isfile(os.path.join(out, "partitions", entry + ".dot"))
        assert result["inputs"]["x"]["shape"] == [1, 3, 224, 224]
    # The bad entries: reported, named, and they stopped nothing.
    assert by_id["typo"]["status"] == "invalid"
    assert "field 'devices'" in by_id["typo"]["error"] and "intel_openvino" in by_id["typo"]["error"]
    assert by_id["garbage@builtin_device"]["status"] == "error"
    assert "ModelFormatError" in by_id["garbage@builtin_device"]["error"]
    summary = run["resumed"].stdout
    for entry in GOOD:
        assert entry in summary
    assert "invalid entry typo (entries[0]): field 'devices'" in summary
    markdown = open(os.path.join(out, "report.md")).read()
    assert "## mobilenet_v3_small" in markdown and "partitions/mobilenet_v3_small@intel_openvino." in markdown
    # A third run does nothing at all.
    again = _cli(run["manifest"], "--out", out, "--jobs", "2", "--json")
    data = json.loads(again.stdout)
    assert data["counts"]["ran"] == 0 and data["counts"]["reused"] == 7
    assert not _differences(data["entries"], report["entries"])


def test_batch_on_ray_gives_the_local_pool_report(killed_and_resumed):
    pytest.importorskip("ray")
    run = killed_and_resumed
    out = str(run["tmp_path"] / "ray-out")
    # A local Ray with 2 CPUs and an "openvino" resource the intel_openvino tasks ask for; the programs come
    # back to this process, which writes them into the cache.
    result = _cli(run["manifest"], "--out", out, "--ray", "--jobs", "2", "--resources",
                  "intel_openvino=openvino:1", "--collect-programs", "--json")
    assert result.returncode == 1, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["engine"]["name"] == "ray" and report["engine"]["cluster"].get("openvino") == 2.0
    assert report["counts"]["ran"] == 7 and report["counts"]["reused"] == 0
    local = run["report"]
    assert not _differences(report["entries"], local["entries"])
    for entry in report["entries"]:
        for program in entry.get("programs") or []:
            assert os.path.isfile(os.path.join(out, "cache", program["file"]))
        if entry["status"] == "pass":
            assert entry["run"]["engine"] == "ray"


# -- the manifest ------------------------------------------------------------------------------------------
def test_manifest_errors_name_the_entry_and_the_field(tmp_path):
    yaml = pytest.importorskip("yaml")
    model = tmp_path / "m.pdmodel"
    model.write_bytes(b"x")
    (tmp_path / "m.pdiparams").write_bytes(b"")
    (tmp_path / "in.npy").write_bytes(b"")
    manifest = {
        "models": {"m": {"path": "m.pdmodel", "input_shape": {"x": [1]}}},
        "entries": [
            {"model": "m", "devices": "builtin_device", "name": "ok"},
            {"model": "m", "devices": ["builtin_device"], "input_shapes": {"x": [1, 0]}, "name": "zero-dim"},
            {"model": "missing.pdmodel", "devices": "builtin_device"},
            {"model": "m.pdmodel", "devices": "builtin_device", "seed": -1, "compare": "sometimes",
             "reference_inputs": {"x": "nope.npy"}, "name": "many"},
            {"model": "m.pdmodel", "name": "no-devices"},
            {"model": "m.pdmodel", "devices": "builtin_device", "name": "ok"},
            {"model": "m.pdmodel", "devices": "builtin_device", "name": "bad name/with slash"},
            {"model": "m.pdmodel", "devices": "builtin_device", "dynamic_shapes": {"x": [[-1, 3], [2, 3]]},
             "name": "dyn"},
            {"model": "m.pdmodel", "devices": "builtin_device", "inputshapes": {}, "name": "typo-field"},
        ],
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(manifest))
    loaded = load_manifest(str(path))
    by_id = {e.id: e for e in loaded.entries}
    first = loaded.entries[0]
    assert isinstance(first, InvalidEntry) and first.id == "ok"  # its model has an unknown field
    assert "field 'models.m.input_shape': unknown field (did you mean 'input_shapes'?)" in first.message
    assert "field 'input_shapes.x'" in by_id["zero-dim"].message
    assert "field 'model': missing.pdmodel: no such file" in by_id["missing@builtin_device"].message
    message = by_id["many"].message
    assert "field 'seed'" in message and "field 'compare'" in message and "field 'reference_inputs.x'" in message
    assert "field 'devices': missing" in by_id["no-devices"].message
    duplicate = [e for e in loaded.entries if isinstance(e, InvalidEntry) and "also the name of" in e.message]
    assert duplicate and duplicate[0].where == "entries[5]"
    assert any("field 'name'" in e.message for e in loaded.invalid if e.where == "entries[6]")
    assert "-1 axes" in by_id["dyn"].message
    assert "did you mean 'input_shapes'" in by_id["typo-field"].message
    for bad, why in ((["a", "list"], "must be a mapping"), ({"entry": []}, "unknown top-level key 'entry'"),
                     ({"models": {"m": "m.pdmodel"}}, "nothing to do")):
        path.write_text(json.dumps(bad))
        with pytest.raises(ManifestError, match=why):
            load_manifest(str(path))


def test_batch_command_errors(tmp_path, capsys, monkeypatch):
    assert main(["batch", str(tmp_path / "none.yaml")]) == 2
    assert "no such manifest file" in capsys.readouterr().err
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"entries": []}))
    assert main(["batch", str(manifest), "--out", str(tmp_path / "o"), "--resources", "a=b"]) == 2
    assert "--resources and --collect-programs need --ray" in capsys.readouterr().err
    with pytest.raises(BatchError, match="DEVICE=RESOURCE"):
        parse_resources(["openvino"])
    assert parse_resources(["intel_openvino=ov:0.5", "builtin_device=cpu"]) == {
        "intel_openvino": ("ov", 0.5), "builtin_device": ("cpu", 1.0)}
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    with pytest.raises(BatchError, match=r"nnadapter-bridge\[ray\]"):
        RayEngine(None, 2)


def test_a_nb_entry_is_not_compared_with_paddle_inference_unless_asked(tmp_path):
    """Paddle Inference cannot read a Paddle Lite .nb (it crashes on one): `compare: auto` leaves it uncompared
    and says why; an explicit `compare: paddle` is an error naming the way out."""
    from nnadapter_bridge.batch.task import _reference_outputs
    from nnadapter_bridge.commands.options import CliError

    nb_file = tmp_path / "m.nb"
    nb_file.write_bytes(b"\x02\x00v2.13-rc\x00" + bytes(40))
    entry = Entry(id="m@builtin_device", model_name="m", where="entries[0]", model=str(nb_file),
                  devices=["builtin_device"])
    assert _reference_outputs(entry, {}, None) == (None, "none (Paddle Inference cannot read a Paddle Lite .nb)")
    with pytest.raises(CliError, match="a Paddle Lite .nb is not a Paddle Inference model"):
        _reference_outputs(dataclasses.replace(entry, compare="paddle"), {}, None)


def test_a_result_recorded_without_its_log_line_gets_one_done_line_on_resume(tmp_path, monkeypatch):
    """The window the SIGKILL test can land in: the entry's result file is renamed into place, then the process
    dies before its "done" line. The next run finds the result, writes the missing line (marked recovered),
    skips the entry, and every entry ends with exactly one "done" line."""
    from nnadapter_bridge.batch import runner
    from nnadapter_bridge.batch.task import RESULT_VERSION

    class Killed(BaseException):
        pass

    class RecordingEngine:
        name = "recording"
        ran: list = []

        def describe(self):
            return {"name": self.name}

        def run(self, tasks):
            for task in tasks:
                self.ran.append(task["entry"].id)
                yield task, {"result": {"id": task["entry"].id, "key": task["key"], "status": "pass",
                                        "result_version": RESULT_VERSION, "model": task["entry"].model,
                                        "devices": task["entry"].devices}}

    models = {}
    for name in ("first", "second"):
        (tmp_path / f"{name}.pdmodel").write_bytes(b"not compiled by this test")
        (tmp_path / f"{name}.pdiparams").write_bytes(b"")
        models[name] = {"path": str(tmp_path / f"{name}.pdmodel"), "input_shapes": {"x": [1]}}
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"models": models, "devices": ["builtin_device"]}))
    first, second = "first@builtin_device", "second@builtin_device"
    out = tmp_path / "out"
    real_write = runner.BatchLog.write

    def dies_before_the_first_done_line(self, event, **fields):
        if event == "done":
            raise Killed()
        return real_write(self, event, **fields)

    monkeypatch.setattr(runner.BatchLog, "write", dies_before_the_first_done_line)
    with pytest.raises(Killed):
        runner.run_batch(str(manifest), str(out), engine=RecordingEngine(), progress=False)
    assert os.listdir(out / "entries") == [first + ".json"]  # the result is there, its log line is not
    assert not [e for e in _events(out) if e["event"] == "done"]
    monkeypatch.setattr(runner.BatchLog, "write", real_write)
    RecordingEngine.ran = []
    report = runner.run_batch(str(manifest), str(out), engine=RecordingEngine(), progress=False)
    assert RecordingEngine.ran == [second] and report["counts"]["reused"] == 1
    done = [e for e in _events(out) if e["event"] == "done"]
    assert [e["entry"] for e in done] == [first, second]
    assert [e.get("recovered") for e in done] == [True, None]
    # A third run writes no further "done" line.
    runner.run_batch(str(manifest), str(out), engine=RecordingEngine(), progress=False)
    assert len([e for e in _events(out) if e["event"] == "done"]) == 2


def test_the_inline_engine_leaves_the_callers_environment_alone(monkeypatch):
    """A batch run in this process (--jobs 0) changes no variable of the caller's environment: the predictors'
    progress bars are turned off through each task's Config instead."""
    from nnadapter_bridge.batch import engines

    for name in ("NNADAPTER_BRIDGE_PROGRESS", "GLOG_minloglevel"):  # what the engine used to set
        monkeypatch.delenv(name, raising=False)
    seen = []
    monkeypatch.setattr(engines, "run_task", lambda task: seen.append(dict(os.environ)) or {"result": {}})
    before = dict(os.environ)
    assert len(list(engines.InlineEngine().run([{"entry": None}, {"entry": None}]))) == 2
    assert seen == [before, before] and dict(os.environ) == before


def test_a_task_predictor_draws_no_progress_bar(tmp_path, monkeypatch):
    from nnadapter_bridge.batch.task import _config
    from nnadapter_bridge.predictor.config import Config
    from nnadapter_bridge.predictor.settings import resolve_settings

    monkeypatch.delenv("NNADAPTER_BRIDGE_PROGRESS", raising=False)
    model = tmp_path / "m.pdmodel"
    model.write_bytes(b"x")
    entry = Entry(id="m@builtin_device", model_name="m", where="entries[0]", model=str(model),
                  devices=["builtin_device"])
    assert resolve_settings(_config(entry, str(tmp_path / "cache"))).show_progress is False
    plain = Config()
    plain.set_model_file(str(model))
    assert resolve_settings(plain).show_progress is True
    monkeypatch.setenv("NNADAPTER_BRIDGE_PROGRESS", "0")
    assert resolve_settings(plain).show_progress is False
