"""The subgraph engine: runs one device subgraph, keeping one compiled program per input-shape signature.

Inputs and outputs are the subgraph's boundary vars sorted by name (as Paddle Lite's engine sorts them).
On each run the programs built so far are tried in build order; a program that cannot take the current
input shapes (the engine checks the known axes of its compiled input types itself, and a driver may
also answer INVALID_DIMENSIONS) is skipped. When none fits, a program is obtained, in this order:

  1. a cache buffer given with Config.set_nnadapter_model_cache_buffers for the token (used once);
  2. `<cache_dir>/<token>.nnc`;
  3. otherwise the subgraph's Paddle ops are converted (converters.convert_subgraph) into an NNAdapter
     Model and compiled; the runtime writes `<cache_dir>/<token>.nnc` after the first successful run.

A cache that fails any check is a miss (one warning) and the model is compiled instead, which rewrites
the file. With several device names, one Context spans all of them and the runtime splits the model.

Dynamic shapes (Config.set_nnadapter_dynamic_shape_info, facts §5.2): an input named there gets, in the
model's input operand type, NNADAPTER_UNKNOWN on every axis where the current shape differs from one of
the given shapes, and those shapes as its dynamic dims; one program then serves all of them.

Declared shapes are hints: Paddle runs whatever shape is fed (a [1] into a var declared [], 300x300 into
one declared [-1, 3, 224, 224]), so programs are compiled for the actual input shapes and dtypes only.
The support decision was made for the declared shapes, though; when the inputs contradict a declared shape
(another rank, or another size on an axis declared with one) and the converters refuse the subgraph for the
actual shapes, the engine runs the subgraph's ops one by one on the host (`host_fallback`, given by the
predictor outside strict mode) for that input signature from then on, with one warning.

The cache token names a program; its recipe (and the subgraph fingerprint inside it) is owned by
nnadapter_bridge.cache_key.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from nnadapter_bridge import cache_key
from nnadapter_bridge.errors import (BridgeError, ConfigError, ConversionError, InvalidDimensionsError,
                                     NNAdapterError)
from nnadapter_bridge.nnadapter.codes import UNKNOWN, dtype_precision
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning
from nnadapter_bridge.nnadapter.runtime import CacheMissError, Compilation, Context, Execution, HostBuffer
from nnadapter_bridge.nnadapter.types import OperandType


class ShapeFallbackWarning(UserWarning):
    """A subgraph runs on the host for input shapes its declared shapes did not foresee (module docstring)."""


def _signature(arrays: Sequence[np.ndarray]) -> tuple:
    return tuple((a.shape, a.dtype.str) for a in arrays)


# -- cache buffers -----------------------------------------------------------------------------------
class CacheBufferStore:
    """Config.set_nnadapter_model_cache_buffers, shared by a predictor's engines: each buffer is handed
    out once and then dropped (Paddle Lite empties the scope variable to free the memory)."""

    def __init__(self, buffers: Optional[Mapping[str, bytes]] = None):
        self._buffers = dict(buffers or {})

    def take(self, token: str) -> Optional[bytes]:
        return self._buffers.pop(token, None)

    def __len__(self) -> int:
        return len(self._buffers)


# -- the engine ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class EngineStats:
    builds: int = 0               # programs compiled from a converted model
    cache_hits_file: int = 0      # programs restored from <cache_dir>/<token>.nnc
    cache_hits_buffer: int = 0    # programs restored from a cache buffer
    cache_misses: int = 0         # lookups (file or buffer) that found nothing usable
    runs: int = 0                 # successful executions
    shape_mismatches: int = 0     # programs skipped because they could not take the input shapes
    host_runs: int = 0            # runs done op by op on the host: no program for shapes beyond the declared

    def add(self, other: "EngineStats") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass
class EngineProgram:
    """One compiled (or restored) program and the input types it was compiled for."""

    compilation: Compilation
    token: str
    source: str  # "build", "file" or "buffer"
    input_types: list

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
    """Runs one partition.Subgraph on an NNAdapter context (see the module docstring)."""

    def __init__(self, subgraph, graph, context: Context, *, cache_dir: str = "",
                 cache_buffers: Optional[CacheBufferStore] = None,
                 dynamic_shape_info: Optional[Mapping[str, Sequence[Sequence[int]]]] = None,
                 context_properties: str = "", paddle_lite_token: bool = False,
                 on_build: Optional[Callable[["SubgraphEngine"], None]] = None,
                 host_fallback: Optional[Callable[[Sequence, dict], None]] = None):
        self.subgraph = subgraph
        self.graph = graph
        self.context = context
        self.cache_dir = cache_dir or ""
        self.cache_buffers = cache_buffers or CacheBufferStore()
        self.context_properties = context_properties or ""
        self.paddle_lite_token = paddle_lite_token
        self.on_build = on_build
        self.host_fallback = host_fallback  # host_fallback(ops, scope) runs ops on the host (module docstring)
        self.host_signatures: set = set()  # input signatures that run on the host
        self.input_names = sorted(subgraph.input_names, key=lambda n: n.encode("utf-8"))
        self.output_names = sorted(subgraph.output_names, key=lambda n: n.encode("utf-8"))
        info = dynamic_shape_info or {}
        self.dynamic_shape_info = {n: [list(s) for s in info[n]] for n in self.input_names if n in info}
        self.programs: list[EngineProgram] = []
        self.stats = EngineStats()
        self._fingerprint: Optional[str] = None

    @property
    def index(self) -> int:
        return self.subgraph.index

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = cache_key.subgraph_fingerprint(self.subgraph.ops, self.input_names, self.output_names,
                                                     self.subgraph.weight_names, self.graph.params)
        return self._fingerprint

    def describe(self) -> str:
        return f"subgraph {self.index} ({len(self.subgraph.ops)} ops, first {self.subgraph.ops[0].label()})"

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
        """Read the inputs from `scope`, run the subgraph, write its outputs into `scope`."""
        arrays = []
        for name in self.input_names:
            try:
                arrays.append(np.asarray(scope[name]))
            except KeyError:
                raise ConversionError(f"{self.describe()}: input var '{name}' has no value; nothing before "
                                      "this subgraph produced it") from None
        if self.host_signatures and _signature(arrays) in self.host_signatures:
            self._run_on_host(scope)
            return
        for program in self.programs:
            if not program.accepts(arrays):
                self.stats.shape_mismatches += 1
                continue
            try:
                outputs = self._execute(program, arrays)
            except InvalidDimensionsError:
                self.stats.shape_mismatches += 1
                continue
            break
        else:
            try:
                outputs = self._run_new_program(arrays)
            except ConversionError as exc:
                contradicted = self.contradicted_declarations(arrays)
                if self.host_fallback is None or not contradicted:
                    raise
                self._run_on_host(scope)  # an error here is the run's error: the shapes fit nowhere
                self.host_signatures.add(_signature(arrays))
                warnings.warn(f"{self.describe()} cannot be converted for its actual input shapes ({exc}); "
                              f"{'; '.join(contradicted)}: its ops run on the host for these shapes",
                              ShapeFallbackWarning, stacklevel=2)
                return
        for name, array in zip(self.output_names, outputs):
            scope[name] = array
        self.stats.runs += 1

    def contradicted_declarations(self, arrays: Sequence[np.ndarray]) -> list:
        """'name declared [..], given [..]' for each input whose shape contradicts its VarDesc (another rank,
        or another size on an axis declared with a size): the support decision did not see these shapes."""
        found = []
        for name, array in zip(self.input_names, arrays):
            try:
                var = self.graph.var(name)
            except BridgeError:
                continue
            if var.dtype is None:  # not a dense tensor: it declares no shape
                continue
            declared = tuple(int(d) for d in var.shape)
            if len(declared) != array.ndim or any(d >= 0 and d != s for d, s in zip(declared, array.shape)):
                found.append(f"'{name}' declared {list(declared)}, given {list(array.shape)}")
        return found

    def _run_on_host(self, scope: dict) -> None:
        self.host_fallback(self.subgraph.ops, scope)
        self.stats.host_runs += 1

    def _execute(self, program: EngineProgram, arrays: Sequence[np.ndarray]) -> list:
        execution = Execution(program.compilation)
        for k, array in enumerate(arrays):
            execution.set_input(k, array)
        holders = [HostBuffer() for _ in self.output_names]
        for k, holder in enumerate(holders):
            execution.set_output(k, holder)
        execution.compute()
        return [holder.array for holder in holders]

    def _run_new_program(self, arrays: Sequence[np.ndarray]) -> list:
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
                self.programs.append(program)
                return outputs
        program = self._build(token, arrays)
        try:
            outputs = self._execute(program, arrays)
        except InvalidDimensionsError as exc:
            program.compilation.destroy()
            shapes = {n: list(a.shape) for n, a in zip(self.input_names, arrays)}
            raise InvalidDimensionsError(f"{self.describe()}: a program compiled for input shapes {shapes} "
                                         f"refuses them ({exc}); if these inputs have dynamic shape info, "
                                         "list the shapes actually fed") from exc
        except BaseException:
            program.compilation.destroy()  # never keep (or leak) a program whose first run failed
            raise
        self.programs.append(program)
        return outputs

    def _restore(self, token: str) -> Optional[EngineProgram]:
        buffer = self.cache_buffers.take(token)
        if buffer is not None:
            source = "buffer"
        elif self.cache_dir:
            source = "file"
        else:
            return None
        compilation = Compilation(None, token, buffer, self.cache_dir, self.context)
        try:
            compilation.finish()
        except CacheMissError:
            self.stats.cache_misses += 1
            return None
        inputs, outputs = compilation.query_inputs_and_outputs()
        if len(inputs) != len(self.input_names) or len(outputs) != len(self.output_names):
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

    def _build(self, token: str, arrays: Sequence[np.ndarray]) -> EngineProgram:
        from converters.context import convert_subgraph

        if self.on_build is not None:
            self.on_build(self)
        input_types = self.input_types_for(arrays)
        result = convert_subgraph(self.subgraph.ops, self.graph.params, input_types, self.output_names, self.graph)
        missing = [n for n in self.output_names if n not in result.output_names]
        if missing:
            raise ConversionError(f"{self.describe()}: the converters produced no value for output var(s) "
                                  f"{', '.join(missing)}, which later ops or the fetch list read")
        compilation = Compilation(result.model, token, None, self.cache_dir, self.context)
        compilation.finish()
        self.stats.builds += 1
        inputs, _ = compilation.query_inputs_and_outputs()
        return EngineProgram(compilation, token, "build", inputs)

    def destroy(self) -> None:
        programs, self.programs = self.programs, []
        for program in programs:
            program.compilation.destroy()
