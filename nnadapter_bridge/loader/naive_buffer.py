"""Reads Paddle Lite's optimized model, the `.nb` ("naive buffer") file that `paddle_lite_opt` / `lite.Opt`
writes and `MobileConfig.set_model_from_file` loads, into the loader's own ProgramDesc (framework_pb2) and a
params dict; load_model turns those into the same ProgramGraph as any other format. The writer is
naive_buffer_writer.py. Byte layout (docs/naive_buffer.md; Paddle Lite v2.13-rc lite/model_parser):

    u16 meta_version | char[16] opt_version (NUL-terminated) | u64 topo_size | program flatbuffer | params

The program is a flatbuffers `ProgramDesc` (framework.fbs). meta_version 1: the params are one flatbuffers
`CombinedParamsDesc` to the end of the file; meta_version 2 (opt's default): u16 params_version 0, u16
meta_size (skipped), u16 header_size (>= 6: u16 count, u32 largest tensor), then `count` records of u32
total_size, u32 offset and one `ParamDesc` flatbuffer each. meta_version 0 (the pre-2.7 BinaryTable encoding)
is refused with a message: Paddle Lite 2.13 itself reads it only in full builds.

Tables are read through the `flatbuffers` package's `Table` API, with the accessors written here from the
schemas' field ids (slot = 4 + 2 * id). That API trusts the bytes, so every table, vtable, string and vector
is bounds-checked against its buffer before it is touched, and the number of tables and vector elements
visited is capped by the buffer's size (forged offsets that make a DAG of shared tables cannot make the reader
loop for long). Any inconsistency is a ModelFormatError naming the file and the field. Parameter arrays are
views of the file bytes (no copy).

Entry points: `read_file`, `read_naive_buffer`, `looks_like_naive_buffer`. Imports the loader's protobuf
module and dtypes only.
"""
from __future__ import annotations

import dataclasses
import math
import struct
from typing import cast

import numpy as np
from flatbuffers import number_types as N
from flatbuffers.table import Table

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.dtypes import is_element_type, numpy_dtype

HEADER_SIZE = 26  # u16 meta_version + char[16] opt_version + u64 topo_size
OPT_VERSION_SIZE = 16
SUPPORTED_META_VERSIONS = (1, 2)
FILE_EXTENSION = ".nb"
PARAMS_VERSION = 0  # ParamSerializer's version (meta_version 2); the reader requires it
LOD_TENSOR_UNION = 1  # ParamDesc.variable_type of a LoDTensorDesc (the union's one member)
# AttrType codes are framework.proto's (INT 0 ... FLOAT64 15); VAR/VARS have no .nb encoding.
_ATTR_VAR, _ATTR_VARS = 13, 14


def looks_like_naive_buffer(data) -> bool:
    """Whether `data` starts like a `.nb`: meta_version 0-2 and a NUL-terminated printable opt version in bytes
    2..18 (version 0 included so that it gets the message saying it is not read)."""
    view = memoryview(data)
    if len(view) < HEADER_SIZE:
        return False
    meta = int.from_bytes(view[0:2], "little")
    version = bytes(view[2:2 + OPT_VERSION_SIZE])
    end = version.find(b"\0")
    return meta in (0, 1, 2) and end > 0 and all(32 <= c < 127 for c in version[:end])


@dataclasses.dataclass
class NaiveBufferModel:
    """What a `.nb` holds: its ProgramDesc, its parameters (views of the file bytes) and its header."""

    program: pb.ProgramDesc
    params: dict
    meta_version: int
    opt_version: str


