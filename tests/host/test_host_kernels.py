"""Host kernels against Paddle: each program is built (paddle static mode, or an OpDesc Paddle can run),
saved, loaded with our loader, and every op runs through its HOST KERNEL (forced, even where a converter
exists), compared with what Paddle computes for the same saved program.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.host import HOST_KERNELS, HostExecutor
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.loader.program import AttrType
from support.converter_harness import opdesc_program, static_program
from support.tolerances import assert_op_close

RNG = np.random.default_rng(5)


def run_on_host(saved):
    """Every op of block 0 with a host kernel through that kernel (forced), the rest (a layer's bias add,
    say) through the executor's converter path; the fetched outputs in fetch order."""
    graph = load_model(saved.model_path, saved.params_path)
    executor = HostExecutor(graph)
    scope = {**graph.params, **saved.feeds}
    kernels_run = 0
    for op in graph.ops():
        if op.type in ("feed", "fetch"):
            continue
        if op.type in HOST_KERNELS:
            executor.run_host_kernel(op, scope)
            kernels_run += 1
        else:
            executor.run(op, scope)
    assert kernels_run, "the program exercised no host kernel"
    return [scope[name] for name in graph.outputs]


def check(saved, *, atol=None, rtol=None, want=None):
    got = run_on_host(saved)
    want = saved.outputs if want is None else want
    assert len(got) == len(want)
    kwargs = {k: v for k, v in (("atol", atol), ("rtol", rtol)) if v is not None}
    for i, (g, w) in enumerate(zip(got, want)):
        assert_op_close(g, w, what=f"output {i}", **kwargs)
    return got


def one_op(tmp_path, op_type, inputs, outputs, feeds, attrs=None, out_dtypes=None, params=None):
    """An OpDesc program; `out_dtypes` {var: dtype} declares non-float32 outputs."""
    extra = [{"name": n, "dtype": d, "shape": []} for n, d in (out_dtypes or {}).items()]
    return opdesc_program(tmp_path, op_type, inputs=inputs, outputs=outputs, attrs=attrs or {}, feeds=feeds,
                          params=params, extra_vars=extra)


# -- elementwise math --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type,low,high", [
    ("erf", -4.0, 4.0), ("acos", -0.99, 0.99), ("asin", -0.99, 0.99), ("atan", -5.0, 5.0), ("tan", -1.4, 1.4),
    ("cosh", -3.0, 3.0), ("sinh", -3.0, 3.0)])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 4)])
def test_unary_math(tmp_path, op_type, low, high, shape):
    x = RNG.uniform(low, high, shape).astype(np.float32)
    saved = one_op(tmp_path, op_type, {"X": ["x"]}, {"Out": ["out"]}, {"x": x})
    # tan near +-1.4 and cosh/sinh at 3 reach ~10; float32 ulps there exceed the magnitude-1 atol
    check(saved, rtol=4e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atan2(tmp_path, dtype):
    x1 = RNG.standard_normal((3, 5)).astype(dtype)
    x2 = RNG.standard_normal((3, 5)).astype(dtype)
    x2[0, 0] = 0.0
    saved = one_op(tmp_path, "atan2", {"X1": ["a"], "X2": ["b"]}, {"Out": ["out"]}, {"a": x1, "b": x2},
                   out_dtypes={"out": dtype})
    check(saved)


@pytest.mark.parametrize("dim,keep_dim,reduce_all", [([1], False, False), ([0, 2], True, False),
                                                     ([-1], False, False), ([], False, True)])
def test_reduce_prod(tmp_path, dim, keep_dim, reduce_all):
    x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    saved = one_op(tmp_path, "reduce_prod", {"X": ["x"]}, {"Out": ["out"]}, {"x": x},
                   attrs={"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all})
    # rtol 1e-6 (not 6e-7): a product of up to 60 factors rounds once per factor, in another order than Paddle's
    check(saved, rtol=1e-6)


@pytest.mark.parametrize("shape", [(3, 4), (2, 0, 5), ()])
def test_size(tmp_path, shape):
    x = np.ones(shape, np.float32)
    saved = one_op(tmp_path, "size", {"Input": ["x"]}, {"Out": ["out"]}, {"x": x}, out_dtypes={"out": "int64"})
    check(saved)


# Bit for bit (rtol 0): float32 is computed in float32 (linspace(0, 1, 7)[4] is 0.6666666, not double's 0.6666667),
# an integer dtype truncates Start and Stop first (linspace(-2.5, 3, 10) as int64: -2, -1, 0, 0, ...).
@pytest.mark.parametrize("start,stop,num,dtype", [(0.0, 1.0, 7, 5), (-3.0, 10.0, 50, 5), (2.0, 2.0, 1, 5),
                                                  (0.0, 10.0, 6, 3), (1.0, -1.0, 11, 6), (-2.5, 3.0, 10, 3),
                                                  (-2.5, 3.0, 10, 5), (0.0, 10.0, 4, 5)])
def test_linspace(tmp_path, start, stop, num, dtype):
    feeds = {"start": np.array([start], np.float32), "stop": np.array([stop], np.float32),
             "num": np.array([num], np.int32)}
    np_dtype = {5: "float32", 3: "int64", 6: "float64"}[dtype]
    saved = one_op(tmp_path, "linspace", {"Start": ["start"], "Stop": ["stop"], "Num": ["num"]},
                   {"Out": ["out"]}, feeds, attrs={"dtype": dtype}, out_dtypes={"out": np_dtype})
    check(saved, atol=0.0, rtol=0.0)


@pytest.mark.parametrize("rows,cols,dtype", [(3, -1, 5), (2, 5, 5), (4, 3, 3)])
def test_eye(tmp_path, rows, cols, dtype):
    import os

    from devtools.zoo import write_program
    from support.converter_harness import _run_saved, paddle_static

    np_dtype = {5: "float32", 3: "int64"}[dtype]
    write_program(os.path.join(tmp_path, "__model__"), [{
        "vars": [{"name": "out", "dtype": np_dtype, "shape": []}],
        "ops": [{"type": "eye", "inputs": {}, "outputs": {"Out": ["out"]},
                 "attrs": {"num_rows": rows, "num_columns": cols, "dtype": dtype}}]}], feeds=[], fetches=["out"])
    with paddle_static() as paddle:
        want = _run_saved(paddle, str(tmp_path), "__model__", None, {})
    graph = load_model(os.path.join(tmp_path, "__model__"))
    scope = {}
    HostExecutor(graph).run_block(0, scope)
    assert_op_close(scope["out"], want[0], atol=0.0)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]), ("ii->i", [(4, 4)]),
    ("ij->ji", [(3, 5)]), ("i,j->ij", [(3,), (4,)]), ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)])])
