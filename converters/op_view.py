"""The typed view of one Paddle op that converters and their checks read: its vars by slot, its attributes
with Paddle's defaults, and the NNAdapter precision of a VarType element-type code.

`OpView(op)` wraps a loader `OpInfo` without copying it. A slot holding nothing, or only Paddle's
`@EMPTY@` placeholder, is an absent slot: `input` / `output` raise a ConversionError naming the op,
`optional_input` / `optional_output` return None.

Paddle lets some attributes hold a Variable (a VAR/VARS attribute, a loader `VarRef`: `reduce_sum`'s `dim`,
`cumsum`'s `axis`, `fill_any_like`'s `value`, PIR `range`'s `start`, ...): the value is a tensor. Whoever
knows that tensor's value replaces the reference with it first (`resolve_var_attrs`: the conversion context
with parameters and constant operands, the host executor with the run-time scope). A reference still
unresolved when a converter reads the attribute is a tensor computed at run time: the readers raise a
ConversionError naming the op and the attribute, so the op is refused (and runs where the value is known),
never a TypeError from int(VarRef).

Entry points: `OpView`, `resolve_var_attrs`, `VARTYPE_PRECISIONS`. Imports the loader (program model, dtypes,
validate), the standard's codes and errors only: the base every converter module stands on.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import ConversionError, ModelFormatError
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.dtypes import TENSOR_ELEMENT_TYPES, VarTypeCode, numpy_dtype
from nnadapter_bridge.loader.program import EMPTY_VAR_NAME, OpInfo, VarRef
from nnadapter_bridge.loader.validate import type_words
from nnadapter_bridge.nnadapter.codes import Precision, dtype_precision


def _vartype_precisions() -> dict:
    """VarType element code -> NNAdapter precision, from the loader's VarType -> numpy table.

    SIZE_T is an index type no op attr names; BF16 has no NNAdapter precision (without ml_dtypes the
    loader holds it as raw uint16 patterns, which are not UINT16 values); complex types have none either."""
    table = {}
    for code in sorted(TENSOR_ELEMENT_TYPES):
        if code in (VarTypeCode.SIZE_T, VarTypeCode.BF16):
            continue
        try:
            table[int(code)] = dtype_precision(numpy_dtype(code))
        except ValueError:  # complex64/complex128
            continue
    return table


# Paddle `VarType.Type` element codes (the `dtype`/`out_dtype` attrs of cast, fill_constant, arg_max,
# one_hot_v2, ...) -> NNAdapter precision.
VARTYPE_PRECISIONS: dict = _vartype_precisions()


def precision_of_var_type(code) -> Precision | None:
    """The NNAdapter precision of a Paddle VarType element code, or None for codes without one."""
    try:
        return VARTYPE_PRECISIONS.get(int(code))
    except (TypeError, ValueError):
        return None


def vartype_precision(code, what: str = "dtype") -> Precision:
    """Like precision_of_var_type, but a ValueError naming `what` for a code without a precision."""
    precision = precision_of_var_type(code)
    if precision is None:
        raise ValueError(f"{what} {code!r} is not a Paddle element type NNAdapter can hold "
                         f"(known VarType codes: {sorted(VARTYPE_PRECISIONS)})")
    return precision


def var_attr_names(value) -> list:
    """The var names an attribute value refers to (a VarRef, or a list holding VarRefs); [] for plain values."""
    if isinstance(value, VarRef):
        return [value.name]
    if isinstance(value, (list, tuple)):
        return [v.name for v in value if isinstance(v, VarRef)]
    return []


def has_var_attrs(op) -> bool:
    return any(var_attr_names(v) for v in op.attrs.values())


def tensor_attr_value(array):
    """An attribute value read from a tensor: a Python scalar for a 0-d tensor, else a flat list (the readers
    below take a one-element list where a scalar is expected, and a scalar where a list is)."""
    array = np.asarray(array)
    items = array.reshape(-1).tolist()
    return items[0] if array.ndim == 0 and items else items


def resolve_var_attrs(op, value_of):
    """`op`, or a copy of it whose Variable-valued attributes `value_of(var name)` knows (an array, or None when
    the value is not known) are replaced by those values; references it does not know stay. A VARS list (one
    tensor per element) becomes the flat list of every element's values."""
    replaced = {}
    for name, value in op.attrs.items():
        refs = var_attr_names(value)
        if not refs:
            continue
        if isinstance(value, VarRef):
            known = value_of(value.name)
            if known is not None:
                replaced[name] = tensor_attr_value(known)
            continue
        items, complete = [], True
        for v in value:
            if isinstance(v, VarRef):
                known = value_of(v.name)
                if known is None:
                    complete = False
                    break
                items.extend(np.asarray(known).reshape(-1).tolist())
            else:
                items.append(v)
        if complete:
            replaced[name] = items
    if not replaced:
        return op
    return OpInfo(op.type, op.index, op.block_idx, op.inputs, op.outputs, {**op.attrs, **replaced},
                  op.attr_types, op.is_target)


