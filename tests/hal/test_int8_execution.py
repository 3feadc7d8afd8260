"""What the SDKs actually execute for a quantized model: int8 kernels, read back from the SDK itself.

The models are Paddle's own post-training quantization of the zoo's MobileNetV1 (tests/support/quant_fixtures.py),
in both encodings (quantize_linear/dequantize_linear, and the fake quant/dequant ops), converted whole:

* intel_openvino: the compiled model's runtime graph (`CompiledModel.get_runtime_model()`) names the
  precision each node runs in (rt_info 'runtimePrecision'); every Convolution and FullyConnected must run in
  u8 / i8 (a test fails if one falls back to f32). The driver's default f32 inference precision is kept for
  the rest.
* microsoft_onnxruntime: the graph onnxruntime optimizes (SessionOptions.optimized_model_filepath, with the
  driver's session options) runs the classifier's matrix product as MatMulInteger (uint8 x int8 -> int32) and no
  float MatMul / Gemm, and every convolution whose result is requantized for the next one (26 of MobileNetV1's
  27: the last feeds the float pooling) as QLinearConv (hal/microsoft_onnxruntime/qdq.py: batch norm folded,
  int8 weights and int32 bias); without those chains (convert_model alone) the convolutions are float Conv.

The drivers take those kernels only on a CPU whose int8 dot product is exact (cpu_features.exact_int8_kernels:
VNNI or AMX); elsewhere they lose a bit of every weight, and the drivers compute the products in float. The int8
tests here set NNADAPTER_BRIDGE_INT8_KERNELS=1 to look at the int8 path on any CPU; the last tests set 0 and look
at the float one, which is the default on a CPU without those instructions.
"""
from __future__ import annotations

import collections
import os

import pytest

from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.types import OperandType
from support.quant_fixtures import CHANNEL, LAYER

CASES = [("mobilenet_v1", True, CHANNEL), ("mobilenet_v1", False, LAYER)]
IDS = ["onnx-channel", "fake-layer"]


@pytest.fixture(autouse=True)
def int8_kernels(monkeypatch):
    monkeypatch.setenv("NNADAPTER_BRIDGE_INT8_KERNELS", "1")


def _converted(quant_model, case):
    from converters.context import convert_subgraph
    from nnadapter_bridge.loader import load_model

    graph = load_model(quant_model(*case))
    ops = [op for op in graph.blocks[0].ops if op.type not in ("feed", "fetch")]
    result = convert_subgraph(ops, graph.params, {"x": OperandType(precision=Precision.FLOAT32, dims=(1, 3, 224, 224))},
                              graph.outputs, graph)
    return result.model


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_openvino_runs_the_convolutions_in_int8(quant_model, case):
    precisions = _openvino_runtime_precisions(_converted(quant_model, case))
    convolutions = precisions["Convolution"]
    assert sum(convolutions.values()) == 27, dict(precisions)  # MobileNetV1: 27 convolutions
    assert set(convolutions) <= {"u8", "i8"}, f"convolutions fell back: {dict(convolutions)}"
    assert set(precisions["FullyConnected"]) <= {"u8", "i8"}, dict(precisions["FullyConnected"])


