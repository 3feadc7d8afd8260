"""`nnadapter-bridge opt MODEL --optimize-out NAME [--valid-targets x86] [--with-nnc DEVICE]`: write a model as
Paddle Lite's optimized model file `NAME.nb` (meta_version 2, what Paddle Lite 2.13's MobileConfig loads), like
Paddle Lite's `paddle_lite_opt --optimize_out NAME` (which appends `.nb` too).

MODEL is any model the loader reads (legacy, PIR, or a `.nb`). The ops are written as the model holds them: no
fusion pass runs (loader/naive_buffer_writer.py says what is added for Lite 2.13's sake). With `--with-nnc DEVICE`
the written `.nb` is then loaded, partitioned for DEVICE and run once on seeded random inputs with NAME's
directory as the model cache, so the compiled `<token>.nnc` programs of its subgraphs lie beside the `.nb`: a
predictor given that `.nb`, that device and that directory as its cache dir restores them instead of compiling.
Progress goes to a terminal's stderr.

Like Paddle Lite's opt, it refuses a model holding ops that nothing here can run (no converter, no host kernel)
and lists them (`--allow-unsupported-ops` writes it anyway). The `.nb` is written to a temporary file renamed
into place, so a full disk or Ctrl-C leaves the previous file (or none), never a truncated one; `--with-nnc`'s
device is checked before anything is written.

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the command plumbing and validation; the
loader's `.nb` writer, the predictor, the converters and the drivers only inside `run`, so building the parser loads
none of them.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from nnadapter_bridge.commands import model_config, options, output
from nnadapter_bridge.commands.options import CliError
from nnadapter_bridge.validation import inputs

# Paddle Lite's --valid_targets that give the file we write: its kernel choice (the `__@kernel_type_attr@__` of
# feed/fetch, the fallback to the first registered kernel elsewhere) holds on x86, ARM and host builds.
WRITABLE_TARGETS = ("x86", "arm", "host")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "opt", help="write the model as a Paddle Lite optimized model NAME.nb (optionally with its .nnc programs)",
        description="Write MODEL as Paddle Lite's optimized model file NAME.nb (meta_version 2, the format of "
                    "Paddle Lite 2.13's paddle_lite_opt; its MobileConfig.set_model_from_file loads it). The ops are "
                    "written as MODEL holds them (no fusion). With --with-nnc DEVICE, the subgraphs DEVICE runs "
                    "are compiled and their <token>.nnc programs written beside NAME.nb, so that directory is a "
                    "complete deployment (a predictor with that .nb, device and cache dir restores them).")
    options.add_model_arguments(parser)
    parser.add_argument("--optimize-out", metavar="NAME", required=True,
                        help="output path without the suffix: NAME.nb is written (as Paddle Lite's opt does, .nb "
                             "is always appended; its directory is created if missing)")
    parser.add_argument("--valid-targets", metavar="T[,T]", default="x86",
                        help=f"Paddle Lite targets the file is for, comma-separated; {', '.join(WRITABLE_TARGETS)} "
                             "(default: x86) all give the same file, others are refused")
    parser.add_argument("--with-nnc", metavar="DEVICE", dest="with_nnc",
                        help="also compile the subgraphs for this NNAdapter device into <dir of NAME>/<token>.nnc")
    parser.add_argument("--context-properties", metavar="S", default="",
                        help="with --with-nnc: device context properties 'KEY=value;...' (part of the cache token)")
    parser.add_argument("--allow-unsupported-ops", action="store_true",
                        help="write the .nb even when it holds ops that nothing here can run (they are listed "
                             "as a warning); without it such a model is refused, as Paddle Lite's opt does")
    options.add_input_arguments(parser, files=False)
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"nnadapter-bridge opt: {message}", file=sys.stderr, flush=True)


def valid_targets(text: str) -> list:
    targets = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not targets:
        raise CliError("--valid-targets: give at least one target, e.g. x86")
    bad = [t for t in targets if t not in WRITABLE_TARGETS]
    if bad:
        raise CliError(f"--valid-targets {text}: {', '.join(bad)} not supported: nnadapter-bridge writes the ops as "
                       f"the model holds them, for {', '.join(WRITABLE_TARGETS)}; NNAdapter devices are given to "
                       f"`run`/`convert` with --device, and --with-nnc compiles for one")
    return targets


def check_with_nnc_device(name: str) -> None:
    """CliError naming the installed devices unless `name` is a device whose driver loads (before any writing)."""
    from nnadapter_bridge.cli.cmd_ops import check_device_names
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    if not name.strip():
        raise CliError("--with-nnc: empty device name; `nnadapter-bridge devices` lists them")
    try:
        check_device_names(DeviceManager.instance(), [name])
    except CliError as exc:
        raise CliError(str(exc).replace("--device", "--with-nnc", 1)) from exc


def unsupported_op_types(graph) -> list:
    """The op types of `graph` (sub-blocks included) that nothing here runs: no converter and no host kernel."""
    from nnadapter_bridge.host import HostExecutor

    return HostExecutor(graph).unsupported_op_types(graph.blocks[0].ops)


def write_atomically(path: str, data: bytes) -> None:
    """`data` to a temporary file beside `path`, renamed over it: never a truncated `.nb`, no temporary left."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".tmp-", suffix=".nb", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def run(args) -> int:
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.loader.naive_buffer_writer import graph_to_naive_buffer

    targets = valid_targets(args.valid_targets)
    model_config.check_model_path(args)
    if args.with_nnc is not None:
        check_with_nnc_device(args.with_nnc)
    out_path = args.optimize_out + ".nb"
    out_dir = os.path.dirname(os.path.abspath(out_path))
    options.make_dir(out_dir, "--optimize-out")
    with output.one_line_warnings("opt"):
        start = time.perf_counter()
        _progress(f"loading {args.model}")
        graph = load_model(args.model, args.params)
        loaded = time.perf_counter()
        unsupported = unsupported_op_types(graph)
        if unsupported and not args.allow_unsupported_ops:
            raise CliError(f"{args.model}: nothing here can run these ops: {', '.join(unsupported)}; no .nb written",
                           hint="`nnadapter-bridge ops` lists what runs; --allow-unsupported-ops writes the .nb "
                                "anyway")
        if unsupported:
            import warnings

            warnings.warn(f"{out_path} holds ops that nothing here can run: {', '.join(unsupported)}", stacklevel=2)
        _progress(f"writing {out_path}")
        blob = graph_to_naive_buffer(graph)
        try:
            write_atomically(out_path, blob)
        except OSError as exc:
            raise CliError(f"--optimize-out {out_path}: cannot write it: {exc.strerror or exc}; no .nb written") \
                from exc
        size = len(blob)
        written = time.perf_counter()
        data = {"model": args.model, "optimize_out": out_path, "bytes": size, "valid_targets": targets,
                "num_ops": graph.num_ops(), "num_params": len(graph.params), "unsupported_ops": unsupported,
                "load_seconds": loaded - start, "write_seconds": written - loaded, "nnc": None}
        if args.with_nnc:
            _progress(f"compiling the subgraphs of {out_path} for {args.with_nnc}")
            data["nnc"] = _compile(args, out_path, out_dir)
    if args.json:
        output.print_json(data)
        return 0
    output.print_text(render(data))
    return 0


