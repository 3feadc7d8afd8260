"""The operation samples; their home is nnadapter_bridge.conformance.samples (the conformance kit runs them
on any installed driver). Re-exported here for the tests: add a new sample there."""
from nnadapter_bridge.conformance.samples import (  # noqa: F401
    SAMPLES,
    YOLO_BOX_CASES,
    Sample,
    ints,
    randn,
    sample_ids,
    uniform,
)
