"""`nnadapter-bridge bench MODEL`: how long a model takes to load, to start cold, to start from a warm cache
in a fresh process, and to run steadily.

Measured, in this order:
  load            loader.load_model alone (parse the program, map the params);
  cold start      create_predictor (load + partition) and the first run (convert, compile, run) with an
                  empty model cache dir, until the first result (the .nnc files are written by threads of
                  their own meanwhile, as for any predictor; the warm start waits for them);
  warm start      the same in a fresh process (this CLI again, as a subprocess) with that cache dir now
                  filled: programs are restored, nothing is compiled (the report checks that);
  steady          --runs timed runs (or as many as fit in -t SECONDS) of the cold-start predictor after
                  --warmup untimed ones: median, p90, p99, mean, min (benchmark_app's latency mode);
  throughput      with --requests N: N clones run at once on threads of their own (intel_openvino gets N
                  streams unless INTEL_OPENVINO_NUM_STREAMS is given) for --runs runs in all or -t
                  SECONDS: frames per second (benchmark_app's throughput mode);
  where it goes   a few more runs with timers: each subgraph's and host op's time, and the run split into
                  device / copies / host / Python (cli.bench_modes).
`--compare-paddle` / `--compare-float FLOAT_MODEL` then report (untimed) how far the benchmarked outputs are
from Paddle Inference on the same model / on the float model: max errors, cosine, top-1 agreement.
`--threads N` sets the thread count property of every selected device that has one; `--dynamic-shape`
sets the dynamic shape info of every predictor (the warm-start process's too).

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the command plumbing and validation (and
`cmd_run`'s rendering); the predictor, the converters and the drivers only inside `run`, so building the parser
loads none of them.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from nnadapter_bridge.cli import bench_modes
from nnadapter_bridge.cli.interrupts import raise_if_interrupted
from nnadapter_bridge.commands import model_config, options, output
from nnadapter_bridge.commands.options import CliError
from nnadapter_bridge.validation import inputs

# The context property each device reads its thread count from.
THREAD_PROPERTIES = {
    "builtin_device": "BUILTIN_DEVICE_NUM_THREADS",
    "intel_openvino": "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
    "microsoft_onnxruntime": "MICROSOFT_ONNXRUNTIME_NUM_THREADS",
}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench", help="time loading, a cold start, a warm-cache start in a fresh process, and steady runs",
        description="Benchmark a model: load time; cold start (create_predictor + first run with an empty model "
                    "cache: partition, convert, compile, run); warm start (the same in a fresh process with the "
                    "cache filled by the cold start); steady-state median and p90 over --runs runs.")
    options.add_model_arguments(parser)
    options.add_device_arguments(parser)
    options.add_partition_arguments(parser)
    options.add_input_arguments(parser, files=True)
    options.add_dynamic_shape_argument(
        parser, help_tail="The cold and warm starts and the steady runs use it as `run --dynamic-shape` does: "
                          "NAME gets its --input file, else its --input-shape, else the first of these shapes")
    parser.add_argument("--runs", metavar="N", type=int, default=20, help="timed steady-state runs (default: 20)")
    parser.add_argument("-t", "--time", metavar="SECONDS", type=float, dest="time_limit",
                        help="run the steady (and throughput) measures for this long instead of --runs runs")
    parser.add_argument("--requests", metavar="N", type=int, default=0,
                        help="throughput mode: N requests in flight (clones of the predictor on N threads; "
                             "intel_openvino gets N streams unless INTEL_OPENVINO_NUM_STREAMS is set); reports FPS")
    parser.add_argument("--profile-runs", metavar="N", type=int, default=5,
                        help="runs timed per subgraph, per host op and per part (device, copies, host, Python); "
                             "0 skips them (default: 5)")
    parser.add_argument("--warmup", metavar="N", type=int, default=3,
                        help="untimed runs before the timed ones (default: 3)")
    parser.add_argument("--threads", metavar="N", type=int,
                        help="thread count for every selected device that has such a property (" +
                             ", ".join(f"{d}: {p}" for d, p in THREAD_PROPERTIES.items()) + ")")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="model cache dir for the cold and warm starts; must be empty or absent (the cold "
                             "start must compile) and is kept afterwards (default: a temporary dir, removed)")
    parser.add_argument("--no-fresh-process", action="store_true",
                        help="skip the warm start in a fresh process")
    parser.add_argument("--compare-paddle", action="store_true",
                        help="after timing, report the accuracy of the benchmarked outputs against Paddle Inference "
                             "on the same inputs: max abs/rel error, cosine, top-1 agreement (what a quantized or "
                             "bf16 run costs); not timed")
    parser.add_argument("--compare-float", metavar="FLOAT_MODEL",
                        help="the same against Paddle Inference running this float model (for a quantized one)")
    parser.add_argument("--float-params", metavar="FILE", help="the params file of --compare-float's model")
    parser.add_argument("--warm-probe", action="store_true", help=argparse.SUPPRESS)  # the child of a bench
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def with_threads(args) -> str:
    """The context properties with --threads applied to every selected device that reads a thread count."""
    properties = args.context_properties or ""
    if args.threads is None:
        return properties
    if args.threads < 1:
        raise CliError(f"--threads {args.threads}: must be at least 1")
    extra = [f"{THREAD_PROPERTIES[d]}={args.threads}" for d in options.device_names(args) if d in THREAD_PROPERTIES]
    return _joined(properties, extra)


def _joined(properties: str, extra: list) -> str:
    if not extra:
        return properties
    if properties and not properties.rstrip().endswith(";"):
        properties += ";"
    return properties + "".join(e + ";" for e in extra)


def with_streams(args) -> str:
    """With --requests N: intel_openvino runs N requests at once on N streams (benchmark_app's throughput
    mode), unless the properties already say how many."""
    properties = args.context_properties or ""
    if args.requests > 1 and "intel_openvino" in options.device_names(args) and \
            "INTEL_OPENVINO_NUM_STREAMS" not in properties:
        return _joined(properties, [f"INTEL_OPENVINO_NUM_STREAMS={args.requests}"])
    return properties


def start_predictor(args, cache_dir: str) -> tuple:
    """(predictor, create seconds, first run seconds) for a predictor using `cache_dir`. A device that cannot
    open or compile is an error (exit 3): the times would be the host's."""
    from nnadapter_bridge.commands.channel import current, raise_for_device_fallbacks

    dynamic = options.dynamic_shape_info(args)
    config = model_config.build_config(args, cache_dir=cache_dir, dynamic_shape_info=dynamic or None)
    start = time.perf_counter()
    predictor = model_config.open_predictor(config)
    created = time.perf_counter()
    arrays, _ = inputs.make_inputs(predictor, args, shapes=options.dynamic_run_shapes(args, dynamic))
    inputs.feed(predictor, arrays)
    fed = time.perf_counter()
    since = len(current().warnings)
    predictor.run()
    done = time.perf_counter()
    try:
        raise_for_device_fallbacks(since, what="the times would be another device's")
    except BaseException:
        predictor.close()
        raise
    predictor.bench_inputs = arrays  # what --compare-paddle / --compare-float feed Paddle Inference
    return predictor, created - start, done - fed


