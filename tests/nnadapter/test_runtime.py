"""The runtime on RELU/ADD models: device discovery, contexts, builtin_device's driver contract,
compilation and execution, the .nnc write/restore cycle, and multi-device partitioning on in-process
fake drivers (deterministic, acyclic, numerically equal to one device)."""
from __future__ import annotations

import importlib.metadata
import os
import random
import warnings

import numpy as np
import pytest

from hal.builtin_device import DRIVER as BUILTIN
from hal.builtin_device.driver import BuiltinDeviceDriver
from hal.protocol import Argument, Cache
from nnadapter_bridge.errors import DeviceNotFoundError, InvalidDimensionsError, NNAdapterError, PropertiesError
from nnadapter_bridge.nnadapter.codes import Lifetime, Precision, ResultCode
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.device_split import assign_devices, build_submodels, cluster_operations
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning, unpack_compilation_record, wait_for_cache_writes
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.runtime import (
    STATS,
    CacheMissError,
    Compilation,
    Context,
    DeviceManager,
    Execution,
    HostBuffer,
    acquire_device,
    check_device_name,
)
from nnadapter_bridge.nnadapter.types import OperandType, Operation

TOKEN = "5f0c2a5e4b6d8c1e9a7b3d2f1e0c4b6a"


def f32(*dims):
    return OperandType(precision=Precision.FLOAT32, dims=dims)


class Builder:
    """Small RELU/ADD graphs whose output operand names choose the fake device (`d<k>_...`)."""

    def __init__(self, *dims):
        self.model = Model()
        self.x = self.model.add_operand(f32(*dims), "x")

    def relu(self, a, name):
        out = self.model.add_output(name)
        self.model.add_operation(T.RELU, [a], [out])
        return out

    def add(self, a, b, name):
        fuse = self.model.add_constant(0)
        out = self.model.add_output(name)
        self.model.add_operation(T.ADD, [a, b, fuse], [out])
        return out

    def finish(self, outputs, inputs=None):
        self.model.identify_inputs_and_outputs(inputs or [self.x], outputs)
        self.model.finish()
        return self.model


def relu_add_model():
    b = Builder(2, 3)
    y = b.relu(b.x, "y")
    bias = b.model.add_constant(np.array([1.0, -2.0, 0.5], dtype=np.float32))
    return b.finish([b.add(y, bias, "z")])


def expected_relu_add(x):
    return np.maximum(x, 0) + np.array([1.0, -2.0, 0.5], dtype=np.float32)


class FakeDevice(BuiltinDeviceDriver):
    """A builtin_device under another name that supports only the operations whose first output name
    starts with its prefix (or every operation), optionally unable to cache, recording its contexts."""

    def __init__(self, name, prefix=None, cacheable=True, can_tell=True):
        self.name = name
        self.vendor = "tests"
        self.prefix = prefix
        self.cacheable = cacheable
        self.can_tell = can_tell
        self.seen_properties = []
        self.executed = 0

    def create_context(self, device, properties, callback=None):
        self.seen_properties.append(properties)
        return super().create_context(device, properties, callback)

    def validate_program(self, context, model):
        if not self.can_tell:
            return super(BuiltinDeviceDriver, self).validate_program(context, model)
        return [self.prefix is None or (op.outputs[0] is not None and op.outputs[0].name.startswith(self.prefix))
                for op in model.operations]

    def create_program(self, context, model, cache):
        program = super().create_program(context, model, cache)
        if not self.cacheable:
            cache.buffer = bytearray()
        return program

    def execute_program(self, program, inputs, outputs):
        self.executed += 1
        return super().execute_program(program, inputs, outputs)


@pytest.fixture
def fake_devices():
    manager = DeviceManager.instance()
    registered = []

    def make(*drivers):
        for driver in drivers:
            manager.register(driver, replace=True)
            registered.append(driver.name)
        return [manager.acquire(d.name) for d in drivers]

    yield make
    for name in registered:
        manager.unregister(name)


