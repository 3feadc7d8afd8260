"""The loader boundary: every string and number a model file gives is checked here (or by the readers that call
these helpers) before anything downstream reads it.

* Names (vars, ops, slots, attributes) are UTF-8 text without control characters (`name_problem`, `text`): the
  partition config, the dump, error messages and the cache files are line-oriented text, and a name holding a
  newline or a NUL cannot be written to any of them. Paddle itself stores names as std::string and runs a program
  whose var is called "a\\nb"; this loader refuses it on purpose (see `name_problem`).
* Dims (`check_dims`): at most `MAX_RANK` axes (NNAdapter's NNADAPTER_MAX_SIZE_OF_DIMENSIONS, 8; Paddle's DDim
  holds 9), each -1 (unknown) or a size >= 0.
* Blocks (`block_depths`, `check_sub_blocks`): a parent is an earlier block, nesting is at most `MAX_BLOCK_DEPTH`
  deep, and every BLOCK attribute names a block nested in the op's own block that no other op names, so any walk over
  sub-blocks is bounded by the depth limit (no recursion or repeat proportional to the file).
* `validate_program`, after the graph is built (both formats): feed/fetch `col`s dense and unique, attribute
  types as Paddle's op protos declare them (`paddle_attr_types.json`), and the attribute values Paddle's
  InferShape refuses for the ops this project runs (`RULES`). Each refusal is a ModelFormatError naming the file,
  the op (`type#index (out: var)`) and the attribute, and saying what Paddle requires.

The checks never depend on anything but the file: a program that passes here is one Paddle Inference would
also accept (or, for the few refusals marked in `RULES`, one on which Paddle crashes, hangs or computes
windows without elements).

Entry points: `validate_program`, `text`, `check_dims`, `block_depths`, `check_sub_blocks`. Imports the
loader's program model and the standard's codes; never a decoder (program_desc, pir), which import it.
"""
from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable
from typing import Any

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import dtypes
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.program import BlockRef, lookup_var
from nnadapter_bridge.nnadapter.codes import MAX_SIZE_OF_DIMENSIONS

# NNADAPTER_MAX_SIZE_OF_DIMENSIONS: no NNAdapter operand (nor the .nnc format) holds more axes. Paddle's DDim
# holds 9 (phi::DDim::kMaxRank); a rank-9 var is the one thing Paddle runs that this loader refuses for rank.
MAX_RANK = MAX_SIZE_OF_DIMENSIONS
# Sub-block nesting (conditional_block / while inside each other). Paddle sets no limit; real programs nest a
# handful of levels: each level is a Python `if`/`while` that dy2static (or paddle.static.nn.cond/while_loop)
# turned into a block, and CPython refuses more than 20 statically nested blocks in one function. 64 leaves
# room for helper calls nesting further while keeping the host executor, which runs a sub-block by a call
# (about 4 Python frames per level), far from Python's recursion limit (it fails near 250 levels).
MAX_BLOCK_DEPTH = 64
# Nesting of PIR type / attribute values (a vector of vectors, an array of arrays): paddle writes one level.
MAX_VALUE_NESTING = 4
# The largest size of one axis: 2**62 elements; more overflows any element count.
MAX_DIM = (1 << 62) - 1

# Unicode control characters (C0, DEL, C1), line / paragraph separators and lone surrogates (a PIR .json can
# spell one as "\ud800"): none belongs in a name, and each breaks a line-oriented text format.
_BAD_NAME_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")

_SURROGATES = re.compile("[\ud800-\udfff]")

_A = pb.AttrType


