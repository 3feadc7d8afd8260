"""A driver whose SDK is missing: `nnadapter-bridge devices` and `nnadapter-bridge ops` say
"unavailable: install nnadapter-bridge[<extra>]", never a traceback, and a predictor listing that device with
builtin_device after it runs on builtin_device with one warning. Each case runs in a fresh interpreter in which
the package cannot be imported (`sys.modules[name] = None`, what Python does for a blocked import)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nnadapter_bridge.nnadapter.codes import OperationType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import io, json, sys, contextlib, warnings
sys.modules[sys.argv[1]] = None  # `import <package>` now raises ImportError
from nnadapter_bridge.cli import main

report = {}
for command in (["devices"], ["devices", "--json"], ["ops"], ["ops", "--json"], ["ops", "--device", sys.argv[2]]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(command)
        except SystemExit as exc:
            code = exc.code
    report[" ".join(command)] = {"code": code, "out": out.getvalue(), "err": err.getvalue()}

import numpy as np
import nnadapter_bridge as nb
sys.path.append("tests")  # after the repository root: tests/partition must not shadow partition
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale
import tempfile, pathlib
model = add_relu_scale_model(pathlib.Path(tempfile.mkdtemp()) / "m")
config = nb.Config()
config.set_model_file(model)
config.set_nnadapter_device_names([sys.argv[2], "builtin_device"])
with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    predictor = nb.create_predictor(config)
    x = np.ones((2, 4), np.float32)
    predictor.get_input(0).from_numpy(x)
    predictor.run()
report["predictor"] = {
    "devices": predictor.context.device_names,
    "right": bool(np.allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x))),
    "warnings": [f"{w.category.__name__}: {w.message}" for w in record],
}
print("REPORT" + json.dumps(report))
"""


@pytest.fixture(scope="module", params=[("openvino", "intel_openvino", "openvino"),
                                        ("onnxruntime", "microsoft_onnxruntime", "onnxruntime")],
                ids=["openvino", "onnxruntime"])
def missing(request):
    package, device, extra = request.param
    pytest.importorskip(package)  # the device must be installed for its absence to be simulated
    proc = subprocess.run([sys.executable, "-c", SCRIPT, package, device], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("REPORT"))
    return device, extra, json.loads(line[len("REPORT"):])


def test_devices_says_unavailable_and_what_to_install(missing):
    device, extra, report = missing
    run = report["devices"]
    assert run["code"] == 0 and "Traceback" not in run["err"]
    row = next(line for line in run["out"].splitlines() if line.startswith(device))
    assert row.endswith(f"unavailable: install nnadapter-bridge[{extra}]"), row
    builtin = next(line for line in run["out"].splitlines() if line.startswith("builtin_device"))
    assert builtin.endswith("ok")
    listed = {d["name"]: d for d in json.loads(report["devices --json"]["out"])["devices"]}
    assert listed[device]["unavailable"] == f"install nnadapter-bridge[{extra}]"


def test_ops_lists_the_other_devices_and_says_unavailable(missing):
    device, extra, report = missing
    run = report["ops"]
    assert run["code"] == 0 and "Traceback" not in run["err"] and "ModuleNotFoundError" not in run["err"]
    assert f"{device}: unavailable: install nnadapter-bridge[{extra}]" in run["out"]
    assert f"builtin_device: {len(OperationType)} NNAdapter operations" in run["out"]
    data = json.loads(report["ops --json"]["out"])
    assert device not in data["devices"] and "builtin_device" in data["devices"]
    assert data["unavailable"] == {device: f"install nnadapter-bridge[{extra}]"}
    only = report[f"ops --device {device}"]
    assert only["code"] != 0 and "Traceback" not in only["err"]
    assert f"unavailable: install nnadapter-bridge[{extra}]" in only["err"]


def test_a_predictor_listing_the_device_runs_on_the_next_one(missing):
    device, extra, report = missing
    result = report["predictor"]
    assert result["devices"] == ["builtin_device"] and result["right"]
    fallbacks = [w for w in result["warnings"] if w.startswith("DeviceFallbackWarning")]
    assert len(fallbacks) == 1 and device in fallbacks[0] and f"nnadapter-bridge[{extra}]" in fallbacks[0]
