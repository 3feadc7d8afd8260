"""The partition plan of a model for a Config: which ops run on the devices, which on the host, and why.

One computation serves create_predictor and `nnadapter-bridge partition`: the support decision (its
verdicts persisted in the model cache dir when one is set), the partition config (API buffer, API path,
then the environment), and the detector with the Config's minimum subgraph size. The plan also says why
each host op is not on a device.

Next to the verdicts by signature the store records this program's verdicts by op (keyed by the model's bytes and
its params' types, SupportDecider.program_key), so a warm start of the same model computes no signature either.
Verdicts are not saved when a device's validate_program failed while deciding (Context.validation_faults:
its answer was replaced by "none" for this start only). Without a context (no listed device could be opened:
the predictor degraded; or the valid places name no NNAdapter place, Config.set_valid_places) every op is on
the host, with that reason.
"""
from __future__ import annotations

import dataclasses
import os

from nnadapter_bridge import cache_key
from nnadapter_bridge.support_decisions import SupportDecider, VerdictStore
from partition import (HOST_ONLY_OP_TYPES, PartitionConfig, PartitionResult, detect_subgraphs, op_key,
                       resolve_partition_config)


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


@dataclasses.dataclass
class PartitionPlan:
    """The partition of a model for some devices, with the support decisions behind it."""

    graph: object
    result: PartitionResult
    support: SupportDecider
    partition_config: PartitionConfig | None
    min_subgraph_size: int
    device_names: list

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
        if key in forced:
            return f"forced to the host by the partition config ({forced[key]})"
        reason = self.support.reason(op)
        if reason:
            return reason
        return f"supported, but its cluster has fewer than {self.min_subgraph_size} ops (--min-subgraph-size)"


def plan_partition(config, graph, context) -> PartitionPlan:
    """Partition `graph` (loaded from `config`) for the devices of the open `context`, as `config` says."""
    device_names = config.nnadapter_device_names()
    cache_dir = config.nnadapter_model_cache_dir()
    # The context's devices, not the listed ones: a device left out (degraded start) changes the verdicts.
    store = (VerdictStore.open(cache_dir, context.device_names, config.nnadapter_context_properties(),
                               cache_key.versions(context)) if cache_dir and context is not None else None)
    if context is not None:
        support = SupportDecider(graph, context, store=store)
    elif not config.nnadapter_enabled():  # Config.set_valid_places without an NNAdapter place
        support = NoDeviceSupport(device_names, "set_valid_places has no TargetType.NNAdapter place: every op runs "
                                                "on the host")
    else:
        support = NoDeviceSupport(device_names)
    partition_config = resolve_partition_config(config.nnadapter_subgraph_partition_config_buffer() or None,
                                                config.nnadapter_subgraph_partition_config_path() or None,
                                                os.environ)
    forced = partition_config.match(graph.ops()) if partition_config is not None else set()
    result = detect_subgraphs(graph, support.is_supported, forced, config.min_subgraph_size)
    if store is not None and not getattr(context, "validation_faults", 0):
        support.record_program()
        store.save()
    return PartitionPlan(graph, result, support, partition_config, config.min_subgraph_size, device_names)
