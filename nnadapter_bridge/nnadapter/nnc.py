"""The `.nnc` model-cache format of Paddle Lite's NNAdapter runtime, byte for byte (facts §2.1–2.4).

This module owns three layers:

* the "naive CRC32C" (reflected polynomial 0x82F63B78, initial value 0, no final xor);
* the generic key/value container: a 24-byte header (magic ``cnn.``, version 1, the CRC over every
  byte after the header, a zero padding word, a uint64 entry count) followed by the entries in
  ascending bytewise key order, each ``key_size u64, value_size u64, key, value`` padded with zeros
  to a multiple of 4 bytes;
* the 328-byte ``NNAdapterOperandType`` record and the keys a Compilation writes (``input_types``,
  ``num_caches``, ``cache_<i>_*``), plus reading and atomically writing ``<dir>/<token>.nnc``.

Reading never raises on bad bytes: `load_compilation_record` and `read_nnc_file` turn every failed
check into a cache miss (None) with exactly one warning, so a damaged file can never crash a predictor
or load a wrong program.

On top of Paddle Lite's keys, a record written here carries what it is for and, optionally, a keyed MAC
(docs/cache.md has the exact layout and what each check protects against):

* ``nnadapter_bridge_token`` (the full cache token) and ``nnadapter_bridge_fingerprint`` (the model
  fingerprint, when the writer knows one): a reader that expects a token/fingerprint treats a mismatch, or
  a file lacking them (an older version, another tool), as a miss (`CacheIdentity`);
* ``~nnadapter_bridge_hmac_sha256`` (always the last entry: ``~`` sorts after every other key): with a key
  (`NNADAPTER_BRIDGE_CACHE_KEY` or Config.set_nnadapter_model_cache_key) the HMAC-SHA256 of the whole file
  with the header's CRC field and the 32 MAC bytes read as zeros; checked before anything reaches a driver.

Files are opened without following symlinks and without blocking (FIFOs), must be regular files, and are
read only up to the size their header and entry headers declare, which must be the file's size
(`read_cache_file`). Temporary files of interrupted writes (``.tmp-*.nnc``) older than
`tmp_max_age_s()` are removed once per cache dir and process (`clean_stale_temp_files`). A write may run
in a thread of its own (`PendingCacheWrite`); reading that path in this process waits for it
(`wait_for_cache_writes`).

What the operand-type record cannot carry: the per-channel scales live behind a C pointer, which is
written as 0, so a record read back has ``scales=None`` (its channel axis survives). Scales are stored
as float32, dims as int32, and operand names are not part of the record at all.
"""
from __future__ import annotations

import dataclasses
import errno
import hashlib
import hmac
import os
import re
import stat
import struct
import tempfile
import threading
import time
import warnings
from typing import Callable, Collection, Iterable, Mapping, Optional, Sequence

import numpy as np

from nnadapter_bridge.nnadapter.codes import (
    MAX_SIZE_OF_DIMENSIONS,
    MAX_SIZE_OF_DYNAMIC_DIMENSIONS,
    Layout,
    Lifetime,
    Precision,
)
from nnadapter_bridge.nnadapter.types import OperandType

MAGIC = 0x2E6E6E63  # ('.'<<24)+('n'<<16)+('n'<<8)+'c': the bytes "cnn." on disk
MAGIC_BYTES = b"cnn."
VERSION = 1
HEADER_SIZE = 24
ENTRY_HEADER_SIZE = 16
OPERAND_TYPE_SIZE = 328
FILE_EXTENSION = ".nnc"

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
def _align4(size: int) -> int:
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
        padding = _align4(ENTRY_HEADER_SIZE + len(key) + size) - (ENTRY_HEADER_SIZE + len(key) + size)
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
        padded = _align4(ENTRY_HEADER_SIZE + key_size + value_size)
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


# -- NNAdapterOperandType ---------------------------------------------------------------------------
# precision, layout, lifetime, dims.count, dims.data[8], dims.dynamic_count, dims.dynamic_data[8][8]
_HEAD = struct.Struct("<iiiI8iI64i")
_UNION_OFFSET = 312  # after 4 padding bytes: the quant-param union is 8-aligned on LP64
assert _HEAD.size == 308


