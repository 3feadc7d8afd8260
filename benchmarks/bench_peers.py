"""Our predictor against its peers on the six zoo vision models, side by side, in one run.

    python benchmarks/bench_peers.py [--models m1,m2] [--threads 1,2] [--runners r1,r2] [--runs N]
                                     [--rounds K] [--json out.json] [--markdown out.md] [--lite-python PATH]
    python benchmarks/bench_peers.py --from-json out.json [--markdown out.md]   # re-render a saved run

Runners (RUNNERS below): ours on intel_openvino, microsoft_onnxruntime and builtin_device; OpenVINO
reading the Paddle model itself (its Paddle frontend, CACHE_DIR for the warm start); paddle2onnx +
onnxruntime; Paddle Inference with and without oneDNN; Paddle Lite 2.13rc0 (a Python 3.10 environment,
see benchmarks/README.md). A runner whose packages are missing is listed as "not available: <why>".

Every (model, threads, runner) runs in two fresh subprocesses (peers/child.py, peers/lite_child.py):
  cold  with an empty cache dir: start = load + partition + convert + compile + first run (after
        imports); then the steady runs (median, p90); peak RSS = that process's ru_maxrss;
  warm  with the cache the cold process left: time from Popen to the first result, and the part after
        imports. Runners without a program cache (Paddle Inference, Paddle Lite) just start again;
        paddle2onnx + onnxruntime starts from the .onnx file the cold process converted.
With --rounds K every row is measured K times, the rounds interleaved; each start figure is its minimum
over the rounds and the steady figures come from the round with the lowest median (the machine may be
shared: other work only ever slows a round down).
Each runner's first output is checked against Paddle Inference without oneDNN at DESIGN.md's whole-model
tolerance |got - want| <= 1e-4*|want| + 1e-5*max|want| (nnadapter_bridge.validation.tolerances). Ratios compare
steady medians with the peer on the same row (PEER_OF). The models are built once (zoo, clip_extra=False so Paddle Lite
can read them)
into ~/.cache/nnadapter-bridge/bench-peers/ (--model-dir to change); paddlepaddle is needed for that.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from peers.child_protocol import spawn  # noqa: E402

from devtools import zoo  # noqa: E402
from nnadapter_bridge.validation.tolerances import model_out_of_tolerance  # noqa: E402

PEERS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")
RESULT_MARKER = "BENCH_PEERS_RESULT "
DEFAULT_MODEL_DIR = os.path.join(os.path.expanduser("~"), ".cache", "nnadapter-bridge", "bench-peers",
                                 "models-keep-extra")
DEFAULT_LITE_PYTHON = os.environ.get("BENCH_PEERS_LITE_PYTHON", "/tmp/lite310/bin/python")
INPUT_SEED = 0
BATCH = 1
CHILD_TIMEOUT_S = 1200
REFERENCE_RUNNER = "paddle_inference"

# name -> (what it is, packages it needs in this interpreter)
RUNNERS = {
    "ours_openvino": ("nnadapter-bridge predictor, device intel_openvino", ("openvino",)),
    "openvino_paddle": ("OpenVINO reading the .pdmodel itself (Paddle frontend), CPU plugin", ("openvino",)),
    "ours_onnxruntime": ("nnadapter-bridge predictor, device microsoft_onnxruntime", ("onnxruntime",)),
    "paddle2onnx_ort": ("paddle2onnx (opset 13) then onnxruntime CPU", ("paddle2onnx", "onnxruntime", "paddle")),
    "ours_builtin": ("nnadapter-bridge predictor, device builtin_device (numpy)", ()),
    "paddle_inference": ("Paddle Inference, oneDNN off (also the correctness reference)", ("paddle",)),
    "paddle_inference_onednn": ("Paddle Inference, oneDNN on", ("paddle",)),
    "paddle_lite": ("Paddle Lite 2.13rc0 x86 (Python 3.10 env), X86+Host FP32 places", ()),
}
# The peer each of ours is compared with (steady median ratio ours / peer).
PEER_OF = {"ours_openvino": "openvino_paddle", "ours_onnxruntime": "paddle2onnx_ort",
           "ours_builtin": "paddle_inference"}
OUR_DEVICES = {"ours_openvino": "intel_openvino", "ours_onnxruntime": "microsoft_onnxruntime",
               "ours_builtin": "builtin_device"}
# The speed goals set against the peers:
# (column label, what, our runner, peer runner, figure, allowed ratio ours / peer)
GOALS = [
    ("steady ov ≤1.05", "steady latency on intel_openvino <= 1.05x OpenVINO reading the model itself",
     "ours_openvino", "openvino_paddle", "steady_median_s", 1.05),
    ("steady ort ≤1.05", "steady latency on microsoft_onnxruntime <= 1.05x paddle2onnx + onnxruntime",
     "ours_onnxruntime", "paddle2onnx_ort", "steady_median_s", 1.05),
    ("warm spawn→result ≤1", "warm-cache start, process start to first result, <= OpenVINO's own warm "
     "CACHE_DIR start", "ours_openvino", "openvino_paddle", "warm_since_spawn_s", 1.0),
    ("warm after imports ≤1", "the same, counting only what follows the imports", "ours_openvino",
     "openvino_paddle", "warm_start_s", 1.0),
    ("cold ≤1.5", "cold start <= 1.5x OpenVINO's read + compile (+ first run)", "ours_openvino",
     "openvino_paddle", "cold_start_s", 1.5),
    ("RSS cold ≤1.25", "peak RSS of the cold process <= 1.25x OpenVINO's", "ours_openvino", "openvino_paddle",
     "peak_rss_bytes", 1.25),
    ("RSS warm ≤1.25", "peak RSS of the warm process <= 1.25x OpenVINO's (with its CACHE_DIR)", "ours_openvino",
     "openvino_paddle", "warm_peak_rss_bytes", 1.25),
]


# -- availability ---------------------------------------------------------------------------------------
def lite_python_problem(lite_python: str):
    """None when `lite_python` can import paddlelite with numpy<2, else why not."""
    if not os.path.isfile(lite_python):
        return (f"no Python 3.10 environment with paddlelite at {lite_python} (see benchmarks/README.md; "
                "--lite-python or BENCH_PEERS_LITE_PYTHON)")
    probe = "import numpy, paddlelite.lite; print(numpy.__version__)"
    proc = subprocess.run([lite_python, "-c", probe], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return f"{lite_python} cannot import paddlelite: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
    if int(proc.stdout.strip().split(".")[0]) >= 2:
        return f"{lite_python} has numpy {proc.stdout.strip()}; paddlelite 2.13rc0 needs numpy<2"
    return None


def runner_problem(runner: str, lite_python: str):
    """None when `runner` can run here, else the reason it cannot."""
    if runner == "paddle_lite":
        return lite_python_problem(lite_python)
    missing = [p for p in RUNNERS[runner][1] if importlib.util.find_spec(p) is None]
    if missing:
        return f"package(s) not installed: {', '.join(missing)} (benchmarks/requirements-peers.txt)"
    if runner in OUR_DEVICES:
        from nnadapter_bridge import check_nnadapter_device_name

        if not check_nnadapter_device_name(OUR_DEVICES[runner]):
            return f"NNAdapter device {OUR_DEVICES[runner]} cannot be acquired here"
    return None


def package_versions(lite_python: str) -> dict:
    versions = {"python": platform.python_version()}
    for dist in ("nnadapter-bridge", "paddlepaddle", "openvino", "onnxruntime", "onnx", "paddle2onnx", "numpy"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    if lite_python_problem(lite_python) is None:
        probe = ("import importlib.metadata as m, platform; "
                 "print(m.version('paddlelite'), m.version('numpy'), platform.python_version())")
        out = subprocess.run([lite_python, "-c", probe], capture_output=True, text=True).stdout.split()
        if len(out) == 3:
            versions["paddlelite"] = f"{out[0]} (Python {out[2]}, numpy {out[1]})"
    return versions


PRODUCT_SOURCES = ("nnadapter_bridge", "hal", "converters", "partition")


def source_state() -> dict:
    """The commit (a read-only git query) and a digest of the product's source files as they are on disk:
    what was measured, and whether someone changed it while the benchmark ran."""
    import hashlib

    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    digest = hashlib.md5()
    for top in PRODUCT_SOURCES:
        for folder, dirs, files in sorted(os.walk(os.path.join(ROOT, top))):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, ROOT).encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read())
    return {"commit": commit or "unknown", "sources_md5": digest.hexdigest()}


# -- running the children -------------------------------------------------------------------------------
def ensure_model(name: str, model_dir: str) -> str:
    path = zoo.model_path(name, "pdmodel", os.path.join(model_dir, name))
    if not (os.path.isfile(path) and os.path.isfile(path[: -len(".pdmodel")] + ".pdiparams")):
        print(f"building {name} (clip_extra=False) into {model_dir} ...", file=sys.stderr, flush=True)
        zoo.build_model(name, os.path.join(model_dir, name), clip_extra=False)
    return path


def run_child(runner: str, phase: str, model: str, input_path: str, threads: int, work_dir: str, runs: int,
              output_path: str, lite_python: str) -> dict:
    """One child process; its result dict, or {"error": why}."""
    if runner == "paddle_lite":
        cmd = [lite_python, os.path.join(PEERS_DIR, "lite_child.py")]
    else:
        cmd = [sys.executable, os.path.join(PEERS_DIR, "child.py")]
    cmd += [runner, "--model", model, "--input", input_path, "--threads", str(threads), "--phase", phase,
            "--work-dir", work_dir, "--runs", str(runs), "--output", output_path]
    env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_minloglevel="2", PYTHONWARNINGS="ignore")
    return spawn(cmd, phase, RESULT_MARKER, env, CHILD_TIMEOUT_S)


def check_output(got: np.ndarray, want: np.ndarray) -> str:
    """'ok' or what is wrong, at DESIGN.md's whole-model tolerance."""
    if got.shape != want.shape:
        return f"MISMATCH shape {list(got.shape)} vs {list(want.shape)}"
    bad = model_out_of_tolerance(got, want)
    if not bad.any():
        return "ok"
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return f"MISMATCH {int(bad.sum())}/{got.size} elems, max |diff| {diff.max():.3g}"


