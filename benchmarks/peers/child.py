"""One runner, one phase, in this (fresh) process: the measuring half of bench_peers.py.

    python benchmarks/peers/child.py RUNNER --model M.pdmodel --input x.npy --threads N --phase cold|warm
                                     --work-dir DIR --runs R --output out.npy --spawn-time T

RUNNER is one of RUNNERS below. The process imports only what RUNNER needs, then times:
  start_s      load + partition/convert + compile + first run (after imports), with DIR as the cache:
               empty in the cold phase, filled by the cold phase in the warm one;
  steady       R more runs (after two unmeasured ones), cold phase only;
  first_result_since_spawn_s   wall time from the parent's Popen (T, time.time()) to the first result.
Peak RSS is this process's ru_maxrss at the end. The first result goes to --output; one line
`BENCH_PEERS_RESULT {json}` on stdout carries the figures.
"""
from __future__ import annotations

import time

SCRIPT_START_WALL = time.time()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
from child_protocol import time_runner  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULT_MARKER = "BENCH_PEERS_RESULT "
OURS_DEVICES = {"ours_openvino": "intel_openvino", "ours_onnxruntime": "microsoft_onnxruntime",
                "ours_builtin": "builtin_device"}
THREAD_PROPERTIES = {"intel_openvino": "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
                     "microsoft_onnxruntime": "MICROSOFT_ONNXRUNTIME_NUM_THREADS",
                     "builtin_device": "BUILTIN_DEVICE_NUM_THREADS"}


def params_path(model_path: str) -> str:
    return model_path[: -len(".pdmodel")] + ".pdiparams"


# -- runners: prepare(args) -> (run(x) -> first output array, details dict) ----------------------------
# Each prepare() does its imports first and reports how long they took in details["imports_s"], so the
# figure "after imports" excludes them for every runner alike.

def prepare_ours(args, device: str):
    start = time.perf_counter()
    sys.path.insert(0, ROOT)
    import nnadapter_bridge

    # The backend library too, so "after imports" excludes the same imports as the peers' figures.
    if device == "intel_openvino":
        import openvino  # noqa: F401
    elif device == "microsoft_onnxruntime":
        import onnxruntime  # noqa: F401

    imports_s = time.perf_counter() - start
    config = nnadapter_bridge.Config()
    config.set_model_file(args.model)
    config.set_param_file(params_path(args.model))
    config.set_nnadapter_device_names([device])
    config.set_nnadapter_context_properties(f"{THREAD_PROPERTIES[device]}={args.threads}")
    config.set_nnadapter_model_cache_dir(args.work_dir)
    predictor = nnadapter_bridge.create_predictor(config)
    input_tensor = predictor.get_input(0)
    output_tensor = predictor.get_output(0)

    def run(x):
        input_tensor.from_numpy(x)
        predictor.run()
        return output_tensor.numpy()

    def details():
        stats = predictor.stats
        return {"subgraphs": stats.subgraphs, "host_ops": stats.host_ops, "builds": stats.builds,
                "cache_hits_file": stats.cache_hits_file, "cache_misses": stats.cache_misses}

    return run, {"imports_s": imports_s}, details


def prepare_openvino_paddle(args):
    start = time.perf_counter()
    import openvino as ov

    imports_s = time.perf_counter() - start
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": args.threads, "CACHE_DIR": args.work_dir,
              "INFERENCE_PRECISION_HINT": "f32"}  # as our intel_openvino driver pins it
    extra = {"imports_s": imports_s}
    if args.phase == "cold":
        # Cold: OpenVINO's Paddle frontend reads the model, then the CPU plugin compiles it (and, with
        # CACHE_DIR set, writes its blob, as our runtime writes its .nnc).
        t0 = time.perf_counter()
        model = core.read_model(args.model)
        t1 = time.perf_counter()
        compiled = core.compile_model(model, "CPU", config)
        extra.update(read_s=t1 - t0, compile_s=time.perf_counter() - t1)
    else:
        # Warm: compile_model(path) is OpenVINO's fast path with a cache: a hit skips reading the model.
        compiled = core.compile_model(args.model, "CPU", config)
    request = compiled.create_infer_request()

    def run(x):
        request.infer({0: x})
        return request.get_output_tensor(0).data.copy()

    return run, extra, None


def prepare_paddle2onnx_ort(args):
    start = time.perf_counter()
    import onnxruntime as ort

    imports_s = time.perf_counter() - start
    onnx_path = os.path.join(args.work_dir, "model.onnx")
    extra = {"imports_s": imports_s}
    if args.phase == "cold" or not os.path.isfile(onnx_path):
        # The conversion imports paddle (paddle2onnx needs it); that is part of this peer's cold start.
        t0 = time.perf_counter()
        import paddle2onnx

        # onnxoptimizer, not the default polygraphy: polygraphy pip-installs missing tools at run time.
        paddle2onnx.export(args.model, params_path(args.model), save_file=onnx_path, opset_version=13,
                           enable_onnx_checker=True, optimize_tool="onnxoptimizer", verbose=False)
        extra["convert_s"] = time.perf_counter() - t0
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.log_severity_level = 3
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name

    def run(x):
        return session.run(None, {input_name: x})[0]

    return run, extra, None


def prepare_paddle_inference(args, onednn: bool):
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    os.environ.setdefault("GLOG_minloglevel", "2")
    start = time.perf_counter()
    import paddle.inference as paddle_infer

    imports_s = time.perf_counter() - start
    config = paddle_infer.Config(args.model, params_path(args.model))
    config.disable_gpu()
    if onednn:
        config.enable_mkldnn()
    else:
        config.disable_mkldnn()
    config.set_cpu_math_library_num_threads(args.threads)
    config.disable_glog_info()
    predictor = paddle_infer.create_predictor(config)
    input_handle = predictor.get_input_handle(predictor.get_input_names()[0])
    output_handle = predictor.get_output_handle(predictor.get_output_names()[0])

    def run(x):
        input_handle.reshape(list(x.shape))
        input_handle.copy_from_cpu(x)
        predictor.run()
        return output_handle.copy_to_cpu()

    return run, {"imports_s": imports_s}, None


RUNNERS = {
    "ours_openvino": lambda a: prepare_ours(a, "intel_openvino"),
    "ours_onnxruntime": lambda a: prepare_ours(a, "microsoft_onnxruntime"),
    "ours_builtin": lambda a: prepare_ours(a, "builtin_device"),
    "openvino_paddle": prepare_openvino_paddle,
    "paddle2onnx_ort": prepare_paddle2onnx_ort,
    "paddle_inference_onednn": lambda a: prepare_paddle_inference(a, True),
    "paddle_inference": lambda a: prepare_paddle_inference(a, False),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runner", choices=sorted(RUNNERS))
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--phase", choices=("cold", "warm"), required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--output", required=True)
    parser.add_argument("--spawn-time", type=float, required=True)
    args = parser.parse_args(argv)
    x = np.load(args.input)

    def prepare():
        run, extra, details = RUNNERS[args.runner](args)
        return (lambda: run(x)), extra, details

    return time_runner(args, prepare, lambda first: np.save(args.output, np.asarray(first)), RESULT_MARKER,
                       SCRIPT_START_WALL)


if __name__ == "__main__":
    sys.exit(main())
