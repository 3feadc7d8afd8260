"""The rest of Paddle Lite's API with its meaning (issue 15, item 3), through nnadapter_bridge.lite.

- set_valid_places decides: no TargetType.NNAdapter place -> nothing runs on an NNAdapter device;
- free input shapes (300x300 into a model declared [-1, 3, 224, 224]) through CxxConfig / MobileConfig, and
  set_nnadapter_dynamic_shape_info entries the model can never take rejected at create_predictor;
- set_threads reaches the drivers' thread settings and the host executor's BLAS pool; set_power_mode says once
  that it does nothing on x86;
- get_version, Tensor.lod/set_lod (checked as Lite's CheckLoD), clone, and every other name of paddlelite 2.13's
  module either works or raises NotSupportedError (docs/lite_api.md).
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.lite import (
    CLPrecisionType,
    CLTuneMode,
    CxxConfig,
    CxxPredictor,
    DataLayoutType,
    LightPredictor,
    MobileConfig,
    Place,
    PowerMode,
    PrecisionType,
    TargetType,
    create_paddle_predictor,
    get_version,
)
from nnadapter_bridge.predictor import config as config_module
from nnadapter_bridge.predictor.config import NoEffectWarning
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale
from support.tolerances import assert_model_close

SDK_DEVICES = ["intel_openvino", "microsoft_onnxruntime"]
ALL_DEVICES = ["builtin_device", *SDK_DEVICES]


def _cxx(model, devices=("builtin_device",), places=None, cache_dir=None):
    config = CxxConfig()
    config.set_model_file(model)
    params = model[: -len(".pdmodel")] + ".pdiparams"
    if os.path.exists(params):
        config.set_param_file(params)
    if places is not None:
        config.set_valid_places(places)
    if devices is not None:
        config.set_nnadapter_device_names(list(devices))
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    return config


def _run(predictor, x):
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    return predictor.get_output(0).numpy()


@pytest.fixture
def small_model(tmp_path):
    return add_relu_scale_model(tmp_path / "m")


X = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)


# -- 1. set_valid_places ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("places", [[Place(TargetType.X86, PrecisionType.FP32)], [Place(TargetType.Host)],
                                    [Place(TargetType.ARM), Place(TargetType.X86, PrecisionType.INT8)]],
                         ids=["x86", "host", "arm+x86-int8"])
def test_no_nnadapter_place_runs_nothing_on_a_device(small_model, tmp_path, places):
    config = _cxx(small_model, ["builtin_device"], places, cache_dir=tmp_path / "cache")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = create_paddle_predictor(config)
    unused = [w for w in caught if issubclass(w.category, NoEffectWarning)]
    assert len(unused) == 1, [str(w.message) for w in caught]
    assert "set_nnadapter_device_names(['builtin_device']) is unused" in str(unused[0].message)
    assert predictor.context is None and predictor.device_names == [] and predictor.engines == {}
    np.testing.assert_allclose(_run(predictor, X), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)
    stats = predictor.stats
    assert (stats.subgraphs, stats.subgraph_runs, stats.builds, stats.host_op_runs) == (0, 0, 0, 3)
    assert not list((tmp_path / "cache").glob("*.nnc"))  # no device program was compiled
    assert "TargetType.NNAdapter" in predictor.unsupported_reasons()["relu"]
    assert config.nnadapter_device_names() == ["builtin_device"]  # the setting itself is kept


def test_no_nnadapter_place_and_no_device_names_says_nothing(small_model):
    config = _cxx(small_model, devices=None, places=[Place(TargetType.X86)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        predictor = create_paddle_predictor(config)
    assert predictor.context is None and predictor.stats.subgraphs == 0


@pytest.mark.parametrize("places", [None, [Place(TargetType.NNAdapter, PrecisionType.FP32),
                                           Place(TargetType.X86, PrecisionType.FP32)]], ids=["unset", "nnadapter"])
def test_an_nnadapter_place_or_none_set_uses_the_devices(small_model, tmp_path, places):
    predictor = create_paddle_predictor(_cxx(small_model, ["builtin_device"], places, cache_dir=tmp_path / "c"))
    assert predictor.device_names == ["builtin_device"] and predictor.context is not None
    np.testing.assert_allclose(_run(predictor, X), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)
    assert (predictor.stats.subgraphs, predictor.stats.builds, predictor.stats.host_op_runs) == (1, 1, 0)
    assert nb.wait_for_cache_writes(timeout=60)  # the .nnc is written by a thread of its own
    assert len(list((tmp_path / "c").glob("*.nnc"))) == 1


@pytest.mark.parametrize("device", SDK_DEVICES)
def test_no_nnadapter_place_keeps_sdk_devices_out(small_model, device):
    with pytest.warns(NoEffectWarning, match=device):
        predictor = create_paddle_predictor(_cxx(small_model, [device], [Place(TargetType.X86)]))
    assert predictor.context is None and predictor.stats.subgraphs == 0
    np.testing.assert_allclose(_run(predictor, X), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("places, match", [
    ("x86,arm", "got the string 'x86,arm'"),
    (["x86"], "element 0 is 'x86', not a Place"),
    ([], "the list is empty"),
    ([Place(TargetType.X86), 2], "element 1 is 2, not a Place"),
    ([Place(TargetType.X86, PrecisionType.Unk)], "not a valid place"),
    (42, "expected a list of Place objects"),
])
def test_bad_valid_places_are_config_errors(places, match):
    with pytest.raises(nb.ConfigError, match=match):
        CxxConfig().set_valid_places(places)


@pytest.mark.parametrize("args, match", [(("x86",), "Place target"), ((TargetType.X86, "fp32"), "Place precision"),
                                         ((TargetType.X86, PrecisionType.FP32, 99), "Place layout"),
                                         ((99,), "Place target")])
def test_bad_places_are_config_errors(args, match):
    with pytest.raises(nb.ConfigError, match=match):
        Place(*args)


def test_places_take_ints_and_check_validity_as_lite_does():
    assert Place(18).target is TargetType.NNAdapter
    assert Place(TargetType.Any, PrecisionType.Any, DataLayoutType.Any).is_valid()
    assert not Place(TargetType.Unk).is_valid()
    assert not Place(TargetType.X86, PrecisionType.FP32, DataLayoutType.Unk).is_valid()
    config = CxxConfig()
    config.set_valid_places(Place(TargetType.NNAdapter))  # one Place: a list of one
    assert config.valid_places() == [Place(TargetType.NNAdapter)] and config.nnadapter_enabled()
    assert CxxConfig().valid_places() == [] and CxxConfig().nnadapter_enabled()


def test_strict_without_an_nnadapter_place_is_a_config_error(small_model):
    config = _cxx(small_model, places=[Place(TargetType.X86)])
    config.set_strict()
    with pytest.raises(nb.ConfigError, match="no TargetType.NNAdapter place"):
        create_paddle_predictor(config)


def test_enum_values_are_paddle_lite_2_13s():
    """lite/api/paddle_place.h of Paddle Lite 2.13, as paddlelite 2.13rc0's Python module shows them."""
    assert {m.name: int(m) for m in TargetType} == {
        "Unk": 0, "Host": 1, "X86": 2, "CUDA": 3, "ARM": 4, "OpenCL": 5, "Any": 6, "FPGA": 7, "NPU": 8, "XPU": 9,
        "BM": 10, "MLU": 11, "RKNPU": 12, "APU": 13, "HUAWEI_ASCEND_NPU": 14, "IMAGINATION_NNA": 15,
        "INTEL_FPGA": 16, "Metal": 17, "NNAdapter": 18}
    assert {m.name: int(m) for m in PrecisionType} == {
        "Unk": 0, "FP32": 1, "INT8": 2, "INT32": 3, "Any": 4, "FP16": 5, "BOOL": 6, "INT64": 7, "INT16": 8,
        "UINT8": 9, "FP64": 10}
    assert {m.name: int(m) for m in DataLayoutType} == {
        "Unk": 0, "NCHW": 1, "Any": 2, "NHWC": 3, "ImageDefault": 4, "ImageFolder": 5, "ImageNW": 6,
        "MetalTexture2DArray": 7, "MetalTexture2D": 8}
    assert {m.name: int(m) for m in PowerMode} == {
        "LITE_POWER_HIGH": 0, "LITE_POWER_LOW": 1, "LITE_POWER_FULL": 2, "LITE_POWER_NO_BIND": 3,
        "LITE_POWER_RAND_HIGH": 4, "LITE_POWER_RAND_LOW": 5}
    assert {m.name: int(m) for m in CLPrecisionType} == {"CL_PRECISION_AUTO": 0, "CL_PRECISION_FP32": 1,
                                                        "CL_PRECISION_FP16": 2}
    assert {m.name: int(m) for m in CLTuneMode} == {"CL_TUNE_NONE": 0, "CL_TUNE_RAPID": 1, "CL_TUNE_NORMAL": 2,
                                                   "CL_TUNE_EXHAUSTIVE": 3}


