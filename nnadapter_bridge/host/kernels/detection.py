"""Detection ops without an NNAdapter operation: box_coder, matrix_nms, the fluid multiclass_nms (its
[[-1]] empty form and LoD output have no operand form), generate_proposals_v2, distribute_fpn_proposals,
density_prior_box, nms (paddle.vision.ops.nms's single-class kernel), box_clip, roi_pool, psroi_pool and
bipartite_match (SSD's prior-to-ground-truth matching).
(prior_box, yolo_box, multiclass_nms3 and roi_align have NNAdapter operations and run through their
converters; the NMS box arithmetic is shared with NON_MAX_SUPPRESSION's reference.)

Box arithmetic is vectorized over all boxes; the greedy parts (NMS keeps a box only after comparing it
with every box kept before it) loop over kept candidates. `normalized`/`pixel_offset` choose Paddle's
"+1" pixel convention for widths and heights. The RoI poolings are vectorized over RoIs, channels and bins, with
one numpy pass per tap offset of the largest bin (each bin's taps in Paddle's row-major order). A LoD is not
carried between host ops, so box_clip, and roi_pool / psroi_pool without RoisNum, take the boxes as one image, and
bipartite_match its distance matrix as one instance. bipartite_match's greedy matching takes one match per step
(a numpy argmax over the rows and columns still free); on 130 rows or more Paddle walks the pairs sorted by
std::sort instead, whose order of equal distances `reduce.std_sort_order` replays.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy, the standard's NMS arithmetic and `reduce`'s std::sort replay; never a driver
(`hal`) or a floor above the host.
"""
from __future__ import annotations

import math

import numpy as np

from nnadapter_bridge.host.kernels.reduce import std_sort_order
from nnadapter_bridge.host.kernels.registry import FLOATS, OpScope, host_kernel, require
from nnadapter_bridge.nnadapter.operations.detection import (
    NmsAttributes,
    candidates_by_score,
    multiclass_nms,
    overlap_matrix,
)

# generate_proposals clamps log-space width/height deltas here (Paddle's kBBoxClipDefault).
BBOX_CLIP = math.log(1000.0 / 16.0)


def _wh(boxes: np.ndarray, offset: float):
    return boxes[..., 2] - boxes[..., 0] + offset, boxes[..., 3] - boxes[..., 1] + offset


def iou_matrix(a: np.ndarray, b: np.ndarray, normalized: bool) -> np.ndarray:
    """IoU of every box in a [P, 4] with every box in b [Q, 4]; 0 for boxes without area."""
    offset = 0.0 if normalized else 1.0
    aw, ah = _wh(a, offset)
    bw, bh = _wh(b, offset)
    ix = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]) + offset
    iy = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]) + offset
    # Paddle's JaccardOverlap: boxes that do not touch overlap by 0 even when the +1 pixel convention would
    # give them a sliver.
    apart = ((b[None, :, 0] > a[:, None, 2]) | (b[None, :, 2] < a[:, None, 0]) |
             (b[None, :, 1] > a[:, None, 3]) | (b[None, :, 3] < a[:, None, 1]))
    inter = np.where(apart, 0.0, np.maximum(ix, 0.0) * np.maximum(iy, 0.0))
    area_a = np.where((aw > 0) & (ah > 0), aw * ah, 0.0)
    area_b = np.where((bw > 0) & (bh > 0), bw * bh, 0.0)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


# -- box_coder ------------------------------------------------------------------------------------------------
@host_kernel("box_coder")
def box_coder(io: OpScope) -> None:
    prior = io.input("PriorBox").astype(np.float64)
    target = io.input("TargetBox")
    dtype = target.dtype
    target = target.astype(np.float64)
    offset = 0.0 if io.attr("box_normalized", True) else 1.0
    if io.has_input("PriorBoxVar"):
        variance = io.input("PriorBoxVar").astype(np.float64)
    elif io.attr("variance", []):
        variance = np.asarray(io.attr("variance"), np.float64).reshape(1, 4)
    else:
        variance = np.ones((1, 4))
    pw, ph = _wh(prior, offset)
    pcx, pcy = prior[:, 0] + pw / 2, prior[:, 1] + ph / 2
    code_type = str(io.attr("code_type", "encode_center_size")).lower()
    if code_type == "encode_center_size":
        # out[i, j] encodes target i relative to prior j: [N, M, 4]
        tw, th = _wh(target, offset)
        # Paddle centres targets at the corner midpoint (no +1), unlike priors
        tcx, tcy = (target[:, 0] + target[:, 2]) / 2, (target[:, 1] + target[:, 3]) / 2
        out = np.stack([(tcx[:, None] - pcx[None]) / pw[None], (tcy[:, None] - pcy[None]) / ph[None],
                        np.log(np.abs(tw[:, None] / pw[None])), np.log(np.abs(th[:, None] / ph[None]))], axis=-1)
        out = out / np.broadcast_to(variance, prior.shape)[None]
    elif code_type == "decode_center_size":
        if target.ndim == 2:
            target = target[:, None, :]
        # axis 0: prior j pairs with target[:, j]; axis 1: prior i pairs with target[i, :]
        expand = (lambda v: v[None]) if int(io.attr("axis", 0)) == 0 else (lambda v: v[:, None])
        var = np.broadcast_to(variance, prior.shape)
        cx = expand(var[:, 0]) * target[..., 0] * expand(pw) + expand(pcx)
        cy = expand(var[:, 1]) * target[..., 1] * expand(ph) + expand(pcy)
        w = np.exp(expand(var[:, 2]) * target[..., 2]) * expand(pw)
        h = np.exp(expand(var[:, 3]) * target[..., 3]) * expand(ph)
        out = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - offset, cy + h / 2 - offset], axis=-1)
    else:
        raise io.error(f"unknown code_type '{code_type}'")
    io.set_output("OutputBox", out.astype(dtype))


