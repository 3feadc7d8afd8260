"""Paddle's relu at onnxruntime's speed: which relus may run as a plain ONNX Relu, and the exact program a run
falls back to when one of them may have met a NaN.

Paddle's relu is `x > 0 ? x : 0`, so NaN becomes 0. ONNX Relu keeps NaN, so the exact form is a Relu followed
by ThresholdedRelu(alpha=0) (graph.GraphBuilder.relu). onnxruntime has no NCHWc kernel for ThresholdedRelu:
each one costs a reorder out of the blocked layout and one back (PP-HGNetV2: 35 + 29 reorders; 12% of its
time at one thread). Yet the two forms differ only where a relu's input is NaN, and a NaN that a plain Relu
keeps travels on: through a convolution, an addition, a pool average... every output element that depends on
it becomes NaN. So a relu runs plain ("NaN kept") when a NaN in any element of its output either shows as a NaN
in some float output or changes no output at all. That holds when
- every path from the relu to the program's outputs goes through operations that propagate NaN that way, and
  ends at a float output (a NaN that a slice drops changes nothing), or
- some path does and reads every element on its way (a stride-1 convolution or an upsampling resize does, a
  slice, a strided convolution or a downsampling resize may not): then whatever else reads the relu's output,
  a NaN there shows (PP-HGNetV2's stem relu feeds a max pool, which drops NaN, and a stride-1 convolution that
  carries it to the output).
A relu whose NaN would not show that way (ResNet-vd's and PP-HGNet's stems: three relus and stride-1
convolutions into a max pool, which drops NaN) is kept plain too, and watched: the probe below also sums its output,
which holds a NaN exactly where its input does. A NaN of a relu upstream that reaches a watched output through
operations that propagate it shows there as well. Watching costs one sum of the relu's output (and a reorder out of
onnxruntime's blocked layout); the exact form cost a ThresholdedRelu and a reorder out and back (ResNet50-vd at
one thread: 4% of its run for its three stem relus).
A run whose float outputs (and watched relus) hold no NaN then gave exactly Paddle's answer (no NaN-kept relu met a
NaN that changed an output). A run where they hold a NaN is run again by the exact program, built from the same
ONNX model with each NaN-kept relu followed by its ThresholdedRelu (`exact_model_bytes`).

Whether the outputs hold a NaN is computed by onnxruntime in the same run: the speculative model has one more
graph output, `NAN_PROBE_OUTPUT`, the sum of the squares of every float32 output's elements (NaN when any
element is NaN; squares are never negative, so +inf and -inf in an output sum to +inf, not to the NaN a plain sum
gives, which sent a run whose outputs hold both infinities to the exact program for nothing), or of a smaller
tensor that every NaN on its way to that output passes through (`nan_probe_operands`: a segmentation model's
upsampling input), and of each watched relu's output.
Checking in numpy after the run cost more than the relus saved at small sizes: the first numpy call after a
session run reads code and data the run has evicted from the caches (PP-HGNetV2 at one thread: 80 us of a 2 ms
run, measured in-process).

Which operations propagate NaN is a property of onnxruntime's kernels, not of the ONNX spec: MaxPool,
ReduceMax and GlobalMaxPool drop it (their comparisons skip NaN), so they are not in `NAN_PROPAGATING`. Each
entry of that table is checked against onnxruntime in tests/hal/test_onnxruntime_nan_speculation.py (a NaN fed
through the relu and the operation must give builtin_device's answer).

Entry points: `nan_kept_relus`, `nan_probe_operands`, `nan_probe_nodes`, `exact_model_bytes`, `probe_saw_nan`,
`NAN_KEPT_RELU_SUFFIX`, `NAN_PROBE_OUTPUT`, `METADATA_KEY`.
Imports hal.common, onnx and the standard; never another driver.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper

from hal.common import Unsupported, fuse_code_of, unpack
from nnadapter_bridge.nnadapter.codes import FuseCode
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations.window import resolve_window
from nnadapter_bridge.nnadapter.types import Operation

# The ONNX node name of a NaN-kept relu ends with this; exact_model_bytes finds them by it.
NAN_KEPT_RELU_SUFFIX = "/nan_kept_relu"
# The model's metadata_props entry that says the program has NaN-kept relus (onnxruntime's session reports
# it through get_modelmeta(), so a program restored from its bytes knows it without parsing them).
METADATA_KEY = "nnadapter_bridge.nan_kept_relus"
# The speculative model's last graph output: a float32 scalar, NaN when a float32 output holds a NaN.
NAN_PROBE_OUTPUT = "nnadapter_bridge.nan_probe"
# Names of the probe's nodes end with this; exact_model_bytes removes them.
_PROBE_NODE_SUFFIX = "/nan_probe"

_ALL = None  # every input position

# NNAdapter operation -> the input positions through which it propagates NaN (every output element that reads a
# NaN input element is NaN), as onnxruntime's CPU kernels compute the ONNX nodes operations.py writes for it.
NAN_PROPAGATING: dict[T, frozenset | None] = {
    T.ADD: frozenset({0, 1}), T.SUB: frozenset({0, 1}), T.MUL: frozenset({0, 1}), T.DIV: frozenset({0, 1}),
    T.CONV_2D: frozenset({0, 1, 2}), T.CONV_2D_TRANSPOSE: frozenset({0, 1, 2}),
    T.FULLY_CONNECTED: frozenset({0, 1, 2}), T.MAT_MUL: frozenset({0, 1}),
    T.CONCAT: _ALL,
    T.AVERAGE_POOL_2D: frozenset({0}), T.BATCH_NORMALIZATION: frozenset({0}),
    T.RELU: frozenset({0}), T.RELU6: frozenset({0}), T.SIGMOID: frozenset({0}), T.TANH: frozenset({0}),
    T.HARD_SWISH: frozenset({0}), T.HARD_SIGMOID: frozenset({0}), T.SWISH: frozenset({0}),
    T.LEAKY_RELU: frozenset({0}), T.PRELU: frozenset({0}), T.GELU: frozenset({0}),
    T.SOFTMAX: frozenset({0}), T.LAYER_NORMALIZATION: frozenset({0}),
    T.RESIZE_NEAREST: frozenset({0}), T.RESIZE_LINEAR: frozenset({0}),
    T.RESHAPE: frozenset({0}), T.FLATTEN: frozenset({0}), T.SQUEEZE: frozenset({0}), T.UNSQUEEZE: frozenset({0}),
    T.TRANSPOSE: frozenset({0}), T.SLICE: frozenset({0}), T.SPLIT: frozenset({0}), T.PAD: frozenset({0}),
    T.REDUCE_MEAN: frozenset({0}), T.REDUCE_SUM: frozenset({0}),
}

def _is_float32(operand) -> bool:
    return operand is not None and not operand.type.is_quantized and operand.type.dtype == np.float32


def _fuses_relu(op: Operation) -> bool:
    """The relu graph.GraphBuilder.fuse writes for a FUSED_RELU."""
    try:
        return fuse_code_of(op) == int(FuseCode.FUSED_RELU)
    except Unsupported:  # computed at run time: the conversion rejects it, with its reason
        return False


def _has_relu(op: Operation) -> bool:
    return (op.type == T.RELU and _is_float32(op.outputs[0])) or (_fuses_relu(op) and _is_float32(op.outputs[0]))


def _reads_every_element(op: Operation, position: int) -> bool:
    """Whether every element of `op`'s input at `position` is read into some output element (so, for an operation
    of NAN_PROPAGATING, a NaN there makes some output element NaN). A slice, a split, a downsampling resize or a
    pad by a negative amount may drop elements, and a strided window may skip some; a convolution of stride 1 and
    an upsampling resize read them all."""
    if op.type in (T.RESIZE_NEAREST, T.RESIZE_LINEAR) and position == 0:
        # Upsampling reads every element: consecutive output samples move by at most one input step, from the
        # first element to the last (nearest picks each, linear has each as a neighbour: NaN times a weight of 0
        # is still NaN). Downsampling may skip some.
        in_dims, out_dims = op.inputs[0].type.dims, op.outputs[0].type.dims
        return len(in_dims) == len(out_dims) == 4 and all(
            0 <= i <= o for i, o in zip(in_dims[2:], out_dims[2:]))
    if op.type in _DROPS_ELEMENTS:
        return False
    if op.type in (T.CONV_2D, T.AVERAGE_POOL_2D) and position == 0:
        try:
            return _windows_cover_input(op)
        except Unsupported:  # a window parameter computed at run time: the conversion declines it anyway
            return False
    if op.type == T.CONV_2D_TRANSPOSE and position == 0:
        return False  # its pads crop the output: a border element may land outside it
    if op.type == T.PAD and position == 0:
        try:  # a negative amount crops
            return all(p >= 0 for p in unpack(op).ints("pads"))
        except Unsupported:
            return False
    return True


def _windows_cover_input(op: Operation) -> bool:
    """Whether every element of a convolution's or average pool's input lies in one of its windows. Stride 1
    always covers (a window starts at every position; pads are never negative); a strided window, when its
    kernel, stride, dilation and pads leave no gap (stride <= kernel) and the last windows reach the end
    (PP-HGNetV2's stride-2 3x3 convolutions with pad 1 do), with the spatial dims known."""
    args = unpack(op)
    strides = args.ints("strides")
    if all(s == 1 for s in strides):
        return True
    in_hw, out_hw = op.inputs[0].type.dims[2:], op.outputs[0].type.dims[2:]
    if op.type == T.CONV_2D:
        kernel, dilations = list(op.inputs[1].type.dims[2:]), args.ints("dilations", [1, 1])
    else:
        kernel, dilations = args.ints("kernel_shape"), [1, 1]
    if not all(d >= 0 for d in (*in_hw, *out_hw, *kernel)):
        return False
    pads, dilations = resolve_window(args.int("auto_pad", 0), args.ints("pads", None), in_hw, kernel, strides,
                                     dilations)
    for axis in (0, 1):
        starts = np.arange(out_hw[axis]) * strides[axis] - pads[2 * axis]
        read = (starts[:, None] + np.arange(kernel[axis]) * dilations[axis]).reshape(-1)
        if np.unique(read[(read >= 0) & (read < in_hw[axis])]).size != in_hw[axis]:
            return False
    return True


# Operations of NAN_PROPAGATING whose outputs may leave out elements of their input (a resize: _reads_every_element).
_DROPS_ELEMENTS = frozenset({T.SLICE, T.SPLIT})


def _results_of(op: Operation) -> list:
    return [out for out in op.outputs if out is not None]


def _propagates(op: Operation, index: int, every_element: bool, kept: set, skipped_ids: set) -> bool:
    """`op` turns a NaN of operand `index` into a NaN in each output element that reads it (`every_element`: and
    every element of the operand is read). `kept`: id() of the NaN-kept relus (an exact relu drops a NaN);
    `skipped_ids`: id() of operations converted as a fused pattern."""
    if id(op) in skipped_ids or op.type not in NAN_PROPAGATING:
        return False
    if _has_relu(op) and id(op) not in kept:
        return False  # an exact relu drops the NaN
    positions = NAN_PROPAGATING[op.type]
    reads = [k for k, o in enumerate(op.inputs) if o is not None and o.index == index]
    if any(positions is not _ALL and k not in positions for k in reads):
        return False  # also read where it does not propagate (e.g. as a scale)
    return not every_element or any(_reads_every_element(op, k) for k in reads)


def nan_kept_relus(model: Model, skipped: Sequence[Operation] = (), watched: list | None = None) -> set:
    """id() of the operations whose relu (a RELU, or a fused FUSED_RELU) may run as a plain ONNX Relu: a NaN in
    any element of its output shows in a float32 model output or changes none (module docstring).
    `skipped`: operations converted as a fused pattern (quantized chains) - never NaN-propagating.
    `watched`: when a list, a relu whose NaN would not show is kept plain too, its result appended to `watched`
    for the probe to sum (module docstring: the relus before a max pool)."""
    outputs = {o.index for o in model.output_operands if o is not None}
    float_outputs = {o.index for o in model.output_operands if _is_float32(o)}
    consumers = model.consumers()
    skipped_ids = {id(op) for op in skipped}
    kept: set = set()
    # Decided from the outputs backwards (reverse topological order sees every consumer of an operand, and
    # whether its relu is kept, before the operand's producer). For an operand,
    # - "flagged": a NaN in any of its elements makes some float32 model output hold a NaN;
    # - "safe": a NaN in any of its elements makes some float32 model output hold a NaN or changes no output.
    flagged: dict[int, bool] = {}
    safe: dict[int, bool] = {}

    def propagates(op: Operation, index: int, every_element: bool) -> bool:
        return _propagates(op, index, every_element, kept, skipped_ids)

    for op in reversed(model.topological_operations()):
        results = _results_of(op)
        for out in results:
            readers = consumers.get(out.index, ())
            flagged[out.index] = out.index in float_outputs or any(
                propagates(c, out.index, True) and all(_is_float32(r) and flagged[r.index] for r in _results_of(c))
                for c in readers)
            safe[out.index] = flagged[out.index] or (out.index not in outputs and all(
                propagates(c, out.index, False) and all(_is_float32(r) and safe[r.index] for r in _results_of(c))
                for c in readers))
        if id(op) not in skipped_ids and _has_relu(op) and results:
            if all(safe[o.index] for o in results):
                kept.add(id(op))
            elif watched is not None:  # the probe sees its NaN: it shows, and so does one sent to it from upstream
                kept.add(id(op))
                watched.extend(results)
                for out in results:
                    flagged[out.index] = safe[out.index] = True
    return kept


def nan_probe_operands(model: Model, kept: set, skipped: Sequence[Operation] = ()) -> list:
    """The operand the probe sums for each float32 output of `model`, in output order (each at most once): the
    output itself, or a smaller operand upstream of it that every NaN a NaN-kept relu (`kept`) sends to it passes
    through as a NaN. From an output, the walk goes up while the producer has one result and one non-constant
    input, a float32 one that it reads in full and propagates NaN from (BiSeNetV2's output is an 8x bilinear
    upsampling of a 19x32x32 tensor: summing that costs 1/64 of summing the output). A NaN such an operation
    writes without one in its input (inf * 0 in a resize) is the model's own answer, so it needs no exact run.
    The smallest operand on the walk is taken, the one nearest the output among equals (an operation whose result
    gains a reader can no longer be fused into its producer by onnxruntime, so an equal size is not worth it)."""
    producers = model.producers()
    skipped_ids = {id(op) for op in skipped}
    chosen: list = []
    for output in model.output_operands:
        if not _is_float32(output) or output.is_constant:
            continue
        best = current = output
        while (producer := producers.get(current.index)) is not None and len(_results_of(producer)) == 1:
            variable = {o.index: o for o in producer.inputs if o is not None and not o.is_constant}
            if len(variable) != 1:
                break
            (source,) = variable.values()
            if not _is_float32(source) or not _propagates(producer, source.index, True, kept, skipped_ids):
                break
            current = source
            if _element_count(current) < _element_count(best):
                best = current
        if all(best.index != o.index for o in chosen):
            chosen.append(best)
    return chosen


def _element_count(operand) -> float:
    return math.inf if operand.type.has_unknown_dims else operand.type.numel()


def nan_probe_nodes(float_outputs: Sequence[str]) -> tuple[list, onnx.ValueInfoProto]:
    """The nodes computing NAN_PROBE_OUTPUT from the float32 tensors `float_outputs` (at least one; the graph's
    names of `nan_probe_operands`), and its value info: the sum of the squares of all their elements
    (ReduceSumSquare over every axis, one pass as ReduceSum is; an empty tensor sums to 0). NaN exactly when an
    element is NaN: the terms are never negative, so infinities of both signs cannot meet in it (module docstring)."""
    nodes = []
    sums = []
    for k, name in enumerate(float_outputs):
        total = NAN_PROBE_OUTPUT if len(float_outputs) == 1 else f"{NAN_PROBE_OUTPUT}/{k}"
        nodes.append(helper.make_node("ReduceSumSquare", [name], [total], keepdims=0,
                                      name=f"{name}/sum{_PROBE_NODE_SUFFIX}"))
        sums.append(total)
    if len(sums) > 1:
        nodes.append(helper.make_node("Sum", sums, [NAN_PROBE_OUTPUT], name=f"total{_PROBE_NODE_SUFFIX}"))
    return nodes, helper.make_tensor_value_info(NAN_PROBE_OUTPUT, onnx.TensorProto.FLOAT, [])


def exact_model_bytes(model_bytes: bytes) -> bytes:
    """The same ONNX model with each NaN-kept relu followed by ThresholdedRelu(alpha=0): Paddle's relu, and
    without the NaN probe (the exact program's outputs are the model's own)."""
    proto = onnx.load_from_string(bytes(model_bytes))
    nodes = []
    for node in proto.graph.node:
        if node.name.endswith(_PROBE_NODE_SUFFIX):
            continue
        nodes.append(node)
        if node.op_type == "Relu" and node.name.endswith(NAN_KEPT_RELU_SUFFIX):
            result = node.output[0]
            node.output[0] = f"{result}/nan_kept"
            nodes.append(helper.make_node("ThresholdedRelu", [node.output[0]], [result], alpha=0.0,
                                          name=f"{node.name}/exact"))
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)
    outputs = [o for o in proto.graph.output if o.name != NAN_PROBE_OUTPUT]
    del proto.graph.output[:]
    proto.graph.output.extend(outputs)
    for prop in proto.metadata_props:
        if prop.key == METADATA_KEY:
            prop.value = "0"
    return proto.SerializeToString()


def probe_saw_nan(probe) -> bool:
    """Whether the run's NAN_PROBE_OUTPUT value (a 0-d float32 array) is NaN: a float32 output held a NaN."""
    return math.isnan(probe)
