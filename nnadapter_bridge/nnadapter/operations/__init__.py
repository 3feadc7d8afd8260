"""Signatures and shape inference of the 96 NNAdapter operations, one module per operation family.

Importing this package registers every operation in `registry.OPERATIONS`.
"""
from __future__ import annotations

import importlib
import pkgutil

from nnadapter_bridge.nnadapter.operations.registry import (  # noqa: F401
    OPERATIONS,
    OperationSpec,
    Slot,
    check_signature,
    get_spec,
    operation,
    prepare_operation,
)


def _load_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("ops_"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_all()
