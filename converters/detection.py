"""Converters for the detection and sampling ops of the NN family: prior_box, yolo_box, roi_align,
multiclass_nms3, deformable_conv / deformable_conv_v1, grid_sampler, and Paddle Lite's calib
(float <-> int8 conversion with one scale).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from converters.attrs import input_dims
from converters.emit import binary, cast_to
from converters.layout import explicit_pads
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import FuseCode, InterpolateMode, OperationType as T, PadMode, Precision

# -- prior_box -----------------------------------------------------------------------------------------------


@converter("prior_box", emits=[T.PRIOR_BOX])
def convert_prior_box(ctx, op):
    v = OpView(op)
    max_sizes = v.attr_floats("max_sizes", [])
    operands = [
        ctx.input(v.input("Input")), ctx.input(v.input("Image")),
        ctx.const_f32(v.attr_floats("min_sizes", [])),
        ctx.const_f32(max_sizes) if max_sizes else None,
        ctx.const_f32(v.attr_floats("aspect_ratios", [1.0])),
        ctx.const_f32(v.attr_floats("variances", [0.1, 0.1, 0.2, 0.2])),
        ctx.const_bool(v.attr_bool("flip", False)), ctx.const_bool(v.attr_bool("clip", False)),
        ctx.const_f32(v.attr_float("step_w", 0.0)), ctx.const_f32(v.attr_float("step_h", 0.0)),
        ctx.const_f32(v.attr_float("offset", 0.5)),
        ctx.const_bool(v.attr_bool("min_max_aspect_ratios_order", False)),
    ]
    ctx.add(T.PRIOR_BOX, operands, [ctx.output(v.output("Boxes")), ctx.output(v.output("Variances"))])


# -- yolo_box ------------------------------------------------------------------------------------------------

@converter("yolo_box", emits=[T.YOLO_BOX])
def convert_yolo_box(ctx, op):
    v = OpView(op)
    operands = [
        ctx.input(v.input("X")), ctx.input(v.input("ImgSize")),
        ctx.const_i32(v.attr_ints("anchors", [])), ctx.const_i32(v.attr_int("class_num", 1)),
        ctx.const_f32(v.attr_float("conf_thresh", 0.01)), ctx.const_i32(v.attr_int("downsample_ratio", 32)),
        ctx.const_bool(v.attr_bool("clip_bbox", True)), ctx.const_f32(v.attr_float("scale_x_y", 1.0)),
        ctx.const_bool(v.attr_bool("iou_aware", False)), ctx.const_f32(v.attr_float("iou_aware_factor", 0.5)),
    ]
    scores = v.optional_output("Scores")
    ctx.add(T.YOLO_BOX, operands, [ctx.output(v.output("Boxes")), ctx.output(scores) if scores else None])


# -- roi_align -----------------------------------------------------------------------------------------------

def _check_roi_align(op, ctx) -> Optional[str]:
    v = OpView(op)
    if v.optional_input("RoisNum"):
        return None
    dims = input_dims(ctx, op, "X")
    if dims is not None and dims[0] != 1:
        # Without RoisNum the roi -> image mapping lives in the LoD, which operands cannot carry.
        return "ROIs without RoisNum (LoD batches) are converted for a batch of 1 only"
    return None


def _batch_indices(ctx, op, rois, out_name: str):
    """The image index of every roi: for roi r, the count of images whose rois all come before r."""
    v = OpView(op)
    rois_num_name = v.optional_input("RoisNum")
    if rois_num_name is None:
        # One image: every roi belongs to it. FILL_LIKE on one column keeps a run-time roi count.
        column = ctx.temp(out_name, "rois_column")
        axis_start_end_step = [ctx.const_i32([1]), ctx.const_i32([0]), ctx.const_i32([1]), ctx.const_i32([1])]
        ctx.add(T.SLICE, [rois] + axis_start_end_step, [column])
        zeros = ctx.temp(out_name, "batch_zeros")
        ctx.add(T.FILL_LIKE, [column, ctx.const_i32(0)], [zeros])
        indices = ctx.temp(out_name, "batch_indices")
        ctx.add(T.RESHAPE, [zeros, ctx.const_i32([-1])], [indices])
        return indices
    rois_num = ctx.input(rois_num_name)
    if rois_num.type.precision != Precision.INT32:
        rois_num = cast_to(ctx, rois_num, Precision.INT32, ctx.temp(out_name, "rois_num_i32"))
    ends = ctx.temp(out_name, "rois_ends")  # [N]: one past each image's last roi
    ctx.add(T.CUM_SUM, [rois_num, ctx.const_i32(0), ctx.const_bool(False), ctx.const_bool(False)], [ends])
    shape = ctx.temp(out_name, "rois_shape")
    ctx.add(T.SHAPE, [rois, ctx.const_i32(int(Precision.INT32))], [shape])
    count = ctx.temp(out_name, "rois_count")
    ctx.add(T.SLICE, [shape, ctx.const_i32([0]), ctx.const_i32([0]), ctx.const_i32([1]), ctx.const_i32([1])], [count])
    positions = ctx.temp(out_name, "roi_positions")  # [R]: 0 .. R-1
    ctx.add(T.RANGE, [ctx.const_i32(0), count, ctx.const_i32(1)], [positions])
    column = ctx.temp(out_name, "roi_positions_column")
    ctx.add(T.UNSQUEEZE, [positions, ctx.const_i32([1])], [column])
    passed = ctx.temp(out_name, "images_passed")  # [R, N]: roi r lies at or after image n's end
    ctx.add(T.GREATER_EQUAL, [column, ends], [passed])
    passed_i32 = cast_to(ctx, passed, Precision.INT32, ctx.temp(out_name, "images_passed_i32"))
    indices = ctx.temp(out_name, "batch_indices")
    ctx.add(T.REDUCE_SUM, [passed_i32, ctx.const_i32([1]), ctx.const_bool(False)], [indices])
    return indices


@converter("roi_align", emits=[T.ROI_ALIGN, T.SLICE, T.FILL_LIKE, T.RESHAPE, T.CAST, T.CUM_SUM, T.SHAPE, T.RANGE,
                                T.UNSQUEEZE, T.GREATER_EQUAL, T.REDUCE_SUM], check=_check_roi_align)
def convert_roi_align(ctx, op):
    v = OpView(op)
    out_name = v.output("Out")
    x, rois = ctx.input(v.input("X")), ctx.input(v.input("ROIs"))
    operands = [
        x, rois, _batch_indices(ctx, op, rois, out_name),
        ctx.const_i32(v.attr_int("pooled_height", 1)), ctx.const_i32(v.attr_int("pooled_width", 1)),
        ctx.const_i32(v.attr_int("sampling_ratio", -1)), ctx.const_f32(v.attr_float("spatial_scale", 1.0)),
        ctx.const_bool(v.attr_bool("aligned", False)),
    ]
    ctx.add(T.ROI_ALIGN, operands, [ctx.output(out_name)])


# -- multiclass_nms3 ---------------------------------------------------------------------------------------------

@converter("multiclass_nms3", emits=[T.NON_MAX_SUPPRESSION, T.RESHAPE, T.CAST])
def convert_multiclass_nms3(ctx, op):
    """NON_MAX_SUPPRESSION (float32, in Paddle's float order). Paddle's kernel also takes double: float64 boxes and
    scores are suppressed in float32 (an overlap within float32 rounding of the threshold may decide otherwise)
    and the rows come back float64."""
    v = OpView(op)
    rois_num = v.optional_input("RoisNum")
    index_name = v.optional_output("Index")
    out_name = v.output("Out")
    index = ctx.temp(out_name, "index") if index_name else None
    boxes, scores = ctx.input(v.input("BBoxes")), ctx.input(v.input("Scores"))
    wide = boxes.type.precision == Precision.FLOAT64
    if wide:
        boxes = cast_to(ctx, boxes, Precision.FLOAT32, ctx.temp(out_name, "bboxes_f32"))
        scores = cast_to(ctx, scores, Precision.FLOAT32, ctx.temp(out_name, "scores_f32"))
    operands = [
        boxes, scores,
        ctx.input(rois_num) if rois_num else None,
        ctx.const_i32(v.attr_int("background_label", 0)), ctx.const_f32(v.attr_float("score_threshold", 0.0)),
        ctx.const_i32(v.attr_int("nms_top_k", -1)), ctx.const_f32(v.attr_float("nms_threshold", 0.3)),
        ctx.const_f32(v.attr_float("nms_eta", 1.0)), ctx.const_i32(v.attr_int("keep_top_k", -1)),
        ctx.const_bool(v.attr_bool("normalized", True)), ctx.const_bool(index is not None),
    ]
    counts_name = v.optional_output("NmsRoisNum")
    counts = ctx.output(counts_name) if counts_name else ctx.temp(out_name, "rois_num")
    rows = ctx.temp(out_name, "rows_f32") if wide else ctx.output(out_name)
    ctx.add(T.NON_MAX_SUPPRESSION, operands, [rows, counts] + ([index] if index is not None else []))
    if wide:
        cast_to(ctx, rows, Precision.FLOAT64, ctx.output(out_name))
    if index is not None:
        # Paddle's Index is a column [M, 1].
        ctx.add(T.RESHAPE, [index, ctx.const_i32([-1, 1])], [ctx.output(index_name)])


# -- deformable_conv -------------------------------------------------------------------------------------------

def _check_deformable_conv(op, ctx) -> Optional[str]:
    v = OpView(op)
    paddings = v.attr_ints("paddings", [0, 0])
    if explicit_pads(paddings) is None:
        return f"paddings {paddings} must hold 2 or 4 values"
    if len(v.attr_ints("strides", [1, 1])) != 2 or len(v.attr_ints("dilations", [1, 1])) != 2:
        return "strides and dilations must hold 2 values"
    return None


@converter("deformable_conv", "deformable_conv_v1", emits=[T.DEFORMABLE_CONV_2D], check=_check_deformable_conv)
def convert_deformable_conv(ctx, op):
    v = OpView(op)
    out_name = v.output("Output")
    filter_operand = ctx.input(v.input("Filter"))
    mask = v.optional_input("Mask") if v.type == "deformable_conv" else None
    # deformable_conv has no bias input (Paddle adds it with a separate op); the operand is required.
    bias = ctx.const(np.zeros(filter_operand.type.dims[0], dtype=np.float32), name=f"{out_name}/zero_bias")
    operands = [
        ctx.input(v.input("Input")), ctx.input(v.input("Offset")),
        ctx.input(mask) if mask else None, filter_operand, bias,
        ctx.const_i32(explicit_pads(v.attr_ints("paddings", [0, 0]))),
        ctx.const_i32(v.attr_ints("strides", [1, 1])),
        ctx.const_i32(int(v.attr("groups", 1) or 1)), ctx.const_i32(int(v.attr("deformable_groups", 1) or 1)),
        ctx.const_i32(v.attr_ints("dilations", [1, 1])), ctx.const_i32(int(FuseCode.FUSED_NONE)),
    ]
    ctx.add(T.DEFORMABLE_CONV_2D, operands, [ctx.output(out_name)])


# -- grid_sampler ------------------------------------------------------------------------------------------------

_GRID_MODES = {"bilinear": InterpolateMode.BILINEAR, "nearest": InterpolateMode.NEAREST}
_GRID_PADDING = {"zeros": PadMode.CONSTANT, "border": PadMode.EDGE, "reflection": PadMode.REFLECT}


def _check_grid_sampler(op, ctx) -> Optional[str]:
    v = OpView(op)
    mode, padding = v.attr_str("mode", "bilinear"), v.attr_str("padding_mode", "zeros")
    if mode not in _GRID_MODES:
        return f"mode '{mode}' is not bilinear or nearest"
    if padding not in _GRID_PADDING:
        return f"padding_mode '{padding}' is not zeros, border or reflection"
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) != 4:
        return f"only 4-D (2-D spatial) sampling is converted, X has rank {len(dims)}"
    return None


@converter("grid_sampler", emits=[T.GRID_SAMPLE], check=_check_grid_sampler)
def convert_grid_sampler(ctx, op):
    v = OpView(op)
    operands = [
        ctx.input(v.input("X")), ctx.input(v.input("Grid")),
        ctx.const_bool(v.attr_bool("align_corners", True)),
        ctx.const_i32(int(_GRID_MODES[v.attr_str("mode", "bilinear")])),
        ctx.const_i32(int(_GRID_PADDING[v.attr_str("padding_mode", "zeros")])),
    ]
    ctx.add(T.GRID_SAMPLE, operands, [ctx.output(v.output("Output"))])


# -- calib -----------------------------------------------------------------------------------------------------

def _check_calib(op, ctx) -> Optional[str]:
    v = OpView(op)
    if v.attr_float("scale", 1.0) <= 0:
        return f"scale {v.attr('scale')} must be positive"
    name = v.optional_input("Input")
    if name is not None and ctx.has(name):
        precision = ctx.input(name).type.precision
        if precision not in (Precision.FLOAT32, Precision.INT8, Precision.QUANT_INT8_SYMM_PER_LAYER):
            return f"calib converts float32 <-> int8, the input is {precision.name}"
    return None


@converter("calib", emits=[T.QUANTIZE, T.DEQUANTIZE, T.CAST, T.MUL], check=_check_calib)
def convert_calib(ctx, op):
    v = OpView(op)
    # Paddle Lite's calib: float -> int8 is round(x / scale); int8 -> float is q * scale.
    x = ctx.input(v.input("Input"))
    out_name = v.output("Out")
    scale = v.attr_float("scale", 1.0)
    if x.type.precision == Precision.FLOAT32:
        ctx.add(T.QUANTIZE, [x, ctx.const_i32(1), ctx.const_f32(scale), ctx.const_i32(0)], [ctx.output(out_name)])
    elif x.type.is_quantized:
        ctx.add(T.DEQUANTIZE, [x], [ctx.output(out_name)])
    else:
        # Plain int8 storage (no scale on the operand): widen, then scale.
        widened = cast_to(ctx, x, Precision.FLOAT32, ctx.temp(out_name, "float"))
        binary(ctx, T.MUL, widened, ctx.const_f32(scale), ctx.output(out_name))
