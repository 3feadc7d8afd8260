"""What `bench` measures after the starts, as OpenVINO's benchmark_app users expect it: latency runs bounded by a
count or a time (`-t`), throughput with N requests in flight (`--requests`, clones of the predictor on threads of
their own, FPS), and where a run's time goes (per subgraph, per host op, and device / copies / host / Python).

The breakdown times a few extra runs with timers around the predictor's own calls (each subgraph engine's run,
the host executor's run, and the drivers' execute_program), put on the objects of that one predictor and the
drivers for those runs only, then taken off: the latency and throughput figures are measured without them.
  device   inside the drivers' execute_program;
  copies   the rest of the subgraph engines' time (binding inputs and outputs, checking shapes);
  host     the host executor running the ops no device took;
  python   the rest of predictor.run (feeding, planning, fetching).
Entry points: `latency_runs`, `latency_summary`, `throughput`, `breakdown` (cmd_bench). Imports numpy, the
standard library and cli.interrupts only; the predictor comes from the caller.
"""
from __future__ import annotations

import collections
import contextlib
import statistics
import threading
import time

import numpy as np

from nnadapter_bridge.cli.interrupts import interrupted, raise_if_interrupted


def latency_runs(predictor, runs: int, seconds: float | None) -> list:
    """Run times (seconds) of `runs` runs, or of as many as fit in `seconds` (at least one) when given."""
    times = []
    deadline = None if seconds is None else time.perf_counter() + seconds
    while True:
        raise_if_interrupted()  # a Ctrl-C whose KeyboardInterrupt was lost would otherwise never end a long run
        start = time.perf_counter()
        predictor.run()
        end = time.perf_counter()
        times.append(end - start)
        if (deadline is not None and end >= deadline) or (deadline is None and len(times) >= runs):
            return times


def latency_summary(times: list) -> dict:
    return {"runs": len(times), "median_seconds": statistics.median(times),
            "p90_seconds": float(np.percentile(times, 90)), "p99_seconds": float(np.percentile(times, 99)),
            "mean_seconds": statistics.fmean(times), "min_seconds": min(times), "max_seconds": max(times)}


def throughput(predictor, feeds: dict, requests: int, runs: int, seconds: float | None) -> dict:
    """`requests` clones run at once, each on its own thread, until `runs` runs in all are done or `seconds`
    have passed: frames per second over the wall time, and the latency each request saw."""
    clones = [predictor.clone() for _ in range(requests)]
    for clone in clones:
        for name, array in feeds.items():
            clone.get_input_by_name(name).from_numpy(array)
        clone.run()  # its own first run (buffers, bindings) is not part of the measure
    counter = {"left": runs}
    lock = threading.Lock()
    latencies: list = [[] for _ in clones]
    errors: list = []
    barrier = threading.Barrier(requests + 1)
    deadline_box = [0.0]

    def take() -> bool:
        if interrupted():
            return False  # the caller's thread raises it
        if seconds is not None:
            return time.perf_counter() < deadline_box[0]
        with lock:
            if counter["left"] <= 0:
                return False
            counter["left"] -= 1
            return True

    def worker(k: int) -> None:
        barrier.wait()
        try:
            while take():
                start = time.perf_counter()
                clones[k].run()
                latencies[k].append(time.perf_counter() - start)
        except BaseException as exc:  # noqa: BLE001 - said by the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,), name=f"bench request {k}") for k in range(requests)]
    for thread in threads:
        thread.start()
    deadline_box[0] = time.perf_counter() + (seconds or 0.0)
    start = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    for clone in clones:
        clone.close()
    if errors:
        raise errors[0]
    raise_if_interrupted()
    every = [t for per in latencies for t in per]
    return {"requests": requests, "runs": len(every), "wall_seconds": wall,
            "fps": len(every) / wall if wall > 0 else 0.0, "latency": latency_summary(every) if every else None}


def _engine_devices(engine) -> list:
    names = []
    for engine_program in getattr(engine, "programs", []) or []:
        compilation = getattr(engine_program, "compilation", None)
        for program in getattr(compilation, "programs", []) or []:
            device = getattr(program, "device", None)
            if device is not None and device.name not in names:
                names.append(device.name)
    return names


@contextlib.contextmanager
def _timed(owner, attribute: str, add):
    """Time every call of owner.<attribute> (an instance attribute over the bound method) while the block runs."""
    original = getattr(owner, attribute)
    own = attribute in vars(owner)  # already an instance attribute (put there by someone else)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            add(args, time.perf_counter() - start)

    setattr(owner, attribute, timed)
    try:
        yield
    finally:
        if own:
            setattr(owner, attribute, original)
        else:
            delattr(owner, attribute)  # the class's method again


def breakdown(predictor, runs: int) -> dict:
    """Where `runs` runs of `predictor` spend their time (module docstring): per subgraph, per host op, and the
    device / copies / host / python split, as mean milliseconds per run."""
    engine_time: dict = collections.defaultdict(float)
    host_time: dict = collections.defaultdict(float)
    device_time = [0.0]
    host_ops = {}
    with contextlib.ExitStack() as stack:
        for index, engine in predictor.engines.items():
            stack.enter_context(_timed(engine, "run", lambda args, t, i=index: engine_time.__setitem__(
                i, engine_time[i] + t)))
        if getattr(predictor, "host", None) is not None:
            def add_host(args, t):
                op = args[0]
                host_ops[op.index] = op.type
                host_time[op.index] += t
            stack.enter_context(_timed(predictor.host, "run", add_host))
        drivers = {}
        if predictor.context is not None:
            for device in predictor.context.devices:
                drivers[id(device.driver)] = device.driver
        for driver in drivers.values():
            stack.enter_context(_timed(driver, "execute_program",
                                       lambda args, t: device_time.__setitem__(0, device_time[0] + t)))
        start = time.perf_counter()
        for _ in range(runs):
            raise_if_interrupted()
            predictor.run()
        total = time.perf_counter() - start

    def ms(seconds: float) -> float:
        return seconds * 1000.0 / runs

    engines_total, host_total = sum(engine_time.values()), sum(host_time.values())
    subgraphs = [{"subgraph": index, "devices": _engine_devices(predictor.engines[index]),
                  "ops": len(predictor.engines[index].subgraph.ops), "ms": ms(engine_time[index])}
                 for index in sorted(predictor.engines)]
    host = sorted(({"op": index, "type": host_ops[index], "ms": ms(t)} for index, t in host_time.items()),
                  key=lambda h: -h["ms"])
    return {"runs": runs, "run_ms": ms(total),
            "split_ms": {"device": ms(device_time[0]), "copies": ms(max(engines_total - device_time[0], 0.0)),
                         "host": ms(host_total), "python": ms(max(total - engines_total - host_total, 0.0))},
            "subgraphs": subgraphs, "host_ops": host}
