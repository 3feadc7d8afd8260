"""Quantized zoo models: a zoo model (zoo.MODELS) post-training quantized by paddlepaddle itself.

`build_quantized_model(float_model, out_dir, onnx_format, weight_type)` runs Paddle's own
`paddle.static.quantization.PostTrainingQuantization` (algo "abs_max") on the legacy export
`<name>.pdmodel` + `<name>.pdiparams` and saves `<out_dir>/model.pdmodel` + `model.pdiparams`:

  onnx_format=True   quantize_linear / dequantize_linear pairs around every quantized op's input and output,
                     int8 weights (stored int8 under a float32 VarDesc) read through dequantize_linear
  onnx_format=False  the "fake" form: fake_quantize_range_abs_max on activations (integers held in float),
                     weights holding integers in float32, conv2d / depthwise_conv2d / matmul_v2 on those
                     integers, and fake_dequantize_max_abs (per-layer weights) or
                     fake_channel_wise_dequantize_max_abs (per-channel) scaling the integer sums back

  weight_type "channel_wise_abs_max" (one scale per output channel) or "abs_max" (one per layer).

Calibration reads CALIBRATION_BATCHES x CALIBRATION_BATCH deterministic synthetic images
(`synthetic_images(seed, n)`: smooth random colour fields plus noise, roughly unit variance, so every layer
sees a spread of values). The quantization runs in a fresh interpreter with FLAGS_enable_pir_api=0, as the
zoo's legacy export does: the parent may have paddle loaded in PIR mode.
`python -m devtools.zoo_quant FLOAT_PDMODEL OUT_DIR --onnx-format 1 --weight-type abs_max`.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

from devtools.zoo import INPUT_NAME, ZooError, require_paddle

WEIGHT_TYPES = ("channel_wise_abs_max", "abs_max")
CALIBRATION_BATCH = 10
CALIBRATION_BATCHES = 20  # 200 images
CALIBRATION_SEED = 7
MODEL_FILENAME = "model.pdmodel"
PARAMS_FILENAME = "model.pdiparams"


def synthetic_images(seed: int, n: int, size: int = 224) -> np.ndarray:
    """`n` deterministic float32 [3, size, size] "images": a low-frequency random colour field (8 x 8 grid,
    upsampled) plus pixel noise, standardised to roughly zero mean and unit variance, so classifiers see
    inputs that differ in structure, not just in noise."""
    rng = np.random.default_rng(seed)
    coarse = rng.standard_normal((n, 3, 8, 8)).astype(np.float32)
    reps = size // 8
    field = np.repeat(np.repeat(coarse, reps, axis=2), reps, axis=3)
    noise = rng.standard_normal((n, 3, size, size)).astype(np.float32)
    images = 0.9 * field + 0.45 * noise
    return images.astype(np.float32)


def build_quantized_model(float_model: str, out_dir: str, onnx_format: bool, weight_type: str,
                          batches: int = CALIBRATION_BATCHES, timeout: float = 1800.0) -> str:
    """Quantize the legacy model `float_model` (a `<name>.pdmodel` with its `.pdiparams` next to it) into
    `out_dir`; returns the path of `out_dir/model.pdmodel`."""
    if weight_type not in WEIGHT_TYPES:
        raise ZooError(f"unknown weight type '{weight_type}'; choose one of: {', '.join(WEIGHT_TYPES)}")
    require_paddle()
    cmd = [sys.executable, "-m", "devtools.zoo_quant", os.path.abspath(float_model), os.path.abspath(out_dir),
           "--onnx-format", "1" if onnx_format else "0", "--weight-type", weight_type, "--batches", str(batches)]
    env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_minloglevel=os.environ.get("GLOG_minloglevel", "2"))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    path = os.path.join(out_dir, MODEL_FILENAME)
    if proc.returncode != 0 or not os.path.isfile(path):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise ZooError(f"quantizing '{float_model}' failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return path


def _quantize_in_this_process(float_model: str, out_dir: str, onnx_format: bool, weight_type: str,
                              batches: int) -> None:
    if os.environ.get("FLAGS_enable_pir_api") != "0" or "paddle" in sys.modules:
        raise ZooError("the quantization must run in a fresh interpreter with FLAGS_enable_pir_api=0; "
                       "use build_quantized_model() rather than calling this directly")
    import paddle
    from paddle.static.quantization import PostTrainingQuantization

    paddle.enable_static()
    model_dir, model_file = os.path.split(os.path.abspath(float_model))
    if not model_file.endswith(".pdmodel"):
        raise ZooError(f"'{float_model}' is not a .pdmodel file")
    params_file = model_file[: -len(".pdmodel")] + ".pdiparams"

    def loader():
        for b in range(batches):
            yield {INPUT_NAME: synthetic_images(CALIBRATION_SEED * 1000 + b, CALIBRATION_BATCH)}

    exe = paddle.static.Executor(paddle.CPUPlace())
    ptq = PostTrainingQuantization(executor=exe, model_dir=model_dir, model_filename=model_file,
                                   params_filename=params_file, data_loader=loader, batch_nums=batches,
                                   algo="abs_max", onnx_format=onnx_format, weight_quantize_type=weight_type)
    ptq.quantize()
    ptq.save_quantized_model(out_dir, model_filename=MODEL_FILENAME, params_filename=PARAMS_FILENAME)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.zoo_quant",
                                     description="Post-training quantize a legacy zoo model with Paddle's own PTQ.")
    parser.add_argument("float_model", help="the float model's <name>.pdmodel (its .pdiparams next to it)")
    parser.add_argument("out_dir")
    parser.add_argument("--onnx-format", type=int, choices=(0, 1), default=1)
    parser.add_argument("--weight-type", choices=WEIGHT_TYPES, default="channel_wise_abs_max")
    parser.add_argument("--batches", type=int, default=CALIBRATION_BATCHES)
    args = parser.parse_args(argv)
    _quantize_in_this_process(args.float_model, args.out_dir, bool(args.onnx_format), args.weight_type, args.batches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