def pack_operand_type(t: OperandType) -> bytes:
    """The 328-byte LP64 NNAdapterOperandType record of `t` (unused bytes zero, scales pointer 0)."""
    dims = list(t.dims)
    if len(dims) > MAX_SIZE_OF_DIMENSIONS:
        raise ValueError(f"{len(dims)} dims do not fit the record")
    dynamic = [list(shape) for shape in t.dynamic_dims]
    if len(dynamic) > MAX_SIZE_OF_DYNAMIC_DIMENSIONS:
        raise ValueError(f"{len(dynamic)} dynamic shapes do not fit the record")
    dynamic_flat = []
    for shape in dynamic:
        if len(shape) > MAX_SIZE_OF_DIMENSIONS:
            raise ValueError(f"dynamic shape {shape} has more than {MAX_SIZE_OF_DIMENSIONS} dims")
        dynamic_flat += shape + [0] * (MAX_SIZE_OF_DIMENSIONS - len(shape))
    dynamic_flat += [0] * (64 - len(dynamic_flat))
    out = bytearray(OPERAND_TYPE_SIZE)
    _HEAD.pack_into(out, 0, int(t.precision), int(t.layout), int(t.lifetime), len(dims),
                    *(dims + [0] * (MAX_SIZE_OF_DIMENSIONS - len(dims))), len(dynamic), *dynamic_flat)
    if t.is_per_channel:
        scale_count = len(t.scales) if t.scales is not None else 0
        struct.pack_into("<IIQ", out, _UNION_OFFSET, int(t.channel_dim), scale_count, 0)
    elif t.is_asymmetric:
        struct.pack_into("<fi", out, _UNION_OFFSET, t.scale or 0.0, int(t.zero_point))
    elif t.is_quantized:
        struct.pack_into("<f", out, _UNION_OFFSET, t.scale or 0.0)
    return bytes(out)


def unpack_operand_type(record) -> tuple:
    """Parse one record into (OperandType, per-channel scale_count); raises NncFormatError.

    A per-channel type comes back with `scales=None`: the values are not in the record.
    """
    view = memoryview(record).cast("B")
    if len(view) != OPERAND_TYPE_SIZE:
        raise NncFormatError(f"an operand type record is {OPERAND_TYPE_SIZE} bytes, got {len(view)}")
    fields = _HEAD.unpack_from(view, 0)
    precision_code, layout_code, lifetime_code, count = fields[:4]
    dims_data = fields[4:12]
    dynamic_count = fields[12]
    dynamic_data = fields[13:]
    try:
        precision = Precision(precision_code)
        layout = Layout(layout_code)
        lifetime = Lifetime(lifetime_code)
    except ValueError as exc:
        raise NncFormatError(f"operand type record: {exc}") from None
    if count > MAX_SIZE_OF_DIMENSIONS or dynamic_count > MAX_SIZE_OF_DYNAMIC_DIMENSIONS:
        raise NncFormatError(f"operand type record: {count} dims / {dynamic_count} dynamic shapes")
    dims = tuple(dims_data[:count])
    dynamic = tuple(tuple(dynamic_data[8 * i:8 * i + count]) for i in range(dynamic_count))
    scale = None
    channel_dim = 0
    zero_point = 0
    scale_count = 0
    probe = OperandType(precision=precision)
    if probe.is_per_channel:
        channel_dim, scale_count = struct.unpack_from("<II", view, _UNION_OFFSET)
    elif probe.is_asymmetric:
        scale, zero_point = struct.unpack_from("<fi", view, _UNION_OFFSET)
    elif probe.is_quantized:
        (scale,) = struct.unpack_from("<f", view, _UNION_OFFSET)
    t = OperandType(precision=precision, dims=dims, layout=layout, lifetime=lifetime, dynamic_dims=dynamic,
                    scale=scale, scales=None, channel_dim=channel_dim, zero_point=zero_point)
    return t, scale_count


def pack_operand_types(types: Iterable[OperandType]) -> bytes:
    return b"".join(pack_operand_type(t) for t in types)


def unpack_operand_types(data: bytes) -> list:
    if len(data) % OPERAND_TYPE_SIZE:
        raise NncFormatError(f"{len(data)} bytes is not a whole number of {OPERAND_TYPE_SIZE}-byte records")
    return [unpack_operand_type(data[i:i + OPERAND_TYPE_SIZE])[0] for i in range(0, len(data), OPERAND_TYPE_SIZE)]


