"""linspace with a run-time count (SOLOv2's CoordConv: `linspace(-1, 1, width)` of a [-1, C, -1, -1] feature map) on
every device against Paddle Inference, counts 1 and 2 included (Paddle's kernel: Start alone; Start and Stop): the
converter composes Paddle's two-sided formula, so the op runs on the device instead of the host."""
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
            x = paddle.static.data("x", [-1, 3, -1, -1], "float32")
            columns = paddle.linspace(-1, 1, paddle.shape(x)[-1], dtype="float32")
            rows = paddle.linspace(0.5, -2.25, paddle.shape(x)[-2], dtype="float32")
            out = x * columns + rows.unsqueeze(-1)
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(str(tmp_path), "model")
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(prefix, [x], [out], exe, program=main)
    return prefix + ".json"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("height, width", [(7, 13), (1, 2), (2, 1), (5, 64)])
def test_linspace_of_a_run_time_count_runs_on_the_device(tmp_path, device, height, width):
    path = _save(tmp_path)
    feeds = {"x": np.random.default_rng(2).standard_normal((2, 3, height, width)).astype(np.float32)}
    (want,) = paddle_inference_run(path, None, feeds)
    predictor = device_predictor(path, device)
    try:
        predictor.get_input_by_name("x").from_numpy(feeds["x"])
        predictor.run()
        assert_op_close(predictor.get_output(0).numpy(), want, what=f"linspace on {device}")
        assert "linspace" not in [op.type for op in predictor.host_ops], predictor.unsupported_reasons()
    finally:
        predictor.close()
