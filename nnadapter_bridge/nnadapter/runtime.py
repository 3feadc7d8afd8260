"""The NNAdapter runtime (facts §6): devices, contexts, compilations with the .nnc cache, executions.

* `DeviceManager` (process singleton) finds HAL drivers by name through the entry-point group
  `nnadapter_bridge.devices`, loading each one only when first asked for; `builtin_device` is always
  available, even without package metadata. Tests and embedders add drivers with `register`.
* `Context(devices, properties, callback)` gives the same properties string to every device.
* `Compilation(model | None, cache_token, cache_buffer, cache_dir, context)`: with a model, `finish()`
  compiles it (split across devices when the context has several, see nnadapter.partitioning);
  without one, it restores from `cache_buffer` or `<cache_dir>/<cache_token>.nnc`, and `finish()` raises
  CacheMissError when that cache is absent or unusable (one warning for an unusable one), so the
  caller builds the model instead. The .nnc is written after the first successful compute, only for
  a compiled model with token and dir set, and only when every device filled its program bytes. It is
  exported, packed and written by a thread of its own (`PendingCacheWrite`), so the first result does not
  wait for 100 MB of file writes; reading that path, `Compilation.destroy()`, `wait_for_cache_writes()`
  and the interpreter's exit wait for it. `NNADAPTER_BRIDGE_CACHE_WRITE=foreground` writes it before the
  first compute returns instead.
* `Execution(compilation)`: `set_input`/`set_output` with access functions (driver_protocol), `compute()`
  runs the device programs in order, passing shared buffers between them; `run(arrays)` is the numpy
  shortcut. Failures raise NNAdapterError carrying the result code; INVALID_DIMENSIONS raises
  InvalidDimensionsError ("recompile for these shapes").

`STATS` counts compiles, cache restores, cache misses and cache writes so callers and tests can tell
a cache hit from a compile; `Compilation.restored_from_cache` says it per compilation.

Faults: every error raised out of a driver hook carries `device_name`, the device whose hook failed, and
`is_device_fault(error)` says whether it is the device's fault (DEVICE_INTERNAL_ERROR, DEVICE_NOT_FOUND,
OUT_OF_MEMORY, FEATURE_NOT_SUPPORTED; any other exception out of a driver hook is wrapped as DEVICE_INTERNAL_ERROR)
rather than the caller's (INVALID_PARAMETER, INVALID_DIMENSIONS, an OperationError on bad inputs): the predictor and the engine
run a faulty device's part elsewhere (DeviceFallbackWarning), a caller's error stays an error. A
`validate_program` that raises is such a fault too: `Context.validate` warns once per device and answers "none"
for it (`Context.validation_faults` counts these answers, so they are not persisted), unless `Context.strict`.

Threads: a Compilation is run by one thread at a time. `Compilation.clone()` gives another one sharing the
compiled programs' immutable parts (through the driver's optional `clone_program` hook; a program whose driver
cannot clone it is shared and its executions serialised by a lock).
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.metadata
import os
import re
import threading
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import (BridgeError, DeviceNotFoundError, InvalidDimensionsError, NNAdapterError,
                                     OperationError, PropertiesError)
from nnadapter_bridge.nnadapter.codes import DeviceType, ResultCode
from nnadapter_bridge.nnadapter.driver_protocol import ENTRY_POINT_GROUP, Argument, Cache, check_driver
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import (
    CacheIdentity,
    CompilationRecord,
    NncCacheWarning,
    PendingCacheWrite,
    ProgramRecord,
    cache_file_path,
    clean_stale_temp_files,
    load_compilation_record,
    pack_compilation_record_parts,
    read_nnc_file,
    resolve_cache_key,
    write_file_atomically,
)
from nnadapter_bridge.nnadapter.types import OperandType

BUILTIN_DEVICE_NAME = "builtin_device"
# The module holding builtin_device's DRIVER: loaded by name, as a plugin, when no entry point provides it
# (a source checkout that was never pip-installed), so the standard never imports the HAL.
BUILTIN_DEVICE_MODULE = "hal.builtin_device"


# -- statistics --------------------------------------------------------------------------------------
@dataclasses.dataclass
class RuntimeStats:
    compiles: int = 0        # compilations finished from a model
    cache_restores: int = 0  # compilations finished from a .nnc file or buffer
    cache_misses: int = 0    # model-less compilations whose cache was absent or unusable
    cache_writes: int = 0    # .nnc files written

    def reset(self) -> None:
        self.compiles = self.cache_restores = self.cache_misses = self.cache_writes = 0


STATS = RuntimeStats()
_STATS_LOCK = threading.Lock()  # cache_writes is counted by the writer threads


# What a compilation made with named_later gives its drivers as the token until set_cache_identity names it
# (drivers keep program bytes only when a cache has a token and a dir; none reads the token's text).
PENDING_CACHE_TOKEN = "(named after compiling)"


# -- background cache writes -------------------------------------------------------------------------
CACHE_WRITE_ENV = "NNADAPTER_BRIDGE_CACHE_WRITE"
CACHE_WRITE_MODES = ("background", "foreground")


def cache_write_mode() -> str:
    """`background` (the default: the .nnc is written by a thread of its own after the first compute) or
    `foreground` (written before the first compute returns), from NNADAPTER_BRIDGE_CACHE_WRITE."""
    mode = os.environ.get(CACHE_WRITE_ENV, "").strip().lower() or "background"
    if mode not in CACHE_WRITE_MODES:
        raise NNAdapterError(f"{CACHE_WRITE_ENV}={os.environ[CACHE_WRITE_ENV]!r}: expected one of "
                             f"{', '.join(CACHE_WRITE_MODES)}", ResultCode.INVALID_PARAMETER)
    return mode


def raise_for_result(code, what: str) -> None:
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


class DeviceFallbackWarning(RuntimeWarning):
    """A device failed (to open, validate, compile, restore or run its part) and that part runs on the next
    listed device or on the host instead (strict mode makes it an error)."""


# The result codes that are the device's fault, not the caller's (module docstring).
DEVICE_FAULT_CODES = frozenset({ResultCode.OUT_OF_MEMORY, ResultCode.DEVICE_NOT_FOUND, ResultCode.DEVICE_INTERNAL_ERROR,
                                ResultCode.FEATURE_NOT_SUPPORTED})


def is_device_fault(exc: BaseException) -> bool:
    """Whether `exc` (raised out of a driver hook or the runtime) is the device's fault, so its part may run
    elsewhere; False for the caller's errors (bad inputs, shapes, properties), which must stay errors."""
    if not isinstance(exc, NNAdapterError):
        return False
    if isinstance(exc, (InvalidDimensionsError, OperationError, PropertiesError, CacheMissError)):
        return False
    return exc.code in DEVICE_FAULT_CODES


