"""The parent/child protocol of the benchmarks that time each runner in a fresh process (bench_peers.py with
peers/child.py, bench_zoo.py with peers/zoo_child.py): the parent spawns a child and reads one result line; the
child times its runner's first result and steady runs and prints that line. One copy of both halves.

Imports only the standard library and numpy (the children import nothing else before their runner's own imports,
which they time). peers/lite_child.py runs in Paddle Lite's Python 3.10 environment and keeps its own copy.
"""
from __future__ import annotations

import json
import resource
import subprocess
import time
import traceback
from collections.abc import Callable

WARMUP_RUNS = 2


# -- the parent's half ------------------------------------------------------------------------------------------
def spawn(cmd: list, phase: str, marker: str, env: dict, timeout_s: float, progress_marker: str = "") -> dict:
    """Run one child (`--spawn-time` appended), return the dict of its `marker` line, or {"error": why} naming
    the phase (a timeout, an exit without the line, or the error the child reported). With `progress_marker`, a
    child that exits without its line also gives "progress": the text after the last line it printed starting
    with that marker (what it was doing when it died)."""
    spawn_time = time.time()
    try:
        proc = subprocess.run(cmd + ["--spawn-time", repr(spawn_time)], capture_output=True, text=True, env=env,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"{phase}: timed out after {timeout_s} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(marker):
            result = json.loads(line[len(marker):])
            if "error" in result:
                result["error"] = f"{phase}: {result['error']}"
            return result
    tail = [ln for ln in (proc.stderr + proc.stdout).strip().splitlines() if ln.strip()][-3:]
    failed = {"error": f"{phase}: exit {proc.returncode}: " + " | ".join(tail)[-400:]}
    progress = [ln[len(progress_marker):] for ln in proc.stdout.splitlines()
                if progress_marker and ln.startswith(progress_marker)]
    if progress:
        failed["progress"] = progress[-1].strip()
    return failed


# -- the child's half -------------------------------------------------------------------------------------------
def time_runner(args, prepare: Callable, save_first: Callable, marker: str, script_start_wall: float,
                catch_errors: bool = False) -> int:
    """`prepare()` -> (run, extra figures, details() or None); run once (saved by `save_first(outputs)`), then in
    the cold phase WARMUP_RUNS unmeasured and `args.runs` timed runs (after `run.settle()` when the runner has one),
    and print one `marker` line with the figures (module docstring of each child). `catch_errors`: a runner that
    cannot run the model reports {"error": ...} on that line instead of crashing."""
    result = {"runner": args.runner, "phase": args.phase}
    try:
        before_runner = time.perf_counter()
        run, extra, details = prepare()
        first = run()
        first_done = time.perf_counter()
        first_wall = time.time()
    except Exception as exc:  # noqa: BLE001 - the runner cannot run this model: that is the result
        if not catch_errors:
            raise
        lines = traceback.format_exception_only(type(exc), exc)
        result["error"] = " ".join(" ".join(lines).split())[:600]
        print(marker + json.dumps(result), flush=True)
        return 0
    save_first(first)
    result.update(extra)
    result["python_start_s"] = script_start_wall - args.spawn_time
    result["first_result_since_spawn_s"] = first_wall - args.spawn_time
    result["start_s"] = first_done - before_runner - extra.get("imports_s", 0.0)
    result["start_with_imports_s"] = first_done - before_runner
    if args.phase == "cold":
        getattr(run, "settle", lambda: None)()
        for _ in range(WARMUP_RUNS):
            run()
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        result["steady_s"] = times
    if details is not None:
        result["details"] = details()
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(marker + json.dumps(result), flush=True)
    return 0


__all__ = ["WARMUP_RUNS", "spawn", "time_runner"]
