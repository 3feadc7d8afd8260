"""builtin_device: the numpy reference device for every NNAdapter operation.

`DRIVER` is the HAL driver object the entry point `builtin_device = "hal.builtin_device:DRIVER"`
names. It interprets models with the standard's references (nnadapter_bridge.nnadapter.reference); its
own parts are the protocol glue in `driver` and the fusions in `optimize`. `interpreter` and `kernels`
are compatibility re-exports of the standard.
"""
from hal.builtin_device.driver import DRIVER, BuiltinDeviceDriver  # noqa: F401
