"""numpy host kernels for Paddle ops with no NNAdapter expression, one module per operation family.

The families are the standard's (`nnadapter_bridge.nnadapter.operations`: activation for unary math,
elementwise for binary, ...) plus five the standard has no operation for: `control` (sub-blocks and tensor
arrays), `linalg` (matrix factorizations, linear solvers and ranks), `loss`, `sequence` (recurrent layers and CRF
decoding) and `spectral` (Fourier transforms and complex values). Importing this package registers every
kernel of the modules in `KERNEL_MODULES` in `registry.HOST_KERNELS`.

Entry points: `HOST_KERNELS`, `OpScope`, `host_kernel`, `KERNEL_MODULES`. The kernels import the registry, numpy,
the loader's program model and a few shared helpers of the standard or the converters; never `hal` or a floor above
the host.
"""
from __future__ import annotations

import importlib

from nnadapter_bridge.host.kernels.registry import HOST_KERNELS, HostKernel, OpScope, host_kernel  # noqa: F401

# The kernel modules, in the order of the standard's families, then the host-only ones. A module missing from
# this list registers nothing, which tests/host/test_kernel_modules.py catches.
KERNEL_MODULES = (
    "elementwise", "activation", "conv", "pool", "normalization", "matmul", "resize", "reduce", "shape", "tensor",
    "generate", "quantization", "sampling", "detection", "control", "loss", "sequence", "spectral", "linalg",
)


def _load_all() -> None:
    for name in KERNEL_MODULES:
        importlib.import_module(f"{__name__}.{name}")


_load_all()