# -- devices ---------------------------------------------------------------------------------------------
def test_builtin_device_identity():
    device = acquire_device("builtin_device")
    assert (device.name, device.vendor, device.type.name, device.version) == ("builtin_device", "Paddle", "CPU", 1)
    assert check_device_name("builtin_device") and not check_device_name("no_such_device")


def test_drivers_come_only_from_entry_points_and_registration():
    """The runtime never imports a driver by module name, builtin_device included: without the distribution's
    entry points a driver is known only once registered."""
    manager = DeviceManager()
    manager._entry_points = {}  # as if the distribution's metadata were missing
    assert manager.names() == [] and not manager.is_declared("builtin_device")
    with pytest.raises(DeviceNotFoundError, match="no NNAdapter device named 'builtin_device'; available: none"):
        manager.acquire("builtin_device")
    manager.register(BUILTIN)
    assert manager.names() == ["builtin_device"] and manager.acquire("builtin_device").driver is BUILTIN
    manager.close_all()


def test_unknown_device_lists_available_and_failed_entry_points():
    manager = DeviceManager()
    broken = importlib.metadata.EntryPoint(name="broken_device", value="no_such_module_for_tests:DRIVER",
                                           group="nnadapter_bridge.devices")
    misnamed = importlib.metadata.EntryPoint(name="misnamed_device", value="hal.builtin_device:DRIVER",
                                             group="nnadapter_bridge.devices")
    builtin = importlib.metadata.EntryPoint(name="builtin_device", value="hal.builtin_device:DRIVER",
                                            group="nnadapter_bridge.devices")
    manager._entry_points = {"broken_device": broken, "misnamed_device": misnamed, "builtin_device": builtin}
    with pytest.raises(DeviceNotFoundError) as info:
        manager.acquire("huawei_ascend_npu")
    message = str(info.value)
    assert info.value.code == ResultCode.DEVICE_NOT_FOUND
    assert "'huawei_ascend_npu'" in message and "available: builtin_device" in message
    assert "broken_device (ModuleNotFoundError" in message
    assert "misnamed_device (TypeError" in message and "calls itself 'builtin_device'" in message
    with pytest.raises(DeviceNotFoundError):
        manager.acquire("broken_device")


def test_registered_driver_is_opened_once_and_closed(fake_devices):
    class Counting(FakeDevice):
        opened = closed = 0

        def open_device(self):
            Counting.opened += 1
            return super().open_device()

        def close_device(self, device):
            Counting.closed += 1

    fake_devices(Counting("counting_device"))
    manager = DeviceManager.instance()
    manager.acquire("counting_device")
    manager.acquire("counting_device")
    assert Counting.opened == 1
    manager.unregister("counting_device")
    assert Counting.closed == 1
    with pytest.raises(TypeError, match="not a HAL driver: missing name"):
        manager.register(object())


def test_context_passes_the_same_properties_to_every_device(fake_devices):
    a, b = FakeDevice("fake_a"), FakeDevice("fake_b")
    devices = fake_devices(a, b)
    with Context(devices, "FAKE_KEY=1;BUILTIN_DEVICE_NUM_THREADS=2;") as context:
        assert context.device_names == ["fake_a", "fake_b"]
        assert context.device_contexts[0].num_threads == 2
    assert a.seen_properties == b.seen_properties == ["FAKE_KEY=1;BUILTIN_DEVICE_NUM_THREADS=2;"]


# -- builtin_device's driver contract ----------------------------------------------------------------------
def test_num_threads_property_and_environment(monkeypatch):
    handle = BUILTIN.open_device()
    monkeypatch.delenv("BUILTIN_DEVICE_NUM_THREADS", raising=False)
    assert BUILTIN.create_context(handle, "").num_threads == 0
    assert BUILTIN.create_context(handle, "BUILTIN_DEVICE_NUM_THREADS=3").num_threads == 3
    monkeypatch.setenv("BUILTIN_DEVICE_NUM_THREADS", "4")
    assert BUILTIN.create_context(handle, "").num_threads == 4
    with pytest.raises(PropertiesError):
        BUILTIN.create_context(handle, "BUILTIN_DEVICE_NUM_THREADS=many")
    with pytest.raises(NNAdapterError, match="positive"):
        BUILTIN.create_context(handle, "BUILTIN_DEVICE_NUM_THREADS=-1")
    with pytest.raises(PropertiesError):
        BUILTIN.create_context(handle, "oops")


