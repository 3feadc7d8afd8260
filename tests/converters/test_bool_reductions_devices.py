"""reduce_all / reduce_any on each device (bool, float and integer inputs, axes, keepdim, every axis), against Paddle
Inference, and placed on the device (they reduce as an INT32 REDUCE_MAX, which intel_openvino computes exactly
as a TopK; RT-DETR's anchor-validity `all` is one)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.nnadapter.runtime import DeviceFallbackWarning
from support.converter_harness import pir_program, run_predictor

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    rng = np.random.default_rng(0)
    feeds = {"b": rng.integers(0, 2, (3, 4, 5)).astype(bool), "f": rng.integers(-1, 2, (3, 4)).astype(np.float32),
             "i": rng.integers(0, 3, (2, 6)).astype(np.int64)}

    def build(b, f, i):
        import paddle
        return [paddle.all(b, axis=-1), paddle.any(b, axis=[0, 2], keepdim=True), paddle.all(b), paddle.any(f, axis=1),
                paddle.all(f != 0, axis=0), paddle.any(i > 1, axis=1),
                # one axis kept, as RT-DETR's anchor check does ((x > eps) & (x < 1 - eps)).all(-1, keepdim=True):
                # intel_openvino's TopK then feeds a cast to bool straight away, which its plugin failed to compile.
                ~paddle.all((f > 0) & (f < 1), axis=-1, keepdim=True), paddle.any(b, axis=1, keepdim=True)]
    return pir_program(tmp_path_factory.mktemp("bool_reductions"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_all_and_any_run_on_the_device_as_paddle(program, device):
    types = {op.type for op in load_model(program.model_path, None).ops()}
    assert {"reduce_all", "reduce_any"} <= types, types
    config = nb.Config()
    config.set_model_file(program.model_path)
    config.set_nnadapter_device_names([device])
    on_host = [f"{p.op.label()}: {p.reason}" for p in nb.create_predictor(config).placements(per_device=False)
               if p.device is None]
    assert not on_host, on_host
    with warnings.catch_warnings():
        # Placed on the device is not enough: a program the SDK then fails to compile runs on the host, with this
        # warning.
        warnings.simplefilter("error", DeviceFallbackWarning)
        outputs = run_predictor(program, device)
    for k, (got, want) in enumerate(zip(outputs, program.outputs)):
        assert got.dtype == want.dtype and got.shape == want.shape, f"output {k} on {device}"
        np.testing.assert_array_equal(got, want, err_msg=f"output {k} on {device}")
