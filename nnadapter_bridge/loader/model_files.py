"""Where a model's program and parameters live: the five layouts and the auto-detection of a directory.

  "dir+per-var"        DIR/__model__ + DIR/<var name> for every persistable var
  "dir+__params__"     DIR/__model__ + DIR/__params__ (combined)
  "pdmodel+pdiparams"  DIR/<name>.pdmodel + DIR/<name>.pdiparams (a directory with exactly one .pdmodel,
                       or the .pdmodel file itself)
  "files"              an explicit model file and an explicit params file (or params directory)
  "json+pdiparams"     DIR/<name>.json + DIR/<name>.pdiparams: a Paddle 3 PIR program (a directory with
                       exactly one such .json, or the .json file itself; an inference.yml beside it is
                       ignored; the .pdiparams may be absent when the program has no parameters)
  "buffers"            the model (and params) given as bytes

A model file is recognised as PIR by its content (JSON with base_code.magic == "pir"), whatever its suffix.

Entry points: `resolve` (-> `ModelSource`), `map_file` (a file's bytes, memory-mapped when large). Imports only
`errors` and the record helper.
"""
from __future__ import annotations

import mmap
import os

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.nnadapter.record import plain_dataclass

# Small per-var files are read into bytes: a mapping per file costs more than the copy below this size.
_MMAP_THRESHOLD = 1 << 16

LAYOUTS = ("dir+per-var", "dir+__params__", "pdmodel+pdiparams", "json+pdiparams", "files", "buffers",
           "naive_buffer")


@plain_dataclass
class ModelSource:
    """What load_model resolved its arguments to. Exactly one of params_path / params_bytes / neither."""

    layout: str
    model_path: str | None
    params_path: str | None  # a combined file, or a directory of per-var files
    params_is_dir: bool
    model_bytes: bytes | None = None
    params_bytes: bytes | None = None
    expected_params: str | None = None  # the params file this layout wants, for the error when it is absent
    # The params file was named and does not exist: an error only if the model has parameters (Paddle Inference
    # runs a model without any, a post-processing program say, whatever params path its config names).
    params_named_missing: bool = False


def resolve(model_path=None, params_path=None, model_bytes=None, params_bytes=None) -> ModelSource:
    """Turn load_model's arguments into a ModelSource, or raise ModelFormatError saying what is wrong."""
    if model_bytes is not None and model_path is not None:
        raise ModelFormatError("give the model either as a path or as bytes, not both")
    if params_bytes is not None and params_path is not None:
        raise ModelFormatError("give the params either as a path or as bytes, not both")
    if model_bytes is not None:
        if params_path is not None:
            params_path = os.fspath(params_path)
            return ModelSource("buffers", None, params_path, os.path.isdir(params_path), model_bytes=model_bytes)
        return ModelSource("buffers", None, None, False, model_bytes=model_bytes, params_bytes=params_bytes)
    if model_path is None:
        raise ModelFormatError("no model given: pass a model directory, a model file, or model_bytes")
    model_path = os.fspath(model_path)
    if params_bytes is not None:
        if os.path.isdir(model_path):
            model_path = _detect_dir(model_path).model_path
        return ModelSource("buffers", model_path, None, False, params_bytes=params_bytes)
    if params_path is not None:
        params_path = os.fspath(params_path)
        if os.path.isdir(model_path):
            raise ModelFormatError("a params file was given with a model directory; give the model file "
                                   "itself, or only the directory", path=model_path)
        _require_file(model_path, "model file")
        if not os.path.exists(params_path):
            return ModelSource("files", model_path, None, False, expected_params=params_path,
                               params_named_missing=True)
        return ModelSource("files", model_path, params_path, os.path.isdir(params_path))
    if os.path.isdir(model_path):
        return _detect_dir(model_path)
    _require_file(model_path, "model file")
    directory = os.path.dirname(model_path) or "."
    base = os.path.basename(model_path)
    if base.endswith(".nb"):  # Paddle Lite's optimized model: program and parameters in one file
        return ModelSource("naive_buffer", model_path, None, False)
    for suffix, layout in ((".pdmodel", "pdmodel+pdiparams"), (".json", "json+pdiparams")):
        if base.endswith(suffix):
            sibling = model_path[: -len(suffix)] + ".pdiparams"
            return ModelSource(layout, model_path, sibling if os.path.exists(sibling) else None, False,
                               expected_params=sibling)
    if base == "__model__":
        source = _detect_dir(directory)
        if source.model_path is not None and os.path.samefile(source.model_path, model_path):
            return source
    # A lone program file: it may have no parameters at all; load_model complains if it needs some.
    return ModelSource("files", model_path, None, False)


