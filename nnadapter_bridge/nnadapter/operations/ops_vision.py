"""Signatures and shape inference: quantization (QUANTIZE, DEQUANTIZE), sampling (DEFORMABLE_CONV_2D,
GRID_SAMPLE, ROI_ALIGN) and detection (PRIOR_BOX, NON_MAX_SUPPRESSION, YOLO_BOX).

Where the seed appendix is loose about a shape, the Paddle op the converter maps from decides:
DEFORMABLE_CONV_2D's offset/mask cover the output grid [H_out, W_out], GRID_SAMPLE's output takes the
grid's [H, W], ROI_ALIGN's output has one row per roi, and YOLO_BOX has the second output `scores`
of the older appendix. NON_MAX_SUPPRESSION follows `reference/operations_addendum.md`.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, OperationType as T, Precision
from nnadapter_bridge.nnadapter.operations.common import (
    const_array,
    const_bool,
    const_int,
    const_ints,
    known,
    normalize_axis,
    result_type,
)
from nnadapter_bridge.nnadapter.operations.registry import BOOL, F32, F32_Q8, INT32, Slot, operation
from nnadapter_bridge.nnadapter.types import OperandType

_QUANTIZE_OUTPUTS = frozenset({
    Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL,
    Precision.QUANT_UINT8_ASYMM_PER_LAYER,
})
_DEQUANTIZE_INPUTS = frozenset({
    Precision.QUANT_INT8_SYMM_PER_LAYER, Precision.QUANT_INT8_SYMM_PER_CHANNEL,
    Precision.QUANT_UINT8_ASYMM_PER_LAYER, Precision.QUANT_INT16_SYMM_PER_LAYER,
    Precision.QUANT_INT16_SYMM_PER_CHANNEL, Precision.QUANT_UINT16_ASYMM_PER_LAYER,
    Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL,
    Precision.QUANT_UINT32_ASYMM_PER_LAYER,
})
_FILTER = F32_Q8 | {Precision.QUANT_INT8_SYMM_PER_CHANNEL}
_BIAS = F32 | {Precision.QUANT_INT32_SYMM_PER_LAYER, Precision.QUANT_INT32_SYMM_PER_CHANNEL}
_F32_OR_INT32 = F32 | INT32


def _fail(op, message: str):
    raise OperationError(f"{op.type.name}: {message}")


# -- quantization ------------------------------------------------------------------------------------

def quantize_params(op) -> tuple:
    """(precision, scale, scales, channel_dim, zero_point) of QUANTIZE's output, from its constant
    axis/scale/zero_point operands: several scales make it per-channel along `axis`, a non-zero zero
    point makes it asymmetric uint8, otherwise symmetric int8."""
    scale = const_array(op, 2)
    zero_point = const_array(op, 3)
    if scale is None:
        _fail(op, "input 'scale' must be a constant (it becomes the output's quantization params)")
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    zero_point = np.zeros_like(scale) if zero_point is None else np.asarray(zero_point, np.float64).reshape(-1)
    if scale.size == 0 or not np.all(scale > 0):
        _fail(op, f"every scale must be > 0, got {scale.tolist()}")
    if zero_point.size != scale.size:
        _fail(op, f"zero_point has {zero_point.size} values but scale has {scale.size}; they must match")
    if np.any(zero_point != np.round(zero_point)):
        _fail(op, f"zero_point must hold integers, got {zero_point.tolist()}")
    if scale.size > 1:
        # axis only matters per channel (the spec: "only valid for per-channel quantization").
        rank = op.inputs[0].type.rank
        axis = normalize_axis(const_int(op, 1, 1), max(rank, 1), op)
        if np.any(zero_point != 0):
            _fail(op, "per-channel quantization is symmetric only: zero_point must be all 0")
        channels = op.inputs[0].type.dims[axis] if rank else 1
        if known(channels) and channels != scale.size:
            _fail(op, f"{scale.size} scales for axis {axis} of size {channels}")
        return Precision.QUANT_INT8_SYMM_PER_CHANNEL, None, tuple(scale.tolist()), axis, 0
    zp = int(zero_point[0])
    if zp != 0:
        if not 0 <= zp <= 255:
            _fail(op, f"an asymmetric uint8 zero_point must be in [0, 255], got {zp}")
        return Precision.QUANT_UINT8_ASYMM_PER_LAYER, float(scale[0]), None, 0, zp
    return Precision.QUANT_INT8_SYMM_PER_LAYER, float(scale[0]), None, 0, 0


@operation(T.QUANTIZE, inputs=[Slot("input", F32), Slot("axis", INT32, optional=True), Slot("scale", F32),
                               Slot("zero_point", _F32_OR_INT32, optional=True)],
           outputs=[Slot("output", _QUANTIZE_OUTPUTS)])
def prepare_quantize(op):
    """output = round(input / scale + zero_point), saturated; quantization params from the operands."""
    precision, scale, scales, channel_dim, zero_point = quantize_params(op)
    out = result_type(op.inputs[0].type, precision=precision)
    return [out.copy(scale=scale, scales=scales, channel_dim=channel_dim, zero_point=zero_point)]


@operation(T.DEQUANTIZE, inputs=[Slot("input", _DEQUANTIZE_INPUTS)], outputs=[Slot("output")])
def prepare_dequantize(op):
    """output = (input - zero_point) * scale as FLOAT32, same shape."""
    return [result_type(op.inputs[0].type, precision=Precision.FLOAT32)]


# -- sampling ----------------------------------------------------------------------------------------

def _conv_out(size: int, pad_total: int, kernel: int, stride: int, dilation: int) -> int:
    if not known(size) or not known(kernel):
        return UNKNOWN
    return (size + pad_total - (dilation * (kernel - 1) + 1)) // stride + 1


def deformable_conv_attrs(op) -> dict:
    """The constant attributes of DEFORMABLE_CONV_2D with their defaults."""
    pads = const_ints(op, 5) if op.inputs[5] is not None else [0, 0, 0, 0]
    strides = const_ints(op, 6) or [1, 1]
    dilations = const_ints(op, 9) or [1, 1]
    if pads is None or len(pads) != 4 or len(strides) != 2 or len(dilations) != 2:
        _fail(op, "pads must be a constant [4], strides and dilations constants [2]")
    return {"pads": pads, "strides": strides, "group": const_int(op, 7, 1),
            "deformable_group": const_int(op, 8, 1), "dilations": dilations}


@operation(T.DEFORMABLE_CONV_2D,
           inputs=[Slot("input", F32_Q8), Slot("offset", F32_Q8), Slot("mask", F32_Q8, optional=True),
                   Slot("filter", _FILTER), Slot("bias", _BIAS), Slot("pads", INT32, optional=True),
                   Slot("strides", INT32), Slot("group", INT32), Slot("deformable_group", INT32),
                   Slot("dilations", INT32), Slot("fuse_code", INT32)],
           outputs=[Slot("output")])
def prepare_deformable_conv_2d(op):
    """Convolution sampling the input at offset positions (v1), weighted by a mask (v2)."""
    x, offset, w = op.inputs[0].type, op.inputs[1].type, op.inputs[3].type
    if x.rank != 4 or w.rank != 4 or offset.rank != 4:
        _fail(op, f"input {x.describe()}, offset {offset.describe()} and filter {w.describe()} must be 4-D")
    a = deformable_conv_attrs(op)
    n, c_in, h, width = x.dims
    c_out, c_per_group, kh, kw = w.dims
    group, dgroup = a["group"], a["deformable_group"]
    if group < 1 or dgroup < 1:
        _fail(op, f"group {group} and deformable_group {dgroup} must be >= 1")
    if known(c_in) and known(c_per_group) and c_in != c_per_group * group:
        _fail(op, f"input has {c_in} channels, filter expects {c_per_group} x group {group}")
    if known(c_in) and c_in % dgroup:
        _fail(op, f"{c_in} input channels do not split into {dgroup} deformable groups")
    if known(offset.dims[1]) and known(kh) and known(kw) and offset.dims[1] != 2 * dgroup * kh * kw:
        _fail(op, f"offset has {offset.dims[1]} channels, expected 2 * {dgroup} * {kh} * {kw}")
    pads, strides, dilations = a["pads"], a["strides"], a["dilations"]
    h_out = _conv_out(h, pads[0] + pads[1], kh, strides[0], dilations[0])
    w_out = _conv_out(width, pads[2] + pads[3], kw, strides[1], dilations[1])
    out = result_type(x, (n, c_out, h_out, w_out))
    if x.dynamic_dims:
        dynamic = []
        for shape in x.dynamic_dims:
            dynamic.append((shape[0], c_out, _conv_out(shape[2], pads[0] + pads[1], kh, strides[0], dilations[0]),
                            _conv_out(shape[3], pads[2] + pads[3], kw, strides[1], dilations[1])))
        out = out.copy(dynamic_dims=tuple(dynamic))
    return [out]


@operation(T.GRID_SAMPLE, inputs=[Slot("input", F32_Q8), Slot("grid", F32), Slot("align_corners", BOOL),
                                  Slot("mode", INT32), Slot("pad_mode", INT32)],
           outputs=[Slot("output")])
def prepare_grid_sample(op):
    """Sample input [N, C, H, W] at the (x, y) points of grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]."""
    x, grid = op.inputs[0].type, op.inputs[1].type
    if x.rank != 4 or grid.rank != 4 or (known(grid.dims[3]) and grid.dims[3] != 2):
        _fail(op, f"input must be [N, C, H, W] and grid [N, H, W, 2]; got {x.describe()}, {grid.describe()}")
    n = x.dims[0] if known(x.dims[0]) else grid.dims[0]
    return [result_type(x, (n, x.dims[1], grid.dims[1], grid.dims[2]))]


@operation(T.ROI_ALIGN, inputs=[Slot("input", F32_Q8), Slot("rois", F32), Slot("batch_indices", INT32),
                                Slot("output_height", INT32), Slot("output_width", INT32),
                                Slot("sampling_ratio", INT32), Slot("spatial_scale", F32),
                                Slot("aligned", BOOL)],
           outputs=[Slot("output")])
def prepare_roi_align(op):
    """Bilinear average pooling of each roi into [output_height, output_width] -> [rois_num, C, oh, ow]."""
    x, rois = op.inputs[0].type, op.inputs[1].type
    if x.rank != 4 or rois.rank != 2 or (known(rois.dims[1]) and rois.dims[1] != 4):
        _fail(op, f"input must be [N, C, H, W] and rois [rois_num, 4]; got {x.describe()}, {rois.describe()}")
    oh, ow = const_int(op, 3, UNKNOWN), const_int(op, 4, UNKNOWN)
    return [result_type(x, (rois.dims[0], x.dims[1], oh, ow))]


# -- detection ---------------------------------------------------------------------------------------

def expand_aspect_ratios(aspect_ratios, flip: bool) -> list:
    """1.0 first, then each new ratio (and its reciprocal when flipping), skipping near-duplicates."""
    ratios = [1.0]
    for ar in np.asarray(aspect_ratios, dtype=np.float32).reshape(-1).tolist():
        if any(abs(ar - r) < 1e-6 for r in ratios):
            continue
        ratios.append(ar)
        if flip:
            ratios.append(1.0 / ar)
    return ratios


def prior_box_count(op):
    """Boxes per feature-map position, or None when an attribute is not constant."""
    min_sizes, aspect_ratios = const_array(op, 2), const_array(op, 4)
    max_sizes = np.zeros(0) if op.inputs[3] is None else const_array(op, 3)
    flip = const_bool(op, 6)
    if min_sizes is None or aspect_ratios is None or max_sizes is None or flip is None:
        return None
    n_min, n_max = np.asarray(min_sizes).size, np.asarray(max_sizes).size
    if n_max and n_max != n_min:
        _fail(op, f"max_sizes has {n_max} values, min_sizes {n_min}; they must match")
    return len(expand_aspect_ratios(aspect_ratios, flip)) * n_min + n_max


@operation(T.PRIOR_BOX, inputs=[Slot("input", F32), Slot("image", F32), Slot("min_sizes", F32),
                                Slot("max_sizes", F32, optional=True), Slot("aspect_ratios", F32),
                                Slot("variances", F32), Slot("flip", BOOL), Slot("clip", BOOL),
                                Slot("step_w", F32), Slot("step_h", F32), Slot("offset", F32),
                                Slot("min_max_aspect_ratios_order", BOOL)],
           outputs=[Slot("boxes"), Slot("variances")])
def prepare_prior_box(op):
    """SSD prior boxes and their variances, both [H, W, num_priors, 4]."""
    x = op.inputs[0].type
    if x.rank != 4 or op.inputs[1].type.rank != 4:
        _fail(op, "input and image must be [N, C, H, W]")
    variances = const_array(op, 5)
    if variances is not None and np.asarray(variances).size != 4:
        _fail(op, f"variances must hold 4 values, got {np.asarray(variances).size}")
    count = prior_box_count(op)
    dims = (x.dims[2], x.dims[3], UNKNOWN if count is None else count, 4)
    out = result_type(x, dims, precision=Precision.FLOAT32)
    return [out, out.copy()]


def nms_is_lod_form(op) -> bool:
    """True for the second input form: bboxes [M, C, 4], scores [M, C] (split by rois_num)."""
    return op.inputs[1].type.rank == 2


@operation(T.NON_MAX_SUPPRESSION,
           inputs=[Slot("bboxes", F32), Slot("scores", F32), Slot("rois_num", INT32, optional=True),
                   Slot("background_label", INT32), Slot("score_threshold", F32), Slot("nms_top_k", INT32),
                   Slot("nms_threshold", F32), Slot("nms_eta", F32), Slot("keep_top_k", INT32),
                   Slot("normalized", BOOL), Slot("return_index", BOOL)],
           outputs=[Slot("output"), Slot("out_rois_num"), Slot("index", optional=True)])
def prepare_non_max_suppression(op):
    """Paddle multiclass_nms3: rows [label, score, x1, y1, x2, y2], a data-dependent count."""
    boxes, scores = op.inputs[0].type, op.inputs[1].type
    if nms_is_lod_form(op):
        if boxes.rank != 3 or op.inputs[2] is None:
            _fail(op, "scores [M, C] needs bboxes [M, C, 4] and a rois_num operand")
        batch = op.inputs[2].type.dims[0]
    elif scores.rank == 3:
        if boxes.rank != 3:
            _fail(op, f"scores [N, C, M] needs bboxes [N, M, box_size], got {boxes.describe()}")
        batch = boxes.dims[0] if known(boxes.dims[0]) else scores.dims[0]
    else:
        _fail(op, f"scores must be [N, C, M] or [M, C], got {scores.describe()}")
    if known(boxes.dims[2]) and boxes.dims[2] not in (4, 8, 16, 24, 32):
        _fail(op, f"a box has 4, 8, 16, 24 or 32 coordinates, got {boxes.dims[2]}")
    output = result_type(boxes, (UNKNOWN, 6))
    counts = OperandType(precision=Precision.INT32, dims=(batch,))
    want_index = len(op.outputs) > 2 and op.outputs[2] is not None
    if const_bool(op, 10, False) and not want_index:
        _fail(op, "return_index is true but the 'index' output is null")
    index = OperandType(precision=Precision.INT32, dims=(UNKNOWN,)) if want_index else None
    return [output, counts, index][:len(op.outputs)]


@operation(T.YOLO_BOX, inputs=[Slot("input", F32), Slot("imgsize", INT32), Slot("anchors", INT32),
                               Slot("class_num", INT32), Slot("conf_thresh", F32),
                               Slot("downsample_ratio", INT32), Slot("clip_bbox", BOOL),
                               Slot("scale_x_y", F32), Slot("iou_aware", BOOL),
                               Slot("iou_aware_factor", F32)],
           outputs=[Slot("boxes"), Slot("scores", optional=True)])
def prepare_yolo_box(op):
    """YOLOv3 head decoding: boxes [N, M, 4] and scores [N, M, class_num], M = anchors * H * W."""
    x = op.inputs[0].type
    if x.rank != 4:
        _fail(op, f"input must be [N, C, H, W], got {x.describe()}")
    anchors = const_ints(op, 2)
    class_num = const_int(op, 3, UNKNOWN)
    if anchors is not None and (not anchors or len(anchors) % 2):
        _fail(op, f"anchors must hold (width, height) pairs, got {anchors}")
    n_anchors = UNKNOWN if anchors is None else len(anchors) // 2
    iou_aware = const_bool(op, 8, False)
    if known(n_anchors) and known(class_num) and known(x.dims[1]):
        expected = n_anchors * (5 + class_num) + (n_anchors if iou_aware else 0)
        if x.dims[1] != expected:
            _fail(op, f"input has {x.dims[1]} channels; {n_anchors} anchors and {class_num} classes "
                      f"need {expected}")
    h, w = x.dims[2], x.dims[3]
    m = n_anchors * h * w if known(n_anchors) and known(h) and known(w) else UNKNOWN
    boxes = result_type(x, (x.dims[0], m, 4))
    scores = result_type(x, (x.dims[0], m, class_num)) if len(op.outputs) > 1 and op.outputs[1] is not None else None
    return [boxes, scores][:len(op.outputs)]