def probe(args) -> int:
    """The child of a bench: a warm start only, reported as JSON."""
    predictor, create, first = start_predictor(args, args.cache_dir)
    stats = predictor.stats
    output.print_json({"create_seconds": create, "first_run_seconds": first, "builds": stats.builds,
                       "cache_hits": stats.cache_hits_file + stats.cache_hits_buffer, "subgraphs": stats.subgraphs})
    predictor.close()
    return 0


def child_command(args, cache_dir: str) -> list:
    cmd = [sys.executable, "-m", "nnadapter_bridge", "bench", args.model, "--warm-probe", "--cache-dir", cache_dir,
           "--seed", str(args.seed), "--min-subgraph-size", str(args.min_subgraph_size)]
    if args.params:
        cmd += ["--params", args.params]
    for device in options.device_names(args):
        cmd += ["--device", device]
    if args.context_properties:
        cmd += ["--context-properties", args.context_properties]
    if getattr(args, "device_selection", None):  # the warm start reads the same decision the cold one kept
        cmd += ["--device-selection", args.device_selection]
    if getattr(args, "execution_preference", None):
        cmd += ["--execution-preference", args.execution_preference]
    if getattr(args, "relax_float32", False):
        cmd.append("--relax-float32")
    if args.partition_config:
        cmd += ["--partition-config", args.partition_config]
    if args.strict:  # the warm start is held to the same rule as the cold one
        cmd.append("--strict")
    for spec in args.inputs:
        cmd += ["--input", spec]
    for spec in args.input_shapes:
        cmd += ["--input-shape", spec]
    for spec in args.dynamic_shapes:
        cmd += ["--dynamic-shape", spec]
    return cmd