# -- matrix_nms -----------------------------------------------------------------------------------------------
def _matrix_nms_class(boxes: np.ndarray, scores: np.ndarray, io: OpScope):
    """Decayed scores and box indices of one class of one image, highest first (Matrix NMS, SOLOv2), in
    Paddle's float32 arithmetic (the linear decay's quotient in double, as Paddle's `1.` literal makes it).

    Equal scores keep their box order (a stable sort); Paddle uses std::partial_sort, whose order among equal
    scores is its heap's, so tied candidates may come out in another order than Paddle's.
    """
    order = candidates_by_score(scores, float(io.attr("score_threshold", 0.0)), int(io.attr("nms_top_k", -1)))
    if order.size == 0:
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    # iou[j, i] (j < i): overlap of box i with the higher-scored box j; the rest is never read.
    iou = np.triu(overlap_matrix(boxes[order], bool(io.attr("normalized", True))), k=1)
    above = np.triu(np.ones(iou.shape, bool), k=1)
    # Compensation uses box j's own largest overlap with anything above it; Paddle's std::max skips NaN.
    max_iou = np.fmax.reduce(np.where(above, iou, np.float32(0)), axis=0)
    if io.attr("use_gaussian", False):
        sigma = np.float32(io.attr("gaussian_sigma", 2.0))
        decay = np.exp((max_iou[:, None] * max_iou[:, None] - iou * iou) * sigma)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):  # max_iou 1: inf or NaN, never the minimum
            decay = ((1.0 - iou.astype(np.float64)) / (1.0 - max_iou[:, None].astype(np.float64))).astype(np.float32)
    # Paddle: min_decay starts at 1 and std::min(min_decay, decay) keeps min_decay when decay is NaN.
    decay = np.where(above & ~np.isnan(decay), decay, np.float32(1))
    decayed = scores[order] * decay.min(axis=0)
    keep = decayed > np.float32(io.attr("post_threshold", 0.0))
    return decayed[keep], order[keep]


@host_kernel("matrix_nms")
def matrix_nms(io: OpScope) -> None:
    dtype = io.input("BBoxes").dtype
    boxes_all = np.ascontiguousarray(io.input("BBoxes"), dtype=np.float32)
    scores_all = np.ascontiguousarray(io.input("Scores"), dtype=np.float32)
    background = int(io.attr("background_label", 0))
    keep_top_k = int(io.attr("keep_top_k", -1))
    batch, classes, count = scores_all.shape
    rows, indices, per_image = [], [], []
    for n in range(batch):
        labels, scores, boxes_idx = [], [], []
        for c in range(classes):
            if c == background:
                continue
            decayed, idx = _matrix_nms_class(boxes_all[n], scores_all[n, c], io)
            labels.append(np.full(idx.size, c, np.float32))
            scores.append(decayed)
            boxes_idx.append(idx)
        labels = np.concatenate(labels) if labels else np.zeros(0, np.float32)
        scores = np.concatenate(scores) if scores else np.zeros(0, np.float32)
        boxes_idx = np.concatenate(boxes_idx).astype(np.int64) if boxes_idx else np.zeros(0, np.int64)
        order = np.argsort(-scores, kind="stable")
        if keep_top_k > -1:
            order = order[:keep_top_k]
        rows.append(np.concatenate([labels[order, None], scores[order, None], boxes_all[n][boxes_idx[order]]],
                                   axis=1))
        indices.append(boxes_idx[order] + n * count)
        per_image.append(order.size)
    io.set_output("Out", np.concatenate(rows).astype(dtype).reshape(-1, 6))
    io.set_output("Index", np.concatenate(indices).astype(np.int32).reshape(-1, 1))
    io.set_output("RoisNum", np.asarray(per_image, np.int32))


