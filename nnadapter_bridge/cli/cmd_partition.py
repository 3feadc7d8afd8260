"""`nnadapter-bridge partition MODEL`: how a model splits into device subgraphs and host ops.

Default output: one table row per subgraph (index, device(s) taking its ops, ops count, op types, boundary
inputs and outputs), one row per host op with the reason it is not on a device (feed/fetch, forced by a
partition config spec, the support decision's reason, or a cluster below --min-subgraph-size) and, with
several devices, why each of them declines it, and whether a host kernel can run it; one row per op of the loop
and branch bodies (every block but 0, nested ones too: they run on the host with the control-flow op), with its
block, whether a host kernel can run it and the control-flow op holding its block; then the host share
(subgraph.plan.HostShare: over 5% of the ops or FLOPs, create_predictor warns). `--per-op` lists every op
with its subgraph, device and the devices that decline it. `--strict` fails (exit 2) when an op not forced
there would run on the host, listing them as strict mode does. `--dump` prints Paddle Lite's debug dump
instead (`subgraph clusters: N`, DOT, `subgraph operators:`), whose op lines are valid partition config specs.
`--dot/--svg/--png` write the readable picture (partition.picture: boxes of ops by subgraph and device, host
ops with their reason, a legend); `--json` has the same picture under "picture", every op's placement
under "placements" and the body ops under "body_ops". `--strict` does not count control flow as declined (a
warning says it runs on the host: subgraph.plan.check_strict).

The partition is the one create_predictor computes (nnadapter_bridge.subgraph.plan: same support
decision, partition config and detector), but without requiring every host op to be runnable, so it
also explains models the predictor refuses.

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the command plumbing and the partition
report (the subgraph floor's plan); it builds no predictor and imports no driver module.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from nnadapter_bridge.commands import model_config, options, output
from nnadapter_bridge.commands.options import CliError
from nnadapter_bridge.commands.partition_report import (
    analyze,
    check_strict,
    picture,
    render_per_op,
    render_summary,
    report,
)

if TYPE_CHECKING:  # the partition machinery is imported when a command runs, not when the parser is built
    from nnadapter_bridge.subgraph.plan import PartitionPlan


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "partition", help="show which ops run on the devices (subgraphs) and which on the host, and why",
        description="Partition a Paddle model for the given NNAdapter devices, as create_predictor does, and "
                    "show the subgraphs and the host ops with the reason each one is not on a device. Nothing "
                    "is compiled or run.")
    options.add_model_arguments(parser)
    options.add_device_arguments(parser)
    options.add_partition_arguments(parser)
    parser.add_argument("--dump", action="store_true",
                        help="print Paddle Lite's exact debug dump (subgraph clusters, DOT, subgraph operators) "
                             "instead of the summary; with --json it is the 'dump' field")
    parser.add_argument("--per-op", action="store_true",
                        help="also list every op with its subgraph, the device that takes it and the devices "
                             "that decline it (and why)")
    parser.add_argument("--dot", metavar="F", help="write the partition picture as DOT text to F (runs of ops "
                                                   "per subgraph and device, host ops with their reason, a legend)")
    render = parser.add_mutually_exclusive_group()
    render.add_argument("--svg", metavar="F", help="render the partition picture to F as SVG (needs graphviz's dot)")
    render.add_argument("--png", metavar="F", help="render the partition picture to F as PNG (needs graphviz's dot)")
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def write_files(args, plan: PartitionPlan) -> list:
    from partition import render_picture

    written = []
    if not (args.dot or args.svg or args.png):
        return written
    text = picture(plan, plan.op_placements if plan.op_placements is not None else plan.placements()).dot()
    if args.dot:
        try:
            with open(args.dot, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise CliError(f"--dot {args.dot}: {exc.strerror or exc}") from exc
        written.append(args.dot)
    for fmt in ("svg", "png"):
        path = getattr(args, fmt)
        if path:
            render_picture(text, path, fmt)
            written.append(path)
    return written


def run(args) -> int:
    with output.one_line_warnings("partition"):
        config = model_config.build_config(args)
        plan = analyze(config)
        if config.strict:
            check_strict(plan)
        written = write_files(args, plan)
    if args.json:
        data = report(plan)
        if args.dump:
            from partition import dump_text

            data["dump"] = dump_text(plan.graph, plan.result)
        data["files"] = written
        output.print_json(data)
        return 0
    if args.dump:
        from partition import dump_text

        print(dump_text(plan.graph, plan.result), end="")
    else:
        data = report(plan)
        print(render_summary(data))
        if args.per_op:
            print()
            print(render_per_op(data))
    for path in written:
        print(f"wrote {path}")
    return 0


