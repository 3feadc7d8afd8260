"""The calibration: each device's performance figures on this machine (NNAPI's Capabilities, measured), kept as data.

Owns the reference workload (`workload_models`: a conv chain, depthwise + pointwise blocks, a transformer block, an
int8 conv chain, each built in code as an NNAdapter Model, and a one-element ADD that times a run's fixed cost),
`measure_device` (compile each workload on one device, time it: the best of a few runs; the float workloads again
on the driver's relaxed float path when its `preference_properties` hook has one), the store
(`<cache_dir>/calibration.json`, orjson, entries keyed by device name, driver and SDK version, CPU model and thread
count; a corrupt or foreign file is a miss with one CalibrationWarning and is rewritten), and `figures_from_entry`,
which turns the measured seconds into figures relative to the CPU reference (builtin_device, the numpy reference
device): per precision class and per operation family, power "unknown" (this machine has no power meter; never
invented). A driver whose `capabilities()` hook reports figures is not measured; one that reports nothing and
cannot be measured is taken as the CPU (every figure 1.0).

Entry points: `calibrate(device_names, properties, cache_dir)` (the `calibrate` command, and the device selection
the first time it needs figures), `stored_figures` (`devices`: what the file holds, nothing measured),
`Calibration`, `DeviceFigures`. Imports the ground (the runtime, the model, the `.nnc` file helpers) only; never
the plan, the engine, the predictor or anything above. docs/device_selection.md tells the whole of it.
"""
from __future__ import annotations

import math
import os
import platform
import time
import warnings
from collections.abc import Iterable, Sequence

import numpy as np

from nnadapter_bridge.errors import BridgeError
from nnadapter_bridge.nnadapter.codes import AutoPad, FuseCode, OperationType, Precision
from nnadapter_bridge.nnadapter.driver_protocol import (
    OPERATION_FAMILIES,
    PRECISION_CLASSES,
    Capabilities,
    PerformanceInfo,
)
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import read_kept_json, write_file_atomically
from nnadapter_bridge.nnadapter.properties import parse_properties
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.text_digest import sha256_hex
from nnadapter_bridge.nnadapter.types import OperandType

CALIBRATION_FORMAT = "nnadapter-bridge-calibration-v1"
CALIBRATION_FILE = "calibration.json"
MAX_CALIBRATION_BYTES = 1 << 20
REFERENCE_DEVICE = "builtin_device"  # the CPU reference every figure is relative to (NNAPI: the CPU's float32)
# Timing: the best of at least MIN_RUNS runs, more while under MIN_SECONDS (a loaded machine makes runs slower,
# never faster: the minimum is the figure least disturbed by other processes), at most MAX_RUNS.
MIN_RUNS, MAX_RUNS, MIN_SECONDS = 5, 50, 0.1
# Workload name -> (precision class, operation family or None).
WORKLOADS = {"conv": ("float32", "conv"), "depthwise": ("float32", "depthwise"), "matmul": ("float32", "matmul"),
             "int8_conv": ("int8", None)}


class CalibrationWarning(UserWarning):
    """The calibration file cannot be used (corrupt, foreign, too large) or a device could not be measured."""


# -- the reference workload ------------------------------------------------------------------------------
def _conv(model: Model, x, weight: np.ndarray, group: int = 1, fuse: FuseCode = FuseCode.FUSED_RELU, *,
          bias=None, output_type: OperandType | None = None):
    """A 3x3 (or 1x1) stride-1 'same' CONV_2D of `x` with constant `weight` (and `bias`, float zeros by default)."""
    dims = weight.shape if isinstance(weight, np.ndarray) else weight.type.dims
    pad = (dims[2] - 1) // 2
    if bias is None:
        bias = model.add_constant(np.zeros(dims[0], np.float32))
    weight_operand = weight if not isinstance(weight, np.ndarray) else model.add_constant(weight)
    out = model.add_output(type=output_type)
    model.add_operation(OperationType.CONV_2D, [
        x, weight_operand, bias, model.add_constant(int(AutoPad.AUTO_PAD_NONE)),
        model.add_constant([pad, pad, pad, pad]), model.add_constant([1, 1]), model.add_constant(group),
        model.add_constant([1, 1]), model.add_constant(int(fuse))], [out])
    return out


def _finish(model: Model, inputs: list, outputs: list) -> Model:
    model.identify_inputs_and_outputs(inputs, outputs)
    model.finish()
    return model


