"""`nnadapter-bridge partition MODEL`: how a model splits into device subgraphs and host ops.

Default output: one table row per subgraph (index, ops count, op types, boundary inputs and outputs) and
one row per host op with the reason it is not on a device (feed/fetch, forced by a partition config
spec, the support decision's reason, or a cluster below --min-subgraph-size), and whether a host kernel
can run it. `--dump` prints Paddle Lite's debug dump instead (`subgraph clusters: N`, DOT, `subgraph
operators:`), whose op lines are valid partition config specs. `--dot/--svg/--png` write the graph.

The partition is the one create_predictor computes (nnadapter_bridge.partition_plan: same support
decision, partition config and detector), but without requiring every host op to be runnable, so it
also explains models the predictor refuses.
"""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from nnadapter_bridge.cli import model_config, options, output
from nnadapter_bridge.cli.options import CliError

if TYPE_CHECKING:  # the partition machinery is imported when a command runs, not when the parser is built
    from nnadapter_bridge.partition_plan import PartitionPlan


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
    parser.add_argument("--dot", metavar="F", help="write the partition graph as DOT text to F")
    render = parser.add_mutually_exclusive_group()
    render.add_argument("--svg", metavar="F", help="render the partition graph to F as SVG (needs graphviz's dot)")
    render.add_argument("--png", metavar="F", help="render the partition graph to F as PNG (needs graphviz's dot)")
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def analyze(config) -> PartitionPlan:
    """Partition the model named by `config` (a Config) the way create_predictor does."""
    from nnadapter_bridge.errors import DeviceNotFoundError
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.nnadapter.runtime import Context, acquire_device
    from nnadapter_bridge.partition_plan import plan_partition

    graph = load_model(**config.model_source())
    devices = []
    for name in config.nnadapter_device_names():
        try:
            devices.append(acquire_device(name))
        except DeviceNotFoundError as exc:
            reason = str(exc).rsplit(" [", 1)[0]  # without the result code
            raise CliError(f"--device {name}: {reason}; `nnadapter-bridge devices` lists the installed "
                           "drivers") from exc
    context = Context(devices, config.nnadapter_context_properties())
    try:
        plan = plan_partition(config, graph, context)
        for op in plan.host_ops:  # decide every host op now (forced ones too), while the context is open
            plan.support.verdict(op)
    finally:
        context.destroy()
    return plan


def report(plan: PartitionPlan) -> dict:
    """The summary as plain data (the --json output)."""
    from partition import op_key
    from partition.dump import operator_lines

    graph, result = plan.graph, plan.result
    no_host_kernel = _no_host_kernel(plan)
    forced = plan.forced_by()
    spec_lines = dict(zip((id(op) for op in result.ops), operator_lines(graph)))
    subgraphs = []
    for s in result.subgraphs:
        histogram = collections.Counter(op.type for op in s.ops)
        subgraphs.append({
            "index": s.index,
            "num_ops": len(s.ops),
            "op_types": dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
            "inputs": list(s.input_names),
            "outputs": list(s.output_names),
            "num_weights": len(s.weight_names),
            "ops": [spec_lines[id(op)] for op in s.ops],
        })
    host_ops = []
    for op in result.host_ops:
        host_ops.append({
            "index": op.index,
            "type": op.type,
            "spec": spec_lines[id(op)],
            "reason": plan.host_reason(op, forced),
            "forced": op_key(op) in forced,
            "host_kernel": op.type not in no_host_kernel,
        })
    return {
        "model": graph.model_path or "<buffer>",
        "devices": list(plan.device_names),
        "partition_config": plan.partition_config.source if plan.partition_config is not None else None,
        "num_ops": len(result.ops),
        "num_subgraphs": len(result.subgraphs),
        "ops_on_devices": sum(len(s.ops) for s in result.subgraphs),
        "num_host_ops": len(plan.host_ops),
        "subgraphs": subgraphs,
        "host_ops": host_ops,
    }


def _no_host_kernel(plan: PartitionPlan) -> set:
    """The op types among the host ops that nothing on the host can run."""
    ops = plan.host_ops
    if not ops:
        return set()
    try:
        from nnadapter_bridge.host import HostExecutor
    except ImportError:
        return {op.type for op in ops}
    return set(HostExecutor(plan.graph, plan.device_names).unsupported_op_types(ops))


def write_files(args, plan: PartitionPlan) -> list:
    from partition import render, write_dot

    written = []
    if args.dot:
        try:
            write_dot(plan.graph, plan.result, args.dot)
        except OSError as exc:
            raise CliError(f"--dot {args.dot}: {exc.strerror or exc}") from exc
        written.append(args.dot)
    for fmt in ("svg", "png"):
        path = getattr(args, fmt)
        if path:
            render(plan.graph, plan.result, path, fmt)
            written.append(path)
    return written


def run(args) -> int:
    with output.one_line_warnings("partition"):
        config = model_config.build_config(args)
        plan = analyze(config)
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
        print(render_summary(report(plan)))
    for path in written:
        print(f"wrote {path}")
    return 0


def _names(names: list, limit: int = 3) -> str:
    if not names:
        return "-"
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit})" if len(names) > limit else "")


def _op_types(histogram: dict, limit: int = 5) -> str:
    items = list(histogram.items())
    text = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in items[:limit])
    return text + (", ..." if len(items) > limit else "")


def render_summary(data: dict) -> str:
    """The readable form of report(): a header, the subgraph table, the host-op table."""
    from partition import HOST_ONLY_OP_TYPES

    lines = [f"model        {data['model']}",
             f"devices      {', '.join(data['devices'])}",
             f"config       {data['partition_config'] or '-'}",
             f"ops          {data['num_ops']} ({data['ops_on_devices']} on devices in {data['num_subgraphs']} "
             f"subgraph{'s' if data['num_subgraphs'] != 1 else ''}, {data['num_host_ops']} on the host, "
             "plus feed/fetch)",
             ""]
    if data["subgraphs"]:
        rows = [[s["index"], s["num_ops"], _op_types(s["op_types"]), _names(s["inputs"]), _names(s["outputs"])]
                for s in data["subgraphs"]]
        lines.append(output.format_table(["subgraph", "ops", "op types", "inputs", "outputs"], rows,
                                         right_align={0, 1}))
    else:
        lines.append("no subgraphs: every op runs on the host")
    host = [h for h in data["host_ops"] if h["type"] not in HOST_ONLY_OP_TYPES]
    lines.append("")
    if host:
        rows = [[h["index"], h["type"], "yes" if h["host_kernel"] else "NO", h["reason"]] for h in host]
        lines.append(output.format_table(["op", "host op type", "host kernel", "why not on a device"], rows,
                                         right_align={0}))
    else:
        lines.append("no host ops: everything but feed/fetch runs on the devices")
    return "\n".join(lines)
