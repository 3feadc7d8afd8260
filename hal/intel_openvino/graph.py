"""NNAdapter Model -> `openvino.Model`: the graph builder, quantization at operand boundaries, and the
per-operation support check that `validate_program` answers with.

The operation implementations live in `operations.OPERATIONS`; the driver passes that table in (this
module never imports it). Every operand becomes one OpenVINO output. Quantized operands are stored as
their integers (model inputs and outputs keep the NNAdapter storage type) and every implementation sees
real values: the builder dequantizes a quantized operand where an operation reads it and quantizes an
implementation's real result into the output's storage type (round half to even, saturate), what
builtin_device's kernel registry does around its kernels. QUANTIZE and DEQUANTIZE therefore reduce
to the identity.

Low precision: OpenVINO runs a convolution or matrix product in int8 when its activation comes through a
FakeQuantize and its weight is an int8 Constant -> Convert -> Multiply(scale) (the CPU plugin's
low-precision transformations match these patterns). So the real value of an int8 / uint8 result is the
FakeQuantize(levels=256) of the implementation's float result (its stored integers are built only where
something reads them raw: a model output), a quantized constant is Constant(int8) -> Convert -> Multiply,
and an int32 product of quantized operands keeps its float result as its real value (is_integer_product).
The CPU plugin reports what it executed in the runtime model's rt_info ('runtimePrecision'). That holds only on a
CPU whose int8 dot product is exact (cpu_features.exact_int8_kernels); elsewhere a quantized constant is a float
constant of its real values, no pattern forms, and the products compute in float.

int64: the CPU plugin computes int64 as int32; `convert_operation` declines what int64.py says cannot stay exact
and adds its run-time checks (an int64 input or result beyond int32) as extra outputs (GraphBuilder.faults).

Empty tensors: the CPU plugin (2026.4) kills the process with SIGFPE when a compiled Gather or MaxPool has a
tensor with a 0 dim (a batch of 0 images: Paddle Inference returns an empty result). `convert_operation` declines
every operation whose computed input or output has a 0 dim (`empty_operand_reason`): there is nothing to compute,
and the host or another device runs it.

Attribute-like operands (axes, pads, strides, flags) must be constants unless an implementation says
otherwise; anything an implementation cannot express faithfully raises `Unsupported`, which makes
`operation_supported` answer False for that operation, so the partitioner sends it elsewhere.

Channels-last outputs: the CPU plugin computes a convolution net channels-last ('acdb') and, for a model output
of 16 or more channels, reorders it to planar with a slow generic kernel (a [1, 19, 256, 256] segmentation map: 5.5
ms of a 33 ms run at 1 thread, 5x numpy's transpose of the same array). `channels_last_reorders` finds those
outputs in a compiled program and `hand_out_channels_last` ends them in a Transpose to [N, H, W, C], which the
plugin computes as no reorder at all; the driver transposes them back as it copies them out (checks.NHWC_PREFIX).

Entry points: `build_ov_model`, `channels_last_reorders` / `hand_out_channels_last`, `unsupported_reason` /
`operation_supported`, `GraphBuilder`. Imports hal.common, `checks`, `int64` and the standard; never another driver.
"""
from __future__ import annotations

import numpy as np
import openvino as ov

from hal.common import OperationTable, Unsupported, first_output_name, is_integer_product
from hal.common import unsupported_reason as trial_reason
from hal.intel_openvino.checks import CHECK_PREFIX, FAULT_PREFIX, NHWC_PREFIX
from hal.intel_openvino.int64 import (
    input_flag,
    input_message,
    int64_reason,
    is_int64,
    needs_overflow_check,
    overflow_flag,
    overflow_message,
    values_read,
)
from hal.protocol import fault_output_name
from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.cpu_features import exact_int8_kernels
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations import dequantize
from nnadapter_bridge.nnadapter.types import Operand, OperandType, Operation

try:  # the newest opset this OpenVINO release ships (the Python API adds one per release)
    from openvino import opset16 as opset
except ImportError:  # pragma: no cover - older OpenVINO releases
    from openvino import opset15 as opset

# NNAdapter storage precisions OpenVINO holds natively (float16/float64 and the wide unsigned types
# are left to other devices: the CPU plugin computes them in other precisions).
ELEMENT_TYPES = {
    Precision.BOOL8: ov.Type.boolean,
    Precision.INT8: ov.Type.i8,
    Precision.UINT8: ov.Type.u8,
    Precision.INT32: ov.Type.i32,
    Precision.INT64: ov.Type.i64,
    Precision.FLOAT32: ov.Type.f32,
    Precision.QUANT_INT8_SYMM_PER_LAYER: ov.Type.i8,
    Precision.QUANT_INT8_SYMM_PER_CHANNEL: ov.Type.i8,
    Precision.QUANT_UINT8_ASYMM_PER_LAYER: ov.Type.u8,
    Precision.QUANT_INT32_SYMM_PER_LAYER: ov.Type.i32,
    Precision.QUANT_INT32_SYMM_PER_CHANNEL: ov.Type.i32,
}