def where_of(path: str | None) -> str:
    return path or "<model buffer>"


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a var / op / slot / attribute name here, or None when it can."""
    bad = _BAD_NAME_CHARS.search(name)
    if bad is None:
        return None
    ch = bad.group()
    if "\ud800" <= ch <= "\udfff":
        return f"contains the lone surrogate U+{ord(ch):04X} at position {bad.start()}, which is not text"
    return (f"contains the control character {ch!r} (U+{ord(ch):04X}) at position {bad.start()}; names must be "
            f"printable text (the partition config, the dump and the cache are line-oriented)")


def names_problem(joined: str) -> bool:
    """Whether some name in `joined` (names joined by a character names may hold) would fail text()."""
    return _BAD_NAME_CHARS.search(joined) is not None


def texts_problem(joined: str) -> bool:
    """Whether some string attribute in `joined` (string values joined) would fail text(is_name=False)."""
    return _SURROGATES.search(joined) is not None


def text(value, what: str, where: str, *, is_name: bool = True) -> str:
    """A string field of the model as str: ModelFormatError naming `what` for bytes that are not UTF-8 (protobuf
    hands those back as bytes) and, for a name, for control characters."""
    if isinstance(value, (bytes, bytearray)):
        shown = bytes(value[:80])
        more = f" (first 80 of {len(value)} bytes)" if len(value) > 80 else ""
        raise ModelFormatError(f"{what} is not UTF-8 text: {shown!r}{more}; Paddle writes names and string "
                               f"attributes as UTF-8, so the file is corrupt or forged", path=where)
    if not isinstance(value, str):
        raise ModelFormatError(f"{what} is {type(value).__name__} {str(value)[:80]!r}, expected text", path=where)
    if is_name:
        problem = name_problem(value)
        if problem is not None:
            raise ModelFormatError(f"{what} {value[:80]!r} {problem}", path=where)
    else:
        bad = _SURROGATES.search(value)
        if bad is not None:  # only a JSON escape can spell one; it has no UTF-8 form
            raise ModelFormatError(f"{what} holds the lone surrogate U+{ord(bad.group()):04X}, which is not text",
                                   path=where)
    return value


def check_dims(dims, what: str, where: str, var: str | None = None) -> tuple:
    """Declared dims as a tuple of ints: at most MAX_RANK axes, each -1 (unknown) or 0..MAX_DIM."""
    dims = tuple(dims)
    if len(dims) > MAX_RANK:
        raise ModelFormatError(f"{what} has {len(dims)} dims; NNAdapter holds at most {MAX_RANK} "
                               f"(NNADAPTER_MAX_SIZE_OF_DIMENSIONS; Paddle's own limit is 9)", path=where, var=var)
    for d in dims:
        if d < -1 or d > MAX_DIM:
            raise ModelFormatError(f"{what} has dims {list(dims)}: a size must be -1 (unknown) or 0..2^62",
                                   path=where, var=var)
    return dims


# -- blocks ------------------------------------------------------------------------------------------------


def block_depths(parents: list, where: str) -> list:
    """The nesting depth of every block (block 0: 0) from each block's parent index, checking that a parent
    is an earlier block (Paddle appends a block after its parent, so this also rules out cycles) and that no
    block is nested more than MAX_BLOCK_DEPTH deep. Iterative: one pass over the blocks."""
    depths: list = []
    for idx, parent in enumerate(parents):
        if idx == 0:
            if parent >= 0:
                raise ModelFormatError(f"block 0 has parent_idx={parent}; the global block has no parent, the "
                                       f"file is corrupt", path=where)
            depths.append(0)
            continue
        if not 0 <= parent < idx:
            raise ModelFormatError(f"block {idx} has parent_idx={parent}; a block's parent is an earlier block, "
                                   f"the file is corrupt", path=where)
        depth = depths[parent] + 1
        if depth > MAX_BLOCK_DEPTH:
            raise ModelFormatError(f"block {idx} is nested {depth} blocks deep; this loader reads at most "
                                   f"{MAX_BLOCK_DEPTH} levels of control flow (conditional_block / while inside "
                                   f"each other)", path=where)
        depths.append(depth)
    return depths


def check_sub_blocks(blocks, where: str) -> None:
    """Every BLOCK / BLOCKS attribute names a block nested (at any depth) in the op's own block, so following
    block references always goes deeper and stops within MAX_BLOCK_DEPTH steps; and no two `sub_block`
    attributes (what conditional_block / while run) name the same block, so running the program runs each
    block once per run of its own op, whatever the file says."""
    depths = block_depths([b.parent_idx for b in blocks], where)
    owner: dict = {}
    for block in blocks:
        for op in block.ops:
            for name, value in op.attrs.items():
                refs = [value] if isinstance(value, BlockRef) else (
                    [v for v in value if isinstance(v, BlockRef)] if isinstance(value, list) else [])
                for ref in refs:
                    idx = ref.idx
                    if not 0 <= idx < len(blocks):
                        raise ModelFormatError(f"op {op.label()}: attribute '{name}' names block {idx} but the "
                                               f"program has {len(blocks)}", path=where)
                    up = idx
                    while depths[up] > depths[block.idx]:
                        up = blocks[up].parent_idx
                    if idx == block.idx or up != block.idx:
                        raise ModelFormatError(f"op {op.label()}: attribute '{name}' names block {idx}, which is "
                                               f"not nested in the op's block {block.idx}; a control-flow op runs "
                                               f"a sub-block of its own block, the file is corrupt", path=where)
                    if name != "sub_block":
                        continue
                    if idx in owner:
                        raise ModelFormatError(f"op {op.label()}: attribute '{name}' names block {idx}, which "
                                               f"{owner[idx]} already runs; Paddle gives every control-flow op "
                                               f"a block of its own, the file is corrupt", path=where)
                    owner[idx] = f"op {op.label()}"


# -- attribute types ---------------------------------------------------------------------------------------

_INT_TYPES = frozenset({_A.INT, _A.LONG})
_FLOAT_TYPES = frozenset({_A.FLOAT, _A.FLOAT64}) | _INT_TYPES
_INT_LISTS = frozenset({_A.INTS, _A.LONGS})
_FLOAT_LISTS = frozenset({_A.FLOATS, _A.FLOAT64S}) | _INT_LISTS
_LISTS = frozenset({_A.INTS, _A.LONGS, _A.FLOATS, _A.FLOAT64S, _A.STRINGS, _A.BOOLEANS, _A.BLOCKS, _A.VARS,
                    _A.SCALARS})
# Declared type -> the stored types read as it. Paddle converts int -> int64 and int -> bool, and reads the
# tensor (VAR/VARS) forms; this loader also takes int64 for int (the PIR translation writes 64-bit integers)
# and integers for floats (lossless). Refused: a float for an int, a string for a number, a list for a scalar.
_ACCEPTS: dict[int, frozenset[int]] = {
    _A.INT: _INT_TYPES, _A.LONG: _INT_TYPES,
    _A.FLOAT: _FLOAT_TYPES, _A.FLOAT64: _FLOAT_TYPES,
    _A.BOOLEAN: frozenset({_A.BOOLEAN}) | _INT_TYPES,
    _A.STRING: frozenset({_A.STRING}),
    _A.INTS: _INT_LISTS, _A.LONGS: _INT_LISTS,
    _A.FLOATS: _FLOAT_LISTS, _A.FLOAT64S: _FLOAT_LISTS,
    _A.BOOLEANS: frozenset({_A.BOOLEANS}),
    _A.STRINGS: frozenset({_A.STRINGS}),
    _A.BLOCK: frozenset({_A.BLOCK}), _A.BLOCKS: frozenset({_A.BLOCKS}),
    _A.SCALAR: frozenset({_A.SCALAR, _A.BOOLEAN}) | _FLOAT_TYPES,
    _A.SCALARS: frozenset({_A.SCALARS, _A.BOOLEANS}) | _FLOAT_LISTS,
}
_TYPE_WORDS: dict[int, str] = {
    _A.INT: "an int", _A.LONG: "an int64", _A.FLOAT: "a float", _A.FLOAT64: "a float64", _A.STRING: "a string",
    _A.BOOLEAN: "a bool", _A.INTS: "a list of ints", _A.LONGS: "a list of int64s", _A.FLOATS: "a list of floats",
    _A.FLOAT64S: "a list of float64s", _A.STRINGS: "a list of strings", _A.BOOLEANS: "a list of bools",
    _A.BLOCK: "a block", _A.BLOCKS: "a list of blocks", _A.VAR: "a tensor", _A.VARS: "a list of tensors",
    _A.SCALAR: "a scalar", _A.SCALARS: "a list of scalars",
}
ATTR_TYPES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paddle_attr_types.json")


@functools.lru_cache(maxsize=1)
def paddle_attr_types() -> dict:
    """{legacy op type: {attribute: AttrType}} from Paddle's op protos (regenerate_attr_types.py)."""
    with open(ATTR_TYPES_FILE, encoding="utf-8") as f:
        table = json.load(f)
    table.pop("_generated_by", None)
    return table


