"""microsoft_onnxruntime: the HAL driver that runs NNAdapter models through ONNX Runtime.

`DRIVER` is what the entry point `microsoft_onnxruntime = "hal.microsoft_onnxruntime:DRIVER"` names.
`graph` is the ONNX graph builder (model -> onnx.ModelProto, and the trial build validate_program
answers with), `operations` the table of one implementation per NNAdapter operation, `driver` the HAL
protocol glue (contexts, properties, sessions, program bytes, execution) that wires the two.

onnx and onnxruntime are optional dependencies: without them this package fails to import with an
ImportError that says what to install, and the device manager reports that as the reason the device
failed to load (`nnadapter-bridge devices`).

Like every driver it imports no other driver.
"""
try:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
except ImportError as exc:  # the optional extra is not installed
    raise ImportError(f"the microsoft_onnxruntime device needs the onnx and onnxruntime packages "
                      f"({exc}); install nnadapter-bridge[onnxruntime]") from exc

from hal.microsoft_onnxruntime.driver import DRIVER  # noqa: E402

__all__ = ["DRIVER"]
