"""The subgraph engine: the documented token recipe, programs per shape, dynamic shape info, siblings on
INVALID_DIMENSIONS, and one context over several devices."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import nnadapter_bridge as nb
from hal.builtin_device.driver import BuiltinDeviceDriver
from nnadapter_bridge.errors import InvalidDimensionsError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, OperationType
from nnadapter_bridge.nnadapter.runtime import DeviceManager
from nnadapter_bridge.subgraph.cache_key import code_digest
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale


def make_predictor(model, cache_dir=None, dynamic=None, devices=None):
    config = nb.Config()
    config.set_model_file(model)
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(cache_dir)
    if dynamic is not None:
        config.set_nnadapter_dynamic_shape_info(dynamic)
    if devices is not None:
        config.set_nnadapter_device_names(devices)
    return nb.create_predictor(config)


def feed_and_check(predictor, batch):
    x = np.arange(batch * 4, dtype=np.float32).reshape(batch, 4) / 3.0 - 1.0
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x), rtol=1e-6, atol=1e-6)


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model")


def test_token_follows_the_documented_recipe(model, tmp_path):
    """Recomputes the engine's token by hand from the recipe in cache_key's docstring (the README copy)."""
    predictor = make_predictor(model, tmp_path / "cache")
    feed_and_check(predictor, 2)
    weight = np.linspace(-1.0, 1.0, 4).astype(np.float32)
    fingerprint_text = (
        b"op elementwise_add\nin X=x\nin Y=w\nout Out=t0\nattr axis=-1\n"
        b"op relu\nin X=t0\nout Out=t1\n"
        b"op scale\nin X=t1\nout Out=s0\nattr bias=0.5\nattr bias_after_scale=True\nattr scale=2.0\n"
        b"inputs x\noutputs s0\nweight w float32 [4]\n") + weight.tobytes()
    fingerprint = hashlib.sha256(fingerprint_text).hexdigest()
    text = ("builtin_device" + "x" + "2" + "4" + "\n" + "nnadapter-bridge-cache-v2\n" + "dtypes:x=float32\n"
            + "subgraph:" + fingerprint + "\n" + "properties:" + "\n" + "inputs:x=2,4" + "\n"
            + "versions:nnadapter-bridge=" + nb.__version__ + ",code=" + code_digest() + ",builtin_device=1")
    assert predictor.cache_tokens() == [hashlib.md5(text.encode()).hexdigest()]
    assert nb.wait_for_cache_writes(timeout=60)
    assert (tmp_path / "cache" / (predictor.cache_tokens()[0] + ".nnc")).is_file()


def test_each_new_shape_gets_a_program_and_old_ones_are_reused_in_build_order(model):
    predictor = make_predictor(model)
    for batch in (1, 2, 1, 2):
        feed_and_check(predictor, batch)
    (engine,) = predictor.engines.values()
    assert predictor.stats.builds == 2
    assert len(engine.programs) == 2
    assert [p.input_types[0].dims for p in engine.programs] == [(1, 4), (2, 4)]
    assert predictor.stats.subgraph_runs == 4


def test_dynamic_shape_info_lets_one_program_serve_both_shapes(model):
    predictor = make_predictor(model, dynamic={"x": [[1, 4], [2, 4]]})
    for batch in (1, 2, 1):
        feed_and_check(predictor, batch)
    (engine,) = predictor.engines.values()
    assert predictor.stats.builds == 1
    assert len(engine.programs) == 1
    compiled = engine.programs[0].input_types[0]
    assert compiled.dims == (UNKNOWN, 4)
    assert compiled.dynamic_dims == ((1, 4), (2, 4))


def test_dynamic_shape_info_token_uses_the_shapes_not_the_current_dims(model, tmp_path):
    one = make_predictor(model, tmp_path / "a", dynamic={"x": [[1, 4], [2, 4]]})
    feed_and_check(one, 1)
    two = make_predictor(model, tmp_path / "b", dynamic={"x": [[1, 4], [2, 4]]})
    feed_and_check(two, 2)
    assert one.cache_tokens() == two.cache_tokens()


def test_dynamic_shape_info_of_the_wrong_rank_is_a_config_error(model):
    with pytest.raises(nb.ConfigError, match=r"set_nnadapter_dynamic_shape_info\['x'\].*rank"):
        make_predictor(model, dynamic={"x": [[1, 4, 1], [2, 4, 1]]})


class DynamicDimsDevice(BuiltinDeviceDriver):
    """builtin_device that, like gear-shape NPUs, answers INVALID_DIMENSIONS for a shape outside an
    input's dynamic dims."""

    name = "test_dynamic_dims_device"

    def execute_program(self, program, inputs, outputs):
        for arg, compiled in zip(inputs, program.input_types):
            probe = compiled.copy()
            shape = tuple(np.asarray(arg.access(arg.memory, probe)).shape)
            if compiled.dynamic_dims and shape not in compiled.dynamic_dims:
                raise InvalidDimensionsError(f"{self.name}: shape {shape} is not one of {compiled.dynamic_dims}")
        return super().execute_program(program, inputs, outputs)


