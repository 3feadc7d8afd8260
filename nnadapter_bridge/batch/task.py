"""One batch entry, start to finish: the task function both engines run (a local process or a Ray worker).

`run_task(task)` converts and compiles the entry (a manifest.Entry) into the cache (the predictor code path
of `nnadapter-bridge convert` and `run`: a Config built from the entry's fields, validation.inputs.input_arrays),
runs it on the reference inputs (or seeded random ones), checks the outputs against the reference outputs or
Paddle Inference at the whole-model tolerance (validation.paddle_reference.compare), and returns plain data:

    {"result": {...the entry's result...}, "programs": {file name: bytes}, "dot": "<partition DOT text>"}

`programs` is filled only with `collect_programs` (the task compiled into a private temporary cache dir,
and the coordinator writes the files into its own cache dir); otherwise the task wrote the `.nnc` files
into the shared cache dir itself. It never raises: an error is the result's status "error" with the
message. Nothing here depends on where it runs.

Entry point: `run_task`. Imports the manifest; validation, the predictor and partition inside `run_task`, so a
coordinator that only dispatches loads none of them; nothing of the CLI.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import tempfile
import time
import traceback
import warnings

import numpy as np

from nnadapter_bridge.batch.manifest import Entry

RESULT_VERSION = 1


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _config(entry: Entry, cache_dir: str):
    """The entry's Config, as `convert`/`run` build theirs from their options (commands.model_config.build_config,
    whose checks the manifest already made: the paths exist, min_subgraph_size >= 1, seed >= 0)."""
    from nnadapter_bridge.predictor.config import Config

    config = Config()
    if os.path.isdir(entry.model):
        config.set_model_dir(entry.model)
    else:
        config.set_model_file(entry.model)
    if entry.params:
        config.set_param_file(entry.params)
    config.set_nnadapter_device_names(entry.devices)
    if entry.context_properties:
        config.set_nnadapter_context_properties(entry.context_properties)
    config.set_nnadapter_model_cache_dir(cache_dir)
    if entry.partition_config:
        config.set_nnadapter_subgraph_partition_config_path(entry.partition_config)
    config.set_min_subgraph_size(entry.min_subgraph_size)
    config.set_show_progress(False)  # the batch draws its own display
    if entry.dynamic_shapes:
        config.set_nnadapter_dynamic_shape_info(entry.dynamic_shapes)
    return config


def _random_input_shapes(entry: Entry) -> dict:
    """The shapes of the inputs made at random: input_shapes, else a dynamic input's first shape (an input read
    from reference_inputs has its file's shape)."""
    shapes = {**{name: s[0] for name, s in entry.dynamic_shapes.items()}, **entry.input_shapes}
    return {name: dims for name, dims in shapes.items() if name not in entry.reference_inputs}


def _feeds_digest(arrays: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def _reference_outputs(entry: Entry, feeds: dict, cache_dir) -> tuple:
    """({name: array}, where from) for the comparison, or (None, "none")."""
    from nnadapter_bridge.validation.inputs import load_npy
    from nnadapter_bridge.validation.paddle_reference import paddle_outputs

    mode = entry.compare
    if mode == "none":
        return None, "none"
    if entry.reference_outputs and mode in ("auto", "reference"):
        return ({name: load_npy(path, f"reference_outputs.{name}") for name, path in entry.reference_outputs.items()},
                "reference files")
    if mode == "auto" and str(entry.model).endswith(".nb"):
        # A Paddle Lite .nb: Paddle Inference cannot read it (an explicit `compare: paddle` says so as an error)
        return None, "none (Paddle Inference cannot read a Paddle Lite .nb)"
    # Paddle Inference; its outputs for the same model and inputs are shared by the entries of every device.
    path = None
    if cache_dir and os.path.isdir(cache_dir):
        key = hashlib.sha256(f"{entry.model_digest}|{_feeds_digest(feeds)}".encode()).hexdigest()[:32]
        path = os.path.join(cache_dir, f"{key}.npz")
        if os.path.isfile(path):
            try:
                with np.load(path, allow_pickle=False) as data:
                    return {name: data[name] for name in data.files}, "Paddle Inference"
            except (OSError, ValueError):
                pass
    outputs = paddle_outputs(entry.model, entry.params, feeds)
    if path is not None:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=cache_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **outputs)
            os.replace(tmp, path)
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return outputs, "Paddle Inference"