# -- 2. free input shapes ------------------------------------------------------------------------------------

def _zoo_config(cls, model, device, cache_dir=None):
    config = cls()
    if cls is MobileConfig:
        config.set_model_from_file(model)
    else:
        config.set_model_file(model)
        config.set_param_file(model[: -len(".pdmodel")] + ".pdiparams")
        config.set_valid_places([Place(TargetType.NNAdapter), Place(TargetType.X86)])
    config.set_nnadapter_device_names([device])
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    return config


def _image(h, w, seed):
    return np.random.default_rng(seed).uniform(0.0, 1.0, (1, 3, h, w)).astype(np.float32)


@pytest.mark.parametrize("device", ALL_DEVICES)
def test_resnet50_declared_224_runs_300x300_as_paddle_does(zoo_model, paddle_reference, tmp_path, device):
    model = zoo_model("resnet50")
    predictor = create_paddle_predictor(_zoo_config(CxxConfig, model, device, tmp_path / "cache"))
    assert list(predictor.get_input(0).declared_shape) == [-1, 3, 224, 224]
    for k, (h, w) in enumerate([(224, 224), (300, 300), (256, 320)]):
        image = _image(h, w, k)
        assert_model_close(_run(predictor, image), paddle_reference(model, {"x": image})[0], what=f"{h}x{w}")
    stats = predictor.stats
    assert (stats.builds, stats.subgraph_host_runs, stats.host_op_runs) == (3, 0, 0)  # one program per shape
    _run(predictor, _image(300, 300, 9))
    assert predictor.stats.builds == 3  # a shape seen before reuses its program
    # A second predictor restores the three programs from the cache and compiles nothing.
    again = create_paddle_predictor(_zoo_config(CxxConfig, model, device, tmp_path / "cache"))
    for h, w in [(224, 224), (300, 300), (256, 320)]:
        _run(again, _image(h, w, 5))
    assert (again.stats.builds, again.stats.cache_hits_file) == (0, 3)


