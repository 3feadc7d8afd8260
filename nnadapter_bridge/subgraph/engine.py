"""The subgraph engine: runs one device subgraph, keeping one compiled program per input-shape signature.

Owns `SubgraphEngine` (find a program for the inputs: a cache buffer, a `.nnc`, else convert and compile; run it;
split the subgraph around operations its devices decline; fall back to the next device or the host on a device
fault), `ProgramPool` / `ContextPool` / `EngineResources` (what a predictor and its clones share), `SplitPlan`,
`CacheBufferStore`, `ShapeFallbackWarning` and `SubgraphSplitWarning`. Entry point: `SubgraphEngine(subgraph,
settings, pool).run(arrays)`; the predictor builds one per subgraph.

Imports the runtime, the `.nnc` format, the cache key, the support decisions and partition; the converters only
when a subgraph is converted (a warm start loads this module and must not load them, nor networkx:
tests/e2e/test_startup_memory.py); never the host executor (the predictor hands it in as `host_fallback`), the
predictor or anything above. docs/architecture.md ("The subgraph engine") tells how a program is found, dynamic
shapes, faults, splits and threads.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from nnadapter_bridge.errors import BridgeError, ConfigError, ConversionError, InvalidDimensionsError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision, ResultCode, dtype_precision
from nnadapter_bridge.nnadapter.driver_protocol import fault_operand
from nnadapter_bridge.nnadapter.nnc import (
    TMP_PREFIX,
    NncCacheWarning,
    has_pending_writes,
    read_kept_json,
    resolve_cache_key,
    write_file_atomically,
)
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.runtime import (
    CacheMissError,
    Compilation,
    Context,
    DeviceFallbackWarning,
    Execution,
    fault_device,
    is_device_fault,
)
from nnadapter_bridge.nnadapter.types import OperandType
from nnadapter_bridge.subgraph import cache_key
from nnadapter_bridge.subgraph.support_decisions import declined_reasons
from partition import PartitionResult, Subgraph, detect_subgraphs, op_key


class ShapeFallbackWarning(UserWarning):
    """A subgraph runs on the host for input shapes its declared shapes did not foresee (module docstring)."""


SPLIT_RECORD_SUFFIX = ".split.json"
SPLIT_RECORD_FORMAT = "nnadapter-bridge-split-v1"
MAX_SPLIT_RECORD_BYTES = 1 << 20  # op indices and reasons: a few KB for a split of hundreds of ops


class SubgraphSplitWarning(DeviceFallbackWarning):
    """A subgraph's concrete program has operations its devices decline: it runs split around them (module
    docstring)."""


def _signature(arrays: Sequence[np.ndarray]) -> tuple:
    return tuple([(a.shape, a.dtype.str) for a in arrays])  # (a list first: a generator costs more per run)


@plain_dataclass
class SplitPlan:
    """How one input signature of a subgraph runs when the devices decline some operations of its concrete model
    (module docstring): `partition` holds the child subgraphs and the declined ops in run order; `declined` maps
    each declined op (its index in the subgraph's block) to why ("OPERATION#k: reason", one per declined
    operation); `pools` the child subgraphs' ProgramPools, shared by the engines of a predictor and its clones;
    `at_run` is true for a split around an operation a device faulted on while running (_split_off_fault), false
    for one its devices declined once the program was compiled for these shapes."""

    partition: PartitionResult  # over the subgraph's ops
    declined: dict
    pools: dict  # child subgraph index -> ProgramPool
    at_run: bool = False


class _Contradicted(Exception):
    """Internal: the concrete program has operations the devices decline; `plan` says how it runs instead."""

    def __init__(self, plan: SplitPlan):
        super().__init__("split")
        self.plan = plan


class _SubgraphView:
    """One subgraph's ops as a program for partition.detect_subgraphs: vars and params are the model's; the outputs
    are the subgraph's (what is read after it)."""

    def __init__(self, graph, subgraph):
        self._graph = graph
        self._ops = list(subgraph.ops)
        self.params = graph.params
        self.outputs = list(subgraph.output_names)
        self.block = getattr(subgraph, "block", 0)  # a loop or branch body's subgraph: its block

    def ops(self) -> list:
        return self._ops

    def var(self, name: str):
        return self._graph.var(name, self.block)


# -- cache buffers -----------------------------------------------------------------------------------
class CacheBufferStore:
    """Config.set_nnadapter_model_cache_buffers, shared by a predictor's engines: each buffer is handed
    out once and then dropped (Paddle Lite empties the scope variable to free the memory). It also carries
    the model cache's integrity key (as the settings resolved it: Config.set_nnadapter_model_cache_key, else
    NNADAPTER_BRIDGE_CACHE_KEY from the environment, see docs/cache.md) to the engines, for buffers and files
    alike."""

    def __init__(self, buffers: Mapping[str, bytes] | None = None, key=None):
        self._buffers = dict(buffers or {})
        self.key = key

    def take(self, token: str) -> bytes | None:
        return self._buffers.pop(token, None)

    def __len__(self) -> int:
        return len(self._buffers)

    def __bool__(self) -> bool:
        return True  # a store without buffers still carries the key (`cache_buffers or ...` must keep it)


# -- what a predictor shares with its clones ----------------------------------------------------------
class ContextPool:
    """The contexts a predictor and its clones run subgraphs on: the predictor's own, and one per subset of
    its devices, made when devices fail (module docstring), shared and destroyed together."""

    def __init__(self, base: Context):
        self.base = base
        self._lock = threading.Lock()
        self._subsets: dict = {}  # tuple of device names -> Context

    def without(self, excluded, order: Sequence[str] | None = None) -> Context | None:
        """The context over the base's devices not in `excluded`, in the base's order or in `order` (a subgraph's
        device order, subgraph.device_selection); None when none is left."""
        listed = self.base.device_names
        names = [n for n in (order or listed) if n not in excluded and n in listed]
        if not names:
            return None
        if names == listed:
            return self.base
        key = tuple(names)
        with self._lock:
            context = self._subsets.get(key)
            if context is None:
                base = self.base
                devices = {d.name: d for d in base.devices}
                context = self._subsets[key] = (Context([devices[n] for n in names], base.properties, base.callback,
                                                        strict=base.strict)
                                                if order else base.subset(names))
        return context

    def destroy(self) -> None:
        """Destroy the subset contexts (the base belongs to the predictor)."""
        with self._lock:
            subsets, self._subsets = self._subsets, {}
        for context in subsets.values():
            context.destroy()


@plain_dataclass(eq=False)
class EngineResources:
    """What every engine of a predictor and of its clones shares, whatever its subgraph: the model, the device
    contexts, the cache buffers (with the integrity key), the ops the mixed-precision config keeps in float, and
    the remembered subgraph fingerprints (support_decisions.FingerprintMemo, or None)."""

    graph: object
    contexts: ContextPool
    cache_buffers: CacheBufferStore = dataclasses.field(default_factory=CacheBufferStore)
    float_ops: frozenset = frozenset()  # block-0 op indices
    fingerprint_memo: object = None


