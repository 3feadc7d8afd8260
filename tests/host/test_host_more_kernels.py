"""Host kernels (scans, order statistics, special functions, index updates, norms, losses, matrix functions)
against Paddle:
each program is built through Paddle's API in PIR (an OpDesc where the API writes a different op), saved,
loaded with our loader and run op by op with every host kernel forced, then compared with Paddle Inference
on the saved program (dtype, shape, values; integers exact); one program per module also goes through
`create_predictor` end to end.
"""
from __future__ import annotations

import numpy as np
import pytest
from test_host_added_kernels import check_predictor

from nnadapter_bridge.host.kernels.registry import HostKernelError
from support.converter_harness import opdesc_program, pir_program
from support.host_kernel_check import check, run_on_host

RNG = np.random.default_rng(5)
FLOATS = ["float32", "float64"]


# -- reduce: cumprod, logcumsumexp ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_cumprod(tmp_path, dtype):
    import paddle

    x = RNG.integers(-3, 4, (3, 4)).astype(dtype)
    if dtype.startswith("float"):
        x[0, 1], x[2, 2] = np.nan, np.inf
    saved = pir_program(tmp_path, lambda x: [paddle.cumprod(x, 1), paddle.cumprod(x, 0), paddle.cumprod(x, -1),
                                             paddle.cumprod(x[0, 0], 0)], {"x": x})
    check(saved, {"cumprod"}, exact=True)


