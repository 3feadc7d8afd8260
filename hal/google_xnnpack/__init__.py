"""google_xnnpack: the HAL driver that runs NNAdapter models through LiteRT's Interpreter with the XNNPACK delegate.

`DRIVER` is what the entry point `google_xnnpack = "hal.google_xnnpack:DRIVER"` names. `graph` is the TFLite
flatbuffer builder (model -> one subgraph, NHWC inside), `operations` the table of one implementation per
NNAdapter operation, `driver` the HAL protocol glue (contexts, the thread-count property, interpreters, the
XNNPACK coverage check, program bytes, execution) that wires the two.

ai-edge-litert is an optional dependency: without it this package fails to import with an ImportError that says
what to install, and the device manager reports that as the reason the device failed to load
(`nnadapter-bridge devices`).
"""
try:
    import ai_edge_litert.interpreter  # noqa: F401
    from ai_edge_litert import schema_py_generated  # noqa: F401
except ImportError as exc:  # the optional extra is not installed
    raise ImportError(f"the google_xnnpack device needs the ai-edge-litert package ({exc}); "
                      "install nnadapter-bridge[xnnpack]") from exc

from hal.google_xnnpack.driver import DRIVER, XnnpackDriver  # noqa: E402,F401
