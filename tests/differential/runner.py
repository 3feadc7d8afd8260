"""The differential tester's other side: our predictor on every cached batch, on one device, judged case by
case against Paddle Inference's outputs.

A batch runs as one predictor (one create, one run). When the predictor fails on a whole batch (creation or
run raises), the batch is halved (sub-programs exported on demand by `programs.program_for`) until the cases
that fail alone are found; each of those is a failed case ("error"), the others are judged normally.

A case passes when each of its outputs has Paddle's shape and dtype and its values are within the
per-operation bound of nnadapter_bridge.validation.tolerances (|got-want| <= OP_ATOL + OP_RTOL*|want|; integers and
booleans exact; an infinity or NaN only by the same value).
"""
from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np

from differential import programs
from nnadapter_bridge.validation.tolerances import op_bound, out_of_bound

DEVICES = ("builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack")


@dataclasses.dataclass
class Outcome:
    case: dict          # the manifest record of the case
    device: str
    passed: bool
    cause: str = ""     # error / shape / dtype / nonfinite / value
    detail: str = ""


def predictor_outputs(directory: str, record: dict, device: str) -> list:
    """Our predictor on a saved program, on `device` only (host ops aside); outputs in fetch order."""
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(os.path.join(directory, record["model"]))
    if record["params"]:
        config.set_param_file(os.path.join(directory, record["params"]))
    config.set_nnadapter_device_names([device])
    feeds = programs.load_feeds(directory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        predictor = nb.create_predictor(config)
        try:
            for name in predictor.get_input_names():
                predictor.get_input_by_name(name).from_numpy(np.asarray(feeds[name]))
            predictor.run()
            return [np.asarray(predictor.get_output(k).numpy()) for k in range(len(predictor.get_output_names()))]
        finally:
            predictor.close()


def judge(got: np.ndarray, want: np.ndarray) -> tuple:
    """(cause, detail) of the first difference of `got` from Paddle's `want`; ("", "") when it matches."""
    if got.shape != want.shape:
        return "shape", f"shape {list(got.shape)} != Paddle's {list(want.shape)}"
    if got.dtype != want.dtype:
        return "dtype", f"dtype {got.dtype} != Paddle's {want.dtype}"
    if want.dtype.kind in "biu":
        if not np.array_equal(got, want):
            i = np.argwhere(got != want)[0]
            return "value", f"at {tuple(int(v) for v in i)}: {got[tuple(i)]!r} != {want[tuple(i)]!r}"
        return "", ""
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    bad = out_of_bound(got64, want64, op_bound(want64))
    if not bad.any():
        return "", ""
    i = tuple(int(v) for v in np.argwhere(bad)[0]) if bad.ndim else ()
    cause = "nonfinite" if (not np.isfinite(want64[i]) or not np.isfinite(got64[i])) else "value"
    return cause, f"{int(bad.sum())}/{bad.size} elements differ; at {i}: {got64[i]!r} != {want64[i]!r}"


def _judge_case(case: dict, got: list, want: list, device: str) -> Outcome:
    start, count = case["fetch"]
    for k in range(count):
        cause, detail = judge(np.asarray(got[k]), np.asarray(want[start + k]))
        if cause:
            return Outcome(case, device, False, cause, f"output {k}: {detail}")
    return Outcome(case, device, True)


def run_batch(seed: int, cases_per_op: int, directory: str, record: dict, device: str) -> list:
    """Every case of a cached batch on `device`: [Outcome]."""
    want = programs.load_want(directory)
    cases = [dict(c, format=record["mode"]) for c in record["cases"]]  # failures name the program format
    return _run(os.path.dirname(directory), seed, cases_per_op, directory, record, cases, want, device)


def _run(root, seed, cases_per_op, directory, record, cases, want, device) -> list:
    try:
        got = predictor_outputs(directory, record, device)
    except Exception as exc:  # noqa: BLE001 - a failure of ours: find the cases that cause it
        if len(cases) == 1:
            message = str(exc).strip().splitlines()[0][:240] if str(exc).strip() else ""
            return [Outcome(cases[0], device, False, "error", f"{type(exc).__name__}: {message}")]
        half = len(cases) // 2
        outcomes = []
        for part in (cases[:half], cases[half:]):
            sub_dir, sub_record = programs.program_for(root, seed, cases_per_op, [c["id"] for c in part],
                                                       record["mode"], record.get("set", "base"))
            # the sub-program fetches its cases in the same order; Paddle's outputs stay the batch's
            positions = {c["id"]: c["fetch"] for c in sub_record["cases"]}
            sub_want_cases = [dict(c, fetch=positions[c["id"]]) for c in part]
            sub_want = _regather(part, positions, want)
            sub_record["set"] = record.get("set", "base")
            outcomes.extend(_run(root, seed, cases_per_op, sub_dir, sub_record, sub_want_cases, sub_want, device))
        return outcomes
    expected = sum(c["fetch"][1] for c in cases)
    if len(got) != expected:
        return [Outcome(c, device, False, "error", f"the predictor fetched {len(got)} outputs, not {expected}")
                for c in cases]
    return [_judge_case(c, got[c["fetch"][0]:c["fetch"][0] + c["fetch"][1]], want, device) for c in cases]


def _regather(part: list, positions: dict, want: list) -> list:
    """Paddle's outputs of `part` (positions in the batch) laid out at the positions of the sub-program."""
    size = sum(positions[c["id"]][1] for c in part)
    out = [None] * size
    for c in part:
        start, count = c["fetch"]
        new_start = positions[c["id"]][0]
        out[new_start:new_start + count] = want[start:start + count]
    return out
