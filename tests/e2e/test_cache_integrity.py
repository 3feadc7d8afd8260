"""The model cache must not trust a file name (docs/cache.md): swapped and forged records, special files,
hostile verdict stores and interrupted writes, seen through the predictor on every driver.

Each case checks the three things that matter: the cache was a miss (the predictor compiled), there was
an NncCacheWarning saying why, and the output is the model's own (numpy reference).
"""
from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
import uuid
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter import nnc
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning
from nnadapter_bridge.subgraph.support_decisions import _STORE_FORMAT
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
PROPERTIES = "INTEL_OPENVINO_INFERENCE_NUM_THREADS=1;MICROSOFT_ONNXRUNTIME_NUM_THREADS=1;BUILTIN_DEVICE_NUM_THREADS=1"
OTHER_WEIGHT = [0.3, -0.2, 0.1, 0.9]  # model B: same input/output names and shapes as model A
KEY = "integrity-test-key"
X = np.random.default_rng(23).standard_normal((2, 4)).astype(np.float32)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("integrity-models")
    return add_relu_scale_model(base / "a"), add_relu_scale_model(base / "b", weight=OTHER_WEIGHT)


def make_config(model, cache_dir=None, device="builtin_device", buffers=(), key=None, lite_token=False):
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names([device])
    config.set_nnadapter_context_properties(PROPERTIES)
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    for token, data in buffers:
        config.set_nnadapter_model_cache_buffers(token, data)
    if key is not None:
        config.set_nnadapter_model_cache_key(key)
    if lite_token:
        config.set_paddle_lite_cache_token(True)
    return config


def run(model, cache_dir=None, **kwargs):
    """(predictor, output, cache warning messages) of one create + run."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = nb.create_predictor(make_config(model, cache_dir, **kwargs))
        predictor.get_input(0).from_numpy(X)
        predictor.run()
        nb.wait_for_cache_writes()  # the .nnc is written by a thread of its own after the first run
    messages = [str(w.message) for w in caught if issubclass(w.category, NncCacheWarning)]
    return predictor, predictor.get_output(0).numpy(), messages


def assert_model_a_output(output):
    np.testing.assert_allclose(output, reference_add_relu_scale(X), rtol=1e-5, atol=1e-5)


def assert_warned_miss(predictor, messages, *fragments):
    assert predictor.stats.builds == 1 and predictor.stats.cache_hits_file == 0, predictor.stats
    assert predictor.stats.cache_hits_buffer == 0
    assert messages, "no NncCacheWarning"
    for fragment in fragments:
        assert fragment in messages[0], messages


def cached(model, cache_dir, **kwargs):
    """Run once so the cache dir holds the model's .nnc; (token, path)."""
    predictor, _, messages = run(model, cache_dir, **kwargs)
    assert not messages, messages
    (token,) = predictor.cache_tokens()
    return token, os.path.join(str(cache_dir), token + ".nnc")


def recrc(data: bytes) -> bytes:
    """The bytes with the header CRC recomputed over everything after the header (what a forger does)."""
    if len(data) < nnc.HEADER_SIZE:
        return data
    return data[:8] + struct.pack("<I", nnc.crc32c_naive(data[nnc.HEADER_SIZE:])) + data[12:]