def partial_shape(dims) -> ov.PartialShape:
    """NNAdapter dims -> PartialShape; NNADAPTER_UNKNOWN (or any negative) is a dynamic dimension."""
    return ov.PartialShape([ov.Dimension(-1) if (d == UNKNOWN or d < 0) else ov.Dimension(int(d)) for d in dims])


def element_type(t: OperandType) -> ov.Type:
    try:
        return ELEMENT_TYPES[t.precision]
    except KeyError:
        raise Unsupported(f"precision {t.precision.name} is not supported by intel_openvino") from None


def i64(values) -> ov.Output:
    return opset.constant(np.asarray(values, dtype=np.int64).reshape(-1)).output(0)


def f32(value) -> ov.Output:
    return opset.constant(np.asarray(value, dtype=np.float32)).output(0)


def like(value, x: ov.Output) -> ov.Output:
    """A scalar constant of x's element type."""
    return opset.constant(np.asarray(value, dtype=x.get_element_type().to_dtype())).output(0)


def to_scalar(x: ov.Output) -> ov.Output:
    """A shape-[1] (or any single-element) tensor as a rank-0 one, so it broadcasts without raising rank."""
    return opset.reshape(x, opset.constant(np.zeros(0, dtype=np.int64)), False).output(0)


def _channel_shape(rank: int, axis: int) -> list:
    shape = [1] * rank
    shape[axis] = -1
    return shape


# -- quantization at operand boundaries --------------------------------------------------------------
def _scale_node(t: OperandType, rank: int) -> ov.Output:
    if t.is_per_channel:
        scales = np.asarray(t.scales, dtype=np.float32)
        if rank:
            scales = scales.reshape(_channel_shape(rank, t.channel_dim))
        return f32(scales)
    return f32(np.float32(t.scale))


def dequantize_node(raw: ov.Output, t: OperandType) -> ov.Output:
    """(q - zero_point) * scale in float32 (per channel along channel_dim)."""
    values = opset.convert(raw, ov.Type.f32).output(0)
    if not t.is_per_channel and t.zero_point:
        values = opset.subtract(values, f32(np.float32(t.zero_point))).output(0)
    return opset.multiply(values, _scale_node(t, t.rank)).output(0)


def fake_quantize_node(real: ov.Output, t: OperandType) -> ov.Output:
    """The real value of `real` quantized into `t` (int8 / uint8, per layer or per channel) and dequantized
    again, as one FakeQuantize(levels=256): OpenVINO's own low-precision form, which the CPU plugin's
    low-precision transformations turn into int8 kernels for the convolutions and matrix products that read
    it. Ranges [(min - zero_point) x scale, (max - zero_point) x scale]; the result rounds (x / scale) half to
    even (plus the zero point) and saturates, quantize_node's integers times the scale, up to the float
    arithmetic of FakeQuantize's (x - low) / (high - low) x 255 (a value within a few ulp of a rounding tie may
    land one step apart)."""
    info = np.iinfo(t.dtype)
    zero = 0 if t.is_per_channel else int(t.zero_point or 0)
    if t.is_per_channel:
        scales = np.asarray(t.scales, dtype=np.float64)
        shape = _channel_shape(t.rank, t.channel_dim) if t.rank else [-1]
        low = ((info.min - zero) * scales).astype(np.float32).reshape(shape)
        high = ((info.max - zero) * scales).astype(np.float32).reshape(shape)
    else:
        low = np.float32((info.min - zero) * float(t.scale))
        high = np.float32((info.max - zero) * float(t.scale))
    lo, hi = f32(low), f32(high)
    return opset.fake_quantize(real, lo, hi, lo, hi, 256).output(0)


# Quantized types whose real values go through FakeQuantize (see GraphBuilder.set_result).
_FAKE_QUANTIZED = frozenset({np.dtype(np.int8), np.dtype(np.uint8)})


