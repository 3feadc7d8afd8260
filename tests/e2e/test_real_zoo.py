"""The real-architecture zoo (issue 24 item 7): models built from the official model-zoo packages' own code, on
each device, against Paddle Inference on the same PIR `.json`.

The models (support/real_zoo/catalog.py) are the architectures Paddle users deploy, built by
support/real_zoo/build_model.py in a side venv holding paddleclas 2.6, paddleseg 2.8, paddledet 2.6, paddlenlp 2.8.1
and paddlex 3.7 (support/real_zoo/env.py): random weights from a fixed seed, batch norms calibrated on random
inputs, NMS detectors with their class logits spread so that NMS keeps and suppresses many boxes, exported with
`paddle.jit.save` (PIR) with the inputs declared the way each zoo exports them. Built once per machine and cached.

Each (model, device) test runs the model through `nnadapter_bridge` (Config / create_predictor) and compares every
output with Paddle Inference 3.3.1 (in-process, oneDNN off) at DESIGN.md's whole-model tolerance
(support.tolerances.assert_model_close; intel_openvino computes at f32, INTEL_OPENVINO_INFERENCE_PRECISION=f32, set
explicitly). A model whose random weights amplify float rounding past that tolerance on every runtime, Paddle's
own included, is compared against the spread of the peers instead (PEER_SPREAD: twice the distance between Paddle
Inference with oneDNN and without; ULP_SPREAD, where Paddle's oneDNN run fails on the program: twice the distance
Paddle Inference's own output moves when the float inputs move by one ulp, up or down), and the assertion message
says so.

Placement: on every device the ops left on the host (block 0's, and those of the loop and branch bodies, which are
partitioned too) must be among those listed for the model in EXPECTED_HOST_OPS (op type -> the count allowed and why
the device cannot run it),
and no subgraph may fall back to the host at run time. Detection lists (DETECTION_LISTS) are compared with the
rows of tied scores as a set: their order is not defined.

CI runs CI_SUBSET (a handful of fast models covering classification with a set_value on the host, segmentation
with interpolation on a [-1, 3, -1, -1] input, OCR, ERNIE, two NMS detectors (one decoding with yolo_box) and a
BiGRU-CRF tagger whose rnn and viterbi_decode stay on the host; under 5 minutes once the side venv
exists: about 1 minute, plus about 3 minutes to build the eight models the first time). The whole zoo:
`NNADAPTER_BRIDGE_FULL_ZOO=1 python -m pytest -q tests/e2e/test_real_zoo.py` (12 minutes on 2 cores with every
model to build, RT-DETR the longest; about 1 minute once they are cached), before the classification, segmentation
and the 15 detection, OCR, keypoint and NLP models added since: the latter take about 7 minutes more on a loaded
2-core machine once built, their builds 1-10 minutes each (PP-YOLOv2 and PP-OCRv5 server det the longest). The
two-stage detectors (Faster, Mask and Cascade R-CNN) take about 6 minutes more, with Mask R-CNN's two one-ulp Paddle
runs for its mask spread; their builds 1-3 minutes each. ppdet's transformer detectors (Deformable DETR, DINO) build
in about 2 minutes each and run in about 25 s per device.
SOLOv2, FCOS and RetinaNet (ResNet50-FPN detectors) build in 1.5, 0.6 and 0.6 minutes and run on the four
devices in about 2 minutes together. The fifteen classification and NLP architectures added for op patterns the zoo
had not seen (CSWin to EfficientNetV2, FNet to MobileBERT) build in 5-25 s each and, builds included, run on the four
devices in about 5 minutes together. The sixteen segmentation, detection and keypoint architectures added for op
patterns the zoo had not seen (PointRend to SINet from paddleseg, GFL to YOLOF from ppdet) build in 10-45 s each and,
builds included, run on the four devices in about 8.5 minutes together.
"""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest

from support.converter_harness import device_predictor
from support.real_zoo.catalog import MODELS
from support.real_zoo.detections import DETECTION_LISTS, tied_row_orders
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime", "google_xnnpack"]
FULL_ZOO = os.environ.get("NNADAPTER_BRIDGE_FULL_ZOO", "") not in ("", "0")
CI_SUBSET = ["pp_lcnet", "swin", "pp_liteseg", "ppocrv5_det", "ernie_token_cls", "ppyoloe_plus", "yolov3",
             "bigru_crf"]
SELECTED = list(MODELS) if FULL_ZOO else CI_SUBSET

# (model, device) -> {op type: (count allowed on the host, why it cannot run on the device)}. Every other model runs
# with no host op on every device (the converters for set_value, roll, gather_nd, the bool bitwise ops, run-time
# range and TILE, and the folding of shape chains, landed for issue 24): any op that falls back to the host fails
# the test until it is listed here with its reason.
_RNN_ON_HOST = ("NNAdapter's 96 operations have no recurrent layer (no GRU/LSTM/RNN) and no converter unrolls "
                "Paddle's fused `rnn` op into per-step MAT_MUL/SIGMOID/TANH yet: its host kernel runs the GRU cells")
_VITERBI_ON_HOST = ("NNAdapter has no CRF decoding operation and no converter decomposes viterbi_decode's "
                    "per-step max and backtracking yet: its host kernel runs Paddle's Viterbi decoding")
_MATRIX_NMS_ON_HOST = ("NNAdapter's NON_MAX_SUPPRESSION is greedy hard suppression; Matrix NMS decays every score by "
                      "the whole IoU matrix and keeps a data-dependent count, and no converter decomposes it: its host "
                      "kernel runs Paddle's matrix_nms")
EXPECTED_HOST_OPS: dict = {
    ("bigru_crf", device): {"rnn": (1, _RNN_ON_HOST), "viterbi_decode": (1, _VITERBI_ON_HOST)}
    for device in DEVICES}
EXPECTED_HOST_OPS.update({("ppyolov2", device): {"matrix_nms": (1, _MATRIX_NMS_ON_HOST)} for device in DEVICES})

# Models whose random weights amplify rounding past the whole-model tolerance on every runtime: compared against
# twice Paddle Inference's own oneDNN-on/off spread (measured: ResNet50-vd at 64 px, |oneDNN - plain| = 9.1e-5 on
# outputs of magnitude 2.3, and ours 0.7-1.2e-4 on all three devices).
PEER_SPREAD = {"resnet50_vd"}
# Such models whose program Paddle's oneDNN run refuses (ConvertPirAttribute2RuntimeAttribute): compared against twice
# the distance Paddle Inference's own output moves when the float inputs move by one ulp (the larger of up and down).
# Measured: U2Netp at 128 px, Paddle's one-ulp moves 2.6e-4 on outputs of magnitude 7.2, ours 2.5-4.7e-4 on the four
# devices (1485-15398 of 311296 elements past the whole-model tolerance).
ULP_SPREAD = {"u2netp"}
# YOLOF (a detection list: the peer's rows are matched to Paddle's as ours are): measured with the zoo's feeds, Paddle
# Inference's oneDNN run moves the boxes by 2.4e-2 (its one-ulp image moves by 1.2-1.9e-2), ours by 2.0-2.4e-2 on the
# four devices with Paddle's labels and box count and scores within 1.9e-5.
PEER_SPREAD |= {"yolof"}

# model -> index of its [N, H, W] int32 instance masks, one per row of its detection list (Mask R-CNN's
# MaskPostProcess: each 28x28 sigmoid mask grid-sampled into its box and thresholded at 0.5). A box coordinate that
# moves by rounding moves the sampling grid, and the pixels whose value sits at the threshold flip: Paddle
# Inference's own masks change on 14 and 17 of 10.24M pixels when the image moves by one float32 ulp up or down
# (its boxes by 1.0e-3 and 1.8e-3), ours differ on 18-23 pixels on the four devices (boxes by 1.4-3.5e-3, within
# the tolerance). The masks are compared row by row with the detection list's rows (tied rows matched alike) and
# may differ on at most twice as many pixels as Paddle's own, measured in the run: with the image one ulp up and
# one ulp down (MASK_ULP_SPREAD); every other pixel must be equal.
MASK_OUTPUTS = {"mask_rcnn": 2}

# (model, device) -> reason: combinations that fail today, marked xfail(strict=True).
KNOWN_FAILURES: dict = {}
# Detection lists whose post-processing is discontinuous at near-ties, measured with the zoo's feeds: Paddle
# Inference's own list moves when the image moves by one float32 ulp (first number: its largest score change, rows
# reordered), while the network before the post-processing moves by under 3e-6 relative (CenterNet, eager Paddle);
# ours differs from Paddle's list by the second number on the devices named last (PP-YOLOv2: also with every op
# forced to the host's kernels).
_NEAR_TIES = ("{} decides on exact comparisons between near-equal float32 scores, so Paddle Inference's own list "
              "changes (scores by {}, rows reordered) when the image moves by one ulp, and ours differs from it by {} "
              "on {}: a runtime that rounds differently from Paddle's kernels cannot be held to the list")
_CENTERNET_PEAKS = ("CenterNet's post-processing keeps a heatmap position when it equals its 3x3 max pool and takes "
                    "the top 100 of 80x80x80 scores: it")
_MATRIX_NMS_ORDER = ("PP-YOLOv2's Matrix NMS decays each score by its overlap with every higher-scored box of its "
                     "class, so the order of near-equal scores changes the decayed scores: it")
