"""`nnadapter-bridge convert MODEL --cache-dir DIR`: compile a model's subgraphs into cached device programs.

It builds a predictor with the cache dir and runs it once on seeded random inputs of the given shapes
(the runtime writes `<cache dir>/<token>.nnc` after a program's first run), then lists every subgraph's
program: token, ops count, whether it was compiled now or restored from the cache, and its .nnc file and
size. A second convert with the same options restores everything from the cache. Progress goes to a
terminal's stderr while subgraphs compile.

It either compiles what it was asked to or exits non-zero saying why (exit 3): a device that cannot open, a
subgraph a device failed to compile (and that ran elsewhere), a .nnc that could not be written (a read-only or
full cache dir: the OS's reason is the message). A device without a model cache is said as such.

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the command plumbing and validation; the
predictor, the converters and the drivers only inside `run`, so building the parser loads none of them.
"""
from __future__ import annotations

import os
import time

from nnadapter_bridge.commands import model_config, options, output
from nnadapter_bridge.commands.channel import DeviceError, current, raise_for_device_fallbacks
from nnadapter_bridge.commands.options import CliError
from nnadapter_bridge.validation import inputs

NO_CACHE_SUPPORT = "do not support the model cache"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "convert", help="compile the subgraphs into cached device programs (<cache dir>/<token>.nnc)",
        description="Partition the model, convert and compile every device subgraph by running the model once on "
                    "seeded random inputs, and list the cache files (<cache dir>/<token>.nnc) the run wrote or "
                    "reused. A later predictor with the same cache dir, devices, context properties, partition "
                    "options and input shapes restores these programs instead of compiling them; with "
                    "--dynamic-shape it also needs the same dynamic shape info "
                    "(Config.set_nnadapter_dynamic_shape_info, or `run`/`bench --dynamic-shape` with the same "
                    "values), because the cache token is computed from it.")
    options.add_model_arguments(parser)
    options.add_device_arguments(parser)
    parser.add_argument("--cache-dir", metavar="DIR", required=True,
                        help="where the compiled programs go, as <DIR>/<token>.nnc (created if missing)")
    options.add_partition_arguments(parser)
    options.add_input_arguments(parser, files=False)
    options.add_dynamic_shape_argument(
        parser, help_tail="To restore the programs, a later predictor needs the same dynamic shape info "
                          "(`run`/`bench --dynamic-shape` with the same values). The run uses --input-shape if "
                          "given, else the first of these shapes")
    parser.add_argument("--export-subgraphs", metavar="DIR",
                        help="also write each compiled subgraph as its driver's inspectable form into DIR: ONNX "
                             "(microsoft_onnxruntime), OpenVINO IR of the compiled runtime model (intel_openvino), "
                             "the NNAdapter model as text (builtin_device); open them in Netron")
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    dynamic = options.dynamic_shape_info(args)
    given = options.dynamic_run_shapes(args, dynamic)
    if os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        raise CliError(f"--cache-dir {args.cache_dir}: exists and is not a directory")
    with output.one_line_warnings("convert"):
        config = model_config.build_config(args, cache_dir=args.cache_dir, dynamic_shape_info=dynamic or None)
        options.make_dir(args.cache_dir, "--cache-dir")
        if args.export_subgraphs:
            options.make_dir(args.export_subgraphs, "--export-subgraphs")
        start = time.perf_counter()
        predictor = model_config.open_predictor(config)
        prepared = time.perf_counter()
        try:
            arrays, _ = inputs.make_inputs(predictor, args, shapes=given)
            inputs.feed(predictor, arrays)
            since = len(current().warnings)
            predictor.run()
            finished = time.perf_counter()
            raise_for_device_fallbacks(since, what="nothing was compiled for it")
            programs = output.program_report(predictor)  # waits for the .nnc writes
            check_programs_written(programs)
            exported = None
            if args.export_subgraphs:
                from nnadapter_bridge.cli import export_subgraphs

                exported = export_subgraphs.export(programs, args.export_subgraphs, predictor)
        except BaseException:
            predictor.close()
            raise
    stats = predictor.stats
    data = {
        "model": predictor.graph.model_path or "<buffer>",
        "devices": predictor.device_names,
        "cache_dir": os.path.abspath(args.cache_dir),
        "input_shapes": {name: list(a.shape) for name, a in arrays.items()},
        "dynamic_shapes": dynamic,
        "num_subgraphs": stats.subgraphs,
        "num_host_ops": stats.host_ops,
        "compiled": stats.builds,
        "restored": stats.cache_hits_file + stats.cache_hits_buffer,
        "programs": programs,
        "exported": exported,
        "prepare_seconds": prepared - start,
        "run_seconds": finished - prepared,
    }
    predictor.close()
    if args.json:
        output.print_json(data)
        return 0
    output.print_text(render(data))
    return 0


def render(data: dict) -> str:
    lines = [f"model        {data['model']}",
             f"devices      {', '.join(data['devices'])}",
             f"cache dir    {data['cache_dir']}",
             "inputs       " + ", ".join(f"{n} [{', '.join(map(str, s))}]" for n, s in data["input_shapes"].items()),
             f"subgraphs    {data['num_subgraphs']} ({data['compiled']} compiled, {data['restored']} restored from "
             f"the cache); {data['num_host_ops']} host ops",
             f"time         {data['prepare_seconds'] * 1000:.0f} ms to partition, "
             f"{data['run_seconds'] * 1000:.0f} ms to convert, compile and run",
             ""]
    if not data["programs"]:
        lines.append("no device subgraphs: every op runs on the host, nothing to compile")
        return "\n".join(lines)
    if data.get("exported"):
        lines.extend(f"exported     subgraph {e['subgraph']} ({e['device']}): {', '.join(e['files'])}"
                     for e in data["exported"])
        lines.append("")
    rows = [[p["subgraph"], p["ops"], p["token"], p["source"], output.human_bytes(p["bytes"]),
             p["file"] or f"(no .nnc: {p.get('no_file_reason') or 'none written'})"] for p in data["programs"]]
    lines.append(output.format_table(["subgraph", "ops", "token", "program", "size", "file"], rows,
                                     right_align={0, 1, 4}))
    return "\n".join(lines)


def check_programs_written(programs: list) -> None:
    """Every compiled program has its .nnc, or a DeviceError with the reason the write failed (the warning the
    writer gave, which names the file and the OS's reason); a device without a model cache is noted instead."""
    channel = current()
    cache_warnings = channel.warnings_of("NncCacheWarning")
    for program in programs:
        if program["file"]:
            continue
        reasons = [w for w in cache_warnings if program["token"] in w]
        if reasons and all(NO_CACHE_SUPPORT in w for w in reasons):
            program["no_file_reason"] = "the device does not support the model cache"
            continue
        if program["source"] != "compiled":
            continue  # restored from a cache buffer: nothing was to be written
        why = reasons[0] if reasons else f"no .nnc was written for token {program['token']}"
        raise DeviceError(f"subgraph {program['subgraph']} was compiled, but its program could not be saved: {why}",
                          hint="give --cache-dir a writable directory with free space")
