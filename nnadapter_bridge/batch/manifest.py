"""The batch manifest: which models to convert and validate on which devices (schema: docs/batch.md).

A manifest is a YAML (needs PyYAML, in the `[batch]`/`[ray]`/`[all]` extras) or JSON file. `load_manifest`
turns it into entries: each an `Entry` (typed, its paths absolute, picklable: the task a worker gets), or an
InvalidEntry saying which entry and which field is wrong. The fields an entry may set are Entry's fields that
carry a check (`_field`); each check turns the raw value into the typed one or records the problem, so one
entry reports every bad field at once. A bad entry does not stop the others; only a manifest that is not a
manifest at all (unreadable, not a mapping, an unknown top-level key, a section of the wrong type) is a
ManifestError. Entry point: `load_manifest`. Imports the loader (model files) and the
device manager; nothing of the CLI.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from collections.abc import Callable
from typing import Any

from nnadapter_bridge.errors import BridgeError

TOP_LEVEL_KEYS = ("version", "defaults", "models", "devices", "entries")
COMPARE_MODES = ("auto", "paddle", "reference", "none")
_NAME = re.compile(r"[A-Za-z0-9._@+=-]+\Z")


class ManifestError(BridgeError):
    """The manifest as a whole cannot be read (the message names the file and what is wrong)."""


class _Problems:
    """The problems of one entry, one line per field, and what the checks need (the manifest's folder, the
    installed devices)."""

    def __init__(self, base: str, known_devices):
        self.base = base
        self.known_devices = known_devices
        self.errors: list = []

    def add(self, field: str, message: str) -> None:
        self.errors.append(f"field '{field}': {message}")


_INVALID = object()  # what a check returns after recording a problem: the field takes its default


def _path(value, field: str, problems: _Problems) -> Any:
    if not isinstance(value, str) or not value.strip():
        problems.add(field, f"expected a path, got {value!r}")
        return _INVALID
    path = os.path.normpath(os.path.join(problems.base, os.path.expanduser(value)))
    if not os.path.exists(path):
        problems.add(field, f"{value}: no such file or directory (looked at {path})")
        return _INVALID
    return path


def _dims(value, field: str, problems: _Problems, allow_unknown: bool = False) -> Any:
    if not isinstance(value, list) or not value:
        problems.add(field, f"expected a non-empty list of integers, got {value!r}")
        return _INVALID
    for d in value:
        if isinstance(d, bool) or not isinstance(d, int) or d == 0 or d < (-1 if allow_unknown else 1):
            allowed = "positive integers or -1" if allow_unknown else "positive integers"
            problems.add(field, f"{value!r}: dimensions must be {allowed}")
            return _INVALID
    return [int(d) for d in value]


def _expecting(expected: str, ok: Callable, convert: Callable = lambda value: value) -> Callable:
    """The check of a value that `ok` accepts (then `convert`ed), else "expected <expected>, got <value>"."""
    def check(value, field: str, problems: _Problems) -> Any:
        if not ok(value):
            problems.add(field, f"expected {expected}, got {value!r}")
            return _INVALID
        return convert(value)
    return check


def _integer_from(low: int) -> Callable:
    return _expecting(f"an integer >= {low}", lambda v: not isinstance(v, bool) and isinstance(v, int) and v >= low)


def _mapping_of(expected: str, item: Callable) -> Callable:
    """The check of a mapping name -> item(value, "field.name", problems); the items that fail are left out."""
    def check(value, field: str, problems: _Problems) -> Any:
        if not isinstance(value, dict):
            problems.add(field, f"expected a mapping {expected}, got {value!r}")
            return _INVALID
        checked = {str(name): item(v, f"{field}.{name}", problems) for name, v in value.items()}
        return {name: v for name, v in checked.items() if v is not _INVALID}
    return check


def _devices(value, field: str, problems: _Problems) -> Any:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(d, str) and d.strip() for d in value):
        problems.add(field, f"expected a device name or a non-empty list of them, got {value!r}")
        return _INVALID
    devices = [d.strip() for d in value]
    known = problems.known_devices
    for d in devices:
        if known is not None and d not in known:
            problems.add(field, f"no NNAdapter device named '{d}'{_nearest(d, known)}; installed: "
                                f"{', '.join(sorted(known))}")
    if len(set(devices)) != len(devices):
        problems.add(field, f"{devices}: a device is listed twice")
    return devices


def _shape_list(listed, field: str, problems: _Problems) -> Any:
    if not isinstance(listed, list) or not listed:
        problems.add(field, f"expected a non-empty list of shapes, got {listed!r}")
        return _INVALID
    checked = [_dims(s, field, problems, allow_unknown=True) for s in listed]
    if any(c is _INVALID for c in checked):
        return _INVALID
    if len({len(c) for c in checked}) != 1:
        problems.add(field, "the shapes have different ranks")
        return _INVALID
    return checked


def _positive_amounts(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, (int, float))
                                           and not isinstance(v, bool) and v > 0 for k, v in value.items())


def _field(check: Callable, default: Any = None, *, factory: Callable | None = None, missing: str = ""):
    """An entry field the manifest sets: `check(value, field, problems)` gives its typed value (or _INVALID);
    `missing`: the field is required, and this says what to give. An absent or null value takes the default."""
    metadata = {"check": check, "missing": missing}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass
class Entry:
    """One valid entry, its paths absolute: what a task runs. `id`, `model_name` and `where` come from the
    manifest's layout; every field made by `_field` is one the manifest may set (ENTRY_FIELDS)."""

    id: str
    model_name: str
    where: str  # "entries[3]" or "models.mobilenet_v1 x devices[1]"
    model: str = _field(_path, missing="missing: every entry needs a model (a path, or a name from 'models')")
    params: str | None = _field(_path)
    devices: list[str] = _field(_devices, missing="missing: name the device(s), in the entry, its model or the "
                                                  "top-level 'devices'")
    context_properties: str = _field(_expecting("a string 'KEY=value;KEY=value'", lambda v: isinstance(v, str)), "")
    input_shapes: dict[str, list[int]] = _field(_mapping_of("input name -> [dims]", _dims), factory=dict)
    dynamic_shapes: dict[str, list[list[int]]] = _field(_mapping_of("input name -> [[dims], [dims], ...]",
                                                                    _shape_list), factory=dict)
    partition_config: str | None = _field(_path)
    min_subgraph_size: int = _field(_integer_from(1), 1)
    seed: int = _field(_integer_from(0), 0)
    reference_inputs: dict[str, str] = _field(_mapping_of("name -> file.npy", _path), factory=dict)
    reference_outputs: dict[str, str] = _field(_mapping_of("name -> file.npy", _path), factory=dict)
    compare: str = _field(_expecting(f"one of {', '.join(COMPARE_MODES)}", lambda v: v in COMPARE_MODES), "auto")
    resources: dict[str, float] = _field(_expecting("a mapping Ray resource name -> positive amount",
                                                    _positive_amounts, lambda v: {k: float(x) for k, x in v.items()}),
                                         factory=dict)
    model_digest: str = ""  # the model's and params' content (set by the runner before the entry's key)

    def fields(self, names) -> dict:
        """These fields as a dict (the result files' "entry", the entry key's spec)."""
        return {name: getattr(self, name) for name in names}


