"""The converter registry: Paddle op type -> the function that emits its NNAdapter operations.

One decorator next to each converter registers it:

    @converter("relu", emits=[OperationType.RELU])
    def convert_relu(ctx: ConversionContext, v: OpView) -> None: ...

A converter receives the op as an `OpView` (its slots and attributes, typed readers; `v.op` is the loader's
op, for the helpers that take one) with its tensor-valued attributes already folded where they are known.

`emits` lists every NNAdapter operation the converter may emit (the `ops` command and the device support
query read it); `check(op, ctx) -> str | None` optionally rejects attribute combinations the emitted
operations cannot express, returning the reason (the partitioner then leaves the op on the host); `condition`
says what the converter's run-time conditions check (context.py), for the message when one fails.
Aliases are extra names for the same converter. A duplicate registration fails at import.
A converter never names a device.

Imports op_view, context and the standard's codes only.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from converters.op_view import OpView
from nnadapter_bridge.nnadapter.codes import OperationType

if TYPE_CHECKING:
    from converters.context import ConversionContext

ConverterFn = Callable[["ConversionContext", OpView], None]
# check(op, ctx): the op (a loader OpInfo) and the context, or None during partitioning; the reason or None.
CheckFn = Callable[..., str | None]


@dataclasses.dataclass(frozen=True)
class ConverterSpec:
    op_type: str
    fn: ConverterFn
    emits: tuple[OperationType, ...]
    check: CheckFn | None = None
    condition: str = ""  # what its run-time conditions check (context.py), said when one fails


CONVERTERS: dict[str, ConverterSpec] = {}


def converter(op_type: str, *aliases: str, emits: Iterable[OperationType],
              check: CheckFn | None = None, condition: str = "") -> Callable[[ConverterFn], ConverterFn]:
    """Register the decorated `fn(ctx, v: OpView)` for `op_type` and its aliases."""
    emitted = tuple(dict.fromkeys(OperationType(e) for e in emits))  # each once, in first-listed order

    def register(fn: ConverterFn) -> ConverterFn:
        for name in (op_type, *aliases):
            if name in CONVERTERS:
                raise ValueError(f"converter for Paddle op '{name}' registered twice "
                                 f"({CONVERTERS[name].fn.__module__} and {fn.__module__})")
            CONVERTERS[name] = ConverterSpec(name, fn, emitted, check, condition)
        return fn

    return register


def get_converter(op_type: str) -> ConverterSpec | None:
    return CONVERTERS.get(op_type)