def fault_device(exc: BaseException) -> Optional[str]:
    """The device whose driver hook raised `exc` (None when no driver hook raised it)."""
    return getattr(exc, "device_name", None)


def _tag(exc: BaseException, what: str) -> None:
    if getattr(exc, "device_name", None) is None:
        try:
            exc.device_name = what.split(".", 1)[0]
        except AttributeError:  # pragma: no cover - an exception type with __slots__
            pass


def _call_driver(what: str, fn: Callable, *args):
    """Call a driver hook `what` ("<device name>.<hook> ..."); anything but a BridgeError becomes
    DEVICE_INTERNAL_ERROR (chained). The error carries the device's name as `device_name` (fault_device)."""
    try:
        return fn(*args)
    except BaseException as exc:
        _raise_from_driver(exc, what)


def _raise_from_driver(exc: BaseException, what: str):
    """Re-raise what a driver hook `what` raised, as _call_driver says (KeyboardInterrupt and the like as they
    are)."""
    if isinstance(exc, BridgeError):
        _tag(exc, what)
        raise exc
    if not isinstance(exc, Exception):
        raise exc
    error = NNAdapterError(f"{what}: {type(exc).__name__}: {exc}", ResultCode.DEVICE_INTERNAL_ERROR)
    _tag(error, what)
    raise error from exc


_INSTALL_HINT = re.compile(r"install (nnadapter-bridge\[[A-Za-z0-9_,-]+\])")


def _install_hint(exc: BaseException) -> str:
    """'install nnadapter-bridge[x]' when a driver failed to import because its SDK is missing and said so."""
    if isinstance(exc, ImportError):
        found = _INSTALL_HINT.search(str(exc))
        if found:
            return f"install {found.group(1)}"
    return ""