def measure(runner: str, model_name: str, model: str, input_path: str, threads: int, runs: int,
            scratch: str, lite_python: str) -> dict:
    """One round of one row: a cold child (empty cache dir), then a warm child (the cache it left)."""
    work_dir = os.path.join(scratch, f"{model_name}-t{threads}-{runner}")
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    cold_out = os.path.join(scratch, f"{model_name}-t{threads}-{runner}-cold.npy")
    warm_out = os.path.join(scratch, f"{model_name}-t{threads}-{runner}-warm.npy")
    row = {"model": model_name, "threads": threads, "runner": runner, "load_1min": os.getloadavg()[0]}
    cold = run_child(runner, "cold", model, input_path, threads, work_dir, runs, cold_out, lite_python)
    if "error" in cold:
        row["error"] = cold["error"]
        return row
    warm = run_child(runner, "warm", model, input_path, threads, work_dir, runs, warm_out, lite_python)
    steady = np.array(cold["steady_s"])
    row.update(cold_start_s=cold["start_s"], cold_since_spawn_s=cold["first_result_since_spawn_s"],
               steady_median_s=float(np.median(steady)), steady_p90_s=float(np.percentile(steady, 90)),
               steady_runs=len(steady), peak_rss_bytes=cold["peak_rss_bytes"], cold=cold, output=cold_out)
    if "error" in warm:
        row["warm_error"] = warm["error"]
    else:
        row.update(warm_start_s=warm["start_s"], warm_since_spawn_s=warm["first_result_since_spawn_s"],
                   warm_peak_rss_bytes=warm["peak_rss_bytes"], warm=warm)
    return row