def _host_ops(predictor) -> list:
    from partition import op_key

    forced = predictor.partition.forced_op_keys
    found = []
    for op in predictor.host_ops:
        if op_key(op) in forced:
            reason = "forced to the host by the partition config"
        else:
            reason = predictor.support.reason(op) or "supported, but its cluster is below min_subgraph_size"
        found.append({"index": op.index, "type": op.type, "reason": reason})
    return found


def _programs(predictor, cache_dir: str) -> list:
    from nnadapter_bridge.nnadapter.nnc import CacheIdentity, cache_file_path, read_nnc_file, wait_for_cache_writes

    wait_for_cache_writes()  # the .nnc files are written by threads of their own after the first run
    programs = []
    for index in sorted(predictor.engines):
        engine = predictor.engines[index]
        for program in engine.programs:
            path = cache_file_path(cache_dir, program.token)
            exists = os.path.isfile(path)
            valid = False
            if exists:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    valid = read_nnc_file(path, expect=CacheIdentity(program.token, engine.fingerprint)) is not None
            programs.append({
                "subgraph": index, "ops": len(engine.subgraph.ops),
                "op_types": sorted({op.type for op in engine.subgraph.ops}),
                "devices": list(program.compilation.device_names), "token": program.token,
                "fingerprint": engine.fingerprint, "source": {"build": "compiled", "file": "restored"}.get(
                    program.source, program.source),
                "file": os.path.basename(path) if exists else None,
                "bytes": os.path.getsize(path) if exists else None, "valid": valid,
            })
    return programs


def _one_blas_thread():
    """A task is one CPU's work (Ray sets OMP_NUM_THREADS=1 for it; the local pool runs --jobs of them on as many
    CPUs): the BLAS pool numpy's references use gets one thread, so every engine computes builtin_device's
    results with the same summation order and reports the same errors."""
    try:
        import threadpoolctl
    except ImportError:  # pragma: no cover - a dependency; without it the limit is only Ray's environment
        import contextlib

        return contextlib.nullcontext()
    return threadpoolctl.threadpool_limits(limits=1, user_api="blas")