def _compile(args, nb_path: str, cache_dir: str) -> dict:
    """Load the written `.nb`, run it once on DEVICE with `cache_dir` as the model cache; the programs (a
    DeviceError, exit 3, when the device fails or a program cannot be written, as `convert`)."""
    from nnadapter_bridge.cli.cmd_convert import check_programs_written
    from nnadapter_bridge.commands.channel import current, raise_for_device_fallbacks

    convert_args = argparse.Namespace(model=nb_path, params=None, devices=[args.with_nnc],
                                      context_properties=args.context_properties, min_subgraph_size=1,
                                      seed=args.seed, input_shapes=args.input_shapes)
    config = model_config.build_config(convert_args, cache_dir=cache_dir)
    predictor = model_config.open_predictor(config)
    try:
        arrays, _ = inputs.make_inputs(predictor, convert_args)
        inputs.feed(predictor, arrays)
        since = len(current().warnings)
        predictor.run()
        raise_for_device_fallbacks(since, what="nothing was compiled for it")
        programs = output.program_report(predictor)
        check_programs_written(programs)
        stats = predictor.stats
        report = {"device": args.with_nnc, "cache_dir": cache_dir,
                  "input_shapes": {name: list(a.shape) for name, a in arrays.items()},
                  "num_subgraphs": stats.subgraphs, "num_host_ops": stats.host_ops, "programs": programs}
    finally:
        predictor.close()
    return report


def render(data: dict) -> str:
    lines = [f"model        {data['model']}",
             f"wrote        {data['optimize_out']} ({output.human_bytes(data['bytes'])}; {data['num_ops']} ops, "
             f"{data['num_params']} params; Paddle Lite naive buffer, meta_version 2)",
             f"targets      {', '.join(data['valid_targets'])}",
             f"time         {data['load_seconds'] * 1000:.0f} ms to load, {data['write_seconds'] * 1000:.0f} ms to "
             f"write"]
    nnc = data["nnc"]
    if nnc is not None:
        lines.append(f"nnc          {nnc['device']}: {nnc['num_subgraphs']} subgraphs, {nnc['num_host_ops']} host ops; "
                     f"inputs " + ", ".join(f"{n} [{', '.join(map(str, s))}]" for n, s in nnc["input_shapes"].items()))
        rows = [[p["subgraph"], p["ops"], p["token"], output.human_bytes(p["bytes"]),
                 p["file"] or f"(no .nnc: {p.get('no_file_reason') or 'none written'})"] for p in nnc["programs"]]
        if rows:
            lines.append("")
            lines.append(output.format_table(["subgraph", "ops", "token", "size", "file"], rows,
                                             right_align={0, 1, 3}))
    return "\n".join(lines)
