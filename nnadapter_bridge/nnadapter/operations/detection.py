"""The detection operations PRIOR_BOX, NON_MAX_SUPPRESSION and YOLO_BOX: signatures, shape inference and
numpy references.

YOLO_BOX has the second output `scores` of the older spec appendix; NON_MAX_SUPPRESSION follows
`reference/operations_addendum.md`. The references follow Paddle's prior_box, yolo_box and multiclass_nms3,
so a converted model reproduces Paddle's numbers.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`); `multiclass_nms` and the NMS
arithmetic the host's detection kernels share. Imports only `registry`, `common`, the standard's codes and types and
`errors`: never the model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
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
from nnadapter_bridge.nnadapter.operations.registry import BOOL, F32, F32_64, INT32, Slot, operation, reference
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


@operation(T.PRIOR_BOX, inputs=[Slot("input", F32_64), Slot("image", F32_64), Slot("min_sizes", F32),
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
    # Paddle's CPU kernel (float and double) writes the input's type.
    precision = Precision.FLOAT64 if x.precision == Precision.FLOAT64 else Precision.FLOAT32
    out = result_type(x, dims, precision=precision)
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


@operation(T.YOLO_BOX, inputs=[Slot("input", F32_64), Slot("imgsize", INT32), Slot("anchors", INT32),
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
    # Paddle's kernel computes in the input's type: float, or double for a float64 input.
    dtype = np.float64 if feature.dtype == np.float64 else np.float32
    min_sizes = np.asarray(min_sizes, dtype=dtype).reshape(-1)
    max_sizes = np.zeros(0, dtype) if max_sizes is None else np.asarray(max_sizes, dtype).reshape(-1)
    ratios = np.asarray(expand_aspect_ratios(aspect_ratios, param_bool(flip)), dtype=dtype)
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
    half = np.asarray(half_sizes, dtype=dtype)  # [P, 2]
    center_x = ((np.arange(feature_w, dtype=dtype) + offset) * step_w)[None, :, None]
    center_y = ((np.arange(feature_h, dtype=dtype) + offset) * step_h)[:, None, None]
    half_w, half_h = half[None, None, :, 0], half[None, None, :, 1]
    boxes = np.stack(np.broadcast_arrays((center_x - half_w) / image_w, (center_y - half_h) / image_h,
                                         (center_x + half_w) / image_w, (center_y + half_h) / image_h), -1)
    boxes = boxes.astype(dtype)
    if param_bool(clip):
        boxes = np.clip(boxes, 0.0, 1.0)
    variance = np.broadcast_to(np.asarray(variances, dtype).reshape(1, 1, 1, 4), boxes.shape).copy()
    return [boxes, variance]


# -- NON_MAX_SUPPRESSION -----------------------------------------------------------------------------
#
# Paddle's multiclass NMS (phi multiclass_nms3 / fluid multiclass_nms), float32 arithmetic in its order so
# that an overlap equal to the threshold decides as Paddle decides. Vectorised over boxes: the loops run per
# image, per class and per kept box, never per candidate.


@dataclasses.dataclass(frozen=True)
class NmsAttributes:
    """The attributes of one multiclass NMS (Paddle's names)."""
    background_label: int = 0
    score_threshold: float = 0.0
    nms_top_k: int = -1
    nms_threshold: float = 0.3
    nms_eta: float = 1.0
    keep_top_k: int = -1
    normalized: bool = True


def box_areas(boxes: np.ndarray, normalized: bool) -> np.ndarray:
    """Paddle's BBoxArea of [K, 4] float32 boxes: 0 for an inverted box, +1 per side for pixel boxes."""
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    if not normalized:
        w, h = w + np.float32(1), h + np.float32(1)
    inverted = (boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1])
    return np.where(inverted, np.float32(0), w * h)


