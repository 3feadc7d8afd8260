"""Reference semantics (numpy) of QUANTIZE, DEQUANTIZE, DEFORMABLE_CONV_2D, GRID_SAMPLE, ROI_ALIGN, PRIOR_BOX,
NON_MAX_SUPPRESSION and YOLO_BOX.

The sampling references follow the coordinate conventions of the Paddle ops the converters map from
(deformable_conv, grid_sampler, roi_align), and the detection references those of prior_box, yolo_box and
multiclass_nms3, so a converted model reproduces Paddle's numbers.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import InterpolateMode, OperationType as T, PadMode
from nnadapter_bridge.nnadapter.operations.ops_vision import (
    deformable_conv_attrs,
    expand_aspect_ratios,
    nms_is_lod_form,
)
from nnadapter_bridge.nnadapter.operations.reference_elementwise import apply_fuse_code
from nnadapter_bridge.nnadapter.operations.registry import dequantize, quantize, reference


def _scalar(array, cast=float):
    return cast(np.asarray(array).reshape(-1)[0])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# -- quantization ------------------------------------------------------------------------------------

@reference(T.QUANTIZE, raw_quant=True)
def quantize_reference(op, inputs):
    # The output type carries the params prepare derived from scale/zero_point; the shared helper
    # rounds half to even (as ONNX QuantizeLinear, which the other drivers lower to) and saturates.
    x = np.asarray(inputs[0], dtype=np.float32)
    return [quantize(x, op.outputs[0].type)]


@reference(T.DEQUANTIZE, raw_quant=True)
def dequantize_reference(op, inputs):
    return [dequantize(inputs[0], op.inputs[0].type).astype(np.float32, copy=False)]


# -- bilinear sampling shared by DEFORMABLE_CONV_2D and GRID_SAMPLE -----------------------------------

def bilinear_zero_padded(image: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Sample image [B, C, H, W] at float pixel points y, x of shape [B, P] -> [B, C, P].

    Each of the four neighbours that falls outside the image contributes zero (the convention of
    deformable convolution and of grid_sample's 'zeros' padding)."""
    b, c, h, w = image.shape
    y0 = np.floor(y)
    x0 = np.floor(x)
    ly, lx = y - y0, x - x0
    y0 = y0.astype(np.int64)
    x0 = x0.astype(np.int64)
    batch = np.arange(b)[:, None]
    flat = image.reshape(b, c, h * w)
    out = np.zeros((b, c) + y.shape[1:], dtype=np.float64)
    for dy, wy in ((0, 1.0 - ly), (1, ly)):
        for dx, wx in ((0, 1.0 - lx), (1, lx)):
            yi, xi = y0 + dy, x0 + dx
            inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
            index = np.where(inside, np.clip(yi, 0, h - 1) * w + np.clip(xi, 0, w - 1), 0)
            # gather [B, P, C] then move channels forward
            values = np.moveaxis(flat[batch, :, index], -1, 1)
            out += values * (wy * wx * inside)[:, None]
    return out


