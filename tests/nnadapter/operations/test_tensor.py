"""The standard's references (what builtin_device runs) against independent expectations: shape and
tensor manipulation, reductions, cumulative sum, arg max/min and top-k.

Expectations come from Paddle's dygraph ops; where Paddle has no matching op (GATHER with a rank-2
index, FILL_LIKE's typed output, RANGE computed at run time...) a numpy formula written from the spec.
`run_op` also checks that every dim prepare claims to know equals the real output shape.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.conformance.harness import Const, Quant, run_op
from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import OperandType
from support.tolerances import assert_op_close

rng = np.random.default_rng(20240611)

I32, I64 = int(Precision.INT32), int(Precision.INT64)


def pd():
    import paddle

    return paddle


def pt(array):
    return pd().to_tensor(array)


def ints(values, dtype=np.int32):
    return Const(np.array(values, dtype=dtype))


def data(shape, dtype=np.float32):
    """Random test data of `dtype`: floats ~N(0,1), ints in [-50, 50), bools half true."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def distinct(shape, dtype=np.float32):
    """Values without ties (a shuffled range), so argmax/top-k indices are unique."""
    n = int(np.prod(shape))
    return (rng.permutation(n) - n // 2).astype(dtype).reshape(shape)


SHAPES = [(5,), (3, 4), (2, 3, 4), (2, 3, 2, 5), (2, 1, 3, 2, 3)]
DTYPES = [np.float32, np.int32, np.int64, np.bool_]


# -- reductions ------------------------------------------------------------------------------------------

REDUCE_CASES = [
    ((5,), [0]), ((5,), []), ((3, 4), [1]), ((3, 4), [-1, 0]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-2]),
    ((2, 3, 2, 5), [1, 3]), ((2, 3, 2, 5), []), ((2, 1, 3, 2, 3), [-1, -3, 0]), ((2, 1, 3, 2, 3), [4]),
]


@pytest.mark.parametrize("shape,axes", REDUCE_CASES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("kind", ["mean", "max", "sum"])
def test_reduce_matches_paddle(kind, shape, axes, keepdim):
    x = data(shape)
    code = {"mean": T.REDUCE_MEAN, "max": T.REDUCE_MAX, "sum": T.REDUCE_SUM}[kind]
    (got,) = run_op(code, [x, ints(axes), keepdim])
    fn = {"mean": pd().mean, "max": pd().max, "sum": pd().sum}[kind]
    want = fn(pt(x), axis=axes or None, keepdim=keepdim).numpy()
    assert_op_close(got, want, what=f"REDUCE_{kind.upper()} {shape} {axes} keepdim={keepdim}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("kind", ["max", "sum"])
def test_reduce_integers_keep_their_type(kind, dtype):
    x = data((3, 4, 2), dtype)
    code = T.REDUCE_MAX if kind == "max" else T.REDUCE_SUM
    (got,) = run_op(code, [x, ints([0, 2]), False])
    # paddle.sum widens int32 to int64; the NNAdapter output keeps the input's type.
    want = getattr(pd(), kind)(pt(x), axis=[0, 2]).numpy().astype(dtype)
    assert got.dtype == dtype
    assert_op_close(got, want, what=f"REDUCE_{kind.upper()} {np.dtype(dtype)}")


def test_reduce_mean_quantized():
    q = rng.integers(-100, 100, size=(2, 3, 4)).astype(np.int8)
    (got,) = run_op(T.REDUCE_MEAN, [Quant(q, scale=0.05), ints([1]), True],
                    output_types=[OperandType(Precision.QUANT_INT8_SYMM_PER_LAYER, scale=0.05)])
    real = pd().mean(pt(q.astype(np.float32) * 0.05), axis=1, keepdim=True).numpy()
    want = np.clip(np.rint(real / 0.05), -128, 127).astype(np.int8)
    # Rounding of a mean that lands on .5 can differ by one step between float paths.
    assert np.abs(got.astype(np.int32) - want).max() <= 1


# -- arg max / arg min -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), -1), ((2, 3, 2, 5), 2),
                                        ((2, 1, 3, 2, 3), -4)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [I32, I64])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_arg_max_min_match_paddle(kind, shape, axis, keepdim, dtype):
    x = distinct(shape)
    code = T.ARG_MAX if kind == "max" else T.ARG_MIN
    (got,) = run_op(code, [x, axis, keepdim, dtype])
    fn = pd().argmax if kind == "max" else pd().argmin
    want = fn(pt(x), axis=axis, keepdim=keepdim, dtype="int32" if dtype == I32 else "int64").numpy()
    assert got.dtype == (np.int32 if dtype == I32 else np.int64)
    assert_op_close(got, want, what=f"ARG_{kind.upper()} {shape} axis={axis}")


@pytest.mark.parametrize("kind", ["max", "min"])
def test_arg_ties_pick_first_and_default_dtype_is_int64(kind):
    x = np.array([[1, 3, 3, 0, 0], [2, 2, 2, 2, 2]], dtype=np.int32)
    code = T.ARG_MAX if kind == "max" else T.ARG_MIN
    (got,) = run_op(code, [x, 1, False])  # dtype operand left out: INT64
    fn = pd().argmax if kind == "max" else pd().argmin
    want = fn(pt(x), axis=1).numpy()
    assert got.dtype == np.int64
    assert_op_close(got, want, what=f"ARG_{kind.upper()} ties")


# -- cumulative sum --------------------------------------------------------------------------------------


def cumsum_formula(x, axis, exclusive, reverse):
    """Spec: running sum; exclusive shifts so the first is 0; reverse runs from the end."""
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y.astype(np.float64), axis=axis)
    if exclusive:
        c = c - y
    return (np.flip(c, axis) if reverse else c).astype(x.dtype)


