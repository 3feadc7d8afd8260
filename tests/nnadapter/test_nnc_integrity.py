"""What a .nnc must say about itself and how it is read (docs/cache.md): the identity entries, the keyed
HMAC, safe file access, the cleanup of interrupted writes, and the verdict store's bounded parsing."""
from __future__ import annotations

import hashlib
import hmac
import os
import random
import struct
import time
import warnings

import numpy as np
import pytest

from nnadapter_bridge.errors import ConfigError
from nnadapter_bridge.nnadapter import nnc
from nnadapter_bridge.nnadapter.codes import Lifetime, OperationType, Precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import (
    CacheIdentity,
    CompilationRecord,
    NncCacheWarning,
    ProgramRecord,
    load_compilation_record,
    pack_compilation_record,
    unpack_container,
)
from nnadapter_bridge.nnadapter.types import OperandType

TOKEN = "0123456789abcdef0123456789abcdef"
FINGERPRINT = "f" * 64
KEY = b"unit-test-key"
IDENTITY = CacheIdentity(TOKEN, FINGERPRINT)


def record(buffer=b"program-bytes" * 10):
    in_t = OperandType(precision=Precision.FLOAT32, dims=(1, 3), lifetime=Lifetime.MODEL_INPUT)
    out_t = OperandType(precision=Precision.FLOAT32, dims=(1, 3), lifetime=Lifetime.MODEL_OUTPUT)
    return CompilationRecord([in_t], [out_t], [ProgramRecord("builtin_device", [in_t], [-1], [out_t], [-1], buffer)])


