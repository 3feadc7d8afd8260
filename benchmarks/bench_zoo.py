"""The real-architecture zoo (tests/support/real_zoo: models built from paddleclas, paddleseg, ppdet,
paddlenlp and paddlex code, exported the Paddle 3 way) run by us on each device and by every peer, side by
side, interleaved, in one run.

    python benchmarks/bench_zoo.py [--models m1,m2] [--threads 1,2] [--runners r1,r2] [--runs N]
                                   [--rounds K] [--steady per-process|in-process] [--json out.json]
                                   [--markdown out.md]
    python benchmarks/bench_zoo.py --from-json out.json [--markdown out.md]   # re-render a saved run

Runners (peers/zoo_child.py): ours on intel_openvino, microsoft_onnxruntime, google_xnnpack and builtin_device,
and ours_fastest (the first three listed with device selection "fastest": its cold start calibrates and times);
paddle2onnx (opset 17) then onnxruntime, and then OpenVINO reading that ONNX; Paddle Inference with oneDNN
off (also the correctness reference) and on. Every (model, threads, runner) runs a cold child (empty cache
dir: load + convert + compile + first run, then the steady runs) and a warm child (the cache the cold one
left); with --rounds K the rows of one (model, threads) are measured K times, the runners interleaved
within each round, and each row keeps its least-disturbed round (bench_peers.best_of_rounds).
With --steady in-process, each round of one (model, threads) is instead a single child that prepares every
runner and times them in rotating turns of at least 5 runs and 0.1 s each, ceil(runs / 5) turns per runner
(zoo_child.py's interleaved phase): this VM's speed drifts by 10-60% between processes minutes apart, and turns
within one process see the same drift. That mode gives steady figures only (its start times are in a process
already holding the other runners; no warm start): take start figures from the default mode.
Every output of every runner is checked against Paddle Inference without oneDNN at DESIGN.md's whole-model
tolerance (where Paddle's own oneDNN build misses it too, within twice that spread, as tests/e2e/test_real_zoo.py
does; a detection list's rows of tied scores in one order, as there); a runner that cannot convert or run a model,
or gives a wrong answer, does not count as a peer.
The table gives, per model and thread count, our best device's steady median against the fastest peer
that runs the model correctly (ratio = peer time / our time: above 1 we are faster), and the geometric mean.
The models are built (or taken from the test fixture cache) by tests/support/real_zoo; building needs the
side venv that module makes.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE, os.path.join(ROOT, "tests")]

from bench_peers import best_of_rounds, package_versions, source_state  # noqa: E402
from peers.child_protocol import spawn  # noqa: E402

from nnadapter_bridge.validation.tolerances import model_out_of_tolerance  # noqa: E402

CHILD = os.path.join(HERE, "peers", "zoo_child.py")
RESULT_MARKER = "BENCH_ZOO_RESULT "
PROGRESS_MARKER = "BENCH_ZOO_PROGRESS "  # zoo_child.py's interleaved phase
CHILD_TIMEOUT_S = 1800
REFERENCE_RUNNER = "paddle_inference"
OURS = {"ours_openvino": "intel_openvino", "ours_onnxruntime": "microsoft_onnxruntime",
        "ours_xnnpack": "google_xnnpack", "ours_builtin": "builtin_device",
        # intel_openvino, microsoft_onnxruntime and google_xnnpack with device selection "fastest" (issue 30)
        "ours_fastest": "fastest"}
SINGLE_DEVICE = ["ours_openvino", "ours_onnxruntime", "ours_xnnpack"]  # what ours_fastest chooses among
PEERS = ["paddle2onnx_ort", "paddle2onnx_openvino", "paddle_inference", "paddle_inference_onednn"]
RUNNERS = ["ours_openvino", "ours_onnxruntime", "ours_xnnpack", "ours_fastest", "ours_builtin", *PEERS]
# builtin_device (numpy) only with --runners
DEFAULT_RUNNERS = ["ours_openvino", "ours_onnxruntime", "ours_xnnpack", "ours_fastest", *PEERS]


def zoo_models(names=None) -> dict:
    """name -> (model path, feeds dict), built or taken from the test fixture cache (support.real_zoo)."""
    from support.real_zoo import env
    from support.real_zoo.catalog import MODELS
    from support.real_zoo.fixtures import feeds_for

    chosen = names or list(MODELS)
    unknown = sorted(set(chosen) - set(MODELS))
    if unknown:
        raise SystemExit(f"bench_zoo: unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(MODELS)}")
    return {name: (env.model_path(name), feeds_for(name)) for name in chosen}


def run_child(runner: str, phase: str, model: str, feeds_path: str, threads: int, work_dir: str, runs: int,
              output_path: str, progress_marker: str = "") -> dict:
    cmd = [sys.executable, CHILD, runner, "--model", model, "--feeds", feeds_path, "--threads", str(threads),
           "--phase", phase, "--work-dir", work_dir, "--runs", str(runs), "--output", output_path]
    env = dict(os.environ, GLOG_minloglevel="2", PYTHONWARNINGS="ignore")
    return spawn(cmd, phase, RESULT_MARKER, env, CHILD_TIMEOUT_S, progress_marker)


def measure(runner, name, model, feeds_path, threads, runs, scratch) -> dict:
    work_dir = os.path.join(scratch, f"{name}-t{threads}-{runner}")
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    cold_out = os.path.join(scratch, f"{name}-t{threads}-{runner}-cold.npz")
    row = {"model": name, "threads": threads, "runner": runner, "load_1min": os.getloadavg()[0]}
    cold = run_child(runner, "cold", model, feeds_path, threads, work_dir, runs, cold_out)
    if "error" in cold:
        row["error"] = cold["error"]
        return row
    warm = run_child(runner, "warm", model, feeds_path, threads, work_dir, runs,
                     os.path.join(scratch, f"{name}-t{threads}-{runner}-warm.npz"))
    steady = np.array(cold["steady_s"])
    row.update(cold_start_s=cold["start_s"], cold_since_spawn_s=cold["first_result_since_spawn_s"],
               steady_median_s=float(np.median(steady)), steady_p90_s=float(np.percentile(steady, 90)),
               steady_runs=len(steady), peak_rss_bytes=cold["peak_rss_bytes"], output=cold_out,
               details=cold.get("details"))
    if "error" in warm:
        row["warm_error"] = warm["error"]
    else:
        row.update(warm_start_s=warm["start_s"], warm_since_spawn_s=warm["first_result_since_spawn_s"])
    return row


def measure_in_process(runners, name, model, feeds_path, threads, runs, scratch, round_number) -> list:
    """One interleaved child for every runner (--steady in-process): a row per runner, steady figures only. A
    runner that ends the child while it is being prepared (Paddle Inference with oneDNN aborts on some models)
    gets that as its result, and the child runs again without it."""
    load = os.getloadavg()[0]
    crashed: dict = {}
    remaining = list(runners)
    found: dict = {}
    while remaining:
        work_dir = os.path.join(scratch, f"{name}-t{threads}-r{round_number}")
        shutil.rmtree(work_dir, ignore_errors=True)
        os.makedirs(work_dir)
        found = run_child(",".join(remaining), "interleaved", model, feeds_path, threads, work_dir, runs,
                          os.path.join(scratch, f"{name}-t{threads}-r{round_number}"), PROGRESS_MARKER)
        culprit = found.get("progress", "").removeprefix("preparing ")
        if "error" not in found or culprit not in remaining:
            break
        crashed[culprit] = found["error"]
        remaining.remove(culprit)
        print(f"bench_zoo: {name} t{threads} {culprit} ended the process; again without it", file=sys.stderr,
              flush=True)
    rows = []
    for runner in runners:
        row = {"model": name, "threads": threads, "runner": runner, "load_1min": load, "steady": "in-process"}
        figures = ({"error": crashed[runner]} if runner in crashed else
                   found.get("runners", {}).get(runner) or {"error": found.get("error", "no result")})
        if "error" in figures:
            row["error"] = figures["error"]
        else:
            steady = np.array(figures["steady_s"])
            row.update(cold_start_s=figures["start_s"], steady_median_s=float(np.median(steady)),
                       steady_p90_s=float(np.percentile(steady, 90)), steady_runs=len(steady),
                       output=figures["output"], details=figures.get("details"))
        rows.append(row)
    return rows


def output_differences(got_path: str, want_path: str, detection_list: bool = False) -> list:
    """Per output: None within DESIGN.md's whole-model tolerance (integers exact), else (what, max |diff|). With
    `detection_list` (the model's first output is one: support.real_zoo.detections), the rows of each run of tied
    scores of that output are compared in one order, as tests/e2e/test_real_zoo.py compares them."""
    from support.real_zoo.detections import tied_row_orders

    with np.load(got_path) as got, np.load(want_path) as want:
        if len(got.files) != len(want.files):
            return [(f"{len(got.files)} outputs vs {len(want.files)}", math.inf)]
        found = []
        for number, key in enumerate(sorted(want.files, key=lambda k: int(k[3:]))):
            g, w = got[key], want[key]
            if number == 0 and detection_list and g.shape == w.shape and g.ndim == 2:
                got_order, want_order = tied_row_orders(g, w)
                g, w = g[got_order], w[want_order]
            if g.shape != w.shape:
                found.append((f"{key} shape {list(g.shape)} vs {list(w.shape)}", math.inf))
            elif w.dtype.kind in "iub":
                found.append(None if np.array_equal(g, w) else (f"{key} {int((g != w).sum())}/{w.size} differ",
                                                                math.inf))
            elif model_out_of_tolerance(g, w).any():
                diff = float(np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64))))
                found.append((f"{key} max |diff| {diff:.3g}", diff))
            else:
                found.append(None)
        return found


def check_rows(batch: list, reference: dict) -> None:
    """Set each row's "check" against the reference (Paddle Inference without oneDNN). Where Paddle's own oneDNN
    build misses the tolerance too (random weights amplifying float rounding: ResNet50-vd), a row within twice
    that spread on every output is "ok", and says so."""
    from support.real_zoo.detections import DETECTION_LISTS

    detection_list = reference["model"] in DETECTION_LISTS
    differences = {r["runner"]: output_differences(r["output"], reference["output"], detection_list)
                   for r in batch if "output" in r}
    onednn = differences.get("paddle_inference_onednn") or []
    spread = [d[1] if d else 0.0 for d in onednn]
    for row in batch:
        if row["runner"] not in differences:
            if "error" not in row:
                row["check"] = "no reference"
            continue
        found = differences[row["runner"]]
        if not any(found):
            row["check"] = "ok"
        elif any(spread) and len(spread) == len(found) and all(
                d is None or d[1] <= 2 * s for d, s in zip(found, spread)):
            row["check"] = f"ok (within 2x Paddle's oneDNN on/off spread {max(spread):.3g})"
        else:
            row["check"] = "MISMATCH " + "; ".join(d[0] for d in found if d)


def summarize(rows: list) -> list:
    """Per (model, threads): our best device against the fastest peer that ran the model correctly."""
    summary = []
    for key in sorted({(r["model"], r["threads"]) for r in rows}):
        batch = [r for r in rows if (r["model"], r["threads"]) == key and "steady_median_s" in r]
        ok = [r for r in batch if str(r.get("check", "")).startswith("ok")]
        ours = [r for r in ok if r["runner"] in OURS]
        peers = [r for r in ok if r["runner"] in PEERS]
        best_ours = min(ours, key=lambda r: r["steady_median_s"]) if ours else None
        best_peer = min(peers, key=lambda r: r["steady_median_s"]) if peers else None
        ratio = (best_peer["steady_median_s"] / best_ours["steady_median_s"]
                 if best_ours is not None and best_peer is not None else None)
        single = [r for r in ok if r["runner"] in SINGLE_DEVICE]
        best_single = min(single, key=lambda r: r["steady_median_s"]) if single else None
        fastest = next((r for r in ok if r["runner"] == "ours_fastest"), None)
        summary.append({"model": key[0], "threads": key[1], "ours": best_ours and best_ours["runner"],
                        "ours_ms": best_ours and best_ours["steady_median_s"] * 1e3,
                        "peer": best_peer and best_peer["runner"],
                        "peer_ms": best_peer and best_peer["steady_median_s"] * 1e3, "ratio": ratio,
                        # ours_fastest (device selection "fastest") against the best single device and the peer
                        "fastest_ms": fastest and fastest["steady_median_s"] * 1e3,
                        "best_single": best_single and best_single["runner"],
                        "fastest_vs_single": (best_single["steady_median_s"] / fastest["steady_median_s"]
                                              if fastest is not None and best_single is not None else None),
                        "fastest_ratio": (best_peer["steady_median_s"] / fastest["steady_median_s"]
                                          if fastest is not None and best_peer is not None else None),
                        "fastest_choice": fastest and (fastest.get("details") or {}).get("device_selection")})
    return summary


def _ms(seconds) -> str:
    """Milliseconds to three significant figures (a 0.17 ms classifier and a 300 ms detector share the table)."""
    return "—" if seconds is None else f"{seconds * 1e3:.3g}"


def render_markdown(run: dict) -> str:
    rows, summary = run["rows"], run["summary"]
    in_process = run.get("steady") == "in-process"
    lines = [
        f"Measured {run['date']} on {run['machine']}; commit {run['source']['commit']}, sources md5 "
        f"{run['source']['sources_md5'][:8]}; {run['rounds']} round(s), {run['runs']} steady runs"
        + (", every runner of a (model, threads) in one process, timed in rotating turns (--steady in-process: "
           "start figures are in a shared process, no warm start)." if in_process else "."),
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in run["versions"].items()),
        "",
        "### Ours (best device) against the fastest peer that runs the model correctly",
        "",
        "| model | threads | ours | ms | fastest correct peer | ms | peer / ours |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        ratio = "—" if s["ratio"] is None else f"{s['ratio']:.2f}×"
        ours_ms = _ms(s["ours_ms"] and s["ours_ms"] / 1e3)
        peer_ms = _ms(s["peer_ms"] and s["peer_ms"] / 1e3)
        lines.append(f"| {s['model']} | {s['threads']} | {s['ours'] or '—'} | {ours_ms} | {s['peer'] or '—'} | "
                     f"{peer_ms} | {ratio} |")
    for threads in sorted({s["threads"] for s in summary}):
        ratios = [s["ratio"] for s in summary if s["threads"] == threads and s["ratio"]]
        if ratios:
            geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            lines.append(f"\nGeometric mean at {threads} thread(s): {geo:.2f}× over {len(ratios)} models "
                         f"(slowest: {min(ratios):.2f}×).")
    chosen = [s for s in summary if s.get("fastest_ms") is not None]
    if chosen:  # issue 30: "fastest" within 5% of the best single device, and against the fastest peer
        lines += ["", "### Device selection \"fastest\" (ours_fastest) against the best single device and the "
                      "fastest peer", "",
                  "| model | threads | fastest ms | chosen (per subgraph) | best single | fastest / single | "
                  "peer / fastest |", "|---|---|---|---|---|---|---|"]
        for s in chosen:
            picks = "; ".join(f"{c['order'][0]} ({c['decided_by']})" for c in (s["fastest_choice"] or [])) or "—"
            single = "—" if s["fastest_vs_single"] is None else f"{s['fastest_vs_single']:.2f}×"
            peer = "—" if s["fastest_ratio"] is None else f"{s['fastest_ratio']:.2f}×"
            lines.append(f"| {s['model']} | {s['threads']} | {_ms(s['fastest_ms'] / 1e3)} | {picks} | "
                         f"{s['best_single'] or '—'} | {single} | {peer} |")
        for threads in sorted({s["threads"] for s in chosen}):
            ratios = [s["fastest_ratio"] for s in chosen if s["threads"] == threads and s["fastest_ratio"]]
            if ratios:
                geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
                lines.append(f"\n\"fastest\" against the fastest peer at {threads} thread(s): geometric mean "
                             f"{geo:.2f}× over {len(ratios)} models.")
    lines += ["", "### Every runner", "",
              "| model | thr | runner | cold start s | warm start s (spawn→result / after imports) | median ms | "
              "p90 ms | vs Paddle | host ops |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['threads']} | {r['runner']} | — | — | — | — | "
                         f"{r['error'][:160]} | |")
            continue
        warm = "—" if "warm_start_s" not in r else f"{r['warm_since_spawn_s']:.2f} / {r['warm_start_s']:.2f}"
        host = (r.get("details") or {}).get("host_ops", "")
        lines.append(f"| {r['model']} | {r['threads']} | {r['runner']} | {r['cold_start_s']:.2f} | {warm} | "
                     f"{_ms(r['steady_median_s'])} | {_ms(r['steady_p90_s'])} | {r.get('check', '?')} | {host} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated zoo model names (default: all)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runners", help=f"comma-separated, from {', '.join(RUNNERS)}")
    parser.add_argument("--runs", type=int, default=20,
                        help="steady runs per row (default 20; with --steady in-process at least this many, in "
                             "turns of 0.1 s, at least 8 turns and 2 s of runs)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steady", choices=("per-process", "in-process"), default="per-process",
                        help="time each runner in processes of its own (default, with cold and warm starts), or "
                             "every runner of a model in one process in rotating turns (steadier figures, "
                             "steady only)")
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--markdown", help="write the tables here (default: stdout)")
    parser.add_argument("--from-json", help="re-render a saved run")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            run = json.load(f)
    else:
        runners = args.runners.split(",") if args.runners else DEFAULT_RUNNERS
        unknown = sorted(set(runners) - set(RUNNERS))
        if unknown:
            parser.error(f"unknown runner(s) {', '.join(unknown)}; choose from {', '.join(RUNNERS)}")
        if REFERENCE_RUNNER not in runners:
            runners.append(REFERENCE_RUNNER)  # every check needs it
        models = zoo_models(args.models.split(",") if args.models else None)
        threads_list = [int(t) for t in args.threads.split(",")]
        started = source_state()
        rows = []
        scratch = tempfile.mkdtemp(prefix="bench-zoo-")
        try:
            for name, (model, feeds) in models.items():
                feeds_path = os.path.join(scratch, f"{name}-feeds.npz")
                np.savez(feeds_path, **feeds)
                for threads in threads_list:
                    rounds = {runner: [] for runner in runners}
                    for number in range(args.rounds):
                        if args.steady == "in-process":
                            print(f"bench_zoo: {name} t{threads} every runner in one process, round "
                                  f"{number + 1}/{args.rounds}", file=sys.stderr, flush=True)
                            for row in measure_in_process(runners, name, model, feeds_path, threads, args.runs,
                                                          scratch, number):
                                rounds[row["runner"]].append(row)
                            continue
                        for runner in runners:  # interleaved: each round runs every runner once
                            print(f"bench_zoo: {name} t{threads} {runner} round {number + 1}/{args.rounds}",
                                  file=sys.stderr, flush=True)
                            rounds[runner].append(measure(runner, name, model, feeds_path, threads, args.runs,
                                                          scratch))
                    batch = [best_of_rounds(rounds[runner]) for runner in runners]
                    reference = next(r for r in batch if r["runner"] == REFERENCE_RUNNER)
                    if "output" in reference:
                        check_rows(batch, reference)
                    rows += batch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        run = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.machine()}",
               "versions": package_versions(""), "source": started, "source_after": source_state(),
               "rounds": args.rounds, "runs": args.runs, "steady": args.steady, "rows": rows,
               "summary": summarize(rows)}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(run, f, indent=1, default=str)
    text = render_markdown(run)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
