"""Every PIR op name the translation knows, and what runs it.

`loader.pir.known_ops()` is the translation's vocabulary: each `pd_op.*` (and builtin/cf op) it accepts,
with the legacy op type it becomes. A name with neither a legacy mapping nor a converter of its own would
load and then run nowhere: the first test fails on any. The second asserts every op that paddle 3.3.1's
`jit.save` wrote into the PIR fixtures (the zoo and the PIR-only models) reaches a converter or a host
kernel, so those models run whatever the devices.
"""
from __future__ import annotations

import json

import pytest

import converters  # noqa: F401  (registers every converter)
from converters.registry import CONVERTERS
from devtools import zoo
from nnadapter_bridge.host.kernels import HOST_KERNELS
from nnadapter_bridge.loader import pir

# Legacy op types the predictor itself handles (feed/fetch are its inputs and outputs).
PREDICTOR_OPS = {"feed", "fetch"}


def _runs(legacy: str | None, pir_name: str) -> bool:
    return legacy in CONVERTERS or legacy in HOST_KERNELS or legacy in PREDICTOR_OPS or pir_name in CONVERTERS


def test_every_known_pir_op_has_a_legacy_mapping_or_a_converter():
    known = pir.known_ops()
    assert len(known) > 200, f"the translation knows only {len(known)} PIR ops"
    unmapped = sorted(name for name, legacy in known.items()
                      if legacy is None and name not in pir.SPECIAL_LEGACY and name not in CONVERTERS)
    assert not unmapped, f"PIR ops with neither a legacy mapping nor a converter: {unmapped}"
    for name, legacy in pir.SPECIAL_LEGACY.items():
        assert legacy is None or _runs(legacy, name), f"{name} becomes {legacy}, which nothing runs"
    runnable = sorted(n for n, legacy in known.items() if legacy is not None and _runs(legacy, n))
    # The list, as the closing note and docs/pir.md report it.
    print(f"{len(known)} PIR ops known; {len(runnable)} reach a converter or a host kernel")


def _ops_in(doc) -> set:
    names = set()

    def walk(ops):
        for op in ops:
            names.add(op["#"])
            for region in op.get("regions", []):
                for block in region["blocks"]:
                    walk(block["ops"])

    for region in doc["program"]["regions"]:
        for block in region["blocks"]:
            walk(block["ops"])
    return names


@pytest.mark.slow
def test_every_op_in_the_pir_fixtures_runs(pir_model):
    known = pir.known_ops()
    missing = {}
    for name in zoo.MODELS + zoo.EXTRA_MODELS + zoo.PIR_MODELS:
        with open(pir_model(name), "rb") as f:
            doc = json.load(f)
        for short in _ops_in(doc):
            if short == "p":
                continue
            dialect, _, op = short.partition(".")
            full = f"{pir.DIALECTS[dialect]}.{op}"
            assert full in known, f"{name}: {full} is not known to the translation"
            legacy = known[full]
            if legacy is not None and not _runs(legacy, full):
                missing.setdefault(full, []).append(name)
    assert not missing, f"PIR ops in the fixtures that nothing runs: {missing}"
