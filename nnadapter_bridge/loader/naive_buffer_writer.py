"""Writes Paddle Lite's optimized model file, the meta_version-2 `.nb` that Paddle Lite 2.13's `MobileConfig`
loads, from a loaded model (ProgramGraph: a legacy program, a PIR program or a `.nb`) or its blocks + params.
The reader is naive_buffer.py; the byte layout and the recipe are in docs/naive_buffer.md (Paddle Lite v2.13-rc
lite/model_parser: SaveModelNaive, flatbuffers/io.cc).

The flatbuffers are built with the `flatbuffers` package's Builder following flatc 1.12's object-API `Pack`
order (`--force-empty`): children are created in schema field order, depth-first; each table's fields are added
in the order flatc's `CreateX` uses; every string/vector field of an attribute is written even when empty (the
empty `s` is one shared string); scalars equal to their default are left out. `inputs`, `outputs` (by
parameter) and `attrs` (by name) are sorted in byte order because Paddle Lite looks them up by binary search.
Parameters are the persistable tensors of block 0, sorted by name, one framed `ParamDesc` flatbuffer each
(u16 count: at most 65535). For a `.nb` Paddle Lite's opt wrote, read and written back, the output equals
the input byte for byte except the 7 bytes after the opt version's NUL, which opt leaves uninitialised.

Ops are written as the model holds them (no fusion). Paddle Lite's runtime picks each op's kernel from its
`__@kernel_type_attr@__` attribute (`op_type/alias/target/precision/layout`); `kernel_types` supplies the
value for ops that have none (KERNEL_TYPES_X86: what opt 2.13 writes for x86), and an op without one gets
Paddle Lite's fallback: its first registered kernel for the target.

Entry points: `save`, `graph_to_naive_buffer`, `write_naive_buffer` (lite.Opt,
Predictor.save_optimized_model, `nnadapter-bridge opt`). Imports the loader only.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import flatbuffers
import numpy as np

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.dtypes import var_type_of_dtype
from nnadapter_bridge.loader.naive_buffer import HEADER_SIZE, LOD_TENSOR_UNION, OPT_VERSION_SIZE, PARAMS_VERSION
from nnadapter_bridge.loader.program import BlockInfo, BlockRef, OpInfo, VarInfo

# The version string written into the header. Paddle Lite compares it with its own and only warns on a
# difference (meta_version 1/2); this is the release whose format the file follows.
OPT_VERSION = "v2.13-rc"
META_VERSION = 2
KERNEL_TYPE_ATTR = "__@kernel_type_attr@__"
MAX_PARAMS = 0xFFFF  # the params count is a u16
# Target/precision/layout codes of lite/api/paddle_place.h: Host 1, X86 2 / Float 1, Any 4 / NCHW 1, Any 2.
# The kernels Paddle Lite 2.13's opt picks on x86 (read back from its .nb files of the zoo models and of
# unfused programs: tests/e2e/test_nb_models.py); other ops get Lite's fallback (no attribute).
KERNEL_TYPES_X86 = {
    "feed": "feed/def/1/4/2",
    "fetch": "fetch/def/1/4/2",
}


class NaiveBufferWriteError(ModelFormatError):
    """The model cannot be written as a `.nb` (an attribute or dtype the format has no encoding for, too many
    parameters)."""


# -- program ------------------------------------------------------------------------------------------------------
def _string_vector(b: flatbuffers.Builder, strings) -> int:
    offsets = [b.CreateString(s) for s in strings]
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _table_vector(b: flatbuffers.Builder, offsets: list) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _numbers(b: flatbuffers.Builder, values, dtype) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=dtype).reshape(-1))


def _tensor_desc(b, data_type: int, dims) -> int:
    dims_off = _numbers(b, list(dims), "<i8")
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(1, dims_off, 0)
    b.PrependInt32Slot(0, data_type, 0)
    return b.EndObject()


def _lod_tensor_desc(b, data_type: int, dims, lod_level: int) -> int:
    tensor = _tensor_desc(b, data_type, dims)
    b.StartObject(2)
    b.PrependInt32Slot(1, lod_level, 0)
    b.PrependUOffsetTRelativeSlot(0, tensor, 0)
    return b.EndObject()


def _var(b, var: VarInfo) -> int:
    name = b.CreateString(var.name)
    # VarType: selected_rows (1), lod_tensor (2), tensor_array (3) by kind; feed/fetch lists carry an empty
    # LoDTensorDesc of BOOL, as opt writes them.
    data_type = var.data_type if var.data_type is not None else 0
    shape = [] if var.data_type is None else list(var.shape)
    selected_rows = lod_tensor = tensor_array = None
    if var.var_type == pb.VarType.SELECTED_ROWS:
        selected_rows = _tensor_desc(b, data_type, shape)
    elif var.var_type == pb.VarType.LOD_TENSOR_ARRAY:
        tensor_array = _lod_tensor_desc(b, data_type, shape, var.lod_level)
    else:
        lod_tensor = _lod_tensor_desc(b, data_type, shape, var.lod_level)
    b.StartObject(6)
    for slot, off in ((3, tensor_array), (2, lod_tensor), (1, selected_rows)):
        if off is not None:
            b.PrependUOffsetTRelativeSlot(slot, off, 0)
    b.PrependInt32Slot(0, var.var_type, 0)
    var_type = b.EndObject()
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(1, var_type, 0)
    b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependBoolSlot(3, var.need_check_feed, False)
    b.PrependBoolSlot(2, var.persistable, False)
    return b.EndObject()


def _slot_vector(b, slots: dict) -> int:
    tables = []
    for parameter in sorted(slots, key=lambda s: s.encode()):
        name = b.CreateString(parameter)
        arguments = _string_vector(b, slots[parameter])
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(1, arguments, 0)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        tables.append(b.EndObject())
    return _table_vector(b, tables)


def _attr_fields(name: str, kind: int, value, where: str) -> dict:
    """The Attr fields (by schema field name) that carry `value` of AttrType `kind`."""
    if kind == pb.INT:
        return {"i": int(value)}
    if kind == pb.FLOAT:
        return {"f": float(value)}
    if kind == pb.STRING:
        return {"s": value}
    if kind == pb.INTS:
        return {"ints": [int(v) for v in value]}
    if kind == pb.FLOATS:
        return {"floats": [float(v) for v in value]}
    if kind == pb.STRINGS:
        return {"strings": list(value)}
    if kind == pb.BOOLEAN:
        return {"b": bool(value)}
    if kind == pb.BOOLEANS:
        return {"bools": [bool(v) for v in value]}
    if kind == pb.BLOCK:
        return {"block_idx": value.idx if isinstance(value, BlockRef) else int(value)}
    if kind == pb.LONG:
        return {"l": int(value)}
    if kind == pb.BLOCKS:
        return {"blocks_idx": [v.idx if isinstance(v, BlockRef) else int(v) for v in value]}
    if kind == pb.LONGS:
        return {"longs": [int(v) for v in value]}
    if kind == pb.FLOAT64:
        return {"float64": float(value)}
    if kind == pb.FLOAT64S:
        return {"float64s": [float(v) for v in value]}
    raise NaiveBufferWriteError(f"{where}: attribute '{name}' is of type {pb.AttrType.Name(kind)}, which a .nb "
                                f"has no encoding for (Paddle Lite's framework.fbs)")


_EMPTY_VECTORS = (("ints", "<i4"), ("floats", "<f4"), ("bools", "u1"), ("blocks_idx", "<i4"), ("longs", "<i8"),
                  ("float64s", "<f8"))


def _attr(b, name: str, kind: int, value, where: str) -> int:
    fields = _attr_fields(name, kind, value, where)
    name_off = b.CreateString(name)
    s = fields.get("s", "")
    s_off = b.CreateString(s) if s else b.CreateSharedString("")
    vectors = {}
    for field, dtype in _EMPTY_VECTORS[:2]:
        vectors[field] = _numbers(b, fields.get(field, []), dtype)
    vectors["strings"] = _string_vector(b, fields.get("strings", []))
    for field, dtype in _EMPTY_VECTORS[2:]:
        vectors[field] = _numbers(b, fields.get(field, []), dtype)
    b.StartObject(16)
    b.PrependFloat64Slot(14, fields.get("float64", 0.0), 0.0)
    b.PrependInt64Slot(11, fields.get("l", 0), 0)
    b.PrependUOffsetTRelativeSlot(15, vectors["float64s"], 0)
    b.PrependUOffsetTRelativeSlot(13, vectors["longs"], 0)
    b.PrependUOffsetTRelativeSlot(12, vectors["blocks_idx"], 0)
    b.PrependInt32Slot(10, fields.get("block_idx", 0), 0)
    b.PrependUOffsetTRelativeSlot(9, vectors["bools"], 0)
    b.PrependUOffsetTRelativeSlot(7, vectors["strings"], 0)
    b.PrependUOffsetTRelativeSlot(6, vectors["floats"], 0)
    b.PrependUOffsetTRelativeSlot(5, vectors["ints"], 0)
    b.PrependUOffsetTRelativeSlot(4, s_off, 0)
    b.PrependFloat32Slot(3, fields.get("f", 0.0), 0.0)
    b.PrependInt32Slot(2, fields.get("i", 0), 0)
    b.PrependInt32Slot(1, kind, 0)
    b.PrependUOffsetTRelativeSlot(0, name_off, 0)
    b.PrependBoolSlot(8, fields.get("b", False), False)
    return b.EndObject()


def _op(b, op: OpInfo, kernel_types: dict) -> int:
    where = f"block {op.block_idx} op {op.index} ({op.type})"
    type_off = b.CreateString(op.type)
    inputs = _slot_vector(b, op.inputs)
    outputs = _slot_vector(b, op.outputs)
    attrs = dict(op.attrs)
    kinds = dict(op.attr_types)
    if KERNEL_TYPE_ATTR not in attrs and op.type in kernel_types:
        attrs[KERNEL_TYPE_ATTR], kinds[KERNEL_TYPE_ATTR] = kernel_types[op.type], pb.STRING
    attr_offsets = []
    for name in sorted(attrs, key=lambda n: n.encode()):
        kind = kinds.get(name)
        if kind is None:
            raise NaiveBufferWriteError(f"{where}: attribute '{name}' has no recorded type")
        attr_offsets.append(_attr(b, name, kind, attrs[name], where))
    attrs_off = _table_vector(b, attr_offsets)
    b.StartObject(5)
    b.PrependUOffsetTRelativeSlot(3, attrs_off, 0)
    b.PrependUOffsetTRelativeSlot(2, outputs, 0)
    b.PrependUOffsetTRelativeSlot(1, inputs, 0)
    b.PrependUOffsetTRelativeSlot(0, type_off, 0)
    b.PrependBoolSlot(4, bool(op.is_target), False)
    return b.EndObject()


def _block(b, block: BlockInfo, kernel_types: dict) -> int:
    var_offsets = [_var(b, var) for var in block.vars.values()]
    vars_off = _table_vector(b, var_offsets)
    ops_off = _table_vector(b, [_op(b, op, kernel_types) for op in block.ops])
    b.StartObject(5)
    b.PrependInt32Slot(4, block.forward_block_idx, -1)
    b.PrependUOffsetTRelativeSlot(3, ops_off, 0)
    b.PrependUOffsetTRelativeSlot(2, vars_off, 0)
    b.PrependInt32Slot(1, block.parent_idx, 0)
    b.PrependInt32Slot(0, block.idx, 0)
    return b.EndObject()


def program_bytes(blocks: list, program_version: int | None = None, kernel_types: dict | None = None) -> bytes:
    """The program flatbuffer (root ProgramDesc) of `blocks` (loader BlockInfo list)."""
    kernel_types = KERNEL_TYPES_X86 if kernel_types is None else kernel_types
    b = flatbuffers.Builder(1 << 16)
    blocks_off = _table_vector(b, [_block(b, block, kernel_types) for block in blocks])
    version_off = None
    if program_version is not None:
        b.StartObject(1)
        b.PrependInt64Slot(0, program_version, 0)
        version_off = b.EndObject()
    b.StartObject(3)
    if version_off is not None:
        b.PrependUOffsetTRelativeSlot(1, version_off, 0)
    b.PrependUOffsetTRelativeSlot(0, blocks_off, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


# -- what Paddle Lite 2.13 requires of programs newer Paddle writes -----------------------------------------------
# Ops whose XShape output paddle >= 2.5 no longer writes and Lite 2.13 requires (flatten_op.cc CheckShape).
_XSHAPE_OPS = ("flatten_contiguous_range", "flatten2", "reshape2")
# Attributes paddle >= 2.5 no longer writes and Lite 2.13 reads without a default (GetAttr aborts): the values
# paddle computes with.
_LITE_ATTRS: dict[str, dict[str, tuple[int, Any]]] = {"relu6": {"threshold": (pb.FLOAT, 6.0)},
               "hard_swish": {"threshold": (pb.FLOAT, 6.0), "scale": (pb.FLOAT, 6.0), "offset": (pb.FLOAT, 3.0)},
               "split": {"num": (pb.INT, 0), "sections": (pb.INTS, [])}}  # a PIR split holds one of the two


_INT32 = (-(1 << 31), (1 << 31) - 1)
# (type held, type Paddle declares) -> the value converted; integer narrowing only when every value fits.
_COERCIONS: dict[tuple[int, int], Callable[[Any], Any]] = {
    (pb.LONG, pb.INT): lambda v: int(v) if _INT32[0] <= v <= _INT32[1] else None,
    (pb.LONGS, pb.INTS): lambda v: [int(x) for x in v] if all(_INT32[0] <= x <= _INT32[1] for x in v) else None,
    (pb.INT, pb.LONG): int,
    (pb.INTS, pb.LONGS): lambda v: [int(x) for x in v],
    (pb.FLOAT64, pb.FLOAT): float,
    (pb.FLOAT, pb.FLOAT64): float,
    (pb.FLOAT64S, pb.FLOATS): lambda v: [float(x) for x in v],
    (pb.FLOATS, pb.FLOAT64S): lambda v: [float(x) for x in v],
}


def _declared_types(op: OpInfo, attrs: dict, kinds: dict) -> tuple:
    """A PIR program's attributes hold the types PIR gives them (pool2d's `strides` as LONGS); Paddle Lite
    reads the legacy op proto's (INTS) and aborts on another: convert to the type Paddle declares
    (validate.paddle_attr_types) where the value allows it."""
    from nnadapter_bridge.loader.validate import paddle_attr_types

    declared = paddle_attr_types().get(op.type) or {}
    changed = {}
    for name, kind in kinds.items():
        want = declared.get(name)
        convert = _COERCIONS.get((kind, want)) if want is not None else None
        if convert is not None:
            value = convert(attrs[name])
            if value is not None:
                changed[name] = (want, value)
    if not changed:
        return attrs, kinds
    return (dict(attrs, **{k: v for k, (_, v) in changed.items()}),
            dict(kinds, **{k: t for k, (t, _) in changed.items()}))


def lite_compatible(blocks: list) -> list:
    """`blocks` with what Paddle Lite 2.13 needs (copies; the graph is not changed): an XShape output (a new
    var `<out>.xshape`, dims [0] + X's) for the _XSHAPE_OPS that lack one, the _LITE_ATTRS, and attributes
    in the types Paddle's op protos declare (_declared_types)."""
    out = []
    for block in blocks:
        variables = dict(block.vars)
        ops = []
        for op in block.ops:
            outputs, attrs, kinds = op.outputs, op.attrs, op.attr_types
            if op.type in _XSHAPE_OPS and not op.outputs.get("XShape") and op.inputs.get("X") and op.outputs.get("Out"):
                source = variables.get(op.inputs["X"][0])
                name = op.outputs["Out"][0] + ".xshape"
                if source is not None and name not in variables:
                    variables[name] = VarInfo(name, pb.VarType.LOD_TENSOR, source.dtype, source.data_type,
                                              (0,) + tuple(source.shape), False, 0, False)
                    outputs = dict(outputs, XShape=[name])
            extra = {k: v for k, v in _LITE_ATTRS.get(op.type, {}).items() if k not in op.attrs}
            if extra:
                attrs = dict(attrs, **{k: v for k, (_, v) in extra.items()})
                kinds = dict(kinds, **{k: t for k, (t, _) in extra.items()})
            attrs, kinds = _declared_types(op, attrs, kinds)
            if outputs is not op.outputs or attrs is not op.attrs:
                op = OpInfo(op.type, op.index, op.block_idx, op.inputs, outputs, attrs, kinds, op.is_target)
            ops.append(op)
        out.append(BlockInfo(block.idx, block.parent_idx, block.forward_block_idx, ops, variables))
    return out


# -- params -------------------------------------------------------------------------------------------------------
def param_bytes(name: str, array: np.ndarray) -> bytes:
    """One `ParamDesc` flatbuffer (param.fbs) holding `array` (its raw little-endian C-order bytes)."""
    array = np.ascontiguousarray(array)
    try:
        data_type = var_type_of_dtype(array.dtype)
    except KeyError:
        raise NaiveBufferWriteError(f"parameter '{name}': numpy dtype {array.dtype} has no Paddle element "
                                    f"type") from None
    b = flatbuffers.Builder(array.nbytes + 256)
    name_off = b.CreateString(name)
    lod = _numbers(b, [], "<i8")
    dim = _numbers(b, list(array.shape), "<i8")
    data = b.CreateNumpyVector(array.reshape(-1).view(np.int8))
    b.StartObject(5)
    b.PrependUOffsetTRelativeSlot(4, data, 0)
    b.PrependInt32Slot(3, data_type, 0)
    b.PrependUOffsetTRelativeSlot(2, dim, 0)
    b.PrependUOffsetTRelativeSlot(1, lod, 0)
    b.PrependInt32Slot(0, 0, 0)
    tensor = b.EndObject()
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(3, tensor, 0)
    b.PrependUOffsetTRelativeSlot(1, name_off, 0)
    b.PrependUint8Slot(2, LOD_TENSOR_UNION, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def saved_params(blocks: list, params: dict) -> list:
    """(name, array) of every persistable tensor var of block 0 (feed/fetch lists excluded), sorted by name
    in byte order as Paddle Lite writes them."""
    names = set()
    for var in blocks[0].vars.values():
        if var.persistable and var.var_type in (pb.VarType.LOD_TENSOR, pb.VarType.SELECTED_ROWS):
            names.add(var.name)
    missing = sorted(n for n in names if n not in params)
    if missing:
        raise NaiveBufferWriteError(f"persistable vars without a stored tensor: {', '.join(missing[:5])}")
    return [(name, params[name]) for name in sorted(names, key=lambda n: n.encode())]


def params_section(items: list) -> bytes:
    """The meta_version-2 params section: framed ParamDesc records (lite/model_parser/flatbuffers/io.cc)."""
    if len(items) > MAX_PARAMS:
        raise NaiveBufferWriteError(f"{len(items)} parameters: a .nb holds at most {MAX_PARAMS} (a u16 count)")
    max_tensor = max((np.asarray(a).nbytes for _, a in items), default=0)
    if max_tensor >= 0xFFFFFFFF:
        raise NaiveBufferWriteError(f"a {max_tensor}-byte parameter: a .nb record holds less than 4 GiB")
    parts = [struct.pack("<HHHHI", PARAMS_VERSION, 0, 6, len(items), max_tensor)]
    for name, array in items:
        blob = param_bytes(name, array)
        parts.append(struct.pack("<II", 4 + len(blob), 4))
        parts.append(blob)
    return b"".join(parts)


# -- the file -----------------------------------------------------------------------------------------------------
def header_bytes(topo_size: int, opt_version: str = OPT_VERSION, meta_version: int = META_VERSION) -> bytes:
    raw = opt_version.encode("ascii")
    if len(raw) >= OPT_VERSION_SIZE or b"\0" in raw:
        raise NaiveBufferWriteError(f"opt version {opt_version!r} does not fit the header's 16 bytes with its NUL")
    return struct.pack("<H16sQ", meta_version, raw.ljust(OPT_VERSION_SIZE, b"\0"), topo_size)


def write_naive_buffer(blocks: list, params: dict, program_version: int | None = None,
                       opt_version: str = OPT_VERSION, kernel_types: dict | None = None) -> bytes:
    """The bytes of a meta_version-2 `.nb` holding `blocks` (loader BlockInfo list) and `params`."""
    program = program_bytes(lite_compatible(blocks), program_version, kernel_types)
    out = header_bytes(len(program), opt_version) + program + params_section(saved_params(blocks, params))
    assert len(out) >= HEADER_SIZE
    return out


def graph_to_naive_buffer(graph, opt_version: str = OPT_VERSION, kernel_types: dict | None = None) -> bytes:
    """The `.nb` bytes of a loaded model (ProgramGraph of any format)."""
    desc = getattr(graph, "program_desc", None)
    version = None
    if desc is not None and desc.HasField("version"):
        version = int(desc.version.version)
    return write_naive_buffer(graph.blocks, graph.params, version, opt_version, kernel_types)


def save(graph, path: str, **kwargs) -> int:
    """Write `graph` as a `.nb` at `path` (as given); returns the byte count."""
    data = graph_to_naive_buffer(graph, **kwargs)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


__all__ = ["OPT_VERSION", "KERNEL_TYPES_X86", "NaiveBufferWriteError", "write_naive_buffer", "graph_to_naive_buffer",
           "save", "program_bytes",
           "param_bytes", "params_section"]
