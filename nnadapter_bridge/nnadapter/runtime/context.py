"""NNAdapterContext: the devices a model may run on, one driver context each, and which operations they support.

Owns `Context` (create, `validate` / `get_supported_operations` with a faulty validate_program answered as
"none", `subset` for the fallback to the remaining devices). Imports devices, faults and the model; must not
import the compilation or execution, nor anything above the ground.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.runtime.devices import Device
from nnadapter_bridge.nnadapter.runtime.faults import DeviceFallbackWarning, call_driver


class Context:
    """NNAdapterContext: one driver context per device, in the given order, same properties for all.

    `strict` (set by the predictor in strict mode): a device whose validate_program raises is an error
    instead of a warning and a "none" answer (docs/architecture.md, "Device faults")."""

    def __init__(self, devices: Sequence[Device], properties: str = "", callback: Callable | None = None,
                 *, strict: bool = False):
        self.strict = bool(strict)
        self.validation_faults = 0  # validate_program answers replaced by "none" after a fault (not persistent)
        self._validation_warned: set = set()
        if not devices:
            raise NNAdapterError("a context needs at least one device", ResultCode.INVALID_PARAMETER)
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise NNAdapterError(f"a context lists a device twice: {names}", ResultCode.INVALID_PARAMETER)
        self.properties = properties or ""
        self.callback = callback
        self.devices = list(devices)
        self.device_contexts = []
        try:
            for device in self.devices:
                self.device_contexts.append(call_driver(
                    f"{device.name}.create_context", device.driver.create_context,
                    device.handle, self.properties, callback))
        except BaseException:
            self.destroy()
            raise

    @property
    def device_names(self) -> list:
        return [d.name for d in self.devices]

    def subset(self, names: Sequence[str]) -> Context:
        """A new context over those of this context's devices named in `names` (same order, properties,
        callback and strictness): where a part runs when a device of this one fails."""
        devices = [d for d in self.devices if d.name in set(names)]
        return Context(devices, self.properties, self.callback, strict=self.strict)

    def device_context(self, name: str) -> tuple[Device, Any] | None:
        """(Device, driver context) for `name`, or None when the context lacks it."""
        for device, device_context in zip(self.devices, self.device_contexts):
            if device.name == name:
                return device, device_context
        return None

    def validate(self, model: Model, device_index: int) -> list | None:
        """One device's per-operation flags, or None when the device cannot tell."""
        device = self.devices[device_index]
        validate = getattr(device.driver, "validate_program", None)
        if validate is None:
            return None
        try:
            flags = call_driver(f"{device.name}.validate_program", validate,
                                 self.device_contexts[device_index], model)
            if flags is None or len(flags) != len(model.operations):
                raise NNAdapterError(f"{device.name}.validate_program returned "
                                     f"{'None' if flags is None else len(flags)} flags for "
                                     f"{len(model.operations)} operations", ResultCode.DEVICE_INTERNAL_ERROR)
            flags = [bool(f) for f in flags]
        except NNAdapterError as exc:
            if exc.code == ResultCode.FEATURE_NOT_SUPPORTED:
                return None  # "cannot tell", as a NULL hook says in NNAdapter
            if self.strict:
                raise
            # The device's fault: its answer is "none" (the operations go to the next device or the host),
            # one warning per device, and callers must not persist an answer made with it.
            self.validation_faults += 1
            if device.name not in self._validation_warned:
                self._validation_warned.add(device.name)
                warnings.warn(f"device '{device.name}' failed to validate operations ({exc}); they run on the "
                              "next listed device or on the host", DeviceFallbackWarning, stacklevel=3)
            return [False] * len(model.operations)
        return flags

    def get_supported_operations(self, model: Model) -> list:
        """NNAdapterModel_getSupportedOperations: OR over the devices; a device that cannot tell counts
        as supporting everything (with a warning), as Lite's converter treats it."""
        result = [False] * len(model.operations)
        for k, device in enumerate(self.devices):
            flags = self.validate(model, k)
            if flags is None:
                warnings.warn(f"device '{device.name}' cannot tell which operations it supports; assuming all",
                              RuntimeWarning, stacklevel=2)
                flags = [True] * len(model.operations)
            result = [a or b for a, b in zip(result, flags)]
        return result

    def destroy(self) -> None:
        contexts, self.device_contexts = self.device_contexts, []
        for device, device_context in zip(self.devices, contexts):
            device.driver.destroy_context(device_context)

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()


