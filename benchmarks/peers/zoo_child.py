"""One runner, one phase, one model with any feeds and fetches, in this (fresh) process: the measuring half
of bench_zoo.py (peers/child.py does the same for single-input models in the legacy format).

    python benchmarks/peers/zoo_child.py RUNNER --model M.json|M.pdmodel --feeds feeds.npz --threads N
                                         --phase cold|warm --work-dir DIR --runs R --output out.npz
                                         --spawn-time T
    python benchmarks/peers/zoo_child.py R1,R2,... --phase interleaved ... --output PREFIX

RUNNER is one of RUNNERS below; the process imports only what it needs, then times:
  start_s      load + partition/convert + compile + first run (after imports), DIR as the cache: empty in
               the cold phase, filled by the cold phase in the warm one;
  steady       R more runs after two unmeasured ones (cold phase only; ours once the .nnc its first run
               writes in the background is on disk);
  first_result_since_spawn_s   wall time from the parent's Popen (T, time.time()) to the first result.
Every fetched output of the first run goes to --output (`out0`, `out1`, ... in fetch order); one line
`BENCH_ZOO_RESULT {json}` on stdout carries the figures, or `{"error": ...}` when the runner cannot run
the model (the parent reports that as the runner's result for the model, not as a crash).

The interleaved phase (bench_zoo.py --steady in-process) prepares every listed runner in this one process, each
with a work dir of its own under DIR, then times them in turns: one untimed run of a runner, then BLOCK_RUNS
timed runs, more while the turn is shorter than TURN_SECONDS (a sub-millisecond model gets hundreds), then the
next runner's turn, the order rotating from round to round, for ceil(`--runs` / BLOCK_RUNS) rounds, at least
MIN_ROUNDS, and more (up to MAX_ROUNDS) while a runner has less than MIN_STEADY_SECONDS of timed runs.
Whatever slows this machine down for a while slows every runner alike, which separate processes minutes apart do
not give. Each runner's first outputs go to PREFIX-<runner>.npz, and the result line
carries {"runners": {runner: figures or {"error": ...}}}; a runner's start_s there is its start in a process
that already holds the runners before it, so only the steady figures compare with the other phases.
"""
from __future__ import annotations

import time

SCRIPT_START_WALL = time.time()

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402
from child_protocol import WARMUP_RUNS, time_runner  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULT_MARKER = "BENCH_ZOO_RESULT "
PROGRESS_MARKER = "BENCH_ZOO_PROGRESS "  # interleaved phase: "preparing RUNNER", then "steady"
THREAD_PROPERTIES = {"intel_openvino": "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
                     "microsoft_onnxruntime": "MICROSOFT_ONNXRUNTIME_NUM_THREADS",
                     "google_xnnpack": "GOOGLE_XNNPACK_NUM_THREADS",
                     "builtin_device": "BUILTIN_DEVICE_NUM_THREADS"}


# ours_fastest: these devices with Config.set_nnadapter_device_selection("fastest") (issue 30).
FASTEST_DEVICES = ["intel_openvino", "microsoft_onnxruntime", "google_xnnpack"]


def params_path(model_path: str) -> str:
    return os.path.splitext(model_path)[0] + ".pdiparams"


# -- runners: prepare(args, feeds) -> (run() -> [outputs], extra figures, details() or None) ---------------
# Each prepare() does its imports first and reports their time in extra["imports_s"], so "after imports"
# excludes them for every runner alike.

