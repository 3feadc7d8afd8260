"""No silent cliff (issue 24 item 6): when more than a trivial part of a model runs on the host although a device
was named, create_predictor says so once with a HostPlacementWarning naming the ops by type and the reason each
was declined; strict mode makes it an error listing the same; a subgraph that falls to the host at run time gets
the warning after that run; Predictor.placements() says per op which device took it and why the others declined.

The declining device is builtin_device under another name refusing RELU (support.placement_devices)."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.subgraph.plan import HOST_SHARE_LIMIT, HostPlacementWarning, host_share, op_flops
from support.partition_programs import chain_ops, real_program
from support.placement_devices import (
    PICKY,
    ConcreteDecliningDevice,
    DecliningDevice,
    FailingCompileDevice,
    FailingRunDevice,
    placement_model,
    placement_reference,
)

X = np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4)


def _config(model, devices, partition_config=None, strict=False):
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(devices)
    if partition_config:
        config.set_nnadapter_subgraph_partition_config_buffer(partition_config)
    if strict:
        config.set_strict()
    return config


def _create(config):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = nb.create_predictor(config)
    return predictor, [w for w in caught if issubclass(w.category, HostPlacementWarning)]


def test_declined_and_forced_ops_are_named_once_with_their_reasons(tmp_path, register_device):
    register_device(DecliningDevice(PICKY))
    predictor, caught = _create(_config(placement_model(tmp_path / "m"), [PICKY], partition_config="scale\n"))
    assert len(caught) == 1
    message = str(caught[0].message)
    # relu is declined by the device (1 of 5 ops, 20%); scale is forced and listed, but not counted.
    assert message.startswith(f"1 of 5 ops (20.0%) run on the host although {PICKY} was named")
    assert "1 more is kept there by the partition config" in message
    assert f"relu (x1, relu#2 (out: t1)): RELU not accepted by {PICKY}" in message
    assert "scale (x1, scale#3 (out: s0)): forced to the host by the partition config" in message
    assert "sigmoid" not in message and "tanh" not in message
    # Running adds no second warning, and the answer is right.
    predictor.get_input(0).from_numpy(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor.run()
    assert not [w for w in caught if issubclass(w.category, HostPlacementWarning)]
    np.testing.assert_allclose(predictor.get_output(0).numpy(), placement_reference(X), rtol=1e-6, atol=1e-6)


def test_strict_mode_raises_listing_the_same(tmp_path, register_device):
    register_device(DecliningDevice(PICKY))
    config = _config(placement_model(tmp_path / "m"), [PICKY], partition_config="scale\n", strict=True)
    with pytest.raises(nb.UnsupportedOpError) as info:
        nb.create_predictor(config)
    message = str(info.value)
    assert message.startswith(f"strict mode: 1 of 5 ops cannot run on {PICKY}:")
    assert f"relu (x1, relu#2 (out: t1)): RELU not accepted by {PICKY}" in message
    assert "scale" not in message  # forced there by the user: not an error


def test_only_forced_ops_on_the_host_warn_nothing(tmp_path):
    _, caught = _create(_config(placement_model(tmp_path / "m"), ["builtin_device"], partition_config="scale\n"))
    assert caught == []


def test_placements_name_the_device_taking_each_op_and_why_the_others_decline(tmp_path, register_device):
    register_device(DecliningDevice(PICKY))
    predictor, caught = _create(_config(placement_model(tmp_path / "m"), [PICKY, "builtin_device"]))
    assert caught == []  # builtin_device takes what picky_device declines: nothing on the host
    placed = {p.op.type: p for p in predictor.placements()}
    assert [p.op.type for p in predictor.placements()] == ["elementwise_add", "relu", "scale", "sigmoid", "tanh"]
    assert placed["relu"].device == "builtin_device" and placed["relu"].subgraph == 0
    assert placed["relu"].declined == {PICKY: "does not accept RELU"}
    for op_type in ("elementwise_add", "scale", "sigmoid", "tanh"):
        assert placed[op_type].device == PICKY and placed[op_type].declined == {}
    assert placed["relu"].as_dict()["declined"] == {PICKY: "does not accept RELU"}
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), placement_reference(X), rtol=1e-6, atol=1e-6)


def test_a_subgraph_that_fails_to_compile_is_named_after_the_run(tmp_path, register_device):
    register_device(FailingCompileDevice("crashing_device"))
    predictor, caught = _create(_config(placement_model(tmp_path / "m"), ["crashing_device"]))
    assert caught == []
    predictor.get_input(0).from_numpy(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor.run()
        predictor.run()
    placement = [w for w in caught if issubclass(w.category, HostPlacementWarning)]
    assert len(placement) == 1
    message = str(placement[0].message)
    assert "5 of 5 ops (100.0%) run on the host although crashing_device was named" in message
    assert "(5 moved there at run time" in message and "crashing_device failed to compile or run it" in message
    assert all(p.device is None and p.at_run for p in predictor.placements())
    np.testing.assert_allclose(predictor.get_output(0).numpy(), placement_reference(X), rtol=1e-6, atol=1e-6)


def test_a_subgraph_whose_runs_fail_for_some_shapes_is_named_after_the_run(tmp_path, register_device):
    register_device(FailingRunDevice("faulting_device"))
    predictor, caught = _create(_config(placement_model(tmp_path / "m"), ["faulting_device"]))
    assert caught == []
    predictor.get_input(0).from_numpy(X)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        predictor.run()
    reasons = {p.reason for p in predictor.placements()}
    assert reasons == {"subgraph 0 moved to the host at run time: faulting_device failed to run it for the input "
                       "shapes given (the DeviceFallbackWarning gives the error)"}, reasons
    np.testing.assert_allclose(predictor.get_output(0).numpy(), placement_reference(X), rtol=1e-6, atol=1e-6)


def test_an_op_split_off_at_compile_time_is_named_with_the_devices_reason(tmp_path, register_device):
    register_device(ConcreteDecliningDevice("concrete_device"))
    predictor, caught = _create(_config(placement_model(tmp_path / "m"), ["concrete_device"]))
    assert caught == []  # with the declared [-1, 4] the device takes every op
    predictor.get_input(0).from_numpy(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor.run()
    placement = [w for w in caught if issubclass(w.category, HostPlacementWarning)]
    assert len(placement) == 1
    message = str(placement[0].message)
    assert message.startswith("1 of 5 ops (20.0%) run on the host although concrete_device was named (1 moved")
    assert "relu (x1, relu#2 (out: t1)): declined once subgraph 0 was compiled for the actual input shapes" in message
    relu = next(p for p in predictor.placements() if p.op.type == "relu")
    assert relu.device is None and relu.at_run and "RELU" in relu.reason
    assert all(p.device == "concrete_device" for p in predictor.placements() if p.op.type != "relu")
    np.testing.assert_allclose(predictor.get_output(0).numpy(), placement_reference(X), rtol=1e-6, atol=1e-6)


def test_strict_mode_keeps_a_compile_failure_an_error(tmp_path, register_device):
    register_device(FailingCompileDevice("crashing_device"))
    predictor = nb.create_predictor(_config(placement_model(tmp_path / "m"), ["crashing_device"], strict=True))
    predictor.get_input(0).from_numpy(X)
    with pytest.raises(nb.NNAdapterError, match="simulated compiler crash"):
        predictor.run()


# -- the share: ops and FLOPs -------------------------------------------------------------------------------
def _conv_program(host_index):
    """feed, then 40 ops: conv2d every 10th (a big one), relu otherwise; `host_index` is left on the host."""
    specs = [("feed", ["feed"], ["v0"])]
    for i in range(40):
        if i % 10 == 0:
            specs.append(("conv2d", {"Input": [f"v{i}"], "Filter": ["w"]}, {"Output": [f"v{i + 1}"]}))
        else:
            specs.append(("relu", [f"v{i}"], [f"v{i + 1}"]))
    specs.append(("fetch", ["v40"], ["fetch"]))
    params = {"w": np.zeros((8, 8, 3, 3), np.float32)}
    program = real_program(chain_ops(specs), params)
    for block in program.blocks:  # declared [-1, 8, 16, 16] activations: the batch unknown
        for name, var in list(block.vars.items()):
            if name.startswith("v"):
                block.vars[name] = dataclasses.replace(var, shape=(-1, 8, 16, 16))
    return program, host_index


def _placements_for(program, host_indices):
    from nnadapter_bridge.subgraph.plan import OpPlacement

    return [OpPlacement(op, None if op.index in host_indices else 0, None if op.index in host_indices else "d",
                        "why" if op.index in host_indices else "", False, {})
            for op in program.ops() if op.type not in ("feed", "fetch")]


def test_flops_of_a_convolution_from_its_declared_shapes():
    program, _ = _conv_program(None)
    conv = next(op for op in program.ops() if op.type == "conv2d")
    # 16x16 output positions x batch 1 (unknown counts as 1) x 8*8*3*3 weights, 2 FLOPs per multiply-add
    assert op_flops(program, conv) == 2 * 16 * 16 * 8 * 8 * 3 * 3
    assert op_flops(program, next(op for op in program.ops() if op.type == "relu")) is None


def test_one_convolution_on_the_host_crosses_the_limit_by_flops_not_by_ops():
    program, _ = _conv_program(None)
    conv = next(op for op in program.ops() if op.type == "conv2d")
    share = host_share(program, _placements_for(program, {conv.index}))
    assert share.op_share == 1 / 40 < HOST_SHARE_LIMIT
    assert share.flop_share == pytest.approx(0.25) and share.over_limit
    relu = next(op for op in program.ops() if op.type == "relu")
    share = host_share(program, _placements_for(program, {relu.index}))
    assert share.flop_share == 0 and not share.over_limit


def test_flops_of_a_fused_rnn_count_every_weight_matrix_at_every_step():
    weights = {"w_ih": np.zeros((96, 32), np.float32), "w_hh": np.zeros((96, 24), np.float32),
               "b": np.zeros((96,), np.float32)}
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("rnn", {"Input": ["x"], "WeightList": ["w_ih", "w_hh", "b"]}, {"Out": ["y"]}),
        ("fetch", ["y"], ["fetch"]),
    ]), weights)
    block = program.blocks[0]
    block.vars["x"] = dataclasses.replace(block.vars["x"], shape=(16, -1, 32))  # time-major, batch unknown
    rnn = program.ops()[1]
    # 16 steps x batch 1 x (96*32 + 96*24) weights, 2 FLOPs per multiply-add; the bias is not a product
    assert op_flops(program, rnn) == 2 * 16 * (96 * 32 + 96 * 24)
    block.vars["x"] = dataclasses.replace(block.vars["x"], shape=(-1, -1, 32))
    assert op_flops(program, rnn) is None  # the number of steps is unknown