def test_einsum(tmp_path, equation, shapes):
    def build(**xs):
        import paddle

        return paddle.einsum(equation, *[xs[f"x{i}"] for i in range(len(shapes))])

    feeds = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    saved = static_program(tmp_path, build, feeds)
    # rtol 1e-6 (not 6e-7): numpy's einsum contracts in another order than Paddle's
    check(saved, rtol=1e-6)


@pytest.mark.parametrize("op_type,attrs", [
    ("gaussian_random", {"shape": [200, 300], "mean": 1.5, "std": 2.0, "seed": 3, "dtype": 5}),
    ("uniform_random", {"shape": [200, 300], "min": -2.0, "max": 4.0, "seed": 3, "dtype": 5}),
    ("uniform_random", {"shape": [50, 60], "min": 0.0, "max": 1.0, "seed": 9, "dtype": 6, "diag_num": 5,
                        "diag_step": 60, "diag_val": 7.0})])
def test_random(tmp_path, op_type, attrs):
    """Paddle's generator cannot be reproduced: compare shape, dtype and the distribution's moments with
    Paddle's own output for the same op, and check the values are deterministic for a given seed."""
    import os

    from devtools.zoo import write_program
    from support.converter_harness import _run_saved, paddle_static

    np_dtype = {5: "float32", 6: "float64"}[attrs["dtype"]]
    write_program(os.path.join(tmp_path, "__model__"), [{
        "vars": [{"name": "out", "dtype": np_dtype, "shape": attrs["shape"]}],
        "ops": [{"type": op_type, "inputs": {}, "outputs": {"Out": ["out"]}, "attrs": attrs}]}],
        feeds=[], fetches=["out"])
    with paddle_static() as paddle:
        want = _run_saved(paddle, str(tmp_path), "__model__", None, {})[0]
    graph = load_model(os.path.join(tmp_path, "__model__"))
    scope, again = {}, {}
    HostExecutor(graph).run_block(0, scope)
    HostExecutor(graph).run_block(0, again)
    got = scope["out"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, again["out"])
    if attrs.get("diag_num"):
        flat_got, flat_want = got.reshape(-1), want.reshape(-1)
        positions = np.arange(attrs["diag_num"]) * (attrs["diag_step"] + 1)
        np.testing.assert_array_equal(flat_got[positions], flat_want[positions])
    n = got.size
    # Moments of n samples: standard errors are std/sqrt(n) for the mean and ~std*sqrt(2/n) for the std.
    assert abs(got.mean() - want.mean()) < 6 * want.std() / np.sqrt(n)
    assert abs(got.std() - want.std()) < 6 * want.std() * np.sqrt(2.0 / n) + 1e-3
    if op_type == "uniform_random" and not attrs.get("diag_num"):
        assert attrs["min"] <= got.min() and got.max() <= attrs["max"]


