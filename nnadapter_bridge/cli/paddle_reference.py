"""Paddle Inference as the reference: running a model on it and comparing our outputs with its outputs at
the whole-model tolerance (nnadapter_bridge.tolerances)."""
from __future__ import annotations

import os
import warnings
from typing import Optional

import numpy as np

from nnadapter_bridge.cli.options import CliError
from nnadapter_bridge.errors import BridgeError
from nnadapter_bridge.tolerances import model_out_of_tolerance


def paddle_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("paddle") is not None


def paddle_outputs(model: str, params: Optional[str], feeds: dict) -> dict:
    """Run the model with Paddle Inference on CPU (oneDNN and IR optimization off, one thread) on `feeds`;
    returns {output name: array}. CliError when paddlepaddle is not installed."""
    if not paddle_available():
        raise CliError("paddlepaddle is not installed, so there is no Paddle Inference to compare with: "
                       "pip install paddlepaddle (or nnadapter-bridge[paddle])")
    os.environ.setdefault("GLOG_minloglevel", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time notes of paddle's own (no ccache, ...)
        import paddle.inference as paddle_infer

    # The same layout resolution as our loader, so both sides read the same files (PIR .json included).
    from nnadapter_bridge.loader.layout import resolve

    try:
        source = resolve(model, params)
    except BridgeError as exc:
        raise CliError(str(exc)) from exc
    if source.params_is_dir:
        config = paddle_infer.Config(source.params_path)
    elif source.params_path is not None:
        config = paddle_infer.Config(source.model_path, source.params_path)
    else:  # a program without parameters
        config = paddle_infer.Config()
        config.set_prog_file(source.model_path)
    config.disable_gpu()
    config.disable_glog_info()
    config.disable_mkldnn()
    config.switch_ir_optim(False)  # the program as written, not Paddle's fused rewrite of it
    config.set_cpu_math_library_num_threads(1)
    predictor = paddle_infer.create_predictor(config)
    for name in predictor.get_input_names():
        handle = predictor.get_input_handle(name)
        array = np.ascontiguousarray(feeds[name])
        handle.reshape(list(array.shape))
        handle.copy_from_cpu(array)
    predictor.run()
    return {name: predictor.get_output_handle(name).copy_to_cpu() for name in predictor.get_output_names()}


def compare(got: np.ndarray, want: np.ndarray) -> dict:
    """max abs error, max error relative to max|want|, and PASS/FAIL at the whole-model tolerance
    (integers and booleans exact; a shape or dtype-kind difference fails)."""
    entry = {"shape": list(got.shape), "want_shape": list(want.shape), "max_abs_error": None,
             "max_rel_error": None, "passed": False}
    if got.shape != want.shape:
        entry["note"] = f"shape {list(got.shape)} != Paddle's {list(want.shape)}"
        return entry
    if not got.size:
        entry.update(max_abs_error=0.0, max_rel_error=0.0, passed=True)
        return entry
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(got64 - want64)
    scale = float(np.max(np.abs(want64)))
    entry["max_abs_error"] = float(err.max())
    entry["max_rel_error"] = float(err.max() / scale) if scale > 0 else (0.0 if err.max() == 0 else float("inf"))
    if want.dtype.kind in "biu" or got.dtype.kind in "biu":
        entry["passed"] = bool(np.array_equal(got, want))
    else:
        entry["passed"] = not bool(model_out_of_tolerance(got, want).any())
    return entry
