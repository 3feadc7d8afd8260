"""`.nb` models end to end against Paddle Lite 2.13 itself (run in its side venv, tests/support/paddlelite_env.py):
files its opt made of the zoo models run on every device with Paddle Lite's outputs for the same file and
Paddle Inference's for the source model; files we write (Opt, save_optimized_model, from legacy and PIR
models) are run by Paddle Lite with our outputs; opt's fused ops (conv2d + Bias + activation, fc,
fusion_elementwise_add_activation) each against Paddle Lite on a small program that has them."""
from __future__ import annotations

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge import lite
from support import paddlelite_env
from support.tolerances import assert_model_close

DEVICES = ("builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack")
ZOO = ("mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet50", "shufflenet_v2_x1_0", "squeezenet1_0",
       "yolo_detector")


def _side(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except paddlelite_env.SideEnvError as exc:  # never a silent skip: say what is missing
        pytest.fail(str(exc))


def _feeds(name: str) -> dict:
    rng = np.random.default_rng(7)
    if name == "yolo_detector":
        return {"image": rng.standard_normal((1, 3, 64, 64)).astype(np.float32),
                "im_shape": np.array([[64, 64]], np.int32)}
    if name == "embedding_net":
        return {"ids": rng.integers(0, 20, (2, 6)).astype(np.int64)}
    if name == "fc_net":
        return {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    return {"x": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}


def _ours(model, feeds: dict, device: str = "builtin_device", buffer: bool = False) -> list:
    config = lite.MobileConfig()
    if buffer:
        with open(model, "rb") as f:
            config.set_model_from_buffer(f.read())
    else:
        config.set_model_from_file(model)
    config.set_nnadapter_device_names([device])
    predictor = lite.create_paddle_predictor(config)
    for name, array in feeds.items():
        predictor.get_input_by_name(name).from_numpy(array)
    predictor.run()
    outputs = [predictor.get_output(k).numpy() for k in range(len(predictor.get_output_names()))]
    predictor.close()
    return outputs


_LITE_OUTPUTS: dict = {}


def _lite_outputs(key: str, nb_path: str, feeds: dict) -> list:
    if key not in _LITE_OUTPUTS:
        _LITE_OUTPUTS[key] = _side(paddlelite_env.lite_run, nb_path, feeds)
    return _LITE_OUTPUTS[key]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ZOO)
def test_opt_nb_runs_like_paddle_lite_and_paddle_inference(name, device, zoo_model, paddle_reference):
    nb_path = _side(paddlelite_env.ensure_zoo_nb, name)
    feeds = _feeds(name)
    want_lite = _lite_outputs(name, nb_path, feeds)
    got = _ours(nb_path, feeds, device)
    reference = paddle_reference(zoo_model(name), feeds)
    assert len(got) == len(want_lite) == len(reference)
    for k, (ours, theirs, paddle) in enumerate(zip(got, want_lite, reference)):
        assert_model_close(ours, theirs, what=f"{name} on {device} vs Paddle Lite, output {k}")
        assert_model_close(ours, paddle, what=f"{name} on {device} vs Paddle Inference, output {k}")


@pytest.mark.parametrize("name", paddlelite_env.SMALL_MODELS)
def test_opt_fused_ops_run_like_paddle_lite(name):
    nb_path, _ = _side(paddlelite_env.ensure_small_nb, name)
    ops = [op.type for op in nb.loader.load_model(nb_path).blocks[0].ops]
    expected = {"fc_net": {"conv2d", "fc"}, "embedding_net": {"fusion_elementwise_add_activation"}}[name]
    assert expected <= set(ops), ops  # opt did fuse: the ops under test are there
    feeds = _feeds(name)
    want = _lite_outputs(name, nb_path, feeds)
    for device in DEVICES:
        got = _ours(nb_path, feeds, device, buffer=device == "builtin_device")
        for k, (ours, theirs) in enumerate(zip(got, want)):
            assert_model_close(ours, theirs, what=f"{name} on {device}, output {k}")


@pytest.mark.parametrize("name, layout", [("mobilenet_v3_small", "pdmodel"), ("shufflenet_v2_x1_0", "pir"),
                                          ("yolo_detector", "pdmodel")])
def test_nb_we_write_runs_in_paddle_lite(name, layout, zoo_model, tmp_path):
    source = zoo_model(name, layout)
    opt = lite.Opt()
    opt.set_model_file(source)
    opt.set_valid_places("x86")
    opt.set_optimize_out(str(tmp_path / name))
    written = opt.run()
    assert written == str(tmp_path / name) + ".nb"
    feeds = _feeds(name)
    theirs = _side(paddlelite_env.lite_run, written, feeds, from_buffer=layout == "pir")
    ours = _ours(source if layout == "pdmodel" else written, feeds)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert_model_close(a, b, what=f"Paddle Lite on our {name} .nb ({layout}), output {k}")


def test_save_optimized_model_script_ports_unchanged(zoo_model, tmp_path):
    """A Paddle Lite user's script: CxxConfig -> save_optimized_model -> MobileConfig -> run."""
    source = zoo_model("mobilenet_v1")
    config = lite.CxxConfig()
    config.set_model_file(source)
    config.set_param_file(source[: -len(".pdmodel")] + ".pdiparams")
    # what a Paddle Lite x86 script sets (its CxxConfig refuses to build without valid places)
    config.set_valid_places([lite.Place(lite.TargetType.X86, lite.PrecisionType.FP32),
                             lite.Place(lite.TargetType.Host, lite.PrecisionType.FP32)])
    config.set_threads(1)
    predictor = lite.create_paddle_predictor(config)
    predictor.save_optimized_model(str(tmp_path / "mobilenet_v1_opt"))
    predictor.close()
    nb_path = tmp_path / "mobilenet_v1_opt.nb"  # Paddle Lite appends .nb, so do we
    assert nb_path.is_file()
    feeds = _feeds("mobilenet_v1")
    mobile = lite.MobileConfig()
    mobile.set_model_from_file(str(nb_path))
    light = lite.create_paddle_predictor(mobile)
    light.get_input(0).from_numpy(feeds["x"])
    light.run()
    ours = light.get_output(0).numpy()
    theirs = _side(paddlelite_env.lite_run, str(nb_path), feeds)[0]
    assert_model_close(ours, theirs, what="mobilenet_v1 via save_optimized_model")


@pytest.mark.parametrize("weight_type", ["abs_max", "channel_wise_abs_max"])
def test_paddle_lite_int8_form_runs_like_paddle_inference(weight_type):
    """Paddle Lite's own quantized form: opt on a post-training-quantized MobileNetV1 gives `calib` (float ->
    int8 at the input scale, into a var opt declares without dims) and `enable_int8` convs / matmul with
    Input0_scale, Filter0_scale and Output0_scale attributes (none on the last conv and the matmul: their outputs
    stay float). Every device runs it like Paddle Inference runs the quantized source model."""
    from nnadapter_bridge.loader import load_model

    nb_path, want = _side(paddlelite_env.ensure_lite_quant_nb, "mobilenet_v1", weight_type)
    graph = load_model(nb_path)
    ops = [op for op in graph.blocks[0].ops]
    assert "calib" in [op.type for op in ops]
    assert any(op.type == "conv2d" and op.attrs.get("enable_int8") for op in ops)
    from nnadapter_bridge.validation.tolerances import within_reduced_precision

    x = paddlelite_env.lite_quant_input()
    for device in DEVICES:
        config = nb.Config()
        config.set_model_file(nb_path)
        config.set_nnadapter_device_names([device])
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        got = predictor.get_output(0).numpy()
        assert predictor.stats.host_ops == 0, device  # calib and every int8 op on the device
        assert within_reduced_precision(got, want), f"{weight_type} on {device}"


@pytest.mark.parametrize("on_host", ["conv2d", "depthwise_conv2d"])
def test_paddle_lite_int8_ops_on_the_host_run_like_paddle_inference(on_host):
    """Paddle Lite's int8 convs forced onto the host (partition config), between device subgraphs: the host hands
    an int8 op's output on as the device subgraphs do, as its real values, which the next int8 op quantizes at
    its Input0_scale. The host used to cast those values to the int8 the .nb declares, truncating every one to 0:
    depthwise convs on the host gave cosine 0.727 against Paddle Inference, convs 0.9994."""
    from nnadapter_bridge.validation.tolerances import within_reduced_precision

    nb_path, want = _side(paddlelite_env.ensure_lite_quant_nb, "mobilenet_v1", "channel_wise_abs_max")
    config = nb.Config()
    config.set_model_file(nb_path)
    config.set_nnadapter_device_names(["builtin_device"])
    config.set_nnadapter_subgraph_partition_config_buffer(on_host + "\n")
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(paddlelite_env.lite_quant_input())
    predictor.run()
    assert predictor.stats.host_ops >= 13, predictor.stats
    assert within_reduced_precision(predictor.get_output(0).numpy(), want)


@pytest.mark.parametrize("weight_type", ["abs_max", "channel_wise_abs_max"])
def test_mixed_precision_config_keeps_listed_ops_of_paddle_lites_int8_form_in_float(weight_type):
    """set_nnadapter_mixed_precision_quantization_config_buffer on Paddle Lite's own int8 form (enable_int8 ops
    with scale attributes): a listed conv is converted as a float CONV_2D (its int8 filter times Filter0_scale,
    its calib input times Input0_scale), a listed matmul/mul as a float product, the other convs stay int8 x
    int8; the result still runs like Paddle Inference on the quantized source, on every device."""
    from converters.context import convert_subgraph
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.nnadapter.codes import OperationType as T
    from nnadapter_bridge.nnadapter.codes import Precision
    from nnadapter_bridge.nnadapter.types import OperandType
    from nnadapter_bridge.subgraph.mixed_precision import float_op_indices
    from nnadapter_bridge.validation.tolerances import within_reduced_precision

    nb_path, want = _side(paddlelite_env.ensure_lite_quant_nb, "mobilenet_v1", weight_type)
    graph = load_model(nb_path)
    ops = [op for op in graph.blocks[0].ops if op.type not in ("feed", "fetch")]
    int8_convs = [op for op in ops if op.type in ("conv2d", "depthwise_conv2d") and op.attrs.get("enable_int8")]
    first = int8_convs[0]
    products = [op.type for op in ops if op.type in ("matmul", "matmul_v2", "mul", "fc")]
    assert products, [op.type for op in ops]
    spec = f"{first.type}:{first.inputs['Input'][0]}\n{products[0]}\n"
    config = nb.Config()
    config.set_nnadapter_mixed_precision_quantization_config_buffer(spec)
    listed = float_op_indices(config, graph)
    assert first.index in listed and len(listed) == 2, listed

    def precisions(float_ops):
        inputs = {name: OperandType(precision=Precision.FLOAT32, dims=(1, 3, 224, 224)) for name in graph.inputs}
        result = convert_subgraph(ops, graph.params, inputs, graph.outputs, graph, float_ops=float_ops)
        convs = [op.inputs[1].type.precision for op in result.model.operations if op.type == T.CONV_2D]
        fcs = [op.inputs[1].type.precision for op in result.model.operations
               if op.type in (T.FULLY_CONNECTED, T.MAT_MUL)]
        return convs, fcs

    plain_convs, plain_fcs = precisions(frozenset())
    mixed_convs, mixed_fcs = precisions(listed)
    assert Precision.FLOAT32 not in plain_convs and Precision.FLOAT32 not in plain_fcs
    assert mixed_convs[0] == Precision.FLOAT32 and mixed_convs.count(Precision.FLOAT32) == 1
    assert mixed_convs[1:] == plain_convs[1:] and mixed_fcs == [Precision.FLOAT32]

    x = paddlelite_env.lite_quant_input()
    for device in DEVICES:
        config = nb.Config()
        config.set_model_file(nb_path)
        config.set_nnadapter_device_names([device])
        config.set_nnadapter_mixed_precision_quantization_config_buffer(spec)
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        got = predictor.get_output(0).numpy()
        assert predictor.stats.host_ops == 0, device
        predictor.close()
        assert within_reduced_precision(got, want), f"mixed precision, {weight_type}, on {device}"
