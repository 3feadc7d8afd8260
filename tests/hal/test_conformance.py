"""The conformance kit (nnadapter_bridge.conformance): each in-tree driver passes what it claims; a driver
that gets one operation wrong, or claims one it then cannot compile, fails with that operation named; the
`conformance` command; and the out-of-tree example driver (demos/example_driver) installs with pip and
passes the kit as its own test suite."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from hal.builtin_device.driver import BuiltinDeviceDriver
from nnadapter_bridge.cli import main
from nnadapter_bridge.conformance import run_conformance
from nnadapter_bridge.conformance.kit import Mismatch, compare_output, tolerance_of
from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision, ResultCode
from nnadapter_bridge.nnadapter.runtime import DeviceManager

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IN_TREE = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


def _acquirable(name: str) -> bool:
    try:
        DeviceManager.instance().acquire(name)
    except Exception:  # noqa: BLE001 - an SDK that is not installed here
        return False
    return True


@pytest.mark.parametrize("driver_name", IN_TREE)
def test_in_tree_driver_passes_what_it_claims(driver_name):
    if not _acquirable(driver_name):
        pytest.skip(f"{driver_name} cannot be acquired here")
    report = run_conformance(driver_name, level="quick")
    assert report.passed, "\n".join(report.failures())
    summary = report.summary()
    assert summary["pass"] > 50 and summary["fail"] == 0
    claimed = {(r.operation, r.precision) for r in report.operations if r.claimed}
    assert {("ADD", "float32"), ("CONV_2D", "float32"), ("SOFTMAX", "float32")} <= claimed
    assert report.graphs["claimed"] > 0 and report.graphs["passed"] == report.graphs["claimed"]
    assert all(part["status"] == "pass" for part in report.stress.values()), report.stress
    if driver_name == "builtin_device":  # the reference itself claims every operation
        assert {r.operation for r in report.operations if r.claimed} == {t.name for t in T}
    if driver_name == "intel_openvino":  # the CPU plugin computes float64 in float32: never claimed
        assert not [r for r in report.operations if r.precision == "float64" and r.claimed]
    data = json.loads(json.dumps(report.to_json()))
    assert data["passed"] and data["device"] == driver_name
    table = report.table()
    assert "CONV_2D" in table and "PASS:" in table.splitlines()[-1]


# -- deliberately broken drivers ---------------------------------------------------------------------------
class _PerturbsRelu(BuiltinDeviceDriver):
    """builtin_device, except that every program holding a RELU adds 1e-2 to its outputs."""

    name = "broken_relu_device"

    def execute_program(self, program, inputs, outputs):
        captured = []

        def capture(access):
            def wrapped(memory, operand_type):
                buffer = access(memory, operand_type)
                captured.append(buffer)
                return buffer
            return wrapped

        from hal.protocol import Argument

        outputs = [Argument(a.index, a.memory, capture(a.access)) for a in outputs]
        super().execute_program(program, inputs, outputs)
        if any(op.type == T.RELU for op in program.model.operations):
            for buffer in captured:
                if np.asarray(buffer).dtype.kind == "f":
                    np.asarray(buffer)[...] += np.float32(1e-2)


class _ClaimsSoftmaxButFails(BuiltinDeviceDriver):
    """Claims what builtin_device claims, but cannot compile (or restore) a program holding a SOFTMAX."""

    name = "broken_softmax_device"

    def create_program(self, context, model, cache):
        program = super().create_program(context, model, cache)
        if any(op.type == T.SOFTMAX for op in program.model.operations):
            raise NNAdapterError("broken_softmax_device: SOFTMAX is not really there", ResultCode.DEVICE_INTERNAL_ERROR)
        return program


@pytest.fixture
def registered():
    manager = DeviceManager.instance()
    names = []

    def register(driver):
        manager.register(driver, replace=True)
        names.append(driver.name)
        return driver.name

    yield register
    for name in names:
        manager.unregister(name)


def test_a_driver_with_one_wrong_operation_fails_naming_it(registered):
    name = registered(_PerturbsRelu())
    report = run_conformance(name, level="quick")
    assert not report.passed
    assert report.failed_operations() == ["RELU"]
    rows = [r for r in report.operations if r.operation == "RELU"]
    assert rows and all(r.status == "fail" for r in rows if r.claimed)
    failures = report.failures()
    assert failures and all(line.startswith("RELU ") for line in failures), failures
    assert "compare" in failures[0] and "out of tolerance" in failures[0]
    float32 = next(r for r in rows if r.precision == "float32")
    assert float32.max_abs_error == pytest.approx(1e-2, rel=1e-4)
    assert "FAIL" in report.table().splitlines()[-len(failures) - 2]
    # ADD, CONV_2D and the rest still pass
    assert {r.status for r in report.operations if r.operation in ("ADD", "CONV_2D")} == {"pass"}


def test_a_driver_claiming_an_operation_it_cannot_compile_fails_naming_it(registered):
    name = registered(_ClaimsSoftmaxButFails())
    report = run_conformance(name, level="quick", operations=["SOFTMAX", "LOG_SOFTMAX", "ADD"])
    assert not report.passed
    assert report.failed_operations() == ["SOFTMAX"]
    failure = report.failures()[0]
    assert failure.startswith("SOFTMAX (") and "create_program" in failure
    assert "SOFTMAX is not really there" in failure
    assert {r.status for r in report.operations if r.operation in ("ADD", "LOG_SOFTMAX")} == {"pass"}


def test_tolerances_per_type():
    assert tolerance_of(Precision.FLOAT32) == (1e-5, 5 * 2.0 ** -23)
    assert tolerance_of(Precision.FLOAT16) == (5 * 2.0 ** -10, 5 * 2.0 ** -10)
    assert tolerance_of(Precision.QUANT_INT8_SYMM_PER_LAYER) == (1.0, 0.0)
    assert tolerance_of(Precision.INT32) == (0.0, 0.0)
    # quantized 8-bit: one step off passes, two fail
    want = np.int8([10, -3, 7])
    compare_output(np.int8([11, -3, 6]), want, Precision.QUANT_INT8_SYMM_PER_LAYER, "q")
    with pytest.raises(Mismatch):
        compare_output(np.int8([12, -3, 7]), want, Precision.QUANT_INT8_SYMM_PER_LAYER, "q")
    with pytest.raises(Mismatch):  # plain integers: exactly
        compare_output(np.int32([11, -3, 7]), want.astype(np.int32), Precision.INT32, "i")
    with pytest.raises(Mismatch, match="dtype"):
        compare_output(np.float64([1.0]), np.float32([1.0]), Precision.FLOAT32, "f")


# -- the command -------------------------------------------------------------------------------------------
def test_conformance_command(capsys, tmp_path):
    out_file = tmp_path / "report.json"
    assert main(["conformance", "--device", "builtin_device", "--quick", "--operation", "ADD", "--operation",
                 "conv_2d", "--output", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert "ADD" in text and "CONV_2D" in text and "SOFTMAX" not in text
    assert text.rstrip().splitlines()[-1].startswith("PASS")
    data = json.loads(out_file.read_text())
    assert {r["operation"] for r in data["operations"]} == {"ADD", "CONV_2D"}
    assert main(["conformance", "--device", "no_such_device"]) == 2
    assert "no such driver" in capsys.readouterr().err
    assert main(["conformance", "--device", "builtin_device", "--operation", "NOPE"]) == 2
    assert "--operation NOPE: no NNAdapter operation of that name" in capsys.readouterr().err


# -- the out-of-tree example driver ----------------------------------------------------------------------
def test_example_driver_installs_with_pip_and_passes_the_kit(tmp_path):
    """pip-installed into a private --target dir (nothing lands in the venv): the entry point makes it a
    device, its own test suite (the kit) passes, and so does `nnadapter-bridge conformance` on it."""
    source = tmp_path / "example_driver"
    shutil.copytree(os.path.join(ROOT, "demos", "example_driver"), source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(site), str(source)],
                   check=True, capture_output=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=str(site), NNADAPTER_BRIDGE_PROGRESS="0")
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "tests"], cwd=source, env=env, capture_output=True, text=True, timeout=300)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "3 passed" in tests.stdout
    cli = subprocess.run([sys.executable, "-m", "nnadapter_bridge", "conformance", "--device", "example_device",
                          "--quick", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr[-2000:]
    data = json.loads(cli.stdout)
    claimed = sorted(r["operation"] for r in data["operations"] if r["claimed"])
    assert claimed == ["ADD", "CONV_2D", "FULLY_CONNECTED", "MUL", "RELU", "SUB"]
    assert data["passed"] and data["graphs"]["passed"] > 0