# Figures for which the least-disturbed round counts (the machine is shared; others only slow us down).
BEST_OF_ROUNDS = ("cold_start_s", "cold_since_spawn_s", "warm_start_s", "warm_since_spawn_s")
MEDIAN_OF_ROUNDS = ("peak_rss_bytes", "warm_peak_rss_bytes")  # with --aggregate median only


def best_of_rounds(rounds: list, aggregate: str = "min") -> dict:
    """Merge the rounds of one row: each start figure (and each peak RSS) is its minimum over the rounds, or its
    median with aggregate="median"; the steady figures come from the round with the lowest (or the median)
    median (its p90 with it); the rest from the first round."""
    good = [r for r in rounds if "error" not in r]
    if not good:
        return rounds[0]
    if aggregate == "median":
        ranked = sorted(good, key=lambda r: r["steady_median_s"])
        steady = ranked[(len(ranked) - 1) // 2]
    else:
        steady = min(good, key=lambda r: r["steady_median_s"])
    merged = dict(steady)
    for figure in BEST_OF_ROUNDS + (MEDIAN_OF_ROUNDS if aggregate == "median" else ()):
        values = [r[figure] for r in good if figure in r]
        if values:
            merged[figure] = float(np.median(values)) if aggregate == "median" else min(values)
    merged["rounds"] = len(good)
    merged["round_medians_s"] = [r["steady_median_s"] for r in good]
    merged["load_1min"] = max(r["load_1min"] for r in rounds)
    return merged


# -- reporting ------------------------------------------------------------------------------------------
def _ms(seconds) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f}"


def _s(seconds) -> str:
    return "—" if seconds is None else f"{seconds:.2f}"


def find_row(rows, model, threads, runner):
    for row in rows:
        if row["model"] == model and row["threads"] == threads and row["runner"] == runner:
            return row
    return None