def _require_file(path: str, what: str) -> None:
    if not os.path.exists(path):
        raise ModelFormatError(f"{what} not found; check the path", path=path)
    if not os.path.isfile(path):
        raise ModelFormatError(f"{what} is not a regular file", path=path)


def _detect_dir(directory: str) -> ModelSource:
    if not os.path.isdir(directory):
        raise ModelFormatError("model directory not found", path=directory)
    try:
        entries = os.listdir(directory)
    except OSError as exc:
        raise ModelFormatError(f"cannot list the model directory: {exc.strerror or exc}", path=directory) from exc
    pdmodels = sorted(e for e in entries if e.endswith(".pdmodel") and os.path.isfile(os.path.join(directory, e)))
    jsons = _pir_candidates(directory, entries)
    has_legacy = os.path.isfile(os.path.join(directory, "__model__"))
    if jsons and (pdmodels or has_legacy):
        legacy = ", ".join(pdmodels) if pdmodels else "__model__"
        raise ModelFormatError(f"ambiguous model directory: it has a legacy program ({legacy}) and a PIR program "
                               f"({', '.join(jsons)}); pass the one you mean as the model file, e.g. "
                               f"{os.path.join(directory, jsons[0])}", path=directory)
    if len(jsons) > 1:
        raise ModelFormatError(f"ambiguous model directory: {len(jsons)} PIR programs ({', '.join(jsons)}); pass "
                               f"the one you mean as the model file", path=directory)
    if len(jsons) == 1:
        model = os.path.join(directory, jsons[0])
        params = model[: -len(".json")] + ".pdiparams"
        return ModelSource("json+pdiparams", model, params if os.path.isfile(params) else None, False,
                           expected_params=params)
    if has_legacy and pdmodels:
        raise ModelFormatError(f"ambiguous model directory: it has both __model__ and {', '.join(pdmodels)}; "
                               f"pass the model file (and params file) explicitly", path=directory)
    if has_legacy:
        model = os.path.join(directory, "__model__")
        combined = os.path.join(directory, "__params__")
        if os.path.isfile(combined):
            return ModelSource("dir+__params__", model, combined, False)
        return ModelSource("dir+per-var", model, directory, True)
    if len(pdmodels) > 1:
        raise ModelFormatError(f"ambiguous model directory: {len(pdmodels)} .pdmodel files "
                               f"({', '.join(pdmodels)}); pass the one you mean as the model file",
                               path=directory)
    if len(pdmodels) == 1:
        model = os.path.join(directory, pdmodels[0])
        params = model[: -len(".pdmodel")] + ".pdiparams"
        return ModelSource("pdmodel+pdiparams", model, params if os.path.isfile(params) else None, False,
                           expected_params=params)
    raise ModelFormatError("no Paddle model here: expected __model__, one <name>.pdmodel, or one <name>.json "
                           "(Paddle 3) with its .pdiparams", path=directory)


def _pir_candidates(directory: str, entries: list) -> list:
    """The .json files of a directory that are PIR programs: those with a .pdiparams twin, else any .json
    whose first bytes read like a PIR document (a PaddleX dir may hold other JSON files beside it)."""
    jsons = sorted(e for e in entries if e.endswith(".json") and os.path.isfile(os.path.join(directory, e)))
    paired = [e for e in jsons if os.path.isfile(os.path.join(directory, e[: -len(".json")] + ".pdiparams"))]
    if paired:
        return paired
    found = []
    for e in jsons:
        try:
            with open(os.path.join(directory, e), "rb") as f:
                head = f.read(256)
        except OSError:
            continue
        if b'"base_code"' in head or b'"magic"' in head:
            found.append(e)
    return found


def map_file(path: str, mmap_threshold: int = _MMAP_THRESHOLD):
    """The whole file as a read-only buffer: an mmap for files of `mmap_threshold` bytes or more, bytes
    for smaller ones."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < mmap_threshold:
                return f.read()
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError as exc:
        raise ModelFormatError("file not found; check the path (and the model layout)", path=path) from exc
    except IsADirectoryError as exc:
        raise ModelFormatError("is a directory, expected a file", path=path) from exc
    except OSError as exc:
        raise ModelFormatError(f"cannot read: {exc.strerror or exc}", path=path) from exc