def type_words(attr_type: int) -> str:
    return _TYPE_WORDS.get(attr_type, f"AttrType {attr_type}")


def attr_type_problem(declared: int, stored: int, value) -> str | None:
    """Why an attribute stored as `stored` cannot be read as the `declared` type, or None when it can."""
    if stored in (_A.VAR, _A.VARS):  # a tensor-valued attribute: its value is read from the tensor
        return None
    accepted = _ACCEPTS.get(declared)
    if accepted is None or stored in accepted:
        return None
    if declared in _LISTS and stored in _LISTS and isinstance(value, list) and not value:
        return None  # an empty list has no element type to disagree with
    return f"is {type_words(stored)} but Paddle declares it {type_words(declared)}"


# -- the program -------------------------------------------------------------------------------------------


class _Program:
    """What the value rules read: the blocks, the parameters, where the file is."""

    def __init__(self, blocks, params: dict, where: str):
        self.blocks = blocks
        self.params = params
        self.where = where

    def fail(self, op, attr: str | None, message: str) -> ModelFormatError:
        what = f"op {op.label()}" + (f": attribute '{attr}'" if attr else "")
        return ModelFormatError(f"{what} {message}", path=self.where)

    def shape(self, op, name: str | None) -> tuple | None:
        """The dims of var `name` when the file states them: a parameter's stored dims, else the declared dims
        of a dense tensor. A declared [] counts as unknown (hand-written programs declare outputs that way)."""
        if not name:
            return None
        if op.block_idx == 0 or lookup_var(self.blocks, op.block_idx, name) is lookup_var(self.blocks, 0, name):
            array = self.params.get(name)
            if array is not None:
                return tuple(array.shape)
        var = lookup_var(self.blocks, op.block_idx, name)
        if var is None or var.var_type != dtypes.VarTypeCode.LOD_TENSOR or not var.shape:
            return None
        return tuple(var.shape)

    def rank(self, op, slot: str) -> int | None:
        names = [n for n in op.input(slot) if n]
        shape = self.shape(op, names[0]) if names else None
        return None if shape is None else len(shape)


