"""Where start-up time, memory and per-run time go: our predictor phase by phase, next to the SDK used directly.

    python benchmarks/profile_startup.py [--models m1,m2] [--devices intel_openvino,microsoft_onnxruntime]
                                         [--threads 1] [--repeat K] [--overhead-runs N] [--cprofile N]
                                         [--tracemalloc] [--spawn-pairs N [--spawn-only]] [--json out.json]
                                         [--markdown out.md]
    python benchmarks/profile_startup.py --from-json out.json [--markdown out.md]

For every (model, device) it runs fresh processes (`--child`, this file) and reports medians over K repeats:

* **cold**: empty cache dir; **warm**: the cache a cold process wrote (`.nnc` + support verdicts).
* Per phase, times inclusive of nested phases ("incl") and without them ("self"), how many calls, the
  time spent importing modules inside the phase and how many modules that imported, and the highest RSS seen
  while it ran (a sampling thread reads /proc/self/statm every 2 ms). The phases are this project's
  functions wrapped at run time (PHASES below), so nothing in the product changes for the measurement:
  imports, load, context, partition (support, convert-for-support), fingerprint, token, restore (read + check
  the .nnc, driver import), build (convert, compile = the driver's create_program), nnc write, first run.
* **peer**: OpenVINO reading the Paddle model itself (read_model + compile_model with CACHE_DIR, cold; and
  compile_model(path) with the filled CACHE_DIR, warm), with the same phases where they exist.
* **per-run overhead** (warm processes, `--overhead-runs`, default 1000): `predictor.run()` on the restored
  model (input set once beforehand, as a caller that fills its input buffer does), interleaved with the bare
  SDK call on the very same compiled program (intel_openvino: `InferRequest.infer()` on the bound input;
  microsoft_onnxruntime: `InferenceSession.run(outputs, feeds)`); overhead = median(ours) - median(bare),
  and the median of the paired differences. `from_numpy` + `numpy()` (the API's two copies) are timed apart.
* RSS at the end of the start, split into anonymous and file-backed (smaps_rollup): memory-mapped params
  and .nnc files count as file-backed (clean pages the kernel can drop).
* `--cprofile N`: the top N functions of the warm start (cumulative and self) from one extra warm process;
  `--tracemalloc`: peak Python-traced bytes per phase and the top allocation sites still held after the
  first run (numpy arrays included; SDK-internal C++ memory is not traced).

Start-up figures exclude `import nnadapter_bridge` + the SDK package ("imports" row), as bench_peers.py does; the
from-spawn figures stand beside them, in the summary table, in each phase table (rows "spawn -> interpreter up",
"spawn -> first result") and in the JSON (`since_spawn_s`, `python_start_s`, `start_with_imports_s` per summary):
a fresh process's wait, imports included, from the parent's fork/exec to the first output.
`--spawn-pairs N` adds a table of N interleaved warm starts of ours and of OpenVINO direct from spawn in bare
processes (benchmarks/startup_bare_child.py: nothing wrapped, sampled or hooked, and none of this harness's modules
imported, as a user's process runs: the phase children's recorder slows imports, and ours import other modules than
OpenVINO's), after a cold start and a settling warm start of each; `--spawn-only` gives that table alone
(`spawn_pairs`).
`--models` takes the zoo models (devtools.zoo: MODELS, EXTRA_MODELS, PIR_MODELS) and the real-architecture zoo
(tests/support/real_zoo's catalog, built or taken from the test fixture cache), whose feeds (every input) are
written to an .npz the children read; OpenVINO direct runs on the legacy .pdmodel ones.
Run it with `env -u PYTHONDONTWRITEBYTECODE` (and a warmed __pycache__) when timing imports: without .pyc
files every process recompiles the sources.
"""
from __future__ import annotations

import time

SCRIPT_START = time.perf_counter()
SCRIPT_START_WALL = time.time()

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402