# -- indexing ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("x_shape,index", [
    ((4, 5, 6), [[1, 2], [3, 0]]), ((4, 5, 6), [[[0, 1, 2]], [[3, 4, 5]]]), ((4, 5), [[2], [0], [3]]),
    ((3, 4), np.zeros((2, 0), np.int64))])
def test_gather_nd(tmp_path, x_shape, index):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    saved = one_op(tmp_path, "gather_nd", {"X": ["x"], "Index": ["idx"]}, {"Out": ["out"]},
                   {"x": x, "idx": np.asarray(index, np.int64)})
    check(saved, atol=0.0)


@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize("ids", [[2, 0, 4], [1, 1, 3]])
def test_scatter(tmp_path, overwrite, ids):
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    updates = RNG.standard_normal((3, 3)).astype(np.float32)
    saved = one_op(tmp_path, "scatter", {"X": ["x"], "Ids": ["ids"], "Updates": ["u"]}, {"Out": ["out"]},
                   {"x": x, "ids": np.asarray(ids, np.int64), "u": updates}, attrs={"overwrite": overwrite})
    if overwrite and len(set(ids)) < len(ids):
        # Duplicate ids with overwrite: Paddle documents the winner as unspecified; compare the rest.
        got, want = run_on_host(saved)[0], saved.outputs[0]
        untouched = [r for r in range(6) if r not in ids]
        assert_op_close(got[untouched], want[untouched], atol=0.0)
    else:
        check(saved)


@pytest.mark.parametrize("x_shape,index_shape", [((5, 4), (3, 1)), ((5, 4, 3), (2, 2)), ((6,), (8, 1))])
def test_scatter_nd_add(tmp_path, x_shape, index_shape):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    k = index_shape[-1]
    index = np.stack([RNG.integers(0, x_shape[j], index_shape[:-1]) for j in range(k)], axis=-1).astype(np.int64)
    updates = RNG.standard_normal(index_shape[:-1] + x_shape[k:]).astype(np.float32)
    saved = one_op(tmp_path, "scatter_nd_add", {"X": ["x"], "Index": ["idx"], "Updates": ["u"]}, {"Out": ["out"]},
                   {"x": x, "idx": index, "u": updates})
    check(saved)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_where_index(tmp_path, shape):
    cond = RNG.random(shape) > 0.5
    saved = one_op(tmp_path, "where_index", {"Condition": ["c"]}, {"Out": ["out"]}, {"c": cond},
                   out_dtypes={"out": "int64"})
    check(saved)


@pytest.mark.parametrize("x_shape,mask_shape", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 4), (2, 3, 4))])
def test_masked_select(tmp_path, x_shape, mask_shape):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    mask = RNG.random(mask_shape) > 0.4
    saved = one_op(tmp_path, "masked_select", {"X": ["x"], "Mask": ["m"]}, {"Y": ["y"]}, {"x": x, "m": mask})
    check(saved, atol=0.0)


# Paddle's legacy (unsorted) unique kernel takes only a 1-D input and no axis.
@pytest.mark.parametrize("axis,is_sorted", [([], True), ([0], True), ([1], True), ([], False)])
def test_unique(tmp_path, axis, is_sorted):
    x = RNG.integers(0, 4, (6, 3)).astype(np.float32)
    x[3] = x[1]
    if not is_sorted:
        x = x.reshape(-1)
    outs = {"Out": ["out"], "Indices": ["first"], "Index": ["inverse"], "Counts": ["counts"]}
    attrs = {"return_index": True, "return_inverse": True, "return_counts": True, "axis": axis, "dtype": 3,
             "is_sorted": is_sorted}
    if not is_sorted:  # the legacy kernel fills only Out and Index
        outs = {"Out": ["out"], "Index": ["inverse"]}
    saved = one_op(tmp_path, "unique", {"X": ["x"]}, outs, {"x": x}, attrs=attrs,
                   out_dtypes={"first": "int64", "inverse": "int64", "counts": "int64"})
    check(saved, atol=0.0)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_take_along_axis(tmp_path, axis):
    x = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    shape = list(x.shape)
    shape[axis] = 3
    index = RNG.integers(0, x.shape[axis], shape).astype(np.int64)
    saved = one_op(tmp_path, "take_along_axis", {"Input": ["x"], "Index": ["idx"]}, {"Result": ["out"]},
                   {"x": x, "idx": index}, attrs={"Axis": axis})
    check(saved, atol=0.0)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_index_sample(tmp_path, index_dtype):
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    index = RNG.integers(0, 6, (3, 4)).astype(index_dtype)
    saved = one_op(tmp_path, "index_sample", {"X": ["x"], "Index": ["idx"]}, {"Out": ["out"]},
                   {"x": x, "idx": index})
    check(saved, atol=0.0)