# -- multiclass_nms (the fluid form) --------------------------------------------------------------------------
@host_kernel("multiclass_nms")
def multiclass_nms_fluid(io: OpScope) -> None:
    """The fluid op multiclass_nms: Out only, whose batch split lives in its LoD. Paddle writes a single
    [[-1]] when no image keeps a box. Scores [M, C] (the form whose images a LoD on BBoxes separates) are
    taken as one image: a LoD is not carried between host ops."""
    bboxes = io.input("BBoxes")
    if bboxes.shape[-1] != 4:
        raise io.error(f"boxes with {bboxes.shape[-1]} coordinates (polygons) are not supported; 4 are")
    attrs = NmsAttributes(background_label=int(io.attr("background_label", 0)),
                          score_threshold=float(io.attr("score_threshold", 0.0)),
                          nms_top_k=int(io.attr("nms_top_k", -1)), nms_threshold=float(io.attr("nms_threshold", 0.3)),
                          nms_eta=float(io.attr("nms_eta", 1.0)), keep_top_k=int(io.attr("keep_top_k", -1)),
                          normalized=bool(io.attr("normalized", True)))
    out, _, _ = multiclass_nms(bboxes, io.input("Scores"), None, attrs)
    if out.shape[0] == 0:
        out = np.full((1, 1), -1, np.float32)
    io.set_output("Out", out.astype(bboxes.dtype))


# -- generate_proposals_v2 ------------------------------------------------------------------------------------
def _greedy_nms(boxes: np.ndarray, threshold: float, eta: float, normalized: bool) -> list[int]:
    """Indices of the boxes (already in score order) greedy NMS keeps; eta < 1 shrinks the threshold."""
    keep: list[int] = []
    iou = iou_matrix(boxes, boxes, normalized)
    for i in range(boxes.shape[0]):
        if all(iou[i, k] <= threshold for k in keep):
            keep.append(i)
            if eta < 1.0 and threshold > 0.5:
                threshold *= eta
    return keep


def _proposals_one_image(io: OpScope, scores, deltas, im_shape, anchors, variances):
    pre_top = int(io.attr("pre_nms_topN", 6000))
    post_top = int(io.attr("post_nms_topN", 1000))
    offset = 1.0 if io.attr("pixel_offset", True) else 0.0
    order = np.argsort(-scores, kind="stable")
    if 0 < pre_top < order.size:
        order = order[:pre_top]
    scores, deltas, anchors, variances = scores[order], deltas[order], anchors[order], variances[order]
    aw, ah = _wh(anchors, offset)
    acx, acy = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    d = deltas * variances
    cx, cy = d[:, 0] * aw + acx, d[:, 1] * ah + acy
    w = np.exp(np.minimum(d[:, 2], BBOX_CLIP)) * aw
    h = np.exp(np.minimum(d[:, 3], BBOX_CLIP)) * ah
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - offset, cy + h / 2 - offset], axis=1)
    im_h, im_w = float(im_shape[0]), float(im_shape[1])
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0.0, im_w - offset)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0.0, im_h - offset)
    ws, hs = _wh(boxes, offset)
    min_size = max(float(io.attr("min_size", 0.1)), 1.0)
    keep = (ws >= min_size) & (hs >= min_size)
    if offset:
        keep &= (boxes[:, 0] + ws / 2 <= im_w) & (boxes[:, 1] + hs / 2 <= im_h)
    boxes, scores = boxes[keep], scores[keep]
    if boxes.shape[0] == 0:  # Paddle emits one all-zero proposal rather than none
        return np.zeros((1, 4)), np.zeros((1,))
    nms_thresh = float(io.attr("nms_thresh", 0.5))
    if nms_thresh > 0:
        kept = _greedy_nms(boxes, nms_thresh, float(io.attr("eta", 1.0)), normalized=not offset)
        boxes, scores = boxes[kept], scores[kept]
    if 0 < post_top < boxes.shape[0]:
        boxes, scores = boxes[:post_top], scores[:post_top]
    return boxes, scores


