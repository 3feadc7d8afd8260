"""Drivers decide with what they need, and a decision the concrete program contradicts splits the subgraph.

Support is decided per op on the declared dims (-1 unknown), but every program is compiled for concrete input
shapes. So a driver declines an operation only for a reason that holds at run time (a SAME-padded conv or pool
needs its spatial dims, never the batch; a resize by scales needs nothing of its input's size; an EXPAND to a
run-time shape takes its -1s at run time), and an op declined only for a dim the declaration leaves unknown is
decided as if that dim were concrete. Where the concrete program then has an operation the device declines,
the engine names that op, the operation and the reason, runs it on the host and the rest of the subgraph on the
device (engine.SplitPlan), never the whole subgraph on the host.

Models are small PIR programs built with paddle; outputs are compared with Paddle Inference.
"""
from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from hal.builtin_device.driver import BuiltinDeviceDriver
from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import OperationType, ResultCode
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning
from nnadapter_bridge.nnadapter.operations.common import known
from nnadapter_bridge.nnadapter.runtime import DeviceManager
from nnadapter_bridge.subgraph.engine import SubgraphEngine, SubgraphSplitWarning
from support.converter_harness import paddle_inference_run, paddle_pir_static
from support.tolerances import assert_model_close


def _save(directory, build, declared: list) -> tuple:
    """A PIR `.json` model of `build(x)` with x (float32) declared `declared`; (model path, params path or None)."""
    with paddle_pir_static() as paddle:
        paddle.seed(11)
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", shape=declared, dtype="float32")
            out = build(paddle, x)
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(str(directory), "model")
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "no variable in your model": a model without weights
                paddle.static.save_inference_model(prefix, [x], [out], exe, program=main)
    params = prefix + ".pdiparams"
    return prefix + ".json", params if os.path.exists(params) else None


def _predictor(model: tuple, device: str, strict: bool = False, cache_dir=None):
    config = nb.Config()
    config.set_model_file(model[0])
    if model[1]:
        config.set_param_file(model[1])
    config.set_nnadapter_device_names([device])
    if strict:
        config.set_strict()
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    return nb.create_predictor(config)


def _host_ops(predictor) -> list:
    return [op.type for op in predictor.host_ops if op.type not in ("feed", "fetch")]


def _run_and_compare(predictor, model: tuple, shape: list, seed: int = 0) -> list:
    """Run `predictor` on a random x of `shape` and compare with Paddle Inference; the warnings raised."""
    x = np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor.get_input_by_name("x").from_numpy(x)
        predictor.run()
        got = predictor.get_output(0).numpy()
    (want,) = paddle_inference_run(model[0], model[1], {"x": x})
    assert got.shape == want.shape
    assert_model_close(got, want, what=f"output for x of shape {shape}")
    return [w for w in caught if issubclass(w.category, Warning) and "paddle" not in w.filename]


def _same_convolutions(paddle, x):
    """SAME everywhere: a strided conv, a depthwise conv whose dilation SAME resets to 1 (Paddle's rule), a max
    pool and an exclusive average pool."""
    w = paddle.static.create_parameter([8, 3, 3, 3], "float32")
    y = paddle.nn.functional.conv2d(x, w, stride=2, padding="SAME")
    depthwise = paddle.static.create_parameter([8, 1, 3, 3], "float32")
    y = paddle.nn.functional.conv2d(y, depthwise, padding="SAME", dilation=2, groups=8)
    y = paddle.nn.functional.max_pool2d(y, 3, stride=2, padding="SAME")
    return paddle.nn.functional.avg_pool2d(y, 3, stride=1, padding="SAME", exclusive=True)


def _nearest_by_scale(paddle, x):
    return paddle.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest")


def _bilinear_by_scale(paddle, x):
    return paddle.nn.functional.interpolate(x, scale_factor=1.7, mode="bilinear", align_corners=False)


def _expand_from_shape(paddle, x):
    rows = paddle.mean(x, axis=1, keepdim=True)
    return paddle.expand(rows, [paddle.shape(x)[0], 3, -1, -1]) * x


def _expand_as(paddle, x):
    return paddle.expand_as(paddle.mean(x, axis=[1, 2], keepdim=True), x) - x


