"""`nnadapter-bridge inspect MODEL [--params FILE] [--json]`: what a Paddle model contains.

Format ("program_desc"; "pir" with its serialization version; "naive_buffer", Paddle Lite's `.nb`, with its
meta_version and opt_version), layout, inputs and outputs (names, shapes, dtypes), op-type histogram, op and block
counts, parameter count and bytes, and how long loading took.

Entry points: `register(subparsers)` (cli.main), `run(args)`, `summarize`. Imports the command plumbing and the
loader; never the predictor, the converters or a driver.
"""
from __future__ import annotations

import collections
import time

from nnadapter_bridge.commands import output
from nnadapter_bridge.loader import load_model


def register(subparsers) -> None:
    parser = subparsers.add_parser("inspect", help="show a Paddle model's inputs, outputs, ops and parameters",
                                   description="Load a Paddle inference model (a directory or a model file) and "
                                               "summarize it.")
    parser.add_argument("model", metavar="MODEL",
                        help="model directory, or a __model__ / .pdmodel / Paddle 3 PIR .json / Paddle Lite .nb file")
    parser.add_argument("--params", metavar="FILE", help="params file (or per-var directory) for a model file")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def summarize(graph, load_seconds: float) -> dict:
    """The inspect report as plain data (the --json output)."""
    histogram = collections.Counter(op.type for block in graph.blocks for op in block.ops)

    def describe(name):
        var = graph.var(name)
        return {"name": name, "shape": list(var.shape),
                "dtype": None if var.dtype is None else str(var.dtype)}

    report = {
        "format": graph.format,
        "format_version": graph.format_version,
        "layout": graph.layout,
        "inputs": [describe(n) for n in graph.inputs],
        "outputs": [describe(n) for n in graph.outputs],
        "op_types": dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
        "num_ops": graph.num_ops(),
        "num_blocks": len(graph.blocks),
        "params": {"count": len(graph.params), "bytes": graph.params_nbytes()},
        "load_seconds": load_seconds,
    }
    if graph.format == "naive_buffer":  # the .nb header: its format generation and the opt that wrote it
        report["meta_version"] = graph.format_version
        report["opt_version"] = getattr(graph, "opt_version", None)
    return report


def run(args) -> int:
    start = time.perf_counter()
    graph = load_model(args.model, args.params)
    report = summarize(graph, time.perf_counter() - start)
    if args.json:
        output.print_json(report)
        return 0
    print(_render(report, graph))
    return 0


def _render(report: dict, graph) -> str:
    lines = [f"model        {graph.model_path or '<buffer>'}",
             f"params       {graph.params_path or '-'}",
             f"format       {_format_label(report)}",
             f"layout       {report['layout']}",
             f"blocks       {report['num_blocks']}",
             f"ops          {report['num_ops']}",
             f"parameters   {report['params']['count']} ({output.human_bytes(report['params']['bytes'])})",
             f"load time    {report['load_seconds'] * 1000:.1f} ms",
             ""]
    for title, entries in (("inputs", report["inputs"]), ("outputs", report["outputs"])):
        lines.append(output.format_table([title, "shape", "dtype"],
                            [[e["name"], "[" + ", ".join(map(str, e["shape"])) + "]", e["dtype"] or "-"]
                             for e in entries]))
        lines.append("")
    lines.append(output.format_table(["op type", "count"], [[t, str(c)] for t, c in report["op_types"].items()],
                                     right_align={1}))
    return "\n".join(lines)


def _format_label(report: dict) -> str:
    if report["format"] == "naive_buffer":
        return (f"naive_buffer (Paddle Lite optimized model, meta_version {report['meta_version']}, written by opt "
                f"{report['opt_version']})")
    if report["format"] == "pir":
        return f"pir (Paddle 3 PIR program, serialization version {report['format_version']})"
    return "program_desc (legacy ProgramDesc protobuf)"