# -- the compilation record (Compilation::Serialize / Deserialize) ------------------------------------
@dataclasses.dataclass
class ProgramRecord:
    """One device program of a compilation: which device, its I/O and the device's program bytes.

    An index < 0 is the whole model's input/output -index-1; an index >= 0 a buffer shared between
    programs (facts §6.3)."""

    device_name: str
    input_types: list
    input_indexes: list
    output_types: list
    output_indexes: list
    model_buffer: bytes  # bytes-like; read from a container, a read-only memoryview into its data
    # Read from a memory-mapped file (read_nnc_file): a writable copy-on-write uint8 array over the same bytes
    # (mapped_program_buffer), which a driver may keep instead of copying them; None otherwise.
    mapped: Optional[np.ndarray] = None


@dataclasses.dataclass
class CompilationRecord:
    input_types: list
    output_types: list
    programs: list  # of ProgramRecord


def _pack_indexes(indexes: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(indexes)}i", *indexes)


def _unpack_indexes(data: bytes, key: str) -> list:
    if len(data) % 4:
        raise NncFormatError(f"{key}: {len(data)} bytes is not a whole number of int32")
    return list(struct.unpack(f"<{len(data) // 4}i", data))


def _compilation_entries(record: CompilationRecord) -> dict:
    entries = {"num_caches": struct.pack("<Q", len(record.programs))}
    if record.input_types:
        entries["input_types"] = pack_operand_types(record.input_types)
    if record.output_types:
        entries["output_types"] = pack_operand_types(record.output_types)
    for i, program in enumerate(record.programs):
        if len(program.input_types) != len(program.input_indexes) or \
                len(program.output_types) != len(program.output_indexes):
            raise ValueError(f"program {i}: types and indexes differ in length")
        prefix = f"cache_{i}_"
        entries[prefix + "device_name"] = program.device_name.encode("utf-8")
        if program.input_types:
            entries[prefix + "input_types"] = pack_operand_types(program.input_types)
            entries[prefix + "input_indexes"] = _pack_indexes(program.input_indexes)
        if program.output_types:
            entries[prefix + "output_types"] = pack_operand_types(program.output_types)
            entries[prefix + "output_indexes"] = _pack_indexes(program.output_indexes)
        entries[prefix + "model_buffer"] = program.model_buffer  # copied once, into the container body
    return entries


def pack_compilation_record(record: CompilationRecord, identity: Optional["CacheIdentity"] = None,
                            key: Optional[bytes] = None) -> bytes:
    """The record's container; with `identity` its token/fingerprint entries, with `key` its HMAC entry."""
    return b"".join(pack_compilation_record_parts(record, identity, key))


def pack_compilation_record_parts(record: CompilationRecord, identity: Optional["CacheIdentity"] = None,
                                  key: Optional[bytes] = None) -> list:
    """The record's container as consecutive pieces (header first), for writing a file without joining
    them (the program bytes are pieces of their own, not copied); with `identity` it carries the identity
    entries, with `key` the HMAC entry (module docstring)."""
    entries = _compilation_entries(record)
    if identity is not None:
        entries.update(identity_entries(identity))
    if not key:
        return pack_container_parts(entries)
    entries[MAC_KEY] = bytes(MAC_SIZE)  # a placeholder: the MAC reads these bytes as zeros
    parts = pack_container_parts(entries)
    header, last = parts[0], memoryview(parts[-1])
    padding = _MAC_PADDING
    # The MAC entry is the last one (MAC_KEY sorts last, its value is small): the end of the last piece.
    offset = len(last) - padding - MAC_SIZE
    mac = _mac(key, [header[:8], bytes(4), header[12:], *parts[1:-1], last[:offset], bytes(MAC_SIZE),
                     last[offset + MAC_SIZE:]])
    # The CRC is linear (init 0, no xor-out) and the placeholder is zeros: swapping in the MAC xors the
    # CRC with the MAC's own CRC shifted past the trailing padding, no second pass over the body.
    (crc,) = struct.unpack_from("<I", header, 8)
    crc ^= crc_shift(crc32c_naive(mac), padding)
    header = header[:8] + struct.pack("<I", crc) + header[12:]
    return [header, *parts[1:-1], last[:offset], mac, last[offset + MAC_SIZE:]]


