"""Loop and branch bodies partitioned (issue 24's biggest placement gap; Paddle Lite partitions every block): each
body's supported ops run as device subgraphs every time the host runs the body, on each device, and the answer is
Paddle Inference's.

The programs, saved the Paddle 3 way (PIR .json) with weights, the reference from Paddle Inference:
- a loop refining a feature map: three iterations of conv2d + batch-norm-free relu + a residual add (R-CNN's and
  SOLOv2's heads sit in such bodies);
- a branch on the data choosing between a conv + pool path and a matmul path (a mask head under
  `if rois.shape[0] == 0`), both branches taken across two feeds;
- a loop whose body carries a value its next iteration reads before the op that writes it (the counter's test and
  a running sum), so a body subgraph must hand out what its own block reads again.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter.runtime import DeviceFallbackWarning
from nnadapter_bridge.subgraph.engine import ShapeFallbackWarning, SubgraphSplitWarning
from support.converter_harness import pir_program
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack"]

# The loop and the branch themselves run on the host: in these small programs above the 5% share.
pytestmark = pytest.mark.filterwarnings("ignore::nnadapter_bridge.subgraph.plan.HostPlacementWarning")

RNG = np.random.default_rng(24)
IMAGE = RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def refining_loop(tmp_path_factory):
    def build(x):
        import paddle
        conv = paddle.nn.Conv2D(4, 4, 3, padding=1)

        def body(i, feature):
            return i + 1, feature + paddle.nn.functional.relu(conv(feature)) * 0.5
        _, out = paddle.static.nn.while_loop(lambda i, f: i < 3, body, [paddle.full([1], 0, "int64"), x])
        return [out]
    return pir_program(tmp_path_factory.mktemp("refining_loop"), build, {"x": IMAGE})


def _branching(tmp_path_factory, feed):
    def build(x):
        import paddle
        conv = paddle.nn.Conv2D(4, 8, 3, padding=1)
        linear = paddle.nn.Linear(4, 8)

        def pooled():
            return paddle.nn.functional.adaptive_avg_pool2d(paddle.nn.functional.relu(conv(x)), 1).flatten(1)

        def projected():
            return linear(x.mean(axis=[2, 3]))
        return [paddle.static.nn.cond(x.mean() > 0, pooled, projected)]
    return pir_program(tmp_path_factory.mktemp("branching"), build, {"x": feed})


@pytest.fixture(scope="module")
def branching(tmp_path_factory):
    # The same program saved twice with the reference for each feed: one takes each branch.
    positive, negative = np.abs(IMAGE), -np.abs(IMAGE)
    return [_branching(tmp_path_factory, feed) for feed in (positive, negative)]


@pytest.fixture(scope="module")
def carried_loop(tmp_path_factory):
    vector = RNG.standard_normal((1, 16)).astype(np.float32)

    def build(x):
        import paddle
        weight = paddle.to_tensor(RNG.standard_normal((16, 16)).astype(np.float32) * 0.3)

        def body(i, h, total):
            h = paddle.tanh(paddle.matmul(h, weight) + x)
            return i + 1, h, total + h.sum()
        _, h, total = paddle.static.nn.while_loop(
            lambda i, h, total: i < 5, body, [paddle.full([1], 0, "int64"), x * 1.0, paddle.zeros([1], "float32")])
        return [h, total]
    return pir_program(tmp_path_factory.mktemp("carried_loop"), build, {"x": vector})


def _predictor(saved, device):
    config = nb.Config()
    config.set_model_file(saved.model_path)
    if saved.params_path:
        config.set_param_file(saved.params_path)
    config.set_nnadapter_device_names([device])
    return nb.create_predictor(config)


def _run(predictor, saved):
    for name in predictor.get_input_names():
        predictor.get_input_by_name(name).from_numpy(np.asarray(saved.feeds[name]))
    with warnings.catch_warnings():
        for category in (DeviceFallbackWarning, ShapeFallbackWarning, SubgraphSplitWarning):
            warnings.simplefilter("error", category)  # no body subgraph may fall (or be split) to the host
        predictor.run()
    return [predictor.get_output(k).numpy() for k in range(len(predictor.get_output_names()))]


def _body_engines(predictor):
    return [engine for engine in predictor.engines.values() if engine.subgraph.block]


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_body_runs_its_conv_on_the_device(refining_loop, device):
    predictor = _predictor(refining_loop, device)
    placed = {b.op.type: b for b in predictor.body_placements()}
    assert placed["conv2d"].device == device and placed["relu"].device == device, placed
    for got, want in zip(_run(predictor, refining_loop), refining_loop.outputs):
        assert_model_close(got, want, what=f"refining loop on {device}")
    conv_engine = next(e for e in _body_engines(predictor) if any(op.type == "conv2d" for op in e.subgraph.ops))
    assert conv_engine.stats.runs == 3 and conv_engine.stats.host_runs == 0  # once per iteration, on the device


@pytest.mark.parametrize("device", DEVICES)
def test_both_branches_run_on_the_device(branching, device):
    for saved in branching:
        predictor = _predictor(saved, device)
        branch_ops = {b.op.type: b.device for b in predictor.body_placements()}
        assert branch_ops["conv2d"] == device and branch_ops["matmul_v2"] == device, branch_ops
        for got, want in zip(_run(predictor, saved), saved.outputs):
            assert_model_close(got, want, what=f"branch on {device}")
        ran = [e for e in _body_engines(predictor) if e.stats.runs]
        assert ran and all(e.stats.host_runs == 0 for e in ran)


@pytest.mark.parametrize("device", DEVICES)
def test_values_the_next_iteration_reads_leave_the_body_subgraph(carried_loop, device):
    predictor = _predictor(carried_loop, device)
    # Everything the body writes that the loop carries is an output of the body subgraph that computes it.
    (loop,) = [op for op in predictor.graph.ops() if op.type == "while"]
    body = predictor.partition.bodies[loop.attr("sub_block").idx]
    carried = set(loop.output("Out"))
    handed_out = {name for s in body.subgraphs for name in s.output_names}
    written = {name for s in body.subgraphs for op in s.ops for name in op.output_names()}
    assert carried & written <= handed_out, (carried & written) - handed_out
    for got, want in zip(_run(predictor, carried_loop), carried_loop.outputs):
        assert_model_close(got, want, what=f"carried loop on {device}")