@pytest.mark.parametrize("axes,starts,ends,steps,decrease,value_shape", [
    ([0], [0], [1], [1], [0], (5,)),                              # x[0] = v
    ([0, 1], [1, 0], [3, 2147483647], [1, 2], [], (2, 3)),        # x[1:3, ::2] = v
    ([1], [1], [2], [1], [1], (4,)),                              # x[:, 1] = v
    ([1], [1], [2], [1], [1], (1,)),                              # x[:, 1] = v (broadcast)
    ([0, 1], [-2, 1], [2147483647, 4], [1, 1], [], (2, 3)),       # x[-2:, 1:4] = v
    ([1], [4], [0], [-2], [], (4, 2))])                           # x[:, 4:0:-2] = v
def test_set_value_tensor(tmp_path, axes, starts, ends, steps, decrease, value_shape):
    feeds = {"x": RNG.standard_normal((4, 5)).astype(np.float32),
             "v": RNG.standard_normal(value_shape).astype(np.float32)}
    attrs = {"axes": axes, "starts": starts, "ends": ends, "steps": steps, "decrease_axes": decrease,
             "none_axes": [], "shape": list(value_shape), "dtype": 5}
    saved = one_op(tmp_path, "set_value", {"Input": ["x"], "ValueTensor": ["v"]}, {"Out": ["out"]}, feeds,
                   attrs=attrs)
    check(saved, atol=0.0)


@pytest.mark.parametrize("index,value,dtype", [
    ((slice(1, 3), slice(None, None, 2)), 2.5, "float32"), (0, -1.0, "float32"), ((slice(None), 2), 7, "int64"),
    ((slice(None, None, -1), 1), True, "bool")])
def test_set_value_constant(tmp_path, index, value, dtype):
    """Constant values travel in the SCALARS attribute `values` (Paddle >= 2.6)."""
    def build(x):
        import paddle

        return paddle.static.setitem(x, index, value)

    x = (RNG.standard_normal((4, 5)) * 3).astype(dtype)
    check(static_program(tmp_path, build, {"x": x}), atol=0.0)


# -- 3-D convolution and pooling ----------------------------------------------------------------------------
@pytest.mark.parametrize("cin,cout,kernel,stride,padding,dilation,groups,data_format", [
    (3, 4, 3, 1, 1, 1, 1, "NCDHW"), (4, 6, (2, 3, 1), (2, 1, 2), (1, 0, 1), 1, 2, "NCDHW"),
    (2, 4, 3, 1, 2, 2, 1, "NCDHW"), (3, 3, 3, 2, "SAME", 1, 3, "NCDHW"), (2, 3, 2, 1, "VALID", 1, 1, "NDHWC"),
    (2, 2, 3, 1, [0, 1, 1, 0, 2, 1], 1, 1, "NCDHW")])
def test_conv3d(tmp_path, cin, cout, kernel, stride, padding, dilation, groups, data_format):
    def build(x):
        import paddle

        conv = paddle.nn.Conv3D(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation,
                                groups=groups, data_format=data_format)
        return conv(x)

    shape = (2, cin, 5, 6, 7) if data_format == "NCDHW" else (2, 5, 6, 7, cin)
    saved = static_program(tmp_path, build, {"x": RNG.standard_normal(shape).astype(np.float32)})
    check(saved, rtol=1e-5)  # float32 sums of up to 54 products, accumulated in another order than Paddle


@pytest.mark.parametrize("cin,cout,kernel,stride,padding,output_padding,dilation,groups,data_format", [
    (3, 4, 3, 1, 0, 0, 1, 1, "NCDHW"), (4, 6, (2, 3, 2), (2, 1, 2), (1, 0, 1), 0, 1, 2, "NCDHW"),
    (2, 3, 3, 2, 1, 1, 1, 1, "NCDHW"), (2, 2, 3, 1, 1, 0, 2, 1, "NDHWC"), (2, 4, 2, 2, "SAME", 0, 1, 1, "NCDHW")])
def test_conv3d_transpose(tmp_path, cin, cout, kernel, stride, padding, output_padding, dilation, groups,
                          data_format):
    def build(x):
        import paddle

        conv = paddle.nn.Conv3DTranspose(cin, cout, kernel, stride=stride, padding=padding,
                                         output_padding=output_padding, dilation=dilation, groups=groups,
                                         data_format=data_format)
        return conv(x)

    shape = (2, cin, 3, 4, 5) if data_format == "NCDHW" else (2, 3, 4, 5, cin)
    saved = static_program(tmp_path, build, {"x": RNG.standard_normal(shape).astype(np.float32)})
    check(saved, rtol=1e-5)  # float32 sums of up to 54 products, accumulated in another order than Paddle


