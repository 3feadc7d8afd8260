"""`nnadapter-bridge devices [--json]`: builtin_device (declared in pyproject's entry points) listed and loading;
a broken entry point is listed with the reason it fails to load."""
from __future__ import annotations

import importlib.metadata
import json

import pytest

from nnadapter_bridge.cli import main
from nnadapter_bridge.nnadapter.runtime import DeviceManager


@pytest.fixture
def manager_with_broken_entry_point(monkeypatch):
    manager = DeviceManager()
    manager._entry_points = {
        **manager._entry_point_map(),  # the installed ones
        "broken_device": importlib.metadata.EntryPoint(name="broken_device", value="no_such_module_for_tests:DRIVER",
                                                       group="nnadapter_bridge.devices"),
    }
    monkeypatch.setattr(DeviceManager, "_instance", manager)
    return manager


def test_devices_json_lists_builtin_device(capsys):
    assert main(["devices", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)["devices"]}
    builtin = listed["builtin_device"]
    assert (builtin["vendor"], builtin["type"], builtin["version"], builtin["loaded"]) == ("Paddle", "CPU", 1, True)


def test_devices_json_reports_why_a_driver_fails(manager_with_broken_entry_point, capsys):
    assert main(["devices", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)["devices"]}
    assert listed["broken_device"]["loaded"] is False
    assert "ModuleNotFoundError" in listed["broken_device"]["error"]
    assert listed["builtin_device"]["loaded"] is True


def test_devices_table(manager_with_broken_entry_point, capsys):
    assert main(["devices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "vendor", "type", "version", "status"]
    builtin = next(line for line in lines if line.startswith("builtin_device"))
    assert builtin.split() == ["builtin_device", "Paddle", "CPU", "1", "ok"]
    broken = next(line for line in lines if line.startswith("broken_device"))
    assert "fails to load: ModuleNotFoundError" in broken
