"""Converters for the detection ops: prior_box (PRIOR_BOX), yolo_box (YOLO_BOX) and multiclass_nms3
(NON_MAX_SUPPRESSION).

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry) and the standard.
"""
from __future__ import annotations

from converters.context import ConversionContext
from converters.emit import cast_to
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision

# -- prior_box -----------------------------------------------------------------------------------------------


@converter("prior_box", emits=[T.PRIOR_BOX])
def convert_prior_box(ctx: ConversionContext, v: OpView) -> None:
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
def convert_yolo_box(ctx: ConversionContext, v: OpView) -> None:
    operands = [
        ctx.input(v.input("X")), ctx.input(v.input("ImgSize")),
        ctx.const_i32(v.attr_ints("anchors", [])), ctx.const_i32(v.attr_int("class_num", 1)),
        ctx.const_f32(v.attr_float("conf_thresh", 0.01)), ctx.const_i32(v.attr_int("downsample_ratio", 32)),
        ctx.const_bool(v.attr_bool("clip_bbox", True)), ctx.const_f32(v.attr_float("scale_x_y", 1.0)),
        ctx.const_bool(v.attr_bool("iou_aware", False)), ctx.const_f32(v.attr_float("iou_aware_factor", 0.5)),
    ]
    scores = v.optional_output("Scores")
    ctx.add(T.YOLO_BOX, operands, [ctx.output(v.output("Boxes")), ctx.output(scores) if scores else None])


# -- multiclass_nms3 ---------------------------------------------------------------------------------------------

@converter("multiclass_nms3", emits=[T.NON_MAX_SUPPRESSION, T.RESHAPE, T.CAST])
def convert_multiclass_nms3(ctx: ConversionContext, v: OpView) -> None:
    """NON_MAX_SUPPRESSION (float32, in Paddle's float order). Paddle's kernel also takes double: float64 boxes and
    scores are suppressed in float32 (an overlap within float32 rounding of the threshold may decide otherwise)
    and the rows come back float64."""
    rois_num = v.optional_input("RoisNum")
    index_name = v.optional_output("Index")
    out_name = v.output("Out")
    index = ctx.temp(out_name, "index") if index_name else None
    boxes, scores = ctx.input(v.input("BBoxes")), ctx.input(v.input("Scores"))
    wide = boxes.type.precision == Precision.FLOAT64
    if wide:
        boxes = cast_to(ctx, boxes, Precision.FLOAT32, ctx.temp(out_name, "bboxes_f32"))
        scores = cast_to(ctx, scores, Precision.FLOAT32, ctx.temp(out_name, "scores_f32"))
    counts_in = ctx.input(rois_num) if rois_num else None
    if counts_in is not None and counts_in.type.precision == Precision.INT64:
        # Paddle's kernel takes int64 counts too (to_static's per-image counts come from int64 shapes: ppdet's
        # R-CNN); NON_MAX_SUPPRESSION takes int32.
        counts_in = cast_to(ctx, counts_in, Precision.INT32, ctx.temp(out_name, "rois_num_i32"))
    operands = [
        boxes, scores, counts_in,
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
    if index is not None and index_name is not None:
        # Paddle's Index is a column [M, 1].
        ctx.add(T.RESHAPE, [index, ctx.const_i32([-1, 1])], [ctx.output(index_name)])