def nearest_zero_padded(image: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Nearest neighbour (round half to even, as nearbyint) of image [B, C, H, W] at y, x [B, P]."""
    b, c, h, w = image.shape
    yi = np.rint(y).astype(np.int64)
    xi = np.rint(x).astype(np.int64)
    inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
    index = np.where(inside, np.clip(yi, 0, h - 1) * w + np.clip(xi, 0, w - 1), 0)
    values = np.moveaxis(image.reshape(b, c, h * w)[np.arange(b)[:, None], :, index], -1, 1)
    return values * inside[:, None]


# -- DEFORMABLE_CONV_2D ------------------------------------------------------------------------------

@reference(T.DEFORMABLE_CONV_2D)
def deformable_conv_2d(op, inputs):
    x, offset, mask, weight, bias, _pads, _strides, _group, _dgroup, _dilations, fuse = inputs
    a = deformable_conv_attrs(op)
    pad_top, _, pad_left, _ = a["pads"]
    stride_h, stride_w = a["strides"]
    dil_h, dil_w = a["dilations"]
    group, dgroup = a["group"], a["deformable_group"]
    n, c_in, h, w = x.shape
    c_out, c_per_group, kh, kw = weight.shape
    h_out, w_out = offset.shape[2], offset.shape[3]
    k = kh * kw
    # Regular sampling grid of every output position and kernel tap, [K, Ho, Wo].
    tap_y = (np.arange(kh) * dil_h).repeat(kw)[:, None, None]
    tap_x = np.tile(np.arange(kw) * dil_w, kh)[:, None, None]
    base_y = tap_y + (np.arange(h_out) * stride_h - pad_top)[None, :, None]
    base_x = tap_x + (np.arange(w_out) * stride_w - pad_left)[None, None, :]
    # Paddle's offset layout: per deformable group, per tap, (dy, dx).
    offset = offset.reshape(n, dgroup, k, 2, h_out, w_out).astype(np.float64)
    sample_y = (base_y + offset[:, :, :, 0]).reshape(n * dgroup, -1)
    sample_x = (base_x + offset[:, :, :, 1]).reshape(n * dgroup, -1)
    images = x.reshape(n * dgroup, c_in // dgroup, h, w).astype(np.float64)
    columns = bilinear_zero_padded(images, sample_y, sample_x)  # [N*dg, C/dg, K*Ho*Wo]
    columns = columns.reshape(n, dgroup, c_in // dgroup, k, h_out * w_out)
    if mask is not None:
        columns = columns * mask.reshape(n, dgroup, 1, k, h_out * w_out)
    # im2col layout [N, group, C/group * K, Ho*Wo] against filters [group, Cout/group, C/group * K].
    columns = columns.reshape(n, group, c_per_group * k, h_out * w_out)
    filters = weight.reshape(group, c_out // group, c_per_group * k).astype(np.float64)
    out = np.einsum("gok,ngkp->ngop", filters, columns).reshape(n, c_out, h_out, w_out)
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float64).reshape(1, -1, 1, 1)
    return [apply_fuse_code(out.astype(np.float32), fuse)]


# -- GRID_SAMPLE -------------------------------------------------------------------------------------

def _reflect(coord: np.ndarray, low: float, high: float) -> np.ndarray:
    """Fold coordinates into [low, high] by mirroring at both ends (any number of times)."""
    span = high - low
    if span <= 0:
        return np.zeros_like(coord)
    distance = np.abs(coord - low)
    flips = np.floor(distance / span)
    rest = distance - flips * span
    return np.where(flips % 2 == 0, low + rest, high - rest)


def _grid_to_pixels(coord: np.ndarray, size: int, align_corners: bool, pad_mode: PadMode) -> np.ndarray:
    """Map normalized [-1, 1] grid coordinates to pixel coordinates, then apply border/reflection."""
    # float32 in Paddle's operation order: 'nearest' must round near-ties the way Paddle does.
    coord = coord.astype(np.float32)
    one, half = np.float32(1.0), np.float32(0.5)
    if align_corners:
        pixels = (coord + one) * np.float32((size - 1) * 0.5)
    else:
        pixels = (coord + one) * np.float32(size * 0.5) - half
    pixels = pixels.astype(np.float64)
    if pad_mode in (PadMode.REPLICATE, PadMode.EDGE):
        pixels = np.clip(pixels, 0, size - 1)
    elif pad_mode == PadMode.REFLECT:
        if align_corners:
            pixels = _reflect(pixels, 0.0, size - 1.0)
        else:
            pixels = _reflect(pixels, -0.5, size - 0.5)
        pixels = np.clip(pixels, 0, size - 1)
    return pixels


@reference(T.GRID_SAMPLE)
def grid_sample(op, inputs):
    x, grid, align_corners, mode, pad_mode = inputs
    align_corners = _scalar(align_corners, bool)
    # NONE falls back to the spec's defaults: bilinear sampling, zeros outside.
    mode = InterpolateMode(_scalar(mode, int))
    pad_mode = PadMode(_scalar(pad_mode, int))
    n, c, h, w = x.shape
    _, h_out, w_out, _ = grid.shape
    px = _grid_to_pixels(grid[..., 0].reshape(n, -1), w, align_corners, pad_mode)
    py = _grid_to_pixels(grid[..., 1].reshape(n, -1), h, align_corners, pad_mode)
    image = x.astype(np.float64)
    if mode == InterpolateMode.NEAREST:
        out = nearest_zero_padded(image, py, px)
    else:
        out = bilinear_zero_padded(image, py, px)
    return [out.reshape(n, c, h_out, w_out).astype(np.float32)]


# -- ROI_ALIGN ---------------------------------------------------------------------------------------

def _roi_axis_weights(start, bin_size, grid, pooled: int, size: int) -> np.ndarray:
    """Interpolation matrix [R, pooled, size] along one axis: row p averages over the grid samples
    of bin p the two-tap weights of roi_align's bilinear rule (zero beyond [-1, size], clamped
    to the last pixel), divided by the sample count of this axis."""
    r = start.shape[0]
    most = int(grid.max()) if r else 1
    sample = np.arange(most)
    used = sample[None, :] < grid[:, None]  # [R, G]
    points = (start[:, None, None] + np.arange(pooled)[None, :, None] * bin_size[:, None, None]
              + (sample[None, None, :] + 0.5) * (bin_size / grid)[:, None, None])  # [R, P, G]
    valid = (points >= -1.0) & (points <= size) & used[:, None, :]
    points = np.maximum(points, 0.0)
    low = np.floor(points).astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    points = np.where(at_end, low.astype(np.float64), points)
    frac = points - low
    weights = np.zeros((r, pooled, size), dtype=np.float64)
    rows = np.broadcast_to(np.arange(r)[:, None, None], low.shape)
    cols = np.broadcast_to(np.arange(pooled)[None, :, None], low.shape)
    np.add.at(weights, (rows, cols, low), np.where(valid, 1.0 - frac, 0.0))
    np.add.at(weights, (rows, cols, high), np.where(valid, frac, 0.0))
    return weights / grid[:, None, None]


@reference(T.ROI_ALIGN)
def roi_align(op, inputs):
    x, rois, batch_indices, out_h, out_w, sampling_ratio, spatial_scale, aligned = inputs
    out_h, out_w = _scalar(out_h, int), _scalar(out_w, int)
    sampling_ratio = _scalar(sampling_ratio, int)
    spatial_scale = _scalar(spatial_scale)
    aligned = _scalar(aligned, bool)
    n, c, h, w = x.shape
    batch_indices = np.asarray(batch_indices, dtype=np.int64).reshape(-1)
    if batch_indices.size and (batch_indices.min() < 0 or batch_indices.max() >= n):
        raise OperationError(f"{op.label()}: batch_indices {batch_indices.tolist()} outside [0, {n})")
    boxes = rois.astype(np.float64) * spatial_scale - (0.5 if aligned else 0.0)
    width = boxes[:, 2] - boxes[:, 0]
    height = boxes[:, 3] - boxes[:, 1]
    if not aligned:
        width = np.maximum(width, 1.0)
        height = np.maximum(height, 1.0)
    bin_h, bin_w = height / out_h, width / out_w
    if sampling_ratio > 0:
        grid_h = np.full(len(boxes), sampling_ratio)
        grid_w = np.full(len(boxes), sampling_ratio)
    else:
        grid_h = np.ceil(height / out_h).astype(np.int64)
        grid_w = np.ceil(width / out_w).astype(np.int64)
    # roi_align divides by max(grid_h * grid_w, 1); a zero-sized grid samples nothing.
    grid_h = np.maximum(grid_h, 0)
    grid_w = np.maximum(grid_w, 0)
    wy = _roi_axis_weights(boxes[:, 1], bin_h, np.maximum(grid_h, 1), out_h, h) * (grid_h > 0)[:, None, None]
    wx = _roi_axis_weights(boxes[:, 0], bin_w, np.maximum(grid_w, 1), out_w, w) * (grid_w > 0)[:, None, None]
    # The bilinear weights factor into rows and columns: out = Wy @ image @ Wx^T per roi.
    features = x.astype(np.float64)[batch_indices]  # [R, C, H, W]
    out = np.einsum("rph,rchw,rqw->rcpq", wy, features, wx, optimize=True)
    return [out.astype(np.float32)]


# -- PRIOR_BOX ---------------------------------------------------------------------------------------

@reference(T.PRIOR_BOX)
def prior_box(op, inputs):
    (feature, image, min_sizes, max_sizes, aspect_ratios, variances, flip, clip, step_w, step_h,
     offset, min_max_order) = inputs
    min_sizes = np.asarray(min_sizes, dtype=np.float32).reshape(-1)
    max_sizes = np.zeros(0, np.float32) if max_sizes is None else np.asarray(max_sizes, np.float32).reshape(-1)
    ratios = np.asarray(expand_aspect_ratios(aspect_ratios, _scalar(flip, bool)), dtype=np.float32)
    feature_h, feature_w = feature.shape[2], feature.shape[3]
    image_h, image_w = image.shape[2], image.shape[3]
    step_w, step_h, offset = _scalar(step_w), _scalar(step_h), _scalar(offset)
    # Paddle recomputes both steps from the image/feature ratio when either one is 0.
    if step_w == 0 or step_h == 0:
        step_w, step_h = image_w / feature_w, image_h / feature_h
    # Half widths/heights of every prior of one position, in output order.
    half_sizes = []
    for s, min_size in enumerate(min_sizes.tolist()):
        ratio_boxes = [(min_size * np.sqrt(r) / 2, min_size / np.sqrt(r) / 2) for r in ratios.tolist()]
        max_box = [(np.sqrt(min_size * max_sizes[s]) / 2,) * 2] if max_sizes.size else []
        if _scalar(min_max_order, bool):
            # Caffe order: the square min box, the max box, then the non-square ratios.
            rest = [b for r, b in zip(ratios.tolist(), ratio_boxes) if abs(r - 1.0) >= 1e-6]
            half_sizes += [(min_size / 2, min_size / 2)] + max_box + rest
        else:
            half_sizes += ratio_boxes + max_box
    half = np.asarray(half_sizes, dtype=np.float32)  # [P, 2]
    center_x = ((np.arange(feature_w, dtype=np.float32) + offset) * step_w)[None, :, None]
    center_y = ((np.arange(feature_h, dtype=np.float32) + offset) * step_h)[:, None, None]
    half_w, half_h = half[None, None, :, 0], half[None, None, :, 1]
    boxes = np.stack(np.broadcast_arrays((center_x - half_w) / image_w, (center_y - half_h) / image_h,
                                         (center_x + half_w) / image_w, (center_y + half_h) / image_h), -1)
    boxes = boxes.astype(np.float32)
    if _scalar(clip, bool):
        boxes = np.clip(boxes, 0.0, 1.0)
    variance = np.broadcast_to(np.asarray(variances, np.float32).reshape(1, 1, 1, 4), boxes.shape).copy()
    return [boxes, variance]


# -- NON_MAX_SUPPRESSION -----------------------------------------------------------------------------

def _iou_one_to_many(box: np.ndarray, others: np.ndarray, normalized: bool) -> np.ndarray:
    """Jaccard overlap of one [4] box with [K, 4] boxes; pixel boxes (not normalized) count +1."""
    extra = 0.0 if normalized else 1.0

    def area(b):
        w = b[..., 2] - b[..., 0] + extra
        h = b[..., 3] - b[..., 1] + extra
        # A degenerate box (x2 < x1 or y2 < y1) has no area.
        return np.where((b[..., 2] < b[..., 0]) | (b[..., 3] < b[..., 1]), 0.0, w * h)

    ix1 = np.maximum(box[0], others[:, 0])
    iy1 = np.maximum(box[1], others[:, 1])
    ix2 = np.minimum(box[2], others[:, 2])
    iy2 = np.minimum(box[3], others[:, 3])
    disjoint = (others[:, 0] > box[2]) | (others[:, 2] < box[0]) | (others[:, 1] > box[3]) | (others[:, 3] < box[1])
    inter = (ix2 - ix1 + extra) * (iy2 - iy1 + extra)
    inter = np.where(disjoint, 0.0, inter)
    union = area(box) + area(others) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(disjoint | (union <= 0), 0.0, inter / union)


def nms_one_class(boxes: np.ndarray, scores: np.ndarray, score_threshold: float, top_k: int,
                  nms_threshold: float, eta: float, normalized: bool) -> list:
    """Greedy NMS of one class; returns the kept box indices in selection (score) order."""
    candidates = np.flatnonzero(scores > score_threshold)
    # Stable descending sort: equal scores keep their box order.
    candidates = candidates[np.argsort(-scores[candidates], kind="stable")]
    if top_k > -1:
        candidates = candidates[:top_k]
    kept: list = []
    threshold = nms_threshold
    for idx in candidates.tolist():
        if kept:
            overlap = _iou_one_to_many(boxes[idx], boxes[kept], normalized)
            if np.any(overlap > threshold):
                continue
        kept.append(idx)
        # Adaptive NMS: tighten the threshold after each kept box.
        if eta < 1.0 and threshold > 0.5:
            threshold *= eta
    return kept


def _nms_image(boxes_of_class, scores: np.ndarray, attrs: dict, lod_form: bool) -> list:
    """multiclass NMS of one image; scores [C, M]. Returns (label, box index, score) in output order."""
    per_class = {}
    for c in range(scores.shape[0]):
        if c == attrs["background"]:
            continue
        kept = nms_one_class(boxes_of_class(c), scores[c], attrs["score_threshold"], attrs["nms_top_k"],
                             attrs["nms_threshold"], attrs["eta"], attrs["normalized"])
        if kept:
            per_class[c] = kept
    total = sum(len(v) for v in per_class.values())
    keep_top_k = attrs["keep_top_k"]
    if keep_top_k > -1 and total > keep_top_k:
        pairs = [(scores[c, i], c, i) for c in sorted(per_class) for i in per_class[c]]
        order = np.argsort(-np.asarray([p[0] for p in pairs]), kind="stable")[:keep_top_k]
        per_class = {}
        for j in order.tolist():
            per_class.setdefault(pairs[j][1], []).append(pairs[j][2])
    rows = []
    for c in sorted(per_class):
        # Paddle lists the second (LoD) form's survivors of a class by box index, the first by score.
        indices = sorted(per_class[c]) if lod_form else per_class[c]
        rows += [(c, i, scores[c, i]) for i in indices]
    return rows


def _nms_supports(op) -> bool:
    # Polygon boxes (8..32 coordinates) need polygon clipping, which this reference does not do.
    return op.inputs[0].type.dims[-1] == 4


@reference(T.NON_MAX_SUPPRESSION, supports=_nms_supports)
def non_max_suppression(op, inputs):
    bboxes, scores, rois_num = inputs[0], inputs[1], inputs[2]
    attrs = {"background": _scalar(inputs[3], int), "score_threshold": _scalar(inputs[4]),
             "nms_top_k": _scalar(inputs[5], int), "nms_threshold": _scalar(inputs[6]),
             "eta": _scalar(inputs[7]), "keep_top_k": _scalar(inputs[8], int),
             "normalized": _scalar(inputs[9], bool)}
    if bboxes.shape[-1] != 4:
        raise OperationError(f"{op.label()}: the reference handles 4-coordinate boxes only, got {bboxes.shape[-1]}")
    bboxes = bboxes.astype(np.float64)
    scores64 = scores.astype(np.float64)
    lod_form = nms_is_lod_form(op)
    out_rows, out_index, counts = [], [], []
    if lod_form:
        starts = np.concatenate([[0], np.cumsum(np.asarray(rois_num, np.int64).reshape(-1))])
        n_classes = scores.shape[1]
        for b in range(len(starts) - 1):
            lo, hi = int(starts[b]), int(starts[b + 1])
            image_boxes = bboxes[lo:hi]  # [M_b, C, 4]
            rows = _nms_image(lambda c: image_boxes[:, c], scores64[lo:hi].T, attrs, True) if hi > lo else []
            counts.append(len(rows))
            for c, i, _ in rows:
                out_rows.append([c, scores[lo + i, c], *bboxes[lo + i, c]])
                out_index.append((lo + i) * n_classes + c)
    else:
        n_boxes = bboxes.shape[1]
        for b in range(bboxes.shape[0]):
            image_boxes = bboxes[b]
            rows = _nms_image(lambda c: image_boxes, scores64[b], attrs, False)
            counts.append(len(rows))
            for c, i, _ in rows:
                out_rows.append([c, scores[b, c, i], *bboxes[b, i]])
                out_index.append(b * n_boxes + i)
    output = np.asarray(out_rows, dtype=np.float32).reshape(-1, 6)
    results = [output, np.asarray(counts, dtype=np.int32)]
    if len(op.outputs) > 2:
        results.append(np.asarray(out_index, dtype=np.int32) if op.outputs[2] is not None else None)
    return results


# -- YOLO_BOX ----------------------------------------------------------------------------------------

@reference(T.YOLO_BOX)
def yolo_box(op, inputs):
    x, imgsize, anchors, class_num, conf_thresh, downsample, clip_bbox, scale_x_y, iou_aware, iou_factor = inputs
    anchors = np.asarray(anchors, dtype=np.float64).reshape(-1, 2)
    class_num = _scalar(class_num, int)
    conf_thresh = _scalar(conf_thresh)
    downsample = _scalar(downsample, int)
    scale = _scalar(scale_x_y)
    bias = -0.5 * (scale - 1.0)
    n, _, h, w = x.shape
    a = anchors.shape[0]
    x = x.astype(np.float64)
    if _scalar(iou_aware, bool):
        iou = _sigmoid(x[:, :a])  # [N, A, H, W]
        x = x[:, a:]
    else:
        iou = None
    pred = x.reshape(n, a, 5 + class_num, h, w)
    conf = _sigmoid(pred[:, :, 4])
    if iou is not None:
        factor = _scalar(iou_factor)
        conf = conf ** (1.0 - factor) * iou ** factor
    img_h = imgsize[:, 0].astype(np.float64)[:, None, None, None]
    img_w = imgsize[:, 1].astype(np.float64)[:, None, None, None]
    grid_x = np.arange(w)[None, None, None, :]
    grid_y = np.arange(h)[None, None, :, None]
    center_x = (grid_x + _sigmoid(pred[:, :, 0]) * scale + bias) * img_w / w
    center_y = (grid_y + _sigmoid(pred[:, :, 1]) * scale + bias) * img_h / h
    box_w = np.exp(pred[:, :, 2]) * anchors[None, :, 0, None, None] * img_w / (downsample * w)
    box_h = np.exp(pred[:, :, 3]) * anchors[None, :, 1, None, None] * img_h / (downsample * h)
    boxes = np.stack([center_x - box_w / 2, center_y - box_h / 2, center_x + box_w / 2, center_y + box_h / 2], -1)
    if _scalar(clip_bbox, bool):
        boxes[..., 0] = np.maximum(boxes[..., 0], 0)
        boxes[..., 1] = np.maximum(boxes[..., 1], 0)
        boxes[..., 2] = np.minimum(boxes[..., 2], img_w - 1)
        boxes[..., 3] = np.minimum(boxes[..., 3], img_h - 1)
    # Boxes under the confidence threshold stay all zero, as do their scores.
    keep = (conf >= conf_thresh)
    boxes = boxes * keep[..., None]
    scores = _sigmoid(pred[:, :, 5:]) * (conf * keep)[:, :, None]  # [N, A, K, H, W]
    boxes = boxes.reshape(n, a * h * w, 4).astype(np.float32)
    scores = np.moveaxis(scores, 2, -1).reshape(n, a * h * w, class_num).astype(np.float32)
    outputs = [boxes]
    if len(op.outputs) > 1:
        outputs.append(scores if op.outputs[1] is not None else None)
    return outputs
