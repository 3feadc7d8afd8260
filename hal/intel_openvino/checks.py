"""The run-time check outputs of a compiled OpenVINO program (GraphBuilder.checks in `graph`): extra boolean
outputs whose tensor names carry CHECK_PREFIX and the message to raise. Apart from `graph` so that restoring a
program from the cache finds its checks without importing the graph builder and the operation tables."""
from __future__ import annotations

from typing import List

# Tensor-name prefix of the extra boolean outputs that carry run-time checks (GraphBuilder.checks).
CHECK_PREFIX = "nnadapter_bridge_check"


def check_outputs(compiled_outputs) -> List:
    """(output position, message) of every run-time check output of a compiled model, in order."""
    found = []
    for position, output in enumerate(compiled_outputs):
        for name in output.get_names():
            if name.startswith(CHECK_PREFIX):
                found.append((position, name.split(":", 1)[1] if ":" in name else "a run-time check failed"))
    return found
