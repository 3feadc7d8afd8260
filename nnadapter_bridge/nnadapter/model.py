"""The NNAdapter model API (NNAdapterModel_* of the standard, in Python spelling).

A Model owns its operands and operations. `add_operation` checks the operand list against the
operation's signature and runs its prepare step, so every output operand carries its inferred
precision and dims as soon as the operation is added.

Entry point: `Model`. Imports the standard's types and codes; the operation families (`operations`) on the
first `add_operation`, so importing the standard stays cheap. Nothing above the ground.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import NNAdapterError, OperationError
from nnadapter_bridge.nnadapter.codes import (
    Lifetime,
    OperationType,
    Precision,
    ResultCode,
    dtype_precision,
)
from nnadapter_bridge.nnadapter.types import Operand, OperandType, Operation


class Model:
    def __init__(self):
        self.operands: list[Operand] = []
        self.operations: list[Operation] = []
        self.input_operands: list[Operand] = []
        self.output_operands: list[Operand] = []
        self.finished = False
        # Optional, set by whoever built the model: a callable a driver may call once its SDK holds its own
        # copy of every constant (after building its graph, before compiling it), so the host can drop the
        # resident pages of memory-mapped weights the constants are views of. The values stay readable.
        self.release_host_memory = None

    # -- building ---------------------------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self.finished:
            raise NNAdapterError(f"{what}: the model is finished and can no longer change",
                                 ResultCode.INVALID_PARAMETER)

    def add_operand(self, type: OperandType, name: str = "") -> Operand:
        """NNAdapterModel_addOperand: a new operand of `type` (the type object is copied)."""
        self._check_open("add_operand")
        operand = Operand(type.copy(), None, name, len(self.operands))
        self.operands.append(operand)
        return operand

    def set_operand_value(self, operand: Operand, value, copy: bool = True) -> None:
        """NNAdapterModel_setOperandValue: make `operand` a constant.

        `copy=True` stores a private copy (CONSTANT_COPY); `copy=False` keeps a reference to the
        caller's buffer (CONSTANT_REFERENCE), which must stay alive and unchanged.
        """
        self._check_open("set_operand_value")
        array = self._as_array(operand, value)
        operand.value = np.array(array, copy=True) if copy else array
        operand.type.lifetime = Lifetime.CONSTANT_COPY if copy else Lifetime.CONSTANT_REFERENCE

    @staticmethod
    def _as_array(operand: Operand, value) -> np.ndarray:
        t = operand.type
        if isinstance(value, (bytes, bytearray, memoryview)):
            array = np.frombuffer(value, dtype=t.dtype)
            try:
                array = array.reshape(t.dims)
            except ValueError:
                raise OperationError(f"set_operand_value: {operand.label()} is {t.describe()}, "
                                     f"but got {len(value)} bytes") from None
            return array
        array = np.asarray(value)
        if array.dtype != t.dtype:
            raise OperationError(f"set_operand_value: {operand.label()} is {t.describe()} "
                                 f"(dtype {t.dtype}), but the value has dtype {array.dtype}")
        if tuple(array.shape) != t.dims:
            if array.size == 1 and t.dims in ((), (1,)):
                array = array.reshape(t.dims)
            else:
                raise OperationError(f"set_operand_value: {operand.label()} is {t.describe()}, "
                                     f"but the value has shape {list(array.shape)}")
        return array

    def get_operand_type(self, operand: Operand) -> OperandType:
        return operand.type

    def add_operation(self, type: OperationType, inputs: Sequence[Operand | None],
                      outputs: Sequence[Operand | None]) -> Operation:
        """NNAdapterModel_addOperation: check the signature, infer output types, append."""
        from nnadapter_bridge.nnadapter.operations import prepare_operation

        self._check_open("add_operation")
        try:
            type = OperationType(type)
        except ValueError:
            raise OperationError(f"add_operation: unknown operation code {type!r}") from None
        for operand in list(inputs) + list(outputs):
            if operand is not None and (
                operand.index >= len(self.operands) or self.operands[operand.index] is not operand
            ):
                raise OperationError(f"{type.name}: operand {operand.label()} does not belong to this model")
        operation = Operation(type, inputs, outputs, len(self.operations))
        prepare_operation(operation)
        self.operations.append(operation)
        return operation

    def identify_inputs_and_outputs(self, inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
        self._check_open("identify_inputs_and_outputs")
        for operand in inputs:
            if operand.is_constant:
                raise OperationError(f"identify_inputs_and_outputs: {operand.label()} is a constant "
                                     "and cannot be a model input")
            operand.type.lifetime = Lifetime.MODEL_INPUT
        for operand in outputs:
            operand.type.lifetime = Lifetime.MODEL_OUTPUT
        self.input_operands = list(inputs)
        self.output_operands = list(outputs)

    def finish(self) -> None:
        self._check_open("finish")
        self.finished = True

    # -- convenience for converters and tests ---------------------------------------------------
    def add_constant(self, value, precision: Precision | None = None, name: str = "", *,
                     copy: bool = True, scale: float | None = None, scales=None,
                     channel_dim: int = 0, zero_point: int = 0) -> Operand:
        """Add a constant operand holding `value`.

        A Python or numpy scalar becomes a shape-[1] tensor: NNAdapter's scalar parameters (axis, epsilon,
        fuse code...) are [1]. A 0-d ndarray stays 0-d: it is a value (a 0-d parameter, or a constant that
        combines with a 0-d operand), and Paddle keeps such results 0-d where a [1] would broadcast them
        to [1]."""
        array = np.asarray(value)
        if array.ndim == 0 and not isinstance(value, np.ndarray):
            array = array.reshape(1)
        if precision is None:
            if array.dtype == np.float64:
                array = array.astype(np.float32)
            elif array.dtype == np.int64 and not isinstance(value, np.ndarray):
                array = array.astype(np.int32)  # a Python int list is an INT32 parameter
            precision = dtype_precision(array.dtype)
        t = OperandType(precision=precision, dims=array.shape, scale=scale, scales=scales,
                        channel_dim=channel_dim, zero_point=zero_point)
        array = array.astype(t.dtype, copy=False)
        operand = self.add_operand(t, name)
        self.set_operand_value(operand, array, copy=copy)
        return operand

    def add_output(self, name: str = "", type: OperandType | None = None) -> Operand:
        """A fresh operand for an operation output; its type is filled in by add_operation."""
        return self.add_operand(type or OperandType(), name)

    def replace_with_constants(self, operation: Operation, values: Sequence[np.ndarray | None]) -> None:
        """Remove `operation` and make each of its outputs a constant (CONSTANT_COPY) holding the matching
        array of `values` (computed before run time: nnadapter.lowering.fold_operation). Each array must have
        its operand's dims and dtype; readers of the outputs then read constants."""
        self._check_open("replace_with_constants")
        if operation.index >= len(self.operations) or self.operations[operation.index] is not operation:
            raise OperationError(f"replace_with_constants: {operation.label()} does not belong to this model")
        if len(values) != len(operation.outputs):
            raise OperationError(f"replace_with_constants: {operation.label()} has {len(operation.outputs)} "
                                 f"outputs, got {len(values)} values")
        for operand, value in zip(operation.outputs, values):
            if operand is None:
                continue
            array = np.asarray(value)
            if array.dtype != operand.type.dtype or tuple(array.shape) != tuple(operand.type.dims):
                raise OperationError(f"replace_with_constants: {operand.label()} is {operand.type.describe()}, "
                                     f"the value is {array.dtype} {list(array.shape)}")
        del self.operations[operation.index]
        for k in range(operation.index, len(self.operations)):
            self.operations[k].index = k
        for operand, value in zip(operation.outputs, values):
            if operand is not None:
                operand.value = np.asarray(value)
                operand.type.lifetime = Lifetime.CONSTANT_COPY

    def drop_unused_operands(self, keep: Sequence[Operand] = ()) -> int:
        """Remove the operands no operation reads or writes, except `keep` and the model's inputs and outputs
        (constants left behind by replace_with_constants); the others are renumbered in order. Returns how
        many were removed."""
        self._check_open("drop_unused_operands")
        used = {id(o) for op in self.operations for o in (*op.inputs, *op.outputs) if o is not None}
        used.update(id(o) for o in (*keep, *self.input_operands, *self.output_operands) if o is not None)
        kept = [o for o in self.operands if id(o) in used]
        removed = len(self.operands) - len(kept)
        if removed:
            for k, operand in enumerate(kept):
                operand.index = k
            self.operands = kept
        return removed

    # -- queries ------------------------------------------------------------------------------------
    def get_supported_operations(self, context) -> list[bool]:
        """NNAdapterModel_getSupportedOperations: OR over the context's devices, per operation."""
        return context.get_supported_operations(self)

    def producers(self) -> dict[int, Operation]:
        """Operand index -> the operation producing it."""
        return {o.index: op for op in self.operations for o in op.outputs if o is not None}

    def consumers(self) -> dict[int, list[Operation]]:
        result: dict[int, list[Operation]] = {}
        for op in self.operations:
            for o in op.inputs:
                if o is not None:
                    result.setdefault(o.index, []).append(op)
        return result

    def topological_operations(self) -> list[Operation]:
        """Operations in topological order (SortOperationsInTopologicalOrder: Kahn with a LIFO stack).

        An operation depends on its inputs of lifetime TEMPORARY_VARIABLE, TEMPORARY_SHAPE or
        MODEL_OUTPUT; constants, model inputs and null operands are ready from the start.
        """
        producers = self.producers()
        dependent = (Lifetime.TEMPORARY_VARIABLE, Lifetime.TEMPORARY_SHAPE, Lifetime.MODEL_OUTPUT)
        pending: dict[int, int] = {}
        users: dict[int, list[Operation]] = {}
        for op in self.operations:
            count = 0
            for o in op.inputs:
                if o is not None and o.type.lifetime in dependent and o.index in producers:
                    count += 1
                    users.setdefault(o.index, []).append(op)
            pending[id(op)] = count
        stack = [op for op in reversed(self.operations) if pending[id(op)] == 0]
        order: list[Operation] = []
        while stack:
            op = stack.pop()
            order.append(op)
            for o in op.outputs:
                if o is None:
                    continue
                for user in users.get(o.index, ()):
                    pending[id(user)] -= 1
                    if pending[id(user)] == 0:
                        stack.append(user)
        if len(order) != len(self.operations):
            raise OperationError("the model's operations form a cycle; no topological order exists")
        return order

    def __repr__(self) -> str:
        return (f"Model({len(self.operands)} operands, {len(self.operations)} operations, "
                f"{len(self.input_operands)} inputs, {len(self.output_operands)} outputs)")
