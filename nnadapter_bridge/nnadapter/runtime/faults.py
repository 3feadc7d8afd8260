"""Who is at fault when a driver hook fails: the device (its part may run elsewhere) or the caller (an error).

Owns the one wrapper every driver hook is called through (`call_driver`, `raise_from_driver`), the result-code
translation of C-style drivers (`raise_for_result`), the fault test (`is_device_fault`, `fault_device`),
`DeviceFallbackWarning` and `CacheMissError`. Imports only errors and codes: every other runtime module
imports it. docs/architecture.md ("Device faults") tells the whole story.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from nnadapter_bridge.errors import (
    BridgeError,
    DeviceNotFoundError,
    InvalidDimensionsError,
    NNAdapterError,
    OperationError,
    PropertiesError,
)
from nnadapter_bridge.nnadapter.codes import ResultCode


class DeviceFallbackWarning(RuntimeWarning):
    """A device failed (to open, validate, compile, restore or run its part) and that part runs on the next
    listed device or on the host instead (strict mode makes it an error)."""


class CacheMissError(NNAdapterError):
    """A model-less Compilation found no usable cache; build the model and compile it instead."""

    def __init__(self, message: str):
        super().__init__(message, ResultCode.INVALID_PARAMETER)


# The result codes that are the device's fault, not the caller's.
DEVICE_FAULT_CODES = frozenset({ResultCode.OUT_OF_MEMORY, ResultCode.DEVICE_NOT_FOUND, ResultCode.DEVICE_INTERNAL_ERROR,
                                ResultCode.FEATURE_NOT_SUPPORTED})


def raise_for_result(code: Any, what: str) -> None:
    """Raise the exception of a non-zero NNAdapter result code returned C-style by a driver."""
    if code is None or int(code) == ResultCode.NO_ERROR:
        return
    try:
        code = ResultCode(int(code))
    except ValueError:
        raise NNAdapterError(f"{what}: unknown result code {code}", ResultCode.DEVICE_INTERNAL_ERROR) from None
    if code == ResultCode.INVALID_DIMENSIONS:
        raise InvalidDimensionsError(f"{what} cannot run these input dimensions")
    if code == ResultCode.DEVICE_NOT_FOUND:
        raise DeviceNotFoundError(f"{what}: device not found")
    raise NNAdapterError(f"{what} failed", code)


def is_device_fault(exc: BaseException) -> bool:
    """Whether `exc` (raised out of a driver hook or the runtime) is the device's fault, so its part may run
    elsewhere; False for the caller's errors (bad inputs, shapes, properties), which must stay errors."""
    if not isinstance(exc, NNAdapterError):
        return False
    if isinstance(exc, (InvalidDimensionsError, OperationError, PropertiesError, CacheMissError)):
        return False
    return exc.code in DEVICE_FAULT_CODES


def fault_device(exc: BaseException) -> str | None:
    """The device whose driver hook raised `exc` (None when no driver hook raised it)."""
    return getattr(exc, "device_name", None)


def _tag(exc: BaseException, what: str) -> None:
    if getattr(exc, "device_name", None) is None:
        try:
            exc.device_name = what.split(".", 1)[0]  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - an exception type with __slots__
            pass


def call_driver(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a driver hook `what` ("<device name>.<hook> ..."); anything but a BridgeError becomes
    DEVICE_INTERNAL_ERROR (chained). The error carries the device's name as `device_name` (fault_device)."""
    try:
        return fn(*args)
    except BaseException as exc:
        raise_from_driver(exc, what)


def raise_from_driver(exc: BaseException, what: str) -> NoReturn:
    """Re-raise what a driver hook `what` raised, as call_driver says (KeyboardInterrupt and the like as they
    are)."""
    if isinstance(exc, BridgeError):
        _tag(exc, what)
        raise exc
    if not isinstance(exc, Exception):
        raise exc
    error = NNAdapterError(f"{what}: {type(exc).__name__}: {exc}", ResultCode.DEVICE_INTERNAL_ERROR)
    _tag(error, what)
    raise error from exc