def test_validate_program_is_truthful():
    from nnadapter_bridge.nnadapter.types import Operand

    # The operations below are attached structurally, bypassing add_operation's own signature check.
    model = relu_add_model()
    int_type = OperandType(precision=Precision.INT32, dims=(2,))
    a = Operand(int_type, None, "a", len(model.operands))
    model.operands.append(a)
    out = Operand(int_type.copy(), None, "o", len(model.operands))
    model.operands.append(out)
    model.operations.append(Operation(T.RELU, [a], [out], 2))        # RELU on INT32: signature says no
    model.operations.append(Operation(T.OR, [a, a], [out], 3))        # no kernel
    model.operations.append(Operation(T.ADD, [model.operands[0]], [out], 4))  # too few operands
    context = BUILTIN.create_context(BUILTIN.open_device(), "")
    assert BUILTIN.validate_program(context, model) == [True, True, False, False, False]


def test_driver_fills_the_cache_buffer_only_with_token_and_dir():
    model = relu_add_model()
    context = BUILTIN.create_context(BUILTIN.open_device(), "")
    for token, directory, filled in [("", "", False), (TOKEN, "", False), ("", "/tmp", False), (TOKEN, "/tmp", True)]:
        cache = Cache(token, directory)
        BUILTIN.create_program(context, model, cache)
        assert bool(cache.buffer) is filled


def test_driver_restores_from_its_own_bytes_and_rejects_garbage():
    model = relu_add_model()
    context = BUILTIN.create_context(BUILTIN.open_device(), "")
    cache = Cache(TOKEN, "/tmp")
    BUILTIN.create_program(context, model, cache)
    program = BUILTIN.create_program(context, None, Cache(TOKEN, "/tmp", buffer=bytearray(cache.buffer)))
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    holder = HostBuffer()
    from nnadapter_bridge.nnadapter.runtime import array_input_access, host_buffer_output_access

    BUILTIN.execute_program(
        program, [Argument(0, x, array_input_access)], [Argument(0, holder, host_buffer_output_access)]
    )
    np.testing.assert_array_equal(holder.array, expected_relu_add(x))
    assert holder.type.dims == (2, 3)
    with pytest.raises(NNAdapterError):
        BUILTIN.create_program(context, None, Cache(TOKEN, "/tmp", buffer=bytearray(b"garbage")))
    with pytest.raises(NNAdapterError):
        BUILTIN.create_program(context, None, Cache(TOKEN, "/tmp"))


# -- compilation and execution --------------------------------------------------------------------------------
def builtin_context():
    return Context([acquire_device("builtin_device")])


def test_compile_execute_and_query():
    compilation = Compilation(relu_add_model(), context=builtin_context())
    compilation.finish()
    inputs, outputs = compilation.query_inputs_and_outputs()
    assert [t.dims for t in inputs] == [(2, 3)] and [t.precision for t in outputs] == [Precision.FLOAT32]
    assert inputs[0].lifetime == Lifetime.MODEL_INPUT
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    np.testing.assert_array_equal(Execution(compilation).run([x])[0], expected_relu_add(x))
    out = np.empty((2, 3), np.float32)
    execution = Execution(compilation)
    execution.set_input(0, x)
    execution.set_output(0, out)
    execution.compute()
    np.testing.assert_array_equal(out, expected_relu_add(x))


def test_same_rank_other_dims_work_and_rank_change_is_invalid_dimensions():
    compilation = Compilation(relu_add_model(), context=builtin_context())
    compilation.finish()
    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 7
    np.testing.assert_array_equal(Execution(compilation).run([x])[0], expected_relu_add(x))
    with pytest.raises(InvalidDimensionsError) as info:
        Execution(compilation).run([np.ones((1, 2, 3), np.float32)])
    assert info.value.code == ResultCode.INVALID_DIMENSIONS