@host_kernel("generate_proposals_v2")
def generate_proposals_v2(io: OpScope) -> None:
    scores = io.input("Scores")
    dtype = scores.dtype
    deltas = io.input("BboxDeltas").astype(np.float64)
    im_shapes = io.input("ImShape").astype(np.float64)
    anchors = io.input("Anchors").astype(np.float64).reshape(-1, 4)
    variances = io.input("Variances").astype(np.float64).reshape(-1, 4)
    batch = scores.shape[0]
    # [N, A, H, W] -> per image [H*W*A]; [N, 4A, H, W] -> per image [H*W*A, 4] (anchor-major within a cell)
    flat_scores = scores.astype(np.float64).transpose(0, 2, 3, 1).reshape(batch, -1)
    flat_deltas = deltas.transpose(0, 2, 3, 1).reshape(batch, -1, 4)
    rois, probs, counts = [], [], []
    for n in range(batch):
        boxes, kept_scores = _proposals_one_image(io, flat_scores[n], flat_deltas[n], im_shapes[n], anchors,
                                                  variances)
        rois.append(boxes)
        probs.append(kept_scores)
        counts.append(boxes.shape[0])
    io.set_output("RpnRois", np.concatenate(rois).astype(dtype))
    io.set_output("RpnRoiProbs", np.concatenate(probs).astype(dtype).reshape(-1, 1))
    io.set_output("RpnRoisNum", np.asarray(counts, np.int32))


# -- distribute_fpn_proposals ---------------------------------------------------------------------------------
@host_kernel("distribute_fpn_proposals")
def distribute_fpn_proposals(io: OpScope) -> None:
    """Paddle's distribute_fpn_proposals (FPN R-CNN's RoI-to-level assignment): each RoI goes to level
    floor(log2(sqrt(area) / refer_scale + 1e-8) + refer_level) clamped to [min_level, max_level], computed in the
    RoIs' own float type as Paddle's CPU kernel does; each level lists its RoIs image by image in their order, with
    the per-image counts (MultiLevelRoIsNum), and RestoreIndex [N, 1] gives each input RoI's row in the
    concatenation of the levels. Without RoisNum the RoIs are one image (a LoD is not carried between host ops)."""
    rois = io.input("FpnRois")
    min_level, max_level = int(io.attr("min_level")), int(io.attr("max_level"))
    refer_level, refer_scale = int(io.attr("refer_level")), int(io.attr("refer_scale"))
    offset = 1 if io.attr("pixel_offset", True) else 0
    counts = io.input("RoisNum").astype(np.int64).reshape(-1) if io.has_input("RoisNum") else \
        np.asarray([rois.shape[0]], np.int64)
    if int(counts.sum()) != rois.shape[0]:
        raise io.error(f"RoisNum adds up to {int(counts.sum())} RoIs, FpnRois holds {rois.shape[0]}")
    dtype = rois.dtype.type
    w, h = rois[:, 2] - rois[:, 0], rois[:, 3] - rois[:, 1]
    if offset:
        w, h = w + dtype(1), h + dtype(1)
    area = np.where((rois[:, 2] < rois[:, 0]) | (rois[:, 3] < rois[:, 1]), dtype(0), w * h).astype(rois.dtype)
    scale = np.sqrt(area)
    with np.errstate(divide="ignore"):
        level = np.floor(np.log2(scale / dtype(refer_scale) + dtype(1e-8)) + dtype(refer_level))
    level = np.clip(level, min_level, max_level).astype(np.int64)
    image = np.repeat(np.arange(counts.size), counts)
    # Stable by (level, image): within a level, images in order and each image's RoIs in their order.
    order = np.lexsort((np.arange(rois.shape[0]), image, level))
    restore = np.empty(rois.shape[0], np.int32)
    restore[order] = np.arange(rois.shape[0], dtype=np.int32)
    levels = range(min_level, max_level + 1)
    outputs = len(io.output_names("MultiFpnRois"))
    if outputs != len(levels):
        raise io.error(f"{outputs} MultiFpnRois outputs for levels {min_level}..{max_level}")
    io.set_outputs("MultiFpnRois", [rois[level == k].reshape(-1, 4) for k in levels])
    io.set_outputs("MultiLevelRoIsNum", [np.bincount(image[level == k], minlength=counts.size).astype(np.int32)
                                         for k in levels])
    io.set_output("RestoreIndex", restore.reshape(-1, 1))