def warm_start(args, cache_dir: str) -> dict:
    from nnadapter_bridge.nnadapter.nnc import wait_for_cache_writes

    wait_for_cache_writes()  # the cold start's .nnc files, written in the background, are what it restores
    cmd = child_command(args, cache_dir)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, NNADAPTER_BRIDGE_PROGRESS="0"))
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise CliError("the warm start in a fresh process failed (exit "
                       f"{proc.returncode}): {tail[-1] if tail else 'no output'}")
    child = json.loads(proc.stdout)
    child["process_seconds"] = wall
    return child


def run(args) -> int:
    if args.runs < 1:
        raise CliError(f"--runs {args.runs}: must be at least 1")
    if args.warmup < 0:
        raise CliError(f"--warmup {args.warmup}: must be 0 or more")
    if args.time_limit is not None and args.time_limit <= 0:
        raise CliError(f"-t {args.time_limit:g}: must be more than 0 seconds")
    if args.requests < 0:
        raise CliError(f"--requests {args.requests}: must be 0 or more")
    if args.profile_runs < 0:
        raise CliError(f"--profile-runs {args.profile_runs}: must be 0 or more")
    if args.float_params and not args.compare_float:
        raise CliError("--float-params: give it with --compare-float")
    if args.compare_paddle or args.compare_float:
        from nnadapter_bridge.validation import paddle_reference
        if not paddle_reference.paddle_available():
            raise CliError("--compare-paddle / --compare-float: paddlepaddle is not installed, so there is no "
                           "Paddle Inference to compare with; pip install paddlepaddle (or nnadapter-bridge[paddle])")
        if args.compare_paddle:
            paddle_reference.check_paddle_readable(args.model, params=args.params)
        if args.compare_float:
            paddle_reference.check_paddle_readable(args.compare_float, params=args.float_params)
    args.context_properties = with_threads(args)
    args.context_properties = with_streams(args)
    args.threads = None  # folded into the properties, which the child receives as they are
    if args.warm_probe:
        if not args.cache_dir:
            raise CliError("--warm-probe needs --cache-dir")
        with output.one_line_warnings("bench"):
            return probe(args)
    owned = not args.cache_dir
    if args.cache_dir:
        if os.path.isdir(args.cache_dir) and os.listdir(args.cache_dir):
            raise CliError(f"--cache-dir {args.cache_dir}: not empty; the cold start needs an empty cache "
                           "dir (give a new one, or leave it out for a temporary one)")
        if os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
            raise CliError(f"--cache-dir {args.cache_dir}: exists and is not a directory")
    # Check the paths and options before anything is timed.
    dynamic = options.dynamic_shape_info(args)
    options.dynamic_run_shapes(args, dynamic)
    model_config.build_config(args, dynamic_shape_info=dynamic or None)
    if args.cache_dir:
        options.make_dir(args.cache_dir, "--cache-dir")
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="nnadapter-bridge-bench-")
    try:
        data = measure(args, cache_dir)
    finally:
        if owned:
            shutil.rmtree(cache_dir, ignore_errors=True)
    if args.json:
        output.print_json(data)
    else:
        output.print_text(render(data))
    return 0


