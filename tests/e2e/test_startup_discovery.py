"""Issue 31: a device of this distribution is loaded by its entry point as pyproject.toml declares it
(runtime.devices.OWN_ENTRY_POINTS), without reading every installed distribution's metadata (importlib.metadata,
~30 ms of a warm start); the installed entry points still decide once they were read, and still find any other
driver."""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap

import pytest

from nnadapter_bridge.nnadapter.driver_protocol import ENTRY_POINT_GROUP
from nnadapter_bridge.nnadapter.runtime import DeviceManager
from nnadapter_bridge.nnadapter.runtime.devices import OWN_ENTRY_POINTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_own_entry_points_are_the_ones_pyproject_declares_and_installed():
    tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        declared = tomllib.load(f)["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert OWN_ENTRY_POINTS == declared
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
                 if ep.name in OWN_ENTRY_POINTS}
    assert installed == declared, "reinstall the checkout (pip install -e .): its metadata is stale"


def test_an_own_device_loads_without_reading_metadata_and_another_by_its_entry_point():
    """A fresh process: builtin_device loads from OWN_ENTRY_POINTS (importlib.metadata never imported); a name
    only an installed entry point declares is then found by reading the entry points, which decide from then on."""
    script = textwrap.dedent("""
        import sys
        from nnadapter_bridge.nnadapter.runtime import DeviceManager
        manager = DeviceManager.instance()
        device = manager.acquire("builtin_device")
        assert "importlib.metadata" not in sys.modules, "an own device read the installed metadata"
        assert manager._sources["builtin_device"] == "entry point hal.builtin_device:DRIVER"
        import hal.builtin_device
        assert device.driver is hal.builtin_device.DRIVER
        try:
            manager.acquire("third_party_device")
        except Exception as exc:
            print(type(exc).__name__, "importlib.metadata" in sys.modules)
    """)
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.split() == ["DeviceNotFoundError", "True"]


def test_once_read_the_installed_entry_points_decide():
    """A manager whose entry points were read (here: set, as if this distribution's metadata were missing) does
    not fall back to OWN_ENTRY_POINTS, and one whose entry point names another value loads that one."""
    manager = DeviceManager()
    manager._entry_points = {}
    assert manager.names() == [] and not manager.is_declared("builtin_device")
    other = importlib.metadata.EntryPoint(name="builtin_device", value="no_such_module_for_tests:DRIVER",
                                          group=ENTRY_POINT_GROUP)
    manager._entry_points = {"builtin_device": other}
    assert manager.unavailable_reason("builtin_device") == ""
    assert "no_such_module_for_tests" in manager._failures["builtin_device"]
