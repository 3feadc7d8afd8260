"""Host kernels (bitwise, linear algebra, spatial, softmax_with_cross_entropy, partial_*, repeats, quantize_linear)
against
Paddle: each program (PIR through Paddle's API where it builds, else a legacy OpDesc) is saved, loaded with
our loader and run op by op with every host kernel forced, and compared with Paddle Inference on the saved
program; one program per module also goes through `create_predictor` end to end (the op lands on the host).
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.host import HostExecutor
from nnadapter_bridge.host.kernels.registry import HostKernelError
from nnadapter_bridge.loader import load_model
from support.converter_harness import opdesc_program, pir_program, run_predictor
from support.host_kernel_check import check, run_on_host
from support.tolerances import assert_model_close

RNG = np.random.default_rng(11)


def check_predictor(saved):
    got = run_predictor(saved, "builtin_device")
    assert len(got) == len(saved.outputs)
    for g, w in zip(got, saved.outputs):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, equal_nan=True)


# -- elementwise: bitwise -------------------------------------------------------------------------------------
# int16 is left out: Paddle Inference 3.3.1 cannot take an int16 feed (it reads it as int32)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64"])
def test_bitwise(tmp_path, dtype):
    import paddle

    info = np.iinfo(dtype) if dtype != "bool" else None
    if info is None:
        a, b = RNG.integers(0, 2, (3, 4)).astype(bool), RNG.integers(0, 2, (4,)).astype(bool)
    else:
        a = RNG.integers(info.min, info.max, (3, 4), endpoint=True).astype(dtype)
        b = RNG.integers(info.min, info.max, (4,), endpoint=True).astype(dtype)
    saved = pir_program(tmp_path, lambda a, b: [paddle.bitwise_and(a, b), paddle.bitwise_or(a, b),
                                                paddle.bitwise_xor(a, b), paddle.bitwise_not(a)], {"a": a, "b": b})
    check(saved, {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"})


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64"])
def test_bitwise_shifts(tmp_path, dtype):
    import paddle

    bits = np.dtype(dtype).itemsize * 8
    a = np.array([1, -8, 5, -3, 100, -1, 7, 0] if dtype != "uint8" else [1, 8, 5, 3, 100, 255, 7, 0], dtype)
    b = np.array([1, 2, bits + 3, 0 if dtype == "uint8" else -1, 3, bits - 1, bits, 4], dtype)

    def build(a, b):
        return [paddle.bitwise_left_shift(a, b), paddle.bitwise_right_shift(a, b),
                paddle.bitwise_right_shift(a, b, is_arithmetic=False), paddle.bitwise_left_shift(a, b, False)]

    check(pir_program(tmp_path, build, {"a": a, "b": b}), {"bitwise_left_shift", "bitwise_right_shift"})


def test_bitwise_empty_and_0d_through_predictor(tmp_path):
    import paddle

    b = np.zeros((0, 3), np.int32)
    saved = pir_program(
        tmp_path,
        lambda b: [paddle.bitwise_xor(paddle.full([], 6, "int32"), paddle.full([], 3, "int32")), paddle.bitwise_not(b)],
        {"b": b},
    )
    check(saved, {"bitwise_xor", "bitwise_not"})
    check_predictor(saved)


def test_bitwise_rejects_float(tmp_path):
    x = np.ones(3, np.float32)
    saved = opdesc_program(tmp_path, "bitwise_not", inputs={"X": ["x"]}, outputs={"Out": ["out"]}, feeds={"x": x},
                           run_paddle=False)
    with pytest.raises(HostKernelError, match="bitwise_not.*float32"):
        run_on_host(saved)


# -- matmul: linear algebra -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dist_and_mv(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((3, 4)).astype(dtype)
    y = RNG.standard_normal((4,)).astype(dtype)
    y[1] = x[0, 1]

    def build(x, y):
        return [paddle.dist(x, y, p) for p in (2.0, 0.0, 1.0, 3.5, float("inf"), float("-inf"), -1.5)] + \
            [paddle.mv(x, y)]

    check(pir_program(tmp_path, build, {"x": x, "y": y}), {"dist", "mv"})


def test_dist_nan_and_empty(tmp_path):
    import paddle

    x = np.array([1.0, np.nan, 3.0], np.float32)
    e = np.zeros((0, 2), np.float32)
    saved = pir_program(tmp_path, lambda x, e: [paddle.dist(x, paddle.zeros([3]), 2.0),
                                                paddle.dist(x, paddle.zeros([3]), 0.0),
                                                paddle.dist(e, e, 2.0)], {"x": x, "e": e})
    check(saved, {"dist"})


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_kron_trace_diag_diagonal_cross(tmp_path, dtype):
    import paddle

    x = (RNG.standard_normal((3, 3)) * 4).astype(dtype)
    y = (RNG.standard_normal((2, 3, 3)) * 4).astype(dtype)
    v = (RNG.standard_normal((4,)) * 4).astype(dtype)

    def build(x, y, v):
        return [paddle.kron(x, y), paddle.kron(v, x), paddle.trace(x), paddle.trace(y, offset=-1, axis1=1, axis2=2),
                paddle.trace(x, offset=5), paddle.diag(x), paddle.diag(x, offset=-1), paddle.diag(v, 1, 7),
                paddle.diag(v, -2), paddle.diagonal(y, 1, 2, 0), paddle.diagonal(y, -1, 1, 2),
                paddle.cross(x, x[::-1]), paddle.cross(y, y * 2, axis=1), paddle.cross(y, y[:, ::-1], axis=-1)]

    check(pir_program(tmp_path, build, {"x": x, "y": y, "v": v}),
          {"kron", "trace", "diag_v2", "diagonal", "cross"}, rtol=1e-6)


def test_linalg_through_predictor(tmp_path):
    import paddle

    x = RNG.standard_normal((3, 4)).astype(np.float32)
    v = RNG.standard_normal((4,)).astype(np.float32)
    saved = pir_program(tmp_path, lambda x, v: [paddle.mv(x, v), paddle.dist(x, v, 3.0)], {"x": x, "v": v})
    check_predictor(saved)


# -- conv: unfold; pool: maxout, unpool; shape; sampling: affine_grid -----------------------------------------
@pytest.mark.parametrize("kernel,strides,paddings,dilations", [
    ([2, 2], 1, 0, 1), ([3, 2], [2, 1], [1, 0, 2, 1], [1, 2]), ([2, 3], 2, [1, 2], 1)])
def test_unfold(tmp_path, kernel, strides, paddings, dilations):
    import paddle

    x = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.unfold(x, kernel, strides, paddings, dilations),
                        {"x": x})
    check(saved, {"unfold"}, exact=True)


@pytest.mark.parametrize("output_sizes,kernel,strides,paddings,dilations", [
    ([8, 6], [2, 2], 2, 0, 1),  # blocks that tile the output (MobileViTV2's patch folding)
    ([7, 8], [3, 2], [2, 1], [1, 0, 1, 0], [1, 2]),  # overlapping, padded, dilated blocks that add up
    ([5, 6], [3, 3], 1, [1, 2], 1),  # every position summed from up to 9 blocks
    ([6, 7], [2, 3], 2, [1, 2], 1)])
def test_fold(tmp_path, output_sizes, kernel, strides, paddings, dilations):
    import paddle

    def pairs(v):
        return [v, v] if isinstance(v, int) else v

    k, s, d = pairs(kernel), pairs(strides), pairs(dilations)
    p = [paddings] * 2 if isinstance(paddings, int) else paddings[:2]  # Paddle's fold pads H by p[0], W by p[1]
    blocks = [(output_sizes[a] + 2 * p[a] - (d[a] * (k[a] - 1) + 1)) // s[a] + 1 for a in (0, 1)]
    x = RNG.standard_normal((2, 3 * k[0] * k[1], blocks[0] * blocks[1])).astype(np.float32)
    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.fold(x, output_sizes, kernel, strides, paddings,
                                                                      dilations), {"x": x})
    check(saved, {"fold"})


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_temporal_shift_pixel_unshuffle_maxout(tmp_path, data_format):
    import paddle

    F = paddle.nn.functional
    x = RNG.standard_normal((6, 8, 4, 4)).astype(np.float32)
    x[0, 0, 0, 1] = np.nan  # first of its maxout group along C, second along W
    x[1, :, 0, :] = -np.inf  # an all -inf maxout group gives -FLT_MAX in Paddle

    def build(x):
        return [
            F.temporal_shift(x, 3, 0.25, data_format=data_format),
            F.temporal_shift(x, 2, 0.1, data_format=data_format),
            F.pixel_unshuffle(x, 2, data_format=data_format),
            F.maxout(x, 4, axis=1 if data_format == "NCHW" else -1),
            F.maxout(x, 2, axis=3),
        ]

    check(pir_program(tmp_path, build, {"x": x}), {"temporal_shift", "pixel_unshuffle", "maxout"}, exact=True)


def test_spatial_through_predictor(tmp_path):
    import paddle

    x = RNG.standard_normal((4, 4, 6, 6)).astype(np.float32)
    saved = pir_program(tmp_path, lambda x: [paddle.nn.functional.unfold(x, [3, 3], 1, 1),
                                             paddle.nn.functional.temporal_shift(x, 2)], {"x": x})
    check_predictor(saved)


# -- loss: softmax_with_cross_entropy -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("label_dtype", ["int64", "int32"])
def test_softmax_with_cross_entropy_hard(tmp_path, dtype, label_dtype):
    import paddle

    logits = RNG.standard_normal((5, 4)).astype(dtype)
    logits[0] = [0.0, 1000.0, 2.0, -3.0]  # exp underflow: Paddle's -64 floor shows in the loss
    logits[4, 2] = np.nan
    label = np.array([[0], [1], [2], [3], [1]], label_dtype)
    logits3 = RNG.standard_normal((2, 3, 4)).astype(dtype)
    label3 = RNG.integers(0, 3, (2, 1, 4)).astype(label_dtype)
    label3[0, 0, 1] = 2

    def build(logits, label, logits3, label3):
        F = paddle.nn.functional
        return [*F.softmax_with_cross_entropy(logits, label, return_softmax=True),
                F.softmax_with_cross_entropy(logits, label, ignore_index=1),
                F.softmax_with_cross_entropy(logits3, label3, axis=1, ignore_index=2, return_softmax=True)[0],
                F.softmax_with_cross_entropy(logits, label, numeric_stable_mode=False)]

    saved = pir_program(tmp_path, build, {"logits": logits, "label": label, "logits3": logits3, "label3": label3})
    check(saved, {"softmax_with_cross_entropy"}, rtol=1e-6)


def test_softmax_with_cross_entropy_soft_and_no_softmax(tmp_path):
    logits = RNG.standard_normal((3, 4)).astype(np.float32)
    logits[0] = [0.0, 1000.0, 2.0, -3.0]
    soft = RNG.dirichlet(np.ones(4), 3).astype(np.float32)
    probs = np.array([[0.0, 1.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4], [0.25] * 4], np.float32)
    for i, (x, use_softmax) in enumerate(((logits, True), (probs, False))):
        (tmp_path / str(i)).mkdir()
        saved = opdesc_program(
            tmp_path / str(i),
            "softmax_with_cross_entropy",
            inputs={"Logits": ["x"], "Label": ["lab"]},
            outputs={"Softmax": ["sm"], "Loss": ["loss"]},
            attrs={
                "soft_label": True,
                "use_softmax": use_softmax,
                "numeric_stable_mode": True,
                "ignore_index": -100,
                "axis": -1,
            },
            feeds={"x": x, "lab": soft},
        )
        check(saved, {"softmax_with_cross_entropy"}, rtol=1e-6)
    hard = np.array([[0], [3], [2]], np.int64)  # log(0) clamps to 1e20 in Paddle
    (tmp_path / "hard").mkdir()
    saved = opdesc_program(tmp_path / "hard", "softmax_with_cross_entropy",
                           inputs={"Logits": ["x"], "Label": ["lab"]}, outputs={"Softmax": ["sm"], "Loss": ["loss"]},
                           attrs={"soft_label": False, "use_softmax": False, "ignore_index": -100, "axis": -1},
                           feeds={"x": probs, "lab": hard})
    check(saved, {"softmax_with_cross_entropy"}, rtol=1e-6)


def test_softmax_with_cross_entropy_bad_label_and_predictor(tmp_path):
    import paddle

    logits = RNG.standard_normal((2, 3)).astype(np.float32)
    label = np.array([[2], [0]], np.int64)
    saved = pir_program(tmp_path, lambda x, lab: paddle.nn.functional.softmax_with_cross_entropy(x, lab),
                        {"x": logits, "lab": label})
    check_predictor(saved)
    saved.feeds["lab"] = np.array([[5], [0]], np.int64)
    with pytest.raises(HostKernelError, match="softmax_with_cross_entropy.*label value 5"):
        run_on_host(saved)


# -- tensor: partial_concat, partial_sum ----------------------------------------------------------------------
@pytest.mark.parametrize("op_type", ["partial_concat", "partial_sum"])
@pytest.mark.parametrize("start,length", [(0, -1), (1, 2), (-3, 2), (2, -1)])
def test_partial(tmp_path, op_type, start, length):
    if op_type == "partial_sum" and start < 0:
        pytest.skip(
            "Paddle's partial_sum reads outside its input for a negative start (see test_partial_sum_negative_start)"
        )
    feeds = {f"x{i}": RNG.standard_normal((3, 5)).astype(np.float32) for i in range(3)}
    saved = opdesc_program(tmp_path, op_type, inputs={"X": list(feeds)}, outputs={"Out": ["out"]},
                           attrs={"start_index": start, "length": length}, feeds=feeds)
    check(saved, {op_type}, rtol=1e-6)


def test_partial_sum_negative_start(tmp_path):
    feeds = {f"x{i}": RNG.standard_normal((2, 4)).astype(np.float32) for i in range(2)}
    saved = opdesc_program(tmp_path, "partial_sum", inputs={"X": list(feeds)}, outputs={"Out": ["out"]},
                           attrs={"start_index": -2, "length": 1}, feeds=feeds, run_paddle=False)
    with pytest.raises(HostKernelError, match="partial_sum.*start_index -2"):
        run_on_host(saved)


def test_partial_through_predictor(tmp_path):
    feeds = {f"x{i}": RNG.standard_normal((2, 4)).astype(np.float32) for i in range(2)}
    saved = opdesc_program(tmp_path, "partial_concat", inputs={"X": list(feeds)}, outputs={"Out": ["out"]},
                           attrs={"start_index": 1, "length": 2}, feeds=feeds)
    check_predictor(saved)


# -- tensor: repeat_interleave; shape: broadcast_tensors ------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_repeat_interleave_int(tmp_path, dtype):
    import paddle

    x = (RNG.standard_normal((2, 3)) * 5).astype(dtype)
    saved = pir_program(tmp_path, lambda x: [paddle.repeat_interleave(x, 2, axis=1), paddle.repeat_interleave(x, 3),
                                             paddle.repeat_interleave(x, 1, axis=0),
                                             paddle.repeat_interleave(x, 2, axis=-2)], {"x": x})
    check(saved, {"repeat_interleave"}, exact=True)


def test_repeat_interleave_tensor_legacy(tmp_path):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    repeats = np.array([1, 0, 2], np.int64)
    saved = opdesc_program(tmp_path, "repeat_interleave", inputs={"X": ["x"], "RepeatsTensor": ["r"]},
                           outputs={"Out": ["out"]}, attrs={"Repeats": 0, "dim": 0, "output_size": -1},
                           feeds={"x": x, "r": repeats})
    check(saved, {"repeat_interleave"}, exact=True)
    check_predictor(saved)


def test_repeat_interleave_tensor_pir(tmp_path):
    """paddle.repeat_interleave with tensor repeats is pd_op.repeat_interleave_with_tensor_index in PIR; the reader
    names its operands (x, repeats -> X, RepeatTensor) and the host kernel runs it."""
    import paddle

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    repeats = np.array([1, 0, 2, 3], np.int64)
    saved = pir_program(tmp_path, lambda x, r: [paddle.repeat_interleave(x, r, axis=1)], {"x": x, "r": repeats})
    np.testing.assert_array_equal(saved.outputs[0], np.repeat(x, repeats, axis=1))  # what Paddle gave
    check(saved, {"repeat_interleave_with_tensor_index"}, exact=True)
    check_predictor(saved)


# -- quantization ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("round_type", [0, 1])
@pytest.mark.parametrize("quant_axis,scale", [(-1, [127.0]), (-1, [0.8]), (0, [0.8, 1.6]),
                                              (1, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])])
@pytest.mark.parametrize("qrange", [{}, {"qmin": -8, "qmax": 7, "bit_length": 4}, {"qmin": 0, "qmax": 7},
                                    {"qmin": -4, "qmax": 100}])
def test_quantize_linear_standalone(tmp_path, round_type, quant_axis, scale, qrange):
    x = np.array([[0.5, 1.5, 2.5, -0.5, -2.5, 0.05, np.nan, np.inf],
                  [0.35, -0.25, 0.0, 200.0, -200.0, 0.1, -np.inf, 63.5]], np.float32)
    attrs = {"quant_axis": quant_axis, "bit_length": 8, "round_type": round_type, "is_test": True,
             "only_observer": False, **qrange}
    scale = np.array(scale, np.float32)
    saved = opdesc_program(tmp_path, "quantize_linear", inputs={"X": ["x"], "Scale": ["s"], "ZeroPoint": ["z"]},
                           outputs={"Y": ["y"]}, attrs=attrs, feeds={"x": x},
                           params={"s": scale, "z": np.zeros(scale.shape, np.float32)})
    check(saved, {"quantize_linear"}, exact=True)


def test_quantize_linear_through_predictor(tmp_path):
    x = RNG.uniform(-2, 2, (3, 5)).astype(np.float32)
    saved = opdesc_program(tmp_path, "quantize_linear", inputs={"X": ["x"], "Scale": ["s"], "ZeroPoint": ["z"]},
                           outputs={"Y": ["y"]}, attrs={"quant_axis": -1, "bit_length": 8, "round_type": 0,
                                                        "is_test": True}, feeds={"x": x},
                           params={"s": np.array([1.5], np.float32), "z": np.zeros(1, np.float32)})
    check_predictor(saved)


# -- activation and elementwise: float math -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_math(tmp_path, dtype):
    import paddle

    x = np.array([[-2.5, -1.0, -0.5, 0.0, 0.3, 0.999, 1.0, 1.7], [np.nan, np.inf, -np.inf, 2.0, 0.5, 0.01, -0.0, 5.5]],
                 dtype)
    y = np.array([[1.0, np.nan, -0.5, 4.0, 0.1, -1.0, np.nan, 3.0]], dtype)

    def build(x, y):
        return [paddle.trunc(x), paddle.expm1(x), paddle.asinh(x), paddle.acosh(x), paddle.atanh(x), paddle.logit(x),
                paddle.logit(x, 0.1), paddle.fmax(x, y), paddle.fmin(x, y), paddle.heaviside(x, y),
                paddle.lerp(x, y, 0.3), paddle.lerp(x, y, paddle.abs(y))]

    check(pir_program(tmp_path, build, {"x": x, "y": y}),
          {"trunc", "expm1", "asinh", "acosh", "atanh", "logit", "elementwise_fmax", "elementwise_fmin",
           "elementwise_heaviside", "lerp"}, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_trunc_fmax_fmin_heaviside(tmp_path, dtype):
    import paddle

    x = np.array([[-3, 0, 5, 7]], dtype)
    y = np.array([[2], [-1]], dtype)
    saved = pir_program(tmp_path, lambda x, y: [paddle.trunc(x), paddle.fmax(x, y), paddle.fmin(x, y),
                                                paddle.heaviside(x, y)], {"x": x, "y": y})
    check(saved, {"trunc", "elementwise_fmax", "elementwise_fmin", "elementwise_heaviside"})


def test_float_math_through_predictor(tmp_path):
    import paddle

    x = RNG.uniform(0.05, 0.95, (2, 0, 3)).astype(np.float32)
    z = RNG.uniform(0.05, 0.95, (3, 4)).astype(np.float32)
    saved = pir_program(tmp_path, lambda x, z: [paddle.logit(x), paddle.atanh(z), paddle.fmax(z, 1 - z)],
                        {"x": x, "z": z})
    check_predictor(saved)


# -- spectral: Fourier transforms and complex values (NNAdapter has neither: these ops run on the host around the
# subgraphs), op by op against Paddle Inference, and FNet's token mixing through create_predictor on every device.

def _spectral_randn(*shape):
    return np.random.default_rng(23).standard_normal(shape).astype(np.float32)


def _fft_cases():
    import paddle

    fft = paddle.fft
    return {
        "fftn_real": (lambda x: paddle.real(fft.fftn(x, axes=(0, 1, 2))), "fft_r2c"),
        "rfft_ortho": (lambda x: paddle.imag(fft.rfft(x, norm="ortho")), "fft_r2c"),
        "ihfft": (lambda x: paddle.real(fft.ihfft(x)), "fft_r2c"),
        "fft2_c2c_forward_norm": (lambda x: paddle.as_real(fft.fft2(paddle.complex(x, x * 2), norm="forward")),
                                  "fft_c2c"),
        "ifft_c2c": (lambda x: paddle.imag(fft.ifft(paddle.complex(x, -x))), "fft_c2c"),
        "as_complex": (lambda x: paddle.real(paddle.as_complex(x.reshape([2, 3, 2, 2]))) * 3.0, "as_complex"),
    }


@pytest.mark.parametrize("case", ["fftn_real", "rfft_ortho", "ihfft", "fft2_c2c_forward_norm", "ifft_c2c",
                                  "as_complex"])
def test_spectral_kernel_matches_paddle(tmp_path, case):
    build, op_type = _fft_cases()[case]
    saved = pir_program(tmp_path, build, {"x": _spectral_randn(2, 3, 4)})
    check(saved, expect_ops=(op_type,))


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack"])
def test_fnet_token_mixing_runs_through_the_predictor(tmp_path, device):
    """FNet's mixing layer: real(fftn(h, axes=(0, 1, 2))) between two dense layers."""
    import paddle

    if device == "google_xnnpack":
        pytest.importorskip("ai_edge_litert")

    def build(x):
        h = paddle.nn.Linear(8, 8)(x)
        mixed = paddle.real(paddle.fft.fftn(h, axes=(0, 1, 2)))
        return paddle.nn.functional.layer_norm(mixed + h, [8])

    saved = pir_program(tmp_path, build, {"x": _spectral_randn(2, 5, 8)})
    got = run_predictor(saved, device)
    assert_model_close(got[0], saved.outputs[0], what=device)


