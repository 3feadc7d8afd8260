"""Drivers and devices: finding HAL drivers by name, loading them, and the process-wide open device handles.

Owns `DeviceManager` (the process singleton: discovery through the entry-point group `nnadapter_bridge.devices`,
`register` for tests and embedders, `acquire`), `Device`, `DeviceInfo` (what `nnadapter-bridge devices` shows),
`acquire_device`, `check_device_name` and `unknown_property_keys`. Must not import `hal` or anything above the
ground: a driver is found by its entry point, never by its module. This distribution's own drivers are found by
their entry points as pyproject.toml declares them (OWN_ENTRY_POINTS), without reading the installed distributions'
metadata. docs/architecture.md ("The runtime") tells how discovery fails and what it reports.
"""
from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from nnadapter_bridge.errors import DeviceNotFoundError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import DeviceType
from nnadapter_bridge.nnadapter.driver_protocol import ENTRY_POINT_GROUP, check_driver
from nnadapter_bridge.nnadapter.properties import parse_properties, unknown_keys
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.runtime.faults import call_driver

# This distribution's entry points in the group ENTRY_POINT_GROUP, as pyproject.toml declares them (a test keeps
# the two equal). A device of these names is loaded from here as long as no caller has asked for the list of
# names: reading every installed distribution's metadata (importlib.metadata: ~25 ms to import, ~6 ms to scan) is
# a tenth of a warm start. Another name, and any listing, reads the installed entry points, which then decide.
OWN_ENTRY_POINTS = {
    "builtin_device": "hal.builtin_device:DRIVER",
    "microsoft_onnxruntime": "hal.microsoft_onnxruntime:DRIVER",
    "intel_openvino": "hal.intel_openvino:DRIVER",
    "google_xnnpack": "hal.google_xnnpack:DRIVER",
}


class OwnEntryPoint:
    """One of OWN_ENTRY_POINTS, loaded as importlib.metadata.EntryPoint.load loads 'module:attribute'."""

    def __init__(self, name: str, value: str):
        self.name = name
        self.value = value

    def load(self) -> Any:
        module, _, attribute = self.value.partition(":")
        found = importlib.import_module(module)
        for part in attribute.split(".") if attribute else ():
            found = getattr(found, part)
        return found


def _install_hint(exc: BaseException) -> str:
    """'install nnadapter-bridge[x]' when a driver failed to import because its SDK is missing and said so."""
    if isinstance(exc, ImportError):
        import re  # only for a driver that failed to load

        found = re.search(r"install (nnadapter-bridge\[[A-Za-z0-9_,-]+\])", str(exc))
        if found:
            return f"install {found.group(1)}"
    return ""


# -- devices -----------------------------------------------------------------------------------------
@plain_dataclass
class DeviceInfo:
    """What `nnadapter-bridge devices` shows for one name."""

    name: str
    vendor: str = ""
    type: str = ""
    version: int | None = None
    loaded: bool = False
    error: str = ""
    source: str = ""  # "entry point <value>" or "registered"
    unavailable: str = ""  # what to install when the driver's SDK is missing ("install nnadapter-bridge[x]")

    @property
    def status(self) -> str:
        """'ok', 'unavailable: install ...' (a missing SDK) or 'fails to load: <why>'."""
        if self.unavailable:
            return f"unavailable: {self.unavailable}"
        return "ok" if self.loaded else f"fails to load: {self.error}"


class Device:
    """An acquired device: the driver and its open device handle (shared process-wide)."""

    def __init__(self, name: str, driver: Any, handle: Any):
        self.name = name
        self.driver = driver
        self.handle = handle

    @property
    def vendor(self) -> str:
        return self.driver.vendor

    @property
    def type(self) -> DeviceType:
        return DeviceType(self.driver.type)

    @property
    def version(self) -> int:
        return int(self.driver.version)

    def release(self) -> None:
        """NNAdapterDevice_release: handles stay open until DeviceManager.close_all (as in Lite)."""

    def __repr__(self) -> str:
        return f"Device({self.name!r}, vendor={self.vendor!r}, type={self.type.name}, version={self.version})"


