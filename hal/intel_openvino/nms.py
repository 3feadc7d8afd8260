"""intel_openvino's NON_MAX_SUPPRESSION: Paddle's multiclass_nms3 as OpenVINO's MulticlassNms (opset 9),
the operation OpenVINO made for it, with the attribute mapping that makes its answer Paddle's exactly.

Registers into the operation table of hal.intel_openvino.operations; imports nothing from loader,
converters or partition.

Where the two differ, and what this module does about it (checked against Paddle 3.3.1 on fuzzed inputs
with clustered boxes, tied scores and overlaps on the threshold):
- thresholds: MulticlassNms keeps a score >= score_threshold and suppresses an overlap >= iou_threshold;
  Paddle keeps a score > score_threshold and suppresses an overlap > nms_threshold. Both compare float32
  values, so both thresholds are passed as the next float32 above Paddle's.
- nms_eta: Paddle shrinks the threshold only while it is above 0.5, so with nms_threshold <= 0.5 eta never
  acts and 1 is passed. Above 0.5 the shrunk threshold is computed from Paddle's own value, which the
  raised one would change: declined.
- the second input form (bboxes [M, C, 4], scores [M, C], rois_num): Paddle lists a class's survivors by
  box index there and numbers them per (box, class); MulticlassNms does neither: declined.
- a negative nms_threshold (every pair suppresses, even disjoint boxes): not checked against OpenVINO,
  declined.
Output order: sort_result_type "classid" (by class, then by score, ties by box index) without sorting across
the batch is Paddle's order, keep_top_k included.
Data it cannot see in advance: candidate boxes without area (x2 <= x1 or y2 <= y1): Paddle takes inverted
corners as given and a zero union as an overlap of NaN (suppressing), MulticlassNms does neither, so such
boxes can end differently. Detector heads produce upright boxes of positive area.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.operations.detection import nms_is_lod_form
from hal.common import Unsupported, unpack
from hal.intel_openvino.graph import opset
from hal.intel_openvino.operations import OPERATIONS


def _next_float32_above(value: float) -> float:
    """The smallest float32 greater than `value`: turns ">= t'" into Paddle's "> t" on float32 values."""
    return float(np.nextafter(np.float32(value), np.float32(np.inf)))


def nms_unsupported_reason(op) -> str:
    """Why MulticlassNms cannot give Paddle's answer for this NON_MAX_SUPPRESSION, or ""."""
    args = unpack(op)
    if nms_is_lod_form(op):
        return ("the second input form (scores [M, C] with rois_num): Paddle orders a class's survivors by box "
                "index and numbers them per (box, class), MulticlassNms does neither")
    if op.inputs[0].type.dims[-1] != 4:
        return f"boxes with {op.inputs[0].type.dims[-1]} coordinates (polygons): MulticlassNms takes 4"
    nms_threshold, eta = args.float("nms_threshold"), args.float("nms_eta")
    if not nms_threshold >= 0:
        return f"nms_threshold {nms_threshold:.6g} is negative"
    if eta < 1 and nms_threshold > 0.5:
        return (f"adaptive NMS (nms_eta {eta:.6g} with nms_threshold {nms_threshold:.6g} > 0.5): the shrinking "
                "threshold would start from the raised float32 value MulticlassNms needs, not from Paddle's")
    return ""


@OPERATIONS.implements(T.NON_MAX_SUPPRESSION)
def non_max_suppression(b, op):
    reason = nms_unsupported_reason(op)
    if reason:
        raise Unsupported(f"{op.label()}: {reason}")
    args = unpack(op)
    nms = opset.multiclass_nms(
        b.value(op.inputs[0]), b.value(op.inputs[1]), sort_result_type="classid", sort_result_across_batch=False,
        output_type="i32", iou_threshold=_next_float32_above(args.float("nms_threshold")),
        score_threshold=_next_float32_above(args.float("score_threshold")), nms_top_k=args.int("nms_top_k"),
        keep_top_k=args.int("keep_top_k"), background_class=args.int("background_label"), nms_eta=1.0,
        normalized=args.bool("normalized"))
    selected, indices, per_image = nms.output(0), nms.output(1), nms.output(2)
    want_index = len(op.outputs) > 2 and op.outputs[2] is not None
    index = opset.squeeze(indices, opset.constant(np.array([1], np.int64))).output(0) if want_index else None
    return [selected, per_image, index][:len(op.outputs)]