def _plain_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_attr(op, name: str, default):
    """The attribute as a plain int, or None when it is a tensor (VarRef) or absent without a default."""
    value = op.attr(name, default)
    return value if _plain_int(value) else None


def _ints_attr(op, name: str, default=None):
    """The attribute as a list of plain ints, or None when it holds a tensor (or anything but ints)."""
    value = op.attr(name, default)
    if value is None:
        return None
    if _plain_int(value):
        return [value]
    if isinstance(value, (list, tuple)) and all(_plain_int(v) for v in value):
        return list(value)
    return None


def _has_input(op, slot: str) -> bool:
    return any(n for n in op.input(slot) if n != "@EMPTY@")


def _check_axis(p: _Program, op, attr: str, axis, rank: int | None, low: int, high: int, what: str = "") -> None:
    if rank is None or axis is None:
        return
    if not low <= axis < high:
        raise p.fail(op, attr, f"is {axis}; Paddle requires it in [{low}, {high}) for an input of rank {rank}"
                     f"{what}")


def _axis_rule(attr: str, slot: str = "X", *, extra: int = 0, skip_if: str | None = None, default: int = -1):
    """`attr` (an int) in [-(R + extra), R + extra) for the rank R of input `slot`; `skip_if` names the tensor
    input that replaces the attribute when present."""

    def rule(p: _Program, op) -> None:
        if skip_if and _has_input(op, skip_if):
            return
        rank = p.rank(op, slot)
        if rank is None or rank == 0:
            return
        _check_axis(p, op, attr, _int_attr(op, attr, default), rank, -(rank + extra), rank + extra)

    return rule


