"""What a `.nnc` record is for and who wrote it: the identity entries and the keyed MAC (docs/cache.md).

Owns `CacheIdentity`, the entries ``nnadapter_bridge_token`` / ``nnadapter_bridge_fingerprint`` (a reader expecting
a token or fingerprint treats a mismatch, or a record lacking them, as a miss), ``~nnadapter_bridge_hmac_sha256``
(always the last entry: ``~`` sorts after every other key; with a key, the HMAC-SHA256 of the whole file with the
header's CRC field and the 32 MAC bytes read as zeros), `resolve_cache_key` and the checks. Imports only the
container.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from nnadapter_bridge.nnadapter.nnc.container import ENTRY_HEADER_SIZE, BytesLike, NncFormatError, align4
from nnadapter_bridge.nnadapter.record import plain_dataclass

TOKEN_KEY = "nnadapter_bridge_token"
FINGERPRINT_KEY = "nnadapter_bridge_fingerprint"
MAC_KEY = "~nnadapter_bridge_hmac_sha256"  # "~" (0x7E) sorts after every key Paddle Lite or we write
MAC_SIZE = 32
CACHE_KEY_ENV = "NNADAPTER_BRIDGE_CACHE_KEY"
MAC_PADDING = align4(ENTRY_HEADER_SIZE + len(MAC_KEY) + MAC_SIZE) - (ENTRY_HEADER_SIZE + len(MAC_KEY) + MAC_SIZE)


@plain_dataclass(frozen=True)
class CacheIdentity:
    """What a cache record must be for: the full cache token and, when known, the model fingerprint.

    `allow_unidentified`: a record carrying neither identity entry (Paddle Lite's own files, which the
    engine reads only in Paddle Lite token mode) is accepted; one carrying other values never is."""

    token: str
    fingerprint: str = ""
    allow_unidentified: bool = False


def identity_entries(identity: CacheIdentity) -> dict:
    entries = {}
    if identity.token:
        entries[TOKEN_KEY] = identity.token.lower().encode("utf-8")
    if identity.fingerprint:
        entries[FINGERPRINT_KEY] = identity.fingerprint.encode("utf-8")
    return entries


def resolve_cache_key(key: str | bytes | None = None) -> bytes | None:
    """The integrity key as bytes: `key` (str or bytes) when given, else NNADAPTER_BRIDGE_CACHE_KEY from the
    environment; None (CRC only) when neither is set or the value is empty."""
    if key is None:
        key = os.environ.get(CACHE_KEY_ENV, "")
    if isinstance(key, str):
        key = key.encode("utf-8")
    key = bytes(key)
    return key or None


def hmac_sha256(key: bytes, pieces: Iterable) -> bytes:
    import hashlib  # here: only a cache with an integrity key computes MACs (hashlib and hmac load OpenSSL)
    import hmac

    digest = hmac.new(key, digestmod=hashlib.sha256)
    for piece in pieces:
        digest.update(piece)
    return digest.digest()


def check_mac(data: BytesLike, views: dict[str, memoryview], key: bytes) -> None:
    """The record's HMAC-SHA256 under `key` (NncFormatError when absent or wrong)."""
    if MAC_KEY not in views:
        raise NncFormatError(f"a cache key is set ({CACHE_KEY_ENV} or set_nnadapter_model_cache_key) but the "
                             f"record has no '{MAC_KEY}' entry")
    if next(reversed(views)) != MAC_KEY or len(views[MAC_KEY]) != MAC_SIZE:
        raise NncFormatError(f"'{MAC_KEY}' is not the last entry of {MAC_SIZE} bytes")
    view = memoryview(data).cast("B")
    offset = len(view) - MAC_PADDING - MAC_SIZE
    expected = hmac_sha256(key, [view[:8], bytes(4), view[12:offset], bytes(MAC_SIZE), view[offset + MAC_SIZE:]])
    import hmac

    if not hmac.compare_digest(expected, bytes(view[offset:offset + MAC_SIZE])):
        raise NncFormatError("HMAC-SHA256 mismatch: the record was not written with this cache key, or was "
                             "altered after it was written")


def _short(value: BytesLike, limit: int = 80) -> str:
    text = bytes(value).decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "..."


def check_identity(views: dict, expect: CacheIdentity) -> None:
    token, fingerprint = views.get(TOKEN_KEY), views.get(FINGERPRINT_KEY)
    if token is None and fingerprint is None:
        if expect.allow_unidentified:
            return
        raise NncFormatError(f"the record carries no '{TOKEN_KEY}' entry (written by an older nnadapter-bridge "
                             "or another tool), so nothing says which model it is for")
    if expect.token:
        if token is None:
            raise NncFormatError(f"the record has no '{TOKEN_KEY}' entry")
        if bytes(token) != expect.token.lower().encode("utf-8"):
            raise NncFormatError(f"the record was written for token '{_short(token)}', not "
                                 f"'{expect.token.lower()}' (a renamed or swapped file)")
    if expect.fingerprint:
        if fingerprint is None:
            raise NncFormatError(f"the record has no '{FINGERPRINT_KEY}' entry")
        if bytes(fingerprint) != expect.fingerprint.encode("utf-8"):
            raise NncFormatError(f"the record holds another model (fingerprint '{_short(fingerprint, 16)}', "
                                 f"expected '{expect.fingerprint[:16]}...')")


