"""builtin_device: the numpy reference device for every NNAdapter operation.

`DRIVER` is the HAL driver object the entry point `builtin_device = "hal.builtin_device:DRIVER"`
names; the interpreter and kernels live in `interpreter` and `kernels`, the protocol glue in `driver`.
"""
from hal.builtin_device.driver import DRIVER, BuiltinDeviceDriver  # noqa: F401
