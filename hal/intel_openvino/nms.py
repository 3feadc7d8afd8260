"""intel_openvino's NON_MAX_SUPPRESSION: Paddle's multiclass_nms3 composed around OpenVINO's NonMaxSuppression
(opset 9); `non_max_suppression` registers into the operation table of hal.intel_openvino.operations. Imports
this driver's graph, int64 (`any_true`) and operations, hal.common and the standard; nothing from loader,
converters or partition.
Why not MulticlassNms, the composition and what it declines: docs/architecture.md, "NON_MAX_SUPPRESSION on
intel_openvino".
"""
from __future__ import annotations

import numpy as np

from hal.common import DEGENERATE_CANDIDATES, Unsupported, nms_unsupported_reason, unpack
from hal.intel_openvino.graph import i64, opset
from hal.intel_openvino.int64 import any_true
from hal.intel_openvino.operations import OPERATIONS
from nnadapter_bridge.nnadapter.codes import OperationType as T


def _iou_threshold(nms_threshold: float) -> np.float32:
    """The iou_threshold whose ">=" is Paddle's "> nms_threshold" on float32 overlaps: the next float32 above,
    at least the smallest normal one (the CPU plugin flushes a denormal threshold to 0; an overlap under
    1.2e-38 would need an intersection that small, which box coordinates cannot make)."""
    above = np.nextafter(np.float32(nms_threshold), np.float32(np.inf))
    return max(above, np.finfo(np.float32).tiny)


def _out(node):
    return node.output(0)


def _scalar_i64(value: int):
    return _out(opset.constant(np.int64(value)))


def _first_k(values, k, axis: int, extra_keep=None):
    """Mask of the k largest `values` along `axis`, equal values taken in position order (Paddle's stable
    sort), without a stable sort (the CPU plugin's stable TopK is quadratic): everything above the k-th
    largest value, then as many of the values equal to it as are still needed, first positions first."""
    last = opset.unsqueeze(k, i64([0]))
    if axis == 2:
        # [N, C, M] along M: the CPU plugin's TopK is 2.6x faster along a middle axis (80 x 3549, k 1000:
        # 6.5 ms against 17 ms), so along M of [N, M, C], transposed back after.
        to_middle = i64([0, 2, 1])
        largest = opset.topk(opset.transpose(values, to_middle), k, 1, "max", "value", "i64", False).output(0)
        kth = opset.slice(largest, opset.subtract(last, _scalar_i64(1)), last, i64([1]), i64([1]))
        kth = _out(opset.transpose(kth, to_middle))
    else:
        largest = opset.topk(values, k, axis, "max", "value", "i64", False).output(0)
        # A Slice keeping the axis (Gather + Unsqueeze comes out wrong from the CPU plugin when dim 1 is 1).
        kth = _out(opset.slice(largest, opset.subtract(last, _scalar_i64(1)), last, i64([1]), i64([axis])))
    above = _out(opset.greater(values, kth))
    ties = _out(opset.equal(values, kth))
    # The count as the last running sum: the CPU plugin (2026.4) fuses a ReduceSum of this converted mask
    # with what follows into a wrong result (every count, or the second image's, off) when it is not a
    # model output; CumSum is computed as written.
    count_above = opset.slice(opset.cumsum(opset.convert(above, "i64"), _scalar_i64(axis)), i64([-1]),
                              i64([np.iinfo(np.int64).max]), i64([1]), i64([axis]))
    needed = opset.subtract(opset.broadcast(k, opset.shape_of(count_above, "i64")), count_above)
    tie_rank = opset.cumsum(opset.convert(ties, "i64"), _scalar_i64(axis), exclusive=True)
    return _out(opset.logical_or(above, opset.logical_and(ties, opset.less(tie_rank, needed))))


def _per_image_counts(image, batch):
    """[N] int64: how many of the [K] image indices equal each image 0 .. N-1."""
    images = _out(opset.range(_scalar_i64(0), batch, _scalar_i64(1), "i64"))
    hits = opset.equal(opset.unsqueeze(image, i64([1])), opset.unsqueeze(images, i64([0])))
    return _out(opset.reduce_sum(opset.convert(hits, "i64"), i64([0]), False))


def _as_float(x):
    return _out(opset.convert(x, "f32"))


def _degenerate_candidates(boxes, scores, score_threshold: float):
    """A boolean scalar, true when a box that is a candidate of some class (score > score_threshold; `scores`
    [N, C, M] with the background and the boxes past nms_top_k at -inf) has no positive area (or is inverted):
    `boxes` [N, M, 4]."""
    best = opset.reduce_max(scores, i64([1]), False)
    candidate = opset.greater(best, opset.constant(np.float32(score_threshold)))
    corners = [_out(opset.gather(boxes, _scalar_i64(k), _scalar_i64(2))) for k in range(4)]
    width, height = opset.subtract(corners[2], corners[0]), opset.subtract(corners[3], corners[1])
    zero = opset.constant(np.float32(0))
    upright = opset.logical_and(opset.logical_and(opset.greater(width, zero), opset.greater(height, zero)),
                                opset.greater(opset.multiply(width, height), zero))
    return any_true(opset.logical_and(candidate, opset.logical_not(upright)))