for _device in DEVICES:
    KNOWN_FAILURES[("ppyolov2", _device)] = _NEAR_TIES.format(_MATRIX_NMS_ORDER, "1.3e-3", "1.6-3.9e-3", "every device")
    if _device != "builtin_device":
        # builtin_device rounds the heatmap as Paddle's kernels do, so its equal scores are Paddle's: since the top_k
        # converter's run-time conditions send tied keys to the host kernel (Paddle's order), it gives Paddle's list.
        KNOWN_FAILURES[("centernet", _device)] = _NEAR_TIES.format(_CENTERNET_PEAKS, "7.9e-4", "5.2-6.4e-3",
                                                                "every SDK device")
# DINO measured with the zoo's feeds: Paddle Inference's own top-300 scores move by 2.6-3.6e-3 (90-189 of 300 rows
# in place) when half the image's pixels move by one ulp, and by 2.6e-3 with oneDNN on; ours by 1.7e-3
# (builtin_device), 2.6e-3 (intel_openvino), 1.8e-3 (microsoft_onnxruntime), 1.9e-3 (google_xnnpack). In eager
# Paddle the same one-ulp moves change the encoder's scores by under 1e-4 and reorder 6-20 of the 900 picked queries
# (the same set), and that alone moves the output scores by 2.6-3.6e-3.
_DINO_QUERIES = ("DINO picks its 900 queries by a top-k of the encoder's 2125 class scores and pairs them, in that "
                 "order, with its learnt query embeddings (a one-ulp move of the image reorders 6-20 of them in eager "
                 "Paddle), so the order of near-equal encoder scores changes every decoded box: it")
for _device in DEVICES:
    KNOWN_FAILURES[("dino", _device)] = _NEAR_TIES.format(_DINO_QUERIES, "2.6-3.6e-3", "1.7-2.6e-3", "every device")


def _params():
    for name in SELECTED:
        for device in DEVICES:
            marks = [pytest.mark.slow]
            if (name, device) in KNOWN_FAILURES:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[(name, device)]))
            yield pytest.param(name, device, marks=marks, id=f"{name}-{device}")


# The classification and segmentation architectures added for issue 24 item 7 (catalog.py, full zoo only).
# Deep random networks whose rounding grows past the whole-model tolerance on all three runtimes alike (measured
# max errors 1e-4 to 2e-4 on outputs of magnitude 1 to 4): compared against Paddle's own spread, like ResNet50-vd.
PEER_SPREAD |= {"res2net", "inception_v3", "enet"}
_SHAPE_LOOP = ("ESPNetV2's down-sampler average-pools the image in a Python `while` until its width matches the "
               "feature map's; with a [-1, 3, -1, -1] input the export keeps that loop, and NNAdapter has no "
               "control flow: the host runs the loop, its body's subgraphs on the device")
_SHAPE_BRANCH = ("paddleseg's ViT resizes its position embedding inside an `if` on the run-time image size; with a "
                 "[-1, 3, -1, -1] input the export keeps both branches, and NNAdapter has no control flow: the host "
                 "runs the branch, its body's subgraphs on the device")
for _device in DEVICES:
    EXPECTED_HOST_OPS[("espnetv2", _device)] = {"while": (3, _SHAPE_LOOP)}
    EXPECTED_HOST_OPS[("segmenter", _device)] = {"conditional_block": (2, _SHAPE_BRANCH)}


# ppdet's two-stage detectors (exported with image [-1, 3, -1, -1] and a free batch, as ppdet exports them) loop over
# the images in Python (`for i in range(batch_size)`: RPNHead's proposals per image, RCNNBox's and get_pred's
# per-image shapes, MaskPostProcess's pasting) and branch on run-time values (`if num_rois > post_nms_top_n`,
# `if bbox_num[i] == 0`, MaskHead's `if rois.shape[0] == 0`): the export keeps them as while and conditional_block.
_IMAGE_LOOPS = ("ppdet's RCNN code loops over the batch's images and branches on run-time counts (proposal and box "
                "counts); with a free batch the export keeps the loops and branches, and NNAdapter has no control "
                "flow: the host runs them, their bodies' subgraphs (MaskHead's convs among them) on the device")
_LOOP_ARRAYS = ("reads the tensor array a host-run loop appended its per-image results to: a tensor array is no "
                "NNAdapter tensor, so it stays on the host with the loop")
_FPN_DISTRIBUTE = ("NNAdapter has no operation that splits RoIs into FPN levels (data-dependent counts per level and "
                   "the restore index) and no converter decomposes distribute_fpn_proposals yet: its host kernel runs "
                   "Paddle's")
_RCNN_NMS = ("RCNN heads give multiclass_nms3 its second input form (per-class boxes [M, C, 4], scores [M, C] with "
             "rois_num) and the NON_MAX_SUPPRESSION built around the SDK's NonMaxSuppression (boxes shared by all "
             "classes) does not compose that form yet: its host kernel runs it")
# model -> (while, conditional_block, tensor_array_to_tensor, lod_array_length, distribute_fpn_proposals) counts;
# Cascade R-CNN distributes each of its three stages' RoIs over the FPN levels.
_RCNN_HOST_COUNTS = {"faster_rcnn": (4, 2, 7, 1, 1), "mask_rcnn": (5, 4, 7, 1, 1), "cascade_rcnn": (3, 4, 5, 2, 3)}
for _device in DEVICES:
    for _name, (_loops, _branches, _arrays, _lengths, _distributes) in _RCNN_HOST_COUNTS.items():
        EXPECTED_HOST_OPS[(_name, _device)] = {
            "while": (_loops, _IMAGE_LOOPS), "conditional_block": (_branches, _IMAGE_LOOPS),
            "tensor_array_to_tensor": (_arrays, _LOOP_ARRAYS), "lod_array_length": (_lengths, _LOOP_ARRAYS),
            "distribute_fpn_proposals": (_distributes, _FPN_DISTRIBUTE)}
        if _device in ("intel_openvino", "microsoft_onnxruntime"):
            EXPECTED_HOST_OPS[(_name, _device)]["multiclass_nms3"] = (1, _RCNN_NMS)

# SOLOv2 (full zoo): its post-processing is paddle ops with data-dependent sizes and a branch.
_NONZERO = ("NNAdapter has no operation whose output size is the data's count of true elements (Paddle's nonzero, "
            "where_index): its host kernel picks SOLOv2's candidate cells, its masks above the stride's area and "
            "Matrix NMS's survivors")
_DYNAMIC_KERNELS = ("SOLOv2's mask kernels are the kernel predictions' rows picked by a nonzero, so this conv's filter "
                    "count is known only at run time; the conv2d converter builds CONV_2D's bias (one value per output "
                    "channel) as a constant and declines it: its host kernel runs Paddle's conv2d")
_SORT_BRANCH = ("ppdet's MaskMatrixNMS sorts with topk or with argsort inside an `if` on the run-time candidate count "
                "(`paddle.shape(scores)[0] > top_num`, twice), exported as branches, and NNAdapter has no control "
                "flow: the host runs the branches, their bodies' subgraphs on the device")
_SOLOV2_MASKS = ("SOLOv2's post-processing thresholds every mask at 0.5 (at 80x80, where the mask areas weight the "
                 "scores and the Matrix NMS decay, and at 320x320 for the output masks) and orders near-equal scores: "
                 "it")
for _device in DEVICES:
    EXPECTED_HOST_OPS[("solov2", _device)] = {"where_index": (3, _NONZERO), "conv2d": (1, _DYNAMIC_KERNELS),
                                              "conditional_block": (4, _SORT_BRANCH)}
    # Measured with the zoo's feeds (63 masks of 320x320): labels and mask count equal Paddle's on every device.
    KNOWN_FAILURES[("solov2", _device)] = (
        f"{_SOLOV2_MASKS} decides on exact comparisons with float32 values, so Paddle Inference's own output changes "
        "(scores by 6.9e-5, 0-10 of each mask's 102400 pixels flipped) when the image moves by one ulp, and ours "
        "differs from it by 5.5e-5 (intel_openvino) to 1.7e-4 in the scores and 0-15 pixels per mask: a runtime that "
        "rounds differently from Paddle's kernels cannot be held to the masks")
# RetinaNet (full zoo): measured with the zoo's feeds, every device gives Paddle's labels and box count, scores within
# 4-6e-5 and box corners within 0.9-1.6e-4 of the box's extent (builtin_device and microsoft_onnxruntime within the
# whole-model tolerance).
_RETINANET_ROUNDING = (
    "RetinaNet's random ResNet50-FPN and norm-free towers amplify float32 rounding to about 1e-4 of its outputs on "
    "every runtime (all four devices: box corners off by 0.9-1.6e-4 of the box's extent, scores by 4-6e-5); a corner "
    "near 0 (a centre minus half an extent) then misses the whole-model tolerance (1e-5 of max|box| 353 = 3.5e-3) "
    "in {} of 600 elements ({}). The peers' spread cannot be measured: Paddle Inference's oneDNN run fails on this "
    "program (ConvertPirAttribute2RuntimeAttribute), its ir_optim and 2-thread runs equal the reference bit for bit")
KNOWN_FAILURES[("retinanet", "intel_openvino")] = _RETINANET_ROUNDING.format(2, "up to 4.1e-3 at |y| 0.93")
KNOWN_FAILURES[("retinanet", "google_xnnpack")] = _RETINANET_ROUNDING.format(1, "4.5e-3 at |x| 4.8")

# google_xnnpack builds float32 and int8 tensors only and takes only what XNNPACK runs: the ops below keep their host
# kernels there (measured on the whole zoo, NNADAPTER_BRIDGE_FULL_ZOO=1; every model matches Paddle Inference).
_XNN_INTEGER = ("computes on int64 / int32 / bool values, which google_xnnpack cannot build (XNNPACK has no integer "
                "arithmetic; it builds float32 and int8 tensors only): values computed from the data (ids, masks, "
                "comparisons), or shape arithmetic whose value leaves the devices' subgraphs (read by a host op, a "
                "loop or a fetch, or parted from its readers by a host op), which no compiled subgraph can fold; "
                "shape arithmetic made and read inside one subgraph is decided as the constants it becomes and runs "
                "there (support_decisions.SupportDecider._taken_by_folding)")


