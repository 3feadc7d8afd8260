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

Cache token (32 lowercase hex chars):

  Paddle Lite's string L (facts §1), concatenated without separators:
      every device name, in context order; then for every subgraph input, sorted by name (bytewise):
      the name, then either every dim of its current shape as a decimal integer, or, when the input
      has dynamic shape info, every value of every dynamic shape (outer order, then inner).
  plain token    = md5(L)                                   [paddle_lite_cache_token()]
  extended token = md5(L + "\\n" + E), where E is the UTF-8 text of these lines joined by "\\n":
      "nnadapter-bridge-cache-v<CACHE_FORMAT_VERSION>"
      "dtypes:" + ",".join(name + "=" + numpy dtype name) over the sorted inputs
      "subgraph:" + the subgraph fingerprint (64 hex, below)
      "properties:" + the context properties string, verbatim
      "inputs:" + for every sorted input "<name>=<dims comma-joined>" followed by "|<dims>" per dynamic
          shape, the inputs joined by ";" (the compiled input types: NNADAPTER_UNKNOWN for dynamic axes)
      "versions:" + "nnadapter-bridge=<version>", "code=<code_digest()>", "<device>=<driver version>" per device, and every
          environment variable "<DEVICE>_...=<value>" of a selected device (sorted), comma-joined
  fingerprint    = sha256 over, in order: for every op of the subgraph in program order the line
      "op <type>", one line "in <slot>=<names comma-joined>" per input slot (slots sorted), the same
      "out ..." lines for outputs, and one line "attr <name>=<repr of the frozen value>" per attribute
      (sorted by name, Paddle's bookkeeping attributes such as op_callstack left out); then the lines
      "inputs <sorted names>" and "outputs <sorted names>"; then for every weight, sorted by name, the
      line "weight <name> <dtype> <shape>" followed by its raw bytes (C order). Every line ends in "\\n".
      Weights are hashed once per engine, not per run.

The extension makes a stale hit impossible where Paddle Lite's token collides: another subgraph with the
same input names and shapes, changed weights, other context properties, another input dtype. The plain
token is used instead when Config.set_paddle_lite_cache_token(True) is set (to find .nnc files Paddle
Lite wrote).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import warnings
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from nnadapter_bridge.errors import ConfigError, ConversionError, InvalidDimensionsError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, dtype_precision
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning
from nnadapter_bridge.nnadapter.runtime import CacheMissError, Compilation, Context, Execution, HostBuffer
from nnadapter_bridge.nnadapter.types import OperandType
from nnadapter_bridge.support import semantic_attrs

CACHE_FORMAT_VERSION = 2  # 2: the subgraph fingerprint is sha256
_EMPTY_VAR_NAME = "@EMPTY@"


_CODE_DIGEST: Optional[str] = None


def code_digest() -> str:
    """md5 (16 hex) of the source of the packages whose behaviour a cached program or verdict depends on:
    converters, the NNAdapter standard and the in-tree drivers. Computed once per process (~1 MB read)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        import importlib.util

        digest = hashlib.md5()
        for package in ("converters", "hal", "nnadapter_bridge.nnadapter"):
            # Located, not imported: a warm start that restores everything never imports the converters.
            spec = importlib.util.find_spec(package)
            roots = list(spec.submodule_search_locations or []) if spec is not None else []
            for root in roots:
                for directory, subdirs, files in os.walk(root):
                    subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
                    for name in sorted(f for f in files if f.endswith(".py")):
                        path = os.path.join(directory, name)
                        digest.update(f"{package}/{os.path.relpath(path, root)}".encode("utf-8") + b"\0")
                        with open(path, "rb") as f:
                            digest.update(f.read())
        _CODE_DIGEST = digest.hexdigest()[:16]
    return _CODE_DIGEST


# -- tokens ------------------------------------------------------------------------------------------
def _lite_token_string(device_names: Sequence[str], input_dims: Mapping[str, Sequence[int]],
                       dynamic_shape_info: Optional[Mapping[str, Sequence[Sequence[int]]]] = None) -> str:
    dynamic_shape_info = dynamic_shape_info or {}
    parts = list(device_names)
    for name in sorted(input_dims, key=lambda n: n.encode("utf-8")):
        parts.append(name)
        shapes = dynamic_shape_info.get(name)
        if shapes:
            parts.extend(str(int(d)) for shape in shapes for d in shape)
        else:
            parts.extend(str(int(d)) for d in input_dims[name])
    return "".join(parts)


def paddle_lite_cache_token(device_names: Sequence[str], input_dims: Mapping[str, Sequence[int]],
                            dynamic_shape_info: Optional[Mapping[str, Sequence[Sequence[int]]]] = None) -> str:
    """Paddle Lite's own token (facts §1): md5 of device names + sorted inputs with dims or dynamic shapes."""
    return hashlib.md5(_lite_token_string(device_names, input_dims, dynamic_shape_info).encode("utf-8")).hexdigest()


def extended_cache_token(device_names: Sequence[str], input_dims: Mapping[str, Sequence[int]],
                         dynamic_shape_info: Optional[Mapping[str, Sequence[Sequence[int]]]],
                         input_dtypes: Mapping[str, np.dtype], fingerprint: str, context_properties: str,
                         input_types: Optional[Mapping[str, OperandType]] = None,
                         versions: str = "") -> str:
    """The token the engine uses (see the module docstring for the exact recipe)."""
    names = sorted(input_dims, key=lambda n: n.encode("utf-8"))
    lines = [
        f"nnadapter-bridge-cache-v{CACHE_FORMAT_VERSION}",
        "dtypes:" + ",".join(f"{name}={np.dtype(input_dtypes[name]).name}" for name in names),
        "subgraph:" + fingerprint,
        "properties:" + (context_properties or ""),
    ]
    if input_types is not None:
        # Paddle Lite's string runs dims together ("x" + 1,23 == "x" + 12,3): the compiled input types,
        # separated, make such shapes (and dynamic-shape programs built from different current shapes) distinct.
        lines.append("inputs:" + ";".join(
            f"{name}=" + ",".join(str(int(d)) for d in input_types[name].dims)
            + "".join("|" + ",".join(str(int(d)) for d in shape) for shape in input_types[name].dynamic_dims)
            for name in names))
    if versions:
        lines.append("versions:" + versions)
    text = _lite_token_string(device_names, input_dims, dynamic_shape_info) + "\n" + "\n".join(lines)
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def subgraph_fingerprint(ops: Sequence, input_names: Sequence[str], output_names: Sequence[str],
                         weight_names: Sequence[str], params: Mapping[str, np.ndarray]) -> str:
    """sha256 (hex) of the subgraph's ops, attributes, var names and weight bytes (module docstring).

    sha256 rather than md5 here: it hashes the weights (all of a model's bytes) about twice as fast where the
    CPU has SHA instructions, and this runs at every predictor start."""
    digest = hashlib.sha256()

    def line(text: str) -> None:
        digest.update(text.encode("utf-8") + b"\n")

    for op in ops:
        line(f"op {op.type}")
        for slot in sorted(op.inputs):
            line(f"in {slot}={','.join(op.inputs[slot])}")
        for slot in sorted(op.outputs):
            line(f"out {slot}={','.join(op.outputs[slot])}")
        for name, value in semantic_attrs(op):
            line(f"attr {name}={value!r}")
    line("inputs " + ",".join(sorted(input_names)))
    line("outputs " + ",".join(sorted(output_names)))
    for name in sorted(weight_names):
        array = np.ascontiguousarray(params[name])
        line(f"weight {name} {array.dtype.name} {list(array.shape)}")
        digest.update(memoryview(array.reshape(-1)).cast("B"))
    return digest.hexdigest()


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
                 on_build: Optional[Callable[["SubgraphEngine"], None]] = None):
        self.subgraph = subgraph
        self.graph = graph
        self.context = context
        self.cache_dir = cache_dir or ""
        self.cache_buffers = cache_buffers or CacheBufferStore()
        self.context_properties = context_properties or ""
        self.paddle_lite_token = paddle_lite_token
        self.on_build = on_build
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
            self._fingerprint = subgraph_fingerprint(self.subgraph.ops, self.input_names, self.output_names,
                                                     self.subgraph.weight_names, self.graph.params)
        return self._fingerprint

    @property
    def versions(self) -> str:
        """nnadapter-bridge's version, a digest of its converter/standard/driver code, and every device
        driver's name and version: a change to what a converter or driver produces (a release, or an edit in
        a development install) must not hit a cache or support verdict the old code wrote."""
        from nnadapter_bridge import __version__

        versions = [f"nnadapter-bridge={__version__}", f"code={code_digest()}"] + \
            [f"{d.name}={d.version}" for d in self.context.devices]
        # Drivers fall back to environment variables named after them (e.g. INTEL_OPENVINO_INFERENCE_NUM_THREADS)
        # for keys the properties string leaves out: those values shape the program too.
        prefixes = tuple(d.name.upper() + "_" for d in self.context.devices)
        environment = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(prefixes))
        return ",".join(versions + environment)

    def describe(self) -> str:
        return f"subgraph {self.index} ({len(self.subgraph.ops)} ops, first {self.subgraph.ops[0].label()})"

    # -- tokens ------------------------------------------------------------------------------------
    def token_for(self, arrays: Sequence[np.ndarray]) -> str:
        dims = {name: tuple(a.shape) for name, a in zip(self.input_names, arrays)}
        devices = self.context.device_names
        if self.paddle_lite_token:
            return paddle_lite_cache_token(devices, dims, self.dynamic_shape_info)
        dtypes = {name: a.dtype for name, a in zip(self.input_names, arrays)}
        return extended_cache_token(devices, dims, self.dynamic_shape_info, dtypes, self.fingerprint,
                                    self.context_properties, self.input_types_for(arrays), self.versions)

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
            outputs = self._run_new_program(arrays)
        for name, array in zip(self.output_names, outputs):
            scope[name] = array
        self.stats.runs += 1

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
