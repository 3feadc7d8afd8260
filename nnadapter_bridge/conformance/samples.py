"""Representative samples of every NNAdapter operation: the driver contract tests (tests/hal/) and the
conformance kit (nnadapter_bridge.conformance) run each one on every driver. This is their one home;
the tests import them from here.

Each `Sample` is one operation with its inputs in the `harness.build_op` format (ndarray = model
input, `Const(...)` = constant, Python scalar = shape-[1] constant, None = omitted optional operand,
`Quant(...)` = quantized tensor), taken from the patterns of the operation tests
(tests/nnadapter/operations/test_*.py). Every one of the 96 operations has at least one sample; several
have more where the mapping to other runtimes has distinct paths (fuse codes, quantized operands, ceil_mode,
align_corners, run-time parameters).

Entry points: `SAMPLES`, `sample_ids`, `Sample`. Imports the harness and the standard's codes only.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from nnadapter_bridge.conformance.harness import Const, Quant
from nnadapter_bridge.nnadapter.codes import (
    AutoPad,
    FuseCode,
    InterpolateMode,
    PadMode,
    Precision,
)
from nnadapter_bridge.nnadapter.codes import (
    OperationType as T,
)

I32, I64 = int(Precision.INT32), int(Precision.INT64)


@dataclasses.dataclass
class Sample:
    id: str
    type: T
    inputs: list
    n_outputs: int = 1
    null_outputs: Sequence[int] = ()


# YOLO_BOX attribute combinations, shared by the reference's test against Paddle and the lowering's test
# against the reference.
YOLO_BOX_CASES = [
    # (anchors, class_num, conf_thresh, downsample, clip_bbox, scale_x_y, iou_aware, iou_aware_factor)
    ([10, 13, 16, 30, 33, 23], 2, 0.01, 32, True, 1.0, False, 0.5),
    ([10, 13, 16, 30], 3, 0.5, 16, False, 1.0, False, 0.5),
    ([10, 13, 16, 30, 33, 23], 1, 0.3, 8, True, 1.2, False, 0.5),
    ([116, 90], 4, 0.0, 32, False, 1.05, False, 0.5),
    ([10, 13, 16, 30, 33, 23], 2, 0.2, 32, True, 1.0, True, 0.5),
    ([30, 61, 62, 45], 3, 0.4, 16, False, 1.1, True, 0.3),
    ([30, 61], 2, 0.6, 8, True, 1.0, True, 0.8),
    ([30, 61], 5, 0.9, 8, True, 1.3, True, 0.0),
]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(*shape, seed: int = 0) -> np.ndarray:
    return _rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def uniform(low, high, shape, seed: int = 0) -> np.ndarray:
    return _rng(seed + 100).uniform(low, high, shape).astype(np.float32)


def ints(values, dtype=np.int32) -> Const:
    return Const(np.asarray(values, dtype=dtype))


def _q8(shape, seed=0) -> np.ndarray:
    return _rng(seed + 7).integers(-100, 100, shape).astype(np.int8)


def _samples() -> list:
    s: list = []
    add = lambda id, type, inputs, **kw: s.append(Sample(id, type, inputs, **kw))  # noqa: E731

    # -- binary arithmetic (fuse codes, broadcasting, integers, quantized) --------------------------
    a, b = randn(2, 3, 4, seed=1), randn(3, 4, seed=2)
    for t in (T.ADD, T.SUB, T.MUL, T.MAX, T.MIN):
        add(f"{t.name}_broadcast", t, [a, b, int(FuseCode.FUSED_NONE)])
    add("ADD_relu6_const", T.ADD, [a * 4, Const(b * 4), int(FuseCode.FUSED_RELU6)])
    add("SUB_relu1", T.SUB, [a, b, int(FuseCode.FUSED_RELU1)])
    add("MUL_relu", T.MUL, [a, b, int(FuseCode.FUSED_RELU)])
    add("ADD_int32", T.ADD, [np.arange(12, dtype=np.int32).reshape(3, 4), Const(np.int32([1, -2, 3, -4])), 0])
    add("DIV_float", T.DIV, [a, uniform(0.5, 2.0, (3, 4)), 0])
    add("DIV_int_truncates", T.DIV, [np.int32([7, -7, 7, -7, 9]), np.int32([2, 2, -2, -2, 3]), 0])
    add("POW_float", T.POW, [uniform(0.1, 3.0, (2, 5)), uniform(-2.0, 2.0, (2, 5), seed=3), 0])
    add(
        "FLOOR_DIV_float",
        T.FLOOR_DIV,
        [randn(3, 5, seed=4) * 5, uniform(0.5, 3.0, (3, 5)) * np.float32([1, -1, 1, -1, 1]), 0],
    )
    add("FLOOR_DIV_int", T.FLOOR_DIV, [np.int64([7, -7, 7, -7, 0, 9]), np.int64([2, 2, -2, -2, 3, 3]), 0])
    add("ADD_quant", T.ADD, [Quant(_q8((2, 3)), 0.0213), Quant(_q8((2, 3), 1), 0.0317), int(FuseCode.FUSED_RELU)])
    add("SUM_three", T.SUM, [randn(2, 3, seed=5), randn(2, 3, seed=6), Const(randn(3, seed=7))])
    add("SUM_int", T.SUM, [np.int32([[1, 2], [3, 4]]), np.int32([[5, 6], [7, 8]])])

    # -- comparisons and logic ------------------------------------------------------------------
    ca, cb = np.float32([[1, 2, 3], [4, 5, 6]]), np.float32([[1, 0, 3], [5, 5, 7]])
    for t in (T.EQUAL, T.NOT_EQUAL, T.GREATER, T.GREATER_EQUAL, T.LESS, T.LESS_EQUAL):
        add(f"{t.name}_float", t, [ca, cb])
    add("GREATER_int_const", T.GREATER, [np.int32([1, 5, 3]), Const(np.int32([2, 2, 2]))])
    add("EQUAL_bool", T.EQUAL, [np.bool_([True, False, True]), np.bool_([True, True, False])])
    add("LESS_bool", T.LESS, [np.bool_([True, False, False]), np.bool_([True, True, False])])
    ba, bb = np.bool_([[True, False], [True, True]]), np.bool_([[False, False], [True, False]])
    for t in (T.AND, T.OR, T.XOR):
        add(f"{t.name}", t, [ba, bb])
    add("NOT", T.NOT, [ba])
    add("WHERE", T.WHERE, [np.bool_([[True, False, True], [False, True, False]]), randn(2, 3), Const(randn(3, seed=9))])

    # -- unary ------------------------------------------------------------------------------------
    x = randn(2, 3, 4, seed=11) * 2
    positive = uniform(0.1, 4.0, (2, 3, 4))
    for t in (T.ABS, T.COS, T.EXP, T.FLOOR, T.RELU, T.RELU6, T.SIGMOID, T.SIN, T.SQUARE, T.SWISH, T.TANH, T.ASSIGN):
        add(t.name, t, [x * (4 if t == T.RELU6 else 1)])
    add("LOG", T.LOG, [positive])
    add("RSQRT", T.RSQRT, [positive])
    add("SIGMOID_quant", T.SIGMOID, [Quant(_q8((3, 4)), 0.05)])
    add("ASSIGN_int", T.ASSIGN, [np.int64([[1, 2], [3, 4]])])
    add("CAST_float_to_int32", T.CAST, [np.float32([-2.7, -0.5, 0.5, 2.7, 100.2]), I32])
    add("CAST_float_to_uint8", T.CAST, [np.float32([-1.5, 0.0, 1.9, 254.9]), int(Precision.UINT8)])
    add("CAST_int_to_float", T.CAST, [np.int64([-3, 0, 7]), int(Precision.FLOAT32)])
    add("CAST_float_to_bool", T.CAST, [np.float32([0.0, 1.5, -2.0]), int(Precision.BOOL8)])
    add("CLIP", T.CLIP, [x, -0.5, 1.5])
    add("CLIP_low_above_high", T.CLIP, [x, 1.0, -1.0])
    add("GELU_erf", T.GELU, [x, False])
    add("GELU_tanh", T.GELU, [x, True])
    add("HARD_SIGMOID", T.HARD_SIGMOID, [x, 0.2, 0.5])
    add("HARD_SWISH", T.HARD_SWISH, [x * 2, 1.0 / 6.0, 0.5])
    add("LEAKY_RELU", T.LEAKY_RELU, [x, 0.1])
    add("PRELU_per_channel", T.PRELU, [randn(2, 3, 4, 4, seed=12), Const(np.float32([0.1, 0.2, 0.3]))])
    add("PRELU_shared", T.PRELU, [randn(2, 3, 4, seed=13), Const(np.float32([0.25]))])
    add("SOFTPLUS", T.SOFTPLUS, [x * 3, 2.0, 5.0])

    # -- convolution and pooling --------------------------------------------------------------------
    img = randn(1, 4, 7, 8, seed=21)
    w = randn(6, 4, 3, 3, seed=22) * 0.3
    add(
        "CONV_2D_pads_relu",
        T.CONV_2D,
        [
            img,
            Const(w),
            Const(randn(6, seed=23)),
            int(AutoPad.AUTO_PAD_NONE),
            Const([1, 0, 2, 1]),
            Const([1, 2]),
            1,
            Const([1, 1]),
            int(FuseCode.FUSED_RELU),
        ],
    )
    add("CONV_2D_same_dilated", T.CONV_2D, [img, Const(w), None, int(AutoPad.AUTO_PAD_SAME), Const([0, 0, 0, 0]),
                                            Const([2, 2]), 1, Const([2, 2]), 0])
    add("CONV_2D_depthwise_valid", T.CONV_2D, [img, Const(randn(8, 1, 3, 3, seed=24)), Const(randn(8, seed=25)),
                                               int(AutoPad.AUTO_PAD_VALID), None, Const([1, 1]), 4, Const([1, 1]),
                                               int(FuseCode.FUSED_RELU6)])
    add(
        "CONV_2D_quant_per_channel",
        T.CONV_2D,
        [
            Quant(_q8((1, 2, 5, 5)), scale=0.05),
            Quant(
                _q8((3, 2, 3, 3), 3),
                scales=[0.01, 0.02, 0.03],
                precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL,
                is_input=False,
            ),
            Quant(
                np.int32([100, -200, 300]),
                scales=[0.0005, 0.001, 0.0015],
                precision=Precision.QUANT_INT32_SYMM_PER_CHANNEL,
                is_input=False,
            ),
            0,
            Const([1, 1, 1, 1]),
            Const([1, 1]),
            1,
            Const([1, 1]),
            0,
        ],
    )
    wt = randn(4, 3, 3, 3, seed=26) * 0.3
    add("CONV_2D_TRANSPOSE", T.CONV_2D_TRANSPOSE, [img, Const(wt), Const(randn(3, seed=27)), 0, Const([1, 0, 1, 2]),
                                                   Const([2, 2]), 1, Const([1, 1]), Const([1, 0]), None, 0])
    add("CONV_2D_TRANSPOSE_output_shape", T.CONV_2D_TRANSPOSE, [img, Const(randn(4, 2, 3, 3, seed=28)), None, 0,
                                                                Const([1, 1, 1, 1]), Const([2, 2]), 2, Const([1, 1]),
                                                                None, Const([14, 16]), int(FuseCode.FUSED_RELU)])
    pool_x = randn(2, 3, 7, 9, seed=31)
    add("AVERAGE_POOL_2D_pads_exclusive", T.AVERAGE_POOL_2D, [pool_x, 0, Const([1, 1, 1, 0]), Const([3, 3]),
                                                               Const([2, 2]), False, False, 0])
    add("AVERAGE_POOL_2D_ceil_inclusive", T.AVERAGE_POOL_2D, [pool_x, 0, Const([1, 0, 1, 1]), Const([3, 2]),
                                                               Const([2, 2]), True, True, int(FuseCode.FUSED_RELU)])
    add("AVERAGE_POOL_2D_ceil_partial_window", T.AVERAGE_POOL_2D, [pool_x, 0, Const([0, 0, 1, 0]), Const([3, 3]),
                                                                   Const([2, 2]), True, True, 0])
    add("AVERAGE_POOL_2D_same", T.AVERAGE_POOL_2D, [pool_x, int(AutoPad.AUTO_PAD_SAME), None, Const([3, 3]),
                                                     Const([2, 2]), False, False, 0])
    add("MAX_POOL_2D_ceil", T.MAX_POOL_2D, [pool_x, 0, Const([0, 1, 1, 0]), Const([3, 3]), Const([2, 2]), True,
                                            False, I32, 0])
    add("MAX_POOL_2D_indices", T.MAX_POOL_2D, [pool_x, 0, Const([1, 1, 1, 1]), Const([3, 3]), Const([2, 2]), False,
                                               True, I64, 0], n_outputs=2)
    add("ADAPTIVE_AVERAGE_POOL_2D_global", T.ADAPTIVE_AVERAGE_POOL_2D, [pool_x, Const([1, 1])])
    add("ADAPTIVE_AVERAGE_POOL_2D_divisible", T.ADAPTIVE_AVERAGE_POOL_2D, [randn(1, 2, 6, 8, seed=32), Const([3, 4])])
    add("ADAPTIVE_AVERAGE_POOL_2D_uneven", T.ADAPTIVE_AVERAGE_POOL_2D, [pool_x, Const([3, 4])])
    add("ADAPTIVE_MAX_POOL_2D_global", T.ADAPTIVE_MAX_POOL_2D, [pool_x, Const([1, 1]), False, I32])
    add("ADAPTIVE_MAX_POOL_2D_indices", T.ADAPTIVE_MAX_POOL_2D, [randn(1, 2, 6, 8, seed=33),
                                                                 Const(np.int64([2, 2])), True, I32], n_outputs=2)

    # -- normalization ----------------------------------------------------------------------------
    nx = randn(2, 6, 4, 5, seed=41)
    add("BATCH_NORMALIZATION", T.BATCH_NORMALIZATION, [nx, Const(randn(6, seed=42)), Const(randn(6, seed=43)),
                                                       Const(randn(6, seed=44)), Const(uniform(0.5, 2.0, (6,))), 1e-3])
    add("GROUP_NORMALIZATION", T.GROUP_NORMALIZATION, [nx, Const(randn(6, seed=45)), Const(randn(6, seed=46)), 1e-5, 3])
    add("INSTANCE_NORMALIZATION", T.INSTANCE_NORMALIZATION, [nx, Const(randn(6, seed=47)), Const(randn(6, seed=48)),
                                                             1e-5])
    add("LAYER_NORMALIZATION", T.LAYER_NORMALIZATION, [nx, Const(randn(4, 5, seed=49)), Const(randn(20, seed=50)), 2,
                                                       1e-5])
    add("LP_NORMALIZATION_p1", T.LP_NORMALIZATION, [nx, 1, 1, 1e-5])
    add("LP_NORMALIZATION_p2", T.LP_NORMALIZATION, [nx, -1, 2, 1e-6])
    add("LRN", T.LRN, [nx, 5, 1.0, 1e-2, 0.75])

    # -- matrix products, softmax ----------------------------------------------------------------
    add("FULLY_CONNECTED_relu", T.FULLY_CONNECTED, [randn(3, 2, 4, seed=51), Const(randn(5, 8, seed=52)),
                                                    Const(randn(5, seed=53)), int(FuseCode.FUSED_RELU)])
    add("FULLY_CONNECTED_no_bias", T.FULLY_CONNECTED, [randn(4, 6, seed=54), Const(randn(3, 6, seed=55)), None, 0])
    add("MAT_MUL_transposes", T.MAT_MUL, [randn(2, 4, 3, seed=56), randn(5, 4, seed=57), True, True])
    add("MAT_MUL_vector", T.MAT_MUL, [randn(3, seed=58), Const(randn(2, 3, 4, seed=59)), False, False])
    add("SOFTMAX", T.SOFTMAX, [randn(2, 3, 4, seed=60) * 3, -1])
    add("SOFTMAX_default_axis", T.SOFTMAX, [randn(2, 5, seed=61)])
    add("LOG_SOFTMAX", T.LOG_SOFTMAX, [randn(2, 3, 4, seed=62) * 3, 1])

    # -- pad and resize -----------------------------------------------------------------------------
    px = randn(1, 2, 4, 5, seed=71)
    add("PAD_constant", T.PAD, [px, Const([0, 0, 0, 0, 1, 2, 2, 1]), int(PadMode.CONSTANT), 1.5])
    add("PAD_reflect", T.PAD, [px, Const([0, 0, 0, 0, 1, 2, 2, 1]), int(PadMode.REFLECT), None])
    add("PAD_edge", T.PAD, [px, Const([0, 0, 1, 0, 2, 2, 0, 3]), int(PadMode.EDGE), None])
    add("PAD_crop", T.PAD, [randn(4, 5, seed=72), Const([-1, 2, 1, -2]), int(PadMode.CONSTANT), 0.0])
    add("PAD_int", T.PAD, [np.int32([[1, 2], [3, 4]]), Const([1, 0, 2, 1]), int(PadMode.CONSTANT),
                           Const(np.int32([7]))])
    rx = randn(1, 2, 5, 7, seed=73)
    add("RESIZE_NEAREST_shape", T.RESIZE_NEAREST, [rx, Const([8, 11]), None, False])
    add("RESIZE_NEAREST_downscale", T.RESIZE_NEAREST, [rx, Const([3, 4]), None, False])
    add("RESIZE_NEAREST_scales", T.RESIZE_NEAREST, [rx, None, Const(np.float32([2.0, 1.5])), False])
    add("RESIZE_NEAREST_align_corners", T.RESIZE_NEAREST, [rx, Const([9, 12]), None, True])
    add("RESIZE_LINEAR_align_corners", T.RESIZE_LINEAR, [rx, Const(np.int64([9, 12])), None, True, 1])
    add("RESIZE_LINEAR_half_pixel", T.RESIZE_LINEAR, [rx, Const([8, 11]), None, False, 0])
    add("RESIZE_LINEAR_asymmetric", T.RESIZE_LINEAR, [rx, Const([8, 11]), None, False, 1])
    # An output axis of length 1 reads source row (column) 0 in Paddle, not the half-pixel middle.
    add("RESIZE_LINEAR_half_pixel_to_one_row", T.RESIZE_LINEAR, [rx, Const([1, 3]), None, False, 0])
    add("RESIZE_LINEAR_half_pixel_to_one_pixel", T.RESIZE_LINEAR, [rx, Const([1, 1]), None, False, 0])
    add("RESIZE_LINEAR_scales_half_pixel", T.RESIZE_LINEAR, [rx, None, Const(np.float32([2.0, 2.0])), False, 0])
    # in * scale not whole (5 x 1.5 = 7.5 -> 7): Paddle steps by 1 / scale, not in / out.
    add("RESIZE_LINEAR_scales_not_whole", T.RESIZE_LINEAR, [rx, None, Const(np.float32([1.5, 1.5])), False, 0])
    add("RESIZE_LINEAR_runtime_shape", T.RESIZE_LINEAR, [rx, np.int32([7, 5]), None, False, 0])

    # -- quantization ------------------------------------------------------------------------------
    qx = np.float32([-1000.0, -1.26, -0.25, 0.25, 0.75, 1.25, 2.5, 1000.0])
    add("QUANTIZE_int8", T.QUANTIZE, [qx, 1, Const([0.5]), Const([0.0])])
    add("QUANTIZE_uint8", T.QUANTIZE, [qx, 1, Const([0.5]), Const([128.0])])
    add("QUANTIZE_per_channel", T.QUANTIZE, [randn(2, 3, 2, seed=81) * 10, 1, Const([0.5, 0.25, 1.0]),
                                             Const([0.0, 0.0, 0.0])])
    add("DEQUANTIZE_int8", T.DEQUANTIZE, [Quant(_q8((2, 5)), scale=0.25)])
    add("DEQUANTIZE_uint8", T.DEQUANTIZE, [Quant(np.uint8([[0, 128, 255], [1, 2, 3]]), scale=0.5, zero_point=128,
                                                 precision=Precision.QUANT_UINT8_ASYMM_PER_LAYER)])
    add("DEQUANTIZE_per_channel", T.DEQUANTIZE, [Quant(_q8((2, 3, 2)), scales=[0.5, 0.125], channel_dim=2,
                                                       precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL)])

    # -- reductions, arg, cum-sum, top-k ----------------------------------------------------------------
    tx = randn(2, 3, 4, seed=91)
    add("REDUCE_MEAN", T.REDUCE_MEAN, [tx, ints([0, 2]), True])
    add("REDUCE_MAX", T.REDUCE_MAX, [tx, ints([-1]), False])
    add("REDUCE_SUM_all", T.REDUCE_SUM, [tx, ints([]), False])
    add("REDUCE_SUM_int", T.REDUCE_SUM, [np.arange(24, dtype=np.int32).reshape(2, 3, 4), ints([1]), False])
    add("ARG_MAX_int64", T.ARG_MAX, [tx, 1, False, I64])
    add("ARG_MIN_keepdim_int32", T.ARG_MIN, [tx, -1, True, I32])
    add("CUM_SUM", T.CUM_SUM, [tx, 1, False, False])
    add("CUM_SUM_exclusive_reverse", T.CUM_SUM, [np.arange(12, dtype=np.int32).reshape(3, 4), 0, True, True])
    add("CUM_SUM_defaults", T.CUM_SUM, [tx])
    add("TOP_K_largest", T.TOP_K, [tx, 2, 2, True, True, I64], n_outputs=2)
    add("TOP_K_smallest_int32", T.TOP_K, [randn(3, 6, seed=92), Const(np.int64([3])), 1, False, True, I32],
        n_outputs=2)

    # -- reshaping -----------------------------------------------------------------------------------
    add("RESHAPE_copy_and_infer", T.RESHAPE, [tx, ints([0, -1, 2])])
    add("RESHAPE_runtime_shape", T.RESHAPE, [tx, np.int32([4, 6])])
    add("FLATTEN", T.FLATTEN, [randn(2, 3, 4, 5, seed=93), 1, 2])
    add("SQUEEZE_axes", T.SQUEEZE, [randn(1, 3, 1, 4, seed=94), ints([0, 2])])
    add("SQUEEZE_all", T.SQUEEZE, [randn(1, 3, 1, 4, seed=95), None])
    add("UNSQUEEZE", T.UNSQUEEZE, [tx, ints([0, -1])])
    add("TRANSPOSE", T.TRANSPOSE, [tx, ints([2, 0, 1])])
    add("TRANSPOSE_bool", T.TRANSPOSE, [np.bool_([[True, False, True], [False, False, True]]), ints([1, 0])])
    add("CHANNEL_SHUFFLE", T.CHANNEL_SHUFFLE, [randn(2, 6, 3, 2, seed=96), 3])

    # -- slicing, joining, splitting -------------------------------------------------------------------
    sx = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    add("SLICE_steps", T.SLICE, [sx, ints([0, 2]), ints([1, -1]), ints([3, 0]), ints([1, -2])])
    add("SLICE_no_axes", T.SLICE, [sx, None, ints([1, -3]), ints([3, 4]), None])
    add("SLICE_runtime_starts", T.SLICE, [sx, ints([1]), np.int32([1]), ints([3]), None])
    add("CONCAT", T.CONCAT, [randn(2, 3, seed=97), Const(randn(2, 1, seed=98)), randn(2, 2, seed=99), 1])
    add("CONCAT_quant", T.CONCAT, [Quant(_q8((2, 2)), scale=0.1), Quant(_q8((2, 3), 2), scale=0.05), 1])
    add("STACK", T.STACK, [randn(2, 3, seed=100), randn(2, 3, seed=101), -1])
    add("SPLIT", T.SPLIT, [sx, 2, ints([1, -1, 2])], n_outputs=3)
    add("UNSTACK", T.UNSTACK, [sx, 1, 4], n_outputs=4)
    add("MESHGRID", T.MESHGRID, [np.float32([1, 2, 3]), np.float32([4, 5])], n_outputs=2)

    # -- broadcasting, gathering, moving ---------------------------------------------------------------
    add("TILE_longer_repeats", T.TILE, [randn(2, 3, seed=102), ints([2, 1, 3])])
    add("TILE_shorter_repeats", T.TILE, [randn(2, 3, 2, seed=103), ints([2, 2])])
    add("EXPAND", T.EXPAND, [randn(3, 1, seed=104), ints([2, -1, 4])])
    add("EXPAND_int64_shape", T.EXPAND, [np.int32([[1], [2]]), ints([2, 3], np.int64)])
    add("GATHER_negative_indices", T.GATHER, [randn(4, 5, seed=105), np.int64([[0, -1], [2, 3]]), 1])
    add("GATHER_const_indices", T.GATHER, [randn(4, 5, seed=106), Const(np.int32([3, 0, 0])), 0])
    add("ROLL_axes", T.ROLL, [sx, ints([1, -2]), ints([0, 2])])
    add("ROLL_flat", T.ROLL, [sx, ints([7]), None])

    # -- shapes and generated tensors ----------------------------------------------------------------------
    add("SHAPE_int64", T.SHAPE, [tx, I64])
    add("SHAPE_quant_int32", T.SHAPE, [Quant(_q8((3, 2)), scale=0.5), I32])
    add("FILL_float", T.FILL, [ints([2, 3], np.int64), Const(np.float32([1.5]))])
    add("FILL_runtime_shape_int", T.FILL, [np.int32([3, 2]), Const(np.int32([7]))])
    add("FILL_LIKE", T.FILL_LIKE, [tx, Const(np.float32([0.25]))])
    add("FILL_LIKE_bool", T.FILL_LIKE, [tx, Const(np.bool_([True]))])
    add("RANGE_float", T.RANGE, [Const(np.float32([0.5])), Const(np.float32([7.0])), Const(np.float32([0.3]))])
    add("RANGE_int_runtime", T.RANGE, [np.int32([10]), np.int32([-3]), np.int32([-4])])

    # -- sampling and detection ------------------------------------------------------------------------
    dx = randn(2, 4, 7, 8, seed=111)
    add("DEFORMABLE_CONV_2D", T.DEFORMABLE_CONV_2D, [
        dx, uniform(-2.5, 2.5, (2, 2 * 3 * 3, 7, 8)), uniform(0, 1, (2, 9, 7, 8)), Const(randn(5, 4, 3, 3, seed=112)),
        Const(randn(5, seed=113)), Const([1, 1, 1, 1]), Const([1, 1]), 1, 1, Const([1, 1]), 0])
    grid = uniform(-1.4, 1.4, (2, 4, 6, 2))
    add("GRID_SAMPLE_bilinear_zeros", T.GRID_SAMPLE, [dx, grid, False, int(InterpolateMode.BILINEAR),
                                                       int(PadMode.CONSTANT)])
    add("GRID_SAMPLE_bilinear_border_align", T.GRID_SAMPLE, [dx, grid, True, int(InterpolateMode.BILINEAR),
                                                              int(PadMode.EDGE)])
    add("GRID_SAMPLE_nearest_reflect", T.GRID_SAMPLE, [dx, grid, False, int(InterpolateMode.NEAREST),
                                                        int(PadMode.REFLECT)])
    rois = np.float32([[0.5, 0.5, 5.0, 4.0], [1.0, 2.0, 7.5, 6.0], [0.0, 0.0, 3.0, 3.0]])
    add("ROI_ALIGN_aligned", T.ROI_ALIGN, [dx, rois, np.int32([0, 1, 1]), 2, 3, 2, 1.0, True])
    add("ROI_ALIGN_adaptive", T.ROI_ALIGN, [dx, rois, np.int32([1, 0, 0]), 3, 2, 0, 0.5, False])
    feature, image = randn(1, 3, 5, 6, seed=114), randn(1, 3, 40, 48, seed=115)
    add("PRIOR_BOX", T.PRIOR_BOX, [feature, image, Const(np.float32([10.0, 20.0])), Const(np.float32([25.0, 40.0])),
                                   Const(np.float32([2.0, 3.0])), Const(np.float32([0.1, 0.2, 0.3, 0.4])), True, True,
                                   8.0, 8.0, 0.5, False], n_outputs=2)
    boxes_xy = uniform(0, 1, (2, 10, 2))
    boxes = np.concatenate([boxes_xy, boxes_xy + uniform(0.05, 0.4, (2, 10, 2), seed=116)], -1)
    add("NON_MAX_SUPPRESSION", T.NON_MAX_SUPPRESSION, [boxes, uniform(0, 1, (2, 3, 10)), None, -1, 0.05, -1, 0.3,
                                                       1.0, -1, True, True], n_outputs=3)
    anchors = [10, 13, 16, 30]
    yolo_x = randn(2, 2 * (5 + 3), 4, 5, seed=117) * 2
    add("YOLO_BOX", T.YOLO_BOX, [yolo_x, np.int32([[128, 160], [300, 417]]), Const(np.int32(anchors)), 3, 0.01, 32,
                                 True, 1.0, False, 0.5], n_outputs=2)
    return s


SAMPLES = _samples()


def sample_ids() -> list:
    return [s.id for s in SAMPLES]
