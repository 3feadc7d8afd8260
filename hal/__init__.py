"""The HAL: the drivers' API (hal.protocol), the drivers (builtin_device, google_xnnpack, intel_openvino,
microsoft_onnxruntime) and what they share (common, fusion, quantized_chains). Drivers see only NNAdapter models,
never Paddle: the HAL imports only the ground (the standard, errors), never converters or partition, and no driver
imports another (import-linter contracts)."""
