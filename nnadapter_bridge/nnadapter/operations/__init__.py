"""The 96 NNAdapter operations, whole: per operation family, `ops_<family>` holds the signatures and shape
inference, `reference_<family>` the numpy reference semantics.

Importing this package registers every operation in `registry.OPERATIONS` and every reference in
`registry.REFERENCES`.
"""
from __future__ import annotations

import importlib
import pkgutil

from nnadapter_bridge.nnadapter.operations.registry import (  # noqa: F401
    OPERATIONS,
    REFERENCES,
    OperationSpec,
    Reference,
    Slot,
    check_signature,
    dequantize,
    get_spec,
    operation,
    prepare_operation,
    quantize,
    reference,
)


def _load_all() -> None:
    # Signatures first: references import helpers (window arithmetic, dim rules) from the ops_ modules.
    for prefix in ("ops_", "reference_"):
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if info.name.startswith(prefix):
                importlib.import_module(f"{__name__}.{info.name}")


_load_all()
