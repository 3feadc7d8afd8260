"""NNAdapterCompilation: a model (or a model cache) made into device programs, and the `.nnc` written after.

Owns `Compilation` (compile from a model, split across the context's devices; restore from a cache buffer or
`<cache_dir>/<token>.nnc`; clone for another thread; write the cache after the first compute), `Program` (one
device program and its I/O wiring), the statistics `STATS` and the cache write mode. Imports the context,
faults, the `.nnc` format and partitioning; must not import the execution nor anything above the ground.
docs/architecture.md ("The runtime") tells the cache semantics and the threads.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.driver_protocol import Cache
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import (
    BytesLike,
    CacheIdentity,
    CompilationRecord,
    NncCacheWarning,
    PendingCacheWrite,
    ProgramRecord,
    cache_file_path,
    clean_stale_temp_files,
    load_compilation_record,
    pack_compilation_record_parts,
    read_nnc_file,
    resolve_cache_key,
    write_file_atomically,
)
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.runtime.context import Context
from nnadapter_bridge.nnadapter.runtime.devices import Device
from nnadapter_bridge.nnadapter.runtime.faults import CacheMissError, call_driver


# -- statistics --------------------------------------------------------------------------------------
@plain_dataclass
class RuntimeStats:
    compiles: int = 0        # compilations finished from a model
    cache_restores: int = 0  # compilations finished from a .nnc file or buffer
    cache_misses: int = 0    # model-less compilations whose cache was absent or unusable
    cache_writes: int = 0    # .nnc files written

    def reset(self) -> None:
        self.compiles = self.cache_restores = self.cache_misses = self.cache_writes = 0


STATS = RuntimeStats()
_STATS_LOCK = threading.Lock()  # cache_writes is counted by the writer threads


# What a compilation made with named_later gives its drivers as the token until set_cache_identity names it
# (drivers keep program bytes only when a cache has a token and a dir; none reads the token's text).
PENDING_CACHE_TOKEN = "(named after compiling)"


CACHE_WRITE_ENV = "NNADAPTER_BRIDGE_CACHE_WRITE"
CACHE_WRITE_MODES = ("background", "foreground")


def cache_write_mode() -> str:
    """`background` (the default: the .nnc is written by a thread of its own after the first compute) or
    `foreground` (written before the first compute returns), from NNADAPTER_BRIDGE_CACHE_WRITE."""
    mode = os.environ.get(CACHE_WRITE_ENV, "").strip().lower() or "background"
    if mode not in CACHE_WRITE_MODES:
        raise NNAdapterError(f"{CACHE_WRITE_ENV}={os.environ[CACHE_WRITE_ENV]!r}: expected one of "
                             f"{', '.join(CACHE_WRITE_MODES)}", ResultCode.INVALID_PARAMETER)
    return mode


@plain_dataclass
class Program:
    """One device program of a compilation and how its I/O maps to the model's and shared buffers."""

    device: Device
    device_context: Any
    cache: Any  # driver_protocol.Cache
    input_indexes: list
    output_indexes: list
    input_types: list
    output_types: list
    handle: Any = None
    # Every execution of the handle holds this lock; a program sharing its handle with another compilation's
    # (Compilation.clone of a driver without clone_program) shares the lock too, and only the compilation that
    # created the handle destroys it.
    lock: Any = dataclasses.field(default_factory=threading.Lock)
    owns_handle: bool = True