def program_bytes_offset(data: bytes) -> int:
    """Offset of the middle byte of cache_0_model_buffer's value in a .nnc."""
    views = nnc.unpack_container_views(data)
    value = bytes(views["cache_0_model_buffer"])
    start = data.index(b"cache_0_model_buffer") + len(b"cache_0_model_buffer")
    assert data[start:start + len(value)] == value
    return start + len(value) // 2


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail instead of hanging (a FIFO used to block the reader forever)."""
    def expired(signum, frame):
        raise TimeoutError(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- a swapped record ----------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_another_models_nnc_under_this_token_is_a_warned_miss_and_replaced(device, models, tmp_path):
    model_a, model_b = models
    token_b, path_b = cached(model_b, tmp_path / "b", device=device)
    token_a, path_a = cached(model_a, tmp_path / "a", device=device)
    assert token_a != token_b
    shutil.copyfile(path_b, path_a)  # B's program, under A's name
    predictor, output, messages = run(model_a, tmp_path / "a", device=device)
    assert_warned_miss(predictor, messages, token_a, "written for token")
    assert_model_a_output(output)
    with open(path_a, "rb") as f:
        assert f.read() != open(path_b, "rb").read()  # rewritten with A's program
    again, output, messages = run(model_a, tmp_path / "a", device=device)
    assert (again.stats.builds, again.stats.cache_hits_file, messages) == (0, 1, [])
    assert_model_a_output(output)


@pytest.mark.parametrize("device", DEVICES)
def test_another_models_record_as_a_cache_buffer_is_a_warned_miss(device, models, tmp_path):
    model_a, model_b = models
    token_b, path_b = cached(model_b, tmp_path / "b", device=device)
    token_a, _ = cached(model_a, tmp_path / "a", device=device)
    with open(path_b, "rb") as f:
        predictor, output, messages = run(model_a, None, device=device, buffers=[(token_a, f.read())])
    assert_warned_miss(predictor, messages, token_a, "written for token")
    assert_model_a_output(output)


def test_paddle_lite_token_collision_is_caught_by_the_fingerprint(models, tmp_path):
    """Paddle Lite's plain token is the same for A and B (same device, input names and shapes): B's file IS
    A's file name. The fingerprint entry tells them apart."""
    model_a, model_b = models
    token_b, _ = cached(model_b, tmp_path, lite_token=True)
    predictor, output, messages = run(model_a, tmp_path, lite_token=True)
    assert predictor.cache_tokens() == [token_b]
    assert_warned_miss(predictor, messages, "another model")
    assert_model_a_output(output)


def test_paddle_lite_token_mode_still_reads_a_record_without_identity(models, tmp_path):
    """Lite's own files carry no identity entries; that mode exists to read them."""
    model_a, _ = models
    token, path = cached(model_a, tmp_path, lite_token=True)
    with open(path, "rb") as f:
        entries = nnc.unpack_container(f.read())
    del entries[nnc.TOKEN_KEY], entries[nnc.FINGERPRINT_KEY]
    with open(path, "wb") as f:
        f.write(nnc.pack_container(entries))
    predictor, output, messages = run(model_a, tmp_path, lite_token=True)
    assert (predictor.stats.builds, predictor.stats.cache_hits_file, messages) == (0, 1, [])
    assert_model_a_output(output)
    # Outside that mode, a record that does not say what it is for is a miss.
    _, path = cached(model_a, tmp_path / "extended")
    with open(path, "rb") as f:
        entries = nnc.unpack_container(f.read())
    del entries[nnc.TOKEN_KEY], entries[nnc.FINGERPRINT_KEY]
    with open(path, "wb") as f:
        f.write(nnc.pack_container(entries))
    predictor, output, messages = run(model_a, tmp_path / "extended")
    assert_warned_miss(predictor, messages, "no 'nnadapter_bridge_token'")
    assert_model_a_output(output)


def test_an_edited_identity_with_a_recomputed_crc_is_a_miss_without_a_key(models, tmp_path):
    model_a, _ = models
    token, path = cached(model_a, tmp_path)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    at = data.index(token.encode())
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    with open(path, "wb") as f:
        f.write(recrc(bytes(data)))
    predictor, output, messages = run(model_a, tmp_path)
    assert_warned_miss(predictor, messages, "written for token")
    assert_model_a_output(output)


# -- keyed integrity -------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_with_a_key_an_edit_inside_the_program_with_a_recomputed_crc_is_a_warned_miss(device, models, tmp_path):
    """Without a key such an edit is NOT detected (docs/cache.md): only the HMAC covers the program bytes."""
    model_a, _ = models
    token, path = cached(model_a, tmp_path, device=device, key=KEY)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    assert data[-nnc.MAC_PADDING - nnc.MAC_SIZE - len(nnc.MAC_KEY):].startswith(nnc.MAC_KEY.encode())
    data[program_bytes_offset(bytes(data))] ^= 0x01
    forged = recrc(bytes(data))
    nnc.unpack_container(forged)  # a valid container: the CRC alone cannot tell
    with open(path, "wb") as f:
        f.write(forged)
    predictor, output, messages = run(model_a, tmp_path, device=device, key=KEY)
    assert_warned_miss(predictor, messages, "HMAC-SHA256 mismatch")
    assert_model_a_output(output)
    buffered, output, messages = run(model_a, None, device=device, key=KEY, buffers=[(token, forged)])
    assert_warned_miss(buffered, messages, "HMAC-SHA256 mismatch")
    assert_model_a_output(output)