def test_mobile_config_resize_and_set_float_data_at_300x300(zoo_model, paddle_reference):
    model = zoo_model("mobilenet_v2")
    predictor = create_paddle_predictor(_zoo_config(MobileConfig, model, "builtin_device"))
    image = _image(300, 300, 3)
    tensor = predictor.get_input(0)
    tensor.resize([1, 3, 300, 300])
    tensor.set_float_data(image.reshape(-1).tolist())
    predictor.run()
    output = predictor.get_output(0)
    got = np.array(output.float_data(), dtype=np.float32).reshape(output.shape())
    assert_model_close(got, paddle_reference(model, {"x": image})[0])


def test_dynamic_shape_info_serves_listed_sizes_with_one_program(zoo_model, paddle_reference):
    model = zoo_model("mobilenet_v1")
    config = _zoo_config(CxxConfig, model, "builtin_device")
    config.set_nnadapter_dynamic_shape_info({"x": [[1, 3, 224, 224], [1, 3, 300, 300]]})
    predictor = create_paddle_predictor(config)
    for k, size in enumerate([300, 224]):
        image = _image(size, size, k)
        assert_model_close(_run(predictor, image), paddle_reference(model, {"x": image})[0], what=f"{size}")
    assert predictor.stats.builds == 1


@pytest.mark.parametrize("info, match", [
    ({"x": [[1, 4, 224, 224]]}, r"shape \[1, 4, 224, 224\] contradicts 'x' declared \[-1, 3, 224, 224\], and the "
                                r"model cannot take it: conv2d#1 .*needs 3 input channels"),
    ({"x": [[1, 3, 224, 224], [1, 3, 224]]}, "the same rank"),   # refused by the setter already
    ({"x": [[1, 3, 224]]}, r"rank 3, but 'x' is declared with shape \[-1, 3, 224, 224\] \(rank 4\)"),
    ({"image": [[1, 3, 224, 224]]}, "the model has no var 'image'; its inputs are x"),
])
def test_dynamic_shape_info_the_model_cannot_take_is_rejected(zoo_model, info, match):
    config = _zoo_config(CxxConfig, zoo_model("mobilenet_v1"), "builtin_device")
    with pytest.raises(nb.ConfigError, match=match):
        config.set_nnadapter_dynamic_shape_info(info)
        create_paddle_predictor(config)


