"""The contract every installed HAL driver keeps, checked per operation sample (nnadapter_bridge/conformance/samples.py;
the conformance kit, tests/hal/test_conformance.py, checks the same and more).

For each driver the device manager can find (builtin_device, microsoft_onnxruntime, intel_openvino,
any other entry point) and each sample: when the driver claims the operation (validate_program True),
the one-operation model compiles, runs and matches builtin_device's interpreter (the numpy reference)
within the one-operation tolerance; its program bytes round-trip through a .nnc (a compilation with a
token and cache dir writes it, a fresh model-less compilation restores it and gives identical outputs).
Per driver: validate_program answers one bool per operation, and destroy/close are idempotent.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from nnadapter_bridge.conformance.harness import build_op
from nnadapter_bridge.conformance.samples import SAMPLES
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.runtime import STATS, Compilation, Context, DeviceManager, Execution
from support.driver_models import run_through_execute_program
from support.tolerances import assert_op_close

DRIVER_NAMES = DeviceManager.instance().names()


def _device(name: str):
    """The acquired device, or a skip that says why the driver cannot be loaded here."""
    manager = DeviceManager.instance()
    try:
        return manager.acquire(name)
    except Exception as exc:  # a driver whose optional runtime is not installed
        pytest.skip(f"driver '{name}' cannot be acquired here: {exc}")


def _token(driver_name: str, sample_id: str) -> str:
    return hashlib.md5(f"{driver_name}/{sample_id}".encode()).hexdigest()


def test_every_operation_has_a_sample():
    assert {s.type for s in SAMPLES} == set(T), "operations without a sample: " + \
        ", ".join(sorted(t.name for t in set(T) - {s.type for s in SAMPLES}))


def test_sample_ids_are_unique():
    ids = [s.id for s in SAMPLES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
@pytest.mark.parametrize("driver_name", DRIVER_NAMES)
def test_claimed_operation_runs_and_round_trips_through_nnc(driver_name, sample, tmp_path):
    """The expectation is builtin_device's interpreter on the unfused model. For the vendor drivers that is
    an independent implementation; for builtin_device itself it checks the driver path (fusion, program
    bytes, restore) against the plain interpreter, while tests/nnadapter/operations checks the references against
    Paddle."""
    device = _device(driver_name)
    model, feeds = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    want = run_model(model, feeds)
    context = Context([device])
    try:
        flags = context.validate(model, 0)
        if flags is None:
            pytest.skip(f"driver '{driver_name}' cannot tell which operations it supports")
        if not flags[0]:
            pytest.skip(f"driver '{driver_name}' answers validate_program False for {sample.id}")
        token = _token(driver_name, sample.id)
        compiled = Compilation(model, token, cache_dir=str(tmp_path), context=context)
        compiled.finish()
        got = run_through_execute_program(compiled, feeds)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_op_close(g, w, what=f"{driver_name} {sample.id} output {k}")
        # Execution.run (the driver's run_arrays where it has one) gives exactly what execute_program gave.
        direct = Execution(compiled).run(feeds)
        assert len(direct) == len(got)
        for k, (d, g) in enumerate(zip(direct, got)):
            assert d.dtype == g.dtype and d.shape == g.shape, f"{driver_name} {sample.id} output {k}"
            np.testing.assert_array_equal(d, g, err_msg=f"{driver_name} {sample.id} output {k}, direct path")
        assert compiled.wait_for_cache_write(timeout=60)  # written by a thread of its own after the first compute
        assert compiled.cache_path is not None and (tmp_path / f"{token}.nnc").is_file(), \
            f"{driver_name} wrote no .nnc for {sample.id} (it filled no program bytes)"
        compiled.destroy()

        restores = STATS.cache_restores
        restored = Compilation(None, token, cache_dir=str(tmp_path), context=context)
        restored.finish()
        assert restored.restored_from_cache and STATS.cache_restores == restores + 1
        again = Execution(restored).run(feeds)
        for k, (g, r) in enumerate(zip(got, again)):
            assert g.dtype == r.dtype and g.shape == r.shape
            np.testing.assert_array_equal(r, g, err_msg=f"{driver_name} {sample.id} output {k} after restore")
        restored.destroy()
    finally:
        context.destroy()


def _small_model():
    """Three operations: ADD, RELU, SOFTMAX on a [2, 3] input."""
    from nnadapter_bridge.nnadapter.codes import Precision
    from nnadapter_bridge.nnadapter.model import Model
    from nnadapter_bridge.nnadapter.types import OperandType

    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 3)), "x")
    bias = model.add_constant(np.float32([1.0, -2.0, 0.5]))
    added = model.add_output("added")
    model.add_operation(T.ADD, [x, bias, model.add_constant(np.int32([0]))], [added])
    relu = model.add_output("relu")
    model.add_operation(T.RELU, [added], [relu])
    out = model.add_output("out")
    model.add_operation(T.SOFTMAX, [relu, model.add_constant(np.int32([1]))], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


@pytest.mark.parametrize("driver_name", DRIVER_NAMES)
def test_validate_program_gives_one_bool_per_operation(driver_name):
    device = _device(driver_name)
    model = _small_model()
    context = device.driver.create_context(device.handle, "", None)
    try:
        flags = device.driver.validate_program(context, model)
        assert len(flags) == len(model.operations)
        assert all(isinstance(bool(f), bool) for f in flags)
        assert all(flags), f"{driver_name} should run ADD, RELU and SOFTMAX on float32"
    finally:
        device.driver.destroy_context(context)


@pytest.mark.parametrize("driver_name", DRIVER_NAMES)
def test_destroy_and_close_are_idempotent(driver_name):
    from hal.protocol import Cache

    device = _device(driver_name)
    driver = device.driver
    handle = driver.open_device()  # a private handle: closing it must not disturb the shared one
    context = driver.create_context(handle, "", None)
    model = _small_model()
    program = driver.create_program(context, model, Cache())
    driver.destroy_program(program)
    driver.destroy_program(program)
    driver.destroy_context(context)
    driver.destroy_context(context)
    driver.close_device(handle)
    driver.close_device(handle)
