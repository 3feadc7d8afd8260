"""Converters for the sampling ops: roi_align (ROI_ALIGN, with the per-roi batch indices built from
RoisNum), deformable_conv / deformable_conv_v1 (DEFORMABLE_CONV_2D) and grid_sampler (GRID_SAMPLE).

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry) and the standard.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import input_dims
from converters.context import ConversionContext
from converters.emit import cast_to
from converters.layout import explicit_pads
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import FuseCode, InterpolateMode, PadMode, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T

# -- roi_align -----------------------------------------------------------------------------------------------

def _check_roi_align(op, ctx) -> str | None:
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
    # Counted in float32 (exact up to 2**24 images) and cast back: OpenVINO's CPU plugin declines an int32
    # REDUCE_SUM (it miscomputes integer reductions fused with what follows), which kept roi_align off the device.
    passed_f32 = cast_to(ctx, passed, Precision.FLOAT32, ctx.temp(out_name, "images_passed_f32"))
    counted = ctx.temp(out_name, "images_passed_count")
    ctx.add(T.REDUCE_SUM, [passed_f32, ctx.const_i32([1]), ctx.const_bool(False)], [counted])
    return cast_to(ctx, counted, Precision.INT32, ctx.temp(out_name, "batch_indices"))


@converter("roi_align", emits=[T.ROI_ALIGN, T.SLICE, T.FILL_LIKE, T.RESHAPE, T.CAST, T.CUM_SUM, T.SHAPE, T.RANGE,
                                T.UNSQUEEZE, T.GREATER_EQUAL, T.REDUCE_SUM], check=_check_roi_align)
def convert_roi_align(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    x, rois = ctx.input(v.input("X")), ctx.input(v.input("ROIs"))
    operands = [
        x, rois, _batch_indices(ctx, v.op, rois, out_name),
        ctx.const_i32(v.attr_int("pooled_height", 1)), ctx.const_i32(v.attr_int("pooled_width", 1)),
        ctx.const_i32(v.attr_int("sampling_ratio", -1)), ctx.const_f32(v.attr_float("spatial_scale", 1.0)),
        ctx.const_bool(v.attr_bool("aligned", False)),
    ]
    ctx.add(T.ROI_ALIGN, operands, [ctx.output(out_name)])


# -- deformable_conv -------------------------------------------------------------------------------------------

def _check_deformable_conv(op, ctx) -> str | None:
    v = OpView(op)
    paddings = v.attr_ints("paddings", [0, 0])
    if explicit_pads(paddings) is None:
        return f"paddings {paddings} must hold 2 or 4 values"
    if len(v.attr_ints("strides", [1, 1])) != 2 or len(v.attr_ints("dilations", [1, 1])) != 2:
        return "strides and dilations must hold 2 values"
    return None


@converter("deformable_conv", "deformable_conv_v1", emits=[T.DEFORMABLE_CONV_2D], check=_check_deformable_conv)
def convert_deformable_conv(ctx: ConversionContext, v: OpView) -> None:
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


def _check_grid_sampler(op, ctx) -> str | None:
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
def convert_grid_sampler(ctx: ConversionContext, v: OpView) -> None:
    operands = [
        ctx.input(v.input("X")), ctx.input(v.input("Grid")),
        ctx.const_bool(v.attr_bool("align_corners", True)),
        ctx.const_i32(int(_GRID_MODES[v.attr_str("mode", "bilinear")])),
        ctx.const_i32(int(_GRID_PADDING[v.attr_str("padding_mode", "zeros")])),
    ]
    ctx.add(T.GRID_SAMPLE, operands, [ctx.output(v.output("Output"))])
