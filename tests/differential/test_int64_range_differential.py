"""The differential tester's int64 cases on values beyond int32 (issue 32), against Paddle Inference.

Every case of the CI seed (cases.generate_cases) with an int64 input is drawn again with its int64 values times
WIDEN (3,000,000,019: odd and above 2^31, so a value's low 32 bits say little about it: an int32 computation
cannot pass by luck), and run like the base cases: batched into Paddle programs in the mode the base run built
each case in (its cached manifest, programs.ensure_programs), Paddle Inference's outputs as the truth (in the
isolated child, batches halved until the cases Paddle rejects are discarded: an index times WIDEN is out of
range), then our predictor on each device, judged by runner.judge (integers exact). The batches and Paddle's
outputs are cached under the fixture root, keyed by the content of the files that make them (_cache_key).

This module reuses the tester's machinery read-only (cases, export, programs, runner); it adds no case set there.
WIDE_KNOWN lists the (op type, device) groups that differ on these values today, with the cause; a failure no
entry covers fails the test, and so does an entry that matches no failure.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings

import numpy as np
import pytest

from differential import programs, runner
from differential.cases import CASES_PER_OP, DEFAULT_SEED, generate_cases
from support.fixture_cache import build_once
from support.model_zoo_fixtures import fixture_root

WIDEN = 3_000_000_019
SUFFIX = ".wide"

# (op type, device) -> why it differs from Paddle on int64 beyond int32.
_POW = ("Paddle's integer elementwise_pow goes through std::pow in double and converts back, so a power beyond int64 "
        "gives INT64_MIN (x86's conversion of an out-of-range double); the NNAdapter reference (builtin_device and "
        "the host, where both SDK drivers send integer POW) multiplies in int64 and wraps")
WIDE_KNOWN: dict = {("elementwise_pow", device): _POW for device in runner.DEVICES}


def _widened(case):
    feeds = {name: (a * np.int64(WIDEN) if a.dtype == np.int64 else a) for name, a in case.feeds.items()}
    return dataclasses.replace(case, case_id=case.case_id + SUFFIX, feeds=feeds, variant=case.variant + "-wide")


def _wide_cases(mode_of: dict) -> list:
    return [_widened(c) for c in generate_cases(DEFAULT_SEED, CASES_PER_OP)
            if c.case_id in mode_of and any(np.asarray(a).dtype == np.int64 and np.asarray(a).size
                                            for a in c.feeds.values())]


def _base_modes() -> dict:
    """case id -> the static mode the base run built it in (cases Paddle rejected there are absent)."""
    _, manifest = programs.ensure_programs(DEFAULT_SEED, CASES_PER_OP)
    return {case["id"]: batch["mode"] for batch in manifest["batches"] for case in batch["cases"]}


def _build(staging: str) -> str:
    mode_of = _base_modes()
    cases = _wide_cases(mode_of)
    paddle = programs.IsolatedPaddle()
    batches, discarded, counter = [], [], [0]
    try:
        for mode in ("legacy", "pir"):
            chosen = [c for c in cases if mode_of[c.case_id[: -len(SUFFIX)]] == mode]
            for chunk in programs._chunks(chosen, programs.BATCH_SIZE):
                batches += programs._solve(chunk, mode, staging, counter, discarded, paddle)
    finally:
        paddle.close()
    with open(os.path.join(staging, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({"widen": WIDEN, "cases": len(cases), "batches": batches, "discarded": discarded}, f, indent=1)
    return f"{len(cases)} cases\n"


def _cache_key() -> str:
    """Keyed by the content of the tester's files that make the cases and programs (and of this module)."""
    digest = hashlib.sha1()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("cases.py", "programs.py", "export.py", os.path.basename(__file__)):
        path = os.path.join(here, name)
        if os.path.exists(path):
            with open(path, "rb") as f:
                digest.update(f.read())
    return f"differential-int64-{digest.hexdigest()[:12]}-s{DEFAULT_SEED}-n{CASES_PER_OP}"


@pytest.fixture(scope="module")
def wide_programs():
    key = _cache_key()
    root = build_once(fixture_root(), key, _build)
    with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
        return root, json.load(f)


def _judge(case: dict, got: list, want: list, device: str) -> runner.Outcome:
    start, count = case["fetch"]
    for k in range(count):
        cause, detail = runner.judge(np.asarray(got[k]), np.asarray(want[start + k]))
        if cause:
            return runner.Outcome(case, device, False, cause, f"output {k}: {detail}")
    return runner.Outcome(case, device, True)


def _alone(case: dict, mode: str, batch_want: list, device: str, scratch: str, cases_by_id: dict) -> runner.Outcome:
    """A case of a batch the predictor failed on, exported and run alone (Paddle's outputs: the batch's)."""
    directory = os.path.join(scratch, case["id"])
    record = programs.export([cases_by_id[case["id"]]], mode, directory)
    start, count = case["fetch"]
    alone = dict(record["cases"][0], fetch=[0, count])
    try:
        got = runner.predictor_outputs(directory, record, device)
    except Exception as exc:  # noqa: BLE001 - a failure of ours is the finding
        return runner.Outcome(case, device, False, "error", f"{type(exc).__name__}: {str(exc)[:240]}")
    return _judge(alone, got, batch_want[start:start + count], device)


@pytest.mark.parametrize("device", runner.DEVICES)
def test_int64_beyond_int32_matches_paddle_inference(device, wide_programs, tmp_path):
    root, manifest = wide_programs
    assert manifest["batches"], "no int64 case beyond int32 survived: the draw or the base run changed"
    cases_by_id = None
    outcomes = []
    for batch in manifest["batches"]:
        directory = os.path.join(root, batch["dir"])
        want = programs.load_want(directory)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # intel_openvino hands such parts elsewhere, with a warning
                got = runner.predictor_outputs(directory, batch, device)
        except Exception:  # noqa: BLE001 - find the cases that fail alone
            if cases_by_id is None:
                cases_by_id = {c.case_id: c for c in _wide_cases(_base_modes())}
            outcomes += [_alone(c, batch["mode"], want, device, str(tmp_path), cases_by_id) for c in batch["cases"]]
            continue
        outcomes += [_judge(c, got[c["fetch"][0]:c["fetch"][0] + c["fetch"][1]], want, device)
                     for c in batch["cases"]]
    failed = [o for o in outcomes if not o.passed]
    unexpected = [o for o in failed if (o.case["op_type"], device) not in WIDE_KNOWN]
    stale = [key for key in WIDE_KNOWN if key[1] == device and not any(o.case["op_type"] == key[0] for o in failed)]
    assert not unexpected, f"{device}: {len(unexpected)} of {len(outcomes)} int64 cases beyond int32 differ from " \
        "Paddle:\n" + "\n".join(f"  {o.case['id']} ({o.case['dtype']}, {o.case['attrs']}): {o.cause}: {o.detail}"
                                for o in unexpected[:40])
    assert not stale, f"{device}: WIDE_KNOWN entries that match no failure any more (remove them): {stale}"
