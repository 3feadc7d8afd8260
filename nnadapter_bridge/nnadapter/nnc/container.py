"""The `.nnc` key/value container of Paddle Lite's NNAdapter runtime, byte for byte (facts §2.1-2.2).

Owns the container's constants, its "naive CRC32C" (`crc32c_naive`: reflected polynomial 0x82F63B78, initial value
0, no final xor), `pack_container[_parts]`, `unpack_container[_views]`, `NncFormatError` and `NncCacheWarning`. A
24-byte header (magic ``cnn.``, version 1, the CRC over every byte after the header, a zero padding word, a uint64
entry count) is followed by the entries in ascending bytewise key order, each ``key_size u64, value_size u64, key,
value`` padded with zeros to a multiple of 4 bytes. Imports nothing of the project: the rest of the package builds
on it.
"""
from __future__ import annotations

import struct
from typing import Mapping

import numpy as np

MAGIC = 0x2E6E6E63  # ('.'<<24)+('n'<<16)+('n'<<8)+'c': the bytes "cnn." on disk
MAGIC_BYTES = b"cnn."
VERSION = 1
HEADER_SIZE = 24
ENTRY_HEADER_SIZE = 16

_CRC_POLYNOMIAL = 0x82F63B78


class NncFormatError(ValueError):
    """A buffer that is not a valid .nnc container or compilation record (internal: readers turn it
    into a warned cache miss)."""


class NncCacheWarning(UserWarning):
    """A model cache (file or buffer) was unusable and is treated as a miss."""


# -- the naive CRC32C ---------------------------------------------------------------------------------
def _byte_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for value in range(256):
        crc = value
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC_POLYNOMIAL if crc & 1 else crc >> 1
        table[value] = crc
    return table


_TABLE = _byte_table()
_TABLE_LIST = [int(v) for v in _TABLE]
# Below this size the plain table loop is faster than setting up the vectorised path.
_SMALL_INPUT = 4096


def _crc_update_small(crc: int, data) -> int:
    table = _TABLE_LIST
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _zero_shift_tables(length: int) -> list:
    """Four 256-entry tables applying "feed `length` zero bytes" to a register, one per register byte.

    With initial value 0 and no final xor the CRC is linear over GF(2), so this map is a 32x32 bit
    matrix; column b is the register 1<<b after `length` zero bytes.
    """
    registers = (np.uint32(1) << np.arange(32, dtype=np.uint32)).astype(np.uint32)
    for _ in range(length):
        registers = _TABLE[registers & 0xFF] ^ (registers >> np.uint32(8))
    values = np.arange(256, dtype=np.uint32)
    tables = []
    for k in range(4):
        table = np.zeros(256, dtype=np.uint32)
        for bit in range(8):
            table ^= np.where((values >> np.uint32(bit)) & 1, registers[8 * k + bit], np.uint32(0)).astype(np.uint32)
        tables.append([int(v) for v in table])
    return tables


try:  # A C CRC-32C (hardware-accelerated where the CPU has it): ~100x the numpy path below.
    import google_crc32c as _google_crc32c

    if _google_crc32c.implementation != "c":
        _google_crc32c = None
except ImportError:  # pragma: no cover - the dependency is declared; the numpy path keeps working without it
    _google_crc32c = None


def crc32c_naive(data) -> int:
    """Paddle Lite's cache CRC: CRC-32C bit order and polynomial, but init 0 and no final xor."""
    if _google_crc32c is not None:
        # The standard CRC-32C inverts the register on entry and on exit; `extend(c, data)` starts from
        # register ~c. Starting from ~0xFFFFFFFF = 0 and undoing the exit inversion gives Paddle Lite's
        # variant exactly.
        return _google_crc32c.extend(0xFFFFFFFF, _crc_input(data)) ^ 0xFFFFFFFF
    return crc32c_naive_numpy(data)


def _crc_input(data):
    """`data` as what the C CRC accepts without a copy: it takes only buffers that need no release (`bytes`,
    numpy arrays), not memoryviews or mmaps; a uint8 array over the same memory is one (no bytes copied)."""
    if type(data) is bytes:
        return data
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
    return np.frombuffer(view, dtype=np.uint8) if len(view) else b""


def crc32c_naive_update(crc: int, data) -> int:
    """crc32c_naive of A + data, given crc = crc32c_naive(A): the CRC of a file written piece by piece."""
    if _google_crc32c is not None:
        return _google_crc32c.extend(crc ^ 0xFFFFFFFF, _crc_input(data)) ^ 0xFFFFFFFF
    return crc_shift(crc, memoryview(data).nbytes) ^ crc32c_naive_numpy(data)


def _one_zero_byte_matrix() -> list:
    # Column b: the register 1<<b after one zero byte (the CRC is linear over GF(2): init 0, no xor-out).
    return [int(_TABLE[(1 << b) & 0xFF]) ^ ((1 << b) >> 8) for b in range(32)]


def _matrix_times(matrix: list, vector: int) -> int:
    result = 0
    column = 0
    while vector:
        if vector & 1:
            result ^= matrix[column]
        vector >>= 1
        column += 1
    return result


_ZERO_BYTE_POWERS = [_one_zero_byte_matrix()]  # [k]: the map "feed 2**k zero bytes", grown on demand


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


def crc32c_naive_tail(data, start: int) -> int:
    """crc32c_naive(data[start:]) without copying the tail (`bytes`, memoryviews and mmaps alike)."""
    return crc32c_naive(memoryview(data).cast("B")[start:])


def crc32c_naive_numpy(data) -> int:
    """crc32c_naive in numpy, for when no C CRC-32C is installed.

    Large buffers are cut into K equal chunks whose CRCs advance together, one numpy step per byte
    column; the chunk CRCs are then combined with crc(A+B) = shift(crc(A), len(B)) ^ crc(B), which
    holds exactly because this variant is linear (zero init, no xor-out).
    """
    view = memoryview(data).cast("B")
    n = len(view)
    if n < _SMALL_INPUT:
        return _crc_update_small(0, view)
    chunk = max(64, int(n ** 0.5))
    count = n // chunk
    body = np.frombuffer(view, dtype=np.uint8, count=count * chunk)
    columns = np.ascontiguousarray(body.reshape(count, chunk).T)
    crcs = np.zeros(count, dtype=np.uint32)
    table = _TABLE
    eight = np.uint32(8)
    for column in columns:
        crcs = table[(crcs ^ column) & 0xFF] ^ (crcs >> eight)
    t0, t1, t2, t3 = _zero_shift_tables(chunk)
    crc = 0
    for value in crcs.tolist():
        crc = t0[crc & 0xFF] ^ t1[(crc >> 8) & 0xFF] ^ t2[(crc >> 16) & 0xFF] ^ t3[crc >> 24] ^ value
    return _crc_update_small(crc, view[count * chunk:])


# -- the key/value container ------------------------------------------------------------------------
def align4(size: int) -> int:
    """`size` rounded up to a multiple of 4 (entries are padded to it)."""
    return (size + 3) & ~3


def _key_bytes(key) -> bytes:
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
        if size >= _SMALL_INPUT:
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


def unpack_container(data) -> dict:
    """Parse a container into {key (str): value (bytes)}; any inconsistency raises NncFormatError."""
    return {key: bytes(value) for key, value in unpack_container_views(data).items()}


def unpack_container_views(data) -> dict:
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


