"""RT-DETR's query selection and deformable-attention decoder step, as a small layer exported the Paddle 3 way,
against Paddle Inference on each device: the parts issue 24 suspected (grid_sample, top_k with ties,
take_along_axis) in the pattern RT-DETR puts them in.

The layer (random weights from a fixed seed): level shapes written into a tensor by slice assignment
(`spatial_shapes[level, 0] = h`, PaddleX's form), anchors generated per level with invalid ones (outside
(0.01, 0.99)) set to inf and their memory zeroed, so the encoder scores of all invalid positions tie; top_k of
the best class score over 2 levels (20 positions, 8 invalid, 16 queries: at least 4 picked queries are tied), the query
boxes and features gathered by take_along_axis, sigmoid reference points, sampling offsets and attention
weights from linear layers, and the multi-scale deformable attention core (grid_sample bilinear, zeros,
align_corners false, ppdet's form) with arange over the level sizes. Tied queries are identical in every
computation that follows, so the outputs do not depend on the order top_k gives the ties.

Built once per paddle version in a subprocess and cached under the fixture root.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.converter_harness import paddle_inference_run
from support.fixture_cache import build_once
from support.model_zoo_fixtures import fixture_root
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
BUILD_ID = "detr-decoder-pattern-v3"

BUILD = r'''
import sys
import paddle
import paddle.nn as nn
import paddle.nn.functional as F

HIDDEN, HEADS, POINTS, QUERIES, CLASSES = 32, 4, 4, 16, 6
LEVELS = ((4, 4), (2, 2))


class Decoder(nn.Layer):
    def __init__(self):
        super().__init__()
        self.enc_output = nn.Linear(HIDDEN, HIDDEN)
        self.enc_score_head = nn.Linear(HIDDEN, CLASSES)
        self.enc_bbox_head = nn.Linear(HIDDEN, 4)
        self.sampling_offsets = nn.Linear(HIDDEN, HEADS * len(LEVELS) * POINTS * 2)
        self.attention_weights = nn.Linear(HIDDEN, HEADS * len(LEVELS) * POINTS)
        self.value_proj = nn.Linear(HIDDEN, HIDDEN)

    def anchors(self, level_sizes):
        parts = []
        for level, (h, w) in enumerate(level_sizes):
            ys, xs = paddle.meshgrid(paddle.arange(end=h, dtype="float32"), paddle.arange(end=w, dtype="float32"))
            grid = (paddle.stack([xs, ys], -1) + 0.5) / paddle.to_tensor([w, h], dtype="float32")
            # widths 0.3, 0.6, 0.9, 1.2 across level 0 and from 1.2 on in level 1: 8 of 20 anchors invalid
            wh = (paddle.stack([xs, xs], -1) * 0.3 + 0.3) * (4.0 ** level)
            parts.append(paddle.concat([grid, wh], -1).reshape([-1, h * w, 4]))
        anchors = paddle.concat(parts, 1)
        valid = ((anchors > 0.01) & (anchors < 0.99)).all(-1, keepdim=True)
        logit = paddle.log(anchors / (1 - anchors))
        return paddle.where(valid, logit, paddle.to_tensor(float("inf"))), valid

    def forward(self, f0, f1):
        feats = [f0, f1]
        spatial_shapes = paddle.zeros([len(feats), 2], dtype="int64")
        sizes = []
        for level, feat in enumerate(feats):
            h, w = feat.shape[-2:]
            spatial_shapes[level, 0] = h
            spatial_shapes[level, 1] = w
            sizes.append((h, w))
        memory = paddle.concat([f.flatten(2).transpose([0, 2, 1]) for f in feats], 1)
        anchors, valid = self.anchors(sizes)
        memory = valid.astype(memory.dtype) * memory
        output_memory = self.enc_output(memory)
        scores = self.enc_score_head(output_memory)
        coords = self.enc_bbox_head(output_memory) + anchors
        _, topk_ind = paddle.topk(scores.max(-1), QUERIES, axis=1)
        ref_unact = paddle.take_along_axis(coords, topk_ind.unsqueeze(-1).expand([-1, -1, 4]), axis=1)
        target = paddle.take_along_axis(output_memory, topk_ind.unsqueeze(-1).expand([-1, -1, HIDDEN]), axis=1)
        reference = F.sigmoid(ref_unact)
        bs = target.shape[0]
        offsets = self.sampling_offsets(target).reshape([bs, QUERIES, HEADS, len(LEVELS), POINTS, 2])
        weights = F.softmax(self.attention_weights(target).reshape([bs, QUERIES, HEADS, len(LEVELS) * POINTS]), -1)
        weights = weights.reshape([bs, QUERIES, HEADS, len(LEVELS), POINTS])
        normalizer = spatial_shapes.flip([1]).astype("float32").reshape([1, 1, 1, len(LEVELS), 1, 2])
        spread = offsets / normalizer * reference[:, :, None, None, None, 2:] * 0.5
        locations = reference[:, :, None, None, None, :2] + spread
        value = self.value_proj(memory).reshape([bs, -1, HEADS, HIDDEN // HEADS])
        value_list = value.split([h * w for h, w in sizes], axis=1)
        grids = 2 * locations - 1
        sampled = []
        for level, (h, w) in enumerate(sizes):
            value_l = value_list[level].flatten(2).transpose([0, 2, 1]).reshape([bs * HEADS, HIDDEN // HEADS, h, w])
            grid_l = grids[:, :, :, level].transpose([0, 2, 1, 3, 4]).flatten(0, 1)
            sampled.append(F.grid_sample(value_l, grid_l, mode="bilinear", padding_mode="zeros", align_corners=False))
        weights = weights.transpose([0, 2, 1, 3, 4]).reshape([bs * HEADS, 1, QUERIES, len(LEVELS) * POINTS])
        out = (paddle.stack(sampled, axis=-2).flatten(-2) * weights).sum(-1).reshape([bs, HIDDEN, QUERIES])
        return out.transpose([0, 2, 1]), reference, scores.max(-1)


paddle.seed(11)
layer = Decoder()
layer.eval()
specs = [paddle.static.InputSpec([-1, HIDDEN, 4, 4], "float32", "f0"),
         paddle.static.InputSpec([-1, HIDDEN, 2, 2], "float32", "f1")]
paddle.jit.save(paddle.jit.to_static(layer, input_spec=specs, full_graph=True), sys.argv[1])
'''


@pytest.fixture(scope="module")
def decoder_model() -> str:
    pytest.importorskip("paddle")

    def build(staging: str) -> str:
        source = os.path.join(staging, "build_decoder.py")  # to_static reads the layer's source from a file
        with open(source, "w", encoding="utf-8") as f:
            f.write(BUILD)
        env = dict(os.environ, FLAGS_enable_pir_api="1", GLOG_minloglevel="3")
        proc = subprocess.run([sys.executable, source, os.path.join(staging, "decoder")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return BUILD_ID + "\n"
    return os.path.join(build_once(fixture_root(), BUILD_ID, build), "decoder.json")


def _feeds(batch: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"f0": rng.standard_normal((batch, 32, 4, 4)).astype(np.float32),
            "f1": rng.standard_normal((batch, 32, 2, 2)).astype(np.float32)}


def test_the_queries_hold_ties(decoder_model):
    """The pattern is worth something only if top_k really picks among tied scores (the invalid anchors')."""
    params = decoder_model.replace(".json", ".pdiparams")
    scores = paddle_inference_run(decoder_model, params, _feeds(1, 0))[2][0]
    picked = np.sort(scores)[::-1][:16]
    assert len(np.unique(picked)) < len(picked) - 2, picked


@pytest.mark.parametrize("device", DEVICES)
def test_detr_decoder_pattern_matches_paddle_inference(decoder_model, device):
    params = decoder_model.replace(".json", ".pdiparams")
    config = nb.Config()
    config.set_model_file(decoder_model)
    config.set_param_file(params)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    for batch, seed in ((1, 0), (2, 1)):
        feeds = _feeds(batch, seed)
        want = paddle_inference_run(decoder_model, params, feeds)
        for name in predictor.get_input_names():
            predictor.get_input_by_name(name).from_numpy(feeds[name])
        predictor.run()
        for k, expected in enumerate(want):
            assert_model_close(predictor.get_output(k).numpy(), expected,
                               what=f"{device}, batch {batch}, output {k}")
