"""The converter registry: Paddle op type -> the function that emits its NNAdapter operations.

One decorator next to each converter registers it:

    @converter("relu", emits=[OperationType.RELU])
    def convert_relu(ctx, op): ...

`emits` lists every NNAdapter operation the converter may emit (the `ops` command and the device support
query read it); `check(op, ctx) -> str | None` optionally rejects attribute combinations the emitted
operations cannot express, returning the reason (the partitioner then leaves the op on the host).
Aliases are extra names for the same converter. A duplicate registration fails at import.
A converter never names a device.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Optional

from nnadapter_bridge.nnadapter.codes import OperationType


@dataclasses.dataclass(frozen=True)
class ConverterSpec:
    op_type: str
    fn: Callable
    emits: tuple
    check: Optional[Callable] = None


CONVERTERS: dict[str, ConverterSpec] = {}


def converter(op_type: str, *aliases: str, emits: Iterable[OperationType], check: Optional[Callable] = None):
    """Register the decorated `fn(ctx, op)` for `op_type` and its aliases."""
    emits = tuple(OperationType(e) for e in emits)

    def register(fn):
        for name in (op_type, *aliases):
            if name in CONVERTERS:
                raise ValueError(f"converter for Paddle op '{name}' registered twice "
                                 f"({CONVERTERS[name].fn.__module__} and {fn.__module__})")
            CONVERTERS[name] = ConverterSpec(name, fn, emits, check)
        return fn

    return register


def get_converter(op_type: str) -> Optional[ConverterSpec]:
    return CONVERTERS.get(op_type)
