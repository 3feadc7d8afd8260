"""The host executor: runs the Paddle ops a partition leaves outside every device subgraph.

`HostExecutor` runs one op at a time against a scope (var name -> numpy array, or a Python list for a
tensor array): through the op's converter and the NNAdapter standard's reference when it has one,
otherwise through a numpy host kernel registered with `@host_kernel` (`kernels/`), and sub-blocks (while,
conditional_block) by running their ops in turn. Entry point: `HostExecutor`.

Imports converters, the loader and the standard (its reference); never `hal` (a contract: the host runs the
standard's reference, not a driver), the subgraph floor beside it or anything above. The predictor runs it; the
commands ask it whether an op can run on the host.
"""
from nnadapter_bridge.host.executor import HostExecutor  # noqa: F401
from nnadapter_bridge.host.kernels import HOST_KERNELS, HostKernel, OpScope, host_kernel  # noqa: F401

__all__ = ["HostExecutor", "HOST_KERNELS", "HostKernel", "OpScope", "host_kernel"]
