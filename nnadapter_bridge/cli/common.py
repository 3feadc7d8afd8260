"""What the partition, convert, run and bench commands share: their model, device, partition and input
options; a Config built from them; input arrays (from .npy files, or seeded random data of the given
shapes); the per-subgraph program report (token, compiled or restored, .nnc file); Paddle Inference as a
reference; and plain-text tables.

User mistakes found here (a missing file, bad --input-shape syntax, an unknown input name) raise
CliError, which the CLI prints as one line (exit 2).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from typing import Iterable, Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import BridgeError

DEFAULT_DEVICE = "builtin_device"
# Random integer inputs are drawn from [0, RANDOM_INT_HIGH): small, non-negative (valid as indices or sizes).
RANDOM_INT_HIGH = 8
# DESIGN.md's whole-model tolerance against Paddle Inference: |got-want| <= 1e-4*|want| + 1e-5*max|want|.
MODEL_RTOL = 1e-4
MODEL_SCALE_ATOL = 1e-5


class CliError(BridgeError):
    """A bad command-line value (option syntax, a missing file, an unknown input name)."""


# -- options ---------------------------------------------------------------------------------------------
def add_model_arguments(parser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help="model directory (__model__ + __params__ or per-var files, one .pdmodel + "
                             ".pdiparams, or Paddle 3's one .json + .pdiparams), or a model file (__model__, "
                             "*.pdmodel, *.json)")
    parser.add_argument("--params", metavar="FILE",
                        help="params file (or per-var directory) for a model file; default: the .pdiparams "
                             "next to a .pdmodel or .json")


def add_device_arguments(parser) -> None:
    parser.add_argument("--device", metavar="D", action="append", dest="devices",
                        help=f"NNAdapter device to run subgraphs on; repeat it for several, in order of "
                             f"preference (default: {DEFAULT_DEVICE}; `nnadapter-bridge devices` lists them)")
    parser.add_argument("--context-properties", metavar="S", default="",
                        help="device context properties, 'KEY=value;KEY=value' (e.g. "
                             "'BUILTIN_DEVICE_NUM_THREADS=2;'); part of the cache token")


def add_partition_arguments(parser) -> None:
    parser.add_argument("--partition-config", metavar="F",
                        help="partition config file: one 'op_type:inputs:outputs' spec per line naming ops to "
                             "keep on the host (see configs/partition_force_host_example.txt)")
    parser.add_argument("--min-subgraph-size", metavar="N", type=int, default=1,
                        help="clusters with fewer ops stay on the host (default: 1, as Paddle Lite)")


def add_input_arguments(parser, *, files: bool = True) -> None:
    if files:
        parser.add_argument("--input", metavar="NAME=FILE.npy", action="append", default=[], dest="inputs",
                            help="feed input NAME from a .npy file (repeatable); inputs not given are random")
    parser.add_argument("--input-shape", metavar="NAME:D,D,...", action="append", default=[], dest="input_shapes",
                        help="shape of a random input, e.g. x:1,3,224,224 (repeatable); default: the declared "
                             "shape with a -1 batch axis set to 1")
    parser.add_argument("--seed", metavar="N", type=int, default=0,
                        help="seed of the random inputs, 0 or more: float inputs are standard normal, integer "
                             f"inputs uniform in [0, {RANDOM_INT_HIGH}), bool inputs uniform (default: 0)")


def add_dynamic_shape_argument(parser, *, help_tail: str) -> None:
    """--dynamic-shape NAME:D,..;D,.. (once per input), as Config.set_nnadapter_dynamic_shape_info takes it."""
    parser.add_argument("--dynamic-shape", metavar="NAME:D,..;D,..", action="append", default=[],
                        dest="dynamic_shapes",
                        help="the shapes input NAME will take, e.g. 'x:1,3,224,224;4,3,224,224' (quote the ';'; "
                             "-1 = any size; repeat the option for other inputs): one program then serves them "
                             "all, and its cache token depends on these shapes. " + help_tail)


def add_json_argument(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def device_names(args) -> list:
    names = list(args.devices or [DEFAULT_DEVICE])
    for name in names:
        if not name.strip():
            raise CliError("--device: empty device name; `nnadapter-bridge devices` lists them")
    return names


# -- parsing option values -----------------------------------------------------------------------------
def _parse_dims(text: str, option: str, spec: str, allow_unknown: bool) -> list:
    if not text.strip():
        raise CliError(f"{option} '{spec}': no dimensions after ':'; expected e.g. x:1,3,224,224")
    dims = []
    for field in text.split(","):
        try:
            dim = int(field.strip())
        except ValueError:
            raise CliError(f"{option} '{spec}': '{field.strip()}' is not an integer; expected "
                           "NAME:D,D,... e.g. x:1,3,224,224") from None
        if dim < (-1 if allow_unknown else 0) or (dim == 0 and not allow_unknown):
            allowed = "positive or -1" if allow_unknown else "positive"
            raise CliError(f"{option} '{spec}': dimension {dim} must be {allowed}")
        dims.append(dim)
    return dims


def parse_input_shape(spec: str) -> tuple:
    """`name:1,3,224,224` -> (name, [1, 3, 224, 224])."""
    name, sep, dims = spec.rpartition(":")
    if not sep or not name.strip():
        raise CliError(f"--input-shape '{spec}': expected NAME:D,D,... e.g. x:1,3,224,224")
    return name.strip(), _parse_dims(dims, "--input-shape", spec, allow_unknown=False)


def parse_dynamic_shape(spec: str) -> tuple:
    """`name:1,3,224,224;2,3,224,224` -> (name, [[1, 3, 224, 224], [2, 3, 224, 224]])."""
    name, sep, shapes = spec.partition(":")
    if not sep or not name.strip():
        raise CliError(f"--dynamic-shape '{spec}': expected NAME:D,D,...;D,D,... e.g. x:1,3,224,224;4,3,224,224")
    parsed = [_parse_dims(part, "--dynamic-shape", spec, allow_unknown=True)
              for part in shapes.split(";") if part.strip()]
    if not parsed:
        raise CliError(f"--dynamic-shape '{spec}': no shapes after ':'")
    if len({len(s) for s in parsed}) != 1:
        raise CliError(f"--dynamic-shape '{spec}': the shapes have different ranks")
    return name.strip(), parsed


def dynamic_shape_info(args) -> dict:
    """{name: [shape, ...]} from --dynamic-shape (empty when not given)."""
    info = {}
    for spec in getattr(args, "dynamic_shapes", None) or []:
        name, shapes = parse_dynamic_shape(spec)
        if name in info:
            raise CliError(f"--dynamic-shape {name}: given twice; list all its shapes in one option, "
                           f"e.g. {name}:1,3,224,224;4,3,224,224")
        info[name] = shapes
    return info


def dynamic_run_shapes(args, dynamic: dict) -> dict:
    """The shapes a run feeds the --dynamic-shape inputs: --input-shape if given, else the first listed
    shape (which then must be concrete). Inputs fed from --input files keep their file's shape."""
    files = {parse_input_file(s)[0] for s in getattr(args, "inputs", []) or []}
    given = {parse_input_shape(s)[0] for s in getattr(args, "input_shapes", []) or []}
    shapes = {}
    for name, listed in dynamic.items():
        if name in files or name in given:
            continue
        if any(d < 0 for d in listed[0]):
            raise CliError(f"--dynamic-shape {name}: the first shape {listed[0]} has -1 axes, so it cannot be "
                           f"run; list a concrete shape first or pass --input-shape {name}:...")
        shapes[name] = listed[0]
    return shapes