def overlaps_with(box: np.ndarray, area: np.float32, boxes: np.ndarray, areas: np.ndarray,
                  normalized: bool) -> np.ndarray:
    """Paddle's JaccardOverlap of one box with each of `boxes`, in float32. Boxes that do not touch overlap
    by 0; a zero union gives NaN (0/0) as in Paddle, which never counts as "overlap <= threshold"."""
    x1, y1, x2, y2 = box
    apart = (boxes[:, 0] > x2) | (boxes[:, 2] < x1) | (boxes[:, 1] > y2) | (boxes[:, 3] < y1)
    pixel = np.float32(0 if normalized else 1)
    inter_w = np.minimum(boxes[:, 2], x2) - np.maximum(boxes[:, 0], x1) + pixel
    inter_h = np.minimum(boxes[:, 3], y2) - np.maximum(boxes[:, 1], y1) + pixel
    inter = inter_w * inter_h
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (areas + area - inter)
    iou[apart] = 0
    return iou


def overlap_matrix(boxes: np.ndarray, normalized: bool) -> np.ndarray:
    """Paddle's JaccardOverlap of every pair of the [K, 4] float32 boxes, [K, K] float32 (NaN for a zero
    union, as Paddle computes it)."""
    areas = box_areas(boxes, normalized)
    a, b = boxes[:, None, :], boxes[None, :, :]
    apart = (b[..., 0] > a[..., 2]) | (b[..., 2] < a[..., 0]) | (b[..., 1] > a[..., 3]) | (b[..., 3] < a[..., 1])
    pixel = np.float32(0 if normalized else 1)
    inter = ((np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]) + pixel) *
             (np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]) + pixel))
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (areas[:, None] + areas[None, :] - inter)
    iou[apart] = 0
    return iou


def candidates_by_score(scores: np.ndarray, threshold: float, top_k: int) -> np.ndarray:
    """Indices of the scores above `threshold`, highest first, equal scores in index order (Paddle's
    std::stable_sort), at most `top_k` of them when top_k > -1."""
    indices = np.flatnonzero(scores > np.float32(threshold))
    indices = indices[np.argsort(-scores[indices], kind="stable")]
    return indices[:top_k] if top_k > -1 else indices


def greedy_nms(boxes: np.ndarray, threshold: float, eta: float, normalized: bool) -> np.ndarray:
    """Positions of the [K, 4] boxes (in candidate order) that greedy NMS keeps, in that order.

    A candidate is kept when its overlap with every box kept before it is <= the current threshold; after a
    box is kept the threshold shrinks by `eta` while it stays above 0.5 (adaptive NMS). One step per kept box:
    each remaining candidate carries its largest overlap with the kept boxes so far, so the next kept box is
    the first remaining one at or under the threshold. The threshold only shrinks and the largest overlap only
    grows, so a candidate over it once is suppressed for good and leaves the arrays.
    """
    areas = box_areas(boxes, normalized)
    threshold = np.float32(threshold)
    eta32 = np.float32(eta)
    remaining = np.arange(boxes.shape[0])
    largest_overlap = np.full(boxes.shape[0], -np.inf, np.float32)
    kept = []
    while remaining.size:
        alive = largest_overlap <= threshold  # NaN (zero union) is never <= anything
        if not alive.all():
            remaining, largest_overlap = remaining[alive], largest_overlap[alive]
            if not remaining.size:
                break
        chosen = remaining[0]
        kept.append(chosen)
        remaining, largest_overlap = remaining[1:], largest_overlap[1:]
        if eta < 1 and threshold > 0.5:
            threshold = np.float32(threshold * eta32)
        if remaining.size:
            overlap = overlaps_with(boxes[chosen], areas[chosen], boxes[remaining], areas[remaining], normalized)
            np.maximum(largest_overlap, overlap, out=largest_overlap)
    return np.asarray(kept, dtype=np.int64)


# Pairs generated per chunk of the x-sorted sweep, bounding the sweep's memory (a few arrays of this length).
_PAIRS_PER_CHUNK = 1 << 20


