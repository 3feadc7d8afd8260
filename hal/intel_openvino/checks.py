"""The run-time check outputs of a compiled OpenVINO program (GraphBuilder.checks and .faults in `graph`): extra
boolean outputs whose tensor names carry CHECK_PREFIX (the caller's error: INVALID_PARAMETER) or FAULT_PREFIX (a value
the device would compute wrongly, int64.py: FEATURE_NOT_SUPPORTED, a device fault, so the runtime runs the part
elsewhere) and the message to raise. Apart from `graph` so that restoring a program from the cache finds its checks
without importing the graph builder and the operation tables.

Imports the standard's codes only.
"""
from __future__ import annotations

from nnadapter_bridge.nnadapter.codes import ResultCode

# Tensor-name prefixes of the extra boolean outputs that carry run-time checks (GraphBuilder.checks / .faults).
CHECK_PREFIX = "nnadapter_bridge_check"
FAULT_PREFIX = "nnadapter_bridge_fault"


def check_outputs(compiled_outputs) -> list:
    """(output position, message, result code) of every run-time check output of a compiled model, in order."""
    found = []
    for position, output in enumerate(compiled_outputs):
        for name in output.get_names():
            for prefix, code in ((CHECK_PREFIX, ResultCode.INVALID_PARAMETER),
                                 (FAULT_PREFIX, ResultCode.FEATURE_NOT_SUPPORTED)):
                if name.startswith(prefix):
                    found.append((position, name.split(":", 1)[1] if ":" in name else "a run-time check failed", code))
    return found
