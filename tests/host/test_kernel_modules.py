"""Discovery of the host kernels is the explicit `KERNEL_MODULES` list of `nnadapter_bridge.host.kernels`:
importing every module of the package registers nothing more, and every listed module registers a kernel."""
from __future__ import annotations

import importlib
import pkgutil

from nnadapter_bridge.host import kernels


def test_every_kernel_module_is_listed():
    before = dict(kernels.HOST_KERNELS)
    for info in pkgutil.iter_modules(kernels.__path__):
        importlib.import_module(f"{kernels.__name__}.{info.name}")
    unlisted = sorted({k.fn.__module__ for name, k in kernels.HOST_KERNELS.items() if name not in before})
    assert not unlisted, f"host kernel modules missing from KERNEL_MODULES: {unlisted}"
    registering = {k.fn.__module__.rsplit(".", 1)[1] for k in kernels.HOST_KERNELS.values()}
    assert set(kernels.KERNEL_MODULES) == registering
