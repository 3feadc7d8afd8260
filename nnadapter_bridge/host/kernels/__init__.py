"""numpy host kernels for Paddle ops with no NNAdapter expression, one module per op family (`k_*.py`).

Importing this package registers every kernel in `registry.HOST_KERNELS`.
"""
from __future__ import annotations

import importlib
import pkgutil

from nnadapter_bridge.host.kernels.registry import HOST_KERNELS, HostKernel, OpScope, host_kernel  # noqa: F401


def _load_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("k_"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_all()
