"""Paddle Lite 2.13rc0 (x86 wheel), one phase in this process: bench_peers.py's Paddle Lite runner.

Runs in a separate Python 3.10 environment (paddlelite has no wheel for newer Pythons; see
benchmarks/README.md), so it imports nothing from this repository and speaks the same protocol as
peers/child.py: the same arguments, the first output saved with numpy, one `BENCH_PEERS_RESULT {json}` line.

    /tmp/lite310/bin/python benchmarks/peers/lite_child.py paddle_lite --model M.pdmodel --input x.npy
        --threads N --phase cold|warm --work-dir DIR --runs R --output out.npy --spawn-time T

Paddle Lite has no compile cache for x86 (its `.nb` optimized model is a different deployment, not a
cache of this one), so the warm phase is simply a second fresh process. The models must be saved with
clip_extra=False: Lite's op checks read attributes that a clipped program leaves out.
"""
import time

SCRIPT_START = time.perf_counter()
SCRIPT_START_WALL = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

RESULT_MARKER = "BENCH_PEERS_RESULT "
WARMUP_RUNS = 2


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runner", choices=["paddle_lite"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--phase", choices=("cold", "warm"), required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--output", required=True)
    parser.add_argument("--spawn-time", type=float, required=True)
    args = parser.parse_args(argv)
    if int(np.__version__.split(".")[0]) >= 2:
        sys.exit("paddlelite 2.13rc0 returns wrong outputs with numpy>=2; install numpy<2 in this environment")
    x = np.load(args.input)

    before_runner = time.perf_counter()
    import paddlelite.lite as lite

    imports_s = time.perf_counter() - before_runner
    config = lite.CxxConfig()
    config.set_model_file(args.model)
    config.set_param_file(args.model[: -len(".pdmodel")] + ".pdiparams")
    config.set_valid_places([lite.Place(lite.TargetType.X86, lite.PrecisionType.FP32),
                             lite.Place(lite.TargetType.Host, lite.PrecisionType.FP32)])
    config.set_threads(args.threads)
    predictor = lite.create_paddle_predictor(config)
    input_tensor = predictor.get_input(0)

    def run():
        input_tensor.from_numpy(x)
        predictor.run()
        return predictor.get_output(0).numpy()

    first = run()
    first_done = time.perf_counter()
    first_wall = time.time()
    np.save(args.output, np.asarray(first))
    result = {"runner": "paddle_lite", "phase": args.phase, "imports_s": imports_s,
              "python_start_s": SCRIPT_START_WALL - args.spawn_time,
              "first_result_since_spawn_s": first_wall - args.spawn_time,
              "start_s": first_done - before_runner - imports_s, "start_with_imports_s": first_done - before_runner}
    if args.phase == "cold":
        for _ in range(WARMUP_RUNS):
            run()
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        result["steady_s"] = times
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