def touching_pairs(boxes: np.ndarray, min_overlap: float = 0.0, pixel: float = 0.0):
    """Pairs (i, j), i != j, of the upright [U, 4] boxes whose x-extents touch (Paddle's "not apart" in x) and,
    for min_overlap t > 0, whose common x-extent can give an overlap above t, as chunks of index arrays.

    A sweep over the boxes sorted by x1, so far-apart boxes never pair up. Overlap (intersection over union)
    is at most the common width over the wider box's width, so overlap > t needs the common width above t
    times the width of box i; the bound is loosened by a margin of float32 rounding, and only prunes: the
    caller computes every overlap it keeps exactly.
    """
    order = np.argsort(boxes[:, 0], kind="stable")
    x1, x2 = boxes[order, 0], boxes[order, 2]
    # Box p (sorted) pairs with every later box q with x1[q] <= reach_x[p]; those are p+1 .. reach[p]-1.
    reach_x = x2
    if min_overlap > 0:
        width = x2.astype(np.float64) - x1 + pixel
        margin = 1e-4 * (np.abs(x1) + np.abs(x2) + width) + 1e-30
        reach_x = np.minimum(x2, x2 + pixel - min_overlap * width + margin)
    reach = np.searchsorted(x1, reach_x, side="right")
    starts = np.arange(1, order.size + 1)
    counts = np.maximum(reach - starts, 0)
    ends = np.cumsum(counts)
    first = 0
    while first < order.size:
        # Boxes first .. last-1 produce at most _PAIRS_PER_CHUNK pairs (or one box alone produces more).
        base = ends[first - 1] if first else 0
        last = max(int(np.searchsorted(ends, base + _PAIRS_PER_CHUNK, side="right")), first + 1)
        chunk_counts = counts[first:last]
        total = int(chunk_counts.sum())
        if total:
            left = np.repeat(np.arange(first, last), chunk_counts)
            offsets = np.arange(total) - np.repeat(np.cumsum(chunk_counts) - chunk_counts, chunk_counts)
            yield order[left], order[left + 1 + offsets]
        first = last


def suppressing_pairs(boxes: np.ndarray, threshold: np.float32, normalized: bool):
    """(i, j) index arrays of the pairs of valid [U, 4] boxes whose overlap is > threshold or NaN: the pairs
    in which the better-scored box suppresses the other. Valid for threshold >= 0, where boxes that do not
    touch (overlap exactly 0) never suppress."""
    areas = box_areas(boxes, normalized)
    pixel = np.float32(0 if normalized else 1)
    x1, y1, x2, y2 = (np.ascontiguousarray(boxes[:, k]) for k in range(4))
    found_i, found_j = [], []
    for i, j in touching_pairs(boxes, float(threshold), float(pixel)):
        touch = (y1[j] <= y2[i]) & (y2[j] >= y1[i])
        i, j = i[touch], j[touch]
        inter_w = np.minimum(x2[i], x2[j]) - np.maximum(x1[i], x1[j]) + pixel
        inter_h = np.minimum(y2[i], y2[j]) - np.maximum(y1[i], y1[j]) + pixel
        inter = inter_w * inter_h
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / (areas[j] + areas[i] - inter)
        suppress = ~(iou <= threshold)
        found_i.append(i[suppress])
        found_j.append(j[suppress])
    # Two touching boxes without area (normalized boxes of zero width or height: SSD's priors clipped to the
    # image edge decode to such boxes) have a zero union, an overlap of 0/0 = NaN, which suppresses whatever
    # their common width: the sweep above prunes by common width, so pair them by a sweep of their own.
    flat = np.flatnonzero(areas == 0)
    if flat.size > 1:
        for i, j in touching_pairs(boxes[flat]):
            i, j = flat[i], flat[j]
            touch = (y1[j] <= y2[i]) & (y2[j] >= y1[i])
            found_i.append(i[touch])
            found_j.append(j[touch])
    if not found_i:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(found_i), np.concatenate(found_j)


