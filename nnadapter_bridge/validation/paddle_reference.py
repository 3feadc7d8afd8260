"""Paddle Inference as the reference: running a model on it and comparing our outputs with its outputs at
the whole-model tolerance (nnadapter_bridge.validation.tolerances).

When Paddle Inference itself cannot load or run the model (an op it does not know, an input it rejects), the
CLI says so in one line (CliError "Paddle Inference could not run this model: ..."), never with Paddle's
C++ traceback.

Entry points: `paddle_outputs`, `compare`, `paddle_available`, `check_paddle_readable`. Imports paddle only inside
the functions that run it (nothing else in the package needs paddle), the tolerances and the command options; never
an application.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from nnadapter_bridge.commands.options import CliError
from nnadapter_bridge.errors import BridgeError
from nnadapter_bridge.validation.tolerances import (
    cosine_similarity,
    model_out_of_tolerance,
    model_scale,
    top1_agreement,
    within_reduced_precision,
)


def paddle_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("paddle") is not None


def check_paddle_readable(model: str, source=None, params: str | None = None) -> None:
    """CliError before anything runs when Paddle Inference cannot read `model` at all: a Paddle Lite .nb (Paddle
    Inference crashes on one, SIGSEGV, rather than refusing it)."""
    if source is None:
        from nnadapter_bridge.loader.model_files import resolve

        try:
            source = resolve(model, params)
        except BridgeError as exc:
            raise CliError(str(exc)) from exc
    if source.layout == "naive_buffer":
        raise CliError(f"Paddle Inference cannot read {model}: a Paddle Lite .nb is not a Paddle Inference model. "
                       "Compare with the Paddle model it was optimized from (--compare-float SOURCE_MODEL reports "
                       "the same metrics against it)")


def paddle_outputs(model: str, params: str | None, feeds: dict) -> dict:
    """Run the model with Paddle Inference on CPU (oneDNN and IR optimization off, one thread) on `feeds`;
    returns {output name: array}. CliError when paddlepaddle is not installed, or (one line) when Paddle
    Inference cannot load or run the model."""
    if not paddle_available():
        raise CliError("paddlepaddle is not installed, so there is no Paddle Inference to compare with: "
                       "pip install paddlepaddle (or nnadapter-bridge[paddle])")
    os.environ.setdefault("GLOG_minloglevel", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time notes of paddle's own (no ccache, ...)
        import paddle.inference as paddle_infer

    # The same layout resolution as our loader, so both sides read the same files (PIR .json included).
    from nnadapter_bridge.loader.model_files import resolve

    try:
        source = resolve(model, params)
    except BridgeError as exc:
        raise CliError(str(exc)) from exc
    check_paddle_readable(model, source)
    try:
        return _run_paddle_inference(paddle_infer, source, feeds)
    except Exception as exc:  # noqa: BLE001 - whatever Paddle raises, the user gets one line, not its traceback
        raise CliError(f"Paddle Inference could not run this model: {paddle_error_summary(exc)}") from exc


def _run_paddle_inference(paddle_infer, source, feeds: dict) -> dict:
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
        if name not in feeds:
            raise KeyError(f"Paddle Inference wants an input '{name}' the model has no feed for "
                           f"(inputs: {', '.join(sorted(feeds))})")
        handle = predictor.get_input_handle(name)
        array = np.asarray(feeds[name], order="C")  # np.ascontiguousarray would make a 0-d feed shape [1]
        handle.reshape(list(array.shape))
        handle.copy_from_cpu(array)
    predictor.run()
    return {name: predictor.get_output_handle(name).copy_to_cpu() for name in predictor.get_output_names()}


def paddle_error_summary(exc: BaseException) -> str:
    """One line from a Paddle exception: its `(Kind) message` line when there is one (Paddle's C++ errors
    carry a traceback and hints around it), else its first non-empty line."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("(") and ")" in line[:40]:
            return line.split("  [Hint:")[0].split(" [Hint:")[0]
    summary = next((line for line in lines if not line.startswith(("C++ Traceback", "---", "Error Message"))), "")
    return f"{type(exc).__name__}: {summary}" if summary else type(exc).__name__


def compare(got: np.ndarray, want: np.ndarray, reduced_precision: bool = False) -> dict:
    """max abs error, max error relative to max|want| (over finite expectations), cosine similarity, top-1
    agreement (rows of a [..., classes] float output), and PASS/FAIL at the whole-model tolerance (integers and
    booleans exact; an infinity or NaN only by the same value; a shape difference fails), or with
    `reduced_precision` (a quantized model, bf16 / f16 inference) at tolerances.within_reduced_precision:
    cosine >= 0.999 and top-1 agreement >= 99%."""
    entry = {"shape": list(got.shape), "want_shape": list(want.shape), "max_abs_error": None,
             "max_rel_error": None, "cosine": None, "top1_agreement": None, "passed": False,
             "tolerance": "reduced precision" if reduced_precision else "model"}
    if got.shape != want.shape:
        entry["note"] = f"shape {list(got.shape)} != Paddle's {list(want.shape)}"
        return entry
    if not got.size:
        entry.update(max_abs_error=0.0, max_rel_error=0.0, passed=True)
        return entry
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    # Equal values (the same infinity, NaN for NaN included) differ by 0, a non-finite mismatch by inf:
    # inf - inf would be NaN and hide the difference from max().
    same = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(same, 0.0, np.nan_to_num(np.abs(got64 - want64), nan=np.inf, posinf=np.inf))
    scale = model_scale(want64)  # over the finite expectations, as the tolerance itself
    max_err = float(err.max())
    entry["max_abs_error"] = max_err
    entry["max_rel_error"] = max_err / scale if scale > 0 else (0.0 if max_err == 0 else float("inf"))
    if want.dtype.kind in "biu" or got.dtype.kind in "biu":
        entry["passed"] = bool(np.array_equal(got, want))
        return entry
    cosine = cosine_similarity(got64, want64)
    entry["cosine"] = None if np.isnan(cosine) else cosine
    entry["top1_agreement"] = top1_agreement(got, want)
    if reduced_precision:
        entry["passed"] = within_reduced_precision(got64, want64)
    else:
        entry["passed"] = not bool(model_out_of_tolerance(got, want).any())
    return entry
