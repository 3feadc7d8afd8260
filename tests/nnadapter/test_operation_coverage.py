"""Coverage of the NNAdapter standard: every operation code of nnadapter.h has a signature, a prepare
(shape inference) step and a numpy reference, all three in one family module of the standard, that
builtin_device runs, and at least one test that runs it; and the number of collected operation tests
stays above a floor."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from hal.builtin_device import DRIVER as BUILTIN_DEVICE
from nnadapter_bridge.nnadapter.codes import OperationType
from nnadapter_bridge.nnadapter.operations import FAMILY_MODULES, OPERATIONS, REFERENCES

HERE = os.path.dirname(os.path.abspath(__file__))
OPERATION_TESTS = os.path.join(HERE, "operations")
MIN_COLLECTED_OPERATION_TESTS = 400


def test_the_operation_codes_are_nnadapter_h_s():
    # The count comes from the code and the reference list, never a literal: a new operation adds its line to
    # tests/support/data/nnadapter_operations.txt and its member to codes.py, and this test covers it unchanged.
    assert [op.value for op in OperationType] == list(range(len(OperationType)))
    # The numbers are part of the .nnc format: every (code, name) pair as nnadapter.h declares it.
    reference = os.path.join(os.path.dirname(HERE), "support", "data", "nnadapter_operations.txt")
    with open(reference, encoding="utf-8") as f:
        declared = [(int(line.split()[0]), line.split()[1]) for line in f if line.strip() and not line.startswith("#")]
    assert declared == [(op.value, op.name) for op in OperationType]
    assert len(OperationType.__members__) == len(OperationType), "an operation name is an alias of another code"


@pytest.mark.parametrize("op", list(OperationType), ids=lambda o: o.name)
def test_operation_has_signature_prepare_and_reference(op):
    spec = OPERATIONS.get(op)
    assert spec is not None, f"{op.name} has no signature/prepare registered"
    assert callable(spec.prepare)
    assert spec.inputs, f"{op.name} signature lists no inputs"
    assert spec.outputs, f"{op.name} signature lists no outputs"
    reference = REFERENCES.get(op)
    assert reference is not None and callable(reference.fn), f"{op.name} has no reference in the standard"
    assert reference.fn.__module__.startswith("nnadapter_bridge.nnadapter.operations."), \
        f"{op.name}'s reference lives outside the standard ({reference.fn.__module__})"
    # The standard owns each operation whole: one family module holds its signature, prepare and reference.
    assert reference.fn.__module__ == spec.prepare.__module__, \
        f"{op.name}: reference in {reference.fn.__module__}, signature in {spec.prepare.__module__}"
    family = reference.fn.__module__.rsplit(".", 1)[1]
    assert family in FAMILY_MODULES, f"{op.name} is registered from {family}, which is not a family module"
    assert op in BUILTIN_DEVICE.operation_types(), f"builtin_device does not run {op.name}"


def _test_sources() -> str:
    text = []
    for name in sorted(os.listdir(OPERATION_TESTS)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(OPERATION_TESTS, name), encoding="utf-8") as f:
                text.append(f.read())
    return "\n".join(text)


@pytest.mark.parametrize("op", list(OperationType), ids=lambda o: o.name)
def test_operation_is_exercised_by_a_test(op):
    # Tests refer to operations as `T.NAME` or `OperationType.NAME`.
    pattern = re.compile(rf"\b(?:T|OperationType)\.{op.name}\b")
    assert pattern.search(_test_sources()), f"no test in tests/nnadapter/operations mentions {op.name}"


def test_collected_operation_tests_floor():
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", OPERATION_TESTS],
                            capture_output=True, text=True, cwd=os.path.dirname(HERE))
    match = re.search(r"(\d+) tests? collected", result.stdout)
    assert match, f"could not read the collection count:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    assert int(match.group(1)) >= MIN_COLLECTED_OPERATION_TESTS