class _Buffer:
    """One flatbuffer (`data`, its root at offset 0): bounds checks and the error context (`where`: the file,
    `section`: which flatbuffer of it)."""

    def __init__(self, data: memoryview, where: str, section: str):
        self.data = data
        self.size = len(data)
        self.where = where
        self.section = section
        self.budget = self.size // 4 + 16  # tables + vector elements a well-formed buffer can hold at most

    def fail(self, field: str, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.section}: {field}: {message}; the .nb file is damaged or was not written "
                                f"by Paddle Lite's opt", path=self.where)

    def check(self, pos: int, width: int, field: str) -> None:
        if pos < 0 or pos + width > self.size:
            raise self.fail(field, f"offset {pos} (+{width} bytes) is outside the {self.size}-byte buffer")

    def spend(self, units: int, field: str) -> None:
        self.budget -= units
        if self.budget < 0:
            raise self.fail(field, "more tables and elements than the buffer can hold (offsets that point back "
                                   "at shared data)")

    def u32(self, pos: int, field: str) -> int:
        self.check(pos, 4, field)
        return struct.unpack_from("<I", self.data, pos)[0]

    def root(self, field: str) -> _Table:
        return self.table_at(self.u32(0, "root offset"), field)

    def table_at(self, pos: int, field: str) -> _Table:
        self.spend(1, field)
        self.check(pos, 4, field)
        vtable = pos - struct.unpack_from("<i", self.data, pos)[0]
        self.check(vtable, 4, f"{field} vtable")
        vt_size, obj_size = struct.unpack_from("<HH", self.data, vtable)
        if vt_size < 4 or vt_size % 2 or vtable + vt_size > self.size or obj_size < 4 or pos + obj_size > self.size:
            raise self.fail(field, f"vtable at {vtable} (size {vt_size}, object size {obj_size}) does not fit the "
                                   f"buffer")
        return _Table(self, Table(self.data, pos), vt_size, obj_size, field)


