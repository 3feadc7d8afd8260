"""Host kernels for vision, pooling, segment and framing ops (nms, box_clip, roi_pool, psroi_pool, lp_pool2d,
unpool3d, segment_pool, gather_tree, frame, overlap_add) against Paddle: each program is built with Paddle's API in
PIR static mode, saved, loaded with our loader and run op by op on the host kernels, and compared with Paddle
Inference on the saved program. Ops Paddle reads a LoD for (box_clip; roi_pool / psroi_pool without RoisNum) get
their reference from Paddle Inference with the LoD set on the feed; the host takes such boxes as one image.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.host.kernels.registry import HostKernelError
from support.converter_harness import paddle_inference_run, pir_program
from support.host_kernel_check import check, run_on_host

RNG = np.random.default_rng(23)


def paddle_with_lod(saved, lods: dict) -> list:
    """Paddle Inference on `saved` with a LoD set on the feeds named in `lods`."""
    return paddle_inference_run(saved.model_path, saved.params_path, saved.feeds, lods)


# -- nms ------------------------------------------------------------------------------------------------------
def _nms_boxes(dtype):
    boxes = np.array([
        [0, 0, 10, 10], [1, 1, 11, 11], [0, 0, 10, 10],  # a near twin and an exact twin of box 0
        [20, 20, 30, 30], [20, 20, 25, 30],  # IoU exactly 0.5 with the box before it
        [5, 5, 5, 5], [5, 5, 5, 5],  # zero area: a NaN IoU suppresses nothing
        [40, 40, 35, 35], [34, 34, 41, 41],  # inverted box (negative area)
        [0, 20, 10, 30], [10, 20, 20, 30],  # touching edges
    ], dtype)
    return np.concatenate([boxes, RNG.uniform(0, 40, (12, 2)).astype(dtype).repeat(2, axis=1)
                           + np.array([0, 0, 6, 6], dtype) * RNG.uniform(0.5, 1.5, (12, 1)).astype(dtype)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nms(tmp_path, dtype):
    import paddle

    boxes = _nms_boxes(dtype)
    saved = pir_program(tmp_path, lambda b: [paddle.vision.ops.nms(b, t) for t in (0.3, 0.5, 0.0, 0.9)],
                        {"b": boxes})
    check(saved, {"nms"})


def test_nms_with_tied_scores(tmp_path):
    """The scores form sorts (argsort, descending) around the op: equal scores keep their box order."""
    import paddle

    boxes = _nms_boxes("float32")
    scores = RNG.choice(np.array([0.9, 0.5, 0.5, 0.3], np.float32), boxes.shape[0])
    saved = pir_program(tmp_path, lambda b, s: paddle.vision.ops.nms(b, 0.4, scores=s), {"b": boxes, "s": scores})
    check(saved, {"nms"})


def test_nms_per_category_with_top_k(tmp_path):
    """The categories form: one nms per category (each in score order), the kept boxes merged by score, top_k."""
    import paddle

    boxes = _nms_boxes("float32")
    scores = RNG.choice(np.array([0.9, 0.5, 0.5, 0.3], np.float32), boxes.shape[0])
    categories = RNG.integers(0, 3, boxes.shape[0]).astype(np.int64)

    def build(b, s, c):
        return paddle.vision.ops.nms(b, 0.4, scores=s, category_idxs=c, categories=[0, 1, 2], top_k=6)

    check(pir_program(tmp_path, build, {"b": boxes, "s": scores, "c": categories}), {"nms"})


def test_nms_empty(tmp_path):
    import paddle

    saved = pir_program(tmp_path, lambda b: paddle.vision.ops.nms(b, 0.5), {"b": np.zeros((0, 4), np.float32)})
    check(saved, {"nms"})


def test_nms_rejects_boxes_not_4_wide(tmp_path):
    import paddle

    saved = pir_program(tmp_path, lambda b: paddle.vision.ops.nms(b, 0.5), {"b": np.ones((3, 4), np.float32)},
                        run_paddle=False)
    saved.feeds["b"] = np.ones((3, 5), np.float32)
    with pytest.raises(HostKernelError, match=r"nms.*\[num_boxes, 4\]"):
        run_on_host(saved)


# -- box_clip -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_box_clip(tmp_path, dtype):
    import paddle

    boxes = np.array([[-3, -1, 40, 50], [2.5, 3.5, 9.5, 8.5], [10, 11, 12, 13], [np.nan, 1, 2, 3]], dtype)
    boxes = np.concatenate([boxes, RNG.uniform(-5, 30, (6, 4)).astype(dtype)])
    # 25 / 2 = 12.5 rounds away from zero to 13 (numpy's round would give 12); 21 / 2 = 10.5 to 11
    info = np.array([[25, 21, 2]], dtype)
    saved = pir_program(tmp_path, lambda b, i: paddle._C_ops.box_clip(b, i), {"b": boxes, "i": info},
                        run_paddle=False)
    check(saved, {"box_clip"}, want=paddle_with_lod(saved, {"b": [[0, boxes.shape[0]]]}))


def test_box_clip_needs_one_image(tmp_path):
    import paddle

    feeds = {"b": np.ones((4, 4), np.float32), "i": np.ones((2, 3), np.float32)}
    saved = pir_program(tmp_path, lambda b, i: paddle._C_ops.box_clip(b, i), feeds, run_paddle=False)
    with pytest.raises(HostKernelError, match=r"box_clip.*one image"):
        run_on_host(saved)


# -- roi_pool, psroi_pool -------------------------------------------------------------------------------------
def _rois(dtype):
    rois = np.array([
        [0, 0, 7, 5], [1.5, 0.5, 6.5, 7.5],  # halves: C's round goes away from zero
        [3, 3, 2, 2],  # inverted: forced to 1 x 1
        [-4, -4, 20, 3],  # reaches past the map
        [9, 9, 12, 12],  # wholly outside: every bin empty
        [2, 1, 4, 6],
    ], dtype)
    return rois, np.array([4, 2], np.int32)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_roi_pool(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((2, 3, 8, 9)).astype(dtype)
    x[0, 1] = np.round(x[0, 1])  # ties: the first maximum (row-major) wins Argmax
    x[1, 2] = -np.inf  # never above -FLT_MAX: Out -FLT_MAX, Argmax -1
    x[0, 0, 2, 3] = np.nan  # never wins
    rois, counts = _rois(dtype)

    def build(x, r, n):
        out = paddle._C_ops.roi_pool(x, r, n, 3, 2, 1.0)
        argmax = out.get_defining_op().result(1)  # the API returns Out only
        return [out, argmax, paddle.vision.ops.roi_pool(x, r, n, (2, 4), 0.5)]

    check(pir_program(tmp_path, build, {"x": x, "r": rois, "n": counts}), {"roi_pool"})


def test_roi_pool_one_image_without_rois_num(tmp_path):
    import paddle

    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    rois = _rois("float32")[0]
    saved = pir_program(tmp_path, lambda x, r: paddle._C_ops.roi_pool(x, r, None, 2, 2, 1.0)[0], {"x": x, "r": rois},
                        run_paddle=False)
    check(saved, {"roi_pool"}, want=paddle_with_lod(saved, {"r": [[0, rois.shape[0]]]}))


def test_roi_pool_no_rois(tmp_path):
    import paddle

    feeds = {"x": np.ones((2, 2, 4, 4), np.float32), "r": np.zeros((0, 4), np.float32),
             "n": np.zeros(2, np.int32)}
    check(pir_program(tmp_path, lambda x, r, n: paddle.vision.ops.roi_pool(x, r, n, 2), feeds), {"roi_pool"})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_psroi_pool(tmp_path, dtype):
    import paddle

    x = RNG.standard_normal((2, 2 * 2 * 3, 8, 9)).astype(dtype)  # 2 x 2 x 3 maps
    rois, counts = _rois(dtype)

    def build(x, r, n):
        return [paddle.vision.ops.psroi_pool(x, r, n, (2, 3), 1.0),
                paddle.vision.ops.psroi_pool(x[:, :8], r, n, 2, 0.5),
                paddle.vision.ops.psroi_pool(x, r, n, (3, 2), 0.75)]

    check(pir_program(tmp_path, build, {"x": x, "r": rois, "n": counts}), {"psroi_pool"})


def test_psroi_pool_one_image_without_rois_num(tmp_path):
    import paddle

    x = RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)
    rois = _rois("float32")[0]
    saved = pir_program(tmp_path, lambda x, r: paddle._C_ops.psroi_pool(x, r, None, 2, 2, 2, 1.0),
                        {"x": x, "r": rois}, run_paddle=False)
    check(saved, {"psroi_pool"}, want=paddle_with_lod(saved, {"r": [[0, rois.shape[0]]]}))


def test_roi_pool_rejects_a_batch_without_rois_num(tmp_path):
    import paddle

    feeds = {"x": np.ones((2, 2, 4, 4), np.float32), "r": np.ones((1, 4), np.float32)}
    saved = pir_program(tmp_path, lambda x, r: paddle._C_ops.roi_pool(x, r, None, 2, 2, 1.0)[0], feeds,
                        run_paddle=False)
    with pytest.raises(HostKernelError, match="roi_pool.*RoisNum"):
        run_on_host(saved)


# -- lp_pool2d, unpool3d --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lp_pool2d(tmp_path, dtype):
    import paddle
    import paddle.nn.functional as F

    x = RNG.standard_normal((2, 3, 7, 8)).astype(dtype)
    positive = np.abs(x) + 0.1
    # the inf norm's scan takes a NaN and drops it at the next element, forgetting the max before it: a NaN
    # mid-window restarts the max, one last in a window (2, 2) is the result
    x[0, 0, 1, 1] = x[0, 0, 2, 2] = np.nan
    x[0, 0, 0, 0] = 9.0
    x[1, 1, :3, :3] = -np.inf

    def build(x, p):
        return [F.lp_pool2d(p, 2.0, 2), F.lp_pool2d(p, 1.5, 3, stride=2, padding=1),
                F.lp_pool2d(p, 4.0, [2, 3], stride=[1, 2], ceil_mode=True),
                F.lp_pool2d(x, 3.0, 2),  # negative cube sums: NaN
                F.lp_pool2d(x, float("inf"), 3, stride=2, ceil_mode=True),
                F.lp_pool2d(paddle.transpose(p, [0, 2, 3, 1]), 2.0, 3, stride=2, padding=1, data_format="NHWC"),
                F.lp_pool1d(p[:, :, 0], 2.0, 3, stride=2)]

    check(pir_program(tmp_path, build, {"x": x, "p": positive}), {"lp_pool2d"})


def test_unpool3d(tmp_path):
    import paddle.nn.functional as F

    x = RNG.standard_normal((2, 2, 4, 6, 4)).astype(np.float32)
    y = RNG.standard_normal((1, 2, 5, 7, 5)).astype(np.float32)

    def build(x, y):
        out, mask = F.max_pool3d(x, 2, 2, return_mask=True)
        padded, padded_mask = F.max_pool3d(y, 3, 2, padding=1, return_mask=True)
        return [F.max_unpool3d(out, mask, 2, 2), F.max_unpool3d(out, mask, 2, 2, output_size=[5, 7, 5]),
                F.max_unpool3d(padded, padded_mask, 3, 2, padding=1)]

    check(pir_program(tmp_path, build, {"x": x, "y": y}), {"unpool3d"})


# -- segment_pool, gather_tree --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,ids_dtype", [("float32", "int32"), ("float64", "int64"), ("int32", "int64"),
                                             ("int64", "int32")])
def test_segment_pool(tmp_path, dtype, ids_dtype):
    import paddle

    x = (RNG.standard_normal((7, 3, 2)) * 10).astype(dtype)
    ids = np.array([1, 1, 1, 3, 3, 4, 6], ids_dtype)  # 0, 2 and 5 empty: rows of zeros
    if dtype.startswith("float"):
        x[0, 0, 0] = np.nan  # max / min skip a NaN ...
        x[:3, 1, 1] = np.nan  # ... unless every value is NaN
    else:
        x[:3, 2, 0] = [-10, 0, 0]  # an integer mean truncates toward zero: -3
    fns = (paddle.geometric.segment_sum, paddle.geometric.segment_mean, paddle.geometric.segment_max,
           paddle.geometric.segment_min)
    check(pir_program(tmp_path, lambda x, s: [fn(x, s) for fn in fns], {"x": x, "s": ids}), {"segment_pool"})


def test_segment_pool_rejects_unsorted_ids(tmp_path):
    import paddle

    feeds = {"x": np.ones((3, 2), np.float32), "s": np.array([0, 2, 1], np.int32)}
    saved = pir_program(tmp_path, lambda x, s: paddle.geometric.segment_sum(x, s), feeds, run_paddle=False)
    with pytest.raises(HostKernelError, match="segment_pool.*sorted ascending, got 2 before 1"):
        run_on_host(saved)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_gather_tree(tmp_path, dtype):
    import paddle.nn.functional as F

    ids = RNG.integers(0, 50, (5, 3, 4)).astype(dtype)
    parents = RNG.integers(0, 4, (5, 3, 4)).astype(dtype)
    check(pir_program(tmp_path, lambda i, p: F.gather_tree(i, p), {"i": ids, "p": parents}), {"gather_tree"})


def test_gather_tree_rejects_parents_out_of_beam(tmp_path):
    import paddle.nn.functional as F

    feeds = {"i": np.zeros((2, 1, 2), np.int64), "p": np.array([[[0, 2]], [[1, 0]]], np.int64)}
    saved = pir_program(tmp_path, lambda i, p: F.gather_tree(i, p), feeds, run_paddle=False)
    with pytest.raises(HostKernelError, match=r"gather_tree.*Parents must lie in \[0, 2\)"):
        run_on_host(saved)


# -- frame, overlap_add ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_frame_and_overlap_add(tmp_path, dtype):
    import paddle

    x = (RNG.standard_normal((3, 17)) * 10).astype(dtype)
    frames = (RNG.standard_normal((2, 5, 4)) * 10).astype(dtype)

    def build(x, f):
        return [paddle.signal.frame(x, 5, 3), paddle.signal.frame(x[0], 4, 4),
                paddle.signal.frame(paddle.transpose(x, [1, 0]), 6, 2, axis=0),
                paddle.signal.frame(x, 17, 1),  # one whole-signal frame
                paddle.signal.overlap_add(f, 2), paddle.signal.overlap_add(f[0], 5),  # frames end to end
                paddle.signal.overlap_add(paddle.transpose(f, [2, 1, 0]), 3, axis=0)]

    check(pir_program(tmp_path, build, {"x": x, "f": frames}), {"frame", "overlap_add"})