# -- devices -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class DeviceInfo:
    """What `nnadapter-bridge devices` shows for one name."""

    name: str
    vendor: str = ""
    type: str = ""
    version: Optional[int] = None
    loaded: bool = False
    error: str = ""
    source: str = ""  # "entry point <value>", "built in" or "registered"
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

    _instance: Optional["DeviceManager"] = None
    _instance_lock = threading.Lock()

    def __init__(self):
        self._lock = threading.RLock()
        self._drivers: dict = {}       # name -> driver object
        self._sources: dict = {}       # name -> where it came from
        self._failures: dict = {}      # name -> why its entry point failed to load
        self._unavailable: dict = {}   # name -> what to install (its entry point failed: SDK missing)
        self._handles: dict = {}       # name -> open device handle
        self._entry_points: Optional[dict] = None

    @classmethod
    def instance(cls) -> "DeviceManager":
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    # -- discovery ----------------------------------------------------------------------------------
    def _entry_point_map(self) -> dict:
        if self._entry_points is None:
            try:
                found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
            except Exception as exc:  # broken metadata must not hide builtin_device
                warnings.warn(f"cannot read the '{ENTRY_POINT_GROUP}' entry points: {exc}", RuntimeWarning)
                found = []
            self._entry_points = {}
            for ep in sorted(found, key=lambda e: (e.name, e.value)):
                self._entry_points.setdefault(ep.name, ep)
        return self._entry_points

    def _load(self, name: str) -> Optional[Any]:
        """The driver called `name`, loading its entry point on first use; None if unavailable."""
        if name in self._drivers:
            return self._drivers[name]
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
        if name == BUILTIN_DEVICE_NAME:
            driver = importlib.import_module(BUILTIN_DEVICE_MODULE).DRIVER
            self._drivers[name] = driver
            self._sources[name] = "built in"
            return driver
        return None

    def register(self, driver: Any, name: Optional[str] = None, *, replace: bool = False) -> None:
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
            return sorted(set(self._drivers) | set(self._entry_point_map()) | {BUILTIN_DEVICE_NAME})

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

    def property_keys(self, name: str) -> Optional[frozenset]:
        """The context-property keys the driver `name` reads (its optional `property_keys`), None when it
        does not declare them or does not load."""
        with self._lock:
            try:
                driver = self._load(name)
            except Exception:  # builtin_device's module failing to import: nothing to declare
                return None
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
                self._handles[name] = _call_driver(f"{name}.open_device", driver.open_device)
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
    from nnadapter_bridge.nnadapter.properties import parse_properties, unknown_keys

    keys = list(parse_properties(properties))
    if not keys:
        return []
    manager = DeviceManager.instance()
    declared = {name: manager.property_keys(name) for name in device_names}
    for name in manager.names():
        if name not in declared and any(k.upper().startswith(name.upper() + "_") for k in keys):
            declared[name] = manager.property_keys(name)
    return unknown_keys(keys, declared)


