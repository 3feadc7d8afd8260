"""The six vision models end to end through the predictor on builtin_device, against Paddle Inference.

Each model runs at batch 1 and then at batch 2 on the same predictor (a new input shape on a live
predictor must work); both outputs are compared with Paddle Inference at DESIGN.md's whole-model tolerance.
"""
from __future__ import annotations

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.tolerances import assert_model_close

MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet50", "squeezenet1_0", "shufflenet_v2_x1_0"]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_matches_paddle_inference_at_batch_1_then_2(name, zoo_model, paddle_reference):
    path = zoo_model(name, "pdmodel")
    config = nb.Config()
    config.set_model_file(path)
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)
    assert predictor.get_input_names() == ["x"]
    rng = np.random.default_rng(7)
    for batch in (1, 2):
        x = rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)
        predictor.get_input_by_name("x").from_numpy(x)
        predictor.run()
        want = paddle_reference(path, {"x": x})
        assert len(want) == len(predictor.get_output_names())
        for k, expected in enumerate(want):
            assert_model_close(predictor.get_output(k).numpy(), expected, what=f"{name} batch {batch} output {k}")
    stats = predictor.stats
    assert stats.runs == 2
    assert stats.subgraphs >= 1


@pytest.mark.slow
def test_combined_layout_via_model_dir(zoo_model, paddle_reference):
    """set_model_dir on a __model__ + __params__ directory gives the same answer as Paddle Inference."""
    path = zoo_model("squeezenet1_0", "combined")
    config = nb.Config()
    config.set_model_dir(path)
    predictor = nb.create_predictor(config)
    x = np.random.default_rng(3).standard_normal((1, 3, 224, 224)).astype(np.float32)
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    want = paddle_reference(path, {"x": x})
    assert_model_close(predictor.get_output(0).numpy(), want[0], what="squeezenet1_0 combined")
