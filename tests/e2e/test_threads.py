"""Threads (issue 12 part 3): one predictor, one thread at a time (concurrent run() calls are serialised, never
computed on shared state, and a run never reads an input that another thread is refilling); for parallel
runs, Predictor.clone() shares the graph, the weights, the partition and the compiled programs and owns its
execution state (tensors, engine copies of the programs: a new OpenVINO InferRequest per clone, the same
onnxruntime session, builtin_device's stateless program; host executor; lock)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import nnadapter_bridge as nb
from hal.builtin_device.driver import BuiltinDeviceDriver
from hal.protocol import Driver
from nnadapter_bridge.nnadapter.runtime import DeviceManager
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
PROPERTIES = "INTEL_OPENVINO_INFERENCE_NUM_THREADS=1;MICROSOFT_ONNXRUNTIME_NUM_THREADS=1;BUILTIN_DEVICE_NUM_THREADS=1"


def _skip_unless_available(device):
    if device == "intel_openvino":
        pytest.importorskip("openvino")
    if device == "microsoft_onnxruntime":
        pytest.importorskip("onnxruntime")


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model", feed_shape=(-1, 256), weight=np.linspace(-1, 1, 256))


def make_predictor(model, device="builtin_device", cache_dir=None):
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names([device])
    config.set_nnadapter_context_properties(PROPERTIES)
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    return nb.create_predictor(config)


def images(count, rows=64):
    rng = np.random.default_rng(7)
    return [rng.standard_normal((rows, 256)).astype(np.float32) for _ in range(count)]


def expected(x):
    return reference_add_relu_scale(x, np.linspace(-1, 1, 256).astype(np.float32))


def run_threads(workers):
    """Run each callable in its own thread; re-raise the first failure."""
    failures = []

    def guard(work):
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=guard, args=(work,)) for work in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


# -- clones --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_clones_on_two_threads_compute_every_output_right(model, device):
    _skip_unless_available(device)
    predictor = make_predictor(model, device)
    clone = predictor.clone()
    xs = images(2)
    wrong = [0, 0]

    def work(k, p, tries=60):
        def loop():
            for _ in range(tries):
                p.get_input(0).from_numpy(xs[k])
                p.run()
                if not np.allclose(p.get_output(0).numpy(), expected(xs[k]), rtol=1e-5, atol=1e-5):
                    wrong[k] += 1
        return loop

    run_threads([work(0, predictor), work(1, clone)])
    assert wrong == [0, 0]
    assert predictor.stats.builds + clone.stats.builds == 1  # one compile, shared


@pytest.mark.parametrize("device", DEVICES)
def test_a_clone_shares_the_compiled_program_and_has_its_own_execution_state(model, device):
    _skip_unless_available(device)
    predictor = make_predictor(model, device)
    x = images(1)[0]
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    clone = predictor.clone()
    assert clone.graph is predictor.graph and clone.partition is predictor.partition
    assert clone.context is predictor.context
    assert clone.get_input(0) is not predictor.get_input(0)
    with pytest.raises(nb.InputError, match="was not set"):
        clone.run()  # its own (empty) input tensors
    clone.get_input(0).from_numpy(x)
    clone.run()
    np.testing.assert_allclose(clone.get_output(0).numpy(), predictor.get_output(0).numpy(), rtol=1e-6)
    assert clone.stats.builds == 0 and clone.stats.cache_misses == 0
    (original,) = predictor.engines[0].programs
    (copy,) = clone.engines[0].programs
    assert copy.original is original and copy.compilation is not original.compilation
    handle, copied = original.compilation.programs[0].handle, copy.compilation.programs[0].handle
    assert copied is not handle and copy.compilation.programs[0].owns_handle
    if device == "intel_openvino":
        assert copied.compiled_model is handle.compiled_model and copied.request is not handle.request
    elif device == "microsoft_onnxruntime":
        assert copied.session is handle.session
    else:
        assert copied.model is handle.model


def test_clones_made_before_the_first_run_compile_once(model):
    predictor = make_predictor(model)
    clones = [predictor.clone() for _ in range(3)]
    xs = images(4)

    def work(k, p):
        def loop():
            for _ in range(10):
                p.get_input(0).from_numpy(xs[k])
                p.run()
                np.testing.assert_allclose(p.get_output(0).numpy(), expected(xs[k]), rtol=1e-6)
        return loop

    run_threads([work(k, p) for k, p in enumerate([predictor, *clones])])
    assert sum(p.stats.builds for p in [predictor, *clones]) == 1


def test_closing_the_original_leaves_its_clones_running(model):
    predictor = make_predictor(model)
    x = images(1)[0]
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    clone = predictor.clone()
    predictor.close()
    with pytest.raises(nb.ConfigError, match="closed"):
        predictor.run()
    clone.get_input(0).from_numpy(x)
    clone.run()
    np.testing.assert_allclose(clone.get_output(0).numpy(), expected(x), rtol=1e-6)
    clone.close()
    clone.close()  # idempotent


def test_clones_write_the_model_cache_once(model, tmp_path):
    predictor = make_predictor(model, cache_dir=tmp_path / "cache")
    clone = predictor.clone()
    x = images(1)[0]
    clone.get_input(0).from_numpy(x)
    clone.run()
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    assert nb.wait_for_cache_writes(timeout=60)  # the .nnc is written by a thread of its own
    assert len(list((tmp_path / "cache").glob("*.nnc"))) == 1
    assert predictor.stats.builds + clone.stats.builds == 1


class NoCloneDevice(BuiltinDeviceDriver):
    """builtin_device whose programs cannot be cloned (the protocol's default), which checks that no
    program ever runs on two threads at once."""

    name = "test_no_clone_device"

    def __init__(self):
        self.active = set()
        self.overlaps = 0
        self.lock = threading.Lock()

    def clone_program(self, program):
        return Driver.clone_program(self, program)

    def execute_program(self, program, inputs, outputs):
        with self.lock:
            if id(program) in self.active:
                self.overlaps += 1
            self.active.add(id(program))
        try:
            return super().execute_program(program, inputs, outputs)
        finally:
            with self.lock:
                self.active.discard(id(program))


def test_a_program_that_cannot_be_cloned_is_shared_and_never_run_twice_at_once(model):
    driver = NoCloneDevice()
    manager = DeviceManager.instance()
    manager.register(driver, replace=True)
    try:
        predictor = make_predictor(model, driver.name)
        clone = predictor.clone()
        xs = images(2)

        def work(k, p):
            def loop():
                for _ in range(30):
                    p.get_input(0).from_numpy(xs[k])
                    p.run()
                    np.testing.assert_allclose(p.get_output(0).numpy(), expected(xs[k]), rtol=1e-6)
            return loop

        run_threads([work(0, predictor), work(1, clone)])
        # Whichever thread obtained the program first owns it (the two start at once); the other shares it.
        (mine,) = predictor.engines[0].programs
        (theirs,) = clone.engines[0].programs
        a, b = mine.compilation.programs[0], theirs.compilation.programs[0]
        assert a.handle is b.handle and a.lock is b.lock and sorted([a.owns_handle, b.owns_handle]) == [False, True]
        assert driver.overlaps == 0
        clone.close()
        predictor.close()
    finally:
        manager.unregister(driver.name)


# -- one predictor, two threads -------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_one_predictor_on_two_threads_serialises_its_runs(model, device):
    """Both threads run the same inputs: every run must succeed and be right (intel_openvino said "Infer
    Request is busy" before the lock)."""
    _skip_unless_available(device)
    predictor = make_predictor(model, device)
    x = images(1)[0]
    predictor.get_input(0).from_numpy(x)
    results = []

    def loop():
        for _ in range(40):
            predictor.run()
            results.append(predictor.get_output(0).numpy())

    run_threads([loop, loop])
    assert len(results) == 80
    for result in results:
        np.testing.assert_allclose(result, expected(x), rtol=1e-5, atol=1e-5)


class RefillingDevice(BuiltinDeviceDriver):
    """builtin_device that, in the middle of a run, lets a test refill the predictor's input (as another
    thread would) and records what the run read before and after."""

    name = "test_refilling_device"
    during = None

    def execute_program(self, program, inputs, outputs):
        array = inputs[0].access(inputs[0].memory, program.input_types[0].copy())
        before = np.array(array, copy=True)
        if self.during is not None:
            self.during()
        self.seen = (before, np.array(array, copy=True))
        return super().execute_program(program, inputs, outputs)


def test_an_input_refilled_during_a_run_is_never_torn(model):
    driver = RefillingDevice()
    manager = DeviceManager.instance()
    manager.register(driver, replace=True)
    try:
        predictor = make_predictor(model, driver.name)
        first, second = images(2)
        predictor.get_input(0).from_numpy(first)
        predictor.run()  # the same shape again below: from_numpy would refill this very buffer
        driver.during = lambda: predictor.get_input(0).from_numpy(second)
        predictor.get_input(0).from_numpy(first)
        predictor.run()
        before, after = driver.seen
        np.testing.assert_array_equal(before, first)
        np.testing.assert_array_equal(after, first)  # the refill went to a new buffer
        np.testing.assert_allclose(predictor.get_output(0).numpy(), expected(first), rtol=1e-6)
        driver.during = None
        predictor.run()  # the refilled input is the current one now
        np.testing.assert_allclose(predictor.get_output(0).numpy(), expected(second), rtol=1e-6)
    finally:
        manager.unregister(driver.name)


def test_capped_runs_on_several_threads_leave_the_blas_pool_as_it_was(model):
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]

    before = blas_threads()
    predictor = make_predictor(model)  # BUILTIN_DEVICE_NUM_THREADS=1: every run caps the pool
    clones = [predictor.clone() for _ in range(2)]
    xs = images(3)

    def work(k, p):
        def loop():
            for _ in range(20):
                p.get_input(0).from_numpy(xs[k])
                p.run()
        return loop

    run_threads([work(k, p) for k, p in enumerate([predictor, *clones])])
    assert blas_threads() == before


def test_openvino_streams_let_clones_of_one_compiled_model_run_at_once(model):
    """INTEL_OPENVINO_NUM_STREAMS: a compiled model runs one request per stream at a time (the default, one
    stream, queues the clones' requests); N streams share INTEL_OPENVINO_INFERENCE_NUM_THREADS."""
    pytest.importorskip("openvino")
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(["intel_openvino"])
    config.set_nnadapter_context_properties("INTEL_OPENVINO_NUM_STREAMS=2;INTEL_OPENVINO_INFERENCE_NUM_THREADS=2")
    predictor = nb.create_predictor(config)
    x = images(1)[0]
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    (program,) = predictor.engines[0].programs
    assert int(program.compilation.programs[0].handle.compiled_model.get_property("NUM_STREAMS")) == 2
    config.set_nnadapter_context_properties("INTEL_OPENVINO_NUM_STREAMS=-1")
    with pytest.raises(nb.NNAdapterError, match="INTEL_OPENVINO_NUM_STREAMS"):
        nb.create_predictor(config)
