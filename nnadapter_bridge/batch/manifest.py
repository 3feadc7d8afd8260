"""The batch manifest: which models to convert and validate on which devices (schema: docs/batch.md).

A manifest is a YAML (needs PyYAML, in the `[batch]`/`[ray]`/`[all]` extras) or JSON file. `load_manifest`
turns it into entries: each a plain dict with absolute paths (picklable, JSON-able: the task a worker gets),
or an InvalidEntry saying which entry and which field is wrong. A bad entry does not stop the others; only
a manifest that is not a manifest at all (unreadable, not a mapping, an unknown top-level key, a section of
the wrong type) is a ManifestError.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from typing import Any, Optional

from nnadapter_bridge.errors import BridgeError

TOP_LEVEL_KEYS = ("version", "defaults", "models", "devices", "entries")
# Fields of an entry (and of `defaults`, and of a `models` item, except where noted).
ENTRY_FIELDS = ("name", "model", "params", "devices", "context_properties", "input_shapes", "dynamic_shapes",
                "partition_config", "min_subgraph_size", "seed", "reference_inputs", "reference_outputs",
                "compare", "resources")
MODEL_FIELDS = tuple(f for f in ENTRY_FIELDS if f not in ("name", "model", "devices")) + ("path",)
COMPARE_MODES = ("auto", "paddle", "reference", "none")
PATH_FIELDS = ("model", "params", "partition_config")
_NAME = re.compile(r"[A-Za-z0-9._@+=-]+\Z")


class ManifestError(BridgeError):
    """The manifest as a whole cannot be read (the message names the file and what is wrong)."""


@dataclasses.dataclass
class InvalidEntry:
    """An entry that cannot run: its name (or position) and every problem found, one per field."""

    id: str
    errors: list
    where: str  # "entries[3]" or "models.mobilenet_v1 x devices[1]"

    @property
    def message(self) -> str:
        return "; ".join(self.errors)


@dataclasses.dataclass
class Manifest:
    path: str
    entries: list   # dicts (valid entries) and InvalidEntry, in manifest order

    @property
    def valid(self) -> list:
        return [e for e in self.entries if isinstance(e, dict)]

    @property
    def invalid(self) -> list:
        return [e for e in self.entries if isinstance(e, InvalidEntry)]


def _read(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read the manifest: {exc.strerror or exc}") from exc
    text = data.decode("utf-8", "replace")
    if path.lower().endswith(".json") or text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{path}: not valid JSON: {exc}") from exc
    try:
        import yaml
    except ImportError:
        raise ManifestError(f"{path}: a YAML manifest needs PyYAML: pip install 'nnadapter-bridge[batch]' "
                            "(or write the manifest as JSON)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML: {exc}") from exc


def _nearest(word: str, choices) -> str:
    found = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean '{found[0]}'?)" if found else ""


class _Problems:
    def __init__(self):
        self.errors: list = []

    def add(self, field: str, message: str) -> None:
        self.errors.append(f"field '{field}': {message}")


def _positive_dims(value, field: str, problems: _Problems, allow_unknown: bool = False) -> Optional[list]:
    if not isinstance(value, list) or not value:
        problems.add(field, f"expected a non-empty list of integers, got {value!r}")
        return None
    dims = []
    for d in value:
        if isinstance(d, bool) or not isinstance(d, int) or d == 0 or d < (-1 if allow_unknown else 1):
            allowed = "positive integers or -1" if allow_unknown else "positive integers"
            problems.add(field, f"{value!r}: dimensions must be {allowed}")
            return None
        dims.append(int(d))
    return dims


def _path(value, field: str, base: str, problems: _Problems, *, must_exist: bool = True) -> Optional[str]:
    if not isinstance(value, str) or not value.strip():
        problems.add(field, f"expected a path, got {value!r}")
        return None
    path = os.path.normpath(os.path.join(base, os.path.expanduser(value)))
    if must_exist and not os.path.exists(path):
        problems.add(field, f"{value}: no such file or directory (looked at {path})")
        return None
    return path


def _check_entry(raw: dict, base: str, known_devices) -> tuple:
    """(resolved entry dict, []) or (None, [problems])."""
    problems = _Problems()
    for key in raw:
        if key not in ENTRY_FIELDS:
            problems.add(str(key), "unknown field" + _nearest(key, ENTRY_FIELDS))
    entry: dict = {}
    # model (+ params)
    model = raw.get("model")
    if model is None:
        problems.add("model", "missing: every entry needs a model (a path, or a name from 'models')")
    else:
        entry["model"] = _path(model, "model", base, problems)
    entry["params"] = _path(raw["params"], "params", base, problems) if raw.get("params") is not None else None
    if entry.get("model"):
        from nnadapter_bridge.loader.model_files import resolve

        try:
            resolve(entry["model"], entry["params"])
        except BridgeError as exc:
            problems.add("model", str(exc))
    # devices
    devices = raw.get("devices")
    if isinstance(devices, str):
        devices = [devices]
    if devices is None:
        problems.add("devices", "missing: name the device(s), in the entry, its model or the top-level 'devices'")
    elif not isinstance(devices, list) or not devices or not all(isinstance(d, str) and d.strip() for d in devices):
        problems.add("devices", f"expected a device name or a non-empty list of them, got {devices!r}")
    else:
        devices = [d.strip() for d in devices]
        for d in devices:
            if known_devices is not None and d not in known_devices:
                problems.add("devices", f"no NNAdapter device named '{d}'{_nearest(d, known_devices)}; installed: "
                                        f"{', '.join(sorted(known_devices))}")
        if len(set(devices)) != len(devices):
            problems.add("devices", f"{devices}: a device is listed twice")
        entry["devices"] = devices
    # simple values
    properties = raw.get("context_properties", "")
    if not isinstance(properties, str):
        problems.add("context_properties", f"expected a string 'KEY=value;KEY=value', got {properties!r}")
    entry["context_properties"] = properties if isinstance(properties, str) else ""
    for field, default, low in (("min_subgraph_size", 1, 1), ("seed", 0, 0)):
        value = raw.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            problems.add(field, f"expected an integer >= {low}, got {value!r}")
            value = default
        entry[field] = value
    compare = raw.get("compare", "auto")
    if compare not in COMPARE_MODES:
        problems.add("compare", f"expected one of {', '.join(COMPARE_MODES)}, got {compare!r}")
        compare = "auto"
    # shapes
    shapes = {}
    value = raw.get("input_shapes") or {}
    if not isinstance(value, dict):
        problems.add("input_shapes", f"expected a mapping input name -> [dims], got {value!r}")
    else:
        for name, dims in value.items():
            checked = _positive_dims(dims, f"input_shapes.{name}", problems)
            if checked is not None:
                shapes[str(name)] = checked
    entry["input_shapes"] = shapes
    dynamic = {}
    value = raw.get("dynamic_shapes") or {}
    if not isinstance(value, dict):
        problems.add("dynamic_shapes", f"expected a mapping input name -> [[dims], [dims], ...], got {value!r}")
    else:
        for name, listed in value.items():
            field = f"dynamic_shapes.{name}"
            if not isinstance(listed, list) or not listed:
                problems.add(field, f"expected a non-empty list of shapes, got {listed!r}")
                continue
            checked = [_positive_dims(s, field, problems, allow_unknown=True) for s in listed]
            if any(c is None for c in checked):
                continue
            if len({len(c) for c in checked}) != 1:
                problems.add(field, "the shapes have different ranks")
                continue
            if str(name) not in shapes and any(d < 0 for d in checked[0]):
                problems.add(field, f"the first shape {checked[0]} has -1 axes, so it cannot be run; list a "
                                    f"concrete shape first or give input_shapes.{name}")
                continue
            dynamic[str(name)] = checked
    entry["dynamic_shapes"] = dynamic
    # files
    entry["partition_config"] = (_path(raw["partition_config"], "partition_config", base, problems)
                                 if raw.get("partition_config") is not None else None)
    for field in ("reference_inputs", "reference_outputs"):
        value = raw.get(field) or {}
        files = {}
        if not isinstance(value, dict):
            problems.add(field, f"expected a mapping name -> file.npy, got {value!r}")
        else:
            for name, path in value.items():
                resolved = _path(path, f"{field}.{name}", base, problems)
                if resolved is not None:
                    files[str(name)] = resolved
        entry[field] = files
    if compare == "reference" and not raw.get("reference_outputs"):
        problems.add("compare", "'reference' needs reference_outputs")
    entry["compare"] = compare
    resources = raw.get("resources") or {}
    if not isinstance(resources, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
            for k, v in resources.items()):
        problems.add("resources", f"expected a mapping Ray resource name -> positive amount, got {resources!r}")
        resources = {}
    entry["resources"] = {k: float(v) for k, v in resources.items()}
    return (None, problems.errors) if problems.errors else (entry, [])


def _default_name(raw: dict, devices) -> str:
    model = raw.get("_model_name") or os.path.basename(os.path.normpath(str(raw.get("model", "model"))))
    for suffix in (".pdmodel", ".json", "__model__"):
        if model.endswith(suffix) and model != suffix:
            model = model[: -len(suffix)]
    devs = devices if isinstance(devices, list) else [devices]
    return f"{model}@{'+'.join(str(d) for d in devs)}"


def load_manifest(path: str, known_devices=None) -> Manifest:
    """Read and check the manifest at `path`. `known_devices`: the installed device names (default: the
    device manager's); None entries are not checked against them."""
    if known_devices is None:
        from nnadapter_bridge.nnadapter.runtime import DeviceManager

        known_devices = set(DeviceManager.instance().names())
    path = os.path.abspath(path)
    data = _read(path)
    base = os.path.dirname(path)
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: the manifest must be a mapping with 'entries' and/or 'models' + 'devices', "
                            f"not a {type(data).__name__}")
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise ManifestError(f"{path}: unknown top-level key '{key}'{_nearest(key, TOP_LEVEL_KEYS)}; the keys "
                                f"are {', '.join(TOP_LEVEL_KEYS)}")
    if data.get("version", 1) != 1:
        raise ManifestError(f"{path}: version {data['version']!r}: this nnadapter-bridge reads version 1")
    defaults = data.get("defaults") or {}
    models = data.get("models") or {}
    matrix_devices = data.get("devices")
    explicit = data.get("entries") or []
    if not isinstance(defaults, dict):
        raise ManifestError(f"{path}: 'defaults' must be a mapping of entry fields")
    for key in defaults:
        if key not in ENTRY_FIELDS or key in ("name", "model"):
            raise ManifestError(f"{path}: defaults.{key}: not a field defaults may set"
                                + _nearest(key, [f for f in ENTRY_FIELDS if f not in ("name", "model")]))
    if isinstance(models, list):  # a list of {name: ..., path: ...} works too
        named = {}
        for k, item in enumerate(models):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ManifestError(f"{path}: models[{k}]: a list item must be a mapping with a 'name'")
            named[item["name"]] = {key: value for key, value in item.items() if key != "name"}
        models = named
    if not isinstance(models, dict):
        raise ManifestError(f"{path}: 'models' must be a mapping name -> model (a path, or a mapping with 'path')")
    if matrix_devices is not None and not isinstance(matrix_devices, list):
        raise ManifestError(f"{path}: 'devices' must be a list of device names or lists of them")
    if not isinstance(explicit, list):
        raise ManifestError(f"{path}: 'entries' must be a list")
    if matrix_devices is None and not explicit:
        raise ManifestError(f"{path}: nothing to do: give 'entries', or 'models' and 'devices' (every model on "
                            "every device set)")

    raw_entries = []  # (where, raw dict, model-level problems)

    def model_fields(name, where) -> tuple:
        spec = models.get(name)
        problems = []
        if isinstance(spec, str):
            spec = {"path": spec}
        if not isinstance(spec, dict):
            return {}, [f"{where}: expected a path or a mapping with 'path', got {spec!r}"]
        fields = {}
        for key, value in spec.items():
            if key not in MODEL_FIELDS:
                problems.append(f"field 'models.{name}.{key}': unknown field" + _nearest(key, MODEL_FIELDS))
            elif key == "path":
                fields["model"] = value
            else:
                fields[key] = value
        if "model" not in fields:
            problems.append(f"field 'models.{name}.path': missing")
        return fields, problems

    if matrix_devices is not None:
        if not models:
            raise ManifestError(f"{path}: top-level 'devices' makes every model x device entry, but there are no "
                                "'models'")
        for name in models:
            fields, problems = model_fields(name, f"models.{name}")
            for k, devices in enumerate(matrix_devices):
                raw = {**defaults, **fields, "devices": devices, "_model_name": name}
                raw_entries.append((f"models.{name} x devices[{k}]", raw, problems))
    for k, item in enumerate(explicit):
        if not isinstance(item, dict):
            raw_entries.append((f"entries[{k}]", None, [f"expected a mapping of entry fields, got {item!r}"]))
            continue
        raw = dict(item)
        problems = []
        model = raw.get("model")
        if isinstance(model, str) and model in models:
            fields, problems = model_fields(model, f"models.{model}")
            raw = {**defaults, **fields, **{key: v for key, v in raw.items() if key != "model"}, "_model_name": model}
        else:
            raw = {**defaults, **raw}
        raw_entries.append((f"entries[{k}]", raw, problems))

    entries = []
    seen: dict = {}
    for where, raw, problems in raw_entries:
        if raw is None:
            entries.append(InvalidEntry(where, problems, where))
            continue
        name = raw.get("name")
        model_name = raw.pop("_model_name", None)
        if name is None:
            name = _default_name({**raw, "_model_name": model_name}, raw.get("devices"))
        errors = list(problems)
        if not isinstance(name, str) or not _NAME.match(name):
            errors.append(f"field 'name': {name!r}: use letters, digits and . _ @ + = - only (it names files)")
            name = where
        entry, found = _check_entry(raw, base, known_devices)
        errors += found
        if name in seen:
            errors.append(f"field 'name': '{name}' is also the name of {seen[name]}; give one of them another "
                          "'name'")
        else:
            seen[name] = where
        if errors:
            entries.append(InvalidEntry(name, errors, where))
            continue
        entry["id"] = name
        entry["model_name"] = model_name or name.split("@")[0]
        entry["where"] = where
        entries.append(entry)
    return Manifest(path, entries)
