"""The HAL: the driver protocol (hal.protocol) and the drivers (builtin_device, intel_openvino,
microsoft_onnxruntime). Drivers see only NNAdapter models, never Paddle."""