def parse_input_file(spec: str) -> tuple:
    """`name=path.npy` -> (name, path)."""
    name, sep, path = spec.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise CliError(f"--input '{spec}': expected NAME=FILE.npy, e.g. x=image.npy")
    return name.strip(), path.strip()


NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"  # an .npz archive


def check_file(path: str, prefix: str) -> None:
    """CliError "<prefix>: ..." unless `path` is an existing regular file (a directory gets its own message)."""
    if os.path.isdir(path):
        raise CliError(f"{prefix}: is a directory, not a file")
    if not os.path.isfile(path):
        raise CliError(f"{prefix}: no such file")


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


def make_dir(path: str, option: str) -> None:
    """Create directory `path` (and its parents) for `option`; CliError, not a traceback, when that fails."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"{option} {path}: exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{option} {path}: cannot create the directory: {exc.strerror or exc}") from exc


# -- model and config ----------------------------------------------------------------------------------
def check_model_path(args) -> None:
    if not os.path.exists(args.model):
        raise CliError(f"{args.model}: no such model file or directory")
    if args.params and not os.path.exists(args.params):
        raise CliError(f"--params {args.params}: no such file or directory")


def check_partition_config_path(args) -> None:
    path = getattr(args, "partition_config", None)
    if path:
        check_file(path, f"--partition-config {path}")


def check_seed(args) -> None:
    seed = getattr(args, "seed", 0)
    if seed is not None and seed < 0:
        raise CliError(f"--seed {seed}: must be 0 or more")


def check_min_subgraph_size(args) -> None:
    if getattr(args, "min_subgraph_size", 1) < 1:
        raise CliError(f"--min-subgraph-size {args.min_subgraph_size}: must be at least 1")


def build_config(args, *, cache_dir: Optional[str] = None, dynamic_shape_info: Optional[dict] = None):
    """A Config from the model, device and partition options in `args` (checks paths first)."""
    from nnadapter_bridge.config import Config

    check_model_path(args)
    check_partition_config_path(args)
    check_min_subgraph_size(args)
    check_seed(args)
    config = Config()
    if os.path.isdir(args.model):
        config.set_model_dir(args.model)
        if args.params:
            config.set_param_file(args.params)
    else:
        config.set_model_file(args.model)
        if args.params:
            config.set_param_file(args.params)
    config.set_nnadapter_device_names(device_names(args))
    if args.context_properties:
        config.set_nnadapter_context_properties(args.context_properties)
    if cache_dir:
        config.set_nnadapter_model_cache_dir(cache_dir)
    if getattr(args, "partition_config", None):
        config.set_nnadapter_subgraph_partition_config_path(args.partition_config)
    config.set_min_subgraph_size(getattr(args, "min_subgraph_size", 1))
    if dynamic_shape_info:
        config.set_nnadapter_dynamic_shape_info(dynamic_shape_info)
    return config


# -- inputs --------------------------------------------------------------------------------------------
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


def make_inputs(predictor, args, shapes: Optional[dict] = None) -> tuple:
    """Arrays for every model input and how each was made: ({name: array}, {name: "file F" | "random"}).

    `shapes` (name -> dims) overrides --input-shape (convert uses it for --dynamic-shape)."""
    names = predictor.get_input_names()
    files = dict(parse_input_file(s) for s in getattr(args, "inputs", []) or [])
    shape_of = dict(parse_input_shape(s) for s in getattr(args, "input_shapes", []) or [])
    shape_of.update(shapes or {})
    _check_names(files, names, "--input")
    _check_names(shape_of, names, "--input-shape")
    rng = np.random.default_rng(getattr(args, "seed", 0))
    arrays, origin = {}, {}
    for name in names:
        tensor = predictor.get_input_by_name(name)
        if name in files:
            array = load_npy(files[name], f"--input {name}")
            if name in shape_of and list(array.shape) != list(shape_of[name]):
                raise CliError(f"--input {name}: {files[name]} has shape {list(array.shape)}, but --input-shape "
                               f"says {shape_of[name]}")
            arrays[name], origin[name] = array, f"file {files[name]}"
            continue
        shape = shape_of.get(name) or default_shape(name, tensor.declared_shape or ())
        dtype = tensor.declared_dtype if tensor.declared_dtype is not None else np.float32
        arrays[name], origin[name] = random_array(rng, shape, dtype), "random"
    return arrays, origin


def feed(predictor, arrays: dict) -> None:
    for name, array in arrays.items():
        predictor.get_input_by_name(name).from_numpy(array)


def outputs_of(predictor) -> dict:
    return {name: predictor.get_output(i).numpy() for i, name in enumerate(predictor.get_output_names())}


def array_summary(array: np.ndarray) -> dict:
    """Shape, dtype and a few statistics (as Python numbers) of an output."""
    summary = {"shape": list(array.shape), "dtype": str(array.dtype)}
    if array.size and array.dtype.kind in "biuf":
        values = array.astype(np.float64)
        summary.update(min=float(values.min()), max=float(values.max()), mean=float(values.mean()),
                       std=float(values.std()))
    return summary


# -- compiled programs -----------------------------------------------------------------------------------
SOURCE_WORDS = {"build": "compiled", "file": "restored from cache", "buffer": "restored from cache buffer"}


def program_report(predictor) -> list:
    """One entry per program each subgraph engine built or restored: subgraph index, ops count, token,
    how it was obtained, and its .nnc file (path and size) when one exists."""
    from nnadapter_bridge.nnadapter.nnc import cache_file_path

    cache_dir = predictor.config.nnadapter_model_cache_dir()
    entries = []
    for index in sorted(predictor.engines):
        engine = predictor.engines[index]
        for program in engine.programs:
            path = cache_file_path(cache_dir, program.token) if cache_dir else None
            exists = bool(path) and os.path.isfile(path)
            entries.append({
                "subgraph": index,
                "ops": len(engine.subgraph.ops),
                "token": program.token,
                "source": SOURCE_WORDS.get(program.source, program.source),
                "file": path if exists else None,
                "bytes": os.path.getsize(path) if exists else None,
            })
    return entries


# -- Paddle Inference as the reference -----------------------------------------------------------------
def paddle_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("paddle") is not None


def paddle_outputs(model: str, params: Optional[str], feeds: dict) -> dict:
    """Run the model with Paddle Inference on CPU (oneDNN and IR optimization off, one thread) on `feeds`;
    returns {output name: array}. CliError when paddlepaddle is not installed."""
    if not paddle_available():
        raise CliError("paddlepaddle is not installed, so there is no Paddle Inference to compare with: "
                       "pip install paddlepaddle (or nnadapter-bridge[paddle])")
    os.environ.setdefault("GLOG_minloglevel", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time notes of paddle's own (no ccache, ...)
        import paddle.inference as paddle_infer

    # The same layout resolution as our loader, so both sides read the same files (PIR .json included).
    from nnadapter_bridge.loader.layout import resolve

    try:
        source = resolve(model, params)
    except BridgeError as exc:
        raise CliError(str(exc)) from exc
    if source.params_is_dir:
        config = paddle_infer.Config(source.params_path)
    elif source.params_path is not None:
        config = paddle_infer.Config(source.model_path, source.params_path)
    else:  # a program without parameters
        config = paddle_infer.Config()
        config.set_prog_file(source.model_path)
    config.disable_gpu()
    config.disable_glog_info()
    config.disable_mkldnn()
    config.switch_ir_optim(False)  # the program as written, not Paddle's fused rewrite of it
    config.set_cpu_math_library_num_threads(1)
    predictor = paddle_infer.create_predictor(config)
    for name in predictor.get_input_names():
        handle = predictor.get_input_handle(name)
        array = np.ascontiguousarray(feeds[name])
        handle.reshape(list(array.shape))
        handle.copy_from_cpu(array)
    predictor.run()
    return {name: predictor.get_output_handle(name).copy_to_cpu() for name in predictor.get_output_names()}


def compare(got: np.ndarray, want: np.ndarray) -> dict:
    """max abs error, max error relative to max|want|, and PASS/FAIL at the whole-model tolerance
    (integers and booleans exact; a shape or dtype-kind difference fails)."""
    entry = {"shape": list(got.shape), "want_shape": list(want.shape), "max_abs_error": None,
             "max_rel_error": None, "passed": False}
    if got.shape != want.shape:
        entry["note"] = f"shape {list(got.shape)} != Paddle's {list(want.shape)}"
        return entry
    if not got.size:
        entry.update(max_abs_error=0.0, max_rel_error=0.0, passed=True)
        return entry
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(got64 - want64)
    scale = float(np.max(np.abs(want64)))
    entry["max_abs_error"] = float(err.max())
    entry["max_rel_error"] = float(err.max() / scale) if scale > 0 else (0.0 if err.max() == 0 else float("inf"))
    if want.dtype.kind in "biu" or got.dtype.kind in "biu":
        entry["passed"] = bool(np.array_equal(got, want))
    else:
        entry["passed"] = bool(np.all(err <= MODEL_RTOL * np.abs(want64) + MODEL_SCALE_ATOL * scale))
    return entry


# -- output ------------------------------------------------------------------------------------------------
def print_json(data) -> None:
    print(json.dumps(data, indent=2))


def format_table(header: Sequence[str], rows: Sequence[Sequence], right_align: Iterable[int] = ()) -> str:
    right = set(right_align)
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([line(cells[0]), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]])


def human_bytes(n: Optional[int]) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    return f"{n} B"


def format_number(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@contextlib.contextmanager
def one_line_warnings(command: str):
    """Show Python warnings (cache misses, partition config specs that match nothing) as one line each."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"nnadapter-bridge {command}: warning: {message}", file=file or sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield
