"""The differential tester's programs: cases batched into Paddle programs, Paddle Inference's outputs for them
(the truth), and the cache that keeps both between sessions.

Every case is first built alone in a throwaway program, in paddle's legacy static mode and, when that fails
(paddle 3.3.1 cannot build matmul, sigmoid, ... there), in PIR static mode; a case neither mode builds is
discarded. These probes run in a child process too (see below): a few of paddle's legacy shape inferences abort
the process. The accepted cases of one mode are built side by side into programs of up to BATCH_SIZE
independent cases (feeds `c<k>_<input>`, each case's outputs fetched), saved (`.pdmodel` or PIR `.json`) and
run once on Paddle Inference (CPU, oneDNN and IR optimization off, one thread), in a child process so that a
Paddle kernel that crashes or hangs loses only that batch. When Paddle Inference fails on a batch, the batch is
halved until the cases it rejects are found and discarded.

The cache: `<fixture root>/differential-g<GENERATOR_VERSION>-s<seed>-n<cases per op>/` holds `manifest.json`
(the batches, their cases and every case's fetch positions), each batch's program, `feeds.npz` and
`paddle.npz`. It is built under an exclusive file lock and marked COMPLETE last, like the model-zoo fixtures,
so pytest-xdist workers build it once. `program_for(...)` exports sub-batches (when a predictor fails on a
whole batch and the runner needs the failing case) into `split/` the same way.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import warnings

import numpy as np

from differential.cases import CASES_PER_OP, GENERATOR_VERSION, generate_cases
from support.converter_harness import paddle_inference_run

BATCH_SIZE = 48
PADDLE_TIMEOUT_S = 120.0  # one batch on Paddle Inference takes well under a second
_MARKER = "COMPLETE"


def cache_dir(seed: int, cases_per_op: int = CASES_PER_OP) -> str:
    from support.model_zoo_fixtures import fixture_root

    return os.path.join(fixture_root(), f"differential-g{GENERATOR_VERSION}-s{seed}-n{cases_per_op}")


# -- building ----------------------------------------------------------------------------------------------------


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
    """The static mode that builds `case` ("legacy" or "pir"), None when neither does."""
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


def export(cases, mode: str, directory: str) -> dict:
    """Save `cases` as one program in `directory`; the batch record (model, feeds, fetch slots)."""
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
    return {"dir": os.path.basename(directory), "mode": mode, "model": model,
            "params": "model.pdiparams" if os.path.exists(os.path.join(directory, "model.pdiparams")) else None,
            "cases": [{"id": c.case_id, "op_type": c.op_type, "dtype": c.dtype, "variant": c.variant,
                       "attrs": c.attrs, "shapes": {n: list(a.shape) for n, a in c.feeds.items()},
                       "fetch": list(slots[c.case_id])} for c in cases]}


def load_feeds(directory: str) -> dict:
    with np.load(os.path.join(directory, "feeds.npz")) as data:
        return {name: data[name] for name in data.files}


def paddle_inference(directory: str, record: dict) -> list:
    """Paddle Inference on a saved batch: its outputs in fetch order."""
    params = os.path.join(directory, record["params"]) if record["params"] else None
    return paddle_inference_run(os.path.join(directory, record["model"]), params, load_feeds(directory))


class PaddleCrashed(RuntimeError):
    """Paddle killed its process (abort, SIGSEGV) or hung."""


def _in_child(fn, *args):
    """Run `fn` in the isolated child, Paddle's fatal-signal handlers off: a process Paddle aborts then dies at
    once (its handler would print a C++ traceback and can hang)."""
    import paddle

    paddle.disable_signal_handler()
    return fn(*args)


class IsolatedPaddle:
    """Paddle in a child process (spawned once, reused, respawned after a loss), so a Paddle kernel or shape
    inference that aborts, crashes or hangs on some input (paddle 3.3.1 has such: unique along an axis of an
    empty tensor, nll_loss over [N, C, H, W] and now and then over [N, C], repeat_interleave with axis -1 in
    legacy mode) loses that call instead of killing or stalling the test process: a batch is then halved like
    any batch Paddle rejects, a probe retried case by case."""

    def __init__(self, timeout_s: float = PADDLE_TIMEOUT_S):
        self.timeout_s = timeout_s
        self.pool = None

    def call(self, fn, *args):
        import concurrent.futures
        import multiprocessing

        if self.pool is None:
            self.pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        future = self.pool.submit(_in_child, fn, *args)
        try:
            return future.result(timeout=self.timeout_s)
        except (concurrent.futures.process.BrokenProcessPool, concurrent.futures.TimeoutError) as exc:
            self.close()
            raise PaddleCrashed(f"Paddle crashed or hung (its process was lost: {type(exc).__name__})") from None

    def run(self, directory: str, record: dict) -> list:
        """Paddle Inference on a saved batch."""
        return self.call(paddle_inference, directory, record)

    def close(self) -> None:
        if self.pool is not None:
            for process in list(getattr(self.pool, "_processes", {}).values()):
                process.kill()  # a hung child would block shutdown
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None


# -- the cache -----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: str):
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _chunks(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def _solve(cases, mode, staging, counter, discarded, paddle: IsolatedPaddle) -> list:
    """Export `cases` and run Paddle Inference; halve on failure. The batch records Paddle ran."""
    directory = os.path.join(staging, f"b{counter[0]:03d}")
    counter[0] += 1
    try:
        record = export(cases, mode, directory)
        want = paddle.run(directory, record)
    except Exception as exc:  # noqa: BLE001 - Paddle (export or Inference) rejects something in the batch
        shutil.rmtree(directory, ignore_errors=True)
        if len(cases) == 1:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            reason = next((line for line in lines if line.startswith("(")), lines[-1] if lines else type(exc).__name__)
            discarded.append({"id": cases[0].case_id, "op_type": cases[0].op_type,
                              "reason": f"Paddle Inference: {reason[:200]}"})
            return []
        half = len(cases) // 2
        return (_solve(cases[:half], mode, staging, counter, discarded, paddle)
                + _solve(cases[half:], mode, staging, counter, discarded, paddle))
    np.savez(os.path.join(directory, "paddle.npz"), **{f"o{k}": a for k, a in enumerate(want)})
    return [record]


def ensure_programs(seed: int, cases_per_op: int = CASES_PER_OP) -> tuple:
    """(cache directory, manifest) of `seed`, generating and running Paddle first when not cached."""
    final = cache_dir(seed, cases_per_op)
    manifest_path = os.path.join(final, "manifest.json")
    if not os.path.isfile(os.path.join(final, _MARKER)):
        root = os.path.dirname(final)
        with _locked(os.path.join(root, f".{os.path.basename(final)}.lock")):
            if not os.path.isfile(os.path.join(final, _MARKER)):
                if os.path.exists(final):
                    shutil.rmtree(final)  # interrupted by hand: rebuild
                staging = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}-", dir=root)
                try:
                    manifest = _generate(seed, cases_per_op, staging)
                    with open(os.path.join(staging, "manifest.json"), "w") as f:
                        json.dump(manifest, f, indent=1)
                    with open(os.path.join(staging, _MARKER), "w") as f:
                        f.write(f"generator {GENERATOR_VERSION} seed {seed}\n")
                    os.rename(staging, final)
                except BaseException:
                    shutil.rmtree(staging, ignore_errors=True)
                    raise
    with open(manifest_path) as f:
        return final, json.load(f)


_CHILD_CASES: dict = {}


def _probe_in_child(seed: int, cases_per_op: int, indices: list, modes: tuple) -> list:
    """(In the isolated child) the probe of cases `indices` of the seed's generated list."""
    key = (seed, cases_per_op)
    if key not in _CHILD_CASES:
        _CHILD_CASES.clear()
        _CHILD_CASES[key] = generate_cases(seed, cases_per_op)
    cases = _CHILD_CASES[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [probe(cases[i], modes) for i in indices]


def _probe_all(seed: int, cases_per_op: int, count: int, paddle: IsolatedPaddle) -> list:
    """Every case's static mode (None: Paddle cannot build it; "crash": building it kills Paddle in both modes),
    probed in the isolated child: in chunks, a lost chunk case by case, a case lost in legacy mode again in PIR
    mode alone."""
    modes = []
    for chunk in _chunks(list(range(count)), 200):
        try:
            modes += paddle.call(_probe_in_child, seed, cases_per_op, chunk, ("legacy", "pir"))
            continue
        except PaddleCrashed:
            pass
        for i in chunk:
            try:
                modes += paddle.call(_probe_in_child, seed, cases_per_op, [i], ("legacy", "pir"))
            except PaddleCrashed:
                try:
                    modes += paddle.call(_probe_in_child, seed, cases_per_op, [i], ("pir",))
                except PaddleCrashed:
                    modes.append("crash")
    return modes


def _generate(seed: int, cases_per_op: int, staging: str) -> dict:
    cases = generate_cases(seed, cases_per_op)
    by_mode = {"legacy": [], "pir": []}
    discarded = []
    paddle = IsolatedPaddle()
    try:
        for case, mode in zip(cases, _probe_all(seed, cases_per_op, len(cases), paddle)):
            if mode is None or mode == "crash":
                reason = "Paddle cannot build it" if mode is None else "building it crashes Paddle"
                discarded.append({"id": case.case_id, "op_type": case.op_type, "reason": reason})
            else:
                by_mode[mode].append(case)
        batches, counter = [], [0]
        for mode, accepted in by_mode.items():
            for chunk in _chunks(accepted, BATCH_SIZE):
                batches.extend(_solve(chunk, mode, staging, counter, discarded, paddle))
    finally:
        paddle.close()
    return {"generator": GENERATOR_VERSION, "seed": seed, "cases_per_op": cases_per_op,
            "generated": len(cases), "batches": batches, "discarded": discarded}


def program_for(seed: int, cases_per_op: int, case_ids: list, mode: str) -> tuple:
    """(directory, record) of a program holding only `case_ids` (cut from a batch), exported on first use."""
    root = cache_dir(seed, cases_per_op)
    key = hashlib.sha1("\n".join(case_ids).encode()).hexdigest()[:16]
    final = os.path.join(root, "split", key)
    if not os.path.isfile(os.path.join(final, _MARKER)):
        os.makedirs(os.path.dirname(final), exist_ok=True)
        with _locked(final + ".lock"):
            if not os.path.isfile(os.path.join(final, _MARKER)):
                wanted = set(case_ids)
                cases = [c for c in generate_cases(seed, cases_per_op) if c.case_id in wanted]
                shutil.rmtree(final, ignore_errors=True)
                record = export(cases, mode, final)
                with open(os.path.join(final, "record.json"), "w") as f:
                    json.dump(record, f)
                with open(os.path.join(final, _MARKER), "w") as f:
                    f.write("\n".join(case_ids) + "\n")
    with open(os.path.join(final, "record.json")) as f:
        return final, json.load(f)


def load_want(directory: str) -> list:
    with np.load(os.path.join(directory, "paddle.npz")) as data:
        return [data[f"o{k}"] for k in range(len(data.files))]