# -- density_prior_box ----------------------------------------------------------------------------------------
@host_kernel("density_prior_box")
def density_prior_box(io: OpScope) -> None:
    """Paddle's (1.x/2.x) density_prior_box; paddle 3 no longer registers the op, models exported before
    still carry it. Every feature-map cell gets, per (fixed_size, density) pair and per ratio, a
    density x density grid of boxes spread over the cell's (integer) average step."""
    feature, image = io.input("Input"), io.input("Image")
    feature_h, feature_w = feature.shape[2], feature.shape[3]
    image_h, image_w = image.shape[2], image.shape[3]
    step_w, step_h = float(io.attr("step_w", 0.0)), float(io.attr("step_h", 0.0))
    if step_w == 0.0 or step_h == 0.0:
        step_w, step_h = image_w / feature_w, image_h / feature_h
    offset = float(io.attr("offset", 0.5))
    sizes = [float(v) for v in io.attr("fixed_sizes", [])]
    ratios = [float(v) for v in io.attr("fixed_ratios", [])]
    densities = [int(v) for v in io.attr("densities", [])]
    if len(sizes) != len(densities) or not ratios:
        raise io.error("fixed_sizes and densities must pair up and fixed_ratios must not be empty")
    step_average = int((step_w + step_h) * 0.5)
    # Offsets of each prior from the cell centre, and its half extents, in the order the kernel emits them.
    dx, dy, half_w, half_h = [], [], [], []
    for size, density in zip(sizes, densities):
        shift = step_average // density  # integer division, as the C++ kernel's int arithmetic
        for ratio in ratios:
            grid = np.arange(density) * shift + shift / 2.0 - step_average / 2.0
            rows, cols = np.meshgrid(grid, grid, indexing="ij")
            dx.extend(cols.reshape(-1))
            dy.extend(rows.reshape(-1))
            half_w.extend([size * math.sqrt(ratio) / 2.0] * density * density)
            half_h.extend([size / math.sqrt(ratio) / 2.0] * density * density)
    dx, dy, half_w, half_h = map(np.asarray, (dx, dy, half_w, half_h))
    cx = ((np.arange(feature_w) + offset) * step_w)[None, :, None] + dx[None, None, :]
    cy = ((np.arange(feature_h) + offset) * step_h)[:, None, None] + dy[None, None, :]
    cx, cy = np.broadcast_arrays(cx, cy)
    boxes = np.stack([np.maximum((cx - half_w) / image_w, 0.0), np.maximum((cy - half_h) / image_h, 0.0),
                      np.minimum((cx + half_w) / image_w, 1.0), np.minimum((cy + half_h) / image_h, 1.0)], axis=-1)
    if io.attr("clip", False):
        boxes = np.clip(boxes, 0.0, 1.0)
    variances = np.broadcast_to(np.asarray(io.attr("variances", [0.1, 0.1, 0.2, 0.2]), np.float64), boxes.shape)
    if io.attr("flatten_to_2d", False):
        boxes, variances = boxes.reshape(-1, 4), variances.reshape(-1, 4)
    io.set_output("Boxes", boxes.astype(feature.dtype))
    io.set_output("Variances", np.ascontiguousarray(variances).astype(feature.dtype))


# -- nms, box_clip ----------------------------------------------------------------------------------------------
def round_half_away(x: np.ndarray) -> np.ndarray:
    """C's round(): halves away from zero (numpy's round goes to even), in x's own dtype."""
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole)