class Compilation:
    """NNAdapterCompilation (docs/architecture.md, "The runtime"). Beyond Lite's arguments, for the model cache
    (docs/cache.md):
    `fingerprint` names the model (written into the .nnc and required to match on restore), `cache_key` is
    the integrity key (str/bytes; None reads NNADAPTER_BRIDGE_CACHE_KEY), and `accept_unidentified_cache`
    accepts a record without identity entries (Paddle Lite's own files). `named_later`: a model compilation
    with a cache dir whose token and fingerprint come from set_cache_identity, after finish() and before the
    first compute (its drivers are asked for program bytes as if it had a token)."""

    def __init__(self, model: Model | None, cache_token: str = "", cache_buffer: BytesLike | None = None,
                 cache_dir: str = "", context: Context | None = None, *, fingerprint: str = "",
                 cache_key: str | bytes | None = None, accept_unidentified_cache: bool = False,
                 named_later: bool = False) -> None:
        if context is None:
            raise NNAdapterError("a compilation needs a context", ResultCode.INVALID_PARAMETER)
        self.model = model
        self.cache_token = cache_token or ""
        self.cache_dir = cache_dir or ""
        self.context = context
        self.fingerprint = fingerprint or ""
        self._cache_key = resolve_cache_key(cache_key)
        self.programs: list = []
        self.input_types: list = []
        self.output_types: list = []
        self.finished = False
        self.restored_from_cache = False
        self.cache_path: str | None = None  # the .nnc written after the first compute, if any
        self._first_compute_done = False
        self._pending_write: PendingCacheWrite | None = None  # the .nnc its own thread is writing
        # Read (and checked: a bad value is the caller's error) before anything compiles. A model compilation may
        # be given its token later (set_cache_identity), so the dir alone decides.
        self._write_mode = cache_write_mode() if model is not None and self.cache_dir else ""
        self._named_later = bool(named_later and model is not None and self.cache_dir and not self.cache_token)
        self._compiled_from_model = False  # finish() compiled `model` (then dropped): the .nnc is written once
        self._record: CompilationRecord | None = None
        self._miss_reason = ""
        if self.cache_dir:
            clean_stale_temp_files(self.cache_dir)  # once per dir and process
        if model is None:
            known = context.device_names
            # Every check (CRC, HMAC with a key, identity, record) runs here, before finish() hands a byte to a driver.
            expect = CacheIdentity(self.cache_token, self.fingerprint, accept_unidentified_cache)
            if cache_buffer is not None and len(cache_buffer):
                self._record = load_compilation_record(bytes(cache_buffer), f"buffer for token '{self.cache_token}'",
                                                       known, expect=expect, key=self._cache_key)
                self._miss_reason = "the cache buffer is unusable"
            elif self.cache_token and self.cache_dir:
                path = cache_file_path(self.cache_dir, self.cache_token)
                self._record = read_nnc_file(path, known, expect=expect, key=self._cache_key)
                self._miss_reason = f"no usable cache file {path}"
            else:
                raise NNAdapterError("a compilation needs a model, a cache buffer, or a cache token and dir",
                                     ResultCode.INVALID_PARAMETER)

    # -- finish ------------------------------------------------------------------------------------
    def finish(self) -> None:
        if self.finished:
            raise NNAdapterError("the compilation is already finished", ResultCode.INVALID_PARAMETER)
        if self.model is None:
            self._finish_from_cache()
        else:
            self._finish_from_model(self.model)
        self.finished = True

    def _finish_from_cache(self) -> None:
        record = self._record
        if record is None:
            STATS.cache_misses += 1
            raise CacheMissError(f"cache token '{self.cache_token}': {self._miss_reason}")
        for i, program in enumerate(record.programs):
            found = self.context.device_context(program.device_name)
            assert found is not None, "load_compilation_record keeps only records for the context's devices"
            device, device_context = found
            cache = Cache(self.cache_token, self.cache_dir, [t.copy() for t in program.input_types],
                          [t.copy() for t in program.output_types],
                          program.model_buffer,  # a read-only view into the .nnc data: not copied
                          mapped_buffer=program.mapped)  # the same bytes, keepable, when the file was mapped
            try:
                handle = call_driver(f"{device.name}.create_program", device.driver.create_program,
                                      device_context, None, cache)
            except NNAdapterError as exc:
                self._destroy_programs()
                STATS.cache_misses += 1
                warnings.warn(f"model cache for token '{self.cache_token}' is unusable (device "
                              f"'{device.name}' rejected program {i}: {exc}); compiling the model instead",
                              NncCacheWarning, stacklevel=3)
                raise CacheMissError(f"cache token '{self.cache_token}': program {i} was rejected by "
                                     f"'{device.name}'") from exc
            self.programs.append(Program(device, device_context, cache, list(program.input_indexes),
                                         list(program.output_indexes), cache.input_types, cache.output_types,
                                         handle))
        self.input_types = [t.copy() for t in record.input_types]
        self.output_types = [t.copy() for t in record.output_types]
        self.restored_from_cache = True
        self._record = None
        STATS.cache_restores += 1

    def _finish_from_model(self, model: Model) -> None:
        from nnadapter_bridge.nnadapter.device_split import Submodel, partition_model  # compiles only

        if len(self.context.devices) == 1:
            submodels = [Submodel(0, model, [-k - 1 for k in range(len(model.input_operands))],
                                  [-k - 1 for k in range(len(model.output_operands))])]
        else:
            supported = []
            for k, device in enumerate(self.context.devices):
                flags = self.context.validate(model, k)
                if flags is None:
                    raise NNAdapterError(f"device '{device.name}' cannot tell which operations it supports, so "
                                         "the model cannot be split across devices",
                                         ResultCode.FEATURE_NOT_SUPPORTED)
                supported.append(flags)
            submodels = partition_model(model, supported, self.context.device_names)
        try:
            for sub in submodels:
                device = self.context.devices[sub.device_index]
                device_context = self.context.device_contexts[sub.device_index]
                cache = Cache(PENDING_CACHE_TOKEN if self._named_later else self.cache_token, self.cache_dir,
                              [o.type.copy() for o in sub.model.input_operands],
                              [o.type.copy() for o in sub.model.output_operands], bytearray())
                handle = call_driver(f"{device.name}.create_program", device.driver.create_program,
                                      device_context, sub.model, cache)
                self.programs.append(Program(device, device_context, cache, sub.input_indexes, sub.output_indexes,
                                             cache.input_types, cache.output_types, handle))
        except BaseException:
            self._destroy_programs()
            raise
        self.input_types = [o.type.copy() for o in model.input_operands]
        self.output_types = [o.type.copy() for o in model.output_operands]
        # The devices hold what they compiled: the model (its constants: folded weights, converted copies)
        # is not needed any more and is not kept (one copy of the weights in the process).
        self.model = None
        self._compiled_from_model = True
        STATS.compiles += 1

    def set_cache_identity(self, cache_token: str, fingerprint: str = "") -> None:
        """Name a compilation made from a model after the fact, before its first compute (the .nnc is written
        after that, under this token and fingerprint): the engine compiles while the weights are still being
        hashed for the token, when no cache could have held the program anyway."""
        if not self._named_later or self._first_compute_done:
            raise NNAdapterError("set_cache_identity is for a compilation made with named_later=True, before its "
                                 "first compute", ResultCode.INVALID_PARAMETER)
        self.cache_token = cache_token or ""
        self.fingerprint = fingerprint or ""
        self._named_later = False
        for program in self.programs:
            program.cache.token = self.cache_token

    # -- queries -----------------------------------------------------------------------------------
    def query_inputs_and_outputs(self) -> tuple:
        """NNAdapterCompilation_queryInputsAndOutputs: copies of the model's input and output types."""
        if not self.finished:
            raise NNAdapterError("query_inputs_and_outputs before finish()", ResultCode.INVALID_PARAMETER)
        return [t.copy() for t in self.input_types], [t.copy() for t in self.output_types]

    @property
    def device_names(self) -> list:
        return [p.device.name for p in self.programs]

    # -- threads -----------------------------------------------------------------------------------
    def clone(self) -> Compilation:
        """A finished compilation sharing this one's compiled programs, with its own execution state, for a
        predictor clone run by another thread. Each program is copied by the driver's optional
        `clone_program(program)` hook (the compiled model shared, new infer request and scratch buffers); a
        driver without the hook (or answering FEATURE_NOT_SUPPORTED) has its program shared, and executions
        of that program are then serialised by a lock. The clone never writes the model cache, and must be
        destroyed before this compilation."""
        if not self.finished:
            raise NNAdapterError("clone() before finish()", ResultCode.INVALID_PARAMETER)
        twin = copy.copy(self)
        twin.programs = []
        twin._record = None
        twin._pending_write = None  # the original's write: its destroy() waits for it
        twin._first_compute_done = True  # the original writes the cache, once
        twin.input_types = [t.copy() for t in self.input_types]
        twin.output_types = [t.copy() for t in self.output_types]
        try:
            for program in self.programs:
                twin.programs.append(self._clone_program(program))
        except BaseException:
            twin._destroy_programs()
            raise
        return twin

    @staticmethod
    def _clone_program(program: Program) -> Program:
        hook = getattr(program.device.driver, "clone_program", None)
        handle = None
        if callable(hook) and program.owns_handle:
            try:
                handle = call_driver(f"{program.device.name}.clone_program", hook, program.handle)
            except NNAdapterError as exc:
                if exc.code != ResultCode.FEATURE_NOT_SUPPORTED:
                    raise
        cache = Cache(program.cache.token, program.cache.dir, program.cache.input_types, program.cache.output_types,
                      bytearray())
        if handle is not None:
            return dataclasses.replace(program, cache=cache, handle=handle, lock=threading.Lock(), owns_handle=True)
        return dataclasses.replace(program, cache=cache, owns_handle=False)  # the same handle, the same lock

    # -- cache writing -----------------------------------------------------------------------------
    def _after_first_compute(self) -> None:
        if self._first_compute_done:
            return
        self._first_compute_done = True
        job = None
        try:
            if self._compiled_from_model and self.cache_token and self.cache_dir and not self._named_later:
                job = self._cache_write_job()
        finally:
            for program in self.programs:  # the program bytes are not needed any more (the job holds its own)
                program.cache.buffer = bytearray()
                program.cache.mapped_buffer = None  # a driver that kept it holds its own reference
                program.cache.exporter = None
        if job is not None:
            if self._write_mode == "foreground":
                job()
            else:
                self._pending_write = PendingCacheWrite(cache_file_path(self.cache_dir, self.cache_token), job)

    def wait_for_cache_write(self, timeout: float | None = None) -> bool:
        """Block until this compilation's .nnc is written (or its write failed); True when nothing is pending."""
        pending = self._pending_write
        if pending is None:
            return True
        if not pending.wait(timeout):
            return False
        self._pending_write = None
        return True

    def _cache_write_job(self) -> Callable[[], None] | None:
        """What writes this compilation's .nnc (PendingCacheWrite runs it), holding its own references to the
        program bytes or exporters; None (with a warning) when a device keeps no program bytes."""
        lacking = [p.device.name for p in self.programs if not p.cache.buffer and p.cache.exporter is None]
        if lacking:
            warnings.warn(f"device(s) {', '.join(lacking)} do not support the model cache; "
                          f"no .nnc written for token '{self.cache_token}'", NncCacheWarning, stacklevel=5)
            return None
        programs = [(p.device.name, p.cache.buffer if p.cache.buffer else None, p.cache.exporter,
                     ProgramRecord(p.device.name, p.input_types, p.input_indexes, p.output_types, p.output_indexes,
                                   b"")) for p in self.programs]
        input_types, output_types = self.input_types, self.output_types
        path = cache_file_path(self.cache_dir, self.cache_token)
        identity = CacheIdentity(self.cache_token, self.fingerprint)
        key = self._cache_key

        def write() -> None:
            records = []
            for device_name, buffer, exporter, record in programs:
                if buffer is None:  # exported now, after the compile's own memory is gone (driver_protocol.Cache)
                    try:
                        buffer = call_driver(f"{device_name}.export", exporter)
                    except NNAdapterError as exc:
                        warnings.warn(f"device '{device_name}' cannot export its program ({exc}); no .nnc written "
                                      f"for token '{identity.token}'", NncCacheWarning, stacklevel=2)
                        return
                    if buffer is None or not len(buffer):
                        warnings.warn(f"device '{device_name}' exported no program bytes; no .nnc written for "
                                      f"token '{identity.token}'", NncCacheWarning, stacklevel=2)
                        return
                records.append(dataclasses.replace(record, model_buffer=buffer))
            try:
                write_file_atomically(path, pack_compilation_record_parts(
                    CompilationRecord(input_types, output_types, records), identity, key))
            except OSError as exc:
                warnings.warn(f"cannot write the model cache {path}: {exc}", NncCacheWarning, stacklevel=2)
                return
            self.cache_path = path
            with _STATS_LOCK:
                STATS.cache_writes += 1

        return write

    # -- teardown ----------------------------------------------------------------------------------
    def _destroy_programs(self) -> None:
        self.wait_for_cache_write()  # its exporter reads the programs destroyed here
        programs, self.programs = self.programs, []
        for program in programs:
            if program.handle is not None and program.owns_handle:
                program.device.driver.destroy_program(program.handle)

    def destroy(self) -> None:
        self._destroy_programs()
        self.finished = False

    def __enter__(self) -> Compilation:
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()


