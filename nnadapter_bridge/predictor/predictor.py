"""The predictor: load a Paddle model, partition it, and run it (device subgraphs + host ops).

Owns `create_predictor` (settings resolved once, model loaded, devices acquired, block 0 partitioned, every host
op checked runnable, the host share warned about), `Predictor` (`run`, `clone`, tensors by name or index,
`placements`, `save_optimized_model`) and `PredictorStats`. Entry points: `create_predictor(config)`, and the
`Predictor` methods of Paddle Lite's API.

Imports the subgraph floor, the settings, the ground and partition; the host executor and the converters only
when a model needs them (a warm start loads this module and must not load the converters or networkx:
tests/e2e/test_startup_memory.py); never lite or the applications above. docs/architecture.md ("The predictor")
tells the steps of create_predictor and of a run, threads and clones, faults and declared shapes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import warnings

import numpy as np

from nnadapter_bridge import __version__
from nnadapter_bridge.errors import (
    BridgeError,
    ConfigError,
    ConversionError,
    DeviceNotFoundError,
    InputError,
    NNAdapterError,
    NotSupportedError,
    UnsupportedOpError,
)
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.nnadapter.blas_threads import limit_blas_threads
from nnadapter_bridge.nnadapter.codes import UNKNOWN, dtype_precision
from nnadapter_bridge.nnadapter.properties import UnknownPropertyWarning
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.runtime import (
    Context,
    DeviceFallbackWarning,
    DeviceManager,
    acquire_device,
    fault_device,
    is_device_fault,
    unknown_property_keys,
)
from nnadapter_bridge.nnadapter.source_digest import remember_in as remember_code_digests_in
from nnadapter_bridge.nnadapter.types import OperandType
from nnadapter_bridge.predictor.config import Config
from nnadapter_bridge.predictor.settings import PredictorSettings, resolve_settings
from nnadapter_bridge.predictor.tensor import Tensor
from nnadapter_bridge.subgraph.engine import (
    CacheBufferStore,
    ContextPool,
    EngineResources,
    EngineStats,
    ProgramPool,
    SubgraphEngine,
)
from nnadapter_bridge.subgraph.plan import (
    HostPlacementWarning,
    PartitionPlan,
    check_strict,
    host_share,
    host_share_message,
    plan_partition,
    warn_control_flow,
)
from nnadapter_bridge.subgraph.progress import Progress
from nnadapter_bridge.subgraph.support_decisions import FingerprintMemo
from partition import HOST_ONLY_OP_TYPES, Subgraph, sub_block_indices

_ADVICE = ("Add a converter (converters/) or a host kernel (nnadapter_bridge/host/kernels/) for them, or choose "
           "devices that support them.")


@plain_dataclass
class PredictorStats:
    runs: int = 0
    subgraphs: int = 0
    host_ops: int = 0          # ops of block 0 on the host (feed/fetch excluded)
    host_op_runs: int = 0
    builds: int = 0
    cache_hits_file: int = 0
    cache_hits_buffer: int = 0
    cache_misses: int = 0
    subgraph_runs: int = 0
    shape_mismatches: int = 0
    subgraph_host_runs: int = 0  # subgraph runs done on the host for shapes the declared ones did not foresee
    # The device order of each subgraph and why (subgraph.device_selection), for "fastest" / "low_power"; None:
    # "priority".
    device_selection: dict | None = None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _widens(given: np.dtype, declared: np.dtype) -> bool:
    """True when an integer array of dtype `given` converts to the declared integer dtype with every value kept."""
    return given.kind in "iu" and np.dtype(declared).kind in "iu" and np.can_cast(given, declared, "safe")


def _expected(tensor: Tensor) -> str:
    return f"{tensor.declared_dtype} with shape {list(tensor.declared_shape)} (-1: any size)"


def _reason(exc: BaseException) -> str:
    return str(exc).rsplit(" [", 1)[0] if isinstance(exc, NNAdapterError) else f"{type(exc).__name__}: {exc}"


def _acquire_devices(names: list, strict: bool = True) -> tuple:
    """(devices acquired, [(name, why not)] for the devices left out). A name no driver declares is an error;
    a declared driver that fails to load or open is left out (module docstring), unless `strict`."""
    manager = DeviceManager.instance()
    devices, failed = [], []
    for name in names:
        try:
            devices.append(acquire_device(name))
        except DeviceNotFoundError as exc:
            if strict or not manager.is_declared(name):
                raise DeviceNotFoundError(f"set_nnadapter_device_names: {exc.args[0].rsplit(' [', 1)[0]}; "
                                          "`nnadapter-bridge devices` lists the installed drivers") from exc
            hint = manager.unavailable_reason(name)
            failed.append((name, f"is unavailable: {hint}" if hint else f"fails to load ({_reason(exc)})"))
        except NNAdapterError as exc:
            if strict or not is_device_fault(exc):
                raise
            failed.append((name, f"cannot be opened ({_reason(exc)})"))
    return devices, failed


def _open_context(settings: PredictorSettings):
    """The Context over the devices of `settings` that open (module docstring), with their context properties
    (settings.context_properties); None when none does (every op then runs on the host). One
    DeviceFallbackWarning per device left out."""
    strict = settings.strict
    devices, failed = _acquire_devices(settings.device_names, strict)
    context = None
    while devices:
        try:
            context = Context(devices, settings.context_properties, settings.context_callback, strict=strict)
            break
        except NNAdapterError as exc:
            name = fault_device(exc)
            if strict or name is None or not is_device_fault(exc) or name not in [d.name for d in devices]:
                raise
            failed.append((name, f"cannot create a context ({_reason(exc)})"))
            devices = [d for d in devices if d.name != name]
    where = ", ".join(d.name for d in devices) or "the host"
    for name, why in failed:
        warnings.warn(f"device '{name}' {why}; its part of the model runs on {where}", DeviceFallbackWarning,
                      stacklevel=4)
    return context


def _warn_unknown_properties(settings: PredictorSettings) -> None:
    device_names = list(settings.device_names)
    for key, nearest in unknown_property_keys(settings.user_context_properties, device_names):
        hint = f"; did you mean {nearest}?" if nearest else ""
        warnings.warn(f"context property '{key}' is read by no device (devices: {', '.join(device_names)}), so it "
                      f"has no effect{hint}", UnknownPropertyWarning, stacklevel=4)


@plain_dataclass(eq=False)
class _Shared:
    """What a predictor shares with its clones: everything but the execution state (module docstring)."""

    config: Config
    settings: PredictorSettings
    graph: object
    context: object  # runtime.Context, None when no device opened
    resources: EngineResources | None  # what the engines share (None when no device opened)
    plan: PartitionPlan  # how the model was partitioned, and why (placements())
    steps: list
    host_ops: list  # the ops of block 0 on the host, feed/fetch excluded (PartitionPlan.host_ops)
    pools: dict  # subgraph index -> engine.ProgramPool
    # Ops a subgraph engine ran on the host at run time: op index -> why (Predictor._run_on_host).
    moved_to_host: dict = dataclasses.field(default_factory=dict)
    moved_warned: bool = False  # the run-time HostPlacementWarning was given (once per predictor and clones)
    users: int = 0
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def attach(self) -> None:
        with self.lock:
            self.users += 1

    def release(self) -> None:
        """The last user destroys the contexts (the engines released their programs before)."""
        with self.lock:
            self.users -= 1
            if self.users > 0:
                return
        if self.resources is not None:
            self.resources.contexts.destroy()
        if self.context is not None:
            self.context.destroy()


def _engine_resources(settings: PredictorSettings, graph, context, plan: PartitionPlan) -> EngineResources | None:
    """What every engine of the predictor and its clones shares; None without a context (no engine then). The
    fingerprint memo (support_decisions.FingerprintMemo) needs the verdict store of a model cache dir and no
    integrity key."""
    if context is None:
        return None
    float_ops = settings.float_op_indices(graph)
    support = plan.support
    memo = FingerprintMemo.for_graph(getattr(support, "store", None), graph, getattr(support, "program_key", None),
                                     settings.cache_key is not None)
    # Created once: the cache buffers carry the model cache key too (Config.set_nnadapter_model_cache_key).
    cache_buffers = CacheBufferStore(settings.cache_buffers, key=settings.cache_key)
    return EngineResources(graph, ContextPool(context), cache_buffers, float_ops, memo)


def _make_host_executor(graph, device_names):
    # Imported here: the host executor loads the converters, which a warm start whose ops all run on devices
    # never needs (tests/e2e/test_startup_memory.py).
    try:
        from nnadapter_bridge.host import HostExecutor
    except ImportError:
        return None
    return HostExecutor(graph, device_names)


def _moved_key(op):
    """The key of an op moved to the host at run time: a block-0 op's index, (block, index) for a body's op."""
    return (op.block_idx, op.index) if getattr(op, "block_idx", 0) else op.index


class Predictor:
    """Runs a Paddle inference model with its supported parts on NNAdapter devices."""

    def __init__(self, config: Config):
        settings = resolve_settings(config)
        self.config = config
        self.settings = settings
        # The decoded program is kept in the model cache dir (loader.snapshot), not with an integrity key: it has
        # no MAC.
        snapshot_dir = settings.cache_dir if settings.cache_dir and settings.cache_key is None else None
        remember_code_digests_in(snapshot_dir)  # so are the code digests in the cache keys (nnadapter.source_digest)
        self.graph = load_model(**settings.model_source, snapshot_dir=snapshot_dir)
        self.device_names = list(settings.device_names)  # []: no NNAdapter place is valid, all runs on the host
        self.context = _open_context(settings)  # None: no device opened
        try:
            self._check_dynamic_shape_info()
            if self.device_names:
                _warn_unknown_properties(settings)
            plan = plan_partition(settings, self.graph, self.context)
            if os.environ.get("GLOG_v"):  # Paddle Lite's debug dump (partition.dump loads only then)
                from partition.dump import print_dump_if_verbose

                print_dump_if_verbose(self.graph, plan.result)
            resources = _engine_resources(settings, self.graph, self.context, plan)
            shared = _Shared(config, settings, self.graph, self.context, resources, plan,
                             list(plan.result.steps()),  # the run order, fixed once: run() only walks it
                             plan.host_ops, {s.index: ProgramPool(resources, plan.device_order(s.index),
                                                                 plan.device_choice(s.index))
                                                for s in plan.result.every_subgraph()})
            self._check_dynamic_shapes_convert(plan.result, resources.float_ops if resources else frozenset())
            self._attach(shared, check=True)
            self._warn_if_host_heavy()
        except BaseException:
            if self.context is not None:
                self.context.destroy()  # the drivers' contexts must not outlive a predictor that failed to build
            raise

    def _attach(self, shared: _Shared, check: bool = False) -> None:
        """Take the shared parts and make this predictor's own execution state (module docstring)."""
        settings = shared.settings
        self._shared = shared
        self.config = shared.config
        self.settings = settings
        self.graph = shared.graph
        self.device_names = list(settings.device_names)
        self.context = shared.context
        self.plan = shared.plan  # subgraph.plan.PartitionPlan: how the model was partitioned, and why
        self.support = shared.plan.support
        self.partition = shared.plan.result
        self._steps = shared.steps
        self.host_ops = shared.host_ops
        self.host = _make_host_executor(self.graph, self.device_names) if self.host_ops else None
        # Config.set_threads: the host executor's BLAS pool is capped at this many threads (0: not capped).
        self._host_threads = settings.host_threads
        if check:
            self._check_everything_runs()
        self._progress: Progress | None = None
        self._run_lock = threading.Lock()
        self._closed = False
        host_fallback = None if settings.strict else self._run_on_host
        self.engines = {s.index: SubgraphEngine(s, settings, shared.pools[s.index], on_build=self._on_build,
                                                host_fallback=host_fallback)
                        for s in self.partition.every_subgraph()}
        if self.host is not None:
            # The loop and branch bodies with subgraphs run through the host executor: their subgraphs here.
            self.host.block_steps = {
                block: [self.engines[step.index].run if isinstance(step, Subgraph) else step for step in body.steps()]
                for block, body in self.partition.bodies.items() if body.subgraphs}
        shared.attach()
        # What run() walks: (engine, None) for a subgraph, (None, op) for a host op; feed/fetch left out.
        self._plan = [(self.engines[step.index], None) if isinstance(step, Subgraph) else (None, step)
                      for step in self._steps
                      if isinstance(step, Subgraph) or step.type not in HOST_ONLY_OP_TYPES]
        # Every engine, the bodies' too: their device outputs are this run's own arrays, held no longer than it.
        self._engines_in_plan = list(self.engines.values())
        self._inputs = [self._make_tensor(name, True) for name in self.graph.inputs]
        self._outputs = [self._make_tensor(name, False) for name in self.graph.outputs]
        self._runs = 0
        self._host_op_runs = 0
        self._params_scope = None  # the scope of the current run once the params are in it (_add_params)
        self._direct = self._direct_plan()

    def clone(self) -> Predictor:
        """A predictor for another thread (Paddle Lite's and Paddle Inference's clone()): it shares this one's
        graph, weights, partition, contexts and compiled programs, and has its own input and output tensors
        (empty), engines' execution state, host executor and run lock (module docstring). Close each clone
        with close(); the shared parts go with the last one."""
        if self._closed:
            raise ConfigError("clone() of a closed predictor")
        twin = Predictor.__new__(Predictor)
        twin._attach(self._shared)
        return twin

    # -- construction checks -------------------------------------------------------------------------

    def _check_dynamic_shape_info(self) -> None:
        for name, shapes in self.settings.dynamic_shape_info.items():
            try:
                var = self.graph.var(name)
            except BridgeError:
                raise ConfigError(f"set_nnadapter_dynamic_shape_info: the model has no var '{name}'; its inputs "
                                  f"are {', '.join(self.graph.inputs) or 'none'}") from None
            if var.dtype is not None and var.shape and len(var.shape) != len(shapes[0]):
                raise ConfigError(f"set_nnadapter_dynamic_shape_info['{name}']: shapes of rank {len(shapes[0])}, "
                                  f"but '{name}' is declared with shape {list(var.shape)} (rank {len(var.shape)})")

    def _check_dynamic_shapes_convert(self, partition, float_ops: frozenset) -> None:
        """set_nnadapter_dynamic_shape_info shapes that contradict a size the var declares (300 where 224 is
        declared, 4 channels where 3 are) are fine when the model takes them (Paddle runs 300x300 images), and
        a ConfigError when it never can. Decided on the subgraphs the var feeds: the subgraph is converted for
        the listed shape and for the declared one (the same shape with the declared sizes); when only the
        listed shape fails, the model cannot take it. A var that feeds no subgraph (the host runs its
        consumers) is not checked here; a shape the model refuses then fails at run as any input would. `float_ops`:
        the ops the mixed-precision config keeps in float, converted so as the engines will."""
        info = self.settings.dynamic_shape_info
        if not info:
            return
        contradicted = {}
        for name, shapes in info.items():
            var = self.graph.var(name)
            declared = [int(d) for d in var.shape] if var.dtype is not None else []
            bad = [list(s) for s in shapes if len(s) == len(declared) and
                   any(d >= 0 and n >= 0 and d != n for d, n in zip(declared, s))]
            if bad:
                contradicted[name] = (declared, bad, var.dtype)
        if not contradicted:
            return
        # Imported here: the converters are loaded only when a model must be converted (a warm start converts
        # nothing; tests/e2e/test_startup_memory.py).
        from converters.context import convert_subgraph

        def operand(dtype, dims):
            return OperandType(precision=dtype_precision(np.dtype(dtype)),
                               dims=tuple(UNKNOWN if d < 0 else d for d in dims))

        def failure(subgraph, types) -> str | None:
            outputs = sorted(subgraph.output_names, key=lambda n: n.encode("utf-8"))
            try:
                convert_subgraph(subgraph.ops, self.graph.params, types, outputs, self.graph, float_ops=float_ops)
            except ConversionError as exc:
                return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return None

        for subgraph in partition.subgraphs:
            names = sorted(subgraph.input_names, key=lambda n: n.encode("utf-8"))
            for name in (n for n in names if n in contradicted):
                declared, bad, dtype = contradicted[name]
                # The other inputs: every axis unknown (their sizes follow this one's), their declared rank.
                others = {}
                for other in names:
                    var = self.graph.var(other)
                    if var.dtype is not None:
                        others[other] = operand(var.dtype, [-1] * len(var.shape))
                if len(others) != len(names):
                    continue  # an input that is not a dense tensor: its type cannot be written here
                for shape in bad:
                    as_declared = [d if d >= 0 else n for d, n in zip(declared, shape)]
                    if failure(subgraph, {**others, name: operand(dtype, as_declared)}) is not None:
                        continue  # the subgraph cannot be converted even for the declared sizes: no verdict
                    reason = failure(subgraph, {**others, name: operand(dtype, shape)})
                    if reason is not None:
                        raise ConfigError(f"set_nnadapter_dynamic_shape_info['{name}']: shape {shape} contradicts "
                                          f"'{name}' declared {declared}, and the model cannot take it: {reason}")

    def _check_everything_runs(self) -> None:
        forced = self.partition.forced_op_keys
        strict_share = None
        if self.settings.strict:
            off_device = [op for op in self.host_ops if ("op", op.index) not in forced]
            if off_device:  # an error; only control flow on the host: a warning, below, once the model can run
                strict_share = self._host_share()
                if not any(sub_block_indices(op) for op in off_device):
                    check_strict(strict_share, self.device_names, warn=False)
        if not self.host_ops:
            return
        if self.host is None:
            self._raise_unsupported(self.host_ops, "these Paddle op types run on no device and the host "
                                    "executor (nnadapter_bridge.host) is not available", _ADVICE)
        # Loop and branch bodies included (unsupported_ops looks into them): an op nothing runs is named as such
        # before strict mode refuses a body op the devices decline.
        missing = self.host.unsupported_ops(self.host_ops)
        if missing:
            where = f"neither on {', '.join(self.device_names)} nor on the host" if self.device_names else \
                "on the host (no device was named)"
            self._raise_unsupported(missing, f"these Paddle op types can run {where}", _ADVICE)
        if strict_share is not None:
            check_strict(strict_share, self.device_names, warn=False)
            warn_control_flow(strict_share, self.device_names, stacklevel=5)

    def _host_share(self):
        return host_share(self.graph, self.placements(per_device=False), self.body_placements())

    def _warn_if_host_heavy(self) -> None:
        """The HostPlacementWarning of create_predictor (module docstring, step 4)."""
        if not self.device_names or self.settings.strict:
            return
        share = self._host_share()
        if share.over_limit:
            warnings.warn(host_share_message(share, self.device_names), HostPlacementWarning, stacklevel=4)

    def placements(self, per_device: bool = True) -> list:
        """Where each op of block 0 runs (subgraph.plan.OpPlacement, program order, feed/fetch left out): its
        subgraph and device, or the host with the reason, and why the other devices decline it; ops moved to
        the host at run time so far have `at_run` set. `per_device=False` skips asking each of several devices
        about every op (device ops then name all the listed devices)."""
        plan = self._shared.plan
        if plan is None:
            return []
        context = self.context if per_device and self.context is not None and not self._closed else None
        found = plan.placements(context)
        moved = self._shared.moved_to_host
        if moved:
            found = [dataclasses.replace(p, device=None, reason=moved[p.op.index], declined={}, at_run=True)
                     if p.op.index in moved else p for p in found]
        return found

    def body_placements(self) -> list:
        """Where each op of the loop and branch bodies runs (subgraph.plan.BodyPlacement, grouped by the control-flow
        op of block 0 holding them): in a body subgraph on the devices, or on the host with the reason; ops moved to
        the host at run time so far have `at_run` set."""
        plan = self._shared.plan
        if plan is None:
            return []
        moved = {key: why for key, why in self._shared.moved_to_host.items() if isinstance(key, tuple)}
        return plan.body_placements(moved)

    def _body_of(self, op) -> str:
        """`, in the body of while#3 (...)` for an op of a sub-block (the op holding that block), else ''."""
        if not op.block_idx:
            return ""
        for block in self.graph.blocks:
            for holder in block.ops:
                if op.block_idx in sub_block_indices(holder):
                    return f", in the body of {holder.label()}"
        return ""

    def _raise_unsupported(self, ops, headline: str, advice: str) -> None:
        by_type: dict[str, list] = {}
        for op in ops:
            by_type.setdefault(op.type, []).append(op)
        lines = []
        for op_type in sorted(by_type):
            found = by_type[op_type]
            line = f"  {op_type} (x{len(found)}, first {found[0].label()}{self._body_of(found[0])})"
            reason = self.support.reasons.get(op_type)
            if reason:
                line += f": {reason}"
            lines.append(line)
        raise UnsupportedOpError(f"{headline}:\n" + "\n".join(lines) + "\n" + advice)

    def _make_tensor(self, name: str, is_input: bool) -> Tensor:
        try:
            var = self.graph.var(name)
        except BridgeError:
            return Tensor(name, is_input=is_input)
        return Tensor(name, var.dtype, var.shape, is_input=is_input)

    # -- Paddle Lite's predictor API ---------------------------------------------------------------------
    def get_input_names(self) -> list:
        return list(self.graph.inputs)

    def get_output_names(self) -> list:
        return list(self.graph.outputs)

    def get_input(self, index: int) -> Tensor:
        return self._by_index(self._inputs, index, "input")

    def get_output(self, index: int) -> Tensor:
        return self._by_index(self._outputs, index, "output")

    def get_input_by_name(self, name: str) -> Tensor:
        return self._by_name(self._inputs, name, "input")

    def get_output_by_name(self, name: str) -> Tensor:
        return self._by_name(self._outputs, name, "output")

    @staticmethod
    def _by_index(tensors, index: int, what: str) -> Tensor:
        if not isinstance(index, int) or not 0 <= index < len(tensors):
            raise InputError(f"get_{what}({index!r}): the model has {len(tensors)} {what}s "
                             f"({', '.join(t.name for t in tensors)})")
        return tensors[index]

    @staticmethod
    def _by_name(tensors, name: str, what: str) -> Tensor:
        for tensor in tensors:
            if tensor.name == name:
                return tensor
        raise InputError(f"get_{what}_by_name({name!r}): no such {what}; the {what}s are "
                         f"{', '.join(t.name for t in tensors) or 'none'}")

    def get_version(self) -> str:
        """nnadapter-bridge's version (Paddle Lite's predictors answer theirs, e.g. 'v2.13-rc')."""
        return __version__

    def save_optimized_pb_model(self, model_dir) -> None:
        """Paddle Lite writes its optimized program as a protobuf model; nnadapter-bridge does not optimize the
        program (the model runs as written), so there is nothing new to write: NotSupportedError."""
        raise NotSupportedError(f"save_optimized_pb_model({model_dir!r}): nnadapter-bridge does not rewrite the "
                                "program, so the protobuf model you loaded is already what runs; copy it, or write "
                                "a Paddle Lite .nb with save_optimized_model")

    def save_optimized_model(self, model_path) -> None:
        """Paddle Lite's CxxPredictor.save_optimized_model: write the model as a Paddle Lite optimized model,
        `<model_path>.nb` (".nb" is always appended, as Paddle Lite does), that Paddle Lite 2.13's
        MobileConfig.set_model_from_file loads and nnadapter-bridge too (loader/naive_buffer_writer.py). The
        ops are written as the model holds them (no fusion pass runs here)."""
        # Imported here: the writer (and flatbuffers) serves this one call, not a predictor's start.
        from nnadapter_bridge.loader.naive_buffer_writer import save

        if not isinstance(model_path, (str, os.PathLike)) or not str(model_path):
            raise ConfigError(f"save_optimized_model: expected a path, got {model_path!r}")
        save(self.graph, os.fspath(model_path) + ".nb")

    # -- running -----------------------------------------------------------------------------------
    def _checked_input(self, tensor: Tensor) -> np.ndarray:
        array = tensor._value()
        if array is None:
            raise InputError(f"input '{tensor.name}' was not set: call get_input_by_name('{tensor.name}')"
                             ".from_numpy(array) before run()")
        # The declared shape is not checked: Paddle runs any shape (module docstring).
        tensor.check_lod()
        if tensor.declared_dtype is not None and array.dtype != tensor.declared_dtype:
            if _widens(array.dtype, tensor.declared_dtype):
                # Paddle Inference runs an int32 array fed to an int64 input (token ids, say): its kernels take
                # either. Widened, every value is the same.
                return array.astype(tensor.declared_dtype)
            raise InputError(f"input '{tensor.name}' expects {_expected(tensor)}; got {array.dtype} "
                             f"{list(array.shape)}. Convert it with array.astype('{tensor.declared_dtype}')")
        return array

    def _contradicted_inputs(self) -> list:
        """The input tensors whose shapes contradict their declared shapes (another rank, or another size on an
        axis declared with a size)."""
        found = []
        for tensor in self._inputs:
            array, declared = tensor._value(), tensor.declared_shape
            if array is None or tensor.declared_dtype is None:
                continue
            if array.ndim != len(declared) or any(d >= 0 and d != s for d, s in zip(declared, array.shape)):
                found.append(tensor)
        return found

    def _run_on_host(self, ops, scope: dict, reason: str | None = None) -> None:
        """An engine's fallback (engine.SubgraphEngine.host_fallback): `ops` of a subgraph on the host, because
        its devices failed to compile or run it or it cannot be converted for these input shapes; `reason`
        says which when the engine gives it. Recorded for placements() and the run-time warning."""
        if ops and _moved_key(ops[0]) not in self._shared.moved_to_host:
            self._note_moved_to_host(ops, reason)
        self._add_params(scope)
        if self.host is None:
            self.host = _make_host_executor(self.graph, self.device_names)
            if self.host is None:
                raise UnsupportedOpError("the host executor (nnadapter_bridge.host) is not available to run a "
                                         "subgraph its devices cannot take for these input shapes")
        with self._host_thread_cap():
            for op in ops:
                self.host.run(op, scope)

    def _note_moved_to_host(self, ops, reason: str | None) -> None:
        moved = {_moved_key(op): reason or self._moved_reason(op) for op in ops}
        with self._shared.lock:
            for index, why in moved.items():
                self._shared.moved_to_host.setdefault(index, why)

    def _moved_reason(self, op) -> str:
        """Why the engine of `op`'s subgraph runs it on the host (engine module docstring): the devices declined
        it once its shapes were concrete (the subgraph was split), they failed to compile or run the subgraph, or
        the subgraph cannot be converted for input shapes that contradict the declared ones."""
        index = self.partition.subgraph_index_of(op)
        engine = self.engines.get(index) if index is not None else None
        where = f"subgraph {index}" if index is not None else "its subgraph"
        pool = getattr(engine, "pool", None)
        for split in (getattr(pool, "splits", None) or {}).values():
            declined = split.declined.get(op.index)
            if declined and getattr(split, "at_run", False):
                return f"{where} was split around it at run time: " + "; ".join(declined)
            if declined:
                return (f"declined once {where} was compiled for the actual input shapes (the subgraph was split): "
                        + "; ".join(declined))
        failed = sorted(getattr(pool, "failed_devices", ()) or ())
        if failed:
            return (f"{where} moved to the host at run time: {', '.join(failed)} failed to compile or run it (the "
                    "DeviceFallbackWarning gives the error)")
        return (f"{where} moved to the host at run time: it cannot be converted for the input shapes given, which "
                "contradict the declared ones")

    def _warn_if_moved_to_host(self) -> None:
        """The run-time HostPlacementWarning (module docstring, step 4), once."""
        shared = self._shared
        with shared.lock:
            if shared.moved_warned or not shared.moved_to_host or self.settings.strict:
                return
            shared.moved_warned = True
        warnings.warn(host_share_message(self._host_share(), self.device_names or ["(no device)"]),
                      HostPlacementWarning, stacklevel=3)

    def _host_thread_cap(self):
        """The BLAS cap of Config.set_threads around host work (nnadapter_bridge.nnadapter.blas_threads); none
        without."""
        if not self._host_threads:
            return contextlib.nullcontext()
        return limit_blas_threads(self._host_threads)

    def _on_build(self, engine: SubgraphEngine) -> None:
        # Created on the first build of a run only: most runs build nothing and need no display.
        if self._progress is None:
            self._progress = Progress(len(self.engines), enabled=None if self.settings.show_progress else False)
        self._progress.update(engine.index + 1, engine.subgraph.ops)

    def run(self) -> None:
        """Run the model on the input tensors; concurrent calls on one predictor are serialised (module
        docstring: for parallel runs, clone())."""
        with self._run_lock:
            if self._closed:
                raise ConfigError("run() on a closed predictor")
            for tensor in self._inputs:
                tensor._hold()  # a from_numpy meanwhile (another thread) fills a new buffer, never this run's
            try:
                self._run()
            finally:
                for tensor in self._inputs:
                    tensor._release()
            if self._shared.moved_to_host and not self._shared.moved_warned:
                self._warn_if_moved_to_host()
            resources = self._shared.resources
            memo = resources.fingerprint_memo if resources is not None else None
            if memo is not None and memo.pending:  # a fingerprint to remember for the next start
                memo.flush()

    def _add_params(self, scope: dict) -> None:
        """Put the params into a run's scope (references only: they stay memory-mapped), once: a run whose steps
        are all device subgraphs needs none, unless a subgraph falls back to the host."""
        if self._params_scope is not scope:
            for name, value in self.graph.params.items():
                scope.setdefault(name, value)
            self._params_scope = scope

    def _direct_plan(self) -> tuple | None:
        """For a plan of one device subgraph that reads every input and writes every output (no host op, nothing
        fetched from elsewhere): (its engine, the input tensors in its input order, per output tensor the index of
        the engine's output), whose engine run() hands the input arrays straight to (SubgraphEngine.run_on);
        None otherwise."""
        if len(self._plan) != 1 or self._plan[0][0] is None or self.host_ops or len(self.engines) != 1:
            return None
        engine = self._plan[0][0]
        inputs = {tensor.name: tensor for tensor in self._inputs}
        if not engine.output_names or sorted(engine.input_names) != sorted(inputs) \
                or any(tensor.name not in engine.output_names for tensor in self._outputs):
            return None
        return (engine, [inputs[name] for name in engine.input_names],
                [engine.output_names.index(tensor.name) for tensor in self._outputs])

    def _direct_arrays(self, tensors: list) -> list | None:
        """The input arrays for SubgraphEngine.run_on, or None when one needs the usual path's checks (not set, a
        dtype the model does not declare, a LoD to check)."""
        arrays = []
        for tensor in tensors:
            array = tensor._array
            if array is None or tensor._lod or (tensor.declared_dtype is not None
                                                 and array.dtype != tensor.declared_dtype):
                return None
            arrays.append(array)
        return arrays

    def _set_direct_outputs(self, engine, indexes: list, outputs: list) -> None:
        """The output tensors of a run_on: the device program's arrays are the run's own; anything else (what a
        host fallback wrote, an array fetched twice) is copied, as _run does."""
        own = {id(array) for array in engine.device_outputs}
        engine.device_outputs = ()
        for tensor, index in zip(self._outputs, indexes):
            result = outputs[index]
            if id(result) in own:
                own.discard(id(result))
            else:
                result = np.array(result, copy=True, order="C")
            tensor._set_result(result)
        self._runs += 1

    def _run(self) -> None:
        scope: dict = {}
        self._params_scope = None
        self._progress = None
        direct = self._direct
        arrays = self._direct_arrays(direct[1]) if direct is not None else None
        if arrays is not None:
            # A plan of one device subgraph: its inputs handed straight to it, without the scope and the plan walk
            # (tens of us a run on a sub-millisecond model, right after a device run has left the caches cold)
            try:
                outputs = direct[0].run_on(arrays, scope)
            except (BridgeError, ValueError, IndexError) as exc:
                self._raise_for_inputs(exc)
                raise
            finally:
                self._end_run()
            self._set_direct_outputs(direct[0], direct[2], outputs)
            return
        if self.host_ops:
            self._add_params(scope)
        for tensor in self._inputs:
            scope[tensor.name] = self._checked_input(tensor)
        try:
            if self.host_ops:
                # set_threads' BLAS cap is entered once per run (not per host op: each entry costs a library call)
                with self._host_thread_cap():
                    self._run_plan(scope)
            else:
                self._run_plan(scope)
        except (BridgeError, ValueError, IndexError) as exc:
            self._raise_for_inputs(exc)
            raise
        finally:
            self._end_run()
        # Output tensors hold arrays that are theirs alone (Tensor.numpy hands them out as they are): a device
        # program's output is a new array of the run's (SubgraphEngine.device_outputs); anything else (a host op's
        # result, which may be a view of a parameter or an input, a fetched parameter, an array fetched twice) is
        # copied here.
        own = {}
        for engine in self._engines_in_plan:
            own.update((id(a), a) for a in engine.device_outputs)
            engine.device_outputs = ()  # held no longer than the run: most are intermediate results
        for tensor in self._outputs:
            if tensor.name in scope:
                result = scope[tensor.name]
            elif tensor.name in self.graph.params:  # a fetched parameter (the scope has params only when needed)
                result = self.graph.params[tensor.name]
            else:
                raise InputError(f"output '{tensor.name}' was not produced by the run; the model's fetch list "
                                 "names a var no op writes")
            # A device output shares its memory with nothing (driver_protocol's run_arrays: not with the run's
            # inputs either); looking at the inputs instead cost ~10 us a run on a sub-millisecond model.
            if own.pop(id(result), None) is None:
                result = np.array(result, copy=True, order="C")
            tensor._set_result(result)
        self._runs += 1

    def _raise_for_inputs(self, exc: BaseException) -> None:
        """A run's failure as the InputError naming the input the model was not made for, when some input's shape
        contradicts its declared shape (Paddle would run those shapes if the model could); nothing otherwise."""
        contradicted = self._contradicted_inputs()
        if not contradicted or isinstance(exc, InputError):
            return
        tensor = contradicted[0]
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"input '{tensor.name}' expects {_expected(tensor)}; got shape "
                         f"{list(tensor._value().shape)}, and the model fails on it: {reason}") from exc

    def _end_run(self) -> None:
        if self._progress is not None:
            self._progress.done()
        self._progress = None
        self._params_scope = None

    def _run_plan(self, scope: dict) -> None:
        for engine, op in self._plan:
            if engine is not None:
                engine.run(scope)
            else:
                self.host.run(op, scope)
                self._host_op_runs += 1

    # -- introspection ------------------------------------------------------------------------------
    @property
    def stats(self) -> PredictorStats:
        totals = EngineStats()
        for engine in self.engines.values():
            totals.add(engine.stats)
        return PredictorStats(runs=self._runs, subgraphs=len(self.engines), host_ops=len(self.host_ops),
                              host_op_runs=self._host_op_runs, builds=totals.builds,
                              cache_hits_file=totals.cache_hits_file, cache_hits_buffer=totals.cache_hits_buffer,
                              cache_misses=totals.cache_misses, subgraph_runs=totals.runs,
                              shape_mismatches=totals.shape_mismatches, subgraph_host_runs=totals.host_runs,
                              device_selection=(self.plan.selection.as_dict() if self.plan.selection is not None
                                                else None))

    def cache_tokens(self) -> list:
        """The tokens of every program built or restored so far (engine order, then build order)."""
        return [p.token for i in sorted(self.engines) for p in self.engines[i].programs]

    def unsupported_reasons(self) -> dict:
        """Op type -> why it is not on a device: the support decision's reasons, and the plan's for the control-flow
        ops (a loop or a branch, which no device runs, is never put to the support decision)."""
        reasons = dict(self.support.reasons)
        forced = self.plan.forced_by()
        for op in self.host_ops:
            if op.type not in reasons and sub_block_indices(op):
                reasons[op.type] = self.plan.host_reason(op, forced)
        return reasons

    def close(self) -> None:
        """Release this predictor's programs; the shared ones (and the device contexts) go with the last of
        a predictor and its clones to close."""
        with self._run_lock:
            if self._closed:
                return
            self._closed = True
            for engine in self.engines.values():
                engine.destroy()
            self._shared.release()

    def __repr__(self) -> str:
        return (f"Predictor(devices={self.device_names}, subgraphs={len(self.engines)}, "
                f"host_ops={len(self.host_ops)})")


def create_predictor(config: Config) -> Predictor:
    """Load, partition and prepare a model; programs are compiled (or restored) on the first run."""
    return Predictor(config)