def run_task(task: dict) -> dict:
    """Run one entry (module docstring). `task`: {"entry", "key", "cache_dir", "collect_programs",
    "reference_dir"}."""
    entry = task["entry"]
    started = time.time()
    t0 = time.perf_counter()
    result = {"id": entry.id, "key": task["key"], "result_version": RESULT_VERSION, "status": "error",
              "model": entry.model, "devices": list(entry.devices),
              "context_properties": entry.context_properties}
    timings: dict = {}
    run_info = {"host": platform.node(), "pid": os.getpid(), "started": started}
    payload = {"result": result, "programs": {}, "dot": None}
    private = tempfile.mkdtemp(prefix="nnadapter-batch-") if task.get("collect_programs") else None
    cache_dir = private or task["cache_dir"]
    try:
        with warnings.catch_warnings(record=True) as caught, _one_blas_thread():
            warnings.simplefilter("always")
            _run(entry, task, cache_dir, result, timings, payload)
        seen = []
        for w in caught:
            text = f"{w.category.__name__}: {w.message}"
            if text not in seen:
                seen.append(text)
        result["warnings"] = seen
        fallbacks = [t for t in seen if t.startswith("DeviceFallbackWarning")]
        if fallbacks and result["status"] == "pass":
            result["status"] = "fail"
            result["note"] = "a device fell back: " + fallbacks[0].split(": ", 1)[1]
        if private:
            for name in os.listdir(private):
                full = os.path.join(private, name)
                if os.path.isfile(full) and not name.startswith(".") and name.endswith((".nnc", ".json")):
                    with open(full, "rb") as f:
                        payload["programs"][name] = f.read()
    except BaseException as exc:  # noqa: BLE001 - one failing entry never stops the others
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        result["status"] = "error"
        result["error"] = _one_line(exc)
        result["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
    finally:
        if private:
            shutil.rmtree(private, ignore_errors=True)
    timings["total_s"] = time.perf_counter() - t0
    run_info["finished"] = time.time()
    result["timings"] = {k: round(v, 4) for k, v in timings.items()}
    result["run"] = run_info
    return payload


def _run(entry: Entry, task: dict, cache_dir: str, result: dict, timings: dict, payload: dict) -> None:
    from nnadapter_bridge.predictor.predictor import create_predictor
    from nnadapter_bridge.validation import inputs
    from nnadapter_bridge.validation.paddle_reference import compare
    from partition import dot_text

    os.makedirs(cache_dir, exist_ok=True)
    t = time.perf_counter()
    predictor = create_predictor(_config(entry, cache_dir))
    try:
        timings["prepare_s"] = time.perf_counter() - t
        feeds, origin = inputs.input_arrays(predictor, entry.reference_inputs, _random_input_shapes(entry), entry.seed)
        inputs.feed(predictor, feeds)
        t = time.perf_counter()
        predictor.run()  # converts, compiles, writes the .nnc files (or restores them)
        timings["first_run_s"] = time.perf_counter() - t
        outputs = inputs.outputs_of(predictor)
        inputs.feed(predictor, feeds)
        t = time.perf_counter()
        predictor.run()
        timings["run_s"] = time.perf_counter() - t
        timings["compile_s"] = max(timings["first_run_s"] - timings["run_s"], 0.0)
        stats = predictor.stats
        result.update({
            "inputs": {name: {"shape": list(a.shape), "dtype": str(a.dtype), "from": origin[name]}
                       for name, a in feeds.items()},
            "num_subgraphs": stats.subgraphs, "num_host_ops": stats.host_ops,
            "compiled": stats.builds, "restored": stats.cache_hits_file + stats.cache_hits_buffer,
            "programs": _programs(predictor, cache_dir),
            "host_ops": _host_ops(predictor),
        })
        payload["dot"] = dot_text(predictor.graph, predictor.partition)
    finally:
        predictor.close()
    t = time.perf_counter()
    want, source = _reference_outputs(entry, feeds, task.get("reference_dir"))
    timings["reference_s"] = time.perf_counter() - t
    result["reference"] = source
    if want is None:
        result["outputs"] = {name: {"shape": list(a.shape)} for name, a in outputs.items()}
        result["status"] = "pass"
        result["note"] = f"not compared ({'compare: none' if source == 'none' else source})"
        return
    comparison = {}
    for name, got in outputs.items():
        if name not in want:
            comparison[name] = {"passed": False, "note": f"the reference ({source}) has no output of this name"}
        else:
            comparison[name] = compare(got, np.asarray(want[name]))
    result["outputs"] = comparison
    result["max_abs_error"] = max((c.get("max_abs_error") or 0.0 for c in comparison.values()), default=0.0)
    result["max_rel_error"] = max((c.get("max_rel_error") or 0.0 for c in comparison.values()), default=0.0)
    bad_programs = [p["token"] for p in result["programs"] if p["file"] and not p["valid"]]
    passed = all(c["passed"] for c in comparison.values())
    result["status"] = "pass" if passed and not bad_programs else "fail"
    if bad_programs:
        result["note"] = f"written .nnc files fail their checks: {', '.join(bad_programs)}"
