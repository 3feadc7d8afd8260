"""The example driver's test suite is the conformance kit: every operation it claims, in every precision it
claims, against the NNAdapter reference, plus random graphs, the .nnc round trip and the stress phase.

    pip install -e .[test] && pytest            # the kit at its default level (seconds)
    CONFORMANCE_LEVEL=full pytest               # many more variants and stress iterations
"""
import os

import pytest

from nnadapter_bridge.conformance import run_conformance
from nnadapter_bridge.nnadapter.runtime import DeviceManager

DEVICE = "example_device"
LEVEL = os.environ.get("CONFORMANCE_LEVEL", "quick")


@pytest.fixture(scope="module")
def report():
    return run_conformance(DEVICE, level=LEVEL, seed=int(os.environ.get("CONFORMANCE_SEED", "0")))


def test_the_entry_point_finds_the_driver():
    assert DEVICE in DeviceManager.instance().names()
    assert DeviceManager.instance().driver(DEVICE).name == DEVICE


def test_every_claim_conforms(report):
    print(report.table(only_claimed=True))
    assert report.passed, "\n".join(report.failures())


def test_it_claims_what_it_implements(report):
    claimed = {row.operation for row in report.operations if row.claimed}
    assert claimed == {"ADD", "SUB", "MUL", "RELU", "CONV_2D", "FULLY_CONNECTED"}
    assert not report.declared_not_claimed
    assert report.graphs["passed"] > 0, "no random graph of its operations was claimed"