@pytest.mark.parametrize("kind,kernel,stride,padding,ceil_mode,exclusive", [
    ("max", 2, 2, 0, False, True), ("max", 3, 2, 1, True, True), ("avg", 3, 1, 1, False, True),
    ("avg", 3, 2, 1, False, False), ("avg", (2, 3, 2), (1, 2, 2), 0, True, True), ("max", 3, 1, "SAME", False, True)])
def test_pool3d(tmp_path, kind, kernel, stride, padding, ceil_mode, exclusive):
    def build(x):
        import paddle.nn.functional as F

        if kind == "max":
            return F.max_pool3d(x, kernel, stride=stride, padding=padding, ceil_mode=ceil_mode)
        return F.avg_pool3d(x, kernel, stride=stride, padding=padding, ceil_mode=ceil_mode, exclusive=exclusive)

    saved = static_program(tmp_path, build, {"x": RNG.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)})
    check(saved)


@pytest.mark.parametrize("kind,output_size", [("avg", (2, 3, 3)), ("max", (3, 2, 4)), ("avg", 1)])
def test_pool3d_adaptive(tmp_path, kind, output_size):
    def build(x):
        import paddle.nn.functional as F

        if kind == "max":
            return F.adaptive_max_pool3d(x, output_size)
        return F.adaptive_avg_pool3d(x, output_size)

    saved = static_program(tmp_path, build, {"x": RNG.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)})
    check(saved)


@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 2, 1), ((2, 3, 3), (1, 2, 2), (0, 1, 1))])
def test_max_pool3d_with_index(tmp_path, kernel, stride, padding):
    def build(x):
        import paddle.nn.functional as F

        return list(F.max_pool3d(x, kernel, stride=stride, padding=padding, return_mask=True))

    saved = static_program(tmp_path, build, {"x": RNG.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)})
    check(saved, atol=0.0)


# -- interpolation ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,shape,size,scale,align_corners,align_mode,data_format", [
    ("linear", (2, 3, 7), [12], None, False, 0, "NCW"), ("linear", (2, 3, 7), [4], None, True, 0, "NCW"),
    ("linear", (2, 3, 7), None, [1.7], False, 1, "NCW"), ("linear", (2, 7, 3), [10], None, False, 0, "NWC"),
    ("bicubic", (1, 2, 5, 6), [9, 4], None, False, 0, "NCHW"),
    ("bicubic", (1, 2, 5, 6), [3, 11], None, True, 0, "NCHW"),
    ("bicubic", (1, 2, 5, 6), None, [2.0, 1.5], False, 0, "NCHW"),
    ("bicubic", (1, 5, 6, 2), [7, 7], None, False, 0, "NHWC"),
    ("bilinear", (1, 2, 5, 6), [9, 4], None, False, 0, "NCHW"),
    ("bilinear", (1, 2, 5, 6), None, [1.5, 0.7], True, 0, "NCHW"),
    ("trilinear", (1, 2, 3, 4, 5), [5, 6, 3], None, False, 0, "NCDHW"),
    ("trilinear", (1, 2, 3, 4, 5), [6, 2, 7], None, True, 0, "NCDHW"),
    ("trilinear", (1, 2, 3, 4, 5), None, [2.0, 1.5, 0.6], False, 1, "NCDHW"),
    ("trilinear", (1, 3, 4, 5, 2), [4, 4, 4], None, False, 0, "NDHWC")])
def test_interpolate(tmp_path, mode, shape, size, scale, align_corners, align_mode, data_format):
    def build(x):
        import paddle.nn.functional as F

        return F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align_corners,
                             align_mode=align_mode, data_format=data_format)

    saved = static_program(tmp_path, build, {"x": RNG.standard_normal(shape).astype(np.float32)})
    # Paddle sums the neighbour products in float32 in another order than the separable passes here
    check(saved, rtol=1e-5)


def test_interpolate_out_size_tensor(tmp_path):
    feeds = {"x": RNG.standard_normal((1, 2, 4, 5, 6)).astype(np.float32), "size": np.array([3, 7, 4], np.int32)}
    saved = one_op(tmp_path, "trilinear_interp_v2", {"X": ["x"], "OutSize": ["size"]}, {"Out": ["out"]}, feeds,
                   attrs={"interp_method": "trilinear", "align_corners": False, "align_mode": 0,
                          "data_layout": "NCHW", "out_d": -1, "out_h": -1, "out_w": -1,
                          "scale": (AttrType.FLOATS, [])})
    check(saved, rtol=1e-5)


