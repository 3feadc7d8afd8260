"""The differential tester's program building: cases built side by side into one Paddle program and saved.

Imports numpy, paddle and the case generator only, so the same code runs in the test venv (paddle 3.3.1: legacy
programs with FLAGS_enable_pir_api=0, which tests/conftest.py sets, and PIR programs) and in the Python 3.10 side
venv (paddle 2.6.2: legacy programs; tests/differential/side262.py). Must not import nnadapter_bridge or the
test support modules (the side venv has neither's dependencies).
"""
from __future__ import annotations

import contextlib
import os
import warnings

import numpy as np

from differential.cases import generate_cases, sweep_cases

CASE_SETS = {"base": generate_cases, "sweep": sweep_cases}


def cases_of(case_set: str, seed: int, cases_per_op: int) -> list:
    return CASE_SETS[case_set](seed, cases_per_op)


@contextlib.contextmanager
def static_mode(mode: str):
    """paddle's legacy static mode, or PIR static mode (`mode == "pir"`), for the block; the previous mode after."""
    import paddle

    was_dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        if mode == "pir":
            from paddle import pir_utils

            with pir_utils.IrGuard():
                yield paddle
        else:
            yield paddle
    finally:
        if was_dynamic:
            paddle.disable_static()


def _build_into(paddle, cases, prefix_of) -> tuple:
    """Build `cases` into the current program; ({feed name: var}, [fetch vars], {case id: (start, count)})."""
    inputs, fetches, slots = {}, [], {}
    for case in cases:
        prefix = prefix_of(case)
        local = {}
        for name, array in case.feeds.items():
            var = paddle.static.data(prefix + name, shape=list(array.shape), dtype=str(array.dtype))
            inputs[prefix + name] = var
            local[name] = var
        outs = case.build(paddle, **local)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        slots[case.case_id] = (len(fetches), len(outs))
        fetches.extend(outs)
    return inputs, fetches, slots


def probe(case, modes=("legacy", "pir")) -> str | None:
    """The first static mode of `modes` that builds `case` ("legacy" or "pir"), None when none does."""
    for mode in modes:
        try:
            with warnings.catch_warnings(), static_mode(mode) as paddle:
                warnings.simplefilter("ignore")
                main, startup = paddle.static.Program(), paddle.static.Program()
                with paddle.static.program_guard(main, startup):
                    _build_into(paddle, [case], lambda c: "")
            return mode
        except Exception:  # noqa: BLE001 - Paddle's build rejects the case in this mode
            continue
    return None


def export(cases, mode: str, directory: str, record_mode: str | None = None) -> dict:
    """Save `cases` as one program in `directory`; the batch record (model, feeds, fetch slots). `record_mode`
    names the format in the record when it is not `mode` itself ("legacy262": legacy mode of paddle 2.6.2)."""
    os.makedirs(directory, exist_ok=True)
    prefix_of = {c.case_id: f"c{k}_" for k, c in enumerate(cases)}
    with warnings.catch_warnings(), static_mode(mode) as paddle:
        warnings.simplefilter("ignore")
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            inputs, fetches, slots = _build_into(paddle, cases, lambda c: prefix_of[c.case_id])
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(os.path.join(directory, "model"), list(inputs.values()), fetches,
                                               exe, program=main)
    model = "model.json" if mode == "pir" else "model.pdmodel"
    feeds = {prefix_of[c.case_id] + n: a for c in cases for n, a in c.feeds.items()}
    np.savez(os.path.join(directory, "feeds.npz"), **feeds)
    return {"dir": os.path.basename(directory), "mode": record_mode or mode, "model": model,
            "params": "model.pdiparams" if os.path.exists(os.path.join(directory, "model.pdiparams")) else None,
            "cases": [{"id": c.case_id, "op_type": c.op_type, "dtype": c.dtype, "variant": c.variant,
                       "attrs": c.attrs, "shapes": {n: list(a.shape) for n, a in c.feeds.items()},
                       "fetch": list(slots[c.case_id])} for c in cases]}