class _Table:
    """One table: its fields by schema id, each checked before the flatbuffers Table reads it."""

    __slots__ = ("buf", "t", "vt_size", "obj_size", "name")

    def __init__(self, buf: _Buffer, table: Table, vt_size: int, obj_size: int, name: str):
        self.buf, self.t, self.vt_size, self.obj_size, self.name = buf, table, vt_size, obj_size, name

    def _offset(self, field_id: int, width: int, field: str) -> int:
        """The field's offset inside the object (0: absent); the vtable was checked in table_at."""
        slot = 4 + 2 * field_id
        offset = self.t.Offset(slot) if slot + 2 <= self.vt_size else 0
        if offset and offset + width > self.obj_size:
            raise self.buf.fail(f"{self.name}.{field}", f"field offset {offset} (+{width}) is past the "
                                                        f"{self.obj_size}-byte object")
        return offset

    def scalar(self, field_id: int, flags, default, field: str):
        offset = self._offset(field_id, flags.bytewidth, field)
        return default if not offset else self.t.Get(flags, self.t.Pos + offset)

    def _target(self, field_id: int, field: str):
        """Where an offset field (string, vector, table) points, or None when absent."""
        offset = self._offset(field_id, 4, field)
        if not offset:
            return None
        return self.t.Indirect(self.t.Pos + offset)

    def table(self, field_id: int, field: str, required: bool = False):
        target = self._target(field_id, field)
        if target is None:
            if required:
                raise self.buf.fail(f"{self.name}.{field}", "a required table is missing")
            return None
        return self.buf.table_at(target, f"{self.name}.{field}")

    def string(self, field_id: int, field: str, required: bool = False):
        target = self._target(field_id, field)
        if target is None:
            if required:
                raise self.buf.fail(f"{self.name}.{field}", "a required string is missing")
            return None
        return self._string_at(target, f"{self.name}.{field}")

    def _string_at(self, target: int, field: str) -> str:
        length = self.buf.u32(target, field)
        self.buf.check(target + 4, length + 1, field)  # the bytes and their NUL
        raw = bytes(self.buf.data[target + 4: target + 4 + length])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.buf.fail(field, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None

    def _vector(self, field_id: int, field: str, width: int):
        """(start of the elements, count) of a vector field; (None, 0) when absent."""
        target = self._target(field_id, field)
        if target is None:
            return None, 0
        count = self.buf.u32(target, f"{self.name}.{field}")
        self.buf.check(target + 4, count * width, f"{self.name}.{field} ({count} elements)")
        return target + 4, count

    def numbers(self, field_id: int, flags, field: str) -> np.ndarray:
        start, count = self._vector(field_id, field, flags.bytewidth)
        if not count:
            return np.empty(0, N.to_numpy_type(flags))
        self.buf.spend(count // 8, f"{self.name}.{field}")
        return np.frombuffer(self.buf.data, N.to_numpy_type(flags), count, start)

    def bytes_view(self, field_id: int, field: str):
        start, count = self._vector(field_id, field, 1)
        return None if start is None else self.buf.data[start: start + count]

    def tables(self, field_id: int, field: str) -> list:
        start, count = self._vector(field_id, field, 4)
        self.buf.spend(count, f"{self.name}.{field}")
        out = []
        for k in range(count):
            element = start + 4 * k
            out.append(self.buf.table_at(element + self.buf.u32(element, field), f"{self.name}.{field}[{k}]"))
        return out

    def strings(self, field_id: int, field: str) -> list:
        start, count = self._vector(field_id, field, 4)
        self.buf.spend(count, f"{self.name}.{field}")
        out = []
        for k in range(count):
            element = start + 4 * k
            where = f"{self.name}.{field}[{k}]"
            out.append(self._string_at(element + self.buf.u32(element, where), where))
        return out


# -- the program (framework.fbs, namespace paddle.lite.fbs.proto) -------------------------------------------------
def _check_sorted(keys: list, table: _Table, field: str) -> None:
    """Paddle Lite looks `inputs`/`outputs`/`attrs` up by binary search: they must be sorted and unique."""
    encoded = [k.encode() for k in keys]
    for a, b in zip(encoded, encoded[1:]):
        if not a < b:
            raise table.buf.fail(f"{table.name}.{field}", f"keys are not sorted and unique ({a!r} before {b!r}); "
                                                          "Paddle Lite's lookups would miss them")


_VAR_TYPE_CODES = frozenset(pb.VarType.Type.values())


def _var_type_code(table: _Table, value: int, field: str) -> pb.VarType.Type:
    """A VarType_.Type value, checked before protobuf's closed enum sees it."""
    if value not in _VAR_TYPE_CODES:
        raise table.buf.fail(f"{table.name}.{field}", f"{value} is not a VarType.Type code")
    return cast("pb.VarType.Type", value)  # checked just above: the generated stub's type for the code


def _tensor_desc(table: _Table, into) -> None:
    into.data_type = _var_type_code(table, table.scalar(0, N.Int32Flags, 0, "data_type"), "data_type")
    into.dims.extend(int(d) for d in table.numbers(1, N.Int64Flags, "dims"))


def _lod_tensor_desc(table: _Table, into) -> None:
    _tensor_desc(table.table(0, "tensor", required=True), into.tensor)
    into.lod_level = table.scalar(1, N.Int32Flags, 0, "lod_level")


def _var(table: _Table, into: pb.VarDesc) -> None:
    into.name = table.string(0, "name", required=True)
    table.name = f"var '{into.name}'"
    var_type = table.table(1, "type", required=True)
    into.type.type = _var_type_code(var_type, var_type.scalar(0, N.Int32Flags, 0, "type"), "type")
    selected_rows = var_type.table(1, "selected_rows")
    if selected_rows is not None:
        _tensor_desc(selected_rows, into.type.selected_rows)
    lod_tensor = var_type.table(2, "lod_tensor")
    if lod_tensor is not None:
        _lod_tensor_desc(lod_tensor, into.type.lod_tensor)
    tensor_array = var_type.table(3, "tensor_array")
    if tensor_array is not None:
        _lod_tensor_desc(tensor_array, into.type.tensor_array)
    into.persistable = bool(table.scalar(2, N.BoolFlags, False, "persistable"))
    if table.scalar(3, N.BoolFlags, False, "need_check_feed"):
        into.need_check_feed = True


def _slots(table: _Table, field_id: int, field: str, into) -> None:
    names = []
    for slot in table.tables(field_id, field):
        var = into.add()
        var.parameter = slot.string(0, "parameter", required=True)
        var.arguments.extend(slot.strings(1, "arguments"))
        names.append(var.parameter)
    _check_sorted(names, table, field)


def _attr(table: _Table, into: pb.OpDesc.Attr) -> None:
    into.name = table.string(0, "name", required=True)
    table.name = f"{table.name} '{into.name}'"
    kind = table.scalar(1, N.Int32Flags, 0, "type")
    if kind in (_ATTR_VAR, _ATTR_VARS) or kind not in pb.AttrType.values() or kind > 15:
        raise table.buf.fail(table.name, f"attribute type {kind} is not one a .nb holds (INT 0 ... FLOAT64 15)")
    into.type = kind
    if kind == pb.INT:
        into.i = table.scalar(2, N.Int32Flags, 0, "i")
    elif kind == pb.FLOAT:
        into.f = table.scalar(3, N.Float32Flags, 0.0, "f")
    elif kind == pb.STRING:
        into.s = table.string(4, "s") or ""
    elif kind == pb.INTS:
        into.ints.extend(int(v) for v in table.numbers(5, N.Int32Flags, "ints"))
    elif kind == pb.FLOATS:
        into.floats.extend(float(v) for v in table.numbers(6, N.Float32Flags, "floats"))
    elif kind == pb.STRINGS:
        into.strings.extend(table.strings(7, "strings"))
    elif kind == pb.BOOLEAN:
        into.b = bool(table.scalar(8, N.BoolFlags, False, "b"))
    elif kind == pb.BOOLEANS:
        into.bools.extend(bool(v) for v in table.numbers(9, N.Uint8Flags, "bools"))
    elif kind == pb.BLOCK:
        into.block_idx = table.scalar(10, N.Int32Flags, 0, "block_idx")
    elif kind == pb.LONG:
        into.l = table.scalar(11, N.Int64Flags, 0, "l")
    elif kind == pb.BLOCKS:
        into.blocks_idx.extend(int(v) for v in table.numbers(12, N.Int32Flags, "blocks_idx"))
    elif kind == pb.LONGS:
        into.longs.extend(int(v) for v in table.numbers(13, N.Int64Flags, "longs"))
    elif kind == pb.FLOAT64:
        into.float64 = table.scalar(14, N.Float64Flags, 0.0, "float64")
    else:  # FLOAT64S
        into.float64s.extend(float(v) for v in table.numbers(15, N.Float64Flags, "float64s"))


def _op(table: _Table, into: pb.OpDesc, block_idx: int, op_idx: int) -> None:
    into.type = table.string(0, "type", required=True)
    table.name = f"block {block_idx} op {op_idx} ({into.type})"
    _slots(table, 1, "inputs", into.inputs)
    _slots(table, 2, "outputs", into.outputs)
    names = []
    for attr in table.tables(3, "attrs"):
        _attr(attr, into.attrs.add())
        names.append(into.attrs[-1].name)
    _check_sorted(names, table, "attrs")
    if table.scalar(4, N.BoolFlags, False, "is_target"):
        into.is_target = True


def read_program(data: memoryview, where: str) -> pb.ProgramDesc:
    """The program flatbuffer (root ProgramDesc) -> framework_pb2.ProgramDesc."""
    root = _Buffer(data, where, "program").root("ProgramDesc")
    program = pb.ProgramDesc()
    for k, block in enumerate(root.tables(0, "blocks")):
        desc = program.blocks.add()
        desc.idx = block.scalar(0, N.Int32Flags, 0, "idx")
        desc.parent_idx = block.scalar(1, N.Int32Flags, 0, "parent_idx")
        block.name = f"block {k}"
        for var in block.tables(2, "vars"):
            _var(var, desc.vars.add())
        for j, op in enumerate(block.tables(3, "ops")):
            _op(op, desc.ops.add(), k, j)
        forward = block.scalar(4, N.Int32Flags, -1, "forward_block_idx")
        if forward != -1:
            desc.forward_block_idx = forward
    if not program.blocks:
        raise ModelFormatError("program: ProgramDesc.blocks is empty; the .nb file is damaged", path=where)
    version = root.table(1, "version")
    if version is not None:
        program.version.version = version.scalar(0, N.Int64Flags, 0, "version")
    return program


# -- the parameters (param.fbs) -----------------------------------------------------------------------------------
def _param(table: _Table, params: dict) -> None:
    name = table.string(1, "name", required=True)
    table.name = f"parameter '{name}'"
    kind = table.scalar(2, N.Uint8Flags, 0, "variable_type")
    if kind != LOD_TENSOR_UNION:
        raise table.buf.fail(f"{table.name}.variable_type", f"{kind}, not LoDTensorDesc ({LOD_TENSOR_UNION})")
    tensor = table.table(3, "variable", required=True)
    tensor.name = table.name
    dims = [int(d) for d in tensor.numbers(2, N.Int64Flags, "dim")]
    code = tensor.scalar(3, N.Int32Flags, 0, "data_type")
    if not is_element_type(code):
        raise tensor.buf.fail(f"{table.name}.data_type", f"{code} is not a tensor element type")
    if any(d < 0 for d in dims) or len(dims) > 64:
        raise tensor.buf.fail(f"{table.name}.dim", f"{dims} are not a stored tensor's dims")
    dtype = numpy_dtype(code)
    data = tensor.bytes_view(4, "data")
    if data is None:
        raise tensor.buf.fail(f"{table.name}.data", "the tensor data is missing")
    numel = math.prod(dims)
    if numel * dtype.itemsize != len(data):
        raise tensor.buf.fail(f"{table.name}.data", f"{len(data)} bytes for dims {dims} of {dtype.name} "
                                                    f"({numel * dtype.itemsize} expected)")
    if name in params:
        raise tensor.buf.fail(table.name, "stored twice")
    params[name] = np.frombuffer(data, dtype=dtype, count=numel).reshape(dims)


def _u(data: memoryview, fmt: str, pos: int, field: str, where: str) -> int:
    width = struct.calcsize(fmt)
    if pos + width > len(data):
        raise ModelFormatError(f"params: {field}: the file ends at byte {len(data)}, inside this field (it is "
                               f"truncated)", path=where)
    return struct.unpack_from(fmt, data, pos)[0]


def read_params(data: memoryview, start: int, meta_version: int, where: str) -> dict:
    """The parameters section that begins at byte `start` of the file."""
    params: dict = {}
    if meta_version == 1:
        if start >= len(data):
            raise ModelFormatError("params: the file ends where its CombinedParamsDesc should begin", path=where)
        root = _Buffer(data[start:], where, "params (CombinedParamsDesc)").root("CombinedParamsDesc")
        for param in root.tables(0, "params"):
            _param(param, params)
        return params
    pos = start
    params_version = _u(data, "<H", pos, "params_version", where)
    if params_version != PARAMS_VERSION:
        raise ModelFormatError(f"params: params_version {params_version}; Paddle Lite 2.13 writes and reads "
                               f"{PARAMS_VERSION}", path=where)
    meta_size = _u(data, "<H", pos + 2, "meta_size", where)
    pos += 4 + meta_size
    header_size = _u(data, "<H", pos, "header_size", where)
    if header_size < 6:
        raise ModelFormatError(f"params: header_size {header_size} is smaller than its 6 bytes (u16 count, u32 "
                               f"largest tensor size)", path=where)
    count = _u(data, "<H", pos + 2, "param count", where)
    _u(data, "<I", pos + 4, "max_tensor_size", where)
    pos += 2 + header_size
    for k in range(count):  # each record takes >= 8 bytes, so this ends within len(data) / 8 steps
        total = _u(data, "<I", pos, f"record {k} total_size", where)
        offset = _u(data, "<I", pos + 4, f"record {k} offset", where)
        if offset < 4 or offset >= total:
            raise ModelFormatError(f"params: record {k} (of {count}): offset {offset} does not leave a blob inside "
                                   f"its total_size {total}", path=where)
        blob_start, blob_end = pos + 4 + offset, pos + 4 + total
        if blob_end > len(data):
            raise ModelFormatError(f"params: record {k} (of {count}): total_size {total} at byte {pos} runs past the "
                                   f"end of the file ({len(data)} bytes); it is truncated or the count is forged",
                                   path=where)
        _param(_Buffer(data[blob_start:blob_end], where, f"params record {k}").root("ParamDesc"), params)
        pos = blob_end
    return params


def read_header(view: memoryview, where: str) -> tuple:
    """(meta_version, opt_version, topo_size) of a `.nb`, checked."""
    if len(view) < HEADER_SIZE:
        raise ModelFormatError(f"header: a Paddle Lite .nb starts with a {HEADER_SIZE}-byte header; this file has "
                               f"{len(view)} bytes", path=where)
    meta_version = int.from_bytes(view[0:2], "little")
    raw_version = bytes(view[2:2 + OPT_VERSION_SIZE])
    end = raw_version.find(b"\0")
    if end < 0:
        raise ModelFormatError("header: opt_version has no terminating NUL in its 16 bytes", path=where)
    opt_version = raw_version[:end].decode("ascii", errors="replace")
    if meta_version == 0:
        raise ModelFormatError(f"header: meta_version 0, the pre-2.7 naive-buffer encoding (opt {opt_version!r}), "
                               "is not read (Paddle Lite 2.13 itself reads it only in full builds); run "
                               "paddle_lite_opt 2.7 or later on the source model", path=where)
    if meta_version not in SUPPORTED_META_VERSIONS:
        raise ModelFormatError(f"header: meta_version {meta_version} is not a Paddle Lite model format (1 or 2 "
                               "expected); is this a .nb file?", path=where)
    topo_size = int.from_bytes(view[18:26], "little")
    if topo_size < 8 or HEADER_SIZE + topo_size > len(view):
        raise ModelFormatError(f"header: topo_size {topo_size} does not fit the {len(view)}-byte file (the "
                               f"program would end at byte {HEADER_SIZE + topo_size}); it is truncated or damaged",
                               path=where)
    return meta_version, opt_version, topo_size


def read_naive_buffer(data, where: str = "<.nb buffer>") -> NaiveBufferModel:
    """Parse a whole `.nb` (bytes, bytearray, mmap or memoryview); `where` names it in errors."""
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    meta_version, opt_version, topo_size = read_header(view, where)
    program = read_program(view[HEADER_SIZE: HEADER_SIZE + topo_size], where)
    params = read_params(view, HEADER_SIZE + topo_size, meta_version, where)
    _take_stored_dims(program, params)
    _give_inserted_vars_dims(program)
    return NaiveBufferModel(program, params, meta_version, opt_version)


def read_file(path: str) -> NaiveBufferModel:
    with open(path, "rb") as f:
        return read_naive_buffer(f.read(), path)


def _take_stored_dims(program: pb.ProgramDesc, params: dict) -> None:
    """opt rewrites some weights (it folds batch norm into conv filters and biases, it fuses mobilenet_v3's
    squeeze-excitation ops) and can leave a var's old dims in its VarDesc; Paddle Lite's runtime uses the
    stored tensor, and so do we."""
    for var in program.blocks[0].vars:
        stored = params.get(var.name)
        if stored is None or not var.persistable or not var.type.HasField("lod_tensor"):
            continue
        dims = var.type.lod_tensor.tensor.dims
        if list(dims) != list(stored.shape):
            del dims[:]
            dims.extend(stored.shape)


# Ops opt inserts between kernels of different precisions or targets: their output has the input's shape.
SHAPE_PRESERVING_INSERTED_OPS = ("calib", "calib_once", "io_copy", "io_copy_once")


def _give_inserted_vars_dims(program: pb.ProgramDesc) -> None:
    """opt declares the vars it inserts (`x/precision_trans0` after a `calib`, ...) without dims; they have
    their input's shape, so they get the input var's declared dims (what the converters' shape checks read)."""
    for block in program.blocks:
        vars_by_name = {var.name: var for var in block.vars}
        for op in block.ops:
            if op.type not in SHAPE_PRESERVING_INSERTED_OPS:
                continue
            inputs = [a for slot in op.inputs if slot.parameter == "Input" for a in slot.arguments]
            outputs = [a for slot in op.outputs if slot.parameter == "Out" for a in slot.arguments]
            if len(inputs) != 1 or len(outputs) != 1:
                continue
            source, target = vars_by_name.get(inputs[0]), vars_by_name.get(outputs[0])
            if source is None or target is None or not source.type.HasField("lod_tensor") \
                    or not target.type.HasField("lod_tensor"):
                continue
            dims = target.type.lod_tensor.tensor.dims
            if not len(dims) and len(source.type.lod_tensor.tensor.dims):
                dims.extend(source.type.lod_tensor.tensor.dims)