# -- rnn ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cell", ["LSTM", "GRU", "SimpleRNN"])
@pytest.mark.parametrize("num_layers,direction", [(1, "forward"), (2, "bidirect")])
@pytest.mark.parametrize("with_lengths", [False, True])
def test_rnn(tmp_path, cell, num_layers, direction, with_lengths):
    def build(x, lengths=None):
        import paddle

        layer = getattr(paddle.nn, cell)(3, 4, num_layers=num_layers, direction=direction, time_major=True)
        out, state = layer(x, sequence_length=lengths)
        return [out] + (list(state) if cell == "LSTM" else [state])

    feeds = {"x": RNG.standard_normal((5, 2, 3)).astype(np.float32)}
    if with_lengths:
        feeds["lengths"] = np.array([5, 3], np.int64)
    saved = static_program(tmp_path, build, feeds)
    # float32 Paddle vs float64 here across up to 5 recurrent steps; errors compound through the gates
    check(saved, atol=2e-6, rtol=1e-5)


# -- detection ----------------------------------------------------------------------------------------------
def random_boxes(shape, size=20.0):
    xy = RNG.uniform(0, size, shape + (2,))
    wh = RNG.uniform(1.0, size / 2, shape + (2,))
    return np.concatenate([xy, xy + wh], axis=-1).astype(np.float32)


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("variance_from", ["input", "attr", "none"])
def test_box_coder_encode(tmp_path, normalized, variance_from):
    feeds = {"prior": random_boxes((5,)), "target": random_boxes((3,))}
    inputs = {"PriorBox": ["prior"], "TargetBox": ["target"]}
    attrs = {"code_type": "encode_center_size", "box_normalized": normalized, "axis": 0}
    if variance_from == "input":
        feeds["var"] = RNG.uniform(0.1, 0.3, (5, 4)).astype(np.float32)
        inputs["PriorBoxVar"] = ["var"]
    elif variance_from == "attr":
        attrs["variance"] = [0.1, 0.1, 0.2, 0.2]
    saved = one_op(tmp_path, "box_coder", inputs, {"OutputBox": ["out"]}, feeds, attrs=attrs)
    # rtol 1e-6 (not 6e-7): box decoding chains exp/mul/add in float32 in Paddle, in float64 here
    check(saved, rtol=1e-6)


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("axis", [0, 1])
def test_box_coder_decode(tmp_path, normalized, axis):
    target_shape = (3, 5, 4) if axis == 0 else (5, 3, 4)
    feeds = {"prior": random_boxes((5,)), "var": RNG.uniform(0.1, 0.3, (5, 4)).astype(np.float32),
             "target": RNG.uniform(-1, 1, target_shape).astype(np.float32)}
    saved = one_op(tmp_path, "box_coder", {"PriorBox": ["prior"], "PriorBoxVar": ["var"], "TargetBox": ["target"]},
                   {"OutputBox": ["out"]}, feeds,
                   attrs={"code_type": "decode_center_size", "box_normalized": normalized, "axis": axis})
    # rtol 1e-6 (not 6e-7): box decoding chains exp/mul/add in float32 in Paddle, in float64 here
    check(saved, rtol=1e-6)


@pytest.mark.parametrize("use_gaussian,normalized,keep_top_k,nms_top_k,background", [
    (False, True, -1, -1, 0), (True, True, 10, -1, 0), (False, False, 20, 6, -1), (True, False, -1, 8, 1)])
def test_matrix_nms(tmp_path, use_gaussian, normalized, keep_top_k, nms_top_k, background):
    feeds = {"boxes": random_boxes((2, 12)), "scores": RNG.uniform(0, 1, (2, 3, 12)).astype(np.float32)}
    attrs = {"score_threshold": 0.2, "post_threshold": 0.1, "nms_top_k": nms_top_k, "keep_top_k": keep_top_k,
             "use_gaussian": use_gaussian, "gaussian_sigma": 2.0, "background_label": background,
             "normalized": normalized}
    saved = one_op(tmp_path, "matrix_nms", {"BBoxes": ["boxes"], "Scores": ["scores"]},
                   {"Out": ["out"], "Index": ["index"], "RoisNum": ["num"]}, feeds, attrs=attrs,
                   out_dtypes={"index": "int32", "num": "int32"})
    # rtol 1e-6 (not 6e-7): decayed scores multiply several float32 factors in Paddle's order
    check(saved, rtol=1e-6)


def anchors_grid(h, w, sizes, stride=16.0):
    ys, xs = np.meshgrid(np.arange(h) * stride, np.arange(w) * stride, indexing="ij")
    half = np.asarray(sizes, np.float64)[None, None, :] / 2
    cx, cy = xs[..., None] + stride / 2, ys[..., None] + stride / 2
    return np.stack([cx - half, cy - half, cx + half, cy + half], axis=-1).astype(np.float32)


