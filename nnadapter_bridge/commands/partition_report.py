"""The partition of a model as plain data and as text: what `nnadapter-bridge partition` prints, what `run` shows
of its placements, and what the demos print.

`analyze(config)` partitions a Config's model as create_predictor does (subgraph.plan), without compiling;
`report(plan, placements)` turns a subgraph.plan.PartitionPlan into the summary data (subgraphs with the devices
taking them, host ops with the reason each one is not on a device, loop and branch body ops, the host share,
every op's placement, the picture); `render_summary`, `placement_tables` and `render_per_op` lay it out as
tables (commands.output.format_table); `check_strict` is `--strict`. Imports the subgraph floor, the host
executor (whether a host kernel can run an op) and partition; never validation or an application.
"""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from nnadapter_bridge.commands import output
from nnadapter_bridge.commands.options import CliError

if TYPE_CHECKING:  # the partition machinery is imported when a report is made, not when a command's parser is built
    from nnadapter_bridge.subgraph.plan import PartitionPlan


def analyze(config) -> PartitionPlan:
    """Partition the model named by `config` (a Config) the way create_predictor does; the plan's placements
    (asked of each device while the context is open) are in `plan.op_placements`."""
    from nnadapter_bridge.errors import DeviceNotFoundError
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.nnadapter.runtime import Context, acquire_device
    from nnadapter_bridge.predictor.settings import resolve_settings
    from nnadapter_bridge.subgraph.plan import plan_partition

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
        plan = plan_partition(resolve_settings(config), graph, context)
        for op in plan.host_ops:  # decide every host op now (forced ones too), while the context is open
            plan.support.verdict(op)
        plan.op_placements = plan.placements(context)
    finally:
        context.destroy()
    return plan


def report(plan: PartitionPlan, placements: list | None = None, body: list | None = None) -> dict:
    """The summary as plain data (the --json output). `placements`: subgraph.plan.OpPlacement per op (default:
    the plan's), e.g. a predictor's after a run, with the ops it moved to the host then; `body`: the
    subgraph.plan.BodyPlacement of the loop and branch bodies' ops, likewise."""
    from nnadapter_bridge.subgraph.plan import host_share, host_share_summary
    from partition import op_key
    from partition.dump import operator_line, operator_lines

    graph, result = plan.graph, plan.result
    no_host_kernel = _no_host_kernel(plan)
    forced = plan.forced_by()
    spec_lines = dict(zip((id(op) for op in result.ops), operator_lines(graph)))
    if placements is None:
        placements = plan.op_placements if plan.op_placements is not None else plan.placements()
    placed = {p.op.index: p for p in placements}
    if body is None:
        body = plan.body_placements()
    placed_in_body = {(b.block, b.op.index): b for b in body}
    subgraphs = []
    for s in result.every_subgraph():
        histogram = collections.Counter(op.type for op in s.ops)
        where = placed if not s.block else {index: placed_in_body[(block, index)]
                                            for block, index in placed_in_body if block == s.block}
        devices = collections.Counter(where[op.index].device or "host (moved at run time)" for op in s.ops
                                      if op.index in where)
        subgraphs.append({
            "index": s.index,
            "block": s.block,
            "devices": dict(devices.most_common()),
            "num_ops": len(s.ops),
            "op_types": dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
            "inputs": list(s.input_names),
            "outputs": list(s.output_names),
            "num_weights": len(s.weight_names),
            "ops": [spec_lines[id(op)] if id(op) in spec_lines else operator_line(op) for op in s.ops],
        })
    host_ops = []
    moved = {i for i, p in placed.items() if p.at_run}
    on_host = {id(op) for op in result.host_ops}
    for op in (op for op in result.ops if id(op) in on_host or op.index in moved):
        host_ops.append({
            "index": op.index,
            "type": op.type,
            "spec": spec_lines[id(op)],
            "reason": placed[op.index].reason if op.index in moved else plan.host_reason(op, forced),
            "at_run": op.index in moved,
            "forced": op_key(op) in forced,
            "host_kernel": op.type not in no_host_kernel,
            "declined": dict(placed[op.index].declined) if op.index in placed else {},
        })
    bodies = [dict(b.as_dict(), host_kernel=b.op.type not in no_host_kernel) for b in body]
    # Only for a policy by cost (subgraph.device_selection): "priority" reports what it always did.
    selection = {"device_selection": plan.selection.as_dict()} if plan.selection is not None else {}
    return selection | {
        "model": graph.model_path or "<buffer>",
        "devices": list(plan.device_names),
        "partition_config": plan.partition_config.source if plan.partition_config is not None else None,
        "num_ops": len(result.ops),
        "num_subgraphs": len(result.subgraphs),
        "num_body_subgraphs": len(result.every_subgraph()) - len(result.subgraphs),
        "ops_on_devices": sum(len(s.ops) for s in result.subgraphs) - len(moved),
        "num_host_ops": len(plan.host_ops) + len(moved),
        "subgraphs": subgraphs,
        "host_ops": host_ops,
        # The ops of loop and branch bodies (every block but 0): in a body subgraph, or on the host when the
        # control-flow op holding them runs them.
        "num_body_ops": len(bodies),
        "body_ops_on_devices": sum(1 for b in body if b.device is not None),
        "body_ops": bodies,
        "host_share": host_share_summary(host_share(graph, placements, body)),
        "placements": [p.as_dict() for p in placements],
        "picture": picture(plan, placements).as_dict(),
    }



