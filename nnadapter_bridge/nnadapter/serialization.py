"""builtin_device's program bytes: an NNAdapter Model in the .nnc key/value container (facts §2.5).

Keys and layouts (all little-endian, size_t = 8 bytes):

* ``operands``: u64 count; per operand its 328-byte NNAdapterOperandType record, then for a
  per-channel quantized type ``scale_count`` float32 scales, then for a constant (CONSTANT_COPY or
  CONSTANT_REFERENCE) a u64 byte length and the raw value bytes;
* ``operations``: u64 count; per operation int32 type, u64 n_in, n_in int64 operand indexes
  (-1 = null operand), u64 n_out, n_out int64 indexes;
* ``input_operands`` / ``output_operands``: u64 count, int64 indexes.

Round trip: operand types (incl. quant params and per-channel scales), constant values, null operands,
operation order and model I/O come back exactly; constants come back as CONSTANT_COPY (their own
copy of the bytes), scales as float32 values, and operand names are not stored. Loading checks
every count, index and length, and raises NNAdapterError (INVALID_PARAMETER) on a bad buffer;
nothing is ever evaluated or unpickled.

Entry points: `serialize_model`, `deserialize_model` (builtin_device's program bytes). Imports the standard's
model and types and the `.nnc` records; nothing above the ground.
"""
from __future__ import annotations

import struct

import numpy as np

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import Lifetime, OperationType, ResultCode
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import (
    OPERAND_TYPE_SIZE,
    NncFormatError,
    pack_container,
    pack_operand_type,
    unpack_container,
    unpack_operand_type,
)
from nnadapter_bridge.nnadapter.types import Operand, Operation

_U64 = struct.Struct("<Q")


def serialize_model(model: Model) -> bytes:
    """The model as builtin_device program bytes."""
    positions = {id(o): i for i, o in enumerate(model.operands)}

    def index_of(operand) -> int:
        if operand is None:
            return -1
        try:
            return positions[id(operand)]
        except KeyError:
            raise NNAdapterError(f"serialize_model: {operand.label()} does not belong to the model",
                                 ResultCode.INVALID_PARAMETER) from None

    operands = [_U64.pack(len(model.operands))]
    for operand in model.operands:
        t = operand.type
        operands.append(pack_operand_type(t))
        if t.is_per_channel:
            scales = t.scales or ()
            operands.append(np.asarray(scales, dtype="<f4").tobytes())
        if t.is_constant:
            if operand.value is None:
                raise NNAdapterError(f"serialize_model: constant {operand.label()} has no value",
                                     ResultCode.INVALID_PARAMETER)
            raw = np.ascontiguousarray(operand.value, dtype=t.dtype.newbyteorder("<")).tobytes()
            operands.append(_U64.pack(len(raw)))
            operands.append(raw)

    operations = [_U64.pack(len(model.operations))]
    for op in model.operations:
        operations.append(struct.pack("<i", int(op.type)))
        for side in (op.inputs, op.outputs):
            operations.append(_U64.pack(len(side)))
            operations.append(struct.pack(f"<{len(side)}q", *(index_of(o) for o in side)))

    def index_list(items) -> bytes:
        return _U64.pack(len(items)) + struct.pack(f"<{len(items)}q", *(index_of(o) for o in items))

    return pack_container({
        "operands": b"".join(operands),
        "operations": b"".join(operations),
        "input_operands": index_list(model.input_operands),
        "output_operands": index_list(model.output_operands),
    })


class _Reader:
    """Bounds-checked sequential reads over one value of the container."""

    def __init__(self, data: bytes, key: str):
        self.data = memoryview(data).cast("B")  # slices are views: no copy until a constant is made
        self.key = key
        self.offset = 0

    def take(self, size: int) -> memoryview:
        if size < 0 or size > len(self.data) - self.offset:
            raise NncFormatError(f"'{self.key}': needs {size} bytes at offset {self.offset}, "
                                 f"only {len(self.data) - self.offset} left")
        chunk = self.data[self.offset:self.offset + size]
        self.offset += size
        return chunk

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def count(self, item_size: int) -> int:
        n = self.u64()
        if n * item_size > len(self.data) - self.offset:
            raise NncFormatError(f"'{self.key}': a count of {n} cannot fit in the bytes left")
        return n

    def int64s(self, n: int) -> list:
        return list(struct.unpack(f"<{n}q", self.take(8 * n)))

    def done(self) -> None:
        if self.offset != len(self.data):
            raise NncFormatError(f"'{self.key}': {len(self.data) - self.offset} trailing bytes")


def deserialize_model(data) -> Model:
    """Rebuild a finished Model from builtin_device program bytes; raises NNAdapterError if invalid."""
    try:
        return _deserialize(data)
    except NncFormatError as exc:
        raise NNAdapterError(f"builtin_device program bytes are invalid: {exc}",
                             ResultCode.INVALID_PARAMETER) from None


def _deserialize(data) -> Model:
    entries = unpack_container(data)
    for key in ("operands", "operations", "input_operands", "output_operands"):
        if key not in entries:
            raise NncFormatError(f"missing key '{key}'")
    model = Model()
    reader = _Reader(entries["operands"], "operands")
    for i in range(reader.count(OPERAND_TYPE_SIZE)):
        t, scale_count = unpack_operand_type(reader.take(OPERAND_TYPE_SIZE))
        if t.is_per_channel:
            t.scales = tuple(float(s) for s in np.frombuffer(reader.take(4 * scale_count), dtype="<f4"))
        value = None
        if t.is_constant:
            raw = reader.take(reader.u64())
            try:
                expected = t.numel() * t.dtype.itemsize
            except ValueError:
                raise NncFormatError(f"constant operand {i} has unknown dims {t.dims}") from None
            if len(raw) != expected:
                raise NncFormatError(f"constant operand {i} ({t.describe()}) has {len(raw)} bytes, "
                                     f"expected {expected}")
            # Copied once into fresh (aligned) memory: a view into the program bytes would be unaligned, and
            # BLAS then takes other code paths, so a restored program would not give bit-identical results.
            value = np.frombuffer(raw, dtype=t.dtype.newbyteorder("<")).astype(t.dtype).reshape(t.dims)
            t.lifetime = Lifetime.CONSTANT_COPY
        model.operands.append(Operand(t, value, "", i))
    reader.done()

    def operand_at(index: int, where: str):
        if index == -1:
            return None
        if not 0 <= index < len(model.operands):
            raise NncFormatError(f"{where}: operand index {index} outside 0..{len(model.operands) - 1}")
        return model.operands[index]

    reader = _Reader(entries["operations"], "operations")
    for i in range(reader.count(4 + 16)):
        (code,) = struct.unpack("<i", reader.take(4))
        try:
            op_type = OperationType(code)
        except ValueError:
            raise NncFormatError(f"operation {i}: unknown operation code {code}") from None
        sides = []
        for side in ("input", "output"):
            indexes = reader.int64s(reader.count(8))
            sides.append([operand_at(k, f"operation {i} {side}") for k in indexes])
        model.operations.append(Operation(op_type, sides[0], sides[1], i))
    reader.done()

    for key, target in (("input_operands", model.input_operands), ("output_operands", model.output_operands)):
        reader = _Reader(entries[key], key)
        for k in reader.int64s(reader.count(8)):
            operand = operand_at(k, key)
            if operand is None:
                raise NncFormatError(f"'{key}' lists a null operand")
            target.append(operand)
        reader.done()
    model.finished = True
    return model