_CHECKED_FIELDS = tuple(f for f in dataclasses.fields(Entry) if "check" in f.metadata)
# Fields of an entry (and of `defaults`, and of a `models` item, except where noted).
ENTRY_FIELDS = ("name",) + tuple(f.name for f in _CHECKED_FIELDS)
MODEL_FIELDS = tuple(f for f in ENTRY_FIELDS if f not in ("name", "model", "devices")) + ("path",)


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
    entries: list   # Entry and InvalidEntry, in manifest order

    @property
    def valid(self) -> list:
        return [e for e in self.entries if isinstance(e, Entry)]

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


def _check_entry(raw: dict, problems: _Problems) -> dict:
    """The typed values of the fields `raw` sets (every problem recorded in `problems`), then the checks that
    read several fields."""
    for key in raw:
        if key not in ENTRY_FIELDS:
            problems.add(str(key), "unknown field" + _nearest(key, ENTRY_FIELDS))
    values: dict = {}
    for f in _CHECKED_FIELDS:
        value = raw.get(f.name)
        if value is None or (value in ({}, []) and f.default_factory is dict):
            if f.metadata["missing"]:
                problems.add(f.name, f.metadata["missing"])
            continue
        checked = f.metadata["check"](value, f.name, problems)
        if checked is not _INVALID:
            values[f.name] = checked
    if values.get("model"):
        from nnadapter_bridge.loader.model_files import resolve

        try:
            resolve(values["model"], values.get("params"))
        except BridgeError as exc:
            problems.add("model", str(exc))
    given = values.get("input_shapes", {})
    for name, shapes in values.get("dynamic_shapes", {}).items():
        if name not in given and any(d < 0 for d in shapes[0]):
            problems.add(f"dynamic_shapes.{name}", f"the first shape {shapes[0]} has -1 axes, so it cannot be run; "
                                                   f"list a concrete shape first or give input_shapes.{name}")
    if values.get("compare") == "reference" and not raw.get("reference_outputs"):
        problems.add("compare", "'reference' needs reference_outputs")
    return values


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
        checking = _Problems(base, known_devices)
        values = _check_entry(raw, checking)
        errors += checking.errors
        if name in seen:
            errors.append(f"field 'name': '{name}' is also the name of {seen[name]}; give one of them another "
                          "'name'")
        else:
            seen[name] = where
        if errors:
            entries.append(InvalidEntry(name, errors, where))
            continue
        entries.append(Entry(id=name, model_name=model_name or name.split("@")[0], where=where, **values))
    return Manifest(path, entries)