def test_execution_errors_carry_codes():
    compilation = Compilation(relu_add_model(), context=builtin_context())
    compilation.finish()
    execution = Execution(compilation)
    with pytest.raises(NNAdapterError) as info:
        execution.set_input(1, np.ones((2, 3), np.float32))
    assert info.value.code == ResultCode.INVALID_PARAMETER
    execution.set_output(0, HostBuffer())
    with pytest.raises(NNAdapterError, match="input 0 was not set"):
        execution.compute()
    execution.set_input(0, np.ones((2, 3), np.float64))
    with pytest.raises(NNAdapterError, match="dtype float64"):
        execution.compute()
    execution.set_input(0, np.ones((2, 3), np.float32))
    execution.set_output(0, np.empty((3, 3), np.float32))
    with pytest.raises(NNAdapterError, match="output buffer"):
        execution.compute()


def test_driver_result_codes_and_crashes_become_exceptions(fake_devices):
    class CStyle(FakeDevice):
        result = 0

        def execute_program(self, program, inputs, outputs):
            if isinstance(self.result, Exception):
                raise self.result
            return self.result

    driver = CStyle("c_style_device")
    compilation = Compilation(relu_add_model(), context=Context(fake_devices(driver)))
    compilation.finish()
    driver.result = int(ResultCode.INVALID_DIMENSIONS)
    with pytest.raises(InvalidDimensionsError):
        Execution(compilation).run([np.ones((2, 3), np.float32)])
    driver.result = int(ResultCode.OUT_OF_MEMORY)
    with pytest.raises(NNAdapterError) as info:
        Execution(compilation).run([np.ones((2, 3), np.float32)])
    assert info.value.code == ResultCode.OUT_OF_MEMORY
    driver.result = ZeroDivisionError("boom")
    with pytest.raises(NNAdapterError) as info:
        Execution(compilation).run([np.ones((2, 3), np.float32)])
    assert info.value.code == ResultCode.DEVICE_INTERNAL_ERROR and isinstance(info.value.__cause__, ZeroDivisionError)


# -- the cache cycle ----------------------------------------------------------------------------------------
def test_cache_written_after_first_compute_and_restored_without_model(tmp_path):
    STATS.reset()
    context = builtin_context()
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), context)
    compilation.finish()
    path = tmp_path / f"{TOKEN}.nnc"
    assert not path.exists()  # written after the first successful compute, not at compile time
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    first = Execution(compilation).run([x])[0]
    assert compilation.wait_for_cache_write(timeout=60)  # written by a thread of its own after the first compute
    assert path.exists() and compilation.cache_path == str(path)
    assert (STATS.compiles, STATS.cache_writes) == (1, 1)
    mtime = os.stat(path).st_mtime_ns
    Execution(compilation).run([x])
    assert STATS.cache_writes == 1

    record = unpack_compilation_record(path.read_bytes())
    assert [p.device_name for p in record.programs] == ["builtin_device"]

    restored = Compilation(None, TOKEN, None, str(tmp_path), context)
    restored.finish()
    assert restored.restored_from_cache and not compilation.restored_from_cache
    assert STATS.cache_restores == 1 and STATS.compiles == 1
    assert [t.dims for t in restored.query_inputs_and_outputs()[0]] == [(2, 3)]
    again = Execution(restored).run([x])[0]
    np.testing.assert_array_equal(again, first)
    assert os.stat(path).st_mtime_ns == mtime and STATS.cache_writes == 1  # a restore never rewrites

    from_buffer = Compilation(None, TOKEN, path.read_bytes(), "", context)
    from_buffer.finish()
    np.testing.assert_array_equal(Execution(from_buffer).run([x])[0], first)


