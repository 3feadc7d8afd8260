"""NNAdapterExecution: running a finished compilation's device programs on host arrays.

Owns `Execution` (bind inputs and outputs by index with access functions and `compute`, or `run(arrays)`), the one
place a driver runs a program (`Execution._run_program`: the driver's optional `run_arrays` for a run on arrays,
`execute_program` with access callbacks otherwise), the access functions for numpy arrays and `HostBuffer`.
Imports the compilation and faults; must not import anything above the ground.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.driver_protocol import AccessFunction, Argument
from nnadapter_bridge.nnadapter.runtime.compilation import Compilation, Program
from nnadapter_bridge.nnadapter.runtime.faults import raise_for_result, raise_from_driver
from nnadapter_bridge.nnadapter.types import OperandType


def _own_hook(driver: Any, hook: str, beneath: str) -> Callable[..., Any] | None:
    """`driver.<hook>`, or None when the driver has none or a subclass overrides `beneath` below the class defining
    `hook` (the hook would then skip what that subclass does)."""
    if getattr(driver, hook, None) is None:
        return None
    mro = type(driver).__mro__
    hook_owner = next((c for c in mro if hook in vars(c)), None)
    beneath_owner = next((c for c in mro if beneath in vars(c)), None)
    if hook_owner is None or beneath_owner is None or not issubclass(hook_owner, beneath_owner):
        return None
    return getattr(driver, hook)


def run_arrays_hook(driver: Any) -> Callable[..., list] | None:
    """The driver's optional `run_arrays` (driver_protocol), or None when a subclass overrides
    execute_program below the class defining it (a wrapper or a test double then sees every run)."""
    return _own_hook(driver, "run_arrays", "execute_program")


def prepare_run_hook(driver: Any) -> Callable[..., Any] | None:
    """The driver's optional `prepare_run` (driver_protocol), under run_arrays_hook's rule: None when a subclass
    overrides execute_program or run_arrays below the class defining it (a wrapper then sees every run)."""
    if run_arrays_hook(driver) is None:
        return None
    return _own_hook(driver, "prepare_run", "run_arrays")


class HostBuffer:
    """An output holder: the runtime allocates `array` at the dims the device reports."""

    def __init__(self):
        self.array: np.ndarray | None = None
        self.type: OperandType | None = None


def array_input_access(memory: Any, operand_type: OperandType) -> np.ndarray:
    """Input access for a numpy array: report its dims, hand it over."""
    # np.asarray(order="C"), not np.ascontiguousarray: the latter turns a 0-d array into shape [1], and a
    # program compiled for a 0-d input would then refuse it.
    array = np.asarray(memory, order="C")
    operand_type.dims = array.shape  # a tuple of Python ints already
    return array


class _HostBufferOutputAccess:
    """Output access for a HostBuffer: allocate exactly what the device reports; with `adopt`
    (driver_protocol.AccessFunction), take a driver's fresh array instead."""

    def __call__(self, memory: HostBuffer, operand_type: OperandType) -> np.ndarray:
        memory.type = operand_type.copy()
        array = memory.array = np.empty(operand_type.dims, dtype=operand_type.dtype)
        return array

    def adopt(self, memory: HostBuffer, operand_type: OperandType, array: np.ndarray) -> None:
        memory.type = operand_type.copy()
        memory.array = array


host_buffer_output_access = _HostBufferOutputAccess()


def host_buffer_input_access(memory: HostBuffer, operand_type: OperandType) -> np.ndarray:
    """Input access for a HostBuffer an earlier program wrote (a buffer shared between programs)."""
    array = memory.array
    if array is None:
        raise NNAdapterError("a shared buffer was read before a program wrote it", ResultCode.DEVICE_INTERNAL_ERROR)
    operand_type.dims = tuple(array.shape)
    return array


def array_output_access(memory: np.ndarray, operand_type: OperandType) -> np.ndarray:
    """Output access for a preallocated array: it must already have the reported dims and dtype."""
    if tuple(memory.shape) != tuple(operand_type.dims) or memory.dtype != operand_type.dtype:
        raise NNAdapterError(f"output buffer is {memory.dtype}{list(memory.shape)}, the device produces "
                             f"{operand_type.dtype}{list(operand_type.dims)}", ResultCode.INVALID_PARAMETER)
    return memory