def _conv(p: _Program, op) -> None:
    """ConvInferMeta (paddle/phi/infermeta/binary.cc): groups >= 1 with input channels == filter channels *
    groups and filter count % groups == 0, strides > 0, dilations > 0, a 4-D/5-D input of the filter's rank."""
    groups = _int_attr(op, "groups", 1)
    if groups is not None and groups < 1:
        raise p.fail(op, "groups", f"is {groups}; Paddle requires groups >= 1 (input channels = filter channels "
                                   f"* groups)")
    for attr in ("strides", "dilations"):
        values = _ints_attr(op, attr, [1, 1])
        if values is not None and any(v <= 0 for v in values):
            raise p.fail(op, attr, f"is {values}; Paddle requires every {attr[:-1]} > 0")
    x = p.shape(op, (op.input("Input") or [None])[0])
    w = p.shape(op, (op.input("Filter") or [None])[0])
    if x is not None and len(x) not in (4, 5):
        raise p.fail(op, None, f"has an input of rank {len(x)} ({list(x)}); Paddle convolves 4-D or 5-D inputs")
    if x is not None and w is not None and len(x) != len(w):
        raise p.fail(op, None, f"has an input of rank {len(x)} and a filter of rank {len(w)}; Paddle requires "
                               f"equal ranks")
    strides = _ints_attr(op, "strides", [1, 1])
    if x is not None and strides is not None and len(strides) != len(x) - 2:
        raise p.fail(op, "strides", f"has {len(strides)} values for a {len(x)}-D input; Paddle requires "
                                    f"{len(x) - 2}")
    if w is None or groups is None or groups < 1 or not w:
        return
    if w[0] >= 0 and w[0] % groups:
        raise p.fail(op, "groups", f"is {groups}, which does not divide the filter's {w[0]} output channels "
                                   f"(filter dims {list(w)}); Paddle requires it to")
    if x is not None and len(w) > 1 and w[1] >= 0:
        layout = op.attr("data_format", "NCHW")
        channels = x[-1] if layout in ("NHWC", "NDHWC") else x[1]
        if channels >= 0 and channels != w[1] * groups:
            raise p.fail(op, "groups", f"is {groups}: the input has {channels} channels ({layout} dims "
                                       f"{list(x)}) but the filter takes {w[1]} x {groups}; Paddle requires input "
                                       f"channels = filter channels * groups")