def test_absent_cache_is_a_silent_miss_and_bad_cache_a_warned_one(tmp_path):
    STATS.reset()
    context = builtin_context()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compilation = Compilation(None, TOKEN, None, str(tmp_path), context)
        with pytest.raises(CacheMissError):
            compilation.finish()
    (tmp_path / f"{TOKEN}.nnc").write_bytes(b"cnn." + b"\0" * 40)
    with pytest.warns(NncCacheWarning):
        compilation = Compilation(None, TOKEN, None, str(tmp_path), context)
    with pytest.raises(CacheMissError):
        compilation.finish()
    assert STATS.cache_misses == 2
    with pytest.raises(NNAdapterError, match="needs a model"):
        Compilation(None, "", None, "", context)


def test_cache_for_a_device_outside_the_context_is_a_miss(tmp_path, fake_devices):
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), builtin_context())
    compilation.finish()
    Execution(compilation).run([np.ones((2, 3), np.float32)])
    other = Context(fake_devices(FakeDevice("other_device")))
    with pytest.warns(NncCacheWarning, match="builtin_device"):
        restored = Compilation(None, TOKEN, None, str(tmp_path), other)
    with pytest.raises(CacheMissError):
        restored.finish()


def test_device_rejecting_cached_bytes_is_a_warned_miss(tmp_path, fake_devices):
    class Picky(FakeDevice):
        def create_program(self, context, model, cache):
            if model is None:
                raise NNAdapterError("incompatible program bytes", ResultCode.DEVICE_INTERNAL_ERROR)
            return super().create_program(context, model, cache)

    context = Context(fake_devices(Picky("picky_device")))
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), context)
    compilation.finish()
    Execution(compilation).run([np.ones((2, 3), np.float32)])
    restored = Compilation(None, TOKEN, None, str(tmp_path), context)
    with pytest.warns(NncCacheWarning, match="rejected"):
        with pytest.raises(CacheMissError):
            restored.finish()


def test_no_file_when_a_device_cannot_cache(tmp_path, fake_devices):
    context = Context(fake_devices(FakeDevice("nocache_device", cacheable=False)))
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), context)
    compilation.finish()
    with pytest.warns(NncCacheWarning, match="nocache_device"):
        Execution(compilation).run([np.ones((2, 3), np.float32)])
    assert os.listdir(tmp_path) == []


# -- multi-device partitioning -----------------------------------------------------------------------------
def two_fake_devices(fake_devices, **kwargs):
    return fake_devices(FakeDevice("fake_d0", "d0", **kwargs), FakeDevice("fake_d1", "d1", **kwargs))


def program_summary(compilation):
    return [(p.device.name, [op.type.name for op in p.handle.model.operations], p.input_indexes, p.output_indexes)
            for p in compilation.programs]


def test_merge_that_would_close_a_cycle_is_refused(fake_devices):
    b = Builder(2, 3)
    a = b.relu(b.x, "d0_a")
    bb = b.relu(a, "d1_b")
    c = b.add(a, bb, "d0_c")
    model = b.finish([c])
    compilation = Compilation(model, context=Context(two_fake_devices(fake_devices)))
    compilation.finish()
    assert program_summary(compilation) == [
        ("fake_d0", ["RELU"], [-1], [0]),
        ("fake_d1", ["RELU"], [0], [1]),
        ("fake_d0", ["ADD"], [0, 1], [-1]),
    ]
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    np.testing.assert_array_equal(Execution(compilation).run([x])[0], 2 * np.maximum(x, 0))


def test_cluster_never_runs_before_a_cluster_it_reads(fake_devices):
    b = Builder(2, 3)
    p = b.relu(b.x, "d0_p")
    q = b.relu(b.x, "d1_q")
    r = b.add(p, q, "d0_r")
    model = b.finish([r])
    compilation = Compilation(model, context=Context(two_fake_devices(fake_devices)))
    compilation.finish()
    # P and R merge (no outside path between them); that cluster reads Q, so Q's program runs first.
    assert program_summary(compilation) == [
        ("fake_d1", ["RELU"], [-1], [0]),
        ("fake_d0", ["RELU", "ADD"], [-1, 0], [-1]),
    ]
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    np.testing.assert_array_equal(Execution(compilation).run([x])[0], 2 * np.maximum(x, 0))