def picture(plan: PartitionPlan, placements: list):
    """The readable picture of the partition (partition.picture)."""
    from partition import build_picture

    return build_picture(plan.graph, plan.result, {p.op.index: p.picture_placement() for p in placements},
                         plan.device_names)



def _no_host_kernel(plan: PartitionPlan) -> set:
    """The op types among the host ops and the ops of their loop and branch bodies that nothing on the host can
    run."""
    ops = plan.host_ops
    if not ops:
        return set()
    try:
        from nnadapter_bridge.host import HostExecutor
    except ImportError:
        return {op.type for op in ops}
    return set(HostExecutor(plan.graph, plan.device_names).unsupported_op_types(ops))



def check_strict(plan: PartitionPlan) -> None:
    """--strict: strict mode's UnsupportedOpError when an op not forced to the host is on the host, other than
    control flow (subgraph.plan.check_strict: a warning says it runs on the host)."""
    from nnadapter_bridge.subgraph.plan import check_strict as check_share
    from nnadapter_bridge.subgraph.plan import host_share

    share = host_share(plan.graph, plan.op_placements if plan.op_placements is not None else plan.placements(),
                       plan.body_placements())
    check_share(share, plan.device_names)



def render_summary(data: dict) -> str:
    """The readable form of report(): a header, the subgraph table, the host-op table, the host share."""
    lines = [f"model        {data['model']}",
             f"devices      {', '.join(data['devices'])}",
             f"config       {data['partition_config'] or '-'}",
             f"ops          {data['num_ops']} ({data['ops_on_devices']} on devices in {data['num_subgraphs']} "
             f"subgraph{'s' if data['num_subgraphs'] != 1 else ''}, {data['num_host_ops']} on the host, "
             "plus feed/fetch)" + (_bodies_line(data) if data.get("num_body_ops") else ""),
             ""]
    lines.extend(placement_tables(data))
    share = data["host_share"]
    if share["host_ops"]:
        flops = "" if share["flop_share"] is None else f", {share['flop_share']:.1%} of the estimated FLOPs"
        verdict = ("over the 5% limit: create_predictor warns (HostPlacementWarning)" if share["over_limit"]
                   else "within the 5% limit")
        bodies = ", loop and branch bodies included" if share.get("body_ops") else ""
        lines += ["", f"host share   {share['op_share']:.1%} of the ops{flops} (forced ones not counted{bodies}); "
                      f"{verdict}"]
    return "\n".join(lines)



