"""The registries of the NNAdapter operations: signatures with their "prepare" (type and shape inference),
and numpy reference implementations (the semantics).

Each operation family module declares a signature with `@operation(OperationType.X, inputs=[...],
outputs=[...])` on its prepare function and registers the numpy semantics of the same operation with
`@reference(OperationType.X)`, next to it. `check_signature` is generic: operand count and order,
optional (null) operands, variadic lists, allowed precisions; errors name the operation and the operand.

A prepare function receives the Operation (inputs known, outputs possibly untyped) and returns one
OperandType (or None, for an absent optional output) per output. Unknown dims are NNADAPTER_UNKNOWN.

A reference is `fn(op, inputs) -> outputs`: `op` is the Operation (for its operand types), `inputs` the
input arrays in signature order (None for a null operand), the result one array (or None) per output.
Unless registered with `raw_quant=True`, a reference never sees quantized integers: the caller
(nnadapter.reference.run_operation) dequantizes quantized inputs to float32 first and requantizes outputs
whose operand type is quantized (dequantize -> float -> requantize with saturation).

Entry points: `operation`, `reference`, `OPERATIONS`, `REFERENCES`, `prepare_operation`, `check_signature`,
`quantize` / `dequantize`. Imports the standard's codes and types and `errors` only.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import QUANT_PRECISIONS, OperationType, Precision
from nnadapter_bridge.nnadapter.types import OperandType, Operation

# Precision sets that signatures share. Paddle's CPU kernels take float64 (and most float16) wherever they
# take float32, so float operations accept every float width; the references compute in the input's own
# precision (float16 through float32, as Paddle's kernels do).
F32 = frozenset({Precision.FLOAT32})  # operations whose references are float32-only (detection, sampling)
# Paddle CPU kernels registered for float and double only (yolo_box, prior_box, ...): the reference computes in
# float64 and returns the input's type.
F32_64 = frozenset({Precision.FLOAT32, Precision.FLOAT64})
F64_Q8 = F32_64 | {Precision.QUANT_INT8_SYMM_PER_LAYER}
F32_Q8 = frozenset({Precision.FLOAT32, Precision.QUANT_INT8_SYMM_PER_LAYER})
FLOATS = frozenset({Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64})
FLOATS_Q8 = FLOATS | {Precision.QUANT_INT8_SYMM_PER_LAYER}
INT32 = frozenset({Precision.INT32})
INT64 = frozenset({Precision.INT64})
INT32_64 = frozenset({Precision.INT32, Precision.INT64})
BOOL = frozenset({Precision.BOOL8})
NUMERIC = frozenset({
    Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64, Precision.INT8, Precision.UINT8,
    Precision.INT16, Precision.INT32, Precision.INT64,
}) | QUANT_PRECISIONS
ANY = None  # no precision constraint
# Filters and weights may be quantized per layer or per output channel; biases then are int32 with
# scale = input_scale * filter_scale (per channel when the filter is).
FILTER = FLOATS_Q8 | {Precision.QUANT_INT8_SYMM_PER_CHANNEL}
BIAS = FLOATS | {Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL}
# Pure data movement: any value survives it unchanged.
DATA_MOVEMENT = FLOATS_Q8 | {Precision.INT8, Precision.UINT8, Precision.INT16, Precision.INT32, Precision.INT64,
                             Precision.BOOL8}


@dataclasses.dataclass(frozen=True)
class Slot:
    """One operand position of a signature."""

    name: str
    precisions: frozenset | None = ANY
    optional: bool = False  # a null operand (None) is allowed here
    variadic: bool = False  # this position repeats one or more times (CONCAT's inputs, SPLIT's outputs)


@dataclasses.dataclass(frozen=True)
class OperationSpec:
    type: OperationType
    inputs: tuple
    outputs: tuple
    prepare: Callable[[Operation], list]
    validate: Callable[[Operation], None] | None = None
    doc: str = ""


OPERATIONS: dict[OperationType, OperationSpec] = {}


def operation(type: OperationType, *, inputs: Iterable[Slot], outputs: Iterable[Slot],
              validate: Callable[[Operation], None] | None = None, doc: str = ""):
    """Register the decorated prepare function as the signature + shape inference of `type`."""
    inputs, outputs = tuple(inputs), tuple(outputs)
    for side in (inputs, outputs):
        if sum(s.variadic for s in side) > 1:
            raise ValueError(f"{type.name}: at most one variadic slot per side")

    def register(prepare):
        if type in OPERATIONS:
            raise ValueError(f"operation {type.name} registered twice")
        OPERATIONS[type] = OperationSpec(type, inputs, outputs, prepare, validate, doc or (prepare.__doc__ or ""))
        return prepare

    return register


def get_spec(type: OperationType) -> OperationSpec:
    try:
        return OPERATIONS[OperationType(type)]
    except (KeyError, ValueError):
        raise OperationError(f"operation {type!r} has no signature registered") from None


def _bind(op: Operation, slots: tuple, operands: list, side: str) -> list:
    """Pair each operand with its slot; raise when the count cannot fit the signature."""
    n_fixed = sum(1 for s in slots if not s.variadic)
    has_variadic = any(s.variadic for s in slots)
    n = len(operands)
    if has_variadic:
        if n < n_fixed + 1:
            raise OperationError(f"{op.type.name}: expects at least {n_fixed + 1} {side} operands "
                                 f"({', '.join(s.name for s in slots)}), got {n}")
        n_var = n - n_fixed
    else:
        # Trailing optional slots may be left out entirely.
        n_required = len(slots)
        while n_required and slots[n_required - 1].optional:
            n_required -= 1
        if not (n_required <= n <= len(slots)):
            raise OperationError(f"{op.type.name}: expects {len(slots)} {side} operands "
                                 f"({', '.join(s.name for s in slots)}), got {n}")
        n_var = 0
    bound = []
    i = 0
    for slot in slots:
        count = n_var if slot.variadic else 1
        for k in range(count):
            if i >= n:
                break
            label = f"{slot.name}[{k}]" if slot.variadic else slot.name
            bound.append((slot, label, operands[i]))
            i += 1
    return bound


def check_signature(op: Operation, spec: OperationSpec | None = None) -> None:
    """Check count, order, null-ness and precisions of op's operands against its signature."""
    spec = spec or get_spec(op.type)
    for slot, label, operand in _bind(op, spec.inputs, op.inputs, "input"):
        if operand is None:
            if not slot.optional:
                raise OperationError(f"{op.type.name}: input '{label}' is required but was null")
            continue
        if slot.precisions is not None and operand.type.precision not in slot.precisions:
            allowed = ", ".join(sorted(p.name for p in slot.precisions))
            raise OperationError(f"{op.type.name}: input '{label}' ({operand.label()}) has precision "
                                 f"{operand.type.precision.name}; allowed: {allowed}")
    for slot, label, operand in _bind(op, spec.outputs, op.outputs, "output"):
        if operand is None and not slot.optional:
            raise OperationError(f"{op.type.name}: output '{label}' is required but was null")


