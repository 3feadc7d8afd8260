"""The layer contracts of pyproject.toml's [tool.importlinter], checked by import-linter in the suite: a
reversed arrow (the ground importing the HAL, one driver importing another, a converter importing the
predictor) fails CI, with import-linter's report of the offending import chain."""
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_layer_contracts_hold():
    # import-linter's entry point, run by this interpreter so the venv's packages are the ones analysed
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    done = subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert re.search(r"Contracts: 5 kept, 0 broken", done.stdout), done.stdout[-2000:]


def test_contracts_cover_every_layer():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    for name in ("the ground imports nothing above it", "converters, partition and hal import only the ground",
                 "converters, partition and hal are independent of each other",
                 "the drivers are independent of each other",
                 "the host executor runs operations through the standard, not through a driver"):
        assert f'name = "{name}"' in text


def test_the_independence_contract_names_every_driver():
    """A driver package under hal/ that the contract does not list could import another driver unchecked."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (drivers,) = [c for c in contracts if c["name"] == "the drivers are independent of each other"]
    hal = os.path.join(ROOT, "hal")
    packages = sorted(f"hal.{name}" for name in os.listdir(hal)
                      if os.path.isfile(os.path.join(hal, name, "__init__.py")))
    assert sorted(drivers["modules"]) == packages
