"""The standard's references (what builtin_device runs) against independent expectations: convolution,
pooling, normalization, matmul / fully connected, softmax, pad and resize (the conv, pool, normalization,
matmul, activation, tensor and resize modules).

The expectation is Paddle's dygraph op wherever one exists with the same meaning; otherwise a numpy formula
written from the NNAdapter spec (never from the reference). Inputs have magnitude ~1 so the DESIGN.md
single-operation tolerance applies unchanged.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.conformance.harness import Const, Quant, run_op
from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, AutoPad, FuseCode, PadMode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import OperandType
from support.tolerances import assert_op_close

paddle = pytest.importorskip("paddle", reason="Paddle's dygraph ops are the expectation for this group")
F = paddle.nn.functional

rng = np.random.default_rng(1234)


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def pt(a):
    return paddle.to_tensor(a)


def fused(a, fuse):
    """The spec's fused activations, applied to an expectation."""
    if fuse == FuseCode.FUSED_RELU:
        return np.maximum(a, 0)
    if fuse == FuseCode.FUSED_RELU1:
        return np.clip(a, -1, 1)
    if fuse == FuseCode.FUSED_RELU6:
        return np.clip(a, 0, 6)
    return a


def paddle_padding(auto_pad, pads):
    if auto_pad == AutoPad.AUTO_PAD_SAME:
        return "SAME"
    if auto_pad == AutoPad.AUTO_PAD_VALID:
        return "VALID"
    return list(pads)


# -- CONV_2D ------------------------------------------------------------------------------------------------------
# (input shape, C_out, kernel, auto_pad, pads[t,b,l,r], strides, dilations, group)
CONV_CASES = [
    ((1, 3, 8, 8), 4, (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (1, 1), (1, 1), 1),
    ((2, 3, 9, 7), 5, (3, 2), AutoPad.AUTO_PAD_NONE, (0, 2, 1, 0), (2, 1), (1, 1), 1),
    ((1, 4, 10, 10), 6, (3, 3), AutoPad.AUTO_PAD_NONE, (2, 2, 2, 2), (1, 1), (2, 2), 1),
    ((1, 4, 11, 9), 4, (5, 3), AutoPad.AUTO_PAD_NONE, (2, 1, 0, 3), (3, 2), (1, 2), 1),
    ((1, 6, 8, 8), 4, (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (1, 1), (1, 1), 2),
    ((2, 6, 7, 9), 9, (3, 3), AutoPad.AUTO_PAD_NONE, (0, 1, 1, 0), (2, 2), (1, 1), 3),
    ((1, 5, 8, 8), 5, (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (1, 1), (1, 1), 5),  # depthwise
    ((2, 4, 9, 9), 4, (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (2, 2), (1, 1), 4),  # depthwise, strided
    ((1, 3, 8, 10), 6, (3, 3), AutoPad.AUTO_PAD_NONE, (2, 0, 1, 2), (1, 2), (2, 1), 3),  # multiplier 2
    ((1, 2, 7, 7), 8, (5, 5), AutoPad.AUTO_PAD_SAME, (0, 0, 0, 0), (2, 2), (1, 1), 2),  # multiplier 4, SAME
    ((1, 3, 9, 8), 4, (3, 3), AutoPad.AUTO_PAD_SAME, (0, 0, 0, 0), (1, 1), (1, 1), 1),
    ((1, 3, 9, 8), 4, (4, 4), AutoPad.AUTO_PAD_SAME, (0, 0, 0, 0), (2, 3), (1, 1), 1),
    ((1, 3, 9, 8), 4, (3, 3), AutoPad.AUTO_PAD_SAME, (0, 0, 0, 0), (1, 1), (2, 2), 1),  # SAME drops dilation
    ((1, 3, 9, 8), 4, (3, 3), AutoPad.AUTO_PAD_VALID, (5, 5, 5, 5), (2, 1), (1, 1), 1),  # VALID ignores pads
    ((2, 8, 6, 5), 7, (1, 1), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (1, 1), (1, 1), 1),  # 1x1 fast path
    ((1, 8, 7, 7), 3, (1, 1), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (2, 2), (1, 1), 1),  # 1x1 strided
    ((1, 4, 5, 5), 2, (1, 1), AutoPad.AUTO_PAD_NONE, (1, 0, 0, 1), (1, 1), (1, 1), 1),  # 1x1 padded
    ((1, 3, 6, 6), 2, (6, 6), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (1, 1), (1, 1), 1),  # kernel = input
]


def _conv_case(case, fuse=FuseCode.FUSED_NONE, with_bias=True):
    shape, c_out, (kh, kw), auto_pad, pads, strides, dilations, group = case
    x = randn(*shape)
    w = randn(c_out, shape[1] // group, kh, kw, scale=0.5)
    b = randn(c_out) if with_bias else None
    got = run_op(T.CONV_2D, [x, Const(w), Const(b) if with_bias else None, int(auto_pad), Const(list(pads)),
                             Const(list(strides)), group, Const(list(dilations)), int(fuse)])[0]
    want = F.conv2d(pt(x), pt(w), pt(b) if with_bias else None, stride=list(strides),
                    padding=paddle_padding(auto_pad, pads), dilation=list(dilations), groups=group).numpy()
    return got, fused(want, fuse)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_2d_matches_paddle(case):
    got, want = _conv_case(case)
    assert_op_close(got, want, what=f"CONV_2D {case}")


@pytest.mark.parametrize("fuse", list(FuseCode))
@pytest.mark.parametrize("case", [CONV_CASES[1], CONV_CASES[6], CONV_CASES[14]])
def test_conv_2d_fuse_codes(case, fuse):
    got, want = _conv_case(case, fuse)
    assert_op_close(got, want, what=f"CONV_2D {fuse.name}")


def test_conv_2d_without_bias():
    got, want = _conv_case(CONV_CASES[0], with_bias=False)
    assert_op_close(got, want, what="CONV_2D no bias")


@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_2d_quantized(per_channel):
    x_scale, out_scale = 0.02, 0.05
    xq = rng.integers(-100, 100, size=(1, 4, 7, 7)).astype(np.int8)
    wq = rng.integers(-127, 128, size=(6, 4, 3, 3)).astype(np.int8)
    if per_channel:
        w_scales = np.linspace(0.001, 0.003, 6).astype(np.float32)
        w_in = Quant(
            wq, scales=w_scales, channel_dim=0, precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL, is_input=False
        )
        b_scales = np.float32(x_scale) * w_scales
        bq = rng.integers(-500, 500, size=6).astype(np.int32)
        b_in = Quant(
            bq, scales=b_scales, channel_dim=0, precision=Precision.QUANT_INT32_SYMM_PER_CHANNEL, is_input=False
        )
        w_real = wq.astype(np.float32) * w_scales[:, None, None, None]
        b_real = bq.astype(np.float32) * b_scales
    else:
        w_scale = 0.002
        w_in = Quant(wq, scale=w_scale, is_input=False)
        bq = rng.integers(-500, 500, size=6).astype(np.int32)
        b_in = Quant(bq, scale=x_scale * w_scale, precision=Precision.QUANT_INT32_SYMM_PER_LAYER, is_input=False)
        w_real = wq.astype(np.float32) * np.float32(w_scale)
        b_real = bq.astype(np.float32) * np.float32(x_scale * w_scale)
    out_type = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=out_scale)
    (got,) = run_op(T.CONV_2D, [Quant(xq, scale=x_scale), w_in, b_in, 0, Const([1, 1, 1, 1]), Const([1, 1]), 1,
                                Const([1, 1]), 0], output_types=[out_type])
    assert got.dtype == np.int8
    x_real = xq.astype(np.float32) * np.float32(x_scale)
    # Independent float expectation on the dequantized operands: im2col-free direct sum in numpy.
    xp = np.pad(x_real.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 6, 7, 7))
    for i in range(3):
        for j in range(3):
            want += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 7, j:j + 7], w_real[:, :, i, j].astype(np.float64))
    want += b_real[None, :, None, None]
    assert np.abs(want).max() < 127 * out_scale, "the test must stay clear of saturation"
    # The output is quantized: one half step of the output scale is the exact rounding bound.
    assert_op_close(got.astype(np.float32) * out_scale, want, atol=out_scale / 2 + 1e-6, rtol=0, what="CONV_2D q8")


def _model_with_input(dims, dynamic_dims=()):
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=dims, dynamic_dims=dynamic_dims), "x")
    return model, x


def test_conv_2d_prepare_unknown_and_dynamic_dims():
    model, x = _model_with_input((UNKNOWN, 3, UNKNOWN, 16), dynamic_dims=((1, 3, 8, 16), (4, 3, 32, 16)))
    w = model.add_constant(randn(8, 3, 3, 3))
    b = model.add_constant(randn(8))
    out = model.add_output("y")
    model.add_operation(
        T.CONV_2D,
        [
            x,
            w,
            b,
            model.add_constant(0),
            model.add_constant(np.array([1, 1, 1, 1], np.int32)),
            model.add_constant(np.array([2, 2], np.int32)),
            model.add_constant(1),
            model.add_constant(np.array([1, 1], np.int32)),
            model.add_constant(0),
        ],
        [out],
    )
    assert out.type.dims == (UNKNOWN, 8, UNKNOWN, 8)
    assert out.type.dynamic_dims == ((1, 8, 4, 8), (4, 8, 16, 8))
    assert out.type.precision == Precision.FLOAT32


def test_conv_2d_rejects_channel_mismatch():
    with pytest.raises(OperationError, match="input channels"):
        run_op(T.CONV_2D, [randn(1, 4, 5, 5), Const(randn(2, 3, 3, 3)), Const(randn(2)), 0, Const([0, 0, 0, 0]),
                           Const([1, 1]), 1, Const([1, 1]), 0])


# -- CONV_2D_TRANSPOSE -----------------------------------------------------------------------------------------------
# (input shape, C_out/group, kernel, auto_pad, pads, strides, dilations, group, output_padding, output_shape)
CONV_T_CASES = [
    ((1, 3, 5, 5), 4, (3, 3), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (1, 1), (1, 1), 1, None, None),
    ((2, 4, 5, 6), 3, (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (2, 2), (1, 1), 1, None, None),
    ((1, 4, 5, 6), 3, (3, 2), AutoPad.AUTO_PAD_NONE, (1, 0, 0, 1), (2, 3), (1, 1), 1, (1, 2), None),
    ((1, 4, 4, 4), 2, (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (1, 1), (2, 2), 2, None, None),
    ((1, 6, 4, 5), 1, (4, 4), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (2, 2), (1, 1), 6, None, None),  # depthwise
    ((1, 3, 5, 5), 2, (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (2, 2), (1, 1), 1, None, (10, 10)),
    ((1, 3, 5, 4), 2, (3, 3), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (3, 2), (1, 1), 1, None, (17, 10)),
    ((1, 3, 5, 5), 2, (3, 3), AutoPad.AUTO_PAD_SAME, (0, 0, 0, 0), (2, 2), (1, 1), 1, None, None),
    ((1, 3, 6, 5), 2, (2, 2), AutoPad.AUTO_PAD_VALID, (0, 0, 0, 0), (2, 2), (1, 1), 1, None, None),
]


@pytest.mark.parametrize("fuse", [FuseCode.FUSED_NONE, FuseCode.FUSED_RELU6])
@pytest.mark.parametrize("case", CONV_T_CASES)
def test_conv_2d_transpose_matches_paddle(case, fuse):
    shape, c_out_g, (kh, kw), auto_pad, pads, strides, dilations, group, out_pad, out_shape = case
    x = randn(*shape)
    w = randn(shape[1], c_out_g, kh, kw, scale=0.5)
    b = randn(c_out_g * group)
    got = run_op(T.CONV_2D_TRANSPOSE, [x, Const(w), Const(b), int(auto_pad), Const(list(pads)), Const(list(strides)),
                                       group, Const(list(dilations)), Const(list(out_pad)) if out_pad else None,
                                       Const(list(out_shape)) if out_shape else None, int(fuse)])[0]
    want = F.conv2d_transpose(pt(x), pt(w), pt(b), stride=list(strides), padding=paddle_padding(auto_pad, pads),
                              output_padding=list(out_pad) if out_pad else 0, dilation=list(dilations), groups=group,
                              output_size=list(out_shape) if out_shape else None).numpy()
    assert_op_close(got, fused(want, fuse), what=f"CONV_2D_TRANSPOSE {case}")


def test_conv_2d_transpose_quantized_per_channel():
    x_scale, out_scale = 0.03, 0.04
    xq = rng.integers(-90, 90, size=(1, 2, 4, 4)).astype(np.int8)
    wq = rng.integers(-127, 128, size=(2, 3, 3, 3)).astype(np.int8)
    # Per output channel: axis 1 of the [C_in, C_out/group, kh, kw] filter.
    w_scales = np.array([0.002, 0.003, 0.0025], np.float32)
    out_type = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=out_scale)
    (got,) = run_op(T.CONV_2D_TRANSPOSE,
                    [Quant(xq, scale=x_scale), Quant(wq, scales=w_scales, channel_dim=1,
                                                     precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL, is_input=False),
                     None, 0, Const([0, 0, 0, 0]), Const([2, 2]), 1, Const([1, 1]), None, None, 0],
                    output_types=[out_type])
    want = F.conv2d_transpose(pt(xq.astype(np.float32) * np.float32(x_scale)),
                              pt(wq.astype(np.float32) * w_scales[None, :, None, None]), stride=2).numpy()
    assert_op_close(got.astype(np.float32) * out_scale, want, atol=out_scale / 2 + 1e-6, rtol=0,
                    what="CONV_2D_TRANSPOSE q8")


# -- pooling -----------------------------------------------------------------------------------------------------------
# (input shape, kernel, auto_pad, pads, strides, ceil_mode)
POOL_CASES = [
    ((1, 3, 8, 8), (2, 2), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (2, 2), False),
    ((2, 4, 9, 7), (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (2, 2), False),
    ((2, 4, 9, 7), (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (2, 2), True),
    ((1, 2, 10, 11), (3, 2), AutoPad.AUTO_PAD_NONE, (1, 1, 0, 0), (3, 2), True),
    ((1, 2, 5, 5), (2, 2), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (2, 2), True),
    ((1, 3, 7, 9), (3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (1, 1), False),
    ((1, 3, 7, 7), (7, 7), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (1, 1), False),  # global-like
    ((2, 3, 10, 10), (9, 9), AutoPad.AUTO_PAD_NONE, (0, 0, 0, 0), (1, 1), False),  # many taps, 2x2 outputs
    ((1, 2, 12, 12), (10, 10), AutoPad.AUTO_PAD_NONE, (2, 2, 2, 2), (4, 4), True),  # many taps, ceil
    ((1, 3, 9, 8), (3, 3), AutoPad.AUTO_PAD_VALID, (1, 1, 1, 1), (2, 2), False),
]
# SAME pads are asymmetric (the odd one after); Paddle's mask variant refuses 4 pads, so those use numpy.
POOL_SAME_CASES = [
    ((1, 3, 9, 8), (3, 3), AutoPad.AUTO_PAD_SAME, (0, 0, 0, 0), (2, 2), False),
    ((1, 3, 5, 5), (2, 2), AutoPad.AUTO_PAD_SAME, (0, 0, 0, 0), (2, 2), False),
]


def _pool_inputs(x, case):
    shape, kernel, auto_pad, pads, strides, ceil_mode = case
    return [x, int(auto_pad), Const(list(pads)), Const(list(kernel)), Const(list(strides)), bool(ceil_mode)]


def _paddle_pool_padding(case):
    _, _, auto_pad, pads, _, _ = case
    if auto_pad != AutoPad.AUTO_PAD_NONE:
        return paddle_padding(auto_pad, pads)
    return [pads[0], pads[2]] if pads[0] == pads[1] and pads[2] == pads[3] else list(pads)


@pytest.mark.parametrize("include_pad", [False, True])
@pytest.mark.parametrize("case", POOL_CASES)
def test_average_pool_2d_matches_paddle(case, include_pad):
    shape, kernel, auto_pad, pads, strides, ceil_mode = case
    x = randn(*shape)
    (got,) = run_op(T.AVERAGE_POOL_2D, _pool_inputs(x, case) + [bool(include_pad), 0])
    want = F.avg_pool2d(pt(x), list(kernel), list(strides), padding=_paddle_pool_padding(case), ceil_mode=ceil_mode,
                        exclusive=not include_pad).numpy()
    assert_op_close(got, want, what=f"AVERAGE_POOL_2D {case} include_pad={include_pad}")


def _numpy_pool(x, kernel, pads, strides, out_hw, reduce, include_pad=False):
    """Spec formula, one window at a time: clip the window to the input; the divisor of an average
    counts explicit pads only when include_pad."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + tuple(out_hw), np.float64)
    for a in range(out_hw[0]):
        for b in range(out_hw[1]):
            hs, ws = a * strides[0] - pads[0], b * strides[1] - pads[2]
            he, we = hs + kernel[0], ws + kernel[1]
            win = x[:, :, max(hs, 0):min(he, h), max(ws, 0):min(we, w)].astype(np.float64)
            if reduce == "max":
                out[:, :, a, b] = win.max(axis=(2, 3))
            else:
                if include_pad:
                    count = (min(he, h + pads[1]) - hs) * (min(we, w + pads[3]) - ws)
                else:
                    count = win.shape[2] * win.shape[3]
                out[:, :, a, b] = win.sum(axis=(2, 3)) / count
    return out


@pytest.mark.parametrize("include_pad", [False, True])
@pytest.mark.parametrize("pads,ceil_mode", [((0, 2, 1, 0), False), ((2, 0, 0, 1), True), ((0, 1, 2, 1), True)])
def test_average_pool_2d_asymmetric_pads(pads, ceil_mode, include_pad):
    x = randn(2, 3, 9, 8)
    kernel, strides = (3, 3), (2, 2)
    (got,) = run_op(T.AVERAGE_POOL_2D, [x, 0, Const(list(pads)), Const(list(kernel)), Const(list(strides)), ceil_mode,
                                        include_pad, 0])
    rnd = np.ceil if ceil_mode else np.floor
    out_hw = [int(rnd((9 + pads[0] + pads[1] - 3) / 2)) + 1, int(rnd((8 + pads[2] + pads[3] - 3) / 2)) + 1]
    want = _numpy_pool(x, kernel, pads, strides, out_hw, "avg", include_pad)
    assert_op_close(got, want, what=f"AVERAGE_POOL_2D pads {pads}")


@pytest.mark.parametrize("case", POOL_SAME_CASES)
@pytest.mark.parametrize("pool", ["avg", "max"])
def test_pool_same_padding_matches_spec(case, pool):
    shape, kernel, _, _, strides, _ = case
    x = randn(*shape)
    out_hw = [-(-shape[2] // strides[0]), -(-shape[3] // strides[1])]
    pads = []
    for size, k, s, o in zip(shape[2:], kernel, strides, out_hw):
        total = max((o - 1) * s + k - size, 0)
        pads += [total // 2, total - total // 2]
    if pool == "avg":
        (got,) = run_op(T.AVERAGE_POOL_2D, _pool_inputs(x, case) + [False, 0])
    else:
        (got,) = run_op(T.MAX_POOL_2D, _pool_inputs(x, case) + [False, 5, 0])
    assert_op_close(got, _numpy_pool(x, kernel, pads, strides, out_hw, pool), what=f"{pool} pool SAME")
    if pool == "max":  # exclusive averages and maxima agree with Paddle's SAME too
        want = F.max_pool2d(pt(x), list(kernel), list(strides), padding="SAME").numpy()
        assert_op_close(got, want, what="MAX_POOL_2D SAME vs paddle")


@pytest.mark.parametrize("fuse", list(FuseCode))
def test_pool_fuse_codes(fuse):
    x = randn(1, 3, 6, 6, scale=4.0)
    case = POOL_CASES[1][:1] + ((3, 3), AutoPad.AUTO_PAD_NONE, (1, 1, 1, 1), (2, 2), False)
    (avg,) = run_op(T.AVERAGE_POOL_2D, _pool_inputs(x, case) + [True, int(fuse)])
    (mx,) = run_op(T.MAX_POOL_2D, _pool_inputs(x, case) + [False, 5, int(fuse)])
    want_avg = F.avg_pool2d(pt(x), 3, 2, padding=1, exclusive=False).numpy()
    want_max = F.max_pool2d(pt(x), 3, 2, padding=1).numpy()
    assert_op_close(avg, fused(want_avg, fuse), what=f"AVERAGE_POOL_2D {fuse.name}")
    assert_op_close(mx, fused(want_max, fuse), what=f"MAX_POOL_2D {fuse.name}")


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_2d_matches_paddle(case):
    shape, kernel, auto_pad, pads, strides, ceil_mode = case
    x = randn(*shape)
    (got,) = run_op(T.MAX_POOL_2D, _pool_inputs(x, case) + [False, int(Precision.INT32), 0])
    want = F.max_pool2d(pt(x), list(kernel), list(strides), padding=_paddle_pool_padding(case),
                        ceil_mode=ceil_mode).numpy()
    assert_op_close(got, want, what=f"MAX_POOL_2D {case}")


@pytest.mark.parametrize("dtype", [Precision.INT32, Precision.INT64])
@pytest.mark.parametrize("case", [c for c in POOL_CASES if c[3][0] == c[3][1] and c[3][2] == c[3][3]])
def test_max_pool_2d_indices_match_paddle_mask(case, dtype):
    shape, kernel, auto_pad, pads, strides, ceil_mode = case
    x = randn(*shape)
    out, indices = run_op(T.MAX_POOL_2D, _pool_inputs(x, case) + [True, int(dtype), 0], n_outputs=2)
    padding = [0, 0] if auto_pad == AutoPad.AUTO_PAD_VALID else [pads[0], pads[2]]
    want, mask = F.max_pool2d(pt(x), list(kernel), list(strides), padding=padding, ceil_mode=ceil_mode,
                              return_mask=True)
    assert_op_close(out, want.numpy(), what=f"MAX_POOL_2D {case}")
    assert indices.dtype == np.dtype(np.int32 if dtype == Precision.INT32 else np.int64)
    assert_op_close(indices, mask.numpy(), what=f"MAX_POOL_2D indices {case}")


def test_max_pool_2d_indices_ties_take_first():
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1] = x[0, 0, 1, 0] = 1.0  # two equal maxima in the first window: row-major first wins
    out, indices = run_op(T.MAX_POOL_2D, [x, 0, Const([0, 0, 0, 0]), Const([2, 2]), Const([2, 2]), False, True, 5, 0],
                          n_outputs=2)
    np.testing.assert_array_equal(indices[0, 0], [[4, 2], [8, 10]])


def test_max_pool_2d_null_indices_output():
    x = randn(1, 2, 6, 6)
    got = run_op(T.MAX_POOL_2D, [x, 0, Const([0, 0, 0, 0]), Const([2, 2]), Const([2, 2]), False, False, 5, 0],
                 n_outputs=2, null_outputs=[1])
    assert_op_close(got[0], F.max_pool2d(pt(x), 2, 2).numpy(), what="MAX_POOL_2D")


def test_max_pool_2d_quantized_keeps_scale():
    xq = rng.integers(-128, 128, size=(1, 2, 6, 6)).astype(np.int8)
    (got,) = run_op(T.MAX_POOL_2D, [Quant(xq, scale=0.1), 0, Const([0, 0, 0, 0]), Const([2, 2]), Const([2, 2]),
                                    False, False, 5, 0])
    want = xq.reshape(1, 2, 3, 2, 3, 2).max(axis=(3, 5))
    assert_op_close(got, want, what="MAX_POOL_2D q8 (max commutes with the scale: exact)")


def test_average_pool_2d_quantized():
    xq = rng.integers(-100, 100, size=(1, 2, 6, 6)).astype(np.int8)
    (got,) = run_op(T.AVERAGE_POOL_2D, [Quant(xq, scale=0.1), 0, None, Const([3, 3]), Const([3, 3]), False, False, 0])
    want = (xq.astype(np.float64) * 0.1).reshape(1, 2, 2, 3, 2, 3).mean(axis=(3, 5))
    assert_op_close(got.astype(np.float32) * np.float32(0.1), want, atol=0.05 + 1e-6, rtol=0,
                    what="AVERAGE_POOL_2D q8 (half a quantization step)")


@pytest.mark.parametrize("out_hw", [(1, 1), (2, 2), (3, 5), (4, 3), (7, 7), (5, 6)])
def test_adaptive_average_pool_2d_matches_paddle(out_hw):
    x = randn(2, 3, 9, 12)
    (got,) = run_op(T.ADAPTIVE_AVERAGE_POOL_2D, [x, Const(list(out_hw))])
    want = F.adaptive_avg_pool2d(pt(x), list(out_hw)).numpy()
    assert_op_close(got, want, what=f"ADAPTIVE_AVERAGE_POOL_2D {out_hw}")


@pytest.mark.parametrize("dtype", [Precision.INT32, Precision.INT64])
@pytest.mark.parametrize("out_hw", [(1, 1), (3, 4), (4, 3), (5, 7)])
def test_adaptive_max_pool_2d_matches_paddle(out_hw, dtype):
    x = randn(2, 3, 9, 12)
    out, indices = run_op(T.ADAPTIVE_MAX_POOL_2D, [x, Const(np.array(out_hw, np.int64)), True, int(dtype)], n_outputs=2)
    want, mask = F.adaptive_max_pool2d(pt(x), list(out_hw), return_mask=True)
    assert_op_close(out, want.numpy(), what=f"ADAPTIVE_MAX_POOL_2D {out_hw}")
    assert indices.dtype == np.dtype(np.int32 if dtype == Precision.INT32 else np.int64)
    assert_op_close(indices, mask.numpy(), what=f"ADAPTIVE_MAX_POOL_2D indices {out_hw}")


@pytest.mark.parametrize("out_hw", [(2, 3), (4, 4)])
def test_adaptive_max_pool_2d_without_indices(out_hw):
    x = randn(1, 3, 8, 9)
    (got,) = run_op(T.ADAPTIVE_MAX_POOL_2D, [x, Const(list(out_hw)), False, int(Precision.INT32)])
    assert_op_close(got, F.adaptive_max_pool2d(pt(x), list(out_hw)).numpy(), what="ADAPTIVE_MAX_POOL_2D")


def test_pool_prepare_unknown_spatial_dims():
    model, x = _model_with_input((2, 3, UNKNOWN, 9))
    out = model.add_output("y")
    model.add_operation(T.MAX_POOL_2D, [x, model.add_constant(0), model.add_constant(np.array([1, 1, 1, 1], np.int32)),
                                        model.add_constant(np.array([3, 3], np.int32)),
                                        model.add_constant(np.array([2, 2], np.int32)),
                                        model.add_constant(np.array([True])), model.add_constant(np.array([False])),
                                        model.add_constant(5), model.add_constant(0)], [out])
    assert out.type.dims == (2, 3, UNKNOWN, 5)


# -- normalization -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 6, 7), (3, 5, 2, 3, 2)])
@pytest.mark.parametrize("epsilon", [1e-5, 1e-3])
def test_batch_normalization_matches_paddle(shape, epsilon):
    c = shape[1]
    x = randn(*shape)
    scale, bias, mean = randn(c), randn(c), randn(c, scale=0.3)
    var = rng.uniform(0.5, 2.0, c).astype(np.float32)
    (got,) = run_op(T.BATCH_NORMALIZATION, [x, Const(scale), Const(bias), Const(mean), Const(var), float(epsilon)])
    want = F.batch_norm(pt(x), pt(mean), pt(var), weight=pt(scale), bias=pt(bias), training=False,
                        epsilon=epsilon).numpy()
    assert_op_close(got, want, what=f"BATCH_NORMALIZATION {shape}")


def test_batch_normalization_quantized_input():
    xq = rng.integers(-100, 100, size=(1, 3, 4, 4)).astype(np.int8)
    c = 3
    scale, bias, mean, var = randn(c), randn(c), randn(c), np.ones(c, np.float32)
    (got,) = run_op(T.BATCH_NORMALIZATION, [Quant(xq, scale=0.02), Const(scale), Const(bias), Const(mean), Const(var),
                                            1e-5], output_types=[OperandType(precision=Precision.FLOAT32)])
    x = xq.astype(np.float64) * np.float32(0.02)
    want = (x - mean[:, None, None]) / np.sqrt(1 + 1e-5) * scale[:, None, None] + bias[:, None, None]
    assert_op_close(got, want, what="BATCH_NORMALIZATION q8 in, float out")


@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 5), 3), ((2, 6, 4, 5), 1), ((2, 6, 4, 5), 6), ((3, 8, 10), 4)])
def test_group_normalization_matches_paddle(shape, groups):
    c = shape[1]
    x = randn(*shape) + 0.5
    scale, bias = randn(c), randn(c)
    (got,) = run_op(T.GROUP_NORMALIZATION, [x, Const(scale), Const(bias), 1e-5, groups])
    want = F.group_norm(pt(x), groups, epsilon=1e-5, weight=pt(scale), bias=pt(bias)).numpy()
    assert_op_close(got, want, what=f"GROUP_NORMALIZATION {shape} g={groups}")


def test_group_normalization_rejects_indivisible_groups():
    with pytest.raises(OperationError, match="groups"):
        run_op(T.GROUP_NORMALIZATION, [randn(1, 6, 3, 3), Const(randn(6)), Const(randn(6)), 1e-5, 4])


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 4, 9), (1, 2, 3, 4, 3)])
def test_instance_normalization_matches_paddle(shape):
    c = shape[1]
    x = randn(*shape)
    scale, bias = randn(c), randn(c)
    (got,) = run_op(T.INSTANCE_NORMALIZATION, [x, Const(scale), Const(bias), 1e-5])
    want = F.instance_norm(pt(x), weight=pt(scale), bias=pt(bias), eps=1e-5).numpy()
    assert_op_close(got, want, what=f"INSTANCE_NORMALIZATION {shape}")


@pytest.mark.parametrize(
    "shape,axis",
    [
        ((4, 10), 1),
        ((2, 3, 8), 2),
        ((2, 3, 8), 1),
        ((2, 3, 8), -1),
        ((2, 3, 4, 5), 1),
        ((2, 3, 4, 5), -2),
        ((2, 3, 4, 5), 3),
    ],
)
def test_layer_normalization_matches_paddle(shape, axis):
    x = randn(*shape)
    norm_shape = shape[axis:]
    scale, bias = randn(*norm_shape), randn(*norm_shape)
    (got,) = run_op(T.LAYER_NORMALIZATION, [x, Const(scale), Const(bias), axis, 1e-5])
    want = F.layer_norm(pt(x), list(norm_shape), weight=pt(scale.reshape(-1)), bias=pt(bias.reshape(-1)),
                        epsilon=1e-5).numpy()
    assert_op_close(got, want, what=f"LAYER_NORMALIZATION {shape} axis={axis}")


def test_layer_normalization_accepts_flat_scale():
    x = randn(2, 3, 4)
    scale, bias = randn(12), randn(12)
    (got,) = run_op(T.LAYER_NORMALIZATION, [x, Const(scale), Const(bias), 1, 1e-5])
    want = F.layer_norm(pt(x), [3, 4], weight=pt(scale), bias=pt(bias), epsilon=1e-5).numpy()
    assert_op_close(got, want, what="LAYER_NORMALIZATION flat scale")


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize(
    "shape,axis", [((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1), ((2, 3, 4, 2), 1), ((2, 3, 4, 2), -2)]
)
def test_lp_normalization_matches_spec(shape, axis, p):
    x = randn(*shape)
    eps = 1e-5
    (got,) = run_op(T.LP_NORMALIZATION, [x, axis, p, eps])
    x64 = x.astype(np.float64)
    if p == 1:
        want = x64 / (np.abs(x64).sum(axis=axis, keepdims=True) + eps)
    else:
        want = x64 / (np.sqrt((x64 ** 2).sum(axis=axis, keepdims=True)) + eps)
    assert_op_close(got, want, what=f"LP_NORMALIZATION p={p} axis={axis}")


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_matches_paddle_normalize(p):
    # With a negligible epsilon the spec's x / (norm + eps) and Paddle's x / max(norm, eps) coincide.
    x = randn(2, 4, 3)
    (got,) = run_op(T.LP_NORMALIZATION, [x, 1, p, 1e-12])
    want = F.normalize(pt(x), p=p, axis=1, epsilon=1e-12).numpy()
    assert_op_close(got, want, what=f"LP_NORMALIZATION vs paddle p={p}")


def test_lp_normalization_rejects_p3():
    with pytest.raises(OperationError, match="p must be 1 or 2"):
        run_op(T.LP_NORMALIZATION, [randn(2, 3), 1, 3, 1e-5])


@pytest.mark.parametrize("size,k,alpha,beta", [(5, 1.0, 1e-4, 0.75), (3, 2.0, 0.5, 0.5), (1, 1.0, 0.2, 1.0),
                                                (7, 0.5, 0.01, 0.75)])
def test_lrn_matches_paddle(size, k, alpha, beta):
    x = randn(2, 8, 4, 5)
    (got,) = run_op(T.LRN, [x, size, float(k), float(alpha), float(beta)])
    # paddle's functional form averages the window (alpha / size * sum); the spec sums (alpha * sum).
    want = F.local_response_norm(pt(x), size, alpha=alpha * size, beta=beta, k=k).numpy()
    assert_op_close(got, want, what=f"LRN size={size}")


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size_matches_spec(size):
    x = randn(1, 6, 3, 3)
    (got,) = run_op(T.LRN, [x, size, 1.0, 0.1, 0.75])
    x64 = x.astype(np.float64)
    want = np.empty_like(x64)
    for c in range(6):
        lo, hi = max(c - (size - 1) // 2, 0), min(c + size // 2, 5)
        want[:, c] = x64[:, c] / (1.0 + 0.1 * (x64[:, lo:hi + 1] ** 2).sum(axis=1)) ** 0.75
    assert_op_close(got, want, what=f"LRN size={size}")


# -- FULLY_CONNECTED / MAT_MUL -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fuse", list(FuseCode))
@pytest.mark.parametrize("in_shape,units", [((4, 12), 5), ((2, 3, 2, 2), 7), ((6, 2, 3), 4), ((1, 64), 10)])
def test_fully_connected_matches_paddle(in_shape, units, fuse):
    x = randn(*in_shape, scale=0.5)
    input_size = in_shape[-1] if len(in_shape) == 2 else int(np.prod(in_shape[1:]))
    if in_shape == (6, 2, 3):
        input_size = 3  # flattening is by the weight's input_size, not by the batch axis
    w = randn(units, input_size, scale=0.5)
    b = randn(units)
    (got,) = run_op(T.FULLY_CONNECTED, [x, Const(w), Const(b), int(fuse)])
    want = F.linear(pt(x.reshape(-1, input_size)), pt(np.ascontiguousarray(w.T)), pt(b)).numpy()
    assert_op_close(got, fused(want, fuse), what=f"FULLY_CONNECTED {in_shape}")


@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected_quantized(per_channel):
    x_scale, out_scale = 0.05, 0.1
    xq = rng.integers(-100, 100, size=(3, 16)).astype(np.int8)
    wq = rng.integers(-127, 128, size=(5, 16)).astype(np.int8)
    if per_channel:
        w_scales = np.linspace(0.002, 0.006, 5).astype(np.float32)
        w_in = Quant(
            wq, scales=w_scales, channel_dim=0, precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL, is_input=False
        )
        w_real = wq * w_scales[:, None]
    else:
        w_in = Quant(wq, scale=0.004, is_input=False)
        w_real = wq * np.float32(0.004)
    out_type = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=out_scale)
    (got,) = run_op(T.FULLY_CONNECTED, [Quant(xq, scale=x_scale), w_in, None, 0], output_types=[out_type])
    want = (xq.astype(np.float64) * np.float32(x_scale)) @ w_real.T.astype(np.float64)
    assert_op_close(got.astype(np.float32) * out_scale, want, atol=out_scale / 2 + 1e-6, rtol=0, what="FC q8")


def test_fully_connected_prepare_dynamic_batch():
    model, x = _model_with_input((UNKNOWN, 8), dynamic_dims=((1, 8), (16, 8)))
    out = model.add_output("y")
    model.add_operation(T.FULLY_CONNECTED, [x, model.add_constant(randn(3, 8)), model.add_constant(randn(3)),
                                            model.add_constant(0)], [out])
    assert out.type.dims == (UNKNOWN, 3)
    assert out.type.dynamic_dims == ((1, 3), (16, 3))


MATMUL_CASES = [
    ((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 3, 4, 5)), ((2, 3, 3, 4), (4,)),
    ((1, 3, 4), (6, 4, 2)), ((2, 2, 3, 4), (1, 2, 4, 3)),
]


def _transposed_shape(shape, flag):
    return shape[:-2] + (shape[-1], shape[-2]) if flag and len(shape) >= 2 else shape


@pytest.mark.parametrize("tx,ty", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shapes", MATMUL_CASES)
def test_mat_mul_matches_paddle(shapes, tx, ty):
    x = randn(*_transposed_shape(shapes[0], tx))
    y = randn(*_transposed_shape(shapes[1], ty))
    (got,) = run_op(T.MAT_MUL, [x, y, bool(tx), bool(ty)])
    want = paddle.matmul(pt(x), pt(y), transpose_x=tx, transpose_y=ty).numpy()
    assert_op_close(got, want, what=f"MAT_MUL {shapes} tx={tx} ty={ty}")


def test_mat_mul_quantized_inputs():
    xq = rng.integers(-100, 100, size=(2, 3, 8)).astype(np.int8)
    yq = rng.integers(-100, 100, size=(8, 4)).astype(np.int8)
    (got,) = run_op(T.MAT_MUL, [Quant(xq, scale=0.01), Quant(yq, scale=0.02, is_input=False), False, False],
                    output_types=[OperandType(precision=Precision.FLOAT32)])
    want = (xq.astype(np.float64) * np.float32(0.01)) @ (yq.astype(np.float64) * np.float32(0.02))
    assert_op_close(got, want, what="MAT_MUL q8 in")


def test_mat_mul_rejects_inner_mismatch():
    with pytest.raises(OperationError, match="inner dims"):
        run_op(T.MAT_MUL, [randn(2, 3), randn(4, 5), False, False])


# -- SOFTMAX / LOG_SOFTMAX ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type", [T.SOFTMAX, T.LOG_SOFTMAX])
@pytest.mark.parametrize("shape,axis", [((3, 7), -1), ((3, 7), 0), ((2, 3, 4), 1), ((2, 3, 4), -3), ((2, 3, 4, 5), -2),
                                        ((2, 3, 4, 5), 3), ((2, 3, 4, 5), 1)])
def test_softmax_matches_paddle(op_type, shape, axis):
    x = randn(*shape, scale=3.0)
    (got,) = run_op(op_type, [x, axis])
    fn = F.softmax if op_type == T.SOFTMAX else F.log_softmax
    assert_op_close(got, fn(pt(x), axis=axis).numpy(), what=f"{op_type.name} axis={axis}")


def test_softmax_large_logits_are_stable():
    x = np.array([[1000.0, 1001.0, 999.0]], np.float32)
    (got,) = run_op(T.SOFTMAX, [x, 1])
    e = np.exp(np.array([-1.0, 0.0, -2.0]))
    assert_op_close(got, (e / e.sum())[None], what="SOFTMAX large logits")


def test_softmax_default_axis_is_one():
    x = randn(2, 3, 4)
    (got,) = run_op(T.SOFTMAX, [x])
    assert_op_close(got, F.softmax(pt(x), axis=1).numpy(), what="SOFTMAX default axis")


def test_softmax_rejects_axis_out_of_range():
    with pytest.raises(OperationError, match="out of range"):
        run_op(T.SOFTMAX, [randn(2, 3), 2])


# -- PAD ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [PadMode.REFLECT, PadMode.REPLICATE, PadMode.EDGE, PadMode.CONSTANT])
@pytest.mark.parametrize("hw_pads", [(1, 1, 1, 1), (2, 0, 1, 3), (0, 2, 3, 0)])
def test_pad_nchw_matches_paddle(mode, hw_pads):
    x = randn(2, 3, 5, 6)
    top, bottom, left, right = hw_pads
    got = run_op(T.PAD, [x, Const([0, 0, 0, 0, top, bottom, left, right]), int(mode), 1.5])[0]
    paddle_mode = {PadMode.REFLECT: "reflect", PadMode.REPLICATE: "replicate", PadMode.EDGE: "replicate",
                   PadMode.CONSTANT: "constant"}[mode]
    want = F.pad(pt(x), [left, right, top, bottom], mode=paddle_mode, value=1.5).numpy()
    assert_op_close(got, want, what=f"PAD {mode.name} {hw_pads}")


@pytest.mark.parametrize("shape,pads", [((3, 4), (1, 0, 0, 2)), ((2, 3, 4), (1, 1, 0, 2, 3, 0)), ((5,), (2, 3)),
                                        ((2, 2, 2, 2, 2), (0, 1, 1, 0, 0, 1, 2, 0, 1, 1))])
def test_pad_constant_any_rank_matches_paddle(shape, pads):
    x = randn(*shape)
    (got,) = run_op(T.PAD, [x, Const(list(pads)), int(PadMode.CONSTANT), -2.0])
    want = F.pad(pt(x), list(pads), mode="constant", value=-2.0).numpy()
    assert_op_close(got, want, what=f"PAD constant {shape}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pad_integer_input(dtype):
    x = rng.integers(-9, 9, size=(2, 3)).astype(dtype)
    (got,) = run_op(T.PAD, [x, Const([1, 0, 2, 1]), int(PadMode.CONSTANT), Const(np.array([7], dtype))])
    want = np.full((3, 6), 7, dtype)
    want[1:, 2:5] = x
    assert_op_close(got, want, what="PAD int")


def test_pad_negative_amounts_crop():
    x = randn(4, 6)
    (got,) = run_op(T.PAD, [x, Const([-1, 2, 1, -2]), int(PadMode.CONSTANT), 0.0])
    want = np.zeros((5, 5), np.float32)
    want[0:3, 1:5] = x[1:, :4]
    assert_op_close(got, want, what="PAD negative")


def test_pad_reflect_without_value_operand():
    x = randn(1, 1, 4, 4)
    (got,) = run_op(T.PAD, [x, Const([0, 0, 0, 0, 1, 2, 2, 1]), int(PadMode.REFLECT), None])
    want = np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), mode="reflect")
    assert_op_close(got, want, what="PAD reflect")


def test_pad_rejects_wrong_pads_length():
    with pytest.raises(OperationError, match="2 \\* rank"):
        run_op(T.PAD, [randn(2, 3), Const([1, 1]), int(PadMode.CONSTANT), 0.0])


def test_pad_quantized_constant():
    xq = rng.integers(-100, 100, size=(1, 2, 3, 3)).astype(np.int8)
    (got,) = run_op(T.PAD, [Quant(xq, scale=0.5), Const([0, 0, 0, 0, 1, 1, 1, 1]), int(PadMode.CONSTANT),
                            Quant(np.array([4], np.int8), scale=0.5, is_input=False)])
    assert got.dtype == np.int8
    want = np.pad(xq, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=4)
    assert_op_close(got, want, what="PAD q8")


# -- RESIZE_NEAREST / RESIZE_LINEAR ------------------------------------------------------------------------------------
RESIZE_SIZES = [(8, 10), (3, 4), (5, 5), (1, 7), (13, 2)]
RESIZE_SCALES = [(2.0, 2.0), (0.5, 1.5), (1.7, 0.6), (3.0, 1.0)]


@pytest.mark.parametrize("size", RESIZE_SIZES)
def test_resize_nearest_shape_matches_paddle(size):
    x = randn(2, 3, 5, 6)
    (got,) = run_op(T.RESIZE_NEAREST, [x, Const(list(size)), None, False])
    want = F.interpolate(pt(x), size=list(size), mode="nearest").numpy()
    assert_op_close(got, want, what=f"RESIZE_NEAREST {size}")


@pytest.mark.parametrize("scales", RESIZE_SCALES)
def test_resize_nearest_scales_match_paddle(scales):
    x = randn(1, 2, 5, 6)
    (got,) = run_op(T.RESIZE_NEAREST, [x, None, Const(np.array(scales, np.float32)), False])
    want = F.interpolate(pt(x), scale_factor=list(scales), mode="nearest").numpy()
    assert_op_close(got, want, what=f"RESIZE_NEAREST scales {scales}")


@pytest.mark.parametrize("size", [(9, 11), (3, 2), (5, 6)])
def test_resize_nearest_align_corners_matches_spec(size):
    # Paddle 2's functional API refuses align_corners for nearest; the nearest_interp op it converts from
    # keeps it: source index = round((in - 1) / (out - 1) * dst).
    x = randn(1, 2, 5, 6)
    (got,) = run_op(T.RESIZE_NEAREST, [x, Const(list(size)), None, True])
    rows = np.floor(np.arange(size[0]) * (4 / (size[0] - 1)) + 0.5).astype(int)
    cols = np.floor(np.arange(size[1]) * (5 / (size[1] - 1)) + 0.5).astype(int)
    assert_op_close(got, x[:, :, rows][:, :, :, cols], what=f"RESIZE_NEAREST align_corners {size}")


def test_resize_nearest_shape_wins_over_scales():
    x = randn(1, 1, 4, 4)
    (got,) = run_op(T.RESIZE_NEAREST, [x, Const([6, 3]), Const(np.array([3.0, 3.0], np.float32)), False])
    assert_op_close(got, F.interpolate(pt(x), size=[6, 3], mode="nearest").numpy(), what="RESIZE_NEAREST shape+scales")


@pytest.mark.parametrize("align_corners,align_mode", [(False, 0), (False, 1), (True, 0)])
@pytest.mark.parametrize("size", RESIZE_SIZES)
def test_resize_linear_shape_matches_paddle(size, align_corners, align_mode):
    x = randn(2, 3, 5, 6)
    (got,) = run_op(T.RESIZE_LINEAR, [x, Const(np.array(size, np.int64)), None, align_corners, align_mode])
    want = F.interpolate(pt(x), size=list(size), mode="bilinear", align_corners=align_corners,
                         align_mode=align_mode).numpy()
    assert_op_close(got, want, what=f"RESIZE_LINEAR {size} ac={align_corners} am={align_mode}")


@pytest.mark.parametrize("align_corners,align_mode", [(False, 0), (False, 1), (True, 1)])
@pytest.mark.parametrize("scales", RESIZE_SCALES)
def test_resize_linear_scales_match_paddle(scales, align_corners, align_mode):
    x = randn(1, 2, 5, 6)
    (got,) = run_op(T.RESIZE_LINEAR, [x, None, Const(np.array(scales, np.float32)), align_corners, align_mode])
    want = F.interpolate(pt(x), scale_factor=list(scales), mode="bilinear", align_corners=align_corners,
                         align_mode=align_mode).numpy()
    assert_op_close(got, want, what=f"RESIZE_LINEAR scales {scales}")


def test_resize_requires_shape_or_scales():
    with pytest.raises(OperationError, match="shape and scales"):
        run_op(T.RESIZE_LINEAR, [randn(1, 1, 3, 3), None, None, False, 0])


def test_resize_runtime_shape_operand():
    # The shape arrives as a model input: prepare leaves H and W unknown, the kernel reads the value.
    x = randn(1, 2, 4, 4)
    (got,) = run_op(T.RESIZE_LINEAR, [x, np.array([7, 5], np.int32), None, False, 0])
    want = F.interpolate(pt(x), size=[7, 5], mode="bilinear", align_corners=False, align_mode=0).numpy()
    assert_op_close(got, want, what="RESIZE_LINEAR runtime shape")


def test_resize_linear_quantized():
    xq = rng.integers(-100, 100, size=(1, 1, 3, 3)).astype(np.int8)
    (got,) = run_op(T.RESIZE_LINEAR, [Quant(xq, scale=0.1), Const([6, 6]), None, True, 1])
    x = xq.astype(np.float32) * np.float32(0.1)
    want = F.interpolate(pt(x), size=[6, 6], mode="bilinear", align_corners=True).numpy()
    assert_op_close(got.astype(np.float32) * np.float32(0.1), want, atol=0.05 + 1e-6, rtol=0,
                    what="RESIZE_LINEAR q8 (half a quantization step)")