def measure(args, cache_dir: str) -> dict:
    from nnadapter_bridge.loader import load_model

    with output.one_line_warnings("bench"):
        config = model_config.build_config(args)
        start = time.perf_counter()
        load_model(**config.model_source())
        load_seconds = time.perf_counter() - start

        predictor, create, first = start_predictor(args, cache_dir)
        cold_stats = predictor.stats
        for _ in range(args.warmup):
            raise_if_interrupted()
            predictor.run()
        times = bench_modes.latency_runs(predictor, args.runs, args.time_limit)
        rate = (bench_modes.throughput(predictor, predictor.bench_inputs, args.requests, args.runs, args.time_limit)
                if args.requests else None)
        profile = bench_modes.breakdown(predictor, args.profile_runs) if args.profile_runs else None
        outputs = inputs.outputs_of(predictor)
        accuracy = accuracy_report(args, predictor, config, outputs)
        predictor.close()
        warm = None if args.no_fresh_process else warm_start(args, cache_dir)
    data = {
        "model": predictor.graph.model_path or "<buffer>",
        "devices": predictor.device_names,
        "context_properties": args.context_properties,
        "subgraphs": cold_stats.subgraphs,
        "host_ops": cold_stats.host_ops,
        "load_seconds": load_seconds,
        "cold": {"create_seconds": create, "first_run_seconds": first, "total_seconds": create + first,
                 "builds": cold_stats.builds},
        "warm": None,
        "steady": {"warmup": args.warmup, "time_limit_seconds": args.time_limit,
                   **bench_modes.latency_summary(times)},
        "throughput": rate,
        "profile": profile,
    }
    if accuracy:
        data["accuracy"] = accuracy
    if warm is not None:
        data["warm"] = {"create_seconds": warm["create_seconds"], "first_run_seconds": warm["first_run_seconds"],
                        "total_seconds": warm["create_seconds"] + warm["first_run_seconds"],
                        "process_seconds": warm["process_seconds"], "builds": warm["builds"],
                        "cache_hits": warm["cache_hits"]}
    return data


def accuracy_report(args, predictor, config, outputs: dict) -> dict:
    """{"paddle": {output: metrics}, "float": {...}} for --compare-paddle / --compare-float ({} without)."""
    compare_paddle = getattr(args, "compare_paddle", False)
    compare_float = getattr(args, "compare_float", None)
    if not (compare_paddle or compare_float):
        return {}
    from nnadapter_bridge.cli.cmd_run import _compare_float, reduced_precision_reason
    from nnadapter_bridge.validation import paddle_reference

    report = {}
    feeds = predictor.bench_inputs
    if compare_paddle:
        want = paddle_reference.paddle_outputs(args.model, args.params, feeds)
        reduced = bool(reduced_precision_reason(predictor, config))
        report["paddle"] = {name: paddle_reference.compare(got, want[name], reduced_precision=reduced)
                            for name, got in outputs.items() if name in want}
    if compare_float:
        reference = paddle_reference.paddle_outputs(compare_float, getattr(args, "float_params", None), feeds)
        report["float"] = _compare_float(outputs, reference)
    return report