def _nms_overlapping(kept: np.ndarray, boxes: np.ndarray, threshold: np.float32) -> np.ndarray:
    """Which of `boxes` [K, 4] the kept box [4] suppresses: IoU > threshold in the boxes' dtype, the
    way Paddle's nms kernel (CalculateIoU) computes it, which differs from the JaccardOverlap of the
    multiclass NMS family above: no +1 pixel, no zero area for inverted boxes, no "apart" rule, and a
    zero or NaN union gives NaN, which suppresses nothing. Its ternaries keep their NaN choices."""
    x0 = np.where(kept[0] > boxes[:, 0], kept[0], boxes[:, 0])
    y0 = np.where(kept[1] > boxes[:, 1], kept[1], boxes[:, 1])
    x1 = np.where(kept[2] < boxes[:, 2], kept[2], boxes[:, 2])
    y1 = np.where(kept[3] < boxes[:, 3], kept[3], boxes[:, 3])
    zero = boxes.dtype.type(0)
    width = np.where(x1 - x0 > 0, x1 - x0, zero)
    height = np.where(y1 - y0 > 0, y1 - y0, zero)
    inter = width * height
    union = (kept[2] - kept[0]) * (kept[3] - kept[1]) + (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = union - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / union > threshold


@host_kernel("nms")
def nms(io: OpScope) -> None:
    """Paddle's nms (paddle.vision.ops.nms; its scores and categories forms are other ops around this one):
    the boxes are taken in their given order, each box not yet suppressed is kept and suppresses every later
    box whose IoU with it exceeds iou_threshold. KeepBoxesIdxs: the kept boxes' indices, ascending, int64."""
    boxes = io.input("Boxes")
    if boxes.dtype not in (np.float32, np.float64):
        raise io.error(f"Boxes must be float32 or float64, got {boxes.dtype}")
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise io.error(f"Boxes must be [num_boxes, 4] (x1, y1, x2, y2), got shape {list(boxes.shape)}")
    threshold = np.float32(io.attr("iou_threshold", 0.3))
    remaining = np.arange(boxes.shape[0])
    kept = []
    while remaining.size:
        first, rest = remaining[0], remaining[1:]
        kept.append(first)
        remaining = rest[~_nms_overlapping(boxes[first], boxes[rest], threshold)]
    io.set_output("KeepBoxesIdxs", np.asarray(kept, np.int64))


@host_kernel("box_clip")
def box_clip(io: OpScope) -> None:
    """Paddle's box_clip (ClipTiledBoxes): x1, x2 clipped to [0, round(w / scale) - 1] and y1, y2 to
    [0, round(h / scale) - 1] of the image's ImInfo row (h, w, scale); a NaN coordinate stays NaN. Paddle splits
    the boxes into images by their LoD; without one the boxes are one image, so ImInfo must hold one row."""
    boxes, im_info = io.input("Input"), io.input("ImInfo")
    if boxes.dtype not in (np.float32, np.float64):
        raise io.error(f"Input must be float32 or float64, got {boxes.dtype}")
    if boxes.ndim < 1 or boxes.shape[-1] != 4:
        raise io.error(f"Input's last axis must hold 4 coordinates, got shape {list(boxes.shape)}")
    if im_info.shape != (1, 3):
        raise io.error(f"ImInfo must be one image's [1, 3] (height, width, scale), got shape {list(im_info.shape)}: "
                       "without a LoD (the host carries none) the boxes are one image")
    info = im_info[0].astype(boxes.dtype)
    limit_h = round_half_away(info[0] / info[2]) - 1
    limit_w = round_half_away(info[1] / info[2]) - 1
    limits = np.asarray([limit_w, limit_h, limit_w, limit_h], boxes.dtype)
    # std::max(std::min(v, limit), 0) keeps v when v is NaN: numpy's minimum and maximum do too
    io.set_output("Output", np.maximum(np.minimum(boxes, limits), boxes.dtype.type(0)))


# -- roi_pool, psroi_pool -------------------------------------------------------------------------------------
def _roi_images(io: OpScope, rois: np.ndarray, batch: int) -> np.ndarray:
    """The image index of each RoI, from RoisNum (RoIs listed image by image) or, without it, image 0 of a batch
    of one (Paddle reads a LoD there, which the host does not carry)."""
    if rois.ndim != 2 or rois.shape[1] != 4:
        raise io.error(f"ROIs must be [num_rois, 4] (x1, y1, x2, y2), got shape {list(rois.shape)}")
    if not io.has_input("RoisNum"):
        if batch != 1:
            raise io.error(f"X holds {batch} images and there is no RoisNum to assign the RoIs to them "
                           "(the host carries no LoD): give RoisNum, or a batch of one")
        return np.zeros(rois.shape[0], np.int64)
    counts = io.input("RoisNum").astype(np.int64).reshape(-1)
    if counts.size != batch:
        raise io.error(f"RoisNum holds {counts.size} counts, X holds {batch} images: one count per image")
    if (counts < 0).any() or int(counts.sum()) != rois.shape[0]:
        raise io.error(f"RoisNum {counts.tolist()} must be >= 0 and add up to the {rois.shape[0]} RoIs")
    return np.repeat(np.arange(batch), counts)


def _bin_taps(starts: np.ndarray, ends: np.ndarray):
    """(positions, inside) for each tap offset of the longest [start, end) bin, in order: every bin's start +
    offset, and which bins that position still falls in (the caller clamps positions past the map to gather)."""
    longest = int((ends - starts).max()) if starts.size else 0
    for offset in range(longest):
        positions = starts + offset
        yield positions, positions < ends


def _roi_feature_map(io: OpScope) -> np.ndarray:
    """The RoI pools' X: a float32 / float64 [N, C, H, W] feature map."""
    x = io.input("X")
    if x.dtype not in (np.float32, np.float64):
        raise io.error(f"X must be float32 or float64, got {x.dtype}")
    if x.ndim != 4:
        raise io.error(f"X must be [N, C, H, W], got shape {list(x.shape)}")
    return x


@host_kernel("roi_pool")
def roi_pool(io: OpScope) -> None:
    """Paddle's roi_pool (Fast R-CNN): each RoI's corners scaled by spatial_scale and rounded (half away from
    zero) to whole pixels, at least 1 x 1, cut into pooled_height x pooled_width bins of floor/ceil extents
    (float32 arithmetic) clipped to the map; Out is each bin's max (0 for an empty bin; NaN never wins), Argmax
    its first maximum's flat h * W + w position in row-major order (-1 when none), int64."""
    x, rois = _roi_feature_map(io), io.input("ROIs")
    batch, channels, height, width = x.shape
    pooled_h, pooled_w = int(io.attr("pooled_height", 1)), int(io.attr("pooled_width", 1))
    if pooled_h <= 0 or pooled_w <= 0:
        raise io.error(f"pooled_height and pooled_width must be > 0, got {pooled_h} and {pooled_w}")
    images = _roi_images(io, rois, batch)
    scaled = round_half_away(rois.astype(x.dtype) * np.float32(io.attr("spatial_scale", 1.0))).astype(np.int64)
    box_h = np.maximum(scaled[:, 3] - scaled[:, 1] + 1, 1).astype(np.float32)
    box_w = np.maximum(scaled[:, 2] - scaled[:, 0] + 1, 1).astype(np.float32)

    def bins(box_size, box_start, pooled, size):
        step = (box_size / np.float32(pooled))[:, None]
        index = np.arange(pooled, dtype=np.float32)[None]
        start = np.floor(index * step).astype(np.int64) + box_start[:, None]
        end = np.ceil((index + np.float32(1)) * step).astype(np.int64) + box_start[:, None]
        return np.clip(start, 0, size), np.clip(end, 0, size)

    h_start, h_end = bins(box_h, scaled[:, 1], pooled_h, height)
    w_start, w_end = bins(box_w, scaled[:, 0], pooled_w, width)
    empty = (h_end <= h_start)[:, None, :, None] | (w_end <= w_start)[:, None, None, :]
    shape = (rois.shape[0], channels, pooled_h, pooled_w)
    out = np.broadcast_to(np.where(empty, x.dtype.type(0), -np.finfo(x.dtype).max), shape).astype(x.dtype)
    argmax = np.full(shape, -1, np.int64)
    image = images[:, None, None, None]
    channel = np.arange(channels)[None, :, None, None]
    for h, h_inside in _bin_taps(h_start, h_end):
        h_at = np.minimum(h, height - 1)[:, None, :, None]
        for w, w_inside in _bin_taps(w_start, w_end):
            w_at = np.minimum(w, width - 1)[:, None, None, :]
            value = x[image, channel, h_at, w_at]
            take = h_inside[:, None, :, None] & w_inside[:, None, None, :] & (value > out)
            np.copyto(out, value, where=take)
            np.copyto(argmax, np.broadcast_to(h_at * width + w_at, shape), where=take)
    io.set_output("Out", out)
    io.set_output("Argmax", argmax)


@host_kernel("psroi_pool")
def psroi_pool(io: OpScope) -> None:
    """Paddle's psroi_pool (R-FCN's position-sensitive RoI pooling): X's channels are output_channels groups of
    pooled_height x pooled_width score maps; output channel c's bin (ph, pw) averages map (c * PH + ph) * PW + pw
    over the bin. RoI corners are rounded (half away from zero), the far ones + 1, then scaled; a RoI is at least
    0.1 x 0.1; bins have floor/ceil extents clipped to the map, in X's dtype; an empty bin is 0. The sum runs in
    X's dtype in row-major order, as Paddle's."""
    x, rois = _roi_feature_map(io), io.input("ROIs")
    batch, channels, height, width = x.shape
    pooled_h, pooled_w = int(io.attr("pooled_height", 1)), int(io.attr("pooled_width", 1))
    out_channels = int(io.attr("output_channels", 1))
    if pooled_h <= 0 or pooled_w <= 0 or channels != out_channels * pooled_h * pooled_w:
        raise io.error(f"X's {channels} channels must be output_channels x pooled_height x pooled_width "
                       f"({out_channels} x {pooled_h} x {pooled_w}), all > 0")
    images = _roi_images(io, rois, batch)
    real = x.dtype.type
    scale = np.float32(io.attr("spatial_scale", 1.0))
    corners = round_half_away(rois.astype(x.dtype))
    start_w, start_h = corners[:, 0] * scale, corners[:, 1] * scale
    end_w, end_h = (corners[:, 2] + real(1)) * scale, (corners[:, 3] + real(1)) * scale
    step_h = (np.maximum(end_h - start_h, real(0.1)) / real(pooled_h))[:, None]
    step_w = (np.maximum(end_w - start_w, real(0.1)) / real(pooled_w))[:, None]

    def bins(step, start, pooled, size):
        index = np.arange(pooled, dtype=x.dtype)[None]
        first = np.floor(index * step + start[:, None]).astype(np.int64)
        last = np.ceil((index + real(1)) * step + start[:, None]).astype(np.int64)
        return np.clip(first, 0, size), np.clip(last, 0, size)

    h_start, h_end = bins(step_h, start_h, pooled_h, height)
    w_start, w_end = bins(step_w, start_w, pooled_w, width)
    shape = (rois.shape[0], out_channels, pooled_h, pooled_w)
    total = np.zeros(shape, x.dtype)
    image = images[:, None, None, None]
    # the score map each (output channel, bin) reads: [1, C_out, PH, PW]
    source = ((np.arange(out_channels)[:, None, None] * pooled_h + np.arange(pooled_h)[:, None]) * pooled_w +
              np.arange(pooled_w))[None]
    for h, h_inside in _bin_taps(h_start, h_end):
        h_at = np.minimum(h, height - 1)[:, None, :, None]
        for w, w_inside in _bin_taps(w_start, w_end):
            w_at = np.minimum(w, width - 1)[:, None, None, :]
            inside = h_inside[:, None, :, None] & w_inside[:, None, None, :]
            total = total + np.where(inside, x[image, source, h_at, w_at], real(0))
    area = ((h_end - h_start)[:, None, :, None] * (w_end - w_start)[:, None, None, :]).astype(x.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        io.set_output("Out", np.where(area > 0, total / area, real(0)))


# -- bipartite_match ----------------------------------------------------------------------------------------
BIPARTITE_SORTED_ROWS = 130  # from this many rows Paddle matches by walking the sorted pairs


def _bipartite_greedy(dist: np.ndarray, indices: np.ndarray, matched: np.ndarray) -> None:
    """Paddle's BipartiteMatch below 130 rows: repeatedly the largest distance >= 1e-6 between a free row and a free
    column (NaN never), the first in column-major order on ties, until no such pair is left."""
    eps = dist.dtype.type(1e-6)
    usable = np.where(dist >= eps, dist, -np.inf)  # NaN >= eps is false: never matched
    row_free = np.ones(dist.shape[0], bool)
    col_free = np.ones(dist.shape[1], bool)
    for _ in range(min(dist.shape)):
        candidates = np.where(row_free[:, None] & col_free[None, :], usable, -np.inf)
        flat = int(np.argmax(candidates.T))  # column-major: the first maximum in (column, row) order
        col, row = divmod(flat, dist.shape[0])
        if candidates[row, col] == -np.inf:
            break
        indices[col], matched[col] = row, dist[row, col]
        row_free[row], col_free[col] = False, False


def _bipartite_sorted(dist: np.ndarray, indices: np.ndarray, matched: np.ndarray) -> None:
    """Paddle's BipartiteMatch from 130 rows: every (row, column) pair in row-major order, sorted by distance
    descending with std::sort (equal distances and NaN in its order, replayed), then taken in that order while both
    are free and the distance is > 0, until every row has a match."""
    values = dist.reshape(-1)
    positive = values[values > 0]
    if np.isnan(values).any() or np.unique(positive).size != positive.size:
        keys = values.tolist()
        order = std_sort_order(lambda a, b: keys[a] > keys[b], len(keys))
    else:  # no tie a match could depend on: the one descending order of the positive distances
        order = np.argsort(-np.where(values > 0, values, 0), kind="stable").tolist()
    rows, cols = dist.shape
    row_free = np.ones(rows, bool)
    found = 0
    for flat in order:
        if found >= rows:
            break
        row, col = divmod(flat, cols)
        if indices[col] == -1 and row_free[row] and values[flat] > 0:
            indices[col], matched[col] = row, values[flat]
            row_free[row] = False
            found += 1


@host_kernel("bipartite_match")
def bipartite_match(io: OpScope) -> None:
    """Paddle's BipartiteMatchKernel: DistMat [rows, columns] (float32 / float64; rows are ground truth, columns
    priors) -> ColToRowMatchIndices [1, columns] int32 (each column's row, -1 when none) and ColToRowMatchDist
    [1, columns]. match_type 'per_prediction' then gives each column still free the row of its largest distance if
    that is >= dist_threshold (and >= 1e-6), the first such row on ties. The LoD form (instances stacked by a LoD)
    is read as one instance: the host carries no LoD."""
    dist = io.input("DistMat")
    require(io, dist, FLOATS)
    if dist.ndim != 2:
        raise io.error(f"DistMat must be 2-D [rows, columns], got shape {list(dist.shape)}")
    match_type = str(io.attr("match_type", "bipartite"))
    if match_type not in ("bipartite", "per_prediction"):
        raise io.error(f"match_type '{match_type}' is not 'bipartite' or 'per_prediction'")
    indices = np.full(dist.shape[1], -1, np.int32)
    matched = np.zeros(dist.shape[1], dist.dtype)
    if dist.shape[0] >= BIPARTITE_SORTED_ROWS:
        _bipartite_sorted(dist, indices, matched)
    else:
        _bipartite_greedy(dist, indices, matched)
    if match_type == "per_prediction" and dist.shape[0]:
        threshold = dist.dtype.type(float(io.attr("dist_threshold", 0.5)))
        usable = np.where((dist >= dist.dtype.type(1e-6)) & (dist >= threshold), dist, -np.inf)
        best = np.argmax(usable, axis=0)  # the first row of the largest distance
        best_value = usable[best, np.arange(dist.shape[1])]
        take = (indices == -1) & (best_value > -np.inf)
        indices[take] = best[take]
        matched[take] = best_value[take]
    io.set_output("ColToRowMatchIndices", indices[None, :])
    io.set_output("ColToRowMatchDist", matched[None, :])
