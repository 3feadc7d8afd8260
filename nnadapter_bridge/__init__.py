"""nnadapter-bridge: a Python implementation of Paddle Lite's NNAdapter subgraph backend.

Public API: the errors here; the loader (`nnadapter_bridge.loader`), the NNAdapter standard and
runtime (`nnadapter_bridge.nnadapter`); `Config`, `create_predictor`, `Predictor`, `Tensor` and
`check_nnadapter_device_name` (Paddle Lite's API); `nnadapter_bridge.lite` has Paddle Lite's Python names.
"""
from nnadapter_bridge.errors import (  # noqa: F401
    BridgeError,
    ConfigError,
    ConversionError,
    InputError,
    DeviceNotFoundError,
    InvalidDimensionsError,
    ModelFormatError,
    NNAdapterError,
    OperationError,
    PropertiesError,
    UnsupportedOpError,
)

__version__ = "0.1.0"

from nnadapter_bridge.config import Config, check_nnadapter_device_name  # noqa: E402,F401
from nnadapter_bridge.predictor import Predictor, create_predictor  # noqa: E402,F401
from nnadapter_bridge.tensor import Tensor  # noqa: E402,F401