def test_the_key_comes_from_the_environment_and_an_unsigned_or_foreign_record_is_a_miss(models, tmp_path,
                                                                                       monkeypatch):
    model_a, _ = models
    _, path = cached(model_a, tmp_path)  # no key: written without a MAC
    monkeypatch.setenv(nnc.CACHE_KEY_ENV, KEY)
    predictor, output, messages = run(model_a, tmp_path)
    assert_warned_miss(predictor, messages, "has no '~nnadapter_bridge_hmac_sha256' entry")
    assert_model_a_output(output)
    predictor, output, messages = run(model_a, tmp_path)  # now written with the environment's key
    assert (predictor.stats.builds, predictor.stats.cache_hits_file, messages) == (0, 1, [])
    predictor, output, messages = run(model_a, tmp_path, key="another key")  # the setter wins
    assert_warned_miss(predictor, messages, "HMAC-SHA256 mismatch")
    assert_model_a_output(output)
    monkeypatch.delenv(nnc.CACHE_KEY_ENV)
    predictor, output, messages = run(model_a, tmp_path)  # no key: the MAC entry is ignored, the CRC holds
    assert (predictor.stats.builds, predictor.stats.cache_hits_file, messages) == (0, 1, [])
    assert_model_a_output(output)


@pytest.fixture(scope="module")
def signed_record(models, tmp_path_factory):
    model_a, _ = models
    token, path = cached(model_a, tmp_path_factory.mktemp("signed"), key=KEY)
    with open(path, "rb") as f:
        return token, f.read()


def _mutate(data: bytes, operations) -> bytes:
    out = bytearray(data)
    for kind, position, value in operations:
        where = position % (len(out) + 1)
        if kind == "xor" and where < len(out):
            out[where] ^= value % 255 + 1
        elif kind == "insert":
            out[where:where] = bytes([value % 256]) * (value % 7 + 1)
        elif kind == "delete":
            del out[where:where + value % 64 + 1]
        elif kind == "truncate":
            del out[where:]
        elif kind == "copy":  # a run of the record copied over another place (e.g. one entry over another)
            length = value % 96 + 1
            source = (position * 7 + value) % (len(out) + 1)
            out[where:where + length] = out[source:source + length]
    return bytes(out)


MUTATION = st.tuples(st.sampled_from(["xor", "xor", "insert", "delete", "truncate", "copy"]),
                     st.integers(0, 1 << 20), st.integers(0, 1 << 16))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(operations=st.lists(MUTATION, min_size=1, max_size=4))
def test_random_mutations_with_a_recomputed_crc_never_give_a_wrong_output(models, signed_record, tmp_path,
                                                                          operations):
    model_a, _ = models
    token, data = signed_record
    mutated = recrc(_mutate(data, operations))
    directory = tmp_path / f"case-{uuid.uuid4().hex}"
    directory.mkdir()
    (directory / (token + ".nnc")).write_bytes(mutated)
    predictor, output, messages = run(model_a, directory, key=KEY)
    assert_model_a_output(output)
    if mutated == data:  # only the CRC field was touched, and recomputed: the same record
        assert predictor.stats.cache_hits_file == 1
    else:
        assert_warned_miss(predictor, messages)
    buffered, output, messages = run(model_a, None, key=KEY, buffers=[(token, mutated)] if mutated else ())
    assert_model_a_output(output)
    if mutated and mutated != data:
        assert_warned_miss(buffered, messages)


# -- special files -----------------------------------------------------------------------------------
def _symlink_to(target):
    def make(path):
        os.symlink(target, path)
    return make


def _fifo(path):
    os.mkfifo(path)


def _directory(path):
    os.mkdir(path)


def _huge_declared_entry(path):
    with open(path, "wb") as f:
        body = struct.pack("<QQ", 20, 1 << 62) + b"cache_0_model_buffer"
        f.write(struct.pack("<IIIIQ", nnc.MAGIC, nnc.VERSION, nnc.crc32c_naive(body), 0, 1) + body)