def markdown_table(rows, unavailable: dict) -> str:
    head = ("| model | thr | runner | cold start s | warm start s (spawn→result / after imports) | median ms | "
            "p90 ms | peak RSS MiB (cold / warm) | ×peer (median) | output vs Paddle | load |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        model, threads, runner = row["model"], row["threads"], row["runner"]
        if "error" in row:
            lines.append(f"| {model} | {threads} | {runner} | failed: {row['error']} ||||||||")
            continue
        warm = (f"{_s(row.get('warm_since_spawn_s'))} / {_s(row.get('warm_start_s'))}"
                if "warm_start_s" in row else f"failed: {row.get('warm_error')}")
        warm_rss = f"{row['warm_peak_rss_bytes'] / 2**20:.0f}" if "warm_peak_rss_bytes" in row else "—"
        ratio = "—"
        peer = find_row(rows, model, threads, PEER_OF.get(runner, ""))
        if peer is not None and "steady_median_s" in peer:
            ratio = f"{row['steady_median_s'] / peer['steady_median_s']:.2f}× {PEER_OF[runner]}"
        lines.append(f"| {model} | {threads} | {runner} | {_s(row['cold_start_s'])} | {warm} | "
                     f"{_ms(row['steady_median_s'])} | {_ms(row['steady_p90_s'])} | "
                     f"{row['peak_rss_bytes'] / 2**20:.0f} / {warm_rss} | {ratio} | {row.get('check', '—')} | "
                     f"{row['load_1min']:.1f} |")
    for runner, why in unavailable.items():
        lines.append(f"| (all) | — | {runner} | not available: {why} ||||||||")
    return "\n".join(lines)


def goal_verdicts(rows) -> list:
    verdicts = []
    for label, what, ours, peer, figure, allowed in GOALS:
        for model, threads in sorted({(r["model"], r["threads"]) for r in rows}):
            mine, theirs = find_row(rows, model, threads, ours), find_row(rows, model, threads, peer)
            if mine is None or theirs is None or figure not in mine or figure not in theirs:
                verdict, ratio = "not measured", None
            else:
                ratio = mine[figure] / theirs[figure]
                verdict = "met" if ratio <= allowed else "MISSED"
            verdicts.append({"goal": label, "what": what, "model": model, "threads": threads, "ratio": ratio,
                             "allowed": allowed, "verdict": verdict})
    return verdicts


def markdown_goals(verdicts) -> str:
    """One row per (model, threads), one column per goal: `ours/peer ratio verdict`."""
    labels = [goal[0] for goal in GOALS]
    cells: dict = {}
    for v in verdicts:
        ratio = "—" if v["ratio"] is None else f"{v['ratio']:.2f}"
        cells[(v["model"], v["threads"], v["goal"])] = f"{ratio} {v['verdict']}"
    keys = sorted({(v["model"], v["threads"]) for v in verdicts})
    lines = ["| model | thr | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for model, threads in keys:
        lines.append(
            f"| {model} | {threads} | " + " | ".join(cells[(model, threads, label)] for label in labels) + " |"
        )
    met = sum(v["verdict"] == "met" for v in verdicts)
    missed = sum(v["verdict"] == "MISSED" for v in verdicts)
    legend = "\n".join(f"- {label}: {what} (ratio ours / peer)" for label, what, *_ in GOALS)
    return "\n".join(lines) + f"\n\n{met} met, {missed} missed.\n\n" + legend


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(zoo.MODELS), help="comma list (default: the six)")
    parser.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    parser.add_argument("--runners", default=",".join(RUNNERS), help=f"comma list of: {', '.join(RUNNERS)}")
    parser.add_argument("--runs", type=int, default=None,
                        help="steady runs per row (default 30, 10 for resnet50)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every row this many times, interleaved; keep the least-disturbed figures")
    parser.add_argument("--aggregate", choices=("min", "median"), default="min",
                        help="how --rounds merge: each start figure's minimum (default: the least-disturbed round) "
                             "or its median (start figures and peak RSS; steady: the round of median median)")
    parser.add_argument("--json", help="write every figure (raw steady times included) here")
    parser.add_argument("--markdown", help="write the tables here")
    parser.add_argument("--model-dir", default=DEFAULT_MODEL_DIR)
    parser.add_argument("--lite-python", default=DEFAULT_LITE_PYTHON,
                        help="Python 3.10 with paddlelite==2.13rc0 and numpy<2 (default %(default)s)")
    parser.add_argument("--keep", help="keep outputs and caches in this directory instead of a temporary one")
    parser.add_argument("--from-json", help="measure nothing: print (and --markdown) the report of a saved --json")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            emit_report(json.load(f), args.markdown)
        return 0
    models = [m for m in args.models.split(",") if m]
    threads_list = [int(t) for t in args.threads.split(",") if t]
    runners = [r for r in args.runners.split(",") if r]
    for name in models:
        if name not in zoo.MODELS:
            parser.error(f"unknown model {name}; choose from {', '.join(zoo.MODELS)}")
    for runner in runners:
        if runner not in RUNNERS:
            parser.error(f"unknown runner {runner}; choose from {', '.join(RUNNERS)}")

    load_before = os.getloadavg()
    source_before = source_state()
    started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    unavailable = {r: why for r in runners if (why := runner_problem(r, args.lite_python)) is not None}
    available = [r for r in runners if r not in unavailable]
    reference_available = runner_problem(REFERENCE_RUNNER, args.lite_python) is None
    scratch = args.keep or tempfile.mkdtemp(prefix="bench-peers-")
    os.makedirs(scratch, exist_ok=True)
    input_path = os.path.join(scratch, "x.npy")
    np.save(input_path, np.random.default_rng(INPUT_SEED).standard_normal((BATCH, 3, 224, 224)).astype(np.float32))

    rows = []
    for name in models:
        model = ensure_model(name, args.model_dir)
        runs = args.runs or (10 if name == "resnet50" else 30)
        for threads in threads_list:
            order = available
            if reference_available and REFERENCE_RUNNER not in order:
                order = [REFERENCE_RUNNER] + order  # needed for the output check; not shown
            rounds = {runner: [] for runner in order}
            for number in range(args.rounds):
                for runner in order:
                    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {name} t={threads} {runner}"
                          f" round {number + 1}/{args.rounds}", file=sys.stderr, flush=True)
                    rounds[runner].append(measure(runner, name, model, input_path, threads, runs, scratch,
                                                  args.lite_python))
            batch = [best_of_rounds(rounds[runner], args.aggregate) for runner in order]
            reference = find_row(batch, name, threads, REFERENCE_RUNNER)
            want = np.load(reference["output"]) if reference and "output" in reference else None
            for row in batch:
                if "output" in row:
                    row["check"] = "no reference" if want is None else check_output(np.load(row["output"]), want)
            rows.extend(r for r in batch if r["runner"] in available)

    load_after = os.getloadavg()
    run = {"started": started.isoformat(), "host": platform.node(), "cores": os.cpu_count(),
           "machine": f"{platform.machine()}, Linux {platform.release()}", "load_before": load_before,
           "load_after": load_after, "rounds": args.rounds, "aggregate": args.aggregate,
           "source_before": source_before,
           "source_after": source_state(), "versions": package_versions(args.lite_python),
           "runners": runners, "unavailable": unavailable, "rows": rows, "goals": goal_verdicts(rows)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(run, f, indent=1)
    emit_report(run, args.markdown)
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def render_report(run: dict) -> str:
    """The markdown report of one run (what --json saved)."""
    def fmt(load):
        return " ".join(f"{x:.2f}" for x in load)

    started = datetime.datetime.fromisoformat(run["started"])
    source = ""
    if "source_before" in run:
        before, after = run["source_before"], run["source_after"]
        source = (f"Code: commit {before['commit']} at the start, {after['commit']} at the end; product sources "
                  f"(*.py of {', '.join(PRODUCT_SOURCES)}) md5 {before['sources_md5'][:8]}")
        if before["sources_md5"] != after["sources_md5"]:
            source += (f", **{after['sources_md5'][:8]} at the end: the sources changed during the run**, rows "
                       "measured at different times ran different code")
        source += "."
        source += "\n\n"
    runner_lines = "\n".join(f"- `{name}`: {RUNNERS[name][0]}" for name in run["runners"])
    return (f"Measured {started:%Y-%m-%d %H:%M} UTC on {run['host']}: {run['cores']} cores, {run['machine']}; "
            f"load average (1/5/15 min) {fmt(run['load_before'])} at start, {fmt(run['load_after'])} at end; "
            f"{run['rounds']} round(s) per row ({'medians' if run.get('aggregate') == 'median' else 'best'} of the "
            f"rounds).\n\n"
            f"{source}Versions: {', '.join(f'{k} {v}' for k, v in run['versions'].items())}.\n\n"
            f"Runners:\n{runner_lines}\n\n{markdown_table(run['rows'], run['unavailable'])}\n\n"
            f"{markdown_goals(goal_verdicts(run['rows']))}\n")


def emit_report(run: dict, markdown_path) -> None:
    report = render_report(run)
    print(report)
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(report)


if __name__ == "__main__":
    sys.exit(main())
