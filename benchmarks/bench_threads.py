"""Threads: one predictor on 1 thread against N clones (Predictor.clone) on N threads, per device.

    python benchmarks/bench_threads.py [--model PATH] [--devices builtin_device,intel_openvino,...]
                                       [--threads 1,2] [--runs 20] [--device-threads 1] [--json out.json]

Each device's predictor gets `--device-threads` threads per run (BUILTIN_DEVICE_NUM_THREADS,
MICROSOFT_ONNXRUNTIME_NUM_THREADS; for intel_openvino, whose compiled model shares one thread budget among its
streams and runs one request per stream at a time, INTEL_OPENVINO_NUM_STREAMS=S and
INTEL_OPENVINO_INFERENCE_NUM_THREADS=S x device-threads, S = the largest thread count, or `--openvino-streams`),
runs once to compile, and is then cloned; for each thread count T, T predictors (the first one and T-1 clones) run
`--runs` times each, one per
thread, all started together. Reported: the wall time, the throughput (runs per second over all threads), the
median latency of one run, and the throughput against T=1. Every output is checked against the first one (a
clone computing wrong would show here). Without --model the zoo builds mobilenet_v1 (random weights) once into
the fixture cache (paddlepaddle needed). Ideal scaling needs at least T x device-threads free cores.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

THREAD_KEYS = {"builtin_device": "BUILTIN_DEVICE_NUM_THREADS", "intel_openvino": "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
               "microsoft_onnxruntime": "MICROSOFT_ONNXRUNTIME_NUM_THREADS"}


def _default_model() -> str:
    sys.path.append(os.path.join(ROOT, "tests"))  # after ROOT: tests/partition must not shadow partition
    from support.model_zoo_fixtures import zoo_model_path

    return zoo_model_path("mobilenet_v1", "pdmodel")


def _predictor(model: str, device: str, device_threads: int, streams: int):
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names([device])
    if device == "intel_openvino":
        config.set_nnadapter_context_properties(f"INTEL_OPENVINO_NUM_STREAMS={streams};"
                                                f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={streams * device_threads}")
    elif device in THREAD_KEYS:
        config.set_nnadapter_context_properties(f"{THREAD_KEYS[device]}={device_threads}")
    return nb.create_predictor(config)


def measure(base, image: np.ndarray, expected: np.ndarray, threads: int, runs: int) -> dict:
    predictors = [base] + [base.clone() for _ in range(threads - 1)]
    for p in predictors:  # each clone's first run copies the programs: not measured
        p.get_input(0).from_numpy(image)
        p.run()
    latencies = [[] for _ in predictors]
    wrong = [0] * threads
    start_line = threading.Barrier(threads + 1)

    def work(k):
        p = predictors[k]
        start_line.wait()
        for _ in range(runs):
            t0 = time.perf_counter()
            p.get_input(0).from_numpy(image)
            p.run()
            out = p.get_output(0).numpy()
            latencies[k].append(time.perf_counter() - t0)
            if not np.allclose(out, expected, rtol=1e-4, atol=1e-5):
                wrong[k] += 1

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    start_line.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    for p in predictors[1:]:
        p.close()
    every = [x for per in latencies for x in per]
    return {"threads": threads, "runs": threads * runs, "wall_s": wall, "runs_per_s": threads * runs / wall,
            "median_ms": statistics.median(every) * 1000, "wrong": sum(wrong)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="a .pdmodel (or any model path create_predictor takes; default: zoo mobilenet_v1)"
    )
    parser.add_argument("--devices", default="builtin_device,intel_openvino,microsoft_onnxruntime")
    parser.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    parser.add_argument("--runs", type=int, default=20, help="runs per thread (default 20)")
    parser.add_argument("--device-threads", type=int, default=1, help="each device's threads per run (default 1)")
    parser.add_argument("--openvino-streams", type=int, default=0,
                        help="intel_openvino streams (default: the largest thread count; 1 shows requests queueing)")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    model = args.model or _default_model()
    counts = [int(t) for t in args.threads.split(",")]
    image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    results = []
    streams = args.openvino_streams or max(counts)
    print(f"model: {model}; {args.runs} runs per thread; device threads: {args.device_threads}; "
          f"intel_openvino streams: {streams}; cpus: {os.cpu_count()}; load: {os.getloadavg()[0]:.1f}")
    print(f"{'device':<24}{'threads':>8}{'runs':>6}{'wall s':>9}{'runs/s':>9}{'median ms':>11}{'x 1 thread':>12}"
          f"{'wrong':>7}")
    for device in [d for d in args.devices.split(",") if d]:
        try:
            base = _predictor(model, device, args.device_threads, streams)
        except Exception as exc:  # a device that is not installed: say so and go on
            print(f"{device:<24}not available: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        base.get_input(0).from_numpy(image)
        base.run()
        expected = base.get_output(0).numpy()
        single = None
        for threads in counts:
            row = measure(base, image, expected, threads, args.runs)
            row["device"] = device
            single = single or row["runs_per_s"]
            row["speedup"] = row["runs_per_s"] / single
            results.append(row)
            print(f"{device:<24}{threads:>8}{row['runs']:>6}{row['wall_s']:>9.2f}{row['runs_per_s']:>9.1f}"
                  f"{row['median_ms']:>11.1f}{row['speedup']:>12.2f}{row['wrong']:>7}")
        base.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": model, "runs_per_thread": args.runs, "device_threads": args.device_threads,
                       "openvino_streams": streams, "cpus": os.cpu_count(), "results": results}, f, indent=2)
    return 1 if any(r["wrong"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
