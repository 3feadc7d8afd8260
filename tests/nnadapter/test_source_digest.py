"""nnadapter.source_digest: the code digests in the cache keys, remembered across starts by the files' identities.

The expected digests are computed here with hashlib from the files' bytes, not by the module under test.
"""
from __future__ import annotations

import hashlib
import os
import warnings

import pytest

from nnadapter_bridge.nnadapter import source_digest
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning


@pytest.fixture
def fresh(monkeypatch):
    """A process that has computed no digest yet and keeps none (what a new start sees)."""
    monkeypatch.setattr(source_digest, "_computed", {})
    monkeypatch.setattr(source_digest, "_memo_dir", None)

    def restart():
        monkeypatch.setattr(source_digest, "_computed", {})

    return restart


@pytest.fixture
def not_racy(monkeypatch):
    monkeypatch.setattr(source_digest, "RACY_NS", -(1 << 62))


def _files(tmp_path, **contents) -> list:
    found = []
    for name, data in contents.items():
        path = tmp_path / f"{name}.py"
        if data is not None:
            path.write_bytes(data)
        found.append((f"pkg/{name}.py", str(path)))
    return found


def _expected(files) -> str:
    digest = hashlib.md5()
    for name, path in files:
        digest.update(name.encode() + b"\0")
        digest.update(open(path, "rb").read() if os.path.exists(path) else b"-")
    return digest.hexdigest()[:16]


def _refuse_hashing(monkeypatch):
    def refuse(files):
        raise AssertionError("hashed the sources although their digest was remembered")

    monkeypatch.setattr(source_digest, "_hash", refuse)


def test_the_digest_is_md5_of_names_and_bytes_once_per_process(tmp_path, fresh, monkeypatch):
    files = _files(tmp_path, a=b"x = 1\n", b=b"y = 2\n", gone=None)
    first = source_digest.files_digest("code", lambda: files)
    assert first == _expected(files)
    (tmp_path / "a.py").write_bytes(b"x = 3\n")
    _refuse_hashing(monkeypatch)
    assert source_digest.files_digest("code", lambda: files) == first  # this process's sources are the ones it loaded
    assert source_digest.MEMO_NAME not in os.listdir(tmp_path)  # no memo dir: nothing written


def test_a_later_start_reads_the_remembered_digest(tmp_path, fresh, monkeypatch, not_racy):
    files = _files(tmp_path, a=b"x = 1\n", b=b"y = 2\n")
    memo = tmp_path / "cache"
    source_digest.remember_in(str(memo))
    want = source_digest.files_digest("code", lambda: files)
    assert want == _expected(files)
    assert (memo / source_digest.MEMO_NAME).is_file()
    fresh()
    _refuse_hashing(monkeypatch)
    assert source_digest.files_digest("code", lambda: files) == want


def test_a_source_rewritten_with_the_same_size_and_times_is_hashed_again(tmp_path, fresh, not_racy):
    files = _files(tmp_path, a=b"x = 1\n")
    source_digest.remember_in(str(tmp_path / "cache"))
    first = source_digest.files_digest("code", lambda: files)
    path = tmp_path / "a.py"
    before = os.stat(path)
    with open(path, "r+b") as f:  # in place: the same inode and size
        f.write(b"x = 2\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    fresh()
    second = source_digest.files_digest("code", lambda: files)
    assert second == _expected(files) != first


def test_sources_changed_a_moment_ago_are_not_remembered(tmp_path, fresh):
    files = _files(tmp_path, a=b"x = 1\n")  # written just now: within RACY_NS
    source_digest.remember_in(str(tmp_path / "cache"))
    assert source_digest.files_digest("code", lambda: files) == _expected(files)
    assert not (tmp_path / "cache" / source_digest.MEMO_NAME).exists()


@pytest.mark.parametrize("data", [b"{", b"[]", b'{"format": "other", "digests": {}}'])
def test_a_damaged_memo_is_one_warning_and_the_sources_are_hashed(tmp_path, fresh, not_racy, data):
    files = _files(tmp_path, a=b"x = 1\n")
    memo = tmp_path / "cache"
    memo.mkdir()
    (memo / source_digest.MEMO_NAME).write_bytes(data)
    source_digest.remember_in(str(memo))
    with pytest.warns(NncCacheWarning, match="code digests .* are unusable"):
        assert source_digest.files_digest("code", lambda: files) == _expected(files)
    fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rewritten: no warning now
        source_digest.files_digest("code", lambda: files)


def test_the_memo_keeps_the_latest_entries(tmp_path, fresh, not_racy, monkeypatch):
    monkeypatch.setattr(source_digest, "MAX_ENTRIES", 3)
    source_digest.remember_in(str(tmp_path / "cache"))
    for k in range(5):
        fresh()
        files = _files(tmp_path, a=b"x = %d\n" % k)
        source_digest.files_digest(f"label{k}", lambda: files)  # noqa: B023 - called before the loop goes on
    import orjson

    document = orjson.loads((tmp_path / "cache" / source_digest.MEMO_NAME).read_bytes())
    assert len(document["digests"]) == 3