def unpack_compilation_record(data) -> CompilationRecord:
    """Parse and check a compilation record; raises NncFormatError on anything inconsistent."""
    return _record_from_views(unpack_container_views(data))


def _record_from_views(views: dict) -> CompilationRecord:
    # Every value but the program bytes is small: plain bytes; the program bytes stay views into `data`.
    entries = {k: v if k.endswith("_model_buffer") else bytes(v) for k, v in views.items()}
    if "num_caches" not in entries:
        raise NncFormatError("missing key 'num_caches'")
    raw_count = entries["num_caches"]
    if len(raw_count) != 8:
        raise NncFormatError(f"'num_caches' is {len(raw_count)} bytes, expected 8")
    (num_caches,) = struct.unpack("<Q", raw_count)
    if num_caches == 0:
        raise NncFormatError("'num_caches' is 0")
    input_types = unpack_operand_types(entries.get("input_types", b""))
    output_types = unpack_operand_types(entries.get("output_types", b""))
    programs = []
    for i in range(num_caches):
        prefix = f"cache_{i}_"
        for required in ("device_name", "model_buffer"):
            if prefix + required not in entries:
                raise NncFormatError(f"missing key '{prefix + required}'")
        try:
            device_name = entries[prefix + "device_name"].decode("utf-8")
        except UnicodeDecodeError:
            raise NncFormatError(f"'{prefix}device_name' is not UTF-8") from None
        if not device_name:
            raise NncFormatError(f"'{prefix}device_name' is empty")
        sides = []
        for side, model_types in (("input", input_types), ("output", output_types)):
            types_key, indexes_key = f"{prefix}{side}_types", f"{prefix}{side}_indexes"
            if types_key in entries or indexes_key in entries:
                types = unpack_operand_types(entries.get(types_key, b""))
                indexes = _unpack_indexes(entries.get(indexes_key, b""), indexes_key)
            elif num_caches == 1:
                # Legacy single-program files: the program's I/O is the model's, indexes -k-1.
                types = list(model_types)
                indexes = [-k - 1 for k in range(len(model_types))]
            else:
                types, indexes = [], []
            if len(types) != len(indexes):
                raise NncFormatError(f"{types_key}: {len(types)} types but {len(indexes)} indexes")
            for index in indexes:
                if index < 0 and -index - 1 >= len(model_types):
                    raise NncFormatError(f"{indexes_key}: {index} names model {side} {-index - 1}, "
                                         f"the model has {len(model_types)}")
            sides.append((types, indexes))
        (in_types, in_indexes), (out_types, out_indexes) = sides
        programs.append(ProgramRecord(device_name, in_types, in_indexes, out_types, out_indexes,
                                      entries[prefix + "model_buffer"]))
    _check_dataflow(programs, len(output_types))
    return CompilationRecord(input_types, output_types, programs)


def _check_dataflow(programs: list, num_outputs: int) -> None:
    """Programs run in order: each shared buffer is read only after an earlier program wrote it, and every
    model output is written by exactly one program (else a run would hand back an unfilled buffer)."""
    written: set = set()
    produced = [0] * num_outputs
    for i, program in enumerate(programs):
        for index in program.input_indexes:
            if index >= 0 and index not in written:
                raise NncFormatError(f"cache_{i}_input_indexes: program {i} reads shared buffer {index} before "
                                     "any earlier program writes it")
        for index in program.output_indexes:
            if index >= 0:
                written.add(index)
            else:
                produced[-index - 1] += 1
    for k, count in enumerate(produced):
        if count != 1:
            raise NncFormatError(f"model output {k} is written by {count} programs, expected exactly 1")


def _warn_miss(source: str, reason: str) -> None:
    warnings.warn(f"model cache {source} is unusable ({reason}); compiling the model instead",
                  NncCacheWarning, stacklevel=3)


# -- identity and keyed integrity (docs/cache.md) ------------------------------------------------------
TOKEN_KEY = "nnadapter_bridge_token"
FINGERPRINT_KEY = "nnadapter_bridge_fingerprint"
MAC_KEY = "~nnadapter_bridge_hmac_sha256"  # "~" (0x7E) sorts after every key Paddle Lite or we write
MAC_SIZE = 32
CACHE_KEY_ENV = "NNADAPTER_BRIDGE_CACHE_KEY"
_MAC_PADDING = _align4(ENTRY_HEADER_SIZE + len(MAC_KEY) + MAC_SIZE) - (ENTRY_HEADER_SIZE + len(MAC_KEY) + MAC_SIZE)


