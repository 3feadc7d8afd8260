"""The model cache seen through the predictor: `.nnc` files, cache buffers, what makes a token change.

Hits and misses are read from the predictor's counters (builds, cache_hits_file, cache_hits_buffer),
never from timings.
"""
from __future__ import annotations

import hashlib
import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning
from nnadapter_bridge.subgraph.cache_key import paddle_lite_cache_token
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

X = np.random.default_rng(11).standard_normal((2, 4)).astype(np.float32)


def run_once(model, cache_dir=None, x=X, properties=None, buffers=(), lite_token=False):
    config = nb.Config()
    config.set_model_file(model)
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(cache_dir)
    if properties is not None:
        config.set_nnadapter_context_properties(properties)
    for token, data in buffers:
        config.set_nnadapter_model_cache_buffers(token, data)
    if lite_token:
        config.set_paddle_lite_cache_token(True)
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    nb.wait_for_cache_writes()  # the .nnc is written by a thread of its own after the first run
    return predictor


def nnc_files(cache_dir) -> list:
    return sorted(f for f in os.listdir(cache_dir) if f.endswith(".nnc"))


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model")


def test_second_predictor_restores_the_program_from_the_nnc_file(model, tmp_path):
    cache = tmp_path / "cache"
    first = run_once(model, cache)
    assert (first.stats.builds, first.stats.cache_hits_file) == (1, 0)
    (token,) = first.cache_tokens()
    assert nnc_files(cache) == [token + ".nnc"]
    second = run_once(model, cache)
    assert (second.stats.builds, second.stats.cache_hits_file) == (0, 1)
    assert second.cache_tokens() == [token]
    np.testing.assert_allclose(second.get_output(0).numpy(), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)


def test_a_changed_weight_misses(model, tmp_path):
    cache = tmp_path / "cache"
    first = run_once(model, cache)
    changed = add_relu_scale_model(tmp_path / "changed", weight=[0.25, -0.5, 0.75, 1.0])
    second = run_once(changed, cache)
    assert (second.stats.builds, second.stats.cache_hits_file) == (1, 0)
    assert second.cache_tokens() != first.cache_tokens()
    assert len(nnc_files(cache)) == 2
    np.testing.assert_allclose(second.get_output(0).numpy(), reference_add_relu_scale(X, [0.25, -0.5, 0.75, 1.0]),
                               rtol=1e-6, atol=1e-6)


def test_a_changed_context_property_misses(model, tmp_path):
    cache = tmp_path / "cache"
    first = run_once(model, cache)
    second = run_once(model, cache, properties="BUILTIN_DEVICE_NUM_THREADS=1;")
    assert (second.stats.builds, second.stats.cache_hits_file) == (1, 0)
    assert second.cache_tokens() != first.cache_tokens()


def test_a_changed_input_shape_misses(model, tmp_path):
    cache = tmp_path / "cache"
    run_once(model, cache)
    x3 = np.ones((3, 4), np.float32)
    second = run_once(model, cache, x=x3)
    assert (second.stats.builds, second.stats.cache_hits_file) == (1, 0)
    np.testing.assert_allclose(second.get_output(0).numpy(), reference_add_relu_scale(x3), rtol=1e-6, atol=1e-6)


def test_cache_buffers_work_without_a_cache_dir_and_are_used_once(model, tmp_path):
    cache = tmp_path / "cache"
    (token,) = run_once(model, cache).cache_tokens()
    data = (cache / (token + ".nnc")).read_bytes()
    predictor = run_once(model, None, buffers=[(token.upper(), data)])  # hex case does not matter
    assert (predictor.stats.builds, predictor.stats.cache_hits_buffer, predictor.stats.cache_hits_file) == (0, 1, 0)
    np.testing.assert_allclose(predictor.get_output(0).numpy(), reference_add_relu_scale(X), rtol=1e-6, atol=1e-6)
    assert all(len(engine.cache_buffers) == 0 for engine in predictor.engines.values())
    predictor.run()  # same shape: the restored program serves it
    assert (predictor.stats.builds, predictor.stats.cache_hits_buffer, predictor.stats.runs) == (0, 1, 2)


def test_a_corrupt_nnc_is_a_warned_miss_and_gets_rewritten(model, tmp_path):
    cache = tmp_path / "cache"
    (token,) = run_once(model, cache).cache_tokens()
    path = cache / (token + ".nnc")
    good = path.read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF  # the CRC no longer matches
    path.write_bytes(bytes(damaged))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = run_once(model, cache)
    cache_warnings = [w for w in caught if issubclass(w.category, NncCacheWarning)]
    assert len(cache_warnings) == 1, [str(w.message) for w in caught]
    assert token in str(cache_warnings[0].message) or str(path) in str(cache_warnings[0].message)
    assert (second.stats.builds, second.stats.cache_hits_file) == (1, 0)
    assert path.read_bytes() != bytes(damaged)
    third = run_once(model, cache)
    assert (third.stats.builds, third.stats.cache_hits_file) == (0, 1)