def _xnn_lacks(what: str) -> str:
    return (f"XNNPACK has no {what} (google_xnnpack has no implementation): LiteRT would run it on its reference "
            "kernels, which google_xnnpack never lets happen (the delegate must take every operator)")


_XNN_NEAREST = _xnn_lacks("nearest-neighbour resize (LiteRT keeps RESIZE_NEAREST_NEIGHBOR)")
_XNN_NMS = _xnn_lacks("non-maximum suppression")
_XNN_STEPS = "XNNPACK slices with step 1 only: a strided or reversed slice is declined"
_XNN_ADAPTIVE = "TFLite has no adaptive pool: only an adaptive average pool to 1x1 (a MEAN) is built"
_XNN_POOL_INDICES = "TFLite's MAX_POOL_2D has no indices output"
_XNN_ONE_BY_ONE_MAX_POOL = ("XNNPACK's max pooling takes windows larger than 1x1 (measured: the delegate leaves a 1x1 "
                            "MAX_POOL_2D to LiteRT's kernels), and FPN's extra level subsamples P5 by a 1x1 max pool "
                            "at stride 2 (a strided slice, which XNNPACK takes with step 1 only)")
_XNN_VECTOR_MATMUL = "a matmul with a 1-D operand (the vector case) is not expressed in TFLite's BATCH_MATMUL"
_XNN_HOST = {
    "deit": {
        "shape": (1, _XNN_INTEGER), "slice": (1, _XNN_INTEGER), "fill_constant": (4, _XNN_INTEGER),
        "stack": (2, _XNN_INTEGER), "expand_v2": (2, _xnn_lacks("EXPAND")),
    },
    "swin": {
        "shape": (9, _XNN_INTEGER), "slice": (9, _XNN_INTEGER), "fill_constant": (47, _XNN_INTEGER),
        "stack": (18, _XNN_INTEGER), "reshape2": (20, _XNN_INTEGER),
        "index_select": (2, _xnn_lacks("GATHER")),
        "roll": (12, _xnn_lacks("ROLL")),
        "not_equal": (1, _XNN_INTEGER),
        "where": (2, _xnn_lacks("WHERE")),
        "equal": (1, _XNN_INTEGER),
        "strided_slice": (12, _XNN_STEPS),
    },
    "convnext": {
        "pow": (4, _xnn_lacks("POW")),
        "sqrt": (4, _xnn_lacks("POW")),
    },
    "levit": {
        "shape": (4, _XNN_INTEGER), "slice": (5, _XNN_INTEGER), "fill_constant": (25, _XNN_INTEGER),
        "stack": (10, _XNN_INTEGER), "reshape2": (10, _XNN_INTEGER),
        "strided_slice": (2, _XNN_STEPS),
    },
    "rexnet": {
        "set_value": (11, _xnn_lacks("GATHER and WHERE")),
    },
    "stdcseg": {
        "shape": (3, _XNN_INTEGER), "slice": (3, _XNN_INTEGER), "cast": (3, _XNN_INTEGER),
        "nearest_interp_v2": (3, _XNN_NEAREST),
    },
    "enet": {
        "shape": (4, _XNN_INTEGER), "slice": (10, _XNN_INTEGER),
        "max_pool2d_with_index": (2, _XNN_POOL_INDICES),
        "fill_constant": (4, _XNN_INTEGER), "stack": (6, _XNN_INTEGER), "unpool": (2, _XNN_INTEGER),
        "conv2d_transpose": (2, _XNN_INTEGER),
    },
    "espnetv2": {
        "shape": (6, _XNN_INTEGER), "slice": (6, _XNN_INTEGER),
        "not_equal": (3, _XNN_INTEGER),
        "assign": (6, _XNN_INTEGER), "while": (3, _SHAPE_LOOP),
    },
    "segmenter": {
        "shape": (10, _XNN_INTEGER), "slice": (19, _XNN_INTEGER), "fill_constant": (36, _XNN_INTEGER),
        "stack": (15, _XNN_INTEGER), "expand_v2": (2, _XNN_INTEGER), "equal": (1, _XNN_INTEGER),
        "conditional_block": (2, _SHAPE_BRANCH), "logical_not": (1, _XNN_INTEGER),
        "elementwise_floordiv": (6, _xnn_lacks("FLOOR_DIV")),
        "reshape2": (13, _XNN_INTEGER),
        "p_norm": (2, _xnn_lacks("POW")),
    },
    "pp_mobileseg": {
        "shape": (27, _XNN_INTEGER), "slice": (42, _XNN_INTEGER), "linear_interp_v2": (16, _XNN_INTEGER),
        "fill_constant": (64, _XNN_INTEGER), "stack": (32, _XNN_INTEGER), "reshape2": (32, _XNN_INTEGER),
        "bilinear_interp_v2": (7, _XNN_INTEGER),
    },
    "danet": {
        "shape": (1, _XNN_INTEGER),
        "tile": (1, _xnn_lacks("TILE")),
        "slice": (2, _XNN_INTEGER), "fill_constant": (2, _XNN_INTEGER), "stack": (1, _XNN_INTEGER),
        "reshape2": (1, _XNN_INTEGER),
    },
    "picodet": {
        "nearest_interp_v2": (2, _XNN_NEAREST),
        "sqrt": (4, _xnn_lacks("POW")),
        "matmul_v2": (4, _XNN_VECTOR_MATMUL),
        "multiclass_nms3": (1, _XNN_INTEGER),
    },
    "ppyoloe_plus": {"nearest_interp_v2": (2, _XNN_NEAREST), "multiclass_nms3": (1, _XNN_INTEGER)},
    "rtdetr": {
        "shape": (14, _XNN_INTEGER), "slice": (14, _XNN_INTEGER), "fill_constant": (231, _XNN_INTEGER),
        "stack": (74, _XNN_INTEGER), "reshape2": (72, _XNN_INTEGER), "nearest_interp_v2": (2, _XNN_NEAREST),
        "range": (1, _XNN_INTEGER), "cast": (5, _XNN_INTEGER),
        "greater_than": (1, _XNN_INTEGER), "less_than": (1, _XNN_INTEGER), "bitwise_and": (1, _XNN_INTEGER),
        "reduce_all": (1, _XNN_INTEGER), "fill_any_like": (3, _XNN_INTEGER),
        "where": (1, _xnn_lacks("WHERE")),
        "top_k_v2": (2, _xnn_lacks("TOP_K")),
        "unsqueeze2": (4, _XNN_INTEGER),
        "expand_v2": (6, _xnn_lacks("EXPAND")),
        "take_along_axis": (2, _XNN_INTEGER), "scale": (42, _XNN_INTEGER),
        "grid_sampler": (18, _xnn_lacks("GRID_SAMPLE")),
        "flip": (1, _XNN_STEPS),
        "tile": (3, _xnn_lacks("TILE")),
        "elementwise_mod": (1, _XNN_INTEGER),
        "elementwise_floordiv": (1, _xnn_lacks("FLOOR_DIV")),
        "gather_nd": (1, _XNN_INTEGER), "assign_value": (1, _XNN_INTEGER),
    },
    "ppocrv5_det": {"nearest_interp_v2": (6, _XNN_NEAREST)},
    "ernie_seq_cls": {
        "fill_constant": (3, _XNN_INTEGER), "equal": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "lookup_table_v2": (4, _xnn_lacks("GATHER")),
        "shape": (1, _XNN_INTEGER), "slice": (2, _XNN_INTEGER), "stack": (2, _XNN_INTEGER),
        "cumsum": (1, _xnn_lacks("CUM_SUM")),
        "elementwise_sub": (1, _XNN_INTEGER), "scale": (1, _XNN_INTEGER),
    },
    "ernie_token_cls": {
        "fill_constant": (3, _XNN_INTEGER), "equal": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "lookup_table_v2": (4, _xnn_lacks("GATHER")),
        "shape": (1, _XNN_INTEGER), "slice": (2, _XNN_INTEGER), "stack": (2, _XNN_INTEGER),
        "cumsum": (1, _xnn_lacks("CUM_SUM")),
        "elementwise_sub": (1, _XNN_INTEGER), "scale": (1, _XNN_INTEGER),
    },
    "yolov3": {
        "nearest_interp_v2": (2, _XNN_NEAREST), "cast": (1, _XNN_INTEGER), "yolo_box": (3, _XNN_INTEGER),
        "multiclass_nms3": (1, _XNN_INTEGER),
    },
    "ssd": {"multiclass_nms3": (1, _XNN_INTEGER)},
    "faster_rcnn": {
        "shape": (14, _XNN_INTEGER), "slice": (24, _XNN_INTEGER), "fill_constant": (15, _XNN_INTEGER),
        "assign": (16, _XNN_INTEGER), "scale": (10, _XNN_INTEGER), "cast": (10, _XNN_INTEGER),
        "range": (14, _XNN_INTEGER), "meshgrid": (5, _XNN_INTEGER), "less_than": (4, _XNN_INTEGER),
        "greater_than": (3, _XNN_INTEGER), "logical_not": (1, _XNN_INTEGER), "logical_and": (1, _XNN_INTEGER),
        "stack": (1, _XNN_INTEGER), "unsqueeze2": (1, _XNN_INTEGER), "assign_value": (1, _XNN_INTEGER),
        "while": (4, _IMAGE_LOOPS), "conditional_block": (2, _IMAGE_LOOPS),
        "tensor_array_to_tensor": (7, _LOOP_ARRAYS), "lod_array_length": (1, _LOOP_ARRAYS),
        "distribute_fpn_proposals": (1, _FPN_DISTRIBUTE),
        "roi_align": (4, _xnn_lacks("ROI_ALIGN")), "strided_slice": (4, _XNN_STEPS),
        "nearest_interp_v2": (3, _XNN_NEAREST),
        "gather": (1, _xnn_lacks("GATHER")), "expand_v2": (1, _xnn_lacks("EXPAND")),
        "where": (1, _xnn_lacks("WHERE")), "multiclass_nms3": (1, _XNN_NMS),
    },
    "cascade_rcnn": {
        "shape": (15, _XNN_INTEGER), "slice": (26, _XNN_INTEGER), "fill_constant": (14, _XNN_INTEGER),
        "assign": (12, _XNN_INTEGER), "scale": (10, _XNN_INTEGER), "cast": (10, _XNN_INTEGER),
        "range": (13, _XNN_INTEGER), "meshgrid": (5, _XNN_INTEGER), "less_than": (3, _XNN_INTEGER),
        "greater_than": (4, _XNN_INTEGER), "logical_not": (2, _XNN_INTEGER), "logical_and": (1, _XNN_INTEGER),
        "stack": (3, _XNN_INTEGER), "concat": (2, _XNN_INTEGER), "split": (1, _XNN_INTEGER),
        "unsqueeze2": (1, _XNN_INTEGER), "assign_value": (1, _XNN_INTEGER),
        "while": (3, _IMAGE_LOOPS), "conditional_block": (4, _IMAGE_LOOPS),
        "tensor_array_to_tensor": (5, _LOOP_ARRAYS), "lod_array_length": (2, _LOOP_ARRAYS),
        "distribute_fpn_proposals": (3, _FPN_DISTRIBUTE),
        "roi_align": (12, _xnn_lacks("ROI_ALIGN")), "strided_slice": (12, _XNN_STEPS),
        "clip": (8, "XNNPACK clamps between constant bounds, and CascadeHead clips each stage's boxes to the image "
                    "size, a run-time input (im_shape)"),
        "nearest_interp_v2": (3, _XNN_NEAREST),
        "gather": (3, _xnn_lacks("GATHER")), "expand_v2": (2, _xnn_lacks("EXPAND")),
        "where": (1, _xnn_lacks("WHERE")), "multiclass_nms3": (1, _XNN_NMS),
    },
    "mask_rcnn": {
        "shape": (18, _XNN_INTEGER), "slice": (30, _XNN_INTEGER), "fill_constant": (23, _XNN_INTEGER),
        "assign": (24, _XNN_INTEGER), "scale": (11, _XNN_INTEGER), "cast": (13, _XNN_INTEGER),
        "range": (15, _XNN_INTEGER), "meshgrid": (5, _XNN_INTEGER), "less_than": (5, _XNN_INTEGER),
        "greater_than": (3, _XNN_INTEGER), "logical_not": (2, _XNN_INTEGER), "logical_and": (1, _XNN_INTEGER),
        "equal": (1, _XNN_INTEGER), "reduce_max": (2, _XNN_INTEGER),
        "stack": (2, _XNN_INTEGER), "unsqueeze2": (1, _XNN_INTEGER), "assign_value": (1, _XNN_INTEGER),
        "while": (5, _IMAGE_LOOPS), "conditional_block": (4, _IMAGE_LOOPS),
        "tensor_array_to_tensor": (7, _LOOP_ARRAYS), "lod_array_length": (1, _LOOP_ARRAYS),
        "distribute_fpn_proposals": (1, _FPN_DISTRIBUTE),
        "roi_align": (4, _xnn_lacks("ROI_ALIGN")), "strided_slice": (4, _XNN_STEPS),
        "nearest_interp_v2": (3, _XNN_NEAREST),
        "gather": (1, _xnn_lacks("GATHER")), "expand_v2": (1, _xnn_lacks("EXPAND")),
        "where": (1, _xnn_lacks("WHERE")), "multiclass_nms3": (1, _XNN_NMS),
    },
    "tinypose": {
        "nearest_interp_v2": (26, _XNN_NEAREST),
        "arg_max": (1, _XNN_INTEGER),
    },
    "ppocrv5_server_det": {"nearest_interp_v2": (7, _XNN_NEAREST)},
    "slanet": {
        "nearest_interp_v2": (3, _XNN_NEAREST), "shape": (2, _XNN_INTEGER), "slice": (2, _XNN_INTEGER),
        "fill_constant": (3, _XNN_INTEGER), "stack": (2, _XNN_INTEGER), "one_hot_v2": (25, _XNN_INTEGER),
        "arg_max": (24, _XNN_INTEGER),
    },
    "uie": {
        "unsqueeze2": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "lookup_table_v2": (4, _xnn_lacks("GATHER")),
        "shape": (1, _XNN_INTEGER), "slice": (2, _XNN_INTEGER), "stack": (1, _XNN_INTEGER),
        "fill_constant": (1, _XNN_INTEGER), "scale": (1, _XNN_INTEGER),
    },
    "bert_seq_cls": {
        "fill_constant": (1, _XNN_INTEGER), "equal": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "fill_any_like": (1, _XNN_INTEGER),
        "cumsum": (1, _xnn_lacks("CUM_SUM")),
        "elementwise_sub": (1, _XNN_INTEGER),
        "lookup_table_v2": (3, _xnn_lacks("GATHER")),
    },
    "gpt_lm": {
        "shape": (1, _XNN_INTEGER), "slice": (4, _XNN_INTEGER), "fill_constant": (1, _XNN_INTEGER),
        "stack": (2, _XNN_INTEGER), "reshape2": (1, _XNN_INTEGER), "scale": (1, _XNN_INTEGER),
        "range": (1, _XNN_INTEGER), "unsqueeze2": (1, _XNN_INTEGER), "expand_v2": (1, _XNN_INTEGER),
        "lookup_table_v2": (2, _xnn_lacks("GATHER")),
        "cast": (1, _XNN_INTEGER),
    },
    "electra_token_cls": {
        "fill_constant": (1, _XNN_INTEGER), "equal": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "fill_any_like": (1, _XNN_INTEGER),
        "cumsum": (1, _xnn_lacks("CUM_SUM")),
        "elementwise_sub": (1, _XNN_INTEGER),
        "lookup_table_v2": (3, _xnn_lacks("GATHER")),
    },
    "ernie_m": {
        "fill_constant": (2, _XNN_INTEGER), "equal": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "lookup_table_v2": (2, _xnn_lacks("GATHER")),
        "shape": (1, _XNN_INTEGER), "slice": (1, _XNN_INTEGER),
        "cumsum": (1, _xnn_lacks("CUM_SUM")),
        "elementwise_sub": (1, _XNN_INTEGER), "scale": (1, _XNN_INTEGER),
    },
    "solov2": {
        "nearest_interp_v2": (3, _XNN_NEAREST), "bilinear_interp_v2": (1, _XNN_INTEGER),
        "shape": (21, _XNN_INTEGER), "slice": (19, _XNN_INTEGER), "cast": (19, _XNN_INTEGER),
        "fill_constant": (42, _XNN_INTEGER), "stack": (11, _XNN_INTEGER), "concat": (7, _XNN_INTEGER),
        "unsqueeze2": (1, _XNN_INTEGER), "squeeze2": (2, _XNN_INTEGER), "transpose2": (1, _XNN_INTEGER),
        "scale": (3, _XNN_INTEGER), "elementwise_add": (1, _XNN_INTEGER), "logical_not": (2, _XNN_INTEGER),
        "equal": (6, _XNN_INTEGER), "greater_than": (6, _XNN_INTEGER), "greater_equal": (1, _XNN_INTEGER),
        "expand_v2": (13, _xnn_lacks("EXPAND")),
        "tril_triu": (2, _xnn_lacks("RANGE or WHERE (tril_triu's decomposition)")),
        "where": (3, _xnn_lacks("WHERE")), "gather": (19, _xnn_lacks("GATHER")),
        "elementwise_pow": (2, _xnn_lacks("POW")),
        "where_index": (3, _NONZERO), "conv2d": (1, _DYNAMIC_KERNELS), "conditional_block": (4, _SORT_BRANCH),
    },
    "fcos": {
        "nearest_interp_v2": (2, _XNN_NEAREST),
        "multiclass_nms3": (1, _XNN_INTEGER),
    },
    "retinanet": {
        "nearest_interp_v2": (2, _XNN_NEAREST),
        "top_k_v2": (2, _xnn_lacks("TOP_K")), "gather": (6, _xnn_lacks("GATHER")),
        "strided_slice": (22, _XNN_STEPS), "multiclass_nms3": (1, _XNN_INTEGER),
    },
    "bigru_crf": {
        "lookup_table_v2": (1, _xnn_lacks("GATHER")),
        "shape": (1, _XNN_INTEGER), "slice": (1, _XNN_INTEGER), "fill_constant": (3, _XNN_INTEGER),
        "stack": (1, _XNN_INTEGER), "rnn": (1, _RNN_ON_HOST), "viterbi_decode": (1, _VITERBI_ON_HOST),
    },
    "deformable_detr": {
        "fill_constant": (119, _xnn_lacks("FILL")), "slice": (183, _XNN_INTEGER), "reshape2": (92, _XNN_INTEGER),
        "stack": (81, _XNN_INTEGER), "scale": (60, _XNN_INTEGER), "grid_sampler": (48, _xnn_lacks("GRID_SAMPLE")),
        "cast": (30, _XNN_INTEGER), "shape": (19, _XNN_INTEGER), "split": (24, _XNN_INTEGER),
        "strided_slice": (16, _XNN_STEPS), "range": (9, _XNN_INTEGER), "flip": (12, _XNN_INTEGER),
        "reduce_prod": (12, _XNN_INTEGER), "cumsum": (8, _xnn_lacks("CUM_SUM")),
        "elementwise_floordiv": (1, _xnn_lacks("FLOOR_DIV")),
        "concat": (4, _XNN_INTEGER), "meshgrid": (4, _XNN_INTEGER),
        "tile": (4, _xnn_lacks("TILE")), "unsqueeze2": (2, _XNN_INTEGER), "top_k_v2": (1, _xnn_lacks("TOP_K")),
        "elementwise_mod": (1, _XNN_INTEGER), "gather_nd": (1, _XNN_INTEGER), "assign_value": (1, _XNN_INTEGER),
    },
    "yolox": {
        "strided_slice": (4, _XNN_STEPS),
        "nearest_interp_v2": (2, _XNN_NEAREST), "sqrt": (1, _xnn_lacks("POW")),
        "flip": (1, _XNN_STEPS), "tile": (1, _xnn_lacks("TILE")), "multiclass_nms3": (1, _XNN_NMS),
    },
}
# NLP families with op patterns the zoo had not seen (full zoo): FNet's Fourier token mixing, RoFormer's rotary
# positions, DeBERTa-v3's disentangled attention over bucketed relative positions; ConvBERT's span-based dynamic
# convolution, ALBERT's shared layers and MobileBERT's bottlenecks run wholly on the SDK devices.
_FFT_ON_HOST = ("NNAdapter has no Fourier transform operation and no complex element type: FNet's fftn (fft_r2c, "
                "complex64 out) and the `real` of its complex result run on the host's numpy kernels")
