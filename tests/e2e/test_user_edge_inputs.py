"""Edge inputs a new user tries on whole models, on every device, against Paddle Inference: one NaN pixel
(Paddle's relu `x > 0 ? x : 0` turns it into 0, so the logits stay finite) and embedding ids out of range
(Paddle raises; so must every device, with a clear error and no raw SDK log line on stderr)."""
from __future__ import annotations

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.converter_harness import pir_program, run_predictor
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
PROPERTIES = "INTEL_OPENVINO_INFERENCE_NUM_THREADS=1;MICROSOFT_ONNXRUNTIME_NUM_THREADS=1;BUILTIN_DEVICE_NUM_THREADS=1"


@pytest.mark.parametrize("device", DEVICES)
def test_one_nan_pixel_gives_paddles_finite_logits(zoo_model, paddle_reference, device):
    path = zoo_model("mobilenet_v1")
    image = np.random.default_rng(3).standard_normal((1, 3, 224, 224)).astype(np.float32)
    image[0, 1, 100, 100] = np.nan
    expected = paddle_reference(path, {"x": image})
    assert np.isfinite(expected[0]).all()  # the premise: Paddle's relu maps the NaN to 0
    config = nb.Config()
    config.set_model_file(path)
    config.set_nnadapter_device_names([device])
    config.set_nnadapter_context_properties(PROPERTIES)
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(image)
    predictor.run()
    got = predictor.get_output(0).numpy()
    assert np.isfinite(got).all(), f"{device}: {np.isnan(got).sum()} NaN logits"
    assert_model_close(got, expected[0], what=f"mobilenet_v1 on {device}")


@pytest.fixture(scope="module")
def embedding_program(tmp_path_factory):
    import paddle

    def build(ids):
        return paddle.nn.Embedding(10, 4)(ids)

    return pir_program(tmp_path_factory.mktemp("embedding"), build, {"ids": np.array([[1, 2, 3]], np.int64)})


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_ids_out_of_range_raise_on_every_device(embedding_program, device, capfd):
    import dataclasses

    good = run_predictor(embedding_program, device)
    np.testing.assert_allclose(good[0], embedding_program.outputs[0], rtol=1e-6)
    for bad_ids in ([[1, 12, 3]], [[10, 0, 0]], [[0, 0, -11]]):
        saved = dataclasses.replace(embedding_program, feeds={"ids": np.array(bad_ids, np.int64)})
        capfd.readouterr()
        with pytest.raises(nb.BridgeError, match="GATHER#0") as info:
            run_predictor(saved, device)
        assert "Traceback" not in str(info.value)
        err = capfd.readouterr().err
        assert "\x1b[" not in err and "ExecuteKernel" not in err, f"{device} printed a raw SDK log line: {err!r}"


def test_openvino_checks_indices_after_restoring_from_the_cache(embedding_program, tmp_path):
    def predictor():
        config = nb.Config()
        config.set_model_file(embedding_program.model_path)
        config.set_param_file(embedding_program.params_path)
        config.set_nnadapter_device_names(["intel_openvino"])
        config.set_nnadapter_model_cache_dir(str(tmp_path))
        return nb.create_predictor(config)

    first = predictor()
    first.get_input(0).from_numpy(np.array([[1, 2, 3]], np.int64))
    first.run()
    assert nb.wait_for_cache_writes(timeout=60)  # the .nnc is written by a thread of its own
    assert list(tmp_path.glob("*.nnc")), "the first run wrote no cache file"
    restored = predictor()
    restored.get_input(0).from_numpy(np.array([[1, 2, 3]], np.int64))
    restored.run()
    np.testing.assert_allclose(restored.get_output(0).numpy(), embedding_program.outputs[0], rtol=1e-6)
    restored.get_input(0).from_numpy(np.array([[1, 99, 3]], np.int64))
    with pytest.raises(nb.BridgeError, match="GATHER#0: an index lies outside"):
        restored.run()