@pytest.mark.parametrize("pixel_offset,nms_thresh,eta,pre_top,post_top,min_size", [
    (True, 0.7, 1.0, 40, 20, 0.1), (False, 0.5, 1.0, 100, 50, 4.0), (True, 0.8, 0.9, 60, 30, 2.0),
    (False, 0.6, 1.0, -1, -1, 0.1)])
def test_generate_proposals_v2(tmp_path, pixel_offset, nms_thresh, eta, pre_top, post_top, min_size):
    a, h, w = 3, 4, 5
    feeds = {"scores": RNG.uniform(0, 1, (2, a, h, w)).astype(np.float32),
             "deltas": RNG.uniform(-0.5, 0.5, (2, 4 * a, h, w)).astype(np.float32),
             "im_shape": np.array([[h * 16, w * 16], [h * 16 - 10, w * 16 - 20]], np.float32),
             "anchors": anchors_grid(h, w, [12.0, 24.0, 40.0]),
             "variances": np.full((h, w, a, 4), 1.0, np.float32)}
    attrs = {"pre_nms_topN": pre_top, "post_nms_topN": post_top, "nms_thresh": nms_thresh, "min_size": min_size,
             "eta": eta, "pixel_offset": pixel_offset}
    saved = one_op(tmp_path, "generate_proposals_v2",
                   {"Scores": ["scores"], "BboxDeltas": ["deltas"], "ImShape": ["im_shape"], "Anchors": ["anchors"],
                    "Variances": ["variances"]},
                   {"RpnRois": ["rois"], "RpnRoiProbs": ["probs"], "RpnRoisNum": ["num"]}, feeds, attrs=attrs,
                   out_dtypes={"num": "int32"})
    # box coordinates of magnitude ~100 go through exp() in float32 in Paddle
    check(saved, atol=1e-4, rtol=1e-6)


@pytest.mark.parametrize("pixel_offset", [True, False])
@pytest.mark.parametrize("counts_dtype", ["int32", "int64"])
def test_distribute_fpn_proposals(tmp_path, pixel_offset, counts_dtype):
    """FPN R-CNN's RoI-to-level split: two images' RoIs of every scale (some clamped to the lowest and highest
    levels, one level left empty for the second image), with per-level per-image counts and the restore index."""
    sizes = np.array([4.0, 20.0, 56.0, 110.0, 224.0, 300.0, 500.0, 900.0, 150.0, 30.0, 60.0, 8.0])
    xy = RNG.uniform(0, 200, (sizes.size, 2))
    aspect = RNG.uniform(0.5, 2.0, sizes.size)
    wh = np.stack([sizes * np.sqrt(aspect), sizes / np.sqrt(aspect)], 1)
    rois = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    counts = np.array([7, 5], counts_dtype)
    levels = range(2, 6)
    outputs = {"MultiFpnRois": [f"rois_{k}" for k in levels], "MultiLevelRoIsNum": [f"num_{k}" for k in levels],
               "RestoreIndex": ["restore"]}
    out_dtypes = {**{f"num_{k}": "int32" for k in levels}, "restore": "int32"}
    attrs = {"min_level": 2, "max_level": 5, "refer_level": 4, "refer_scale": 224, "pixel_offset": pixel_offset}
    saved = opdesc_program(tmp_path, "distribute_fpn_proposals", inputs={"FpnRois": ["rois"], "RoisNum": ["counts"]},
                           outputs=outputs, attrs=attrs, feeds={"rois": rois, "counts": counts},
                           extra_vars=[{"name": n, "dtype": d, "shape": []} for n, d in out_dtypes.items()],
                           run_paddle=False)
    # Paddle's legacy executor refuses to fetch the levels (they carry a LoD): its dygraph op is the reference.
    import paddle

    multi, restore, nums = paddle.vision.ops.distribute_fpn_proposals(
        paddle.to_tensor(rois), 2, 5, 4, 224, pixel_offset=pixel_offset, rois_num=paddle.to_tensor(counts))
    want = [t.numpy() for t in multi] + [t.numpy() for t in nums] + [restore.numpy()]
    got = check(saved, want=want, atol=0.0)
    assert [len(g) for g in got[:4]] == [int(n.sum()) for n in got[4:8]] and all(len(g) for g in got[:4])


