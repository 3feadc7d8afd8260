"""A `paddle.autograd.PyLayer` under to_static is saved as `pd_op.pylayer`, one region holding its forward (paddlenlp's
Reformer runs its reversible layers through one): the loader inlines the forward's ops and assigns the results from
what its cf.yield gives (loader/pir.py `_pylayer`; before, "pd_op.pylayer has no known signature" refused the model).

Ops of the forward whose results nothing reads stay in the program (Paddle keeps them inside the region) and, once
inlined, can make a device subgraph without outputs; the engine runs no such subgraph (onnxruntime cannot load the
graph it prunes to nothing: the subgraph fell back to the host on every run).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from support.converter_harness import device_predictor, pir_op_names, pir_program
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack"]


@pytest.fixture(scope="module")
def pylayer_program(tmp_path_factory):
    feeds = {"x": np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)}

    def build(x):
        import paddle

        def forward(a, b):
            unused = paddle.tile(paddle.arange(0, 8, dtype="int64").reshape([2, 4]), [2, 1])  # nothing reads it
            del unused
            return paddle.tanh(a) * 2.0 + b, paddle.exp(b * 0.5)

        def backward(ga, gb):
            return ga, gb

        first, second = paddle.static.nn.static_pylayer(forward, [x * 3.0, x - 1.0], backward)
        return [first - x, second]
    return pir_program(tmp_path_factory.mktemp("pylayer"), build, feeds)


def test_the_export_holds_a_pylayer(pylayer_program):
    assert "pd_op.pylayer" in pir_op_names(pylayer_program.model_path)  # the form under test


def test_the_forward_is_inlined(pylayer_program):
    from nnadapter_bridge.loader import load_model

    graph = load_model(pylayer_program.model_path, pylayer_program.params_path)
    assert len(graph.blocks) == 1, "the forward became a sub-block"
    types = [op.type for op in graph.ops()]
    assert {"tanh", "exp", "range", "tile"} <= set(types), types


@pytest.mark.parametrize("device", DEVICES)
def test_pylayer_runs_as_paddle_with_no_host_fallback(pylayer_program, device):
    predictor = device_predictor(pylayer_program.model_path, device, pylayer_program.params_path)
    predictor.get_input_by_name("x").from_numpy(pylayer_program.feeds["x"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=__import__(
            "nnadapter_bridge.nnadapter.runtime", fromlist=["DeviceFallbackWarning"]).DeviceFallbackWarning)
        predictor.run()
    for k, want in enumerate(pylayer_program.outputs):
        assert_model_close(predictor.get_output(k).numpy(), want, what=f"{device} output {k}")
    assert predictor.stats.subgraph_host_runs == 0