def test_dynamic_shape_info_that_paddle_also_refuses_is_rejected(zoo_model, paddle_reference):
    """ShuffleNet's exported channel shuffle reshapes to fixed [-1, 2, 58, 28, 28]: Paddle cannot run 300x300."""
    model = zoo_model("shufflenet_v2_x1_0")
    with pytest.raises(Exception, match="reshape|Reshape"):
        paddle_reference(model, {"x": _image(300, 300, 0)})
    config = _zoo_config(CxxConfig, model, "builtin_device")
    config.set_nnadapter_dynamic_shape_info({"x": [[1, 3, 224, 224], [1, 3, 300, 300]]})
    with pytest.raises(nb.ConfigError, match=r"shape \[1, 3, 300, 300\] .*cannot take it: reshape2"):
        create_paddle_predictor(config)
    config.set_nnadapter_dynamic_shape_info({"x": [[1, 3, 224, 224], [2, 3, 224, 224]]})
    assert create_paddle_predictor(config).stats.subgraphs == 1  # batch sizes it can take


# -- 3. set_threads and set_power_mode -----------------------------------------------------------------------

def _driver_threads(predictor) -> dict:
    """What each driver context was configured with."""
    found = {}
    for name in predictor.device_names:
        _, context = predictor.context.device_context(name)
        if name == "builtin_device":
            found[name] = context.num_threads
        elif name == "intel_openvino":
            found[name] = context.config.get("INFERENCE_NUM_THREADS", 0)
        else:
            found[name] = context.session_options().intra_op_num_threads
    return found