def _huge_declared_count(path):
    with open(path, "wb") as f:
        f.write(struct.pack("<IIIIQ", nnc.MAGIC, nnc.VERSION, 0, 0, 1 << 60) + bytes(64))


def _huge_sparse_file(path):
    with open(path, "wb") as f:
        f.truncate(nnc.DEFAULT_MAX_FILE_SIZE + 1)  # sparse: nothing is written


SPECIAL_FILES = {
    "symlink to /dev/zero": (_symlink_to("/dev/zero"), "symbolic link"),
    "symlink to /dev/urandom": (_symlink_to("/dev/urandom"), "symbolic link"),
    "FIFO": (_fifo, "FIFO"),
    "directory": (_directory, "directory"),
    "entry declaring 2**62 bytes": (_huge_declared_entry, "past the end"),
    "header declaring 2**60 entries": (_huge_declared_count, "entries"),
    "sparse file over the size cap": (_huge_sparse_file, "limit"),
}


@pytest.mark.parametrize("case", list(SPECIAL_FILES))
def test_special_files_are_a_quick_warned_miss(case, models, tmp_path):
    model_a, _ = models
    token, path = cached(model_a, tmp_path)
    os.unlink(path)
    make, reason = SPECIAL_FILES[case]
    make(path)
    started = time.monotonic()
    with deadline(10):
        predictor, output, messages = run(model_a, tmp_path)
    assert time.monotonic() - started < 2.0
    assert_warned_miss(predictor, messages, reason)
    assert_model_a_output(output)
    if case != "directory":  # the rename replaces the special file itself (never what a link points to)
        assert os.path.isfile(path) and not os.path.islink(path)
        again, _, messages = run(model_a, tmp_path)
        assert (again.stats.cache_hits_file, messages) == (1, [])


# -- the support verdict store ------------------------------------------------------------------------------
def _support_file(cache_dir) -> str:
    (name,) = [n for n in os.listdir(cache_dir) if n.startswith("support-") and n.endswith(".json")]
    return os.path.join(str(cache_dir), name)


@pytest.mark.parametrize("content, why", [
    (b"[" * 100000, "levels deep"),  # past orjson's depth limit (1024): refused without recursing
    (b'{"a":' * 50000, "levels deep"),
    (b"[" * 1025 + b"]" * 1025, "levels deep"),  # well-formed, one level past the limit
    (b"[" * 17 + b"]" * 17, f"not a {_STORE_FORMAT} file"),  # well-formed and shallow: not a store
])
def test_a_deeply_nested_verdict_store_is_ignored_with_a_warning(content, why, models, tmp_path):
    model_a, _ = models
    cached(model_a, tmp_path)
    path = _support_file(tmp_path)
    with open(path, "wb") as f:
        f.write(content)
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = nb.create_predictor(make_config(model_a, tmp_path))
    assert time.monotonic() - started < 2.0
    messages = [str(w.message) for w in caught if issubclass(w.category, NncCacheWarning)]
    assert len(messages) == 1 and "support verdict cache" in messages[0] and why in messages[0], messages
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    assert_model_a_output(predictor.get_output(0).numpy())


@pytest.mark.parametrize("make, reason", [(_symlink_to("/dev/zero"), "symbolic link"), (_fifo, "FIFO")])
def test_a_verdict_store_that_is_a_special_file_is_ignored_quickly(make, reason, models, tmp_path):
    model_a, _ = models
    cached(model_a, tmp_path)
    path = _support_file(tmp_path)
    os.unlink(path)
    make(path)
    with deadline(10), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = nb.create_predictor(make_config(model_a, tmp_path))
    messages = [str(w.message) for w in caught if issubclass(w.category, NncCacheWarning)]
    assert any("support verdict cache" in m and reason in m for m in messages), messages
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    assert_model_a_output(predictor.get_output(0).numpy())


