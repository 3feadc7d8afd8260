"""What the SDK drivers (intel_openvino, microsoft_onnxruntime) share: the operation table, the
validation-by-trial answer of `validate_program`, and reading an operation's operands by slot name.

* `OperationTable` maps each NNAdapter operation a driver implements to the function that expresses
  it in the SDK's graph (`@OPERATIONS.implements(T.ADD, T.SUB)`).
* `unsupported_reason`: an operation is supported iff its signature holds and a
  trial build of that operation alone succeeds, so the claim and the build can never disagree.
* `unpack(operation)` gives the operands by the names of the standard's signature slots
  (`args.input`, `args.axis_value`, `args.int("group", 1)`) instead of by position.
* `reduces_an_empty_axis(op)`: the reduction cases the SDKs answer differently from Paddle.
* `nms_unsupported_reason(op)`: the NON_MAX_SUPPRESSION cases neither SDK's NonMaxSuppression composition
  (hal/*/nms.py) can answer as Paddle does.
* `Unsupported` is what an implementation raises for a case the SDK cannot express faithfully.
* `first_output_name(op)`: how a run-time fault names the operation it belongs to.
* `is_integer_product(op)`: an int8 x int8 product writing its int32 sums (a quantized Paddle conv or matmul),
  which the SDK drivers run as integer kernels where theirs are fast.
* `lower(model, table)` applies the standard's lowering before a build to the operations the table
  does not implement: PRIOR_BOX folds to constants, YOLO_BOX decomposes into simpler operations;
  `unsupported_reason` answers for those operations by lowering them alone and trying the result.

Only the NNAdapter standard and numpy are imported here, never an SDK.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, OperationType, Precision
from nnadapter_bridge.nnadapter.lowering import decompose, fold_prior_box
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations import check_signature, get_spec
from nnadapter_bridge.nnadapter.operations.detection import nms_is_lod_form
from nnadapter_bridge.nnadapter.types import Operation


class Unsupported(Exception):
    """This operation (with these operands and attributes) has no faithful form on the device."""


class OperationTable:
    """The NNAdapter operations one driver implements, each with the function that builds it."""

    def __init__(self, device: str):
        self.device = device
        self._entries: dict[OperationType, Callable] = {}

    def implements(self, *types: OperationType):
        """Decorator: register the function as the implementation of every type in `types`."""
        def register(fn):
            for t in types:
                if t in self._entries:
                    raise ValueError(f"{self.device}: {t.name} is implemented twice")
                self._entries[t] = fn
            return fn

        return register

    def get(self, type: OperationType) -> Callable | None:
        return self._entries.get(type)

    def types(self) -> list:
        return sorted(self._entries)

    def __contains__(self, type) -> bool:
        return type in self._entries

    def __iter__(self) -> Iterator[OperationType]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


# -- lowering ----------------------------------------------------------------------------------------------
# Operations the standard can lower: a driver whose table lacks one gets it lowered by `lower`.
LOWERED_TYPES = frozenset({OperationType.PRIOR_BOX, OperationType.YOLO_BOX})


def lower(model: Model, table: OperationTable) -> Model:
    """`model` with the LOWERED_TYPES operations `table` does not implement lowered: PRIOR_BOX folded to
    constants (where its spatial dims are known), YOLO_BOX decomposed (NNAdapterError naming one that
    cannot be)."""
    if OperationType.PRIOR_BOX not in table:
        model = fold_prior_box(model)
    if OperationType.YOLO_BOX not in table:
        model = decompose(model, [OperationType.YOLO_BOX])
    return model


def first_output_name(op: Operation | None) -> str | None:
    """The name of `op`'s first output operand, which names it in a run-time fault (driver_protocol.operation_fault);
    None for no operation or an unnamed output."""
    if op is None or not op.outputs or op.outputs[0] is None:
        return None
    return op.outputs[0].name or None


def operation_alone(op: Operation) -> Model:
    """A model holding `op` only: its constant inputs stay constants, the others become model inputs
    (what a trial build of one operation compiles)."""
    model = Model()
    copies: dict[int, object] = {}  # operand index -> its copy (an operand read twice is one input)
    model_inputs = []
    for operand in op.inputs:
        if operand is None or operand.index in copies:
            continue
        copy = copies[operand.index] = model.add_operand(operand.type, operand.name)
        if operand.is_constant:
            model.set_operand_value(copy, operand.value)
        else:
            model_inputs.append(copy)
    inputs = [None if o is None else copies[o.index] for o in op.inputs]
    outputs = [None if o is None else model.add_operand(o.type, o.name) for o in op.outputs]
    model.add_operation(op.type, inputs, outputs)
    model.identify_inputs_and_outputs(model_inputs, [o for o in outputs if o is not None])
    model.finish()
    return model


def _lowered_reason(op: Operation, table: OperationTable, trial: Callable[[Operation], None],
                    errors: tuple) -> str:
    try:
        lowered = lower(operation_alone(op), table)
    except (NNAdapterError, ValueError) as exc:
        return _reason_text(exc)
    for part in lowered.operations:
        if part.type in LOWERED_TYPES and part.type not in table:
            return f"{op.label()}: the lowering keeps {part.type.name} (its dims or attributes are not known)"
        reason = unsupported_reason(part, table, trial, errors)
        if reason:
            return f"{op.label()} lowers to {part.label()}: {reason}"
    return ""


def unsupported_reason(op: Operation, table: OperationTable, trial: Callable[[Operation], None],
                       errors: tuple = (Exception,)) -> str:
    """Why the driver cannot run `op` as given, or "" when it can: the table must implement it, its
    signature (and the standard's validation) must hold, and `trial(op)` (building the operation alone)
    must not raise one of `errors`. An operation `lower` replaces is answered for what it lowers to."""
    if op.type in LOWERED_TYPES and op.type not in table:
        try:
            spec = get_spec(op.type)
            check_signature(op, spec)
        except errors as exc:
            return _reason_text(exc)
        return _lowered_reason(op, table, trial, errors)
    if op.type not in table:
        return f"{op.type.name} has no {table.device} implementation"
    try:
        spec = get_spec(op.type)
        check_signature(op, spec)
        if spec.validate is not None:
            spec.validate(op)
        trial(op)
    except errors as exc:
        return _reason_text(exc)
    return ""


def _reason_text(exc: BaseException) -> str:
    """What a user reads of a failed trial: an implementation's own Unsupported says it all; any other error (a
    signature check, the SDK's node validation) keeps its type, which tells where it came from."""
    return str(exc) if isinstance(exc, Unsupported) and str(exc) else f"{type(exc).__name__}: {exc}"


# -- operands by slot name -------------------------------------------------------------------------------
REQUIRED = object()  # the `default` of a constant that must be given


class Operands:
    """One operation's input operands, addressed by the slot names of its signature.

    `args.<slot>` is the operand (None when absent; the list of operands for a variadic slot) and
    `args.<slot>_value` its constant value (None when absent or computed at run time). The readers
    (`constant`, `ints`, `int`, `float`, `bool`) return a slot's constant value, `default` when the
    operand is absent, and raise Unsupported when it is computed at run time or absent without a default.
    """

    def __init__(self, op: Operation):
        self.operation = op
        self._positions: dict[str, int] = {}
        self._variadic: dict[str, tuple] = {}
        slots = get_spec(op.type).inputs
        n_variadic = len(op.inputs) - sum(1 for s in slots if not s.variadic)
        position = 0
        for slot in slots:
            if slot.variadic:
                self._variadic[slot.name] = (position, position + n_variadic)
                self._positions[slot.name] = position
                position += n_variadic
            else:
                self._positions[slot.name] = position
                position += 1

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name.endswith("_value") and name not in self._positions and name[:-6] in self._positions:
            return self.value(name[:-6])
        if name in self._variadic:
            begin, end = self._variadic[name]
            return self.operation.inputs[begin:end]
        if name in self._positions:
            return self._operand(name)
        raise AttributeError(f"{self.operation.type.name} has no input slot '{name}'")

    def position(self, slot: str) -> int:
        """The slot's index in operation.inputs (its first operand for a variadic slot)."""
        try:
            return self._positions[slot]
        except KeyError:
            raise AttributeError(f"{self.operation.type.name} has no input slot '{slot}'") from None

    def _operand(self, slot: str):
        i = self.position(slot)
        inputs = self.operation.inputs
        return inputs[i] if i < len(inputs) else None

    def has(self, slot: str) -> bool:
        """The operand is given (not omitted, not null)."""
        return self._operand(slot) is not None

    def value(self, slot: str) -> np.ndarray | None:
        """The constant value, None when the operand is absent or computed at run time."""
        operand = self._operand(slot)
        return operand.value if operand is not None and operand.is_constant else None

    def constant(self, slot: str, default=REQUIRED) -> np.ndarray | None:
        operand = self._operand(slot)
        if operand is None:
            if default is REQUIRED:
                raise Unsupported(f"{self.operation.label()}: '{slot}' is required")
            return None if default is None else np.asarray(default)
        if not operand.is_constant:
            raise Unsupported(f"{self.operation.label()}: '{slot}' computed at run time is not supported")
        return np.asarray(operand.value)

    def ints(self, slot: str, default=REQUIRED) -> list | None:
        values = self.constant(slot, default)
        return None if values is None else [int(v) for v in values.reshape(-1)]

    def int(self, slot: str, default=REQUIRED) -> int | None:
        values = self.constant(slot, default)
        return None if values is None else int(values.reshape(-1)[0])

    def float(self, slot: str, default=REQUIRED) -> float | None:
        values = self.constant(slot, default)
        return None if values is None else float(values.reshape(-1)[0])

    def bool(self, slot: str, default=REQUIRED) -> bool | None:
        values = self.constant(slot, default)
        return None if values is None else bool(values.reshape(-1)[0])


def unpack(op: Operation) -> Operands:
    """`op`'s input operands by the slot names of its signature."""
    return Operands(op)


def fuse_code_of(op: Operation) -> int:
    """The operation's fused activation (an int FuseCode): 0, FUSED_NONE, when its signature has no fuse_code or
    it is left out. Raises Unsupported when it is computed at run time."""
    try:
        return unpack(op).int("fuse_code", 0)
    except AttributeError:  # no fuse_code slot in the signature
        return 0


def reduces_an_empty_axis(op: Operation) -> bool:
    """True when a REDUCE_* operation reduces an axis whose size is statically 0 (axes constant, or none: all).
    Paddle's mean over nothing is NaN (0/0) where the SDKs' ReduceMean gives 0: such a case goes elsewhere."""
    dims = list(op.inputs[0].type.dims)
    axes_operand = op.inputs[1] if len(op.inputs) > 1 else None
    if axes_operand is not None and not axes_operand.is_constant:
        return False
    axes = [] if axes_operand is None else [int(a) for a in np.asarray(axes_operand.value).reshape(-1)]
    axes = [a + len(dims) if a < 0 else a for a in axes] if axes else range(len(dims))
    return any(0 <= a < len(dims) and dims[a] == 0 for a in axes)


# Products whose result, with quantized inputs, is a sum of products of grid values.
_PRODUCTS = frozenset({OperationType.CONV_2D, OperationType.FULLY_CONNECTED, OperationType.MAT_MUL})


def is_integer_product(op: Operation) -> bool:
    """A CONV_2D / FULLY_CONNECTED / MAT_MUL with an int8 input and weight, no bias, no fused activation,
    writing an int32 quantized output whose scale is the product of theirs: its float result is the integer
    sums times that scale. The converters make quantized Paddle convs and matmuls (both PTQ encodings) into
    these."""
    if op.type not in _PRODUCTS or not op.outputs or op.outputs[0] is None:
        return False
    out = op.outputs[0].type
    if out.precision not in (Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL):
        return False
    x, w = op.inputs[0], op.inputs[1]
    if not (x.type.precision == Precision.QUANT_INT8_SYMM_PER_LAYER and w.type.precision in
            (Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL)):
        return False
    bias_index = 2
    if len(op.inputs) > bias_index and op.inputs[bias_index] is not None:
        return False
    fuse_index = {OperationType.CONV_2D: 8, OperationType.FULLY_CONNECTED: 3}.get(op.type)
    if fuse_index is not None and len(op.inputs) > fuse_index and op.inputs[fuse_index] is not None:
        fuse = op.inputs[fuse_index]
        if not fuse.is_constant or int(np.asarray(fuse.value).reshape(-1)[0]) != 0:
            return False
    w_scales = np.asarray(w.type.scales if w.type.is_per_channel else [w.type.scale], dtype=np.float64)
    want = float(x.type.scale) * w_scales
    held = np.asarray(out.scales if out.is_per_channel else [out.scale], dtype=np.float64)
    if held.size != want.size:
        return False
    return bool(np.allclose(held, want, rtol=1e-5, atol=0.0))


# The run-time fault of a NON_MAX_SUPPRESSION composed around an SDK's NonMaxSuppression (hal/*/nms.py) when a
# candidate box has no positive area: the SDKs never suppress with a box without area and order an inverted box's
# corners, where Paddle takes a zero union as an overlap of NaN (suppressing) and the corners as given.
DEGENERATE_CANDIDATES = ("a candidate box has no positive area, whose overlaps Paddle computes as NaN (0/0, "
                         "suppressing) where NonMaxSuppression never suppresses (the part runs elsewhere)")


def nms_unsupported_reason(op) -> str:
    """Why a NON_MAX_SUPPRESSION composed around an SDK's NonMaxSuppression (ONNX's, OpenVINO's opset-9 one:
    hal/*/nms.py) cannot give Paddle's answer for `op`, or ""."""
    args = unpack(op)
    if nms_is_lod_form(op):
        return "the second input form (scores [M, C] with rois_num) is not composed"
    if op.inputs[0].type.dims[-1] != 4:
        return f"boxes with {op.inputs[0].type.dims[-1]} coordinates (polygons): NonMaxSuppression takes 4"
    if op.inputs[1].type.dims[1] == UNKNOWN:
        return "the class count (scores dim 1) must be known"
    if not args.bool("normalized"):
        return "pixel boxes (normalized false, Paddle's +1 widths): NonMaxSuppression has no such convention"
    nms_threshold, eta = args.float("nms_threshold"), args.float("nms_eta")
    if not nms_threshold >= 0:
        return f"nms_threshold {nms_threshold:.6g} is negative"
    if eta < 1 and nms_threshold > 0.5:
        return (f"adaptive NMS (nms_eta {eta:.6g} with nms_threshold {nms_threshold:.6g} > 0.5): NonMaxSuppression's "
                "threshold is fixed")
    return ""
