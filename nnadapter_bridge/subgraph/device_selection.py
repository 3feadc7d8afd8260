"""Device selection by cost: which order of the listed devices each subgraph runs with, for the policies "fastest"
and "low_power" (Config.set_nnadapter_device_selection; "priority", the default, is Paddle Lite's list order and
never comes here).

A subgraph runs on a context whose devices take its operations in order: each operation goes to the first device
that accepts it (nnadapter.device_split), so an order of the devices is a placement of every op. For each subgraph
this module estimates the time of the placement of every order (`estimate`): per op, its FLOPs (convolutions and
matrix products, subgraph.plan.op_flops) times the device's measured seconds per FLOP of the op's family and
precision (subgraph.calibration), or a memory pass over its output for the other ops, scaled by the device's
float32 figure; plus, per part the placement splits the subgraph into, the device's fixed cost of a run, and per
value crossing between two devices, its copy. The cheapest order wins (ties: the earlier order, the listed one
first), so a split that saves less than its copies and extra runs cost is not made. Deterministic for given
figures. Orders whose estimate is within MARGIN of the best, and each device's cheapest lead order within
LEAD_MARGIN (every device's, when the model declares dims the estimate needs unknown: OpCost.sized), are
"contested": the engine times them on the real input shape before it keeps one (subgraph.measured_choice).

"low_power" ranks by time x power when every device involved reports a power figure; no device of this project
does (no power meter), so it ranks by time and says so.

Each device's verdict on each op (what the estimate places by) is kept in the model cache dir (_KeptVerdicts), so a
warm start asks no device again.

Entry points: `choose` (one subgraph, on OpCost records: what the tests drive with synthetic figures),
`select_devices` (every subgraph of a plan), `DeviceSelection`. Imports the calibration's figures and the plan's
FLOP estimate only; never the engine, the predictor or anything above.
"""
from __future__ import annotations

import itertools
import math
import os
import re
import warnings
from collections.abc import Callable, Sequence

from nnadapter_bridge.nnadapter.record import plain_dataclass

POLICIES = ("priority", "fastest", "low_power")
DEFAULT_POLICY = "priority"
# Orders whose estimate is within this share of the best one (up to 2x the best) are timed on the real input
# (measured_choice): the reference workload says how fast a device is on average, not which one wins a given model
# (the zoo measured onnxruntime 2x faster than OpenVINO on PP-LCNet, while the calibration finds OpenVINO as fast or
# faster on every workload), and on a loaded machine the calibration itself moves by tens of percent.
MARGIN = 1.0
# Besides those, each listed device's own cheapest order (the one that places the most on it) is timed when its
# estimate is within this share of the best (up to 4x): the estimate of one device against another missed by more
# than 2x on the zoo (SegFormer: onnxruntime estimated ahead, intel_openvino measured 1.1-1.3x faster; ERNIE:
# the fixed cost of a run dominates a 0.4 ms model and the calibration's fixed-cost workload does not predict it).
LEAD_MARGIN = 3.0
_BYTES_PER_ELEMENT = 4
_DEPTHWISE_TYPES = frozenset({"depthwise_conv2d"})
_CONV_TYPES = frozenset({"conv2d", "fused_conv2d", "conv2d_fusion", "conv2d_transpose", "conv3d",
                         "conv3d_transpose", "depthwise_conv2d_transpose"})
_MATMUL_TYPES = frozenset({"matmul", "matmul_v2", "mul", "fc", "rnn"})


@plain_dataclass(frozen=True)
class OpCost:
    """What the estimate knows of one op: its family ("conv", "depthwise", "matmul" or "other"), precision class
    ("float32" or "int8"), FLOPs (0: not a product), output elements, the devices that decline it, the values it
    reads and those it writes with their bytes."""

    key: int
    family: str
    precision: str
    flops: int
    elements: int
    declined_by: frozenset
    reads: tuple = ()
    writes: tuple = ()  # ((name, bytes), ...)
    # False when a size the estimate needs (a product's FLOPs, the output's elements) hangs on a dim the model
    # declares unknown other than the batch: counted as 1, so the estimate cannot rank devices (choose).
    sized: bool = True


