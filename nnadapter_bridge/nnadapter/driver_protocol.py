"""The HAL driver protocol: NNAdapter's `driver::Device` struct in Python (NNAdapter's driver.h).

It lives in the standard (the ground) because both sides use it: the runtime calls drivers through it, and
drivers (`hal.*`, the roof of this protocol) implement it; `hal.protocol` hands the same names on to drivers.

A driver is any object with the attributes and methods of `Driver`; subclassing it is optional but
gives the documented defaults. Drivers see only NNAdapter Models (nnadapter_bridge.nnadapter), never
Paddle. They report failures by raising NNAdapterError (or a subclass) with a result code; a driver
that prefers C style may instead return a non-zero ResultCode from `execute_program`, and the runtime
raises it for the driver. INVALID_DIMENSIONS from `execute_program` means "recompile for these shapes".

Drivers are found by name through the entry-point group `nnadapter_bridge.devices`; the entry point's
name must equal the driver's `name`.

Optional parts (the runtime looks them up with getattr): `property_keys`, the context-property keys the driver reads (a
key no device declares gets a warning naming the nearest known one; the one key ending in `_NUM_THREADS`, if any, is the
driver's thread count, which Config.set_threads fills); `unavailable_reason()`, what to install when the driver's SDK is
missing (`nnadapter-bridge devices` shows it); `clone_program(program)`, a program sharing the compiled parts of
`program` with its own execution state, so that predictor clones run it from several threads at once;
`run_arrays(program, arrays)`, the outputs of one run as new arrays the caller owns (shared with nothing the driver
keeps or writes later, nor with `arrays`: the predictor hands them to the user as `Tensor.numpy()` without a copy or a
look at the inputs), for `arrays` in model input order (the runtime calls it instead of `execute_program` for a
compilation of one program wired to the model's own inputs and outputs: the per-run Python path of small models; it must
check and refuse exactly what `execute_program` does); `prepare_run(program)`, a callable(arrays) -> outputs that runs
`program` as `run_arrays(program, arrays)` does (the same checks, errors and fresh outputs) with what it can work out
once worked out already, or None: the runtime asks for it after a program's first runs and calls it for every later run
on arrays (it must refuse a destroyed program as run_arrays does); `unsupported_reasons(context, model)`, per operation
the reason the driver declines it ("" when it runs it, so it agrees with `validate_program`), which the support
decisions and the engine show the user; `sdk_version()`, the version of the SDK the driver runs (keys the calibration,
with the CPU model and thread count); `capabilities()`, NNAPI's getCapabilities: a `Capabilities` of performance figures
relative to the CPU reference, or None to have them measured by the calibration (nnadapter_bridge.subgraph.calibration;
a driver reporting nothing is taken as the CPU); `preference_properties(preference, relax_float32)`, the context
properties that express NNAPI's execution preference (EXECUTION_PREFERENCES) and, with `relax_float32`, NNAPI's
relaxComputationFloat32toFloat16 on this device ({} for what it has no setting for;
Config.set_nnadapter_execution_preference and set_nnadapter_relax_float32_to_float16 add them to the context properties
the user did not set); `cache_environment()`, what of the machine shapes the driver's programs (a short text the cache
token includes, "" for nothing: the SDK drivers say whether they take the SDKs' int8 kernels, which depends on the CPU).
Which errors are the device's fault and which the caller's: `runtime.is_device_fault`.

Entry points: `Driver`, `Argument`, `Cache`, `Capabilities`, `PerformanceInfo`, `check_driver`,
`ENTRY_POINT_GROUP`, `operation_fault`, `fault_operand`, `fault_output_name`, `parse_fault_output_name`. Imports
the standard's model, types and codes only; never the runtime (which imports it) nor `hal`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, unquote

import numpy as np

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import DeviceType, OperationType, ResultCode
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.types import OperandType

ENTRY_POINT_GROUP = "nnadapter_bridge.devices"

# access(memory, operand_type) -> ndarray.
#   input:  the callee writes the array's real dims into operand_type and returns the array;
#   output: the driver has written the real output dims (and precision) into operand_type; the callee
#           returns a writable array of exactly those dims and dtype, which the driver fills.
#           An output access function may also have an `adopt(memory, operand_type, array)` attribute: a
#           driver holding a fresh C-contiguous array of exactly that type, which neither it nor its SDK will
#           touch again (onnxruntime's run() results), may hand it over with it instead of filling a copy.
AccessFunction = Callable[[Any, OperandType], np.ndarray]
# callback(event_id, user_data) -> int, passed through to the driver unchanged (NNAdapterContext_create).
ContextCallback = Callable[..., int] | None


@dataclasses.dataclass
class Argument:
    """One model input or output of an execution: position `index`, opaque `memory`, its `access`."""

    index: int
    memory: Any
    access: AccessFunction


@plain_dataclass
class Cache:
    """core::Cache: what a driver needs to restore a program or to store one.

    A non-empty `buffer` given to `create_program(ctx, None, cache)` means "restore from it"; it is then
    a read-only bytes-like object (a memoryview into the .nnc data, not a copy), which the driver reads
    and must not modify or keep. When a driver compiles a model and both `token` and `dir` are set,
    `buffer` is an empty bytearray that it fills with its program bytes (an empty buffer afterwards means
    "this device cannot cache"); the runtime wraps them into the .nnc file. The driver may also replace
    `buffer` with another bytes-like object holding its program bytes (a view of the SDK's own export, say),
    which saves a copy; the runtime only reads it. Or, leaving `buffer` empty, it may set `exporter` to a
    function returning those bytes: the runtime calls it once, when it writes the .nnc after the first
    successful run, and drops the bytes right after writing them (so the export does not coincide with the
    memory the compile itself needed); an exporter that raises means "no .nnc" (with a warning).

    `mapped_buffer`: when the runtime restores from a .nnc it memory-mapped (a large cache file only this
    user can change, nnc.map_cache_file), a writable numpy uint8 array over the same program bytes as
    `buffer`, copy-on-write (writes never reach the file). Unlike `buffer`, a driver MAY keep it for its
    program's lifetime and hand the SDK that memory instead of a copy (the map stays alive while the array
    does); None otherwise."""

    token: str = ""
    dir: str = ""
    input_types: list[OperandType] = dataclasses.field(default_factory=list)
    output_types: list[OperandType] = dataclasses.field(default_factory=list)
    buffer: Any = dataclasses.field(default_factory=bytearray)  # bytearray, or read-only bytes-like
    mapped_buffer: Any = None  # numpy uint8 array over a private map of the .nnc (see above), or None
    exporter: Any = None  # () -> program bytes, called when the .nnc is written (see above), or None

    @property
    def wants_program_bytes(self) -> bool:
        return bool(self.token) and bool(self.dir)


@plain_dataclass(frozen=True)
class PerformanceInfo:
    """NNAPI's PerformanceInfo: execution time and power of a device relative to the CPU reference (builtin_device,
    1.0), lower is better. `power` None: not known (this project has no power meter; it is never invented)."""

    exec_time: float
    power: float | None = None


# The operand precisions a device reports figures for (NNAPI's operandPerformance, per precision class).
PRECISION_CLASSES = ("float32", "relaxed_float16", "int8")
# NNAPI's ExecutionPreference (PREFER_LOW_POWER, PREFER_FAST_SINGLE_ANSWER, PREFER_SUSTAINED_SPEED).
EXECUTION_PREFERENCES = ("low_power", "fast_single_answer", "sustained_speed")
# The operation families a device may report apart (NNAPI reports per operand type; these are what differs most
# between this project's CPU runtimes: dense convolution, depthwise + pointwise, matrix products).
OPERATION_FAMILIES = ("conv", "depthwise", "matmul")


@plain_dataclass(frozen=True)
class Capabilities:
    """A device's performance figures (NNAPI's Capabilities): per precision class (PRECISION_CLASSES) and per
    operation family (OPERATION_FAMILIES, float32), relative to the CPU reference; a class or family missing is
    not known. `source`: "driver" (reported by the driver) or "calibration" (measured on this machine)."""

    precisions: dict = dataclasses.field(default_factory=dict)  # precision class -> PerformanceInfo
    families: dict = dataclasses.field(default_factory=dict)  # operation family -> PerformanceInfo
    source: str = "driver"

    def exec_time(self, precision: str = "float32", family: str | None = None) -> float:
        """The relative execution time to plan with: the family's figure, else the precision's, else 1.0 (a device
        that reports nothing is taken as the CPU reference)."""
        if family is not None and precision == "float32" and family in self.families:
            return float(self.families[family].exec_time)
        info = self.precisions.get(precision) or self.precisions.get("float32")
        return float(info.exec_time) if info is not None else 1.0


class Driver:
    """Base class of HAL drivers; override every method except `validate_program` (optional)."""

    name: str = ""
    vendor: str = ""
    type: DeviceType = DeviceType.CPU
    version: int = 1
    property_keys: Sequence[str] | None = None  # the context-property keys it reads; None: not declared

    def unavailable_reason(self) -> str:
        """What to install when this driver cannot work in this installation (its SDK is missing), such as
        'install nnadapter-bridge[openvino]'; '' when nothing is missing."""
        return ""

    def sdk_version(self) -> str:
        """The version of the SDK this driver runs ('' when it has none or cannot tell)."""
        return ""

    def capabilities(self) -> Capabilities | None:
        """Performance figures the driver knows for this machine, or None (the default): the calibration
        measures them (module docstring)."""
        return None

    def preference_properties(self, preference: str, relax_float32: bool) -> dict:
        """{key: value} of this driver's context properties expressing `preference` (EXECUTION_PREFERENCES, or ''
        for none) and, with `relax_float32`, float32 computed in a relaxed precision (float16, or bfloat16 where the
        device computes that instead); {} when it has no setting for them (the default)."""
        return {}

    def operation_types(self) -> list[OperationType]:
        """The NNAdapter operations this driver implements at all (validate_program may still refuse some
        attribute combinations). `nnadapter-bridge ops` lists them; an empty list means "not declared"."""
        return []

    def open_device(self) -> Any:
        """Open the device once per process; the returned handle is passed back to create_context."""
        raise NotImplementedError

    def close_device(self, device: Any) -> None:
        raise NotImplementedError

    def create_context(self, device: Any, properties: str, callback: ContextCallback = None) -> Any:
        """A context for `device`; `properties` is the whole KEY=value; string (parse the keys you know)."""
        raise NotImplementedError

    def destroy_context(self, context: Any) -> None:
        raise NotImplementedError

    def validate_program(self, context: Any, model: Model) -> list[bool]:
        """One flag per operation of `model.operations` (list order): can this device run it?

        The default says "cannot tell" (FEATURE_NOT_SUPPORTED), as a NULL hook does in NNAdapter."""
        raise NNAdapterError(f"device '{self.name}' cannot tell which operations it supports",
                             ResultCode.FEATURE_NOT_SUPPORTED)

    def create_program(self, context: Any, model: Model | None, cache: Cache) -> Any:
        """Compile `model`, or restore from `cache.buffer` when `model` is None."""
        raise NotImplementedError

    def destroy_program(self, program: Any) -> None:
        raise NotImplementedError

    def execute_program(self, program: Any, inputs: Sequence[Argument], outputs: Sequence[Argument]) -> int | None:
        """Run once: read every input through its access, write every output through its access.

        The runtime never runs one program from two threads at once; programs of one context may run at once."""
        raise NotImplementedError

    def clone_program(self, program: Any) -> Any:
        """A program sharing `program`'s compiled (immutable) parts with its own execution state (requests,
        scratch buffers), destroyed separately. The default says "cannot" (FEATURE_NOT_SUPPORTED): the
        runtime then shares `program` itself and serialises its executions."""
        raise NNAdapterError(f"device '{self.name}' cannot clone programs", ResultCode.FEATURE_NOT_SUPPORTED)


REQUIRED_ATTRIBUTES = ("name", "vendor", "type", "version")
REQUIRED_METHODS = ("open_device", "close_device", "create_context", "destroy_context", "create_program",
                    "destroy_program", "execute_program")


def check_driver(driver: Any) -> None:
    """Raise TypeError naming what `driver` lacks to satisfy the protocol."""
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(driver, a)]
    missing += [m for m in REQUIRED_METHODS if not callable(getattr(driver, m, None))]
    if missing:
        raise TypeError(f"{driver!r} is not a HAL driver: missing {', '.join(missing)}")
    if not isinstance(driver.name, str) or not driver.name:
        raise TypeError(f"{driver!r} is not a HAL driver: 'name' must be a non-empty string")


# -- run-time faults traced to one operation ----------------------------------------------------------------------
def operation_fault(message: str, operand_name: str | None) -> NNAdapterError:
    """The device fault (FEATURE_NOT_SUPPORTED) of a run-time check that found data the device computes wrongly,
    naming the operation the check belongs to by `operand_name`, its first output operand's name (None or "": the
    check is the whole program's, e.g. an input beyond what the device holds)."""
    error = NNAdapterError(message, ResultCode.FEATURE_NOT_SUPPORTED)
    error.fault_operand = operand_name or None  # type: ignore[attr-defined]
    return error


def fault_operand(exc: BaseException) -> str | None:
    """The first output operand's name of the operation a run-time device fault belongs to (operation_fault)."""
    name = getattr(exc, "fault_operand", None)
    return name if isinstance(name, str) and name else None


def fault_output_name(prefix: str, position: int, message: str, operand_name: str | None) -> str:
    """The name of an SDK program's extra boolean output that carries a run-time check: the prefix and position,
    the operation's operand name (percent-quoted: it holds no ':' then) and the message. SDKs keep output names
    through their export, so a program restored from the cache still knows what each check says and whose it is."""
    tag = f"@{quote(operand_name, safe='')}" if operand_name else ""
    return f"{prefix}{position}{tag}:{message}"


def parse_fault_output_name(name: str, prefix: str) -> tuple[str, str | None]:
    """(message, operand name or None) of a check output's name made by fault_output_name (a name without an
    operand, as older cache files have, gives None)."""
    head, _, message = name.partition(":")
    _, at, operand = head[len(prefix):].partition("@")
    return message or "a run-time check failed", (unquote(operand) if at and operand else None)