def _float_input(model: Model, dims: tuple):
    return model.add_operand(OperandType(precision=Precision.FLOAT32, dims=dims), "x")


def workload_models() -> dict:
    """name -> (Model, input arrays, flops): the reference workload (module docstring), built afresh (a driver may
    keep or change what it was given). Seeded: every calibration runs the same numbers."""
    rng = np.random.default_rng(2026)

    def weights(*shape):
        return (rng.standard_normal(shape) * (1.0 / math.sqrt(math.prod(shape[1:])))).astype(np.float32)

    found = {}
    # A dense conv chain (ResNet's 3x3 blocks): 3 convs of 32 -> 32 channels over 28x28.
    model = Model()
    x = _float_input(model, (1, 32, 28, 28))
    y = x
    for _ in range(3):
        y = _conv(model, y, weights(32, 32, 3, 3))
    found["conv"] = (_finish(model, [x], [y]), [rng.standard_normal((1, 32, 28, 28)).astype(np.float32)],
                     3 * 2 * 32 * 32 * 9 * 28 * 28)
    # Depthwise + pointwise blocks (MobileNet's): 3 x (3x3 depthwise on 64 channels, 1x1 64 -> 64) over 28x28.
    model = Model()
    x = _float_input(model, (1, 64, 28, 28))
    y = x
    for _ in range(3):
        y = _conv(model, y, weights(64, 1, 3, 3), group=64, fuse=FuseCode.FUSED_RELU6)
        y = _conv(model, y, weights(64, 64, 1, 1))
    found["depthwise"] = (_finish(model, [x], [y]), [rng.standard_normal((1, 64, 28, 28)).astype(np.float32)],
                          3 * (2 * 64 * 9 * 28 * 28 + 2 * 64 * 64 * 28 * 28))
    # A transformer block's products: q, k, v projections, softmax(q k^T) v, an output projection; 64 tokens x 128.
    tokens, width = 64, 128
    model = Model()
    x = _float_input(model, (tokens, width))

    def dense(value):
        out = model.add_output()
        model.add_operation(OperationType.FULLY_CONNECTED, [
            value, model.add_constant(weights(width, width)), model.add_constant(np.zeros(width, np.float32)),
            model.add_constant(int(FuseCode.FUSED_NONE))], [out])
        return out

    def matmul(a, b, transpose_b: bool):
        out = model.add_output()
        model.add_operation(OperationType.MAT_MUL, [a, b, model.add_constant(False), model.add_constant(transpose_b)],
                            [out])
        return out

    q, k, v = dense(x), dense(x), dense(x)
    scores = matmul(q, k, True)
    attention = model.add_output()
    model.add_operation(OperationType.SOFTMAX, [scores, model.add_constant(-1)], [attention])
    y = dense(matmul(attention, v, False))
    found["matmul"] = (_finish(model, [x], [y]), [rng.standard_normal((tokens, width)).astype(np.float32)],
                       4 * 2 * tokens * width * width + 2 * 2 * tokens * tokens * width)
    # An int8 conv chain (a quantized model's convs): 3 convs of 32 -> 32 channels over 28x28, per-channel filters.
    model = Model()
    scale = 0.05
    x = model.add_operand(OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, dims=(1, 32, 28, 28),
                                      scale=scale), "x")
    y = x
    for _ in range(3):
        filter_scales = [0.01] * 32
        filt = model.add_constant(rng.integers(-127, 128, (32, 32, 3, 3)).astype(np.int8),
                                  Precision.QUANT_INT8_SYMM_PER_CHANNEL, scales=filter_scales)
        bias = model.add_constant(np.zeros(32, np.int32), Precision.QUANT_INT32_SYMM_PER_CHANNEL,
                                  scales=[scale * s for s in filter_scales])
        y = _conv(model, y, filt, bias=bias, output_type=OperandType(
            precision=Precision.QUANT_INT8_SYMM_PER_LAYER, dims=(1, 32, 28, 28), scale=scale))
    found["int8_conv"] = (_finish(model, [x], [y]), [rng.integers(-127, 128, (1, 32, 28, 28)).astype(np.int8)],
                          3 * 2 * 32 * 32 * 9 * 28 * 28)
    # A run's fixed cost: one ADD of one element.
    model = Model()
    x = _float_input(model, (1,))
    out = model.add_output()
    model.add_operation(OperationType.ADD, [x, model.add_constant(np.ones(1, np.float32)),
                                            model.add_constant(int(FuseCode.FUSED_NONE))], [out])
    found["call"] = (_finish(model, [x], [out]), [np.ones(1, np.float32)], 0)
    return found