def _openvino_runtime_precisions(model) -> dict:
    """{layer type: Counter of the precisions its nodes run in} of `model` compiled by intel_openvino (one thread),
    read from the compiled model's runtime graph."""
    pytest.importorskip("openvino")
    from hal.intel_openvino import DRIVER
    from hal.protocol import Cache

    device = DRIVER.open_device()
    context = DRIVER.create_context(device, "INTEL_OPENVINO_INFERENCE_NUM_THREADS=1")
    program = DRIVER.create_program(context, model, Cache())
    try:
        precisions = collections.defaultdict(collections.Counter)
        for node in program.compiled_model.get_runtime_model().get_ordered_ops():
            info = node.get_rt_info()
            precisions[info["layerType"].astype(str)][info["runtimePrecision"].astype(str)] += 1
        return precisions
    finally:
        DRIVER.destroy_program(program)
        DRIVER.destroy_context(context)
        DRIVER.close_device(device)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_onnxruntime_runs_the_convolutions_and_the_matrix_product_in_int8(quant_model, case, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    from hal.microsoft_onnxruntime import DRIVER
    from hal.microsoft_onnxruntime.driver import _qdq_chains
    from hal.microsoft_onnxruntime.graph import convert_model
    from hal.microsoft_onnxruntime.operations import OPERATIONS
    from hal.microsoft_onnxruntime.qdq import QDQ_PRODUCER, marked_for_qdq

    model = _converted(quant_model, case)
    device = DRIVER.open_device()
    context = DRIVER.create_context(device, "MICROSOFT_ONNXRUNTIME_NUM_THREADS=1")

    def optimized(model_bytes, name):
        options = context.session_options(qdq=marked_for_qdq(model_bytes))
        path = os.path.join(str(tmp_path), name)
        options.optimized_model_filepath = path
        ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        return collections.Counter(node.op_type for node in onnx.load(path).graph.node)

    try:
        chained = convert_model(model, OPERATIONS, fused_chains=_qdq_chains(model))
        assert chained.producer_name == QDQ_PRODUCER  # the emitted chains mark the model (qdq.emit_conv_chain)
        types = optimized(chained.SerializeToString(), "chained.onnx")
        assert types["MatMulInteger"] == 1 and types["MatMul"] + types["Gemm"] + types["FusedMatMul"] == 0, dict(types)
        assert types["QLinearConv"] == 26 and types["Conv"] + types["FusedConv"] == 1, dict(types)
        plain = convert_model(model, OPERATIONS).SerializeToString()
        assert not marked_for_qdq(plain)
        types = optimized(plain, "plain.onnx")  # the op-by-op form: float convolutions, QDQ fusions off
        assert types["QLinearConv"] == 0 and types["Conv"] + types["FusedConv"] == 27, dict(types)
    finally:
        DRIVER.destroy_context(context)
        DRIVER.close_device(device)


def test_onnxruntime_int8_program_restores_from_the_cache_with_its_qdq_fusions(quant_model, tmp_path, monkeypatch):
    """The .nnc keeps the program's QDQ mark, so a restored session lets onnxruntime fuse QLinearConv again."""
    import numpy as np

    import hal.microsoft_onnxruntime.driver as ort_driver
    import nnadapter_bridge as nb

    flags = []
    original = ort_driver.marked_for_qdq
    monkeypatch.setattr(ort_driver, "marked_for_qdq", lambda data: flags.append(original(data)) or flags[-1])
    x = np.random.default_rng(3).standard_normal((1, 3, 224, 224)).astype(np.float32)
    outputs = []
    for attempt in ("build", "restore"):
        flags.clear()
        config = nb.Config()
        config.set_model_file(quant_model(*CASES[0]))
        config.set_nnadapter_device_names(["microsoft_onnxruntime"])
        config.set_nnadapter_model_cache_dir(str(tmp_path))
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        outputs.append(predictor.get_output(0).numpy())
        stats = predictor.stats
        assert (stats.builds, stats.cache_hits_file) == ((1, 0) if attempt == "build" else (0, 1))
        assert flags and all(flags), f"{attempt}: a session without the QDQ fusions"
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_without_exact_int8_kernels_openvino_computes_the_products_in_float(quant_model, monkeypatch):
    """NNADAPTER_BRIDGE_INT8_KERNELS=0 (the default on a CPU without VNNI or AMX, where the CPU plugin's int8
    convolutions halve the weights): the quantized weights are float constants of their real values, and every
    convolution and the classifier run in f32."""
    monkeypatch.setenv("NNADAPTER_BRIDGE_INT8_KERNELS", "0")
    precisions = _openvino_runtime_precisions(_converted(quant_model, CASES[0]))
    assert precisions["Convolution"] == {"f32": 27}, dict(precisions)
    assert set(precisions["FullyConnected"]) == {"f32"}, dict(precisions["FullyConnected"])


def test_without_exact_int8_kernels_onnxruntime_computes_the_products_in_float(quant_model, monkeypatch, tmp_path):
    """The same on microsoft_onnxruntime: no QDQ chains (no QLinearConv) and no MatMulInteger."""
    ort = pytest.importorskip("onnxruntime")
    import onnx

    from hal.microsoft_onnxruntime import DRIVER
    from hal.microsoft_onnxruntime.driver import _qdq_chains
    from hal.microsoft_onnxruntime.graph import convert_model
    from hal.microsoft_onnxruntime.operations import OPERATIONS
    from hal.microsoft_onnxruntime.qdq import marked_for_qdq

    monkeypatch.setenv("NNADAPTER_BRIDGE_INT8_KERNELS", "0")
    model = _converted(quant_model, CASES[0])
    assert _qdq_chains(model) == []
    device = DRIVER.open_device()
    context = DRIVER.create_context(device, "MICROSOFT_ONNXRUNTIME_NUM_THREADS=1")
    try:
        model_bytes = convert_model(model, OPERATIONS, fused_chains=_qdq_chains(model)).SerializeToString()
        options = context.session_options(qdq=marked_for_qdq(model_bytes))
        options.optimized_model_filepath = str(tmp_path / "float.onnx")
        ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        types = collections.Counter(node.op_type for node in onnx.load(str(tmp_path / "float.onnx")).graph.node)
        assert types["QLinearConv"] + types["MatMulInteger"] + types["ConvInteger"] == 0, dict(types)
        assert types["Conv"] + types["FusedConv"] == 27, dict(types)
    finally:
        DRIVER.destroy_context(context)
        DRIVER.close_device(device)


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_the_int8_choice_is_part_of_the_cache_key(device, monkeypatch):
    """A cache dir moved between CPUs with and without exact int8 kernels must not reuse the other's programs: the
    drivers' cache_environment puts the choice into the versions string of every token."""
    import importlib
    import types

    from nnadapter_bridge.subgraph.cache_key import versions

    pytest.importorskip("openvino" if device == "intel_openvino" else "onnxruntime")
    driver = importlib.import_module(f"hal.{device}").DRIVER
    context = types.SimpleNamespace(devices=[types.SimpleNamespace(name=device, version=driver.version,
                                                                   driver=driver)])
    found = {}
    for choice in ("0", "1"):
        monkeypatch.setenv("NNADAPTER_BRIDGE_INT8_KERNELS", choice)
        found[choice] = versions(context)
        assert f"{device}:int8_kernels={choice}" in found[choice].split(",")
    assert found["0"] != found["1"]
