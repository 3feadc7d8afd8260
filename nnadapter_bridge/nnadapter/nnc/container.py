"""The `.nnc` key/value container of Paddle Lite's NNAdapter runtime, byte for byte (facts §2.1-2.2).

Owns the container's constants, its "naive CRC32C" (`crc32c_naive`: reflected polynomial 0x82F63B78, initial value
0, no final xor), `pack_container[_parts]`, `unpack_container[_views]`, `NncFormatError` and `NncCacheWarning`. A
24-byte header (magic ``cnn.``, version 1, the CRC over every byte after the header, a zero padding word, a uint64
entry count) is followed by the entries in ascending bytewise key order, each ``key_size u64, value_size u64, key,
value`` padded with zeros to a multiple of 4 bytes. Imports nothing of the project: the rest of the package builds
on it.
"""
from __future__ import annotations

import mmap
import struct
from collections.abc import Mapping

import numpy as np

try:
    import google_crc32c  # the C CRC-32C (hardware-accelerated where the CPU has it), a required dependency
except ImportError as _missing:  # pragma: no cover - a broken installation
    raise ImportError("nnadapter-bridge needs the google-crc32c package for the .nnc cache's CRC: "
                      "pip install google-crc32c (it is a dependency of nnadapter-bridge)") from _missing

MAGIC = 0x2E6E6E63  # ('.'<<24)+('n'<<16)+('n'<<8)+'c': the bytes "cnn." on disk
MAGIC_BYTES = b"cnn."
VERSION = 1
HEADER_SIZE = 24
ENTRY_HEADER_SIZE = 16

_CRC_POLYNOMIAL = 0x82F63B78

# What the format reads and writes: bytes, or a buffer over them (a view, a file's private map).
BytesLike = bytes | bytearray | memoryview | mmap.mmap
# A value at least this large is a piece of its own in pack_container_parts (not copied); smaller ones are joined
# with the entry headers around them.
_SEPARATE_PIECE = 4096


class NncFormatError(ValueError):
    """A buffer that is not a valid .nnc container or compilation record (internal: readers turn it
    into a warned cache miss)."""


class NncCacheWarning(UserWarning):
    """A model cache (file or buffer) was unusable and is treated as a miss."""


# -- the naive CRC32C ---------------------------------------------------------------------------------
def _crc_input(data: BytesLike) -> bytes | np.ndarray:
    """`data` as what the C CRC accepts without a copy: it takes only buffers that need no release (`bytes`,
    numpy arrays), not memoryviews or mmaps; a uint8 array over the same memory is one (no bytes copied)."""
    if type(data) is bytes:
        return data
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
    return np.frombuffer(view, dtype=np.uint8) if len(view) else b""


def crc32c_naive(data: BytesLike) -> int:
    """Paddle Lite's cache CRC: CRC-32C bit order and polynomial, but init 0 and no final xor."""
    # The standard CRC-32C inverts the register on entry and on exit; `extend(c, data)` starts from register ~c.
    # Starting from ~0xFFFFFFFF = 0 and undoing the exit inversion gives Paddle Lite's variant exactly.
    return int(google_crc32c.extend(0xFFFFFFFF, _crc_input(data))) ^ 0xFFFFFFFF


def crc32c_naive_update(crc: int, data: BytesLike) -> int:
    """crc32c_naive of A + data, given crc = crc32c_naive(A): the CRC of a file written piece by piece."""
    return int(google_crc32c.extend(crc ^ 0xFFFFFFFF, _crc_input(data))) ^ 0xFFFFFFFF


def crc32c_naive_tail(data: BytesLike, start: int) -> int:
    """crc32c_naive(data[start:]) without copying the tail (`bytes`, memoryviews and mmaps alike)."""
    return crc32c_naive(memoryview(data).cast("B")[start:])


def _after_zero_byte(register: int) -> int:
    for _ in range(8):
        register = (register >> 1) ^ _CRC_POLYNOMIAL if register & 1 else register >> 1
    return register


def _matrix_times(matrix: list[int], vector: int) -> int:
    result = 0
    column = 0
    while vector:
        if vector & 1:
            result ^= matrix[column]
        vector >>= 1
        column += 1
    return result


# [k]: the map "feed 2**k zero bytes" as a 32x32 bit matrix (column b: the register 1<<b after them), grown on
# demand. The CRC is linear over GF(2) (init 0, no xor-out), so feeding zeros is such a matrix.
_ZERO_BYTE_POWERS = [[_after_zero_byte(1 << b) for b in range(32)]]


def crc_shift(crc: int, length: int) -> int:
    """The register `crc` after `length` zero bytes, in O(log length): crc_naive(A + B) equals
    crc_shift(crc_naive(A), len(B)) ^ crc_naive(B)."""
    k = 0
    while length:
        if k == len(_ZERO_BYTE_POWERS):
            last = _ZERO_BYTE_POWERS[-1]
            _ZERO_BYTE_POWERS.append([_matrix_times(last, column) for column in last])
        if length & 1:
            crc = _matrix_times(_ZERO_BYTE_POWERS[k], crc)
        length >>= 1
        k += 1
    return crc


