"""roi_align with per-image RoI counts (FPN R-CNN's RoIAlign) on every device against Paddle Inference, and on the
device: the converter derives each RoI's image index by counting the images it lies past, a count OpenVINO's CPU
plugin must be able to compute (it declines int32 REDUCE_SUM, which kept R-CNN's four roi_aligns on the host)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from support.converter_harness import device_predictor, paddle_inference_run, paddle_pir_static
from support.tolerances import assert_op_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


def _save(tmp_path) -> str:
    with paddle_pir_static() as paddle:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, 4, 12, 12], "float32")
            boxes = paddle.static.data("boxes", [-1, 4], "float32")
            boxes_num = paddle.static.data("boxes_num", [-1], "int32")
            out = paddle.vision.ops.roi_align(x, boxes, boxes_num, output_size=3, spatial_scale=0.5,
                                              sampling_ratio=2, aligned=True)
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(str(tmp_path), "model")
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(prefix, [x, boxes, boxes_num], [out], exe, program=main)
    return prefix + ".json"


@pytest.mark.parametrize("device", DEVICES)
def test_roi_align_with_rois_num_runs_on_the_device(tmp_path, device):
    path = _save(tmp_path)
    rng = np.random.default_rng(11)
    xy = rng.uniform(0, 16, (7, 2))
    feeds = {"x": rng.standard_normal((3, 4, 12, 12)).astype(np.float32),
             "boxes": np.concatenate([xy, xy + rng.uniform(1, 8, (7, 2))], 1).astype(np.float32),
             "boxes_num": np.array([3, 0, 4], np.int32)}
    (want,) = paddle_inference_run(path, None, feeds)
    predictor = device_predictor(path, device)
    try:
        for name, array in feeds.items():
            predictor.get_input_by_name(name).from_numpy(array)
        predictor.run()
        assert_op_close(predictor.get_output(0).numpy(), want, what=f"roi_align on {device}")
        assert not [op.type for op in predictor.host_ops], predictor.unsupported_reasons()
    finally:
        predictor.close()