_DEBERTA_BRANCH = ("DeBERTa-v2's position-to-content attention branches on `key_layer.shape[-2] != "
                   "query_layer.shape[-2]` (a true and a false block per layer); with input_ids [-1, -1] the export "
                   "keeps the branch, and NNAdapter has no control flow: the host runs it, its bodies' subgraphs on "
                   "the device")
_OPENVINO_FLOAT_TO_INT64 = ("OpenVINO's CPU plugin converts float32 to int64 through int32 (wrong beyond 2^31), so "
                            "the CAST of DeBERTa's log-bucketed relative positions to int64 is declined there")
for _device in DEVICES:
    EXPECTED_HOST_OPS[("fnet_seq_cls", _device)] = {"fft_r2c": (2, _FFT_ON_HOST), "real": (2, _FFT_ON_HOST)}
    EXPECTED_HOST_OPS[("deberta_v2_seq_cls", _device)] = {"conditional_block": (4, _DEBERTA_BRANCH)}
EXPECTED_HOST_OPS[("deberta_v2_seq_cls", "intel_openvino")]["cast"] = (1, _OPENVINO_FLOAT_TO_INT64)
_XNN_HOST.update({
    "fnet_seq_cls": {
        "shape": (1, _XNN_INTEGER), "slice": (2, _XNN_INTEGER), "stack": (1, _XNN_INTEGER),
        "lookup_table_v2": (3, _xnn_lacks("GATHER")), "pow": (2, _xnn_lacks("POW")),
        "fft_r2c": (2, _FFT_ON_HOST), "real": (2, _FFT_ON_HOST),
    },
    "roformer_seq_cls": {
        "fill_constant": (1, _XNN_INTEGER), "equal": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "lookup_table_v2": (2, _xnn_lacks("GATHER")), "shape": (4, _XNN_INTEGER), "slice": (12, _XNN_INTEGER),
        "scale": (8, _XNN_INTEGER), "stack": (8, _XNN_INTEGER), "strided_slice": (8, _XNN_STEPS),
    },
    "deberta_v2_seq_cls": {
        "lookup_table_v2": (1, _xnn_lacks("GATHER")), "take_along_axis": (4, _xnn_lacks("GATHER")),
        "shape": (24, _XNN_INTEGER), "slice": (29, _XNN_INTEGER), "fill_constant": (16, _XNN_INTEGER),
        "stack": (11, _XNN_INTEGER), "cast": (15, _XNN_INTEGER),
        "unsqueeze2": (9, _XNN_INTEGER), "squeeze2": (5, _XNN_INTEGER),
        "elementwise_mul": (1, _XNN_INTEGER), "elementwise_sub": (1, _XNN_INTEGER), "scale": (6, _XNN_INTEGER),
        "clip": (4, _XNN_INTEGER), "range": (2, _XNN_INTEGER), "sign": (1, _XNN_INTEGER),
        "less_than": (1, _XNN_INTEGER), "greater_than": (1, _XNN_INTEGER), "less_equal": (1, _XNN_INTEGER),
        "not_equal": (2, _XNN_INTEGER), "bitwise_and": (1, _XNN_INTEGER), "logical_not": (4, _XNN_INTEGER),
        "fill_any_like": (8, _xnn_lacks("FILL_LIKE")), "where": (4, _xnn_lacks("WHERE")),
        "expand_v2": (12, _xnn_lacks("EXPAND")), "tile": (4, _xnn_lacks("TILE")),
        "elementwise_floordiv": (4, _xnn_lacks("FLOOR_DIV")),
        "conditional_block": (4, _DEBERTA_BRANCH),
    },
    "convbert_seq_cls": {
        "fill_constant": (2, _XNN_INTEGER), "equal": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "lookup_table_v2": (3, _xnn_lacks("GATHER")), "shape": (1, _XNN_INTEGER), "slice": (1, _XNN_INTEGER),
        "cumsum": (1, _xnn_lacks("CUM_SUM")), "elementwise_sub": (1, _XNN_INTEGER),
    },
    "albert_seq_cls": {
        "shape": (2, _XNN_INTEGER), "slice": (4, _XNN_INTEGER), "stack": (2, _XNN_INTEGER),
        "fill_constant": (1, _XNN_INTEGER), "scale": (1, _XNN_INTEGER), "lookup_table_v2": (3, _xnn_lacks("GATHER")),
    },
    "mobilebert_seq_cls": {
        "shape": (2, _XNN_INTEGER), "slice": (4, _XNN_INTEGER), "stack": (2, _XNN_INTEGER),
        "fill_constant": (1, _XNN_INTEGER), "unsqueeze2": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER),
        "lookup_table_v2": (3, _xnn_lacks("GATHER")),
    },
})


