"""NON_MAX_SUPPRESSION's vectorised reference (nnadapter/operations/detection.py) against Paddle's own
multiclass_nms3 kernel on seeded inputs made to break it: boxes in tight clusters on a coarse grid (overlaps
exactly on the threshold, identical boxes), boxes without area and inverted ones (Paddle's NaN overlaps),
scores on a coarse grid (ties within and across classes), every attribute varied, both input forms. Every
output must be equal, bit for bit: the reference computes in Paddle's float32 order.

Also: its two greedy algorithms (one step per kept box; the fixed point over suppressing pairs) agree, and
the pair sweep gives the same pairs when it works in small chunks.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.operations import detection
from nnadapter_bridge.nnadapter.operations.detection import (
    NmsAttributes,
    candidates_by_score,
    greedy_nms,
    greedy_nms_by_pairs,
    multiclass_nms,
    suppressing_pairs,
)


@pytest.fixture(scope="module")
def paddle():
    import paddle as paddle_module

    paddle_module.disable_static()
    return paddle_module


def clustered_boxes(rng, shape, extent: float, grid: float) -> np.ndarray:
    centres = rng.uniform(0.2, 0.8, (4, 2)) * extent
    pick = rng.integers(0, 4, shape)
    cx = centres[pick, 0] + rng.normal(0, extent * 0.03, shape)
    cy = centres[pick, 1] + rng.normal(0, extent * 0.03, shape)
    w, h = rng.uniform(0.1, 0.3, shape) * extent, rng.uniform(0.1, 0.3, shape) * extent
    return (np.round(np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1) / grid) * grid).astype(np.float32)


def random_case(seed: int):
    """(boxes, scores, rois_num or None, attrs) of one seeded case."""
    rng = np.random.default_rng(seed)
    normalized = bool(rng.integers(2))
    extent = 1.0 if normalized else 100.0
    classes = int(rng.integers(1, 5))
    attrs = NmsAttributes(background_label=int(rng.integers(-1, classes)),
                          score_threshold=float(rng.choice([0.0, 0.05, 0.3, 0.5])),
                          nms_top_k=int(rng.choice([-1, 3, 10, 40])),
                          nms_threshold=float(rng.choice([0.0, 0.3, 0.5, 0.6, 0.7, 0.9])),
                          nms_eta=float(rng.choice([1.0, 1.0, 0.9, 0.7])), keep_top_k=int(rng.choice([-1, 5, 20])),
                          normalized=normalized)
    grid = extent * float(rng.choice([0.05, 0.01, 1e-4]))
    if seed % 3 == 0:  # the LoD form
        rois_num = rng.integers(0, 30, 3).astype(np.int32)
        boxes = clustered_boxes(rng, (int(rois_num.sum()), classes), extent, grid)
        scores = (np.round(rng.uniform(0, 1, (int(rois_num.sum()), classes)) * 10) / 10).astype(np.float32)
    else:
        rois_num = None
        boxes = clustered_boxes(rng, (2, int(rng.integers(1, 80))), extent, grid)
        scores = (np.round(rng.uniform(0, 1, (2, classes, boxes.shape[1])) * 20) / 20).astype(np.float32)
    odd = rng.uniform(0, 1, boxes.shape[:-1]) < 0.2
    if seed % 4 == 1:  # boxes without area
        boxes[odd, 2:] = boxes[odd, :2]
    elif seed % 4 == 2:  # inverted boxes
        boxes[odd] = boxes[odd][:, [2, 3, 0, 1]]
    return boxes, scores, rois_num, attrs


@pytest.mark.parametrize("seed", range(40))
def test_reference_equals_paddles_kernel(paddle, seed):
    boxes, scores, rois_num, attrs = random_case(seed)
    out, counts, index = multiclass_nms(boxes, scores, rois_num, attrs)
    want_out, want_index, want_counts = paddle._C_ops.multiclass_nms3(
        paddle.to_tensor(boxes), paddle.to_tensor(scores), None if rois_num is None else paddle.to_tensor(rois_num),
        attrs.score_threshold, attrs.nms_top_k, attrs.keep_top_k, attrs.nms_threshold, attrs.normalized,
        attrs.nms_eta, attrs.background_label)
    np.testing.assert_array_equal(counts, want_counts.numpy())
    np.testing.assert_array_equal(index, want_index.numpy().reshape(-1))
    np.testing.assert_array_equal(out, want_out.numpy())


@pytest.mark.parametrize("seed", range(20))
def test_the_two_greedy_algorithms_agree(seed):
    rng = np.random.default_rng(100 + seed)
    normalized = bool(seed % 2)
    boxes = clustered_boxes(rng, (300,), 1.0 if normalized else 100.0, 0.01 if normalized else 1.0)
    scores = (np.round(rng.uniform(0, 1, 300) * 20) / 20).astype(np.float32)
    threshold = float(rng.choice([0.0, 0.3, 0.5, 0.7]))
    order = candidates_by_score(scores, 0.1, -1)
    by_steps = order[greedy_nms(boxes[order], threshold, 1.0, normalized)]
    ranks = np.full((1, 300), -1, np.int64)
    ranks[0, order] = np.arange(order.size)
    pair_i, pair_j = suppressing_pairs(boxes, np.float32(threshold), normalized)
    kept = greedy_nms_by_pairs(ranks, pair_i, pair_j)[0]
    np.testing.assert_array_equal(np.sort(by_steps), np.flatnonzero(kept))
    assert by_steps.size > 1


def test_the_pair_sweep_in_small_chunks_finds_the_same_pairs(monkeypatch):
    rng = np.random.default_rng(7)
    boxes = clustered_boxes(rng, (400,), 1.0, 1e-3)
    whole = suppressing_pairs(boxes, np.float32(0.3), True)
    monkeypatch.setattr(detection, "_PAIRS_PER_CHUNK", 50)
    chunked = suppressing_pairs(boxes, np.float32(0.3), True)
    as_set = lambda pairs: set(zip(*(p.tolist() for p in pairs)))  # noqa: E731
    assert as_set(whole) == as_set(chunked) and len(as_set(whole)) > 100



def test_boxes_without_height_that_overlap_a_little_suppress_each_other(paddle):
    """Normalized boxes of zero height on one line (what SSD's priors clipped to the image edge decode to) whose
    x-extents overlap by little: their union is 0, their overlap 0/0 = NaN, and Paddle suppresses the later one
    however small the common width. The pair sweep's common-width bound must not prune those pairs."""
    rng = np.random.default_rng(11)
    n = 60
    x1 = rng.uniform(0, 300, n).astype(np.float32)
    boxes = np.stack([x1, np.full(n, 320, np.float32), x1 + rng.uniform(20, 120, n).astype(np.float32),
                      np.full(n, 320, np.float32)], -1)[None]
    # A few boxes with area among them, so that both kinds of pairs are found.
    boxes[0, ::7, 1] -= rng.uniform(5, 50, boxes[0, ::7].shape[0]).astype(np.float32)
    scores = rng.uniform(0, 1, (1, 2, n)).astype(np.float32)
    attrs = NmsAttributes(background_label=-1, score_threshold=0.01, nms_top_k=-1, nms_threshold=0.45,
                          nms_eta=1.0, keep_top_k=-1, normalized=True)
    out, counts, index = multiclass_nms(boxes, scores, None, attrs)
    want_out, want_index, want_counts = paddle._C_ops.multiclass_nms3(
        paddle.to_tensor(boxes), paddle.to_tensor(scores), None, attrs.score_threshold, attrs.nms_top_k,
        attrs.keep_top_k, attrs.nms_threshold, attrs.normalized, attrs.nms_eta, attrs.background_label)
    np.testing.assert_array_equal(counts, want_counts.numpy())
    np.testing.assert_array_equal(index, want_index.numpy().reshape(-1))
    np.testing.assert_array_equal(out, want_out.numpy())
