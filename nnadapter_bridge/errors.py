"""The error hierarchy of nnadapter-bridge: every error a user can see derives from BridgeError.

Messages name the file, the Paddle op (type, index, first output var) or the NNAdapter operation
involved, and say what to do about it.

Owns the errors and NNAdapter's result codes (`ResultCode`, nnadapter.h's NNADAPTER_NO_ERROR ...), which
NNAdapterError carries and `nnadapter.codes` names with the standard's other codes. The lowest module of the
ground: it imports nothing of the project (and nothing costly: `import nnadapter_bridge` loads it).
"""
from __future__ import annotations

import enum


class ResultCode(enum.IntEnum):
    """NNAdapter's result codes (nnadapter.h): what a driver hook returns or an NNAdapterError carries."""

    NO_ERROR = 0
    OUT_OF_MEMORY = 1
    INVALID_DIMENSIONS = 2
    INVALID_PARAMETER = 3
    DEVICE_NOT_FOUND = 4
    DEVICE_INTERNAL_ERROR = 5
    FEATURE_NOT_SUPPORTED = 6


class BridgeError(Exception):
    """Root of every error raised on purpose by nnadapter-bridge."""


class ModelFormatError(BridgeError):
    """A Paddle model file (program or parameters) is missing, truncated, corrupt or inconsistent."""

    def __init__(self, message: str, *, path: str | None = None, var: str | None = None):
        self.path = path
        self.var = var
        parts = []
        if path is not None:
            parts.append(f"{path}")
        if var is not None:
            parts.append(f"var '{var}'")
        prefix = (": ".join(parts) + ": ") if parts else ""
        super().__init__(prefix + message)


class NNAdapterError(BridgeError):
    """A failure reported with an NNAdapter result code (ResultCode)."""

    def __init__(self, message: str, code: int | None = None):
        self.code: ResultCode = ResultCode.INVALID_PARAMETER if code is None else ResultCode(code)
        super().__init__(f"{message} [{self.code.name}]")


class InvalidDimensionsError(NNAdapterError):
    """NNADAPTER_INVALID_DIMENSIONS: the program cannot run these input shapes; recompile for them."""

    def __init__(self, message: str):
        super().__init__(message, ResultCode.INVALID_DIMENSIONS)


class OperationError(NNAdapterError):
    """An NNAdapter operation was given operands that do not fit its signature or each other."""


class DeviceNotFoundError(NNAdapterError):
    """A device name that no installed driver provides."""

    def __init__(self, message: str):
        super().__init__(message, ResultCode.DEVICE_NOT_FOUND)


class PropertiesError(NNAdapterError):
    """A malformed context-properties string (KEY=value;KEY=value)."""


class ConversionError(BridgeError):
    """A Paddle op could not be converted to NNAdapter operations. `failed_op`: the op whose converter refused (set by
    converters.context.convert_subgraph; None for a converter's bug or a failure of the whole model)."""

    failed_op: object = None


class UnsupportedOpError(BridgeError):
    """One or more Paddle ops can run neither on a device nor on the host."""


class ConfigError(BridgeError):
    """A bad predictor configuration (paths, device names, partition config, dynamic shape info)."""


class NotSupportedError(BridgeError, NotImplementedError):
    """A Paddle Lite API that has no meaning here (OpenCL/Metal settings, Lite's optimizer passes, ...): raised
    instead of accepting the call and doing nothing (docs/lite_api.md lists them)."""


class InputError(BridgeError):
    """A predictor input that does not fit the model (dtype, rank, shape), or one that was never set."""
