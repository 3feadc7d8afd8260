"""The predictor and Config: API, host fallback, strict mode, input checks, errors, tensors, progress."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.errors import InputError
from nnadapter_bridge.predictor.tensor import PrecisionType
from nnadapter_bridge.subgraph.progress import Progress, summarize_op_types
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

X = np.random.default_rng(5).standard_normal((2, 4)).astype(np.float32)


def make_config(model, **settings):
    config = nb.Config()
    config.set_model_file(model)
    for name, value in settings.items():
        getattr(config, name)(value)
    return config


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model")


# -- the API ----------------------------------------------------------------------------------------
def test_names_tensors_version_and_stats(model):
    predictor = nb.create_predictor(make_config(model))
    assert predictor.get_input_names() == ["x"]
    assert predictor.get_output_names() == ["s0"]
    assert predictor.get_input(0) is predictor.get_input_by_name("x")
    assert predictor.get_input(0).shape() == [-1, 4]  # declared until fed
    assert predictor.get_version() == nb.__version__
    assert len(predictor.partition.subgraphs) == 1 and predictor.stats.host_ops == 0
    predictor.get_input_by_name("x").from_numpy(X)
    predictor.run()
    out = predictor.get_output_by_name("s0")
    np.testing.assert_allclose(out.numpy(), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)
    assert out.shape() == [2, 4]
    assert out.precision() == PrecisionType.FP32
    assert predictor.stats.runs == 1 and predictor.stats.builds == 1


def test_model_buffer_and_model_dir(model, tmp_path):
    model_bytes = open(model, "rb").read()
    params_bytes = open(model.replace(".pdmodel", ".pdiparams"), "rb").read()
    config = nb.Config()
    config.set_model_buffer(model_bytes, params_bytes)
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)
    config = nb.Config()
    config.set_model_dir(str(tmp_path / "model"))
    assert nb.create_predictor(config).get_input_names() == ["x"]


def test_ops_without_a_device_fall_back_to_the_host(tmp_path):
    model = add_relu_scale_model(tmp_path / "m", extra_ops=["erf", "sinh"])
    predictor = nb.create_predictor(make_config(model))
    assert sorted(op.type for op in predictor.host_ops) == ["erf", "sinh"]
    assert "no converter" in predictor.unsupported_reasons()["erf"]
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    erf = np.vectorize(math.erf)
    want = np.sinh(erf(reference_add_relu_scale(X).astype(np.float64)))
    np.testing.assert_allclose(predictor.get_output(0).numpy(), want, rtol=1e-5, atol=1e-6)
    assert predictor.stats.host_op_runs == 2


def test_partition_config_keeps_ops_on_the_host_and_strict_mode_accepts_that(model):
    config = make_config(model, set_nnadapter_subgraph_partition_config_buffer="relu\n")
    config.set_strict()
    predictor = nb.create_predictor(config)
    assert [op.type for op in predictor.host_ops] == ["relu"]
    assert len(predictor.partition.subgraphs) == 2
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)


def test_min_subgraph_size_sends_small_clusters_to_the_host(model):
    config = make_config(model, set_min_subgraph_size=4)
    predictor = nb.create_predictor(config)
    assert predictor.partition.subgraphs == []
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)


# -- errors ------------------------------------------------------------------------------------------
def test_strict_mode_lists_every_unsupported_op_type_before_running(tmp_path):
    model = add_relu_scale_model(tmp_path / "m", extra_ops=["erf", "sinh", "erf"])
    config = make_config(model)
    config.set_strict()
    with pytest.raises(nb.UnsupportedOpError) as info:
        nb.create_predictor(config)
    message = str(info.value)
    assert "strict" in message and "erf (x2" in message and "sinh (x1" in message
    assert "no converter for Paddle op 'erf'" in message
    assert "relu" not in message


def test_op_types_nothing_can_run_are_listed_together_at_creation(tmp_path):
    model = add_relu_scale_model(tmp_path / "m", extra_ops=["made_up_op_a", "made_up_op_b"])
    with pytest.raises(nb.UnsupportedOpError) as info:
        nb.create_predictor(make_config(model))
    message = str(info.value)
    assert "made_up_op_a" in message and "made_up_op_b" in message and "nor on the host" in message


def test_unknown_device_name_lists_the_available_devices(model):
    config = make_config(model, set_nnadapter_device_names=["no_such_npu"])
    with pytest.raises(nb.DeviceNotFoundError) as info:
        nb.create_predictor(config)
    assert "no_such_npu" in str(info.value) and "builtin_device" in str(info.value)
    assert nb.check_nnadapter_device_name("builtin_device") is True
    assert nb.check_nnadapter_device_name("no_such_npu") is False


@pytest.mark.parametrize("array, expected", [
    (X.astype(np.float64), r"input 'x' expects float32 with shape \[-1, 4\].*got float64"),
    (X.reshape(2, 2, 2), r"input 'x' expects float32 with shape \[-1, 4\].*got shape \[2, 2, 2\]"),
    (np.ones((2, 5), np.float32), r"input 'x' expects .*got shape \[2, 5\]"),
])
def test_a_wrongly_shaped_or_typed_input_names_the_input_and_its_shape(model, array, expected):
    predictor = nb.create_predictor(make_config(model))
    predictor.get_input(0).from_numpy(array)
    with pytest.raises(nb.InputError, match=expected):
        predictor.run()


def test_an_input_never_set_and_unknown_names_are_errors(model):
    predictor = nb.create_predictor(make_config(model))
    with pytest.raises(nb.InputError, match="input 'x' was not set"):
        predictor.run()
    with pytest.raises(nb.InputError, match="the inputs are x"):
        predictor.get_input_by_name("y")
    with pytest.raises(nb.InputError, match="has 1 outputs"):
        predictor.get_output(3)


def test_config_rejects_bad_settings_with_what_to_do():
    config = nb.Config()
    with pytest.raises(nb.ConfigError, match="no model set"):
        nb.create_predictor(config)
    with pytest.raises(nb.ConfigError, match="not 32 hex"):
        config.set_nnadapter_model_cache_buffers("abc", b"x")
    with pytest.raises(nb.ConfigError, match="non-empty"):
        config.set_nnadapter_model_cache_buffers("", b"x")
    token = "0123456789abcdef0123456789abcdef"
    with pytest.raises(nb.ConfigError, match="is empty"):
        config.set_nnadapter_model_cache_buffers(token, b"")
    config.set_nnadapter_model_cache_buffers(token, b"data")
    with pytest.raises(nb.ConfigError, match="already set"):
        config.set_nnadapter_model_cache_buffers(token.upper(), b"other")
    with pytest.raises(nb.ConfigError, match="same rank"):
        config.set_nnadapter_dynamic_shape_info({"x": [[1, 4], [1, 4, 1]]})
    with pytest.raises(nb.ConfigError, match="at most 8"):
        config.set_nnadapter_dynamic_shape_info({"x": [[b, 4] for b in range(1, 10)]})
    with pytest.raises(nb.ConfigError, match="list of names"):
        config.set_nnadapter_device_names("builtin_device")
    assert config.nnadapter_device_names() == ["builtin_device"]


def test_dynamic_shape_info_for_a_var_the_model_lacks(model):
    config = make_config(model, set_nnadapter_dynamic_shape_info={"image": [[1, 4], [2, 4]]})
    with pytest.raises(nb.ConfigError, match="no var 'image'; its inputs are x"):
        nb.create_predictor(config)


def test_missing_model_file_is_a_model_format_error(tmp_path):
    config = nb.Config()
    config.set_model_file(str(tmp_path / "absent.pdmodel"))
    with pytest.raises(nb.ModelFormatError, match="absent.pdmodel"):
        nb.create_predictor(config)


# -- tensors and progress ---------------------------------------------------------------------------
def test_tensor_typed_accessors_resize_and_lod():
    tensor = nb.Tensor("x", np.float32, (-1, 3))
    tensor.resize([2, 3])
    tensor.set_float_data([1, 2, 3, 4, 5, 6])
    assert tensor.shape() == [2, 3]
    assert tensor.float_data() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    with pytest.raises(nb.InputError, match="holds 6"):
        tensor.set_float_data([1, 2])
    tensor.set_lod([[0, 1, 2]])
    assert tensor.lod() == [[0, 1, 2]]
    tensor.set_int64_data([7, 8, 9, 10, 11, 12])
    assert tensor.numpy().dtype == np.int64 and tensor.precision() == PrecisionType.INT64
    source = np.zeros((1, 3), np.float32)
    tensor.from_numpy(source)
    source[0, 0] = 5.0  # the tensor holds a copy
    assert tensor.float_data() == [0.0, 0.0, 0.0]


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_on_a_terminal_and_is_silent_otherwise(tmp_path):
    ops = nb.create_predictor(make_config(add_relu_scale_model(tmp_path / "m"))).partition.subgraphs[0].ops
    terminal = FakeTerminal()
    progress = Progress(12, terminal, environ={})
    progress.update(3, ops)
    assert "converting subgraph 3/12 (elementwise_add x 1, relu x 1, scale x 1)" in terminal.getvalue()
    progress.done()
    assert terminal.getvalue().endswith("\x1b[2K")  # rich's transient bar erases its line
    quiet = FakeTerminal()
    Progress(12, quiet, environ={"NNADAPTER_BRIDGE_PROGRESS": "0"}).update(1, ops)
    piped = io.StringIO()
    Progress(12, piped, environ={}).update(1, ops)
    assert quiet.getvalue() == "" and piped.getvalue() == ""
    assert summarize_op_types(ops * 2, limit=2) == "elementwise_add x 2, relu x 2..."


def test_support_is_decided_once_per_op_signature(tmp_path):
    model = add_relu_scale_model(tmp_path / "m", extra_ops=["relu", "relu", "sigmoid"])
    predictor = nb.create_predictor(make_config(model))
    # elementwise_add, relu (three ops, one signature), scale, sigmoid
    assert predictor.support.conversions == 4
    assert len(predictor.partition.subgraphs) == 1 and len(predictor.partition.subgraphs[0].ops) == 6


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_refeeding_the_same_shape_reuses_the_input_buffer_and_sees_new_data(model, device):
    """from_numpy with an unchanged shape refills the tensor's buffer (no new allocation per run); every run
    still sees the data of its own call, also when the caller changes its array in place between runs."""
    predictor = nb.create_predictor(make_config(model, set_nnadapter_device_names=[device]))
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    tensor = predictor.get_input(0)
    tensor.from_numpy(x)
    buffer = tensor._value()
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x), rtol=1e-6)
    x *= -3.0  # the caller's array changes in place; the tensor must hold the old copy until from_numpy
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x / -3.0), rtol=1e-6)
    tensor.from_numpy(x)
    assert tensor._value() is buffer
    predictor.run()
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x), rtol=1e-6)


@pytest.mark.parametrize("device", ["builtin_device", "microsoft_onnxruntime", "intel_openvino"])
def test_numpy_hands_out_the_runs_own_array_which_no_later_run_touches(model, device):
    """An output's numpy() is the run's array, no copy (as Paddle Lite's view, docs/lite_api.md): calls until the
    next run share it, and a write into it shows in the next call; the next run gives a new array and leaves the
    one handed out before as it was, and the write never reaches the predictor."""
    predictor = nb.create_predictor(make_config(model, set_nnadapter_device_names=[device]))
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    first = predictor.get_output(0).numpy()
    np.testing.assert_allclose(first, reference_add_relu_scale(x), rtol=1e-6)
    assert predictor.get_output(0).numpy() is first
    first[...] = 99.0
    assert (predictor.get_output(0).numpy() == 99.0).all()
    predictor.run()  # the same input: the written 99s must not have reached anything the run reads
    second = predictor.get_output(0).numpy()
    assert second is not first and (first == 99.0).all()
    np.testing.assert_allclose(second, reference_add_relu_scale(x), rtol=1e-6)
    predictor.get_input(0).from_numpy(-x)
    predictor.run()
    np.testing.assert_allclose(second, reference_add_relu_scale(x), rtol=1e-6)
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(-x), rtol=1e-6)
    copied = predictor.get_input(0).numpy()  # an input's numpy() is a copy: from_numpy refills its buffer
    copied[...] = 5.0
    np.testing.assert_array_equal(predictor.get_input(0).numpy(), -x)


@pytest.mark.parametrize("device", ["builtin_device", "microsoft_onnxruntime"])
def test_a_plan_of_one_subgraph_hands_its_inputs_straight_to_the_engine(model, device, monkeypatch, tmp_path):
    """A plan of one device subgraph hands the input arrays straight to its engine (Predictor._direct_plan,
    SubgraphEngine.run_on), which runs the program that ran these shapes last at once: the same answers, a new
    shape still compiles, and a wrongly shaped or typed input still gets the usual path's InputError. A plan with
    host ops goes the usual way."""
    predictor = nb.create_predictor(make_config(model, set_nnadapter_device_names=[device]))
    engine, _, _ = predictor._direct
    steady = []
    run_steady = engine._run_steady

    def counting(arrays, signature, scope):
        outputs = run_steady(arrays, signature, scope)
        steady.append(outputs is not None)
        return outputs

    monkeypatch.setattr(engine, "_run_steady", counting)
    rng = np.random.default_rng(5)
    for rows in (3, 3, 3, 5, 5, 3):
        x = rng.standard_normal((rows, 4)).astype(np.float32)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(x), rtol=1e-6)
    # Per shape the first run compiles and the second finds that program and remembers it; from the third run on
    # the remembered program runs at once.
    assert steady == [False, False, True, False, False, True], steady
    wrong = np.ones((2, 5), np.float32)
    for array, expected in ((X.astype(np.float64), "got float64"), (wrong, r"got shape \[2, 5\]")):
        predictor.get_input(0).from_numpy(array)
        with pytest.raises(nb.InputError, match=expected):
            predictor.run()
    with_host = nb.create_predictor(make_config(add_relu_scale_model(tmp_path / "host", extra_ops=["erf"]),
                                                set_nnadapter_device_names=[device]))
    assert with_host.host_ops and with_host._direct is None


def test_refilling_an_input_buffer_takes_any_layout_and_still_checks_the_dtype():
    """The refill path of from_numpy (same shape and dtype as the buffer it holds) copies a strided or
    Fortran-ordered array by value; another dtype of the same shape, supported or not, is not forced into the
    old buffer."""
    from nnadapter_bridge.predictor.tensor import Tensor

    tensor = Tensor("x", np.float32, (3, 4))
    tensor.set_float_data(list(range(12)))  # 12 values, no shape yet: a buffer of shape [12]
    tensor.resize([3, 4])  # a reshape of the tensor's own buffer
    buffer = tensor._value()
    source = np.arange(32, dtype=np.float32).reshape(4, 8)
    for array in (source[:3, ::2], np.asfortranarray(source[1:, :4])):
        tensor.from_numpy(array)
        assert tensor._value() is buffer and buffer.flags.c_contiguous
        np.testing.assert_array_equal(tensor.numpy(), np.asarray(array, np.float32))
    tensor.from_numpy(np.ones((3, 4), np.float64))  # another dtype: a buffer of its own
    assert tensor._value() is not buffer and tensor._value().dtype == np.float64
    with pytest.raises(InputError, match="is not supported"):
        tensor.from_numpy(np.ones((3, 4), np.complex64))
    tensor.resize([2, 6])  # a reshape of the tensor's own buffer: refilled in place too
    reshaped = tensor._value()
    tensor.from_numpy(np.full((2, 6), 5.0))
    assert tensor._value() is reshaped and (reshaped == 5.0).all()


def test_an_output_that_is_a_feed_var_does_not_change_with_the_next_input(tmp_path):
    """A fetch of the feed var itself: the output must keep its values when the input buffer is refilled."""
    from devtools.zoo import write_program

    path = str(tmp_path / "__model__")
    write_program(path, [{"vars": [{"name": "x", "dtype": "float32", "shape": [-1, 4]},
                                   {"name": "y", "dtype": "float32", "shape": [-1, 4]}],
                          "ops": [{"type": "relu", "inputs": {"X": ["x"]}, "outputs": {"Out": ["y"]}}]}],
                  feeds=["x"], fetches=["y", "x"])
    predictor = nb.create_predictor(make_config(path))
    ones = np.ones((1, 4), np.float32)
    predictor.get_input(0).from_numpy(ones)
    predictor.run()
    echoed = predictor.get_output(1).numpy()
    predictor.get_input(0).from_numpy(np.full((1, 4), 7, np.float32))
    np.testing.assert_array_equal(predictor.get_output(1).numpy(), ones)
    np.testing.assert_array_equal(echoed, ones)


@pytest.mark.parametrize("device,on_host", [("builtin_device", ""), ("microsoft_onnxruntime", ""),
                                            ("builtin_device", "reshape2\ntranspose2\n")])
def test_a_write_into_an_output_computed_from_a_parameter_reaches_no_later_run(tmp_path, device, on_host):
    """Outputs that are a parameter seen through a reshape and a transpose, on a device or kept on the host by the
    partition config: each numpy() array is the tensor's own, and a write into it changes no later run's answer
    (the feed-var test above is the case where the predictor must copy)."""
    pytest.importorskip("paddle")
    from support.converter_harness import pir_program

    def net(x):
        import paddle

        w = paddle.create_parameter([2, 3], "float32")
        y = paddle.nn.functional.relu(x)
        return [paddle.reshape(w, [3, 2]), paddle.transpose(w, [1, 0]), y]

    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    saved = pir_program(tmp_path, net, {"x": x})
    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names([device])
    if on_host:
        config.set_nnadapter_subgraph_partition_config_buffer(on_host)
    predictor = nb.create_predictor(config)
    assert len(predictor.host_ops) == (2 if on_host else 0)
    predictor.get_input(0).from_numpy(x)
    for _ in range(2):
        predictor.run()
        got = [predictor.get_output(k).numpy() for k in range(3)]
        for k, want in enumerate(saved.outputs):
            np.testing.assert_allclose(got[k], want, rtol=1e-6, err_msg=f"output {k}")
        for array in got:
            array[...] = -1.0


def test_set_model_file_on_a_pdmodel_without_parameters(tmp_path):
    """A .pdmodel with no parameters has no .pdiparams; set_model_file alone must load it."""
    from support.converter_harness import static_program

    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    saved = static_program(tmp_path, lambda x: __import__("paddle").nn.functional.relu(x), {"x": x})
    assert saved.params_path is None
    predictor = nb.create_predictor(make_config(saved.model_path))
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    np.testing.assert_array_equal(predictor.get_output(0).numpy(), saved.outputs[0])
