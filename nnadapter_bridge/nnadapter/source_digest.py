"""Digests of source files, computed once per process and remembered across starts by the files' identities.

Owns `files_digest` (md5, 16 hex, of named files' bytes: the code digests in the cache keys, subgraph.cache_key's
`code_digest`, the plan store's and loader.snapshot's `loader_code_digest`) and `remember_in` (the model cache dir
where they are kept, `<dir>/code-digests.json`). Computing cache_key's reads ~1 MB of source (~5 ms at every start);
a start whose files have the identities they had when a digest was recorded reads it from that file instead:
  * the identity of each file: path, device, inode, size, modification and status-change times. Any write or
    time change sets the status-change time to the current time and no user can set it back, so a source edited in
    place, even to the same size and modification time, is hashed again;
  * a digest is recorded only when every file last changed more than RACY_NS before it was read (two writes within
    one tick of a coarse file-system clock could leave the same times).
The file is JSON data read with the cache's safe reader (no symlinks, regular files, at most MAX_MEMO_BYTES); a
damaged one is one NncCacheWarning and is rewritten. It carries no MAC, so the predictor keeps none with an integrity
key (a forged digest could let a program of older code pass for this code's).

Must not import: anything above the ground (it is the ground's; the loader and the subgraph floor call it).
"""
from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence

from nnadapter_bridge.nnadapter.nnc import (
    NncCacheWarning,
    file_identity,
    read_kept_json,
    write_file_atomically,
)
from nnadapter_bridge.nnadapter.text_digest import sha256_hex

MEMO_FORMAT = "nnadapter-bridge-code-digests-v1"
MEMO_NAME = "code-digests.json"
MAX_MEMO_BYTES = 1 << 20
MAX_ENTRIES = 64  # the oldest go first: a development tree records one per edit
RACY_NS = 2_000_000_000  # as subgraph.support_decisions.FingerprintMemo's

_computed: dict = {}  # label -> digest, this process
_memo_dir: str | None = None
_lock = threading.Lock()


def remember_in(cache_dir: str | None) -> None:
    """Keep and look up digests in `cache_dir` from now on in this process (None: compute them, keep none)."""
    global _memo_dir
    _memo_dir = cache_dir or None


def _identity(path: str) -> list:
    # The path as given (device and inode name the file; realpath would cost a syscall per path component); an
    # absent file is part of the digest too (files_digest hashes it as absent)
    return file_identity(path) or [path, None]


def files_digest(label: str, list_files: Callable[[], Sequence[tuple[str, str]]]) -> str:
    """md5 (16 hex) of the files `list_files()` names ((name hashed, path) pairs, in order): each name, a NUL, then
    the file's bytes ('-' for a file that cannot be read). Once per `label` and process (list_files is called only
    then); read from, and recorded in, the memo dir when one is set (module docstring)."""
    with _lock:
        found = _computed.get(label)
        if found is not None:
            return found
        files = list(list_files())
        memo_dir = _memo_dir
        identities = [[name] + _identity(path) for name, path in files] if memo_dir else None
        key = sha256_hex(repr((label, identities)))[:32] if identities else None
        entries = _read_memo(memo_dir) if memo_dir else {}
        found = entries.get(key) if key else None
        if not (isinstance(found, str) and len(found) == 16):
            taken_ns = time.time_ns()
            found = _hash(files)
            if memo_dir and key is not None and all(i[-1] is None or taken_ns - i[-1] > RACY_NS
                                                    for i in identities or ()):
                entries.pop(key, None)
                entries[key] = found
                _write_memo(memo_dir, dict(list(entries.items())[-MAX_ENTRIES:]))
        _computed[label] = found
        return found


def _hash(files: Sequence[tuple[str, str]]) -> str:
    import hashlib  # ~1 MB of sources: OpenSSL's md5, loaded only when the digests are not kept

    digest = hashlib.md5()
    for name, path in files:
        digest.update(name.encode("utf-8") + b"\0")
        try:
            with open(path, "rb") as f:
                digest.update(f.read())
        except OSError:
            digest.update(b"-")
    return digest.hexdigest()[:16]


def _read_memo(memo_dir: str) -> dict:
    path = os.path.join(memo_dir, MEMO_NAME)
    document, problem = read_kept_json(path, MAX_MEMO_BYTES)
    if document is None:
        if problem:
            _warn(path, problem)
        return {}
    if not isinstance(document, dict) or document.get("format") != MEMO_FORMAT or \
            not isinstance(document.get("digests"), dict):
        _warn(path, f"not a {MEMO_FORMAT} file")
        return {}
    return dict(document["digests"])


def _write_memo(memo_dir: str, entries: dict) -> None:
    import orjson

    path = os.path.join(memo_dir, MEMO_NAME)
    try:
        write_file_atomically(path, orjson.dumps({"format": MEMO_FORMAT, "digests": entries}))
    except OSError as exc:
        warnings.warn(f"cannot write the code digests {path}: {exc}", NncCacheWarning, stacklevel=4)


def _warn(path: str, reason: str) -> None:
    warnings.warn(f"code digests {path} are unusable ({reason}); hashing the sources", NncCacheWarning, stacklevel=5)