# -- argsort: Paddle's order of equal keys (std::sort's unless stable), which TOP_K does not give ----------------

@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("size", [7, 40, 300])
def test_argsort_orders_equal_keys_as_paddle(tmp_path, dtype, descending, stable, size):
    """PP-DocLayoutV2 sorts a 0/1 mask of 300 queries descending: Paddle's unstable argsort leaves the equal keys in
    std::sort's (introsort's) order, not index order."""
    import paddle

    rng = np.random.default_rng(size)
    x = (rng.random((2, size)) > 0.6).astype(dtype) if dtype != "float32" else \
        rng.integers(0, 4, (2, size)).astype(dtype)
    if dtype == "float32":
        x[0, ::7] = np.nan  # NaN last ascending, first descending; NaNs tie among themselves
    saved = pir_program(tmp_path, lambda x: paddle.argsort(x, axis=-1, descending=descending, stable=stable),
                        {"x": x})
    check(saved, expect_ops=("argsort",), exact=True)


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_an_unstable_argsort_of_integer_keys_runs_on_the_host_kernel(tmp_path, device):
    import paddle

    x = (np.random.default_rng(4).random((1, 300)) > 0.7).astype("int32")
    saved = pir_program(tmp_path, lambda x: paddle.argsort(x, axis=1, descending=True) * 2, {"x": x})
    np.testing.assert_array_equal(run_predictor(saved, device)[0], saved.outputs[0])


# -- top_k: Paddle's order of equal keys (std::partial_sort's or std::nth_element's), which TOP_K does not give ---

@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("sorted_", [True, False])
@pytest.mark.parametrize("size, k", [(7, 3), (40, 40), (300, 2), (300, 20)])  # k * 64 < n: partial_sort; else not
def test_top_k_orders_equal_keys_as_paddle(tmp_path, dtype, largest, sorted_, size, k):
    import paddle

    rng = np.random.default_rng(size + k)
    x = rng.integers(0, 4, (3, size)).astype(dtype)
    if dtype == "float32":
        x[0, ::7] = np.nan  # NaN first when largest, last otherwise; NaNs tie among themselves
    saved = pir_program(tmp_path, lambda x: paddle.topk(x, k, axis=-1, largest=largest, sorted=sorted_), {"x": x})
    check(saved, expect_ops=("top_k_v2",), exact=True)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("fill", ["zeros", "nan_and_zeros", "distinct"])
def test_top_k_of_a_long_row_matches_paddle(tmp_path, largest, fill):
    """Rows longer than the kernel turns into lists (2^16 keys): the heap select scans them a block at a time with
    numpy, skipping keys that cannot enter. A heatmap flattened whole is mostly zeros (ties), a few NaN come first
    when largest; distinct keys take the argpartition shortcut."""
    import paddle

    rng = np.random.default_rng(21)
    n = 70001
    if fill == "distinct":
        x = rng.permutation(n).astype("float32").reshape(1, n)
    else:
        x = np.zeros((1, n), np.float32)
        x[0, rng.choice(n, 40, replace=False)] = rng.uniform(-1, 1, 40).astype(np.float32)
        if fill == "nan_and_zeros":
            x[0, rng.choice(n, 5, replace=False)] = np.nan
    saved = pir_program(tmp_path, lambda x: paddle.topk(x, 100, axis=-1, largest=largest), {"x": x})
    check(saved, expect_ops=("top_k_v2",), exact=True)


def test_top_k_of_distinct_keys_on_another_axis(tmp_path):
    import paddle

    x = np.random.default_rng(3).permutation(120).reshape(2, 12, 5).astype("float32")
    saved = pir_program(tmp_path, lambda x: paddle.topk(x, 4, axis=1, largest=False), {"x": x})
    check(saved, expect_ops=("top_k_v2",), exact=True)


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_a_top_k_of_integer_keys_runs_on_the_host_kernel(tmp_path, device):
    import paddle

    x = np.random.default_rng(5).integers(0, 3, (2, 100)).astype("int64")
    saved = pir_program(tmp_path, lambda x: [v * 2 for v in paddle.topk(x, 30, axis=1)], {"x": x})
    for got, want in zip(run_predictor(saved, device), saved.outputs):
        np.testing.assert_array_equal(got, want)


def test_a_top_k_of_float_keys_run_on_the_host_orders_equal_keys_as_paddle(tmp_path):
    """Float keys tie too (a peak-masked heatmap is mostly zeros: CenterNet's and FairMOT's top-k takes more positions
    than there are peaks). The host executor runs top_k through its host kernel, not through TOP_K (ties by index),
    on google_xnnpack (which declines TOP_K) as anywhere else the op lands on the host."""
    import paddle

    x = np.zeros((1, 3840), np.float32)
    x[0, np.random.default_rng(9).choice(3840, 26, replace=False)] = np.random.default_rng(10).uniform(0.05, 0.07, 26)
    saved = pir_program(tmp_path, lambda x: paddle.topk(x, 500, axis=-1), {"x": x})
    graph = load_model(saved.model_path, saved.params_path)
    executor = HostExecutor(graph)
    scope = {**graph.params, **saved.feeds}
    for op in graph.ops():
        if op.type not in ("feed", "fetch"):
            executor.run(op, scope)
    for got, want in zip([scope[name] for name in graph.outputs], saved.outputs):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(run_predictor(saved, "google_xnnpack"), saved.outputs):
        np.testing.assert_array_equal(got, want)
