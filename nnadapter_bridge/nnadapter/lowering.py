"""Model-to-model lowering passes of the NNAdapter standard, for drivers whose SDK lacks an operation or
wants constants folded: every pass keeps the model's semantics as `nnadapter.reference` defines them.

* `fold_constants(model, should_fold=None)`: an operation whose inputs are all constants (and that
  `should_fold` accepts; default all) is computed once through the reference; its outputs become constant
  operands. It also folds the operations whose outputs depend only on the *dims* of an input (not its
  values) and on constants: SHAPE and FILL_LIKE as soon as that input's dims are all known, PRIOR_BOX as soon
  as its input's and image's heights and widths are, whatever computes them. `fold_prior_box(model)` is
  fold_constants restricted to PRIOR_BOX (what the SDK drivers need). Folding runs in topological order, so
  chains of constant operations fold whole. An operation the reference rejects is left in place (running it
  reports the error as before).
* `fold_operation(op)`: the same test and computation for one operation, as the converters use it while
  they emit (converters.context): the output arrays when `op` can be computed now and its outputs are small
  (at most EAGER_FOLD_MAX_ELEMENTS values each: shapes, sizes, scales, index tables, never a weight-sized
  tensor) and not quantized, else None.
* `decompose(model, types)`: every operation of the given types is replaced by simpler NNAdapter operations
  with the same semantics, drawn from those every driver has (elementwise arithmetic, SIGMOID, EXP,
  RESHAPE, SPLIT, CONCAT, TRANSPOSE, CAST, comparisons, constants). Implemented for YOLO_BOX. An operation
  that cannot be decomposed (a type with no decomposition, unknown grid dims, attributes computed at run
  time, invalid attributes) raises NNAdapterError(FEATURE_NOT_SUPPORTED) naming the operation and the
  reason; the input model is then left as it was.

There is deliberately no model-level "dequantize constants" pass: docs/architecture.md ("Lowering") tells why.

No pass modifies its input: each returns a new Model that shares the unchanged constant arrays, or the
input model itself when there is nothing to do. Model inputs and outputs (operands and order) are kept;
a model output that folds to a constant is produced by an ASSIGN of that constant, so every model output
still comes out of an operation.

Entry points: the four passes above. Imports the standard (model, types, `reference`); nothing above the ground.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import overload

import numpy as np

from nnadapter_bridge.errors import BridgeError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import Lifetime, Precision, ResultCode, dtype_precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations.common import known
from nnadapter_bridge.nnadapter.reference import run_operation
from nnadapter_bridge.nnadapter.types import Operand, OperandType, Operation

# Operations whose outputs depend only on the dims (not the values) of these inputs, and on constants.
_DIMS_ONLY_INPUTS = {T.PRIOR_BOX: (0, 1), T.SHAPE: (0,), T.FILL_LIKE: (0,)}
# fold_operation's bound on each output: shape-sized values fold, tensors the size of a feature map do not
# (a FILL of [N, C, H, W] keeps its operation, with its dims known: a constant would only bloat the model).
EAGER_FOLD_MAX_ELEMENTS = 4096


class _ModelBuilder:
    """Builds the lowered copy of a source model: untouched operations are carried over as they are (no
    new shape inference), replacement operations go through Model.add_operation (checked and inferred)."""

    def __init__(self, source: Model):
        self.source = source
        self.model = Model()
        self._carried: dict[int, Operand] = {}  # source operand index -> its copy
        self._constants: dict[tuple, Operand] = {}  # small shared parameter constants

    @overload
    def carry(self, operand: Operand) -> Operand: ...
    @overload
    def carry(self, operand: None) -> None: ...
    @overload
    def carry(self, operand: Operand | None) -> Operand | None: ...
    def carry(self, operand: Operand | None) -> Operand | None:
        if operand is None:
            return None
        copy = self._carried.get(operand.index)
        if copy is None:
            copy = Operand(operand.type.copy(), operand.value, operand.name, len(self.model.operands))
            self.model.operands.append(copy)
            self._carried[operand.index] = copy
        return copy

    def carry_operation(self, op: Operation) -> None:
        new = Operation(op.type, [self.carry(o) for o in op.inputs], [self.carry(o) for o in op.outputs],
                        len(self.model.operations))
        self.model.operations.append(new)

    def constant(self, value: np.ndarray, name: str, like: OperandType | None = None) -> Operand:
        """A new constant operand; `like` gives its precision and quantization params (else the dtype's)."""
        value = np.asarray(value)
        lifetime = Lifetime.CONSTANT_COPY
        if like is not None:
            t = like.copy(dims=tuple(value.shape), dynamic_dims=(), lifetime=lifetime)
        else:
            t = OperandType(precision=dtype_precision(value.dtype), dims=tuple(value.shape), lifetime=lifetime)
        operand = Operand(t, value, name, len(self.model.operands))
        self.model.operands.append(operand)
        return operand

    def parameter(self, values, dtype, name: str) -> Operand:
        """A shape-[k] parameter constant (axes, shapes, codes, scalars), shared between operations."""
        array = np.asarray(values, dtype=dtype).reshape(-1)
        key = (array.dtype.str, array.tobytes())
        operand = self._constants.get(key)
        if operand is None:
            operand = self.constant(array, name)
            self._constants[key] = operand
        return operand

    def emit(self, type: T, inputs: Sequence[Operand | None], name: str, n_outputs: int = 1,
             outputs: Sequence[Operand | None] | None = None) -> list:
        """Append an operation (signature-checked, output types inferred); returns its outputs."""
        if outputs is None:
            outputs = [self.model.add_operand(OperandType(), f"{name}:{k}" if n_outputs > 1 else name)
                       for k in range(n_outputs)]
        self.model.add_operation(type, inputs, outputs)
        return list(outputs)

    def finish(self) -> Model:
        self.model.input_operands = [self.carry(o) for o in self.source.input_operands]
        self.model.output_operands = [self.carry(o) for o in self.source.output_operands]
        self.model.finished = True
        return self.model


def _live_operations(model: Model, removed: set) -> set:
    """ids of the operations (other than `removed`) that some model output depends on."""
    producers = {}
    for op in model.operations:
        if id(op) not in removed:
            for o in op.outputs:
                if o is not None:
                    producers[o.index] = op
    live: set = set()
    pending: list[Operand | None] = [o for o in model.output_operands]
    seen: set = set()
    while pending:
        operand = pending.pop()
        if operand is None or operand.index in seen:
            continue
        seen.add(operand.index)
        producer = producers.get(operand.index)
        if producer is not None and id(producer) not in live:
            live.add(id(producer))
            pending.extend(producer.inputs)
    return live


# -- constant folding --------------------------------------------------------------------------------------

def _dims_stand_in(op: Operation, operand: Operand) -> np.ndarray | None:
    """An array with the dims `op` reads from its dims-only input `operand` (a broadcast zero: no memory),
    or None when those dims are not all known."""
    t = operand.type
    if op.type == T.PRIOR_BOX:
        shape = (1, 1) + tuple(t.dims[2:])  # only the spatial dims are read
        if t.rank != 4:
            return None
    else:
        shape = tuple(t.dims)
        if t.dynamic_dims:  # dims that change from run to run
            return None
    if not all(known(d) for d in shape):
        return None
    return np.broadcast_to(np.zeros((), t.dtype), shape)


def _fold_arguments(op: Operation, values: dict) -> list | None:
    """The input arrays to compute `op` now, or None when some input is not known before run time."""
    dims_only = _DIMS_ONLY_INPUTS.get(op.type, ())
    args: list[np.ndarray | None] = []
    for i, operand in enumerate(op.inputs):
        if operand is None:
            args.append(None)
        elif operand.index in values:
            args.append(values[operand.index])
        elif i in dims_only:
            stand_in = _dims_stand_in(op, operand)
            if stand_in is None:
                return None
            args.append(stand_in)
        else:
            return None
    return args


def _compute(op: Operation, args: list) -> list | None:
    """`op` run through the reference on `args`; None when the reference rejects it."""
    try:
        # A dead branch's constant (a division by zero the program never reads) is Paddle's inf or NaN too:
        # computing it early must not warn.
        with np.errstate(all="ignore"):
            return run_operation(op, args)
    except BridgeError:
        return None
    except Exception:  # noqa: BLE001 - a reference that fails on these values: run time reports it as before
        return None


def fold_operation(op: Operation, max_elements: int = EAGER_FOLD_MAX_ELEMENTS) -> list | None:
    """The output arrays of `op` (one per output, None for a null one) when it can be computed before run
    time (see the module docstring) and each output has known dims, at most `max_elements` values and a plain
    precision; else None. The arrays have exactly the output operands' dims and dtypes."""
    if op.type in (T.QUANTIZE, T.DEQUANTIZE):
        return None
    dims_only = _DIMS_ONLY_INPUTS.get(op.type, ())
    for i, operand in enumerate(op.inputs):
        if operand is None:
            continue
        if i in dims_only:
            continue  # only its dims are read
        if not operand.is_constant or operand.type.is_quantized:
            return None
    outputs = [o for o in op.outputs if o is not None]
    for operand in outputs:
        t = operand.type
        if t.is_quantized or t.dynamic_dims or not all(known(d) for d in t.dims):
            return None
        if int(np.prod(t.dims, dtype=np.int64)) > max_elements:
            return None
    args = _fold_arguments(op, {o.index: o.value for o in op.inputs if o is not None and o.is_constant})
    if args is None:
        return None
    results = _compute(op, args)
    if results is None or len(results) != len(op.outputs):
        return None
    arrays: list[np.ndarray | None] = []
    for operand, array in zip(op.outputs, results):
        if operand is None:
            arrays.append(None)
            continue
        if array is None:
            return None
        # A private copy: a result may be a view of an input (a constant the caller still owns).
        array = np.array(array)
        if array.dtype != operand.type.dtype or tuple(array.shape) != tuple(operand.type.dims):
            return None  # the reference and shape inference disagree: leave it to run time, which reports it
        arrays.append(array)
    return arrays


def is_folded_output(op: Operation) -> bool:
    """ASSIGN(constant) -> model output is what folding leaves for a folded model output."""
    return (op.type == T.ASSIGN and op.inputs[0] is not None and op.inputs[0].is_constant
            and all(o is not None and o.type.lifetime == Lifetime.MODEL_OUTPUT for o in op.outputs))


def fold_constants(model: Model, should_fold: Callable[[Operation], bool] | None = None) -> Model:
    """A model with every foldable operation (see the module docstring) replaced by constants."""
    values: dict[int, np.ndarray] = {o.index: o.value for o in model.operands if o.is_constant and o.value is not None}
    folded: dict[int, list] = {}  # id(op) -> its output arrays
    for op in model.topological_operations():
        if is_folded_output(op) or (should_fold is not None and not should_fold(op)):
            continue
        args = _fold_arguments(op, values)
        if args is None:
            continue
        results = _compute(op, args)
        if results is None:
            continue  # left for run time, which reports the error where it always did
        folded[id(op)] = results
        for operand, array in zip(op.outputs, results):
            if operand is not None and array is not None:
                # A private copy: a result may be a view of an input the caller still owns.
                values[operand.index] = np.array(array)
    if not folded:
        return model

    live_before = _live_operations(model, set())
    live_after = _live_operations(model, set(folded))
    builder = _ModelBuilder(model)
    model_outputs = {o.index for o in model.output_operands}
    for operand in model.input_operands:
        builder.carry(operand)
    for op in model.operations:
        results = folded.get(id(op))
        if results is None:
            # An operation only the folded ones needed goes with them; one that was dead already stays.
            if id(op) in live_after or id(op) not in live_before:
                builder.carry_operation(op)
            continue
        for operand, array in zip(op.outputs, results):
            if operand is None or array is None:
                continue
            array = values[operand.index]
            if operand.index in model_outputs:
                constant = builder.constant(array, f"{operand.label()}/folded", like=operand.type)
                target = builder.carry(operand)
                target.type.dims, target.type.dynamic_dims = tuple(array.shape), ()
                builder.emit(T.ASSIGN, [constant], operand.label(), outputs=[target])
            else:
                constant = builder.carry(operand)
                constant.value = array
                constant.type.dims, constant.type.dynamic_dims = tuple(array.shape), ()
                constant.type.lifetime = Lifetime.CONSTANT_COPY
    return builder.finish()


def fold_prior_box(model: Model) -> Model:
    """fold_constants restricted to PRIOR_BOX: its boxes and variances become constants wherever the input
    and image heights and widths are known and its attributes are constants."""
    return fold_constants(model, lambda op: op.type == T.PRIOR_BOX)


# -- decomposition -----------------------------------------------------------------------------------------

def _refuse(op: Operation, reason: str) -> NNAdapterError:
    return NNAdapterError(f"{op.label()}: cannot decompose {op.type.name}: {reason}", ResultCode.FEATURE_NOT_SUPPORTED)


def _const_scalar(op: Operation, i: int, what: str, cast):
    value = op.input_value(i)
    if value is None:
        raise _refuse(op, f"{what} must be a constant")
    return cast(np.asarray(value).reshape(-1)[0])


def _yolo_box_attributes(op: Operation) -> dict:
    """YOLO_BOX's constant attributes, validated; raises the refusal the drivers gave before."""
    anchors_value = op.input_value(2)
    if anchors_value is None:
        raise _refuse(op, "anchors must be a constant")
    anchors = [int(v) for v in np.asarray(anchors_value).reshape(-1)]
    attrs = dict(
        anchors=anchors,
        class_num=_const_scalar(op, 3, "class_num", int),
        conf_thresh=_const_scalar(op, 4, "conf_thresh", float),
        downsample=_const_scalar(op, 5, "downsample_ratio", int),
        clip_bbox=_const_scalar(op, 6, "clip_bbox", bool),
        scale=_const_scalar(op, 7, "scale_x_y", float),
        iou_aware=_const_scalar(op, 8, "iou_aware", bool),
    )
    attrs["iou_factor"] = _const_scalar(op, 9, "iou_aware_factor", float) if attrs["iou_aware"] else 0.0
    if not anchors or len(anchors) % 2:
        raise _refuse(op, f"anchors must hold (width, height) pairs, got {len(anchors)} values")
    if attrs["class_num"] < 1 or attrs["downsample"] < 1:
        raise _refuse(op, f"class_num {attrs['class_num']}, downsample_ratio {attrs['downsample']}")
    x = op.input(0).type
    if x.precision != Precision.FLOAT32:  # the decomposition computes in float32; Paddle's double kernel does not
        raise _refuse(op, f"the decomposition computes in float32, the input is {x.precision.name}")
    if x.rank != 4 or not (known(x.dims[2]) and known(x.dims[3])):
        raise _refuse(op, f"the grid needs the input's height and width, got {x.describe()}")
    return attrs


def _decompose_yolo_box(b: _ModelBuilder, op: Operation) -> None:
    """Paddle's yolo_box in the reference's formula order, in float32 (the reference computes in float64
    and rounds once, so results agree to float32 rounding):

        conf = sigmoid(t_obj)                                  (* with iou_aware: conf^(1-f) * sigmoid(t_iou)^f)
        cx = (grid_x + sigmoid(t_x) * scale + bias) * img_w / W,   bias = -0.5 * (scale - 1)
        bw = exp(t_w) * anchor_w * img_w / (downsample * W)     (likewise y, h)
        boxes = [cx - bw/2, cy - bh/2, cx + bw/2, cy + bh/2]    (clip_bbox: to [0, img - 1])
        boxes, scores = boxes * keep, sigmoid(t_cls) * conf * keep,   keep = conf >= conf_thresh
    """
    attrs = _yolo_box_attributes(op)
    a = len(attrs["anchors"]) // 2
    k = attrs["class_num"]
    h, w = (int(d) for d in op.input(0).type.dims[2:])
    anchors = np.asarray(attrs["anchors"], dtype=np.float32).reshape(a, 2)
    base = op.outputs[0].label() if op.outputs[0] is not None else op.label()
    i32 = np.int32
    none = b.parameter(0, i32, f"{base}/fuse_none")

    def name(hint: str) -> str:
        return f"{base}/{hint}"

    def f32(value, hint: str) -> Operand:
        value = np.asarray(value, dtype=np.float32)
        if value.ndim <= 1:
            return b.parameter(value, np.float32, name(hint))
        return b.constant(value, name(hint))

    def binary(type: T, x: Operand, y: Operand, hint: str) -> Operand:
        return b.emit(type, [x, y, none], name(hint))[0]

    def unary(type: T, x: Operand, hint: str) -> Operand:
        return b.emit(type, [x], name(hint))[0]

    def split(x: Operand, axis: int, sections: list, hint: str) -> list:
        return b.emit(T.SPLIT, [x, b.parameter(axis, i32, name("axis")), b.parameter(sections, i32, name("sections"))],
                      name(hint), n_outputs=len(sections))

    def reshape(x: Operand, shape: list, hint: str, output: Operand | None = None) -> Operand:
        return b.emit(T.RESHAPE, [x, b.parameter(shape, i32, name("shape"))], name(hint),
                      outputs=None if output is None else [output])[0]

    x = b.carry(op.input(0))
    iou = None
    if attrs["iou_aware"]:
        iou_logits, x = split(x, 1, [a, a * (5 + k)], "iou_split")  # [N, A, H, W], [N, A * (5 + K), H, W]
        iou = reshape(unary(T.SIGMOID, iou_logits, "iou"), [0, a, 1, h, w], "iou_5d")
    pred = reshape(x, [0, a, 5 + k, h, w], "pred")
    tx, ty, tw, th, tobj, tcls = split(pred, 2, [1, 1, 1, 1, 1, k], "t")  # [N, A, 1 | K, H, W]
    conf = unary(T.SIGMOID, tobj, "conf")
    if iou is not None:
        factor = attrs["iou_factor"]
        conf = binary(T.MUL, binary(T.POW, conf, f32([1.0 - factor], "conf_exponent"), "conf_pow"),
                      binary(T.POW, iou, f32([factor], "iou_exponent"), "iou_pow"), "iou_conf")

    image = b.emit(T.CAST, [b.carry(op.inputs[1]), b.parameter(int(Precision.FLOAT32), i32, name("float32"))],
                   name("image_size"))[0]
    img_h, img_w = (reshape(s, [0, 1, 1, 1, 1], f"img_{hint}")
                    for s, hint in zip(split(image, 1, [1, 1], "image_hw"), "hw"))

    scale = attrs["scale"]
    bias = -0.5 * (scale - 1.0)

    def center(grid: np.ndarray, logits: Operand, img: Operand, cells: int, hint: str) -> Operand:
        offset = unary(T.SIGMOID, logits, f"sigmoid_{hint}")
        if scale != 1.0:
            offset = binary(T.MUL, offset, f32([scale], "scale_x_y"), f"scaled_{hint}")
        shifted = binary(T.ADD, f32(grid, f"grid_{hint}"), offset, f"grid_{hint}_offset")
        if bias != 0.0:
            shifted = binary(T.ADD, shifted, f32([bias], "scale_bias"), f"biased_{hint}")
        return binary(T.DIV, binary(T.MUL, shifted, img, f"{hint}_pixels"), f32([cells], f"cells_{hint}"),
                      f"center_{hint}")

    def half_extent(logits: Operand, prior: np.ndarray, img: Operand, cells: int, hint: str) -> Operand:
        size = binary(T.MUL, unary(T.EXP, logits, f"exp_{hint}"), f32(prior.reshape(1, a, 1, 1, 1), f"anchor_{hint}"),
                      f"anchored_{hint}")
        size = binary(T.DIV, binary(T.MUL, size, img, f"{hint}_pixels"),
                      f32([attrs["downsample"] * cells], f"stride_{hint}"), f"extent_{hint}")
        return binary(T.DIV, size, f32([2.0], "two"), f"half_{hint}")

    cx = center(np.arange(w, dtype=np.float32).reshape(1, 1, 1, 1, w), tx, img_w, w, "x")
    cy = center(np.arange(h, dtype=np.float32).reshape(1, 1, 1, h, 1), ty, img_h, h, "y")
    half_w = half_extent(tw, anchors[:, 0], img_w, w, "w")
    half_h = half_extent(th, anchors[:, 1], img_h, h, "h")
    x1, y1 = binary(T.SUB, cx, half_w, "x1"), binary(T.SUB, cy, half_h, "y1")
    x2, y2 = binary(T.ADD, cx, half_w, "x2"), binary(T.ADD, cy, half_h, "y2")
    if attrs["clip_bbox"]:
        zero, one = f32([0.0], "zero"), f32([1.0], "one")
        x1, y1 = binary(T.MAX, x1, zero, "x1_clipped"), binary(T.MAX, y1, zero, "y1_clipped")
        x2 = binary(T.MIN, x2, binary(T.SUB, img_w, one, "max_x"), "x2_clipped")
        y2 = binary(T.MIN, y2, binary(T.SUB, img_h, one, "max_y"), "y2_clipped")

    # Under the threshold boxes and scores are multiplied by 0, as the reference does (inf * 0 stays NaN).
    passed = b.emit(T.GREATER_EQUAL, [conf, f32([attrs["conf_thresh"]], "conf_thresh")], name("passed"))[0]
    keep = b.emit(T.CAST, [passed, b.parameter(int(Precision.FLOAT32), i32, name("float32"))], name("keep"))[0]
    last = b.parameter([0, 1, 3, 4, 2], i32, name("channels_last"))
    corners = b.emit(T.CONCAT, [x1, y1, x2, y2, b.parameter(2, i32, name("axis"))], name("corners"))[0]
    boxes = binary(T.MUL, corners, keep, "kept_boxes")  # [N, A, 4, H, W]
    boxes = b.emit(T.TRANSPOSE, [boxes, last], name("boxes_last"))[0]
    reshape(boxes, [0, a * h * w, 4], "boxes", output=b.carry(op.outputs[0]))
    if len(op.outputs) > 1 and op.outputs[1] is not None:
        scores = binary(T.MUL, unary(T.SIGMOID, tcls, "class_probs"), binary(T.MUL, conf, keep, "kept_conf"),
                        "kept_scores")  # [N, A, K, H, W]
        scores = b.emit(T.TRANSPOSE, [scores, last], name("scores_last"))[0]
        reshape(scores, [0, a * h * w, k], "scores", output=b.carry(op.outputs[1]))


_DECOMPOSITIONS: dict[T, Callable[[_ModelBuilder, Operation], None]] = {
    T.YOLO_BOX: _decompose_yolo_box,
}


def decompose(model: Model, types: Iterable[T]) -> Model:
    """A model with every operation of `types` replaced by its decomposition (see the module docstring)."""
    types = {T(t) for t in types}
    for t in types:
        if t not in _DECOMPOSITIONS:
            raise NNAdapterError(f"the NNAdapter standard has no decomposition of {t.name}",
                                 ResultCode.FEATURE_NOT_SUPPORTED)
    targets = [op for op in model.operations if op.type in types]
    if not targets:
        return model
    builder = _ModelBuilder(model)
    for operand in model.input_operands:
        builder.carry(operand)
    for op in model.operations:
        if op.type in types:
            _DECOMPOSITIONS[op.type](builder, op)
        else:
            builder.carry_operation(op)
    return builder.finish()