def _conv_transpose(p: _Program, op) -> None:
    """ConvTransposeInferMeta: strides > 0, input channels == filter dims[0], equal ranks; groups >= 1 (Paddle
    does not check it and divides by it: groups 0 kills the process with SIGFPE, -1 fails on a negative
    output size)."""
    groups = _int_attr(op, "groups", 1)
    if groups is not None and groups < 1:
        raise p.fail(op, "groups", f"is {groups}; Paddle requires groups >= 1 (with 0 it divides by zero)")
    strides = _ints_attr(op, "strides", [1, 1])
    if strides is not None and any(v <= 0 for v in strides):
        raise p.fail(op, "strides", f"is {strides}; Paddle requires every stride > 0")
    x = p.shape(op, (op.input("Input") or [None])[0])
    w = p.shape(op, (op.input("Filter") or [None])[0])
    if x is not None and w is not None and len(x) != len(w):
        raise p.fail(op, None, f"has an input of rank {len(x)} and a filter of rank {len(w)}; Paddle requires "
                               f"equal ranks")
    if x is not None and w is not None and len(x) >= 2 and w:
        layout = op.attr("data_format", "NCHW")
        channels = x[-1] if layout in ("NHWC", "NDHWC") else x[1]
        if channels >= 0 and w[0] >= 0 and channels != w[0]:
            raise p.fail(op, None, f"has an input with {channels} channels ({layout} dims {list(x)}) and a filter "
                                   f"for {w[0]} (dims {list(w)}); Paddle requires them equal")


def _pool2d(p: _Program, op) -> None:
    """PoolInferMeta: ksize has 2 values; strides != 0 unless adaptive (a negative one gives a negative output
    size); ksize > 0 unless global_pooling. Paddle does not check ksize itself: adaptive pooling with ksize 0
    kills the process with SIGFPE, and plain pooling with ksize <= 0 computes windows without elements
    (-FLT_MAX or 0/0), which this loader refuses rather than reproduces."""
    global_pooling = op.attr("global_pooling", False) is True
    adaptive = op.attr("adaptive", False) is True
    ksize = _ints_attr(op, "ksize")
    if ksize is not None and len(ksize) != 2:
        raise p.fail(op, "ksize", f"is {ksize}; Paddle requires 2 values for pool2d")
    if ksize is not None and not global_pooling and any(k <= 0 for k in ksize):
        raise p.fail(op, "ksize", f"is {ksize}; every window size must be > 0 (unless global_pooling)")
    strides = _ints_attr(op, "strides", [1, 1])
    if strides is not None and not adaptive and any(s <= 0 for s in strides):
        raise p.fail(op, "strides", f"is {strides}; Paddle requires every stride > 0 (unless adaptive)")


def _split(p: _Program, op) -> None:
    """SplitInferMeta: axis in [-R, R); num != 0 when no sections are given."""
    _axis_rule("axis", skip_if="AxisTensor", default=0)(p, op)
    num = _int_attr(op, "num", 0)
    sections = op.attr("sections", [])
    if num == 0 and not sections and not _has_input(op, "SectionsTensorList"):
        raise p.fail(op, "num", "is 0 and no sections are given; Paddle requires num != 0 or sections")


def _transpose(p: _Program, op) -> None:
    """TransposeInferMeta: one axis per input axis, each in [-R, R), no axis twice; or none at all, which Paddle
    3.3.1 takes as the identity at any rank (transpose(x of [2, 3], []) is x)."""
    axis = _ints_attr(op, "axis", [])
    rank = p.rank(op, "X")
    if axis is None or rank is None or not axis:
        return
    if len(axis) != rank:
        raise p.fail(op, "axis", f"is {axis} for an input of rank {rank}; Paddle requires one entry per axis")
    seen = set()
    for a in axis:
        if not -rank <= a < rank:
            raise p.fail(op, "axis", f"is {axis}; Paddle requires every entry in [{-rank}, {rank})")
        if a % rank in seen:
            raise p.fail(op, "axis", f"is {axis}; Paddle requires every axis once")
        seen.add(a % rank)


def _reduce(p: _Program, op) -> None:
    """ReduceInferMeta: every dim in [-R, R) (checked by Paddle even with reduce_all)."""
    dims = _ints_attr(op, "dim", [])
    rank = p.rank(op, "X")
    if dims is None or not rank:
        return
    for d in dims:
        if not -rank <= d < rank:
            raise p.fail(op, "dim", f"is {dims}; Paddle requires every dim in [{-rank}, {rank})")


