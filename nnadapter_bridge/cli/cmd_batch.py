"""`nnadapter-bridge batch MANIFEST`: convert and validate many models on many devices (docs/batch.md).

Every entry of the manifest (a model, its devices, context properties, input shapes, partition config,
reference files) is converted and compiled into the cache (`.nnc` per subgraph), run, and compared with
Paddle Inference or the reference outputs at the whole-model tolerance. Entries are independent tasks run
in a local process pool (`--jobs N`) or on Ray (`--ray [ADDRESS]`); each result is written to
`<out>/entries/<id>.json` as it finishes, so a rerun skips what is done and an interrupted batch resumes.
Prints a summary table (or `--json`, the report), writes `<out>/report.json` and `<out>/report.md`.
Exit status 0 when every entry passes, 1 otherwise, 2 for a manifest or option error.

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the command plumbing and validation; the
batch package, the predictor, the converters and the drivers only inside `run`, so building the parser loads none of
them.
"""
from __future__ import annotations

import os

from nnadapter_bridge.commands import options, output
from nnadapter_bridge.commands.options import CliError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "batch", help="convert and validate a manifest of models x devices (local process pool or Ray)",
        description="Convert, compile (into the model cache) and validate every entry of a manifest (YAML or "
                    "JSON; docs/batch.md): each model on its devices, against Paddle Inference or reference "
                    "outputs. Entries already done (same entry key, result recorded, .nnc files present and "
                    "valid) are skipped, so an interrupted batch resumes where it stopped.")
    parser.add_argument("manifest", metavar="MANIFEST", help="the manifest file (.yaml, .yml or .json)")
    parser.add_argument("--out", metavar="DIR", default="batch-out",
                        help="output dir: entries/<id>.json, report.json, report.md, partitions/, batch.log "
                             "(default: batch-out)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="the model cache the .nnc files go to (default: <out>/cache); on Ray without "
                             "--collect-programs, a path every node sees")
    parser.add_argument("--jobs", metavar="N", type=int, default=os.cpu_count() or 1,
                        help="tasks at once: local worker processes, or the CPUs of a local Ray; 0 runs the "
                             "entries one by one in this process (default: the number of CPUs)")
    parser.add_argument("--ray", metavar="ADDRESS", nargs="?", const="", default=None,
                        help="run the tasks on Ray (needs nnadapter-bridge[ray]): ADDRESS of a running cluster "
                             "('auto' for the local one, 'ray://host:10001'); without ADDRESS a local Ray with "
                             "--jobs CPUs is started for the batch")
    parser.add_argument("--resources", metavar="DEVICE=RESOURCE[:AMOUNT]", action="append", default=[],
                        help="with --ray: tasks for DEVICE ask for AMOUNT (default 1) of the custom Ray resource "
                             "RESOURCE, so they land on nodes that have the device (repeatable)")
    parser.add_argument("--collect-programs", action="store_true",
                        help="with --ray: each task compiles into a private dir and returns its .nnc files, which "
                             "this process writes into the cache dir (for clusters without a shared file system)")
    parser.add_argument("--retry-failed", action="store_true",
                        help="also redo entries whose recorded result is a failure or an error")
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from nnadapter_bridge.batch import InlineEngine, LocalEngine, RayEngine, parse_resources, run_batch

    if args.jobs < 0:
        raise CliError(f"--jobs {args.jobs}: must be 0 or more")
    if not os.path.isfile(args.manifest):
        raise CliError(f"{args.manifest}: no such manifest file")
    if args.ray is None and (args.resources or args.collect_programs):
        raise CliError("--resources and --collect-programs need --ray")
    if args.ray is not None:
        engine = RayEngine(args.ray or None, args.jobs or 1, parse_resources(args.resources))
    elif args.jobs == 0:
        engine = InlineEngine()
    else:
        engine = LocalEngine(args.jobs)
    options.make_dir(args.out, "--out")
    if args.cache_dir:
        options.make_dir(args.cache_dir, "--cache-dir")
    with output.one_line_warnings("batch"):
        report = run_batch(args.manifest, args.out, engine=engine, cache_dir=args.cache_dir,
                           collect_programs=args.collect_programs, retry_failed=args.retry_failed)
    if args.json:
        output.print_json(report)
    else:
        from nnadapter_bridge.batch.report import render_summary

        output.print_text(render_summary(report))
    return 0 if report["passed"] else 1
