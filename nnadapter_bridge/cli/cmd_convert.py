"""`nnadapter-bridge convert MODEL --cache-dir DIR`: compile a model's subgraphs into cached device programs.

It builds a predictor with the cache dir and runs it once on seeded random inputs of the given shapes
(the runtime writes `<cache dir>/<token>.nnc` after a program's first run), then lists every subgraph's
program: token, ops count, whether it was compiled now or restored from the cache, and its .nnc file and
size. A second convert with the same options restores everything from the cache. Progress goes to a
terminal's stderr while subgraphs compile.
"""
from __future__ import annotations

import os
import time

from nnadapter_bridge.cli import inputs, model_config, options, output
from nnadapter_bridge.cli.options import CliError


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
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from nnadapter_bridge.predictor import create_predictor

    dynamic = options.dynamic_shape_info(args)
    given = options.dynamic_run_shapes(args, dynamic)
    if os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        raise CliError(f"--cache-dir {args.cache_dir}: exists and is not a directory")
    with output.one_line_warnings("convert"):
        config = model_config.build_config(args, cache_dir=args.cache_dir, dynamic_shape_info=dynamic or None)
        options.make_dir(args.cache_dir, "--cache-dir")
        start = time.perf_counter()
        predictor = create_predictor(config)
        prepared = time.perf_counter()
        arrays, _ = inputs.make_inputs(predictor, args, shapes=given)
        inputs.feed(predictor, arrays)
        predictor.run()
        finished = time.perf_counter()
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
        "programs": output.program_report(predictor),
        "prepare_seconds": prepared - start,
        "run_seconds": finished - prepared,
    }
    predictor.close()
    if args.json:
        output.print_json(data)
        return 0
    print(render(data))
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
        lines.append("no device subgraphs: nothing to compile")
        return "\n".join(lines)
    rows = [[p["subgraph"], p["ops"], p["token"], p["source"], output.human_bytes(p["bytes"]),
             p["file"] or "(no .nnc: the device does not support the model cache)"] for p in data["programs"]]
    lines.append(output.format_table(["subgraph", "ops", "token", "program", "size", "file"], rows,
                                     right_align={0, 1, 4}))
    return "\n".join(lines)
