"""The configuration resolved once (issue 27): create_predictor turns a Config into frozen PredictorSettings
(nnadapter_bridge.predictor.settings), which the predictor, the partition plan and the engines read. Config
records what was set and loads no driver; what needs the drivers or the environment is decided once, there."""
from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.errors import ConfigError
from nnadapter_bridge.nnadapter.runtime import DeviceManager
from nnadapter_bridge.predictor.settings import PredictorSettings, resolve_settings
from nnadapter_bridge.predictor.tensor import Place, PrecisionType, TargetType
from nnadapter_bridge.subgraph.engine import SubgraphEngine
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THREAD_KEYS = ("BUILTIN_DEVICE_NUM_THREADS", "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
               "MICROSOFT_ONNXRUNTIME_NUM_THREADS")


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "m")


def _config(model) -> nb.Config:
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(["builtin_device"])
    return config


def test_config_loads_no_driver():
    """Every setter and getter of Config, set_threads and the valid places included, runs without the NNAdapter
    runtime: a fresh process that uses them has not imported it (nor a driver)."""
    script = (
        "import sys\n"
        "import nnadapter_bridge as nb\n"
        "from nnadapter_bridge.predictor.tensor import Place, TargetType\n"
        "c = nb.Config()\n"
        "c.set_model_file('m.pdmodel'); c.set_nnadapter_device_names(['builtin_device', 'intel_openvino'])\n"
        "c.set_threads(3); c.set_nnadapter_context_properties('A=1')\n"
        "c.set_valid_places([Place(TargetType.NNAdapter), Place(TargetType.X86)])\n"
        "c.set_nnadapter_dynamic_shape_info({'x': [[1, 4], [2, 4]]}); c.set_nnadapter_model_cache_key('k')\n"
        "c.nnadapter_device_names(); c.nnadapter_enabled(); c.threads(); c.model_source(); repr(c)\n"
        "loaded = [m for m in sys.modules if m.startswith(('nnadapter_bridge.nnadapter.runtime', 'hal'))]\n"
        "print(loaded)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_create_predictor_asks_the_drivers_from_the_settings_not_from_config(model, monkeypatch):
    """The drivers (DeviceManager) are asked about thread-count keys while the settings resolve; no Config method
    is on the stack when they are."""
    asked_from = []
    original = DeviceManager.instance.__func__

    def instance(cls):
        asked_from.extend(frame.f_globals.get("__name__") for frame, *_ in inspect.stack(0))
        return original(cls)

    monkeypatch.setattr(DeviceManager, "instance", classmethod(instance))
    config = _config(model)
    config.set_threads(2)
    nb.create_predictor(config).close()
    assert "nnadapter_bridge.predictor.settings" in asked_from
    assert "nnadapter_bridge.predictor.config" not in asked_from


def test_the_settings_are_resolved_once_and_frozen(model, monkeypatch):
    for key in THREAD_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NNADAPTER_BRIDGE_CACHE_KEY", "from-the-environment")
    config = _config(model)
    config.set_nnadapter_context_properties("SOME_KEY=1")
    config.set_threads(3)
    config.set_nnadapter_dynamic_shape_info({"x": [[1, 4], [2, 4]]})
    settings = resolve_settings(config)
    assert settings.device_names == ("builtin_device",)
    # set_threads fills the device's own thread-count key, after what the user set.
    assert settings.context_properties == "SOME_KEY=1;BUILTIN_DEVICE_NUM_THREADS=3;"
    assert settings.user_context_properties == "SOME_KEY=1"
    assert settings.host_threads == 3
    assert settings.cache_key == b"from-the-environment"
    assert dict(settings.dynamic_shape_info) == {"x": ((1, 4), (2, 4))}
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.strict = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.dynamic_shape_info["y"] = ((1,),)  # type: ignore[index]
    # Later changes to the Config or the environment do not reach settings already resolved.
    config.set_threads(5)
    monkeypatch.delenv("NNADAPTER_BRIDGE_CACHE_KEY")
    assert settings.host_threads == 3 and settings.cache_key == b"from-the-environment"
    # Config's own answer (a compatibility method) agrees with the resolution.
    assert config.effective_context_properties() == "SOME_KEY=1;BUILTIN_DEVICE_NUM_THREADS=5;"


def test_the_environment_and_the_string_win_over_set_threads(model, monkeypatch):
    monkeypatch.setenv("BUILTIN_DEVICE_NUM_THREADS", "2")
    config = _config(model)
    config.set_threads(4)
    assert resolve_settings(config).context_properties == ""
    monkeypatch.delenv("BUILTIN_DEVICE_NUM_THREADS")
    config.set_nnadapter_context_properties("BUILTIN_DEVICE_NUM_THREADS=1")
    assert resolve_settings(config).context_properties == "BUILTIN_DEVICE_NUM_THREADS=1"


def test_without_set_threads_nothing_is_added(model, monkeypatch):
    for key in THREAD_KEYS:
        monkeypatch.delenv(key, raising=False)
    settings = resolve_settings(_config(model))
    assert settings.context_properties == "" and settings.host_threads == 0


def test_a_predictor_reads_its_settings(model, tmp_path, monkeypatch):
    for key in THREAD_KEYS:
        monkeypatch.delenv(key, raising=False)
    config = _config(model)
    config.set_nnadapter_model_cache_dir(str(tmp_path / "cache"))
    config.set_threads(2)
    predictor = nb.create_predictor(config)
    try:
        assert isinstance(predictor.settings, PredictorSettings)
        assert predictor.settings.cache_dir == str(tmp_path / "cache")
        assert predictor.settings.context_properties == "BUILTIN_DEVICE_NUM_THREADS=2;"
        assert predictor.context.device_contexts[0].num_threads == 2  # what the driver was given
        engine = next(iter(predictor.engines.values()))
        assert engine.settings is predictor.settings
        x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x), rtol=1e-6)
        clone = predictor.clone()
        assert clone.settings is predictor.settings
        clone.close()
    finally:
        predictor.close()


def test_the_engine_takes_a_subgraph_its_settings_and_its_pool():
    parameters = list(inspect.signature(SubgraphEngine.__init__).parameters)
    assert parameters[:4] == ["self", "subgraph", "settings", "pool"]
    assert len(parameters) <= 7  # and the predictor's callbacks and a split child's name, by keyword


def test_errors_about_the_value_stay_at_the_setter_and_the_rest_at_create_predictor(model, tmp_path):
    config = _config(model)
    with pytest.raises(ConfigError, match="set_threads"):
        config.set_threads(0)
    config.set_nnadapter_mixed_precision_quantization_config_path(str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="does not exist"):
        nb.create_predictor(config)
    strict = _config(model)
    strict.set_strict()
    strict.set_valid_places([Place(TargetType.X86, PrecisionType.FP32)])
    with pytest.raises(ConfigError, match="no TargetType.NNAdapter place"):
        nb.create_predictor(strict)
    with pytest.raises(ConfigError, match="expected a nnadapter_bridge.Config"):
        nb.create_predictor("model.pdmodel")
