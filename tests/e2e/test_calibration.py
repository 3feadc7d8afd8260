"""The calibration (subgraph.calibration, `nnadapter-bridge calibrate`): a real measurement of builtin_device and
intel_openvino on this machine, kept in calibration.json and reused; a corrupt or foreign file is a miss with a
warning; a driver that reports its own figures is not measured; one that cannot be measured is taken as the CPU.

Timing assertions are orders of magnitude only (a loaded 2-core machine): OpenVINO's compiled conv chain is not
slower than numpy's reference by 4x or more, and nothing takes a second per run.
"""
from __future__ import annotations

import json
import warnings

import orjson
import pytest

from hal.builtin_device.driver import BuiltinDeviceDriver
from nnadapter_bridge.nnadapter.driver_protocol import Capabilities, PerformanceInfo
from nnadapter_bridge.nnadapter.runtime import DeviceManager
from nnadapter_bridge.subgraph import calibration
from nnadapter_bridge.subgraph.calibration import CalibrationWarning, calibrate


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One real calibration of builtin_device and intel_openvino, one thread each (shared by the tests here)."""
    cache_dir = tmp_path_factory.mktemp("calibration")
    properties = "INTEL_OPENVINO_INFERENCE_NUM_THREADS=1;BUILTIN_DEVICE_NUM_THREADS=1"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        result = calibrate(["builtin_device", "intel_openvino"], properties, str(cache_dir))
    return cache_dir, properties, result


def test_a_real_calibration_measures_both_devices_against_the_reference(measured):
    _, _, result = measured
    assert result.measured == ["builtin_device", "intel_openvino"]
    assert 0 < result.measured_seconds < 20
    reference = result.figures("builtin_device")
    assert reference.capabilities.precisions["float32"].exec_time == pytest.approx(1.0)
    openvino = result.figures("intel_openvino")
    assert openvino.source == "calibration"
    assert set(openvino.capabilities.families) == {"conv", "depthwise", "matmul"}
    assert "int8" in openvino.capabilities.precisions  # OpenVINO runs the int8 conv chain
    assert openvino.capabilities.exec_time("float32", "conv") < 4.0
    assert 0 < openvino.call_seconds < 1.0
    assert all(info.power is None for info in openvino.capabilities.precisions.values())  # never invented
    data = openvino.as_dict()
    assert data["precisions"]["float32"]["power"] == "unknown"
    assert "threads=1" in openvino.key and "sdk=openvino " in openvino.key
    # The relaxed float path (bf16 or f16, where OpenVINO computes either on this CPU) is measured too; the
    # reference has none.
    import openvino as ov

    if {"BF16", "FP16"} & set(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")):
        assert 0 < openvino.capabilities.precisions["relaxed_float16"].exec_time < 4.0
        assert "relaxed_float16" in openvino.seconds_per_flop
    assert "relaxed_float16" not in reference.capabilities.precisions
    assert "no relaxed float path" in reference.notes["relaxed_float16"]


def test_the_figures_are_kept_and_reused_without_measuring(measured):
    cache_dir, properties, first = measured
    again = calibrate(["intel_openvino", "builtin_device"], properties, str(cache_dir))
    assert again.measured == [] and again.measured_seconds == 0.0
    assert again.digest() == first.digest()
    # Another thread count is another key: measured again (only that device).
    other = calibrate(["builtin_device"], "BUILTIN_DEVICE_NUM_THREADS=2", str(cache_dir))
    assert other.measured == ["builtin_device"]
    document = orjson.loads((cache_dir / calibration.CALIBRATION_FILE).read_bytes())
    assert document["format"] == calibration.CALIBRATION_FORMAT and len(document["entries"]) == 3


@pytest.mark.parametrize("content, why", [
    (b"{not json", "unusable"),
    (json.dumps({"format": "someone-else-v9", "entries": {}}).encode(), "not a nnadapter-bridge-calibration-v1"),
    (json.dumps({"format": calibration.CALIBRATION_FORMAT,
                 "entries": {"k": {"device": "x", "workloads": {"conv": {"seconds": -1.0, "flops": 3}},
                                   "call_seconds": 0.0, "copy_bytes_per_second": 1.0}}}).encode(), "malformed"),
])
def test_a_corrupt_or_foreign_file_is_a_miss_with_a_warning(tmp_path, content, why):
    path = tmp_path / calibration.CALIBRATION_FILE
    path.write_bytes(content)
    with pytest.warns(CalibrationWarning, match=why):
        result = calibrate(["builtin_device"], "BUILTIN_DEVICE_NUM_THREADS=1", str(tmp_path))
    assert result.measured == ["builtin_device"]
    assert calibration.read_entries(str(path))  # rewritten, readable again


class ReportingDevice(BuiltinDeviceDriver):
    """builtin_device reporting its own figures (capabilities()): 4x faster than the reference."""

    name = "calibration_reporting_device"

    def capabilities(self):
        return Capabilities({"float32": PerformanceInfo(0.25, 0.5)})


class BrokenDevice(BuiltinDeviceDriver):
    """builtin_device whose contexts cannot be created: it cannot be measured."""

    name = "calibration_broken_device"

    def create_context(self, device, properties, callback=None):
        from nnadapter_bridge.errors import NNAdapterError
        from nnadapter_bridge.nnadapter.codes import ResultCode

        raise NNAdapterError("simulated context failure", ResultCode.DEVICE_INTERNAL_ERROR)


@pytest.fixture
def odd_devices():
    manager = DeviceManager.instance()
    drivers = [ReportingDevice(), BrokenDevice()]
    for driver in drivers:
        manager.register(driver, replace=True)
    yield
    for driver in drivers:
        manager.unregister(driver.name)


def test_reported_figures_are_not_measured_and_an_unmeasurable_device_is_the_cpu(tmp_path, odd_devices):
    with pytest.warns(CalibrationWarning, match="calibration_broken_device"):
        result = calibrate([ReportingDevice.name, BrokenDevice.name], "BUILTIN_DEVICE_NUM_THREADS=1", str(tmp_path))
    assert result.measured == ["builtin_device"]
    reporting = result.figures(ReportingDevice.name)
    assert reporting.source == "driver" and reporting.capabilities.exec_time("float32", "conv") == 0.25
    assert reporting.seconds_per_flop["conv"] == pytest.approx(0.25 * result.reference.seconds_per_flop["conv"])
    broken = result.figures(BrokenDevice.name)
    assert broken.source == "none" and broken.capabilities.exec_time("float32") == 1.0


def test_the_calibrate_command_and_devices_show_the_figures(measured, capsys, monkeypatch):
    from nnadapter_bridge.cli import main

    cache_dir, properties, first = measured
    assert main(["calibrate", "--device", "intel_openvino", "--cache-dir", str(cache_dir), "--context-properties",
                 properties, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measured"] == [] and data["devices"][0]["device"] == "intel_openvino"
    assert main(["devices", "--cache-dir", str(cache_dir), "--json"]) == 0
    shown = {d["name"]: d["calibration"] for d in json.loads(capsys.readouterr().out)["devices"]}
    assert shown["intel_openvino"] is None  # devices shows the default thread setting's: only one-thread ones kept
    # The thread counts from the environment (as the drivers read them): the measured figures.
    monkeypatch.setenv("INTEL_OPENVINO_INFERENCE_NUM_THREADS", "1")
    monkeypatch.setenv("BUILTIN_DEVICE_NUM_THREADS", "1")
    assert main(["devices", "--cache-dir", str(cache_dir), "--json"]) == 0
    shown = {d["name"]: d["calibration"] for d in json.loads(capsys.readouterr().out)["devices"]}
    assert shown["intel_openvino"] == first.figures("intel_openvino").as_dict()
    assert main(["devices", "--cache-dir", str(cache_dir)]) == 0
    assert "calibration: execution time relative to builtin_device" in capsys.readouterr().out
    assert main(["calibrate", "--device", "no_such_device"]) != 0