# Classification families with op patterns the zoo had not seen (full zoo). RedNet26's involutions multiply each
# feature map by kernels generated from it, so with random weights some inputs grow quadratically from one
# involution to the next (measured with Paddle: max|logit| 1.8-2.4 on three random images, 242 on a fourth, 5.9e4 on
# the zoo's feed): compared against Paddle's own spread (measured: |oneDNN - plain| = 2.5 on outputs of magnitude
# 5.9e4, ours 2.0-3.4 on the four devices).
PEER_SPREAD |= {"rednet"}
_XNN_HOST.update({
    "rednet": {"unfold": (3, _XNN_STEPS)},
    # CvT's class token: its expand reads the batch from `shape`, and google_xnnpack has no EXPAND.
    "cvt": {"shape": (1, _XNN_INTEGER), "slice": (1, _XNN_INTEGER), "fill_constant": (2, _XNN_INTEGER),
            "stack": (1, _XNN_INTEGER), "expand_v2": (1, _xnn_lacks("EXPAND"))},
})


# (model, device) -> (subgraph runs allowed to move to the host at run time, why). None now: RT-DETR's masked anchor
# logits hold infinity, which google_xnnpack treats as a device fault where they enter a subgraph (XNNPACK's clamps
# pass NaN on where Paddle's relu gives 0), and one run fell back so; since shape arithmetic is decided as the
# constants it becomes, RT-DETR's subgraphs are others, and no subgraph input holds them on the zoo's feed (measured).
EXPECTED_HOST_RUNS: dict = {}
EXPECTED_HOST_OPS.update({(name, "google_xnnpack"): ops for name, ops in _XNN_HOST.items()})

# The ops of loop and branch bodies left on the host, as EXPECTED_HOST_OPS lists block 0's: a body is partitioned as
# block 0 is (its subgraphs run on the device each time the host runs the body), so what stays on the host in it
# needs a reason too. Counted over every body of the model, nested ones included.
EXPECTED_BODY_HOST_OPS: dict = {}
_PROPOSALS = ("NNAdapter has no operation that generates RPN proposals (anchors decoded and clipped, small boxes "
              "dropped, then an NMS keeping a data-dependent count): its host kernel runs Paddle's, in RPNHead's "
              "loop over the images")
_ARRAYS_IN_LOOPS = ("the loops gather their per-image and per-level results in tensor arrays (write_to_array, the "
                    "array's length, slices of it), and a tensor array is no NNAdapter tensor: the host keeps it")
_PASTE_BROADCAST = ("MaskPostProcess's paste loop broadcasts the box's grid against the image's with sizes its "
                    "declarations leave unknown, and broadcast_tensors' converter needs every input's dims to be "
                    "decided on; the pasting around it (grid_sample) runs on the device")
