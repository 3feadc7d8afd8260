"""Probe: which OpenVINO CPU-plugin operations narrow int64 to int32 (issue 32). Not a test; a measuring tool.

For each operation it builds a one-node OpenVINO model on int64 operands holding values at and beyond the int32
range (2^31 - 1, 2^31, 2^40, -2^40, int64 min / max), compiles it for CPU at f32, and prints two things:
  * the element types the plugin's runtime model executes (`compiled_model.get_runtime_model()`: each node's
    `runtimePrecision`, and the Convert nodes the plugin inserted), and
  * whether the result equals numpy's int64 answer (the measurement).
Usage: python benchmarks/probe_int64_openvino.py [--verbose]   (about 10 s). Findings: hal/intel_openvino/int64.py.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import openvino as ov

try:
    from openvino import opset16 as ops
except ImportError:  # pragma: no cover - older OpenVINO releases
    from openvino import opset15 as ops

I64 = np.iinfo(np.int64)
BIG = np.array([2**31 - 1, 2**31, 2**40, -(2**40), I64.max, I64.min, 5_000_000_000, -7], np.int64)
SMALL = np.array([3, -2, 2_000_000_000, 1, -1, 2, 2_000_000_000, 5], np.int64)
FLOAT = np.array([3e9, -3e9, 2.5, 1e12, -1e12, 7.0, 2**31, -(2**31) - 1e3], np.float32)


def const(a) -> ov.Output:
    return ops.constant(np.asarray(a)).output(0)


def _truncating_divide(a, b):
    node = ops.divide(a, b)
    node.set_attribute("m_pythondiv", False)
    return node


def _cases():
    """(name, builder over the parameters, inputs, numpy answer)."""
    x, y = BIG, SMALL
    pos = np.array([2**31, 2**40, 5, 7], np.int64)
    yield "greater_equal", lambda a, b: ops.greater_equal(a, b), (x, y), x >= y
    yield "equal", lambda a, b: ops.equal(a, b), (x, y), x == y
    yield "less(constant 2^40)", lambda a: ops.less(a, const(np.int64(2**40))), (x,), x < 2**40
    yield "add", lambda a, b: ops.add(a, b), (x, y), x + y
    yield "subtract", lambda a, b: ops.subtract(a, b), (x, y), x - y
    yield "multiply", lambda a, b: ops.multiply(a, b), (pos, pos[::-1].copy()), pos * pos[::-1]
    yield (
        "divide",
        _truncating_divide,
        (x, y),
        np.array(
            [int(p / q) if abs(p) < 2**53 else -(-p // q) if p < 0 else p // q for p, q in zip(x.tolist(), y.tolist())],
            np.int64,
        ),
    )
    yield "floor_mod", lambda a, b: ops.floor_mod(a, b), (x, y), np.mod(x, y)
    yield "maximum", lambda a, b: ops.maximum(a, b), (x, y), np.maximum(x, y)
    yield "minimum", lambda a, b: ops.minimum(a, b), (x, y), np.minimum(x, y)
    yield "abs", lambda a: ops.abs(a), (x[:5],), np.abs(x[:5])
    yield "negative", lambda a: ops.negative(a), (x[:5],), -x[:5]
    yield "power", lambda a, b: ops.power(a, b), (np.array([2, 3], np.int64), np.array([40, 21], np.int64)), \
        np.array([2**40, 3**21], np.int64)
    yield "reduce_sum", lambda a: ops.reduce_sum(a, const(np.int64(0)), False), (x[:3],), x[:3].sum()
    factors = np.array([3, 2**20, 2**20], np.int64)
    yield "reduce_prod", lambda a: ops.reduce_prod(a, const(np.int64(0)), False), (factors,), factors.prod()
    yield "reduce_max", lambda a: ops.reduce_max(a, const(np.int64(0)), False), (x,), x.max()
    yield "reduce_min", lambda a: ops.reduce_min(a, const(np.int64(0)), False), (x,), x.min()
    yield "cum_sum", lambda a: ops.cum_sum(a, const(np.int64(0))), (x[:3],), np.cumsum(x[:3])
    yield "topk values", lambda a: ops.topk(a, const(np.int64(3)), 0, "max", "value", "i64").output(0), (x,), \
        np.sort(x)[::-1][:3]
    yield "concat (data)", lambda a: ops.concat([a, a], 0), (x,), np.concatenate([x, x])
    yield "reshape (data)", lambda a: ops.reshape(a, const(np.array([2, 4], np.int64)), False), (x,), x.reshape(2, 4)
    yield "transpose (data)", lambda a: ops.transpose(a, const(np.array([1, 0], np.int64))), (x.reshape(2, 4),), \
        x.reshape(2, 4).T
    yield "slice (data)", lambda a: ops.slice(a, const(np.int64([1])), const(np.int64([5])), const(np.int64([1]))), \
        (x,), x[1:5]
    yield "gather (data)", lambda a: ops.gather(a, const(np.int64([4, 0])), const(np.int64(0))), (x,), x[[4, 0]]
    yield "gather (indices 2^32 + 1)", lambda a, i: ops.gather(a, i, const(np.int64(0))), \
        (x, np.array([2**32 + 1], np.int64)), None  # numpy: out of range (Paddle raises)
    yield "gather_elements (data)", lambda a: ops.gather_elements(a, const(np.int64([4, 0])), 0), (x,), x[[4, 0]]
    yield "scatter_elements_update (data)", lambda a, u: ops.scatter_elements_update(
        a, const(np.int64([1])), u, const(np.int64(0))), (x, np.array([2**40 + 3], np.int64)), \
        np.concatenate([x[:1], [2**40 + 3], x[2:]])
    yield "select (data)", lambda a, b: ops.select(const(np.array([True, False] * 4)), a, b), (x, y), \
        np.where([True, False] * 4, x, y)
    yield "broadcast (data)", lambda a: ops.broadcast(a, const(np.int64([2, 8]))), (x,), np.broadcast_to(x, (2, 8))
    # Bounds as inputs: with a constant end of 2^40 + 3 (saturated to 2^31 - 1) and the start narrowed to 0, Range
    # allocates 2^31 elements (16 GiB: this process was killed).
    yield "range (2^40 bounds)", lambda s, e: ops.range(s, e, const(np.int64(1)), "i64"), \
        (np.array(2**40, np.int64), np.array(2**40 + 3, np.int64)), np.arange(2**40, 2**40 + 3)
    yield "one_hot (depth 4)", lambda i: ops.one_hot(i, const(np.int64(4)), const(np.int64(2**40)),
                                                     const(np.int64(0)), -1), \
        (np.array([1, 3], np.int64),), np.eye(4, dtype=np.int64)[[1, 3]] * 2**40
    yield "convert i64 -> i32", lambda a: ops.convert(a, "i32"), (x,), x.astype(np.int32)
    yield "convert i64 -> f32", lambda a: ops.convert(a, "f32"), (x,), x.astype(np.float32)
    yield "convert f32 -> i64", lambda a: ops.convert(a, "i64"), (FLOAT[:6],), FLOAT[:6].astype(np.int64)
    yield "convert i32 -> i64", lambda a: ops.convert(a, "i64"), (np.array([2**31 - 1, -(2**31)], np.int32),), \
        np.array([2**31 - 1, -(2**31)], np.int64)
    yield "shape_of (i64)", lambda a: ops.shape_of(a, "i64"), (x,), np.array([8], np.int64)
    yield "add constants only", lambda a: ops.add(ops.add(const(np.int64(2**40)), const(np.int64(1))),
                                                  ops.multiply(a, const(np.int64(0)))), \
        (np.array([0], np.int64),), np.array([2**40 + 1], np.int64)
    yield "parameter -> result (identity)", lambda a: a, (x,), x


def runtime_precisions(compiled) -> list:
    """(layer type, runtime precision, output element types) of each node the plugin executes."""
    rows = []
    for node in compiled.get_runtime_model().get_ordered_ops():
        info = node.get_rt_info()
        layer = info["layerType"].astype(str) if "layerType" in info else node.get_type_name()
        precision = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else ""
        rows.append((layer, precision, [o.get_element_type().get_type_name() for o in node.outputs()]))
    return rows


def probe(name, build, inputs, want, core):
    params = [ops.parameter(list(a.shape), ov.Type(a.dtype)) for a in inputs]
    node = build(*[p.output(0) for p in params])
    out = node if isinstance(node, ov.Output) else node.output(0)
    model = ov.Model([ops.result(out)], params, name)
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    narrowed = [r for r in runtime_precisions(compiled) if r[1] == "i32" or "i32" in r[2]]
    try:
        got = compiled(list(inputs))[0]
        if want is None:
            verdict = f"no error for an out-of-range index (gave {got.tolist()})"
        else:
            verdict = (
                "exact"
                if np.array_equal(np.asarray(got).astype(np.asarray(want).dtype), want)
                else f"WRONG: {np.asarray(got).reshape(-1)[:4].tolist()} "
                f"want {np.asarray(want).reshape(-1)[:4].tolist()}"
            )
    except Exception as exc:  # noqa: BLE001 - a failure is a finding: printed, not raised
        verdict = f"error: {str(exc).splitlines()[0][:80]}"
    return verdict, narrowed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print every runtime node, not only i32 ones")
    args = parser.parse_args(argv)
    core = ov.Core()
    print(f"OpenVINO {ov.__version__}, CPU plugin")
    for name, build, inputs, want in _cases():
        verdict, narrowed = probe(name, build, inputs, want, core)
        layers = ", ".join(f"{layer}[{precision}]" for layer, precision, _ in narrowed) or "none in i32"
        print(f"{name:34s} {verdict}")
        if args.verbose or narrowed:
            print(f"{'':34s}   runs in i32: {layers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
