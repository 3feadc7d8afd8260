"""The command-line options the partition, convert, run and bench commands share, and their values.

Owns the argparse definitions (model, devices, partition, inputs, dynamic shapes, --json), parsing their
values (--input-shape, --dynamic-shape, --input), checking them, and CliError: a user mistake found here
(a missing file, bad --input-shape syntax) is printed by the CLI as one line, or a JSON error (exit 2).

Entry points: the `add_*_argument(s)` functions, the value parsers (`parse_input_shape`, `dynamic_shape_info`,
`parse_input_file`, ...) and `CliError`. Imports only the channel: every command's parser is built from it.
"""
from __future__ import annotations

import os

from nnadapter_bridge.commands.channel import CommandError

DEFAULT_DEVICE = "builtin_device"
# Random integer inputs are drawn from [0, RANDOM_INT_HIGH): small, non-negative (valid as indices or sizes).
RANDOM_INT_HIGH = 8


class CliError(CommandError):
    """A bad command-line value (option syntax, a missing file, an unknown input name)."""


# -- options ---------------------------------------------------------------------------------------------
def add_model_arguments(parser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help="model directory (__model__ + __params__ or per-var files, one .pdmodel + "
                             ".pdiparams, or Paddle 3's one .json + .pdiparams), or a model file (__model__, "
                             "*.pdmodel, *.json, or a Paddle Lite optimized model *.nb)")
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
    parser.add_argument("--device-selection", choices=("priority", "fastest", "low_power"), default=None,
                        help="how several --device share the model: 'priority' (default, Paddle Lite's: the first "
                             "listed device taking an op runs it), 'fastest' (each subgraph on the devices the "
                             "machine's calibration estimates fastest, close calls timed on the first run), "
                             "'low_power' (Config.set_nnadapter_device_selection)")
    parser.add_argument("--execution-preference", choices=("low_power", "fast_single_answer", "sustained_speed"),
                        default=None, help="NNAPI's execution preference, mapped to each device's settings (threads, "
                                           "OpenVINO streams; Config.set_nnadapter_execution_preference)")
    parser.add_argument("--relax-float32", action="store_true",
                        help="let the devices compute float32 in float16 / bfloat16 (intel_openvino: bf16 where the "
                             "CPU has it; Config.set_nnadapter_relax_float32_to_float16); with --compare-paddle, "
                             "the accuracy it cost")


def add_partition_arguments(parser) -> None:
    parser.add_argument("--partition-config", metavar="F",
                        help="partition config file: one 'op_type:inputs:outputs' spec per line naming ops to "
                             "keep on the host (see configs/partition_force_host_example.txt)")
    parser.add_argument("--min-subgraph-size", metavar="N", type=int, default=1,
                        help="clusters with fewer ops stay on the host (default: 1, as Paddle Lite)")
    parser.add_argument("--strict", action="store_true",
                        help="fail (listing them with their reasons) when any op the partition config does not "
                             "keep on the host cannot run on the devices, instead of running it on the host "
                             "(Config.set_strict)")


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
    for axis, field in enumerate(text.split(",")):
        try:
            dim = int(field.strip())
        except ValueError:
            raise CliError(f"{option} '{spec}': axis {axis} is '{field.strip()}', not an integer; expected "
                           "NAME:D,D,... e.g. x:1,3,224,224") from None
        if dim < (-1 if allow_unknown else 0) or (dim == 0 and not allow_unknown):
            allowed = "positive or -1" if allow_unknown else "positive"
            raise CliError(f"{option} '{spec}': axis {axis} is {dim}; every size must be {allowed}")
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


# -- checking option values ----------------------------------------------------------------------------
def check_file(path: str, prefix: str) -> None:
    """CliError "<prefix>: ..." unless `path` is an existing regular file (a directory gets its own message)."""
    if os.path.isdir(path):
        raise CliError(f"{prefix}: is a directory, not a file")
    if not os.path.isfile(path):
        raise CliError(f"{prefix}: no such file")


def make_dir(path: str, option: str) -> None:
    """Create directory `path` (and its parents) for `option`; CliError, not a traceback, when that fails."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"{option} {path}: exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{option} {path}: cannot create the directory: {exc.strerror or exc}") from exc


def check_seed(args) -> None:
    seed = getattr(args, "seed", 0)
    if seed is not None and seed < 0:
        raise CliError(f"--seed {seed}: must be 0 or more")


def check_min_subgraph_size(args) -> None:
    if getattr(args, "min_subgraph_size", 1) < 1:
        raise CliError(f"--min-subgraph-size {args.min_subgraph_size}: must be at least 1")