# -- the key/value container ------------------------------------------------------------------------
def align4(size: int) -> int:
    """`size` rounded up to a multiple of 4 (entries are padded to it)."""
    return (size + 3) & ~3


def _key_bytes(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


def pack_container_parts(entries: Mapping) -> list:
    """The container for key -> value (bytes-like) as consecutive pieces, the 24-byte header first: keys (str
    or bytes) sorted bytewise.

    Nothing is joined: the values are the pieces themselves (not copied), so a file is written from them
    directly, and the CRC is computed piece by piece."""
    items = sorted((_key_bytes(k), v) for k, v in entries.items())
    for (a, _), (b, _) in zip(items, items[1:]):
        if a == b:
            raise ValueError(f"duplicate .nnc key {a!r}")
    parts = []
    small = []  # entry headers, keys, small values and padding are joined into one piece per large value
    crc = 0
    for key, value in items:
        size = memoryview(value).nbytes
        small += [struct.pack("<QQ", len(key), size), key]
        if size >= _SEPARATE_PIECE:
            parts.append(b"".join(small))
            parts.append(value)
            small = []
        else:
            small.append(bytes(value))
        padding = align4(ENTRY_HEADER_SIZE + len(key) + size) - (ENTRY_HEADER_SIZE + len(key) + size)
        if padding:
            small.append(bytes(padding))
    parts.append(b"".join(small))
    parts = [p for p in parts if memoryview(p).nbytes]
    for part in parts:
        crc = crc32c_naive_update(crc, part)
    return [struct.pack("<IIIIQ", MAGIC, VERSION, crc, 0, len(items))] + parts


def pack_container(entries: Mapping) -> bytes:
    """Serialize key -> value bytes into the container; keys (str or bytes) are sorted bytewise."""
    return b"".join(pack_container_parts(entries))


def unpack_container(data: BytesLike) -> dict[str, bytes]:
    """Parse a container into {key (str): value (bytes)}; any inconsistency raises NncFormatError."""
    return {key: bytes(value) for key, value in unpack_container_views(data).items()}


def unpack_container_views(data: BytesLike) -> dict[str, memoryview]:
    """unpack_container, but every value is a read-only memoryview into `data` (nothing is copied; the
    views keep `data` alive). `data` as `bytes` also spares the CRC a copy."""
    if not isinstance(data, bytes):
        data = memoryview(data).cast("B").toreadonly()
    view = memoryview(data).cast("B")
    size = len(view)
    if size < HEADER_SIZE:
        raise NncFormatError(f"{size} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, stored_crc, padding, count = struct.unpack_from("<IIIIQ", view, 0)
    if magic != MAGIC:
        raise NncFormatError(f"bad magic {bytes(view[:4])!r} (expected {MAGIC_BYTES!r})")
    if version != VERSION:
        raise NncFormatError(f"unsupported version {version} (expected {VERSION})")
    if padding != 0:
        raise NncFormatError("the header padding word is not zero")
    actual_crc = crc32c_naive_tail(data, HEADER_SIZE)
    if actual_crc != stored_crc:
        raise NncFormatError(f"CRC mismatch: stored 0x{stored_crc:08x}, computed 0x{actual_crc:08x}")
    entries: dict = {}
    previous = None
    offset = HEADER_SIZE
    for index in range(count):
        if size - offset < ENTRY_HEADER_SIZE:
            raise NncFormatError(f"entry {index}: header runs past the end ({size - offset} bytes left)")
        key_size, value_size = struct.unpack_from("<QQ", view, offset)
        left = size - offset - ENTRY_HEADER_SIZE
        if key_size > left or value_size > left - key_size:
            raise NncFormatError(f"entry {index}: key {key_size} + value {value_size} bytes, only {left} left")
        padded = align4(ENTRY_HEADER_SIZE + key_size + value_size)
        if padded > size - offset:
            raise NncFormatError(f"entry {index}: padding runs past the end")
        start = offset + ENTRY_HEADER_SIZE
        key = bytes(view[start:start + key_size])
        value = view[start + key_size:start + key_size + value_size]
        if any(view[start + key_size + value_size:offset + padded]):
            raise NncFormatError(f"entry {index}: non-zero padding")
        if previous is not None and key <= previous:
            raise NncFormatError(f"entry {index}: key {key!r} is not after {previous!r} (unsorted or duplicate)")
        try:
            text_key = key.decode("utf-8")
        except UnicodeDecodeError:
            raise NncFormatError(f"entry {index}: key is not UTF-8") from None
        entries[text_key] = value
        previous = key
        offset += padded
    if offset != size:
        raise NncFormatError(f"{size - offset} bytes left after the {count} entries")
    return entries