def quantize_node(real: ov.Output, t: OperandType) -> ov.Output:
    """round_half_even(x / scale) + zero_point, saturated to the storage type."""
    info = np.iinfo(t.dtype)
    q = opset.round(opset.divide(real, _scale_node(t, t.rank)), "half_to_even").output(0)
    if not t.is_per_channel and t.zero_point:
        q = opset.add(q, f32(np.float32(t.zero_point))).output(0)
    q = opset.clamp(q, float(info.min), float(info.max)).output(0)
    return opset.convert(q, element_type(t)).output(0)


# -- the builder --------------------------------------------------------------------------------------
class GraphBuilder:
    """Operand -> OpenVINO output bookkeeping while converting one model (or one trial operation)."""

    def __init__(self, keep_nan_in_clamps: bool = True, int8_kernels: bool | None = None):
        # CLIP, RELU6 and HARD_SIGMOID select a NaN input back in, as Paddle keeps it (driver property
        # INTEL_OPENVINO_KEEP_NAN_IN_CLAMPS; off, the CPU plugin fuses the clamp into a convolution)
        self.keep_nan_in_clamps = keep_nan_in_clamps
        # Whether quantized constants stay int8 (Constant -> Convert -> Multiply, the weights pattern the CPU
        # plugin's low-precision transformations take into int8 kernels): only where those kernels are exact
        # (cpu_features.exact_int8_kernels). Otherwise they are float constants of their real values, so every
        # convolution and matrix product computes in float on the same values.
        self.int8_kernels = exact_int8_kernels() if int8_kernels is None else int8_kernels
        # Operands every reader of which is a QUANTIZE (and no model output): int8 storage cannot hold a NaN
        # (the standard leaves QUANTIZE(NaN) undefined), so a clamp writing one needs no NaN select and takes
        # the clamp the CPU plugin fuses into the convolution before it (build_ov_model fills it).
        self.quantized_only: set = set()
        self.raw: dict[int, ov.Output] = {}   # operand index -> stored values (integers when quantized)
        self.real: dict[int, ov.Output] = {}  # operand index -> real values (dequantized when quantized)
        # operand index -> (float result, type) of a quantized result whose stored integers nothing has read
        # yet: raw_value builds them on demand (only model outputs and raw readers need them).
        self._pending_raw: dict[int, tuple] = {}
        self.parameters: list = []
        # (boolean scalar, what it says when true): run-time checks that Paddle makes and OpenVINO does not
        # (an out-of-range gather index gives zeros there); each becomes an extra model output.
        self.checks: list = []
        # (boolean scalar, what it says when true, the operation it belongs to or None): run-time checks of what
        # this device computes wrongly (an int64 result beyond int32, int64.py); each becomes an extra model output,
        # and a true one a device fault naming that operation, so the runtime runs it (or the part) elsewhere.
        self.faults: list = []

    # -- operands --------------------------------------------------------------------------------
    def add_parameter(self, operand: Operand, name: str) -> None:
        param = opset.parameter(partial_shape(operand.type.dims), element_type(operand.type), name=name)
        self.parameters.append(param)
        self.raw[operand.index] = param.output(0)

    def keeps_nan(self, op) -> bool:
        """Whether a clamp `op` (CLIP, RELU6, HARD_SIGMOID), or an EXP, must pass a NaN through (see
        keep_nan_in_clamps and quantized_only)."""
        return self.keep_nan_in_clamps and op.outputs[0].index not in self.quantized_only

    def raw_value(self, operand: Operand) -> ov.Output:
        node = self.raw.get(operand.index)
        if node is None and operand.index in self._pending_raw:
            real, t = self._pending_raw.pop(operand.index)
            node = self.raw[operand.index] = quantize_node(real, t)
        if node is None:
            if not operand.is_constant:
                raise NNAdapterError(f"intel_openvino: {operand.label()} is read before any operation produced it")
            element_type(operand.type)  # rejects precisions OpenVINO cannot hold
            node = opset.constant(np.asarray(operand.value, order="C")).output(0)  # a 0-d constant stays 0-d
            self.raw[operand.index] = node
        return node

    def value(self, operand: Operand) -> ov.Output:
        """The operand's real values (what every implementation computes with)."""
        node = self.real.get(operand.index)
        if node is None:
            if operand.is_constant and operand.type.is_quantized and not self.int8_kernels:
                # the standard's dequantization (float32), which dequantize_node computes in the graph
                real = dequantize(np.asarray(operand.value), operand.type)
                node = opset.constant(np.ascontiguousarray(real)).output(0)
            else:
                raw = self.raw_value(operand)
                node = dequantize_node(raw, operand.type) if operand.type.is_quantized else raw
            self.real[operand.index] = node
        return node

    def set_result(self, operand: Operand, real: ov.Output, exact_grid: bool = False) -> None:
        """Store an implementation's real-valued result for `operand`, quantizing it when the type says so.

        A quantized result's stored integers are built only when read raw (quantize_node: round half to even,
        saturate); its real value, what the operations reading it compute with, is the FakeQuantize of the
        result for int8 / uint8 (OpenVINO's low-precision pattern), the dequantized integers otherwise. With
        `exact_grid` (an int32 product of quantized operands: its float result is already a multiple of the
        scale, up to float rounding) the real value is the result itself, which keeps the product and the
        dequantization after it one low-precision pattern."""
        t = operand.type
        if t.is_quantized:
            if real.get_element_type() != ov.Type.f32:
                raise Unsupported(f"{operand.label()}: a quantized output needs a float result")
            self._pending_raw[operand.index] = (real, t)
            if np.dtype(t.dtype) in _FAKE_QUANTIZED:
                self.real[operand.index] = fake_quantize_node(real, t)
            elif exact_grid:
                self.real[operand.index] = real
            else:
                self.real[operand.index] = dequantize_node(self.raw_value(operand), t)
        else:
            want = element_type(t)
            if real.get_element_type() != want:
                raise Unsupported(f"{operand.label()}: OpenVINO computes {real.get_element_type()}, the operand is "
                                  f"{t.precision.name}")
            self.raw[operand.index] = real
            self.real[operand.index] = real
        _check_shape(operand, real)

    def index_tensor(self, op: Operation, i: int) -> ov.Output:
        """An integer operand (constant or computed) as int64, the type OpenVINO's shape inputs take."""
        node = self.value(op.inputs[i])
        if node.get_element_type() != ov.Type.i64:
            node = opset.convert(node, ov.Type.i64).output(0)
        return node


