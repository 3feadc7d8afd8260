"""Pytest fixtures for quantized zoo models: Paddle's own post-training quantization of the zoo models
(devtools.zoo_quant), built once and cached next to the zoo fixtures.

Cache: `<fixture_root()>/<name>-q<onnx|fake>-<channel|layer>-<QUANT_BUILD_ID>/model.pdmodel` (+ .pdiparams),
built under an exclusive lock into a staging directory renamed into place after the COMPLETE marker is
written (the same pattern as model_zoo_fixtures.ensure_zoo_model), from the cached float zoo model.

Fixtures:
  quant_model(name, onnx_format, weight_type) -> path of model.pdmodel (session scope)
  QUANT_CASES: the (name, onnx_format, weight_type) combinations the e2e tests use
  eval_images(count), quant_reference(...): the evaluation inputs and Paddle Inference's outputs on them
  (cached next to the model, computed once)
"""
from __future__ import annotations

import fcntl
import os

import numpy as np
import pytest

from devtools import zoo, zoo_quant
from support.fixture_cache import build_once, is_complete
from support.model_zoo_fixtures import BUILD_ID, ensure_zoo_model, fixture_root, paddle_inference_outputs

# Bump when the quantization recipe (calibration images, batches, algo) changes.
QUANT_BUILD_ID = f"{BUILD_ID}-ptq-v1"

CHANNEL, LAYER = "channel_wise_abs_max", "abs_max"
# Every combination for the MobileNets; resnet50 (the slow one to quantize and to run on builtin_device)
# in both encodings with per-channel weights.
QUANT_CASES = [(name, onnx_format, weight_type)
               for name in ("mobilenet_v1", "mobilenet_v2")
               for onnx_format in (True, False)
               for weight_type in (CHANNEL, LAYER)]
QUANT_CASES += [("resnet50", True, CHANNEL), ("resnet50", False, CHANNEL)]


def quant_case_id(name: str, onnx_format: bool, weight_type: str) -> str:
    return f"{name}-{'onnx' if onnx_format else 'fake'}-{'channel' if weight_type == CHANNEL else 'layer'}"


def ensure_quant_model(name: str, onnx_format: bool, weight_type: str, root: str | None = None) -> str:
    """The directory holding the quantized `name`, building it first if no complete copy exists."""
    root = root or fixture_root()
    case = quant_case_id(name, onnx_format, weight_type)
    key = f"{case}-{QUANT_BUILD_ID}"
    if is_complete(os.path.join(root, key)):
        return os.path.join(root, key)
    float_model = zoo.model_path(name, "pdmodel", os.path.join(ensure_zoo_model(name, root), "pdmodel"))

    def build(staging: str) -> str:
        zoo_quant.build_quantized_model(float_model, staging, onnx_format, weight_type)
        return f"{QUANT_BUILD_ID}\nfrom {float_model}\n"

    return build_once(root, key, build)


def quant_model_path(name: str, onnx_format: bool, weight_type: str) -> str:
    return os.path.join(ensure_quant_model(name, onnx_format, weight_type), zoo_quant.MODEL_FILENAME)


# The evaluation inputs: EVAL_IMAGES deterministic synthetic images (not the calibration ones), run in batches.
EVAL_SEED = 99
EVAL_IMAGES = 200
EVAL_BATCH = 20


def eval_images(count: int = EVAL_IMAGES) -> np.ndarray:
    """The first `count` of the evaluation images (float32 [count, 3, 224, 224]); the same for any count."""
    batches = [zoo_quant.synthetic_images(EVAL_SEED * 1000 + b, EVAL_BATCH)
               for b in range((count + EVAL_BATCH - 1) // EVAL_BATCH)]
    return np.concatenate(batches)[:count]


def quant_reference(name: str, onnx_format: bool, weight_type: str) -> np.ndarray:
    """Paddle Inference's output of the quantized model on eval_images() (float32 [EVAL_IMAGES, classes]),
    computed once and cached next to the model (`paddle_eval-<seed>-<count>.npy`, written atomically)."""
    folder = ensure_quant_model(name, onnx_format, weight_type)
    path = os.path.join(folder, f"paddle_eval-{EVAL_SEED}-{EVAL_IMAGES}.npy")
    if os.path.isfile(path):
        return np.load(path)
    with open(os.path.join(fixture_root(), f".{quant_case_id(name, onnx_format, weight_type)}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(path):
            return np.load(path)
        images = eval_images()
        model = os.path.join(folder, zoo_quant.MODEL_FILENAME)
        outputs = [paddle_inference_outputs(model, {"x": images[k:k + EVAL_BATCH]})[0]
                   for k in range(0, EVAL_IMAGES, EVAL_BATCH)]
        result = np.concatenate(outputs).astype(np.float32)
        staging = path + f".{os.getpid()}.tmp.npy"
        np.save(staging, result)
        os.rename(staging, path)
    return result


@pytest.fixture(scope="session")
def quant_model():
    """Factory: quant_model(name, onnx_format, weight_type) -> path of the cached quantized model.pdmodel."""
    try:
        zoo.require_paddle()
    except zoo.ZooError as exc:
        pytest.skip(f"model zoo unavailable: {exc}")
    return quant_model_path