# -- what keys a measurement ------------------------------------------------------------------------------
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else platform's processor string), with the machine's cores."""
    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name or platform.processor() or platform.machine() or 'unknown'} x{os.cpu_count() or 0}"


def thread_setting(driver, properties: str) -> str:
    """The thread count a device runs with: its _NUM_THREADS property (the string, else the environment), else
    'default' (the driver's own choice)."""
    keys = [k for k in (getattr(driver, "property_keys", None) or ()) if k.endswith("_NUM_THREADS")]
    given = parse_properties(properties)
    for key in sorted(keys):
        value = given.get(key, os.environ.get(key, "")).strip()
        if value:
            return value
    return "default"


def sdk_version(driver) -> str:
    hook = getattr(driver, "sdk_version", None)
    try:
        found = str(hook() or "") if hook is not None else ""
    except Exception:  # a version is a key part only: a failing hook keys as unknown
        found = ""
    return found or "unknown"


def entry_key(name: str, driver, properties: str) -> str:
    """The key of a device's measurement: name, driver version, SDK version, CPU model, thread count."""
    return "|".join((name, f"driver={getattr(driver, 'version', '?')}", f"sdk={sdk_version(driver)}",
                     f"cpu={cpu_model()}", f"threads={thread_setting(driver, properties)}"))


# -- measuring --------------------------------------------------------------------------------------------
def _best_seconds(execution, arrays: list) -> float:
    execution.run(arrays)  # the first run may prepare (allocate, pick kernels): not counted
    best = math.inf
    runs = 0
    started = time.perf_counter()
    while runs < MAX_RUNS and (runs < MIN_RUNS or time.perf_counter() - started < MIN_SECONDS):
        t0 = time.perf_counter()
        execution.run(arrays)
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def relaxed_properties(driver, properties: str) -> str:
    """The context-property entries of the driver's relaxed float path (its preference_properties hook) that
    `properties` does not set, as a string; '' when it has none."""
    hook = getattr(driver, "preference_properties", None)
    try:
        relaxed = dict(hook("", True) or {}) if hook is not None else {}
        plain = dict(hook("", False) or {}) if hook is not None else {}
    except Exception:  # a failing hook: no relaxed path to measure
        return ""
    given = parse_properties(properties)
    return "".join(f"{k}={v};" for k, v in relaxed.items() if plain.get(k) != v and k not in given)


def _measure_workloads(device, properties: str, names: Iterable[str]) -> tuple:
    """({workload: {"seconds", "flops"} or {"unsupported": why}}, the "call" workload's seconds or None)."""
    from nnadapter_bridge.nnadapter.runtime import Compilation, Context, Execution

    workloads: dict = {}
    call_seconds = None
    wanted = set(names)
    with Context([device], properties) as context:
        for name, (model, arrays, flops) in workload_models().items():
            if name not in wanted:
                continue
            flags = context.validate(model, 0)
            if flags is not None and not all(flags):
                rejected = sorted({model.operations[i].type.name for i, ok in enumerate(flags) if not ok})
                workloads[name] = {"unsupported": f"declines {', '.join(rejected)}"}
                continue
            compilation = Compilation(model, "", None, "", context)
            try:
                compilation.finish()
                seconds = _best_seconds(Execution(compilation), arrays)
            except BridgeError as exc:
                workloads[name] = {"unsupported": f"failed: {exc}"}
                continue
            finally:
                compilation.destroy()
            if name == "call":
                call_seconds = seconds
            else:
                workloads[name] = {"seconds": seconds, "flops": flops}
    return workloads, call_seconds


def measure_device(device, properties: str = "") -> dict:
    """The measured entry of one acquired runtime Device: {workload: {"seconds", "flops"} or {"unsupported": why}},
    "relaxed_workloads" (the float workloads again on the driver's relaxed float path, {} without one),
    "call_seconds" (a one-element run) and "copy_bytes_per_second" (this machine's memory copy)."""
    workloads, call_seconds = _measure_workloads(device, properties, list(WORKLOADS) + ["call"])
    relaxed = relaxed_properties(device.driver, properties)
    relaxed_workloads: dict = {}
    if relaxed:
        sep = "" if not properties.strip() or properties.rstrip().endswith(";") else ";"
        floats = [w for w, (precision, _) in WORKLOADS.items() if precision == "float32"]
        relaxed_workloads, _ = _measure_workloads(device, properties + sep + relaxed, floats)
    return {"device": device.name, "workloads": workloads, "relaxed_workloads": relaxed_workloads,
            "call_seconds": call_seconds, "copy_bytes_per_second": _copy_bandwidth()}


def _copy_bandwidth() -> float:
    source = np.ones(1 << 20, np.float32)  # 4 MB: past the L2 cache of this class of machine
    target = np.empty_like(source)
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - t0)
    return source.nbytes / max(best, 1e-9)