def _check_shape(operand: Operand, node: ov.Output) -> None:
    """The implementation's result must agree with every dim shape inference knows (a cheap truthfulness net)."""
    shape = node.get_partial_shape()
    dims = operand.type.dims
    if shape.rank.is_dynamic:
        return
    if shape.rank.get_length() != len(dims):
        raise Unsupported(f"{operand.label()}: OpenVINO infers rank {shape.rank.get_length()}, the operand has dims "
                          f"{list(dims)}")
    for want, got in zip(dims, shape):
        if want != UNKNOWN and want >= 0 and got.is_static and got.get_length() != want:
            raise Unsupported(f"{operand.label()}: OpenVINO infers {shape}, the operand has dims {list(dims)}")


# -- conversion ---------------------------------------------------------------------------------------
def convert_operation(builder: GraphBuilder, op: Operation, operations: OperationTable) -> None:
    implementation = operations.get(op.type)
    if implementation is None:
        raise Unsupported(f"{op.type.name} has no OpenVINO implementation")
    reason = int64_reason(op) or empty_operand_reason(op)  # int64.py; empty tensors (module docstring)
    if reason:
        raise Unsupported(reason)
    results = implementation(builder, op)
    if needs_overflow_check(op):
        inputs = op.inputs if op.type == T.SUM else op.inputs[:1 if op.type in (T.ABS, T.SQUARE, T.CUM_SUM) else 2]
        builder.faults.append((overflow_flag(op, [builder.value(o) for o in inputs]), overflow_message(op), op))
    if len(results) != len(op.outputs):
        raise NNAdapterError(f"intel_openvino: the {op.type.name} implementation gave {len(results)} results for "
                             f"{len(op.outputs)} outputs")
    exact_grid = is_integer_product(op)
    for operand, node in zip(op.outputs, results):
        if operand is not None:
            if node is None:
                raise Unsupported(f"{op.label()}: output {operand.label()} cannot be produced")
            builder.set_result(operand, node, exact_grid)


def empty_operand_reason(op: Operation) -> str:
    """Why intel_openvino declines `op` for an empty tensor, or "": a computed input or an output whose dims hold
    a 0 (module docstring). Constants are left out: an empty constant (a reshape's target shape [] for a 0-d
    result) is an attribute, not a tensor the plugin computes on."""
    for operand in [*op.inputs, *op.outputs]:
        if operand is not None and not operand.is_constant and 0 in operand.type.dims:
            return (f"{operand.label()} is empty (dims {list(operand.type.dims)}): OpenVINO's CPU plugin kills the "
                    "process (SIGFPE) on a Gather or MaxPool over an empty tensor, so intel_openvino takes no "
                    "operation on one (there is nothing to compute)")
    return ""