def test_set_threads_reaches_every_driver(small_model, monkeypatch):
    for key in ("BUILTIN_DEVICE_NUM_THREADS", "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
                "MICROSOFT_ONNXRUNTIME_NUM_THREADS"):
        monkeypatch.delenv(key, raising=False)
    config = _cxx(small_model, ALL_DEVICES)
    config.set_threads(3)
    assert config.threads() == 3
    predictor = create_paddle_predictor(config)
    assert _driver_threads(predictor) == {name: 3 for name in ALL_DEVICES}
    np.testing.assert_allclose(_run(predictor, X), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_set_threads_is_the_compiled_sessions_thread_count(small_model, monkeypatch, device):
    for key in ("INTEL_OPENVINO_INFERENCE_NUM_THREADS", "MICROSOFT_ONNXRUNTIME_NUM_THREADS"):
        monkeypatch.delenv(key, raising=False)
    config = _cxx(small_model, [device])
    # Not the library's default: onnxruntime's is the core count; OpenVINO's too, and it caps the count there.
    wanted = 1 if device == "intel_openvino" else (os.cpu_count() or 1) + 1
    config.set_threads(wanted)
    predictor = create_paddle_predictor(config)
    _run(predictor, X)
    (program,) = predictor.engines[0].programs
    (part,) = program.compilation.programs  # one device: one driver program
    compiled = part.handle
    if device == "intel_openvino":
        assert int(compiled.compiled_model.get_property("INFERENCE_NUM_THREADS")) == wanted
    else:
        assert compiled.session.get_session_options().intra_op_num_threads == wanted


def test_context_properties_and_the_environment_win_over_set_threads(small_model, monkeypatch):
    monkeypatch.setenv("BUILTIN_DEVICE_NUM_THREADS", "2")
    monkeypatch.delenv("INTEL_OPENVINO_INFERENCE_NUM_THREADS", raising=False)
    monkeypatch.delenv("MICROSOFT_ONNXRUNTIME_NUM_THREADS", raising=False)
    config = _cxx(small_model, ALL_DEVICES)
    config.set_nnadapter_context_properties("MICROSOFT_ONNXRUNTIME_NUM_THREADS=1")
    config.set_threads(4)
    assert config.effective_context_properties() == ("MICROSOFT_ONNXRUNTIME_NUM_THREADS=1;"
                                                     "INTEL_OPENVINO_INFERENCE_NUM_THREADS=4;")
    predictor = create_paddle_predictor(config)
    assert _driver_threads(predictor) == {"builtin_device": 2, "intel_openvino": 4, "microsoft_onnxruntime": 1}


def test_without_set_threads_the_drivers_keep_their_defaults(small_model, monkeypatch):
    for key in ("BUILTIN_DEVICE_NUM_THREADS", "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
                "MICROSOFT_ONNXRUNTIME_NUM_THREADS"):
        monkeypatch.delenv(key, raising=False)
    config = _cxx(small_model, ALL_DEVICES)
    assert config.threads() == 1 and not config.threads_set()
    assert config.effective_context_properties() == ""
    assert _driver_threads(create_paddle_predictor(config)) == {name: 0 for name in ALL_DEVICES}


def test_set_threads_caps_the_host_executors_blas_pool(small_model):
    from nnadapter_bridge.nnadapter.blas_threads import blas_thread_counts

    before = blas_thread_counts()
    if not before:
        pytest.skip("no BLAS library visible to threadpoolctl")
    wanted = 1 if before[0] != 1 else 2
    config = _cxx(small_model, places=[Place(TargetType.X86)], devices=None)
    config.set_threads(wanted)
    predictor = create_paddle_predictor(config)
    seen = []
    run = predictor.host.run

    def spy(op, scope):
        seen.append(blas_thread_counts()[0])
        return run(op, scope)

    predictor.host.run = spy
    np.testing.assert_allclose(_run(predictor, X), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)
    assert seen == [wanted] * 3
    assert blas_thread_counts() == before  # restored after the run


@pytest.mark.parametrize("bad", [0, -2, 1.5, "4", True])
def test_set_threads_takes_positive_ints(bad):
    with pytest.raises(nb.ConfigError, match="set_threads"):
        CxxConfig().set_threads(bad)


def test_set_power_mode_says_once_that_it_does_nothing(small_model, monkeypatch):
    monkeypatch.setattr(config_module, "_WARNED_ONCE", set())
    config = _cxx(small_model)
    assert config.power_mode() is PowerMode.LITE_POWER_NO_BIND  # Paddle Lite's default
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config.set_power_mode(PowerMode.LITE_POWER_NO_BIND)  # the default binds nothing: nothing to say
        config.set_power_mode(PowerMode.LITE_POWER_HIGH)
        config.set_power_mode(PowerMode.LITE_POWER_LOW)
        MobileConfig().set_power_mode(2)
    said = [str(w.message) for w in caught if issubclass(w.category, NoEffectWarning)]
    assert len(said) == 1 and "set_power_mode(LITE_POWER_HIGH) has no effect" in said[0]
    assert config.power_mode() is PowerMode.LITE_POWER_LOW
    np.testing.assert_allclose(_run(create_paddle_predictor(config), X), reference_add_relu_scale(X), rtol=1e-6)
    with pytest.raises(nb.ConfigError, match="set_power_mode: expected a PowerMode"):
        config.set_power_mode("fast")
    with pytest.raises(nb.ConfigError, match="set_power_mode"):
        config.set_power_mode(9)


# -- 4. get_version, LoD, clone -------------------------------------------------------------------------------

def test_get_version_everywhere(small_model):
    predictor = create_paddle_predictor(_cxx(small_model))
    assert get_version() == nb.__version__ == predictor.get_version() == predictor.clone().get_version()
    assert isinstance(predictor, CxxPredictor) and isinstance(predictor, LightPredictor)


@pytest.mark.parametrize("lod, match", [
    ([[1, 2]], "must start at 0"),
    ([[0, 2, 1]], "decreases"),
    ([[0]], "at least two offsets"),
    ([[0, 1], [0, 1, 2, 3]], r"level 0 ends at 1, but level 1 holds 3 sequences"),
    ([[0, 1.5]], "non-integer offset"),
    ([0, 1], "level 0 must be a list"),
    ("0,1", "expected a list of levels"),
])
def test_set_lod_checks_what_lite_checks(lod, match):
    tensor = nb.Tensor("x", np.float32, (-1, 4))
    with pytest.raises(nb.InputError, match=match):
        tensor.set_lod(lod)
    assert tensor.lod() == []


def test_lod_against_the_tensors_rows(small_model):
    predictor = create_paddle_predictor(_cxx(small_model))
    tensor = predictor.get_input(0)
    tensor.from_numpy(np.ones((3, 4), np.float32))
    with pytest.raises(nb.InputError, match=r"ends at 2, but its dim 0 is 3"):
        tensor.set_lod([[0, 2]])
    tensor.set_lod([[0, 1, 3], [0, 1, 2, 3]])  # two levels: 2 sequences of 1 and 2 sub-sequences, 3 rows
    assert tensor.lod() == [[0, 1, 3], [0, 1, 2, 3]]
    predictor.run()
    assert tensor.lod() == [[0, 1, 3], [0, 1, 2, 3]]  # kept through a run (no op here reads a LoD)
    # Set before the data: checked when the run sees the rows.
    tensor.from_numpy(X)  # 2 rows
    with pytest.raises(nb.InputError, match=r"ends at 3, but its dim 0 is 2"):
        predictor.run()
    tensor.set_lod([[0, 2]])
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(X), rtol=1e-6)
    assert predictor.get_output(0).lod() == []


