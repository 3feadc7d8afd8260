"""The records of a `.nnc`: Paddle Lite's 328-byte ``NNAdapterOperandType`` and the compilation record.

Owns `pack/unpack_operand_type(s)`, `ProgramRecord`, `CompilationRecord`, the keys a Compilation writes
(``input_types``, ``num_caches``, ``cache_<i>_*``: Compilation::Serialize / Deserialize), `pack_compilation_record`
(with identity and MAC entries) and `load_compilation_record`, which never raises on bad bytes: every failed check
is a cache miss (None) with exactly one warning, so a damaged record can never crash a predictor or load a wrong
program. Imports the container, the identity and the standard's types.

What the operand-type record cannot carry: the per-channel scales live behind a C pointer, which is written as 0,
so a record read back has ``scales=None`` (its channel axis survives). Scales are stored as float32, dims as int32,
and operand names are not part of the record at all.
"""
from __future__ import annotations

import struct
import warnings
from collections.abc import Collection, Iterable, Sequence

import numpy as np

from nnadapter_bridge.nnadapter.codes import (
    MAX_SIZE_OF_DIMENSIONS,
    MAX_SIZE_OF_DYNAMIC_DIMENSIONS,
    Layout,
    Lifetime,
    Precision,
)
from nnadapter_bridge.nnadapter.nnc.container import (
    BytesLike,
    NncCacheWarning,
    NncFormatError,
    crc32c_naive,
    crc_shift,
    pack_container_parts,
    unpack_container_views,
)
from nnadapter_bridge.nnadapter.nnc.identity import (
    MAC_KEY,
    MAC_PADDING,
    MAC_SIZE,
    CacheIdentity,
    check_identity,
    check_mac,
    hmac_sha256,
    identity_entries,
)
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.types import OperandType

OPERAND_TYPE_SIZE = 328


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


def unpack_operand_type(record: BytesLike) -> tuple[OperandType, int]:
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
@plain_dataclass
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
    mapped: np.ndarray | None = None


@plain_dataclass
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


def pack_compilation_record(record: CompilationRecord, identity: CacheIdentity | None = None,
                            key: bytes | None = None) -> bytes:
    """The record's container; with `identity` its token/fingerprint entries, with `key` its HMAC entry."""
    return b"".join(pack_compilation_record_parts(record, identity, key))


def pack_compilation_record_parts(record: CompilationRecord, identity: CacheIdentity | None = None,
                                  key: bytes | None = None) -> list:
    """The record's container as consecutive pieces (header first), for writing a file without joining
    them (the program bytes are pieces of their own, not copied); with `identity` it carries the identity
    entries, with `key` the HMAC entry (identity.py)."""
    entries = _compilation_entries(record)
    if identity is not None:
        entries.update(identity_entries(identity))
    if not key:
        return pack_container_parts(entries)
    entries[MAC_KEY] = bytes(MAC_SIZE)  # a placeholder: the MAC reads these bytes as zeros
    parts = pack_container_parts(entries)
    header, last = parts[0], memoryview(parts[-1])
    padding = MAC_PADDING
    # The MAC entry is the last one (MAC_KEY sorts last, its value is small): the end of the last piece.
    offset = len(last) - padding - MAC_SIZE
    mac = hmac_sha256(key, [header[:8], bytes(4), header[12:], *parts[1:-1], last[:offset], bytes(MAC_SIZE),
                     last[offset + MAC_SIZE:]])
    # The CRC is linear (init 0, no xor-out) and the placeholder is zeros: swapping in the MAC xors the
    # CRC with the MAC's own CRC shifted past the trailing padding, no second pass over the body.
    (crc,) = struct.unpack_from("<I", header, 8)
    crc ^= crc_shift(crc32c_naive(mac), padding)
    header = header[:8] + struct.pack("<I", crc) + header[12:]
    return [header, *parts[1:-1], last[:offset], mac, last[offset + MAC_SIZE:]]


def unpack_compilation_record(data: BytesLike) -> CompilationRecord:
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


def warn_miss(source: str, reason: str) -> None:
    """The one warning of a cache miss on an unusable record or file."""
    warnings.warn(f"model cache {source} is unusable ({reason}); compiling the model instead",
                  NncCacheWarning, stacklevel=3)




def load_compilation_record(data: BytesLike, source: str = "buffer",
                            known_devices: Collection[str] | None = None, *,
                            expect: CacheIdentity | None = None,
                            key: bytes | None = None) -> CompilationRecord | None:
    """A checked CompilationRecord, or None (one warning) when the bytes fail any check (container, CRC,
    then with `key` the HMAC, then with `expect` the identity, then the record), or name a device outside
    `known_devices`. Nothing of the record is handed on before every check passed."""
    try:
        views = unpack_container_views(data)
        if key:
            check_mac(data, views, key)
        if expect is not None:
            check_identity(views, expect)
        record = _record_from_views(views)
    except NncFormatError as exc:
        warn_miss(source, str(exc))
        return None
    if known_devices is not None:
        for i, program in enumerate(record.programs):
            if program.device_name not in known_devices:
                warn_miss(source, f"program {i} is for device '{program.device_name}', which is not in the "
                                   f"context ({', '.join(known_devices) or 'no devices'})")
                return None
    return record
