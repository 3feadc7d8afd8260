"""Shared pytest setup: the repo root on sys.path and the legacy (non-PIR) Paddle mode for fixtures."""
from __future__ import annotations

import os
import sys

import pytest

# Paddle reads this flag at import: the legacy ProgramDesc format this project reads needs it off.
os.environ.setdefault("FLAGS_enable_pir_api", "0")
os.environ.setdefault("GLOG_minloglevel", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
for sub in ("tests",):
    p = os.path.join(ROOT, sub)
    if p not in sys.path:
        sys.path.insert(0, p)
pytest_plugins = ["support.model_zoo_fixtures", "support.quant_fixtures", "support.real_zoo.fixtures"]


@pytest.fixture
def register_device():
    """register_device(driver) -> driver: a test driver in the DeviceManager under its own name, removed after the
    test (drivers that decline, fail or crash on purpose)."""
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    manager = DeviceManager.instance()
    names = []

    def add(driver):
        manager.register(driver, replace=True)
        names.append(driver.name)
        return driver

    yield add
    for name in names:
        manager.unregister(name)


@pytest.fixture(autouse=True)
def _paddle_mode_restored():
    """A test (or fixture) that switches paddle to static mode must not leave it there for the next test of
    the same worker: tests comparing with eager paddle would then fail depending on test order."""
    paddle = sys.modules.get("paddle")
    was_dynamic = paddle.in_dynamic_mode() if paddle is not None else True
    yield
    paddle = sys.modules.get("paddle")
    if paddle is not None and was_dynamic and not paddle.in_dynamic_mode():
        paddle.disable_static()
