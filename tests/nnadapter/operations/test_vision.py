"""The standard's references (what builtin_device runs) against independent expectations: QUANTIZE and
DEQUANTIZE (hand-computed integers from the spec's formulas), and DEFORMABLE_CONV_2D, GRID_SAMPLE,
PRIOR_BOX, ROI_ALIGN, NON_MAX_SUPPRESSION and YOLO_BOX against the Paddle ops the converters map from."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.conformance.harness import Const, Quant, build_op, run_op
from nnadapter_bridge.conformance.samples import YOLO_BOX_CASES
from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, FuseCode, InterpolateMode, PadMode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from support.tolerances import assert_op_close

rng = np.random.default_rng(7)


@pytest.fixture(scope="module")
def paddle():
    import paddle as paddle_module

    paddle_module.disable_static()
    return paddle_module


def _tensor(paddle, a):
    return paddle.to_tensor(np.ascontiguousarray(a))


# -- QUANTIZE / DEQUANTIZE ------------------------------------------------------------------------------

QUANT_INPUT = np.array([-1000.0, -1.26, -0.25, 0.25, 0.75, 1.25, 2.5, 1000.0], dtype=np.float32)


def test_quantize_int8_per_layer_rounds_half_even_and_saturates():
    # x / 0.5 = [-2000, -2.52, -0.5, 0.5, 1.5, 2.5, 5, 2000]: ties go to the even neighbour.
    (got,) = run_op(T.QUANTIZE, [QUANT_INPUT, 1, Const([0.5]), Const([0.0])])
    want = np.array([-128, -3, 0, 0, 2, 2, 5, 127], dtype=np.int8)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)


def test_quantize_uint8_asymmetric_adds_zero_point_and_saturates():
    (got,) = run_op(T.QUANTIZE, [QUANT_INPUT, 1, Const([0.5]), Const([128.0])])
    want = np.array([0, 125, 128, 128, 130, 130, 133, 255], dtype=np.uint8)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)


def test_quantize_integer_zero_point_operand_is_accepted():
    (got,) = run_op(T.QUANTIZE, [QUANT_INPUT[1:7], 0, Const([0.25]), Const(np.array([10], np.int32))])
    # x / 0.25 = [-5.04, -1, 1, 3, 5, 10] -> rint + 10
    np.testing.assert_array_equal(got, np.array([5, 9, 11, 13, 15, 20], dtype=np.uint8))


@pytest.mark.parametrize("axis", [1, -2])
def test_quantize_int8_per_channel(axis):
    x = np.array([[[0.3, -0.3], [10.0, -10.0], [200.0, -0.5]],
                  [[0.25, 0.75], [1.0, -31.9], [1.5, 127.5]]], dtype=np.float32)  # [2, 3, 2]
    scales = [0.5, 0.25, 1.0]
    (got,) = run_op(T.QUANTIZE, [x, axis, Const(scales), Const([0.0, 0.0, 0.0])])
    # channel 0 / 0.5, channel 1 / 0.25, channel 2 / 1.0, then rint and clip to [-128, 127]
    want = np.array([[[1, -1], [40, -40], [127, 0]],
                     [[0, 2], [4, -128], [2, 127]]], dtype=np.int8)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scale, zero_point, precision", [
    ([0.5], [0.0], Precision.QUANT_INT8_SYMM_PER_LAYER),
    ([0.5], [3.0], Precision.QUANT_UINT8_ASYMM_PER_LAYER),
    ([0.5, 0.25, 1.0], [0.0, 0.0, 0.0], Precision.QUANT_INT8_SYMM_PER_CHANNEL),
])
def test_quantize_output_type_carries_the_params(scale, zero_point, precision):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    model, _ = build_op(T.QUANTIZE, [x, 1, Const(scale), Const(zero_point)])
    t = model.output_operands[0].type
    assert t.precision == precision and t.dims == (2, 3, 4)
    if precision == Precision.QUANT_INT8_SYMM_PER_CHANNEL:
        assert t.scales == tuple(scale) and t.channel_dim == 1
    else:
        assert t.scale == scale[0] and t.zero_point == int(zero_point[0])


@pytest.mark.parametrize("scale, zero_point", [([0.0], [0.0]), ([0.5, 0.5, 0.5], [1.0, 0.0, 0.0]),
                                               ([0.5, 0.5], [0.0, 0.0]), ([0.5], [0.5]), ([0.5], [300.0])])
def test_quantize_rejects_bad_params(scale, zero_point):
    x = np.zeros((2, 3, 4), dtype=np.float32)
    with pytest.raises(OperationError):
        build_op(T.QUANTIZE, [x, 1, Const(scale), Const(zero_point)])


def test_dequantize_int8_per_layer():
    q = np.array([-128, -3, 0, 1, 127], dtype=np.int8)
    (got,) = run_op(T.DEQUANTIZE, [Quant(q, scale=0.25)])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array([-32.0, -0.75, 0.0, 0.25, 31.75], dtype=np.float32))


def test_dequantize_uint8_asymmetric():
    q = np.array([0, 100, 128, 255], dtype=np.uint8)
    (got,) = run_op(
        T.DEQUANTIZE, [Quant(q, scale=0.5, zero_point=128, precision=Precision.QUANT_UINT8_ASYMM_PER_LAYER)]
    )
    np.testing.assert_array_equal(got, np.array([-64.0, -14.0, 0.0, 63.5], dtype=np.float32))


def test_dequantize_int8_per_channel():
    q = np.array([[[4, -4], [4, -4]], [[127, -128], [1, 2]]], dtype=np.int8)  # [2, 2, 2], channel axis 2
    (got,) = run_op(T.DEQUANTIZE, [Quant(q, scales=[0.5, 0.125], channel_dim=2,
                                         precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL)])
    want = np.array([[[2.0, -0.5], [2.0, -0.5]], [[63.5, -16.0], [0.5, 0.25]]], dtype=np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("zero_point", [0.0, 77.0])
def test_quantize_dequantize_round_trip_error_is_at_most_half_a_step(zero_point):
    x = rng.uniform(-20, 20, (3, 5)).astype(np.float32)
    scale = 0.3
    (q,) = run_op(T.QUANTIZE, [x, 1, Const([scale]), Const([zero_point])])
    precision = Precision.QUANT_UINT8_ASYMM_PER_LAYER if zero_point else Precision.QUANT_INT8_SYMM_PER_LAYER
    (back,) = run_op(T.DEQUANTIZE, [Quant(q, scale=scale, zero_point=int(zero_point), precision=precision)])
    assert np.all(np.abs(back - x) <= scale / 2 + 1e-6)


# -- DEFORMABLE_CONV_2D ----------------------------------------------------------------------------

def _fuse(x, fuse):
    if fuse == FuseCode.FUSED_RELU:
        return np.maximum(x, 0)
    if fuse == FuseCode.FUSED_RELU1:
        return np.clip(x, -1, 1)
    if fuse == FuseCode.FUSED_RELU6:
        return np.clip(x, 0, 6)
    return x


DEFORM_CASES = [
    # (c_in, c_out, kernel, group, deformable_group, stride, pads [t, b, l, r], dilation, with_mask, fuse)
    (4, 6, (3, 3), 1, 1, (1, 1), (1, 1, 1, 1), (1, 1), False, FuseCode.FUSED_NONE),
    (4, 6, (3, 3), 1, 1, (1, 1), (1, 1, 1, 1), (1, 1), True, FuseCode.FUSED_NONE),
    (4, 4, (3, 3), 2, 1, (2, 2), (1, 1, 1, 1), (1, 1), True, FuseCode.FUSED_RELU),
    (4, 6, (3, 2), 1, 2, (1, 2), (0, 0, 1, 1), (2, 1), True, FuseCode.FUSED_NONE),
    (6, 6, (2, 3), 3, 3, (2, 1), (2, 2, 0, 0), (1, 2), False, FuseCode.FUSED_RELU6),
    (4, 4, (3, 3), 4, 2, (1, 1), (1, 1, 1, 1), (1, 1), True, FuseCode.FUSED_RELU1),
    (2, 3, (1, 1), 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), True, FuseCode.FUSED_NONE),
    (4, 6, (3, 3), 2, 2, (1, 1), (2, 0, 1, 2), (1, 1), True, FuseCode.FUSED_NONE),  # asymmetric pads
]


@pytest.mark.parametrize("case", DEFORM_CASES)
def test_deformable_conv_2d_matches_paddle(paddle, case):
    c_in, c_out, (kh, kw), group, dgroup, stride, pads, dilation, with_mask, fuse = case
    n, h, w = 2, 7, 8
    x = rng.standard_normal((n, c_in, h, w)).astype(np.float32)
    weight = rng.standard_normal((c_out, c_in // group, kh, kw)).astype(np.float32) * 0.5
    bias = rng.standard_normal(c_out).astype(np.float32)
    h_out = (h + pads[0] + pads[1] - (dilation[0] * (kh - 1) + 1)) // stride[0] + 1
    w_out = (w + pads[2] + pads[3] - (dilation[1] * (kw - 1) + 1)) // stride[1] + 1
    # Offsets up to +-2.5 pixels push many samples across the border and between pixels.
    offset = rng.uniform(-2.5, 2.5, (n, 2 * dgroup * kh * kw, h_out, w_out)).astype(np.float32)
    mask = rng.uniform(0, 1, (n, dgroup * kh * kw, h_out, w_out)).astype(np.float32) if with_mask else None
    (got,) = run_op(T.DEFORMABLE_CONV_2D, [x, offset, mask, Const(weight), Const(bias), Const(list(pads)),
                                           Const(list(stride)), group, dgroup, Const(list(dilation)), int(fuse)])
    # Paddle pads symmetrically; zero-padding the input first expresses any [t, b, l, r].
    padded = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    want = paddle.vision.ops.deform_conv2d(
        _tensor(paddle, padded), _tensor(paddle, offset), _tensor(paddle, weight), bias=_tensor(paddle, bias),
        stride=list(stride), padding=0, dilation=list(dilation), deformable_groups=dgroup, groups=group,
        mask=None if mask is None else _tensor(paddle, mask)).numpy()
    # Sums of up to C_in*K products of magnitude ~1: float32 accumulation in Paddle differs from our
    # float64 one by a few ulps of the sum, hence atol 1e-4 rather than 1e-5.
    assert_op_close(got, _fuse(want, fuse), atol=1e-4, what=f"DEFORMABLE_CONV_2D {case}")


def test_deformable_conv_2d_zero_offsets_is_plain_convolution(paddle):
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    weight = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    offset = np.zeros((1, 18, 6, 6), dtype=np.float32)
    (got,) = run_op(T.DEFORMABLE_CONV_2D, [x, offset, None, Const(weight), Const(np.zeros(5, np.float32)),
                                           Const([1, 1, 1, 1]), Const([1, 1]), 1, 1, Const([1, 1]), 0])
    want = paddle.nn.functional.conv2d(_tensor(paddle, x), _tensor(paddle, weight), padding=1).numpy()
    assert_op_close(got, want, atol=1e-4, what="DEFORMABLE_CONV_2D with zero offsets")  # as above


def test_deformable_conv_2d_quantized_operands(paddle):
    from nnadapter_bridge.nnadapter.types import OperandType

    # int8 input/offset/mask, per-channel int8 filter, int32 bias with scale in_scale * filter_scale[i].
    in_scale, filter_scales, out_scale = 0.05, [0.02, 0.04], 0.1
    x_q = rng.integers(-100, 100, (1, 2, 5, 5)).astype(np.int8)
    offset_q = rng.integers(-40, 40, (1, 18, 5, 5)).astype(np.int8)
    mask_q = rng.integers(0, 20, (1, 9, 5, 5)).astype(np.int8)
    w_q = rng.integers(-120, 120, (2, 2, 3, 3)).astype(np.int8)
    bias_q = np.array([300, -500], dtype=np.int32)
    output_type = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=out_scale)
    (got,) = run_op(T.DEFORMABLE_CONV_2D, [
        Quant(x_q, scale=in_scale), Quant(offset_q, scale=in_scale), Quant(mask_q, scale=in_scale),
        Quant(w_q, scales=filter_scales, precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL, is_input=False),
        Quant(bias_q, scales=[in_scale * s for s in filter_scales], precision=Precision.QUANT_INT32_SYMM_PER_CHANNEL,
              is_input=False),
        Const([1, 1, 1, 1]), Const([1, 1]), 1, 1, Const([1, 1]), 0], output_types=[output_type])
    real = {"x": x_q * np.float32(in_scale), "offset": offset_q * np.float32(in_scale),
            "mask": mask_q * np.float32(in_scale),
            "w": w_q * np.float32(filter_scales).reshape(2, 1, 1, 1),
            "bias": bias_q * (in_scale * np.float32(filter_scales))}
    want = paddle.vision.ops.deform_conv2d(
        _tensor(paddle, real["x"].astype(np.float32)), _tensor(paddle, real["offset"].astype(np.float32)),
        _tensor(paddle, real["w"].astype(np.float32)), bias=_tensor(paddle, real["bias"].astype(np.float32)),
        padding=1, mask=_tensor(paddle, real["mask"].astype(np.float32))).numpy()
    want_q = np.clip(np.rint(want / out_scale), -128, 127).astype(np.int8)
    assert got.dtype == np.int8
    # Requantization may flip a value that sits on a rounding boundary by one step.
    assert np.max(np.abs(got.astype(np.int32) - want_q.astype(np.int32))) <= 1
    assert np.mean(got == want_q) > 0.95


def test_deformable_conv_2d_rejects_wrong_offset_channels():
    x = np.zeros((1, 4, 5, 5), np.float32)
    offset = np.zeros((1, 17, 5, 5), np.float32)
    with pytest.raises(OperationError, match="offset"):
        build_op(T.DEFORMABLE_CONV_2D, [x, offset, None, Const(np.zeros((2, 4, 3, 3), np.float32)),
                                        Const(np.zeros(2, np.float32)), Const([1, 1, 1, 1]), Const([1, 1]),
                                        1, 1, Const([1, 1]), 0])


# -- GRID_SAMPLE ---------------------------------------------------------------------------------

_MODES = {"bilinear": InterpolateMode.BILINEAR, "nearest": InterpolateMode.NEAREST}
_PADS = {"zeros": PadMode.CONSTANT, "border": PadMode.EDGE, "reflection": PadMode.REFLECT}


@pytest.mark.parametrize("mode", sorted(_MODES))
@pytest.mark.parametrize("padding", sorted(_PADS))
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_matches_paddle(paddle, mode, padding, align_corners):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    # Points well beyond [-1, 1] exercise the padding modes, including multiple reflections.
    grid = rng.uniform(-2.6, 2.6, (2, 4, 6, 2)).astype(np.float32)
    (got,) = run_op(T.GRID_SAMPLE, [x, grid, align_corners, int(_MODES[mode]), int(_PADS[padding])])
    want = paddle.nn.functional.grid_sample(_tensor(paddle, x), _tensor(paddle, grid), mode=mode,
                                            padding_mode=padding, align_corners=align_corners).numpy()
    assert_op_close(got, want, what=f"GRID_SAMPLE {mode} {padding} align_corners={align_corners}")


@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_nearest_on_half_pixel_ties_matches_paddle(paddle, align_corners):
    # Grid points that land exactly halfway between pixels decide the rounding rule of 'nearest'.
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    if align_corners:
        ticks = np.array([-0.75, -0.25, 0.25, 0.75], np.float32)  # pixels 0.5, 1.5, 2.5, 3.5
    else:
        ticks = np.array([-0.6, -0.2, 0.2, 0.6], np.float32)  # ((g + 1) * 5 - 1) / 2 = 0.5 .. 3.5
    gx, gy = np.meshgrid(ticks, ticks[::-1])
    grid = np.stack([gx, gy], -1)[None].astype(np.float32)
    (got,) = run_op(T.GRID_SAMPLE, [x, grid, align_corners, int(InterpolateMode.NEAREST), int(PadMode.CONSTANT)])
    want = paddle.nn.functional.grid_sample(_tensor(paddle, x), _tensor(paddle, grid), mode="nearest",
                                            padding_mode="zeros", align_corners=align_corners).numpy()
    assert_op_close(got, want, what=f"GRID_SAMPLE nearest ties align_corners={align_corners}")


def test_grid_sample_replicate_equals_edge_and_none_is_bilinear_zeros(paddle):
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1.5, 1.5, (1, 3, 3, 2)).astype(np.float32)
    (edge,) = run_op(T.GRID_SAMPLE, [x, grid, False, int(InterpolateMode.BILINEAR), int(PadMode.EDGE)])
    (replicate,) = run_op(T.GRID_SAMPLE, [x, grid, False, int(InterpolateMode.BILINEAR), int(PadMode.REPLICATE)])
    np.testing.assert_array_equal(edge, replicate)
    (defaults,) = run_op(T.GRID_SAMPLE, [x, grid, False, int(InterpolateMode.NONE), int(PadMode.NONE)])
    want = paddle.nn.functional.grid_sample(_tensor(paddle, x), _tensor(paddle, grid), mode="bilinear",
                                            padding_mode="zeros", align_corners=False).numpy()
    assert_op_close(defaults, want, what="GRID_SAMPLE NONE/NONE")


def test_grid_sample_quantized_input_keeps_its_type():
    q = rng.integers(-100, 100, (1, 2, 4, 4)).astype(np.int8)
    grid = rng.uniform(-1, 1, (1, 2, 3, 2)).astype(np.float32)
    model, _ = build_op(T.GRID_SAMPLE, [Quant(q, scale=0.1), grid, True, 1, 1])
    t = model.output_operands[0].type
    assert t.precision == Precision.QUANT_INT8_SYMM_PER_LAYER and t.dims == (1, 2, 2, 3) and t.scale == 0.1


# -- PRIOR_BOX -------------------------------------------------------------------------------------

PRIOR_BOX_CASES = [
    # (min_sizes, max_sizes, aspect_ratios, variances, flip, clip, steps, offset, min_max_order)
    ([16.0], [], [1.0], [0.1, 0.1, 0.2, 0.2], False, False, [0.0, 0.0], 0.5, False),
    ([16.0], [32.0], [2.0], [0.1, 0.1, 0.2, 0.2], True, False, [0.0, 0.0], 0.5, False),
    ([16.0], [32.0], [2.0], [0.1, 0.1, 0.2, 0.2], True, False, [0.0, 0.0], 0.5, True),
    ([10.0, 20.0], [25.0, 40.0], [2.0, 3.0], [0.1, 0.2, 0.3, 0.4], True, True, [8.0, 8.0], 0.5, False),
    ([10.0, 20.0], [25.0, 40.0], [2.0, 3.0, 1.0], [0.1, 0.2, 0.3, 0.4], False, True, [8.0, 6.0], 0.3, True),
    ([30.0], [], [0.5, 2.0], [0.1, 0.1, 0.2, 0.2], True, True, [0.0, 0.0], 0.0, False),  # 0.5 and 2.0 dedupe
    ([7.5], [60.0], [1.5], [1.0, 1.0, 1.0, 1.0], False, False, [5.0, 0.0], 1.0, True),
    ([12.0, 24.0, 36.0], [], [2.0], [0.1, 0.1, 0.2, 0.2], True, False, [4.0, 4.0], 0.5, True),
]


@pytest.mark.parametrize("case", PRIOR_BOX_CASES)
def test_prior_box_matches_paddle(paddle, case):
    min_sizes, max_sizes, ratios, variances, flip, clip, steps, offset, order = case
    feature = rng.standard_normal((1, 3, 5, 6)).astype(np.float32)
    image = rng.standard_normal((1, 3, 40, 48)).astype(np.float32)
    inputs = [feature, image, Const(np.float32(min_sizes)), Const(np.float32(max_sizes)) if max_sizes else None,
              Const(np.float32(ratios)), Const(np.float32(variances)), flip, clip, float(steps[0]),
              float(steps[1]), float(offset), order]
    boxes, var = run_op(T.PRIOR_BOX, inputs, n_outputs=2)
    want_boxes, want_var = paddle.vision.ops.prior_box(
        _tensor(paddle, feature), _tensor(paddle, image), min_sizes=min_sizes, max_sizes=max_sizes or None,
        aspect_ratios=ratios, variance=variances, flip=flip, clip=clip, steps=steps, offset=offset,
        min_max_aspect_ratios_order=order)
    assert_op_close(boxes, want_boxes.numpy(), what=f"PRIOR_BOX boxes {case}")
    assert_op_close(var, want_var.numpy(), what=f"PRIOR_BOX variances {case}")


def test_prior_box_non_constant_sizes_leave_the_prior_count_unknown():
    feature = np.zeros((1, 3, 5, 6), np.float32)
    image = np.zeros((1, 3, 40, 48), np.float32)
    min_sizes = np.float32([16.0])  # a model input, not a constant
    model, _ = build_op(T.PRIOR_BOX, [feature, image, min_sizes, None, Const(np.float32([2.0])),
                                      Const(np.float32([0.1, 0.1, 0.2, 0.2])), True, False, 0.0, 0.0, 0.5, False],
                        n_outputs=2)
    assert model.output_operands[0].type.dims == (5, 6, UNKNOWN, 4)


# -- ROI_ALIGN -------------------------------------------------------------------------------------

def _random_rois(count, size, scale):
    xy = rng.uniform(-3, size * 0.8, (count, 2))
    wh = rng.uniform(0.3, size * 0.7, (count, 2))
    return (np.concatenate([xy, xy + wh], 1) / scale).astype(np.float32)


@pytest.mark.parametrize("sampling_ratio", [-1, 0, 1, 2])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("spatial_scale, out_size", [(1.0, (2, 2)), (0.5, (3, 4))])
def test_roi_align_matches_paddle(paddle, sampling_ratio, aligned, spatial_scale, out_size):
    x = rng.standard_normal((3, 4, 9, 11)).astype(np.float32)
    rois_num = np.array([2, 0, 3], dtype=np.int32)
    rois = _random_rois(int(rois_num.sum()), 10, spatial_scale)
    batch_indices = np.repeat(np.arange(3), rois_num).astype(np.int32)
    (got,) = run_op(T.ROI_ALIGN, [x, rois, batch_indices, out_size[0], out_size[1], sampling_ratio,
                                  float(spatial_scale), aligned])
    want = paddle.vision.ops.roi_align(_tensor(paddle, x), _tensor(paddle, rois), _tensor(paddle, rois_num),
                                       output_size=out_size, spatial_scale=spatial_scale,
                                       sampling_ratio=sampling_ratio, aligned=aligned).numpy()
    assert_op_close(got, want, what=f"ROI_ALIGN ratio={sampling_ratio} aligned={aligned} scale={spatial_scale}")


def test_roi_align_batch_indices_in_any_order(paddle):
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    rois = _random_rois(5, 8, 1.0)
    batch_indices = np.array([1, 0, 1, 0, 1], dtype=np.int32)
    (got,) = run_op(T.ROI_ALIGN, [x, rois, batch_indices, 3, 3, 2, 1.0, True])
    order = np.argsort(batch_indices, kind="stable")  # Paddle wants rois grouped by image
    want_sorted = paddle.vision.ops.roi_align(_tensor(paddle, x), _tensor(paddle, rois[order]),
                                              _tensor(paddle, np.array([2, 3], np.int32)), output_size=3,
                                              sampling_ratio=2, aligned=True).numpy()
    want = np.empty_like(want_sorted)
    want[order] = want_sorted
    assert_op_close(got, want, what="ROI_ALIGN unsorted batch indices")


def test_roi_align_many_rois_keep_memory_bounded(paddle):
    """An FPN R-CNN pools a thousand proposals from a large stride-4 map: the reference must not hold a copy of the
    feature map per roi (300 rois x 32 x 48 x 48 in float64 is 177 MB; an R-CNN at 320 px asked for 12 GiB)."""
    import tracemalloc

    x = rng.standard_normal((2, 32, 48, 48)).astype(np.float32)
    rois_num = np.array([180, 120], dtype=np.int32)
    rois = _random_rois(int(rois_num.sum()), 48, 1.0)
    batch_indices = np.repeat(np.arange(2), rois_num).astype(np.int32)
    tracemalloc.start()
    try:
        (got,) = run_op(T.ROI_ALIGN, [x, rois, batch_indices, 7, 7, 0, 1.0, True])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60e6, f"ROI_ALIGN of 300 rois peaked at {peak / 1e6:.0f} MB"
    want = paddle.vision.ops.roi_align(_tensor(paddle, x), _tensor(paddle, rois), _tensor(paddle, rois_num),
                                       output_size=7, sampling_ratio=0, aligned=True).numpy()
    assert_op_close(got, want, what="ROI_ALIGN 300 rois")


# -- NON_MAX_SUPPRESSION ---------------------------------------------------------------------------

def _boxes(shape_prefix, extent):
    xy = rng.uniform(0, extent, shape_prefix + (2,))
    wh = rng.uniform(extent * 0.05, extent * 0.4, shape_prefix + (2,))
    return np.concatenate([xy, xy + wh], -1).astype(np.float32)


def _paddle_nms(paddle, boxes, scores, rois_num, attrs):
    out, index, counts = paddle._C_ops.multiclass_nms3(
        _tensor(paddle, boxes), _tensor(paddle, scores), None if rois_num is None else _tensor(paddle, rois_num),
        attrs["score_threshold"], attrs["nms_top_k"], attrs["keep_top_k"], attrs["nms_threshold"],
        attrs["normalized"], attrs["nms_eta"], attrs["background_label"])
    return out.numpy(), counts.numpy(), index.numpy().reshape(-1)


def _nms_inputs(boxes, scores, rois_num, attrs, return_index=True):
    return [boxes, scores, rois_num, attrs["background_label"], float(attrs["score_threshold"]),
            attrs["nms_top_k"], float(attrs["nms_threshold"]), float(attrs["nms_eta"]), attrs["keep_top_k"],
            attrs["normalized"], return_index]


NMS_CASES = [
    dict(
        background_label=-1,
        score_threshold=0.05,
        nms_top_k=-1,
        nms_threshold=0.3,
        nms_eta=1.0,
        keep_top_k=-1,
        normalized=True,
    ),
    dict(
        background_label=0,
        score_threshold=0.3,
        nms_top_k=8,
        nms_threshold=0.5,
        nms_eta=1.0,
        keep_top_k=10,
        normalized=True,
    ),
    dict(
        background_label=1,
        score_threshold=0.2,
        nms_top_k=-1,
        nms_threshold=0.4,
        nms_eta=1.0,
        keep_top_k=5,
        normalized=False,
    ),
    dict(
        background_label=-1,
        score_threshold=0.1,
        nms_top_k=20,
        nms_threshold=0.9,
        nms_eta=0.7,
        keep_top_k=-1,
        normalized=True,
    ),
    dict(
        background_label=-1,
        score_threshold=0.0,
        nms_top_k=4,
        nms_threshold=0.6,
        nms_eta=0.8,
        keep_top_k=7,
        normalized=False,
    ),
    dict(
        background_label=2,
        score_threshold=0.5,
        nms_top_k=-1,
        nms_threshold=0.2,
        nms_eta=1.0,
        keep_top_k=3,
        normalized=True,
    ),
]


@pytest.mark.parametrize("attrs", NMS_CASES)
def test_nms_batched_form_matches_paddle(paddle, attrs):
    n, c, m = 3, 4, 25
    boxes = _boxes((n, m), 1.0 if attrs["normalized"] else 60.0)
    scores = rng.uniform(0, 1, (n, c, m)).astype(np.float32)
    out, counts, index = run_op(T.NON_MAX_SUPPRESSION, _nms_inputs(boxes, scores, None, attrs), n_outputs=3)
    want_out, want_counts, want_index = _paddle_nms(paddle, boxes, scores, None, attrs)
    assert len(want_out) > 0
    assert_op_close(counts, want_counts, what="NMS out_rois_num")
    assert_op_close(index, want_index, what="NMS index")
    assert_op_close(out, want_out, what="NMS output")


@pytest.mark.parametrize("attrs", NMS_CASES)
def test_nms_lod_form_matches_paddle(paddle, attrs):
    c = 3
    rois_num = np.array([6, 0, 9, 4], dtype=np.int32)
    m = int(rois_num.sum())
    boxes = _boxes((m, c), 1.0 if attrs["normalized"] else 60.0)
    scores = rng.uniform(0, 1, (m, c)).astype(np.float32)
    out, counts, index = run_op(T.NON_MAX_SUPPRESSION, _nms_inputs(boxes, scores, rois_num, attrs), n_outputs=3)
    want_out, want_counts, want_index = _paddle_nms(paddle, boxes, scores, rois_num, attrs)
    assert len(want_out) > 0
    assert_op_close(counts, want_counts, what="NMS (LoD) out_rois_num")
    assert_op_close(index, want_index, what="NMS (LoD) index")
    assert_op_close(out, want_out, what="NMS (LoD) output")


def test_nms_identical_boxes_keep_only_the_best_and_ties_keep_box_order(paddle):
    box = [0.1, 0.1, 0.5, 0.5]
    boxes = np.array([[box, box, [0.6, 0.6, 0.9, 0.9], box]], dtype=np.float32)  # [1, 4, 4]
    scores = np.array([[[0.7, 0.9, 0.9, 0.9]]], dtype=np.float32)  # one class; three equal scores
    attrs = dict(background_label=-1, score_threshold=0.1, nms_top_k=-1, nms_threshold=0.5, nms_eta=1.0,
                 keep_top_k=-1, normalized=True)
    out, counts, index = run_op(T.NON_MAX_SUPPRESSION, _nms_inputs(boxes, scores, None, attrs), n_outputs=3)
    # Written from the spec: box 1 wins (first of the tied 0.9s), boxes 3 and 0 overlap it fully.
    np.testing.assert_array_equal(index, np.array([1, 2], np.int32))
    np.testing.assert_array_equal(counts, np.array([2], np.int32))
    want_out, _, want_index = _paddle_nms(paddle, boxes, scores, None, attrs)
    np.testing.assert_array_equal(index, want_index)
    assert_op_close(out, want_out, what="NMS ties")


def test_nms_nothing_above_threshold_gives_zero_rows(paddle):
    boxes = _boxes((2, 5), 1.0)
    scores = rng.uniform(0, 0.5, (2, 3, 5)).astype(np.float32)
    attrs = dict(background_label=-1, score_threshold=0.9, nms_top_k=-1, nms_threshold=0.5, nms_eta=1.0,
                 keep_top_k=-1, normalized=True)
    out, counts, index = run_op(T.NON_MAX_SUPPRESSION, _nms_inputs(boxes, scores, None, attrs), n_outputs=3)
    want_out, want_counts, _ = _paddle_nms(paddle, boxes, scores, None, attrs)
    assert out.shape == (0, 6) == want_out.shape and index.shape == (0,)
    np.testing.assert_array_equal(counts, want_counts)


def test_nms_without_index_output_and_dynamic_shapes(paddle):
    boxes = _boxes((2, 10), 1.0)
    scores = rng.uniform(0, 1, (2, 3, 10)).astype(np.float32)
    attrs = NMS_CASES[0]
    model, _ = build_op(T.NON_MAX_SUPPRESSION, _nms_inputs(boxes, scores, None, attrs, return_index=False),
                        n_outputs=3, null_outputs=[2])
    assert model.output_operands[0].type.dims == (UNKNOWN, 6)
    assert model.output_operands[1].type.dims == (2,)
    out, counts = run_op(T.NON_MAX_SUPPRESSION, _nms_inputs(boxes, scores, None, attrs, return_index=False),
                         n_outputs=3, null_outputs=[2])
    want_out, want_counts, _ = _paddle_nms(paddle, boxes, scores, None, attrs)
    assert_op_close(out, want_out, what="NMS without index")
    np.testing.assert_array_equal(counts, want_counts)


def test_nms_return_index_needs_the_index_output():
    boxes = _boxes((1, 4), 1.0)
    scores = rng.uniform(0, 1, (1, 2, 4)).astype(np.float32)
    with pytest.raises(OperationError, match="return_index"):
        build_op(T.NON_MAX_SUPPRESSION, _nms_inputs(boxes, scores, None, NMS_CASES[0]), n_outputs=3, null_outputs=[2])


# -- YOLO_BOX ---------------------------------------------------------------------------------------

YOLO_CASES = YOLO_BOX_CASES


@pytest.mark.parametrize("case", YOLO_CASES)
def test_yolo_box_matches_paddle(paddle, case):
    anchors, class_num, conf_thresh, downsample, clip_bbox, scale_x_y, iou_aware, iou_factor = case
    n, h, w = 2, 5, 6
    a = len(anchors) // 2
    channels = a * (5 + class_num) + (a if iou_aware else 0)
    x = rng.standard_normal((n, channels, h, w)).astype(np.float32) * 2
    imgsize = np.array([[h * downsample, w * downsample], [300, 417]], dtype=np.int32)
    boxes, scores = run_op(T.YOLO_BOX, [x, imgsize, Const(anchors), class_num, float(conf_thresh), downsample,
                                        clip_bbox, float(scale_x_y), iou_aware, float(iou_factor)], n_outputs=2)
    want_boxes, want_scores = paddle.vision.ops.yolo_box(
        _tensor(paddle, x), _tensor(paddle, imgsize), anchors=anchors, class_num=class_num,
        conf_thresh=conf_thresh, downsample_ratio=downsample, clip_bbox=clip_bbox, scale_x_y=scale_x_y,
        iou_aware=iou_aware, iou_aware_factor=iou_factor)
    want_boxes, want_scores = want_boxes.numpy(), want_scores.numpy()
    assert np.any(want_boxes == 0) or conf_thresh == 0.0
    # Box coordinates reach a few hundred pixels: the relative term of float32 exp/sigmoid dominates,
    # so rtol is a few float32 ulps (Paddle computes in float32, we in float64).
    assert_op_close(boxes, want_boxes, atol=1e-4, rtol=1e-6, what=f"YOLO_BOX boxes {case}")
    assert_op_close(scores, want_scores, what=f"YOLO_BOX scores {case}")


def test_yolo_box_boxes_only_and_channel_check():
    x = rng.standard_normal((1, 14, 3, 3)).astype(np.float32)
    imgsize = np.array([[96, 96]], dtype=np.int32)
    inputs = [x, imgsize, Const([10, 13, 16, 30]), 2, 0.1, 32, True, 1.0, False, 0.5]
    (boxes,) = run_op(T.YOLO_BOX, inputs, n_outputs=1)
    assert boxes.shape == (1, 18, 4)
    bad = list(inputs)
    bad[3] = 3  # 2 anchors x (5 + 3) = 16 channels, not 14
    with pytest.raises(OperationError, match="channels"):
        build_op(T.YOLO_BOX, bad, n_outputs=2)
