"""Detection post-processing against Paddle Inference on every device: multiclass_nms3 (legacy OpDesc and
PIR programs, both input forms), the fluid multiclass_nms and matrix_nms, on inputs made to hit the hard
parts: clustered boxes that overlap heavily, coordinates on a coarse grid (overlaps that land on the
threshold, identical boxes), scores on a coarse grid (ties within and across classes), several classes,
batch 2, a background label, adaptive NMS (nms_eta < 1), pixel boxes (normalized False), nothing above the
threshold. Integer outputs (Index, the per-image counts) must be equal, boxes and scores within the op
tolerance.

Placement is asserted too: intel_openvino runs multiclass_nms3 on the device unless its validate_program
declined the attribute combination (adaptive NMS above 0.5, the LoD input form), where the op falls to the
host with that reason.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.converter_harness import opdesc_program, paddle_inference_run, pir_program, run_recording_splits
from support.tolerances import assert_op_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
RNG = np.random.default_rng(2424)


def clustered_boxes(shape, extent: float, grid: float) -> np.ndarray:
    """Boxes [*shape, 4] around 4 cluster centres, coordinates rounded to `grid` (equal and on-threshold
    overlaps happen), all upright."""
    centres = RNG.uniform(0.2, 0.8, (4, 2)) * extent
    pick = RNG.integers(0, 4, shape)
    cx = centres[pick, 0] + RNG.normal(0, extent * 0.03, shape)
    cy = centres[pick, 1] + RNG.normal(0, extent * 0.03, shape)
    w, h = RNG.uniform(0.1, 0.3, shape) * extent, RNG.uniform(0.1, 0.3, shape) * extent
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
    return (np.round(boxes / grid) * grid).astype(np.float32)


def tied_scores(shape, steps: int = 20) -> np.ndarray:
    return (np.round(RNG.uniform(0, 1, shape) * steps) / steps).astype(np.float32)


def run_on(saved, device: str, expected_warning=None):
    """(outputs in fetch order, the predictor) of `saved` on `device`, RuntimeWarnings as errors (but the
    `expected_warning` category, which the caller checks)."""
    config = nb.Config()
    config.set_model_file(saved.model_path)
    if saved.params_path:
        config.set_param_file(saved.params_path)
    config.set_nnadapter_device_names([device])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        if expected_warning is not None:
            warnings.simplefilter("always", expected_warning)
        predictor = nb.create_predictor(config)
        for name in predictor.get_input_names():
            predictor.get_input_by_name(name).from_numpy(np.asarray(saved.feeds[name]))
        predictor.run()
    outputs = [np.asarray(predictor.get_output(k).numpy()) for k in range(len(predictor.get_output_names()))]
    return outputs, predictor


def assert_detections_equal(got, want, names):
    assert len(got) == len(want)
    for name, g, w in zip(names, got, want):
        if np.issubdtype(np.asarray(w).dtype, np.integer):
            np.testing.assert_array_equal(np.asarray(g).reshape(np.shape(w)), w, err_msg=name)
        else:
            assert_op_close(g, w, what=name)


def host_types(predictor) -> list:
    return sorted(op.type for op in predictor.host_ops)


# -- multiclass_nms3, legacy programs ------------------------------------------------------------------------

NMS3_CASES = {
    "plain": dict(background_label=-1, score_threshold=0.05, nms_top_k=-1, nms_threshold=0.5, nms_eta=1.0,
                  keep_top_k=-1, normalized=True),
    "background_topk_keep": dict(background_label=0, score_threshold=0.2, nms_top_k=12, nms_threshold=0.6,
                                 nms_eta=1.0, keep_top_k=15, normalized=True),
    "pixel_boxes": dict(background_label=1, score_threshold=0.1, nms_top_k=-1, nms_threshold=0.45, nms_eta=1.0,
                        keep_top_k=20, normalized=False),
    "threshold_zero": dict(background_label=-1, score_threshold=0.0, nms_top_k=8, nms_threshold=0.0,
                           nms_eta=1.0, keep_top_k=-1, normalized=False),
    "eta_under_half": dict(background_label=-1, score_threshold=0.1, nms_top_k=-1, nms_threshold=0.4,
                           nms_eta=0.8, keep_top_k=10, normalized=True),
    "eta_adaptive": dict(background_label=-1, score_threshold=0.05, nms_top_k=-1, nms_threshold=0.9,
                         nms_eta=0.7, keep_top_k=-1, normalized=True),
    "empty": dict(background_label=-1, score_threshold=0.99, nms_top_k=-1, nms_threshold=0.5, nms_eta=1.0,
                  keep_top_k=-1, normalized=True),
    # boxes apart from each other: every candidate of a class is kept, so each class selects far more than
    # keep_top_k (the SDKs stop each class at keep_top_k), with tied scores at the cut
    "keep_top_k_per_class": dict(background_label=-1, score_threshold=0.05, nms_top_k=-1, nms_threshold=0.5,
                                 nms_eta=1.0, keep_top_k=12, normalized=True),
}
# The attribute combinations the SDKs' NonMaxSuppression cannot answer as Paddle does (hal/*/nms.py): adaptive
# NMS above 0.5 and pixel boxes (normalized false).
SDK_DECLINES = {"eta_adaptive", "pixel_boxes", "threshold_zero"}

NMS3_OUTPUTS = {"Out": ["out"], "Index": ["index"], "NmsRoisNum": ["rois_num"]}
NMS3_INT_VARS = [{"name": "index", "dtype": "int32", "shape": []}, {"name": "rois_num", "dtype": "int32", "shape": []}]


@pytest.fixture(scope="module")
def nms3_programs(tmp_path_factory):
    programs = {}
    for name, attrs in NMS3_CASES.items():
        extent = 1.0 if attrs["normalized"] else 100.0
        boxes = clustered_boxes((2, 60), extent, extent * 0.02)
        if name == "keep_top_k_per_class":
            corner = np.stack(np.meshgrid(np.arange(10), np.arange(6)), -1).reshape(60, 2)[:, ::-1] * 0.1
            boxes = np.broadcast_to(np.concatenate([corner, corner + 0.05], 1), (2, 60, 4)).astype(np.float32)
        scores = tied_scores((2, 4, 60))
        if name == "keep_top_k_per_class":  # class 1 outscores the others: it fills the keep_top_k alone
            scores = scores / np.float32(2)
            scores[:, 1] += np.float32(0.5)
        if name == "empty":
            scores = scores * np.float32(0.9)
        saved = opdesc_program(tmp_path_factory.mktemp(f"nms3_{name}"), "multiclass_nms3",
                               inputs={"BBoxes": ["boxes"], "Scores": ["scores"]}, outputs=NMS3_OUTPUTS, attrs=attrs,
                               feeds={"boxes": boxes, "scores": scores}, extra_vars=NMS3_INT_VARS)
        programs[name] = saved
    return programs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(NMS3_CASES))
def test_multiclass_nms3_matches_paddle(nms3_programs, case, device):
    saved = nms3_programs[case]
    if case == "empty":
        assert saved.outputs[0].shape == (0, 6)
    else:
        assert saved.outputs[0].shape[0] > 10, "the case must keep boxes to be a test of NMS"
    got, predictor = run_on(saved, device)
    assert_detections_equal(got, saved.outputs, ["Out", "Index", "NmsRoisNum"])
    if device != "builtin_device":
        assert host_types(predictor) == (["multiclass_nms3"] if case in SDK_DECLINES else [])


@pytest.mark.parametrize("case,reason", [("eta_adaptive", "adaptive NMS (nms_eta 0.7 with nms_threshold 0.9 > 0.5)"),
                                         ("pixel_boxes", "pixel boxes (normalized false")])
def test_the_sdks_say_why_they_decline(nms3_programs, case, reason):
    from hal.common import nms_unsupported_reason  # both SDK drivers' compositions decline by it
    from support.converter_harness import convert_and_run

    saved = nms3_programs[case]
    _, result, _ = convert_and_run(saved.model_path, saved.feeds)
    nms_op = next(op for op in result.model.operations if op.type.name == "NON_MAX_SUPPRESSION")
    assert reason in nms_unsupported_reason(nms_op)


@pytest.fixture(scope="module")
def nms3_lod_program(tmp_path_factory):
    """The second input form: bboxes [M, C, 4], scores [M, C], RoisNum splitting M into 3 images."""
    classes = 3
    rois_num = np.array([14, 0, 22], np.int32)
    boxes = clustered_boxes((int(rois_num.sum()), classes), 1.0, 0.02)
    scores = tied_scores((int(rois_num.sum()), classes), 10)
    attrs = dict(NMS3_CASES["background_topk_keep"])
    return opdesc_program(tmp_path_factory.mktemp("nms3_lod"), "multiclass_nms3",
                          inputs={"BBoxes": ["boxes"], "Scores": ["scores"], "RoisNum": ["rois_num_in"]},
                          outputs=NMS3_OUTPUTS, attrs=attrs,
                          feeds={"boxes": boxes, "scores": scores, "rois_num_in": rois_num}, extra_vars=NMS3_INT_VARS)


@pytest.mark.parametrize("device", DEVICES)
def test_multiclass_nms3_lod_form_matches_paddle(nms3_lod_program, device):
    assert nms3_lod_program.outputs[0].shape[0] > 5
    got, predictor = run_on(nms3_lod_program, device)
    assert_detections_equal(got, nms3_lod_program.outputs, ["Out", "Index", "NmsRoisNum"])
    if device != "builtin_device":  # the LoD form is not composed on the SDKs
        assert host_types(predictor) == ["multiclass_nms3"]


# -- multiclass_nms3, a PIR program --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nms3_pir_program(tmp_path_factory):
    boxes = clustered_boxes((2, 80), 1.0, 0.01)
    scores = tied_scores((2, 5, 80))

    def build(boxes, scores):
        import paddle
        out, index, rois_num = paddle._C_ops.multiclass_nms3(boxes, scores, None, 0.1, 30, 25, 0.5, True, 1.0, 2)
        return out, index, rois_num

    return pir_program(tmp_path_factory.mktemp("nms3_pir"), build, {"boxes": boxes, "scores": scores})


@pytest.mark.parametrize("device", DEVICES)
def test_multiclass_nms3_pir_program_matches_paddle(nms3_pir_program, device):
    assert nms3_pir_program.outputs[0].shape[0] > 10
    got, predictor = run_on(nms3_pir_program, device)
    assert_detections_equal(got, nms3_pir_program.outputs, ["Out", "Index", "NmsRoisNum"])
    if device != "builtin_device":
        assert host_types(predictor) == []


# -- the fluid multiclass_nms ---------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["pixel_boxes", "eta_adaptive", "empty"])
def test_fluid_multiclass_nms_matches_paddle_inference(tmp_path, case, device):
    """Out only (its batch split is a LoD); when nothing is kept Paddle writes [[-1]]."""
    attrs = NMS3_CASES[case]
    extent = 1.0 if attrs["normalized"] else 100.0
    boxes = clustered_boxes((2, 40), extent, extent * 0.02)
    scores = tied_scores((2, 3, 40)) * np.float32(0.9 if case == "empty" else 1.0)
    saved = opdesc_program(tmp_path, "multiclass_nms", inputs={"BBoxes": ["boxes"], "Scores": ["scores"]},
                           outputs={"Out": ["out"]}, attrs=attrs, feeds={"boxes": boxes, "scores": scores},
                           run_paddle=False)
    # The Executor cannot fetch a LoD output as an array; Paddle Inference can.
    want = paddle_inference_run(saved.model_path, None, saved.feeds)
    if case == "empty":
        np.testing.assert_array_equal(want[0], [[-1.0]])
    got, _ = run_on(saved, device)
    assert_detections_equal(got, want, ["Out"])


# -- matrix_nms -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_gaussian", [False, True])
def test_matrix_nms_with_identical_boxes_matches_paddle_without_warnings(tmp_path, device, use_gaussian):
    """Identical boxes make a largest overlap of 1, where the linear decay divides by zero (Paddle's std::min
    skips the inf and NaN it gives): no RuntimeWarning may leak (run_on turns them into errors)."""
    boxes = RNG.uniform(0, 20, (2, 16, 2))
    boxes = np.concatenate([boxes, boxes + RNG.uniform(2, 10, (2, 16, 2))], -1).astype(np.float32)
    boxes[:, 5] = boxes[:, 2]
    boxes[:, 9] = boxes[:, 2]
    scores = RNG.uniform(0, 1, (2, 3, 16)).astype(np.float32)  # distinct: Paddle's partial_sort orders ties its own way
    attrs = {"score_threshold": 0.1, "post_threshold": 0.05, "nms_top_k": -1, "keep_top_k": 20,
             "use_gaussian": use_gaussian, "gaussian_sigma": 2.0, "background_label": 0, "normalized": False}
    saved = opdesc_program(tmp_path, "matrix_nms", inputs={"BBoxes": ["boxes"], "Scores": ["scores"]},
                           outputs={"Out": ["out"], "Index": ["index"], "RoisNum": ["num"]}, attrs=attrs,
                           feeds={"boxes": boxes, "scores": scores},
                           extra_vars=[{"name": "index", "dtype": "int32", "shape": []},
                                       {"name": "num", "dtype": "int32", "shape": []}])
    got, _ = run_on(saved, device)
    # rtol 1e-6 (not 6e-7): the Gaussian decay's exp is numpy's float32 exp, Paddle's is the C library's expf
    assert len(got) == 3
    np.testing.assert_array_equal(got[1].reshape(-1), saved.outputs[1].reshape(-1))
    np.testing.assert_array_equal(got[2], saved.outputs[2])
    assert_op_close(got[0], saved.outputs[0], rtol=1e-6, what="matrix_nms Out")


@pytest.mark.parametrize("device", DEVICES)
def test_matrix_nms_empty_result_matches_paddle(tmp_path, device):
    boxes = clustered_boxes((2, 10), 1.0, 0.02)
    scores = (RNG.uniform(0, 0.5, (2, 3, 10))).astype(np.float32)
    attrs = {"score_threshold": 0.9, "post_threshold": 0.0, "nms_top_k": -1, "keep_top_k": -1,
             "use_gaussian": False, "gaussian_sigma": 2.0, "background_label": -1, "normalized": True}
    saved = opdesc_program(tmp_path, "matrix_nms", inputs={"BBoxes": ["boxes"], "Scores": ["scores"]},
                           outputs={"Out": ["out"], "Index": ["index"], "RoisNum": ["num"]}, attrs=attrs,
                           feeds={"boxes": boxes, "scores": scores},
                           extra_vars=[{"name": "index", "dtype": "int32", "shape": []},
                                       {"name": "num", "dtype": "int32", "shape": []}])
    assert saved.outputs[0].shape == (0, 6)
    got, _ = run_on(saved, device)
    assert got[0].shape == (0, 6) and got[1].shape == (0, 1)
    np.testing.assert_array_equal(got[2], saved.outputs[2])


# -- what the SDKs cannot match, run elsewhere --------------------------------------------------------------------

@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_zero_area_boxes_run_elsewhere_and_match_paddle(tmp_path, device):
    """Boxes without area are data, not attributes: Paddle takes a zero union as an overlap of NaN, which suppresses,
    while OpenVINO's and ONNX Runtime's NonMaxSuppression never suppress with a box of no area (hal/*/nms.py). A run
    with such a candidate is a device fault, said once, and the part runs elsewhere: Paddle's answer."""
    from nnadapter_bridge.nnadapter.runtime.faults import DeviceFallbackWarning

    point = [0.5, 0.5, 0.5, 0.5]
    boxes = np.array([[point, point, [0.1, 0.1, 0.3, 0.3]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    attrs = dict(NMS3_CASES["plain"])
    saved = opdesc_program(tmp_path, "multiclass_nms3", inputs={"BBoxes": ["boxes"], "Scores": ["scores"]},
                           outputs=NMS3_OUTPUTS, attrs=attrs, feeds={"boxes": boxes, "scores": scores},
                           extra_vars=NMS3_INT_VARS)
    np.testing.assert_array_equal(saved.outputs[1].reshape(-1), [0, 2])  # Paddle: the second point is suppressed
    with pytest.warns(DeviceFallbackWarning, match="no positive area"):
        got, predictor = run_on(saved, device, DeviceFallbackWarning)
    assert not predictor.host_ops  # placed on the device; this input's run went elsewhere
    assert_detections_equal(got, saved.outputs, ["Out", "Index", "NmsRoisNum"])


def detector_tail(directory):
    """(model path, feeds, Paddle's outputs) of a detector's tail in one subgraph: a box decode (scale) and a score
    sigmoid before a multiclass_nms3, whose candidates include two boxes without area."""
    from devtools.zoo import write_program
    from support.converter_harness import _run_saved, paddle_static

    point = [0.5, 0.5, 0.5, 0.5]
    feeds = {"raw_boxes": np.array([[point, point, [0.1, 0.1, 0.3, 0.3], [0.2, 0.2, 0.6, 0.5]]], np.float32),
             "logits": np.array([[[2.0, 1.5, 1.0, 0.5]]], np.float32)}
    ops = [{"type": "scale", "inputs": {"X": ["raw_boxes"]}, "outputs": {"Out": ["boxes"]},
            "attrs": {"scale": 0.5, "bias": 0.25, "bias_after_scale": True}},
           {"type": "sigmoid", "inputs": {"X": ["logits"]}, "outputs": {"Out": ["scores"]}, "attrs": {}},
           {"type": "multiclass_nms3", "inputs": {"BBoxes": ["boxes"], "Scores": ["scores"]},
            "outputs": NMS3_OUTPUTS, "attrs": dict(NMS3_CASES["plain"])}]
    var_specs = [{"name": n, "dtype": "float32", "shape": list(a.shape)} for n, a in feeds.items()]
    var_specs += [{"name": "boxes", "dtype": "float32", "shape": [1, 4, 4]},
                  {"name": "scores", "dtype": "float32", "shape": [1, 1, 4]},
                  {"name": "out", "dtype": "float32", "shape": [-1, 6]}, *NMS3_INT_VARS]
    model_path = os.path.join(str(directory), "__model__")
    write_program(model_path, [{"vars": var_specs, "ops": ops}], feeds=list(feeds),
                  fetches=["out", "index", "rois_num"])
    with paddle_static() as paddle:
        want = _run_saved(paddle, str(directory), "__model__", None, feeds)
    np.testing.assert_array_equal(want[1].reshape(-1), [0, 2, 3])  # Paddle: the second point is suppressed
    return model_path, feeds, want


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_a_zero_area_fault_moves_only_the_nms_off_the_device(tmp_path, device):
    """The same fault inside a detector's tail (a box decode and a score sigmoid before the NMS, in one subgraph):
    the driver names the NMS it faulted on, so only that op runs on the host for these shapes and the ops around it
    stay on the device as split subgraphs, not the whole subgraph on the host (SSDLite's clipped priors fault on
    every run). Said once; later runs take the split at once and still give Paddle's answer."""
    model_path, feeds, want = detector_tail(tmp_path)
    config = nb.Config()
    config.set_model_file(model_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    assert not predictor.host_ops and len(predictor.engines) == 1  # one subgraph of the three ops on the device
    (engine,) = predictor.engines.values()
    got, said = run_recording_splits(predictor, feeds)
    assert len(said) == 1 and "faulted at run time on multiclass_nms3" in said[0]
    assert "no positive area" in said[0] and "the other 2 ops on " + device in said[0]
    assert_detections_equal(got, want, ["Out", "Index", "NmsRoisNum"])
    builds = predictor.stats.builds
    got, said = run_recording_splits(predictor, feeds)
    assert not said and predictor.stats.builds == builds  # the split runs at once, nothing compiled again
    assert_detections_equal(got, want, ["Out", "Index", "NmsRoisNum"])
    (plan,) = engine.pool.splits.values()
    assert [op.type for op in plan.partition.host_ops] == ["multiclass_nms3"]
    assert sorted(op.type for child in plan.partition.subgraphs for op in child.ops) == ["scale", "sigmoid"]
    assert predictor.stats.subgraph_host_runs == 0  # never the whole subgraph on the host
    where = {p.op.type: p for p in predictor.placements()}
    assert where["multiclass_nms3"].device is None and where["multiclass_nms3"].at_run
    assert "split around it at run time" in where["multiclass_nms3"].reason
    assert "no positive area" in where["multiclass_nms3"].reason
    assert where["scale"].device == device and where["sigmoid"].device == device


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_a_program_restored_from_the_cache_still_names_the_op_it_faults_on(tmp_path, device):
    """The fault's operation is named in the program's output names, which the `.nnc` keeps: a warm start restores
    the whole program, meets the fault and splits off only the NMS, as the cold start did."""
    model_path, feeds, want = detector_tail(tmp_path)
    cache = tmp_path / "cache"
    for start in ("cold", "warm"):
        config = nb.Config()
        config.set_model_file(model_path)
        config.set_nnadapter_device_names([device])
        config.set_nnadapter_model_cache_dir(str(cache))
        predictor = nb.create_predictor(config)
        got, said = run_recording_splits(predictor, feeds)
        assert len(said) == 1 and "faulted at run time on multiclass_nms3" in said[0], start
        assert_detections_equal(got, want, ["Out", "Index", "NmsRoisNum"])
        assert predictor.stats.subgraph_host_runs == 0
        if start == "warm":
            assert predictor.stats.cache_hits_file >= 1  # the whole program came from the cache
        predictor.close()


@pytest.mark.parametrize("device", DEVICES)
def test_crowded_scores_keep_paddles_order(tmp_path, device):
    """Thousands of scores within 1e-4 of each other: an order by score must not treat ones 1e-6 apart as equal
    (OpenVINO's MulticlassNms does, and with this many its sort aborts the process; hal/intel_openvino/nms.py)."""
    centres = RNG.uniform(0, 1, (1, 2000, 2))
    boxes = np.concatenate([centres - 0.02, centres + 0.02], -1).astype(np.float32)
    scores = RNG.uniform(0.9, 0.9001, (1, 3, 2000)).astype(np.float32)
    attrs = dict(background_label=-1, score_threshold=0.01, nms_top_k=1000, nms_threshold=0.7, nms_eta=1.0,
                 keep_top_k=300, normalized=True)
    saved = opdesc_program(tmp_path, "multiclass_nms3", inputs={"BBoxes": ["boxes"], "Scores": ["scores"]},
                           outputs=NMS3_OUTPUTS, attrs=attrs, feeds={"boxes": boxes, "scores": scores},
                           extra_vars=NMS3_INT_VARS)
    assert saved.outputs[0].shape == (300, 6)
    got, predictor = run_on(saved, device)
    assert not predictor.host_ops
    assert_detections_equal(got, saved.outputs, ["Out", "Index", "NmsRoisNum"])


@pytest.mark.parametrize("device", DEVICES)
def test_one_class_batch_2_top_k_cuts_through_ties(tmp_path, device):
    """nms_top_k and keep_top_k cutting through tied scores, one class, two images: the shape at which
    OpenVINO's CPU plugin fused a mask count wrongly (hal/intel_openvino/nms.py counts by CumSum)."""
    boxes = clustered_boxes((2, 30), 1.0, 0.05)
    scores = tied_scores((2, 1, 30), 5)
    attrs = dict(background_label=-1, score_threshold=0.05, nms_top_k=7, nms_threshold=0.6, nms_eta=1.0,
                 keep_top_k=4, normalized=True)
    saved = opdesc_program(tmp_path, "multiclass_nms3", inputs={"BBoxes": ["boxes"], "Scores": ["scores"]},
                           outputs=NMS3_OUTPUTS, attrs=attrs, feeds={"boxes": boxes, "scores": scores},
                           extra_vars=NMS3_INT_VARS)
    np.testing.assert_array_equal(saved.outputs[2], [4, 4])
    got, predictor = run_on(saved, device)
    assert not predictor.host_ops
    assert_detections_equal(got, saved.outputs, ["Out", "Index", "NmsRoisNum"])