# Attribute types an integer reader refuses: a float (1.5 would silently become 1) or a string.
_NON_INTEGER_TYPES = frozenset({pb.FLOAT, pb.FLOAT64, pb.FLOATS, pb.FLOAT64S, pb.STRING, pb.STRINGS})


def _present(names: Sequence[str]) -> list:
    return [name for name in names if name and name != EMPTY_VAR_NAME]


class OpView:
    """Slots and attributes of one Paddle op (a loader OpInfo), read the way converters need them."""

    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    @property
    def type(self) -> str:
        return self.op.type

    def label(self) -> str:
        return self.op.label()

    def _missing(self, kind: str, slot: str) -> ConversionError:
        return ConversionError(f"{self.op.label()}: {kind} slot '{slot}' is empty")

    # -- vars -----------------------------------------------------------------------------------------
    def inputs(self, slot: str) -> list:
        """Every var of input `slot` (none when the slot is absent)."""
        return _present(self.op.input(slot))

    def optional_input(self, slot: str) -> str | None:
        """The first var of input `slot`, or None when the slot is absent or empty."""
        names = self.inputs(slot)
        return names[0] if names else None

    def input(self, slot: str) -> str:
        """The first var of input `slot`; a ConversionError naming the op when there is none."""
        name = self.optional_input(slot)
        if name is None:
            raise self._missing("input", slot)
        return name

    def outputs(self, slot: str) -> list:
        return _present(self.op.output(slot))

    def optional_output(self, slot: str) -> str | None:
        names = self.outputs(slot)
        return names[0] if names else None

    def output(self, slot: str) -> str:
        name = self.optional_output(slot)
        if name is None:
            raise self._missing("output", slot)
        return name

    # -- attributes -------------------------------------------------------------------------------------
    def attr(self, name: str, default=None):
        """Attr `name`, or `default` when the op lacks it (or holds None); a ConversionError when it still
        refers to a tensor (its value is computed at run time)."""
        value = self.op.attr(name)
        refs = var_attr_names(value)
        if refs:
            raise ConversionError(f"{self.op.label()}: attribute '{name}' comes from tensor "
                                  f"{', '.join(repr(r) for r in refs)}, which is computed at run time; "
                                  "its value is not known at conversion time")
        return default if value is None else value

    def _scalar(self, name: str, default):
        value = self.attr(name, default)
        if isinstance(value, (list, tuple, np.ndarray)):  # a one-element tensor read into the attribute
            flat = list(np.asarray(value).reshape(-1))
            if len(flat) != 1:
                raise ConversionError(f"{self.op.label()}: attribute '{name}' holds {len(flat)} values, "
                                      "expected one")
            value = flat[0]
        return value

    def _refuse_non_integer(self, name: str) -> None:
        """A float or string attribute read as an int is a malformed op (Paddle: "Cannot get attribute (axis) by
        type int, its type is float"): a ModelFormatError naming the op and the attribute, never a silent
        int(1.5) == 1. The loader's validation refuses these for every op Paddle declares; this catches the
        rest (and ops built in memory)."""
        stored = getattr(self.op, "attr_types", {}).get(name)
        if stored in _NON_INTEGER_TYPES and name in self.op.attrs:
            raise ModelFormatError(f"{self.op.label()}: attribute '{name}' is {type_words(stored)} "
                                   f"({self.op.attrs[name]!r:.60}) where an integer is expected; Paddle refuses "
                                   f"the op")

    def attr_int(self, name: str, default: int) -> int:
        self._refuse_non_integer(name)
        return int(self._scalar(name, default))

    def attr_float(self, name: str, default: float) -> float:
        return float(self._scalar(name, default))

    def attr_bool(self, name: str, default: bool = False) -> bool:
        return bool(self._scalar(name, default))

    def attr_str(self, name: str, default: str) -> str:
        return str(self.attr(name, default))

    def attr_ints(self, name: str, default: Sequence[int] = ()) -> list:
        """An int-list attr (a bare number becomes one element); `default` when the op lacks it."""
        self._refuse_non_integer(name)
        return self._attr_list(name, default, int)

    def attr_floats(self, name: str, default: Sequence[float] = ()) -> list:
        return self._attr_list(name, default, float)

    def _attr_list(self, name: str, default: Sequence, cast) -> list:
        value = self.attr(name)
        if value is None:
            return list(default)
        if isinstance(value, (int, float, np.integer, np.floating)):
            return [cast(value)]
        return [cast(v) for v in value]

    def attr_precision(self, name: str, default: int) -> Precision | None:
        """The NNAdapter precision of a VarType-code attr (`dtype`, `out_dtype`), None for other codes."""
        return precision_of_var_type(self._scalar(name, default))
