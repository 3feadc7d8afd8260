"""The host executor: runs the Paddle ops a partition leaves outside every device subgraph.

`HostExecutor` runs one op at a time against a scope (var name -> numpy array, or a Python list for a
tensor array): through the op's converter and the NNAdapter standard's reference when it has one,
otherwise through a numpy host kernel registered with `@host_kernel` (`kernels/`), and sub-blocks (while,
conditional_block) by running their ops in turn. Imports converters and nnadapter.reference; nothing
imports this package except the predictor.
"""
from nnadapter_bridge.host.executor import HostExecutor  # noqa: F401
from nnadapter_bridge.host.kernels import HOST_KERNELS, HostKernel, OpScope, host_kernel  # noqa: F401

__all__ = ["HostExecutor", "HOST_KERNELS", "HostKernel", "OpScope", "host_kernel"]
