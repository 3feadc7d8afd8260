"""ProgramDesc decoding: the parsed protobuf becomes the loader's BlockInfo / OpInfo / VarInfo (program.py) with
plain Python values.

Everything here is decoded once, at load time, and checked for the inconsistencies a corrupt file can
carry (block indices out of range, ops naming vars no block declares, duplicate vars, names and dims through
validate.py), so code downstream never meets a raw protobuf message or a dangling reference. Imports
program.py and validate.py; neither imports it. Entry points: `parse_program_desc`, `decode_blocks`.
"""
from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import dtypes, validate
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.program import (
    EMPTY_VAR_NAME,
    BlockInfo,
    BlockRef,
    OpInfo,
    VarInfo,
    VarRef,
    lookup_var,
)


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