def _flatten_range(p: _Program, op) -> None:
    """FlattenWithXShapeInferMeta: stop_axis >= start_axis once both are made non-negative."""
    rank = p.rank(op, "X")
    start, stop = _int_attr(op, "start_axis", 1), _int_attr(op, "stop_axis", 1)
    if not rank or start is None or stop is None:
        return
    if (stop + rank if stop < 0 else stop) < (start + rank if start < 0 else start):
        raise p.fail(op, "stop_axis", f"is {stop} with start_axis {start} (rank {rank}); Paddle requires "
                                      f"stop_axis >= start_axis")


def _cumsum(p: _Program, op) -> None:
    """CumInferMeta: axis in [-R, R), or in [-1, 1) when flatten."""
    if op.attr("flatten", False) is True:
        _check_axis(p, op, "axis", _int_attr(op, "axis", -1), 1, -1, 1, " after flattening")
        return
    _axis_rule("axis")(p, op)


def _unsqueeze(p: _Program, op) -> None:
    """GetUnsqueezeShape: the i-th axis (made non-negative against rank R + i + 1) in [0, R + i]."""
    if _has_input(op, "AxesTensor") or _has_input(op, "AxesTensorList"):
        return
    axes = _ints_attr(op, "axes", [])
    rank = p.rank(op, "X")
    if axes is None or rank is None:
        return
    for i, a in enumerate(axes):
        out_rank = rank + i
        cur = a + out_rank + 1 if a < 0 else a
        if not 0 <= cur <= out_rank:
            raise p.fail(op, "axes", f"is {axes}: axis {a} does not fit an input of rank {rank}; Paddle "
                                     f"requires each in [{-out_rank - 1}, {out_rank}]")


def _squeeze(p: _Program, op) -> None:
    """GetOutputSqueezeShape: every axis in [-R, R)."""
    axes = _ints_attr(op, "axes", [])
    rank = p.rank(op, "X")
    if axes is None or not rank:
        return
    for a in axes:
        if not -rank <= a < rank:
            raise p.fail(op, "axes", f"is {axes}; Paddle requires every axis in [{-rank}, {rank})")


def _layer_norm(p: _Program, op) -> None:
    """LayerNormInferMeta: 0 < begin_norm_axis < R."""
    rank = p.rank(op, "X")
    axis = _int_attr(op, "begin_norm_axis", 1)
    if axis is None:
        return
    if axis <= 0:
        raise p.fail(op, "begin_norm_axis", f"is {axis}; Paddle requires begin_norm_axis > 0")
    if rank and axis >= rank:
        raise p.fail(op, "begin_norm_axis", f"is {axis} for an input of rank {rank}; Paddle requires it < {rank}")


def _pixel_shuffle(p: _Program, op) -> None:
    """PixelShuffleInferMeta: upscale_factor != 0 (Paddle loops forever on a negative one) dividing the channels
    twice."""
    factor = _int_attr(op, "upscale_factor", 1)
    if factor is None:
        return
    if factor <= 0:
        raise p.fail(op, "upscale_factor", f"is {factor}; Paddle requires upscale_factor > 0 (0 is refused, a "
                                           f"negative one never returns)")
    x = p.shape(op, (op.input("X") or [None])[0])
    if x is not None and len(x) == 4:
        channels = x[-1] if op.attr("data_format", "NCHW") == "NHWC" else x[1]
        if channels >= 0 and channels % (factor * factor):
            raise p.fail(op, "upscale_factor", f"is {factor}: its square does not divide the input's {channels} "
                                               f"channels; Paddle requires it to")


def _arg_minmax(p: _Program, op) -> None:
    """ArgMinMaxInferMeta: axis in [-R, R) (also checked with flatten)."""
    _axis_rule("axis", default=0)(p, op)


