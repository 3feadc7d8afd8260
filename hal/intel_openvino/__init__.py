"""intel_openvino: the HAL driver that compiles NNAdapter models with Intel OpenVINO.

`DRIVER` is what the entry point `intel_openvino = "hal.intel_openvino:DRIVER"` names. Importing this
package never imports `openvino` (so `nnadapter-bridge devices` lists the driver on machines without
it); the package is loaded when the device is opened. The protocol glue lives in `driver`, which
wires the NNAdapter -> OpenVINO graph builder `graph` (builder, quantization, validation) to the table
`operations.OPERATIONS` (one implementation per NNAdapter operation).

Like every driver it imports no other driver.
"""
from hal.intel_openvino.driver import DRIVER

__all__ = ["DRIVER"]