# -- the store --------------------------------------------------------------------------------------------
def default_dir() -> str:
    """Where the calibration lives without a model cache dir: $XDG_CACHE_HOME (or ~/.cache)/nnadapter-bridge."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nnadapter-bridge")


def calibration_path(cache_dir: str | None) -> str:
    return os.path.join(cache_dir or default_dir(), CALIBRATION_FILE)


def _valid_entry(entry) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("device"), str):
        return False
    workloads = entry.get("workloads")
    relaxed = entry.get("relaxed_workloads", {})
    if not isinstance(workloads, dict) or not isinstance(relaxed, dict):
        return False
    for figures in list(workloads.values()) + list(relaxed.values()):
        if not isinstance(figures, dict):
            return False
        seconds = figures.get("seconds")
        if "unsupported" not in figures and not (isinstance(seconds, float) and seconds > 0 and math.isfinite(seconds)
                                                 and isinstance(figures.get("flops"), int)):
            return False
    call = entry.get("call_seconds")
    copy = entry.get("copy_bytes_per_second")
    return ((call is None or (isinstance(call, float) and call >= 0 and math.isfinite(call)))
            and isinstance(copy, float) and copy > 0 and math.isfinite(copy))


def read_entries(path: str) -> dict:
    """key -> entry of the calibration file at `path`; {} when there is none, and {} with one CalibrationWarning
    when it is unusable (not JSON, another format, a malformed entry): a miss, measured again and rewritten."""
    document, problem = read_kept_json(path, MAX_CALIBRATION_BYTES)
    if document is None:
        if problem:
            warnings.warn(f"calibration file {path} is unusable ({problem}); the devices are measured again",
                          CalibrationWarning, stacklevel=3)
        return {}
    if not isinstance(document, dict) or document.get("format") != CALIBRATION_FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        warnings.warn(f"calibration file {path} is not a {CALIBRATION_FORMAT} file (format {found!r}); the devices "
                      "are measured again", CalibrationWarning, stacklevel=3)
        return {}
    entries = document.get("entries")
    if not isinstance(entries, dict) or not all(isinstance(k, str) and _valid_entry(e) for k, e in entries.items()):
        warnings.warn(f"calibration file {path} has a malformed entry; the devices are measured again",
                      CalibrationWarning, stacklevel=3)
        return {}
    return entries


def write_entries(path: str, entries: dict) -> None:
    import orjson

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_file_atomically(path, orjson.dumps({"format": CALIBRATION_FORMAT, "entries": entries},
                                             option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))


# -- figures ---------------------------------------------------------------------------------------------
@plain_dataclass
class DeviceFigures:
    """One device's figures for planning: its Capabilities (relative to the CPU reference), the seconds per flop
    of each measured family and precision class, the fixed cost of a run, and where they came from."""

    name: str
    capabilities: Capabilities
    seconds_per_flop: dict  # workload family or precision class -> seconds per flop on this device
    call_seconds: float
    copy_bytes_per_second: float
    key: str
    source: str  # "calibration", "driver" or "none" (taken as the CPU)
    notes: dict  # workload -> why it has no figure

    def as_dict(self) -> dict:
        caps = self.capabilities
        return {"device": self.name, "key": self.key, "source": self.source,
                "precisions": {p: _info_dict(caps.precisions.get(p)) for p in PRECISION_CLASSES},
                "families": {f: _info_dict(caps.families.get(f)) for f in OPERATION_FAMILIES},
                "call_seconds": self.call_seconds, "notes": dict(self.notes)}


def _info_dict(info: PerformanceInfo | None) -> dict | None:
    if info is None:
        return None
    return {"exec_time": round(info.exec_time, 6), "power": info.power if info.power is not None else "unknown"}


def _geometric_mean(values: Iterable[float]) -> float | None:
    found = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in found) / len(found)) if found else None


def _workload_seconds(entry: dict, name: str, table: str = "workloads") -> tuple | None:
    figures = (entry or {}).get(table, {}).get(name) or {}
    return (figures["seconds"], figures["flops"]) if "seconds" in figures else None


def figures_from_entry(name: str, key: str, entry: dict | None, reference: dict | None) -> DeviceFigures:
    """A device's DeviceFigures from its measured entry and the reference device's (module docstring)."""
    notes = {w: f["unsupported"] for w, f in ((entry or {}).get("workloads") or {}).items() if "unsupported" in f}
    precisions: dict = {}
    families: dict = {}
    seconds_per_flop: dict = {}
    for workload, (precision, family) in WORKLOADS.items():
        own, ref = _workload_seconds(entry, workload), _workload_seconds(reference, workload)
        if own is None:
            continue
        seconds_per_flop[family or precision] = own[0] / own[1]
        if ref is None:
            notes.setdefault(workload, f"the reference {REFERENCE_DEVICE} has no figure for it")
            continue
        info = PerformanceInfo(own[0] / ref[0])  # power None: not measured on this machine
        if family is not None:
            families[family] = info
        else:
            precisions[precision] = info
    float_mean = _geometric_mean(f.exec_time for f in families.values())
    if float_mean is not None:
        precisions["float32"] = PerformanceInfo(float_mean)
    float_spf = _geometric_mean(seconds_per_flop[f] for f in OPERATION_FAMILIES if f in seconds_per_flop)
    if float_spf is not None:
        seconds_per_flop["float32"] = float_spf
    # The relaxed float path: the float workloads on it against the reference's float32 (as NNAPI's
    # relaxedFloat32toFloat16Performance is against the CPU's float32).
    relaxed_ratios, relaxed_spf = [], []
    for workload, (precision, _) in WORKLOADS.items():
        own, ref = _workload_seconds(entry, workload, "relaxed_workloads"), _workload_seconds(reference, workload)
        if precision == "float32" and own is not None and ref is not None:
            relaxed_ratios.append(own[0] / ref[0])
            relaxed_spf.append(own[0] / own[1])
    if relaxed_ratios:
        precisions["relaxed_float16"] = PerformanceInfo(_geometric_mean(relaxed_ratios))
        seconds_per_flop["relaxed_float16"] = _geometric_mean(relaxed_spf)
    else:
        notes.setdefault("relaxed_float16", "no relaxed float path: float32 stays float32 on this device")
    measured = entry is not None and bool(families)
    return DeviceFigures(name, Capabilities(precisions, families, "calibration"), seconds_per_flop,
                         float((entry or {}).get("call_seconds") or 0.0),
                         float((entry or {}).get("copy_bytes_per_second") or 0.0) or 1e10, key,
                         "calibration" if measured else "none", notes)


@plain_dataclass
class Calibration:
    """The figures of some devices on this machine (module docstring): name -> DeviceFigures, the reference's
    figures, where the file is, and how long measuring took this time (0.0: everything came from the file)."""

    devices: dict
    reference: DeviceFigures
    path: str
    measured_seconds: float
    measured: list  # the devices measured this time

    def figures(self, name: str) -> DeviceFigures:
        """A listed device's figures; one the calibration does not know is taken as the CPU reference."""
        return self.devices.get(name) or self.reference

    def digest(self) -> str:
        """What a decision made with these figures depends on: the entries' keys and figures (16 hex)."""
        import orjson

        parts = {name: f.as_dict() | {"seconds_per_flop": f.seconds_per_flop,
                                      "copy": round(f.copy_bytes_per_second, -6)}
                 for name, f in sorted(self.devices.items())}
        return sha256_hex(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS).decode("utf-8"))[:16]

    def as_dict(self) -> dict:
        return {"path": self.path, "reference": REFERENCE_DEVICE, "measured_seconds": round(self.measured_seconds, 3),
                "measured": list(self.measured), "devices": [self.devices[n].as_dict() for n in self.devices]}


