"""Converters of detection.py (prior_box, yolo_box, multiclass_nms3), sampling.py (roi_align, deformable_conv(_v1),
grid_sampler) and quantization.py (calib), each a one-op Paddle program compared with Paddle's own result (calib, a
Paddle Lite op, against its definition).
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.codes import OperationType as T
from support.converter_harness import check_program, convert_and_run, opdesc_program
from support.tolerances import assert_op_close

rng = np.random.default_rng(4242)

# Deformable convolution sums C*kh*kw bilinear samples times weights (~100 terms of magnitude ~1).
SUM_ATOL = 1e-4


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def operation_types(result):
    return [op.type for op in result.model.operations]


@pytest.mark.parametrize("attrs", [
    {"min_sizes": [4.0], "aspect_ratios": [2.0], "flip": True, "clip": True},
    {"min_sizes": [4.0, 8.0], "max_sizes": [9.0, 16.0], "aspect_ratios": [2.0, 3.0], "flip": True, "clip": False,
     "step_w": 8.0, "step_h": 8.0, "offset": 0.5},
    {"min_sizes": [6.0], "max_sizes": [12.0], "aspect_ratios": [2.0], "flip": False, "clip": True,
     "min_max_aspect_ratios_order": True, "variances": [0.1, 0.2, 0.3, 0.4]},
])
def test_prior_box(tmp_path, attrs):
    full = {"variances": [0.1, 0.1, 0.2, 0.2], "step_w": 0.0, "step_h": 0.0, "offset": 0.5, "max_sizes": [],
            "min_max_aspect_ratios_order": False}
    full.update(attrs)
    if not full["max_sizes"]:
        del full["max_sizes"]  # an empty list could only be written as INTS; leave it to the default
    saved = opdesc_program(tmp_path, "prior_box", inputs={"Input": ["feat"], "Image": ["image"]},
                           outputs={"Boxes": ["boxes"], "Variances": ["variances"]}, attrs=full,
                           feeds={"feat": randn(1, 2, 4, 5), "image": randn(1, 3, 32, 40)})
    _, result = check_program(saved)
    # Its boxes depend only on the known dims of Input and Image: computed at conversion, they are constants.
    assert result.folded == {T.PRIOR_BOX: 1}
    assert T.PRIOR_BOX not in operation_types(result)


@pytest.mark.parametrize("attrs", [
    {"anchors": [10, 13, 16, 30], "class_num": 3, "conf_thresh": 0.3, "downsample_ratio": 32, "clip_bbox": True},
    {"anchors": [10, 13, 16, 30, 33, 23], "class_num": 2, "conf_thresh": 0.1, "downsample_ratio": 16,
     "clip_bbox": False, "scale_x_y": 1.2},
    {"anchors": [10, 13, 16, 30], "class_num": 2, "conf_thresh": 0.2, "downsample_ratio": 8, "iou_aware": True,
     "iou_aware_factor": 0.4},
])
def test_yolo_box(tmp_path, attrs):
    anchors = len(attrs["anchors"]) // 2
    channels = anchors * (5 + attrs["class_num"]) + (anchors if attrs.get("iou_aware") else 0)
    saved = opdesc_program(tmp_path, "yolo_box", inputs={"X": ["x"], "ImgSize": ["img_size"]},
                           outputs={"Boxes": ["boxes"], "Scores": ["scores"]}, attrs=attrs,
                           feeds={"x": randn(2, channels, 3, 4), "img_size": np.array([[96, 128], [64, 80]], np.int32)})
    # Box corners are image coordinates (~100): the single-operation rtol applies on top of atol.
    check_program(saved, atol=1e-4)


@pytest.mark.parametrize("attrs", [
    {"pooled_height": 2, "pooled_width": 3, "spatial_scale": 0.5, "sampling_ratio": 2, "aligned": False},
    {"pooled_height": 3, "pooled_width": 3, "spatial_scale": 0.25, "sampling_ratio": -1, "aligned": True},
    {},
])
def test_roi_align_with_rois_num(tmp_path, attrs):
    rois = np.array([[1, 2, 9, 10], [0, 0, 15, 7], [4, 4, 6, 12], [2, 3, 14, 14], [8, 1, 12, 5]], np.float32)
    saved = opdesc_program(tmp_path, "roi_align", inputs={"X": ["x"], "ROIs": ["rois"], "RoisNum": ["rois_num"]},
                           outputs={"Out": ["out"]}, attrs=attrs,
                           feeds={"x": randn(3, 2, 8, 8), "rois": rois, "rois_num": np.array([2, 0, 3], np.int32)})
    _, result = check_program(saved)
    assert T.ROI_ALIGN in operation_types(result)


def test_roi_align_one_image_without_rois_num(tmp_path):
    rois = np.array([[1, 2, 9, 10], [0, 0, 15, 7]], np.float32)
    x = randn(1, 2, 8, 8)
    attrs = {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 0.5, "sampling_ratio": 2}
    reference = opdesc_program(tmp_path, "roi_align",
                               inputs={"X": ["x"], "ROIs": ["rois"], "RoisNum": ["rois_num"]}, outputs={"Out": ["out"]},
                               attrs=attrs, feeds={"x": x, "rois": rois, "rois_num": np.array([2], np.int32)})
    bare_dir = tmp_path / "bare"
    bare_dir.mkdir()
    bare = opdesc_program(bare_dir, "roi_align", inputs={"X": ["x"], "ROIs": ["rois"]}, outputs={"Out": ["out"]},
                          attrs=attrs, feeds={"x": x, "rois": rois}, run_paddle=False)
    check_program(bare, want=reference.outputs)


def _nms_inputs(n, m, classes):
    centers = rng.uniform(0.2, 0.8, size=(n, m, 2))
    sizes = rng.uniform(0.05, 0.3, size=(n, m, 2))
    boxes = np.concatenate([centers - sizes / 2, centers + sizes / 2], axis=-1).astype(np.float32)
    scores = rng.uniform(0, 1, size=(n, classes, m)).astype(np.float32)
    return boxes, scores


@pytest.mark.parametrize("attrs", [
    {"background_label": 0, "score_threshold": 0.3, "nms_top_k": 10, "nms_threshold": 0.3, "nms_eta": 1.0,
     "keep_top_k": 8, "normalized": True},
    {"background_label": -1, "score_threshold": 0.5, "nms_top_k": -1, "nms_threshold": 0.5, "nms_eta": 1.0,
     "keep_top_k": -1, "normalized": False},
])
def test_multiclass_nms3(tmp_path, attrs):
    boxes, scores = _nms_inputs(2, 12, 3)
    saved = opdesc_program(tmp_path, "multiclass_nms3", inputs={"BBoxes": ["boxes"], "Scores": ["scores"]},
                           outputs={"Out": ["out"], "Index": ["index"], "NmsRoisNum": ["rois_num"]}, attrs=attrs,
                           feeds={"boxes": boxes, "scores": scores},
                           extra_vars=[{"name": "index", "dtype": "int32", "shape": []},
                                       {"name": "rois_num", "dtype": "int32", "shape": []}])
    _, result = check_program(saved)
    assert T.NON_MAX_SUPPRESSION in operation_types(result)


@pytest.mark.parametrize("op_type", ["deformable_conv", "deformable_conv_v1"])
@pytest.mark.parametrize("attrs", [
    {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1, "deformable_groups": 1},
    {"strides": [2, 1], "paddings": [0, 1], "dilations": [1, 2], "groups": 2, "deformable_groups": 2},
])
def test_deformable_conv(tmp_path, op_type, attrs):
    n, c, h, w, k, cout = 1, 4, 6, 6, 3, 4
    sh, sw = attrs["strides"]
    ph, pw = attrs["paddings"]
    dh, dw = attrs["dilations"]
    oh = (h + 2 * ph - (dh * (k - 1) + 1)) // sh + 1
    ow = (w + 2 * pw - (dw * (k - 1) + 1)) // sw + 1
    dg = attrs["deformable_groups"]
    inputs = {"Input": ["x"], "Offset": ["offset"], "Filter": ["w"]}
    feeds = {"x": randn(n, c, h, w), "offset": randn(n, 2 * dg * k * k, oh, ow)}
    if op_type == "deformable_conv":
        inputs["Mask"] = ["mask"]
        feeds["mask"] = rng.uniform(0, 1, size=(n, dg * k * k, oh, ow)).astype(np.float32)
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Output": ["out"]},
                           attrs={**attrs, "im2col_step": 1}, feeds=feeds,
                           params={"w": randn(cout, c // attrs["groups"], k, k)})
    check_program(saved, atol=SUM_ATOL)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sampler(tmp_path, mode, padding_mode, align_corners):
    grid = rng.uniform(-1.3, 1.3, size=(2, 3, 4, 2)).astype(np.float32)
    saved = opdesc_program(tmp_path, "grid_sampler", inputs={"X": ["x"], "Grid": ["grid"]}, outputs={"Output": ["out"]},
                           attrs={"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners},
                           feeds={"x": randn(2, 3, 5, 6), "grid": grid})
    check_program(saved)


def test_calib_float_to_int8_and_back(tmp_path):
    # calib exists only in Paddle Lite; its definition: int8 = round(x / scale) saturated, x = q * scale.
    x = np.array([[-1.0, -0.26, 0.0, 0.3, 0.74, 2.0]], np.float32)
    saved = opdesc_program(tmp_path, "calib", inputs={"Input": ["x"]}, outputs={"Out": ["q"]}, attrs={"scale": 0.1},
                           feeds={"x": x}, extra_vars=[{"name": "q", "dtype": "int8", "shape": [1, 6]}],
                           run_paddle=False)
    got, result, _ = convert_and_run(saved.model_path, saved.feeds)
    assert operation_types(result) == [T.QUANTIZE]
    np.testing.assert_array_equal(np.asarray(got["q"]).astype(np.int32), [[-10, -3, 0, 3, 7, 20]])

    back_dir = tmp_path / "back"
    back_dir.mkdir()
    q = np.array([[-128, -3, 0, 5, 127]], np.int8)
    saved = opdesc_program(back_dir, "calib", inputs={"Input": ["q"]}, outputs={"Out": ["y"]}, attrs={"scale": 0.05},
                           feeds={"q": q}, run_paddle=False)
    got, result, _ = convert_and_run(saved.model_path, saved.feeds)
    assert_op_close(got["y"], q.astype(np.float32) * np.float32(0.05), what="y")


@pytest.mark.parametrize("counts_dtype", ["int32", "int64"])
def test_multiclass_nms3_with_rois_num(tmp_path, counts_dtype):
    """Boxes [M, C, 4] and scores [M, C] split into images by RoisNum (R-CNN's per-RoI form); Paddle takes the
    counts int32 or int64 (to_static's per-image counts of ppdet's R-CNN come from int64 shapes)."""
    boxes, scores = _nms_inputs(1, 10, 3)
    boxes = np.repeat(boxes[0][:, None, :], 3, axis=1) + rng.uniform(-0.02, 0.02, (10, 3, 4)).astype(np.float32)
    attrs = {"background_label": -1, "score_threshold": 0.2, "nms_top_k": -1, "nms_threshold": 0.4, "nms_eta": 1.0,
             "keep_top_k": 6, "normalized": True}
    saved = opdesc_program(tmp_path, "multiclass_nms3",
                           inputs={"BBoxes": ["boxes"], "Scores": ["scores"], "RoisNum": ["counts"]},
                           outputs={"Out": ["out"], "Index": ["index"], "NmsRoisNum": ["rois_num"]}, attrs=attrs,
                           feeds={"boxes": boxes, "scores": scores[0].T.copy(),
                                  "counts": np.array([6, 4], counts_dtype)},
                           extra_vars=[{"name": "index", "dtype": "int32", "shape": []},
                                       {"name": "rois_num", "dtype": "int32", "shape": []}])
    _, result = check_program(saved)
    assert T.NON_MAX_SUPPRESSION in operation_types(result)
