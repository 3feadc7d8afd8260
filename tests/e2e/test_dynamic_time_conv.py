"""1-D convolutions on a time axis declared -1 (issue 25: a speech-style encoder whose convs were decided with a
time size of 0, "the window does not fit: input [1, 256, 1, 0]", so they all ran on the host).

Paddle lowers Conv1D to unsqueeze2 -> conv2d -> squeeze2 on a [N, C, 1, T] view; the time axis is unknown when the
partition is made, so each conv must be decided as if concrete and stay on the device. Saved both ways (legacy
static ProgramDesc and PIR `.json`), run on every device at two lengths, compared with Paddle Inference on the same
saved program; the placement must have no host op.
"""
from __future__ import annotations

import numpy as np
import pytest

from support.converter_harness import paddle_inference_run, paddle_pir_static, paddle_static
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
CHANNELS = 256
LENGTHS = (37, 20)  # the first run and a second length through the same predictor


def _encoder(paddle, x):
    """Strided, dilated, depthwise and pointwise 1-D convs, as in speech front ends, with no padding on the first
    (the window arithmetic on an unknown length is what went wrong)."""
    nn = paddle.nn
    y = nn.functional.relu(nn.Conv1D(CHANNELS, CHANNELS, 3, stride=2)(x))
    y = nn.functional.relu(nn.Conv1D(CHANNELS, CHANNELS, 5, padding=4, dilation=2, groups=CHANNELS)(y))
    y = nn.Conv1D(CHANNELS, 64, 1)(y)
    return nn.functional.max_pool1d(y, 2, 2)


def _save(directory, pir: bool):
    """The encoder saved with its input declared [1, 256, -1]; (model path, params path)."""
    guard = paddle_pir_static if pir else paddle_static
    with guard() as paddle:
        paddle.seed(11)
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", shape=[1, CHANNELS, -1], dtype="float32")
            y = _encoder(paddle, x)
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(str(directory / "model"), [x], [y], exe, program=main)
    model = directory / ("model.json" if pir else "model.pdmodel")
    return str(model), str(directory / "model.pdiparams")


@pytest.fixture(scope="module", params=["legacy", "pir"])
def encoder(request, tmp_path_factory):
    model, params = _save(tmp_path_factory.mktemp(f"time_conv_{request.param}"), request.param == "pir")
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal([1, CHANNELS, t]).astype(np.float32)} for t in LENGTHS]
    return model, params, feeds, [paddle_inference_run(model, params, f)[0] for f in feeds]


@pytest.mark.parametrize("device", DEVICES)
def test_convs_on_a_dynamic_time_axis_stay_on_the_device(encoder, device):
    import nnadapter_bridge as nb
    from nnadapter_bridge.loader import load_model

    model, params, feeds, wants = encoder
    graph = load_model(model, params)
    convs = [op for op in graph.ops() if op.type in ("conv2d", "depthwise_conv2d")]
    assert len(convs) == 3 and all(graph.var(op.input("Input")[0]).shape[-1] == -1 for op in convs)
    config = nb.Config()
    config.set_model_file(model)
    config.set_param_file(params)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    for feed, want in zip(feeds, wants):
        predictor.get_input_by_name("x").from_numpy(feed["x"])
        predictor.run()
        got = predictor.get_output(0).numpy()
        assert got.shape == want.shape, (got.shape, want.shape)
        assert_model_close(got, want, what=f"{device}, length {feed['x'].shape[-1]}")
    host = [(p.op.label(), p.reason) for p in predictor.placements() if p.device is None]
    assert not host, host