from startup_bare_child import (  # noqa: E402 - this directory is sys.path[0] when run as a script
    MARKER,
    example_input,
    our_first_result,
    our_predictor,
    peer_compiled,
    peer_config,
    peer_first_result,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL_DIR = os.path.join(os.path.expanduser("~"), ".cache", "nnadapter-bridge", "bench-peers",
                                 "models-keep-extra")
SDK_MODULE = {"intel_openvino": "openvino", "microsoft_onnxruntime": "onnxruntime", "builtin_device": None}
PAGE = os.sysconf("SC_PAGE_SIZE")

# (module, attribute path, phase name): wrapped in the child before anything runs. A phase nested in
# another is subtracted from the outer one's "self" time.
PHASES = [
    ("nnadapter_bridge.loader", "load_model", "load"),
    # The predictor binds these names at its import, before they could be wrapped in their own modules.
    ("nnadapter_bridge.predictor.predictor", "load_model", "load"),
    ("nnadapter_bridge.predictor.predictor", "_open_context", "context"),
    ("nnadapter_bridge.subgraph.plan", "plan_partition", "partition"),
    ("nnadapter_bridge.predictor.predictor", "plan_partition", "partition"),
    ("nnadapter_bridge.subgraph.plan_store", "load_plan", "partition: read the kept plan"),
    ("nnadapter_bridge.subgraph.plan", "detect_subgraphs", "partition: detect subgraphs"),
    ("nnadapter_bridge.subgraph.support_decisions", "VerdictStore.open", "support: read verdicts"),
    ("nnadapter_bridge.subgraph.support_decisions", "SupportDecider._decide", "support: convert + validate"),
    ("nnadapter_bridge.subgraph.support_decisions", "VerdictStore.save", "support: save verdicts"),
    ("nnadapter_bridge.subgraph.cache_key", "subgraph_fingerprint", "fingerprint"),
    ("nnadapter_bridge.subgraph.cache_key", "versions", "versions"),
    ("nnadapter_bridge.subgraph.engine", "SubgraphEngine._restore", "restore"),
    ("nnadapter_bridge.nnadapter.runtime.compilation", "read_nnc_file", "restore: read + check .nnc"),
    ("nnadapter_bridge.nnadapter.runtime.compilation", "Compilation._finish_from_cache", "restore: driver import"),
    ("nnadapter_bridge.subgraph.engine", "SubgraphEngine._build", "build"),
    ("converters.context", "convert_subgraph", "convert"),
    (
        "nnadapter_bridge.nnadapter.runtime.compilation",
        "Compilation._finish_from_model",
        "compile (driver create_program)",
    ),
    # Runs in a thread of its own after the first compute (PendingCacheWrite): timed apart, outside the nesting.
    ("nnadapter_bridge.nnadapter.nnc.writer", "PendingCacheWrite._run", "write .nnc (own thread)"),
    ("nnadapter_bridge.nnadapter.runtime.execution", "Execution._run_program", "execute"),
]


# -- the child: one process, one phase ------------------------------------------------------------------
class Recorder:
    """Phase timings (inclusive/self), imports inside phases, RSS peaks (sampled) and, optionally, tracemalloc
    peaks, for phases wrapped around the product's functions."""

    def __init__(self, trace: bool):
        self.trace = trace
        self.stack: list = []
        self.stats: dict = {}
        self.order: list = []
        self._import_depth = 0
        self.pending: list = []  # (module, path, name) to wrap once the module is imported
        self.unwrapped: list = []
        self.wrapped: list = []  # (owner, attribute, original), to put back before the per-run loop
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._rss_peak = 0
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self._hook_imports()

    # RSS sampling ---------------------------------------------------------------------------------
    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            value = self.rss()
            with self._lock:
                self._rss_peak = max(self._rss_peak, value)
                for frame in self.stack:
                    frame["rss_peak"] = max(frame["rss_peak"], value)

    def stop(self) -> None:
        self._stop.set()

    # imports ----------------------------------------------------------------------------------------
    def _hook_imports(self) -> None:
        import importlib._bootstrap as bootstrap

        original = bootstrap._find_and_load
        recorder = self

        def find_and_load(name, import_):
            if recorder._import_depth:
                return original(name, import_)
            recorder._import_depth += 1
            before = len(sys.modules)
            start = time.perf_counter()
            try:
                return original(name, import_)
            finally:
                spent = time.perf_counter() - start
                recorder._import_depth -= 1
                added = len(sys.modules) - before
                for frame in recorder.stack:
                    frame["imports_s"] += spent
                    frame["modules"] += added
                    frame["packages"].add(name.split(".")[0])
                if recorder.pending:
                    recorder.wrap_pending()

        bootstrap._find_and_load = find_and_load

    # phases -------------------------------------------------------------------------------------------
    def _trace_peak(self) -> None:
        import tracemalloc

        peak = tracemalloc.get_traced_memory()[1]
        for frame in self.stack:
            frame["traced_peak"] = max(frame["traced_peak"], peak)
        tracemalloc.reset_peak()

    def enter(self, name: str) -> dict:
        if self.trace:
            self._trace_peak()
        frame = {"name": name, "start": time.perf_counter(), "child_s": 0.0, "imports_s": 0.0, "modules": 0,
                 "packages": set(), "rss_peak": self.rss(), "traced_peak": 0}
        with self._lock:
            self.stack.append(frame)
        return frame

    def exit(self, frame: dict) -> None:
        spent = time.perf_counter() - frame["start"]
        if self.trace:
            self._trace_peak()
        rss = self.rss()
        with self._lock:
            self.stack.remove(frame)
            frame["rss_peak"] = max(frame["rss_peak"], rss)
            for outer in self.stack:
                outer["rss_peak"] = max(outer["rss_peak"], frame["rss_peak"])
        if self.stack:
            self.stack[-1]["child_s"] += spent
        entry = self._entry(frame["name"])
        entry["calls"] += 1
        entry["incl_s"] += spent
        entry["self_s"] += spent - frame["child_s"]
        entry["imports_s"] += frame["imports_s"]
        entry["modules"] += frame["modules"]
        entry["packages"] |= frame["packages"]
        entry["rss_peak"] = max(entry["rss_peak"], frame["rss_peak"])
        entry["rss_after"] = rss
        entry["traced_peak"] = max(entry["traced_peak"], frame["traced_peak"])

    def _entry(self, name: str) -> dict:
        """The accumulated figures of phase `name` (created on first use, in first-seen order)."""
        entry = self.stats.get(name)
        if entry is None:
            entry = self.stats[name] = {"calls": 0, "incl_s": 0.0, "self_s": 0.0, "imports_s": 0.0, "modules": 0,
                                        "packages": set(), "rss_peak": 0, "rss_after": 0, "traced_peak": 0}
            self.order.append(name)
        return entry

    def time_in_thread(self, name: str, function, *args, **kwargs):
        """A phase running on another thread than the start: its time only (it nests in nothing)."""
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent = time.perf_counter() - start
            with self._lock:
                entry = self._entry(name)
                entry["calls"] += 1
                entry["incl_s"] += spent
                entry["self_s"] += spent
                entry["rss_peak"] = max(entry["rss_peak"], self._rss_peak)

    def phase(self, name: str):
        recorder = self

        class _Phase:
            def __enter__(self):
                self.frame = recorder.enter(name)

            def __exit__(self, *exc):
                recorder.exit(self.frame)

        return _Phase()

    def wrap(self, module_name: str, path: str, name: str) -> None:
        owner = sys.modules[module_name]
        parts = path.split(".")
        for part in parts[:-1]:
            owner = getattr(owner, part)
        attr = parts[-1]
        raw = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        is_static = isinstance(raw, staticmethod)
        is_class = isinstance(raw, classmethod)
        function = raw.__func__ if (is_static or is_class) else raw
        recorder = self

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if threading.current_thread() is not threading.main_thread():
                return recorder.time_in_thread(name, function, *args, **kwargs)
            frame = recorder.enter(name)
            try:
                return function(*args, **kwargs)
            finally:
                recorder.exit(frame)

        self.wrapped.append((owner, attr, raw))
        setattr(owner, attr, staticmethod(wrapper) if is_static else classmethod(wrapper) if is_class else wrapper)

    def unwrap_all(self) -> None:
        """Put the product's functions back: the per-run overhead must not time our own phase wrappers (one
        wraps Execution._run_program, which every run goes through)."""
        for owner, attr, raw in reversed(self.wrapped):
            setattr(owner, attr, raw)
        self.wrapped.clear()
        self.pending = []

    def wrap_later(self, phases) -> None:
        """Wrap each phase's function once its module is imported (importing them here would move the
        product's lazy imports out of the start)."""
        self.pending = list(phases)
        self.wrap_pending()

    def wrap_pending(self) -> None:
        pending, self.pending = self.pending, []
        for entry in pending:
            if entry[0] not in sys.modules:
                self.pending.append(entry)
                continue
            try:
                self.wrap(*entry)
            except (AttributeError, KeyError) as exc:  # a renamed function: say so, measure the rest
                self.unwrapped.append(f"{entry[0]}.{entry[1]}: {exc!r}")

    def table(self) -> list:
        rows = []
        for name in self.order:
            entry = dict(self.stats[name])
            entry["packages"] = sorted(entry["packages"])
            entry["name"] = name
            rows.append(entry)
        return rows


def smaps_rollup() -> dict:
    found = {}
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Anonymous", "Pss_File", "Pss_Anon"):
                    found[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return found


def ensure_benchmark_model(name: str, model_dir: str, scratch: str) -> tuple:
    """(model path, feeds .npz or None): a zoo model (legacy .pdmodel, as bench_peers builds it), a PIR-only zoo
    model (.json: OpenVINO's Paddle frontend cannot read those, so it has no OpenVINO-direct peer), or a model of
    the real-architecture zoo (tests/support/real_zoo: its path and its feeds, written to an .npz in `scratch`)."""
    from devtools import zoo
    if name not in zoo.MODELS + zoo.EXTRA_MODELS + zoo.PIR_MODELS:
        import numpy as np

        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from support.real_zoo import env
        from support.real_zoo.catalog import MODELS as REAL_MODELS
        from support.real_zoo.fixtures import feeds_for

        if name not in REAL_MODELS:
            raise SystemExit(f"profile_startup: unknown model '{name}'; the zoo has "
                             f"{', '.join(zoo.MODELS + zoo.EXTRA_MODELS + zoo.PIR_MODELS)}, the real zoo "
                             f"{', '.join(REAL_MODELS)}")
        feeds_path = os.path.join(scratch, f"{name}-feeds.npz")
        np.savez(feeds_path, **feeds_for(name))
        return env.model_path(name), feeds_path
    if name in zoo.PIR_MODELS:
        out = os.path.join(model_dir, name, zoo.PIR_LAYOUT)
        path = zoo.model_path(name, zoo.PIR_LAYOUT, out)
        if not os.path.isfile(path):
            print(f"building {name} (PIR) into {out} ...", file=sys.stderr, flush=True)
            zoo.build_pir_model(name, out)
        return path, None
    from bench_peers import ensure_model

    return ensure_model(name, model_dir), None


def _ours(args, recorder: Recorder, result: dict):
    sys.path.insert(0, ROOT)
    with recorder.phase("imports"):
        import nnadapter_bridge

        if SDK_MODULE[args.device]:
            __import__(SDK_MODULE[args.device])
    recorder.wrap_later(PHASES)
    x = example_input(args.model, args.feeds)
    with recorder.phase("start"):
        with recorder.phase("create_predictor"):
            predictor = our_predictor(nnadapter_bridge, args.model, args.device, args.threads, args.work_dir)
        with recorder.phase("first run"):
            first = our_first_result(predictor, x)
    result["unwrapped"] = recorder.unwrapped + [f"{m}.{p} (never imported)" for m, p, _ in recorder.pending]
    stats = predictor.stats
    result["details"] = {"subgraphs": stats.subgraphs, "host_ops": stats.host_ops, "builds": stats.builds,
                         "cache_hits_file": stats.cache_hits_file, "cache_misses": stats.cache_misses}
    return predictor, x, first


def _bare_call(predictor, device: str, x):
    """The SDK call on the very program our predictor restored: (call(), what it is)."""
    engine = next(iter(predictor.engines.values()))
    handle = engine.programs[0].compilation.programs[0].handle
    if device == "intel_openvino":
        import openvino as ov

        request = handle.compiled_model.create_infer_request()
        request.set_input_tensor(0, ov.Tensor(x, shared_memory=True))

        def call():
            request.infer()
            return request.get_output_tensor(0).data

        return call, "InferRequest.infer() on a bound shared-memory input (a second request of the same model)"
    if device == "microsoft_onnxruntime":
        session = handle.session
        feeds = {handle.inputs[0].name: x}
        names = handle.output_names

        def call():
            return session.run(names, feeds)[0]

        return call, "InferenceSession.run(outputs, feeds) on the same session"
    return None, "no SDK"


def _overhead(args, predictor, x, result: dict) -> None:
    import numpy as np

    bare, what = _bare_call(predictor, args.device, x)
    inp, out = predictor.get_input(0), predictor.get_output(0)
    inp.from_numpy(x)
    ours_t, bare_t, api_t = [], [], []
    for _ in range(20):
        predictor.run()
        if bare is not None:
            bare()
    clock = time.perf_counter
    deadline = clock() + args.overhead_seconds
    for _ in range(args.overhead_runs):
        if clock() > deadline:
            break
        t0 = clock()
        predictor.run()
        t1 = clock()
        if bare is not None:
            bare()
        t2 = clock()
        inp.from_numpy(x)
        out.numpy()
        t3 = clock()
        ours_t.append(t1 - t0)
        bare_t.append(t2 - t1)
        api_t.append(t3 - t2)
    ours_m = statistics.median(ours_t)
    entry = {"runs": len(ours_t), "bare": what, "ours_median_s": ours_m,
             "from_numpy_plus_numpy_median_s": statistics.median(api_t)}
    if bare is not None:
        bare_m = statistics.median(bare_t)
        entry.update(bare_median_s=bare_m, overhead_s=ours_m - bare_m,
                     paired_overhead_median_s=float(np.median(np.array(ours_t) - np.array(bare_t))))
    result["overhead"] = entry


def _peer_openvino(args, recorder: Recorder, result: dict):
    with recorder.phase("imports"):
        import numpy  # noqa: F401 - timed with the imports, as ours is
        import openvino as ov

    x = example_input(args.model, args.feeds)
    with recorder.phase("start"):
        if args.phase == "cold":
            core = ov.Core()
            with recorder.phase("load"):
                model = core.read_model(args.model)
            with recorder.phase("compile (driver create_program)"):
                compiled = core.compile_model(model, "CPU", peer_config(args.threads, args.work_dir))
        else:
            with recorder.phase("restore"):
                compiled = peer_compiled(ov, args.model, args.phase, args.threads, args.work_dir)
        with recorder.phase("first run"):
            request, first = peer_first_result(compiled, x)
    result["_keep"] = (compiled, request)  # alive until the RSS after the start is read
    return None, x, first


def child(args) -> int:
    trace = args.tracemalloc
    if trace:
        import tracemalloc

        tracemalloc.start(8)
    recorder = Recorder(trace)
    result = {"phase": args.phase, "device": args.device, "peer": args.peer}
    profiler = None
    if args.cprofile:
        import cProfile

        profiler = cProfile.Profile()
    before = time.perf_counter()
    if args.peer:
        predictor, x, first = _peer_openvino(args, recorder, result)
    else:
        if profiler is not None:
            # Imports and wrapping happen inside _ours before "start"; profile only the start itself.
            original_enter = recorder.enter

            def enter(name):
                if name == "start":
                    profiler.enable()
                return original_enter(name)

            recorder.enter = enter
        predictor, x, first = _ours(args, recorder, result)
        if profiler is not None:
            profiler.disable()
    done = time.perf_counter()
    result["first_result_since_spawn_s"] = time.time() - args.spawn_time
    result["python_start_s"] = SCRIPT_START_WALL - args.spawn_time
    result["start_with_imports_s"] = done - before
    if not args.peer:
        # The .nnc is written by a thread of its own after the first result: wait for it before reading the
        # peak RSS (its export buffer counts), and say how long after the first result it was on disk.
        from nnadapter_bridge.nnadapter.nnc import wait_for_cache_writes

        wait_for_cache_writes()
        result["nnc_written_after_first_result_s"] = time.perf_counter() - done
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["rss_after_start"] = smaps_rollup()
    if trace:
        import tracemalloc

        snapshot = tracemalloc.take_snapshot()
        result["traced_held_top"] = [
            {"where": str(stat.traceback[0]), "bytes": stat.size, "count": stat.count}
            for stat in snapshot.statistics("lineno")[:12]]
    result.pop("_keep", None)
    # The per-run overhead is measured on single-input models (one bound input for the bare SDK call).
    if predictor is not None and args.overhead_runs and args.phase == "warm" and not isinstance(x, dict):
        recorder.unwrap_all()
        _overhead(args, predictor, x, result)
    recorder.stop()
    result["phases"] = recorder.table()
    if profiler is not None:
        import io
        import pstats

        for key in ("cumulative", "tottime"):
            stream = io.StringIO()
            pstats.Stats(profiler, stream=stream).sort_stats(key).print_stats(args.cprofile)
            result[f"cprofile_{key}"] = stream.getvalue()
    if predictor is not None:
        predictor.close()
    print(MARKER + json.dumps(result), flush=True)
    return 0


# -- the parent -----------------------------------------------------------------------------------------
def run_child(model: str, device: str, phase: str, work_dir: str, args, *, peer: bool = False,
              cprofile: int = 0, overhead: int = 0, tracemalloc: bool = False, feeds: str | None = None,
              bare: bool = False) -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    if bare:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup_bare_child.py")
        rest = ["peer" if peer else "ours", model, device, phase, work_dir, str(args.threads)]
        if feeds:
            rest.append(feeds)
        spawn = time.time()
        proc = subprocess.run([sys.executable, script, repr(spawn)] + rest, capture_output=True, text=True, env=env,
                              timeout=1200)
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--model", model, "--device", device, "--phase",
               phase, "--work-dir", work_dir, "--threads", str(args.threads), "--overhead-runs", str(overhead),
               "--overhead-seconds", str(args.overhead_seconds)]
        if peer:
            cmd.append("--peer")
        if cprofile:
            cmd += ["--cprofile", str(cprofile)]
        if tracemalloc:
            cmd.append("--tracemalloc")
        if feeds:
            cmd += ["--feeds", feeds]
        spawn = time.time()
        proc = subprocess.run(cmd + ["--spawn-time", repr(spawn)], capture_output=True, text=True, env=env,
                              timeout=1200)
    for line in proc.stdout.splitlines():
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    tail = (proc.stderr + proc.stdout).strip().splitlines()[-5:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(runs: list) -> dict:
    """Medians over repeated processes of the same kind."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return {"error": runs[0].get("error", "no run")}
    names = []
    for r in good:
        for p in r["phases"]:
            if p["name"] not in names:
                names.append(p["name"])
    phases = []
    for name in names:
        found = [next((p for p in r["phases"] if p["name"] == name), None) for r in good]
        found = [p for p in found if p is not None]
        entry = {"name": name, "calls": found[0]["calls"], "packages": found[0]["packages"]}
        for key in ("incl_s", "self_s", "imports_s", "modules", "rss_peak", "rss_after", "traced_peak"):
            entry[key] = _median([p[key] for p in found])
        phases.append(entry)
    out = {"repeats": len(good), "phases": phases,
           "start_s": _median([next(p["incl_s"] for p in r["phases"] if p["name"] == "start") for r in good]),
           "imports_s": _median([next(p["incl_s"] for p in r["phases"] if p["name"] == "imports") for r in good]),
           "since_spawn_s": _median([r["first_result_since_spawn_s"] for r in good]),
           "python_start_s": _median([r.get("python_start_s") for r in good]),
           "start_with_imports_s": _median([r.get("start_with_imports_s") for r in good]),
           "peak_rss_bytes": _median([r["peak_rss_bytes"] for r in good]),
           "rss_anon_after": _median([r["rss_after_start"].get("Anonymous") for r in good]),
           "rss_after": _median([r["rss_after_start"].get("Rss") for r in good]),
           "details": good[0].get("details"), "unwrapped": good[0].get("unwrapped")}
    overheads = [r["overhead"] for r in good if "overhead" in r]
    if overheads:
        out["overhead"] = {k: _median([o.get(k) for o in overheads])
                           for k in ("ours_median_s", "bare_median_s", "overhead_s", "paired_overhead_median_s",
                                     "from_numpy_plus_numpy_median_s")}
        out["overhead"]["bare"] = overheads[0]["bare"]
        out["overhead"]["runs"] = overheads[0]["runs"]
    for key in ("cprofile_cumulative", "cprofile_tottime", "traced_held_top"):
        for r in good:
            if key in r:
                out[key] = r[key]
    return out


def spawn_pairs(model_name: str, model: str, device: str, args, scratch: str, feeds: str | None = None) -> dict:
    """`args.spawn_pairs` warm starts of ours from spawn, each followed by one of OpenVINO direct from its own
    CACHE_DIR (legacy .pdmodel models on intel_openvino: OpenVINO reads no PIR .json), in bare processes. Both cache
    dirs are filled by a cold start first, then settled: files written less than 2 s before a start are not trusted
    by the program snapshot and the code digests (docs/cache.md), so one more warm start of each comes first."""
    peer = device == "intel_openvino" and model.endswith(".pdmodel")
    work = os.path.join(scratch, f"{model_name}-{device}-spawn")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    kinds = [("ours", False)] + ([("peer", True)] if peer else [])
    for _, is_peer in kinds:
        run_child(model, device, "cold", work + ("-ov" if is_peer else ""), args, peer=is_peer, feeds=feeds, bare=True)
    time.sleep(2.2)
    runs: dict = {kind: [] for kind, _ in kinds}
    for k in range(args.spawn_pairs + 1):  # the first round settles the caches and is not counted
        for kind, is_peer in kinds:
            found = run_child(model, device, "warm", work + ("-ov" if is_peer else ""), args, peer=is_peer,
                              feeds=feeds, bare=True)
            if k:
                runs[kind].append(found)
    out: dict = {"pairs": args.spawn_pairs}
    for kind, found in runs.items():
        good = [r for r in found if "error" not in r]
        if not good:
            out[kind] = {"error": found[0].get("error", "no run") if found else "no run"}
            continue
        out[kind] = {key: _median([r[key] for r in good]) for key in ("since_spawn_s", "peak_rss_bytes", "cpu_s",
                                                                      "modules")}
        out[kind]["min_since_spawn_s"] = min(r["since_spawn_s"] for r in good)
        out[kind]["stats"] = good[0].get("stats")
    if peer and "error" not in out["ours"] and "error" not in out["peer"]:
        ratios = [a["since_spawn_s"] / b["since_spawn_s"] for a, b in zip(runs["ours"], runs["peer"])
                  if "error" not in a and "error" not in b]
        out["pair_ratio_median"] = _median(ratios)
    return out


def measure(model_name: str, model: str, device: str, args, scratch: str, feeds: str | None = None) -> dict:
    entry = {"model": model_name, "device": device, "load_1min": os.getloadavg()[0]}
    if args.spawn_pairs:
        entry["spawn"] = spawn_pairs(model_name, model, device, args, scratch, feeds)
    if args.spawn_only:
        return entry
    cold, warm, peer_cold, peer_warm = [], [], [], []
    peer = device == "intel_openvino" and model.endswith(".pdmodel")
    for k in range(args.repeat):
        work = os.path.join(scratch, f"{model_name}-{device}-{k}")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        peer_work = work + "-ov"
        cold.append(run_child(model, device, "cold", work, args, feeds=feeds))
        if peer:
            os.makedirs(peer_work)
            peer_cold.append(run_child(model, device, "cold", peer_work, args, peer=True, feeds=feeds))
        # One unmeasured warm start of each first (as spawn_pairs does): OpenVINO's cold start, read_model +
        # compile_model, keeps its blob under the model object's hash, which compile_model(path) does not look up
        # (its first warm start compiles again), and ours trusts no cache file written less than 2 s before.
        time.sleep(2.2)
        run_child(model, device, "warm", work, args, bare=True, feeds=feeds)
        if peer:
            run_child(model, device, "warm", peer_work, args, peer=True, bare=True, feeds=feeds)
        warm.append(run_child(model, device, "warm", work, args, overhead=args.overhead_runs, feeds=feeds))
        if peer:
            peer_warm.append(run_child(model, device, "warm", peer_work, args, peer=True, feeds=feeds))
    entry["cold"] = summarise(cold)
    entry["warm"] = summarise(warm)
    if peer:
        entry["peer_cold"] = summarise(peer_cold)
        entry["peer_warm"] = summarise(peer_warm)
    if args.cprofile or args.tracemalloc:
        work = os.path.join(scratch, f"{model_name}-{device}-0")
        extra = run_child(model, device, "warm", work, args, cprofile=args.cprofile, tracemalloc=args.tracemalloc,
                          feeds=feeds)
        entry["warm_profiled"] = summarise([extra])
        cold_work = os.path.join(scratch, f"{model_name}-{device}-profiled")
        shutil.rmtree(cold_work, ignore_errors=True)
        os.makedirs(cold_work)
        extra = run_child(model, device, "cold", cold_work, args, cprofile=args.cprofile,
                          tracemalloc=args.tracemalloc, feeds=feeds)
        entry["cold_profiled"] = summarise([extra])
    return entry


# -- reporting ------------------------------------------------------------------------------------------
def _f(value, scale=1.0, digits=3) -> str:
    return "—" if value is None else f"{value * scale:.{digits}f}"


def _mib(value) -> str:
    return "—" if value is None else f"{value / 2**20:.0f}"


def _spawn_table(report: dict) -> list:
    """The --spawn-pairs table: warm starts from spawn in bare processes, ours against OpenVINO direct."""
    entries = [e for e in report["entries"] if "spawn" in e]
    if not entries:
        return []
    lines = [f"Warm start from spawn to the first result, bare processes, {entries[0]['spawn']['pairs']} interleaved "
             "pairs (medians; × is the median of the per-pair ratios; OpenVINO direct: compile_model(path) from its "
             "own CACHE_DIR, legacy .pdmodel models only: OpenVINO reads no PIR .json):", "",
             "| model | device | ours s (min) | OpenVINO direct s (min) | × | peak RSS MiB ours / OV (×) | "
             "CPU s ours / OV | modules ours / OV |", "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        sp = e["spawn"]
        ours, peer = sp.get("ours", {}), sp.get("peer")
        if "error" in ours:
            lines.append(f"| {e['model']} | {e['device']} | failed: {ours['error']} |" + " |" * 5)
            continue
        if (ours.get("stats") or {}).get("builds"):
            lines.append(f"| {e['model']} | {e['device']} | not warm: {ours['stats']} |" + " |" * 5)
            continue
        if peer is None or "error" in peer:
            why = "failed: " + peer["error"] if peer else "—"
            lines.append(f"| {e['model']} | {e['device']} | {_f(ours['since_spawn_s'], 1, 3)} "
                         f"({_f(ours['min_since_spawn_s'], 1, 3)}) | {why} | | {_mib(ours['peak_rss_bytes'])} | "
                         f"{_f(ours['cpu_s'], 1, 3)} | {ours['modules']:.0f} |")
            continue
        lines.append(
            f"| {e['model']} | {e['device']} | {_f(ours['since_spawn_s'], 1, 3)} "
            f"({_f(ours['min_since_spawn_s'], 1, 3)}) | {_f(peer['since_spawn_s'], 1, 3)} "
            f"({_f(peer['min_since_spawn_s'], 1, 3)}) | {_f(sp.get('pair_ratio_median'), 1, 2)} | "
            f"{_mib(ours['peak_rss_bytes'])} / {_mib(peer['peak_rss_bytes'])} "
            f"({ours['peak_rss_bytes'] / peer['peak_rss_bytes']:.2f}) | {_f(ours['cpu_s'], 1, 3)} / "
            f"{_f(peer['cpu_s'], 1, 3)} | {ours['modules']:.0f} / {peer['modules']:.0f} |")
    return lines + [""]


def render(report: dict) -> str:
    lines = [f"Measured {report['started']} on {report['host']} ({report['cores']} cores), threads "
             f"{report['threads']}, {report['repeat']} process(es) per figure (medians); load average "
             f"{' '.join(f'{x:.2f}' for x in report['load_before'])} before, "
             f"{' '.join(f'{x:.2f}' for x in report['load_after'])} after. Code: {report.get('commit', '?')}.", ""]
    lines += _spawn_table(report)
    phased = [e for e in report["entries"] if "cold" in e]
    if not phased:
        return "\n".join(lines) + "\n"
    lines += ["| model | device | cold s | ×OV | warm after imports s | ×OV warm | warm spawn→result s | imports s | "
              "peak RSS MiB cold / warm | ×OV RSS | per-run overhead µs (ours − bare, paired) | bare µs |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in phased:
        cold, warm = e["cold"], e["warm"]
        if "error" in cold or "error" in warm:
            lines.append(f"| {e['model']} | {e['device']} | failed: {cold.get('error') or warm.get('error')} |"
                         + " |" * 10)
            continue
        pc, pw = e.get("peer_cold", {}), e.get("peer_warm", {})
        def ratio(a, b) -> str:
            return "—" if not a or not b else f"{a / b:.2f}"

        over = warm.get("overhead", {})
        lines.append(
            f"| {e['model']} | {e['device']} | {_f(cold['start_s'], 1, 2)} | "
            f"{ratio(cold['start_s'], pc.get('start_s'))} | "
            f"{_f(warm['start_s'], 1, 2)} | {ratio(warm['start_s'], pw.get('start_s'))} | "
            f"{_f(warm['since_spawn_s'], 1, 2)} | {_f(warm['imports_s'], 1, 2)} | "
            f"{_mib(cold['peak_rss_bytes'])} / {_mib(warm['peak_rss_bytes'])} | "
            f"{ratio(cold['peak_rss_bytes'], pc.get('peak_rss_bytes'))} / "
            f"{ratio(warm['peak_rss_bytes'], pw.get('peak_rss_bytes'))} | "
            f"{_f(over.get('overhead_s'), 1e6, 0)} ({_f(over.get('paired_overhead_median_s'), 1e6, 0)}) | "
            f"{_f(over.get('bare_median_s'), 1e6, 0)} |"
        )
        if pc and "error" not in pc:
            lines.append(
                f"| {e['model']} | OpenVINO direct | {_f(pc['start_s'], 1, 2)} | | {_f(pw.get('start_s'), 1, 2)} | | "
                f"{_f(pw.get('since_spawn_s'), 1, 2)} | {_f(pw.get('imports_s'), 1, 2)} | "
                f"{_mib(pc['peak_rss_bytes'])} / {_mib(pw.get('peak_rss_bytes'))} | | | |"
            )
    for e in phased:
        for kind in ("cold", "warm", "peer_cold", "peer_warm"):
            s = e.get(kind)
            if not s or "error" in s:
                continue
            lines += ["", f"### {e['model']} on {e['device'] if not kind.startswith('peer') else 'OpenVINO direct'}, "
                          f"{kind.replace('peer_', '')} (median of {s['repeats']})", "",
                      "| phase | calls | incl ms | self ms | imports ms (modules) | RSS peak / after MiB |",
                      "|---|---|---|---|---|---|"]
            lines.append(f"| spawn -> interpreter up | | {_f(s.get('python_start_s'), 1e3, 1)} | | | |")
            for p in s["phases"]:
                lines.append(f"| {p['name']} | {p['calls']} | {_f(p['incl_s'], 1e3, 1)} | {_f(p['self_s'], 1e3, 1)} | "
                             f"{_f(p['imports_s'], 1e3, 1)} ({p['modules']:.0f}) | "
                             f"{_mib(p['rss_peak'])} / {_mib(p['rss_after'])} |")
            lines.append(f"| spawn -> first result | | {_f(s.get('since_spawn_s'), 1e3, 1)} | | | |")
            lines.append(
                f"\nRSS after the start {_mib(s['rss_after'])} MiB, of it anonymous {_mib(s['rss_anon_after'])} "
                f"MiB; peak (ru_maxrss) {_mib(s['peak_rss_bytes'])} MiB. Details: {s.get('details')}"
            )
            if s.get("overhead"):
                o = s["overhead"]
                lines.append(f"\nPer run ({o['runs']} interleaved): ours {_f(o['ours_median_s'], 1e6, 0)} µs, bare "
                             f"{_f(o.get('bare_median_s'), 1e6, 0)} µs ({o['bare']}); from_numpy + numpy() "
                             f"{_f(o['from_numpy_plus_numpy_median_s'], 1e6, 0)} µs.")
        for kind in ("warm_profiled", "cold_profiled"):
            s = e.get(kind)
            if not s or "error" in s:
                continue
            for key in ("cprofile_cumulative", "cprofile_tottime"):
                if key in s:
                    text = s[key].strip().splitlines()
                    body = [ln for ln in text if ln.strip()][3:]
                    lines += ["", f"{e['model']} {e['device']} {kind} ({key}):", "", "```", *body[:40], "```"]
            if "traced_held_top" in s:
                lines += ["", f"{e['model']} {e['device']} {kind}: top Python-traced allocations still held:", ""]
                lines += [f"- {t['bytes'] / 2**20:.1f} MiB in {t['count']} blocks: {t['where']}"
                          for t in s["traced_held_top"]]
                lines += ["", "traced peak per phase (MiB): " + ", ".join(
                    f"{p['name']} {p['traced_peak'] / 2**20:.0f}" for p in s["phases"] if p.get("traced_peak"))]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--device", help=argparse.SUPPRESS)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help=argparse.SUPPRESS)
    parser.add_argument("--spawn-time", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--feeds", help=argparse.SUPPRESS)
    parser.add_argument("--models", default="mobilenet_v3_small,resnet50")
    parser.add_argument("--devices", default="intel_openvino,microsoft_onnxruntime")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="processes per figure (medians)")
    parser.add_argument("--overhead-runs", type=int, default=1000)
    parser.add_argument("--overhead-seconds", type=float, default=20.0, help="at most this long per process")
    parser.add_argument("--cprofile", type=int, default=0, help="top N functions of one extra warm and cold start")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--spawn-pairs", type=int, default=0,
                        help="also N interleaved warm starts of ours and OpenVINO direct in bare processes")
    parser.add_argument("--spawn-only", action="store_true", help="only the --spawn-pairs table")
    parser.add_argument("--model-dir", default=DEFAULT_MODEL_DIR)
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--from-json")
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if args.from_json:
        with open(args.from_json) as f:
            report = json.load(f)
    else:
        sys.path.insert(0, ROOT)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        load_before = os.getloadavg()
        scratch = tempfile.mkdtemp(prefix="profile-startup-")
        entries = []
        try:
            for name in [m for m in args.models.split(",") if m]:
                model, feeds = ensure_benchmark_model(name, args.model_dir, scratch)
                for device in [d for d in args.devices.split(",") if d]:
                    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {name} {device}",
                          file=sys.stderr, flush=True)
                    entries.append(measure(name, model, device, args, scratch, feeds))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        try:
            commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = "?"
        import datetime
        import platform

        report = {"started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "host": platform.node(), "cores": os.cpu_count(), "threads": args.threads,
                  "repeat": args.repeat, "load_before": load_before, "load_after": os.getloadavg(),
                  "commit": commit, "entries": entries}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    text = render(report)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
