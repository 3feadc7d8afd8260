"""Strict mode and control flow (issues 25 and 24): no NNAdapter device runs a loop or a branch, so a while /
conditional_block runs on the host whatever the devices; its body is partitioned as block 0 is, its subgraphs on
the devices. A control-flow op on the host is not a device declining an op: strict mode (Config.set_strict)
accepts it and says so once with a ControlFlowOnHostWarning, while an op a device really declines, in block 0 or
in a body, stays an error (which mentions the control flow apart). Outside strict mode the control-flow op's reason
says the same instead of "no converter", and the body ops count in the host share only where no device takes them.

The programs: relu on the input (block 0), then a loop whose body holds convertible ops (a mean, tanh), or
kthvalue (a host kernel, no converter) and tanh; saved the Paddle 3 way, the reference from Paddle Inference.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.subgraph.plan import CONTROL_FLOW_REASON, ControlFlowOnHostWarning, HostPlacementWarning
from support.converter_harness import pir_program
from support.placement_devices import PICKY, DecliningDevice
from support.tolerances import assert_model_close

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], np.float32)


def _loop(x, step):
    import paddle

    def body(i, acc):
        return i + 1, step(acc)
    start = paddle.nn.functional.relu(x) * 0.5
    _, acc = paddle.static.nn.while_loop(lambda i, acc: i < 3, body, [paddle.full([1], 0, "int64"), start])
    return [acc]


@pytest.fixture(scope="module")
def loop_model(tmp_path_factory):
    """The body: every op converts."""
    def build(x):
        import paddle
        return _loop(x, lambda acc: paddle.tanh(acc + acc.mean(axis=-1, keepdim=True)))
    return pir_program(tmp_path_factory.mktemp("strict_loop"), build, {"x": X})


@pytest.fixture(scope="module")
def kth_loop_model(tmp_path_factory):
    """The body: kthvalue, which no device takes (no converter), then tanh."""
    def build(x):
        import paddle

        def step(acc):
            values, _ = paddle.kthvalue(acc, 2, axis=-1, keepdim=True)
            return paddle.tanh(acc + values)
        return _loop(x, step)
    return pir_program(tmp_path_factory.mktemp("strict_kth_loop"), build, {"x": X})


def _create(saved, devices, strict):
    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names(devices)
    if strict:
        config.set_strict()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = nb.create_predictor(config)
    return predictor, caught


def _run(predictor):
    predictor.get_input_by_name("x").from_numpy(X)
    predictor.run()
    return predictor.get_output(0).numpy()


def _loop_and_body(predictor):
    (loop,) = [op for op in predictor.graph.ops() if op.type == "while"]
    return loop, predictor.graph.blocks[loop.attr("sub_block").idx].ops


def test_strict_mode_accepts_control_flow_and_says_so_once(loop_model):
    predictor, caught = _create(loop_model, ["builtin_device"], strict=True)
    flow = [w for w in caught if issubclass(w.category, ControlFlowOnHostWarning)]
    assert len(flow) == 1, [str(w.message) for w in caught]
    assert not [w for w in caught if issubclass(w.category, HostPlacementWarning)]
    loop, body = _loop_and_body(predictor)
    assert str(flow[0].message) == (
        f"strict mode: {loop.label()} run on the host: no NNAdapter device runs control flow (loops and branches), "
        "so no device declined them and strict mode accepts them; the ops of their bodies run on the devices; every "
        "other op runs on builtin_device")
    assert flow[0].filename == __file__  # pointed at the create_predictor call
    host = [p for p in predictor.placements() if p.device is None]
    assert [(p.op.type, p.control_flow, p.declined, p.reason) for p in host] == [
        ("while", True, {}, CONTROL_FLOW_REASON)]
    placed = predictor.body_placements()
    assert [(b.block, b.op.index) for b in placed] == [(op.block_idx, op.index) for op in body]
    assert {b.device for b in placed} == {"builtin_device"}
    assert_model_close(_run(predictor), loop_model.outputs[0], what="strict, builtin_device")
    # The body ran as device subgraphs (the counter's and the value's: two clusters with no edge between them), once
    # per iteration each; nothing of it op by op on the host.
    engines = [e for e in predictor.engines.values() if e.subgraph.block == body[0].block_idx]
    assert {b.subgraph for b in placed} == {e.index for e in engines}
    assert [(e.stats.runs, e.stats.host_runs) for e in engines] == [(3, 0)] * len(engines)


def test_strict_mode_rejects_a_body_op_the_devices_decline(kth_loop_model):
    config = nb.Config()
    config.set_model_file(kth_loop_model.model_path)
    config.set_nnadapter_device_names(["builtin_device"])
    config.set_strict()
    with pytest.raises(nb.UnsupportedOpError) as caught:
        nb.create_predictor(config)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith("strict mode: 1 of ") and lines[0].endswith("ops cannot run on builtin_device:"), lines
    assert lines[1].startswith("  kthvalue (x1, kthvalue#") and ", block 1)): in the body of while#" in lines[1], lines
    assert lines[1].endswith("no converter for Paddle op 'kthvalue'"), lines
    assert lines[2].startswith("(while#") and lines[2].endswith(
        "also run on the host, as no NNAdapter device runs control flow: strict mode accepts those.)"), lines


def test_strict_mode_still_rejects_a_declined_op_and_tells_the_control_flow_apart(loop_model, register_device):
    register_device(DecliningDevice(PICKY))  # declines RELU
    config = nb.Config()
    config.set_model_file(loop_model.model_path)
    config.set_nnadapter_device_names([PICKY])
    config.set_strict()
    with pytest.raises(nb.UnsupportedOpError) as caught:
        nb.create_predictor(config)
    message = str(caught.value)
    lines = message.splitlines()
    assert lines[0].startswith("strict mode: 1 of ") and lines[0].endswith(f"ops cannot run on {PICKY}:"), message
    assert lines[1].startswith("  relu (x1, relu#") and f"RELU not accepted by {PICKY}" in lines[1], message
    assert "while" not in lines[1] and lines[2].startswith("(while#") and lines[2].endswith(
        "also run on the host, as no NNAdapter device runs control flow: strict mode accepts those.)")


def test_outside_strict_mode_the_reason_is_control_flow(loop_model, register_device):
    register_device(DecliningDevice(PICKY))
    predictor, caught = _create(loop_model, [PICKY], strict=False)
    shares = [str(w.message) for w in caught if issubclass(w.category, HostPlacementWarning)]
    assert len(shares) == 1, [str(w.message) for w in caught]
    assert "  while (x1, while#" in shares[0] and f"): {CONTROL_FLOW_REASON}" in shares[0], shares[0]
    assert "no converter for Paddle op 'while'" not in shares[0]
    assert not [w for w in caught if issubclass(w.category, ControlFlowOnHostWarning)]
    # The body's ops count in the total, not on the host: the device takes them.
    loop, body = _loop_and_body(predictor)
    block0 = len(predictor.placements())
    assert shares[0].startswith(f"2 of {block0 + len(body)} ops ("), shares[0]
    assert "loop and branch bodies" not in shares[0].splitlines()[0], shares[0]
    assert shares[0].endswith("Config.set_strict(True) (or --strict) makes this an error")  # relu is declined
    assert_model_close(_run(predictor), loop_model.outputs[0], what=PICKY)


def test_outside_strict_mode_a_declined_body_op_counts_on_the_host(kth_loop_model):
    predictor, caught = _create(kth_loop_model, ["builtin_device"], strict=False)
    (share,) = [str(w.message) for w in caught if issubclass(w.category, HostPlacementWarning)]
    loop, body = _loop_and_body(predictor)
    block0 = len(predictor.placements())
    assert share.startswith(f"2 of {block0 + len(body)} ops ("), share
    assert "named (1 of them in loop and branch bodies, which the devices do not take)" in share.splitlines()[0]
    assert "  kthvalue (x1, kthvalue#" in share and "in the body of while#" in share, share
    assert share.endswith("Config.set_strict(True) (or --strict) makes this an error"), share
    placed = {b.op.type: b for b in predictor.body_placements()}
    assert placed["kthvalue"].device is None and placed["tanh"].device == "builtin_device"
    assert_model_close(_run(predictor), kth_loop_model.outputs[0], what="builtin_device, kthvalue on the host")


def test_outside_strict_mode_a_loop_alone_is_not_said_to_fail_strict_mode(loop_model):
    predictor, caught = _create(loop_model, ["builtin_device"], strict=False)
    (share,) = [str(w.message) for w in caught if issubclass(w.category, HostPlacementWarning)]
    assert share.endswith("Config.set_strict(True) (or --strict) accepts control flow, with a warning, as no device "
                          "runs it"), share
