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

The sweep (`ensure_sweep`, cases.sweep_cases: every op's 0-d, [1], mixed and float64 forms) is exported in
every format that builds each case, not only the first: legacy and PIR programs of paddle 3.3.1 (modes
"legacy" and "pir") and legacy programs of paddle 2.6.2 (mode "legacy262", built by side262.py in the Python
3.10 side venv; Paddle Inference 3.3.1 runs them, as it runs the others). Its cache directory is keyed by the
content of the files that make the programs (cases.py, export.py, side262.py), so any change rebuilds it.
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

from differential.cases import CASES_PER_OP, GENERATOR_VERSION
from differential.export import cases_of, export, probe
from support.converter_harness import paddle_inference_run

BATCH_SIZE = 48
PADDLE_TIMEOUT_S = 120.0  # one batch on Paddle Inference takes well under a second
_MARKER = "COMPLETE"


_HERE = os.path.dirname(os.path.abspath(__file__))
SIDE_SCRIPT = os.path.join(_HERE, "side262.py")
SWEEP_MODES = ("legacy", "pir", "legacy262")


def sweep_key() -> str:
    """The content of the files that make the sweep's programs (cases, their export, the 2.6.2 side)."""
    digest = hashlib.sha1()
    for name in ("cases.py", "export.py", "side262.py"):
        with open(os.path.join(_HERE, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


def cache_dir(seed: int, cases_per_op: int = CASES_PER_OP, case_set: str = "base") -> str:
    from support.model_zoo_fixtures import fixture_root

    if case_set == "sweep":
        return os.path.join(fixture_root(), f"differential-sweep-{sweep_key()}-s{seed}-n{cases_per_op}")
    return os.path.join(fixture_root(), f"differential-g{GENERATOR_VERSION}-s{seed}-n{cases_per_op}")


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


def _export_any(cases, mode: str, directory: str, case_set: str, seed: int, cases_per_op: int) -> dict:
    """Export `cases` in `mode`: here (paddle 3.3.1) or, for "legacy262", by paddle 2.6.2 in the side venv."""
    if mode != "legacy262":
        return export(cases, mode, directory)
    _side("export", {"case_set": case_set, "seed": seed, "cases_per_op": cases_per_op,
                     "batches": [{"dir": directory, "ids": [c.case_id for c in cases]}]})
    return _side_record(directory)


def _side_record(directory: str) -> dict:
    """The record side262.py wrote for a batch; RuntimeError with paddle 2.6.2's reason when it refused it."""
    path = os.path.join(directory, "record.json")
    if not os.path.isfile(path):
        error = os.path.join(directory, "error.txt")
        reason = "the paddle 2.6.2 side stopped before it"
        if os.path.isfile(error):
            with open(error) as f:
                reason = f.read()
        raise RuntimeError(reason)
    with open(path) as f:
        return json.load(f)


def _solve(cases, mode, staging, counter, discarded, paddle: IsolatedPaddle, case_set="base", seed=0,
           cases_per_op=CASES_PER_OP) -> list:
    """Export `cases` and run Paddle Inference; halve on failure. The batch records Paddle ran."""
    directory = os.path.join(staging, f"b{counter[0]:03d}")
    counter[0] += 1
    try:
        record = _export_any(cases, mode, directory, case_set, seed, cases_per_op)
        want = paddle.run(directory, record)
    except Exception as exc:  # noqa: BLE001 - Paddle (export or Inference) rejects something in the batch
        shutil.rmtree(directory, ignore_errors=True)
        if len(cases) == 1:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            reason = next((line for line in lines if line.startswith("(")), lines[-1] if lines else type(exc).__name__)
            discarded.append({"id": cases[0].case_id, "op_type": cases[0].op_type, "mode": mode,
                              "reason": f"Paddle Inference: {reason[:200]}"})
            return []
        half = len(cases) // 2
        return (_solve(cases[:half], mode, staging, counter, discarded, paddle, case_set, seed, cases_per_op)
                + _solve(cases[half:], mode, staging, counter, discarded, paddle, case_set, seed, cases_per_op))
    np.savez(os.path.join(directory, "paddle.npz"), **{f"o{k}": a for k, a in enumerate(want)})
    record["set"] = case_set
    return [record]


def _ensure(final: str, make) -> dict:
    """The manifest in `final`, made by `make(staging) -> manifest` under the lock when not complete yet."""
    manifest_path = os.path.join(final, "manifest.json")
    if not os.path.isfile(os.path.join(final, _MARKER)):
        root = os.path.dirname(final)
        os.makedirs(root, exist_ok=True)
        with _locked(os.path.join(root, f".{os.path.basename(final)}.lock")):
            if not os.path.isfile(os.path.join(final, _MARKER)):
                if os.path.exists(final):
                    shutil.rmtree(final)  # interrupted by hand: rebuild
                staging = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}-", dir=root)
                try:
                    manifest = make(staging)
                    with open(os.path.join(staging, "manifest.json"), "w") as f:
                        json.dump(manifest, f, indent=1)
                    with open(os.path.join(staging, _MARKER), "w") as f:
                        f.write(f"generator {GENERATOR_VERSION} seed {manifest['seed']}\n")
                    os.rename(staging, final)
                except BaseException:
                    shutil.rmtree(staging, ignore_errors=True)
                    raise
    with open(manifest_path) as f:
        return json.load(f)


def ensure_programs(seed: int, cases_per_op: int = CASES_PER_OP) -> tuple:
    """(cache directory, manifest) of `seed`, generating and running Paddle first when not cached."""
    final = cache_dir(seed, cases_per_op)
    manifest = _ensure(final, lambda staging: _generate(seed, cases_per_op, staging))
    _remove_older(final, "differential-g")
    return final, manifest


def ensure_sweep(seed: int, cases_per_op: int = CASES_PER_OP) -> tuple:
    """(cache directory, manifest) of the sweep of `seed` in every format (module docstring)."""
    final = cache_dir(seed, cases_per_op, "sweep")
    manifest = _ensure(final, lambda staging: _generate_sweep(seed, cases_per_op, staging))
    _remove_older(final, "differential-sweep-")
    return final, manifest


def _remove_older(final: str, family: str) -> None:
    """Remove the batches of the same seed and size under another generator version or sweep key (left by earlier
    runs of older code: support.fixture_cache tells why)."""
    from support.fixture_cache import remove_superseded

    tail = os.path.basename(final)[len(family):].split("-", 1)[-1]  # "s<seed>-n<cases>"
    remove_superseded(os.path.dirname(final), os.path.basename(final),
                      lambda entry: entry.startswith(family) and entry.endswith(f"-{tail}"))


_CHILD_CASES: dict = {}


def _probe_in_child(seed: int, cases_per_op: int, indices: list, modes: tuple, case_set: str = "base") -> list:
    """(In the isolated child) the probe of cases `indices` of the seed's generated list."""
    key = (case_set, seed, cases_per_op)
    if key not in _CHILD_CASES:
        _CHILD_CASES.clear()
        _CHILD_CASES[key] = cases_of(case_set, seed, cases_per_op)
    cases = _CHILD_CASES[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [probe(cases[i], modes) for i in indices]


def _probe_all(seed: int, cases_per_op: int, count: int, paddle: IsolatedPaddle, modes=("legacy", "pir"),
               case_set: str = "base") -> list:
    """Every case's static mode (None: Paddle cannot build it; "crash": building it kills Paddle in every mode),
    probed in the isolated child: in chunks, a lost chunk case by case, a case lost in legacy mode again in the
    other modes alone."""
    found = []
    for chunk in _chunks(list(range(count)), 200):
        try:
            found += paddle.call(_probe_in_child, seed, cases_per_op, chunk, modes, case_set)
            continue
        except PaddleCrashed:
            pass
        for i in chunk:
            try:
                found += paddle.call(_probe_in_child, seed, cases_per_op, [i], modes, case_set)
            except PaddleCrashed:
                try:
                    if len(modes) < 2:
                        raise
                    found += paddle.call(_probe_in_child, seed, cases_per_op, [i], modes[1:], case_set)
                except PaddleCrashed:
                    found.append("crash")
    return found


def _generate(seed: int, cases_per_op: int, staging: str) -> dict:
    cases = cases_of("base", seed, cases_per_op)
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
                batches.extend(_solve(chunk, mode, staging, counter, discarded, paddle, "base", seed, cases_per_op))
    finally:
        paddle.close()
    return {"generator": GENERATOR_VERSION, "seed": seed, "cases_per_op": cases_per_op,
            "generated": len(cases), "batches": batches, "discarded": discarded}


# -- paddle 2.6.2 in the side venv -------------------------------------------------------------------------------


def _side(command: str, request: dict, timeout: float = 900) -> None:
    """Run side262.py `command` with `request` in the Python 3.10 venv (paddle 2.6.2); raises when it fails."""
    import subprocess

    from support.paddlelite_env import SideEnvError, ensure_venv

    python = ensure_venv()
    with tempfile.TemporaryDirectory(prefix="diff262-") as work:
        path = os.path.join(work, "request.json")
        with open(path, "w") as f:
            json.dump(request, f)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FLAGS_"))}
        env.update(GLOG_minloglevel="3", PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run([python, SIDE_SCRIPT, command, path], env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=work, check=False)
        if proc.returncode != 0:
            raise SideEnvError(f"paddle 2.6.2 side ({command}) failed with status {proc.returncode}: "
                               f"{proc.stderr.strip()[-600:]}")


def _probe_262(cases: list, seed: int, cases_per_op: int) -> dict:
    """{case id: "legacy" | None | "crash"}: which cases paddle 2.6.2 builds; a case whose build kills the
    process is marked "crash" and the probe goes on after it."""
    from support.paddlelite_env import SideEnvError

    found: dict = {}
    remaining = [c.case_id for c in cases]
    with tempfile.TemporaryDirectory(prefix="diff262-probe-") as work:
        progress = os.path.join(work, "progress.tsv")
        while remaining:
            open(progress, "w").close()
            try:
                _side("probe", {"case_set": "sweep", "seed": seed, "cases_per_op": cases_per_op,
                                "ids": remaining, "progress": progress})
                failed = False
            except SideEnvError:
                failed = True
            started = None
            with open(progress) as f:
                for line in f:
                    case_id, state = line.rstrip("\n").split("\t")
                    if state == "start":
                        started = case_id
                    else:
                        found[case_id] = state if state != "none" else None
                        started = None
            if not failed:
                break
            if started is None:
                raise RuntimeError("the paddle 2.6.2 side failed before probing a case")
            found[started] = "crash"
            remaining = remaining[remaining.index(started) + 1:]
    return found


def _generate_sweep(seed: int, cases_per_op: int, staging: str) -> dict:
    cases = cases_of("sweep", seed, cases_per_op)
    discarded, batches, counter = [], [], [0]
    paddle = IsolatedPaddle()
    try:
        accepted = {}
        for mode in ("legacy", "pir"):
            found = _probe_all(seed, cases_per_op, len(cases), paddle, (mode,), "sweep")
            accepted[mode] = [c for c, m in zip(cases, found) if m == mode]
        found_262 = _probe_262(cases, seed, cases_per_op)
        accepted["legacy262"] = [c for c in cases if found_262.get(c.case_id) == "legacy"]
        for case in cases:
            if not any(case in accepted[m] for m in SWEEP_MODES):
                discarded.append({"id": case.case_id, "op_type": case.op_type,
                                  "reason": "no format builds it (paddle 3.3.1 legacy and PIR, paddle 2.6.2)"})
        for mode in ("legacy", "pir"):
            for chunk in _chunks(accepted[mode], BATCH_SIZE):
                batches.extend(_solve(chunk, mode, staging, counter, discarded, paddle, "sweep", seed,
                                      cases_per_op))
        batches.extend(_solve_262(_chunks(accepted["legacy262"], BATCH_SIZE), staging, counter, discarded, paddle,
                                  seed, cases_per_op))
    finally:
        paddle.close()
    return {"generator": GENERATOR_VERSION, "sweep": sweep_key(), "seed": seed, "cases_per_op": cases_per_op,
            "generated": len(cases), "batches": batches, "discarded": discarded}


def _solve_262(pending: list, staging, counter, discarded, paddle: IsolatedPaddle, seed, cases_per_op) -> list:
    """_solve for paddle 2.6.2's programs, a level at a time: every batch of a level is exported by one side
    process (starting paddle 2.6.2 takes seconds), then run on Paddle Inference; failing ones are halved."""
    from support.paddlelite_env import SideEnvError

    records = []
    while pending:
        dirs = []
        for _ in pending:
            dirs.append(os.path.join(staging, f"b{counter[0]:03d}"))
            counter[0] += 1
        try:
            _side("export", {"case_set": "sweep", "seed": seed, "cases_per_op": cases_per_op,
                             "batches": [{"dir": d, "ids": [c.case_id for c in cases]}
                                         for d, cases in zip(dirs, pending)]})
        except SideEnvError:
            pass  # a batch killed the side process: the batches without a record are split below
        halves = []
        for cases, directory in zip(pending, dirs):
            try:
                record = _side_record(directory)
                want = paddle.run(directory, record)
            except Exception as exc:  # noqa: BLE001 - paddle 2.6.2 or Paddle Inference rejects the batch
                shutil.rmtree(directory, ignore_errors=True)
                if len(cases) == 1:
                    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
                    discarded.append({"id": cases[0].case_id, "op_type": cases[0].op_type, "mode": "legacy262",
                                      "reason": (lines[-1] if lines else type(exc).__name__)[:200]})
                else:
                    halves += [cases[:len(cases) // 2], cases[len(cases) // 2:]]
                continue
            np.savez(os.path.join(directory, "paddle.npz"), **{f"o{k}": a for k, a in enumerate(want)})
            record["set"] = "sweep"
            records.append(record)
        pending = halves
    return records


def program_for(root: str, seed: int, cases_per_op: int, case_ids: list, mode: str, case_set: str = "base") -> tuple:
    """(directory, record) of a program holding only `case_ids` (cut from a batch of the cache in `root`),
    exported on first use."""
    key = hashlib.sha1("\n".join([mode] + case_ids).encode()).hexdigest()[:16]
    final = os.path.join(root, "split", key)
    if not os.path.isfile(os.path.join(final, _MARKER)):
        os.makedirs(os.path.dirname(final), exist_ok=True)
        with _locked(final + ".lock"):
            if not os.path.isfile(os.path.join(final, _MARKER)):
                wanted = set(case_ids)
                cases = [c for c in cases_of(case_set, seed, cases_per_op) if c.case_id in wanted]
                shutil.rmtree(final, ignore_errors=True)
                record = _export_any(cases, mode, final, case_set, seed, cases_per_op)
                with open(os.path.join(final, "record.json"), "w") as f:
                    json.dump(record, f)
                with open(os.path.join(final, _MARKER), "w") as f:
                    f.write("\n".join(case_ids) + "\n")
    with open(os.path.join(final, "record.json")) as f:
        return final, json.load(f)


def load_want(directory: str) -> list:
    with np.load(os.path.join(directory, "paddle.npz")) as data:
        return [data[f"o{k}"] for k in range(len(data.files))]