Rule = Callable[[_Program, object], None]
# Legacy op type -> the InferShape checks of Paddle this loader repeats (every one confirmed against Paddle
# Inference 3.3.1 by tests/loader/test_model_validation.py).
RULES: dict = {
    "conv2d": _conv, "depthwise_conv2d": _conv,
    "conv2d_transpose": _conv_transpose, "depthwise_conv2d_transpose": _conv_transpose,
    "pool2d": _pool2d,
    "softmax": _axis_rule("axis"), "log_softmax": _axis_rule("axis"),
    "concat": _axis_rule("axis", skip_if="AxisTensor", default=0),
    "split": _split,
    "transpose": _transpose, "transpose2": _transpose,
    "reduce_sum": _reduce, "reduce_mean": _reduce, "reduce_max": _reduce, "reduce_min": _reduce,
    "reduce_prod": _reduce, "reduce_all": _reduce, "reduce_any": _reduce,
    "flatten_contiguous_range": _flatten_range,
    "arg_max": _arg_minmax, "arg_min": _arg_minmax,
    "cumsum": _cumsum,
    "unsqueeze2": _unsqueeze,
    "squeeze2": _squeeze,
    "top_k_v2": _axis_rule("axis"),
    "stack": _axis_rule("axis", extra=1, default=0),
    "unstack": _axis_rule("axis", default=0),
    "layer_norm": _layer_norm,
    "pixel_shuffle": _pixel_shuffle,
}


def _check_attr_types(p: _Program, op, declared: dict) -> None:
    for name, value in op.attrs.items():
        want = declared.get(name)
        if want is None:
            continue
        problem = attr_type_problem(want, op.attr_types.get(name, want), value)
        if problem is not None:
            shown = repr(value)[:60]
            raise p.fail(op, name, f"{problem} (value {shown}); Paddle refuses the op (\"Cannot get attribute "
                                   f"({name})\")")


def _check_feed_fetch(p: _Program) -> None:
    """Block 0's feed (fetch) ops: one var each, an int `col`, the cols 0..n-1 each once (what
    save_inference_model writes; Paddle Inference indexes its input and output lists by them)."""
    block = p.blocks[0]
    for op_type, slot in (("feed", "Out"), ("fetch", "X")):
        cols: dict[int, Any] = {}  # col -> its feed (fetch) op
        for op in block.ops:
            if op.type != op_type:
                continue
            names = op.output(slot) if op_type == "feed" else op.input(slot)
            if len(names) != 1:
                raise p.fail(op, None, f"has {len(names)} vars in '{slot}'; a {op_type} op has exactly one")
            col = op.attr("col")
            if not _plain_int(col):
                raise p.fail(op, "col", f"is {col!r}; a {op_type} op needs an int column")
            if col in cols:
                raise p.fail(op, "col", f"is {col}, the column of {cols[col].label()} too; every {op_type} op has "
                                        f"a column of its own")
            cols[col] = op
        if cols and sorted(cols) != list(range(len(cols))):
            raise ModelFormatError(f"the {op_type} ops have columns {sorted(cols)}; Paddle's "
                                   f"save_inference_model numbers the {len(cols)} {op_type}s 0..{len(cols) - 1}, "
                                   f"the file is corrupt or was edited", path=p.where)
        if op_type == "feed":
            fed: dict = {}
            for op in cols.values():
                name = op.output("Out")[0]
                if name in fed:
                    raise p.fail(op, None, f"feeds var '{name}', which {fed[name].label()} feeds too")
                fed[name] = op


def validate_program(blocks, params: dict, path: str | None) -> None:
    """The checks of a built program that need the whole graph (see the module docstring)."""
    p = _Program(blocks, params, where_of(path))
    check_sub_blocks(blocks, p.where)
    _check_feed_fetch(p)
    types = paddle_attr_types()
    for block in blocks:
        for op in block.ops:
            declared = types.get(op.type)
            if declared:
                _check_attr_types(p, op, declared)
            rule = RULES.get(op.type)
            if rule is not None:
                rule(p, op)
