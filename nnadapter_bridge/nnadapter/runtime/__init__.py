"""The NNAdapter runtime (NNAdapter's runtime/ in Paddle Lite): devices, contexts, compilations, executions.

One module per object, as Paddle Lite splits its runtime:

* `devices`: `DeviceManager` finds HAL drivers through the entry-point group `nnadapter_bridge.devices`;
  `Device`, `acquire_device`, `check_device_name`, `unknown_property_keys`;
* `faults`: every driver hook is called through `call_driver`; `is_device_fault` tells the device's fault from
  the caller's; `DeviceFallbackWarning`, `CacheMissError`;
* `context`: `Context`, the devices a model may run on, and which operations they support;
* `compilation`: `Compilation` (from a model or the `.nnc` cache), `Program`, `STATS`;
* `execution`: `Execution`, the access functions for numpy arrays, `HostBuffer`.

This module is the runtime's public API: the names below are what the rest of the project imports. The runtime
belongs to the ground: it must not import `hal` (drivers are plugins) nor anything above the ground.
docs/architecture.md ("The runtime") tells how faults, threads and the model cache behave.
"""
from nnadapter_bridge.nnadapter.runtime.compilation import STATS, Compilation, Program, RuntimeStats, cache_write_mode
from nnadapter_bridge.nnadapter.runtime.context import Context
from nnadapter_bridge.nnadapter.runtime.devices import (
                                                           Device,
                                                           DeviceInfo,
                                                           DeviceManager,
                                                           acquire_device,
                                                           check_device_name,
                                                           unknown_property_keys,
)
from nnadapter_bridge.nnadapter.runtime.execution import (
                                                           Execution,
                                                           HostBuffer,
                                                           array_input_access,
                                                           array_output_access,
                                                           host_buffer_input_access,
                                                           host_buffer_output_access,
)
from nnadapter_bridge.nnadapter.runtime.faults import (
                                                           CacheMissError,
                                                           DeviceFallbackWarning,
                                                           fault_device,
                                                           is_device_fault,
                                                           raise_for_result,
)

__all__ = [
    "STATS", "CacheMissError", "Compilation", "Context", "Device", "DeviceFallbackWarning", "DeviceInfo",
    "DeviceManager", "Execution", "HostBuffer", "Program", "RuntimeStats", "acquire_device", "array_input_access",
    "array_output_access", "cache_write_mode", "check_device_name", "fault_device", "host_buffer_input_access",
    "host_buffer_output_access", "is_device_fault", "raise_for_result", "unknown_property_keys",
]
