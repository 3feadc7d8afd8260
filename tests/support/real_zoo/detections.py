"""The zoo's detection lists, compared as Paddle's order leaves them defined: `DETECTION_LISTS` (the models whose
first output is one) and `tied_row_orders` (rows of tied scores put in one order). Shared by tests/e2e/test_real_zoo.py
and benchmarks/bench_zoo.py, so that the bench's "vs Paddle" check is the test's. Imports numpy only.
"""
from __future__ import annotations

import numpy as np

# Models whose first output is a detection list [N, 6] (label, score, x1, y1, x2, y2) in descending score order.
# Boxes whose scores agree within the tolerance may come out in either order (top-k and NMS order equal scores by
# their index, and float rounding decides which of two near-equal scores is larger: RT-DETR's top-k over 300x80
# sigmoid scores meets such pairs), so rows are compared as a set within each run of tied scores.
DETECTION_LISTS = {"picodet", "ppyoloe_plus", "rtdetr", "yolov3", "ssd", "ppyolov2", "centernet", "faster_rcnn",
                   "mask_rcnn", "cascade_rcnn", "deformable_detr", "dino", "yolox", "fcos", "retinanet", "gfl", "tood",
                   "blazeface", "ttfnet", "yolof"}


def tied_row_orders(got, want):
    """Row orders (got_order, want_order) that put the rows of each run of tied scores of `got` and `want` ([N, 6]
    detection lists; `want`'s scores within DESIGN.md's model tolerance of the run's first) in one order: their
    order is not defined. `want`'s rows are sorted by (label, box) and each takes the nearest row of `got`'s block
    still free (label first), so that two boxes whose coordinates differ by rounding are not compared crosswise."""
    scores = want[:, 1].astype(np.float64)
    bound = 1e-4 * np.abs(scores) + 1e-5 * float(np.max(np.abs(want))) if len(want) else scores
    got_order, want_order = np.arange(len(got)), np.arange(len(want))
    start = 0
    while start < len(want):
        end = start + 1
        while end < len(want) and abs(scores[end] - scores[start]) <= bound[start]:
            end += 1
        if end - start > 1 and len(got) >= end:
            block = want[start:end]
            sorted_rows = np.lexsort(block[:, [5, 4, 3, 2, 0]].T)
            want_order[start:end] = start + sorted_rows
            free = list(range(start, end))
            for k, row in enumerate(block[sorted_rows]):
                distance = [(got[j][0] != row[0], float(np.max(np.abs(got[j].astype(np.float64) - row))))
                            for j in free]
                got_order[start + k] = free.pop(distance.index(min(distance)))
        start = end
    return got_order, want_order
