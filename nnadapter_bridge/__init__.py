"""nnadapter-bridge: a Python implementation of Paddle Lite's NNAdapter subgraph backend.

Public API: the errors here; the loader (`nnadapter_bridge.loader`), the NNAdapter standard and
runtime (`nnadapter_bridge.nnadapter`); Config / create_predictor arrive with the predictor.
"""
from nnadapter_bridge.errors import (  # noqa: F401
    BridgeError,
    ConfigError,
    ConversionError,
    DeviceNotFoundError,
    InvalidDimensionsError,
    ModelFormatError,
    NNAdapterError,
    OperationError,
    PropertiesError,
    UnsupportedOpError,
)

__version__ = "0.1.0"