def prepare_ours(args, feeds, device: str | list, selection: str | None = None):
    """Ours on one device, or on several with a device selection policy (ours_fastest: the cold phase calibrates
    the devices into the empty cache dir and times the close orders, the warm one reads both)."""
    start = time.perf_counter()
    sys.path.insert(0, ROOT)
    import nnadapter_bridge

    devices = [device] if isinstance(device, str) else list(device)
    if "intel_openvino" in devices:
        import openvino  # noqa: F401
    if "microsoft_onnxruntime" in devices:
        import onnxruntime  # noqa: F401
    if "google_xnnpack" in devices:
        import ai_edge_litert.interpreter  # noqa: F401
    imports_s = time.perf_counter() - start
    config = nnadapter_bridge.Config()
    config.set_model_file(args.model)
    config.set_param_file(params_path(args.model))
    config.set_nnadapter_device_names(devices)
    properties = "".join(f"{THREAD_PROPERTIES[d]}={args.threads};" for d in devices)
    if "intel_openvino" in devices:
        properties += "INTEL_OPENVINO_INFERENCE_PRECISION=f32;"  # the peers run f32 too
    if selection:
        config.set_nnadapter_device_selection(selection)
    config.set_nnadapter_context_properties(properties)
    config.set_nnadapter_model_cache_dir(args.work_dir)
    predictor = nnadapter_bridge.create_predictor(config)
    inputs = [predictor.get_input_by_name(name) for name in predictor.get_input_names()]
    outputs = [predictor.get_output(i) for i in range(len(predictor.get_output_names()))]

    def run():
        for tensor, name in zip(inputs, predictor.get_input_names()):
            tensor.from_numpy(feeds[name])
        predictor.run()
        return [t.numpy() for t in outputs]

    def settle():
        # The .nnc is exported and written by a thread of its own after the first run (off the first result's
        # path); the steady runs start once it is on disk, so they time the program, not the write beside it.
        nnadapter_bridge.wait_for_cache_writes()

    run.settle = settle

    def details():
        stats = predictor.stats
        found = {"subgraphs": stats.subgraphs, "host_ops": stats.host_ops, "builds": stats.builds,
                 "cache_hits_file": stats.cache_hits_file, "cache_misses": stats.cache_misses}
        selection = stats.device_selection
        if selection:  # ours_fastest: each subgraph's devices and why, what calibrating and timing cost
            calibration = selection["calibration"] or {}
            found["calibration_s"] = calibration.get("measured_seconds", 0.0)
            found["device_selection"] = [{k: c[k] for k in ("subgraph", "order", "decided_by", "measured_ms",
                                                             "timing_seconds")} for c in selection["subgraphs"]]
        return found

    return run, {"imports_s": imports_s}, details


# opset 17; onnxoptimizer, not the default polygraphy: polygraphy pip-installs missing tools at run time.
PADDLE2ONNX_OPTIONS = {"opset_version": 17, "enable_onnx_checker": True, "optimize_tool": "onnxoptimizer",
                       "verbose": False}


def _onnx_file(args, extra) -> str:
    """paddle2onnx's conversion of the model into the work dir (the cold phase converts; its time counts). In the
    interleaved phase one conversion serves both paddle2onnx runners, made in a process of its own: paddle2onnx
    ends the process that asked when it cannot convert a model."""
    if args.shared_dir:
        return _onnx_file_converted_apart(args, extra)
    onnx_path = os.path.join(args.work_dir, "model.onnx")
    if args.phase == "cold" or not os.path.isfile(onnx_path):
        t0 = time.perf_counter()
        import paddle2onnx

        paddle2onnx.export(args.model, params_path(args.model), save_file=onnx_path, **PADDLE2ONNX_OPTIONS)
        extra["convert_s"] = time.perf_counter() - t0
    return onnx_path


def _onnx_file_converted_apart(args, extra) -> str:
    import subprocess

    onnx_path = os.path.join(args.shared_dir, "model.onnx")
    failed_path = onnx_path + ".failed"
    if not os.path.isfile(onnx_path) and not os.path.isfile(failed_path):
        t0 = time.perf_counter()
        code = ("import json, sys, paddle2onnx; paddle2onnx.export(sys.argv[1], sys.argv[2], save_file=sys.argv[3], "
                "**json.loads(sys.argv[4]))")
        proc = subprocess.run([sys.executable, "-c", code, args.model, params_path(args.model), onnx_path,
                               json.dumps(PADDLE2ONNX_OPTIONS)], capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.isfile(onnx_path):
            tail = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()][-2:]
            with open(failed_path, "w") as f:
                f.write(f"paddle2onnx exit {proc.returncode}: " + " | ".join(tail)[-400:])
        extra["convert_s"] = time.perf_counter() - t0
    if os.path.isfile(failed_path):
        with open(failed_path) as f:
            raise RuntimeError(f.read())
    return onnx_path


