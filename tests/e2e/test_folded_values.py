"""Values that depend only on the input sizes are decided as the constants they become (issue 24 item 1, issue 29's
next step): a program is compiled for concrete input shapes, and the converters fold `shape` and the slices, casts,
stacks and arithmetic on it into constants, so a device that has no integer arithmetic (google_xnnpack builds
float32 and int8 tensors only) never sees them. The support decision now asks the devices the same question: an op
whose outputs fold away is taken, and an op reading such a value (a resize to a computed size, a reshape to a
computed target) is asked again with it constant. Before, google_xnnpack left every such chain on the host and split
the model around it (PP-LiteSeg: 24 host ops and 5 subgraphs; SegFormer: 277 host ops and 42 subgraphs).

A folded value must stay inside the devices' subgraphs: one the host reads (a fetch, a loop's counter) keeps its
chain on the host, where before it was too, and no run falls back or splits.

Every answer is Paddle Inference's, on the programs declared with -1 sizes as the zoos export them.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter.runtime import DeviceFallbackWarning
from nnadapter_bridge.subgraph.engine import ShapeFallbackWarning, SubgraphSplitWarning
from support.converter_harness import paddle_inference_run, save_declared
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack"]
IMAGE = np.random.default_rng(29).standard_normal((1, 3, 12, 16)).astype(np.float32)
SHAPE_OPS = {"shape", "slice", "cast", "scale", "stack", "elementwise_mul", "full", "fill_constant", "concat"}


def _upsample_by_computed_size(x):
    """A segmentation head's resize: the output size is the input's, times two, computed at run time."""
    import paddle

    y = paddle.nn.Conv2D(3, 4, 3, padding=1)(x)
    size = paddle.shape(y)[2:] * 2
    return paddle.nn.functional.interpolate(y, size=size, mode="bilinear", align_corners=False)


def _heads_by_computed_target(x):
    """A transformer's head split: a reshape to [batch, tokens, heads, -1] read from the input's shape."""
    import paddle

    tokens = paddle.nn.Conv2D(3, 8, 1)(x).flatten(2).transpose([0, 2, 1])
    shape = paddle.shape(tokens)
    heads = tokens.reshape([shape[0], shape[1], 4, -1]).transpose([0, 2, 1, 3])
    return paddle.nn.functional.softmax(paddle.matmul(heads, heads, transpose_y=True), axis=-1)


def _size_fetched_too(x):
    """The computed size is also a model output: the host must have it."""
    import paddle

    y = paddle.nn.functional.relu(x)
    size = paddle.shape(y)[2:] * 2
    return [paddle.nn.functional.interpolate(y, size=size, mode="nearest"), size.astype("int64")]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    programs = {}
    for name, build in (("upsample", _upsample_by_computed_size), ("heads", _heads_by_computed_target),
                        ("fetched", _size_fetched_too)):
        model, params = save_declared(tmp_path_factory.mktemp(name), build, {"x": [-1, 3, -1, -1]})
        programs[name] = (model, params, paddle_inference_run(model, params, {"x": IMAGE}))
    return programs


def _predictor(model, params, *devices):
    config = nb.Config()
    config.set_model_file(model)
    if params:
        config.set_param_file(params)
    config.set_nnadapter_device_names(list(devices))
    return nb.create_predictor(config)


def _run_checked(predictor, feed):
    predictor.get_input_by_name("x").from_numpy(feed)
    with warnings.catch_warnings():
        for category in (DeviceFallbackWarning, ShapeFallbackWarning, SubgraphSplitWarning):
            warnings.simplefilter("error", category)  # the decision must hold once the shapes are concrete
        predictor.run()
    return [predictor.get_output(k).numpy() for k in range(len(predictor.get_output_names()))]


def _assert_paddle(got, want):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"output {k}: shape {list(g.shape)}, Paddle's {list(w.shape)}"
        assert_model_close(g, w, what=f"output {k}")


@pytest.mark.parametrize("name", ["upsample", "heads"])
@pytest.mark.parametrize("device", DEVICES)
def test_shape_arithmetic_runs_in_the_devices_subgraph(saved, name, device):
    model, params, want = saved[name]
    predictor = _predictor(model, params, device)
    assert [op.type for op in predictor.host_ops] == []
    assert len(predictor.engines) == 1
    _assert_paddle(_run_checked(predictor, IMAGE), want)
    # Another input size: a second program, its own folded constants (compiled for that shape).
    other = np.random.default_rng(3).standard_normal((2, 3, 8, 20)).astype(np.float32)
    _assert_paddle(_run_checked(predictor, other), paddle_inference_run(model, params, {"x": other}))


def test_google_xnnpack_says_the_folded_chain_is_on_the_device(saved):
    """The partition report names the device for the ops that fold away (each device is asked with the values
    constant), not the host."""
    model, params, _ = saved["upsample"]
    predictor = _predictor(model, params, "google_xnnpack", "builtin_device")
    placed = {p.op.type: p for p in predictor.placements()}
    for op_type in ("shape", "slice", "bilinear_interp_v2", "conv2d"):
        assert placed[op_type].device == "google_xnnpack", (op_type, placed[op_type])


@pytest.mark.parametrize("device", DEVICES)
def test_a_fetched_size_keeps_its_chain_where_the_host_can_read_it(saved, device):
    model, params, want = saved["fetched"]
    predictor = _predictor(model, params, device)
    host = {op.type for op in predictor.host_ops}
    if device == "google_xnnpack":
        # The size leaves the model as int64, which google_xnnpack cannot copy out: the chain stays on the host
        # (and the resize reading it, which google_xnnpack takes only with a constant size).
        assert "shape" in host and host <= SHAPE_OPS | {"nearest_interp_v2"}, host
        # The reason says it would fold and why it is not taken, not only that google_xnnpack lacks SHAPE.
        why = predictor.unsupported_reasons()["shape"]
        assert "would fold into a constant" in why and "off the devices" in why, why
    else:
        assert host == set(), host
    _assert_paddle(_run_checked(predictor, IMAGE), want)