def density_prior_box_loops(feature_hw, image_hw, sizes, ratios, densities, step, offset, variances):
    """A line-by-line transcription of Paddle's C++ DensityPriorBoxKernel loops (the independent oracle)."""
    fh, fw = feature_hw
    ih, iw = image_hw
    step_w, step_h = step if step[0] and step[1] else (iw / fw, ih / fh)
    step_average = int((step_w + step_h) * 0.5)
    num = sum(len(ratios) * d * d for d in densities)
    boxes = np.zeros((fh, fw, num, 4))
    for h in range(fh):
        for w in range(fw):
            center_x, center_y = (w + offset) * step_w, (h + offset) * step_h
            idx = 0
            for size, density in zip(sizes, densities):
                shift = int(step_average / density)
                for r in ratios:
                    bw, bh = size * np.sqrt(r), size / np.sqrt(r)
                    for di in range(density):
                        for dj in range(density):
                            cx = center_x - step_average / 2.0 + shift / 2.0 + dj * shift
                            cy = center_y - step_average / 2.0 + shift / 2.0 + di * shift
                            boxes[h, w, idx] = [max((cx - bw / 2) / iw, 0), max((cy - bh / 2) / ih, 0),
                                                min((cx + bw / 2) / iw, 1), min((cy + bh / 2) / ih, 1)]
                            idx += 1
    return boxes.astype(np.float32), np.broadcast_to(np.float32(variances), boxes.shape)


@pytest.mark.parametrize("sizes,ratios,densities,step,offset,flatten", [
    ([8.0], [1.0], [2], (0.0, 0.0), 0.5, False), ([4.0, 16.0], [1.0, 2.0, 0.5], [4, 1], (8.0, 8.0), 0.5, True),
    ([10.0], [1.5], [3], (0.0, 0.0), 0.0, False)])
def test_density_prior_box(tmp_path, sizes, ratios, densities, step, offset, flatten):
    """paddle 3.3.1 no longer registers density_prior_box (older exported models still carry it), so the
    oracle is a loop-by-loop transcription of Paddle's C++ kernel instead of a Paddle run."""
    feeds = {"feat": np.zeros((1, 2, 3, 4), np.float32), "img": np.zeros((1, 3, 24, 32), np.float32)}
    variances = [0.1, 0.1, 0.2, 0.2]
    attrs = {"fixed_sizes": sizes, "fixed_ratios": ratios, "densities": densities, "step_w": step[0],
             "step_h": step[1], "offset": offset, "variances": variances, "clip": True, "flatten_to_2d": flatten}
    saved = opdesc_program(tmp_path, "density_prior_box", inputs={"Input": ["feat"], "Image": ["img"]},
                           outputs={"Boxes": ["boxes"], "Variances": ["vars"]}, attrs=attrs, feeds=feeds,
                           run_paddle=False)
    boxes, var = density_prior_box_loops((3, 4), (24, 32), sizes, ratios, densities, step, offset, variances)
    if flatten:
        boxes, var = boxes.reshape(-1, 4), var.reshape(-1, 4)
    check(saved, want=[boxes, var])


# -- loop helpers (host fallbacks of ops that usually have converters) ---------------------------------------
@pytest.mark.parametrize("op_type", ["less_than", "less_equal", "greater_than", "greater_equal", "equal",
                                     "not_equal"])
@pytest.mark.parametrize("y_shape", [(3, 4), (4,)])
def test_compare(tmp_path, op_type, y_shape):
    feeds = {"x": RNG.integers(0, 3, (3, 4)).astype(np.int64), "y": RNG.integers(0, 3, y_shape).astype(np.int64)}
    saved = one_op(tmp_path, op_type, {"X": ["x"], "Y": ["y"]}, {"Out": ["out"]}, feeds, attrs={"axis": -1},
                   out_dtypes={"out": "bool"})
    check(saved)


@pytest.mark.parametrize("op_type", ["logical_and", "logical_or", "logical_xor", "logical_not"])
def test_logical(tmp_path, op_type):
    feeds = {"x": RNG.random((3, 4)) > 0.5, "y": RNG.random((3, 4)) > 0.5}
    inputs = {"X": ["x"]} if op_type == "logical_not" else {"X": ["x"], "Y": ["y"]}
    if op_type == "logical_not":
        del feeds["y"]
    saved = one_op(tmp_path, op_type, inputs, {"Out": ["out"]}, feeds, out_dtypes={"out": "bool"})
    check(saved)


@pytest.mark.parametrize("dtype,step", [("int64", 1.0), ("int32", 3.0), ("float32", -0.5)])
def test_increment(tmp_path, dtype, step):
    saved = one_op(tmp_path, "increment", {"X": ["x"]}, {"Out": ["out"]}, {"x": np.array([4], dtype)},
                   attrs={"step": step}, out_dtypes={"out": dtype})
    check(saved)


def test_assign(tmp_path):
    saved = one_op(tmp_path, "assign", {"X": ["x"]}, {"Out": ["out"]},
                   {"x": RNG.standard_normal((2, 3)).astype(np.float32)})
    check(saved, atol=0.0)
