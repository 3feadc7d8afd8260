"""numpy kernels of builtin_device for all 96 NNAdapter operations, one module per operation family.

Importing this package registers every kernel in `registry.KERNELS`.
"""
from __future__ import annotations

import importlib
import pkgutil

from hal.builtin_device.kernels.registry import KERNELS, Kernel, dequantize, kernel, quantize  # noqa: F401


def _load_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("k_"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_all()
