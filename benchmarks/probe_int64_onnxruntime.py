"""Probe: do onnxruntime's CPU kernels compute int64 exactly (issue 32)? Not a test; a measuring tool.

Each ONNX operation the microsoft_onnxruntime driver emits on int64 runs alone on values at and beyond the int32
range (2^31 - 1, 2^31, 2^40, -2^40, int64 min / max) and is compared with numpy's int64 answer.
Usage: python benchmarks/probe_int64_onnxruntime.py   (a few seconds). Companion of probe_int64_openvino.py.
Found with onnxruntime 1.32: all exact but ReduceSum and ReduceProd, which accumulate int64 in double (inexact beyond
2^53, INT64_MIN beyond int64); the driver sums int64 by CumSum instead (hal/microsoft_onnxruntime/operations.py).
"""
from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

I64 = np.iinfo(np.int64)
BIG = np.array([2**31 - 1, 2**31, 2**40, -(2**40), I64.max, I64.min, 5_000_000_000, -7], np.int64)
SMALL = np.array([3, -2, 2_000_000_000, 1, -1, 2, 2_000_000_000, 5], np.int64)
ADDEND = np.array([2**31 - 1, 2**31, 2**40, -(2**40), 2**62, -(2**62), 7, -3], np.int64)
FLOATS = np.array([3e9, -3e9, 2.5, 1e12, -1e12, -7.9], np.float32)


def _cases():
    """(name, ONNX op, inputs, attributes, numpy answer, output element type)."""
    x, y = BIG, SMALL
    yield "GreaterOrEqual", "GreaterOrEqual", (x, y), {}, x >= y, TensorProto.BOOL
    yield "Equal", "Equal", (x, x ^ 2**32), {}, x == (x ^ 2**32), TensorProto.BOOL
    yield "Add", "Add", (ADDEND, SMALL), {}, ADDEND + SMALL, TensorProto.INT64
    yield "Sub", "Sub", (ADDEND, SMALL), {}, ADDEND - SMALL, TensorProto.INT64
    factors = np.array([2**31 - 1, 2**31, 2**40, 46341], np.int64)
    yield "Mul", "Mul", (factors, np.array([2, -3, 1000, 46341], np.int64)), {}, \
        factors * np.array([2, -3, 1000, 46341], np.int64), TensorProto.INT64
    truncated = np.array([int(p / q) if abs(p) < 2**53 else (p // q if (p < 0) == (q < 0) else -(-p // q))
                          for p, q in zip(x.tolist(), y.tolist())], np.int64)
    yield "Div (truncates)", "Div", (x, y), {}, truncated, TensorProto.INT64
    yield "Mod fmod=0 (floor)", "Mod", (x, y), {"fmod": 0}, np.mod(x, y), TensorProto.INT64
    yield "Max", "Max", (x, y), {}, np.maximum(x, y), TensorProto.INT64
    yield "Min", "Min", (x, y), {}, np.minimum(x, y), TensorProto.INT64
    yield "Abs", "Abs", (ADDEND,), {}, np.abs(ADDEND), TensorProto.INT64
    yield "Neg", "Neg", (ADDEND,), {}, -ADDEND, TensorProto.INT64
    base, exponent = np.array([2, 3, 46341, 3037000], np.int64), np.array([40, 21, 2, 2], np.int64)
    yield "Pow", "Pow", (base, exponent), {}, base**exponent, TensorProto.INT64
    yield "CumSum", "CumSum", (ADDEND[:4], np.array(0, np.int64)), {}, np.cumsum(ADDEND[:4]), TensorProto.INT64
    yield "ReduceSum", "ReduceSum", (ADDEND[:4].reshape(1, 4), np.array([1], np.int64)), {"keepdims": 0}, \
        ADDEND[:4].reshape(1, 4).sum(1), TensorProto.INT64
    big = np.array([[2**53 + 1, 2**53 + 1, 3]], np.int64)
    yield "ReduceSum (beyond 2^53)", "ReduceSum", (big, np.array([1], np.int64)), {"keepdims": 0}, big.sum(1), \
        TensorProto.INT64
    yield "CumSum (beyond 2^53)", "CumSum", (big[0], np.array(0, np.int64)), {}, np.cumsum(big[0]), TensorProto.INT64
    prod = np.array([[3, 2**30 + 1, 2**30 + 1]], np.int64)
    yield "ReduceProd", "ReduceProd", (prod, np.array([1], np.int64)), {"keepdims": 0}, prod.prod(1), TensorProto.INT64
    yield "ReduceMax", "ReduceMax", (x.reshape(2, 4), np.array([1], np.int64)), {"keepdims": 0}, \
        x.reshape(2, 4).max(1), TensorProto.INT64
    yield "ArgMax", "ArgMax", (x.reshape(2, 4),), {"axis": 1, "keepdims": 0}, x.reshape(2, 4).argmax(1), \
        TensorProto.INT64
    yield "Gather (data)", "Gather", (x, np.array([5, 0, 2], np.int64)), {}, x[[5, 0, 2]], TensorProto.INT64
    yield "GatherElements (data)", "GatherElements", (x, np.array([4, 1], np.int64)), {}, x[[4, 1]], \
        TensorProto.INT64
    yield "ScatterElements (data)", "ScatterElements", \
        (x, np.array([1], np.int64), np.array([2**40 + 3], np.int64)), {}, \
        np.concatenate([x[:1], [2**40 + 3], x[2:]]), TensorProto.INT64
    yield "Concat", "Concat", (x, y), {"axis": 0}, np.concatenate([x, y]), TensorProto.INT64
    yield "Where", "Where", (np.arange(8) % 2 == 0, x, y), {}, np.where(np.arange(8) % 2 == 0, x, y), \
        TensorProto.INT64
    yield "TopK (values)", "TopK", (x, np.array([3], np.int64)), {}, np.sort(x)[::-1][:3], TensorProto.INT64
    yield "Range", "Range", (np.array(2**40, np.int64), np.array(2**40 + 3, np.int64), np.array(1, np.int64)), {}, \
        np.arange(2**40, 2**40 + 3), TensorProto.INT64
    yield "Cast i64 -> i32", "Cast", (x,), {"to": TensorProto.INT32}, x.astype(np.int32), TensorProto.INT32
    yield "Cast i64 -> f32", "Cast", (x,), {"to": TensorProto.FLOAT}, x.astype(np.float32), TensorProto.FLOAT
    yield "Cast f32 -> i64", "Cast", (FLOATS,), {"to": TensorProto.INT64}, FLOATS.astype(np.int64), TensorProto.INT64


def probe(name, op_type, inputs, attrs, want, out_type) -> str:
    names = [f"i{k}" for k in range(len(inputs))]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["out", "indices"] if op_type == "TopK" else ["out"], **attrs)], "probe",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
         for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("out", out_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip(names, inputs)))[0]
    if np.array_equal(np.asarray(got), np.asarray(want)):
        return "exact"
    return f"DIFFERS: {np.asarray(got).reshape(-1)[:4].tolist()} want {np.asarray(want).reshape(-1)[:4].tolist()}"


def main() -> int:
    print(f"onnxruntime {ort.__version__}, CPUExecutionProvider")
    for name, op_type, inputs, attrs, want, out_type in _cases():
        print(f"{name:26s} {probe(name, op_type, inputs, attrs, want, out_type)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
