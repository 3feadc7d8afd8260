"""Signatures and shape inference: elementwise binary arithmetic, comparisons, logic, unary math and
activations (the operations whose output is the input shape or the broadcast of two inputs)."""
from __future__ import annotations

from nnadapter_bridge.nnadapter.codes import OperationType as T, Precision
from nnadapter_bridge.nnadapter.operations.common import broadcast_dims, map_shapes, result_type, same_as_input
from nnadapter_bridge.nnadapter.operations.registry import F32_Q8, INT32, Slot, operation

_ARITH = F32_Q8 | {Precision.INT32, Precision.INT64}


@operation(T.RELU, inputs=[Slot("input", F32_Q8)], outputs=[Slot("output")])
def prepare_relu(op):
    """max(0, input); output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.ADD, inputs=[Slot("input0", _ARITH), Slot("input1", _ARITH), Slot("fuse_code", INT32)],
           outputs=[Slot("output")])
def prepare_add(op):
    """input0 + input1 with numpy broadcasting, then the fused activation."""
    a, b = op.inputs[0].type, op.inputs[1].type
    return [result_type(a, broadcast_dims(a.dims, b.dims, op))]