def build_ov_model(model: Model, operations: OperationTable, keep_nan_in_clamps: bool = True) -> ov.Model:
    """The whole NNAdapter model as an openvino.Model (inputs and outputs in model order)."""
    builder = GraphBuilder(keep_nan_in_clamps)
    outputs = {operand.index for operand in model.output_operands}
    consumers = model.consumers()
    builder.quantized_only = {index for index, readers in consumers.items()
                              if index not in outputs and readers and all(r.type == T.QUANTIZE for r in readers)}
    for k, operand in enumerate(model.input_operands):
        builder.add_parameter(operand, f"input{k}")
        if is_int64(operand) and values_read(operand, consumers.get(operand.index, [])):
            # the CPU plugin would narrow a value beyond int32 wherever it is read (int64.py)
            builder.faults.append((input_flag(builder.raw[operand.index]), input_message(k), None))
    for op in model.topological_operations():
        convert_operation(builder, op, operations)
    results = []
    for k, operand in enumerate(model.output_operands):
        node = builder.raw_value(operand)
        result = opset.result(node, name=f"output{k}")
        results.append(result)
    names = [f"output{k}" for k in range(len(results))]
    for k, (flag, message) in enumerate(builder.checks):
        results.append(opset.result(flag, name=f"check{k}"))
        names.append(f"{CHECK_PREFIX}{k}:{message}")  # the name survives export_model/import_model
    for k, (flag, message, op) in enumerate(builder.faults):
        results.append(opset.result(flag, name=f"fault{k}"))
        names.append(fault_output_name(FAULT_PREFIX, k, message, first_output_name(op)))
    ov_model = ov.Model(results, builder.parameters, "nnadapter")
    for name, output in zip(names, ov_model.outputs):
        output.get_tensor().set_names({name})
    return ov_model


def _runtime_info(node, key: str) -> str:
    info = node.get_rt_info()
    return str(info[key].astype(str)) if key in info else ""


def channels_last_reorders(compiled, count: int) -> list:
    """Positions, among the first `count` outputs (the model's; the check outputs follow), of the 4-D outputs
    that the compiled program computes channels-last and reorders to planar just before handing them out (its
    runtime model: Output <- Reorder 'abcd' of the same shape <- a node whose output layout is 'acdb')."""
    found = []
    for position, output in enumerate(compiled.get_runtime_model().outputs[:count]):
        source = output.get_node().input_value(0)
        reorder = source.get_node()
        if _runtime_info(reorder, "layerType") != "Reorder" or _runtime_info(reorder, "outputLayouts") != "abcd":
            continue
        producer = reorder.input_value(0)
        if producer.get_partial_shape() != source.get_partial_shape():
            continue  # the plugin's reinterpretation of a transposed tensor (what hand_out_channels_last makes)
        layouts = _runtime_info(producer.get_node(), "outputLayouts").split(",")
        if producer.get_index() < len(layouts) and layouts[producer.get_index()] == "acdb":
            found.append(position)
    return found


def hand_out_channels_last(ov_model: ov.Model, positions) -> None:
    """End each of the model's outputs at `positions` (rank 4, [N, C, H, W]) in a Transpose to [N, H, W, C]
    carrying the output's tensor names and checks.NHWC_PREFIX (which survives export_model / import_model)."""
    results = ov_model.get_results()
    names = {}
    for position in positions:
        source = results[position].input_value(0)
        names[position] = set(source.get_names())
        source.get_tensor().set_names(set())
        results[position].input(0).replace_source_output(opset.transpose(source, i64([0, 2, 3, 1])).output(0))
    ov_model.validate_nodes_and_infer_types()
    for position, found in names.items():
        ov_model.outputs[position].get_tensor().set_names(found | {f"{NHWC_PREFIX}{position}"})


def _trial_conversion(op: Operation, operations: OperationTable) -> None:
    """Convert `op` alone, with model inputs for its non-constant operands."""
    builder = GraphBuilder()
    for k, operand in enumerate(op.inputs):
        if operand is not None and not operand.is_constant and operand.index not in builder.raw:
            builder.add_parameter(operand, f"trial{k}")
    for operand in op.outputs:
        if operand is not None:
            element_type(operand.type)
    convert_operation(builder, op, operations)


def unsupported_reason(op: Operation, operations: OperationTable) -> str:
    """Why intel_openvino cannot run `op` as given, or "" when it can: its signature must hold and a trial
    conversion of the operation alone must succeed and agree with shape inference (any failure, ours or
    OpenVINO's node validation, means "not here")."""
    return trial_reason(op, operations, lambda o: _trial_conversion(o, operations))


def operation_supported(op: Operation, operations: OperationTable) -> bool:
    """True iff intel_openvino runs `op` as given (see unsupported_reason)."""
    return not unsupported_reason(op, operations)