# model -> {op: count} in the R-CNN bodies on every device taking the float and integer ops (the XNNPACK lists add
# what it declines besides).
_RCNN_BODY_HOST = {
    "faster_rcnn": {"generate_proposals_v2": 5, "conditional_block": 4, "write_to_array": 7, "lod_array_length": 7,
                    "tensor_array_to_tensor": 1, "slice": 1},
    "mask_rcnn": {"generate_proposals_v2": 5, "conditional_block": 4, "write_to_array": 7, "lod_array_length": 7,
                  "tensor_array_to_tensor": 1, "slice": 1, "distribute_fpn_proposals": 1, "broadcast_tensors": 1},
    "cascade_rcnn": {"generate_proposals_v2": 5, "conditional_block": 4, "write_to_array": 6, "lod_array_length": 6,
                     "tensor_array_to_tensor": 2, "slice": 2},
}
_RCNN_BODY_REASONS = {"generate_proposals_v2": _PROPOSALS, "conditional_block": _IMAGE_LOOPS,
                      "write_to_array": _ARRAYS_IN_LOOPS, "lod_array_length": _ARRAYS_IN_LOOPS,
                      "tensor_array_to_tensor": _ARRAYS_IN_LOOPS, "slice": _ARRAYS_IN_LOOPS,
                      "distribute_fpn_proposals": _FPN_DISTRIBUTE, "broadcast_tensors": _PASTE_BROADCAST}
# What google_xnnpack declines besides in those bodies (its float-only tensors; TOP_K, GATHER, ROI_ALIGN... lacking).
_RCNN_BODY_XNN = {
    "faster_rcnn": {"scale": 34, "stack": 65, "slice": 33, "shape": 2, "cast": 5, "fill_constant": 5,
                    "greater_than": 1, "logical_not": 2, "less_than": 4, "assign": 20, "equal": 1,
                    "elementwise_add": 2, "top_k_v2": 1, "gather": 1, "expand_v2": 3, "fill_any_like": 3},
    "mask_rcnn": {"scale": 42, "stack": 89, "slice": 52, "shape": 10, "cast": 18, "fill_constant": 11,
                  "greater_than": 1, "logical_not": 2, "less_than": 5, "assign": 28, "equal": 1, "elementwise_add": 6,
                  "greater_equal": 1, "range": 3, "reshape2": 6, "top_k_v2": 1, "gather": 2, "expand_v2": 5,
                  "roi_align": 4, "gather_nd": 1, "grid_sampler": 1, "set_value": 1, "fill_any_like": 3},
    "cascade_rcnn": {"scale": 30, "stack": 58, "slice": 30, "shape": 2, "cast": 5, "fill_constant": 4,
                     "greater_than": 1, "logical_not": 2, "less_than": 3, "assign": 16, "equal": 1,
                     "elementwise_add": 2, "top_k_v2": 1, "gather": 1, "expand_v2": 2, "fill_any_like": 3},
}
_XNN_BODY_REASONS = {"fill_any_like": _xnn_lacks("FILL_LIKE"), "top_k_v2": _xnn_lacks("TOP_K"),
                     "gather": _xnn_lacks("GATHER"), "expand_v2": _xnn_lacks("EXPAND"),
                     "roi_align": _xnn_lacks("ROI_ALIGN"), "gather_nd": _xnn_lacks("GATHER"),
                     "grid_sampler": _xnn_lacks("GRID_SAMPLE"), "set_value": _xnn_lacks("WHERE")}
for _name, _ops in _RCNN_BODY_HOST.items():
    for _device in DEVICES:
        found = {op: (n, _RCNN_BODY_REASONS[op]) for op, n in _ops.items()}
        if _device == "google_xnnpack":
            for op, n in _RCNN_BODY_XNN[_name].items():
                earlier, why = found.get(op, (0, _XNN_BODY_REASONS.get(op, _XNN_INTEGER)))
                found[op] = (earlier + n, why)
        EXPECTED_BODY_HOST_OPS[(_name, _device)] = found
# Measured with the zoo's feeds: on microsoft_onnxruntime, one of RPNHead's per-level top-k meets equal scores (its
# run-time condition fails), so that top_k_v2 runs on the host, where Paddle's order of equal keys is replayed.
EXPECTED_BODY_HOST_OPS[("faster_rcnn", "microsoft_onnxruntime")]["top_k_v2"] = (
    1, "RPNHead's top-k over a level's objectness meets equal keys on microsoft_onnxruntime's scores (its run-time "
       "condition fails): Paddle orders ties as std::partial_sort leaves them, which the host kernel replays")
# ESPNetV2's down-sampling loop tests the widths (int64 shapes, a bool) in its body: XNNPACK computes float32 only.
EXPECTED_BODY_HOST_OPS[("espnetv2", "google_xnnpack")] = {
    "shape": (3, _XNN_INTEGER), "slice": (3, _XNN_INTEGER), "not_equal": (3, _XNN_INTEGER),
    "assign": (6, _XNN_INTEGER)}
# paddleseg's ViT (segmenter) resizes its position embedding in the branch, bicubically.
_BICUBIC = ("the branch resizes the position embedding bicubically to a size computed from the run-time image size "
            "(its OutSize, a value the subgraph is handed), and bicubic's converter builds its taps as constants "
            "from sizes known at conversion: its host kernel runs Paddle's")
for _device in DEVICES:
    EXPECTED_BODY_HOST_OPS[("segmenter", _device)] = {"bicubic_interp_v2": (1, _BICUBIC)}
EXPECTED_BODY_HOST_OPS[("segmenter", "google_xnnpack")].update({"slice": (1, _XNN_INTEGER), "cast": (1, _XNN_INTEGER)})
# DeBERTa's per-layer branch casts its relative positions (float -> int64) as block 0 does.
EXPECTED_BODY_HOST_OPS[("deberta_v2_seq_cls", "intel_openvino")] = {"cast": (2, _OPENVINO_FLOAT_TO_INT64)}
# On google_xnnpack the branches' relative-position arithmetic (int64 buckets, signs, masks) stays on the host.
EXPECTED_BODY_HOST_OPS[("deberta_v2_seq_cls", "google_xnnpack")] = {
    **{op: (n, _XNN_INTEGER) for op, n in {
        "shape": 4, "slice": 14, "range": 4, "unsqueeze2": 8, "elementwise_sub": 2, "cast": 12, "less_than": 2,
        "greater_than": 2, "less_equal": 2, "bitwise_and": 2, "fill_constant": 2, "assign_value": 2, "stack": 2,
        "assign": 4}.items()},
    "sign": (2, _xnn_lacks("WHERE (sign's decomposition)")), "fill_any_like": (4, _xnn_lacks("FILL_LIKE")),
    "where": (4, _xnn_lacks("WHERE")),
}
# SOLOv2's branches around MaskMatrixNMS's sort: every body op converts; XNNPACK declines their integer ops and TOP_K.
EXPECTED_BODY_HOST_OPS[("solov2", "google_xnnpack")] = {
    "shape": (4, _XNN_INTEGER), "slice": (4, _XNN_INTEGER), "fill_constant": (12, _XNN_INTEGER),
    "greater_than": (4, _XNN_INTEGER), "assign": (12, _XNN_INTEGER), "top_k_v2": (2, _xnn_lacks("TOP_K")),
    "argsort": (2, _xnn_lacks("TOP_K")),
}
# PointRend (full zoo): its point head writes the refined points' logits back into the upsampled map with
# paddle.scatter (overwrite) at the top-k indices.
_SCATTER = ("NNAdapter's 96 operations have no scatter (no SCATTER_ND or index-put), and a scatter of run-time "
            "indices into a map of 19 x 128 x 128 logits has no cheap composition (a WHERE over a one-hot of the "
            "8196 indices would be 8196 times the map): its host kernel runs Paddle's scatter")
for _device in DEVICES:
    EXPECTED_HOST_OPS[("pointrend", _device)] = {"scatter": (2, _SCATTER)}
EXPECTED_HOST_OPS[("pointrend", "google_xnnpack")] = {
    "shape": (14, _XNN_INTEGER), "slice": (12, _XNN_INTEGER), "cast": (12, _XNN_INTEGER),
    "elementwise_mul": (6, _XNN_INTEGER), "stack": (6, _XNN_INTEGER),
    "reshape2": (10, _XNN_INTEGER), "concat": (2, _XNN_INTEGER), "reduce_min": (2, _XNN_INTEGER),
    "fill_constant": (8, _XNN_INTEGER), "unsqueeze2": (4, _XNN_INTEGER), "range": (2, _XNN_INTEGER),
    "flatten_contiguous_range": (4, _XNN_INTEGER), "elementwise_add": (2, _XNN_INTEGER),
    "top_k_v2": (4, _xnn_lacks("TOP_K")), "elementwise_mod": (2, _xnn_lacks("FLOOR_DIV")),
    "elementwise_floordiv": (2, _xnn_lacks("FLOOR_DIV")), "set_value": (4, _xnn_lacks("WHERE")),
    "grid_sampler": (4, _xnn_lacks("GRID_SAMPLE")), "expand_v2": (2, _xnn_lacks("EXPAND")),
    "scatter": (2, _SCATTER),
}
# SegNeXt, RTFormer-Slim and TopFormer (full zoo): no host op on the other devices.
EXPECTED_HOST_OPS[("rtformer", "google_xnnpack")] = {
    "max_pool2d_with_index": (2, _XNN_ADAPTIVE),
}
# GFL and TOOD (full zoo). TOOD's post-processing clips each image's boxes in a Python loop over the batch.
_BOX_CLIP_LOOP = ("TOODHead.post_process clips each image's boxes to its im_shape in a Python loop over the batch "
                  "(`for i in range(len(pred_bboxes))`), exported as a while, and NNAdapter has no control flow: the "
                  "host runs the loop and its body")
for _device in DEVICES:
    EXPECTED_HOST_OPS[("tood", _device)] = {"while": (1, _BOX_CLIP_LOOP)}
