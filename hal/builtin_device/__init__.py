"""builtin_device: the numpy reference device for every NNAdapter operation.

`DRIVER` is the HAL driver object the entry point `builtin_device = "hal.builtin_device:DRIVER"` names; the
driver class and its protocol glue live in `driver`. It interprets models with the standard's references
(nnadapter_bridge.nnadapter.reference) after the fusions of hal.fusion. Like every driver it imports no other
driver.
"""
from hal.builtin_device.driver import DRIVER

__all__ = ["DRIVER"]
