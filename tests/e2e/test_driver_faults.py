"""Driver faults degrade, they do not fail (issue 12 part 4): a device that cannot load, open, create its context,
validate, compile or run its part hands it to the next listed device, else to the host, with one
DeviceFallbackWarning naming the device and the error; strict mode keeps each an error. Errors that are the
caller's (INVALID_PARAMETER, bad inputs) stay errors and never trigger a fallback. Unknown context-property keys
warn with the nearest known key.

The faulty devices are builtin_device under other names (registered for the test), each failing in one hook."""
from __future__ import annotations

import builtins
import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from hal.builtin_device.driver import BuiltinDeviceDriver
from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.properties import UnknownPropertyWarning
from nnadapter_bridge.nnadapter.runtime import DeviceFallbackWarning, DeviceManager, is_device_fault
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

X = np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4)


class FaultyDevice(BuiltinDeviceDriver):
    """builtin_device that raises in `hook` (after `after` good calls, `times` times; None: always), counting
    the calls of every hook."""

    def __init__(self, name, hook, error=None, after=0, times=None):
        self.name = name
        self.vendor = "tests"
        self.hook = hook
        self.error = error if error is not None else RuntimeError(f"{name}: simulated {hook} fault")
        self.after = after
        self.times = times
        self.calls = {}

    def _maybe_fail(self, hook):
        count = self.calls[hook] = self.calls.get(hook, 0) + 1
        if hook == self.hook and count > self.after and (self.times is None or count <= self.after + self.times):
            raise self.error

    def open_device(self):
        self._maybe_fail("open_device")
        return super().open_device()

    def create_context(self, device, properties, callback=None):
        self._maybe_fail("create_context")
        return super().create_context(device, properties, callback)

    def validate_program(self, context, model):
        self._maybe_fail("validate_program")
        return super().validate_program(context, model)

    def create_program(self, context, model, cache):
        self._maybe_fail("create_program")
        return super().create_program(context, model, cache)

    def execute_program(self, program, inputs, outputs):
        self._maybe_fail("execute_program")
        return super().execute_program(program, inputs, outputs)


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model")


def make_config(model, devices, strict=False, cache_dir=None, properties=None):
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(devices)
    if strict:
        config.set_strict(True)
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    if properties is not None:
        config.set_nnadapter_context_properties(properties)
    return config


def run(predictor, x=X):
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    out = predictor.get_output(0).numpy()
    np.testing.assert_allclose(out, reference_add_relu_scale(x), rtol=1e-6, atol=1e-6)
    return out


def fallback_warnings(record) -> list:
    return [str(w.message) for w in record if issubclass(w.category, DeviceFallbackWarning)]


