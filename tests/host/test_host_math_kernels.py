"""Host kernels for moments and sums (var, std, variance, nansum, reduce_as), running extremes (cummax, cummin),
closeness and equality (isclose, allclose, equal_all), unary math (rint, gammaln, rrelu's inference form),
diagonals (diag_embed, fill_diagonal, fill_diagonal_tensor), is_empty and sequence_mask, against Paddle: each
program is built in PIR static mode, saved, loaded with our loader and run op by op with every host kernel forced,
and compared with Paddle Inference (CPU) on the saved program.

Paddle's CPU API decomposes std / var / nansum into other ops (a CUDA build emits them whole) and has no API for
rint, variance or an out-of-place fill_diagonal, so those programs are built with `paddle._C_ops`, which emits the
pd_op a saved model holds.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.host.kernels.registry import HostKernelError
from support.converter_harness import opdesc_program, pir_program
from support.host_kernel_check import check, run_on_host

RNG = np.random.default_rng(23)


def ops():
    from paddle import _C_ops

    return _C_ops


# -- moments ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_var_std_variance(tmp_path, dtype):
    x = (RNG.standard_normal((3, 4, 5)) * 3 + 100).astype(dtype)  # an offset mean: a one-pass formula would drift
    row = np.array([[1.0, np.nan, 2.0], [4.0, 5.0, 7.0]], dtype)
    scalar, empty = np.array(2.5, dtype), np.zeros((0, 3), dtype)

    def build(x, row, scalar, empty):
        c = ops()
        return [
            c.var(x, [1], True, True, 1.0),
            c.var(x, [], False, True, 0.0),  # every axis: 0-d
            c.var(x, [-1, 0], False, False, 2.5),  # correction wins over unbiased=False
            c.std(x, [2], False, False, 0.0),
            # correction = N: inf (not through float32 std: Paddle's vectorised float32 sqrt turns inf into NaN)
            c.var(x, [1], True, True, 4.0),
            c.var(x, [1], False, True, 6.0),  # correction > N: 0
            c.variance(x, [1], True),
            c.variance(x, [], False),
            c.var(row, [1], False, True, 1.0),  # a NaN row and a clean one
            c.std(row[:, :1], [1], False, True, 1.0),  # one element, N - 1 = 0: NaN
            c.std(scalar, [], False, True, 0.0),
            c.var(scalar, [0], True, True, 1.0),
            c.var(empty, [0], False, True, 1.0),  # nothing to average: NaN
        ]

    check(pir_program(tmp_path, build, {"x": x, "row": row, "scalar": scalar, "empty": empty}),
          {"var", "std", "variance"})


# -- sums ---------------------------------------------------------------------------------------------------
def test_nansum(tmp_path):
    import paddle

    undefined = paddle.base.core.DataType.UNDEFINED
    x = np.array([[1.5, -2.5, np.nan, 3.0], [np.nan, np.nan, np.nan, np.nan], [0.5, 1.5, 2.5, 1.5],
                  [np.inf, np.nan, 1.0, -2.0]], np.float32)
    n = np.array([[1, 2, 3], [2**31 - 1, 1, 2]], np.int32)
    b = np.array([[True, False, True], [True, True, False]])

    def build(x, n, b):
        c = ops()
        return [
            c.nansum(x, [1], undefined, False),
            c.nansum(x, [], paddle.float64, True),
            c.nansum(x, [-1, 0], undefined, False),
            c.nansum(x, [1], paddle.int64, False),  # NaN is 0 before the cast, 1.5 casts to 1
            c.nansum(n, [1], undefined, False),  # int32 sums in int64
            c.nansum(n, [1], paddle.int32, False),  # ... unless asked for int32, where it wraps
            c.nansum(n, [0], paddle.float32, True),
            c.nansum(b, [], undefined, False),
        ]

    check(pir_program(tmp_path, build, {"x": x, "n": n, "b": b}), {"nansum"})


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "bool"])
def test_reduce_as(tmp_path, dtype):
    x = (RNG.standard_normal((2, 3, 4)) * 5).astype(dtype)
    targets = {f"t{i}": np.zeros(shape, dtype) for i, shape in enumerate([(4,), (3, 1), (2, 1, 1), (), (1, 4),
                                                                          (2, 3, 4), (2, 1, 4)])}

    def build(x, **t):
        return [ops().reduce_as(x, t[name]) for name in targets]

    check(pir_program(tmp_path, build, {"x": x, **targets}), {"reduce_as"})


# -- running extremes ---------------------------------------------------------------------------------------
def test_cummax_cummin(tmp_path):
    import paddle

    v = np.array([[1.0, 3.0, 3.0, np.nan, 2.0, np.nan, 5.0], [-np.inf, -np.inf, 0.0, -0.0, 0.0, 4.0, 4.0]],
                 np.float32)
    w = RNG.integers(-3, 3, (3, 4, 2)).astype(np.int64)
    scalar = np.array(7.0, np.float64)

    def build(v, w, scalar):
        outs = []
        for fn in (paddle.cummax, paddle.cummin):
            outs += list(fn(v, axis=-1)) + list(fn(v, axis=0, dtype="int32")) + list(fn(w, axis=1))
            outs += list(fn(scalar, axis=0))
        return outs

    check(pir_program(tmp_path, build, {"v": v, "w": w, "scalar": scalar}), {"cummax", "cummin"}, exact=True)


# -- closeness and equality ---------------------------------------------------------------------------------
def test_isclose_allclose(tmp_path):
    import paddle

    a = np.array([1.0, np.nan, np.inf, -np.inf, np.inf, 1e-9, 0.0, 100.0, 100.0, -3.0, 2e-15], np.float64)
    b = np.array([1.0, np.nan, np.inf, np.inf, 1.0, 0.0, 1e-8, 100.001, 100.002, -3.00003, 0.0], np.float64)
    edge = np.array([1.0 + 1e-8 + 1e-5 + e for e in (0, 5e-16, 2e-15)])  # within 1e-15 of the bound counts
    p = np.array([1, 5, -4], np.int32)
    q = np.array([3, 5, -2], np.int32)

    def build(a, b, edge, p, q):
        af, bf = a.astype("float32"), b.astype("float32")
        rtol = paddle.full([], 1e-3, "float64") * 2.0  # a computed tolerance: the Rtol tensor slot
        return [
            paddle.isclose(a, b), paddle.isclose(a, b, equal_nan=True), paddle.isclose(af, bf, rtol=1e-5, atol=0.0),
            paddle.isclose(a, b, rtol=0.0, atol=0.0), paddle.isclose(edge, paddle.ones([3], "float64")),
            ops().isclose(af, bf, rtol, paddle.full([], 0.5, "float64"), False),
            paddle.allclose(a[:1], b[:1]), paddle.allclose(a, b), paddle.allclose(a[:2], b[:2], equal_nan=True),
            paddle.allclose(p, q, atol=1.9), paddle.allclose(p, q, atol=2.0),  # integers truncate atol + rtol*|b|
            paddle.allclose(p, q, rtol=0.5, atol=0.4), paddle.allclose(p, q, rtol=0.5, atol=0.6),
        ]

    check(pir_program(tmp_path, build, {"a": a, "b": b, "edge": edge, "p": p, "q": q}), {"isclose", "allclose"})


def test_equal_all(tmp_path):
    import paddle

    x = np.array([[1.0, -0.0, 3.0]], np.float32)
    y = np.array([[1.0, 0.0, 3.0]], np.float32)
    row, nan = np.array([1.0, 0.0, 3.0], np.float32), np.array([np.nan], np.float32)
    k, e = np.array([4, 5], np.int64), np.zeros((0, 2), np.float32)
    flags = np.array([True, False])

    def build(x, y, row, nan, k, e, flags):
        return [paddle.equal_all(x, y), paddle.equal_all(x, x + 1), paddle.equal_all(x, row),  # shapes differ
                paddle.equal_all(nan, nan), paddle.equal_all(k, k), paddle.equal_all(e, e),
                paddle.equal_all(flags, flags), paddle.equal_all(flags, paddle.logical_not(flags))]

    check(pir_program(tmp_path, build, {"x": x, "y": y, "row": row, "nan": nan, "k": k, "e": e, "flags": flags}),
          {"equal_all"})


# -- unary math ---------------------------------------------------------------------------------------------
def test_rint_gammaln_rrelu(tmp_path):
    import paddle

    halves = np.array([0.5, 1.5, 2.5, -0.5, -1.5, np.nan, np.inf, -2.4999, 1e20], np.float32)
    ints = np.array([-3, 0, 7], np.int32)
    # poles (0, -0, negative integers), the infinities and NaN, values near and far
    gamma = np.array([0.0, -0.0, -1.0, -2.5, 0.5, 1.5, 2.0, 3.7, 1e-30, 1e30, np.inf, -np.inf, np.nan, -1e-8, 171.5,
                      30.25, 0.1], np.float64)
    slopes = np.array([-1.0, 0.0, -0.0, 2.0, np.nan, -np.inf, -3.5], np.float32)

    def build(halves, ints, gamma, slopes):
        c = ops()
        outs = [c.rint(halves), c.rint(halves.astype("float64")), c.rint(ints),
                paddle.gammaln(gamma), paddle.gammaln(gamma.astype("float32"))]
        for lower, upper, s in ((0.125, 1.0 / 3.0, slopes), (0.1, 0.3, slopes.astype("float64")), (0.2, 0.2, slopes)):
            out = paddle.nn.functional.rrelu(s, lower, upper, training=False)
            outs += [out, out.get_defining_op().result(1)]  # Noise, the slope taken
        return outs

    check(pir_program(tmp_path, build, {"halves": halves, "ints": ints, "gamma": gamma, "slopes": slopes}),
          {"rint", "gammaln", "rrelu"})


# -- diagonals ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_diag_embed(tmp_path, dtype):
    import paddle

    x = (RNG.standard_normal((2, 3)) * 5).astype(dtype)
    v = np.arange(1, 5).astype(dtype)
    e = np.zeros((0,), dtype)

    def build(x, v, e):
        embed = paddle.diag_embed
        return [embed(x), embed(x, 1), embed(x, -1), embed(x, 0, 0, 2), embed(x, 1, 2, 0), embed(x, -2, -1, 0),
                embed(v, 2), embed(e, 1)]

    check(pir_program(tmp_path, build, {"x": x, "v": v, "e": e}), {"diag_embed"})


def test_fill_diagonal(tmp_path):
    shapes = [(3, 4), (7, 3), (3, 3, 3), (2, 3, 3), (5, 1)]
    feeds = {f"x{i}": RNG.standard_normal(shape).astype(np.float32) for i, shape in enumerate(shapes)}
    feeds["n"] = np.arange(12, dtype=np.int32).reshape(4, 3)
    feeds["b"] = np.zeros((3, 3), bool)
    feeds["h"] = np.ones((2, 4), np.float64)

    def build(n, b, h, **xs):
        c = ops()
        outs = [c.fill_diagonal(x, 9.5, offset, wrap) for x in xs.values() for offset in (0, 1, -1, -3)
                for wrap in (False, True)]
        # the float value is cast to the element type: truncated for integers, non-zero is true for bool
        return outs + [c.fill_diagonal(n, -2.7, 0, True), c.fill_diagonal(b, 0.5, 1, False),
                       c.fill_diagonal(h, 0.1, 2, False)]

    check(pir_program(tmp_path, build, feeds), {"fill_diagonal"})


def test_fill_diagonal_tensor(tmp_path):
    import paddle

    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    m = np.arange(12, dtype=np.int64).reshape(3, 4)

    def build(x, w, m):
        fill = paddle.Tensor.fill_diagonal_tensor
        return [
            fill(x, paddle.full([2, 3], 7.0), 0, 1, 2),
            fill(x, paddle.arange(6, dtype="float32").reshape([3, 2]), 1, 0, 2),
            fill(x, paddle.arange(6, dtype="float32").reshape([3, 2]), -1, 2, 0),  # dim1 after dim2
            fill(x, paddle.arange(6, dtype="float32").reshape([3, 2]), 0, -1, 0),  # the API makes dims non-negative
            fill(w, paddle.arange(24, dtype="float32").reshape([2, 4, 3]), 1, 1, 3),
            fill(m, paddle.to_tensor([-1, -2, -3], "int64"), 0, 0, 1),  # a 1-D y: the API reads it as [1, 3]
            fill(m, paddle.to_tensor([-5, -6], "int64"), 1, 1, 0),
        ]

    check(pir_program(tmp_path, build, {"x": x, "w": w, "m": m}), {"fill_diagonal_tensor"})


# -- shape predicates and masks -----------------------------------------------------------------------------
def test_is_empty_and_sequence_mask(tmp_path):
    import paddle

    lengths = np.array([[2, 0], [5, 3]], np.int64)
    floats = np.array([1.7, 2.6, 0.2], np.float32)  # the longest, 2.6, sets maxlen 2 (truncated)
    short = np.array([1, 3], np.int32)
    cap = np.array([4], np.int32)
    empty = np.zeros((0, 3), np.float32)

    def build(lengths, floats, short, cap, empty):
        mask = paddle.nn.functional.sequence_mask
        return [
            paddle.is_empty(empty), paddle.is_empty(lengths), paddle.is_empty(floats),
            mask(lengths), mask(lengths, maxlen=4, dtype="float32"), mask(lengths, maxlen=1, dtype="bool"),
            mask(floats, maxlen=3, dtype="int32"), mask(floats), mask(short, maxlen=cap, dtype="float64"),
        ]

    check(pir_program(tmp_path, build, {"lengths": lengths, "floats": floats, "short": short, "cap": cap,
                                        "empty": empty}), {"is_empty", "sequence_mask"})


# -- inputs Paddle's kernels reject --------------------------------------------------------------------------
REJECTED = {
    # case: (legacy op, its inputs, feeds, attrs, our message, the same call through paddle._C_ops)
    "isclose_shapes": ("isclose", {"Input": ["a"], "Other": ["b"]},
                       {"a": np.ones((2, 3), np.float32), "b": np.ones((3,), np.float32)}, {},
                       "must have one shape", lambda c, a, b: c.isclose(a, b, 1e-5, 1e-8, False)),
    "variance_int": ("variance", {"x": ["a"]}, {"a": np.ones((2, 3), np.int64)}, {"axis": [0]},
                     "no int64 form", lambda c, a: c.variance(a, [0], False)),
    "var_axis_twice": ("var", {"x": ["a"]}, {"a": np.ones((2, 3), np.float32)}, {"axis": [1, -1]},
                       "names a dimension twice", lambda c, a: c.var(a, [1, -1], False, True, 1.0)),
    "fill_diagonal_tensor_y": ("fill_diagonal_tensor", {"X": ["a"], "Y": ["b"]},
                               {"a": np.ones((2, 3, 4), np.float32), "b": np.ones((3, 2), np.float32)},
                               {"dim1": 1, "dim2": 2}, "must read as \\[2, 3\\]",
                               lambda c, a, b: c.fill_diagonal_tensor(a, b, 0, 1, 2)),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_rejected_like_paddle(tmp_path, case):
    """What Paddle refuses (its infermeta or kernel, checked here in dygraph), ours refuses with a message naming
    it. PIR cannot even build these programs, so they are written as legacy OpDescs."""
    import paddle

    op_type, inputs, feeds, attrs, message, paddle_call = REJECTED[case]
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"out" if "x" in inputs else "Out": ["out"]},
                           attrs=attrs, feeds=feeds, run_paddle=False)
    with pytest.raises(HostKernelError, match=message):
        run_on_host(saved)
    with pytest.raises((ValueError, RuntimeError, TypeError, NotImplementedError)):
        paddle_call(ops(), *(paddle.to_tensor(value) for value in feeds.values()))