# Measured with the zoo's feeds: every device gives Paddle's labels and box count (GFL 18 boxes, TOOD 46) and scores
# within 6.1e-6; Paddle Inference's ir_optim and 2-thread runs equal the reference bit for bit, its oneDNN run fails on
# these programs (ConvertPirAttribute2RuntimeAttribute), so its own spread is measured by moving the image by one ulp.
_DENSE_ROUNDING = (
    "{}'s random ResNet50-FPN and GN towers amplify float32 rounding into its box corners: Paddle Inference's own "
    "list moves by up to {} (box corners; scores by under 1e-5) when the image moves by one ulp, and ours differs "
    "from it by up to {}, past the whole-model tolerance in {} of {} elements (by {} at |x| {}){}")
KNOWN_FAILURES[("gfl", "intel_openvino")] = _DENSE_ROUNDING.format(
    "GFL", "9.9e-3", "1.2e-2", 2, 108, "8.3e-3", "12.9", " (builtin_device passes, by up to 6.9e-3)")
# microsoft_onnxruntime passes GFL since its relus before a max pool are plain Relus watched by the NaN probe (they
# were followed by a ThresholdedRelu, with a reorder out of onnxruntime's blocked layout and back): the rounding of
# the program around them changed (checked: with the old relus it is off in 1 of 108 elements, by 6.9e-3 at |x| 12.9).
KNOWN_FAILURES[("gfl", "google_xnnpack")] = _DENSE_ROUNDING.format(
    "GFL", "9.9e-3", "1.5e-2", 1, 108, "7.8e-3", "12.9", "")
_TOOD_SAME_SIDE = ("; the four devices agree with each other within 7e-3 there, all below Paddle's value (whose own "
                   "one-ulp moves of that corner are 2.7-6.3e-3), but over the head's 2134 x 4 box coordinates before "
                   "NMS ours differ from Paddle's by rms 1.2-1.6e-3 with a mean of 1e-5 (builtin_device and "
                   "microsoft_onnxruntime), Paddle's own one-ulp move by rms 9.6e-4 (max 3.1e-2): rounding, no bias "
                   "(intel_openvino passes, by 1.2e-2)")
KNOWN_FAILURES[("tood", "builtin_device")] = _DENSE_ROUNDING.format(
    "TOOD", "8.3e-3", "1.7e-2", 1, 276, "1.7e-2", "93", _TOOD_SAME_SIDE)
KNOWN_FAILURES[("tood", "microsoft_onnxruntime")] = _DENSE_ROUNDING.format(
    "TOOD", "8.3e-3", "1.4e-2", 3, 276, "1.4e-2", "93", _TOOD_SAME_SIDE)
KNOWN_FAILURES[("tood", "google_xnnpack")] = _DENSE_ROUNDING.format(
    "TOOD", "8.3e-3", "1.9e-2", 3, 276, "1.9e-2", "93", _TOOD_SAME_SIDE)
EXPECTED_HOST_OPS[("gfl", "google_xnnpack")] = {
    "nearest_interp_v2": (2, _XNN_NEAREST), "shape": (5, _XNN_INTEGER), "slice": (15, _XNN_INTEGER),
    "cast": (10, _XNN_INTEGER), "range": (10, _XNN_INTEGER), "meshgrid": (5, _xnn_lacks("MESHGRID")),
    "fill_constant": (20, _XNN_INTEGER), "stack": (10, _XNN_INTEGER), "reshape2": (10, _XNN_INTEGER),
    "matmul_v2": (5, _XNN_VECTOR_MATMUL), "elementwise_mul": (5, _XNN_INTEGER), "flip": (1, _XNN_STEPS),
    "tile": (1, _xnn_lacks("TILE")), "multiclass_nms3": (1, _XNN_NMS),
}
EXPECTED_HOST_OPS[("tood", "google_xnnpack")] = {
    "nearest_interp_v2": (2, _XNN_NEAREST), "range": (1, _XNN_INTEGER), "cast": (5, _XNN_INTEGER),
    "shape": (7, _XNN_INTEGER), "slice": (17, _XNN_INTEGER),
    "fill_constant": (27, _XNN_INTEGER), "stack": (15, _XNN_INTEGER), "reshape2": (25, _XNN_INTEGER),
    "sqrt": (5, _xnn_lacks("POW")), "concat": (5, _XNN_INTEGER), "grid_sampler": (5, _xnn_lacks("GRID_SAMPLE")),
    "less_than": (1, _xnn_lacks("LESS (the loop's condition)")), "assign": (3, _XNN_INTEGER),
    "while": (1, _BOX_CLIP_LOOP), "flip": (1, _XNN_STEPS), "tile": (1, _xnn_lacks("TILE")),
    "multiclass_nms3": (1, _XNN_NMS),
}
# HRNet-W32 pose, HigherHRNet and BlazeFace (full zoo): no host op on the other devices.
EXPECTED_HOST_OPS[("hrnet_pose", "google_xnnpack")] = {
    "nearest_interp_v2": (28, _XNN_NEAREST),
    "arg_max": (1, _XNN_INTEGER),
}
EXPECTED_HOST_OPS[("blazeface", "google_xnnpack")] = {"multiclass_nms3": (1, _XNN_NMS)}
EXPECTED_HOST_OPS[("higherhrnet", "google_xnnpack")] = {
    "nearest_interp_v2": (28, _XNN_NEAREST), "equal": (1, _xnn_lacks("EQUAL (the peak test, heatmap == max pool)")),
    "cast": (1, _XNN_INTEGER), "top_k_v2": (1, _xnn_lacks("TOP_K")),
}
# TTFNet (full zoo): TTFBox keeps the scores past its threshold by a nonzero.
_TTF_NONZERO = ("NNAdapter has no operation whose output size is the data's count of true elements (Paddle's nonzero, "
                "where_index): its host kernel picks TTFBox's rows whose score passes 0.01")
for _device in DEVICES:
    EXPECTED_HOST_OPS[("ttfnet", _device)] = {"where_index": (1, _TTF_NONZERO)}
EXPECTED_HOST_OPS[("ttfnet", "google_xnnpack")] = {
    "where_index": (1, _TTF_NONZERO), "deformable_conv": (3, _xnn_lacks("deformable convolution")),
    "equal": (1, _xnn_lacks("EQUAL (the peak test, heatmap == max pool)")),
    "greater_than": (1, _xnn_lacks("GREATER (the score threshold)")), "cast": (4, _XNN_INTEGER),
    "shape": (4, _XNN_INTEGER), "slice": (3, _XNN_INTEGER), "fill_constant": (2, _XNN_INTEGER),
    "stack": (1, _XNN_INTEGER), "reshape2": (4, _XNN_INTEGER), "concat": (1, _XNN_INTEGER),
    "top_k_v2": (2, _xnn_lacks("TOP_K")),
    "elementwise_floordiv": (2, _xnn_lacks("FLOOR_DIV")), "elementwise_mod": (1, _xnn_lacks("FLOOR_DIV")),
    "gather": (5, _xnn_lacks("GATHER")), "expand_v2": (1, _xnn_lacks("EXPAND")),
}
# CCNet, EMANet, U2Netp, DDRNet-23-slim and SINet (full zoo): no host op on the other devices.
EXPECTED_HOST_OPS[("ccnet", "google_xnnpack")] = {
    "shape": (2, _XNN_INTEGER), "slice": (10, _XNN_INTEGER), "elementwise_mul": (18, _XNN_INTEGER),
    "fill_constant": (20, _XNN_INTEGER), "stack": (34, _XNN_INTEGER), "reshape2": (24, _XNN_INTEGER),
    "elementwise_add": (2, _XNN_INTEGER),
    "tile": (4, _xnn_lacks("TILE")), "diag_v2": (2, _xnn_lacks("RANGE or WHERE (diag_v2's decomposition)")),
}
EXPECTED_HOST_OPS[("emanet", "google_xnnpack")] = {
    "shape": (1, _XNN_INTEGER), "slice": (3, _XNN_INTEGER), "fill_constant": (4, _XNN_INTEGER),
    "stack": (2, _XNN_INTEGER), "reshape2": (1, _XNN_INTEGER),
    "tile": (1, _xnn_lacks("TILE")), "p_norm": (3, _xnn_lacks("POW")),
}
# YOLOF (full zoo): YOLOFHead.decode loops over the batch's images in Python, exported as a while whose per-image
# boxes and scores are stacked from tensor arrays.
_YOLOF_LOOP = ("YOLOFHead.decode loops over the batch's images in Python (`for img_id in range(...shape[0])` of a "
               "run-time shape), exported as a while, and NNAdapter has no control flow: the host runs the loop, its "
               "body's subgraphs on the device")
_YOLOF_ARRAYS = ("stacks the tensor arrays the host-run decoding loop appended each image's boxes and scores to: a "
                 "tensor array is no NNAdapter tensor, so it stays on the host with the loop")
for _device in DEVICES:
    EXPECTED_HOST_OPS[("yolof", _device)] = {"while": (1, _YOLOF_LOOP), "tensor_array_to_tensor": (2, _YOLOF_ARRAYS)}
EXPECTED_HOST_OPS[("yolof", "google_xnnpack")] = {
    "while": (1, _YOLOF_LOOP), "tensor_array_to_tensor": (2, _YOLOF_ARRAYS),
    "shape": (2, _XNN_INTEGER), "slice": (2, _XNN_INTEGER), "fill_constant": (2, _XNN_INTEGER),
    "range": (1, _XNN_INTEGER), "assign": (3, _XNN_INTEGER),
    "less_than": (1, _xnn_lacks("LESS (the loop's condition)")), "multiclass_nms3": (1, _XNN_NMS),
}
# In the decoding loop's body: two branches on the image's candidate count, and the arrays it appends to.
for _device in DEVICES:
    EXPECTED_BODY_HOST_OPS[("yolof", _device)] = {
        "conditional_block": (2, _YOLOF_LOOP), "write_to_array": (2, _ARRAYS_IN_LOOPS),
        "lod_array_length": (2, _ARRAYS_IN_LOOPS)}
