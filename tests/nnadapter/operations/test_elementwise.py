"""The standard's references (what builtin_device runs) against independent expectations: elementwise,
comparison, logic, unary, activations.

Expectations come from Paddle's dygraph ops where Paddle has the same operation, else from a numpy
formula written from the NNAdapter spec. Shape inference (prepare) is checked by the harness on every
run, and directly below for unknown dims, dynamic shapes and invalid operands.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from nnadapter_bridge.conformance.harness import Const, Quant, run_op
from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, FuseCode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import OperandType
from support.tolerances import assert_op_close

paddle = pytest.importorskip("paddle", reason="Paddle's dygraph ops are the expectation for this file")
F = paddle.nn.functional

rng = np.random.default_rng(0)
Q8 = Precision.QUANT_INT8_SYMM_PER_LAYER
FUSES = list(FuseCode)

# Pairs of shapes that exercise numpy broadcasting: equal, trailing vector, both sides expanding,
# a [1] against a matrix, a rank-0 scalar, and a rank difference of two.
BROADCAST_SHAPES = [
    ((2, 3, 4), (2, 3, 4)),
    ((2, 3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((1,), (5, 2)),
    ((), (2, 3)),
    ((3, 1, 5), (1, 4, 1)),
    ((4,), (2, 3, 1, 4)),
]


def P(a):
    return paddle.to_tensor(np.asarray(a))


def normal(shape, scale=1.0):
    # np.asarray: for shape () numpy returns a scalar, which the harness would turn into a constant.
    return np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)


def away_from_zero(shape):
    """Magnitude in [0.5, 2] with a random sign: safe divisors."""
    magnitude = rng.uniform(0.5, 2.0, shape)
    return (magnitude * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def fuse(values, code):
    """The fused activation of the spec (NNAdapterFuseCode)."""
    if code == FuseCode.FUSED_RELU:
        return np.maximum(values, 0)
    if code == FuseCode.FUSED_RELU1:
        return np.clip(values, -1, 1)
    if code == FuseCode.FUSED_RELU6:
        return np.clip(values, 0, 6)
    return values


def quantize_ref(values, scale):
    """Symmetric per-layer int8 quantization written from the spec: round(real / scale), saturated."""
    return np.clip(np.rint(np.asarray(values, np.float64) / scale), -128, 127).astype(np.int8)


def random_quant(shape, scale):
    q = rng.integers(-127, 128, shape).astype(np.int8)
    return q, q.astype(np.float64) * scale


def assert_quant_close(got, want, what):
    # The kernel path works in float32 and the expectation in float64, so a value at a rounding
    # boundary may land one step apart; anything beyond one step, or more than a few such cases, fails.
    assert got.dtype == np.int8, f"{what}: dtype {got.dtype}"
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max(initial=0) <= 1, f"{what}: quantized outputs differ by {diff.max()} steps"
    # At least one such case is allowed: on 30 elements, 2% would otherwise mean none, and whether a tie
    # occurs depends on the draw (the module's generator is shared, so on test order).
    assert (diff > 0).sum() <= max(1, 0.02 * diff.size), (
        f"{what}: {(diff > 0).sum()} of {diff.size} outputs off by one step"
    )


def q8(scale):
    return [OperandType(precision=Q8, scale=scale)]


# -- binary arithmetic -------------------------------------------------------------------------------

ARITHMETIC_PADDLE = {
    T.ADD: paddle.add,
    T.SUB: paddle.subtract,
    T.MUL: paddle.multiply,
    T.DIV: paddle.divide,
    T.MAX: paddle.maximum,
    T.MIN: paddle.minimum,
    T.POW: paddle.pow,
    T.FLOOR_DIV: paddle.floor_divide,
}


def arithmetic_operands(op_type, shapes):
    if op_type == T.POW:
        # A positive base keeps every real power defined.
        return rng.uniform(0.5, 2.0, shapes[0]).astype(np.float32), normal(shapes[1])
    if op_type in (T.DIV, T.FLOOR_DIV):
        return normal(shapes[0], 2.0), away_from_zero(shapes[1])
    return normal(shapes[0], 2.0), normal(shapes[1], 2.0)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("op_type", list(ARITHMETIC_PADDLE), ids=lambda t: t.name)
def test_arithmetic_float_broadcast(op_type, shapes):
    a, b = arithmetic_operands(op_type, shapes)
    (got,) = run_op(op_type, [a, b, int(FuseCode.FUSED_NONE)])
    want = ARITHMETIC_PADDLE[op_type](P(a), P(b)).numpy()
    assert_op_close(got, want, what=f"{op_type.name} {shapes}")


@pytest.mark.parametrize("code", FUSES, ids=lambda c: c.name)
@pytest.mark.parametrize("op_type", list(ARITHMETIC_PADDLE), ids=lambda t: t.name)
def test_arithmetic_fuse_code(op_type, code):
    shapes = ((2, 1, 4), (3, 1))
    a, b = arithmetic_operands(op_type, shapes)
    a = a * (2.0 if op_type != T.POW else 1.0)  # reach beyond 1 and 6 so RELU1/RELU6 clip something
    a = a.astype(np.float32)
    (got,) = run_op(op_type, [a, Const(b), int(code)])
    want = fuse(ARITHMETIC_PADDLE[op_type](P(a), P(b)).numpy(), code)
    assert_op_close(got, want, what=f"{op_type.name} {code.name}")


INT_ARITHMETIC = [T.ADD, T.SUB, T.MUL, T.MAX, T.MIN, T.FLOOR_DIV]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op_type", INT_ARITHMETIC, ids=lambda t: t.name)
def test_arithmetic_integer_exact(op_type, dtype):
    a = rng.integers(-50, 50, (3, 4)).astype(dtype)
    b = rng.integers(1, 9, (4,)).astype(dtype) * rng.choice([-1, 1], (4,)).astype(dtype)
    (got,) = run_op(op_type, [a, b, int(FuseCode.FUSED_NONE)])
    want = ARITHMETIC_PADDLE[op_type](P(a), P(b)).numpy()
    assert got.dtype == dtype
    assert_op_close(got, want, what=f"{op_type.name} {np.dtype(dtype).name}")


@pytest.mark.parametrize("code", FUSES, ids=lambda c: c.name)
def test_arithmetic_integer_fuse_code(code):
    a = rng.integers(-20, 20, (2, 5)).astype(np.int32)
    b = rng.integers(-20, 20, (2, 5)).astype(np.int32)
    (got,) = run_op(T.SUB, [a, b, int(code)])
    want = fuse(paddle.subtract(P(a), P(b)).numpy(), code)
    assert_op_close(got, want.astype(np.int32), what=f"SUB int32 {code.name}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_div_integer_truncates_toward_zero(dtype):
    # paddle.divide on integers now returns floats, while NNAdapter's DIV keeps the input type: the
    # expectation is C integer division (what Paddle's integer elementwise_div kernels compute).
    a = np.array([7, -7, 7, -7, 0, 9, -9, 6], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, 3, 4, -4], dtype=dtype)
    (got,) = run_op(T.DIV, [a, b, 0])
    want = (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(dtype)
    assert_op_close(got, want, what="DIV integer")
    np.testing.assert_array_equal(got[:4], np.array([3, -3, -3, 3], dtype=dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_integer(dtype):
    base = np.array([2, -3, 5, 1, -1, 2, -1, 0, 7], dtype=dtype)
    exponent = np.array([10, 3, 0, -1, -3, -1, -2, 4, 2], dtype=dtype)
    (got,) = run_op(T.POW, [base, exponent, 0])
    want = paddle.pow(P(base), P(exponent)).numpy()
    assert_op_close(got, want, what="POW integer")


def test_floor_div_matches_paddle_where_floor_of_quotient_differs():
    # 1 / 0.1 rounds to 10 in float32, but the exact quotient of the stored values is just below 10.
    a = np.array([1.0, 7.5, -7.5, -3.0, 0.3], np.float32)
    b = np.array([0.1, 2.0, 2.0, -0.7, 0.1], np.float32)
    (got,) = run_op(T.FLOOR_DIV, [a, b, 0])
    assert_op_close(got, paddle.floor_divide(P(a), P(b)).numpy(), what="FLOOR_DIV")


QUANT_ARITHMETIC = {
    T.ADD: np.add,
    T.SUB: np.subtract,
    T.MUL: np.multiply,
    T.MAX: np.maximum,
    T.MIN: np.minimum,
    T.DIV: np.divide,
}


@pytest.mark.parametrize("code", [FuseCode.FUSED_NONE, FuseCode.FUSED_RELU6])
@pytest.mark.parametrize("op_type", list(QUANT_ARITHMETIC), ids=lambda t: t.name)
def test_arithmetic_quantized(op_type, code):
    a_q, a = random_quant((2, 3, 4), 0.0213)
    b_q, b = random_quant((4,), 0.0317)
    if op_type == T.DIV:
        b_q = np.where(np.abs(b_q) < 40, 40, b_q).astype(np.int8)  # divisors of magnitude >= 1.2
        b = b_q.astype(np.float64) * 0.0317
    # Large enough that no result saturates, and not a ratio of the input scales, so that exact
    # rounding ties (which float32 and float64 may break differently) are rare.
    out_scale = 0.1173
    (got,) = run_op(op_type, [Quant(a_q, 0.0213), Quant(b_q, 0.0317), int(code)], output_types=q8(out_scale))
    want = quantize_ref(fuse(QUANT_ARITHMETIC[op_type](a, b), code), out_scale)
    assert_quant_close(got, want, f"{op_type.name} quantized {code.name}")


# -- SUM ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_sum_matches_paddle_add_n(count):
    arrays = [normal((2, 3, 4)) for _ in range(count)]
    (got,) = run_op(T.SUM, arrays)
    want = paddle.add_n([P(a) for a in arrays]).numpy()
    assert_op_close(got, want, what=f"SUM of {count}")


@pytest.mark.parametrize("shapes", [((2, 3), (3,), (1, 3)), ((4, 1), (1, 5), (4, 5), ()), ((2, 1, 3), (5, 1))], ids=str)
def test_sum_broadcasts(shapes):
    arrays = [normal(s) for s in shapes]
    inputs = [arrays[0]] + [Const(a) for a in arrays[1:]]
    (got,) = run_op(T.SUM, inputs)
    want = sum(a.astype(np.float64) for a in arrays)
    assert_op_close(got, want, what=f"SUM {shapes}")


def test_sum_integer_and_quantized():
    ints = [rng.integers(-100, 100, (3, 3)).astype(np.int64) for _ in range(3)]
    (got,) = run_op(T.SUM, ints)
    assert_op_close(got, paddle.add_n([P(a) for a in ints]).numpy(), what="SUM int64")
    scales = (0.011, 0.023, 0.041)
    quant = [random_quant((60,), s) for s in scales]
    (got_q,) = run_op(T.SUM, [Quant(q, s) for (q, _), s in zip(quant, scales)], output_types=q8(0.0637))
    assert_quant_close(got_q, quantize_ref(sum(real for _, real in quant), 0.0637), "SUM quantized")


# -- comparisons ------------------------------------------------------------------------------------------

COMPARISON_PADDLE = {
    T.EQUAL: paddle.equal,
    T.NOT_EQUAL: paddle.not_equal,
    T.GREATER: paddle.greater_than,
    T.GREATER_EQUAL: paddle.greater_equal,
    T.LESS: paddle.less_than,
    T.LESS_EQUAL: paddle.less_equal,
}


def comparable(dtype, shape):
    # Few distinct values so that equality actually occurs.
    values = rng.integers(-2, 3, shape)
    if dtype == np.bool_:
        return values > 0
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op_type", list(COMPARISON_PADDLE), ids=lambda t: t.name)
def test_comparison_dtypes(op_type, dtype):
    a, b = comparable(dtype, (3, 4)), comparable(dtype, (3, 4))
    (got,) = run_op(op_type, [a, b])
    want = COMPARISON_PADDLE[op_type](P(a), P(b)).numpy()
    assert_op_close(got, want, what=f"{op_type.name} {np.dtype(dtype).name}")


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES[1:5], ids=str)
@pytest.mark.parametrize("op_type", list(COMPARISON_PADDLE), ids=lambda t: t.name)
def test_comparison_broadcast(op_type, shapes):
    a, b = comparable(np.float32, shapes[0]), comparable(np.float32, shapes[1])
    (got,) = run_op(op_type, [a, Const(b)])
    want = COMPARISON_PADDLE[op_type](P(a), P(b)).numpy()
    assert_op_close(got, want, what=f"{op_type.name} {shapes}")


@pytest.mark.parametrize("op_type", list(COMPARISON_PADDLE), ids=lambda t: t.name)
def test_comparison_quantized_compares_real_values(op_type):
    # The same real value stored with different scales: 10 * 0.03 == 15 * 0.02 == 0.3.
    a_q = np.array([10, 10, 11, -5], np.int8)
    b_q = np.array([15, 16, 15, -8], np.int8)
    (got,) = run_op(op_type, [Quant(a_q, 0.03), Quant(b_q, 0.02)])
    a = np.array([0.3, 0.3, 0.33, -0.15])
    b = np.array([0.3, 0.32, 0.3, -0.16])
    want = {T.EQUAL: a == b, T.NOT_EQUAL: a != b, T.GREATER: a > b, T.GREATER_EQUAL: a >= b,
            T.LESS: a < b, T.LESS_EQUAL: a <= b}[op_type]
    assert_op_close(got, want, what=f"{op_type.name} quantized")


# -- logic -------------------------------------------------------------------------------------------------

LOGIC_PADDLE = {T.AND: paddle.logical_and, T.OR: paddle.logical_or, T.XOR: paddle.logical_xor}


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES[:4], ids=str)
@pytest.mark.parametrize("op_type", list(LOGIC_PADDLE), ids=lambda t: t.name)
def test_logic_binary(op_type, shapes):
    a, b = rng.random(shapes[0]) > 0.5, rng.random(shapes[1]) > 0.5
    (got,) = run_op(op_type, [a, b])
    assert_op_close(got, LOGIC_PADDLE[op_type](P(a), P(b)).numpy(), what=f"{op_type.name} {shapes}")


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4)], ids=str)
def test_not(shape):
    a = rng.random(shape) > 0.5
    (got,) = run_op(T.NOT, [a])
    assert_op_close(got, paddle.logical_not(P(a)).numpy(), what="NOT")


# -- WHERE --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((2, 1), (1, 3), (3,)), ((4, 1, 2), (2,), (3, 1)),
                                    ((1,), (2, 2), (2, 2))], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_where(dtype, shapes):
    condition = rng.random(shapes[0]) > 0.5
    a = (normal(shapes[1]) * 10).astype(dtype)
    b = (normal(shapes[2]) * 10).astype(dtype)
    (got,) = run_op(T.WHERE, [condition, a, Const(b)])
    want = paddle.where(P(condition), P(a), P(b)).numpy()
    assert_op_close(got, want, what=f"WHERE {np.dtype(dtype).name} {shapes}")


def test_where_quantized():
    condition = rng.random((3, 4)) > 0.5
    a_q, a = random_quant((3, 4), 0.02)
    b_q, b = random_quant((4,), 0.01)
    (got,) = run_op(T.WHERE, [condition, Quant(a_q, 0.02), Quant(b_q, 0.01)], output_types=q8(0.0173))
    assert_quant_close(got, quantize_ref(np.where(condition, a, b), 0.0173), "WHERE quantized")


# -- unary math and activations without parameters -------------------------------------------------------------

def positive(shape):
    return rng.uniform(0.1, 3.0, shape).astype(np.float32)


UNARY_PADDLE = {
    T.ABS: (paddle.abs, normal),
    T.COS: (paddle.cos, normal),
    T.EXP: (paddle.exp, normal),
    T.FLOOR: (paddle.floor, lambda s: normal(s, 3.0)),
    T.LOG: (paddle.log, positive),
    T.RELU: (F.relu, normal),
    T.RELU6: (F.relu6, lambda s: normal(s, 5.0)),
    T.RSQRT: (paddle.rsqrt, positive),
    T.SIGMOID: (F.sigmoid, lambda s: normal(s, 3.0)),
    T.SIN: (paddle.sin, normal),
    T.SQUARE: (paddle.square, normal),
    T.SWISH: (F.swish, lambda s: normal(s, 3.0)),
    T.TANH: (paddle.tanh, normal),
    T.ASSIGN: (paddle.assign, normal),
}


@pytest.mark.parametrize("shape", [(17,), (2, 3, 4, 5), ()], ids=str)
@pytest.mark.parametrize("op_type", list(UNARY_PADDLE), ids=lambda t: t.name)
def test_unary_matches_paddle(op_type, shape):
    fn, make = UNARY_PADDLE[op_type]
    x = make(shape)
    (got,) = run_op(op_type, [x])
    want = fn(P(x)).numpy()
    assert_op_close(got, want, what=f"{op_type.name} {shape}")


QUANT_UNARY = {
    T.ABS: np.abs,
    T.RELU: lambda v: np.maximum(v, 0),
    T.RELU6: lambda v: np.clip(v, 0, 6),
    T.SIGMOID: lambda v: 1 / (1 + np.exp(-v)),
    T.TANH: np.tanh,
    T.SQUARE: np.square,
    T.ASSIGN: lambda v: v,
}


@pytest.mark.parametrize("op_type", list(QUANT_UNARY), ids=lambda t: t.name)
def test_unary_quantized(op_type):
    x_q, x = random_quant((4, 8), 0.05)  # reals in about [-6.4, 6.4]
    out_scale = 0.413 if op_type == T.SQUARE else 0.05
    (got,) = run_op(op_type, [Quant(x_q, 0.05)], output_types=q8(out_scale))
    assert_quant_close(got, quantize_ref(QUANT_UNARY[op_type](x), out_scale), f"{op_type.name} quantized")


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_assign_non_float(dtype):
    x = rng.integers(-5, 5, (3, 2)).astype(dtype)
    (got,) = run_op(T.ASSIGN, [x])
    assert_op_close(got, paddle.assign(P(x)).numpy(), what="ASSIGN")


def test_log_rsqrt_outside_domain_follow_ieee():
    x = np.array([0.0, -1.0, 4.0], np.float32)
    (log,) = run_op(T.LOG, [x])
    (rsqrt,) = run_op(T.RSQRT, [x])
    with np.errstate(invalid="ignore"):  # the tolerance check subtracts inf from inf before matching infs
        assert_op_close(log, paddle.log(P(x)).numpy(), what="LOG domain")
        assert_op_close(rsqrt, paddle.rsqrt(P(x)).numpy(), what="RSQRT domain")


# -- CAST ---------------------------------------------------------------------------------------------------------

CAST_CASES = [
    (np.float32, Precision.INT32, "int32"),
    (np.float32, Precision.INT64, "int64"),
    (np.float32, Precision.BOOL8, "bool"),
    (np.float32, Precision.FLOAT64, "float64"),
    (np.float32, Precision.FLOAT16, "float16"),
    (np.float32, Precision.UINT8, "uint8"),
    (np.float32, Precision.INT8, "int8"),
    (np.float32, Precision.INT16, "int16"),
    (np.int32, Precision.FLOAT32, "float32"),
    (np.int32, Precision.INT64, "int64"),
    (np.int32, Precision.BOOL8, "bool"),
    (np.int64, Precision.INT32, "int32"),
    (np.int64, Precision.FLOAT32, "float32"),
    (np.bool_, Precision.FLOAT32, "float32"),
    (np.bool_, Precision.INT32, "int32"),
    (np.float64, Precision.FLOAT32, "float32"),
    (np.float16, Precision.FLOAT32, "float32"),
    (np.uint8, Precision.INT32, "int32"),
]


@pytest.mark.parametrize("source, target, paddle_dtype", CAST_CASES,
                         ids=[f"{np.dtype(s).name}->{t.name}" for s, t, _ in CAST_CASES])
def test_cast_matches_paddle(source, target, paddle_dtype):
    values = rng.uniform(-40, 40, (3, 5))
    values[0, :3] = [0.0, -1.5, 2.7]  # zero for bool, and fractions of both signs for truncation
    if np.dtype(source).kind == "b":
        x = values > 0
    elif np.dtype(source).kind == "u":
        x = np.abs(values).astype(source)
    else:
        x = values.astype(source)
    (got,) = run_op(T.CAST, [x, int(target)])
    want = paddle.cast(P(x), paddle_dtype).numpy()
    assert got.dtype == want.dtype, f"CAST dtype {got.dtype} != {want.dtype}"
    assert_op_close(got, want, what=f"CAST {np.dtype(source).name}->{target.name}")


def test_cast_negative_float_to_uint8_wraps_like_paddle():
    x = np.array([-1.5, -2.7, 200.2, 3.9], np.float32)
    (got,) = run_op(T.CAST, [x, int(Precision.UINT8)])
    assert_op_close(got, paddle.cast(P(x), "uint8").numpy(), what="CAST wrap")


# -- CLIP ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("low, high", [(-0.5, 0.5), (0.0, 6.0), (-2.0, -1.0), (1.0, 1.0)])
def test_clip_matches_paddle(low, high):
    x = normal((3, 4, 5), 2.0)
    (got,) = run_op(T.CLIP, [x, float(low), float(high)])
    assert_op_close(got, paddle.clip(P(x), low, high).numpy(), what=f"CLIP [{low}, {high}]")


def test_clip_min_above_max_follows_the_spec_formula():
    x = normal((10,))
    (got,) = run_op(T.CLIP, [x, 1.0, -1.0])
    assert_op_close(got, np.minimum(np.maximum(x, 1.0), -1.0), what="CLIP min > max")


def test_clip_quantized():
    x_q, x = random_quant((5, 5), 0.05)
    lo = Quant(np.array([-20], np.int8), 0.05, is_input=False)  # -1.0
    hi = Quant(np.array([30], np.int8), 0.05, is_input=False)  # 1.5
    (got,) = run_op(T.CLIP, [Quant(x_q, 0.05), lo, hi], output_types=q8(0.05))
    assert_quant_close(got, quantize_ref(np.clip(x, -1.0, 1.5), 0.05), "CLIP quantized")


# -- GELU ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1.0, 4.0], ids=["unit", "wide"])
@pytest.mark.parametrize("shape", [(64,), (2, 3, 8)], ids=str)
@pytest.mark.parametrize("approximate", [False, True], ids=["erf", "tanh"])
def test_gelu_matches_paddle(approximate, shape, scale):
    x = normal(shape, scale)
    (got,) = run_op(T.GELU, [x, bool(approximate)])
    want = F.gelu(P(x), approximate=approximate).numpy()
    assert_op_close(got, want, what=f"GELU approximate={approximate}")


def test_gelu_extreme_inputs():
    x = np.array([-40.0, -9.0, -5.0, -1e-6, 0.0, 1e-6, 5.0, 9.0, 40.0], np.float32)
    (got,) = run_op(T.GELU, [x, False])
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    assert_op_close(got, want, what="GELU extremes")


def test_erf_helper_against_math_erf():
    from nnadapter_bridge.nnadapter.operations.activation import erf

    z = np.concatenate([np.linspace(-7, 7, 4001), [0.0, -0.0, 1e-300, 30.0, -30.0]])
    want = np.array([math.erf(v) for v in z])
    np.testing.assert_allclose(erf(z), want, rtol=1e-13, atol=1e-300)


def test_gelu_quantized():
    x_q, x = random_quant((40,), 0.03)
    (got,) = run_op(T.GELU, [Quant(x_q, 0.03), False], output_types=q8(0.03))
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    assert_quant_close(got, quantize_ref(want, 0.03), "GELU quantized")


# -- parameterized activations ------------------------------------------------------------------------------------

@pytest.mark.parametrize("slope, offset", [(0.1666667, 0.5), (0.2, 0.5), (1.0, 0.0), (0.5, -0.25)])
def test_hard_sigmoid_matches_paddle(slope, offset):
    x = normal((4, 25), 4.0)
    (got,) = run_op(T.HARD_SIGMOID, [x, float(slope), float(offset)])
    want = F.hardsigmoid(P(x), slope=slope, offset=offset).numpy()
    assert_op_close(got, want, what=f"HARD_SIGMOID {slope} {offset}")


def test_hard_swish_matches_paddle_defaults():
    # paddle's hardswish is x * relu6(x + 3) / 6, i.e. alpha = 1/6, beta = 1/2.
    x = normal((2, 3, 16), 4.0)
    (got,) = run_op(T.HARD_SWISH, [x, 1.0 / 6.0, 0.5])
    assert_op_close(got, F.hardswish(P(x)).numpy(), what="HARD_SWISH")


@pytest.mark.parametrize("alpha, beta", [(0.2, 0.5), (1.0, 0.0), (0.25, -0.5)])
def test_hard_swish_formula(alpha, beta):
    x = normal((50,), 4.0)
    (got,) = run_op(T.HARD_SWISH, [x, float(alpha), float(beta)])
    x64 = x.astype(np.float64)
    want = x64 * np.maximum(0, np.minimum(1, np.float32(alpha) * x64 + np.float32(beta)))
    assert_op_close(got, want, what=f"HARD_SWISH {alpha} {beta}")


@pytest.mark.parametrize("alpha", [0.01, 0.2, 1.0, -0.5])
def test_leaky_relu_matches_paddle(alpha):
    x = normal((3, 7), 2.0)
    (got,) = run_op(T.LEAKY_RELU, [x, float(alpha)])
    assert_op_close(got, F.leaky_relu(P(x), negative_slope=alpha).numpy(), what=f"LEAKY_RELU {alpha}")


def test_leaky_relu_quantized():
    # Own generator (independent of test order) and no exact ties: 0.1*q is a .5 tie for q = 5 mod 10, where
    # float32 and the float64 reference may round apart; such q are moved one step.
    x_q = np.random.default_rng(540).integers(-127, 128, (30,)).astype(np.int8)
    x_q = np.where((x_q < 0) & (np.abs(x_q.astype(np.int32)) % 10 == 5), x_q + 1, x_q).astype(np.int8)
    x = x_q.astype(np.float64) * 0.02
    (got,) = run_op(T.LEAKY_RELU, [Quant(x_q, 0.02), 0.1], output_types=q8(0.02))
    assert_quant_close(got, quantize_ref(np.where(x >= 0, x, 0.1 * x), 0.02), "LEAKY_RELU quantized")


@pytest.mark.parametrize("shape, slope_count", [((2, 3, 4, 5), 3), ((2, 3, 4, 5), 1), ((4, 6), 6), ((2, 5, 7), 5),
                                                ((1, 8, 2, 2), 8)], ids=str)
def test_prelu_matches_paddle(shape, slope_count):
    x = normal(shape, 2.0)
    slope = rng.uniform(-0.5, 0.5, (slope_count,)).astype(np.float32)
    (got,) = run_op(T.PRELU, [x, Const(slope)])
    assert_op_close(got, F.prelu(P(x), P(slope)).numpy(), what=f"PRELU {shape} {slope_count}")


@pytest.mark.parametrize("beta, threshold", [(1.0, 20.0), (2.0, 3.0), (0.5, 1.0), (3.0, 10.0)])
def test_softplus_matches_paddle(beta, threshold):
    x = normal((4, 30), 3.0)
    (got,) = run_op(T.SOFTPLUS, [x, float(beta), float(threshold)])
    assert_op_close(got, F.softplus(P(x), beta=beta, threshold=threshold).numpy(),
                    what=f"SOFTPLUS {beta} {threshold}")


def test_softplus_large_inputs_do_not_overflow():
    x = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], np.float32)
    (got,) = run_op(T.SOFTPLUS, [x, 1.0, 1000.0])
    want = np.array([math.log1p(math.exp(v)) if v < 50 else v for v in x.astype(np.float64)])
    assert_op_close(got, want, what="SOFTPLUS large")


def test_hard_sigmoid_and_softplus_quantized():
    x_q, x = random_quant((32,), 0.04)
    (hs,) = run_op(T.HARD_SIGMOID, [Quant(x_q, 0.04), 0.2, 0.5], output_types=q8(0.01))
    assert_quant_close(hs, quantize_ref(np.clip(0.2 * x + 0.5, 0, 1), 0.01), "HARD_SIGMOID quantized")
    (sp,) = run_op(T.SOFTPLUS, [Quant(x_q, 0.04), 1.0, 20.0], output_types=q8(0.05))
    assert_quant_close(sp, quantize_ref(np.log1p(np.exp(x)), 0.05), "SOFTPLUS quantized")


# -- prepare: unknown dims, dynamic shapes, and invalid operands -------------------------------------------------

F32_T = Precision.FLOAT32


def typed(model, precision, dims, dynamic=()):
    return model.add_operand(OperandType(precision=precision, dims=dims, dynamic_dims=dynamic))


def test_prepare_broadcast_with_unknown_and_dynamic_dims():
    m = Model()
    a = typed(m, F32_T, (UNKNOWN, 3, 1), ((1, 3, 1), (8, 3, 1)))
    b = typed(m, F32_T, (5,))
    out = m.add_output()
    m.add_operation(T.MUL, [a, b, m.add_constant(np.int32(0))], [out])
    assert out.type.dims == (UNKNOWN, 3, 5)
    assert out.type.dynamic_dims == ((1, 3, 5), (8, 3, 5))
    assert out.type.precision == F32_T


def test_prepare_comparison_is_bool_and_keeps_dynamic_dims():
    m = Model()
    a = typed(m, Q8, (UNKNOWN, 4), ((2, 4), (6, 4)))
    a.type.scale = 0.1
    b = typed(m, Q8, (UNKNOWN, 1), ((2, 1), (6, 1)))
    b.type.scale = 0.2
    out = m.add_output()
    m.add_operation(T.GREATER_EQUAL, [a, b], [out])
    assert out.type.precision == Precision.BOOL8 and out.type.scale is None
    assert out.type.dims == (UNKNOWN, 4)
    assert out.type.dynamic_dims == ((2, 4), (6, 4))


def test_prepare_unary_cast_and_where_keep_unknown_dims():
    m = Model()
    x = typed(m, F32_T, (UNKNOWN, UNKNOWN, 8), ((1, 2, 8), (3, 4, 8)))
    relu_out, cast_out, where_out = m.add_output(), m.add_output(), m.add_output()
    m.add_operation(T.SIGMOID, [x], [relu_out])
    m.add_operation(T.CAST, [x, m.add_constant(np.int32(Precision.INT64))], [cast_out])
    cond = typed(m, Precision.BOOL8, (UNKNOWN, 1, 1))
    m.add_operation(T.WHERE, [cond, x, m.add_constant(np.zeros(8, np.float32))], [where_out])
    assert relu_out.type.dims == (UNKNOWN, UNKNOWN, 8) and relu_out.type.dynamic_dims == ((1, 2, 8), (3, 4, 8))
    assert cast_out.type.precision == Precision.INT64 and cast_out.type.dims == (UNKNOWN, UNKNOWN, 8)
    assert where_out.type.dims == (UNKNOWN, UNKNOWN, 8) and where_out.type.precision == F32_T


def test_prepare_unknown_dim_against_known_dim_takes_the_known_one():
    m = Model()
    a = typed(m, Precision.INT32, (UNKNOWN, 1))
    b = typed(m, Precision.INT32, (4, 6))
    out = m.add_output()
    m.add_operation(T.ADD, [a, b, m.add_constant(np.int32(0))], [out])
    assert out.type.dims == (4, 6)


def test_prepare_sum_of_many_broadcasts_all():
    m = Model()
    ops = [typed(m, F32_T, d) for d in ((2, 1, 1), (1, 3, 1), (4,))]
    out = m.add_output()
    m.add_operation(T.SUM, ops, [out])
    assert out.type.dims == (2, 3, 4)


def _expect_error(op_type, inputs, match):
    m = Model()
    operands = [m.add_constant(v) if isinstance(v, (np.ndarray, np.generic)) else typed(m, *v) for v in inputs]
    with pytest.raises(OperationError, match=match):
        m.add_operation(op_type, operands, [m.add_output()])


def test_invalid_shapes_do_not_broadcast():
    _expect_error(T.ADD, [(F32_T, (2, 3)), (F32_T, (4,)), np.int32(0)], "do not broadcast")
    _expect_error(T.LESS, [(F32_T, (2, 3)), (F32_T, (2,))], "do not broadcast")


def test_invalid_mixed_precisions():
    _expect_error(T.SUB, [(F32_T, (3,)), (Precision.INT32, (3,)), np.int32(0)], "CAST")
    _expect_error(T.EQUAL, [(Precision.INT64, (3,)), (Precision.INT32, (3,))], "CAST")
    _expect_error(T.WHERE, [(Precision.BOOL8, (3,)), (F32_T, (3,)), (Precision.INT32, (3,))], "CAST")
    _expect_error(T.SUM, [(F32_T, (3,)), (F32_T, (3,)), (Precision.INT64, (3,))], "CAST")


def test_invalid_precisions_for_the_signature():
    _expect_error(T.AND, [(F32_T, (3,)), (F32_T, (3,))], "allowed: BOOL8")
    _expect_error(T.EXP, [(Precision.INT32, (3,))], "precision")
    _expect_error(T.WHERE, [(F32_T, (3,)), (F32_T, (3,)), (F32_T, (3,))], "condition")


def test_invalid_parameters():
    _expect_error(T.ADD, [(F32_T, (3,)), (F32_T, (3,)), np.int32(7)], "fuse_code 7")
    _expect_error(T.CAST, [(F32_T, (3,)), np.int32(Precision.QUANT_INT8_SYMM_PER_LAYER)], "dtype")
    _expect_error(T.CAST, [(F32_T, (3,)), (Precision.INT32, (1,))], "constant")
    _expect_error(T.PRELU, [(F32_T, (2, 3, 4)), np.zeros(4, np.float32)], "3 channels")
    _expect_error(T.PRELU, [(F32_T, (5,)), np.zeros(5, np.float32)], "rank >= 2")
