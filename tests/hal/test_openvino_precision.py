"""INTEL_OPENVINO_INFERENCE_PRECISION: f32 (the default), bf16 or f16, as a context property or from the
environment; another value is a PropertiesError, a precision the device lacks an INVALID_PARAMETER error; the
value is part of the cache token (another precision compiles another program)."""
from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("openvino")

import nnadapter_bridge as nb  # noqa: E402
from hal.intel_openvino.driver import INFERENCE_PRECISION_KEY  # noqa: E402
from nnadapter_bridge.conformance.harness import Const, build_op  # noqa: E402
from nnadapter_bridge.errors import NNAdapterError, PropertiesError  # noqa: E402
from nnadapter_bridge.nnadapter import runtime  # noqa: E402
from nnadapter_bridge.nnadapter.codes import OperationType as T  # noqa: E402

KEY = INFERENCE_PRECISION_KEY


def _capabilities() -> set:
    import openvino as ov

    return set(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


def _context(properties: str):
    return runtime.Context([runtime.acquire_device("intel_openvino")], properties)


def _conv_model():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    return build_op(T.CONV_2D, [x, Const(w), None, 0, Const(np.int32([1, 1, 1, 1])), Const(np.int32([1, 1])), 1,
                                Const(np.int32([1, 1])), 0])


def _runtime_conv_precision(context, model) -> str:
    compilation = runtime.Compilation(model, context=context)
    compilation.finish()
    try:
        program = compilation.programs[0].handle  # the driver's OpenVinoProgram
        for node in program.compiled_model.get_runtime_model().get_ordered_ops():
            info = node.get_rt_info()
            if info["layerType"].astype(str) == "Convolution":
                return info["runtimePrecision"].astype(str)
    finally:
        compilation.destroy()
    raise AssertionError("no Convolution in the runtime model")


@pytest.mark.parametrize("value", ["fp32", "int8", "bfloat16", "F64"])
def test_bad_precision_is_a_properties_error(value):
    with pytest.raises(PropertiesError, match=KEY):
        _context(f"{KEY}={value}")


def test_bad_precision_from_the_environment(monkeypatch):
    monkeypatch.setenv(KEY, "double")
    with pytest.raises(PropertiesError, match="environment variable"):
        _context("")


def test_default_is_f32():
    context = _context("")
    try:
        model, _ = _conv_model()
        assert _runtime_conv_precision(context, model) == "f32"
    finally:
        context.destroy()


@pytest.mark.parametrize("value, capability", [("bf16", "BF16"), ("f16", "FP16"), ("BF16", "BF16")])
def test_reduced_precision_where_the_device_has_it(value, capability, monkeypatch):
    for source in ("property", "environment"):
        if source == "environment":
            monkeypatch.setenv(KEY, value)
            properties = ""
        else:
            monkeypatch.delenv(KEY, raising=False)
            properties = f"{KEY}={value}"
        if capability not in _capabilities():
            with pytest.raises(NNAdapterError, match="does not compute in"):
                _context(properties)
            continue
        context = _context(properties)
        try:
            model, _ = _conv_model()
            assert _runtime_conv_precision(context, model) == value.lower()
        finally:
            context.destroy()


def test_precision_is_part_of_the_cache_token(zoo_model, tmp_path, monkeypatch):
    monkeypatch.delenv(KEY, raising=False)
    path = zoo_model("mobilenet_v1")
    image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    tokens = {}
    values = ["f32"] + (["bf16"] if "BF16" in _capabilities() else [])
    for value in values:
        config = nb.Config()
        config.set_model_file(path)
        config.set_nnadapter_device_names(["intel_openvino"])
        config.set_nnadapter_model_cache_dir(str(tmp_path))
        config.set_nnadapter_context_properties(f"{KEY}={value}")
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(image)
        predictor.run()
        tokens[value] = predictor.cache_tokens()
        predictor.close()
    # The same precision through the environment (no property) is another key too: the environment
    # variables of a selected device are part of the token's versions line.
    monkeypatch.setenv(KEY, "f32")
    config = nb.Config()
    config.set_model_file(path)
    config.set_nnadapter_device_names(["intel_openvino"])
    config.set_nnadapter_model_cache_dir(str(tmp_path))
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(image)
    predictor.run()
    tokens["env"] = predictor.cache_tokens()
    predictor.close()
    flat = [t for value in tokens.values() for t in value]
    assert len(flat) == len(set(flat)) == len(tokens), tokens
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".nnc")]) == len(tokens)