def test_model_output_read_by_another_device_is_listed_twice(fake_devices):
    b = Builder(3)
    a = b.relu(b.x, "d0_a")
    c = b.add(a, a, "d1_c")
    model = b.finish([a, c])
    compilation = Compilation(model, context=Context(two_fake_devices(fake_devices)))
    compilation.finish()
    assert program_summary(compilation) == [("fake_d0", ["RELU"], [-1], [-1, 0]), ("fake_d1", ["ADD"], [0], [-2])]
    x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
    out_a, out_c = Execution(compilation).run([x])
    np.testing.assert_array_equal(out_a, np.maximum(x, 0))
    np.testing.assert_array_equal(out_c, 2 * np.maximum(x, 0))


def test_first_supporting_device_wins_and_unsupported_fails(fake_devices):
    b = Builder(3)
    model = b.finish([b.relu(b.relu(b.x, "d1_a"), "d0_b")])
    everything = FakeDevice("fake_all")
    devices = fake_devices(FakeDevice("fake_d0", "d0"), everything)
    compilation = Compilation(model, context=Context(devices))
    compilation.finish()
    assert [p.device.name for p in compilation.programs] == ["fake_all", "fake_d0"]

    nobody = fake_devices(FakeDevice("fake_x0", "zz"), FakeDevice("fake_x1", "yy"))
    with pytest.raises(NNAdapterError, match="none of these 2 devices") as info:
        Compilation(model, context=Context(nobody)).finish()
    assert info.value.code == ResultCode.FEATURE_NOT_SUPPORTED

    mute = fake_devices(FakeDevice("fake_m0", "d0", can_tell=False), FakeDevice("fake_m1", "d1"))
    with pytest.raises(NNAdapterError, match="cannot tell"):
        Compilation(model, context=Context(mute)).finish()


def test_multi_device_cache_round_trip(tmp_path, fake_devices):
    STATS.reset()
    b = Builder(2, 3)
    a = b.relu(b.x, "d0_a")
    bb = b.relu(a, "d1_b")
    model = b.finish([b.add(a, bb, "d0_c")])
    devices = two_fake_devices(fake_devices)
    context = Context(devices)
    compilation = Compilation(model, TOKEN, None, str(tmp_path), context)
    compilation.finish()
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    first = Execution(compilation).run([x])[0]
    assert compilation.wait_for_cache_write(timeout=60)
    record = unpack_compilation_record((tmp_path / f"{TOKEN}.nnc").read_bytes())
    assert [p.device_name for p in record.programs] == ["fake_d0", "fake_d1", "fake_d0"]
    assert [p.input_indexes for p in record.programs] == [[-1], [0], [0, 1]]
    restored = Compilation(None, TOKEN, None, str(tmp_path), context)
    restored.finish()
    assert restored.device_names == ["fake_d0", "fake_d1", "fake_d0"]
    np.testing.assert_array_equal(Execution(restored).run([x])[0], first)
    assert (STATS.compiles, STATS.cache_restores, STATS.cache_writes) == (1, 1, 1)


def random_model(seed: int):
    """A random RELU/ADD DAG over x with a random device prefix per operation."""
    rng = random.Random(seed)
    b = Builder(4)
    values = [b.x]
    consumed = set()
    for k in range(rng.randint(3, 14)):
        device = rng.randrange(3)
        if rng.random() < 0.5 or len(values) < 2:
            src = rng.choice(values)
            out = b.relu(src, f"d{device}_{k}")
            consumed.add(id(src))
        else:
            s1, s2 = rng.sample(values, 2)
            out = b.add(s1, s2, f"d{device}_{k}")
            consumed.update((id(s1), id(s2)))
        values.append(out)
    outputs = [v for v in values[1:] if id(v) not in consumed]
    return b.finish(outputs)


def partition_signature(model, device_of):
    clusters = cluster_operations(model, device_of)
    return [(d, [op.index for op in ops]) for d, ops in clusters], clusters


