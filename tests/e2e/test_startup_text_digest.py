"""Issue 31: nnadapter.text_digest gives the cache keys hashlib gave (a cache written before it still hits), from
CPython's own SHA-256 and MD5 modules, without loading OpenSSL."""
from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from nnadapter_bridge.nnadapter.text_digest import md5_hex, sha256_hex

TEXTS = ["", "nnadapter-bridge-cache-v1\nsubgraph:abc", "ünïcødé ✓ 模型", "x" * 100_000]


@pytest.mark.parametrize("text", TEXTS)
def test_the_digests_are_hashlibs(text):
    assert sha256_hex(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert md5_hex(text) == hashlib.md5(text.encode("utf-8")).hexdigest()


def test_importing_it_loads_no_openssl():
    code = ("import sys; import nnadapter_bridge.nnadapter.text_digest as t; t.sha256_hex('a'); t.md5_hex('a'); "
            "print(sorted({'hashlib', '_hashlib'} & set(sys.modules)))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.strip() == "[]"