@pytest.mark.parametrize("shape,axis", [((6,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 2, 5), -3)])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cum_sum(shape, axis, exclusive, reverse):
    x = data(shape)
    (got,) = run_op(T.CUM_SUM, [x, axis, exclusive, reverse])
    if not exclusive and not reverse:
        want = pd().cumsum(pt(x), axis=axis).numpy()
    else:
        want = cumsum_formula(x, axis, exclusive, reverse)
    assert_op_close(got, want, what=f"CUM_SUM {shape} axis={axis} excl={exclusive} rev={reverse}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_cum_sum_integers_and_default_axis(dtype):
    x = data((3, 5), dtype)
    (got,) = run_op(T.CUM_SUM, [x])  # axis, exclusive, reverse left out: -1, false, false
    want = pd().cumsum(pt(x), axis=-1).numpy()
    assert got.dtype == dtype
    assert_op_close(got, want, what="CUM_SUM int")


# -- top-k -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,k,axis", [((7,), 3, 0), ((4, 6), 2, -1), ((4, 6), 4, 0), ((2, 3, 5), 5, 2),
                                          ((2, 5, 3), 1, 1), ((2, 3, 2, 4), 2, -2)])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [I32, I64])
def test_top_k_matches_paddle(shape, k, axis, largest, dtype):
    x = distinct(shape)
    values, indices = run_op(T.TOP_K, [x, k, axis, largest, True, dtype], n_outputs=2)
    want_v, want_i = pd().topk(pt(x), k, axis=axis, largest=largest, sorted=True)
    assert indices.dtype == (np.int32 if dtype == I32 else np.int64)
    assert_op_close(values, want_v.numpy(), what="TOP_K values")
    assert_op_close(indices, want_i.numpy(), what="TOP_K indices")


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
@pytest.mark.parametrize("largest", [True, False])
def test_top_k_with_ties_values_and_index_consistency(dtype, largest):
    x = rng.integers(0, 3, size=(3, 8)).astype(dtype)
    values, indices = run_op(T.TOP_K, [x, Const(np.array([4], np.int64)), 1, largest, True, I64], n_outputs=2)
    want_v, _ = pd().topk(pt(x), 4, axis=1, largest=largest)
    # Paddle's CPU top-k orders tied values arbitrarily (partial_sort), so only values are compared;
    # the indices must still point at those values and be distinct.
    assert_op_close(values, want_v.numpy(), what="TOP_K tie values")
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=1), values)
    assert all(len(set(row)) == 4 for row in indices.tolist())


def test_top_k_with_k_computed_at_run_time():
    x = distinct((3, 9))
    values, indices = run_op(T.TOP_K, [x, np.array([4], np.int32), -1, True, True, I32], n_outputs=2)
    want_v, want_i = pd().topk(pt(x), 4, axis=-1)
    assert_op_close(values, want_v.numpy(), what="TOP_K runtime k values")
    assert_op_close(indices, want_i.numpy(), what="TOP_K runtime k indices")


# -- reshape, flatten, squeeze, unsqueeze, transpose -----------------------------------------------------