def _accuracy_rows(data: dict) -> list:
    rows = []
    for key, label in (("paddle", "vs Paddle Inference"), ("float", "vs the float model")):
        for name, c in data.get("accuracy", {}).get(key, {}).items():
            top1 = c.get("top1_agreement")
            rows.append([f"{label}: {name}",
                         "-" if c.get("cosine") is None else f"cosine {c['cosine']:.6f}",
                         f"max abs error {output.format_number(c.get('max_abs_error'))}, max rel error "
                         f"{output.format_number(c.get('max_rel_error'))}"
                         + ("" if top1 is None else f", top-1 agreement {top1 * 100:.1f}%")])
    return rows


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def render(data: dict) -> str:
    cold, warm, steady = data["cold"], data["warm"], data["steady"]
    rows = [["load", _ms(data["load_seconds"]), "load_model: parse the program, map the params"],
            ["cold start", _ms(cold["total_seconds"]),
             f"create_predictor {_ms(cold['create_seconds'])} + first run {_ms(cold['first_run_seconds'])}; "
             f"{cold['builds']} program(s) compiled"]]
    if warm is not None:
        rows.append(["warm start", _ms(warm["total_seconds"]),
                     f"fresh process: create_predictor {_ms(warm['create_seconds'])} + first run "
                     f"{_ms(warm['first_run_seconds'])}; {warm['cache_hits']} restored from the cache, "
                     f"{warm['builds']} compiled (process wall time {_ms(warm['process_seconds'])})"])
    limit = f" ({steady['time_limit_seconds']:g} s)" if steady.get("time_limit_seconds") else ""
    rows.append(["steady median", _ms(steady["median_seconds"]),
                 f"over {steady['runs']} runs{limit} after {steady['warmup']} warm-up runs; "
                 f"{1.0 / steady['median_seconds']:.1f} runs/s one at a time"])
    rows.append(["steady p90", _ms(steady["p90_seconds"]),
                 f"p99 {_ms(steady['p99_seconds'])}, mean {_ms(steady['mean_seconds'])}, "
                 f"min {_ms(steady['min_seconds'])}"])
    rate = data.get("throughput")
    if rate:
        latency = rate["latency"] or {}
        rows.append(["throughput", f"{rate['fps']:.1f} FPS",
                     f"{rate['requests']} requests in flight, {rate['runs']} runs in {rate['wall_seconds']:.2f} s; "
                     f"latency median {_ms(latency.get('median_seconds', 0.0))}, "
                     f"p99 {_ms(latency.get('p99_seconds', 0.0))}"])
    head = [f"model        {data['model']}",
            f"devices      {', '.join(data['devices'])}" + (f" ({data['context_properties']})"
                                                           if data["context_properties"] else ""),
            f"partition    {data['subgraphs']} subgraph(s), {data['host_ops']} host op(s)",
            ""]
    rows += _accuracy_rows(data)
    lines = head + [output.format_table(["measure", "time", "details"], rows, right_align={1})]
    if data.get("profile"):
        lines += [""] + render_profile(data["profile"])
    return "\n".join(lines)


def render_profile(profile: dict) -> list:
    split = profile["split_ms"]
    total = profile["run_ms"] or 1.0
    lines = [f"where a run's {profile['run_ms']:.2f} ms go (mean of {profile['runs']} timed runs): "
             + ", ".join(f"{part} {ms:.2f} ms ({ms / total:.0%})" for part, ms in split.items())]
    rows = [[f"subgraph {s['subgraph']}", "+".join(s["devices"]) or "-", s["ops"], f"{s['ms']:.3f}"]
            for s in profile["subgraphs"]]
    rows += [[f"host op {h['op']}", h["type"], 1, f"{h['ms']:.3f}"] for h in profile["host_ops"][:10]]
    if len(profile["host_ops"]) > 10:
        rest = sum(h["ms"] for h in profile["host_ops"][10:])
        rows.append([f"{len(profile['host_ops']) - 10} more host ops", "-", len(profile["host_ops"]) - 10,
                     f"{rest:.3f}"])
    if rows:
        lines += [""] + [output.format_table(["part", "device / op type", "ops", "ms per run"], rows,
                                             right_align={2, 3})]
    return lines
