"""The drivers' optional `run_arrays` hook (driver_protocol): how `Execution.run` runs a compilation of one
program. It refuses what execute_program refuses, and the runtime does not take it when a subclass overrides
execute_program (a wrapper or test double must see every run). Its outputs equal execute_program's on every
operation sample: tests/hal/test_driver_contract.py. And `prepare_run`, run_arrays worked out once, which the runtime
takes for the runs after a program's first ones (microsoft_onnxruntime's)."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.runtime import Compilation, Context, DeviceManager, Execution
from nnadapter_bridge.nnadapter.runtime.execution import prepare_run_hook, run_arrays_hook
from nnadapter_bridge.nnadapter.types import OperandType
from support.driver_models import run_through_execute_program

SDK_DRIVERS = ["intel_openvino", "microsoft_onnxruntime"]


def _model(plain: bool = False) -> Model:
    """x [2, 3] float32 -> (x + b, relu(x + b) as int32 via CAST): two outputs, one of another dtype. `plain`:
    (tanh(x + b), x + b), without a relu, so onnxruntime's program has no exact fallback (prepare_run takes it)."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 3)), "x")
    added = model.add_output("added")
    model.add_operation(T.ADD, [x, model.add_constant(np.float32([1.0, -2.0, 0.5])),
                                model.add_constant(np.int32([0]))], [added])
    if plain:
        tanh = model.add_output("tanh")
        model.add_operation(T.TANH, [added], [tanh])
        model.identify_inputs_and_outputs([x], [tanh, added])
        model.finish()
        return model
    relu = model.add_output("relu")
    model.add_operation(T.RELU, [added], [relu])
    as_int = model.add_output("as_int")
    model.add_operation(T.CAST, [relu, model.add_constant(np.int32([int(Precision.INT32)]))], [as_int])
    model.identify_inputs_and_outputs([x], [added, as_int])
    model.finish()
    return model


def _compiled(name: str):
    manager = DeviceManager.instance()
    try:
        device = manager.acquire(name)
    except Exception as exc:  # the SDK is an optional extra
        pytest.skip(f"driver '{name}' cannot be acquired here: {exc}")
    context = Context([device])
    compiled = Compilation(_model(), context=context)
    compiled.finish()
    return context, compiled


def _assert_execute_programs_answer(compiled, x, outputs):
    """`outputs` of a run on `x` equal what execute_program with the access callbacks gives, dtypes included."""
    general = run_through_execute_program(compiled, [x])
    for got, want in zip(outputs, general):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", SDK_DRIVERS)
def test_the_direct_path_is_the_drivers_hook_and_matches_execute_program(name):
    context, compiled = _compiled(name)
    try:
        execution = Execution(compiled)
        driver = compiled.programs[0].device.driver
        assert execution._direct is not None and execution._run_arrays_hooks == [driver.run_arrays]
        x = np.float32([[0.5, 1.5, -3.0], [-1.0, 4.0, 2.25]])
        direct = execution.run([x])
        _assert_execute_programs_answer(compiled, x, direct)
        np.testing.assert_array_equal(direct[0], x + np.float32([1.0, -2.0, 0.5]))
        assert direct[1].dtype == np.int32
        # each run hands out new arrays: a second run does not change what the first returned
        first = direct[0].copy()
        execution.run([x * 2])
        np.testing.assert_array_equal(direct[0], first)
        # a non-contiguous input is read as its values
        wide = np.zeros((2, 6), np.float32)
        wide[:, ::2] = x
        np.testing.assert_array_equal(execution.run([wide[:, ::2]])[0], direct[0])
    finally:
        compiled.destroy()
        context.destroy()


@pytest.mark.parametrize("name", SDK_DRIVERS)
def test_the_direct_path_refuses_what_execute_program_refuses(name):
    context, compiled = _compiled(name)
    try:
        with pytest.raises(InvalidDimensionsError):
            Execution(compiled).run([np.zeros((2, 4), np.float32)])
        with pytest.raises(NNAdapterError, match="dtype"):
            Execution(compiled).run([np.zeros((2, 3), np.float64)])
    finally:
        compiled.destroy()
        context.destroy()