@pytest.mark.parametrize("shape,target", [((24,), [2, 3, 4]), ((2, 3, 4), [0, -1]), ((2, 3, 4), [-1]),
                                          ((2, 3, 4), [4, 0, 2]), ((2, 3, 2, 5), [0, 0, -1]),
                                          ((2, 1, 3, 2, 3), [6, -1, 1, 3]), ((3, 4), [1, 1, 12, 1, 1])])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_matches_paddle(shape, target, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.RESHAPE, [x, ints(target)])
    want = pd().reshape(pt(x), target).numpy()
    assert_op_close(got, want, what=f"RESHAPE {shape} -> {target}")


@pytest.mark.parametrize("shape_dtype", [np.int32, np.int64])
def test_reshape_shape_computed_at_run_time(shape_dtype):
    x = data((2, 3, 4))
    shape = np.array([4, 0, -1], dtype=shape_dtype)  # a model input: known only at run time
    model_out = run_op(T.RESHAPE, [x, shape])[0]
    want = pd().reshape(pt(x), shape.tolist()).numpy()
    assert_op_close(model_out, want, what="RESHAPE runtime shape")


def test_reshape_rejects_bad_shapes():
    x = data((2, 3, 4))
    with pytest.raises(OperationError):
        run_op(T.RESHAPE, [x, ints([5, -1])])
    with pytest.raises(OperationError):
        run_op(T.RESHAPE, [x, ints([-1, -1])])


@pytest.mark.parametrize("shape,start,end", [((5,), 0, 0), ((3, 4), 0, 1), ((2, 3, 4), 1, -1), ((2, 3, 4), 0, 1),
                                             ((2, 3, 2, 5), 1, 2), ((2, 3, 2, 5), -3, -1), ((2, 1, 3, 2, 3), 0, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_flatten_matches_paddle(shape, start, end, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.FLATTEN, [x, start, end])
    want = pd().flatten(pt(x), start_axis=start, stop_axis=end).numpy()
    assert_op_close(got, want, what=f"FLATTEN {shape} {start}..{end}")


@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 4), None), ((1, 3, 1, 4), []), ((1, 3, 1, 4), [0]),
                                        ((1, 3, 1, 4), [-2, 0]), ((2, 1), [-1]), ((1,), None),
                                        ((1, 3, 1, 4), [1]),  # Paddle ignores a named axis that is not 1
                                        ((2, 1, 3, 1, 1), [2, 3, -1])])
@pytest.mark.parametrize("dtype", DTYPES)
def test_squeeze_matches_paddle(shape, axes, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.SQUEEZE, [x, None if axes is None else ints(axes)])
    want = pd().squeeze(pt(x), axis=axes).numpy()
    assert_op_close(got, want, what=f"SQUEEZE {shape} {axes}")


@pytest.mark.parametrize("shape,axes", [((5,), [0]), ((5,), [-1]), ((3, 4), [0, 0]), ((3, 4), [-1, -1]),
                                        ((3, 4), [2, 0]), ((2, 3, 4), [-1, 0]), ((2, 3, 4), [1, 3]),
                                        ((2, 3, 2, 5), [4])])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unsqueeze_matches_paddle(shape, axes, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.UNSQUEEZE, [x, ints(axes)])
    want = pd().unsqueeze(pt(x), axis=axes).numpy()
    assert_op_close(got, want, what=f"UNSQUEEZE {shape} {axes}")


@pytest.mark.parametrize("shape,perm", [((5,), [0]), ((3, 4), [1, 0]), ((2, 3, 4), [2, 0, 1]),
                                        ((2, 3, 2, 5), [0, 2, 3, 1]), ((2, 1, 3, 2, 3), [4, 3, 2, 1, 0])])
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_matches_paddle(shape, perm, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.TRANSPOSE, [x, ints(perm)])
    want = pd().transpose(pt(x), perm).numpy()
    assert_op_close(got, want, what=f"TRANSPOSE {shape} {perm}")


@pytest.mark.parametrize("shape,group", [((1, 6, 2, 2), 2), ((2, 6, 3, 3), 3), ((2, 8, 1, 5), 4), ((1, 4, 2, 2), 1)])
def test_channel_shuffle_matches_paddle(shape, group):
    x = data(shape)
    (got,) = run_op(T.CHANNEL_SHUFFLE, [x, group])
    want = pd().nn.functional.channel_shuffle(pt(x), group).numpy()
    assert_op_close(got, want, what=f"CHANNEL_SHUFFLE {shape} g={group}")


