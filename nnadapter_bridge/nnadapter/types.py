"""OperandType, Operand and Operation: the data every NNAdapter model is made of.

An OperandType mirrors the C struct NNAdapterOperandType (facts §2.4): precision, layout, lifetime,
dims (NNADAPTER_UNKNOWN for an unknown axis), up to 8 dynamic shapes, and the quantization params
(per-layer scale, per-channel scales with their channel axis, asymmetric zero point).

Imports only `codes` and `errors`; the model, the operations and every driver build on these three classes.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import (
    ASYMM_PRECISIONS,
    MAX_SIZE_OF_DIMENSIONS,
    MAX_SIZE_OF_DYNAMIC_DIMENSIONS,
    PER_CHANNEL_PRECISIONS,
    QUANT_PRECISIONS,
    UNKNOWN,
    Layout,
    Lifetime,
    OperationType,
    Precision,
    precision_dtype,
)


@dataclasses.dataclass
class OperandType:
    precision: Precision = Precision.UNKNOWN
    dims: tuple = ()
    layout: Layout = Layout.NCHW
    lifetime: Lifetime = Lifetime.TEMPORARY_VARIABLE
    dynamic_dims: tuple = ()  # tuple of shapes (each a tuple of ints), at most 8
    scale: float | None = None  # symmetric/asymmetric per-layer scale
    scales: tuple | None = None  # per-channel scales
    channel_dim: int = 0
    zero_point: int = 0

    def __post_init__(self):
        self.precision = Precision(self.precision)
        self.layout = Layout(self.layout)
        self.lifetime = Lifetime(self.lifetime)
        self.dims = tuple(int(d) for d in self.dims)
        self.dynamic_dims = tuple(tuple(int(d) for d in shape) for shape in self.dynamic_dims)
        if self.scales is not None:
            self.scales = tuple(float(s) for s in self.scales)
        if self.scale is not None:
            self.scale = float(self.scale)
        if len(self.dims) > MAX_SIZE_OF_DIMENSIONS:
            raise ValueError(f"an operand has at most {MAX_SIZE_OF_DIMENSIONS} dims, got {self.dims}")
        if len(self.dynamic_dims) > MAX_SIZE_OF_DYNAMIC_DIMENSIONS:
            raise ValueError(f"an operand has at most {MAX_SIZE_OF_DYNAMIC_DIMENSIONS} dynamic shapes")

    # -- derived facts ------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def dtype(self) -> np.dtype:
        return precision_dtype(self.precision)

    @property
    def is_quantized(self) -> bool:
        return self.precision in QUANT_PRECISIONS

    @property
    def is_per_channel(self) -> bool:
        return self.precision in PER_CHANNEL_PRECISIONS

    @property
    def is_asymmetric(self) -> bool:
        return self.precision in ASYMM_PRECISIONS

    @property
    def is_constant(self) -> bool:
        return self.lifetime in (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE)

    @property
    def has_unknown_dims(self) -> bool:
        return any(d == UNKNOWN or d < 0 for d in self.dims)

    def numel(self) -> int:
        """Number of elements; raises ValueError when a dim is unknown."""
        if self.has_unknown_dims:
            raise ValueError(f"operand dims {self.dims} are not all known")
        n = 1
        for d in self.dims:
            n *= d
        return n

    def copy(self, **changes) -> OperandType:
        if not changes:
            # Every field is already valid and immutable (ints, enums, tuples): a plain field copy is enough,
            # and this runs per input and output on every execution.
            clone = object.__new__(OperandType)
            clone.__dict__.update(self.__dict__)
            return clone
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        dims = ",".join("?" if d == UNKNOWN else str(d) for d in self.dims)
        return f"{self.precision.name}[{dims}]"


class Operand:
    """One operand of a Model: its type and, for a constant, its value (a numpy array)."""

    __slots__ = ("type", "value", "name", "index")

    def __init__(self, type: OperandType, value: np.ndarray | None = None, name: str = "", index: int = -1):
        self.type = type
        self.value = value
        self.name = name
        self.index = index

    @property
    def is_constant(self) -> bool:
        return self.type.is_constant

    def label(self) -> str:
        return self.name or f"operand#{self.index}"

    def __repr__(self) -> str:
        return f"Operand({self.label()}, {self.type.describe()}, {self.type.lifetime.name})"


class Operation:
    """One operation: its code, its input operands (None for an omitted optional one) and outputs."""

    __slots__ = ("type", "inputs", "outputs", "index")

    def __init__(
        self, type: OperationType, inputs: Sequence[Operand | None], outputs: Sequence[Operand | None], index: int = -1
    ):
        self.type = OperationType(type)
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.index = index

    def input_value(self, i: int) -> np.ndarray | None:
        """The constant value of input i, or None when it is absent or not a constant."""
        operand = self.inputs[i] if i < len(self.inputs) else None
        if operand is None:
            return None
        return operand.value if operand.is_constant else None

    def input(self, i: int) -> Operand:
        """Input i, which the signature requires (an OperationError if it is absent)."""
        operand = self.inputs[i]
        if operand is None:
            raise OperationError(f"{self.label()}: input {i} is required, the operation has none there")
        return operand

    def label(self) -> str:
        return f"{self.type.name}#{self.index}"

    def __repr__(self) -> str:
        ins = ", ".join("null" if o is None else o.label() for o in self.inputs)
        outs = ", ".join("null" if o is None else o.label() for o in self.outputs)
        return f"Operation({self.type.name}: [{ins}] -> [{outs}])"