def placement_tables(data: dict) -> list:
    """The subgraph table (with the device taking each) and the host-op table (with the reason, and why each
    device declines) of report() data: shared by `partition` and `run`."""
    from partition import HOST_ONLY_OP_TYPES

    lines = []
    several = len(data["devices"]) > 1
    if data["subgraphs"]:
        rows = [[s["index"], _devices(s["devices"]), s["num_ops"], _op_types(s["op_types"]), _names(s["inputs"]),
                 _names(s["outputs"])] for s in data["subgraphs"]]
        header, right = ["subgraph", "device", "ops", "op types", "inputs", "outputs"], {0, 2}
        if any(s.get("block") for s in data["subgraphs"]):  # loop or branch bodies' subgraphs: each one's block
            rows = [row[:1] + [s.get("block", 0)] + row[1:] for row, s in zip(rows, data["subgraphs"])]
            header, right = header[:1] + ["block"] + header[1:], {0, 1, 3}
        lines.append(output.format_table(header, rows, right_align=right))
    else:
        lines.append("no subgraphs: every op runs on the host")
    host = [h for h in data["host_ops"] if h["type"] not in HOST_ONLY_OP_TYPES]
    lines.append("")
    if host:
        header = ["op", "host op type", "host kernel", "why not on a device"]
        rows = []
        for h in host:
            reason = h["reason"]
            if several and h.get("declined") and not h["forced"]:
                reason = _declined(h["declined"])
            rows.append([h["index"], h["type"], "yes" if h["host_kernel"] else "NO", reason])
        lines.append(output.format_table(header, rows, right_align={0}))
    else:
        lines.append("no host ops: everything but feed/fetch runs on the devices")
    bodies = data.get("body_ops") or []
    if bodies:
        lines += ["", ("loop and branch bodies: each runs when the control-flow op holding its block runs it (on the "
                       "host: no NNAdapter device runs control flow), its subgraphs on the devices")]
        rows = [[b["block"], b["index"], b["type"], _body_where(b), "yes" if b["host_kernel"] else "NO", b["in"]]
                for b in bodies]
        lines.append(output.format_table(["block", "op", "body op type", "runs on", "host kernel", "in the body of"],
                                         rows, right_align={0, 1}))
    selection = data.get("device_selection")
    if selection is not None:  # --device-selection fastest / low_power: each subgraph's device order and why
        calibration = selection["calibration"]
        where = f" (calibration {calibration['path']})" if calibration else " (one device: nothing to choose)"
        lines += ["", f"device selection {selection['policy']}{where}"]
        for choice in selection["subgraphs"]:
            lines.append(f"  subgraph {choice['subgraph']}: {'>'.join(choice['order'])}, by {choice['decided_by']}: "
                         f"{choice['reason']}")
            for device, what in sorted((choice.get("faults") or {}).items()):
                lines.append(f"    {device} left out while it was timed: {what}")
    return lines



def render_per_op(data: dict) -> str:
    """--per-op: every op with its subgraph, device (or the host) and the devices that decline it."""
    rows = []
    for p in data["placements"]:
        where = p["device"] if p["device"] is not None else ("host (at run)" if p["at_run"] else "host")
        why = p["host_reason"] if p["device"] is None and (p["forced"] or not p["declined"]) else \
            _declined(p["declined"])
        rows.append([p["index"], p["type"], "-" if p["subgraph"] is None else p["subgraph"], where, why or "-"])
    return output.format_table(["op", "type", "subgraph", "runs on", "declined by / why on the host"], rows,
                               right_align={0, 2})



def _bodies_line(data: dict) -> str:
    """'; 18 more in loop and branch bodies, 15 of them on devices in 5 subgraphs' for the summary's ops line."""
    count = data["num_body_subgraphs"]
    return (f"; {data['num_body_ops']} more in loop and branch bodies, {data['body_ops_on_devices']} of them on "
            f"devices in {count} subgraph{'s' if count != 1 else ''}")



def _body_where(placed: dict) -> str:
    """'subgraph 4 on intel_openvino' / 'host' / 'host (at run)' for a body op of report()."""
    if placed["device"] is not None:
        return f"subgraph {placed['subgraph']} on {placed['device']}"
    return "host (at run)" if placed.get("at_run") else "host"



def _names(names: list, limit: int = 3) -> str:
    if not names:
        return "-"
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit})" if len(names) > limit else "")



def _op_types(histogram: dict, limit: int = 5) -> str:
    items = list(histogram.items())
    text = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in items[:limit])
    return text + (", ..." if len(items) > limit else "")



def _devices(counts: dict) -> str:
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{name} {n}" for name, n in counts.items())



def _declined(declined: dict) -> str:
    return "; ".join(f"{name}: {why}" for name, why in declined.items())
