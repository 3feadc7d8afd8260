"""The loaded program's data model: BlockInfo / OpInfo / VarInfo with plain Python values, the BLOCK / VAR
attribute references, and the var lookup through enclosing blocks (what Paddle's Scope does).

Both model formats end here (program_desc.py decodes a ProgramDesc, pir.py translates a PIR program). This
module is the bottom of the loader: it imports only the protobuf enums, never validate.py or a decoder (which
import it).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.nnadapter.record import plain_dataclass

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


@plain_dataclass
class BlockInfo:
    """One BlockDesc: ops in file order, vars by name (file order kept by the dict)."""

    idx: int
    parent_idx: int
    forward_block_idx: int
    ops: list[OpInfo]
    vars: dict[str, VarInfo]


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
