"""sha256 and md5 (hex) of short texts, the cache's keys and file names, without loading OpenSSL.

`import hashlib` loads OpenSSL's libcrypto (~4 ms, a hundredth of a warm start from spawn) for functions a warm
start calls only on a few short strings; CPython's own `_sha256` (`_sha2` from Python 3.12) and `_md5` load in
~0.4 ms and give the same digests. For bytes of any size (model files, sources, weights) use hashlib: OpenSSL's
SHA-256 is several times faster there. A Python without those modules falls back to hashlib.

Imports nothing of the project (it is the ground's).
"""
from __future__ import annotations

try:
    from _sha2 import sha256 as _sha256  # type: ignore[import-not-found]  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as _sha256  # type: ignore[import-not-found]  # Python 3.10, 3.11
    except ImportError:  # pragma: no cover - a Python built without its own SHA-2
        from hashlib import sha256 as _sha256
try:
    from _md5 import md5 as _md5  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - a Python built without its own MD5
    from hashlib import md5 as _md5


def sha256_hex(text: str) -> str:
    """sha256 of the text's UTF-8 bytes, as hashlib.sha256(text.encode("utf-8")).hexdigest()."""
    return _sha256(text.encode("utf-8")).hexdigest()


def md5_hex(text: str) -> str:
    """md5 of the text's UTF-8 bytes, as hashlib.md5(text.encode("utf-8")).hexdigest()."""
    return _md5(text.encode("utf-8")).hexdigest()