class ProgramPool:
    """One subgraph's programs and fault records, shared by the engines of a predictor and its clones
    (module docstring), with the predictor's EngineResources. Engines `attach` and `release`; the last release
    destroys the originals."""

    def __init__(self, resources: EngineResources, device_order: Sequence[str] | None = None, choice=None):
        self.resources = resources
        self.device_order = tuple(device_order) if device_order else None  # None: the context's (listed) order
        # "fastest" with orders the estimate cannot separate (device_selection.SubgraphChoice): timed on the first
        # run (subgraph.measured_choice), which then sets device_order and `decided`.
        self.choice = choice
        self.decided = choice is None or len(choice.contested) < 2
        self.lock = threading.RLock()  # held while a program is obtained (restored or built) and first run
        self.originals: list = []      # EngineProgram, in build order
        self.retired: list = []        # originals dropped after faults (copies may still share their handles)
        self.host_signatures: set = set()  # input signatures whose ops run on the host
        self.failed_devices: set = set()   # devices that failed to compile this subgraph
        self.failed_for: dict = {}         # input signature -> devices whose program failed to run it
        # device -> (stage, what it failed to do and the error), of the faults above (_commit): a measured choice
        # keeps its winner's with the choice (subgraph.measured_choice).
        self.fault_reasons: dict = {}
        self.splits: dict = {}             # input signature -> SplitPlan (the devices decline some operations)
        self.fingerprint: str | None = None
        self._users = 0

    def excluded(self, signature) -> set:
        return self.failed_devices | self.failed_for.get(signature, set())

    def attach(self) -> None:
        with self.lock:
            self._users += 1

    def release(self) -> None:
        with self.lock:
            self._users -= 1
            if self._users > 0:
                return
            programs = self.originals + self.retired
            self.originals, self.retired = [], []
            self.splits = {}
        for program in programs:
            program.compilation.destroy()


class _BackgroundToken:
    """An engine's cache token for some input arrays, computed on a thread of its own (the subgraph fingerprint
    reads every weight, and hashlib releases the GIL while it hashes) while the caller converts and compiles."""

    def __init__(self, engine: SubgraphEngine, arrays: Sequence[np.ndarray]):
        self._token: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(engine, list(arrays)), daemon=True,
                                        name=f"nnadapter-bridge token of subgraph {engine.index}")
        self._thread.start()

    def _run(self, engine: SubgraphEngine, arrays: list) -> None:
        try:
            self._token = engine.token_for(arrays)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> str:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._token


class _DeviceFault(Exception):
    """Internal: a device failed at `stage` ("context", "compile" or "run"); its part must run elsewhere."""

    def __init__(self, devices, error: BaseException, stage: str, program=None, new: bool = False):
        super().__init__(str(error))
        self.devices = tuple(devices)
        self.error = error
        self.stage = stage
        self.program = program  # the EngineProgram that failed to run, if any
        self.new = new          # that program was built by this run and is in no list yet


class RunConditionFault(NNAdapterError):
    """A program's run-time condition output names a Paddle op whose data its device operations would not answer as
    Paddle does (converters/context.py, run-time conditions): `paddle_op_index` runs on the host for those shapes."""

    def __init__(self, message: str, paddle_op_index: int, why: str):
        super().__init__(message, ResultCode.FEATURE_NOT_SUPPORTED)
        self.paddle_op_index = paddle_op_index
        self.why = why  # what the condition checks that the data fails (the converter's `condition`)


# -- the engine ---------------------------------------------------------------------------------------
@plain_dataclass
class EngineStats:
    builds: int = 0               # programs compiled from a converted model
    cache_hits_file: int = 0      # programs restored from <cache_dir>/<token>.nnc
    cache_hits_buffer: int = 0    # programs restored from a cache buffer
    cache_misses: int = 0         # lookups (file or buffer) that found nothing usable
    runs: int = 0                 # successful executions
    shape_mismatches: int = 0     # programs skipped because they could not take the input shapes
    host_runs: int = 0            # runs done op by op on the host: no program for shapes beyond the declared
    split_runs: int = 0           # runs split around operations the devices declined (SplitPlan)

    def add(self, other: EngineStats) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@plain_dataclass(eq=False)  # compared by identity: engines and pools hold the very objects
class EngineProgram:
    """One compiled (or restored) program and the input types it was compiled for."""

    compilation: Compilation
    token: str
    source: str  # "build", "file" or "buffer"
    input_types: list
    original: EngineProgram | None = None  # for a copy made from a ProgramPool original: that original
    execution: Execution = dataclasses.field(init=False)  # kept: what it looks up is not looked up per run

    def __post_init__(self) -> None:
        self.execution = Execution(self.compilation)

    def accepts(self, arrays: Sequence[np.ndarray]) -> bool:
        """Whether the inputs fit the compiled types: same count, dtype, rank, and every known axis."""
        if len(arrays) != len(self.input_types):
            return False
        for array, compiled in zip(arrays, self.input_types):
            if array.dtype != compiled.dtype or array.ndim != compiled.rank:
                return False
            if any(d != UNKNOWN and d >= 0 and d != s for d, s in zip(compiled.dims, array.shape)):
                return False
        return True