@dataclasses.dataclass
class _Binding:
    memory: Any
    access: AccessFunction


def _direct_program(compilation: Compilation) -> Program | None:
    """The compilation's only program when it reads and writes the model's own inputs and outputs in order (the
    usual case: `run(arrays)` then hands the arrays straight to it), else None."""
    if len(compilation.programs) != 1:
        return None
    program = compilation.programs[0]
    if (program.input_indexes == [-k - 1 for k in range(len(compilation.input_types))]
            and program.output_indexes == [-k - 1 for k in range(len(compilation.output_types))]):
        return program
    return None


class Execution:
    """NNAdapterExecution: bind inputs/outputs by index, then compute; or `run(arrays)`.

    An execution may be kept and run again (the engine keeps one per compilation: what it looks up once, the
    driver hooks and the direct program, is not looked up per run); like its compilation, it is run by one
    thread at a time."""

    def __init__(self, compilation: Compilation):
        if not compilation.finished:
            raise NNAdapterError("an execution needs a finished compilation", ResultCode.INVALID_PARAMETER)
        self.compilation = compilation
        self._inputs: dict[int, _Binding] = {}
        self._outputs: dict[int, _Binding] = {}
        self._watch_outputs = False  # a HostBuffer output is bound: compute() checks some program wrote it
        self._run_arrays_hooks = [run_arrays_hook(p.device.driver) for p in compilation.programs]
        self._direct = _direct_program(compilation)
        # The direct program's prepared run (driver_protocol's prepare_run), asked for once its first run is done
        self._prepared: Callable[..., list] | None = None
        self._prepare_asked = False

    def _check_index(self, index: int, count: int, side: str) -> None:
        if not 0 <= index < count:
            raise NNAdapterError(f"{side} index {index} is out of range (the model has {count} {side}s)",
                                 ResultCode.INVALID_PARAMETER)

    def set_input(self, index: int, memory: Any, access: AccessFunction | None = None) -> None:
        self._check_index(index, len(self.compilation.input_types), "input")
        self._inputs[index] = _Binding(memory, access or array_input_access)

    def set_output(self, index: int, memory: Any, access: AccessFunction | None = None) -> None:
        self._check_index(index, len(self.compilation.output_types), "output")
        if isinstance(memory, HostBuffer):
            self._watch_outputs = True
        if access is None:
            if isinstance(memory, HostBuffer):
                access = host_buffer_output_access
            elif isinstance(memory, np.ndarray):
                access = array_output_access
            else:
                raise NNAdapterError("set_output without an access function needs a HostBuffer or an ndarray",
                                     ResultCode.INVALID_PARAMETER)
        self._outputs[index] = _Binding(memory, access)

    def compute(self) -> None:
        """Run the device programs in order on the bound inputs and outputs, passing shared buffers between
        them (each program through its driver's execute_program, with the bound access functions)."""
        shared: dict[int, HostBuffer] = {}
        for number, program in enumerate(self.compilation.programs):
            inputs = []
            for k, index in enumerate(program.input_indexes):
                if index < 0:
                    binding = self._inputs.get(-index - 1)
                    if binding is None:
                        raise NNAdapterError(f"input {-index - 1} was not set", ResultCode.INVALID_PARAMETER)
                    inputs.append(Argument(k, binding.memory, binding.access))
                else:
                    if index not in shared:
                        raise NNAdapterError(f"program {number} reads shared buffer {index} before any program "
                                             "wrote it", ResultCode.DEVICE_INTERNAL_ERROR)
                    inputs.append(Argument(k, shared[index], host_buffer_input_access))
            outputs = []
            for k, index in enumerate(program.output_indexes):
                if index < 0:
                    binding = self._outputs.get(-index - 1)
                    if binding is None:
                        raise NNAdapterError(f"output {-index - 1} was not set", ResultCode.INVALID_PARAMETER)
                    outputs.append(Argument(k, binding.memory, binding.access))
                else:
                    shared[index] = HostBuffer()
                    outputs.append(Argument(k, shared[index], host_buffer_output_access))
            self._run_program(number, program, inputs, outputs)
        if self._watch_outputs:
            for index, binding in self._outputs.items():
                if isinstance(binding.memory, HostBuffer) and binding.memory.array is None:
                    raise NNAdapterError(f"output {index} was not written by any program",
                                         ResultCode.DEVICE_INTERNAL_ERROR)
        if not self.compilation._first_compute_done:
            self.compilation._after_first_compute()

    def run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Set every input from `arrays`, compute, return the outputs as new arrays. A compilation of one program
        wired to the model's own inputs and outputs in order (the usual case, and the predictor's per-run path)
        hands the arrays straight to it, without bindings; anything else is bound and computed."""
        program = self._direct
        prepared = self._prepared
        if prepared is not None and program is not None:
            # A run over and over (the predictor's steady state): the driver's prepared run, which checks what
            # run_arrays checks, without the layers below (~30 us a run on a sub-millisecond model).
            try:
                with program.lock:
                    return prepared(arrays)
            except BaseException as exc:
                raise_from_driver(exc, f"{program.device.name}.prepare_run's run (program 0)")
        compilation = self.compilation
        if program is not None and len(arrays) == len(compilation.input_types) and compilation.finished:
            results = self._run_program(0, program, arrays)
            if not compilation._first_compute_done:
                compilation._after_first_compute()
            elif not self._prepare_asked:
                self._prepare_asked = True
                prepare = prepare_run_hook(program.device.driver)
                if prepare is not None:  # (prepare_run_hook takes it only beside a run_arrays the runtime takes)
                    try:
                        self._prepared = prepare(program.handle)
                    except Exception:  # a hint only: the runs go on through run_arrays
                        self._prepared = None
            return results
        if len(arrays) != len(compilation.input_types):
            raise NNAdapterError(f"the model has {len(compilation.input_types)} inputs, got {len(arrays)} "
                                 "arrays", ResultCode.INVALID_PARAMETER)
        for k, array in enumerate(arrays):
            self.set_input(k, array)
        holders = [HostBuffer() for _ in compilation.output_types]
        for k, holder in enumerate(holders):
            self.set_output(k, holder)
        self.compute()
        return _written_arrays(holders)

    def _run_program(self, number: int, program: Program, inputs: Sequence[Any],
                     outputs: list[Argument] | None = None) -> list[np.ndarray]:
        """Run device program `number`: the one place a driver runs a program. With `outputs` None, `inputs` are
        arrays in the program's input order and the outputs come back as new arrays: through the driver's
        `run_arrays` when it offers one (run_arrays_hook), else through `execute_program` with the array access
        functions. With `outputs`, `inputs` and `outputs` are Arguments whose access functions the driver's
        `execute_program` calls (nothing comes back)."""
        holders: list[HostBuffer] | None = None
        if outputs is None:
            run_arrays = self._run_arrays_hooks[number]
            if run_arrays is not None:  # the driver's own array path (driver_protocol: run_arrays)
                try:
                    with program.lock:  # one execution of a driver program at a time (Program.lock)
                        results = run_arrays(program.handle, inputs)
                except BaseException as exc:
                    raise_from_driver(exc, f"{program.device.name}.run_arrays (program {number})")
                if len(results) != len(program.output_types):
                    raise NNAdapterError(f"{program.device.name}.run_arrays gave {len(results)} outputs, the program "
                                         f"has {len(program.output_types)}", ResultCode.DEVICE_INTERNAL_ERROR)
                return results
            holders = [HostBuffer() for _ in program.output_types]
            inputs = [Argument(k, array, array_input_access) for k, array in enumerate(inputs)]
            outputs = [Argument(k, holder, host_buffer_output_access) for k, holder in enumerate(holders)]
        try:
            with program.lock:
                result = program.device.driver.execute_program(program.handle, inputs, outputs)
            if result is not None and int(result) != ResultCode.NO_ERROR:
                raise_for_result(result, f"{program.device.name}.execute_program (program {number})")
        except BaseException as exc:  # as call_driver does, with the label formatted only on failure
            raise_from_driver(exc, f"{program.device.name}.execute_program (program {number})")
        return [] if holders is None else _written_arrays(holders)


def _written_arrays(holders: Sequence[HostBuffer]) -> list[np.ndarray]:
    """The arrays of output holders, each of which some program must have written."""
    arrays = []
    for index, holder in enumerate(holders):
        if holder.array is None:
            raise NNAdapterError(f"output {index} was not written by any program", ResultCode.DEVICE_INTERNAL_ERROR)
        arrays.append(holder.array)
    return arrays