@pytest.mark.parametrize("seed", range(40))
def test_random_partitions_are_deterministic_acyclic_and_exact(seed, fake_devices):
    model = random_model(seed)
    device_of = [int(op.outputs[0].name[1]) for op in model.operations]
    sig1, clusters = partition_signature(model, device_of)
    sig2, _ = partition_signature(model, device_of)
    assert sig1 == sig2
    # every operation in exactly one cluster, one device per cluster
    assert sorted(i for _, ops in sig1 for i in ops) == list(range(len(model.operations)))
    for device, ops in sig1:
        assert all(device_of[i] == device for i in ops)
    # running the submodels in order only ever reads buffers already written
    submodels = build_submodels(model, clusters)
    written = set()
    for sub in submodels:
        assert all(i < 0 or i in written for i in sub.input_indexes)
        written.update(i for i in sub.output_indexes if i >= 0)
    # and a three-device compilation computes exactly what one device does
    devices = fake_devices(FakeDevice("fake_r0", "d0"), FakeDevice("fake_r1", "d1"), FakeDevice("fake_r2", "d2"))
    compilation = Compilation(model, context=Context(devices))
    compilation.finish()
    x = np.random.default_rng(seed).standard_normal(4).astype(np.float32)
    got = Execution(compilation).run([x])
    want = run_model(model, [x])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_assign_devices_takes_the_first_supporting_device():
    model = random_model(3)
    n = len(model.operations)
    flags = [[i % 2 == 0 for i in range(n)], [True] * n]
    assert assign_devices(model, flags, ["a", "b"]) == [0 if i % 2 == 0 else 1 for i in range(n)]


# -- the .nnc written in the background --------------------------------------------------------------------
class SlowExportDevice(FakeDevice):
    """Hands its program bytes over through an exporter that waits for `release` (as intel_openvino's
    export_model would take its time), recording the threads it ran on."""

    def __init__(self, name):
        super().__init__(name)
        import threading

        self.release = threading.Event()
        self.export_threads = []

    def create_program(self, context, model, cache):
        import threading

        program = super().create_program(context, model, cache)
        if model is not None:
            data, cache.buffer = bytes(cache.buffer), bytearray()

            def export():
                self.export_threads.append(threading.current_thread())
                assert self.release.wait(30), "the test never released the export"
                return data

            cache.exporter = export
        return program


def test_the_first_compute_returns_before_its_nnc_is_written_and_readers_wait_for_it(tmp_path, fake_devices):
    import threading

    STATS.reset()
    device = SlowExportDevice("slow_export_device")
    context = Context(fake_devices(device))
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), context)
    compilation.finish()
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    first = Execution(compilation).run([x])[0]  # returns while the export is still blocked
    path = tmp_path / f"{TOKEN}.nnc"
    assert not path.exists() and compilation.cache_path is None and STATS.cache_writes == 0
    assert not wait_for_cache_writes(timeout=0.05) and not compilation.wait_for_cache_write(timeout=0.05)
    assert device.export_threads and device.export_threads[0] is not threading.current_thread()
    np.testing.assert_array_equal(Execution(compilation).run([x])[0], first)  # runs meanwhile
    # A reader of that path waits for the write instead of missing: release the export shortly after.
    threading.Timer(0.2, device.release.set).start()
    restored = Compilation(None, TOKEN, None, str(tmp_path), context)
    restored.finish()
    assert restored.restored_from_cache and STATS.cache_writes == 1 and compilation.cache_path == str(path)
    np.testing.assert_array_equal(Execution(restored).run([x])[0], first)
    assert wait_for_cache_writes(timeout=0) and compilation.wait_for_cache_write(timeout=0)