def test_a_subclass_overriding_execute_program_is_not_bypassed():
    from hal.microsoft_onnxruntime.driver import OnnxRuntimeDriver

    class Counting(OnnxRuntimeDriver):
        def execute_program(self, program, inputs, outputs):
            return super().execute_program(program, inputs, outputs)

    class Faster(Counting):  # defines run_arrays below the override: taken
        def run_arrays(self, program, arrays):
            return super().run_arrays(program, arrays)

    assert run_arrays_hook(OnnxRuntimeDriver()) is not None
    assert run_arrays_hook(Counting()) is None
    assert run_arrays_hook(Faster()) is not None
    assert run_arrays_hook(object()) is None
    # prepare_run, defined above the run_arrays that Faster overrides, would skip it: not taken
    assert prepare_run_hook(OnnxRuntimeDriver()) is not None
    assert prepare_run_hook(Faster()) is None and prepare_run_hook(Counting()) is None


def test_a_prepared_run_takes_over_after_the_first_runs_and_refuses_what_run_arrays_refuses():
    manager = DeviceManager.instance()
    context = Context([manager.acquire("microsoft_onnxruntime")])
    compiled = Compilation(_model(plain=True), context=context)
    compiled.finish()
    try:
        execution = Execution(compiled)
        x = np.float32([[0.5, 1.5, -3.0], [-1.0, 4.0, 2.25]])
        first = execution.run([x])
        assert execution._prepared is None  # asked for once a run after the first is done
        execution.run([x])
        assert execution._prepared is not None
        prepared = execution.run([x])
        _assert_execute_programs_answer(compiled, x, prepared)
        np.testing.assert_array_equal(prepared[1], x + np.float32([1.0, -2.0, 0.5]))
        assert prepared[0] is not first[0]  # new arrays every run
        wide = np.zeros((2, 6), np.float32)
        wide[:, ::2] = x
        np.testing.assert_array_equal(execution.run([wide[:, ::2]])[1], prepared[1])
        with pytest.raises(InvalidDimensionsError):
            execution.run([np.zeros((2, 4), np.float32)])
        with pytest.raises(NNAdapterError, match="dtype"):
            execution.run([np.zeros((2, 3), np.float64)])
        with pytest.raises(NNAdapterError, match="inputs"):
            execution.run([x, x])
    finally:
        compiled.destroy()
        context.destroy()
    with pytest.raises(NNAdapterError, match="destroyed"):
        execution.run([x])


def test_a_prepared_run_of_a_program_with_nan_kept_relus_reads_its_probe(monkeypatch):
    """_model's relu feeds an integer output, so onnxruntime's program keeps it plain and watched (nan_speculation):
    the prepared run reads the probe, a NaN run is run again exactly (Paddle's relu: NaN -> 0), and once the program
    runs only its exact form (after EXACT_ONLY_AFTER such runs) the prepared run hands every run to run_arrays."""
    import hal.microsoft_onnxruntime.driver as ort_driver

    manager = DeviceManager.instance()
    context = Context([manager.acquire("microsoft_onnxruntime")])
    compiled = Compilation(_model(), context=context)
    compiled.finish()
    driver = compiled.programs[0].device.driver
    handed = []
    run_arrays = driver.run_arrays
    monkeypatch.setattr(driver, "run_arrays", lambda program, arrays: handed.append(1) or run_arrays(program, arrays))
    try:
        execution = Execution(compiled)
        program = compiled.programs[0].handle
        assert program.exact is not None
        x = np.float32([[0.5, 1.5, -3.0], [-1.0, 4.0, 2.25]])
        execution.run([x])
        execution.run([x])
        assert execution._prepared is not None
        handed.clear()
        _assert_execute_programs_answer(compiled, x, execution.run([x]))
        assert program.exact.runs == 0 and not handed
        poisoned = x.copy()
        poisoned[0, 1] = np.nan
        for k in range(ort_driver.EXACT_ONLY_AFTER):
            got = execution.run([poisoned])
            assert got[1][0, 1] == 0 and np.isnan(got[0][0, 1])  # relu(NaN) = 0, cast to int32; the sum keeps NaN
            assert program.exact.runs == k + 1 and not handed
        assert program.exact.exact_only
        got = execution.run([poisoned])
        assert handed == [1] and got[1][0, 1] == 0
        _assert_execute_programs_answer(compiled, x, execution.run([x]))
    finally:
        compiled.destroy()
        context.destroy()
