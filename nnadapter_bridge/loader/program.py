"""ProgramDesc decoding: the parsed protobuf becomes BlockInfo / OpInfo / VarInfo with plain Python values.

Everything here is decoded once, at load time, and checked for the inconsistencies a corrupt file can
carry (block indices out of range, ops naming vars no block declares, duplicate vars), so code downstream
never meets a raw protobuf message or a dangling reference.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import dtypes, validate
from nnadapter_bridge.loader import framework_pb2 as pb

# Paddle writes this name into a slot to mean "no variable" (kEmptyVarName).
EMPTY_VAR_NAME = "@EMPTY@"

AttrType = pb.AttrType  # INT, FLOAT, ... as protobuf enum values (ints)


@dataclasses.dataclass(frozen=True)
class BlockRef:
    """A BLOCK attribute: the index of a sub-block in `ProgramGraph.blocks`."""

    idx: int


@dataclasses.dataclass(frozen=True)
class VarRef:
    """A VAR attribute: the name of a variable whose runtime value is the attribute."""

    name: str


@dataclasses.dataclass(frozen=True)
class VarInfo:
    """One VarDesc. `dtype`/`data_type` are None and `shape` is () for non-tensor kinds (feed/fetch lists)."""

    name: str
    var_type: int  # VarType.Type of the variable itself, e.g. 7 LOD_TENSOR
    dtype: np.dtype | None
    data_type: int | None  # VarType.Type of the elements, e.g. 5 FP32
    shape: tuple  # -1 for an unknown axis
    persistable: bool
    lod_level: int
    need_check_feed: bool
    is_parameter: bool = False
    stop_gradient: bool = False


class OpInfo:
    """One OpDesc with slots and attributes decoded; `index` is its position in block `block_idx`."""

    __slots__ = ("type", "index", "block_idx", "inputs", "outputs", "attrs", "attr_types", "is_target")

    def __init__(self, type, index, block_idx, inputs, outputs, attrs, attr_types, is_target=False):
        self.type: str = type
        self.index: int = index
        self.block_idx: int = block_idx
        self.inputs: dict[str, list[str]] = inputs
        self.outputs: dict[str, list[str]] = outputs
        self.attrs: dict[str, Any] = attrs
        self.attr_types: dict[str, int] = attr_types
        self.is_target: bool = is_target

    def input(self, slot: str) -> list[str]:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        return self.outputs.get(slot, [])

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    def input_names(self) -> list[str]:
        return [name for names in self.inputs.values() for name in names]

    def output_names(self) -> list[str]:
        return [name for names in self.outputs.values() for name in names]

    def label(self) -> str:
        """`conv2d#3 (out: conv2d_0.tmp_0)`: how errors and dumps name an op."""
        outs = self.output_names()
        where = f", block {self.block_idx}" if self.block_idx else ""
        return f"{self.type}#{self.index} (out: {outs[0] if outs else '-'}{where})"

    def __repr__(self) -> str:
        return f"OpInfo({self.label()})"


@dataclasses.dataclass
class BlockInfo:
    """One BlockDesc: ops in file order, vars by name (file order kept by the dict)."""

    idx: int
    parent_idx: int
    forward_block_idx: int
    ops: list[OpInfo]
    vars: dict[str, VarInfo]


def _decode_attr(attr, what: str = "attribute", where: str = "<model buffer>") -> Any:
    """One OpDesc.Attr as a Python value; strings are decoded (ModelFormatError naming `what` for bytes that
    are not UTF-8), var names checked like every other name."""
    t = attr.type
    if t == pb.INT:
        return int(attr.i)
    if t == pb.LONG:
        return int(attr.l)
    if t == pb.FLOAT:
        return float(attr.f)
    if t == pb.FLOAT64:
        return float(attr.float64)
    if t == pb.STRING:
        return validate.text(attr.s, f"{what} (a string)", where, is_name=False)
    if t == pb.BOOLEAN:
        return bool(attr.b)
    if t == pb.INTS:
        return [int(v) for v in attr.ints]
    if t == pb.LONGS:
        return [int(v) for v in attr.longs]
    if t == pb.FLOATS:
        return [float(v) for v in attr.floats]
    if t == pb.FLOAT64S:
        return [float(v) for v in attr.float64s]
    if t == pb.STRINGS:
        return [validate.text(v, f"{what} string #{k}", where, is_name=False) for k, v in enumerate(attr.strings)]
    if t == pb.BOOLEANS:
        return [bool(v) for v in attr.bools]
    if t == pb.BLOCK:
        return BlockRef(int(attr.block_idx))
    if t == pb.BLOCKS:
        return [BlockRef(int(v)) for v in attr.blocks_idx]
    if t == pb.VAR:
        return VarRef(validate.text(attr.var_name, f"{what} (a var name)", where))
    if t == pb.VARS:
        return [VarRef(validate.text(v, f"{what} var name #{k}", where)) for k, v in enumerate(attr.vars_name)]
    if t == pb.SCALAR:
        return _decode_scalar(attr.scalar)
    if t == pb.SCALARS:
        return [_decode_scalar(v) for v in attr.scalars]
    raise ValueError(f"unknown AttrType {t}")


def infer_attr_type(value) -> int | None:
    """The AttrType a Python attribute value would be written as (INT, or LONG when it does not fit 32 bits;
    lists by their first element, an empty list INTS); None for a value no AttrType holds."""
    def fits_int32(v):
        return -(1 << 31) <= v < (1 << 31)

    if isinstance(value, bool):
        return pb.BOOLEAN
    if isinstance(value, int):
        return pb.INT if fits_int32(value) else pb.LONG
    if isinstance(value, float):
        return pb.FLOAT
    if isinstance(value, str):
        return pb.STRING
    if isinstance(value, BlockRef):
        return pb.BLOCK
    if isinstance(value, VarRef):
        return pb.VAR
    if isinstance(value, (list, tuple)):
        if not value:
            return pb.INTS
        first = value[0]
        if isinstance(first, bool):
            return pb.BOOLEANS
        if isinstance(first, int):
            return pb.INTS if all(fits_int32(v) for v in value) else pb.LONGS
        if isinstance(first, float):
            return pb.FLOATS
        if isinstance(first, str):
            return pb.STRINGS
        if isinstance(first, BlockRef):
            return pb.BLOCKS
        if isinstance(first, VarRef):
            return pb.VARS
    return None


def _decode_scalar(scalar) -> Any:
    """A Paddle 3 typed scalar as the Python value of its type (bool, int, float or complex)."""
    if scalar.type == pb.Scalar.BOOLEAN:
        return bool(scalar.b)
    if scalar.type == pb.Scalar.LONG:
        return int(scalar.i)
    if scalar.type == pb.Scalar.FLOAT64:
        return float(scalar.r)
    if scalar.type == pb.Scalar.COMPLEX128:
        return complex(scalar.c.r, scalar.c.i)
    raise ValueError(f"unknown Scalar type {scalar.type}")


def _tensor_desc_of(var_type):
    """The TensorDesc (and lod level) a VarType carries for its kind, or (None, 0)."""
    kind = var_type.type
    if kind == pb.VarType.LOD_TENSOR and var_type.HasField("lod_tensor"):
        return var_type.lod_tensor.tensor, int(var_type.lod_tensor.lod_level)
    if kind == pb.VarType.LOD_TENSOR_ARRAY and var_type.HasField("tensor_array"):
        return var_type.tensor_array.tensor, int(var_type.tensor_array.lod_level)
    if kind == pb.VarType.SELECTED_ROWS and var_type.HasField("selected_rows"):
        return var_type.selected_rows, 0
    for field in ("string", "strings", "vocab", "sparse_coo"):
        if var_type.HasField(field):
            return getattr(var_type, field), 0
    return None, 0


def _decode_var(desc, what: str, where: str) -> VarInfo:
    name = validate.text(desc.name, f"{what}: the name", where)
    tensor, lod_level = _tensor_desc_of(desc.type)
    dtype = data_type = None
    shape: tuple = ()
    if tensor is not None:
        data_type = int(tensor.data_type)
        dtype = dtypes.numpy_dtype(data_type) if dtypes.is_element_type(data_type) else None
        shape = validate.check_dims((int(d) for d in tensor.dims), f"{what} ('{name}')", where, var=name)
    return VarInfo(
        name=name,
        var_type=int(desc.type.type),
        dtype=dtype,
        data_type=data_type,
        shape=shape,
        persistable=bool(desc.persistable),
        lod_level=lod_level,
        need_check_feed=bool(desc.need_check_feed),
        is_parameter=bool(desc.is_parameter),
        stop_gradient=bool(desc.stop_gradient),
    )


def parse_program_desc(data, path: str | None) -> pb.ProgramDesc:
    """Bytes of a model file -> ProgramDesc; ModelFormatError (naming `path`) for anything unreadable."""
    where = path or "<model buffer>"
    if len(data) == 0:
        raise ModelFormatError("empty model file; expected a serialized Paddle ProgramDesc", path=where)
    program = pb.ProgramDesc()
    try:
        program.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError, TypeError) as exc:
        raise ModelFormatError(f"not a Paddle ProgramDesc ({exc}); the file is truncated or corrupt (nor is it a "
                               f"Paddle 3 PIR .json program, which is recognised by its content)", path=where) from exc
    if not program.blocks:
        raise ModelFormatError("the program has no blocks; the file is corrupt or not a Paddle model", path=where)
    return program


def decode_blocks(program: pb.ProgramDesc, path: str | None) -> list[BlockInfo]:
    """ProgramDesc -> BlockInfo list, checking every cross-reference a corrupt file could break.

    The block structure is checked first (indices, parents, nesting depth: validate.block_depths), so nothing
    below walks a parent chain longer than validate.MAX_BLOCK_DEPTH; every name is decoded as UTF-8 and
    checked (validate.text), every dims list bounded (validate.check_dims)."""
    where = path or "<model buffer>"
    n = len(program.blocks)
    for position, bdesc in enumerate(program.blocks):
        if bdesc.idx != position:
            raise ModelFormatError(f"block at position {position} says idx={bdesc.idx}; the file is corrupt",
                                   path=where)
    validate.block_depths([int(b.parent_idx) for b in program.blocks], where)
    blocks: list[BlockInfo] = []
    for position, bdesc in enumerate(program.blocks):
        parent = int(bdesc.parent_idx)
        forward = int(bdesc.forward_block_idx)
        if not -1 <= forward < n:
            raise ModelFormatError(f"block {position} has forward_block_idx={forward}, out of range", path=where)
        variables: dict[str, VarInfo] = {}
        for var_index, vdesc in enumerate(bdesc.vars):
            var = _decode_var(vdesc, f"block {position}, var #{var_index}", where)
            if var.name in variables:
                raise ModelFormatError(f"block {position} declares var '{var.name}' twice; the file is corrupt",
                                       path=where, var=var.name)
            variables[var.name] = var
        ops = []
        for index, odesc in enumerate(bdesc.ops):
            ops.append(_decode_op(odesc, index, position, n, where))
        blocks.append(BlockInfo(position, parent, forward, ops, variables))
    for block in blocks:
        _check_references(block, blocks, where)
    return blocks


def _decode_slots(slots, what: str, where: str) -> dict[str, list[str]]:
    decoded: dict[str, list[str]] = {}
    for slot_index, v in enumerate(slots):
        slot = validate.text(v.parameter, f"{what} slot #{slot_index}", where)
        decoded[slot] = [validate.text(a, f"{what} slot '{slot}' var #{k}", where)
                         for k, a in enumerate(v.arguments)]
    return decoded


class _SlowPath(Exception):
    """Internal: a value the fast op decoder does not vouch for; _decode_op_checked decodes (and reports) it."""


# Attribute types whose decoded value is a plain number, bool or list of them (no text, no references).
_PLAIN_ATTRS = {
    pb.INT: lambda a: int(a.i), pb.LONG: lambda a: int(a.l), pb.FLOAT: lambda a: float(a.f),
    pb.FLOAT64: lambda a: float(a.float64), pb.BOOLEAN: lambda a: bool(a.b),
    pb.INTS: lambda a: [int(v) for v in a.ints], pb.LONGS: lambda a: [int(v) for v in a.longs],
    pb.FLOATS: lambda a: [float(v) for v in a.floats], pb.FLOAT64S: lambda a: [float(v) for v in a.float64s],
    pb.BOOLEANS: lambda a: [bool(v) for v in a.bools],
}


def _decode_op(odesc, index: int, block_idx: int, num_blocks: int, where: str) -> OpInfo:
    """One OpDesc, every name and string checked as _decode_op_checked does. The usual op (text names, plain
    or string attributes) is decoded here with all its names checked at once; anything else, and any op with
    a problem, is decoded again by _decode_op_checked, which names the problem exactly."""
    try:
        return _decode_op_fast(odesc, index, block_idx)
    except _SlowPath:
        return _decode_op_checked(odesc, index, block_idx, num_blocks, where)


def _decode_op_fast(odesc, index: int, block_idx: int) -> OpInfo:
    names = [odesc.type]
    inputs = {}
    for v in odesc.inputs:
        names.append(v.parameter)
        inputs[v.parameter] = args = list(v.arguments)
        names += args
    outputs = {}
    for v in odesc.outputs:
        names.append(v.parameter)
        outputs[v.parameter] = args = list(v.arguments)
        names += args
    texts = []
    attrs: dict[str, Any] = {}
    attr_types: dict[str, int] = {}
    for a in odesc.attrs:
        t = a.type
        plain = _PLAIN_ATTRS.get(t)
        if plain is not None:
            value = plain(a)
        elif t == pb.STRING:
            value = a.s
            texts.append(value)
        elif t == pb.STRINGS:
            value = list(a.strings)
            texts += value
        else:  # blocks, vars, scalars: their own checks
            raise _SlowPath
        names.append(a.name)
        attrs[a.name] = value
        attr_types[a.name] = int(t)
    try:  # protobuf hands back bytes for text that is not UTF-8: join refuses them
        if validate.names_problem(",".join(names)) or validate.texts_problem("".join(texts)):
            raise _SlowPath
    except TypeError:
        raise _SlowPath from None
    return OpInfo(names[0], index, block_idx, inputs, outputs, attrs, attr_types, bool(odesc.is_target))


def _decode_op_checked(odesc, index: int, block_idx: int, num_blocks: int, where: str) -> OpInfo:
    op_type = validate.text(odesc.type, f"block {block_idx}, op #{index}: the op type", where)
    what = f"block {block_idx}, op #{index} ({op_type})"
    inputs = _decode_slots(odesc.inputs, f"{what}: input", where)
    outputs = _decode_slots(odesc.outputs, f"{what}: output", where)
    attrs: dict[str, Any] = {}
    attr_types: dict[str, int] = {}
    for attr_index, a in enumerate(odesc.attrs):
        name = validate.text(a.name, f"{what}: attribute #{attr_index}'s name", where)
        try:
            value = _decode_attr(a, f"{what}: attribute '{name}'", where)
        except ValueError as exc:
            raise ModelFormatError(f"op {op_type}#{index} in block {block_idx}: attribute '{name}': {exc}",
                                   path=where) from exc
        refs = [value] if isinstance(value, BlockRef) else value if a.type == pb.BLOCKS else []
        for ref in refs:
            if not 0 <= ref.idx < num_blocks:
                raise ModelFormatError(f"op {op_type}#{index} in block {block_idx}: attribute '{name}' names "
                                       f"block {ref.idx} but the program has {num_blocks}", path=where)
        attrs[name] = value
        attr_types[name] = int(a.type)
    return OpInfo(op_type, index, block_idx, inputs, outputs, attrs, attr_types, bool(odesc.is_target))


def _check_references(block: BlockInfo, blocks: list[BlockInfo], where: str) -> None:
    """Every var an op names must be declared in its block or an ancestor block."""
    for op in block.ops:
        for name in op.input_names() + op.output_names():
            if name == EMPTY_VAR_NAME or lookup_var(blocks, block.idx, name) is not None:
                continue
            raise ModelFormatError(f"op {op.label()} uses var '{name}' that no enclosing block declares; "
                                   f"the model file is corrupt", path=where, var=name)


def lookup_var(blocks: list[BlockInfo], block_idx: int, name: str) -> VarInfo | None:
    """Resolve a var name the way Paddle does: this block first, then its ancestors."""
    seen = set()
    idx = block_idx
    while 0 <= idx < len(blocks) and idx not in seen:
        seen.add(idx)
        var = blocks[idx].vars.get(name)
        if var is not None:
            return var
        idx = blocks[idx].parent_idx
    return None