def test_destroy_waits_for_the_write_and_foreground_mode_writes_before_returning(tmp_path, fake_devices, monkeypatch):
    import threading

    device = SlowExportDevice("slow_export_device")
    context = Context(fake_devices(device))
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), context)
    compilation.finish()
    Execution(compilation).run([np.ones((2, 3), np.float32)])
    threading.Timer(0.2, device.release.set).start()
    compilation.destroy()  # the exporter reads the program destroyed here: destroy waits for it
    assert (tmp_path / f"{TOKEN}.nnc").is_file()

    monkeypatch.setenv("NNADAPTER_BRIDGE_CACHE_WRITE", "foreground")
    other = tmp_path / "foreground"
    compilation = Compilation(relu_add_model(), TOKEN, None, str(other), context)
    compilation.finish()
    Execution(compilation).run([np.ones((2, 3), np.float32)])
    assert (other / f"{TOKEN}.nnc").is_file() and device.export_threads[-1] is threading.current_thread()

    monkeypatch.setenv("NNADAPTER_BRIDGE_CACHE_WRITE", "later")
    with pytest.raises(NNAdapterError, match="NNADAPTER_BRIDGE_CACHE_WRITE='later': expected one of background, "
                                             "foreground") as info:
        Compilation(relu_add_model(), TOKEN, None, str(other), context)
    assert info.value.code == ResultCode.INVALID_PARAMETER


def test_a_failed_background_write_is_a_warning_and_leaves_no_file(tmp_path, monkeypatch):
    from nnadapter_bridge.nnadapter.runtime import compilation as compilation_module

    def full_disk(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compilation_module, "write_file_atomically", full_disk)
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), builtin_context())
    compilation.finish()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Execution(compilation).run([np.ones((2, 3), np.float32)])
        assert compilation.wait_for_cache_write(timeout=60)
    messages = [str(w.message) for w in caught if issubclass(w.category, NncCacheWarning)]
    assert len(messages) == 1 and "cannot write the model cache" in messages[0] and "No space left" in messages[0]
    assert compilation.cache_path is None and os.listdir(tmp_path) == []


def test_a_process_that_exits_right_after_its_first_result_still_leaves_its_nnc(tmp_path):
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = (
        "import sys, time, numpy as np\n"
        "sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + '/tests/nnadapter')\n"
        "from test_runtime import relu_add_model, builtin_context, TOKEN\n"
        "from nnadapter_bridge.nnadapter import runtime\n"
        "from nnadapter_bridge.nnadapter.runtime import compilation\n"
        "real = compilation.write_file_atomically\n"
        "def slow(path, data):\n"
        "    time.sleep(0.5)\n"
        "    real(path, data)\n"
        "compilation.write_file_atomically = slow\n"
        "c = runtime.Compilation(relu_add_model(), TOKEN, None, sys.argv[2], builtin_context())\n"
        "c.finish()\n"
        "runtime.Execution(c).run([np.ones((2, 3), np.float32)])\n"
        "print('first result', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, root, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "first result" in done.stdout, done.stderr
    assert os.listdir(tmp_path) == [f"{TOKEN}.nnc"]


def test_a_process_forked_during_a_background_write_does_not_wait_for_it(tmp_path, fake_devices):
    """The writing thread exists in the parent only: a forked child reading that cache path, or destroying
    the compilation, never blocks on it (it misses or compiles instead); the parent still writes the file."""
    import multiprocessing
    import threading

    device = SlowExportDevice("slow_export_device")
    context = Context(fake_devices(device))
    compilation = Compilation(relu_add_model(), TOKEN, None, str(tmp_path), context)
    compilation.finish()
    Execution(compilation).run([np.ones((2, 3), np.float32)])  # the export now blocks until released

    def child(queue):
        from nnadapter_bridge.nnadapter import nnc

        queue.put((nnc.has_pending_writes(), nnc.wait_for_cache_writes(timeout=5),
                   compilation.wait_for_cache_write(timeout=5),
                   nnc.read_nnc_file(str(tmp_path / f"{TOKEN}.nnc")) is None))

    queue = multiprocessing.get_context("fork").Queue()
    process = multiprocessing.get_context("fork").Process(target=child, args=(queue,))
    process.start()
    answer = queue.get(timeout=60)
    process.join(60)
    assert answer == (False, True, True, True) and process.exitcode == 0
    threading.Timer(0.1, device.release.set).start()
    assert compilation.wait_for_cache_write(timeout=60) and (tmp_path / f"{TOKEN}.nnc").is_file()
