"""The run-time check outputs of a compiled OpenVINO program (GraphBuilder.checks and .faults in `graph`): extra
boolean outputs whose tensor names carry CHECK_PREFIX (the caller's error: INVALID_PARAMETER) or FAULT_PREFIX (a value
the device would compute wrongly, int64.py, nms.py: FEATURE_NOT_SUPPORTED, a device fault, so the runtime runs the part
elsewhere) and the message to raise. Apart from `graph` so that restoring a program from the cache finds its checks
without importing the graph builder and the operation tables. Also the outputs the program hands out channels-last
(NHWC_PREFIX, `graph.hand_out_channels_last`), which the driver transposes back while copying them out.

Imports the standard's codes and driver protocol only.
"""
from __future__ import annotations

from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.driver_protocol import parse_fault_output_name

# Tensor-name prefixes of the extra boolean outputs that carry run-time checks (GraphBuilder.checks / .faults).
CHECK_PREFIX = "nnadapter_bridge_check"
FAULT_PREFIX = "nnadapter_bridge_fault"
# A second tensor name of a model output that the compiled program computes as [N, H, W, C] (graph.py's
# hand_out_channels_last); the driver returns its transpose, so the model's [N, C, H, W] is what callers see.
NHWC_PREFIX = "nnadapter_bridge_nhwc"


def check_outputs(compiled_outputs) -> list:
    """(output position, message, result code, operand name) of every run-time check output of a compiled model, in
    order; the operand name (a fault's, driver_protocol.fault_output_name) names the operation it belongs to, or is
    None."""
    found = []
    for position, output in enumerate(compiled_outputs):
        for name in output.get_names():
            for prefix, code in ((CHECK_PREFIX, ResultCode.INVALID_PARAMETER),
                                 (FAULT_PREFIX, ResultCode.FEATURE_NOT_SUPPORTED)):
                if name.startswith(prefix):
                    message, operand = parse_fault_output_name(name, prefix)
                    found.append((position, message, code, operand))
    return found


def channels_last_outputs(compiled_outputs) -> frozenset:
    """Positions of the outputs the compiled program hands out as [N, H, W, C] for the model's [N, C, H, W]."""
    return frozenset(position for position, output in enumerate(compiled_outputs)
                     if any(name.startswith(NHWC_PREFIX) for name in output.get_names()))