def test_channel_shuffle_formula_and_bad_group():
    x = np.arange(6, dtype=np.float32).reshape(1, 6, 1, 1)
    (got,) = run_op(T.CHANNEL_SHUFFLE, [x, 3])
    # C_out[k * group + g] = C_in[g * size + k], size = 6 / 3 = 2.
    want = np.array([x[0, g * 2 + k, 0, 0] for k in range(2) for g in range(3)], np.float32).reshape(1, 6, 1, 1)
    assert_op_close(got, want, what="CHANNEL_SHUFFLE formula")
    with pytest.raises(OperationError):
        run_op(T.CHANNEL_SHUFFLE, [x, 4])


# -- slice -----------------------------------------------------------------------------------------------

SLICE_CASES = [
    ((7,), [0], [1], [5], [1]),
    ((7,), [0], [-3], [100], [1]),  # end past the dim clamps
    ((7,), [0], [-100], [3], [1]),  # start before 0 clamps
    ((7,), [0], [6], [0], [-2]),
    ((7,), [0], [100], [-100], [-1]),  # full reverse, both bounds clamped
    ((7,), [0], [-1], [-8], [-1]),
    ((7,), [0], [5], [2], [1]),  # empty
    ((4, 6), [1], [1], [-1], [2]),
    ((4, 6), [0, 1], [3, 5], [0, 0], [-1, -2]),
    ((2, 3, 4), [-1, 0], [-3, 0], [4, 1], [1, 1]),
    ((2, 3, 4), [2], [2147483647], [-2147483648], [-1]),  # INT_MAX/INT_MIN as "to the end" markers
    ((2, 3, 2, 5), [1, 3], [0, 4], [3, 0], [2, -3]),
    ((2, 1, 3, 2, 3), [0, 2, 4], [1, -2, 0], [2, 3, 3], [1, 1, 2]),
]