def prepare_operation(op: Operation) -> list:
    """Check op, infer its output types and write them into its output operands."""
    spec = get_spec(op.type)
    check_signature(op, spec)
    if spec.validate is not None:
        spec.validate(op)
    inferred = spec.prepare(op)
    if len(inferred) != len(op.outputs):
        raise OperationError(f"{op.type.name}: prepare produced {len(inferred)} output types for "
                             f"{len(op.outputs)} output operands")
    for operand, new in zip(op.outputs, inferred):
        if operand is None or new is None:
            continue
        merge_output_type(operand.type, new)
    return inferred


def merge_output_type(current: OperandType, inferred: OperandType) -> None:
    """Write an inferred type into an output operand's type, in place.

    Quantization params already set on the output (they come from the Paddle op's scales) win; so do
    known dims the caller set where inference could not tell.
    """
    from nnadapter_bridge.nnadapter.codes import UNKNOWN

    if current.precision == Precision.UNKNOWN:
        current.precision = inferred.precision
        current.scale = inferred.scale
        current.scales = inferred.scales
        current.channel_dim = inferred.channel_dim
        current.zero_point = inferred.zero_point
    dims = list(inferred.dims)
    if len(current.dims) == len(dims):
        dims = [c if d == UNKNOWN and c != UNKNOWN else d for d, c in zip(dims, current.dims)]
    current.dims = tuple(dims)
    current.layout = inferred.layout
    if inferred.dynamic_dims:
        current.dynamic_dims = inferred.dynamic_dims


# -- references ----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Reference:
    """The numpy semantics of one operation."""

    type: OperationType
    fn: Callable[[Operation, list], list]
    raw_quant: bool = False  # the function takes and returns quantized storage arrays itself
    # Optional finer answer: False when this reference cannot run `op` as given.
    supports: Callable[[Operation], bool] | None = None


REFERENCES: dict[OperationType, Reference] = {}


def reference(type: OperationType, *, raw_quant: bool = False, supports: Callable[[Operation], bool] | None = None):
    """Register the decorated function as the numpy reference of `type`."""
    def register(fn):
        if type in REFERENCES:
            raise ValueError(f"reference for {type.name} registered twice")
        REFERENCES[type] = Reference(type, fn, raw_quant, supports)
        return fn

    return register


def dequantize(array: np.ndarray, t: OperandType) -> np.ndarray:
    """Real values of a quantized array: (q - zero_point) * scale (per channel along channel_dim)."""
    if not t.is_quantized:
        return array
    values = array.astype(np.float32)
    if t.is_per_channel:
        scales = np.asarray(t.scales, dtype=np.float32)
        shape = [1] * values.ndim
        if values.ndim:
            shape[t.channel_dim] = -1
        return values * scales.reshape(shape)
    return (values - np.float32(t.zero_point)) * np.float32(t.scale)


def quantize(values: np.ndarray, t: OperandType) -> np.ndarray:
    """Quantize real values into the storage type of `t`, rounding to nearest and saturating."""
    info = np.iinfo(t.dtype)
    values = np.asarray(values, dtype=np.float32)
    if t.is_per_channel:
        scales = np.asarray(t.scales, dtype=np.float32)
        shape = [1] * values.ndim
        if values.ndim:
            shape[t.channel_dim] = -1
        q = np.rint(values / scales.reshape(shape))
    else:
        q = np.rint(values / np.float32(t.scale)) + t.zero_point
    return np.clip(q, info.min, info.max).astype(t.dtype)