class SubgraphEngine:
    """Runs one partition.Subgraph on an NNAdapter context (see the module docstring).

    `settings`: the predictor's resolved settings (predictor.settings.PredictorSettings; read here: cache_dir,
    paddle_lite_cache_token, context_properties, dynamic_shape_info, strict); `pool`: the subgraph's ProgramPool,
    shared with the predictor's clones, whose `resources` hold the model, the contexts and the cache buffers.
    `host_fallback(ops, scope[, reason])` runs ops on the host (the predictor's, outside strict mode); faults
    degrade (module docstring) outside strict mode. `on_build(engine)` is called before a program is converted."""

    def __init__(self, subgraph, settings, pool: ProgramPool, *,
                 on_build: Callable[[SubgraphEngine], None] | None = None,
                 host_fallback: Callable[..., None] | None = None, name: str = ""):
        resources = pool.resources
        self.subgraph = subgraph
        self.settings = settings
        self.name = name or f"subgraph {subgraph.index}"  # a split's child engines: "subgraph 3.1"
        # The ops of this subgraph the mixed-precision quantization config keeps in float (block-0 indices).
        self.float_ops = frozenset(op.index for op in subgraph.ops
                                   if op.index in resources.float_ops and getattr(op, "block_idx", 0) == 0)
        self.graph = resources.graph
        self.block = getattr(subgraph, "block", 0)  # 0, or the loop or branch body holding its ops
        self.contexts = resources.contexts
        # The subgraph's device order (subgraph.device_selection), else the listed one: the context of every run.
        self.base_context = resources.contexts.without((), pool.device_order)
        self.context = self.base_context
        self._order = pool.device_order  # the pool's order base_context was made for (measured_choice changes it)
        self.degrade = not settings.strict
        self.pool = pool
        self.pool.attach()
        self._released = False
        self.cache_dir = settings.cache_dir or ""
        self.cache_buffers = resources.cache_buffers
        self.context_properties = settings.context_properties or ""
        self.paddle_lite_token = bool(settings.paddle_lite_cache_token)
        self.on_build = on_build
        self.host_fallback = host_fallback  # host_fallback(ops, scope) runs ops on the host (module docstring)
        self.host_signatures: set = self.pool.host_signatures  # input signatures that run on the host
        self.input_names = sorted(subgraph.input_names, key=lambda n: n.encode("utf-8"))
        self.output_names = sorted(subgraph.output_names, key=lambda n: n.encode("utf-8"))
        info = settings.dynamic_shape_info
        self.dynamic_shape_info = {n: [list(s) for s in info[n]] for n in self.input_names if n in info}
        self.programs: list[EngineProgram] = []
        self._chosen: dict = {}  # input signature -> (context, program) that ran it first (_run_with)
        self.device_outputs: Sequence[np.ndarray] = ()  # of the last run (run)
        self.stats = EngineStats()
        self._fingerprint: str | None = None
        self.fingerprint_memo = resources.fingerprint_memo  # support_decisions.FingerprintMemo, or None
        self._split_steps: dict = {}  # input signature -> [child engine or host op] of its SplitPlan, in run order

    @property
    def index(self) -> int:
        return self.subgraph.index

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            if self.pool.fingerprint is None:  # hashed once for a predictor and its clones
                memo = self.fingerprint_memo
                # What names this subgraph's fingerprint beyond the program and its params file (FingerprintMemo).
                parts = (cache_key.CACHE_FORMAT_VERSION, self.block, tuple(op.index for op in self.subgraph.ops),
                         tuple(self.input_names), tuple(self.output_names), tuple(self.subgraph.weight_names),
                         tuple(sorted(self.float_ops)))
                found = memo.get(parts) if memo is not None else None
                if found is None:
                    started = time.time_ns()
                    found = cache_key.subgraph_fingerprint(
                        self.subgraph.ops, self.input_names, self.output_names, self.subgraph.weight_names,
                        self.graph.params, **({"float_ops": sorted(self.float_ops)} if self.float_ops else {}))
                    self._release_weights()  # hashing read every weight: not a reason to keep them resident
                    if memo is not None:
                        memo.put(parts, found, started)
                self.pool.fingerprint = found
            self._fingerprint = self.pool.fingerprint
        return self._fingerprint

    def _release_weights(self) -> None:
        """Drop the resident pages of the memory-mapped Paddle params (ProgramGraph.release_param_pages):
        after hashing them, and once a device holds its own copy. Host ops and host fallbacks still read
        them (mapped back from the file on access)."""
        release = getattr(self.graph, "release_param_pages", None)
        if release is not None:
            release()

    def describe(self) -> str:
        return f"{self.name} ({len(self.subgraph.ops)} ops, first {self.subgraph.ops[0].label()})"

    # -- tokens ------------------------------------------------------------------------------------
    def token_for(self, arrays: Sequence[np.ndarray]) -> str:
        dims = {name: tuple(a.shape) for name, a in zip(self.input_names, arrays)}
        devices = self.context.device_names
        if self.paddle_lite_token:
            return cache_key.paddle_lite_cache_token(devices, dims, self.dynamic_shape_info)
        dtypes = {name: a.dtype for name, a in zip(self.input_names, arrays)}
        return cache_key.extended_cache_token(devices, dims, self.dynamic_shape_info, dtypes, self.fingerprint,
                                              self.context_properties, self.input_types_for(arrays),
                                              cache_key.versions(self.context))

    def input_types_for(self, arrays: Sequence[np.ndarray]) -> dict:
        """The model input operand types for these arrays (dynamic shape info applied, facts §5.2)."""
        types = {}
        for name, array in zip(self.input_names, arrays):
            dims = list(array.shape)
            dynamic = ()
            shapes = self.dynamic_shape_info.get(name)
            if shapes:
                if any(len(s) != len(dims) for s in shapes):
                    raise ConfigError(f"set_nnadapter_dynamic_shape_info['{name}']: shapes {shapes} have rank "
                                      f"{len(shapes[0])}, but '{name}' arrives with shape {list(array.shape)}; "
                                      "give shapes of the input's rank")
                for axis, size in enumerate(array.shape):
                    if any(s[axis] != size for s in shapes):
                        dims[axis] = UNKNOWN
                dynamic = tuple(tuple(s) for s in shapes)
            types[name] = OperandType(precision=dtype_precision(array.dtype), dims=tuple(dims), dynamic_dims=dynamic)
        return types

    # -- running ------------------------------------------------------------------------------------
    def run(self, scope: dict) -> None:
        """Read the inputs from `scope`, run the subgraph, write its outputs into `scope`. `device_outputs` is then
        the list of arrays a device program gave (each the run's own: driver_protocol's run_arrays and the output
        access functions give new arrays): those of its program, or of a split's child programs; empty when the host
        wrote them all (a fallback)."""
        self.device_outputs = ()
        if not self.output_names:
            # Nothing outside reads what the subgraph makes (ops whose results a program leaves unused, e.g. in a
            # PyLayer's forward): running it changes nothing, and a device may refuse a program without outputs
            # (onnxruntime cannot load a graph it prunes to nothing).
            return
        arrays = []
        for name in self.input_names:
            try:
                arrays.append(np.asarray(scope[name]))
            except KeyError:
                raise ConversionError(f"{self.describe()}: input var '{name}' has no value; nothing before "
                                      "this subgraph produced it") from None
        for name, array in zip(self.output_names, self.run_on(arrays, scope)):
            scope[name] = array

    def run_on(self, arrays: list, scope: dict) -> list:
        """run on `arrays` in input_names order, the outputs returned: the device program's (device_outputs too), or
        what the host or a split wrote into `scope` (which then holds the inputs as well). The predictor calls it
        straight for a plan of this subgraph alone, without a scope of its own."""
        self.device_outputs = ()
        signature = _signature(arrays)
        outputs = self._run_steady(arrays, signature, scope)
        if outputs is None:
            outputs = self._run_unsteady(arrays, signature, self._with_inputs(scope, arrays))
        return outputs

    def _run_steady(self, arrays: list, signature, scope: dict) -> list | None:
        """The steady state: the program that ran these shapes last, on the whole context, nothing failed or split
        since. Run without the layers of the usual path, which cost ~50 us a run right after a device run has left
        the caches cold (ERNIE on microsoft_onnxruntime: 0.47 ms runs). None when it does not apply (nothing ran)."""
        pool = self.pool
        chosen = self._chosen.get(signature)
        if chosen is None or chosen[0] is not self.base_context or not pool.decided \
                or pool.device_order is not self._order \
                or pool.failed_devices or pool.failed_for or pool.splits or self.host_signatures:
            return None
        try:
            outputs = self._execute_checked(chosen[1], arrays)
        except InvalidDimensionsError:  # the usual path drops the memo and looks for another program
            outputs = self._run_on_devices(arrays, signature, self._with_inputs(scope, arrays))
        except _DeviceFault as fault:  # twice in a row: the usual path takes it from there
            outputs = self._run_on_devices(arrays, signature, self._with_inputs(scope, arrays), fault)
        return self._ran(outputs, scope)

    def _ran(self, outputs: list | None, scope: dict) -> list:
        """A run's outputs: the device program's (counted, kept as device_outputs), or, when the host or a split
        ran it (None), what it wrote into `scope`."""
        if outputs is None:
            return [scope[name] for name in self.output_names]
        self.device_outputs = outputs
        self.stats.runs += 1
        return outputs

    def _with_inputs(self, scope: dict, arrays: list) -> dict:
        for name, array in zip(self.input_names, arrays):
            scope.setdefault(name, array)
        return scope

    def _run_unsteady(self, arrays: list, signature, scope: dict) -> list:
        """run's usual path: the device order decided (timed, for "fastest"), then the host, a split or the
        devices for these shapes (outputs as _ran gives them)."""
        pool = self.pool
        if not pool.decided:  # "fastest" with close estimates: the orders are timed now, once per pool
            from nnadapter_bridge.subgraph import measured_choice

            measured_choice.decide(self, scope, arrays)
        if pool.device_order is not self._order:  # decided by another engine of the pool (a clone)
            self._order = pool.device_order
            self.base_context = self.context = self.contexts.without((), self._order)
        if self.host_signatures and signature in self.host_signatures:
            self._run_on_host(scope)
            return self._ran(None, scope)
        if pool.splits and signature in pool.splits:
            self._run_split(signature, scope)
            return self._ran(None, scope)
        return self._ran(self._run_on_devices(arrays, signature, scope), scope)

    def _run_on_devices(self, arrays: Sequence[np.ndarray], signature, scope: dict,
                        first_fault: _DeviceFault | None = None) -> list | None:
        """Run on the context without the devices that failed (module docstring), falling back device by
        device, then to the host; None when the host ran it. Faults are committed once a fallback ran.
        `first_fault`: the base context's program already failed this run (run's steady path)."""
        faults: list = []  # run faults of this run, committed once a fallback ran (module docstring)
        if first_fault is not None and self._split_off_fault(first_fault, arrays, signature, scope):
            return None
        if first_fault is not None:
            if not set(first_fault.devices) & set(self.base_context.device_names):
                first_fault.devices = tuple(self.base_context.device_names)  # always progress towards the host
            faults.append(first_fault)
        try:
            while True:
                pool = self.pool
                if faults or pool.failed_devices or pool.failed_for:
                    excluded = pool.excluded(signature).union(*(f.devices for f in faults))
                else:
                    excluded = ()  # no device failed: the whole context (the common case, kept cheap)
                try:
                    context = (self.contexts.without(excluded, self.pool.device_order) if excluded
                               else self.base_context)
                except NNAdapterError as exc:  # a context over the remaining devices cannot be created
                    if not (self.degrade and fault_device(exc) and is_device_fault(exc)):
                        raise
                    self._commit(_DeviceFault([fault_device(exc)], exc, "context"), signature, excluded)
                    continue
                try:
                    if context is None:
                        if self.host_fallback is None or not self.degrade:
                            raise faults[-1].error if faults else NNAdapterError(
                                f"{self.describe()}: no device is left to run it")
                        ran_on = sorted({name for fault in faults for name in fault.devices})
                        self._run_on_host(scope, (
                            f"{self.name} moved to the host at run time: {', '.join(ran_on)} failed to run it for "
                            "the input shapes given (the DeviceFallbackWarning gives the error)") if ran_on else None)
                        outputs = None
                    else:
                        outputs = self._run_with(context, arrays, signature, scope)
                except _DeviceFault as fault:
                    if not set(fault.devices) & set(context.device_names):
                        fault.devices = tuple(context.device_names)  # always progress towards the host
                    if fault.stage == "run":
                        if not faults and self._split_off_fault(fault, arrays, signature, scope):
                            return None
                        faults.append(fault)
                    else:  # a compile fault is never the caller's: committed at once
                        self._commit(fault, signature, excluded)
                    continue
                for fault in faults:
                    self._commit(fault, signature, excluded)
                return outputs
        except BaseException:
            for fault in faults:  # the fallback failed too, with the caller's error: keep what was not dropped
                if fault.program is not None and fault.new:
                    self._adopt(fault.program)
            raise

    def _run_with(self, context: Context, arrays: Sequence[np.ndarray], signature, scope: dict) -> list | None:
        # The program the last scan chose first for this signature on this context (no program before it was
        # tried), run at once: the scan would try it first again. Any change to the programs clears the memo.
        skip = None
        chosen = self._chosen.get(signature)
        if chosen is not None and chosen[0] is context:
            try:
                return self._execute_checked(chosen[1], arrays)
            except InvalidDimensionsError:
                self.stats.shape_mismatches += 1
                self._chosen.pop(signature, None)
                skip = chosen[1]  # tried: the scan goes on from the programs after it
        allowed = set(context.device_names)
        first = skip is None
        for program in list(self.programs):
            if program is skip or not allowed.issuperset(program.compilation.device_names):
                continue
            if not program.accepts(arrays):
                self.stats.shape_mismatches += 1
                first = False
                continue
            try:
                outputs = self._execute_checked(program, arrays)
            except InvalidDimensionsError:
                self.stats.shape_mismatches += 1
                first = False
                continue
            if first:
                self._chosen[signature] = (context, program)
            return outputs
        try:
            return self._obtain_and_run(context, arrays)
        except _Contradicted as contradiction:
            with self.pool.lock:
                plan = self.pool.splits.setdefault(signature, contradiction.plan)
            if plan is contradiction.plan:  # found by this engine (a clone may have found it meanwhile)
                self._warn_split(plan, arrays, context)
            self._run_split(signature, scope)
            return None
        except ConversionError as exc:
            contradicted = self.contradicted_declarations(arrays)
            if self.host_fallback is None:
                raise
            refused = getattr(exc, "failed_op", None)
            if not contradicted and refused is not None and len(self.subgraph.ops) > 1 and any(
                    op is refused or (op.block_idx, op.index) == (refused.block_idx, refused.index)
                    for op in self.subgraph.ops):
                # The support decision took the op with its declared dims (a converter needing sizes they leave
                # unknown); its converter refuses these shapes: that op on the host, the rest on the devices.
                why = str(exc).removeprefix(f"{refused.label()}: ")
                split = self._plan_declining({refused.index: [f"its converter, for these input shapes: {why}"]})
                with self.pool.lock:
                    plan = self.pool.splits.setdefault(signature, split)
                if plan is split:
                    self._warn_split(plan, arrays, context)
                self._run_split(signature, scope)
                return None
            if not contradicted and refused is None:
                raise
            self._run_on_host(scope)  # an error here is the run's error: the shapes fit nowhere
            self.host_signatures.add(signature)
            shapes = "; ".join(contradicted) if contradicted else "its converter refuses these input shapes"
            warnings.warn(f"{self.describe()} cannot be converted for its actual input shapes ({exc}); "
                          f"{shapes}: its ops run on the host for these shapes", ShapeFallbackWarning, stacklevel=4)
            return None

    def _obtain_and_run(self, context: Context, arrays: Sequence[np.ndarray]) -> list:
        """No program of this engine takes the inputs: copy one of the pool's originals that does (another
        engine of the predictor or a clone built it), else restore or build one."""
        with self.pool.lock:
            plan = self.pool.splits.get(_signature(arrays))
            if plan is not None:  # another engine of the pool split it while this one waited for the lock
                raise _Contradicted(plan)
            allowed = set(context.device_names)
            mine = {id(p.original if p.original is not None else p) for p in self.programs}
            for original in list(self.pool.originals):
                if id(original) in mine or not allowed.issuperset(original.compilation.device_names):
                    continue
                if not original.accepts(arrays):
                    continue
                copy = EngineProgram(original.compilation.clone(), original.token, original.source,
                                     original.input_types, original=original)
                self.programs.append(copy)
                try:
                    return self._execute_checked(copy, arrays)
                except InvalidDimensionsError:
                    self.stats.shape_mismatches += 1
            with self._using(context):
                return self._run_new_program(arrays)

    @contextlib.contextmanager
    def _using(self, context: Context):
        """Obtain programs on `context` (the token and the compilation read self.context)."""
        saved, self.context = self.context, context
        try:
            yield
        finally:
            self.context = saved

    def _execute_checked(self, program: EngineProgram, arrays: Sequence[np.ndarray], new: bool = False) -> list:
        """_execute; a device fault is retried once at once, and a second one in a row is a _DeviceFault
        (when faults degrade). The caller's errors propagate unchanged."""
        for attempt in (1, 2):
            try:
                return self._conditions_held(program, self._execute(program, arrays), new)
            except NNAdapterError as exc:
                if not (self.degrade and is_device_fault(exc)):
                    raise
                if attempt == 2:
                    devices = [fault_device(exc)] if fault_device(exc) else program.compilation.device_names
                    raise _DeviceFault(devices, exc, "run", program, new) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _conditions_held(self, program: EngineProgram, outputs: list, new: bool = False) -> list:
        """The subgraph's outputs of a run, once its run-time condition outputs (those after them) say that every
        condition held; a _DeviceFault naming the op of the first that failed otherwise (a RunConditionFault in
        strict mode, where nothing may run on the host)."""
        count = len(self.output_names)
        if len(outputs) == count:
            return outputs
        for code in outputs[count:]:
            index = int(np.asarray(code).reshape(-1)[0])
            if index >= 0:
                raise self._condition_fault(program, index, new)
        return outputs[:count]

    def _condition_fault(self, program: EngineProgram, index: int, new: bool) -> BaseException:
        # Imported here: the converters load only when something is converted; a failed condition is about to
        # split the subgraph, which converts it.
        from converters.registry import get_converter

        op = next((op for op in self.subgraph.ops if op.index == index), None)
        spec = get_converter(op.type) if op is not None else None
        why = spec.condition if spec is not None and spec.condition else "its data fails a run-time condition"
        label = op.label() if op is not None else f"op {index}"
        if not self.degrade:
            return RunConditionFault(f"{self.describe()}: {label}: {why}; strict mode: nothing runs on the host, "
                                     "and the device's answer would not be Paddle's", index, why)
        error = RunConditionFault(f"{label}: {why}", index, why)
        return _DeviceFault(program.compilation.device_names, error, "run", program, new)

    def _adopt(self, program: EngineProgram) -> None:
        """A program this engine obtained (restored or built) and ran: it runs it, the others copy it."""
        self.programs.append(program)
        with self.pool.lock:
            self.pool.originals.append(program)

    def _commit(self, fault: _DeviceFault, signature, excluded) -> None:
        """Record a fault (its devices joining `excluded`, those already left out) and say so, once."""
        left = [n for n in self.base_context.device_names if n not in set(excluded) | set(fault.devices)]
        where = ", ".join(left) if left else "the host"
        with self.pool.lock:
            if fault.stage == "run":
                self.pool.failed_for.setdefault(signature, set()).update(fault.devices)
                shapes = ", ".join(str(list(shape)) for shape, _ in signature)
                what = f"failed twice in a row to run its program for input shapes {shapes}"
                scope = "for these shapes"
            else:
                self.pool.failed_devices.update(fault.devices)
                what = "failed to compile it" if fault.stage == "compile" else "failed to create a context"
                scope = "from now on"
            for device in fault.devices:
                self.pool.fault_reasons[device] = (fault.stage, f"{what} ({fault.error})")
            if fault.program is not None:
                self._drop(fault.program)
        devices = ", ".join(f"'{d}'" for d in fault.devices)
        warnings.warn(f"{self.describe()}: device {devices} {what} ({fault.error}); it runs on {where} {scope}",
                      DeviceFallbackWarning, stacklevel=5)

    def _drop(self, program: EngineProgram) -> None:
        """Stop using a program that failed: this engine's copy is destroyed, an original is retired (other
        engines' copies may share its handle) and destroyed with the pool."""
        self._chosen.clear()
        if program in self.programs:
            self.programs.remove(program)
        original = program.original if program.original is not None else program
        if original in self.pool.originals:
            self.pool.originals.remove(original)
            self.pool.retired.append(original)
        elif program.original is None and program not in self.pool.retired:
            program.compilation.destroy()  # a new program that never made it into the pool: nobody copied it
        if program.original is not None:
            program.compilation.destroy()

    def contradicted_declarations(self, arrays: Sequence[np.ndarray]) -> list:
        """'name declared [..], given [..]' for each input whose shape contradicts its VarDesc (another rank,
        or another size on an axis declared with a size): the support decision did not see these shapes."""
        found = []
        for name, array in zip(self.input_names, arrays):
            try:
                var = self.graph.var(name, self.block)
            except BridgeError:
                continue
            if var.dtype is None:  # not a dense tensor: it declares no shape
                continue
            declared = tuple(int(d) for d in var.shape)
            if len(declared) != array.ndim or any(d >= 0 and d != s for d, s in zip(declared, array.shape)):
                found.append(f"'{name}' declared {list(declared)}, given {list(array.shape)}")
        return found

    def _run_on_host(self, scope: dict, reason: str | None = None) -> None:
        """The subgraph's ops on the host; `reason`, when the caller knows why (device faults for these shapes),
        is what placements show for them."""
        if reason:
            self.host_fallback(self.subgraph.ops, scope, reason)
        else:
            self.host_fallback(self.subgraph.ops, scope)
        self.stats.host_runs += 1

    # -- splitting around the operations the devices decline (module docstring) ------------------------------
    def _split_plan(self, arrays: Sequence[np.ndarray], failure: NNAdapterError) -> SplitPlan | None:
        """The SplitPlan for these inputs when the devices of the current context decline some operations of the
        concrete model (which the support decision, made on the declared dims, did not foresee); None when every
        operation is accepted (the failure is the device's own) or one cannot be traced to a Paddle op. In strict
        mode (no host fallback) a declined operation is an error naming it instead."""
        # Imported here: the converters load only when something is converted (a warm start converts nothing).
        from converters.context import convert_subgraph

        try:
            result = convert_subgraph(self.subgraph.ops, self.graph.params, self.input_types_for(arrays),
                                      self.output_names, self.graph, float_ops=self.float_ops)
            reasons = declined_reasons(self.context, result.model)
            folded = result.constant_names
        except BridgeError:
            return None  # the model could not be made or asked about again: the failure stands as it is
        declined: dict = {}
        for operation, origin, reason in zip(result.model.operations, result.operation_origin, reasons):
            if not reason:
                continue
            if origin is None or getattr(origin, "block_idx", 0) != self.block:
                return None  # an operation no Paddle op of this subgraph's block emitted cannot be split off
            declined.setdefault(origin.index, []).append(f"{operation.label()}: {reason}")
        del result
        if not declined:
            return None
        if self.host_fallback is None and self.degrade:
            return None  # nowhere to run the declined ops but the next device: the failure stands
        if not self.degrade:
            shapes = ", ".join(str(list(a.shape)) for a in arrays)
            lines = "; ".join(f"{op.label()}: {', '.join(declined[op.index])}" for op in self.subgraph.ops
                              if op.index in declined)
            raise NNAdapterError(f"{self.describe()}: for input shapes {shapes}, "
                                 f"{', '.join(self.context.device_names)} decline {lines} (strict mode: nothing "
                                 f"runs on the host)", failure.code) from failure
        return self._plan_declining(declined, folded)

    def _split_off_fault(self, fault: _DeviceFault, arrays: Sequence[np.ndarray], signature, scope: dict) -> bool:
        """A run fault that the driver traced to one operation (driver_protocol.operation_fault: data that operation
        would compute wrongly on the device, an NMS candidate without area, say): split the subgraph for these shapes
        so that only the Paddle op that emitted the operation runs on the host, the rest on the devices as before,
        and run this run so; a failed run-time condition (RunConditionFault) names the Paddle op itself, and a
        subgraph of that op alone runs on the host for these shapes. False, and the fault takes the usual fallback
        (the whole part elsewhere), when the fault names no operation, the operation is not traced to one
        Paddle op, the subgraph has nothing else, or nothing may run on the host."""
        condition = isinstance(fault.error, RunConditionFault)
        operand = fault_operand(fault.error)
        if (operand is None and not condition) or fault.stage != "run" or self.host_fallback is None \
                or not self.degrade:
            return False
        devices = ", ".join(fault.devices)
        if condition and len(self.subgraph.ops) < 2:
            op_label = self.subgraph.ops[0].label()
            # Nothing to split off: the op alone runs on the host for these shapes (every device would fail it).
            self.host_signatures.add(signature)
            if fault.program is not None:
                with self.pool.lock:
                    self._drop(fault.program)
            shapes = ", ".join(str(list(a.shape)) for a in arrays)
            warnings.warn(f"{self.describe()}: for input shapes {shapes}, {op_label}: {fault.error.why}; it runs on "
                          "the host for these shapes from now on", SubgraphSplitWarning, stacklevel=5)
            self._run_on_host(scope, f"on the host for these input shapes: {fault.error.why}")
            return True
        if len(self.subgraph.ops) < 2:
            return False
        index = fault.error.paddle_op_index if condition else self._paddle_op_emitting(operand, arrays)
        if index is None or index not in {op.index for op in self.subgraph.ops}:
            return False
        what = (f"its data for {devices} fails a run-time condition: {fault.error.why}" if condition
                else f"{devices} faulted on it at run time ({fault.error})")
        plan = self._plan_declining({index: [what]})
        plan.at_run = True
        with self.pool.lock:
            plan = self.pool.splits.setdefault(signature, plan)
            if fault.program is not None:
                self._drop(fault.program)
        op = next(op for op in self.subgraph.ops if op.index == index)
        shapes = ", ".join(str(list(a.shape)) for a in arrays)
        children = plan.partition.subgraphs
        rest = sum(len(child.ops) for child in children)
        happened = (f"{op.label()}: {fault.error.why}" if condition
                    else f"device '{devices}' faulted at run time on {op.label()} ({fault.error})")
        warnings.warn(f"{self.describe()}: for input shapes {shapes}, {happened}; that op runs on the host for "
                      "these shapes from now on, the "
                      f"other {rest} ops on {', '.join(self.base_context.device_names)} as {len(children)} "
                      "subgraph(s)", SubgraphSplitWarning, stacklevel=5)
        self._run_split(signature, scope)
        return True

    def _paddle_op_emitting(self, operand: str, arrays: Sequence[np.ndarray]) -> int | None:
        """The index of the Paddle op of this subgraph whose conversion for `arrays` emits the operation
        whose first output is named `operand` (how a driver names the operation of a fault); None when no one op
        does. Converts the subgraph again (once per fault: the program that faulted keeps no origins)."""
        # Imported here: the converters load only when something is converted (a warm start converts nothing).
        from converters.context import convert_subgraph

        try:
            result = convert_subgraph(self.subgraph.ops, self.graph.params, self.input_types_for(arrays),
                                      self.output_names, self.graph, float_ops=self.float_ops)
        except BridgeError:
            return None
        origins = {(getattr(origin, "block_idx", 0), getattr(origin, "index", None))
                   for operation, origin in zip(result.model.operations, result.operation_origin)
                   if operation.outputs and operation.outputs[0] is not None and operation.outputs[0].name == operand
                   and origin is not None}
        del result
        if len(origins) != 1:
            return None
        block, index = origins.pop()
        ours = {op.index for op in self.subgraph.ops}
        return index if block == self.block and index in ours else None

    def _plan_declining(self, declined: Mapping[int, Sequence[str]], folded: frozenset = frozenset()) -> SplitPlan:
        """The SplitPlan that runs the ops `declined` ({op index in its block: reasons}) on the host.

        `folded`: the vars the concrete conversion of the whole subgraph folded into constants (shape arithmetic).
        A part converted alone folds such a value only if it computes it itself, and a value handed from one part
        to another (or from the host) is a run-time input there, which a device without its element type cannot
        take and a resize or reshape needs constant. So where the split parts a folded value from an op reading it,
        the op computing it and its readers outside its part run on the host too, until no folded value crosses:
        before the support decision took such values as constants, that is where they ran."""
        declined = {index: list(why) for index, why in declined.items()}
        view = _SubgraphView(self.graph, self.subgraph)
        while True:
            declined_keys = {("op", index) for index in declined}
            partition = detect_subgraphs(view, lambda op, keys=declined_keys: op_key(op) not in keys)
            crossing = self._crossing_folds(partition, folded, set(declined))
            if not crossing:
                break
            for index, why in crossing.items():
                declined.setdefault(index, []).append(why)
        return SplitPlan(partition, {index: tuple(why) for index, why in declined.items()},
                         {child.index: ProgramPool(self.pool.resources, self.pool.device_order)
                          for child in partition.subgraphs})

    def _crossing_folds(self, partition: PartitionResult, folded: frozenset, on_host: set) -> dict:
        """{op index: why} for the ops a split must also run on the host because a folded value crosses between
        its parts (_plan_declining): the writer of each such value and its readers in other parts."""
        if not folded:
            return {}
        home = partition.subgraph_index_of
        writer = {name: op for op in self.subgraph.ops for name in op.output_names() if name in folded}
        found = {}
        for op in self.subgraph.ops:
            for name in op.input_names():
                source = writer.get(name)
                if source is None or source.index in on_host or home(source) == home(op):
                    continue
                # A folded value leaving its part: its writer runs on the host, and so does a reader in another part
                # (there it would be a run-time input where it needs a constant).
                found.setdefault(source.index, f"computes {name}, which the split hands out of its part (a value "
                                               "that follows from the input shapes, folded only where it is made)")
                if op.index not in on_host:
                    found[op.index] = f"reads {name}, which another part of the split computes"
        return found

    # A split found once is remembered in the model cache dir (`<token>.split.json`, token: the program's that
    # failed), so a later start runs the split at once instead of compiling and failing again. The record only moves
    # ops to the host; it is checked in full, and not used with an integrity key (it carries no MAC).
    def _split_record_path(self, token: str) -> str | None:
        if not self.cache_dir or not token or resolve_cache_key(self.cache_buffers.key) is not None:
            return None
        return os.path.join(self.cache_dir, f"{token}{SPLIT_RECORD_SUFFIX}")

    def _read_split_record(self, token: str) -> SplitPlan | None:
        path = self._split_record_path(token)
        if path is None:
            return None
        record, problem = read_kept_json(path, MAX_SPLIT_RECORD_BYTES)
        if record is None:
            if problem:
                warnings.warn(f"split record {path} is unusable ({problem}); compiling the model instead",
                              NncCacheWarning, stacklevel=4)
            return None
        ours = {op.index for op in self.subgraph.ops}
        try:
            if not isinstance(record, dict) or set(record) != {"format", "token", "fingerprint", "declined"}:
                raise ValueError(f"not a {SPLIT_RECORD_FORMAT} record")
            if record["format"] != SPLIT_RECORD_FORMAT or record["token"] != token \
                    or record["fingerprint"] != self.fingerprint:
                raise ValueError("it names another format, program or model")
            declined = record["declined"]
            if not isinstance(declined, dict) or not declined:
                raise ValueError("'declined' is not a non-empty object")
            plan = {}
            for key, reasons in declined.items():
                if not (key.isdigit() and int(key) in ours and isinstance(reasons, list) and reasons
                        and all(isinstance(r, str) for r in reasons)):
                    raise ValueError(f"declined op {key[:20]!r} is not one of this subgraph's ops with its reasons")
                plan[int(key)] = reasons
        except ValueError as exc:
            warnings.warn(f"split record {path} is unusable ({exc}); compiling the model instead", NncCacheWarning,
                          stacklevel=4)
            return None
        return self._plan_declining(plan)

    def _write_split_record(self, token: str, plan: SplitPlan) -> None:
        path = self._split_record_path(token)
        if path is None:
            return
        record = {"format": SPLIT_RECORD_FORMAT, "token": token, "fingerprint": self.fingerprint,
                  "declined": {str(index): list(reasons) for index, reasons in sorted(plan.declined.items())}}
        try:
            write_file_atomically(path, json.dumps(record, ensure_ascii=False, indent=0).encode("utf-8"))
        except OSError as exc:
            warnings.warn(f"cannot write the split record {path}: {exc}", NncCacheWarning, stacklevel=4)

    def _warn_split(self, plan: SplitPlan, arrays: Sequence[np.ndarray], context: Context) -> None:
        shapes = ", ".join(str(list(a.shape)) for a in arrays)
        ops = [op for op in self.subgraph.ops if op.index in plan.declined]
        what = "; ".join(f"{op.label()} ({', '.join(plan.declined[op.index])})" for op in ops)
        children = plan.partition.subgraphs
        rest = sum(len(child.ops) for child in children)
        devices = ", ".join(context.device_names)
        where = "it runs" if len(ops) == 1 else "they run"
        warnings.warn(f"{self.describe()}: for input shapes {shapes}, {devices} declined {len(ops)} op(s) that the "
                      f"support decision took with the declared shapes: {what}; {where} on the host, the other "
                      f"{rest} ops on {devices} as {len(children)} subgraph(s)", SubgraphSplitWarning, stacklevel=5)

    def _run_split(self, signature, scope: dict) -> None:
        steps = self._split_steps.get(signature)
        if steps is None:
            steps = self._split_steps[signature] = self._make_split_steps(self.pool.splits[signature])
        outputs: list = []
        for step in steps:
            if isinstance(step, SubgraphEngine):
                step.run(scope)
                # The children's device outputs are this run's own arrays too: passed up (the predictor hands out
                # those it fetches without a copy) and held no longer than the run (most are intermediate)
                outputs.extend(step.device_outputs)
                step.device_outputs = ()
            else:
                self.host_fallback([step], scope)
        self.device_outputs = outputs
        self.stats.split_runs += 1

    def _make_split_steps(self, plan: SplitPlan) -> list:
        """This engine's run order for a SplitPlan: a child engine per child subgraph (sharing the plan's pools, so
        a predictor's clones share their programs), the declined ops as they are."""
        steps = []
        for step in plan.partition.steps():
            if not isinstance(step, Subgraph):
                steps.append(step)
                continue
            child = SubgraphEngine(step, self.settings, plan.pools[step.index], host_fallback=self.host_fallback,
                                   name=f"{self.name}.{step.index + 1}")
            child.stats = self.stats  # counted as this subgraph's work
            steps.append(child)
        return steps

    def _execute(self, program: EngineProgram, arrays: Sequence[np.ndarray]) -> list:
        return program.execution.run(arrays)

    def _nothing_to_restore(self) -> bool:
        """True when no program could be restored for these inputs whatever their token (module docstring):
        the token is then computed while the subgraph compiles. False whenever the fingerprint is known already
        (nothing to gain) or in Paddle Lite token mode."""
        if self.paddle_lite_token or len(self.cache_buffers) or self._fingerprint is not None \
                or self.pool.fingerprint is not None:
            return False
        if not self.cache_dir:
            return True
        if has_pending_writes():
            return False  # a file being written may be this very program: read it (reading waits for it)
        try:
            with os.scandir(self.cache_dir) as entries:
                return not any(e.name.endswith(".nnc") and not e.name.startswith(TMP_PREFIX) for e in entries)
        except FileNotFoundError:
            return True
        except OSError:
            return False  # unreadable: the usual path says why

    def _run_new_program(self, arrays: Sequence[np.ndarray]) -> list:
        if self._nothing_to_restore():
            token, program = None, None  # named while it compiles (_build)
        else:
            token = self.token_for(arrays)
            program = self._restore(token)
        if program is not None and not program.accepts(arrays):
            # The token matched but the stored program was compiled for other input types (a plain Paddle Lite
            # token, or a file written for another shape): never run it on these inputs.
            program.compilation.destroy()
            self.stats.cache_misses += 1
            warnings.warn(f"model cache for token {token} was compiled for other input shapes or dtypes than "
                          f"{self.describe()} is given; compiling the model instead", NncCacheWarning, stacklevel=3)
            program = None
        if program is not None:
            try:
                outputs = self._execute(program, arrays)
            except InvalidDimensionsError:
                # A cached program for the same token that refuses these shapes: compile a fresh one.
                program.compilation.destroy()
            except NNAdapterError as exc:
                # A cache that passed every check but fails to run (e.g. forged contents): a miss, not a crash.
                program.compilation.destroy()
                self.stats.cache_misses += 1
                warnings.warn(f"model cache for token {token} failed to run ({exc}); compiling the model "
                              "instead", NncCacheWarning, stacklevel=3)
            else:
                self._adopt(program)
                self._release_weights()
                return self._conditions_held(program, outputs)
        plan = self._read_split_record(token) if token is not None else None
        if plan is not None:
            raise _Contradicted(plan)
        try:
            program = self._build(token, arrays)
        except NNAdapterError as exc:
            if not is_device_fault(exc):
                raise
            plan = self._split_plan(arrays, exc)
            if plan is not None:
                if self.cache_dir:
                    self._write_split_record(token or self.token_for(arrays), plan)
                raise _Contradicted(plan) from exc
            if not self.degrade:
                raise
            # Untold which device failed (e.g. the split found no device for an operation): all of them.
            devices = [fault_device(exc)] if fault_device(exc) else self.context.device_names
            raise _DeviceFault(devices, exc, "compile") from exc
        try:
            outputs = self._execute_checked(program, arrays, new=True)
        except _DeviceFault:
            raise  # committed (the program destroyed with the pool) or kept by _run_on_devices
        except InvalidDimensionsError as exc:
            program.compilation.destroy()
            shapes = {n: list(a.shape) for n, a in zip(self.input_names, arrays)}
            raise InvalidDimensionsError(f"{self.describe()}: a program compiled for input shapes {shapes} "
                                         f"refuses them ({exc}); if these inputs have dynamic shape info, "
                                         "list the shapes actually fed") from exc
        except BaseException:
            program.compilation.destroy()  # never keep (or leak) a program whose first run failed
            raise
        self._adopt(program)
        self._release_weights()  # the device holds its own copy of the weights now
        return outputs

    def _cache_options(self) -> dict:
        """The identity and integrity settings of this engine's cache records (docs/cache.md): a record must
        name this token and this subgraph's fingerprint (Paddle Lite token mode also accepts Lite's own
        files, which name nothing) and, with a key, carry a valid HMAC."""
        return {"fingerprint": self.fingerprint, "cache_key": self.cache_buffers.key,
                "accept_unidentified_cache": self.paddle_lite_token}

    def _restore(self, token: str) -> EngineProgram | None:
        buffer = self.cache_buffers.take(token)
        if buffer is not None:
            source = "buffer"
        elif self.cache_dir:
            source = "file"
        else:
            return None
        compilation = Compilation(None, token, buffer, self.cache_dir, self.context, **self._cache_options())
        try:
            compilation.finish()
        except CacheMissError:
            self.stats.cache_misses += 1
            return None
        inputs, outputs = compilation.query_inputs_and_outputs()
        conditions = outputs[len(self.output_names):]  # run-time condition outputs: INT32 [1] each
        if len(inputs) != len(self.input_names) or len(outputs) < len(self.output_names) \
                or any(t.precision != Precision.INT32 or tuple(t.dims) != (1,) for t in conditions):
            compilation.destroy()
            self.stats.cache_misses += 1
            warnings.warn(f"model cache for token {token} has {len(inputs)} inputs / {len(outputs)} outputs, "
                          f"{self.describe()} has {len(self.input_names)} / {len(self.output_names)}; compiling "
                          "the model instead", NncCacheWarning, stacklevel=3)
            return None
        if source == "buffer":
            self.stats.cache_hits_buffer += 1
        else:
            self.stats.cache_hits_file += 1
        return EngineProgram(compilation, token, source, inputs)

    def _build(self, token: str | None, arrays: Sequence[np.ndarray]) -> EngineProgram:
        """Convert and compile a program for `arrays`; a token of None is computed meanwhile (_BackgroundToken)
        and given to the compilation before its first run."""
        # Imported here: the converters load only when something is converted (a warm start converts nothing).
        from converters.context import convert_subgraph

        if self.on_build is not None:
            self.on_build(self)
        input_types = self.input_types_for(arrays)
        naming = _BackgroundToken(self, arrays) if token is None else None
        try:
            result = convert_subgraph(self.subgraph.ops, self.graph.params, input_types, self.output_names,
                                      self.graph, float_ops=self.float_ops, conditions=True)
            missing = [n for n in self.output_names if n not in result.output_names]
            if missing:
                raise ConversionError(f"{self.describe()}: the converters produced no value for output var(s) "
                                      f"{', '.join(missing)}, which later ops or the fetch list read")
            result.model.release_host_memory = self._release_weights  # a driver's hint (nnadapter.model.Model)
            if naming is None:
                options = self._cache_options() if self.cache_dir else {}
            else:  # named below, once hashed
                options = {"cache_key": self.cache_buffers.key, "named_later": True} if self.cache_dir else {}
            compilation = Compilation(result.model, token or "", None, self.cache_dir, self.context, **options)
            compilation.finish()
        except BaseException:
            if naming is not None:
                naming.wait()  # no thread outlives a failed build; the build's error is the one raised
            raise
        if naming is not None:
            try:
                token = naming.result()
                if self.cache_dir:
                    compilation.set_cache_identity(token, self.fingerprint)
            except BaseException:
                compilation.destroy()
                raise
        self.stats.builds += 1
        del result  # the converted model: the device holds what it compiled
        self._release_weights()
        inputs, _ = compilation.query_inputs_and_outputs()
        return EngineProgram(compilation, token, "build", inputs)

    def destroy(self) -> None:
        """Destroy this engine's copies (and its split children's); the originals go with the pool's last user."""
        splits, self._split_steps = self._split_steps, {}
        for steps in splits.values():
            for step in steps:
                if isinstance(step, SubgraphEngine):
                    step.destroy()
        programs, self.programs = self.programs, []
        self._chosen.clear()
        for program in programs:
            if program.original is not None:
                program.compilation.destroy()
        if not self._released:
            self._released = True
            self.pool.release()