def prepare_paddle2onnx_ort(args, feeds):
    start = time.perf_counter()
    import onnxruntime as ort

    extra = {"imports_s": time.perf_counter() - start}
    onnx_path = _onnx_file(args, extra)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run():
        return session.run(None, {name: feeds[name] for name in names})

    return run, extra, None


def prepare_paddle2onnx_openvino(args, feeds):
    start = time.perf_counter()
    import openvino as ov

    extra = {"imports_s": time.perf_counter() - start}
    onnx_path = _onnx_file(args, extra)
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": args.threads, "CACHE_DIR": os.path.join(args.work_dir, "ov-cache"),
              "INFERENCE_PRECISION_HINT": "f32"}
    compiled = core.compile_model(onnx_path, "CPU", config)
    request = compiled.create_infer_request()
    names = [port.any_name for port in compiled.inputs]

    def run():
        request.infer({name: feeds[name] for name in names})
        return [request.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]

    return run, extra, None


def prepare_paddle_inference(args, feeds, onednn: bool):
    os.environ.setdefault("GLOG_minloglevel", "2")
    start = time.perf_counter()
    import paddle.inference as paddle_infer

    extra = {"imports_s": time.perf_counter() - start}
    config = paddle_infer.Config(args.model, params_path(args.model))
    config.disable_gpu()
    if onednn:
        config.enable_mkldnn()
    else:
        config.disable_mkldnn()
    config.set_cpu_math_library_num_threads(args.threads)
    config.disable_glog_info()
    predictor = paddle_infer.create_predictor(config)
    handles = {name: predictor.get_input_handle(name) for name in predictor.get_input_names()}
    outputs = [predictor.get_output_handle(name) for name in predictor.get_output_names()]

    def run():
        for name, handle in handles.items():
            handle.reshape(list(feeds[name].shape))
            handle.copy_from_cpu(feeds[name])
        predictor.run()
        return [h.copy_to_cpu() for h in outputs]

    return run, extra, None


RUNNERS = {
    "ours_openvino": lambda a, f: prepare_ours(a, f, "intel_openvino"),
    "ours_onnxruntime": lambda a, f: prepare_ours(a, f, "microsoft_onnxruntime"),
    "ours_xnnpack": lambda a, f: prepare_ours(a, f, "google_xnnpack"),
    "ours_builtin": lambda a, f: prepare_ours(a, f, "builtin_device"),
    "ours_fastest": lambda a, f: prepare_ours(a, f, FASTEST_DEVICES, "fastest"),
    "paddle2onnx_ort": prepare_paddle2onnx_ort,
    "paddle2onnx_openvino": prepare_paddle2onnx_openvino,
    "paddle_inference": lambda a, f: prepare_paddle_inference(a, f, False),
    "paddle_inference_onednn": lambda a, f: prepare_paddle_inference(a, f, True),
}


def save_outputs(path: str, outputs) -> str:
    """The fetched outputs of a first run as `out0`, `out1`, ... (fetch order) in an .npz at `path`."""
    np.savez(path, **{f"out{i}": np.asarray(a) for i, a in enumerate(outputs)})
    return path


BLOCK_RUNS = 5  # timed runs per turn in the interleaved phase, at least
# Rounds, at least: this VM's speed moves by tens of percent from one second to the next, and with the 4 rounds of
# --runs 20 two runners of one program (google_xnnpack by itself, and "fastest" having chosen it) read 0.88x apart
# on PP-LCNet and GhostNet; each round is one more sample of the drift that every runner shares.
MIN_ROUNDS = 8
# And more, up to MAX_ROUNDS, until every runner has MIN_STEADY_SECONDS of timed runs: a sub-millisecond model's
# turns of 0.1 s still left "fastest" and the device it chose 5-7% apart on MobileNetV3 and PP-LCNet.
MIN_STEADY_SECONDS, MAX_ROUNDS = 2.0, 24
TURN_SECONDS = 0.1  # and runs go on until the turn has lasted this long: this VM's speed drifts within seconds
# Between turns: longer than Intel OpenMP's default spin after a parallel region (KMP_BLOCKTIME, 200 ms), which
# Paddle Inference's threads keep after each run; on 2 cores a spinning thread of the last runner's pool would
# otherwise take a core from the next runner's first runs.
BLOCK_PAUSE_S = 0.25