# -- contexts ----------------------------------------------------------------------------------------
class Context:
    """NNAdapterContext: one driver context per device, in the given order, same properties for all.

    `strict` (set by the predictor in strict mode): a device whose validate_program raises is an error
    instead of a warning and a "none" answer (module docstring)."""

    def __init__(self, devices: Sequence[Device], properties: str = "", callback: Optional[Callable] = None,
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
                self.device_contexts.append(_call_driver(
                    f"{device.name}.create_context", device.driver.create_context,
                    device.handle, self.properties, callback))
        except BaseException:
            self.destroy()
            raise

    @property
    def device_names(self) -> list:
        return [d.name for d in self.devices]

    def subset(self, names: Sequence[str]) -> "Context":
        """A new context over those of this context's devices named in `names` (same order, properties,
        callback and strictness): where a part runs when a device of this one fails."""
        devices = [d for d in self.devices if d.name in set(names)]
        return Context(devices, self.properties, self.callback, strict=self.strict)

    def device_context(self, name: str):
        """(Device, driver context) for `name`, or None when the context lacks it."""
        for device, device_context in zip(self.devices, self.device_contexts):
            if device.name == name:
                return device, device_context
        return None

    def validate(self, model: Model, device_index: int) -> Optional[list]:
        """One device's per-operation flags, or None when the device cannot tell."""
        device = self.devices[device_index]
        validate = getattr(device.driver, "validate_program", None)
        if validate is None:
            return None
        try:
            flags = _call_driver(f"{device.name}.validate_program", validate,
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

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()


# -- compilations ------------------------------------------------------------------------------------
class CacheMissError(NNAdapterError):
    """A model-less Compilation found no usable cache; build the model and compile it instead."""

    def __init__(self, message: str):
        super().__init__(message, ResultCode.INVALID_PARAMETER)


@dataclasses.dataclass
class Program:
    """One device program of a compilation and how its I/O maps to the model's and shared buffers."""

    device: Device
    device_context: Any
    cache: Any  # driver_protocol.Cache
    input_indexes: list
    output_indexes: list
    input_types: list
    output_types: list
    handle: Any = None
    # Every execution of the handle holds this lock; a program sharing its handle with another compilation's
    # (Compilation.clone of a driver without clone_program) shares the lock too, and only the compilation that
    # created the handle destroys it.
    lock: Any = dataclasses.field(default_factory=threading.Lock)
    owns_handle: bool = True


class Compilation:
    """NNAdapterCompilation (module docstring). Beyond Lite's arguments, for the model cache (docs/cache.md):
    `fingerprint` names the model (written into the .nnc and required to match on restore), `cache_key` is
    the integrity key (str/bytes; None reads NNADAPTER_BRIDGE_CACHE_KEY), and `accept_unidentified_cache`
    accepts a record without identity entries (Paddle Lite's own files). `named_later`: a model compilation
    with a cache dir whose token and fingerprint come from set_cache_identity, after finish() and before the
    first compute (its drivers are asked for program bytes as if it had a token)."""

    def __init__(self, model: Optional[Model], cache_token: str = "", cache_buffer=None, cache_dir: str = "",
                 context: Optional[Context] = None, *, fingerprint: str = "", cache_key=None,
                 accept_unidentified_cache: bool = False, named_later: bool = False):
        if context is None:
            raise NNAdapterError("a compilation needs a context", ResultCode.INVALID_PARAMETER)
        self.model = model
        self.cache_token = cache_token or ""
        self.cache_dir = cache_dir or ""
        self.context = context
        self.fingerprint = fingerprint or ""
        self._cache_key = resolve_cache_key(cache_key)
        self.programs: list = []
        self.input_types: list = []
        self.output_types: list = []
        self.finished = False
        self.restored_from_cache = False
        self.cache_path: Optional[str] = None  # the .nnc written after the first compute, if any
        self._first_compute_done = False
        self._pending_write: Optional[PendingCacheWrite] = None  # the .nnc its own thread is writing
        # Read (and checked: a bad value is the caller's error) before anything compiles. A model compilation may
        # be given its token later (set_cache_identity), so the dir alone decides.
        self._write_mode = cache_write_mode() if model is not None and self.cache_dir else ""
        self._named_later = bool(named_later and model is not None and self.cache_dir and not self.cache_token)
        self._compiled_from_model = False  # finish() compiled `model` (then dropped): the .nnc is written once
        self._direct = None  # execute_arrays' program, found on first use (False: none)
        self._direct_run = None  # its driver's optional run_arrays hook (set with _direct)
        self._record: Optional[CompilationRecord] = None
        self._miss_reason = ""
        if self.cache_dir:
            clean_stale_temp_files(self.cache_dir)  # once per dir and process
        if model is None:
            known = context.device_names
            # Every check (CRC, HMAC with a key, identity, record) runs here, before finish() hands a byte to a driver.
            expect = CacheIdentity(self.cache_token, self.fingerprint, accept_unidentified_cache)
            if cache_buffer is not None and len(cache_buffer):
                self._record = load_compilation_record(bytes(cache_buffer), f"buffer for token '{self.cache_token}'",
                                                       known, expect=expect, key=self._cache_key)
                self._miss_reason = "the cache buffer is unusable"
            elif self.cache_token and self.cache_dir:
                path = cache_file_path(self.cache_dir, self.cache_token)
                self._record = read_nnc_file(path, known, expect=expect, key=self._cache_key)
                self._miss_reason = f"no usable cache file {path}"
            else:
                raise NNAdapterError("a compilation needs a model, a cache buffer, or a cache token and dir",
                                     ResultCode.INVALID_PARAMETER)

    # -- finish ------------------------------------------------------------------------------------
    def finish(self) -> None:
        if self.finished:
            raise NNAdapterError("the compilation is already finished", ResultCode.INVALID_PARAMETER)
        if self.model is None:
            self._finish_from_cache()
        else:
            self._finish_from_model()
        self.finished = True

    def _finish_from_cache(self) -> None:
        record = self._record
        if record is None:
            STATS.cache_misses += 1
            raise CacheMissError(f"cache token '{self.cache_token}': {self._miss_reason}")
        for i, program in enumerate(record.programs):
            device, device_context = self.context.device_context(program.device_name)
            cache = Cache(self.cache_token, self.cache_dir, [t.copy() for t in program.input_types],
                          [t.copy() for t in program.output_types],
                          program.model_buffer,  # a read-only view into the .nnc data: not copied
                          mapped_buffer=program.mapped)  # the same bytes, keepable, when the file was mapped
            try:
                handle = _call_driver(f"{device.name}.create_program", device.driver.create_program,
                                      device_context, None, cache)
            except NNAdapterError as exc:
                self._destroy_programs()
                STATS.cache_misses += 1
                warnings.warn(f"model cache for token '{self.cache_token}' is unusable (device "
                              f"'{device.name}' rejected program {i}: {exc}); compiling the model instead",
                              NncCacheWarning, stacklevel=3)
                raise CacheMissError(f"cache token '{self.cache_token}': program {i} was rejected by "
                                     f"'{device.name}'") from exc
            self.programs.append(Program(device, device_context, cache, list(program.input_indexes),
                                         list(program.output_indexes), cache.input_types, cache.output_types,
                                         handle))
        self.input_types = [t.copy() for t in record.input_types]
        self.output_types = [t.copy() for t in record.output_types]
        self.restored_from_cache = True
        self._record = None
        STATS.cache_restores += 1

    def _finish_from_model(self) -> None:
        from nnadapter_bridge.nnadapter.partitioning import Submodel, partition_model  # compiles only

        model = self.model
        if len(self.context.devices) == 1:
            submodels = [Submodel(0, model, [-k - 1 for k in range(len(model.input_operands))],
                                  [-k - 1 for k in range(len(model.output_operands))])]
        else:
            supported = []
            for k, device in enumerate(self.context.devices):
                flags = self.context.validate(model, k)
                if flags is None:
                    raise NNAdapterError(f"device '{device.name}' cannot tell which operations it supports, so "
                                         "the model cannot be split across devices",
                                         ResultCode.FEATURE_NOT_SUPPORTED)
                supported.append(flags)
            submodels = partition_model(model, supported, self.context.device_names)
        try:
            for sub in submodels:
                device = self.context.devices[sub.device_index]
                device_context = self.context.device_contexts[sub.device_index]
                cache = Cache(PENDING_CACHE_TOKEN if self._named_later else self.cache_token, self.cache_dir,
                              [o.type.copy() for o in sub.model.input_operands],
                              [o.type.copy() for o in sub.model.output_operands], bytearray())
                handle = _call_driver(f"{device.name}.create_program", device.driver.create_program,
                                      device_context, sub.model, cache)
                self.programs.append(Program(device, device_context, cache, sub.input_indexes, sub.output_indexes,
                                             cache.input_types, cache.output_types, handle))
        except BaseException:
            self._destroy_programs()
            raise
        self.input_types = [o.type.copy() for o in model.input_operands]
        self.output_types = [o.type.copy() for o in model.output_operands]
        # The devices hold what they compiled: the model (its constants: folded weights, converted copies)
        # is not needed any more and is not kept (one copy of the weights in the process).
        self.model = None
        self._compiled_from_model = True
        STATS.compiles += 1

    def set_cache_identity(self, cache_token: str, fingerprint: str = "") -> None:
        """Name a compilation made from a model after the fact, before its first compute (the .nnc is written
        after that, under this token and fingerprint): the engine compiles while the weights are still being
        hashed for the token, when no cache could have held the program anyway."""
        if not self._named_later or self._first_compute_done:
            raise NNAdapterError("set_cache_identity is for a compilation made with named_later=True, before its "
                                 "first compute", ResultCode.INVALID_PARAMETER)
        self.cache_token = cache_token or ""
        self.fingerprint = fingerprint or ""
        self._named_later = False
        for program in self.programs:
            program.cache.token = self.cache_token

    # -- running ---------------------------------------------------------------------------------
    def execute_arrays(self, arrays: Sequence[np.ndarray]) -> list:
        """Execution(self).run(arrays): set every input from `arrays`, compute, return the outputs as new
        arrays. A compilation of one device program reading and writing the model's own inputs and outputs
        in order (the usual case) is run straight through its driver, without the per-run bookkeeping of an
        Execution; anything else goes through one."""
        program = self._direct_program()
        if program is None or len(arrays) != len(self.input_types):
            return Execution(self).run(arrays)
        run_arrays = self._direct_run
        if run_arrays is not None:  # the driver's own array path (driver_protocol: run_arrays)
            try:
                with program.lock:
                    results = run_arrays(program.handle, arrays)
            except BaseException as exc:
                _raise_from_driver(exc, f"{program.device.name}.run_arrays (program 0)")
            if len(results) != len(self.output_types):
                raise NNAdapterError(f"{program.device.name}.run_arrays gave {len(results)} outputs, the program "
                                     f"has {len(self.output_types)}", ResultCode.DEVICE_INTERNAL_ERROR)
            if not self._first_compute_done:
                self._after_first_compute()
            return results
        holders = [HostBuffer() for _ in self.output_types]
        inputs = [Argument(k, array, array_input_access) for k, array in enumerate(arrays)]
        outputs = [Argument(k, holder, host_buffer_output_access) for k, holder in enumerate(holders)]
        try:
            with program.lock:  # one execution of a driver program at a time (Program.lock)
                result = program.device.driver.execute_program(program.handle, inputs, outputs)
            if result is not None and int(result) != ResultCode.NO_ERROR:
                raise_for_result(result, f"{program.device.name}.execute_program (program 0)")
        except BaseException as exc:
            _raise_from_driver(exc, f"{program.device.name}.execute_program (program 0)")
        for index, holder in enumerate(holders):
            if holder.array is None:
                raise NNAdapterError(f"output {index} was not written by any program", ResultCode.DEVICE_INTERNAL_ERROR)
        if not self._first_compute_done:
            self._after_first_compute()
        return [holder.array for holder in holders]

    def _direct_program(self) -> Optional["Program"]:
        """The program execute_arrays runs directly, or None (several programs, or other I/O wiring)."""
        direct = self._direct
        if direct is None:
            direct = False
            self._direct_run = None
            if self.finished and len(self.programs) == 1:
                program = self.programs[0]
                if (program.input_indexes == [-k - 1 for k in range(len(self.input_types))]
                        and program.output_indexes == [-k - 1 for k in range(len(self.output_types))]):
                    direct = program
                    self._direct_run = _run_arrays_hook(program.device.driver)
            self._direct = direct
        return direct or None

    # -- queries -----------------------------------------------------------------------------------
    def query_inputs_and_outputs(self) -> tuple:
        """NNAdapterCompilation_queryInputsAndOutputs: copies of the model's input and output types."""
        if not self.finished:
            raise NNAdapterError("query_inputs_and_outputs before finish()", ResultCode.INVALID_PARAMETER)
        return [t.copy() for t in self.input_types], [t.copy() for t in self.output_types]

    @property
    def device_names(self) -> list:
        return [p.device.name for p in self.programs]

    # -- threads -----------------------------------------------------------------------------------
    def clone(self) -> "Compilation":
        """A finished compilation sharing this one's compiled programs, with its own execution state, for a
        predictor clone run by another thread. Each program is copied by the driver's optional
        `clone_program(program)` hook (the compiled model shared, new infer request and scratch buffers); a
        driver without the hook (or answering FEATURE_NOT_SUPPORTED) has its program shared, and executions
        of that program are then serialised by a lock. The clone never writes the model cache, and must be
        destroyed before this compilation."""
        if not self.finished:
            raise NNAdapterError("clone() before finish()", ResultCode.INVALID_PARAMETER)
        twin = copy.copy(self)
        twin.programs = []
        twin._direct = None
        twin._record = None
        twin._pending_write = None  # the original's write: its destroy() waits for it
        twin._first_compute_done = True  # the original writes the cache, once
        twin.input_types = [t.copy() for t in self.input_types]
        twin.output_types = [t.copy() for t in self.output_types]
        try:
            for program in self.programs:
                twin.programs.append(self._clone_program(program))
        except BaseException:
            twin._destroy_programs()
            raise
        return twin

    @staticmethod
    def _clone_program(program: "Program") -> "Program":
        hook = getattr(program.device.driver, "clone_program", None)
        handle = None
        if callable(hook) and program.owns_handle:
            try:
                handle = _call_driver(f"{program.device.name}.clone_program", hook, program.handle)
            except NNAdapterError as exc:
                if exc.code != ResultCode.FEATURE_NOT_SUPPORTED:
                    raise
        cache = Cache(program.cache.token, program.cache.dir, program.cache.input_types, program.cache.output_types,
                      bytearray())
        if handle is not None:
            return dataclasses.replace(program, cache=cache, handle=handle, lock=threading.Lock(), owns_handle=True)
        return dataclasses.replace(program, cache=cache, owns_handle=False)  # the same handle, the same lock

    # -- cache writing -----------------------------------------------------------------------------
    def _after_first_compute(self) -> None:
        if self._first_compute_done:
            return
        self._first_compute_done = True
        job = None
        try:
            if self._compiled_from_model and self.cache_token and self.cache_dir and not self._named_later:
                job = self._cache_write_job()
        finally:
            for program in self.programs:  # the program bytes are not needed any more (the job holds its own)
                program.cache.buffer = bytearray()
                program.cache.mapped_buffer = None  # a driver that kept it holds its own reference
                program.cache.exporter = None
        if job is not None:
            if self._write_mode == "foreground":
                job()
            else:
                self._pending_write = PendingCacheWrite(cache_file_path(self.cache_dir, self.cache_token), job)

    def wait_for_cache_write(self, timeout: Optional[float] = None) -> bool:
        """Block until this compilation's .nnc is written (or its write failed); True when nothing is pending."""
        pending = self._pending_write
        if pending is None:
            return True
        if not pending.wait(timeout):
            return False
        self._pending_write = None
        return True

    def _cache_write_job(self) -> Optional[Callable[[], None]]:
        """What writes this compilation's .nnc (PendingCacheWrite runs it), holding its own references to the
        program bytes or exporters; None (with a warning) when a device keeps no program bytes."""
        lacking = [p.device.name for p in self.programs if not p.cache.buffer and p.cache.exporter is None]
        if lacking:
            warnings.warn(f"device(s) {', '.join(lacking)} do not support the model cache; "
                          f"no .nnc written for token '{self.cache_token}'", NncCacheWarning, stacklevel=5)
            return None
        programs = [(p.device.name, p.cache.buffer if p.cache.buffer else None, p.cache.exporter,
                     ProgramRecord(p.device.name, p.input_types, p.input_indexes, p.output_types, p.output_indexes,
                                   b"")) for p in self.programs]
        input_types, output_types = self.input_types, self.output_types
        path = cache_file_path(self.cache_dir, self.cache_token)
        identity = CacheIdentity(self.cache_token, self.fingerprint)
        key = self._cache_key

        def write() -> None:
            records = []
            for device_name, buffer, exporter, record in programs:
                if buffer is None:  # exported now, after the compile's own memory is gone (driver_protocol.Cache)
                    try:
                        buffer = _call_driver(f"{device_name}.export", exporter)
                    except NNAdapterError as exc:
                        warnings.warn(f"device '{device_name}' cannot export its program ({exc}); no .nnc written "
                                      f"for token '{identity.token}'", NncCacheWarning, stacklevel=2)
                        return
                    if buffer is None or not len(buffer):
                        warnings.warn(f"device '{device_name}' exported no program bytes; no .nnc written for "
                                      f"token '{identity.token}'", NncCacheWarning, stacklevel=2)
                        return
                records.append(dataclasses.replace(record, model_buffer=buffer))
            try:
                write_file_atomically(path, pack_compilation_record_parts(
                    CompilationRecord(input_types, output_types, records), identity, key))
            except OSError as exc:
                warnings.warn(f"cannot write the model cache {path}: {exc}", NncCacheWarning, stacklevel=2)
                return
            self.cache_path = path
            with _STATS_LOCK:
                STATS.cache_writes += 1

        return write

    # -- teardown ----------------------------------------------------------------------------------
    def _destroy_programs(self) -> None:
        self.wait_for_cache_write()  # its exporter reads the programs destroyed here
        self._direct = None
        programs, self.programs = self.programs, []
        for program in programs:
            if program.handle is not None and program.owns_handle:
                program.device.driver.destroy_program(program.handle)

    def destroy(self) -> None:
        self._destroy_programs()
        self.finished = False

    def __enter__(self) -> "Compilation":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()


# -- access functions for host arrays ----------------------------------------------------------------
def _run_arrays_hook(driver) -> Optional[Callable]:
    """The driver's optional `run_arrays` (driver_protocol), or None when a subclass overrides
    execute_program below the class defining it (a wrapper or a test double then sees every run)."""
    if getattr(driver, "run_arrays", None) is None:
        return None
    mro = type(driver).__mro__
    run_owner = next((c for c in mro if "run_arrays" in vars(c)), None)
    execute_owner = next((c for c in mro if "execute_program" in vars(c)), None)
    if run_owner is None or execute_owner is None or not issubclass(run_owner, execute_owner):
        return None
    return driver.run_arrays


class HostBuffer:
    """An output holder: the runtime allocates `array` at the dims the device reports."""

    def __init__(self):
        self.array: Optional[np.ndarray] = None
        self.type: Optional[OperandType] = None


def array_input_access(memory, operand_type: OperandType) -> np.ndarray:
    """Input access for a numpy array: report its dims, hand it over."""
    # np.asarray(order="C"), not np.ascontiguousarray: the latter turns a 0-d array into shape [1], and a
    # program compiled for a 0-d input would then refuse it.
    array = np.asarray(memory, order="C")
    operand_type.dims = array.shape  # a tuple of Python ints already
    return array


def host_buffer_output_access(memory: HostBuffer, operand_type: OperandType) -> np.ndarray:
    """Output access for a HostBuffer: allocate exactly what the device reports."""
    memory.type = operand_type.copy()
    memory.array = np.empty(operand_type.dims, dtype=operand_type.dtype)
    return memory.array


def _host_buffer_adopt(memory: HostBuffer, operand_type: OperandType, array: np.ndarray) -> None:
    """host_buffer_output_access's `adopt` (driver_protocol.AccessFunction): take a driver's fresh array."""
    memory.type = operand_type.copy()
    memory.array = array


host_buffer_output_access.adopt = _host_buffer_adopt


def host_buffer_input_access(memory: HostBuffer, operand_type: OperandType) -> np.ndarray:
    operand_type.dims = tuple(memory.array.shape)
    return memory.array


def array_output_access(memory: np.ndarray, operand_type: OperandType) -> np.ndarray:
    """Output access for a preallocated array: it must already have the reported dims and dtype."""
    if tuple(memory.shape) != tuple(operand_type.dims) or memory.dtype != operand_type.dtype:
        raise NNAdapterError(f"output buffer is {memory.dtype}{list(memory.shape)}, the device produces "
                             f"{operand_type.dtype}{list(operand_type.dims)}", ResultCode.INVALID_PARAMETER)
    return memory


@dataclasses.dataclass
class _Binding:
    memory: Any
    access: Callable


class Execution:
    """NNAdapterExecution: bind inputs/outputs by index, then compute."""

    def __init__(self, compilation: Compilation):
        if not compilation.finished:
            raise NNAdapterError("an execution needs a finished compilation", ResultCode.INVALID_PARAMETER)
        self.compilation = compilation
        self._inputs: dict = {}
        self._outputs: dict = {}
        self._watch_outputs = False  # a HostBuffer output is bound: compute() checks some program wrote it

    def _check_index(self, index: int, count: int, side: str) -> None:
        if not 0 <= index < count:
            raise NNAdapterError(f"{side} index {index} is out of range (the model has {count} {side}s)",
                                 ResultCode.INVALID_PARAMETER)

    def set_input(self, index: int, memory, access: Optional[Callable] = None) -> None:
        self._check_index(index, len(self.compilation.input_types), "input")
        self._inputs[index] = _Binding(memory, access or array_input_access)

    def set_output(self, index: int, memory, access: Optional[Callable] = None) -> None:
        self._check_index(index, len(self.compilation.output_types), "output")
        if isinstance(memory, HostBuffer):
            self._watch_outputs = True
        if access is None:
            if isinstance(memory, HostBuffer):
                access = host_buffer_output_access
            elif isinstance(memory, np.ndarray):
                access = array_output_access
            else:
                raise NNAdapterError("set_output without an access function needs a HostBuffer or an ndarray",
                                     ResultCode.INVALID_PARAMETER)
        self._outputs[index] = _Binding(memory, access)

    def compute(self) -> None:
        shared: dict = {}
        for number, program in enumerate(self.compilation.programs):
            inputs = []
            for k, index in enumerate(program.input_indexes):
                if index < 0:
                    binding = self._inputs.get(-index - 1)
                    if binding is None:
                        raise NNAdapterError(f"input {-index - 1} was not set", ResultCode.INVALID_PARAMETER)
                    inputs.append(Argument(k, binding.memory, binding.access))
                else:
                    if index not in shared:
                        raise NNAdapterError(f"program {number} reads shared buffer {index} before any program "
                                             "wrote it", ResultCode.DEVICE_INTERNAL_ERROR)
                    inputs.append(Argument(k, shared[index], host_buffer_input_access))
            outputs = []
            for k, index in enumerate(program.output_indexes):
                if index < 0:
                    binding = self._outputs.get(-index - 1)
                    if binding is None:
                        raise NNAdapterError(f"output {-index - 1} was not set", ResultCode.INVALID_PARAMETER)
                    outputs.append(Argument(k, binding.memory, binding.access))
                else:
                    shared[index] = HostBuffer()
                    outputs.append(Argument(k, shared[index], host_buffer_output_access))
            try:
                with program.lock:  # one execution of a driver program at a time (Program.lock)
                    result = program.device.driver.execute_program(program.handle, inputs, outputs)
                if result is not None and int(result) != ResultCode.NO_ERROR:
                    raise_for_result(result, f"{program.device.name}.execute_program (program {number})")
            except BaseException as exc:  # as _call_driver does, with the label formatted only on failure
                _raise_from_driver(exc, f"{program.device.name}.execute_program (program {number})")
        if self._watch_outputs:
            for index, binding in self._outputs.items():
                if isinstance(binding.memory, HostBuffer) and binding.memory.array is None:
                    raise NNAdapterError(f"output {index} was not written by any program",
                                         ResultCode.DEVICE_INTERNAL_ERROR)
        if not self.compilation._first_compute_done:
            self.compilation._after_first_compute()

    def run(self, arrays: Sequence[np.ndarray]) -> list:
        """Set every input from `arrays`, compute, return the outputs as new arrays."""
        if len(arrays) != len(self.compilation.input_types):
            raise NNAdapterError(f"the model has {len(self.compilation.input_types)} inputs, got {len(arrays)} "
                                 "arrays", ResultCode.INVALID_PARAMETER)
        for k, array in enumerate(arrays):
            self.set_input(k, array)
        holders = [HostBuffer() for _ in self.compilation.output_types]
        for k, holder in enumerate(holders):
            self.set_output(k, holder)
        self.compute()
        return [holder.array for holder in holders]
