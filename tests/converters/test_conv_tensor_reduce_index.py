"""Converters for reductions, arg max/min, cumsum, top-k/argsort and indexing (gather, index_select,
lookup_table, one_hot_v2, tril_triu), end to end against Paddle running the same saved program.

Ops paddle 3.3.1 cannot build in legacy static mode (arg_max, reduce_sum, reduce_any/all, logsumexp,
tril_triu, roll...) are written as OpDescs; Paddle still executes them for the reference.
Float inputs are distinct random values, so sorting and top-k have no ties to break.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import ConversionError
from support.converter_harness import check_program, convert_and_run, opdesc_program, run_opdesc, run_static

rng = np.random.default_rng(1121)


def rand(shape, dtype="float32"):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in ("int32", "int64"):
        # distinct values (a permutation), so arg/top-k results are unique
        n = int(np.prod(shape))
        return (rng.permutation(n) - n // 2).reshape(shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# -- reduce_* ------------------------------------------------------------------------------------------


REDUCE_CASES = [(None, False), ([1], False), ([1], True), ([-1, 0], False), ([0, 1, 2], True)]


@pytest.mark.parametrize("axis,keepdim", REDUCE_CASES)
@pytest.mark.parametrize("api", ["mean", "max", "min"])
def test_reduce_static(tmp_path, api, axis, keepdim):
    import paddle

    # paddle.mean/max/min emit "reduce_mean"/"reduce_max"/"reduce_min" (axis None: reduce_all=True)
    fn = getattr(paddle, api)
    run_static(tmp_path, f"reduce_{api}", lambda x: fn(x, axis=axis, keepdim=keepdim), {"x": rand((2, 3, 4))})


@pytest.mark.parametrize("op_type", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_reduce_max_min_integers(tmp_path, op_type, dtype):
    x = rand((3, 4), dtype)
    x[0, 0] = np.iinfo(dtype).min  # the complement trick must not overflow at the extremes
    x[1, 1] = np.iinfo(dtype).max
    run_opdesc(tmp_path, op_type, {"X": ["x"]}, {"Out": ["y"]}, {"dim": [1], "keep_dim": False}, {"x": x})


@pytest.mark.parametrize("attrs", [{"dim": [1], "keep_dim": False}, {"dim": [0, 2], "keep_dim": True},
                                   {"dim": [], "reduce_all": True}, {}, {"dim": [-1], "out_dtype": 5}])
def test_reduce_sum(tmp_path, attrs):
    # {}: Paddle's defaults dim=[0], keep_dim=False.
    run_opdesc(tmp_path, "reduce_sum", {"X": ["x"]}, {"Out": ["y"]}, attrs, {"x": rand((2, 3, 4))})


@pytest.mark.parametrize("dtype,out_dtype", [("int32", -1), ("int64", -1), ("bool", -1), ("int32", 2),
                                             ("float32", 3)])
def test_reduce_sum_dtypes(tmp_path, dtype, out_dtype):
    # Paddle sums bool/int32 into int64 unless out_dtype (VarType code) says otherwise.
    x = rand((3, 4), dtype) if dtype != "float32" else (rand((3, 4)) * 10)
    got, _ = run_opdesc(tmp_path, "reduce_sum", {"X": ["x"]}, {"Out": ["y"]},
                        {"dim": [1], "keep_dim": False, "out_dtype": out_dtype}, {"x": x})
    want_dtype = {2: np.int32, 3: np.int64}.get(out_dtype, np.int64 if dtype in ("int32", "bool") else x.dtype)
    assert got["y"].dtype == want_dtype


def test_reduce_mean_out_dtype(tmp_path):
    run_opdesc(tmp_path, "reduce_mean", {"X": ["x"]}, {"Out": ["y"]}, {"dim": [0], "out_dtype": 5},
               {"x": rand((4, 3))})


@pytest.mark.parametrize("op_type", ["reduce_any", "reduce_all"])
@pytest.mark.parametrize("attrs", [{"dim": [1], "keep_dim": False}, {"dim": [0], "keep_dim": True},
                                   {"dim": [], "reduce_all": True}])
def test_reduce_any_all(tmp_path, op_type, attrs):
    x = rand((3, 4, 2), "bool")
    x[0] = True  # rows of every kind: all true, all false, mixed
    x[1] = False
    run_opdesc(tmp_path, op_type, {"X": ["x"]}, {"Out": ["y"]}, attrs, {"x": x})


@pytest.mark.parametrize("attrs", [{"axis": [1], "keepdim": False}, {"axis": [0, -1], "keepdim": True},
                                   {"axis": [], "reduce_all": True}, {"reduce_all": True, "keepdim": True}])
def test_logsumexp(tmp_path, attrs):
    x = rand((2, 3, 4)) * 30  # large magnitudes: the unshifted formula would overflow exp
    run_opdesc(tmp_path, "logsumexp", {"X": ["x"]}, {"Out": ["y"]}, attrs, {"x": x})


@pytest.mark.parametrize("attrs", [{"keepdim": False}, {"keepdim": True}, {}])
def test_logsumexp_missing_axis_reduces_every_axis(tmp_path, attrs):
    # No `axis` attr: Paddle's op default is [] with reduce_all False, which reduces every axis.
    saved = opdesc_program(tmp_path, "logsumexp", inputs={"X": ["x"]}, outputs={"Out": ["y"]}, attrs=attrs,
                           feeds={"x": rand((2, 3, 4, 5))})
    assert saved.outputs[0].shape == ((1, 1, 1, 1) if attrs.get("keepdim") else ())
    check_program(saved)


# -- arg_max / arg_min ----------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["arg_max", "arg_min"])
@pytest.mark.parametrize(
    "attrs",
    [
        {"axis": 1, "keepdims": False, "dtype": 3},
        {"axis": -1, "keepdims": True, "dtype": 2},
        {"axis": 0, "flatten": True, "keepdims": False, "dtype": 3},
        {"axis": 0, "flatten": True, "keepdims": True, "dtype": 2},
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_arg_max_min(tmp_path, op_type, attrs, dtype):
    got, _ = run_opdesc(tmp_path, op_type, {"X": ["x"]}, {"Out": ["y"]}, attrs, {"x": rand((2, 3, 4), dtype)})
    assert got["y"].dtype == (np.int32 if attrs["dtype"] == 2 else np.int64)


def test_arg_max_bad_dtype_rejected(tmp_path):
    saved = opdesc_program(tmp_path, "arg_max", inputs={"X": ["x"]}, outputs={"Out": ["y"]},
                           attrs={"axis": 0, "dtype": 5}, feeds={"x": rand((2, 3))}, run_paddle=False)
    with pytest.raises(ConversionError, match="dtype"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


# -- cumsum ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_cumsum_static(tmp_path, axis, dtype):
    import paddle

    # axis None -> flatten=True
    run_static(tmp_path, "cumsum", lambda x: paddle.cumsum(x, axis=axis), {"x": rand((2, 3, 4), dtype)})


@pytest.mark.parametrize("exclusive,reverse", [(True, False), (False, True), (True, True)])
def test_cumsum_exclusive_reverse(tmp_path, exclusive, reverse):
    run_opdesc(tmp_path, "cumsum", {"X": ["x"]}, {"Out": ["y"]},
               {"axis": 1, "exclusive": exclusive, "reverse": reverse, "flatten": False}, {"x": rand((3, 4))})


@pytest.mark.parametrize("axis, keepdim", [(1, False), (-1, True), ([0, 2], False), (None, False)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_reduce_prod(tmp_path, axis, keepdim, dtype):
    import paddle

    x = rand((2, 3, 4), dtype) if dtype == "float32" else np.random.default_rng(3).integers(-3, 4, (2, 3, 4))
    run_static(tmp_path, "reduce_prod", lambda x: paddle.prod(x, axis=axis, keepdim=keepdim),
               {"x": np.asarray(x, dtype)})


def test_reduce_prod_of_a_shape_runs_on_the_device(tmp_path):
    """Deformable DETR's level sizes: the product of each level's [H, W] (int64), an axis of length 2."""
    import paddle

    shapes = np.array([[16, 20], [8, 10], [4, 5]], np.int64)
    run_static(tmp_path, "reduce_prod", lambda s: paddle.prod(s, axis=1), {"s": shapes})


def test_reduce_prod_over_a_long_axis_is_left_to_the_host(tmp_path):
    import paddle

    with pytest.raises(ConversionError, match="slices"):
        run_static(tmp_path, "reduce_prod", lambda x: paddle.prod(x, axis=1), {"x": rand((2, 80))})


# -- top_k / top_k_v2 / argsort -----------------------------------------------------------------------------


@pytest.mark.parametrize("k,axis,largest", [(2, 1, True), (1, -1, False), (4, -1, True), (3, 0, False)])
def test_top_k_v2(tmp_path, k, axis, largest):
    import paddle

    # paddle.topk emits "top_k_v2"
    run_static(
        tmp_path, "top_k_v2", lambda x: paddle.topk(x, k, axis=axis, largest=largest), {"x": rand((3, 4, 4))}
    )


def test_a_top_k_of_integer_keys_is_left_to_the_host(tmp_path):
    """Integer keys tie as a rule; Paddle's top_k orders equal keys as std::partial_sort / std::nth_element leave
    them, which TOP_K (by index) does not: the converter declines, the host kernel runs it (tests/host)."""
    import paddle

    with pytest.raises(ConversionError, match="tie"):
        run_static(tmp_path, "top_k_v2", lambda x: paddle.topk(x, 2, axis=1), {"x": rand((3, 4), "int32")})


def test_top_k_v2_k_tensor(tmp_path):
    import paddle

    feeds = {"x": rand((3, 5)), "k": np.array([3], "int32")}
    run_static(tmp_path, "top_k_v2", lambda x, k: paddle.topk(x, k, axis=1), feeds)


@pytest.mark.parametrize("attrs", [{"k": 2}, {"k": 3, "axis": 1, "largest": False}])
def test_top_k_v2_attrs(tmp_path, attrs):
    run_opdesc(tmp_path, "top_k_v2", {"X": ["x"]}, {"Out": ["y"], "Indices": ["i"]}, attrs, {"x": rand((2, 6, 3))})


def test_top_k_v2_unsorted_is_left_to_the_host(tmp_path):
    # sorted=False: Paddle's CPU kernel gives the k keys in the order std::nth_element leaves them, TOP_K sorted;
    # the host kernel replays Paddle's (tests/host: test_top_k_orders_equal_keys_as_paddle)
    attrs = {"k": 3, "axis": 1, "largest": True, "sorted": False}
    saved = opdesc_program(tmp_path, "top_k_v2", inputs={"X": ["x"]}, outputs={"Out": ["y"], "Indices": ["i"]},
                           attrs=attrs, feeds={"x": rand((2, 6, 3))})
    with pytest.raises(ConversionError, match="sorted=False"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


@pytest.mark.parametrize("k", [1, 3])
def test_top_k_v1(tmp_path, k):
    run_opdesc(tmp_path, "top_k", {"X": ["x"]}, {"Out": ["y"], "Indices": ["i"]}, {"k": k}, {"x": rand((2, 3, 4))})


def test_top_k_v1_k_tensor(tmp_path):
    run_opdesc(tmp_path, "top_k", {"X": ["x"], "K": ["k"]}, {"Out": ["y"], "Indices": ["i"]}, {"k": 1},
               {"x": rand((2, 5)), "k": np.array([2], "int32")})


@pytest.mark.parametrize("axis,descending", [(-1, False), (1, True), (0, False)])
@pytest.mark.parametrize("dtype, stable", [("float32", False), ("int64", True)])
def test_argsort(tmp_path, axis, descending, dtype, stable):
    import paddle

    # paddle.argsort emits "argsort"; fetch the sorted values too (paddle.sort is the same op).
    def build(x):
        return [paddle.argsort(x, axis=axis, descending=descending, stable=stable),
                paddle.sort(x, axis=axis, descending=descending, stable=stable)]

    run_static(tmp_path, "argsort", build, {"x": rand((3, 4, 2), dtype)})


def test_an_unstable_argsort_of_integer_keys_is_left_to_the_host(tmp_path):
    """Integer keys tie as a rule; Paddle's unstable argsort orders equal keys as std::sort leaves them, which
    TOP_K (by index) does not: the converter declines, the host kernel runs it (tests/host)."""
    import paddle

    with pytest.raises(ConversionError, match="tie"):
        run_static(tmp_path, "argsort", lambda x: paddle.argsort(x, axis=-1), {"x": rand((3, 4), "int64")})


# -- gather / index_select -----------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_gather(tmp_path, axis, index_dtype):
    import paddle

    feeds = {"x": rand((3, 4, 5)), "i": np.array([2, 0, 2], index_dtype)}
    run_static(tmp_path, "gather", lambda x, i: paddle.gather(x, i, axis=axis), feeds)


def test_gather_axis_tensor_param_and_column_index(tmp_path):
    run_opdesc(tmp_path, "gather", {"X": ["x"], "Index": ["i"], "Axis": ["a"]}, {"Out": ["y"]}, {},
               {"x": rand((3, 4), "int64"), "i": np.array([[3], [1]], "int64")}, params={"a": np.array([1], "int32")})


def test_gather_runtime_axis_rejected(tmp_path):
    saved = opdesc_program(tmp_path, "gather", inputs={"X": ["x"], "Index": ["i"], "Axis": ["a"]},
                           outputs={"Out": ["y"]}, feeds={"x": rand((3, 4)), "i": np.array([1], "int64"),
                                                          "a": np.array([1], "int32")}, run_paddle=False)
    with pytest.raises(ConversionError, match="Axis"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(tmp_path, dim):
    import paddle

    feeds = {"x": rand((3, 4), "int32"), "i": np.array([1, 0, 2, 1], "int64")}
    run_static(tmp_path, "index_select", lambda x, i: paddle.index_select(x, i, axis=dim), feeds)


# -- lookup_table / lookup_table_v2 --------------------------------------------------------------------------


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
@pytest.mark.parametrize("ids_shape", [(5,), (2, 3)])
def test_lookup_table_v2(tmp_path, padding_idx, ids_shape):
    import paddle

    # paddle.nn.functional.embedding emits "lookup_table_v2"; a negative padding_idx counts from the end.
    def build(ids):
        weight = paddle.static.create_parameter([6, 4], "float32")
        return paddle.nn.functional.embedding(ids, weight, padding_idx=padding_idx)

    ids = rng.integers(0, 6, ids_shape).astype("int64")
    ids.reshape(-1)[:2] = [2, 5]  # the padding rows appear
    run_static(tmp_path, "lookup_table_v2", build, {"ids": ids})


def test_lookup_table_v2_runtime_table(tmp_path):
    # W is a feed here: the padding row is masked with WHERE at run time.
    ids = np.array([[0, 3], [3, 1]], "int64")
    run_opdesc(tmp_path, "lookup_table_v2", {"Ids": ["ids"], "W": ["w"]}, {"Out": ["y"]}, {"padding_idx": 3},
               {"ids": ids, "w": rand((4, 3))})


@pytest.mark.parametrize("padding_idx", [-1, 1])
def test_lookup_table_v1(tmp_path, padding_idx):
    ids = np.array([[1], [0], [3], [1]], "int64")  # v1 ids end in a size-1 dim
    run_opdesc(tmp_path, "lookup_table", {"Ids": ["ids"], "W": ["w"]}, {"Out": ["y"]}, {"padding_idx": padding_idx},
               {"ids": ids}, params={"w": rand((4, 3))})


# -- one_hot_v2 / tril_triu -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,depth", [((4,), 5), ((2, 3), 3)])
def test_one_hot_v2(tmp_path, shape, depth):
    import paddle

    # paddle.nn.functional.one_hot emits "one_hot_v2" (float32 output)
    ids = rng.integers(0, depth, shape).astype("int64")
    run_static(tmp_path, "one_hot_v2", lambda x: paddle.nn.functional.one_hot(x, depth), {"x": ids})


def test_one_hot_v2_depth_tensor_and_dtype(tmp_path):
    ids = np.array([0, 2, 1, 3], "int32")
    run_opdesc(tmp_path, "one_hot_v2", {"X": ["x"], "depth_tensor": ["d"]}, {"Out": ["y"]},
               {"dtype": 3, "depth": -1, "allow_out_of_range": False}, {"x": ids, "d": np.array([4], "int32")})


@pytest.mark.parametrize("diagonal,lower", [(0, True), (1, True), (-1, True), (0, False), (2, False), (-2, False)])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])  # bool: QWen's causal mask, tril of a full True
def test_tril_triu(tmp_path, diagonal, lower, dtype):
    run_opdesc(tmp_path, "tril_triu", {"X": ["x"]}, {"Out": ["y"]}, {"diagonal": diagonal, "lower": lower},
               {"x": rand((2, 3, 5), dtype)})


# -- diag_v2 ---------------------------------------------------------------------------------------------------
# Before its converter, diag_v2 ran only as a host kernel (CCNet's criss-cross attention masks its scores with
# -diag(inf): the op stayed on the host on every device).


@pytest.mark.parametrize("offset", [0, 2, -1])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_diag_v2_vector_to_matrix(tmp_path, offset, dtype):
    import paddle

    run_static(tmp_path, "diag_v2", lambda x: paddle.diag(x, offset=offset, padding_value=7),
               {"x": rand((4,), dtype)})


@pytest.mark.parametrize("offset", [0, 1, -2, 3])
def test_diag_v2_matrix_to_vector(tmp_path, offset):
    import paddle

    run_static(tmp_path, "diag_v2", lambda x: paddle.diag(x, offset=offset), {"x": rand((3, 5))})


def test_diag_v2_of_infinity_keeps_the_padding_finite(tmp_path):
    """CCNet's mask: diag of infinities is inf on the diagonal and exactly 0 elsewhere (a product with a 0/1 mask
    would give NaN there)."""
    import paddle

    got, _ = run_static(tmp_path, "diag_v2", lambda x: paddle.diag(x), {"x": np.full((3,), np.inf, "float32")})
    out = got[next(iter(got))]
    assert np.isinf(out[np.eye(3, dtype=bool)]).all() and (out[~np.eye(3, dtype=bool)] == 0).all()