def interleave(args, feeds, runners: list) -> int:
    """The interleaved phase (module docstring): every runner prepared here, then timed in rotating turns."""
    result: dict = {"phase": "interleaved", "runners": {}}
    prepared = {}
    base_output = args.output
    for runner in runners:
        print(f"{PROGRESS_MARKER}preparing {runner}", flush=True)
        figures: dict = {}
        result["runners"][runner] = figures
        # each runner converts and compiles into an empty work dir of its own; paddle2onnx's runners share one
        # conversion in the phase's dir
        runner_args = argparse.Namespace(**{**vars(args), "work_dir": os.path.join(args.work_dir, runner),
                                            "phase": "cold", "shared_dir": args.work_dir})
        os.makedirs(runner_args.work_dir, exist_ok=True)
        try:
            before = time.perf_counter()
            run, extra, details = RUNNERS[runner](runner_args, feeds)
            first = run()
            figures.update(extra)
            figures["start_s"] = time.perf_counter() - before - extra.get("imports_s", 0.0)
            getattr(run, "settle", lambda: None)()
            for _ in range(WARMUP_RUNS):
                run()
        except Exception as exc:  # noqa: BLE001 - the runner cannot run this model: that is its result
            lines = traceback.format_exception_only(type(exc), exc)
            figures["error"] = " ".join(" ".join(lines).split())[:600]
            continue
        figures["output"] = save_outputs(f"{base_output}-{runner}.npz", first)
        figures["steady_s"] = []
        prepared[runner] = (run, details)
    print(f"{PROGRESS_MARKER}steady", flush=True)
    order = list(prepared)
    rounds = max(-(-args.runs // BLOCK_RUNS), MIN_ROUNDS)

    def more(turn: int) -> bool:
        timed = min(sum(result["runners"][r]["steady_s"]) for r in order)
        return turn < rounds or (turn < MAX_ROUNDS and timed < MIN_STEADY_SECONDS)

    turn = 0
    while order and more(turn):
        for runner in order[turn % len(order):] + order[:turn % len(order)]:
            run, _ = prepared[runner]
            times = result["runners"][runner]["steady_s"]
            time.sleep(BLOCK_PAUSE_S)
            run()  # untimed: its first run after another runner's turn
            started = time.perf_counter()
            for count in itertools.count(1):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
                if count >= BLOCK_RUNS and time.perf_counter() - started >= TURN_SECONDS:
                    break
        turn += 1
    for runner, (_, details) in prepared.items():
        if details is not None:
            result["runners"][runner]["details"] = details()
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runner", help=f"one of {', '.join(sorted(RUNNERS))}; several, comma-separated, with "
                                       "--phase interleaved")
    parser.add_argument("--model", required=True)
    parser.add_argument("--feeds", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--phase", choices=("cold", "warm", "interleaved"), required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--output", required=True)
    parser.add_argument("--spawn-time", type=float, required=True)
    args = parser.parse_args(argv)
    runners = args.runner.split(",")
    unknown = sorted(set(runners) - set(RUNNERS))
    if unknown or (len(runners) > 1 and args.phase != "interleaved"):
        parser.error(f"runner(s) {', '.join(unknown) or args.runner}: one of {', '.join(sorted(RUNNERS))}, "
                     "several only with --phase interleaved")
    with np.load(args.feeds) as data:
        feeds = {name: data[name] for name in data.files}
    args.shared_dir = None
    if args.phase == "interleaved":
        return interleave(args, feeds, runners)
    return time_runner(args, lambda: RUNNERS[args.runner](args, feeds),
                       lambda first: save_outputs(args.output, first),
                       RESULT_MARKER, SCRIPT_START_WALL, catch_errors=True)


if __name__ == "__main__":
    sys.exit(main())