def test_tensor_data_goes_to_host_memory_only():
    tensor = nb.Tensor("x", np.float32, (-1, 2))
    tensor.set_float_data([1, 2], TargetType.Host)
    tensor.from_numpy(np.ones((1, 2), np.float32), TargetType.X86)
    with pytest.raises(nb.InputError, match="cannot be put on ARM"):
        tensor.set_float_data([1, 2], TargetType.ARM)
    with pytest.raises(nb.InputError, match="cannot be put on CUDA"):
        tensor.from_numpy(np.ones((1, 2), np.float32), TargetType.CUDA)
    assert tensor.target() is TargetType.Host


def test_a_lite_predictor_clone_shares_the_compiled_program(small_model):
    predictor = create_paddle_predictor(_cxx(small_model))
    _run(predictor, X)
    clone = predictor.clone()
    np.testing.assert_allclose(_run(clone, X), reference_add_relu_scale(X), rtol=1e-6)
    assert clone.stats.builds == 0 and clone.engines[0].programs[0].original is predictor.engines[0].programs[0]


# -- 5. the rest of paddlelite 2.13's surface ------------------------------------------------------------------

# dir() of paddlelite 2.13rc0's `paddlelite.lite` (x86 wheel), public names only. Opt is the .nb helper's part.
LITE_SURFACE = {
    "CxxConfig": ["add_discarded_pass", "is_model_from_memory", "model_dir", "model_file",
                  "nnadapter_context_properties", "nnadapter_device_names",
                  "nnadapter_mixed_precision_quantization_config_path", "nnadapter_model_cache_dir",
                  "nnadapter_subgraph_partition_config_path", "param_file", "power_mode", "set_metal_lib_path",
                  "set_metal_use_memory_reuse", "set_metal_use_mps", "set_model_buffer", "set_model_dir",
                  "set_model_file", "set_nnadapter_context_properties", "set_nnadapter_device_names",
                  "set_nnadapter_mixed_precision_quantization_config_path", "set_nnadapter_model_cache_dir",
                  "set_nnadapter_subgraph_partition_config_path", "set_opencl_binary_path_name",
                  "set_opencl_precision", "set_opencl_tune", "set_param_file", "set_passes_internal",
                  "set_power_mode", "set_threads", "set_valid_places", "threads"],
    "MobileConfig": ["is_model_from_memory", "model_dir", "set_metal_lib_path", "set_metal_use_memory_reuse",
                     "set_metal_use_mps", "set_model_buffer", "set_model_dir", "set_model_from_buffer",
                     "set_model_from_file", "set_nnadapter_context_properties", "set_nnadapter_device_names",
                     "set_nnadapter_dynamic_shape_info", "set_nnadapter_model_cache_buffers",
                     "set_nnadapter_model_cache_dir", "set_opencl_binary_path_name", "set_opencl_precision",
                     "set_opencl_tune"],
    "CxxPredictor": ["get_input", "get_input_by_name", "get_input_names", "get_output", "get_output_by_name",
                     "get_output_names", "get_version", "run", "save_optimized_model", "save_optimized_pb_model"],
    "LightPredictor": ["get_input", "get_input_by_name", "get_input_names", "get_output", "get_output_by_name",
                       "get_output_names", "get_version", "run"],
    "Tensor": ["float_data", "from_numpy", "int32_data", "int8_data", "lod", "numpy", "precision", "resize",
               "set_float_data", "set_int32_data", "set_int8_data", "set_lod", "set_uint8_data", "shape", "target",
               "uint8_data"],
    "Place": ["is_valid"],
}
LITE_MODULE_NAMES = ["CLPrecisionType", "CLTuneMode", "CxxConfig", "CxxPredictor", "DataLayoutType",
                     "LightPredictor", "MobileConfig", "Place", "PowerMode", "PrecisionType", "TargetType", "Tensor",
                     "create_paddle_predictor"]