@dataclasses.dataclass(frozen=True)
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


def resolve_cache_key(key=None) -> Optional[bytes]:
    """The integrity key as bytes: `key` (str or bytes) when given, else NNADAPTER_BRIDGE_CACHE_KEY from the
    environment; None (CRC only) when neither is set or the value is empty."""
    if key is None:
        key = os.environ.get(CACHE_KEY_ENV, "")
    if isinstance(key, str):
        key = key.encode("utf-8")
    key = bytes(key)
    return key or None


def _mac(key: bytes, pieces: Iterable) -> bytes:
    digest = hmac.new(key, digestmod=hashlib.sha256)
    for piece in pieces:
        digest.update(piece)
    return digest.digest()


def _check_mac(data, views: dict, key: bytes) -> None:
    """The record's HMAC-SHA256 under `key` (NncFormatError when absent or wrong)."""
    if MAC_KEY not in views:
        raise NncFormatError(f"a cache key is set ({CACHE_KEY_ENV} or set_nnadapter_model_cache_key) but the "
                             f"record has no '{MAC_KEY}' entry")
    if next(reversed(views)) != MAC_KEY or len(views[MAC_KEY]) != MAC_SIZE:
        raise NncFormatError(f"'{MAC_KEY}' is not the last entry of {MAC_SIZE} bytes")
    view = memoryview(data).cast("B")
    offset = len(view) - _MAC_PADDING - MAC_SIZE
    expected = _mac(key, [view[:8], bytes(4), view[12:offset], bytes(MAC_SIZE), view[offset + MAC_SIZE:]])
    if not hmac.compare_digest(expected, bytes(view[offset:offset + MAC_SIZE])):
        raise NncFormatError("HMAC-SHA256 mismatch: the record was not written with this cache key, or was "
                             "altered after it was written")


def _short(value, limit: int = 80) -> str:
    text = bytes(value).decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "..."


def _check_identity(views: dict, expect: CacheIdentity) -> None:
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


def load_compilation_record(data, source: str = "buffer",
                            known_devices: Optional[Collection[str]] = None, *,
                            expect: Optional[CacheIdentity] = None,
                            key: Optional[bytes] = None) -> Optional[CompilationRecord]:
    """A checked CompilationRecord, or None (one warning) when the bytes fail any check (container, CRC,
    then with `key` the HMAC, then with `expect` the identity, then the record), or name a device outside
    `known_devices`. Nothing of the record is handed on before every check passed."""
    try:
        views = unpack_container_views(data)
        if key:
            _check_mac(data, views, key)
        if expect is not None:
            _check_identity(views, expect)
        record = _record_from_views(views)
    except NncFormatError as exc:
        _warn_miss(source, str(exc))
        return None
    if known_devices is not None:
        for i, program in enumerate(record.programs):
            if program.device_name not in known_devices:
                _warn_miss(source, f"program {i} is for device '{program.device_name}', which is not in the "
                                   f"context ({', '.join(known_devices) or 'no devices'})")
                return None
    return record


def cache_file_path(cache_dir: str, token: str) -> str:
    return os.path.join(cache_dir, token + FILE_EXTENSION)


# -- reading cache files safely ------------------------------------------------------------------------
MAX_FILE_SIZE_ENV = "NNADAPTER_BRIDGE_CACHE_MAX_FILE_BYTES"
DEFAULT_MAX_FILE_SIZE = 16 << 30  # a sane global cap on one cache file, whatever its header declares
_MAX_ENTRIES = 1 << 20


class CacheFileError(OSError):
    """A cache file that must not be read (a symlink, not a regular file, too large, or a layout that does
    not match its size); readers turn it into a warned miss."""


def max_file_size() -> int:
    try:
        value = int(os.environ.get(MAX_FILE_SIZE_ENV, ""))
    except ValueError:
        return DEFAULT_MAX_FILE_SIZE
    return value if value > 0 else DEFAULT_MAX_FILE_SIZE