@pytest.mark.parametrize("shape,axes,starts,ends,steps", SLICE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_slice_matches_paddle_strided_slice(shape, axes, starts, ends, steps, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.SLICE, [x, ints(axes), ints(starts), ints(ends), ints(steps)])
    # paddle.strided_slice takes only non-negative axes; the operation takes both.
    paddle_axes = [a % len(shape) for a in axes]
    want = pd().strided_slice(pt(x), axes=paddle_axes, starts=starts, ends=ends, strides=steps).numpy()
    assert_op_close(got, want, what=f"SLICE {shape} {axes} {starts} {ends} {steps}")


@pytest.mark.parametrize("shape,axes,starts,ends", [((4, 6), [1], [2], [5]), ((2, 3, 4), [0, 2], [1, -3], [2, 100])])
def test_slice_without_steps_matches_paddle_slice(shape, axes, starts, ends):
    x = data(shape)
    (got,) = run_op(T.SLICE, [x, ints(axes), ints(starts), ints(ends)])
    want = pd().slice(pt(x), axes=axes, starts=starts, ends=ends).numpy()
    assert_op_close(got, want, what="SLICE no steps")


def test_slice_null_axes_means_leading_axes():
    x = data((4, 5, 6))
    (got,) = run_op(T.SLICE, [x, None, ints([1, -4]), ints([3, 5]), None])
    want = pd().slice(pt(x), axes=[0, 1], starts=[1, -4], ends=[3, 5]).numpy()
    assert_op_close(got, want, what="SLICE null axes")


def test_slice_starts_computed_at_run_time():
    x = data((4, 6, 3))
    starts = np.array([1, 2], dtype=np.int32)
    model_out = run_op(T.SLICE, [x, ints([0, 1]), starts, ints([3, 6]), ints([1, 2])])[0]
    want = pd().strided_slice(pt(x), axes=[0, 1], starts=[1, 2], ends=[3, 6], strides=[1, 2]).numpy()
    assert_op_close(model_out, want, what="SLICE runtime starts")


# -- concat, stack, split, unstack, meshgrid -------------------------------------------------------------


@pytest.mark.parametrize("shape,axis,sizes", [((5,), 0, [5, 2]), ((3, 4), 1, [4, 1, 2]), ((3, 4), -2, [3, 3]),
                                              ((2, 3, 4), 2, [4, 4, 1]), ((2, 3, 2, 5), -3, [3, 1]),
                                              ((2, 1, 3, 2, 3), 4, [3, 2])])
@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_matches_paddle(shape, axis, sizes, dtype):
    parts = []
    for s in sizes:
        part_shape = list(shape)
        part_shape[axis] = s
        parts.append(data(tuple(part_shape), dtype))
    # The second part a constant: CONCAT joins model inputs and constants alike.
    inputs = [parts[0], Const(parts[1])] + parts[2:]
    (got,) = run_op(T.CONCAT, inputs + [axis])
    want = pd().concat([pt(p) for p in parts], axis=axis).numpy()
    assert_op_close(got, want, what=f"CONCAT {shape} axis={axis} {sizes}")


def test_concat_quantized_inputs_with_different_scales():
    a = rng.integers(-100, 100, size=(2, 3)).astype(np.int8)
    b = rng.integers(-100, 100, size=(2, 2)).astype(np.int8)
    (got,) = run_op(T.CONCAT, [Quant(a, scale=0.1), Quant(b, scale=0.05), 1])
    # The output takes input 0's scale; b is requantized from 0.05 to 0.1 steps.
    want = np.concatenate([a, np.clip(np.rint(b.astype(np.float32) * 0.05 / 0.1), -128, 127).astype(np.int8)], 1)
    assert_op_close(got, want, what="CONCAT quantized")


@pytest.mark.parametrize("shape,axis,n", [((5,), 0, 2), ((5,), -1, 3), ((3, 4), 1, 2), ((2, 3, 4), -4, 3),
                                          ((2, 3, 2, 5), 4, 2), ((2, 3, 2, 5), 2, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_stack_matches_paddle(shape, axis, n, dtype):
    parts = [data(shape, dtype) for _ in range(n)]
    (got,) = run_op(T.STACK, parts + [axis])
    want = pd().stack([pt(p) for p in parts], axis=axis).numpy()
    assert_op_close(got, want, what=f"STACK {shape} axis={axis} n={n}")


@pytest.mark.parametrize("shape,axis,sections", [((6,), 0, [2, 4]), ((6,), 0, [3, 3]), ((3, 7), 1, [2, 2, 3]),
                                                 ((3, 7), -1, [5, -1]), ((5, 2, 4), 0, [1, 1, 3]),
                                                 ((2, 3, 2, 5), -1, [1, 2, 1, 1]), ((2, 6, 3, 2, 3), 1, [-1, 4])])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_split_matches_paddle(shape, axis, sections, dtype):
    x = data(shape, dtype)
    got = run_op(T.SPLIT, [x, axis, ints(sections)], n_outputs=len(sections))
    want = pd().split(pt(x), sections, axis=axis)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_op_close(g, w.numpy(), what=f"SPLIT {shape} {sections} part {k}")


def test_split_rejects_wrong_total():
    with pytest.raises(OperationError):
        run_op(T.SPLIT, [data((3, 7)), 1, ints([2, 2])], n_outputs=2)


@pytest.mark.parametrize("shape,axis", [((4,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), -1), ((2, 3, 2, 5), 2)])
def test_unstack_matches_paddle(shape, axis):
    x = data(shape)
    num = shape[axis]
    got = run_op(T.UNSTACK, [x, axis, num], n_outputs=num)
    want = pd().unstack(pt(x), axis=axis, num=num)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_op_close(g, w.numpy(), what=f"UNSTACK {shape} axis={axis} part {k}")


@pytest.mark.parametrize("sizes", [[3], [3, 4], [2, 3, 4], [2, 1, 3, 2]])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_meshgrid_matches_paddle(sizes, dtype):
    vectors = [data((s,), dtype) for s in sizes]
    got = run_op(T.MESHGRID, vectors, n_outputs=len(vectors))
    want = pd().meshgrid(*[pt(v) for v in vectors])
    for k, (g, w) in enumerate(zip(got, want)):
        assert_op_close(g, w.numpy(), what=f"MESHGRID {sizes} grid {k}")


# -- tile, expand, gather, roll --------------------------------------------------------------------------


@pytest.mark.parametrize("shape,repeats", [((5,), [3]), ((3, 4), [2, 1]), ((2, 3, 4), [1, 2, 2]),
                                           ((3, 4), [2, 1, 3]), ((2, 3, 2, 5), [2]),
                                           ((2, 1, 3, 2, 3), [1, 3, 1, 1, 2])])
@pytest.mark.parametrize("dtype", DTYPES)
def test_tile_matches_paddle(shape, repeats, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.TILE, [x, ints(repeats)])
    want = pd().tile(pt(x), repeats).numpy()
    assert_op_close(got, want, what=f"TILE {shape} {repeats}")


@pytest.mark.parametrize("shape,target", [((1,), [4]), ((3, 1), [3, 5]), ((3, 1), [2, 3, 4]), ((2, 1, 4), [-1, 3, -1]),
                                          ((1, 3, 1, 2), [2, 3, 4, 2]), ((2, 1, 3, 1, 1), [2, 2, 3, 2, 3])])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape_dtype", [np.int32, np.int64])
def test_expand_matches_paddle(shape, target, dtype, shape_dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.EXPAND, [x, ints(target, shape_dtype)])
    want = pd().expand(pt(x), target).numpy()
    assert_op_close(got, want, what=f"EXPAND {shape} -> {target}")


@pytest.mark.parametrize("shape,axis,index", [((6,), 0, [5, 0, 2, 2]), ((4, 5), 1, [4, 0]), ((4, 5), -2, [3, 3, 1]),
                                              ((2, 3, 4), 2, [1]), ((2, 3, 2, 5), 3, [0, 4, 1, 2]),
                                              ((2, 3, 2, 2, 3), -1, [2, 0])])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gather_matches_paddle(shape, axis, index, dtype, index_dtype):
    x = data(shape, dtype)
    idx = np.array(index, dtype=index_dtype)
    (got,) = run_op(T.GATHER, [x, idx, axis])
    want = pd().gather(pt(x), pt(idx), axis=axis).numpy()
    assert_op_close(got, want, what=f"GATHER {shape} axis={axis} {index}")


def test_gather_with_rank2_indices_follows_spec_rank():
    x = data((4, 5, 3))
    idx = np.array([[0, 4], [2, 2], [1, 3]], dtype=np.int64)
    (got,) = run_op(T.GATHER, [x, Const(idx), 1])
    # Spec: output rank Q + R - 1, out[i, j, k, l] = x[i, idx[j, k], l].
    want = np.empty((4, 3, 2, 3), np.float32)
    for j in range(3):
        for k in range(2):
            want[:, j, k, :] = x[:, idx[j, k], :]
    assert_op_close(got, want, what="GATHER rank-2 index")


@pytest.mark.parametrize("shape,shifts,axes", [((7,), [2], [0]), ((7,), [-3], None), ((3, 4), [1, -1], [0, 1]),
                                               ((3, 4), [5], None), ((2, 3, 4), [2], [-1]),
                                               ((2, 3, 2, 5), [1, 7], [1, 3]), ((2, 1, 3, 2, 3), [-1], [2])])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_roll_matches_paddle(shape, shifts, axes, dtype):
    x = data(shape, dtype)
    (got,) = run_op(T.ROLL, [x, ints(shifts), None if axes is None else ints(axes)])
    want = pd().roll(pt(x), shifts, axis=axes).numpy()
    assert_op_close(got, want, what=f"ROLL {shape} {shifts} {axes}")


# -- shape, fill, fill_like, range -----------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES + [(1,)])
@pytest.mark.parametrize("dtype", [I32, I64])
def test_shape_matches_paddle(shape, dtype):
    x = data(shape)
    (got,) = run_op(T.SHAPE, [x, dtype])
    want = pd().shape(pt(x)).numpy()
    assert got.dtype == (np.int32 if dtype == I32 else np.int64)
    assert_op_close(got, want, what=f"SHAPE {shape}")


def test_shape_of_quantized_input():
    q = rng.integers(-5, 5, size=(2, 3, 4)).astype(np.int8)
    (got,) = run_op(T.SHAPE, [Quant(q, scale=0.5), I64])
    assert_op_close(got, np.array([2, 3, 4], np.int64), what="SHAPE quantized")


FILL_VALUES = [np.float32(1.5), np.int32(-7), np.int64(2 ** 40), np.bool_(True)]


@pytest.mark.parametrize("shape", [[4], [2, 3], [2, 1, 3], [1, 2, 2, 1, 2]])
@pytest.mark.parametrize("value", FILL_VALUES, ids=lambda v: type(v).__name__)
def test_fill_matches_paddle_full(shape, value):
    (got,) = run_op(T.FILL, [ints(shape, np.int64), Const(np.array([value]))])
    want = pd().full(shape, value.item(), dtype=str(value.dtype)).numpy()
    assert_op_close(got, want, what=f"FILL {shape} {value!r}")


def test_fill_shape_computed_at_run_time():
    shape = np.array([3, 2], dtype=np.int32)
    (got,) = run_op(T.FILL, [shape, 0.25])
    want = pd().full([3, 2], 0.25, dtype="float32").numpy()
    assert_op_close(got, want, what="FILL runtime shape")


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), (2, 1, 3, 2, 3)])
@pytest.mark.parametrize("value", FILL_VALUES, ids=lambda v: type(v).__name__)
def test_fill_like_matches_paddle_full_like(shape, value):
    x = data(shape)
    (got,) = run_op(T.FILL_LIKE, [x, Const(np.array([value]))])
    # The output takes the value's type, not the input's (spec), so the dtype is passed explicitly.
    want = pd().full_like(pt(x), value.item(), dtype=str(value.dtype)).numpy()
    assert_op_close(got, want, what=f"FILL_LIKE {shape} {value!r}")


INT_RANGES = [(0, 10, 1), (2, 11, 3), (10, 0, -2), (-5, 5, 4), (3, 3, 1), (7, -8, -5)]
FLOAT_RANGES = [(0.0, 1.0, 0.1), (1.5, -2.0, -0.5), (-1.0, 2.3, 0.7), (0.0, 5.0, 1.0)]
RANGE_CASES = ([(b, dt) for b in INT_RANGES for dt in (np.int32, np.int64, np.float32)]
               + [(b, np.float32) for b in FLOAT_RANGES])


@pytest.mark.parametrize("bounds,dtype", RANGE_CASES)
def test_range_matches_paddle_arange(bounds, dtype):
    start, end, step = bounds
    (got,) = run_op(T.RANGE, [Const(np.array([v], dtype=dtype)) for v in bounds])
    want = pd().arange(start, end, step, dtype=np.dtype(dtype).name).numpy()
    assert_op_close(got, want, what=f"RANGE {start} {end} {step} {np.dtype(dtype)}")


def test_range_bounds_computed_at_run_time():
    start, end, step = (np.array([v], np.float32) for v in (0.5, 3.0, 0.5))
    (got,) = run_op(T.RANGE, [start, end, step])
    want = 0.5 + np.arange(5, dtype=np.float32) * 0.5  # spec: start, start+step, ... < end
    assert_op_close(got, want, what="RANGE runtime bounds")


# -- quantized data movement -----------------------------------------------------------------------------


@pytest.mark.parametrize("code,params,paddle_fn", [
    (T.RESHAPE, lambda: [ints([4, -1])], lambda x: pd().reshape(x, [4, -1])),
    (T.TRANSPOSE, lambda: [ints([1, 0, 2])], lambda x: pd().transpose(x, [1, 0, 2])),
    (T.SLICE, lambda: [ints([2]), ints([3]), ints([0]), ints([-1])],
     lambda x: pd().strided_slice(x, [2], [3], [0], [-1])),
    (T.TILE, lambda: [ints([1, 2, 1])], lambda x: pd().tile(x, [1, 2, 1])),
    (T.FLATTEN, lambda: [1, 2], lambda x: pd().flatten(x, 1, 2)),
])
def test_quantized_data_movement_is_exact(code, params, paddle_fn):
    q = rng.integers(-128, 128, size=(2, 3, 4)).astype(np.int8)
    (got,) = run_op(code, [Quant(q, scale=0.125)] + params())
    want = paddle_fn(pt(q)).numpy()
    assert got.dtype == np.int8
    assert_op_close(got, want, what=f"{code.name} quantized")


# -- shape inference with unknown and dynamic dims -------------------------------------------------------


def infer(code, input_type, params, n_outputs=1):
    """Add one operation with an input of `input_type` and constant params; return the output types."""
    model = Model()
    x = model.add_operand(input_type, "x")
    operands = [x] + [model.add_constant(np.asarray(p)) if p is not None else None for p in params]
    outs = [model.add_output(f"out{k}") for k in range(n_outputs)]
    model.add_operation(code, operands, outs)
    return [o.type for o in outs]


U = UNKNOWN
DYN = OperandType(Precision.FLOAT32, dims=(U, 3, U), dynamic_dims=((1, 3, 4), (8, 3, 16)))


@pytest.mark.parametrize("code,params,want_dims,want_dynamic", [
    (T.RESHAPE, [np.int32([0, -1])], (U, U), ((1, 12), (8, 48))),
    (T.RESHAPE, [np.int32([0, 3, -1])], (U, 3, U), ((1, 3, 4), (8, 3, 16))),
    (T.TRANSPOSE, [np.int32([2, 0, 1])], (U, U, 3), ((4, 1, 3), (16, 8, 3))),
    (T.FLATTEN, [np.int32(1), np.int32(2)], (U, U), ((1, 12), (8, 48))),
    (T.UNSQUEEZE, [np.int32([0, -1])], (1, U, 3, U, 1), ((1, 1, 3, 4, 1), (1, 8, 3, 16, 1))),
    (T.REDUCE_SUM, [np.int32([1]), np.bool_(True)], (U, 1, U), ((1, 1, 4), (8, 1, 16))),
    (T.REDUCE_MEAN, [np.int32([0, 2]), np.bool_(False)], (3,), ((3,), (3,))),
    (T.ARG_MAX, [np.int32(-1), np.bool_(False), np.int32(I32)], (U, 3), ((1, 3), (8, 3))),
    (T.SLICE, [np.int32([1]), np.int32([1]), np.int32([3]), np.int32([1])], (U, 2, U), ((1, 2, 4), (8, 2, 16))),
    (T.SLICE, [np.int32([2]), np.int32([0]), np.int32([2]), np.int32([1])], (U, 3, U), ((1, 3, 2), (8, 3, 2))),
    (T.TILE, [np.int32([2, 1, 3])], (U, 3, U), ((2, 3, 12), (16, 3, 48))),
    (T.EXPAND, [np.int32([2, -1, 3, -1])], (2, U, 3, U), ((2, 1, 3, 4), (2, 8, 3, 16))),
    (T.GATHER, [np.int32([0, 1, 0, 1]), np.int32(1)], (U, 4, U), ((1, 4, 4), (8, 4, 16))),
    (T.CUM_SUM, [np.int32(0), np.bool_(False), np.bool_(False)], (U, 3, U), ((1, 3, 4), (8, 3, 16))),
    (T.FILL_LIKE, [np.float32(2.0)], (U, 3, U), ((1, 3, 4), (8, 3, 16))),
])
def test_prepare_follows_dynamic_shapes(code, params, want_dims, want_dynamic):
    (t,) = infer(code, DYN, params)
    assert t.dims == want_dims
    assert t.dynamic_dims == want_dynamic


def test_prepare_split_and_concat_with_dynamic_shapes():
    parts = infer(T.SPLIT, DYN, [np.int32(1), np.int32([1, 2])], n_outputs=2)
    assert [p.dims for p in parts] == [(U, 1, U), (U, 2, U)]
    assert parts[1].dynamic_dims == ((1, 2, 4), (8, 2, 16))
    model = Model()
    a = model.add_operand(DYN, "a")
    b = model.add_operand(OperandType(Precision.FLOAT32, dims=(U, 5, U), dynamic_dims=((1, 5, 4), (8, 5, 16))), "b")
    out = model.add_output("out")
    model.add_operation(T.CONCAT, [a, b, model.add_constant(np.int32(1))], [out])
    assert out.type.dims == (U, 8, U)
    assert out.type.dynamic_dims == ((1, 8, 4), (8, 8, 16))


def test_prepare_runtime_parameters_give_unknown_dims_of_the_right_rank():
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, dims=(2, 3, 4)), "x")
    shape = model.add_operand(OperandType(Precision.INT32, dims=(2,)), "shape")
    start = model.add_operand(OperandType(Precision.INT32, dims=(1,)), "start")
    reshaped, sliced, filled, ranged = (model.add_output(n) for n in ("r", "s", "f", "g"))
    model.add_operation(T.RESHAPE, [x, shape], [reshaped])
    model.add_operation(T.SLICE, [x, model.add_constant(np.int32([1])), start,
                                  model.add_constant(np.int32([3])), None], [sliced])
    model.add_operation(T.FILL, [shape, model.add_constant(np.float32(1.0))], [filled])
    model.add_operation(T.RANGE, [start, start, start], [ranged])
    assert reshaped.type.dims == (U, U)
    assert sliced.type.dims == (2, U, 4)
    assert filled.type.dims == (U, U) and filled.type.precision == Precision.FLOAT32
    assert ranged.type.dims == (U,) and ranged.type.precision == Precision.INT32


def test_squeeze_keeps_unknown_dims_when_axes_are_null():
    (t,) = infer(T.SQUEEZE, OperandType(Precision.FLOAT32, dims=(1, U, 1, 3)), [None])
    assert t.dims == (U, 3)
    (t,) = infer(T.SQUEEZE, OperandType(Precision.FLOAT32, dims=(1, U, 1, 3)), [np.int32([1])])
    assert t.dims == (1, 1, 3)  # a named unknown axis is trusted to be 1


def test_signature_errors_name_the_operation():
    with pytest.raises(OperationError, match="ARG_MAX"):
        run_op(T.ARG_MAX, [data((3, 4)), 1, False, 3])  # dtype 3 is INT16, not an index type
    with pytest.raises(OperationError, match="TRANSPOSE"):
        run_op(T.TRANSPOSE, [data((3, 4)), ints([0, 0])])
    with pytest.raises(OperationError, match="CONCAT"):
        run_op(T.CONCAT, [data((3, 4)), data((3, 4), np.int32), 0])