class DeviceManager:
    """Process-wide registry of HAL drivers and their open device handles."""

    _instance: DeviceManager | None = None
    _instance_lock = threading.Lock()

    def __init__(self):
        self._lock = threading.RLock()
        self._drivers: dict = {}       # name -> driver object
        self._sources: dict = {}       # name -> where it came from
        self._failures: dict = {}      # name -> why its entry point failed to load
        self._unavailable: dict = {}   # name -> what to install (its entry point failed: SDK missing)
        self._handles: dict = {}       # name -> open device handle
        self._entry_points: dict | None = None

    @classmethod
    def instance(cls) -> DeviceManager:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    # -- discovery ----------------------------------------------------------------------------------
    def _entry_point_map(self) -> dict:
        if self._entry_points is None:
            import importlib.metadata

            found: list[importlib.metadata.EntryPoint] = []
            try:
                found = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
            except Exception as exc:  # broken metadata: a warning, then only registered drivers
                warnings.warn(
                    f"cannot read the '{ENTRY_POINT_GROUP}' entry points: {exc}", RuntimeWarning, stacklevel=2
                )
            self._entry_points = {}
            for ep in sorted(found, key=lambda e: (e.name, e.value)):
                self._entry_points.setdefault(ep.name, ep)
        return self._entry_points

    def _load(self, name: str) -> Any | None:
        """The driver called `name`, loading its entry point on first use; None if unavailable."""
        if name in self._drivers:
            return self._drivers[name]
        ep: Any
        if self._entry_points is None and name in OWN_ENTRY_POINTS:
            ep = OwnEntryPoint(name, OWN_ENTRY_POINTS[name])
        else:
            ep = self._entry_point_map().get(name)
        if ep is not None and name not in self._failures:
            try:
                driver = ep.load()
                check_driver(driver)
                if driver.name != name:
                    raise TypeError(f"the entry point is named '{name}' but its driver calls itself '{driver.name}'")
            except Exception as exc:
                self._failures[name] = f"{type(exc).__name__}: {exc}"
                hint = _install_hint(exc)
                if hint:
                    self._unavailable[name] = hint
            else:
                self._drivers[name] = driver
                self._sources[name] = f"entry point {ep.value}"
                return driver
        return None

    def register(self, driver: Any, name: str | None = None, *, replace: bool = False) -> None:
        """Make `driver` available under `name` (default: driver.name) in this process."""
        check_driver(driver)
        name = name or driver.name
        with self._lock:
            if not replace and name in self._drivers:
                raise ValueError(f"a driver named '{name}' is already registered")
            self._close(name)
            self._drivers[name] = driver
            self._sources[name] = "registered"
            self._failures.pop(name, None)
            self._unavailable.pop(name, None)

    def unregister(self, name: str) -> None:
        with self._lock:
            self._close(name)
            self._drivers.pop(name, None)
            self._sources.pop(name, None)

    def names(self) -> list:
        """Every name a driver may be acquired by (some may still fail to load)."""
        with self._lock:
            return sorted(set(self._drivers) | set(self._entry_point_map()))

    def is_declared(self, name: str) -> bool:
        """Whether some driver is installed or registered under `name` (even one that fails to load): a
        name that is not is the caller's mistake, a declared one that fails is the installation's."""
        return name in self.names()

    def unavailable_reason(self, name: str) -> str:
        """What to install to use `name` ('install nnadapter-bridge[x]'), '' when nothing is missing: from a
        driver whose import failed with that advice, or the driver's optional `unavailable_reason()`."""
        with self._lock:
            driver = self._load(name)
            if driver is None:
                return self._unavailable.get(name, "")
            hook = getattr(driver, "unavailable_reason", None)
            if not callable(hook):
                return ""
            try:
                return str(hook() or "")
            except Exception as exc:  # a broken hook: the device is not usable either
                return f"{type(exc).__name__}: {exc}"

    def property_keys(self, name: str) -> frozenset | None:
        """The context-property keys the driver `name` reads (its optional `property_keys`), None when it
        does not declare them or does not load."""
        with self._lock:
            driver = self._load(name)  # never raises: a driver failing to load is recorded and None
        keys = getattr(driver, "property_keys", None) if driver is not None else None
        return None if keys is None else frozenset(keys)

    def driver(self, name: str) -> Any:
        with self._lock:
            driver = self._load(name)
            if driver is not None:
                return driver
            for other in self.names():
                self._load(other)  # so the message can say why entry points failed
            available = sorted(self._drivers)
            message = f"no NNAdapter device named '{name}'; available: {', '.join(available) or 'none'}"
            if self._failures:
                failed = "; ".join(f"{n} ({why})" for n, why in sorted(self._failures.items()))
                message += f"; failed to load: {failed}"
            raise DeviceNotFoundError(message)

    def acquire(self, name: str) -> Device:
        """NNAdapterDevice_acquire: the driver plus its device handle, opened once per process."""
        with self._lock:
            driver = self.driver(name)
            if name not in self._handles:
                self._handles[name] = call_driver(f"{name}.open_device", driver.open_device)
            return Device(name, driver, self._handles[name])

    def has_device(self, name: str) -> bool:
        try:
            self.acquire(name)
        except NNAdapterError:
            return False
        return True

    def list_devices(self) -> list:
        """DeviceInfo for every known name, loading each driver to report whether it loads."""
        infos = []
        with self._lock:
            for name in self.names():
                driver = self._load(name)
                if driver is None:
                    infos.append(DeviceInfo(name, loaded=False, error=self._failures.get(name, "not found"),
                                            source=self._source_of_failure(name),
                                            unavailable=self._unavailable.get(name, "")))
                    continue
                try:
                    type_name = DeviceType(driver.type).name
                except ValueError:
                    type_name = str(driver.type)
                infos.append(DeviceInfo(name, str(driver.vendor), type_name, int(driver.version), True,
                                        self._failures.get(name, ""), self._sources.get(name, ""),
                                        self.unavailable_reason(name)))
        return infos

    def _source_of_failure(self, name: str) -> str:
        ep = self._entry_point_map().get(name)
        return f"entry point {ep.value}" if ep is not None else ""

    def _close(self, name: str) -> None:
        handle = self._handles.pop(name, None)
        driver = self._drivers.get(name)
        if handle is not None and driver is not None:
            driver.close_device(handle)

    def close_all(self) -> None:
        """Close every open device handle (the manager's destructor in Lite)."""
        with self._lock:
            for name in list(self._handles):
                self._close(name)


def acquire_device(name: str) -> Device:
    return DeviceManager.instance().acquire(name)


def check_device_name(name: str) -> bool:
    """Lite's check_nnadapter_device_name: can a device of this name be acquired?"""
    return DeviceManager.instance().has_device(name)


def unknown_property_keys(properties: str, device_names: Sequence[str]) -> list:
    """[(key, nearest known key or None)] for the keys of a properties string that neither the listed devices
    nor another installed device reads (properties.unknown_keys). Another device's driver is loaded only when
    a key starts with its name: a key meant for a device that is not listed is fine."""
    keys = list(parse_properties(properties))
    if not keys:
        return []
    manager = DeviceManager.instance()
    declared = {name: manager.property_keys(name) for name in device_names}
    if not unknown_keys(keys, declared):  # every key is read by a listed device: no need to list the others
        return []
    for name in manager.names():
        if name not in declared and any(k.upper().startswith(name.upper() + "_") for k in keys):
            declared[name] = manager.property_keys(name)
    return unknown_keys(keys, declared)