def greedy_nms_by_pairs(ranks: np.ndarray, pair_i: np.ndarray, pair_j: np.ndarray) -> np.ndarray:
    """Greedy NMS of several classes over one box set at a fixed threshold: ranks [C, U] is each box's place
    in its class's candidate order (-1: not a candidate), (pair_i, pair_j) the suppressing pairs. Returns the
    kept mask [C, U].

    A candidate is kept iff no kept candidate ranked before it forms a suppressing pair with it. That
    recursion has one solution, reached by iterating from "all kept": after k rounds every candidate whose
    chain of better-ranked suppressors is shorter than k is settled, so the rounds are as many as the longest
    chain of mutually overlapping boxes, each a vector pass over the pairs.
    """
    n_classes, n_boxes = ranks.shape
    candidate = ranks >= 0
    cls, pair = np.nonzero(candidate[:, pair_i] & candidate[:, pair_j])
    a, b = pair_i[pair], pair_j[pair]
    a_first = ranks[cls, a] < ranks[cls, b]
    src = cls * n_boxes + np.where(a_first, a, b)
    dst = cls * n_boxes + np.where(a_first, b, a)
    candidate = candidate.reshape(-1)
    kept = candidate.copy()
    while True:
        suppressed = np.zeros(kept.size, bool)
        suppressed[dst[kept[src]]] = True
        settled = candidate & ~suppressed
        if np.array_equal(settled, kept):
            return kept.reshape(n_classes, n_boxes)
        kept = settled


def _pairs_apply(boxes: np.ndarray, threshold: float, eta: float) -> bool:
    """True when greedy_nms_by_pairs gives greedy_nms's answer: a fixed threshold (eta never applies at or
    under 0.5) that is >= 0, and finite, upright boxes (the x sweep needs x1 <= x2)."""
    if eta < 1 and threshold > 0.5:
        return False
    if not threshold >= 0:
        return False
    return bool(np.isfinite(boxes).all() and (boxes[:, 2] >= boxes[:, 0]).all() and (boxes[:, 3] >= boxes[:, 1]).all())


def nms_classes(boxes: np.ndarray, orders: dict, attrs: NmsAttributes) -> dict:
    """{label: kept box indices in candidate order} for classes sharing the [M, 4] `boxes`, given each class's
    candidate order ({label: box indices, best first})."""
    if not orders:
        return {}
    union = np.unique(np.concatenate(list(orders.values())))
    union_boxes = boxes[union]
    if not _pairs_apply(union_boxes, attrs.nms_threshold, attrs.nms_eta):
        return {c: order[greedy_nms(boxes[order], attrs.nms_threshold, attrs.nms_eta, attrs.normalized)]
                for c, order in orders.items()}
    labels = list(orders)
    ranks = np.full((len(labels), union.size), -1, np.int64)
    for row, c in enumerate(labels):
        ranks[row, np.searchsorted(union, orders[c])] = np.arange(orders[c].size)
    pair_i, pair_j = suppressing_pairs(union_boxes, np.float32(attrs.nms_threshold), attrs.normalized)
    kept = greedy_nms_by_pairs(ranks, pair_i, pair_j)
    result = {}
    for row, c in enumerate(labels):
        order = orders[c]
        result[c] = order[kept[row, np.searchsorted(union, order)]]
    return result


def nms_one_image(boxes_of_class, scores: np.ndarray, attrs: NmsAttributes, lod_form: bool):
    """Multiclass NMS of one image, scores [C, M] float32; (labels, box indices) in Paddle's output order:
    by label, a label's boxes by score (the first input form) or by box index (the second, LoD form)."""
    orders = {}
    for c in range(scores.shape[0]):
        if c != attrs.background_label:
            order = candidates_by_score(scores[c], attrs.score_threshold, attrs.nms_top_k)
            if order.size:
                orders[c] = order
    if lod_form:  # each class has its own boxes
        kept = {}
        for c, order in orders.items():
            kept.update(nms_classes(boxes_of_class(c), {c: order}, attrs))
    else:
        kept = nms_classes(boxes_of_class(0), orders, attrs)
    label_parts = [np.full(kept[c].size, c, np.int64) for c in sorted(kept)]
    index_parts = [np.sort(kept[c], kind="stable") if lod_form else kept[c] for c in sorted(kept)]
    if not label_parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    labels, indices = np.concatenate(label_parts), np.concatenate(index_parts)
    if -1 < attrs.keep_top_k < labels.size:
        # The keep_top_k best across classes; equal scores keep the (label, per-label) order above.
        best = np.argsort(-scores[labels, indices], kind="stable")[:attrs.keep_top_k]
        # Regrouped by label (Paddle's std::map), each label's boxes in score order or, LoD form, by index.
        secondary = indices[best] if lod_form else np.arange(best.size)
        best = best[np.lexsort((secondary, labels[best]))]
        labels, indices = labels[best], indices[best]
    return labels, indices