@plain_dataclass
class Candidate:
    """One order of the devices for a subgraph and its estimate: `ops` per device, `parts` (the runs the split
    makes), `copied_bytes` (values crossing between devices)."""

    order: tuple
    seconds: float
    ops: dict
    parts: int
    copied_bytes: int

    def as_dict(self) -> dict:
        return {"order": list(self.order), "estimated_ms": round(self.seconds * 1e3, 4), "ops": dict(self.ops),
                "parts": self.parts, "copied_bytes": self.copied_bytes}


@plain_dataclass
class SubgraphChoice:
    """The order a subgraph runs with and why: every distinct candidate (cheapest first), the contested ones
    (timed on the first run), and, once timed, the measured milliseconds per order (`measured`)."""

    subgraph: int
    order: tuple
    candidates: list
    contested: list  # orders (tuples) timed (MARGIN, LEAD_MARGIN), the best first; one: nothing to time
    reason: str
    measured: dict | None = None  # "a>b>c" -> median seconds of the timed runs, or why that order failed
    decided_by: str = "estimate"  # "estimate", "measured" or "measured (cached)"
    timing_seconds: float = 0.0  # what timing the contested orders cost this start (compiles included)
    # device of the chosen order -> what it failed to do (and the error) while the order was timed: the subgraph
    # runs on the order's other devices (for the timed input shapes when the device failed to run it, always
    # when it failed to compile it), as it did while it was timed.
    faults: dict | None = None

    def as_dict(self) -> dict:
        return {"subgraph": self.subgraph, "order": list(self.order), "decided_by": self.decided_by,
                "reason": self.reason, "candidates": [c.as_dict() for c in self.candidates],
                "contested": [list(o) for o in self.contested],
                "measured_ms": None if self.measured is None else
                {k: round(v * 1e3, 4) if isinstance(v, float) else v for k, v in self.measured.items()},
                "timing_seconds": round(self.timing_seconds, 3), "faults": self.faults or {}}


@plain_dataclass
class DeviceSelection:
    """The device selection of a plan: the policy, the calibration behind it and one SubgraphChoice per subgraph."""

    policy: str
    calibration: object  # subgraph.calibration.Calibration
    choices: dict  # subgraph index -> SubgraphChoice

    def choice_for(self, index: int) -> SubgraphChoice | None:
        return self.choices.get(index)

    def order_for(self, index: int) -> tuple | None:
        choice = self.choices.get(index)
        return choice.order if choice is not None else None

    def as_dict(self) -> dict:
        return {"policy": self.policy,
                "calibration": self.calibration.as_dict() if self.calibration is not None else None,
                "subgraphs": [self.choices[i].as_dict() for i in sorted(self.choices)]}


def order_text(order: Sequence[str]) -> str:
    return ">".join(order)


# -- the estimate ----------------------------------------------------------------------------------------
def _seconds_per_flop(figures, reference, family: str, precision: str) -> float:
    # The precision's own figure (int8, relaxed), else the float32 family's, else the float32 one; the reference's
    # when the device has none (it is then taken as the CPU).
    keys = ([precision] if precision != "float32" else []) + [family, "float32"]
    for table in (figures.seconds_per_flop, reference.seconds_per_flop):
        for k in keys:
            if k in table:
                return table[k]
    return 1e-9  # neither the device nor the reference was measured: one GFLOP/s, the same for every device


def op_seconds(op: OpCost, figures, reference) -> float:
    """The estimated time of `op` on the device of `figures` (module docstring)."""
    if op.flops:
        return op.flops * _seconds_per_flop(figures, reference, op.family, op.precision)
    memory_pass = 2 * op.elements * _BYTES_PER_ELEMENT / reference.copy_bytes_per_second
    return memory_pass * figures.capabilities.exec_time("float32")


def assign(ops: Sequence[OpCost], order: Sequence[str]) -> list:
    """The device of each op when the devices take operations in `order`: the first one that does not decline it
    (the last one when all do: the runtime then refuses it, whatever the order)."""
    return [next((d for d in order if d not in op.declined_by), order[-1]) for op in ops]


