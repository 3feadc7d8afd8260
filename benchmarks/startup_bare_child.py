"""One start from spawn to the first result as a user's process makes it, for profile_startup.py's --spawn-pairs,
and the predictor and OpenVINO-direct calls every start of profile_startup makes (imported from here by it).

    python benchmarks/startup_bare_child.py SPAWN_TIME ours|peer MODEL DEVICE PHASE WORK_DIR THREADS [FEEDS]

Nothing is wrapped, sampled or hooked, and nothing is imported before the start but what the interpreter loads
itself (os, sys, time): the harness's own modules (argparse, json, subprocess, tempfile, ...) would otherwise be
loaded for free for whichever side imports them too. The inputs are made without numpy.random for the same reason
(its import brings secrets, hashlib and random); their values do not matter to the time. After the first result
it prints one line, MARKER + JSON: seconds since SPAWN_TIME (the parent's time.time() just before it spawned this
process), peak RSS, CPU time, the number of modules imported and, for ours, the predictor's cache figures.
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = "PROFILE_STARTUP_RESULT "
THREAD_PROPERTIES = {"intel_openvino": "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
                     "microsoft_onnxruntime": "MICROSOFT_ONNXRUNTIME_NUM_THREADS",
                     "builtin_device": "BUILTIN_DEVICE_NUM_THREADS"}
# The PIR transformer of devtools.zoo (TRANSFORMER_SEQ, TRANSFORMER_VOCAB): read there when that model is fed.
_TOKEN_MODEL_SUFFIX = ".json"


def params_path(model_path: str) -> str:
    """`<stem>.pdiparams` beside a legacy `.pdmodel` or a PIR `.json`."""
    return os.path.splitext(model_path)[0] + ".pdiparams"


def example_input(model_path: str, feeds_path: str | None = None):
    """The inputs a start feeds, {name: array} from `feeds_path` (an .npz: the real zoo's feeds), else one array: a
    224x224 image (values in [-1, 1]), or token ids for the PIR transformer."""
    import numpy as np

    if feeds_path:
        with np.load(feeds_path) as data:
            return {name: data[name] for name in data.files}
    if model_path.endswith(_TOKEN_MODEL_SUFFIX):
        from devtools.zoo import TRANSFORMER_SEQ, TRANSFORMER_VOCAB

        return (np.arange(TRANSFORMER_SEQ, dtype=np.int64) * 7919 % TRANSFORMER_VOCAB).reshape(1, TRANSFORMER_SEQ)
    return np.sin(np.arange(3 * 224 * 224, dtype=np.float32) * 0.37).reshape(1, 3, 224, 224)


def our_predictor(nnadapter_bridge, model: str, device: str, threads: int, work_dir: str):
    """The predictor every start of ours makes (phase children and bare ones alike)."""
    config = nnadapter_bridge.Config()
    config.set_model_file(model)
    config.set_param_file(params_path(model))
    config.set_nnadapter_device_names([device])
    config.set_nnadapter_context_properties(f"{THREAD_PROPERTIES[device]}={threads}")
    config.set_nnadapter_model_cache_dir(work_dir)
    return nnadapter_bridge.create_predictor(config)


def our_first_result(predictor, x):
    if isinstance(x, dict):
        for k, name in enumerate(predictor.get_input_names()):
            predictor.get_input(k).from_numpy(x[name])
    else:
        predictor.get_input(0).from_numpy(x)
    predictor.run()
    return predictor.get_output(0).numpy()


def peer_config(threads: int, work_dir: str) -> dict:
    return {"INFERENCE_NUM_THREADS": threads, "CACHE_DIR": work_dir, "INFERENCE_PRECISION_HINT": "f32"}


def peer_compiled(ov, model: str, phase: str, threads: int, work_dir: str):
    """OpenVINO compiling the Paddle model itself with its CACHE_DIR: read_model + compile_model when cold,
    compile_model(path) when warm (it then imports from its cache)."""
    core = ov.Core()
    if phase == "cold":
        return core.compile_model(core.read_model(model), "CPU", peer_config(threads, work_dir))
    return core.compile_model(model, "CPU", peer_config(threads, work_dir))


def peer_first_result(compiled, x):
    request = compiled.create_infer_request()
    request.infer(x if isinstance(x, dict) else {0: x})
    return request, request.get_output_tensor(0).data.copy()


def main(argv: list) -> int:
    spawn_time, kind, model, device, phase, work_dir, threads = argv[:7]
    feeds = argv[7] if len(argv) > 7 else None
    if kind == "peer":
        import openvino as ov

        keep = peer_first_result(peer_compiled(ov, model, phase, int(threads), work_dir),
                                 example_input(model, feeds))
        stats = None
    else:
        sys.path.insert(0, ROOT)
        import nnadapter_bridge

        x = example_input(model, feeds)
        predictor = our_predictor(nnadapter_bridge, model, device, int(threads), work_dir)
        keep = our_first_result(predictor, x)
        stats = {"builds": predictor.stats.builds, "cache_hits_file": predictor.stats.cache_hits_file,
                 "subgraphs": predictor.stats.subgraphs}
    since = time.time() - float(spawn_time)
    modules = len(sys.modules)
    import json
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = {"since_spawn_s": since, "peak_rss_bytes": usage.ru_maxrss * 1024,
              "cpu_s": usage.ru_utime + usage.ru_stime, "stats": stats, "modules": modules}
    del keep
    print(MARKER + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
