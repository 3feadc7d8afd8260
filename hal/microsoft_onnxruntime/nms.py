"""microsoft_onnxruntime's NON_MAX_SUPPRESSION: Paddle's multiclass_nms3 composed around ONNX
NonMaxSuppression, which does the per-class greedy suppression; ONNX ops around it do the rest.

Registers into the operation table of hal.microsoft_onnxruntime.operations; imports nothing from loader,
converters or partition.

The composition (checked against Paddle 3.3.1 on fuzzed inputs with clustered boxes, tied scores and
overlaps on the threshold):
- background_label: that class's scores become -inf, under any threshold.
- nms_top_k: Paddle keeps a class's nms_top_k best candidates before suppressing; TopK (ties to the lower
  index, Paddle's stable order) picks them and ScatterElements writes them over -inf.
- NonMaxSuppression keeps a score > score_threshold and suppresses an overlap > iou_threshold, as Paddle;
  it selects by score with ties to the lower box index, and lists (image, class, box) by image, class and
  selection order: Paddle's order when keep_top_k is off.
- keep_top_k: each class stops after keep_top_k selections (max_output_boxes_per_class: the later ones cannot
  make the cut); the selections sorted by image, then score, then that order (two TopKs; TopK is stable on
  ties), ranked within their image, cut at keep_top_k, then sorted back by (image, class).
- rows [label, score, box], index image * M + box and the per-image counts come from the selections.
What it declines, with the reason: pixel boxes (normalized False: NonMaxSuppression has no +1 convention),
adaptive NMS that acts (nms_eta < 1 with nms_threshold > 0.5), a negative nms_threshold, the second (LoD)
input form, polygons, an unknown class count.
Data it cannot see in advance: NonMaxSuppression orders each box's corners and never suppresses with a box of
no area, where Paddle takes x2 < x1 as given and a zero union as an overlap of NaN (suppressing). SSD's priors
clipped to the image edge decode to boxes without area; a run with a candidate box (a score past score_threshold)
without positive area is a device fault (GraphBuilder.faults, hal.common.DEGENERATE_CANDIDATES): the part runs
elsewhere, exactly.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from hal.common import DEGENERATE_CANDIDATES, Unsupported, nms_unsupported_reason, unpack
from hal.microsoft_onnxruntime.graph import GraphBuilder
from hal.microsoft_onnxruntime.operations import OPERATIONS
from nnadapter_bridge.nnadapter.codes import OperationType as T


def _column(g: GraphBuilder, selected: str, k: int) -> str:
    """Column k of the [K, 3] selections, [K] int64."""
    return g.one("Gather", [selected, g.scalar(k, np.int64)], axis=1)


def _stable_order(g: GraphBuilder, key: str, count: str) -> str:
    """Positions that sort the float [K] `key` descending, equal keys in position order (TopK's tie rule)."""
    _, order = g.node("TopK", [key, count], 2, axis=0, largest=1, sorted=1)
    return order


def _per_image_counts(g: GraphBuilder, image: str, batch: str) -> str:
    """[N] int64: how many of the [K] image indices equal each image 0 .. N-1."""
    images = g.one("Range", [g.scalar(0, np.int64), batch, g.scalar(1, np.int64)])
    hits = g.one("Equal", [g.one("Unsqueeze", [image, g.i64([1])]), g.one("Unsqueeze", [images, g.i64([0])])])
    return g.one("ReduceSum", [g.one("Cast", [hits], to=TensorProto.INT64), g.i64([0])], keepdims=0)


def _degenerate_candidates(g: GraphBuilder, boxes: str, scores: str, score_threshold: float) -> str:
    """A boolean scalar, true when a box that is a candidate of some class (score > score_threshold; `scores`
    [N, C, M] with the background and the boxes past nms_top_k at -inf) has no positive area (or is inverted):
    `boxes` [N, M, 4]."""
    best = g.one("ReduceMax", [scores, g.i64([1])], keepdims=0)
    candidate = g.one("Greater", [best, g.scalar(score_threshold, np.float32)])
    corners = [g.one("Gather", [boxes, g.scalar(k, np.int64)], axis=2) for k in range(4)]
    width, height = g.one("Sub", [corners[2], corners[0]]), g.one("Sub", [corners[3], corners[1]])
    zero = g.scalar(0, np.float32)
    upright = g.one("And", [g.one("And", [g.one("Greater", [width, zero]), g.one("Greater", [height, zero])]),
                            g.one("Greater", [g.one("Mul", [width, height]), zero])])
    return g.any_true(g.one("And", [candidate, g.one("Not", [upright])]))


@OPERATIONS.implements(T.NON_MAX_SUPPRESSION)
def non_max_suppression(g: GraphBuilder, op):
    reason = nms_unsupported_reason(op)
    if reason:
        raise Unsupported(f"{op.label()}: {reason}")
    args = unpack(op)
    boxes, scores = g.x(op, 0), g.x(op, 1)
    n_classes = op.inputs[1].type.dims[1]
    background = args.int("background_label")
    nms_top_k, keep_top_k = args.int("nms_top_k"), args.int("keep_top_k")
    minus_inf = g.scalar(-np.inf, np.float32)

    if 0 <= background < n_classes:
        is_background = np.zeros((1, n_classes, 1), bool)
        is_background[0, background, 0] = True
        scores = g.one("Where", [g.const(is_background), minus_inf, scores])
    scores_shape = g.one("Shape", [scores])
    n_boxes = g.one("Slice", [scores_shape, g.i64([2]), g.i64([3]), g.i64([0])])  # [1]
    if nms_top_k > -1:
        k = g.one("Min", [n_boxes, g.i64([nms_top_k])])
        best, where = g.node("TopK", [scores, k], 2, axis=2, largest=1, sorted=1)
        scores = g.one("ScatterElements", [g.one("Expand", [minus_inf, scores_shape]), where, best], axis=2)

    # NonMaxSuppression never suppresses with a box without area and orders an inverted box's corners; Paddle takes a
    # zero union as an overlap of NaN (suppressing) and the corners as given (SSD's priors clipped to the image edge
    # decode to boxes without area). A candidate box without positive area is a fault: the part runs elsewhere.
    g.faults.append((_degenerate_candidates(g, boxes, scores, args.float("score_threshold")),
                     f"{op.label()}: {DEGENERATE_CANDIDATES}", op))

    # A class's selections come in score order, and the keep_top_k kept over all classes never reach past its
    # first keep_top_k (those all rank before the next, equal scores too: the order is stable), so each class stops
    # there. NonMaxSuppression then compares each candidate with at most keep_top_k kept boxes instead of all of
    # them (PicoDet at 1 thread: 88 ms of NonMaxSuppression with 80 classes of up to 1000 candidates).
    per_class = keep_top_k if keep_top_k > -1 else np.iinfo(np.int32).max
    selected = g.one("NonMaxSuppression", [
        boxes, scores, g.i64([per_class]), g.const(np.array([args.float("nms_threshold")], np.float32)),
        g.const(np.array([args.float("score_threshold")], np.float32))], center_point_box=0)
    image, label, box = (_column(g, selected, k) for k in range(3))
    batch = g.one("Squeeze", [g.one("Slice", [scores_shape, g.i64([0]), g.i64([1]), g.i64([0])]), g.i64([0])])
    if keep_top_k > -1:
        count = g.one("Shape", [image])  # [1]: K
        score = g.one("GatherND", [scores, selected])
        by_score = _stable_order(g, score, count)
        image_by_score = g.one("Gather", [image, by_score])
        # Stable: within an image the score order (ties in selection order) stays.
        by_image = g.one("Gather", [by_score, _stable_order(g, g.one("Neg", [g.one("Cast", [image_by_score],
                                                                                    to=TensorProto.FLOAT)]), count)])
        image_sorted = g.one("Gather", [image, by_image])
        starts = g.one("CumSum", [_per_image_counts(g, image_sorted, batch), g.scalar(0, np.int64)], exclusive=1)
        position = g.one("Range", [g.scalar(0, np.int64), g.one("Squeeze", [count, g.i64([0])]),
                                   g.scalar(1, np.int64)])
        rank = g.one("Sub", [position, g.one("Gather", [starts, image_sorted])])
        kept = g.one("Compress", [by_image, g.one("Less", [rank, g.i64([keep_top_k])])], axis=0)
        # Back to Paddle's grouping: by image, then label; each label's boxes stay in score order.
        group = g.one("Add", [g.one("Mul", [g.one("Gather", [image, kept]), g.i64([n_classes])]),
                              g.one("Gather", [label, kept])])
        group_key = g.one("Neg", [g.one("Cast", [group], to=TensorProto.FLOAT)])
        final = g.one("Gather", [kept, _stable_order(g, group_key, g.one("Shape", [kept]))])
        image, label, box = (g.one("Gather", [column, final]) for column in (image, label, box))
    row_box = g.one("Add", [g.one("Mul", [image, n_boxes]), box])  # image * M + box
    flat_boxes = g.one("Reshape", [boxes, g.i64([-1, 4])])
    flat_scores = g.one("Reshape", [g.x(op, 1), g.i64([-1])])
    score_at = g.one("Add", [g.one("Mul", [g.one("Add", [g.one("Mul", [image, g.i64([n_classes])]), label]),
                                           n_boxes]), box])  # (image * C + label) * M + box
    rows = g.one("Concat", [g.one("Unsqueeze", [g.one("Cast", [label], to=TensorProto.FLOAT), g.i64([1])]),
                            g.one("Unsqueeze", [g.one("Gather", [flat_scores, score_at]), g.i64([1])]),
                            g.one("Gather", [flat_boxes, row_box])], axis=1)
    g.one("Identity", [rows], g.out(op, 0))
    g.one("Cast", [_per_image_counts(g, image, batch)], g.out(op, 1), to=TensorProto.INT32)
    if len(op.outputs) > 2 and op.outputs[2] is not None:
        g.one("Cast", [row_box], g.out(op, 2), to=TensorProto.INT32)
