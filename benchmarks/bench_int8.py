"""int8 and reduced precision: quantized models on our SDK drivers against our f32 on the float model, and
OpenVINO reading the quantized Paddle model itself.

    python benchmarks/bench_int8.py [--models resnet50,mobilenet_v2] [--threads 1,2] [--runs 30]
                                    [--runners ...] [--json out.json]

Models are the zoo's random-weight models (float: the fixture cache) and their Paddle post-training
quantization (PostTrainingQuantization, abs_max, per-channel weights, onnx_format=True: quantize_linear /
dequantize_linear; tests/support/quant_fixtures.py builds and caches both). Runners, each on one input
[1, 3, 224, 224], `--runs` timed runs after 3 warm-up runs:

  ours_ov_f32        intel_openvino, float model, INTEL_OPENVINO_INFERENCE_PRECISION=f32 (the default)
  ours_ov_bf16       intel_openvino, float model, INTEL_OPENVINO_INFERENCE_PRECISION=bf16
  ours_ov_int8       intel_openvino, quantized model (int8 convolutions: FakeQuantize + int8 weights)
  ours_ort_f32       microsoft_onnxruntime, float model
  ours_ort_int8      microsoft_onnxruntime, quantized model (QLinearConv chains / MatMulInteger)
  ours_xnn_f32       google_xnnpack, float model
  ours_xnn_int8      google_xnnpack, quantized model (TFLite per-channel int8 convolutions on XNNPACK)
  openvino_paddle_int8  OpenVINO's own Paddle frontend: core.read_model(<quantized model.pdmodel>), CPU,
                        INFERENCE_PRECISION_HINT f32, LATENCY hint, INFERENCE_NUM_THREADS
  openvino_paddle_f32   the same on the float model
  paddle_inference_int8 Paddle Inference on the quantized model: enable_mkldnn() + enable_mkldnn_int8() (its
                        oneDNN int8 path), set_cpu_math_library_num_threads
  paddle_inference_f32  Paddle Inference on the float model, enable_mkldnn()

Threads: INTEL_OPENVINO_INFERENCE_NUM_THREADS / MICROSOFT_ONNXRUNTIME_NUM_THREADS / GOOGLE_XNNPACK_NUM_THREADS /
INFERENCE_NUM_THREADS.
The runners of one model and thread count are built first, then timed in turns (one run of each per round), so
a change in the load of a shared machine hits them alike. Reported per model and thread count: median, p90 and
fastest latency (ms), and the ratios the issue asks about:
int8 against our f32 on the same SDK, bf16 against f32, and ours against OpenVINO's frontend on the quantized
model. Every output is compared with the runner's reference (cosine similarity with Paddle Inference on the
same input: the float model's output for f32/bf16, the quantized model's for int8).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.append(os.path.join(ROOT, "tests"))  # after ROOT: tests/partition must not shadow partition

RUNNERS = ("ours_ov_f32", "ours_ov_bf16", "ours_ov_int8", "ours_ort_f32", "ours_ort_int8", "ours_xnn_f32",
           "ours_xnn_int8",
           "openvino_paddle_f32", "openvino_paddle_int8", "paddle_inference_f32", "paddle_inference_int8")


def _models(name: str) -> dict:
    from support.model_zoo_fixtures import zoo_model_path
    from support.quant_fixtures import CHANNEL, quant_model_path

    return {"float": zoo_model_path(name, "pdmodel"), "int8": quant_model_path(name, True, CHANNEL)}


def _ours(model: str, device: str, threads: int, precision: str = ""):
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(model)
    config.set_param_file(model[: -len(".pdmodel")] + ".pdiparams")
    config.set_nnadapter_device_names([device])
    if device == "intel_openvino":
        props = f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads}"
        if precision:
            props += f";INTEL_OPENVINO_INFERENCE_PRECISION={precision}"
    elif device == "google_xnnpack":
        props = f"GOOGLE_XNNPACK_NUM_THREADS={threads}"
    else:
        props = f"MICROSOFT_ONNXRUNTIME_NUM_THREADS={threads}"
    config.set_nnadapter_context_properties(props)
    predictor = nb.create_predictor(config)

    def run(image):
        predictor.get_input(0).from_numpy(image)
        predictor.run()
        return predictor.get_output(0).numpy()

    return run


def _openvino_paddle(model: str, threads: int):
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(model), "CPU",
                                  {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                                   "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()

    def run(image):
        request.infer({0: image})
        return np.array(request.get_output_tensor(0).data)

    return run


def _paddle_inference(model: str, threads: int, int8: bool):
    import paddle.inference as paddle_infer

    config = paddle_infer.Config(model, model[: -len(".pdmodel")] + ".pdiparams")
    config.disable_glog_info()
    config.enable_mkldnn()
    if int8:
        config.enable_mkldnn_int8()
    config.set_cpu_math_library_num_threads(threads)
    predictor = paddle_infer.create_predictor(config)
    feed = predictor.get_input_handle(predictor.get_input_names()[0])
    fetch = predictor.get_output_handle(predictor.get_output_names()[0])

    def run(image):
        feed.copy_from_cpu(image)
        predictor.run()
        return fetch.copy_to_cpu()

    return run


def make_runner(name: str, models: dict, threads: int):
    if name == "ours_ov_f32":
        return _ours(models["float"], "intel_openvino", threads, "f32"), "float"
    if name == "ours_ov_bf16":
        return _ours(models["float"], "intel_openvino", threads, "bf16"), "float"
    if name == "ours_ov_int8":
        return _ours(models["int8"], "intel_openvino", threads), "int8"
    if name == "ours_ort_f32":
        return _ours(models["float"], "microsoft_onnxruntime", threads), "float"
    if name == "ours_ort_int8":
        return _ours(models["int8"], "microsoft_onnxruntime", threads), "int8"
    if name == "ours_xnn_f32":
        return _ours(models["float"], "google_xnnpack", threads), "float"
    if name == "ours_xnn_int8":
        return _ours(models["int8"], "google_xnnpack", threads), "int8"
    if name == "openvino_paddle_f32":
        return _openvino_paddle(models["float"], threads), "float"
    if name == "openvino_paddle_int8":
        return _openvino_paddle(models["int8"], threads), "int8"
    if name == "paddle_inference_f32":
        return _paddle_inference(models["float"], threads, False), "float"
    if name == "paddle_inference_int8":
        return _paddle_inference(models["int8"], threads, True), "int8"
    raise SystemExit(f"unknown runner {name}; choose from {', '.join(RUNNERS)}")


def _error_line(exc: BaseException) -> str:
    """The informative line of an error (OpenVINO's frontend errors open with a C++ location line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for marker in ("No creator found", "While validating", "failed with"):
        found = [line for line in lines if marker in line]
        if found:
            index = lines.index(found[-1])
            return " ".join(lines[index:index + 2])[:200]
    return f"{type(exc).__name__}: {lines[0][:160] if lines else ''}"


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def measure_interleaved(runs_by_name: dict, image, runs: int) -> dict:
    """name -> (median, p90, fastest ms, output): every runner warmed up 3 times, then the timed runs taken in
    turns (one run of each runner per round), so a change in the machine's load hits every runner alike and the
    ratios between them hold on a shared machine."""
    outputs = {}
    for name, run in runs_by_name.items():
        for _ in range(3):
            outputs[name] = run(image)
    times: dict = {name: [] for name in runs_by_name}
    for _ in range(runs):
        for name, run in runs_by_name.items():
            start = time.perf_counter()
            run(image)
            times[name].append((time.perf_counter() - start) * 1000)
    result = {}
    for name, t in times.items():
        t.sort()
        result[name] = (statistics.median(t), t[int(0.9 * (len(t) - 1))], t[0], outputs[name])
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,mobilenet_v2")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--runners", default=",".join(RUNNERS))
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    from devtools import zoo_quant
    from support.model_zoo_fixtures import paddle_inference_outputs

    image = zoo_quant.synthetic_images(4242, 1)
    rows = []
    for name in args.models.split(","):
        models = _models(name)
        reference = {kind: paddle_inference_outputs(path, {"x": image})[0] for kind, path in models.items()}
        for threads in [int(t) for t in args.threads.split(",")]:
            result, built, kinds = {}, {}, {}
            for runner in args.runners.split(","):
                try:
                    built[runner], kinds[runner] = make_runner(runner, models, threads)
                    built[runner](image)  # a runner that builds but cannot run is reported before the timing
                except Exception as exc:  # noqa: BLE001 - a runner that cannot run is reported, not fatal
                    built.pop(runner, None)
                    result[runner] = {"error": _error_line(exc)}
            for runner, (median, p90, fastest, out) in measure_interleaved(built, image, args.runs).items():
                result[runner] = {"median_ms": median, "p90_ms": p90, "min_ms": fastest,
                                  "cosine": _cosine(out, reference[kinds[runner]])}
            result = {runner: result[runner] for runner in args.runners.split(",")}
            for runner, r in result.items():
                print(name, threads, runner, r, flush=True)
            rows.append({"model": name, "threads": threads, "runners": result,
                         "load": os.getloadavg()[0]})
    print()
    print(render(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def _ratio(result: dict, slow: str, fast: str) -> str:
    a, b = result.get(slow, {}), result.get(fast, {})
    if "median_ms" not in a or "median_ms" not in b:
        return "-"
    return f"{a['median_ms'] / b['median_ms']:.2f}x"


def render(rows: list) -> str:
    lines = ["| model | thr | runner | median ms | p90 ms | fastest ms | cosine vs Paddle |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        for runner, r in row["runners"].items():
            if "error" in r:
                lines.append(f"| {row['model']} | {row['threads']} | {runner} | — | — | — | {r['error']} |")
            else:
                lines.append(f"| {row['model']} | {row['threads']} | {runner} | {r['median_ms']:.1f} "
                             f"| {r['p90_ms']:.1f} | {r.get('min_ms', float('nan')):.1f} | {r['cosine']:.5f} |")
    lines += ["", "| model | thr | ov int8 vs ours ov f32 | ort int8 vs ours ort f32 | xnn int8 vs ours xnn f32 "
                  "| ov bf16 vs ov f32 | ours ov int8 vs openvino_paddle int8 | ours ov int8 vs paddle_inference int8 "
                  "| ours ort int8 vs paddle_inference int8 | load |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["runners"]
        lines.append(f"| {row['model']} | {row['threads']} | {_ratio(r, 'ours_ov_f32', 'ours_ov_int8')} "
                     f"| {_ratio(r, 'ours_ort_f32', 'ours_ort_int8')} | {_ratio(r, 'ours_xnn_f32', 'ours_xnn_int8')} "
                     f"| {_ratio(r, 'ours_ov_f32', 'ours_ov_bf16')} "
                     f"| {_ratio(r, 'openvino_paddle_int8', 'ours_ov_int8')} "
                     f"| {_ratio(r, 'paddle_inference_int8', 'ours_ov_int8')} "
                     f"| {_ratio(r, 'paddle_inference_int8', 'ours_ort_int8')} | {row['load']:.1f} |")
    lines.append("")
    lines.append("Ratios are speed-ups (slower median / faster median): above 1 the second runner is faster.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
