"""NNAPI's execution preference and relaxed float32 (Config.set_nnadapter_execution_preference,
set_nnadapter_relax_float32_to_float16): the context properties each driver maps them to, what the user sets
winning, the cache token changing with them, and a relaxed run on intel_openvino still close to the reference.

What the relaxed path is on this CPU comes from OpenVINO itself (its OPTIMIZATION_CAPABILITIES), not from the code
under test.
"""
from __future__ import annotations

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.errors import ConfigError
from nnadapter_bridge.predictor.config import NoEffectWarning
from nnadapter_bridge.predictor.settings import context_properties_with_preference
from support.placement_devices import placement_model, placement_reference

DEVICES = ["intel_openvino", "microsoft_onnxruntime", "builtin_device"]


def _openvino_relaxed() -> str | None:
    import openvino

    capabilities = set(openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    return "bf16" if "BF16" in capabilities else "f16" if "FP16" in capabilities else None


def _parsed(text: str) -> dict:
    return dict(entry.split("=") for entry in text.split(";") if entry)


def test_low_power_runs_every_device_on_one_thread_and_the_user_keys_win(monkeypatch):
    for key in ("INTEL_OPENVINO_INFERENCE_NUM_THREADS", "MICROSOFT_ONNXRUNTIME_NUM_THREADS",
                "BUILTIN_DEVICE_NUM_THREADS"):
        monkeypatch.delenv(key, raising=False)
    found = _parsed(context_properties_with_preference("", "low_power", False, DEVICES))
    assert found == {"INTEL_OPENVINO_INFERENCE_NUM_THREADS": "1", "MICROSOFT_ONNXRUNTIME_NUM_THREADS": "1",
                     "BUILTIN_DEVICE_NUM_THREADS": "1"}
    kept = context_properties_with_preference("BUILTIN_DEVICE_NUM_THREADS=2", "low_power", False, ["builtin_device"])
    assert kept == "BUILTIN_DEVICE_NUM_THREADS=2"
    monkeypatch.setenv("BUILTIN_DEVICE_NUM_THREADS", "3")
    assert context_properties_with_preference("", "low_power", False, ["builtin_device"]) == ""
    assert context_properties_with_preference("A=1", "", False, DEVICES) == "A=1"  # nothing asked: unchanged


def test_openvino_maps_answers_and_throughput_to_streams_and_relaxed_float_to_its_precision():
    single = _parsed(context_properties_with_preference("", "fast_single_answer", False, ["intel_openvino"]))
    assert single == {"INTEL_OPENVINO_NUM_STREAMS": "1"}
    sustained = _parsed(context_properties_with_preference("", "sustained_speed", False, ["intel_openvino"]))
    assert int(sustained["INTEL_OPENVINO_NUM_STREAMS"]) >= 1
    relaxed = _openvino_relaxed()
    if relaxed is None:
        with pytest.warns(NoEffectWarning, match="relaxed"):
            assert context_properties_with_preference("", "", True, ["intel_openvino"]) == ""
    else:
        found = _parsed(context_properties_with_preference("", "", True, ["intel_openvino"]))
        assert found == {"INTEL_OPENVINO_INFERENCE_PRECISION": relaxed}
    # The user's precision wins over the relaxed one.
    assert context_properties_with_preference("INTEL_OPENVINO_INFERENCE_PRECISION=f32", "", True,
                                              ["intel_openvino"]) == "INTEL_OPENVINO_INFERENCE_PRECISION=f32"


def test_a_relaxed_float_path_no_device_offers_is_a_no_effect_warning():
    with pytest.warns(NoEffectWarning, match="none of builtin_device, microsoft_onnxruntime"):
        assert context_properties_with_preference("", "", True, ["builtin_device", "microsoft_onnxruntime"]) == ""


def test_bad_preferences_are_config_errors():
    config = nb.Config()
    with pytest.raises(ConfigError, match="fast_single_answer"):
        config.set_nnadapter_execution_preference("fast")


def test_a_relaxed_run_on_openvino_has_its_own_token_and_stays_close(tmp_path):
    if _openvino_relaxed() is None:
        pytest.skip("this CPU computes neither bf16 nor f16 in OpenVINO: no relaxed float path to run")
    model = placement_model(tmp_path / "model")
    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    tokens, outputs = [], []
    for relax in (False, True):
        config = nb.Config()
        config.set_model_file(model)
        config.set_nnadapter_device_names(["intel_openvino"])
        config.set_nnadapter_model_cache_dir(str(tmp_path / "cache"))
        config.set_nnadapter_relax_float32_to_float16(relax)
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        outputs.append(predictor.get_output(0).numpy())
        tokens.append(predictor.cache_tokens())
        predictor.close()
    assert tokens[0] != tokens[1]
    want = placement_reference(x)
    np.testing.assert_allclose(outputs[0], want, rtol=1e-5, atol=1e-6)
    # bf16 keeps 8 significant bits (f16 11): a relative error of 2^-8 per rounding, a few roundings deep.
    np.testing.assert_allclose(outputs[1], want, rtol=2e-2, atol=1e-3)
