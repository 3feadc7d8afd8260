"""The linalg host kernels against Paddle: each program is built with paddle's API in PIR static mode, saved, loaded
with our loader and run op by op with every host kernel forced, and compared with Paddle Inference on the saved
program (matrix_rank with a float `tol` also through a legacy static build). Factors unique only up to sign (svd's
and eigh's singular / eigen vectors, eig's eigenvectors up to a unit phase) are compared after fixing that sign;
eigenvalue order, which LAPACK builds do not agree on for eig and eigvals, is matched before comparing.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.host.kernels.registry import HostKernelError
from support.converter_harness import pir_program, static_program
from support.host_kernel_check import check, run_on_host
from support.tolerances import assert_op_close

RNG = np.random.default_rng(23)
# float64 results are checked far tighter than the float32 op tolerance; float32 factorizations round more
TOLERANCE = {"float32": {"atol": 2e-5, "rtol": 2e-5}, "float64": {"atol": 1e-10, "rtol": 1e-9}}


def fix_sign(vectors, axis=-2):
    """Vectors (along `axis`) scaled by the unit phase that makes their largest component real and positive."""
    head = np.take_along_axis(vectors, np.argmax(np.abs(vectors), axis=axis, keepdims=True), axis=axis)
    return vectors * (np.conj(head) / np.abs(head))


def well_conditioned(shape, dtype):
    """Random matrices with singular values in [1, 3] (a float32 factorization stays within 1e-5)."""
    u, _, vh = np.linalg.svd(RNG.standard_normal(shape), full_matrices=False)
    s = RNG.uniform(1.0, 3.0, shape[:-2] + (min(shape[-2:]),))
    return ((u * s[..., None, :]) @ vh).astype(dtype)


def spd(shape, dtype):
    m = RNG.standard_normal(shape)
    return (m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


# -- solvers -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_solve_broadcast_and_vector_rhs(tmp_path, dtype):
    import paddle

    a = well_conditioned((2, 1, 3, 3), dtype)
    feeds = {"a": a, "b": RNG.standard_normal((4, 3, 2)).astype(dtype), "v": RNG.standard_normal(3).astype(dtype),
             "batched": RNG.standard_normal((3, 3)).astype(dtype), "sq": well_conditioned((3, 3, 3), dtype)}

    def build(a, b, v, batched, sq):
        L = paddle.linalg
        # b: a matrix rhs broadcast over the batch; v: 1-D; batched [3, 3] == sq.shape[:-1]: one vector per matrix
        return [L.solve(a, b), L.solve(a[:, 0], v), L.solve(sq, batched), L.solve(sq[0], batched)]

    check(pir_program(tmp_path, build, feeds), {"solve"}, **TOLERANCE[dtype])


def test_solve_singular_raises(tmp_path):
    import paddle

    saved = pir_program(tmp_path, lambda a, b: paddle.linalg.solve(a, b),
                        {"a": np.ones((3, 3)), "b": np.ones((3, 1))}, run_paddle=False)
    with pytest.raises(HostKernelError, match="solve.*not invertible"):  # Paddle: "Input is not invertible"
        run_on_host(saved)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_triangular_and_cholesky_solve(tmp_path, dtype):
    import paddle

    a = RNG.standard_normal((2, 1, 4, 4)) + 4 * np.eye(4)  # both triangles hold values the other mode must not read
    b = RNG.standard_normal((3, 4, 2))
    lower = np.linalg.cholesky(spd((2, 1, 4, 4), "float64"))
    factor = lower + np.triu(RNG.standard_normal((4, 4)), 1)  # junk above: cholesky_solve reads one triangle
    feeds = {k: v.astype(dtype) for k, v in {"a": a, "b": b, "f": factor}.items()}

    def build(a, b, f):
        L = paddle.linalg
        outs = [L.triangular_solve(a, b, upper=up, transpose=tr, unitriangular=un)
                for up in (True, False) for tr in (False, True) for un in (False, True)]
        return outs + [L.cholesky_solve(b, f), L.cholesky_solve(b, paddle.transpose(f, [0, 1, 3, 2]), upper=True)]

    check(pir_program(tmp_path, build, feeds), {"triangular_solve", "cholesky_solve"}, **TOLERANCE[dtype])


def test_triangular_solve_zero_diagonal_gives_nan(tmp_path):
    import paddle

    z = np.triu(np.ones((3, 3)))
    z[1, 1] = 0
    # Paddle (BLAS trsm) returns inf / NaN for a singular triangle and raises nothing; cholesky_solve likewise
    saved = pir_program(tmp_path, lambda z, b: [paddle.linalg.triangular_solve(z, b),
                                                paddle.linalg.cholesky_solve(b, z * 0)],
                        {"z": z, "b": np.ones((3, 2))})
    check(saved, {"triangular_solve", "cholesky_solve"})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lu_lu_unpack_lu_solve(tmp_path, dtype):
    import paddle

    singular = np.array([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]])  # a zero pivot in column 3: info 3, no error
    feeds = {"sq": well_conditioned((2, 1, 4, 4), dtype), "tall": RNG.standard_normal((2, 5, 3)).astype(dtype),
             "wide": RNG.standard_normal((3, 5)).astype(dtype), "b": RNG.standard_normal((3, 4, 2)).astype(dtype),
             "singular": singular.astype(dtype), "zeros": np.zeros((3, 3), dtype)}

    def build(sq, tall, wide, b, singular, zeros):
        L = paddle.linalg
        outs = []
        for x in (sq, tall, wide, singular, zeros):
            lu, piv, info = L.lu(x, get_infos=True)
            outs += [lu, piv, info, *L.lu_unpack(lu, piv)]
        lu, piv = L.lu(sq)
        outs += [L.lu_solve(b, lu, piv, trans=t) for t in ("N", "T")]
        lu, piv = L.lu(singular)
        return outs + [L.lu_solve(paddle.ones([3, 1], dtype), lu, piv)]  # U's zero pivot: inf / NaN, no error

    check(pir_program(tmp_path, build, feeds), {"lu", "lu_unpack", "lu_solve"}, **TOLERANCE[dtype])
    # trans 'C' in a program of its own: Paddle Inference merges a 'T' and a 'C' lu_solve of the same operands
    # into one op and then cannot fetch the dropped one
    (tmp_path / "c").mkdir()
    saved = pir_program(tmp_path / "c", lambda sq, b: paddle.linalg.lu_solve(b, *paddle.linalg.lu(sq), trans="C"),
                        {"sq": feeds["sq"], "b": feeds["b"]})
    check(saved, {"lu_solve"}, **TOLERANCE[dtype])


def test_lu_unpack_one_part(tmp_path):
    import paddle

    x = RNG.standard_normal((2, 4, 4))

    def build(x):
        lu, piv = paddle.linalg.lu(x)
        # Paddle leaves the part it does not unpack unallocated: only the unpacked one can be fetched
        return [paddle.linalg.lu_unpack(lu, piv, unpack_ludata=False)[0],
                *paddle.linalg.lu_unpack(lu, piv, unpack_pivots=False)[1:]]

    check(pir_program(tmp_path, build, {"x": x}), {"lu_unpack"}, **TOLERANCE["float64"])


def test_lu_without_pivoting_raises(tmp_path):
    import paddle

    saved = pir_program(tmp_path, lambda x: paddle.linalg.lu(x, pivot=False), {"x": np.eye(3)}, run_paddle=False)
    with pytest.raises(HostKernelError, match="lu.*without pivoting"):
        run_on_host(saved)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_lstsq(tmp_path, dtype, driver):
    import paddle

    deficient = RNG.standard_normal((2, 5, 3))
    deficient[1, :, 2] = deficient[1, :, 0] + deficient[1, :, 1]  # rank 2: no residuals for the batch (gelsd/gelss)
    feeds = {"tall": well_conditioned((2, 5, 3), dtype), "wide": well_conditioned((2, 3, 5), dtype),
             "y5": RNG.standard_normal((2, 5, 2)).astype(dtype), "y3": RNG.standard_normal((2, 3, 2)).astype(dtype)}
    if driver != "gels":  # gels assumes full rank: Paddle's solution for a deficient matrix is meaningless
        feeds["deficient"] = deficient.astype(dtype)

    # what the op computes: the API puts paddle.empty in place of gels' rank and singular values and of gelsy's
    # singular values (and Paddle Inference merges those alike empty ops, so they cannot all be fetched)
    computed = {"gels": 2, "gelsy": 3}.get(driver, 4)

    def build(tall, wide, y5, y3, deficient=None):
        outs = [*paddle.linalg.lstsq(tall, y5, driver=driver)[:computed],
                *paddle.linalg.lstsq(wide, y3, driver=driver)[:computed]]
        if deficient is not None:
            outs += paddle.linalg.lstsq(deficient, y5, driver=driver)[:computed]
        return outs

    check(pir_program(tmp_path, build, feeds), {"lstsq"}, **TOLERANCE[dtype])


# -- factorizations ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_qr(tmp_path, dtype):
    import paddle

    feeds = {"tall": RNG.standard_normal((2, 4, 3)).astype(dtype), "wide": RNG.standard_normal((3, 5)).astype(dtype)}

    def build(tall, wide):
        L = paddle.linalg
        return [*L.qr(tall), *L.qr(tall, mode="complete"), L.qr(tall, mode="r"), *L.qr(wide), *L.qr(wide, "complete")]

    # Householder QR fixes the signs (LAPACK and Eigen alike): Q and R compared as they are
    check(pir_program(tmp_path, build, feeds), {"qr"}, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_svd_and_svdvals(tmp_path, dtype):
    import paddle

    feeds = {"tall": RNG.standard_normal((2, 4, 3)).astype(dtype), "wide": RNG.standard_normal((3, 5)).astype(dtype)}

    def build(tall, wide):
        L = paddle.linalg
        return [*L.svd(tall), *L.svd(tall, full_matrices=True), *L.svd(wide), L.svdvals(tall), L.svdvals(wide)]

    saved = pir_program(tmp_path, build, feeds)
    got = run_on_host(saved, {"svd", "svdvals"})
    for i, (g, w) in enumerate(zip(got, saved.outputs)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"output {i}: {g.dtype}{g.shape}, Paddle {w.dtype}{w.shape}"
    outputs = [list(got), list(saved.outputs)]
    for values in outputs:
        # a singular pair (u_k, v_k) is unique up to one sign: the one making u_k's largest component positive
        for u_slot in (0, 3, 6):
            u, vh = values[u_slot], values[u_slot + 2]
            head = np.take_along_axis(u, np.argmax(np.abs(u), axis=-2, keepdims=True), axis=-2)
            values[u_slot] = u * np.sign(head)
            values[u_slot + 2] = vh * np.swapaxes(np.sign(head), -1, -2)[..., :vh.shape[-2], :]
    for i, (g, w) in enumerate(zip(*outputs)):
        assert_op_close(g, w, what=f"output {i}", **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eigh_and_eigvalsh(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((2, 4, 4)).astype(dtype)  # not symmetric: each UPLO reads its own triangle

    def build(x):
        L = paddle.linalg
        return [*L.eigh(x), *L.eigh(x, UPLO="U"), L.eigvalsh(x), L.eigvalsh(x, UPLO="U")]

    saved = pir_program(tmp_path, build, {"x": x})
    got = run_on_host(saved, {"eigh", "eigvalsh"})
    for i, (g, w) in enumerate(zip(got, saved.outputs)):
        assert g.dtype == w.dtype and g.shape == w.shape
        if i in (1, 3):
            g, w = fix_sign(g), fix_sign(w)
        assert_op_close(g, w, what=f"output {i}", **TOLERANCE[dtype])


def matching_order(got, want):
    """The permutation putting `got`'s eigenvalues in `want`'s order (nearest each; it must be a permutation)."""
    order = np.argmin(np.abs(want[..., :, None] - got[..., None, :]), axis=-1)
    assert (np.sort(order, axis=-1) == np.arange(got.shape[-1])).all(), "the eigenvalues do not pair up"
    return order


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eig_and_eigvals(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((3, 4, 4)).astype(dtype)  # real and complex-conjugate eigenvalues
    x[2] = np.diag([1.0, -2.0, 3.0, 0.5])  # all real: complex outputs all the same

    def build(x):
        w, v = paddle.linalg.eig(x)
        # Paddle Inference cannot hand out a complex tensor: the real and imaginary parts leave through real ops
        eigvals = paddle.as_real(paddle.linalg.eigvals(x))
        return [paddle.real(w), paddle.imag(w), paddle.real(v), paddle.imag(v), eigvals]

    saved = pir_program(tmp_path, build, {"x": x})
    got = run_on_host(saved, {"eig", "eigvals", "real", "imag", "as_real"})
    for g, w in zip(got, saved.outputs):
        assert g.dtype == w.dtype and g.shape == w.shape
    values, values_w = got[0] + 1j * got[1], saved.outputs[0] + 1j * saved.outputs[1]
    vectors, vectors_w = got[2] + 1j * got[3], saved.outputs[2] + 1j * saved.outputs[3]
    order = matching_order(values, values_w)
    values, vectors = np.take_along_axis(values, order, -1), np.take_along_axis(vectors, order[..., None, :], -1)
    only = got[4][..., 0] + 1j * got[4][..., 1]
    only_w = saved.outputs[4][..., 0] + 1j * saved.outputs[4][..., 1]
    only = np.take_along_axis(only, matching_order(only, only_w), -1)
    for what, g, w in (("eigenvalues", values, values_w), ("eigenvectors", fix_sign(vectors), fix_sign(vectors_w)),
                       ("eigvals", only, only_w)):
        assert_op_close(np.stack([g.real, g.imag]), np.stack([w.real, w.imag]), what=what, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_slogdet_v2(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((5, 4, 4))
    x[1] = 0  # singular: sign 0, log|det| -inf
    x[2, 0] = x[2, 3]
    x[3] = np.eye(4)[[1, 2, 0, 3]] * 2  # a permutation: the pivots' sign
    x[4, 0, 0] = np.nan  # a NaN determinant: sign 0, log|det| NaN
    big = np.diag(np.full(20, 1e10))
    big[0, 0] = -1e10  # |det| = 1e200: inf in float32 (Paddle computes the determinant itself)

    def build(x, big):
        return [*paddle.compat.slogdet(x), *paddle.compat.slogdet(big), *paddle.compat.slogdet(x[:, :0, :0])]

    saved = pir_program(tmp_path, build, {"x": x.astype(dtype), "big": big.astype(dtype)})
    check(saved, {"slogdet_v2"}, **TOLERANCE[dtype])


# -- ranks -------------------------------------------------------------------------------------------------------------
def rank_inputs(dtype, hermitian):
    # A generator of its own: drawn from the module's, the matrices hung on which tests of this module ran before in
    # the same worker, and some draws put a singular value at a rank's tolerance (Paddle and numpy then disagree).
    x = np.random.default_rng(29).standard_normal((2, 3, 4, 4))
    x[0, 0, :, 3] = x[0, 0, :, 0]  # rank 3
    x[0, 1] *= 1e-3  # every singular value below 0.01
    x[1, 0, :, 3] = x[1, 0, :, 0] + 1e-9  # a tiny singular value the default tolerance keeps
    x[1, 2] = 0
    if hermitian:
        x = x + np.swapaxes(x, -1, -2)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank_tensor_tolerances(tmp_path, dtype, hermitian):
    import paddle

    feeds = {"x": rank_inputs(dtype, hermitian), "tol": np.array([0.5, 0.01, 1.0], dtype),
             "atol": np.array([[0.1], [2.0]], dtype), "rtol": np.array([0.5, 0.01, 0.3], dtype),
             "mixed": np.array([0.0, 0.1, -1.0], dtype)}

    def build(x, tol, atol, rtol, mixed):
        def rank(**kw):
            return paddle.linalg.matrix_rank(x, hermitian=hermitian, **kw)

        # tol as a tensor: matrix_rank_tol; atol / rtol: matrix_rank_atol_rtol (rtol defaults where atol is 0)
        return [rank(tol=tol), rank(tol=paddle.full([], -1.0, dtype)), rank(atol=atol), rank(atol=atol, rtol=rtol),
                rank(rtol=rtol), rank(atol=mixed), rank(atol=0.0), rank(atol=-1.0)]

    check(pir_program(tmp_path, build, feeds), {"matrix_rank", "matrix_rank_atol_rtol"})


def float_tol_ranks(hermitian):
    def build(x):
        import paddle

        return [paddle.linalg.matrix_rank(x, hermitian=hermitian), paddle.linalg.matrix_rank(x, 0.5, hermitian),
                paddle.linalg.matrix_rank(x, tol=-1.0, hermitian=hermitian)]

    return build


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank_float_tol(tmp_path, dtype, hermitian):
    """pd_op.matrix_rank: a float `tol` attribute, or none (use_default_tol)."""
    check(pir_program(tmp_path, float_tol_ranks(hermitian), {"x": rank_inputs(dtype, hermitian)}), {"matrix_rank"})


@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank_legacy_tol_attribute(tmp_path, hermitian):
    """The legacy matrix_rank op carries the float `tol` as an attribute too."""
    check(static_program(tmp_path, float_tol_ranks(hermitian), {"x": rank_inputs("float64", hermitian)}),
          {"matrix_rank"})
