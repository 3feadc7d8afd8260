"""The detection operations PRIOR_BOX, NON_MAX_SUPPRESSION and YOLO_BOX: signatures, shape inference and
numpy references.

YOLO_BOX has the second output `scores` of the older spec appendix; NON_MAX_SUPPRESSION follows
`reference/operations_addendum.md`. The references follow Paddle's prior_box, yolo_box and multiclass_nms3,
so a converted model reproduces Paddle's numbers.
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
    operation_error,
    param_bool,
    param_float,
    param_int,
    result_type,
)
from nnadapter_bridge.nnadapter.operations.registry import BOOL, F32, INT32, Slot, operation, reference
from nnadapter_bridge.nnadapter.types import OperandType


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# -- signatures and shape inference ------------------------------------------------------------------

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
        raise operation_error(op, f"max_sizes has {n_max} values, min_sizes {n_min}; they must match")
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
        raise operation_error(op, "input and image must be [N, C, H, W]")
    variances = const_array(op, 5)
    if variances is not None and np.asarray(variances).size != 4:
        raise operation_error(op, f"variances must hold 4 values, got {np.asarray(variances).size}")
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
            raise operation_error(op, "scores [M, C] needs bboxes [M, C, 4] and a rois_num operand")
        batch = op.inputs[2].type.dims[0]
    elif scores.rank == 3:
        if boxes.rank != 3:
            raise operation_error(op, f"scores [N, C, M] needs bboxes [N, M, box_size], got {boxes.describe()}")
        batch = boxes.dims[0] if known(boxes.dims[0]) else scores.dims[0]
    else:
        raise operation_error(op, f"scores must be [N, C, M] or [M, C], got {scores.describe()}")
    if known(boxes.dims[2]) and boxes.dims[2] not in (4, 8, 16, 24, 32):
        raise operation_error(op, f"a box has 4, 8, 16, 24 or 32 coordinates, got {boxes.dims[2]}")
    output = result_type(boxes, (UNKNOWN, 6))
    counts = OperandType(precision=Precision.INT32, dims=(batch,))
    want_index = len(op.outputs) > 2 and op.outputs[2] is not None
    if const_bool(op, 10, False) and not want_index:
        raise operation_error(op, "return_index is true but the 'index' output is null")
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
        raise operation_error(op, f"input must be [N, C, H, W], got {x.describe()}")
    anchors = const_ints(op, 2)
    class_num = const_int(op, 3, UNKNOWN)
    if anchors is not None and (not anchors or len(anchors) % 2):
        raise operation_error(op, f"anchors must hold (width, height) pairs, got {anchors}")
    n_anchors = UNKNOWN if anchors is None else len(anchors) // 2
    iou_aware = const_bool(op, 8, False)
    if known(n_anchors) and known(class_num) and known(x.dims[1]):
        expected = n_anchors * (5 + class_num) + (n_anchors if iou_aware else 0)
        if x.dims[1] != expected:
            raise operation_error(op, f"input has {x.dims[1]} channels; {n_anchors} anchors and {class_num} classes "
                                  f"need {expected}")
    h, w = x.dims[2], x.dims[3]
    m = n_anchors * h * w if known(n_anchors) and known(h) and known(w) else UNKNOWN
    boxes = result_type(x, (x.dims[0], m, 4))
    scores = result_type(x, (x.dims[0], m, class_num)) if len(op.outputs) > 1 and op.outputs[1] is not None else None
    return [boxes, scores][:len(op.outputs)]


# -- PRIOR_BOX ---------------------------------------------------------------------------------------

@reference(T.PRIOR_BOX)
def prior_box(op, inputs):
    (feature, image, min_sizes, max_sizes, aspect_ratios, variances, flip, clip, step_w, step_h,
     offset, min_max_order) = inputs
    min_sizes = np.asarray(min_sizes, dtype=np.float32).reshape(-1)
    max_sizes = np.zeros(0, np.float32) if max_sizes is None else np.asarray(max_sizes, np.float32).reshape(-1)
    ratios = np.asarray(expand_aspect_ratios(aspect_ratios, param_bool(flip)), dtype=np.float32)
    feature_h, feature_w = feature.shape[2], feature.shape[3]
    image_h, image_w = image.shape[2], image.shape[3]
    step_w, step_h, offset = param_float(step_w), param_float(step_h), param_float(offset)
    # Paddle recomputes both steps from the image/feature ratio when either one is 0.
    if step_w == 0 or step_h == 0:
        step_w, step_h = image_w / feature_w, image_h / feature_h
    # Half widths/heights of every prior of one position, in output order.
    half_sizes = []
    for s, min_size in enumerate(min_sizes.tolist()):
        ratio_boxes = [(min_size * np.sqrt(r) / 2, min_size / np.sqrt(r) / 2) for r in ratios.tolist()]
        max_box = [(np.sqrt(min_size * max_sizes[s]) / 2,) * 2] if max_sizes.size else []
        if param_bool(min_max_order):
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
    if param_bool(clip):
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
    attrs = {"background": param_int(inputs[3]), "score_threshold": param_float(inputs[4]),
             "nms_top_k": param_int(inputs[5]), "nms_threshold": param_float(inputs[6]),
             "eta": param_float(inputs[7]), "keep_top_k": param_int(inputs[8]),
             "normalized": param_bool(inputs[9])}
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
    class_num = param_int(class_num)
    conf_thresh = param_float(conf_thresh)
    downsample = param_int(downsample)
    scale = param_float(scale_x_y)
    bias = -0.5 * (scale - 1.0)
    n, _, h, w = x.shape
    a = anchors.shape[0]
    x = x.astype(np.float64)
    if param_bool(iou_aware):
        iou = _sigmoid(x[:, :a])  # [N, A, H, W]
        x = x[:, a:]
    else:
        iou = None
    pred = x.reshape(n, a, 5 + class_num, h, w)
    conf = _sigmoid(pred[:, :, 4])
    if iou is not None:
        factor = param_float(iou_factor)
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
    if param_bool(clip_bbox):
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