@OPERATIONS.implements(T.NON_MAX_SUPPRESSION)
def non_max_suppression(b, op):
    reason = nms_unsupported_reason(op)
    if reason:
        raise Unsupported(f"{op.label()}: {reason}")
    args = unpack(op)
    boxes, given_scores = b.value(op.inputs[0]), b.value(op.inputs[1])
    scores = given_scores
    n_classes = op.inputs[1].type.dims[1]
    background = args.int("background_label")
    nms_top_k, keep_top_k = args.int("nms_top_k"), args.int("keep_top_k")
    minus_inf = _out(opset.constant(np.float32(-np.inf)))

    if 0 <= background < n_classes:
        is_background = np.zeros((1, n_classes, 1), bool)
        is_background[0, background, 0] = True
        scores = _out(opset.select(opset.constant(is_background), minus_inf, scores))
    scores_shape = _out(opset.shape_of(scores, "i64"))
    n_boxes = _out(opset.gather(scores_shape, _scalar_i64(2), _scalar_i64(0)))
    if nms_top_k > -1:
        k = _out(opset.maximum(opset.minimum(n_boxes, _scalar_i64(nms_top_k)), _scalar_i64(1)))
        scores = _out(opset.select(_first_k(scores, k, 2), scores, minus_inf))

    # OpenVINO's NonMaxSuppression never suppresses with a box without area and orders an inverted box's corners;
    # Paddle takes a zero union as an overlap of NaN (suppressing) and the corners as given (SSD's priors clipped
    # to the image edge decode to boxes without area). A candidate box without positive area is a fault: the
    # part runs elsewhere.
    b.faults.append((_degenerate_candidates(boxes, scores, args.float("score_threshold")),
                     f"{op.label()}: {DEGENERATE_CANDIDATES}", op))

    # A class's selections come in score order and the keep_top_k kept over all classes never reach past its
    # first keep_top_k (they all rank before the next, equal scores too): each class stops there, and each
    # candidate is compared with at most keep_top_k kept boxes (as microsoft_onnxruntime's nms.py).
    per_class = keep_top_k if keep_top_k > -1 else np.iinfo(np.int32).max
    nms = opset.non_max_suppression(
        boxes, scores, _out(opset.constant(np.array([per_class], np.int64))),
        _out(opset.constant(_iou_threshold(args.float("nms_threshold")))),
        _out(opset.constant(np.float32(args.float("score_threshold")))),
        box_encoding="corner", sort_result_descending=False, output_type="i64")
    # Rows past valid_outputs are padding: cut them.
    selected = _out(opset.slice(nms.output(0), i64([0]), nms.output(2), i64([1]), i64([0])))
    image, label, box = (_out(opset.gather(selected, _scalar_i64(k), _scalar_i64(1))) for k in range(3))
    batch = _out(opset.gather(scores_shape, _scalar_i64(0), _scalar_i64(0)))
    if keep_top_k > -1:
        # The selections already come in Paddle's final order (image, label, then score, ties in selection
        # order): keep_top_k only drops some. An image keeps its keep_top_k best scores, ties in list order,
        # found in a dense [N, C * M] of the selected scores (-inf elsewhere).
        flat_position = opset.add(opset.multiply(label, n_boxes), box)
        per_image = opset.multiply(_scalar_i64(n_classes), n_boxes)
        dense = opset.broadcast(minus_inf, opset.concat([opset.unsqueeze(batch, i64([0])),
                                                         opset.unsqueeze(per_image, i64([0]))], 0))
        score = _out(opset.gather_nd(scores, selected))
        dense = _out(opset.scatter_nd_update(dense, opset.concat([opset.unsqueeze(image, i64([1])),
                                                                  opset.unsqueeze(flat_position, i64([1]))], 1),
                                             score))
        k = _out(opset.maximum(opset.minimum(per_image, _scalar_i64(keep_top_k)), _scalar_i64(1)))
        kept_dense = opset.convert(_first_k(dense, k, 1), "i64")
        kept = _out(opset.gather_nd(kept_dense, opset.concat([opset.unsqueeze(image, i64([1])),
                                                              opset.unsqueeze(flat_position, i64([1]))], 1)))
        final = _out(opset.squeeze(opset.non_zero(kept, "i64"), i64([0])))
        image, label, box = (_out(opset.gather(column, final, _scalar_i64(0))) for column in (image, label, box))
    row_box = _out(opset.add(opset.multiply(image, n_boxes), box))  # image * M + box
    flat_boxes = _out(opset.reshape(boxes, i64([-1, 4]), False))
    flat_scores = _out(opset.reshape(given_scores, i64([-1]), False))
    score_at = opset.add(opset.multiply(opset.add(opset.multiply(image, _scalar_i64(n_classes)), label), n_boxes),
                         box)  # (image * C + label) * M + box
    rows = _out(opset.concat([opset.unsqueeze(_as_float(label), i64([1])),
                              opset.unsqueeze(opset.gather(flat_scores, score_at, _scalar_i64(0)), i64([1])),
                              opset.gather(flat_boxes, row_box, _scalar_i64(0))], 1))
    counts = _out(opset.convert(_per_image_counts(image, batch), "i32"))
    want_index = len(op.outputs) > 2 and op.outputs[2] is not None
    index = _out(opset.convert(row_box, "i32")) if want_index else None
    return [rows, counts, index][:len(op.outputs)]
