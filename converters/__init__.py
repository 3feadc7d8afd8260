"""Converters: one per Paddle op type, each emitting NNAdapter operations into a Model.

Importing this package registers every converter (modules `conv_<family>.py`) in `registry.CONVERTERS`.
The family modules share: `op_view` (reading an op's slots and attrs), `attrs` (tensor-or-attr forms,
known dims), `layout` (channel-first/last, paddings), `emit` (operation forms, broadcasting, the
activation table) and `context` (var name -> operand, constants, `convert_subgraph`).
"""
from __future__ import annotations

import importlib
import pkgutil

from converters.registry import CONVERTERS, ConverterSpec, converter, get_converter  # noqa: F401
from converters.context import ConversionContext  # noqa: F401


def _load_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("conv_"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_all()