# Writing .nb files (issue 15 item 2) has its own tests with the writer.
NB_WORK = {"CxxPredictor.save_optimized_model"}
# Lite names that cannot mean anything here: each raises NotSupportedError, never does nothing.
NOT_SUPPORTED = {
    "set_opencl_binary_path_name": ("dir", "name"), "set_opencl_precision": (CLPrecisionType.CL_PRECISION_FP16,),
    "set_opencl_tune": (CLTuneMode.CL_TUNE_NORMAL, "dir", "file", 4), "set_metal_lib_path": ("lib",),
    "set_metal_use_memory_reuse": (True,), "set_metal_use_mps": (True,), "set_passes_internal": (["a_pass"],),
}


def test_every_lite_name_exists():
    from nnadapter_bridge import lite

    assert [n for n in LITE_MODULE_NAMES if not hasattr(lite, n)] == []
    missing = [f"{cls}.{name}" for cls, names in LITE_SURFACE.items() for name in names
               if not callable(getattr(getattr(lite, cls), name, None)) and f"{cls}.{name}" not in NB_WORK]
    assert missing == []


@pytest.mark.parametrize("cls", [CxxConfig, MobileConfig])
def test_lite_names_with_no_meaning_here_raise(cls):
    config = cls()
    for name, args in NOT_SUPPORTED.items():
        if name == "set_passes_internal" and cls is MobileConfig:
            continue
        with pytest.raises(nb.NotSupportedError, match=name):
            getattr(config, name)(*args)
        with pytest.raises(NotImplementedError):
            getattr(config, name)(*args)


