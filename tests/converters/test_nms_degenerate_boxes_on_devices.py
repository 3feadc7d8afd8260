"""multiclass_nms3 with candidate boxes without area (what SSD's priors clipped to the image edge decode to) on
every device against Paddle Inference. Paddle takes two touching boxes without area as overlapping by 0/0 = NaN,
which suppresses; the NonMaxSuppression that intel_openvino and microsoft_onnxruntime compose around never
suppresses with a box without area, so those drivers flag such candidates at run time (a device fault: the part
runs elsewhere) and the answer is Paddle's; boxes of positive area stay on the device."""
from __future__ import annotations

import os

import numpy as np
import pytest

from support.converter_harness import device_predictor, paddle_inference_run, paddle_pir_static

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


def _save(tmp_path) -> str:
    with paddle_pir_static() as paddle:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            boxes = paddle.static.data("boxes", [1, -1, 4], "float32")
            scores = paddle.static.data("scores", [1, 3, -1], "float32")
            out, index, rois_num = paddle._C_ops.multiclass_nms3(boxes, scores, None, 0.01, 100, 50, 0.45, True,
                                                                 1.0, 2)
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(str(tmp_path), "model")
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(prefix, [boxes, scores], [out, rois_num], exe, program=main)
    return prefix + ".json"


def _feeds(rng, n: int, flat: bool) -> dict:
    x1 = rng.uniform(0, 250, n)
    y1 = rng.uniform(0, 250, n)
    boxes = np.stack([x1, y1, x1 + rng.uniform(20, 120, n), y1 + rng.uniform(20, 120, n)], -1)
    if flat:  # zero height on the image's bottom edge, x-extents overlapping a little
        boxes[::2, 1] = boxes[::2, 3] = 320.0
    return {"boxes": boxes[None].astype(np.float32), "scores": rng.uniform(0, 1, (1, 3, n)).astype(np.float32)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flat", [False, True], ids=["positive_area", "without_area"])
def test_nms_with_boxes_without_area_gives_paddles_answer(tmp_path, device, flat):
    path = _save(tmp_path)
    feeds = _feeds(np.random.default_rng(5), 60, flat)
    want = paddle_inference_run(path, None, feeds)
    predictor = device_predictor(path, device)
    try:
        for name, array in feeds.items():
            predictor.get_input_by_name(name).from_numpy(array)
        predictor.run()
        got = [predictor.get_output(k).numpy() for k in range(2)]
        np.testing.assert_array_equal(got[1].reshape(-1), want[1].reshape(-1))
        np.testing.assert_array_equal(got[0], want[0])
        assert not [op.type for op in predictor.host_ops], predictor.unsupported_reasons()
        # Boxes of positive area never leave the device; candidates without area run elsewhere.
        assert predictor.stats.subgraph_host_runs == (1 if flat and device != "builtin_device" else 0)
    finally:
        predictor.close()
