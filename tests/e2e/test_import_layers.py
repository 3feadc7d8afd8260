"""The floors of pyproject.toml's [tool.importlinter], checked by import-linter in the suite: a reversed arrow
(the ground importing the HAL, one driver importing another, a converter importing the predictor, the runtime
importing the development tools) fails CI, with import-linter's report of the offending import chain; and a new
module of nnadapter_bridge that sits in no floor fails too."""
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
    assert re.search(rf"Contracts: {len(_contracts())} kept, 0 broken", done.stdout), done.stdout[-2000:]


def _contracts() -> list:
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["contracts"]


def _floors() -> list:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    return [set(re.split(r"\s*[|:]\s*", layer.strip())) for layer in layers["layers"]]


def test_every_module_of_the_package_sits_in_a_floor():
    """The layers contract lists floors, not a deny-list: a module added at the top of nnadapter_bridge (or a new
    subpackage) is checked only if it sits in a floor, so one that does not is an error here."""
    named = set().union(*_floors())
    package = os.path.join(ROOT, "nnadapter_bridge")
    children = set()
    for entry in os.listdir(package):
        path = os.path.join(package, entry)
        if entry.endswith(".py") and entry not in ("__init__.py", "__main__.py"):
            children.add(f"nnadapter_bridge.{entry[:-3]}")
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            children.add(f"nnadapter_bridge.{entry}")
    assert children - named == set(), "modules in no floor of pyproject's layers contract"
    assert {"converters", "partition", "hal"} <= named


def test_the_floors_are_in_the_order_the_architecture_draws():
    names = [sorted(floor) for floor in _floors()]
    assert names[0] == ["nnadapter_bridge.cli"]
    assert names.index(["nnadapter_bridge.predictor"]) < names.index(["converters", "hal", "partition"])
    assert names[-1] == ["nnadapter_bridge.errors", "nnadapter_bridge.nnadapter"]


def test_the_independence_contract_names_every_driver():
    """A driver package under hal/ that the contract does not list could import another driver unchecked."""
    (drivers,) = [c for c in _contracts() if c["name"] == "the drivers are independent of each other"]
    hal = os.path.join(ROOT, "hal")
    packages = sorted(f"hal.{name}" for name in os.listdir(hal)
                      if os.path.isfile(os.path.join(hal, name, "__init__.py")))
    assert sorted(drivers["modules"]) == packages