def test_save_optimized_pb_model_raises(small_model, tmp_path):
    predictor = create_paddle_predictor(_cxx(small_model))
    with pytest.raises(nb.NotSupportedError, match="save_optimized_pb_model"):
        predictor.save_optimized_pb_model(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_add_discarded_pass_is_kept_and_the_model_still_runs(small_model):
    config = _cxx(small_model)
    config.add_discarded_pass("conv_bn_fuse_pass")
    assert config.discarded_passes() == ["conv_bn_fuse_pass"]
    with pytest.raises(nb.ConfigError, match="add_discarded_pass"):
        config.add_discarded_pass("")
    np.testing.assert_allclose(_run(create_paddle_predictor(config), X), reference_add_relu_scale(X), rtol=1e-6)


def test_mobile_config_buffers_old_and_new_forms(small_model):
    model = open(small_model, "rb").read()
    params = open(small_model[: -len(".pdmodel")] + ".pdiparams", "rb").read()
    for args in [(model, params), (model + b"junk", len(model), params + b"more", len(params))]:
        config = MobileConfig()
        assert not config.is_model_from_memory()
        config.set_model_buffer(*args)
        assert config.is_model_from_memory()
        np.testing.assert_allclose(_run(create_paddle_predictor(config), X), reference_add_relu_scale(X), rtol=1e-6)
    with pytest.raises(nb.ConfigError, match="exceed the buffers"):
        MobileConfig().set_model_buffer(model, len(model) + 1, params, len(params))
    config = CxxConfig()
    config.set_model_file(small_model)
    assert not config.is_model_from_memory()


_DUMP_LITE_SURFACE = """
import json, paddlelite.lite as lite
surface = {"module": sorted(n for n in dir(lite) if not n.startswith("_")), "classes": {}, "enums": {}}
for name in surface["module"]:
    obj = getattr(lite, name)
    if not isinstance(obj, type):
        continue
    members = getattr(obj, "__members__", None)
    if members:
        surface["enums"][name] = {k: int(v) for k, v in members.items()}
    else:
        surface["classes"][name] = sorted(n for n in dir(obj) if not n.startswith("_"))
print(json.dumps(surface))
"""


def test_the_surface_table_is_paddle_lites_own():
    """LITE_SURFACE and the enum values above, against paddlelite 2.13rc0 itself (the side venv of the .nb tests;
    building it needs pyenv's Python 3.10: without it this fails saying how to get it)."""
    import json
    import subprocess

    from nnadapter_bridge import lite
    from support.paddlelite_env import ensure_venv

    done = subprocess.run([ensure_venv(), "-c", _DUMP_LITE_SURFACE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    surface = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(set(surface["module"]) - {"Opt"}) == sorted(LITE_MODULE_NAMES)
    assert {k: v for k, v in surface["classes"].items() if k != "Opt"} == LITE_SURFACE
    for name, members in surface["enums"].items():
        ours = {m.name: int(m) for m in getattr(lite, name)}
        # Ours also has TargetType's CUDA 3 and NPU 8: paddle_place.h has them, Lite's pybind leaves them out.
        assert {k: ours.get(k) for k in members} == members, name
        assert set(ours) - set(members) == ({"CUDA", "NPU"} if name == "TargetType" else set()), name