def estimate(ops: Sequence[OpCost], order: Sequence[str], figures: dict, reference) -> Candidate:
    """The Candidate of `order` for a subgraph of `ops` (module docstring)."""
    devices = assign(ops, order)
    producer = {}
    for k, op in enumerate(ops):
        for name, _ in op.writes:
            producer[name] = k
    size = {name: nbytes for op in ops for name, nbytes in op.writes}
    # Parts: the ops of one device connected through values they pass each other (the runtime's clusters are
    # at least these; a device's unconnected ops are separate runs).
    parent = list(range(len(ops)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    copied: dict = {}
    for k, op in enumerate(ops):
        for name in op.reads:
            source = producer.get(name)
            if source is None:
                continue
            if devices[source] == devices[k]:
                parent[root(k)] = root(source)
            else:
                copied[(name, devices[k])] = size.get(name, 0)
    parts = {root(k): devices[k] for k in range(len(ops))}
    seconds = sum(op_seconds(op, figures.get(d) or reference, reference) for op, d in zip(ops, devices))
    seconds += sum((figures.get(d) or reference).call_seconds for d in parts.values())
    copied_bytes = sum(copied.values())
    seconds += copied_bytes / reference.copy_bytes_per_second
    counts: dict = {}
    for d in devices:
        counts[d] = counts.get(d, 0) + 1
    return Candidate(tuple(order), seconds, counts, len(parts), copied_bytes)


def choose(index: int, ops: Sequence[OpCost], device_names: Sequence[str], figures: dict, reference,
           policy: str = "fastest", margin: float = MARGIN, lead_margin: float | None = None) -> SubgraphChoice:
    """The SubgraphChoice of one subgraph (module docstring): every order of `device_names` (in itertools order,
    the listed one first) whose placement differs, the cheapest kept. Contested: the orders within `margin` of
    the best, and each device's cheapest lead order within `lead_margin` (None: LEAD_MARGIN)."""
    if lead_margin is None:
        lead_margin = LEAD_MARGIN
    seen: dict = {}
    for order in itertools.permutations(device_names):
        placement = tuple(assign(ops, order))
        if placement not in seen:
            seen[placement] = estimate(ops, order, figures, reference)
    found = list(seen.values())
    power_known = policy == "low_power" and all(
        (figures.get(d) or reference).capabilities.precisions.get("float32") is not None and
        (figures.get(d) or reference).capabilities.precisions["float32"].power is not None for d in device_names)

    def rank(candidate: Candidate) -> float:
        if not power_known:
            return candidate.seconds
        return sum(candidate.seconds * n / len(ops) *
                   float((figures.get(d) or reference).capabilities.precisions["float32"].power)
                   for d, n in candidate.ops.items())

    ranked = sorted(enumerate(found), key=lambda item: (rank(item[1]), item[0]))
    candidates = [c for _, c in ranked]
    best = candidates[0]
    leads = {}  # device -> its cheapest order among those it leads
    for c in candidates:
        leads.setdefault(c.order[0], c)
    unsized = sum(not op.sized for op in ops)
    # Without the sizes (inputs declared [-1, 3, -1, -1]), what is left of the estimate is the fixed cost of each
    # part: SegFormer's estimate put google_xnnpack's order at 5x the best and out of the contest, and it ran
    # 1.1-1.2x faster than the order taken (bench_zoo). Then every device's own order is timed.
    contested = [c.order for c in candidates if rank(c) <= rank(best) * (1 + margin)
                 or (leads.get(c.order[0]) is c and (unsized or rank(c) <= rank(best) * (1 + lead_margin)))]
    what = "time x power" if power_known else "time"
    reason = (f"lowest estimated {what}: {best.seconds * 1e3:.3f} ms on {_ops_text(best)}"
              + (f" in {best.parts} parts, {best.copied_bytes} bytes copied between devices" if best.parts > 1 else ""))
    if unsized:
        reason += (f" (without the sizes of {unsized} op{'s' if unsized != 1 else ''}: the model declares their"
                   " dims unknown, so each device's own order is timed)")
    if len(candidates) > 1:
        runner_up = candidates[1]
        reason += f"; next {order_text(runner_up.order)} {runner_up.seconds * 1e3:.3f} ms"
    if policy == "low_power" and not power_known:
        reason += "; power unknown for these devices (no power figure measured): ranked by time"
    return SubgraphChoice(index, best.order, candidates, contested, reason)


def _ops_text(candidate: Candidate) -> str:
    return ", ".join(f"{d} ({n} op{'s' if n != 1 else ''})" for d, n in candidate.ops.items())


# -- from a plan ---------------------------------------------------------------------------------------
def _op_family(op) -> str:
    if op.type in _DEPTHWISE_TYPES:
        return "depthwise"
    if op.type in _CONV_TYPES:
        groups = int(op.attrs.get("groups", 1) or 1)
        return "depthwise" if groups > 1 else "conv"
    if op.type in _MATMUL_TYPES:
        return "matmul"
    return "other"


def _op_precision(graph, op) -> str:
    """"int8" for an op of a quantized model's int8 path (Paddle's quantized attrs or int8 weights), else
    "float32"."""
    if op.attrs.get("enable_int8") or op.attrs.get("use_int8"):
        return "int8"
    for name in op.inputs.get("Filter", []) + op.inputs.get("Y", []):
        param = graph.params.get(name)
        if param is not None and str(getattr(param, "dtype", "")) == "int8":
            return "int8"
    return "float32"


def _var_elements(graph, name: str) -> tuple[int, bool]:
    """(elements, known): a dim declared unknown counts as 1; `known` is False when one past the batch is."""
    try:
        var = graph.var(name)
    except Exception:  # a var the model does not declare: counted as one element
        return 1, True
    dims = [int(d) for d in (var.shape or ())]
    return math.prod(max(d, 1) for d in dims), all(d >= 0 for d in dims[1:])


def op_costs(graph, ops: Sequence, declined: Callable, op_flops: Callable, relaxed: bool = False) -> list:
    """OpCost per op of a subgraph; `declined(op)`: device -> reason for the devices declining it; `op_flops`:
    subgraph.plan.op_flops; `relaxed`: float32 ops are costed at the relaxed float figures
    (Config.set_nnadapter_relax_float32_to_float16)."""
    found = []
    for op in ops:
        precision = _op_precision(graph, op)
        if relaxed and precision == "float32":
            precision = "relaxed_float16"
        outputs = [(n, *_var_elements(graph, n)) for names in op.outputs.values() for n in names]
        writes = tuple((n, count * _BYTES_PER_ELEMENT) for n, count, _ in outputs)
        reads = tuple(n for names in op.inputs.values() for n in names if n not in graph.params)
        elements = sum(nbytes for _, nbytes in writes) // _BYTES_PER_ELEMENT
        family = _op_family(op)
        flops = op_flops(graph, op)
        sized = all(known for _, _, known in outputs) and (flops is not None or family == "other")
        found.append(OpCost(op.index, family, precision, int(flops or 0), elements, frozenset(declined(op)),
                            reads, writes, sized))
    return found


def select_devices(graph, subgraphs: Sequence, device_names: Sequence[str], calibration, declined: Callable,
                   op_flops: Callable, policy: str, margin: float = MARGIN, relaxed: bool = False) -> DeviceSelection:
    """The DeviceSelection of a plan's `subgraphs` over the context's `device_names` (module docstring)."""
    figures = {n: calibration.figures(n) for n in device_names}
    choices = {s.index: choose(s.index, op_costs(graph, s.ops, declined, op_flops, relaxed), device_names, figures,
                               calibration.reference, policy, margin)
               for s in subgraphs}
    return DeviceSelection(policy, calibration, choices)


DEVICE_VERDICTS_FORMAT = "nnadapter-bridge-device-verdicts-v1"
_OP_KEY = re.compile(r"[0-9]+(\.[0-9]+)?")  # a block-0 op's index, "block.index" for a loop or branch body's
MAX_DEVICE_VERDICTS_BYTES = 16 << 20


class _KeptVerdicts:
    """Each device's answer on the ops of a plan's subgraphs, kept in the model cache dir as
    `device-verdicts-<key>.json` (orjson), so a warm start with a policy by cost does not ask every device about
    every op again (asking converts each op and has each driver build a trial program: half a second for a
    MobileNet on three devices). The key: the verdict store's (devices in context order, context properties, code
    and driver versions) and the program's (SupportDecider.program_key). A file that fails a check is a miss with
    one NncCacheWarning and is rewritten."""

    def __init__(self, plan, context):
        from nnadapter_bridge.nnadapter.text_digest import sha256_hex
        from nnadapter_bridge.subgraph.plan import _DeviceVerdicts

        self.live = _DeviceVerdicts(plan.support, context)
        self.context = context
        store = getattr(plan.support, "store", None)
        program_key = getattr(plan.support, "program_key", None)
        self.path = None
        self.asked: dict = {}  # op key ("index", "block.index" for a body's op) -> {device: reason}, from the file
        self.new: dict = {}
        if store is not None and program_key is not None:
            key = sha256_hex("\0".join((DEVICE_VERDICTS_FORMAT, store.key, program_key)))
            self.path = os.path.join(os.path.dirname(store.path), f"device-verdicts-{key[:32]}.json")
            self.asked = self._read()

    def _read(self) -> dict:
        from nnadapter_bridge.nnadapter.nnc import NncCacheWarning, read_kept_json

        document, problem = read_kept_json(self.path, MAX_DEVICE_VERDICTS_BYTES)
        if document is None:
            if problem:
                warnings.warn(f"device verdicts file {self.path} is unusable ({problem}); the devices are asked "
                              "again", NncCacheWarning, stacklevel=5)
            return {}
        ops = document.get("ops") if isinstance(document, dict) else None
        if (not isinstance(document, dict) or document.get("format") != DEVICE_VERDICTS_FORMAT
                or not isinstance(ops, dict)
                or not all(_OP_KEY.fullmatch(k) and isinstance(v, dict)
                           and all(isinstance(d, str) and isinstance(r, str) for d, r in v.items())
                           for k, v in ops.items())):
            warnings.warn(f"device verdicts file {self.path} is not a {DEVICE_VERDICTS_FORMAT} file; the devices "
                          "are asked again", NncCacheWarning, stacklevel=5)
            return {}
        return dict(ops)

    def declined(self, op) -> dict:
        key = f"{op.block_idx}.{op.index}" if getattr(op, "block_idx", 0) else str(op.index)
        found = self.asked.get(key)
        if found is None:
            found = self.new[key] = self.live.declined(op)
        return found

    def save(self) -> None:
        if self.path is None or not self.new or getattr(self.context, "validation_faults", 0):
            return
        import orjson

        from nnadapter_bridge.nnadapter.nnc import NncCacheWarning, write_file_atomically

        ops = dict(sorted((self.asked | self.new).items()))
        try:
            write_file_atomically(self.path, orjson.dumps({"format": DEVICE_VERDICTS_FORMAT, "ops": ops}))
        except OSError as exc:
            warnings.warn(f"device verdicts cannot be kept in {self.path} ({exc})", NncCacheWarning, stacklevel=4)


def plan_selection(plan, context, settings) -> DeviceSelection:
    """The DeviceSelection of a partition plan on its open context (plan.plan_partition calls it for a policy other
    than "priority"): the devices' figures from the calibration (measured now when this machine has none, which
    takes about a second per device), each op's verdicts asked of each device (kept in the model cache dir:
    _KeptVerdicts)."""
    from nnadapter_bridge.subgraph.calibration import calibrate
    from nnadapter_bridge.subgraph.plan import op_flops

    names = list(context.device_names)
    if len(names) < 2:  # one device: no order to choose
        return DeviceSelection(settings.device_selection, None, {})
    calibration = calibrate(names, settings.context_properties, settings.cache_dir or None)
    verdicts = _KeptVerdicts(plan, context)
    selection = select_devices(plan.graph, plan.result.every_subgraph(), names, calibration, verdicts.declined,
                               op_flops, settings.device_selection, relaxed=getattr(settings, "relax_float32", False))
    verdicts.save()
    return selection