def test_cumprod_exclusive_reverse(tmp_path):
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    for i, (exclusive, reverse) in enumerate([(True, False), (False, True), (True, True)]):
        (tmp_path / str(i)).mkdir()
        saved = opdesc_program(tmp_path / str(i), "cumprod", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                               attrs={"dim": 1, "exclusive": exclusive, "reverse": reverse}, feeds={"x": x})
        check(saved, {"cumprod"}, exact=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((3, 5)).astype(dtype) * 30
    x[0, 0], x[1, :2], x[2, 3] = np.nan, -np.inf, np.inf
    e = np.zeros((0, 3), dtype)
    saved = pir_program(tmp_path, lambda x, e: [paddle.logcumsumexp(x, 1), paddle.logcumsumexp(x, 0),
                                                paddle.logcumsumexp(x), paddle.logcumsumexp(e, 1)], {"x": x, "e": e})
    check(saved, {"logcumsumexp"}, rtol=1e-6)


def test_logcumsumexp_exclusive_reverse(tmp_path):
    x = RNG.standard_normal((2, 5)).astype(np.float64)
    for i, (exclusive, reverse) in enumerate([(True, False), (False, True), (True, True)]):
        (tmp_path / str(i)).mkdir()
        saved = opdesc_program(tmp_path / str(i), "logcumsumexp", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                               attrs={"axis": 1, "flatten": False, "exclusive": exclusive, "reverse": reverse},
                               feeds={"x": x})
        check(saved, {"logcumsumexp"}, rtol=1e-12)


def test_scan_through_predictor(tmp_path):
    import paddle

    x = RNG.standard_normal((3, 4)).astype(np.float32)
    check_predictor(pir_program(tmp_path, lambda x: [paddle.cumprod(x, 1), paddle.logcumsumexp(x, 0)], {"x": x}))


# -- reduce: order statistics ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_median_nanmedian(tmp_path, dtype):
    import paddle

    x = RNG.permutation(40).reshape(4, 10).astype(dtype)  # distinct values: Paddle's tie order is unspecified
    x[1, 3], x[2, [0, 5, 7]] = np.nan, np.nan
    x[3, :] = np.nan
    x5 = RNG.permutation(15).reshape(3, 5).astype(dtype)

    def build(x, x5):
        return [paddle.median(x, 1), *paddle.median(x, 1, mode="min"), paddle.median(x5, 0, keepdim=True),
                paddle.median(x5), *paddle.median(x5, -1, mode="min"),
                paddle.nanmedian(x, 1), *paddle.nanmedian(x[:3], 1, mode="min"), paddle.nanmedian(x5, [0, 1]),
                paddle.nanmedian(x5, 0, keepdim=True)]

    check(pir_program(tmp_path, build, {"x": x, "x5": x5}), {"median", "nanmedian"}, exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_kthvalue_mode(tmp_path, dtype):
    import paddle

    x = RNG.permutation(24).reshape(2, 3, 4).astype(dtype)
    m = np.array([[3, 1, 3, 2, 1, 3], [5, 5, 4, 4, 7, 0], [1, 2, 3, 4, 5, 6]], dtype)

    def build(x, m):
        return [*paddle.kthvalue(x, 2, 1), *paddle.kthvalue(x, 4, -1, keepdim=True), *paddle.kthvalue(x, 1, 0),
                *paddle.mode(m, 1), *paddle.mode(m, 0, keepdim=True), *paddle.mode(x, -1)]

    check(pir_program(tmp_path, build, {"x": x, "m": m}), {"kthvalue", "mode"}, exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_searchsorted(tmp_path, dtype):
    import paddle

    seq = np.array([1, 3, 3, 5, 9], dtype)
    seq2 = np.sort(RNG.integers(0, 10, (2, 6)), axis=1).astype(dtype)
    v = np.array([[0, 3, 4, 9, 10], [5, 1, 3, 8, 2]], dtype)

    def build(seq, seq2, v):
        return [paddle.searchsorted(seq, v), paddle.searchsorted(seq, v, right=True),
                paddle.searchsorted(seq2, v, out_int32=True), paddle.searchsorted(seq2, v, right=True)]

    check(pir_program(tmp_path, build, {"seq": seq, "seq2": seq2, "v": v}), {"searchsorted"})


def test_searchsorted_nan(tmp_path):
    import paddle

    seq = np.array([1.0, 2.0, np.nan], np.float32)
    v = np.array([np.nan, 1.5, np.inf, -np.inf], np.float32)
    saved = pir_program(tmp_path, lambda seq, v: [paddle.searchsorted(seq, v), paddle.searchsorted(seq, v, right=True)],
                        {"seq": seq, "v": v})
    check(saved, {"searchsorted"})


@pytest.mark.parametrize("wdtype", [None, "float32", "float64", "int32", "int64"])
def test_bincount(tmp_path, wdtype):
    import paddle

    x = np.array([1, 3, 1, 0, 7, 3, 3], np.int64)
    feeds = {"x": x}
    if wdtype:
        feeds["w"] = (RNG.standard_normal(7) * 4).astype(wdtype)
        build = lambda x, w: [paddle.bincount(x, w), paddle.bincount(x, w, minlength=10),  # noqa: E731
                              paddle.bincount(paddle.cast(x, "int32"), w, minlength=2)]
    else:
        build = lambda x: [paddle.bincount(x), paddle.bincount(x, minlength=12),  # noqa: E731
                           paddle.bincount(paddle.cast(x, "int32"))]
    check(pir_program(tmp_path, build, feeds), {"bincount"}, exact=True)


def test_bincount_negative_raises(tmp_path):
    import paddle

    saved = pir_program(tmp_path, lambda x: paddle.bincount(x), {"x": np.array([1, 2], np.int64)})
    saved.feeds["x"] = np.array([1, -2], np.int64)
    with pytest.raises(HostKernelError, match="bincount.*negative"):
        run_on_host(saved)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_unique_consecutive(tmp_path, dtype):
    import paddle

    x = np.array([[1, 1, 2], [1, 1, 2], [3, 0, 0], [3, 0, 0], [1, 1, 2]], dtype)

    def build(x):
        return [*paddle.unique_consecutive(x, return_inverse=True, return_counts=True),
                *paddle.unique_consecutive(x, return_inverse=True, return_counts=True, axis=0, dtype="int32"),
                *paddle.unique_consecutive(x, return_counts=True, axis=1)]

    check(pir_program(tmp_path, build, {"x": x}), {"unique_consecutive"}, exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_amax_amin(tmp_path, dtype):
    import paddle

    x = (RNG.standard_normal((3, 4, 2)) * 9).astype(dtype)
    if dtype.startswith("float"):
        x[0, 1, 0] = np.nan

    def build(x):
        return [paddle.amax(x, 1), paddle.amin(x, [0, 2], keepdim=True), paddle.amax(x), paddle.amin(x, -1),
                paddle.amax(x[0, 0, 0])]

    check(pir_program(tmp_path, build, {"x": x}), {"reduce_amax", "reduce_amin"}, exact=True)


def test_stats_through_predictor(tmp_path):
    import paddle

    x = RNG.permutation(12).reshape(3, 4).astype(np.float32)
    check_predictor(pir_program(tmp_path, lambda x: [paddle.median(x, 1), *paddle.kthvalue(x, 2, 1),
                                                     paddle.amax(x, 0), paddle.searchsorted(paddle.sort(x), x)],
                                {"x": x}))


# -- activation: special functions; elementwise: copysign, nextafter, trunc_divide ----------------------------
SPECIAL_X = [-3.5, -2.0, -1.0, -0.5, -0.0, 0.0, 1e-8, 0.3, 1.0, 2.5, 9.7, 11.0, 30.0, 60.0, 170.5, 800.0,
             np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("dtype", FLOATS)
def test_gamma_family(tmp_path, dtype):
    import paddle

    x = np.array(SPECIAL_X, dtype)
    saved = pir_program(tmp_path, lambda x: [paddle.lgamma(x), paddle.digamma(x),
                                             paddle.polygamma(paddle.abs(x) + 0.1, 1),
                                             paddle.polygamma(paddle.abs(x) + 0.1, 3)], {"x": x})
    check(saved, {"lgamma", "digamma", "polygamma"}, rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
def test_erfinv(tmp_path, dtype):
    import paddle

    x = np.array([-1.0, -0.999999, -0.9, -0.5, -1e-6, 0.0, 0.2, 0.7, 0.99, 0.9999, 1.0, 1.5, np.nan], dtype)
    check(pir_program(tmp_path, lambda x: paddle.erfinv(x), {"x": x}), {"erfinv"},
          rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
def test_bessel(tmp_path, dtype):
    import paddle

    x = np.array([-60.0, -8.5, -1.0, -0.0, 0.0, 1e-5, 0.7, 3.0, 7.9, 8.1, 29.0, 49.9, 50.5, 85.0, 500.0, np.nan,
                  np.inf, -np.inf], dtype)
    saved = pir_program(tmp_path, lambda x: [paddle.i0(x), paddle.i0e(x), paddle.i1(x), paddle.i1e(x)], {"x": x})
    check(saved, {"i0", "i0e", "i1", "i1e"}, rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
def test_copysign_nextafter_trunc_divide_float(tmp_path, dtype):
    import paddle

    x = np.array([1.5, -2.0, 0.0, -0.0, np.inf, np.nan, 7.0, -7.5], dtype)
    y = np.array([-1.0, 2.0, -0.0, 1.0, -3.0, 1.0, 0.0, 2.0], dtype)
    saved = pir_program(tmp_path, lambda x, y: [paddle.copysign(x, y), paddle.nextafter(x, y),
                                                paddle.divide(x, y, rounding_mode="trunc")], {"x": x, "y": y})
    check(saved, {"copysign", "nextafter", "trunc_divide"}, exact=True)


@pytest.mark.parametrize("dtype", ["int32", "int64", "int16", "uint8"])
def test_copysign_trunc_divide_int(tmp_path, dtype):
    import paddle

    x = np.array([7, -7, 5, 0, -1, 9], dtype) if dtype != "uint8" else np.array([7, 250, 5, 0, 1, 9], dtype)
    y = np.array([2, 2, -3, 4, -5, -9], dtype) if dtype != "uint8" else np.array([2, 2, 3, 4, 5, 9], dtype)
    if dtype == "int16":
        pytest.skip("Paddle Inference 3.3.1 reads an int16 feed as int32")
    saved = pir_program(tmp_path, lambda x, y: [paddle.copysign(x, y), paddle.divide(x, y, rounding_mode="trunc")],
                        {"x": x, "y": y})
    check(saved, {"copysign", "trunc_divide"})


def test_special_through_predictor(tmp_path):
    import paddle

    x = RNG.uniform(0.1, 5, (2, 3)).astype(np.float32)
    check_predictor(pir_program(tmp_path, lambda x: [paddle.lgamma(x), paddle.i0(x), paddle.copysign(x, -x)],
                                {"x": x}))


# -- tensor: updates; generate: indices, logspace; elementwise: label_smooth ----------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_index_add_put_masked_fill(tmp_path, dtype):
    import paddle

    x = (RNG.standard_normal((4, 3)) * 5).astype(dtype)
    idx = np.array([0, 2, 0, -1], np.int64)
    v = (RNG.standard_normal((4, 3)) * 5).astype(dtype)

    def build(x, idx, v):
        return [paddle.index_add(x, idx, 0, v), paddle.index_add(x, idx[:3], 1, v[:, :3]),
                paddle.index_put(x, (idx[:2],), v[0]), paddle.index_put(x, (idx, idx[:1] + 1), v[:, 0], True),
                paddle.index_put(x, (x > 0,), paddle.to_tensor(np.array(7, dtype))),
                paddle.masked_fill(x, x > 0, 2), paddle.masked_fill(x, paddle.to_tensor(np.array([True, False, True])),
                                                                   paddle.to_tensor(np.array(-1, dtype)))]

    check(pir_program(tmp_path, build, {"x": x, "idx": idx, "v": v}), {"index_add", "index_put", "masked_fill"},
          exact=True)


@pytest.mark.parametrize("reduce", ["assign", "add", "mul", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_put_along_axis(tmp_path, reduce, include_self):
    import paddle

    if reduce == "assign" and not include_self:
        pytest.skip("assign ignores include_self")
    x = RNG.integers(-5, 6, (3, 4)).astype(np.float32)
    idx = np.array([[0, 1, 1], [3, 3, 3], [2, 0, 2]], np.int64)
    v = RNG.integers(-5, 6, (3, 3)).astype(np.float32)

    def build(x, idx, v):
        return [paddle.put_along_axis(x, idx, v, 1, reduce=reduce, include_self=include_self),
                paddle.put_along_axis(x, idx[:, :1] % 3, v[:, :1], 0, reduce=reduce, include_self=include_self)]

    check(pir_program(tmp_path, build, {"x": x, "idx": idx, "v": v}), {"put_along_axis"}, exact=True)


def test_index_generators_and_label_smooth(tmp_path):
    import paddle

    x = np.array([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]], np.float32)
    prior = np.array([[0.5, 0.25, 0.25]], np.float32)

    def build(x, prior):
        zero = paddle.cast(x[0, 0], "int64")
        return [paddle.tril_indices(4, 3, 1) + zero, paddle.triu_indices(4, 5, -1) + zero,
                paddle.tril_indices(3, 3, -5) + zero, paddle.logspace(0, 2, 5, 10.0) + x[0, 0],
                paddle.logspace(x[1, 0], x[1, 2], 7, x[1, 1] * 10), paddle.logspace(1, 3, 1, 2.0) + x[0, 0],
                paddle.nn.functional.label_smooth(x, epsilon=0.2),
                paddle.nn.functional.label_smooth(x, prior, epsilon=0.1)]

    check(pir_program(tmp_path, build, {"x": x, "prior": prior}),
          {"tril_indices", "triu_indices", "logspace", "label_smooth"}, rtol=1e-6)


def test_index_update_through_predictor(tmp_path):
    import paddle

    x = RNG.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([1, 3], np.int64)
    check_predictor(pir_program(tmp_path, lambda x, idx: [paddle.index_add(x, idx, 0, x[:2]),
                                                          paddle.masked_fill(x, x < 0, 0.5)], {"x": x, "idx": idx}))


# -- normalization --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_norms(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((3, 4)).astype(dtype)
    y = RNG.standard_normal((2, 3, 4)).astype(dtype)

    def build(x, y):
        return [
            paddle._C_ops.squared_l2_norm(x),
            paddle._C_ops.l1_norm(y.astype("float32")),
            paddle.linalg.norm(x, "fro", axis=[0, 1]),
            paddle.linalg.norm(y, "fro", axis=[1, 2], keepdim=True),
            paddle.nn.clip.clip_by_norm(x.astype("float32"), 1.0),
            paddle.nn.clip.clip_by_norm(x.astype("float32") * 1e-3, 1.0),
            paddle.renorm(y, 2.0, 1, 1.5),
            paddle.renorm(y, 1.0, 0, 3.0),
            paddle.renorm(x, 3.5, -1, 0.5),
        ]

    check(pir_program(tmp_path, build, {"x": x, "y": y}),
          {"squared_l2_norm", "l1_norm", "frobenius_norm", "clip_by_norm", "renorm"},
          rtol=1e-6 if dtype == "float32" else 1e-12)


def test_norm_through_predictor(tmp_path):
    import paddle

    x = RNG.standard_normal((3, 4)).astype(np.float32)
    check_predictor(
        pir_program(tmp_path, lambda x: [paddle.renorm(x, 2.0, 0, 1.0), paddle.nn.clip.clip_by_norm(x, 1.0)], {"x": x})
    )


# -- loss -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_losses(tmp_path, dtype):
    import paddle

    F = paddle.nn.functional
    p = RNG.uniform(0, 1, (4, 3)).astype(dtype)
    p[0, 0], p[1, 1] = 0.0, 1.0
    q = RNG.uniform(0, 1, (4, 3)).astype(dtype)
    q[2, 2] = 0.0
    logits = (RNG.standard_normal((4, 3)) * 5).astype(dtype)
    label = np.array([0, 2, 1, 2], np.int64)
    w = np.array([0.2, 1.0, 3.0], dtype)

    def build(p, q, logits, label, w):
        # float64 nll_loss is left out: Paddle Inference 3.3.1 hangs running the float64 program
        nll = [F.nll_loss(logits, label), F.nll_loss(logits, label, w, reduction="sum"),
               F.nll_loss(logits, label, w, ignore_index=2, reduction="none"),
               F.nll_loss(logits, label, w, ignore_index=2)] if dtype == "float32" else [paddle.cast(label, dtype)]
        return [paddle._C_ops.huber_loss(logits, q, 1.5)[0], F.binary_cross_entropy(p, q, reduction="none"),
                F.kl_div(logits, q, reduction="none"), F.kl_div(logits, q, reduction="mean", log_target=True),
                F.log_loss(p[:, :1].astype("float32"), q[:, :1].astype("float32")), *nll,
                F.binary_cross_entropy_with_logits(logits, q, reduction="none"),
                F.binary_cross_entropy_with_logits(logits, q, reduction="none", pos_weight=w)]

    saved = pir_program(tmp_path, build, {"p": p, "q": q, "logits": logits, "label": label, "w": w})
    check(saved, {"huber_loss", "bce_loss", "kldiv_loss", "log_loss", "sigmoid_cross_entropy_with_logits"} |
          ({"nll_loss"} if dtype == "float32" else set()),
          rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "mean"])
def test_kldiv_loss_reductions(tmp_path, reduction):
    # paddle's kl_div writes batchmean and sum as reduction="none" plus reduce ops; the op's own forms as OpDescs
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    target = RNG.uniform(0, 1, (4, 3)).astype(np.float32)
    target[0, 0] = 0.0
    saved = opdesc_program(tmp_path, "kldiv_loss", inputs={"X": ["x"], "Target": ["t"]}, outputs={"Loss": ["loss"]},
                           attrs={"reduction": reduction, "log_target": False}, feeds={"x": x, "t": target})
    check(saved, {"kldiv_loss"}, rtol=1e-6)


def test_sigmoid_cross_entropy_ignore_normalize(tmp_path):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    label = np.array([[0, 1, -100, 0.5]] * 3, np.float32)
    saved = opdesc_program(tmp_path, "sigmoid_cross_entropy_with_logits", inputs={"X": ["x"], "Label": ["lab"]},
                           outputs={"Out": ["out"]}, attrs={"normalize": True, "ignore_index": -100},
                           feeds={"x": x, "lab": label})
    check(saved, {"sigmoid_cross_entropy_with_logits"}, rtol=1e-6)


def test_loss_domain_errors_and_predictor(tmp_path):
    import paddle

    F = paddle.nn.functional
    p = np.array([[0.2, 0.9]], np.float32)
    label = np.array([1], np.int64)
    saved = pir_program(tmp_path, lambda p, label: [F.binary_cross_entropy(p, p), F.nll_loss(p, label)],
                        {"p": p, "label": label})
    check_predictor(saved)
    saved.feeds["label"] = np.array([5], np.int64)
    with pytest.raises(HostKernelError, match="nll_loss.*label value 5"):
        run_on_host(saved)
    saved.feeds["p"] = np.array([[1.5, 0.5]], np.float32)
    with pytest.raises(HostKernelError, match="bce_loss.*\\[0, 1\\]"):
        run_on_host(saved)


# -- matmul: matrix functions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_matrix_functions(tmp_path, dtype):
    import paddle

    m = RNG.standard_normal((2, 3, 3)).astype(dtype)
    singular = np.array([[1, 2], [2, 4]], dtype)
    a, b = RNG.standard_normal((3, 4)).astype(dtype), RNG.standard_normal((4, 2)).astype(dtype)

    def build(m, singular, a, b):
        spd = paddle.matmul(m, m, transpose_y=True) + paddle.eye(3, dtype=dtype)
        return [paddle.linalg.det(m), paddle.linalg.det(singular), paddle.linalg.slogdet(m),
                paddle.linalg.slogdet(singular), paddle.linalg.inv(m), paddle.linalg.cholesky(spd),
                paddle.linalg.cholesky(spd, upper=True), paddle.linalg.matrix_power(m, 3),
                paddle.linalg.matrix_power(m, 0), paddle.linalg.matrix_power(m, -2),
                paddle.addmm(b[0], a, b, beta=0.5, alpha=2.0), paddle.addmm(paddle.ones([3, 2], dtype), a, b),
                paddle.baddbmm(m, m, m, beta=-1.0, alpha=0.25)]

    check(pir_program(tmp_path, build, {"m": m, "singular": singular, "a": a, "b": b}),
          {"determinant", "slogdeterminant", "inverse", "cholesky", "matrix_power", "addmm", "baddbmm"},
          rtol=1e-5 if dtype == "float32" else 1e-11, atol=1e-5 if dtype == "float32" else 1e-11)


def test_decomp_errors_and_predictor(tmp_path):
    import paddle

    m = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)
    saved = pir_program(tmp_path, lambda m: [paddle.linalg.inv(m), paddle.linalg.cholesky(m)], {"m": m})
    check_predictor(saved)
    saved.feeds["m"] = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    with pytest.raises(HostKernelError, match="inverse.*not invertible"):
        run_on_host(saved)