def multiclass_nms(bboxes: np.ndarray, scores: np.ndarray, rois_num, attrs: NmsAttributes):
    """Paddle's multiclass NMS over a batch: (rows [K, 6] float32, kept per image int32 [B], index int32 [K]).

    bboxes [N, M, 4] with scores [N, C, M], or (LoD form) bboxes [M, C, 4] with scores [M, C] and rois_num
    splitting M into images (one image when rois_num is None). index is Paddle's: image * M + box for the
    first form, (first box of the image + box) * C + label for the second.
    """
    bboxes = np.ascontiguousarray(bboxes, dtype=np.float32)
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    rows, counts, index = [], [], []
    if scores.ndim == 2:
        n_classes = scores.shape[1]
        sizes = [scores.shape[0]] if rois_num is None else np.asarray(rois_num, np.int64).reshape(-1).tolist()
        start = 0
        for size in sizes:
            image_boxes, image_scores = bboxes[start:start + size], scores[start:start + size]
            labels, boxes = nms_one_image(
                lambda c, boxes=image_boxes: boxes[:, c], np.ascontiguousarray(image_scores.T), attrs, lod_form=True
            )
            rows.append(_nms_rows(labels, image_scores[boxes, labels], image_boxes[boxes, labels]))
            index.append((start + boxes) * n_classes + labels)
            counts.append(labels.size)
            start += size
    else:
        n_boxes = bboxes.shape[1]
        for b in range(bboxes.shape[0]):
            labels, boxes = nms_one_image(lambda c, image=bboxes[b]: image, scores[b], attrs, lod_form=False)
            rows.append(_nms_rows(labels, scores[b, labels, boxes], bboxes[b, boxes]))
            index.append(b * n_boxes + boxes)
            counts.append(labels.size)
    if not rows:
        return np.zeros((0, 6), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int32)
    return (np.concatenate(rows), np.asarray(counts, np.int32), np.concatenate(index).astype(np.int32))


def _nms_rows(labels: np.ndarray, scores: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    rows = np.empty((labels.size, 6), np.float32)
    rows[:, 0], rows[:, 1], rows[:, 2:] = labels, scores, boxes
    return rows


def _nms_supports(op) -> bool:
    # Polygon boxes (8..32 coordinates) need polygon clipping, which this reference does not do.
    return op.inputs[0].type.dims[-1] == 4


def nms_attributes(inputs) -> NmsAttributes:
    """The NmsAttributes of a NON_MAX_SUPPRESSION's constant operands 3..9."""
    return NmsAttributes(background_label=param_int(inputs[3]), score_threshold=param_float(inputs[4]),
                         nms_top_k=param_int(inputs[5]), nms_threshold=param_float(inputs[6]),
                         nms_eta=param_float(inputs[7]), keep_top_k=param_int(inputs[8]),
                         normalized=param_bool(inputs[9]))


@reference(T.NON_MAX_SUPPRESSION, supports=_nms_supports)
def non_max_suppression(op, inputs):
    bboxes, scores, rois_num = inputs[0], inputs[1], inputs[2]
    if bboxes.shape[-1] != 4:
        raise OperationError(f"{op.label()}: the reference handles 4-coordinate boxes only, got {bboxes.shape[-1]}")
    if not nms_is_lod_form(op):
        rois_num = None
    output, counts, index = multiclass_nms(bboxes, scores, rois_num, nms_attributes(inputs))
    results = [output, counts]
    if len(op.outputs) > 2:
        results.append(index if op.outputs[2] is not None else None)
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
    dtype = x.dtype
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
    # Paddle's CPU kernel computes in the input's type (float or double): the results take it.
    boxes = boxes.reshape(n, a * h * w, 4).astype(dtype)
    scores = np.moveaxis(scores, 2, -1).reshape(n, a * h * w, class_num).astype(dtype)
    outputs = [boxes]
    if len(op.outputs) > 1:
        outputs.append(scores if op.outputs[1] is not None else None)
    return outputs