class ReluOnlyDevice(BuiltinDeviceDriver):
    """builtin_device that accepts only RELU, to force the runtime to split a model across devices."""

    name = "test_relu_only_device"

    def validate_program(self, context, model):
        return [op.type == OperationType.RELU for op in model.operations]


@pytest.fixture
def test_devices():
    manager = DeviceManager.instance()
    drivers = [DynamicDimsDevice(), ReluOnlyDevice()]
    for driver in drivers:
        manager.register(driver, replace=True)
    yield
    for driver in drivers:
        manager.unregister(driver.name)


def test_a_shape_the_device_refuses_even_after_a_rebuild_is_a_clear_error(model, test_devices):
    predictor = make_predictor(model, dynamic={"x": [[1, 4], [2, 4]]}, devices=["test_dynamic_dims_device"])
    feed_and_check(predictor, 1)
    feed_and_check(predictor, 2)
    assert predictor.stats.builds == 1
    with pytest.raises(InvalidDimensionsError, match="dynamic shape info"):
        feed_and_check(predictor, 3)
    assert predictor.stats.shape_mismatches >= 1


def test_several_devices_share_one_context_and_the_runtime_splits_the_model(model, tmp_path, test_devices):
    devices = ["test_relu_only_device", "builtin_device"]
    predictor = make_predictor(model, tmp_path / "cache", devices=devices)
    assert predictor.context.device_names == devices
    assert len(predictor.engines) == 1  # each op is supported by one of the devices
    feed_and_check(predictor, 2)
    (engine,) = predictor.engines.values()
    assert engine.programs[0].compilation.device_names == ["builtin_device", "test_relu_only_device",
                                                           "builtin_device"]
    again = make_predictor(model, tmp_path / "cache", devices=devices)
    feed_and_check(again, 2)
    assert (again.stats.builds, again.stats.cache_hits_file) == (0, 1)
    single = make_predictor(model, tmp_path / "cache")
    feed_and_check(single, 2)
    assert single.cache_tokens() != predictor.cache_tokens()


def test_weights_are_hashed_once_per_engine_not_per_run(model, monkeypatch):
    import nnadapter_bridge.subgraph.cache_key as cache_key_module

    calls = []
    original = cache_key_module.subgraph_fingerprint
    monkeypatch.setattr(cache_key_module, "subgraph_fingerprint", lambda *a: calls.append(a) or original(*a))
    predictor = make_predictor(model)
    for batch in (1, 2, 3):
        feed_and_check(predictor, batch)
    assert predictor.stats.builds == 3
    assert len(calls) == 1


def test_shapes_that_read_alike_get_distinct_tokens_and_never_share_a_program(tmp_path):
    """Paddle Lite's string runs dims together: x:[1, 11, 4] and x:[11, 1, 4] both read "x1114". Our token
    keeps them apart, so a program compiled for one is never restored for the other."""
    model = add_relu_scale_model(tmp_path / "model", feed_shape=(-1, -1, 4))
    predictor = make_predictor(model, cache_dir=str(tmp_path / "cache"))
    tokens = []
    for shape in ((1, 11, 4), (11, 1, 4)):
        x = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x), rtol=1e-6)
        tokens.append(predictor.cache_tokens()[-1])
    assert tokens[0] != tokens[1]
    assert predictor.stats.cache_hits_file == 0 and predictor.stats.builds == 2