# -- temporary files of interrupted writes ---------------------------------------------------------------
def test_stale_temporary_files_are_removed_when_the_dir_is_opened_and_fresh_ones_kept(models, tmp_path):
    model_a, _ = models
    tmp_path.mkdir(exist_ok=True)
    stale, fresh = tmp_path / ".tmp-stale123.nnc", tmp_path / ".tmp-writing1.nnc"
    not_ours = tmp_path / ".tmp-notes.txt"
    for path in (stale, fresh, not_ours):
        path.write_bytes(b"half a record")
    old = time.time() - nnc.DEFAULT_TMP_MAX_AGE_S - 60
    os.utime(stale, (old, old))
    os.utime(not_ours, (old, old))
    predictor, output, _ = run(model_a, tmp_path)
    assert_model_a_output(output)
    assert not stale.exists()
    assert fresh.exists() and not_ours.exists()  # another process writing right now; not a cache file


ROUNDS = 20
STRESS_CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    import nnadapter_bridge as nb

    model, cache_dir, rounds, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    # A slow disk: 30 ms between a temporary file's last byte and its rename, so a kill can land there.
    replace = os.replace
    def slow_replace(source, target):
        import time
        time.sleep(0.03)
        replace(source, target)
    os.replace = slow_replace
    w = np.linspace(-1.0, 1.0, 4).astype(np.float32)
    rng = np.random.default_rng(seed)
    for r in range(rounds):
        # A new shape each round, the same in 4 processes: every round races 4 writers for one new token.
        x = rng.standard_normal((1 + r + rounds * (seed % 2), 4)).astype(np.float32)
        config = nb.Config()
        config.set_model_file(model)
        config.set_nnadapter_model_cache_dir(cache_dir)
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        want = (2.0 * np.maximum(x + w, 0.0) + 0.5).astype(np.float32)
        good = np.allclose(predictor.get_output(0).numpy(), want, rtol=1e-5, atol=1e-5)
        s = predictor.stats
        print("ok" if good else "BAD", r, s.builds, s.cache_hits_file, flush=True)
""")


def test_stress_concurrent_processes_killed_mid_way(models, tmp_path, monkeypatch):
    """8 processes x ROUNDS rounds on one cache dir (a new input shape each round, the same for 4 processes, so every
    round races 4 writers for one token), 3 of them killed
    with SIGKILL at random moments: every completed round is right, and after one more opening of the dir
    no temporary file is left."""
    model_a, _ = models
    cache = tmp_path / "cache"
    cache.mkdir()
    planted = cache / ".tmp-planted0.nnc"  # as left by a writer killed long ago
    planted.write_bytes(b"x")
    os.utime(planted, (time.time() - 3600, time.time() - 3600))
    script = tmp_path / "child.py"
    script.write_text(STRESS_CHILD)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(nnc.CACHE_KEY_ENV, None)
    rng = random.Random(5)
    children = [subprocess.Popen([sys.executable, str(script), model_a, str(cache), str(ROUNDS), str(seed)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
                for seed in range(8)]
    victims = rng.sample(range(8), 3)
    seen = {}
    for index in victims:  # each after a random number of completed rounds, a random moment into the next
        child, lines = children[index], []
        for _ in range(rng.randrange(ROUNDS // 2)):
            line = child.stdout.readline()
            if not line:
                break
            lines.append(line)
        time.sleep(rng.uniform(0.0, 0.08))
        child.kill()  # SIGKILL: no cleanup runs in the child
        seen[index] = "".join(lines)
    outputs = [seen.get(index, "") + child.communicate(timeout=120)[0] for index, child in enumerate(children)]
    completed = 0
    for index, (child, output) in enumerate(zip(children, outputs)):
        lines = output.split()
        assert "BAD" not in lines, f"child {index} computed a wrong output:\n{output}"
        completed += output.count("ok ")
        if index not in victims:
            assert child.returncode == 0 and output.count("ok ") == ROUNDS, (index, child.returncode, output)
    assert completed >= 5 * ROUNDS
    assert not planted.exists()  # removed by the first child to open the dir
    monkeypatch.setenv(nnc.TMP_MAX_AGE_ENV, "0")  # everyone is dead now: every temporary file is stale
    predictor, output, messages = run(model_a, cache)
    assert_model_a_output(output)
    assert not messages, messages
    assert [n for n in os.listdir(cache) if n.startswith(".tmp-")] == []
    for name in os.listdir(cache):
        if name.endswith(".nnc"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert nnc.read_nnc_file(str(cache / name), ["builtin_device"]) is not None, name
