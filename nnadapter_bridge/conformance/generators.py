"""The conformance kit's test cases beyond the fixed samples, all drawn from one seed.

* `value_variants(sample, rng)`: the sample's structure with new input values (float inputs scaled
  elementwise by factors in [0.5, 1.5], which keeps every sign and zero, so value domains such as LOG's
  positive inputs or DIV's nonzero divisors hold; integer and boolean inputs permuted, so indices stay in
  range; the boxes of NON_MAX_SUPPRESSION and ROI_ALIGN kept).
* `precision_variants(sample)`: the sample in other precisions (float32 tensors as float16 or float64,
  int32 tensors as int64). The standard's reference is the judge of what a variant means: a variant it
  does not accept is dropped (`harness.build_op` or the reference raising).
* `shape_cases(rng, count)`: operations of the common families with random shapes and attribute values
  (elementwise with broadcasting and fuse codes, activations, CONV_2D with random kernels, strides, pads,
  dilations and groups, FULLY_CONNECTED, pools, SOFTMAX, reductions, TRANSPOSE, CONCAT, MAT_MUL).
* `random_graph(rng, allowed)`: a small model of 2-6 float32 operations on an NCHW tensor, chained and
  sometimes joined (two tensors added, concatenated), from the operation kinds in `allowed`.

Every case is a `Case`: an id, the operation type, inputs in the `harness.build_op` format, and outputs.

Entry points: the four generators above and `Case` / `GraphCase`. Imports the harness, the samples and the standard
only.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from nnadapter_bridge.conformance.harness import Const, Quant
from nnadapter_bridge.conformance.samples import Sample
from nnadapter_bridge.nnadapter.codes import AutoPad, FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import OperandType


@dataclasses.dataclass
class Case(Sample):
    """One single-operation test case: a sample, a variant of one, or a generated operation."""

    origin: str = "sample"  # "sample", "values", "precision", "shapes"


def from_sample(sample: Sample) -> Case:
    return Case(sample.id, sample.type, list(sample.inputs), sample.n_outputs, tuple(sample.null_outputs))


# -- new values -----------------------------------------------------------------------------------------
# Inputs whose values must keep their structure (boxes with x1 < x2): left as they are.
_FROZEN_INPUTS = {T.NON_MAX_SUPPRESSION: {0}, T.ROI_ALIGN: {1, 2}, T.YOLO_BOX: {1}}


def _new_values(array: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    array = np.asarray(array)
    if array.size == 0:
        return array
    if array.dtype.kind == "f":
        factors = rng.uniform(0.5, 1.5, array.shape)
        return (array.astype(np.float64) * factors).astype(array.dtype)
    flat = array.reshape(-1).copy()
    rng.shuffle(flat)
    return flat.reshape(array.shape)


def value_variant(sample: Sample, rng: np.random.Generator, number: int) -> Case:
    frozen = _FROZEN_INPUTS.get(sample.type, set())
    inputs = []
    for k, item in enumerate(sample.inputs):
        if k in frozen:
            inputs.append(item)
        elif isinstance(item, np.ndarray):
            inputs.append(_new_values(item, rng))
        elif isinstance(item, Quant) and item.is_input:
            inputs.append(dataclasses.replace(item, value=_new_values(item.value, rng)))
        elif isinstance(item, Const) and np.asarray(item.value).dtype.kind == "f" and (
                np.ndim(item.value) >= 2 or np.size(item.value) >= 5):  # weights, not attribute values
            inputs.append(Const(_new_values(np.asarray(item.value), rng), item.precision))
        else:
            inputs.append(item)
    return Case(f"{sample.id}~v{number}", sample.type, inputs, sample.n_outputs, tuple(sample.null_outputs),
                origin="values")


# -- other precisions -----------------------------------------------------------------------------------
_CAST = {
    "float16": (np.float32, np.float16, Precision.FLOAT32, Precision.FLOAT16),
    "float64": (np.float32, np.float64, Precision.FLOAT32, Precision.FLOAT64),
    "int64": (np.int32, np.int64, Precision.INT32, Precision.INT64),
}


def _recast(item, source, target, source_precision, target_precision):
    if isinstance(item, Quant):
        return item
    if isinstance(item, Const):
        value = np.asarray(item.value)
        # A float32 tensor constant goes along; an integer constant is an attribute (axes, shapes) and stays.
        if value.dtype == source and item.precision in (None, source_precision) and (
                source is np.float32 or value.size > 1):
            return Const(value.astype(target), target_precision if item.precision is not None else None)
        return item
    if isinstance(item, np.ndarray) and item.dtype == source:
        return item.astype(target)
    if source is np.float32 and isinstance(item, (float, np.floating)) and not isinstance(item, bool):
        return target(item)  # a float attribute constant: in the tensor's precision
    return item


def precision_variants(sample: Sample, precisions: Sequence[str] = ("float16", "float64", "int64")) -> list:
    """The sample recast into each of `precisions` its tensors allow (at least one model input changes)."""
    if any(isinstance(item, Quant) for item in sample.inputs):
        return []
    cases = []
    for name in precisions:
        source, target, source_precision, target_precision = _CAST[name]
        if not any(isinstance(item, np.ndarray) and item.dtype == source for item in sample.inputs):
            continue
        inputs = [_recast(item, source, target, source_precision, target_precision) for item in sample.inputs]
        cases.append(Case(f"{sample.id}@{name}", sample.type, inputs, sample.n_outputs,
                          tuple(sample.null_outputs), origin="precision"))
    return cases


# -- random shapes and attribute values -------------------------------------------------------------------
def _shape(rng, rank_low=1, rank_high=4, dim_low=1, dim_high=5) -> tuple:
    return tuple(int(d) for d in rng.integers(dim_low, dim_high + 1, int(rng.integers(rank_low, rank_high + 1))))


def _normal(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _broadcast_partner(rng, shape: tuple) -> tuple:
    """A shape that broadcasts against `shape`: a suffix of it, some axes set to 1."""
    suffix = list(shape[int(rng.integers(0, len(shape))):]) if shape else []
    return tuple(1 if rng.random() < 0.3 else d for d in suffix) or (1,)


_FUSE_CODES = (FuseCode.FUSED_NONE, FuseCode.FUSED_RELU, FuseCode.FUSED_RELU1, FuseCode.FUSED_RELU6)


def _gen_binary(rng, n):
    t = [T.ADD, T.SUB, T.MUL, T.DIV, T.MAX, T.MIN, T.POW][int(rng.integers(0, 7))]
    shape = _shape(rng)
    other = _broadcast_partner(rng, shape)
    a, b = _normal(rng, shape, 2.0), _normal(rng, other, 2.0)
    if rng.random() < 0.5:
        a, b = b, a
    if t == T.DIV:
        b = (np.sign(b) + (b == 0)) * (np.abs(b) + 0.5)
    if t == T.POW:
        a, b = np.abs(a) + 0.1, np.clip(b, -2, 2)
    fuse = int(_FUSE_CODES[int(rng.integers(0, 4))]) if t != T.POW else 0
    second = Const(b.astype(np.float32)) if rng.random() < 0.3 else b.astype(np.float32)
    return Case(f"{t.name}~s{n}", t, [a.astype(np.float32), second, fuse], origin="shapes")


def _gen_binary_int(rng, n):
    t = [T.ADD, T.SUB, T.MUL, T.MAX, T.MIN][int(rng.integers(0, 5))]
    dtype = (np.int32, np.int64)[int(rng.integers(0, 2))]
    shape = _shape(rng)
    a = rng.integers(-50, 50, shape).astype(dtype)
    b = rng.integers(-50, 50, _broadcast_partner(rng, shape)).astype(dtype)
    return Case(f"{t.name}_{np.dtype(dtype).name}~s{n}", t, [a, b, 0], origin="shapes")


def _gen_unary(rng, n):
    kinds = [T.ABS, T.EXP, T.LOG, T.RELU, T.RELU6, T.SIGMOID, T.TANH, T.SQUARE, T.SWISH, T.LEAKY_RELU, T.CLIP,
             T.HARD_SWISH, T.HARD_SIGMOID, T.GELU, T.FLOOR, T.RSQRT]
    t = kinds[int(rng.integers(0, len(kinds)))]
    x = _normal(rng, _shape(rng), 3.0)
    if t in (T.LOG, T.RSQRT):
        x = np.abs(x) + np.float32(0.05)
    if t == T.EXP:
        x = np.clip(x, -5, 5)
    inputs: list = [x]
    if t == T.LEAKY_RELU:
        inputs.append(float(rng.uniform(0.01, 0.5)))
    elif t == T.CLIP:
        low = float(rng.uniform(-2, 0))
        inputs += [low, low + float(rng.uniform(0.1, 3))]
    elif t == T.HARD_SWISH:
        inputs += [1.0 / 6.0, 0.5]
    elif t == T.HARD_SIGMOID:
        inputs += [float(rng.uniform(0.1, 0.3)), 0.5]
    elif t == T.GELU:
        inputs.append(bool(rng.random() < 0.5))
    return Case(f"{t.name}~s{n}", t, inputs, origin="shapes")


def _conv_out(size, kernel, stride, pad_total, dilation) -> int:
    return (size + pad_total - dilation * (kernel - 1) - 1) // stride + 1


def _gen_conv(rng, n):
    for _ in range(20):
        batch, height, width = int(rng.integers(1, 3)), int(rng.integers(3, 10)), int(rng.integers(3, 10))
        depthwise = rng.random() < 0.3
        channels = int(rng.integers(1, 5))
        groups = channels if depthwise else 1
        out_channels = channels * int(rng.integers(1, 3)) if depthwise else int(rng.integers(1, 7))
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        dh, dw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pads = [int(p) for p in rng.integers(0, 2, 4)]
        if (
            _conv_out(height, kh, sh, pads[0] + pads[1], dh) >= 1
            and _conv_out(width, kw, sw, pads[2] + pads[3], dw) >= 1
        ):
            break
    else:  # pragma: no cover - 20 tries always find one
        return None
    x = _normal(rng, (batch, channels, height, width))
    w = _normal(rng, (out_channels, channels // groups, kh, kw), 0.3)
    bias = Const(_normal(rng, (out_channels,))) if rng.random() < 0.7 else None
    fuse = int(_FUSE_CODES[int(rng.integers(0, 4))])
    return Case(f"CONV_2D~s{n}", T.CONV_2D, [x, Const(w), bias, int(AutoPad.AUTO_PAD_NONE), Const(pads),
                                             Const([sh, sw]), groups, Const([dh, dw]), fuse], origin="shapes")


def _gen_fc(rng, n):
    batch, k, units = int(rng.integers(1, 5)), int(rng.integers(1, 17)), int(rng.integers(1, 9))
    bias = Const(_normal(rng, (units,))) if rng.random() < 0.7 else None
    fuse = int(_FUSE_CODES[int(rng.integers(0, 4))])
    return Case(f"FULLY_CONNECTED~s{n}", T.FULLY_CONNECTED,
                [_normal(rng, (batch, k)), Const(_normal(rng, (units, k), 0.3)), bias, fuse], origin="shapes")


def _gen_pool(rng, n):
    t = (T.MAX_POOL_2D, T.AVERAGE_POOL_2D)[int(rng.integers(0, 2))]
    for _ in range(20):
        height, width = int(rng.integers(2, 10)), int(rng.integers(2, 10))
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pads = [int(p) for p in rng.integers(0, 2, 4)]
        if (
            min(pads[0], pads[1]) < kh
            and min(pads[2], pads[3]) < kw
            and all(p < k for p, k in zip(pads, (kh, kh, kw, kw)))
            and _conv_out(height, kh, sh, pads[0] + pads[1], 1) >= 1
            and _conv_out(width, kw, sw, pads[2] + pads[3], 1) >= 1
        ):
            break
    else:  # pragma: no cover
        return None
    x = _normal(rng, (int(rng.integers(1, 3)), int(rng.integers(1, 4)), height, width))
    if t == T.MAX_POOL_2D:
        inputs = [x, 0, Const(pads), Const([kh, kw]), Const([sh, sw]), False, False, int(Precision.INT32), 0]
    else:
        inputs = [x, 0, Const(pads), Const([kh, kw]), Const([sh, sw]), False, bool(rng.random() < 0.5), 0]
    return Case(f"{t.name}~s{n}", t, inputs, origin="shapes")


def _gen_softmax(rng, n):
    shape = _shape(rng, 1, 4)
    axis = int(rng.integers(-len(shape), len(shape)))
    t = (T.SOFTMAX, T.LOG_SOFTMAX)[int(rng.integers(0, 2))]
    return Case(f"{t.name}~s{n}", t, [_normal(rng, shape, 3.0), axis], origin="shapes")


def _gen_reduce(rng, n):
    t = (T.REDUCE_MEAN, T.REDUCE_SUM, T.REDUCE_MAX)[int(rng.integers(0, 3))]
    shape = _shape(rng, 1, 4)
    count = int(rng.integers(1, len(shape) + 1))
    axes = sorted(int(a) for a in rng.choice(len(shape), count, replace=False))
    return Case(f"{t.name}~s{n}", t, [_normal(rng, shape), Const(np.int32(axes)), bool(rng.random() < 0.5)],
                origin="shapes")


def _gen_transpose(rng, n):
    shape = _shape(rng, 2, 5)
    perm = [int(p) for p in rng.permutation(len(shape))]
    return Case(f"TRANSPOSE~s{n}", T.TRANSPOSE, [_normal(rng, shape), Const(np.int32(perm))], origin="shapes")


def _gen_concat(rng, n):
    shape = list(_shape(rng, 1, 4))
    axis = int(rng.integers(0, len(shape)))
    parts = []
    for _ in range(int(rng.integers(2, 4))):
        part = list(shape)
        part[axis] = int(rng.integers(1, 4))
        parts.append(_normal(rng, tuple(part)))
    return Case(f"CONCAT~s{n}", T.CONCAT, parts + [axis], origin="shapes")


def _gen_matmul(rng, n):
    m, k, p = (int(v) for v in rng.integers(1, 6, 3))
    batch = tuple(int(v) for v in rng.integers(1, 3, int(rng.integers(0, 2))))
    ta, tb = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
    a = _normal(rng, batch + ((k, m) if ta else (m, k)))
    b = _normal(rng, (p, k) if tb else (k, p))
    return Case(f"MAT_MUL~s{n}", T.MAT_MUL, [a, Const(b) if rng.random() < 0.5 else b, ta, tb], origin="shapes")


SHAPE_GENERATORS: Sequence[Callable] = (_gen_binary, _gen_binary_int, _gen_unary, _gen_conv, _gen_fc, _gen_pool,
                                        _gen_softmax, _gen_reduce, _gen_transpose, _gen_concat, _gen_matmul)


def shape_cases(rng: np.random.Generator, rounds: int) -> list:
    """`rounds` cases of every generator family."""
    cases = []
    for n in range(rounds):
        for generate in SHAPE_GENERATORS:
            case = generate(rng, n)
            if case is not None:
                cases.append(case)
    return cases


# -- random small graphs -------------------------------------------------------------------------------
# The operation kinds a graph is drawn from; each needs its operation type claimed (in float32) alone.
GRAPH_KINDS = {
    "relu": T.RELU, "sigmoid": T.SIGMOID, "tanh": T.TANH, "abs": T.ABS, "relu6": T.RELU6,
    "add_const": T.ADD, "mul_const": T.MUL, "sub_const": T.SUB, "max_const": T.MAX,
    "add_join": T.ADD, "mul_join": T.MUL, "concat_join": T.CONCAT,
    "conv": T.CONV_2D, "batch_norm": T.BATCH_NORMALIZATION, "max_pool": T.MAX_POOL_2D,
    "avg_pool": T.AVERAGE_POOL_2D, "softmax": T.SOFTMAX, "transpose_hw": T.TRANSPOSE,
}


@dataclasses.dataclass
class GraphCase:
    id: str
    model: Model
    feeds: list
    kinds: list


def random_graph(rng: np.random.Generator, number: int, allowed: set | None = None) -> GraphCase | None:
    """A model of 2-6 operations drawn from GRAPH_KINDS (only kinds in `allowed`, when given); None when fewer
    than two kinds are allowed."""
    kinds = [k for k in GRAPH_KINDS if allowed is None or k in allowed]
    if len(kinds) < 2:
        return None
    model = Model()
    batch, channels, height, width = int(rng.integers(1, 3)), int(rng.integers(2, 5)), int(rng.integers(4, 9)), \
        int(rng.integers(4, 9))
    x = model.add_operand(OperandType(Precision.FLOAT32, (batch, channels, height, width)), "x")
    feeds = [_normal(rng, (batch, channels, height, width))]
    tensors = [(x, (batch, channels, height, width))]  # (operand, shape) of every tensor so far
    consumed: set = set()
    chosen = []
    count = int(rng.integers(2, 7))
    while len(chosen) < count:
        kind = kinds[int(rng.integers(0, len(kinds)))]
        operand, shape = tensors[-1]
        n, c, h, w = shape
        out = model.add_output(f"t{len(tensors)}")
        if kind in ("relu", "sigmoid", "tanh", "abs", "relu6"):
            model.add_operation(GRAPH_KINDS[kind], [operand], [out])
            new_shape = shape
        elif kind.endswith("_const"):
            const_shape = [(c, 1, 1), (w,), (1, c, h, w)][int(rng.integers(0, 3))]
            fuse = int(_FUSE_CODES[int(rng.integers(0, 4))])
            model.add_operation(GRAPH_KINDS[kind], [operand, model.add_constant(_normal(rng, const_shape)),
                                                    model.add_constant(np.int32([fuse]))], [out])
            new_shape = shape
        elif kind in ("add_join", "mul_join", "concat_join"):
            partners = [t for t in tensors[:-1] if (t[1] == shape if kind != "concat_join"
                                                    else (t[1][0], t[1][2], t[1][3]) == (n, h, w))]
            if not partners:
                continue
            other, other_shape = partners[int(rng.integers(0, len(partners)))]
            consumed.add(id(other))
            if kind == "concat_join":
                model.add_operation(T.CONCAT, [operand, other, model.add_constant(np.int32([1]))], [out])
                new_shape = (n, c + other_shape[1], h, w)
            else:
                model.add_operation(GRAPH_KINDS[kind], [operand, other, model.add_constant(np.int32([0]))], [out])
                new_shape = shape
        elif kind == "conv":
            out_channels = int(rng.integers(1, 6))
            fuse = int(_FUSE_CODES[int(rng.integers(0, 4))])
            model.add_operation(T.CONV_2D, [
                operand, model.add_constant(_normal(rng, (out_channels, c, 3, 3), 0.3)),
                model.add_constant(_normal(rng, (out_channels,))), model.add_constant(np.int32([0])),
                model.add_constant(np.int32([1, 1, 1, 1])), model.add_constant(np.int32([1, 1])),
                model.add_constant(np.int32([1])), model.add_constant(np.int32([1, 1])),
                model.add_constant(np.int32([fuse]))], [out])
            new_shape = (n, out_channels, h, w)
        elif kind == "batch_norm":
            model.add_operation(T.BATCH_NORMALIZATION, [
                operand, model.add_constant(_normal(rng, (c,))), model.add_constant(_normal(rng, (c,))),
                model.add_constant(_normal(rng, (c,))),
                model.add_constant(rng.uniform(0.5, 2.0, (c,)).astype(np.float32)),
                model.add_constant(np.float32([1e-5]))], [out])
            new_shape = shape
        elif kind in ("max_pool", "avg_pool"):
            if h < 3 or w < 3:
                continue
            common = [operand, model.add_constant(np.int32([0])), model.add_constant(np.int32([0, 0, 0, 0])),
                      model.add_constant(np.int32([2, 2])), model.add_constant(np.int32([1, 1])),
                      model.add_constant(np.bool_([False]))]
            if kind == "max_pool":
                model.add_operation(T.MAX_POOL_2D, common + [model.add_constant(np.bool_([False])),
                                                             model.add_constant(np.int32([int(Precision.INT32)])),
                                                             model.add_constant(np.int32([0]))], [out])
            else:
                model.add_operation(T.AVERAGE_POOL_2D, common + [model.add_constant(np.bool_([False])),
                                                                 model.add_constant(np.int32([0]))], [out])
            new_shape = (n, c, h - 1, w - 1)
        elif kind == "softmax":
            model.add_operation(T.SOFTMAX, [operand, model.add_constant(np.int32([1]))], [out])
            new_shape = shape
        elif kind == "transpose_hw":
            model.add_operation(T.TRANSPOSE, [operand, model.add_constant(np.int32([0, 1, 3, 2]))], [out])
            new_shape = (n, c, w, h)
        else:  # pragma: no cover
            raise AssertionError(kind)
        consumed.add(id(operand))
        tensors.append((out, new_shape))
        chosen.append(kind)
    # Outputs: the last tensor and every intermediate one nothing consumed (no dead operations).
    outputs = [t for t, _ in tensors[1:-1] if id(t) not in consumed] + [tensors[-1][0]]
    model.identify_inputs_and_outputs([x], outputs)
    model.finish()
    return GraphCase(f"graph{number}[{'+'.join(chosen)}]", model, feeds, chosen)