EXPECTED_BODY_HOST_OPS[("yolof", "google_xnnpack")].update({
    **{op: (n, _XNN_INTEGER) for op, n in {"scale": 6, "stack": 10, "slice": 6, "shape": 1, "fill_constant": 1,
                                           "greater_than": 1, "logical_not": 1, "less_than": 1, "assign": 3}.items()},
    "strided_slice": (8, _XNN_STEPS), "top_k_v2": (1, _xnn_lacks("TOP_K")), "gather": (3, _xnn_lacks("GATHER")),
    "set_value": (2, _xnn_lacks("GATHER and WHERE (set_value's decomposition)")),
    "clip": (2, "XNNPACK clamps between constant bounds, and the decoder clips each image's boxes to its size, a "
                "run-time input"),
})


_references: dict = {}


def _reference(name, path, feeds, paddle_reference):
    """Paddle Inference's outputs (oneDNN off), and its peer outputs for the models compared against a spread:
    oneDNN on (PEER_SPREAD), or the float inputs one ulp up or down, whichever moves the first output further
    (ULP_SPREAD). Once per model per session."""
    if name not in _references:
        want = paddle_reference(path, feeds)
        peer = None
        if name in PEER_SPREAD:
            peer = paddle_reference(path, feeds, disable_mkldnn=False)
        elif name in ULP_SPREAD:
            moved = [paddle_reference(path, {k: np.nextafter(v, np.float32(direction)).astype(v.dtype)
                                             if v.dtype.kind == "f" else v for k, v in feeds.items()})
                     for direction in (np.inf, -np.inf)]
            peer = max(moved, key=lambda outputs: float(np.max(np.abs(outputs[0].astype(np.float64) - want[0]))))
        _references[name] = (want, peer)
    return _references[name]


def _tied_rows_in_canonical_order(got, want):
    """`got` and `want` with the rows of each run of tied scores in one order (tied_row_orders)."""
    got_order, want_order = tied_row_orders(got, want)
    return got[got_order], want[want_order]


def _mask_ulp_spread(name, path, feeds, paddle_reference, want):
    """How many pixels of `name`'s masks Paddle Inference itself changes when the image moves by one float32 ulp
    (the larger of up and down), its rows matched to `want`'s as the test matches ours: once per model per session."""
    key = ("mask spread", name)
    if key not in _references:
        k, spread = MASK_OUTPUTS[name], 0
        for direction in (np.inf, -np.inf):
            moved = dict(feeds, image=np.nextafter(feeds["image"], np.float32(direction)).astype(np.float32))
            peer = paddle_reference(path, moved)
            assert peer[0].shape == want[0].shape and peer[k].shape == want[k].shape, (
                f"{name}: Paddle Inference's own detection count changes when the image moves by one ulp")
            peer_order, want_order = tied_row_orders(peer[0], want[0])
            spread = max(spread, int(np.count_nonzero(peer[k][peer_order] != want[k][want_order])))
        _references[key] = spread
    return _references[key]


def _peer_rows_in_order(peer, want, want_order, what):
    """A peer's detection list ([N, 6]) with its rows matched to `want`'s (tied rows as tied_row_orders matches
    ours), then put in `want_order`, the order `want`'s rows are compared in."""
    assert peer.shape == want.shape, f"{what}: the peer's detection list has shape {peer.shape}, Paddle's {want.shape}"
    peer_order, peer_want_order = tied_row_orders(peer, want)
    aligned = np.empty_like(peer)
    aligned[peer_want_order] = peer[peer_order]
    return aligned[want_order]


def _assert_close_to_peers(got, want, peer, what, peers="oneDNN-on/off"):
    spread = float(np.max(np.abs(peer.astype(np.float64) - want)))
    error = float(np.max(np.abs(got.astype(np.float64) - want)))
    assert error <= 2 * spread, (
        f"{what}: max error {error:.3g} against Paddle Inference exceeds twice Paddle's own {peers} spread "
        f"{spread:.3g} (this model is compared against the peers' spread: its random weights amplify rounding "
        f"past DESIGN.md's whole-model tolerance on every runtime)")


@pytest.mark.parametrize("name, device", list(_params()))
def test_real_zoo_model_on_device(name, device, real_zoo_model, real_zoo_feeds, paddle_reference):
    path = real_zoo_model(name)
    feeds = real_zoo_feeds(name)
    want, peer = _reference(name, path, feeds, paddle_reference)

    predictor = device_predictor(path, device)
    try:
        assert sorted(predictor.get_input_names()) == sorted(feeds)
        for input_name, array in feeds.items():
            predictor.get_input_by_name(input_name).from_numpy(array)
        predictor.run()
        assert len(predictor.get_output_names()) == len(want), "output count"
        row_orders = None
        for k, expected in enumerate(want):
            got = predictor.get_output(k).numpy()
            what = f"{name} on {device}, output {k}"
            if k == 0 and name in DETECTION_LISTS and got.shape == expected.shape:
                row_orders = tied_row_orders(got, expected)
                got, expected = got[row_orders[0]], expected[row_orders[1]]
            if k == MASK_OUTPUTS.get(name) and row_orders is not None and got.shape == expected.shape:
                differing = int(np.count_nonzero(got[row_orders[0]] != expected[row_orders[1]]))
                allowed = 2 * _mask_ulp_spread(name, path, feeds, paddle_reference, want)
                assert differing <= allowed, (
                    f"{what}: {differing}/{expected.size} mask pixels differ from Paddle Inference's, more than twice "
                    f"the {allowed // 2} Paddle's own masks change by when the image moves by one ulp")
                continue
            if peer is not None and expected.dtype.kind == "f":
                assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
                peer_k = peer[k]
                if k == 0 and row_orders is not None:
                    peer_k = _peer_rows_in_order(peer_k, want[0], row_orders[1], what)
                _assert_close_to_peers(got, expected, peer_k, what,
                                       "one-ulp input" if name in ULP_SPREAD else "oneDNN-on/off")
            else:
                assert_model_close(got, expected, what=what)

        allowed = EXPECTED_HOST_OPS.get((name, device), {})
        on_host = collections.Counter(op.type for op in predictor.host_ops)
        reasons = predictor.unsupported_reasons()
        unexpected = {op: n for op, n in on_host.items() if n > allowed.get(op, (0, ""))[0]}
        assert not unexpected, (
            f"{name} on {device}: ops on the host beyond EXPECTED_HOST_OPS: "
            + "; ".join(f"{op} x{n} ({reasons.get(op, 'no reason recorded')})" for op, n in unexpected.items()))
        # The loop and branch bodies, partitioned as block 0 is: their ops left on the host.
        in_bodies = [b for b in predictor.body_placements() if b.device is None]
        allowed = EXPECTED_BODY_HOST_OPS.get((name, device), {})
        unexpected = {op: n for op, n in collections.Counter(b.op.type for b in in_bodies).items()
                      if n > allowed.get(op, (0, ""))[0]}
        why = {b.op.type: b.why for b in in_bodies}
        assert not unexpected, (
            f"{name} on {device}: body ops on the host beyond EXPECTED_BODY_HOST_OPS: "
            + "; ".join(f"{op} x{n} ({why[op]})" for op, n in unexpected.items()))
        allowed_runs = EXPECTED_HOST_RUNS.get((name, device), (0, ""))[0]
        assert predictor.stats.subgraph_host_runs <= allowed_runs, (
            f"{name} on {device}: {predictor.stats.subgraph_host_runs} subgraph runs fell back to the host")
    finally:
        predictor.close()


def test_expected_host_ops_name_known_models_and_give_reasons():
    for (name, device), ops in EXPECTED_HOST_OPS.items():
        assert name in MODELS and device in DEVICES, (name, device)
        for op, (count, why) in ops.items():
            assert count > 0 and len(why) > 20, (name, device, op)
    assert set(CI_SUBSET) <= set(MODELS) and PEER_SPREAD <= set(MODELS) and DETECTION_LISTS <= set(MODELS)
    assert ULP_SPREAD <= set(MODELS) and not ULP_SPREAD & PEER_SPREAD
    assert set(MASK_OUTPUTS) <= DETECTION_LISTS
    assert set(_XNN_HOST) <= set(MODELS)
    for (name, device), ops in EXPECTED_BODY_HOST_OPS.items():
        assert name in MODELS and device in DEVICES, (name, device)
        assert all(count > 0 and len(why) > 20 for count, why in ops.values()), (name, device)
    for (name, device), (count, why) in EXPECTED_HOST_RUNS.items():
        assert name in MODELS and device in DEVICES and count > 0 and len(why) > 20, (name, device)


def test_tied_detections_compare_as_a_set_and_nothing_else_moves():
    want = np.array([[3, 0.9, 1, 1, 5, 5], [7, 0.9, 2, 2, 6, 6], [1, 0.5, 0, 0, 1, 1]], np.float32)
    swapped = want[[1, 0, 2]]
    got, expected = _tied_rows_in_canonical_order(swapped, want)
    np.testing.assert_array_equal(got, expected)
    crossing = want[[2, 1, 0]]  # a lower score moved above a higher one: still a difference
    got, expected = _tied_rows_in_canonical_order(crossing, want)
    assert not np.array_equal(got, expected)
