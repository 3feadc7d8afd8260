"""The loaded program's data model: BlockInfo / OpInfo / VarInfo with plain Python values, the BLOCK / VAR
attribute references, and the var lookup through enclosing blocks (what Paddle's Scope does).

Both model formats end here (program_desc.py decodes a ProgramDesc, pir.py translates a PIR program). This
module is the bottom of the loader: it imports neither protobuf (a warm start that reads the program kept by
loader.snapshot never loads the parser) nor validate.py or a decoder (which import it).
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from nnadapter_bridge.nnadapter.record import plain_dataclass

# Paddle writes this name into a slot to mean "no variable" (kEmptyVarName).
EMPTY_VAR_NAME = "@EMPTY@"


class AttrType(enum.IntEnum):
    """framework.proto's AttrType (the generated module's values; tests/loader/test_snapshot.py compares them),
    defined here so that the data model does not load protobuf."""

    INT = 0
    FLOAT = 1
    STRING = 2
    INTS = 3
    FLOATS = 4
    STRINGS = 5
    BOOLEAN = 6
    BOOLEANS = 7
    BLOCK = 8
    LONG = 9
    BLOCKS = 10
    LONGS = 11
    FLOAT64S = 12
    VAR = 13
    VARS = 14
    FLOAT64 = 15
    SCALAR = 16
    SCALARS = 17


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
    found = _attr_type_of(value)
    return None if found is None else int(found)


def _attr_type_of(value) -> AttrType | None:
    def fits_int32(v):
        return -(1 << 31) <= v < (1 << 31)

    if isinstance(value, bool):
        return AttrType.BOOLEAN
    if isinstance(value, int):
        return AttrType.INT if fits_int32(value) else AttrType.LONG
    if isinstance(value, float):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    if isinstance(value, BlockRef):
        return AttrType.BLOCK
    if isinstance(value, VarRef):
        return AttrType.VAR
    if isinstance(value, (list, tuple)):
        if not value:
            return AttrType.INTS
        first = value[0]
        if isinstance(first, bool):
            return AttrType.BOOLEANS
        if isinstance(first, int):
            return AttrType.INTS if all(fits_int32(v) for v in value) else AttrType.LONGS
        if isinstance(first, float):
            return AttrType.FLOATS
        if isinstance(first, str):
            return AttrType.STRINGS
        if isinstance(first, BlockRef):
            return AttrType.BLOCKS
        if isinstance(first, VarRef):
            return AttrType.VARS
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