def load(data, **kwargs):
    """(record or None, cache warning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = load_compilation_record(data, "test", ["builtin_device"], **kwargs)
    return result, [str(w.message) for w in caught if issubclass(w.category, NncCacheWarning)]


def recrc(data: bytes) -> bytes:
    return data[:8] + struct.pack("<I", nnc.crc32c_naive(data[24:])) + data[12:]


# -- the format ----------------------------------------------------------------------------------------
def test_identity_entries_are_extra_keys_and_leave_paddle_lites_keys_as_they_were():
    plain = unpack_container(pack_compilation_record(record()))
    identified = unpack_container(pack_compilation_record(record(), IDENTITY))
    assert set(identified) - set(plain) == {"nnadapter_bridge_fingerprint", "nnadapter_bridge_token"}
    assert {k: identified[k] for k in plain} == plain
    assert identified["nnadapter_bridge_token"] == TOKEN.encode()
    assert identified["nnadapter_bridge_fingerprint"] == FINGERPRINT.encode()
    assert list(identified) == sorted(identified, key=str.encode)  # still one sorted container


def test_the_token_is_stored_lower_case_and_the_fingerprint_only_when_known():
    entries = unpack_container(pack_compilation_record(record(), CacheIdentity(TOKEN.upper())))
    assert entries["nnadapter_bridge_token"] == TOKEN.encode() and "nnadapter_bridge_fingerprint" not in entries
    result, messages = load(pack_compilation_record(record(), CacheIdentity(TOKEN.upper())),
                            expect=CacheIdentity(TOKEN))
    assert result is not None and not messages


def test_the_mac_is_the_last_entry_and_an_hmac_over_the_whole_file():
    data = pack_compilation_record(record(), IDENTITY, KEY)
    entries = unpack_container(data)  # a valid container: any reader of the format can read it
    assert list(entries)[-1] == nnc.MAC_KEY == "~nnadapter_bridge_hmac_sha256"
    mac = entries[nnc.MAC_KEY]
    assert len(mac) == 32 and data[-3 - 32:-3] == mac and data[-3:] == b"\0\0\0"
    # Independently: HMAC-SHA256 over the file with the CRC field and the MAC bytes zeroed.
    zeroed = data[:8] + bytes(4) + data[12:-35] + bytes(32) + data[-3:]
    assert mac == hmac.new(KEY, zeroed, hashlib.sha256).digest()
    # The CRC fixed up by linearity equals a full recompute.
    assert struct.unpack_from("<I", data, 8)[0] == nnc.crc32c_naive(data[24:])
    # Everything but the MAC entry is what an unsigned pack gives.
    unsigned = unpack_container(pack_compilation_record(record(), IDENTITY))
    assert {k: v for k, v in entries.items() if k != nnc.MAC_KEY} == unsigned


@pytest.mark.parametrize("size", [0, 1, 4095, 70001])
def test_signed_records_of_any_program_size_round_trip(size):
    data = pack_compilation_record(record(bytes(random.Random(size).randbytes(size))), IDENTITY, KEY)
    result, messages = load(data, expect=IDENTITY, key=KEY)
    assert result is not None and not messages
    assert bytes(result.programs[0].model_buffer) == random.Random(size).randbytes(size)


def test_keys_decide_what_is_accepted():
    signed = pack_compilation_record(record(), IDENTITY, KEY)
    unsigned = pack_compilation_record(record(), IDENTITY)
    assert load(signed, expect=IDENTITY, key=KEY)[0] is not None
    assert load(signed, expect=IDENTITY)[0] is not None  # no key: the MAC entry is ignored, the CRC holds
    result, messages = load(signed, expect=IDENTITY, key=b"other")
    assert result is None and "HMAC-SHA256 mismatch" in messages[0]
    result, messages = load(unsigned, expect=IDENTITY, key=KEY)
    assert result is None and "no '~nnadapter_bridge_hmac_sha256' entry" in messages[0]


def test_with_a_key_every_byte_changed_with_a_recomputed_crc_is_a_miss():
    data = pack_compilation_record(record(), IDENTITY, KEY)
    rng = random.Random(3)
    for offset in range(len(data)):
        if 8 <= offset < 12:
            continue  # the CRC field itself: recomputed below anyway
        damaged = bytearray(data)
        damaged[offset] ^= rng.randrange(1, 256)
        result, messages = load(recrc(bytes(damaged)), expect=IDENTITY, key=KEY)
        assert result is None and len(messages) == 1, f"byte {offset} changed and still accepted"


def test_the_mac_is_checked_before_the_identity_and_the_record():
    entries = unpack_container(pack_compilation_record(record(), IDENTITY, KEY))
    entries["nnadapter_bridge_token"] = b"f" * 32
    entries["num_caches"] = b"garbage"
    forged = nnc.pack_container(entries)  # the old MAC kept, CRC valid
    result, messages = load(forged, expect=IDENTITY, key=KEY)
    assert result is None and "HMAC-SHA256 mismatch" in messages[0]


def test_an_entry_sorting_after_the_mac_is_refused():
    entries = unpack_container(pack_compilation_record(record(), IDENTITY, KEY))
    entries["~~after"] = b"x"
    result, messages = load(nnc.pack_container(entries), expect=IDENTITY, key=KEY)
    assert result is None and "not the last entry" in messages[0]


# -- identity -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("expect, reason", [
    (CacheIdentity("1" * 32, FINGERPRINT), "written for token"),
    (CacheIdentity(TOKEN, "e" * 64), "another model"),
])
def test_another_token_or_fingerprint_is_a_miss(expect, reason):
    result, messages = load(pack_compilation_record(record(), IDENTITY), expect=expect)
    assert result is None and len(messages) == 1 and reason in messages[0]


def test_a_record_without_identity_is_a_miss_unless_unidentified_records_are_accepted():
    bare = pack_compilation_record(record())  # an older version, or Paddle Lite
    result, messages = load(bare, expect=IDENTITY)
    assert result is None and "no 'nnadapter_bridge_token' entry" in messages[0]
    result, messages = load(bare, expect=CacheIdentity(TOKEN, FINGERPRINT, allow_unidentified=True))
    assert result is not None and not messages
    # Accepting unidentified records never accepts a record naming something else.
    result, _ = load(pack_compilation_record(record(), CacheIdentity(TOKEN, "e" * 64)),
                     expect=CacheIdentity(TOKEN, FINGERPRINT, allow_unidentified=True))
    assert result is None


def test_a_record_with_the_token_but_not_the_expected_fingerprint_is_a_miss():
    result, messages = load(pack_compilation_record(record(), CacheIdentity(TOKEN)), expect=IDENTITY)
    assert result is None and "no 'nnadapter_bridge_fingerprint' entry" in messages[0]
    # A reader that knows no fingerprint checks the token only.
    assert load(pack_compilation_record(record(), IDENTITY), expect=CacheIdentity(TOKEN))[0] is not None


def test_resolve_cache_key(monkeypatch):
    monkeypatch.delenv(nnc.CACHE_KEY_ENV, raising=False)
    assert nnc.resolve_cache_key() is None
    assert nnc.resolve_cache_key("k") == b"k" and nnc.resolve_cache_key(b"k") == b"k"
    monkeypatch.setenv(nnc.CACHE_KEY_ENV, "from-env")
    assert nnc.resolve_cache_key() == b"from-env"
    assert nnc.resolve_cache_key("explicit") == b"explicit"
    monkeypatch.setenv(nnc.CACHE_KEY_ENV, "")
    assert nnc.resolve_cache_key() is None


def test_config_cache_key_setter():
    import nnadapter_bridge as nb

    config = nb.Config()
    assert config.nnadapter_model_cache_key() is None
    config.set_nnadapter_model_cache_key("secret")
    assert config.nnadapter_model_cache_key() == b"secret"
    config.set_nnadapter_model_cache_key(b"\x00\x01")
    assert config.nnadapter_model_cache_key() == b"\x00\x01"
    config.set_nnadapter_model_cache_key(None)
    assert config.nnadapter_model_cache_key() is None
    for bad in ("", b"", 5):
        with pytest.raises(ConfigError):
            config.set_nnadapter_model_cache_key(bad)


# -- the runtime: nothing reaches a driver before the checks ---------------------------------------------------
def relu_model():
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2, 3)), "x")
    y = model.add_output("y")
    model.add_operation(OperationType.RELU, [x], [y])
    model.identify_inputs_and_outputs([x], [y])
    model.finish()
    return model


def test_a_forged_record_never_reaches_the_driver(tmp_path, monkeypatch):
    from hal.builtin_device import DRIVER
    from nnadapter_bridge.nnadapter.runtime import CacheMissError, Compilation, Context, Execution, acquire_device

    context = Context([acquire_device("builtin_device")])
    written = Compilation(relu_model(), TOKEN, None, str(tmp_path), context, fingerprint=FINGERPRINT, cache_key=KEY)
    written.finish()
    Execution(written).run([np.ones((2, 3), np.float32)])
    assert written.wait_for_cache_write(timeout=60)
    path = tmp_path / f"{TOKEN}.nnc"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(recrc(bytes(data)))
    restores = []
    original = DRIVER.create_program
    monkeypatch.setattr(DRIVER, "create_program", lambda c, model, cache: restores.append(model) or
                        original(c, model, cache))
    with pytest.warns(NncCacheWarning, match="HMAC-SHA256 mismatch"):
        compilation = Compilation(None, TOKEN, None, str(tmp_path), context, fingerprint=FINGERPRINT, cache_key=KEY)
    with pytest.raises(CacheMissError):
        compilation.finish()
    assert restores == []
    with pytest.warns(NncCacheWarning, match="HMAC-SHA256 mismatch"):
        Compilation(None, TOKEN, bytes(recrc(bytes(data))), "", context, fingerprint=FINGERPRINT, cache_key=KEY)
    assert restores == []


# -- safe reading ----------------------------------------------------------------------------------------
def valid_file(tmp_path, name="t.nnc") -> str:
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(pack_compilation_record(record(), IDENTITY))
    return path


def read(path):
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = nnc.read_nnc_file(path, ["builtin_device"], expect=IDENTITY)
    assert time.monotonic() - started < 1.0
    return result, [str(w.message) for w in caught if issubclass(w.category, NncCacheWarning)]


def test_a_valid_file_reads(tmp_path):
    result, messages = read(valid_file(tmp_path))
    assert result is not None and not messages


def test_a_symlink_is_never_followed_even_to_a_valid_file(tmp_path):
    target = valid_file(tmp_path)
    os.symlink(target, tmp_path / "link.nnc")
    result, messages = read(str(tmp_path / "link.nnc"))
    assert result is None and "symbolic link" in messages[0]


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "/nonexistent/target"])
def test_symlinks_to_devices_or_nowhere_are_a_quick_miss(tmp_path, target):
    os.symlink(target, tmp_path / "link.nnc")
    result, messages = read(str(tmp_path / "link.nnc"))
    assert result is None and "symbolic link" in messages[0]


def test_fifo_directory_and_missing_file(tmp_path):
    os.mkfifo(tmp_path / "fifo.nnc")
    os.mkdir(tmp_path / "dir.nnc")
    assert "FIFO" in read(str(tmp_path / "fifo.nnc"))[1][0]
    assert "directory" in read(str(tmp_path / "dir.nnc"))[1][0]
    assert read(str(tmp_path / "absent.nnc")) == (None, [])  # silent


def test_sizes_are_bounded_by_the_cap_and_by_the_declared_layout(tmp_path, monkeypatch):
    path = valid_file(tmp_path)
    size = os.path.getsize(path)
    monkeypatch.setenv(nnc.MAX_FILE_SIZE_ENV, str(size - 1))
    assert "limit" in read(path)[1][0]
    monkeypatch.setenv(nnc.MAX_FILE_SIZE_ENV, str(size))
    assert read(path)[0] is not None
    monkeypatch.delenv(nnc.MAX_FILE_SIZE_ENV)
    with open(path, "ab") as f:  # 4 bytes the entries do not declare
        f.write(bytes(4))
    assert "the entries declare" in read(path)[1][0]
    sparse = str(tmp_path / "sparse.nnc")
    with open(sparse, "wb") as f:
        f.truncate(nnc.DEFAULT_MAX_FILE_SIZE + 1)
    assert "limit" in read(sparse)[1][0]


def test_the_layout_is_vetted_from_the_headers_alone(tmp_path):
    """declared_container_size reads 24 + 16 bytes per entry, whatever the values declare."""
    path = str(tmp_path / "x.nnc")
    body = struct.pack("<QQ", 1, 1 << 62) + b"k"
    with open(path, "wb") as f:
        f.write(struct.pack("<IIIIQ", nnc.MAGIC, nnc.VERSION, 0, 0, 1) + body)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(nnc.CacheFileError, match="past the end"):
            nnc.declared_container_size(fd, os.path.getsize(path))
    finally:
        os.close(fd)
    with open(path, "wb") as f:
        f.write(b"not a cache file at all" * 3)
    assert "bad magic" in read(path)[1][0]


# -- temporary files ---------------------------------------------------------------------------------------
def touch(path, age_s=0.0):
    with open(path, "wb") as f:
        f.write(b"partial")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))


def test_stale_temporary_files_are_removed_once_per_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(nnc.TMP_MAX_AGE_ENV, raising=False)
    old = nnc.DEFAULT_TMP_MAX_AGE_S + 10
    touch(tmp_path / ".tmp-aaaa1111.nnc", old)
    touch(tmp_path / ".tmp-bbbb2222.nnc")  # being written right now
    touch(tmp_path / ".tmp-user-notes.txt", old)  # not a name mkstemp gives our writes
    touch(tmp_path / "model.nnc", old)
    os.mkdir(tmp_path / ".tmp-cccc3333.nnc")
    os.utime(tmp_path / ".tmp-cccc3333.nnc", (time.time() - old,) * 2)
    assert nnc.clean_stale_temp_files(str(tmp_path)) == [".tmp-aaaa1111.nnc"]
    assert sorted(os.listdir(tmp_path)) == [".tmp-bbbb2222.nnc", ".tmp-cccc3333.nnc", ".tmp-user-notes.txt",
                                            "model.nnc"]
    touch(tmp_path / ".tmp-dddd4444.nnc", old)
    assert nnc.clean_stale_temp_files(str(tmp_path)) == []  # once per dir and process
    assert nnc.clean_stale_temp_files(str(tmp_path), force=True) == [".tmp-dddd4444.nnc"]


def test_the_age_threshold_comes_from_the_environment(tmp_path, monkeypatch):
    touch(tmp_path / ".tmp-eeee5555.nnc", 5)
    monkeypatch.setenv(nnc.TMP_MAX_AGE_ENV, "60")
    assert nnc.clean_stale_temp_files(str(tmp_path)) == []
    monkeypatch.setenv(nnc.TMP_MAX_AGE_ENV, "1")
    assert nnc.clean_stale_temp_files(str(tmp_path), force=True) == [".tmp-eeee5555.nnc"]
    for bad in ("soon", "-3"):
        monkeypatch.setenv(nnc.TMP_MAX_AGE_ENV, bad)
        assert nnc.tmp_max_age_s() == nnc.DEFAULT_TMP_MAX_AGE_S
    assert nnc.clean_stale_temp_files(str(tmp_path / "absent")) == []


def test_the_atomic_writers_temporary_names_are_the_ones_cleaned(tmp_path, monkeypatch):
    names = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: names.append(os.path.basename(src)) or replace(src, dst))
    nnc.write_file_atomically(str(tmp_path / "x.nnc"), b"data")
    assert len(names) == 1 and nnc.cleanup._TMP_NAME.match(names[0])


# -- the verdict store -----------------------------------------------------------------------------------
def _open_store(tmp_path):
    from nnadapter_bridge.subgraph.support_decisions import VerdictStore

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = VerdictStore.open(str(tmp_path), ["builtin_device"], "", "v")
    return store, [str(w.message) for w in caught if issubclass(w.category, NncCacheWarning)]


def _store_path(tmp_path):
    from nnadapter_bridge.subgraph.support_decisions import VerdictStore

    return tmp_path / f"support-{VerdictStore.store_key(['builtin_device'], '', 'v')}.json"


def test_verdict_store_round_trip_still_works(tmp_path):
    from nnadapter_bridge.subgraph.support_decisions import SupportVerdict

    store, messages = _open_store(tmp_path)
    store.put('["relu"]', SupportVerdict(True))
    assert store.save() and not messages
    again, messages = _open_store(tmp_path)
    assert again.get('["relu"]') == SupportVerdict(True) and not messages


@pytest.mark.parametrize("content, reason", [
    (b"[" * 100000, "levels deep"),
    (b"[" * 1025 + b"]" * 1025, "levels deep"),  # well-formed, one level past orjson's limit
    (b'{"format":' * 30000 + b"1" + b"}" * 30000, "levels deep"),
    (b"\xff\xfe", "UTF-8"),
    (b'{"format": "nnadapter-bridge-support', "not valid JSON"),
])
def test_a_hostile_verdict_store_is_ignored_with_one_warning(tmp_path, content, reason):
    _store_path(tmp_path).write_bytes(content)
    store, messages = _open_store(tmp_path)
    assert len(messages) == 1 and reason in messages[0]
    assert store.get("anything") is None


@pytest.mark.parametrize("content, reason", [
    (b"null", "JSON null"),  # valid JSON that is no record: never taken for a missing file
    (b"[" * 1025 + b"]" * 1025, "levels deep"),
    (b"\xff\xfe", "UTF-8"),
    (b"x" * 101, "limit"),
])
def test_a_kept_json_record_that_is_not_one_says_why(tmp_path, content, reason):
    from nnadapter_bridge.nnadapter.nnc import read_kept_json

    path = tmp_path / "record.json"
    assert read_kept_json(str(path), 100) == (None, None)  # no file: a plain miss
    path.write_bytes(b'{"format": 1}')
    assert read_kept_json(str(path), 100) == ({"format": 1}, None)
    path.write_bytes(content)
    document, problem = read_kept_json(str(path), 4096 if reason != "limit" else 100)
    assert document is None and reason in problem
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert read_kept_json(str(link), 100)[1] == "it is a symbolic link (cache files are never followed)"


def test_a_verdict_store_over_the_size_cap_is_not_read(tmp_path, monkeypatch):
    import nnadapter_bridge.subgraph.support_decisions as support_decisions

    _store_path(tmp_path).write_bytes(b" " * 1000)
    monkeypatch.setattr(support_decisions, "MAX_STORE_BYTES", 999)
    store, messages = _open_store(tmp_path)
    assert len(messages) == 1 and "limit" in messages[0]


def test_a_verdict_store_symlink_or_fifo_is_ignored(tmp_path):
    os.symlink("/dev/zero", _store_path(tmp_path))
    assert "symbolic link" in _open_store(tmp_path)[1][0]
    os.unlink(_store_path(tmp_path))
    os.mkfifo(_store_path(tmp_path))
    assert "FIFO" in _open_store(tmp_path)[1][0]