def _driver_figures(device, key: str, reference: DeviceFigures) -> DeviceFigures | None:
    """A device's figures from its driver's `capabilities()` hook (scaled from the reference's seconds per flop),
    or None when it reports none."""
    hook = getattr(device.driver, "capabilities", None)
    try:
        caps = hook() if hook is not None else None
    except Exception as exc:  # a failing hook reports nothing: measured instead
        warnings.warn(f"device '{device.name}': capabilities() failed ({exc}); it is measured instead",
                      CalibrationWarning, stacklevel=4)
        caps = None
    if not isinstance(caps, Capabilities):
        return None
    spf = {k: v * caps.exec_time(k if k in PRECISION_CLASSES else "float32",
                                 None if k in PRECISION_CLASSES else k)
           for k, v in reference.seconds_per_flop.items()}
    return DeviceFigures(device.name, caps, spf, reference.call_seconds, reference.copy_bytes_per_second, key,
                         "driver", {})


def calibrate(device_names: Sequence[str], properties: str = "", cache_dir: str | None = None, *,
              force: bool = False) -> Calibration:
    """The figures of `device_names` (and of the reference device) on this machine: read from the calibration file,
    measuring (and writing back) what it lacks, everything with `force`. A device that cannot be opened or measured
    gets one CalibrationWarning and is taken as the CPU reference."""
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    path = calibration_path(cache_dir)
    entries = {} if force else read_entries(path)
    manager = DeviceManager.instance()
    names = [REFERENCE_DEVICE] + [n for n in dict.fromkeys(device_names) if n != REFERENCE_DEVICE]
    keyed: dict = {}
    measured: list = []
    started = time.perf_counter()
    for name in names:
        try:
            device = manager.acquire(name)
        except BridgeError as exc:
            warnings.warn(f"device '{name}' cannot be calibrated ({exc}); it is taken as the CPU reference",
                          CalibrationWarning, stacklevel=2)
            continue
        key = entry_key(name, device.driver, properties)
        keyed[name] = (device, key)
        # Kept (an entry from before the relaxed path was measured is measured again), or reported by the driver.
        if (key in entries and "relaxed_workloads" in entries[key]) or (name != REFERENCE_DEVICE and _reports(device)):
            continue
        try:
            entries[key] = measure_device(device, properties)
        except BridgeError as exc:
            warnings.warn(f"device '{name}' could not be measured ({exc}); it is taken as the CPU reference",
                          CalibrationWarning, stacklevel=2)
            continue
        measured.append(name)
    elapsed = time.perf_counter() - started if measured else 0.0
    if measured:
        try:
            write_entries(path, entries)
        except OSError as exc:
            warnings.warn(f"calibration file {path} cannot be written ({exc}); the devices are measured again at "
                          "the next start", CalibrationWarning, stacklevel=2)
    ref_key = keyed.get(REFERENCE_DEVICE, (None, "unknown"))[1]
    reference_entry = entries.get(ref_key)
    reference = figures_from_entry(REFERENCE_DEVICE, ref_key, reference_entry, reference_entry)
    devices: dict = {}
    for name in dict.fromkeys(device_names):
        if name not in keyed:
            continue
        device, key = keyed[name]
        figures = _driver_figures(device, key, reference) if name != REFERENCE_DEVICE else None
        devices[name] = figures or figures_from_entry(name, key, entries.get(key), reference_entry)
    return Calibration(devices, reference, path, elapsed, measured)


def _reports(device) -> bool:
    """Does the driver's capabilities() hook report figures (so it need not be measured)?"""
    hook = getattr(device.driver, "capabilities", None)
    try:
        return hook is not None and isinstance(hook(), Capabilities)
    except Exception:  # measured instead (_driver_figures warns)
        return False


def stored_figures(device_names: Sequence[str], properties: str = "", cache_dir: str | None = None) -> dict:
    """name -> DeviceFigures from the calibration file, or None for a device it has no entry for; nothing is
    measured and no device is opened (`nnadapter-bridge devices`)."""
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    entries = read_entries(calibration_path(cache_dir))
    manager = DeviceManager.instance()

    def key_of(name: str) -> str | None:
        try:
            return entry_key(name, manager.driver(name), properties)
        except Exception:  # a driver that does not load has no figures
            return None

    ref_key = key_of(REFERENCE_DEVICE)
    reference = entries.get(ref_key) if ref_key else None
    found: dict = {}
    for name in device_names:
        key = key_of(name)
        entry = entries.get(key) if key else None
        found[name] = figures_from_entry(name, key, entry, reference) if entry is not None else None
    return found