def test_paddle_lite_token_of_the_facts_examples():
    assert paddle_lite_cache_token(["huawei_ascend_npu"], {"x": [1, 3, 224, 224]}) == \
        "dd355f05d5db9f910aef9aec6f36e601"
    assert paddle_lite_cache_token(["huawei_ascend_npu"], {"x": [1, 3, 224, 224]},
                                   {"x": [[1, 3, 224, 224], [1, 3, 448, 448]]}) == \
        "dc3846612ef925f36ef03508252e1da2"


def test_paddle_lite_token_sorts_inputs_bytewise_and_concatenates_without_separators():
    token = paddle_lite_cache_token(["a", "b"], {"y": [2], "X": [-1, 5]})
    assert token == hashlib.md5(b"abX-15y2").hexdigest()


def test_paddle_lite_token_mode_names_the_file_as_paddle_lite_would(model, tmp_path):
    cache = tmp_path / "cache"
    predictor = run_once(model, cache, lite_token=True)
    expected = hashlib.md5(b"builtin_devicex24").hexdigest()
    assert predictor.cache_tokens() == [expected]
    assert nnc_files(cache) == [expected + ".nnc"]


def test_a_device_environment_variable_changes_the_token(tmp_path, monkeypatch):
    """BUILTIN_DEVICE_NUM_THREADS from the environment (the fallback for the property) is part of the token."""
    model = add_relu_scale_model(tmp_path / "model")
    x = np.ones((1, 4), np.float32)
    tokens = []
    for value in ("1", "2"):
        monkeypatch.setenv("BUILTIN_DEVICE_NUM_THREADS", value)
        config = nb.Config()
        config.set_model_file(model)
        config.set_nnadapter_model_cache_dir(str(tmp_path / "cache"))
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        tokens.append(predictor.cache_tokens()[0])
    assert tokens[0] != tokens[1]


def _fingerprint_threads(monkeypatch) -> list:
    """Spy on cache_key.subgraph_fingerprint: the threads it runs on."""
    import threading

    from nnadapter_bridge.subgraph import cache_key
    threads = []
    real = cache_key.subgraph_fingerprint

    def spy(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_key, "subgraph_fingerprint", spy)
    return threads


def test_with_nothing_to_restore_the_weights_are_hashed_while_the_program_compiles(model, tmp_path, monkeypatch):
    """An empty cache dir (or none) cannot hold the program: the token is computed on another thread while the
    subgraph converts and compiles, and the .nnc still gets the token of the documented recipe (the same one
    a predictor that looks the file up computes on its own thread)."""
    import threading

    assert nb.wait_for_cache_writes(timeout=60)  # another test's write still pending would send it the usual way
    threads = _fingerprint_threads(monkeypatch)
    cache = tmp_path / "cache"
    first = run_once(model, cache)
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    (token,) = first.cache_tokens()
    assert nnc_files(cache) == [token + ".nnc"] and first.stats.builds == 1
    second = run_once(model, cache)  # the dir holds a .nnc now: looked up first, hashed on this thread
    assert threads[1] is threading.main_thread()
    assert (second.stats.builds, second.stats.cache_hits_file, second.cache_tokens()) == (0, 1, [token])
    without_dir = run_once(model, None)
    assert threads[2] is not threading.main_thread() and without_dir.cache_tokens() == [token]


def test_a_program_still_being_written_is_restored_not_compiled_again(model, tmp_path, monkeypatch):
    """A second predictor started while the first one's .nnc is still being written waits for that file."""
    import time

    from nnadapter_bridge.nnadapter.runtime import compilation

    real = compilation.write_file_atomically

    def slow(path, data):
        time.sleep(0.3)
        real(path, data)

    monkeypatch.setattr(compilation, "write_file_atomically", slow)
    cache = tmp_path / "cache"
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_model_cache_dir(cache)
    first = nb.create_predictor(config)
    first.get_input(0).from_numpy(X)
    first.run()
    assert nnc_files(cache) == []  # still being written
    second = nb.create_predictor(config)
    second.get_input(0).from_numpy(X)
    second.run()
    assert (second.stats.builds, second.stats.cache_hits_file) == (0, 1)
    np.testing.assert_array_equal(second.get_output(0).numpy(), first.get_output(0).numpy())


def test_a_failed_build_with_the_token_pending_raises_the_builds_error(model, tmp_path, monkeypatch):
    import converters.context

    def broken(*args, **kwargs):
        raise nb.ConversionError("simulated conversion failure")

    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_model_cache_dir(tmp_path / "cache")
    predictor = nb.create_predictor(config)  # the support decisions convert for real
    monkeypatch.setattr(converters.context, "convert_subgraph", broken)  # the build's conversion fails
    predictor.get_input(0).from_numpy(X)
    with pytest.raises(nb.ConversionError, match="simulated conversion failure"):
        predictor.run()
    assert not (tmp_path / "cache").exists() or nnc_files(tmp_path / "cache") == []