_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))


def _pread(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - platforms without pread (Windows)
    return os.read(fd, size)


def _pread_exact(fd: int, size: int, offset: int) -> bytes:
    data = _pread(fd, size, offset)
    if len(data) != size:
        raise CacheFileError(f"{len(data)} bytes at offset {offset}, expected {size} (the file shrank)")
    return data


def declared_container_size(fd: int, size: int) -> None:
    """Check, reading only the 24-byte header and the 16-byte entry headers, that the container layout the
    file declares ends exactly at its `size` (CacheFileError otherwise): nothing larger is ever read."""
    if size < HEADER_SIZE:
        raise CacheFileError(f"{size} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, _crc, _padding, count = struct.unpack("<IIIIQ", _pread_exact(fd, HEADER_SIZE, 0))
    if magic != MAGIC:
        raise CacheFileError(f"bad magic (expected {MAGIC_BYTES!r})")
    if version != VERSION:
        raise CacheFileError(f"unsupported version {version} (expected {VERSION})")
    if count > min((size - HEADER_SIZE) // ENTRY_HEADER_SIZE, _MAX_ENTRIES):
        raise CacheFileError(f"the header declares {count} entries, more than {size} bytes can hold")
    offset = HEADER_SIZE
    for index in range(count):
        if size - offset < ENTRY_HEADER_SIZE:
            raise CacheFileError(f"entry {index} starts past the end of the {size}-byte file")
        key_size, value_size = struct.unpack("<QQ", _pread_exact(fd, ENTRY_HEADER_SIZE, offset))
        offset += _align4(ENTRY_HEADER_SIZE + key_size + value_size)
        if offset > size:
            raise CacheFileError(f"entry {index} declares {key_size} + {value_size} bytes, past the end of "
                                 f"the {size}-byte file")
    if offset != size:
        raise CacheFileError(f"the entries declare {offset} bytes, the file has {size}")


def read_cache_file(path: str, max_size: int, check=None) -> bytes:
    """The bytes of the regular file `path`, read safely: the last path component is not followed when it
    is a symlink, opening never blocks (FIFOs), fstat must say regular file of at most `max_size` bytes, and
    `check(fd, size)` may vet the declared layout before anything is read. Raises FileNotFoundError for a
    missing file and OSError (CacheFileError) for everything else."""
    fd = _open_no_follow(path)
    try:
        return _read_open_file(fd, os.fstat(fd), max_size, check)
    finally:
        os.close(fd)


def _open_no_follow(path: str) -> int:
    """A descriptor for `path`, never following a symlink in its last component and never blocking."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise CacheFileError("it is a symbolic link (cache files are never followed)") from None
        raise


def _read_open_file(fd: int, info: os.stat_result, max_size: int, check=None) -> bytes:
    """The checks and the read of read_cache_file on an open descriptor."""
    if not stat.S_ISREG(info.st_mode):
        kind = ("a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise CacheFileError(f"it is {kind}, not a regular file")
    size = info.st_size
    if size > max_size:
        raise CacheFileError(f"it is {size} bytes, more than the {max_size}-byte limit")
    if check is not None:
        check(fd, size)
    pieces = []
    left = size
    while left:
        piece = _pread(fd, min(left, 1 << 30), size - left)
        if not piece:
            raise CacheFileError(f"it shrank while being read ({size - left} of {size} bytes)")
        pieces.append(piece)
        left -= len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)  # b"" for an empty file


# Files at least this large are memory-mapped instead of read (when `_may_map` allows): reading costs a copy
# into memory (and the peak RSS of the whole file); a mapping costs nothing until a page is touched.
MAP_THRESHOLD = 1 << 20


def _may_map(info: os.stat_result) -> bool:
    """Whether the file's contents can change only through its owner, and that owner is this process's user:
    then a mapping checked once (CRC, HMAC, identity) keeps holding what was checked. Our writers never
    modify a cache file in place (they rename a new file over it), so such a file does not change under the
    map; a file someone else owns, or that group/others may write, is read into memory instead."""
    return (hasattr(os, "geteuid") and info.st_uid == os.geteuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and info.st_size >= MAP_THRESHOLD)


def map_cache_file(path: str, max_size: int, check=None):
    """`read_cache_file`, with the same checks, but a large file that only this user can change (`_may_map`)
    comes back as a private memory map (copy-on-write: nothing written to it reaches the file) instead of
    bytes read into memory. The map stays valid after the file is replaced or removed (it holds the inode)."""
    fd = _open_no_follow(path)
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and info.st_size <= max_size and _may_map(info)):
            return _read_open_file(fd, info, max_size, check)
        if check is not None:
            check(fd, info.st_size)
        import mmap

        return mmap.mmap(fd, info.st_size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


def mapped_program_buffer(data, view) -> Optional[np.ndarray]:
    """For a value `view` of a record read from the private map `data` (map_cache_file): a writable uint8 array
    over the same bytes (copy-on-write, writes never reach the file), which a driver may keep instead of
    copying the bytes (driver_protocol.Cache.mapped_buffer); None when `data` is not such a map."""
    import mmap

    if not isinstance(data, mmap.mmap) or not len(view):
        return None
    base = np.frombuffer(data, dtype=np.uint8)
    if not base.flags.writeable:  # a read-only map: a driver could not hand it to an SDK as its memory
        return None
    inner = np.frombuffer(view, dtype=np.uint8)
    offset = inner.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if not 0 <= offset <= len(base) - len(inner):
        return None
    return base[offset:offset + len(inner)]


def read_nnc_file(path: str, known_devices: Optional[Collection[str]] = None, *,
                  expect: Optional[CacheIdentity] = None,
                  key: Optional[bytes] = None) -> Optional[CompilationRecord]:
    """Read and check a .nnc file; a missing file is a silent miss, an unreadable, unsafe (see
    `read_cache_file`) or bad one a warned miss. A large file only this user can change is memory-mapped
    (`map_cache_file`); its program records then carry `mapped` arrays (`mapped_program_buffer`). When this
    process is writing `path` in the background (PendingCacheWrite), the write is waited for first."""
    if _PENDING_WRITES:
        wait_for_cache_writes(path)
    try:
        data = map_cache_file(path, max_file_size(), declared_container_size)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _warn_miss(path, f"cannot read it: {exc}" if not isinstance(exc, CacheFileError) else str(exc))
        return None
    except ValueError as exc:  # mmap refusing the file (it shrank to nothing meanwhile)
        _warn_miss(path, f"cannot map it: {exc}")
        return None
    record = load_compilation_record(data, path, known_devices, expect=expect, key=key)
    if record is not None:
        for program in record.programs:
            program.mapped = mapped_program_buffer(data, program.model_buffer)
    return record


# -- stale temporary files -------------------------------------------------------------------------------
TMP_PREFIX = ".tmp-"
TMP_MAX_AGE_ENV = "NNADAPTER_BRIDGE_CACHE_TMP_MAX_AGE_S"
DEFAULT_TMP_MAX_AGE_S = 300.0
# mkstemp's names: the prefix, 8 characters of [a-z0-9_], the suffix. Nothing else is ever removed.
_TMP_NAME = re.compile(r"\.tmp-[a-z0-9_]+\.nnc\Z")
_CLEANED_DIRS: set = set()
_CLEANED_LOCK = threading.Lock()


def tmp_max_age_s() -> float:
    """How old a `.tmp-*.nnc` must be to count as left by an interrupted write: NNADAPTER_BRIDGE_CACHE_TMP_MAX_AGE_S
    when it is a number >= 0, else 300 s (a write in progress keeps touching its file)."""
    try:
        value = float(os.environ.get(TMP_MAX_AGE_ENV, ""))
    except ValueError:
        return DEFAULT_TMP_MAX_AGE_S
    return value if value >= 0 else DEFAULT_TMP_MAX_AGE_S


def clean_stale_temp_files(cache_dir: str, *, force: bool = False) -> list:
    """Remove the temporary files of interrupted atomic writes (`.tmp-*.nnc` not modified for
    `tmp_max_age_s()`) from `cache_dir`; done once per dir per process unless `force`. Returns the names
    removed. Never raises."""
    if not cache_dir:
        return []
    directory = os.path.abspath(cache_dir)
    with _CLEANED_LOCK:
        if directory in _CLEANED_DIRS and not force:
            return []
        _CLEANED_DIRS.add(directory)
    cutoff = time.time() - tmp_max_age_s()
    removed = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not _TMP_NAME.match(entry.name):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                    if (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)) and info.st_mtime <= cutoff:
                        os.unlink(entry.path)
                        removed.append(entry.name)
                except OSError:
                    continue  # gone meanwhile (another process cleaned it) or not ours to remove
    except OSError:
        pass  # no such dir yet, or unreadable: nothing to clean
    return removed


def _process_umask() -> int:
    # Read once, at import: setting and restoring the umask later would briefly give every file another
    # thread creates meanwhile mode 0666.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _process_umask()


def write_file_atomically(path: str, data) -> None:
    """Write `data` (bytes, or a sequence of bytes-like pieces written one after another) to a temporary
    file next to `path`, then rename it over `path` (readers never see a half-written file)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(prefix=".tmp-", suffix=FILE_EXTENSION, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in ((data,) if isinstance(data, (bytes, bytearray, memoryview)) else data):
                f.write(piece)
        # No fsync (0.3 s per 100 MB): after a crash the worst case is a torn file, which the CRC and size
        # checks turn into a cache miss with a warning, and the next run rewrites it.
        # mkstemp creates 0600; a cache dir shared between users wants the usual umask-based mode.
        os.chmod(temp_path, 0o666 & ~_UMASK)
        os.replace(temp_path, path)
    except BaseException:
        try:
            os.unlink(temp_path)
        except OSError:
            pass
        raise


# -- background writes -------------------------------------------------------------------------------
_PENDING_WRITES: list = []
_PENDING_LOCK = threading.Lock()


class PendingCacheWrite:
    """A .nnc being exported, packed and written by its own thread. The thread is not a daemon: the
    interpreter's exit waits for it, so a process that ends right after its first result still leaves its
    cache. A failure is a NncCacheWarning from that thread (the file is then simply absent: a miss next time).
    Exporting reads the compiled program while the caller's thread may execute it: drivers' exporters are
    read-only on a compiled program (intel_openvino's export_model is const and releases the GIL). A process
    forked meanwhile has no such thread: in it, nothing waits for the parent's writes (they are forgotten at
    the fork, and wait() returns at once there), which the parent finishes."""

    def __init__(self, path: str, job: Callable[[], None]):
        self.path = os.path.abspath(path)
        self._pid = os.getpid()
        self._job = job
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"nnc-write {os.path.basename(path)}", daemon=False)
        with _PENDING_LOCK:
            _PENDING_WRITES.append(self)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._job()
        except BaseException as exc:  # never let a writer thread die with a traceback on stderr
            warnings.warn(f"writing the model cache {self.path} failed ({type(exc).__name__}: {exc}); no .nnc "
                          "written", NncCacheWarning, stacklevel=2)
        finally:
            self._job = None  # the program bytes it held
            with _PENDING_LOCK:
                if self in _PENDING_WRITES:
                    _PENDING_WRITES.remove(self)
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the file is written (or the write failed); False when `timeout` ran out first."""
        if threading.current_thread() is self._thread:
            return False  # a warning handler that waits from inside the write: never deadlock
        if os.getpid() != self._pid:
            return True  # a forked child: the thread writing it lives in the parent only
        return self._done.wait(timeout)


def wait_for_cache_writes(path: Optional[str] = None, timeout: Optional[float] = None) -> bool:
    """Block until every .nnc this process is writing in the background (or only the one to `path`) is on
    disk; True when none is left pending. Call it before copying or shipping a cache dir that this process
    has just filled; reading a cache path, destroying a compilation and the interpreter's exit already wait."""
    target = os.path.abspath(path) if path else None
    with _PENDING_LOCK:
        pending = [w for w in _PENDING_WRITES if target is None or w.path == target]
    deadline = None if timeout is None else time.monotonic() + timeout
    for write in pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not write.wait(left):
            return False
    return True


def _forget_pending_writes_after_fork() -> None:
    global _PENDING_LOCK
    _PENDING_LOCK = threading.Lock()  # the parent's lock may have been held by one of its threads at the fork
    _PENDING_WRITES.clear()


os.register_at_fork(after_in_child=_forget_pending_writes_after_fork)


def has_pending_writes() -> bool:
    """Whether this process is still writing any .nnc in the background."""
    with _PENDING_LOCK:
        return bool(_PENDING_WRITES)