def create_and_run(config, runs=1):
    """(predictor, DeviceFallbackWarning messages) after `runs` runs, every output checked."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        predictor = nb.create_predictor(config)
        for _ in range(runs):
            run(predictor)
    return predictor, fallback_warnings(record)


# -- the classification -------------------------------------------------------------------------------
@pytest.mark.parametrize("error, fault", [
    (NNAdapterError("x", ResultCode.DEVICE_INTERNAL_ERROR), True),
    (NNAdapterError("x", ResultCode.DEVICE_NOT_FOUND), True),
    (NNAdapterError("x", ResultCode.OUT_OF_MEMORY), True),
    (NNAdapterError("x", ResultCode.FEATURE_NOT_SUPPORTED), True),
    (NNAdapterError("x", ResultCode.INVALID_PARAMETER), False),
    (nb.InvalidDimensionsError("x"), False),
    (nb.OperationError("x", ResultCode.DEVICE_INTERNAL_ERROR), False),
    (nb.PropertiesError("x", ResultCode.DEVICE_INTERNAL_ERROR), False),
    (RuntimeError("x"), False),  # not from a driver hook: the runtime wraps those into DEVICE_INTERNAL_ERROR
])
def test_which_errors_are_device_faults(error, fault):
    assert is_device_fault(error) is fault


# -- opening ------------------------------------------------------------------------------------------
def test_a_device_that_cannot_open_hands_its_part_to_the_next_device(model, register_device):
    register_device(FaultyDevice("fault_open_device", "open_device"))
    predictor, messages = create_and_run(make_config(model, ["fault_open_device", "builtin_device"]), runs=2)
    assert predictor.context.device_names == ["builtin_device"]
    assert len(messages) == 1
    assert "'fault_open_device'" in messages[0] and "simulated open_device fault" in messages[0]
    assert "runs on builtin_device" in messages[0]


def test_no_device_that_opens_means_the_host_runs_everything(model, register_device):
    register_device(FaultyDevice("fault_open_device", "open_device"))
    predictor, messages = create_and_run(make_config(model, ["fault_open_device"]))
    assert predictor.context is None and not predictor.engines
    assert len(messages) == 1 and "runs on the host" in messages[0]
    assert "could be opened" in predictor.unsupported_reasons()["relu"]


def test_strict_mode_keeps_an_open_fault_an_error(model, register_device):
    register_device(FaultyDevice("fault_open_device", "open_device"))
    with pytest.raises(NNAdapterError, match="simulated open_device fault") as info:
        nb.create_predictor(make_config(model, ["fault_open_device", "builtin_device"], strict=True))
    assert info.value.code == ResultCode.DEVICE_INTERNAL_ERROR


def test_a_misspelled_device_name_is_still_an_error(model):
    with pytest.raises(nb.DeviceNotFoundError, match="no_such_npu"):
        nb.create_predictor(make_config(model, ["no_such_npu", "builtin_device"]))


def test_an_openvino_that_cannot_be_imported_falls_back_to_the_next_device(model, monkeypatch):
    pytest.importorskip("openvino")
    real_import = builtins.__import__

    def refuse_openvino(name, *args, **kwargs):
        if name == "openvino" or name.startswith("openvino."):
            raise ImportError("No module named 'openvino'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(DeviceManager, "_instance", DeviceManager())  # no handle opened before
    monkeypatch.setattr(builtins, "__import__", refuse_openvino)
    predictor, messages = create_and_run(make_config(model, ["intel_openvino", "builtin_device"]), runs=2)
    assert predictor.context.device_names == ["builtin_device"]
    assert len(messages) == 1
    assert "'intel_openvino'" in messages[0] and r"install nnadapter-bridge[openvino]" in messages[0]


# -- contexts -----------------------------------------------------------------------------------------
def test_a_device_whose_context_fails_is_left_out(model, register_device):
    register_device(FaultyDevice("fault_context_device", "create_context"))
    predictor, messages = create_and_run(make_config(model, ["fault_context_device", "builtin_device"]))
    assert predictor.context.device_names == ["builtin_device"]
    assert len(messages) == 1 and "cannot create a context" in messages[0]


def test_a_bad_property_value_stays_an_error(model):
    with pytest.raises(NNAdapterError, match="BUILTIN_DEVICE_NUM_THREADS"):
        nb.create_predictor(make_config(model, ["builtin_device"], properties="BUILTIN_DEVICE_NUM_THREADS=-2"))


# -- validation ---------------------------------------------------------------------------------------
def test_a_failing_validate_program_warns_and_the_next_device_takes_the_ops(model, register_device, tmp_path):
    faulty = register_device(FaultyDevice("fault_validate_device", "validate_program"))
    cache = tmp_path / "cache"
    predictor, messages = create_and_run(make_config(model, ["fault_validate_device", "builtin_device"],
                                                     cache_dir=cache))
    assert len(messages) == 1, messages  # one warning, not one per op
    assert "'fault_validate_device' failed to validate" in messages[0] and "simulated" in messages[0]
    assert predictor.stats.host_ops == 0 and predictor.stats.subgraphs == 1
    (engine,) = predictor.engines.values()
    assert engine.programs[0].compilation.device_names == ["builtin_device"]
    assert faulty.calls["validate_program"] >= 1
    assert not list(cache.glob("support-*.json")), "a verdict made with a failing validate_program was persisted"


def test_a_failing_validate_program_of_the_only_device_sends_the_ops_to_the_host(model, register_device):
    register_device(FaultyDevice("fault_validate_device", "validate_program"))
    predictor, messages = create_and_run(make_config(model, ["fault_validate_device"]))
    assert len(messages) == 1 and predictor.stats.subgraphs == 0 and predictor.stats.host_ops == 3


def test_a_validate_program_with_the_wrong_number_of_flags_is_a_fault(model, register_device):
    class WrongCount(BuiltinDeviceDriver):
        name = "wrong_count_device"

        def validate_program(self, context, model):
            return [True] * (len(model.operations) + 1)

    register_device(WrongCount())
    predictor, messages = create_and_run(make_config(model, ["wrong_count_device", "builtin_device"]))
    assert len(messages) == 1 and "flags for" in messages[0]


def test_strict_mode_keeps_a_validate_fault_an_error(model, register_device):
    register_device(FaultyDevice("fault_validate_device", "validate_program"))
    with pytest.raises(nb.UnsupportedOpError, match="simulated validate_program fault"):
        nb.create_predictor(make_config(model, ["fault_validate_device"], strict=True))


# -- compiling ----------------------------------------------------------------------------------------
def test_a_device_that_cannot_compile_hands_its_part_to_the_next_device_once(model, register_device):
    faulty = register_device(FaultyDevice("fault_compile_device", "create_program"))
    predictor, messages = create_and_run(make_config(model, ["fault_compile_device", "builtin_device"]), runs=4)
    assert len(messages) == 1
    assert "'fault_compile_device' failed to compile" in messages[0] and "runs on builtin_device" in messages[0]
    assert faulty.calls["create_program"] == 1  # not retried on every run
    (engine,) = predictor.engines.values()
    assert [p.compilation.device_names for p in engine.programs] == [["builtin_device"]]
    run(predictor, np.ones((5, 4), np.float32))  # a new shape: compiled for builtin_device directly
    assert faulty.calls["create_program"] == 1


def test_a_compile_fault_of_the_only_device_sends_the_subgraph_to_the_host(model, register_device):
    faulty = register_device(FaultyDevice("fault_compile_device", "create_program",
                                   error=NNAdapterError("no such kernel", ResultCode.FEATURE_NOT_SUPPORTED)))
    predictor, messages = create_and_run(make_config(model, ["fault_compile_device"]), runs=3)
    assert len(messages) == 1 and "runs on the host" in messages[0] and "no such kernel" in messages[0]
    assert faulty.calls["create_program"] == 1
    assert predictor.stats.subgraph_host_runs == 3


def test_strict_mode_keeps_a_compile_fault_an_error(model, register_device):
    register_device(FaultyDevice("fault_compile_device", "create_program"))
    predictor = nb.create_predictor(make_config(model, ["fault_compile_device", "builtin_device"], strict=True))
    predictor.get_input(0).from_numpy(X)
    with pytest.raises(NNAdapterError, match="simulated create_program fault") as info:
        predictor.run()
    assert info.value.code == ResultCode.DEVICE_INTERNAL_ERROR


def test_a_cached_program_the_device_cannot_restore_is_compiled_again(model, register_device, tmp_path):
    """A restore fault is a cache miss (one NncCacheWarning), then a compile: nothing fails."""
    from nnadapter_bridge.nnadapter.nnc import NncCacheWarning

    cache = tmp_path / "cache"
    register_device(FaultyDevice("fault_restore_device", "none"))
    create_and_run(make_config(model, ["fault_restore_device"], cache_dir=cache))
    assert nb.wait_for_cache_writes(timeout=60)  # the .nnc is written by a thread of its own
    assert list(cache.glob("*.nnc"))

    class NoRestore(FaultyDevice):
        def create_program(self, context, model, cache):
            if model is None:
                raise RuntimeError("simulated restore fault")
            return super().create_program(context, model, cache)

    register_device(NoRestore("fault_restore_device", "none"))
    with pytest.warns(NncCacheWarning, match="simulated restore fault"):
        predictor = nb.create_predictor(make_config(model, ["fault_restore_device"], cache_dir=cache))
        run(predictor)
    assert predictor.stats.builds == 1


# -- running ------------------------------------------------------------------------------------------
def test_a_program_that_fails_twice_in_a_row_is_dropped_for_that_shape(model, register_device):
    faulty = register_device(FaultyDevice("fault_execute_device", "execute_program"))
    predictor, messages = create_and_run(make_config(model, ["fault_execute_device", "builtin_device"]), runs=5)
    assert len(messages) == 1
    assert "'fault_execute_device' failed twice in a row to run" in messages[0]
    assert "simulated execute_program fault" in messages[0] and "runs on builtin_device" in messages[0]
    assert faulty.calls["create_program"] == 1  # never rebuilt
    assert faulty.calls["execute_program"] == 2  # tried twice, then never again
    assert predictor.stats.subgraph_runs == 5
    (engine,) = predictor.engines.values()
    assert [p.compilation.device_names for p in engine.programs] == [["builtin_device"]]


def test_a_program_that_ran_then_fails_twice_is_dropped_the_same_way(model, register_device):
    """Faults in the steady state (the shapes ran before on this program) count as they do on a first run:
    retried once, dropped on the second in a row, the run finished by the next device."""
    faulty = register_device(FaultyDevice("late_fault_device", "execute_program", after=3))
    predictor, messages = create_and_run(make_config(model, ["late_fault_device", "builtin_device"]), runs=6)
    assert len(messages) == 1 and "'late_fault_device' failed twice in a row to run" in messages[0]
    assert faulty.calls["execute_program"] == 3 + 2  # three good runs, then two tries, then never again
    assert predictor.stats.subgraph_runs == 6
    (engine,) = predictor.engines.values()
    assert [p.compilation.device_names for p in engine.programs] == [["builtin_device"]]


def test_a_run_fault_of_the_only_device_runs_the_shape_on_the_host(model, register_device):
    faulty = register_device(FaultyDevice("fault_execute_device", "execute_program"))
    predictor, messages = create_and_run(make_config(model, ["fault_execute_device"]), runs=3)
    assert len(messages) == 1 and "runs on the host for these shapes" in messages[0]
    assert faulty.calls["execute_program"] == 2 and faulty.calls["create_program"] == 1
    assert predictor.stats.subgraph_host_runs == 3


def test_a_transient_run_fault_is_retried_and_not_dropped(model, register_device):
    faulty = register_device(FaultyDevice("flaky_device", "execute_program", after=1, times=1))
    predictor, messages = create_and_run(make_config(model, ["flaky_device", "builtin_device"]), runs=4)
    assert messages == []
    assert faulty.calls["execute_program"] == 5  # 4 runs, one of them retried
    (engine,) = predictor.engines.values()
    assert [p.compilation.device_names for p in engine.programs] == [["flaky_device"]]


def test_strict_mode_keeps_a_run_fault_an_error(model, register_device):
    register_device(FaultyDevice("fault_execute_device", "execute_program"))
    predictor = nb.create_predictor(make_config(model, ["fault_execute_device", "builtin_device"], strict=True))
    predictor.get_input(0).from_numpy(X)
    for _ in range(2):
        with pytest.raises(NNAdapterError, match="simulated execute_program fault"):
            predictor.run()


def test_the_callers_error_stays_an_error_and_drops_nothing(model, register_device):
    faulty = register_device(FaultyDevice("picky_device", "execute_program",
                                   error=NNAdapterError("picky_device: an index is out of range",
                                                        ResultCode.INVALID_PARAMETER), after=1))
    predictor = nb.create_predictor(make_config(model, ["picky_device", "builtin_device"]))
    run(predictor)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            predictor.get_input(0).from_numpy(X)
            with pytest.raises(NNAdapterError, match="out of range") as info:
                predictor.run()
            assert info.value.code == ResultCode.INVALID_PARAMETER
    assert fallback_warnings(record) == []
    assert faulty.calls["execute_program"] == 4  # never retried, never dropped
    (engine,) = predictor.engines.values()
    assert [p.compilation.device_names for p in engine.programs] == [["picky_device"]]


@pytest.fixture(scope="module")
def embedding_program(tmp_path_factory):
    import paddle

    from support.converter_harness import pir_program

    def build(ids):
        return paddle.nn.Embedding(10, 4)(ids)

    return pir_program(tmp_path_factory.mktemp("embedding"), build, {"ids": np.array([[1, 2, 3]], np.int64)})


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_gather_indices_out_of_range_raise_and_fall_back_nowhere(embedding_program, device):
    """Paddle raises on ids out of range, so must we, with the SDK device listed before builtin_device."""
    config = nb.Config()
    config.set_model_file(embedding_program.model_path)
    config.set_param_file(embedding_program.params_path)
    config.set_nnadapter_device_names([device, "builtin_device"])
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(np.array([[1, 2, 3]], np.int64))
    predictor.run()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2):
            predictor.get_input(0).from_numpy(np.array([[1, 12, 3]], np.int64))
            with pytest.raises(NNAdapterError, match="GATHER#0") as info:
                predictor.run()
            assert info.value.code == ResultCode.INVALID_PARAMETER
    assert fallback_warnings(record) == []
    (engine,) = predictor.engines.values()
    assert [p.compilation.device_names for p in engine.programs] == [[device]]


# -- context properties -------------------------------------------------------------------------------
def property_warnings(model, devices, properties) -> list:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        nb.create_predictor(make_config(model, devices, properties=properties))
    return [str(w.message) for w in record if issubclass(w.category, UnknownPropertyWarning)]


def test_a_misspelled_property_key_warns_with_the_nearest_key(model):
    pytest.importorskip("openvino")
    messages = property_warnings(model, ["intel_openvino", "builtin_device"], "INTEL_OPENVINO_INFERENCE_NUM_THREAD=2")
    assert len(messages) == 1
    assert "'INTEL_OPENVINO_INFERENCE_NUM_THREAD'" in messages[0]
    assert "did you mean INTEL_OPENVINO_INFERENCE_NUM_THREADS?" in messages[0]


def test_a_known_key_of_a_device_not_listed_is_fine(model):
    pytest.importorskip("onnxruntime")
    assert property_warnings(model, ["builtin_device"],
                             "MICROSOFT_ONNXRUNTIME_NUM_THREADS=1;BUILTIN_DEVICE_NUM_THREADS=1") == []


def test_a_key_nobody_knows_warns_once(model):
    messages = property_warnings(model, ["builtin_device"], "BUILTIN_DEVICE_NUM_THREAD=1;NOBODY_KNOWS_THIS=3")
    assert len(messages) == 2
    assert any("'BUILTIN_DEVICE_NUM_THREAD'" in m and "did you mean BUILTIN_DEVICE_NUM_THREADS?" in m
               for m in messages)
    assert any("'NOBODY_KNOWS_THIS'" in m and "did you mean" not in m for m in messages)


def test_the_environment_is_not_judged(model, monkeypatch):
    monkeypatch.setenv("BUILTIN_DEVICE_NUM_THREAD", "1")  # only the properties string is checked
    assert property_warnings(model, ["builtin_device"], "") == []
    assert os.environ["BUILTIN_DEVICE_NUM_THREAD"] == "1"