def _pool_in_the_middle(paddle, x):
    """conv -> 2x2 max pool (stride 2, padding 1, ceil_mode) -> conv -> relu: on an odd size Paddle's last window
    starts in the end padding, which ONNX's MaxPool drops, so onnxruntime runs the pool only on even sizes, which
    declared [-1, 3, -1, -1] dims cannot tell."""
    w = paddle.static.create_parameter([4, 3, 3, 3], "float32")
    y = paddle.nn.functional.conv2d(x, w, padding=1)
    y = paddle.nn.functional.max_pool2d(y, 2, stride=2, padding=1, ceil_mode=True)
    w2 = paddle.static.create_parameter([5, 4, 1, 1], "float32")
    return paddle.nn.functional.relu(paddle.nn.functional.conv2d(y, w2))


_CASES = {
    # name: (build, declared dims, device, shapes fed)
    "same_conv_pool_dynamic_batch": (_same_convolutions, [-1, 3, 17, 17], "microsoft_onnxruntime",
                                     [[1, 3, 17, 17], [2, 3, 17, 17]]),
    "same_conv_pool_dynamic_spatial": (_same_convolutions, [-1, 3, -1, -1], "microsoft_onnxruntime",
                                       [[2, 3, 17, 19], [1, 3, 8, 6]]),
    "nearest_by_scale": (_nearest_by_scale, [-1, 3, -1, -1], "microsoft_onnxruntime", [[1, 3, 7, 5]]),
    "bilinear_by_scale": (_bilinear_by_scale, [-1, 3, -1, -1], "microsoft_onnxruntime", [[1, 3, 7, 5]]),
    "expand_from_shape": (_expand_from_shape, [-1, 3, 8, 8], "intel_openvino", [[2, 3, 8, 8]]),
    "expand_from_shape_dynamic": (_expand_from_shape, [-1, 3, -1, -1], "intel_openvino", [[2, 3, 8, 6]]),
    "expand_as": (_expand_as, [-1, 3, -1, -1], "intel_openvino", [[2, 3, 5, 4]]),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            build, declared = (_CASES[name][:2] if name in _CASES else (_pool_in_the_middle, [-1, 3, -1, -1]))
            made[name] = _save(tmp_path_factory.mktemp(name), build, declared)
        return made[name]

    return get


@pytest.mark.parametrize("name", sorted(_CASES))
def test_the_whole_model_stays_on_the_device(models, name):
    _, _, device, shapes = _CASES[name]
    model = models(name)
    predictor = _predictor(model, device)
    assert _host_ops(predictor) == [], predictor.unsupported_reasons()
    assert len(predictor.partition.subgraphs) == 1
    for k, shape in enumerate(shapes):
        assert _run_and_compare(predictor, model, shape, seed=k) == []
    assert predictor.stats.subgraph_host_runs == 0


def test_a_declined_operation_in_the_middle_splits_the_subgraph_around_it(models):
    model = models("pool_in_the_middle")
    predictor = _predictor(model, "microsoft_onnxruntime")
    # Decided on [-1, 3, -1, -1]: the pool would run once the size is known.
    assert _host_ops(predictor) == []
    (subgraph,) = predictor.partition.subgraphs
    pool = next(op for op in subgraph.ops if op.type == "pool2d")
    engine = predictor.engines[subgraph.index]

    assert _run_and_compare(predictor, model, [1, 3, 10, 10]) == []  # an even size: one program
    assert not engine.pool.splits

    caught = _run_and_compare(predictor, model, [1, 3, 9, 9], seed=1)
    (warning,) = [w for w in caught if w.category is SubgraphSplitWarning]
    text = str(warning.message)
    assert pool.label() in text and "MAX_POOL_2D" in text
    assert "the last ceil_mode window starts in the end padding" in text
    assert "the other 3 ops on microsoft_onnxruntime as 2 subgraph(s)" in text
    (plan,) = engine.pool.splits.values()
    assert set(plan.declined) == {pool.index}
    assert [op.type for op in plan.partition.host_ops] == ["pool2d"]
    assert [[op.type for op in child.ops] for child in plan.partition.subgraphs] == [["conv2d"], ["conv2d", "relu"]]

    # The same shapes again: the split runs, no new warning, no new build.
    builds = predictor.stats.builds
    caught = _run_and_compare(predictor, model, [1, 3, 9, 9], seed=2)
    assert not [w for w in caught if w.category is SubgraphSplitWarning]
    assert predictor.stats.builds == builds


def test_a_split_is_remembered_in_the_model_cache(models, tmp_path, monkeypatch):
    """The split's device programs are cached like any subgraph's, and the split itself (`<token>.split.json`): a
    warm start neither compiles nor asks the devices again, and still says what runs where."""
    model = models("pool_in_the_middle")
    cold = _predictor(model, "microsoft_onnxruntime", cache_dir=tmp_path)
    _run_and_compare(cold, model, [1, 3, 9, 9])
    assert cold.stats.builds == 2  # the two device parts of the split
    cold.close()
    (record,) = [name for name in os.listdir(tmp_path) if name.endswith(".split.json")]

    def asked_again(*_args):
        raise AssertionError("a remembered split must not be worked out again")

    with monkeypatch.context() as patch:
        patch.setattr(SubgraphEngine, "_split_plan", asked_again)
        warm = _predictor(model, "microsoft_onnxruntime", cache_dir=tmp_path)
        caught = _run_and_compare(warm, model, [1, 3, 9, 9], seed=1)
    assert len([w for w in caught if w.category is SubgraphSplitWarning]) == 1  # said again on each start
    assert (warm.stats.builds, warm.stats.cache_hits_file) == (0, 2)
    warm.close()

    # A damaged record is one warning naming what is wrong, and the split is worked out again (and the record
    # rewritten): a record of another shape, bytes that are not JSON (bad UTF-8, truncated), nesting past orjson's
    # depth limit (never a RecursionError).
    damaged = {b'{"format": "nnadapter-bridge-split-v1", "declined": {"999": ["?"]}}': "not a nnadapter-bridge-split",
               b'{"format": "\xff"}': "not valid JSON", b'{"format": ': "not valid JSON",
               b"[" * 5000 + b"]" * 5000: "1024 levels deep"}
    for seed, (content, why) in enumerate(damaged.items(), start=2):
        with open(tmp_path / record, "wb") as f:
            f.write(content)
        again = _predictor(model, "microsoft_onnxruntime", cache_dir=tmp_path)
        caught = _run_and_compare(again, model, [1, 3, 9, 9], seed=seed)
        unusable = [str(w.message) for w in caught
                    if w.category is NncCacheWarning and "split record" in str(w.message)]
        assert len(unusable) == 1 and why in unusable[0], (content[:40], unusable)
        assert len([w for w in caught if w.category is SubgraphSplitWarning]) == 1
        again.close()
        with open(tmp_path / record) as f:
            rewritten = json.load(f)
        assert list(rewritten["declined"]) != ["999"]


def test_strict_mode_names_the_declined_operation(models):
    model = models("pool_in_the_middle")
    predictor = _predictor(model, "microsoft_onnxruntime", strict=True)
    predictor.get_input_by_name("x").from_numpy(np.zeros([1, 3, 9, 9], np.float32))
    with pytest.raises(
        NNAdapterError, match=r"pool2d#\d+ .*MAX_POOL_2D#\d+: .*starts in the end padding"
    ):
        predictor.run()


def test_a_decline_the_declared_dims_already_show_keeps_the_op_off_the_device_with_the_drivers_reason(tmp_path):
    model = _save(tmp_path, _pool_in_the_middle, [-1, 3, 9, 9])
    predictor = _predictor(model, "microsoft_onnxruntime")
    assert _host_ops(predictor) == ["pool2d"]
    reason = predictor.unsupported_reasons()["pool2d"]
    assert "not accepted by microsoft_onnxruntime" in reason
    assert "the last ceil_mode window starts in the end padding" in reason
    assert _run_and_compare(predictor, model, [2, 3, 9, 9]) == []


# -- the split with any driver ----------------------------------------------------------------------------------
class OddSoftmaxDevice(BuiltinDeviceDriver):
    """builtin_device under another name that declines SOFTMAX over a last axis known to be odd (a check that needs
    the concrete dim: an unknown one is accepted), has no unsupported_reasons hook, and refuses to compile what it
    declines, as a vendor driver would."""

    name = "odd_softmax_device"
    vendor = "tests"

    @staticmethod
    def _declines(op) -> bool:
        last = op.inputs[0].type.dims[-1]
        return op.type == OperationType.SOFTMAX and known(last) and last % 2 == 1

    def validate_program(self, context, model):
        return [ok and not self._declines(op) for op, ok in zip(model.operations,
                                                               super().validate_program(context, model))]

    def create_program(self, context, model, cache):
        if model is not None and any(self._declines(op) for op in model.operations):
            raise NNAdapterError("odd_softmax_device cannot run SOFTMAX over an odd axis",
                                 ResultCode.FEATURE_NOT_SUPPORTED)
        return super().create_program(context, model, cache)


def _relu_softmax_scale(paddle, x):
    return paddle.scale(paddle.nn.functional.softmax(paddle.nn.functional.relu(x) * 2.0, axis=-1), 3.0, 1.0)


@pytest.fixture
def odd_softmax_device():
    manager = DeviceManager.instance()
    manager.register(OddSoftmaxDevice(), replace=True)
    yield OddSoftmaxDevice.name
    manager.unregister(OddSoftmaxDevice.name)


def test_any_driver_gets_its_declined_operation_split_off(tmp_path, odd_softmax_device):
    model = _save(tmp_path, _relu_softmax_scale, [-1, -1])
    predictor = _predictor(model, odd_softmax_device)
    assert _host_ops(predictor) == []
    (subgraph,) = predictor.partition.subgraphs
    softmax = next(op for op in subgraph.ops if op.type == "softmax")

    assert _run_and_compare(predictor, model, [3, 4]) == []
    caught = _run_and_compare(predictor, model, [3, 5], seed=1)
    (warning,) = [w for w in caught if w.category is SubgraphSplitWarning]
    text = str(warning.message)
    assert f"{softmax.label()} (SOFTMAX#" in text and "declined (its validate_program gives no reason)" in text
    (plan,) = predictor.engines[subgraph.index].pool.splits.values()
    assert [op.type for op in plan.partition.host_ops] == ["softmax"]
    before, after = plan.partition.subgraphs
    assert "softmax" not in [op.type for op in before.ops + after.ops]


def test_a_split_hands_its_child_programs_outputs_to_the_run_and_keeps_none(tmp_path, odd_softmax_device):
    """The output of a split subgraph comes from its last child program (the scale after the declined softmax): the
    run's own array, handed out by numpy() as it is, while no child engine holds a device output after the run."""
    model = _save(tmp_path, _relu_softmax_scale, [-1, -1])
    predictor = _predictor(model, odd_softmax_device)
    assert _run_and_compare(predictor, model, [3, 5], seed=1)  # split (the warning the test above reads)
    x = np.random.default_rng(3).uniform(-1, 1, size=(3, 5)).astype(np.float32)
    predictor.get_input_by_name("x").from_numpy(x)
    predictor.run()
    (engine,) = predictor.engines.values()
    children = [step for steps in engine._split_steps.values() for step in steps if hasattr(step, "device_outputs")]
    assert len(children) == 2 and all(child.device_outputs == () for child in children)
    assert engine.device_outputs == ()  # taken by the predictor's run
    first = predictor.get_output(0).numpy()
    assert predictor.get_output(0).numpy() is first
    (want,) = paddle_inference_run(model[0], model[1], {"x": x})
    assert_model_close(first, want, what="split subgraph's output")
    predictor.get_input_by_name("x").from_numpy(-x)
    predictor.run()
    assert_model_close(first, want, what="the array handed out before the next run")


def test_a_next_listed_device_takes_the_declined_operation_without_a_split(tmp_path, odd_softmax_device):
    model = _save(tmp_path, _relu_softmax_scale, [-1, -1])
    config = nb.Config()
    config.set_model_file(model[0])
    config.set_nnadapter_device_names([odd_softmax_device, "builtin_device"])
    predictor = nb.create_predictor(config)
    assert _run_and_compare(predictor, model, [3, 5]) == []
    assert not any(engine.pool.splits for engine in predictor.engines.values())


def _kernels_chosen_by_the_data(paddle, x):
    """SOLOv2's dynamic convolution: the filters are rows of a weight picked by a nonzero on the data, so their
    count (the output channels) is known only at run time."""
    weight = paddle.static.create_parameter([6, 3, 1, 1], "float32")
    picked = paddle.nonzero(paddle.mean(x, axis=[0, 2, 3]) > -10.0).flatten()
    return paddle.nn.functional.conv2d(x, paddle.gather(weight, picked))


def test_a_convolution_whose_filter_count_is_known_only_at_run_time_says_why_it_stays_on_the_host(tmp_path):
    model = _save(tmp_path, _kernels_chosen_by_the_data, [1, 3, 4, 4])
    predictor = _predictor(model, "builtin_device")
    assert "conv2d" in _host_ops(predictor)
    reason = predictor.unsupported_reasons()["conv2d"]
    assert "output channels are known only at run time" in reason and "ValueError" not in reason
    assert _run_and_compare(predictor, model, [1, 3, 4, 4]) == []
