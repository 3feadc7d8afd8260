"""The partition plan of a model for a predictor's settings: which ops run on the devices, which on the host, and why.

Owns `plan_partition` (the support decision, the partition config and the detector with the minimum subgraph size:
one computation for create_predictor and `nnadapter-bridge partition`), `PartitionPlan` with its per-op
`placements` and loop/branch `body_placements`, the host share (`host_share`, `HostShare`, `host_share_message`),
strict mode's checks (`check_strict`, `strict_error`) and the warnings `HostPlacementWarning` and
`ControlFlowOnHostWarning`. Entry points: `plan_partition`, `check_strict`, `host_share`.

Imports the support decisions, the cache key and partition; never the engine, the predictor or anything above.
docs/architecture.md ("The partition plan") tells placement with several devices, control flow and the host share.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import TYPE_CHECKING

from nnadapter_bridge.errors import BridgeError, UnsupportedOpError
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.subgraph import cache_key, plan_store
from nnadapter_bridge.subgraph.support_decisions import SupportDecider, VerdictStore
from partition import (
    HOST_ONLY_OP_TYPES,
    PartitionConfig,
    PartitionResult,
    body_ops,
    detect_subgraphs,
    op_key,
    sub_block_indices,
)

if TYPE_CHECKING:
    from partition.picture import Placement

# More than this share of a model's ops (or of its estimated FLOPs) on the host, devices named: a loud warning.
HOST_SHARE_LIMIT = 0.05


# Why a control-flow op is on the host: no NNAdapter operation expresses a loop or a branch over a block of ops, so
# no device runs one; the op runs on the host executor, which runs its body: the body's subgraphs on the devices (the
# detector partitions every body), its other ops on the host. Not a device declining an op.
CONTROL_FLOW_REASON = ("control flow: no NNAdapter device runs a loop or a branch, so it runs on the host; its body's "
                       "ops run on the devices that take them")


class ControlFlowOnHostWarning(UserWarning):
    """Strict mode and a model with control flow (while, conditional_block): those ops and their bodies run on the
    host because no NNAdapter device runs control flow, not because a device declined them; strict mode accepts
    them and says so once (check_strict)."""


class HostPlacementWarning(UserWarning):
    """More than a trivial part of a model runs on the host although devices were named (module docstring):
    one per predictor, listing the host ops by type with the reason each one is not on a device."""


class NoDeviceSupport:
    """The support decision when no listed device could be opened: nothing is supported."""

    def __init__(self, device_names, reason: str | None = None):
        self.reason_text = reason or f"none of the devices {', '.join(device_names) or '(none listed)'} could be opened"
        self.reasons: dict = {}
        self.conversions = 0
        self.restored = 0

    def is_supported(self, op) -> bool:
        self.reasons.setdefault(op.type, self.reason_text)
        return False

    def reason(self, op) -> str:
        return self.reason_text


@plain_dataclass
class PartitionPlan:
    """The partition of a model for some devices, with the support decisions behind it."""

    graph: object
    result: PartitionResult
    support: SupportDecider
    partition_config: PartitionConfig | None
    min_subgraph_size: int
    device_names: list
    # placements() asked of the open context, kept for when it is closed (`nnadapter-bridge partition`).
    op_placements: list | None = None
    # The device order of each subgraph (subgraph.device_selection.DeviceSelection) for the policies "fastest" and
    # "low_power"; None: "priority", the listed order.
    selection: object = None

    def device_order(self, index: int) -> tuple | None:
        """The order of the devices subgraph `index` runs with; None: the listed order."""
        return self.selection.order_for(index) if self.selection is not None else None

    def device_choice(self, index: int):
        """Subgraph `index`'s device_selection.SubgraphChoice (its candidates; the contested ones are timed on the
        first run); None for "priority"."""
        return self.selection.choice_for(index) if self.selection is not None else None

    @property
    def host_ops(self) -> list:
        """The ops of block 0 left on the host, feed/fetch excluded (the predictor handles those)."""
        return [op for op in self.result.host_ops if op.type not in HOST_ONLY_OP_TYPES]

    def forced_by(self) -> dict:
        """op key -> the first config spec that forced it to the host ('source:line: text')."""
        found = {}
        if self.partition_config is None:
            return found
        for match in self.partition_config.match_specs(self.result.ops):
            where = f"{self.partition_config.source}:{match.spec.line}: '{match.spec.text}'"
            for key in match.op_keys:
                found.setdefault(key, where)
        return found

    def host_reason(self, op, forced: dict) -> str:
        """Why `op` is on the host; `forced` is forced_by()."""
        if op.type in HOST_ONLY_OP_TYPES:
            return "feed/fetch: the predictor handles it"
        key = op_key(op)
        if not getattr(op, "block_idx", 0) and key in forced:  # op keys name block-0 ops (a body's repeat them)
            return f"forced to the host by the partition config ({forced[key]})"
        if sub_block_indices(op):
            return CONTROL_FLOW_REASON
        reason = self.support.reason(op)
        if reason:
            return reason
        return f"supported, but its cluster has fewer than {self.min_subgraph_size} ops (--min-subgraph-size)"

    def placements(self, context=None) -> list:
        """One OpPlacement per op of block 0 (feed/fetch excluded), in program order (module docstring). With
        several devices, `context` (the open Context the plan was made with) is asked which device takes each
        op; without it, an op on the devices is on "the listed devices" (their names joined by '|')."""
        forced = self.forced_by()
        names = list(context.device_names) if context is not None else list(self.device_names)
        per_device = _DeviceVerdicts(self.support, context) if context is not None and len(names) > 1 else None
        found = []
        for op in self.result.ops:
            if op.type in HOST_ONLY_OP_TYPES:
                continue
            index = self.result.subgraph_index_of(op)
            if index is not None:
                declined = per_device.declined(op) if per_device is not None else {}
                takers = [n for n in (self.device_order(index) or names) if n not in declined]
                # The first device taking all its operations; none (each declines some): the runtime splits them.
                device = takers[0] if takers and per_device is not None else "|".join(names)
                found.append(OpPlacement(op, index, device, "", False, declined))
                continue
            reason = self.host_reason(op, forced)
            is_forced = op_key(op) in forced
            control_flow = bool(sub_block_indices(op))
            if is_forced or control_flow or self.support.reason(op) is None:
                declined = {}  # forced, control flow (no device was asked), or supported in a cluster below the minimum
            elif per_device is not None:
                declined = per_device.declined(op) or {n: reason for n in names}
            else:
                declined = {n: reason for n in names}
            found.append(OpPlacement(op, None, None, reason, is_forced, declined, control_flow=control_flow))
        return found

    def body_placements(self, moved: dict | None = None) -> list:
        """One BodyPlacement per op of the loop and branch bodies (every block but 0, nested ones too), grouped
        by the control-flow op of block 0 holding them, in program order: in a body subgraph on the devices, or on
        the host with the reason. `moved`: (block, op index) -> why, for body ops moved to the host at run time."""
        moved = moved or {}
        forced = self.forced_by()
        found = []
        for holder in self.result.ops:
            if not sub_block_indices(holder):
                continue
            holders = {idx: holder for idx in sub_block_indices(holder)}
            for op in body_ops(self.graph, holder):
                for idx in sub_block_indices(op):  # a nested loop or branch: its blocks' holder
                    holders.setdefault(idx, op)
                index = self.result.subgraph_index_of(op)
                at_run = moved.get((op.block_idx, op.index))
                if index is not None and at_run is None:
                    order = self.device_order(index)
                    device = order[0] if order else "|".join(self.device_names)
                    found.append(BodyPlacement(op, op.block_idx, holders[op.block_idx], holder, index, device))
                    continue
                why = at_run if at_run is not None else self.host_reason(op, forced)
                found.append(BodyPlacement(op, op.block_idx, holders[op.block_idx], holder, index, None, why,
                                           at_run is not None))
        return found


@plain_dataclass
class OpPlacement:
    """Where one Paddle op runs: subgraph and device, or the host with the reason; `declined`: device -> why it
    does not take the op (only the devices that decline it). `at_run`: moved to the host when its subgraph
    could not be compiled or run (set by the predictor after a run)."""

    op: object
    subgraph: int | None
    device: str | None  # None: the host
    reason: str  # why on the host ("" on a device)
    forced: bool  # the partition config keeps it on the host
    declined: dict
    at_run: bool = False
    control_flow: bool = False  # a while / conditional_block: on the host because no device runs control flow

    def picture_placement(self) -> Placement:
        from partition.picture import Placement  # the drawing code loads only to draw (partition/__init__)

        return Placement(self.subgraph, self.device, self.reason, self.forced)

    def as_dict(self) -> dict:
        return {"index": self.op.index, "type": self.op.type, "op": self.op.label(), "subgraph": self.subgraph,
                "device": self.device, "host_reason": self.reason or None, "forced": self.forced,
                "declined": dict(self.declined), "at_run": self.at_run, "control_flow": self.control_flow}


@plain_dataclass
class BodyPlacement:
    """An op of a loop or branch body (PartitionPlan.body_placements): in one of the body's subgraphs, which runs on
    the devices each time the control-flow op holding its block runs the body, or on the host with `why`.
    `holder`: the op whose sub-block is `block` (a nested loop's own op for a nested body); `top`: the control-flow
    op of block 0 it is under; `at_run`: moved to the host when its subgraph could not be compiled or run."""

    op: object
    block: int
    holder: object
    top: object
    subgraph: int | None = None
    device: str | None = None  # None: the host
    why: str = ""
    at_run: bool = False

    forced = False  # the partition config names block-0 ops only

    @property
    def control_flow(self) -> bool:
        """A loop or branch nested in the body: on the host as every control-flow op."""
        return bool(sub_block_indices(self.op))

    @property
    def reason(self) -> str:
        """Why it is on the host ("" on a device)."""
        return f"in the body of {self.holder.label()}: {self.why}" if self.device is None else ""

    def as_dict(self) -> dict:
        return {"block": self.block, "index": self.op.index, "type": self.op.type, "op": self.op.label(),
                "in": self.holder.label(), "in_type": self.holder.type, "under": self.top.label(),
                "subgraph": self.subgraph, "device": self.device, "host_reason": self.reason or None,
                "at_run": self.at_run}


class _DeviceVerdicts:
    """Each listed device's answer on each op, asked one device at a time (PartitionPlan.placements), once per
    op signature."""

    def __init__(self, support, context):
        self.support = support
        self.context = context
        self._memo: dict = {}

    def declined(self, op) -> dict:
        """device -> why it declines `op` (the NNAdapter operations it does not accept), for each device that
        does; {} when every device takes it."""
        scratch = getattr(self.support, "scratch_model", None)
        if scratch is None:  # NoDeviceSupport: no context to ask
            return {}
        found = self._memo.get(self.support.signature(op))
        if found is None:
            found = self._ask(op, scratch)
            self._memo[self.support.signature(op)] = found  # the signature it was asked with (_ask may refine it)
        folded_values = getattr(self.support, "folded_values", None)
        if found and folded_values is not None and self.support.verdict(op).supported:
            # Accepted once the values that depend only on the input sizes are constants (by op, not by signature:
            # support_decisions.SupportDecider._folded_verdict): each device is asked so.
            values = folded_values(op)
            if values is not None:
                found = self._ask_folded(op, values, found)
        return found

    def _ask_folded(self, op, values: dict, declined: dict) -> dict:
        from nnadapter_bridge.subgraph.support_decisions import FOLDS_AWAY

        key = (self.support.signature(op), tuple(sorted(
            (name, value.dtype.str, value.shape, value.tobytes()) if hasattr(value, "tobytes") else (name, value)
            for name, value in values.items())))
        found = self._memo.get(key)
        if found is None:
            if values.get(FOLDS_AWAY):
                found = {}  # converted into constants: no device runs anything of it
            else:
                model, refusal = self.support.folded_scratch(op, values)
                found = declined if refusal is not None else self._declined_by(model)
                found = {name: why for name, why in found.items() if name in declined}
            self._memo[key] = found
        return found

    def _ask(self, op, scratch) -> dict:
        model, refusal = scratch(op)
        refine = getattr(self.support, "refine", None)
        if refusal is not None and refine is not None and refine(op):
            # Decided with the sizes its declarations fix (support_decisions.infer_block_dims), which a verdict
            # recorded at an earlier start does not say: asked so too.
            model, refusal = scratch(op)
        names = self.context.device_names
        declined = {n: refusal.reason for n in names} if refusal is not None else self._declined_by(model)
        concrete_scratch = getattr(self.support, "concrete_scratch", None)
        if declined and concrete_scratch is not None:
            # As SupportDecider._accepted_once_concrete: a program is compiled for concrete input sizes, so a device
            # that takes the op once its unknown declared dims are concrete takes it (SegFormer's spatial-reduction
            # convs: google_xnnpack checks TFLite's window against the output, which needs the spatial dims).
            concrete = concrete_scratch(op, refused=refusal is not None)
            if concrete is not None:
                still = self._declined_by(concrete)
                declined = {n: why for n, why in declined.items() if n in still}
        return declined

    def _declined_by(self, model) -> dict:
        """device -> why it declines operations of `model`, for each device that does."""
        declined = {}
        for k, name in enumerate(self.context.device_names):
            try:
                flags = self.context.validate(model, k)
            except BridgeError as exc:
                declined[name] = f"could not validate it: {exc}"
                continue
            if flags is None:  # the device cannot tell: it is assumed to take everything, as the runtime does
                continue
            rejected = [i for i, ok in enumerate(flags) if not ok]
            if rejected:
                why = self._driver_reasons(k, model)
                declined[name] = "does not accept " + ", ".join(dict.fromkeys(
                    model.operations[i].type.name + (f" ({why[i]})" if why and why[i] else "") for i in rejected))
        return declined

    def _driver_reasons(self, k: int, model) -> list | None:
        """The reasons of device k's optional `unsupported_reasons(context, model)` hook (one string per operation,
        "" when accepted), or None without one; an explanation only: validate_program decided."""
        hook = getattr(self.context.devices[k].driver, "unsupported_reasons", None)
        if hook is None:
            return None
        try:
            reasons = [str(r or "") for r in hook(self.context.device_contexts[k], model)]
        except Exception:  # the hook only explains; a failing one explains nothing
            return None
        return reasons if len(reasons) == len(model.operations) else None


# -- how much runs on the host ----------------------------------------------------------------------------
_CONV_TYPES = frozenset({"conv2d", "depthwise_conv2d", "conv3d", "fused_conv2d", "conv2d_fusion"})
_CONV_TRANSPOSE_TYPES = frozenset({"conv2d_transpose", "depthwise_conv2d_transpose", "conv3d_transpose"})
_MATMUL_TYPES = frozenset({"matmul", "matmul_v2", "mul", "fc"})


def _block_dims(graph, name: str, block: int) -> tuple | None:
    if name in graph.params:
        return tuple(int(d) for d in graph.params[name].shape)
    try:
        var = graph.var(name, block)
    except Exception:  # a var the model does not declare: no estimate
        return None
    return tuple(int(d) for d in var.shape) if var.dtype is not None else None


def _batch_known(dims: tuple | None) -> tuple | None:
    """`dims` with an unknown batch (axis 0) counted as 1; None when another axis is unknown."""
    if dims is None or any(d < 0 for d in dims[1:]):
        return None
    return (max(dims[0], 1),) + dims[1:] if dims else dims


def _first(op, slots) -> str | None:
    for slot in slots:
        names = op.inputs.get(slot) or op.outputs.get(slot)
        if names:
            return names[0]
    return None


def op_flops(graph, op) -> int | None:
    """The multiply-adds x2 of a convolution, matrix product or fused RNN from its declared shapes (an unknown batch
    counts as 1); None for other ops and when a shape it needs is unknown. An op of a loop or branch body is counted
    once (the number of iterations is not known before a run)."""
    block = getattr(op, "block_idx", 0)
    if op.type in _CONV_TYPES or op.type in _CONV_TRANSPOSE_TYPES:
        weight = _block_dims(graph, _first(op, ("Filter",)) or "", block)
        spatial_of = _first(op, ("Input",) if op.type in _CONV_TRANSPOSE_TYPES else ("Output",))
        shape = _batch_known(_block_dims(graph, spatial_of, block)) if spatial_of else None
        if not weight or any(d < 0 for d in weight) or not shape or len(shape) < 3:
            return None
        # Output (input for a transposed conv) positions x batch x every weight element: one multiply-add each.
        return 2 * math.prod(weight) * math.prod(shape[2:]) * shape[0]
    if op.type in _MATMUL_TYPES:
        x = _block_dims(graph, _first(op, ("X", "Input")) or "", block)
        out = _batch_known(_block_dims(graph, _first(op, ("Out",)) or "", block))
        if not x or not out:
            return None
        if op.type in ("mul", "fc"):  # X flattened at x_num_col_dims / in_num_col_dims: K is the rest
            axis = int(op.attrs.get("x_num_col_dims", op.attrs.get("in_num_col_dims", 1)))
            reduced = math.prod(x[axis:]) if all(d >= 0 for d in x[axis:]) else -1
        else:
            trans_x = bool(op.attrs.get("trans_x", op.attrs.get("transpose_X", False)))
            reduced = x[-2] if trans_x and len(x) >= 2 else x[-1]
        if reduced < 0:
            return None
        return 2 * math.prod(out) * reduced
    if op.type == "rnn":  # Paddle's fused RNN, time-major [T, N, I]: every weight matrix at every step and sample
        shape = _block_dims(graph, _first(op, ("Input",)) or "", block)
        weights = [_block_dims(graph, name, block) for name in op.inputs.get("WeightList", [])]
        if not shape or len(shape) != 3 or shape[0] < 0 or any(w is None for w in weights):
            return None
        return 2 * shape[0] * max(shape[1], 1) * sum(math.prod(w) for w in weights if len(w) == 2)
    return None


@plain_dataclass
class HostShare:
    """How much of a model runs on the host (module docstring). The ops the partition config forces there are
    listed but do not count towards the limit: the user asked for them."""

    total_ops: int  # block 0's (feed/fetch left out) and those of the loop and branch bodies
    host: list  # OpPlacement of every host op of block 0 (forced ones included), in program order
    declined_ops: int  # host ops not forced there, and the ops of their loop and branch bodies on the host
    total_flops: int  # over the convolutions and matrix products whose shapes are known
    host_flops: int  # of those, on the host and not forced
    at_run: int  # ops moved to the host at run time (their subgraph could not be compiled or run)
    body_ops: int = 0  # ops of the bodies of the control-flow ops not forced there, on the host, nested ones too
    # BodyPlacement of every body op on the host under a control-flow op not forced there (host_share's `body`)
    body_host: list = dataclasses.field(default_factory=list)

    @property
    def forced_ops(self) -> int:
        """Host ops the partition config keeps there (block 0's)."""
        return sum(1 for p in self.host if p.forced)

    @property
    def op_share(self) -> float:
        return self.declined_ops / self.total_ops if self.total_ops else 0.0

    @property
    def flop_share(self) -> float | None:
        return self.host_flops / self.total_flops if self.total_flops else None

    @property
    def over_limit(self) -> bool:
        return (self.at_run > 0 or self.op_share > HOST_SHARE_LIMIT
                or (self.flop_share is not None and self.flop_share > HOST_SHARE_LIMIT))


def host_share(graph, placements: list, body: list | None = None) -> HostShare:
    """The HostShare of `placements` (PartitionPlan.placements, with the run-time moves the predictor adds) and `body`
    (PartitionPlan.body_placements, likewise): the ops of the loop and branch bodies count too, those on the host
    with their control-flow op (forced there with it, or not). Without `body`, every body op counts as on the
    host."""
    host = [p for p in placements if p.device is None]
    declined = [p for p in host if not p.forced]
    if body is None:
        bodies = {id(p): [(op, True) for op in body_ops(graph, p.op)] for p in host if p.control_flow}
    else:
        bodies = {}
        for b in body:
            bodies.setdefault(id(b.top), []).append((b.op, b.device is None))
        bodies = {id(p): bodies.get(id(p.op), []) for p in host if p.control_flow}
    total_flops = host_flops = 0
    for p in placements:
        for op, on_host in [(p.op, p.device is None)] + bodies.get(id(p), []):
            flops = op_flops(graph, op)
            if flops is None:
                continue
            total_flops += flops
            if on_host and p.device is None and not p.forced:
                host_flops += flops
    every_body = sum(len(ops) for ops in bodies.values())
    body_host = sum(on_host for p in declined if p.control_flow for _, on_host in bodies[id(p)])
    moved_in_bodies = sum(1 for b in body or () if b.at_run)
    free = {id(p.op) for p in declined if p.control_flow}
    return HostShare(len(placements) + every_body, host, len(declined) + body_host, total_flops, host_flops,
                     sum(1 for p in host if p.at_run) + moved_in_bodies, body_host,
                     [b for b in body or () if b.device is None and id(b.top) in free])


def host_ops_by_reason(host: list, limit: int = 12) -> list:
    """'  conv2d (x3, first conv2d#5 (out: c)): reason' lines, one per (op type, reason), most ops first (forced
    ones last); at most
    `limit` lines, then one line counting the rest."""
    groups: dict = {}
    for p in host:
        groups.setdefault((p.op.type, p.reason), []).append(p)
    # The ops the devices declined first (most first), those the partition config forced last.
    ordered = sorted(groups.items(), key=lambda kv: (kv[1][0].forced, -len(kv[1]), kv[0]))
    lines = []
    for (op_type, reason), found in ordered[:limit]:
        first = f"first {found[0].op.label()}" if len(found) > 1 else found[0].op.label()
        lines.append(f"  {op_type} (x{len(found)}, {first}): {reason}")
    rest = ordered[limit:]
    if rest:
        lines.append(f"  ... and {sum(len(f) for _, f in rest)} more ops of {len(rest)} other kinds "
                     "(`nnadapter-bridge partition` lists every one)")
    return lines


def host_share_message(share: HostShare, device_names: list) -> str:
    """The text of the HostPlacementWarning (and of the strict-mode error): the share, then the host ops grouped
    by type and reason."""
    parts = [f"{share.declined_ops} of {share.total_ops} ops ({share.op_share:.1%})"]
    if share.flop_share is not None:
        parts.append(f"{share.flop_share:.1%} of the estimated conv/matmul FLOPs")
    forced = share.forced_ops
    head = (f"{', '.join(parts)} run on the host although {', '.join(device_names)} "
            f"{'was' if len(device_names) == 1 else 'were'} named")
    if share.body_ops:
        head += f" ({share.body_ops} of them in loop and branch bodies, which the devices do not take)"
    if share.at_run:
        head += f" ({share.at_run} moved there at run time, when their subgraph met the input shapes given)"
    if forced:
        head += f"; {forced} more {'is' if forced == 1 else 'are'} kept there by the partition config"
    strict = ("Config.set_strict(True) (or --strict) makes this an error" if _strict_declined(share) else
              "Config.set_strict(True) (or --strict) accepts control flow, with a warning, as no device runs it")
    return (head + ":\n" + "\n".join(host_ops_by_reason(share.host + share.body_host)) +
            "\n`nnadapter-bridge partition MODEL --device ...` shows where every op runs and why; " + strict)


def plan_partition(settings, graph, context) -> PartitionPlan:
    """Partition `graph` for the devices of the open `context` (None: no device opened), as `settings` (the
    predictor's resolved settings, predictor.settings.PredictorSettings) say: their listed devices, cache dir,
    context properties, partition config and minimum subgraph size."""
    device_names = list(settings.listed_device_names)
    cache_dir = settings.cache_dir
    # The context's devices, not the listed ones: a device left out (degraded start) changes the verdicts.
    store = (VerdictStore.open(cache_dir, context.device_names, settings.user_context_properties,
                               cache_key.versions(context)) if cache_dir and context is not None else None)
    if context is not None:
        support = SupportDecider(graph, context, store=store)
    elif not settings.nnadapter_enabled:  # Config.set_valid_places without an NNAdapter place
        support = NoDeviceSupport(device_names, "set_valid_places has no TargetType.NNAdapter place: every op runs "
                                                "on the host")
    else:
        support = NoDeviceSupport(device_names)
    partition_config = settings.partition_config
    forced = partition_config.match(graph.ops()) if partition_config is not None else set()
    # The plan kept beside the verdicts (plan_store): read when this program's verdicts were recorded.
    key = (plan_store.plan_key(store.key, support.program_key, [index for _, index in forced],
                               settings.min_subgraph_size)
           if store is not None and support.program_key is not None else None)
    result = plan_store.load_plan(cache_dir, key, graph) if key is not None and support.recorded else None
    if result is not None:
        _ask_as_the_detector(support, result)
    else:
        result = detect_subgraphs(graph, support.is_supported, forced, settings.min_subgraph_size)
        refute = getattr(support, "refute_crossing_folds", None)
        while refute is not None and refute(result):  # folded values kept inside one subgraph each
            result = detect_subgraphs(graph, support.is_supported, forced, settings.min_subgraph_size)
        if store is not None and not getattr(context, "validation_faults", 0):
            support.record_program()
            store.save()
            if key is not None and support.recorded:
                plan_store.save_plan(cache_dir, key, result)
    plan = PartitionPlan(graph, result, support, partition_config, settings.min_subgraph_size, device_names)
    if getattr(settings, "device_selection", "priority") != "priority" and context is not None:
        from nnadapter_bridge.subgraph.device_selection import plan_selection  # only for a policy by cost

        plan.selection = plan_selection(plan, context, settings)
    return plan


def _ask_as_the_detector(support, result: PartitionResult) -> None:
    """For a plan read from the cache, ask `support` about the host ops partition.detect_subgraphs asked about, in
    its order: the support decision's by-type reasons (Predictor.unsupported_reasons) come out as the detector left
    them (only a declined op gives one, and every declined op is a host op). The verdicts are the recorded ones (no
    signature is computed)."""
    forced = result.forced_op_keys
    for op in result.host_ops:
        if op.type not in HOST_ONLY_OP_TYPES and op_key(op) not in forced and not sub_block_indices(op):
            support.verdict(op)
    for block in sorted(result.bodies):
        for op in result.bodies[block].host_ops:
            if not sub_block_indices(op):
                support.verdict(op)


def _strict_declined(share: HostShare) -> list:
    """The placements strict mode refuses: ops on the host (block 0's and the loop and branch bodies') that the
    partition config did not put there and that are not control flow."""
    return ([p for p in share.host if not p.forced and not p.control_flow]
            + [b for b in share.body_host if not b.control_flow])


def strict_error(share: HostShare, device_names: list):
    """The UnsupportedOpError of strict mode (Config.set_strict, --strict): every op left off the devices that the
    partition config did not put on the host and that is not control flow (check_strict), body ops included,
    grouped as the HostPlacementWarning groups them."""
    declined = _strict_declined(share)
    flow = [p for p in share.host if not p.forced and p.control_flow]
    also = (f"\n({_control_flow_text(share)} also run on the host, as no NNAdapter device runs control flow: "
            "strict mode accepts those.)") if flow else ""
    return UnsupportedOpError(
        f"strict mode: {len(declined)} of {share.total_ops} ops cannot run on {', '.join(device_names) or 'a device'}:"
        "\n" + "\n".join(host_ops_by_reason(declined)) + also + "\nAdd converters for them, choose devices that "
        "support them, or drop set_strict() (--strict) to run them on the host.")


def _control_flow_text(share: HostShare) -> str:
    """'while#22 (out: ...)' / '2 control-flow ops (while#22 (...), ...)', for the control-flow ops on the host that
    the partition config did not force there."""
    flow = [p for p in share.host if not p.forced and p.control_flow]
    if len(flow) == 1:
        return flow[0].op.label()
    labels = ", ".join(p.op.label() for p in flow[:3]) + (", ..." if len(flow) > 3 else "")
    return f"{len(flow)} control-flow ops ({labels})"


def control_flow_message(share: HostShare, device_names: list) -> str:
    """The text of the ControlFlowOnHostWarning (check_strict)."""
    forced = share.forced_ops
    rest = (f"every other op runs on {', '.join(device_names) or 'the devices'}" +
            (f" but {forced} the partition config keeps on the host" if forced else ""))
    nested = sum(1 for b in share.body_host if b.control_flow)
    inside = (f" (with {nested} loop{'s' if nested != 1 else ''} or branch{'es' if nested != 1 else ''} nested in "
              "the bodies)") if nested else ""
    return (f"strict mode: {_control_flow_text(share)}{inside} run on the host: no NNAdapter device runs control "
            f"flow (loops and branches), so no device declined them and strict mode accepts them; the ops of their "
            f"bodies run on the devices; {rest}")


def check_strict(share: HostShare, device_names: list, stacklevel: int = 1, warn: bool = True) -> None:
    """Strict mode (Config.set_strict, --strict) on a partition: the UnsupportedOpError of strict_error when an op
    that the partition config did not force there is on the host for a device's reason (an op of a loop or branch
    body too: the bodies are partitioned); when the only such ops are control flow (while, conditional_block: no
    NNAdapter device runs a loop or a branch, so they run on the host whatever the devices), one
    ControlFlowOnHostWarning saying so (warn_control_flow; with `warn` False the caller gives it, once it knows the
    model can run), and no error. `stacklevel`: the warning's, counted from the caller."""
    if _strict_declined(share):
        raise strict_error(share, device_names)
    if warn:
        warn_control_flow(share, device_names, stacklevel + 1)


def warn_control_flow(share: HostShare, device_names: list, stacklevel: int = 1) -> None:
    """The ControlFlowOnHostWarning of strict mode (check_strict), when control flow the partition config did not
    force there is on the host; `stacklevel` counted from the caller."""
    if any(not p.forced and p.control_flow for p in share.host):
        warnings.warn(control_flow_message(share, device_names), ControlFlowOnHostWarning,
                      stacklevel=stacklevel + 1)


def host_share_summary(share: HostShare) -> dict:
    """The HostShare as plain data (the `host_share` field of `partition --json` and `run --json`)."""
    return {"ops": share.total_ops, "host_ops": share.declined_ops + share.forced_ops,
            "declined_ops": share.declined_ops, "forced_ops": share.forced_ops, "body_ops": share.body_ops,
            "moved_at_run": share.at_run,
            "op_share": round(share.op_share, 6),
            "flop_share": None if share.flop_share is None else round(share.flop_share, 6),
            "limit": HOST_SHARE_LIMIT, "over_limit": share.over_limit}

