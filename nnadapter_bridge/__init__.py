"""nnadapter-bridge: a Python implementation of Paddle Lite's NNAdapter subgraph backend.

Public API: the errors here; the loader (`nnadapter_bridge.loader`), the NNAdapter standard and
runtime (`nnadapter_bridge.nnadapter`); `Config`, `create_predictor`, `Predictor`, `Tensor` and
`check_nnadapter_device_name` (Paddle Lite's API); `nnadapter_bridge.lite` has Paddle Lite's Python names;
`wait_for_cache_writes()` returns once the `.nnc` files this process writes in the background are on disk.

The package itself sits on no floor: at import it loads only `errors`; the predictor names come on first use
(`__getattr__`), so `import nnadapter_bridge` loads no driver, no converter and no runtime, and nothing here
imports the applications (cli, batch, conformance) or devtools.
"""
from nnadapter_bridge.errors import (  # noqa: F401
    BridgeError,
    ConfigError,
    ConversionError,
    DeviceNotFoundError,
    InputError,
    InvalidDimensionsError,
    ModelFormatError,
    NNAdapterError,
    NotSupportedError,
    OperationError,
    PropertiesError,
    UnsupportedOpError,
)

__version__ = "0.1.0"

# The predictor API is imported on first use, so that importing a lower layer (a converter, the loader, the
# standard) does not load the predictor, the engine and the runtime with it.
_LAZY = {
    "Config": "nnadapter_bridge.predictor.config",
    "check_nnadapter_device_name": "nnadapter_bridge.predictor.config",
    "Predictor": "nnadapter_bridge.predictor.predictor",
    "create_predictor": "nnadapter_bridge.predictor.predictor",
    "Tensor": "nnadapter_bridge.predictor.tensor",
    "wait_for_cache_writes": "nnadapter_bridge.nnadapter.nnc",
}

__all__ = ["BridgeError", "ConfigError", "ConversionError", "InputError", "DeviceNotFoundError",
           "InvalidDimensionsError", "ModelFormatError", "NNAdapterError", "NotSupportedError", "OperationError",
           "PropertiesError", "UnsupportedOpError", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nnadapter_bridge' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
