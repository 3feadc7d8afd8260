"""The input arrays a command feeds: from .npy files, or seeded random data of the given shapes; feeding
them to a predictor and fetching its outputs.

A .npy file of another precision of the same kind than the input declares (numpy saves float64 by default, the
model takes float32) is cast to the declared dtype, and the input's origin says so ("file x.npy, float64 cast
to float32"); an integer file is cast only when every value fits. Any other dtype is an error naming both.

Entry points: `input_arrays`, `make_inputs`, `feed`, `outputs_of`, `load_npy`, `random_array`. Imports the command
options (CliError) and numpy only.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from nnadapter_bridge.commands.options import RANDOM_INT_HIGH, CliError, check_file, parse_input_file, parse_input_shape

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"  # an .npz archive


def load_npy(path: str, what: str) -> np.ndarray:
    check_file(path, f"{what}: {path}")
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
    except OSError as exc:
        raise CliError(f"{what}: {path}: cannot read it: {exc.strerror or exc}") from exc
    if magic.startswith(ZIP_MAGIC):
        raise CliError(f"{what}: {path}: holds several arrays (.npz); save one array with numpy.save")
    if magic != NPY_MAGIC:
        raise CliError(f"{what}: {path}: not a .npy file (no NumPy header); save the array with numpy.save")
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise CliError(f"{what}: {path}: not a readable .npy array ({exc})") from exc
    return array


def _check_names(given: Iterable[str], known: Sequence[str], option: str) -> None:
    for name in given:
        if name not in known:
            raise CliError(f"{option}: the model has no input '{name}'; its inputs are {', '.join(known) or 'none'}")


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(tuple(shape)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, RANDOM_INT_HIGH, size=tuple(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=tuple(shape)).astype(bool)
    raise CliError(f"cannot make random data of dtype {dtype}; pass the input with --input NAME=FILE.npy")


def default_shape(name: str, declared: Sequence[int]) -> list:
    """The declared shape with a -1 batch axis set to 1; CliError when another axis is unknown."""
    shape = list(declared)
    if shape and shape[0] < 0:
        shape[0] = 1
    if any(d < 0 for d in shape):
        shown = ",".join("N" if d < 0 else str(d) for d in declared)
        raise CliError(f"input '{name}' has unknown dimensions ([{shown}]); give its shape with "
                       f"--input-shape {name}:{','.join(str(d if d >= 0 else 1) for d in shape)}")
    return shape


def make_inputs(predictor, args, shapes: dict | None = None) -> tuple:
    """Arrays for every model input and how each was made: ({name: array}, {name: "file F" | "random"}).

    `shapes` (name -> dims) overrides --input-shape (convert uses it for --dynamic-shape)."""
    shape_of = dict(parse_input_shape(s) for s in getattr(args, "input_shapes", []) or [])
    shape_of.update(shapes or {})
    return input_arrays(predictor, dict(parse_input_file(s) for s in getattr(args, "inputs", []) or []), shape_of,
                        getattr(args, "seed", 0))


def input_arrays(predictor, files: dict, shape_of: dict, seed: int) -> tuple:
    """make_inputs from values rather than options: `files` name -> .npy path, `shape_of` name -> dims of the
    random ones, `seed` of their generator (batch gives a manifest entry's)."""
    names = predictor.get_input_names()
    _check_names(files, names, "--input")
    _check_names(shape_of, names, "--input-shape")
    rng = np.random.default_rng(seed)
    arrays, origin = {}, {}
    for name in names:
        tensor = predictor.get_input_by_name(name)
        if name in files:
            array = load_npy(files[name], f"--input {name}")
            if name in shape_of and list(array.shape) != list(shape_of[name]):
                raise CliError(f"--input {name}: {files[name]} has shape {list(array.shape)}, but --input-shape "
                               f"says {shape_of[name]}")
            array, cast_note = cast_to_declared(array, tensor.declared_dtype, f"--input {name}: {files[name]}")
            arrays[name], origin[name] = array, f"file {files[name]}" + cast_note
            continue
        shape = shape_of.get(name) or default_shape(name, tensor.declared_shape or ())
        dtype = tensor.declared_dtype if tensor.declared_dtype is not None else np.float32
        arrays[name], origin[name] = random_array(rng, shape, dtype), "random"
    return arrays, origin


def cast_to_declared(array: np.ndarray, declared, what: str) -> tuple:
    """(array in the declared dtype, ", <from> cast to <to>" or ""): see the module docstring."""
    if declared is None or array.dtype == np.dtype(declared):
        return array, ""
    want = np.dtype(declared)
    kinds = {array.dtype.kind, want.kind}
    if kinds == {"f"}:
        return array.astype(want), f", {array.dtype} cast to {want}"
    if kinds <= {"i", "u"}:
        cast = array.astype(want)
        if np.array_equal(cast.astype(array.dtype), array):
            return cast, f", {array.dtype} cast to {want}"
        raise CliError(f"{what}: holds {array.dtype} values that {want} (what the model's input takes) cannot "
                       "hold; save the array as " + str(want))
    raise CliError(f"{what}: holds {array.dtype}, but the model's input takes {want}; save the array as {want} "
                   f"(numpy: array.astype('{want}'))")


def feed(predictor, arrays: dict) -> None:
    for name, array in arrays.items():
        predictor.get_input_by_name(name).from_numpy(array)


def outputs_of(predictor) -> dict:
    return {name: predictor.get_output(i).numpy() for i, name in enumerate(predictor.get_output_names())}
