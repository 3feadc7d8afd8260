"""ENet's decoder ops against Paddle Inference. unpool (F.max_unpool2d): the converter for the unpooling of a
max_pool2d_with_index mask with the same tiling windows (on every device, with a run-time output size from the
pooled tensor's shape, odd sizes leaving a zero row and column), and the host kernel for what it declines (indices
from elsewhere, overlapping windows). conv2d_transpose with an output_size computed at run time (the skip tensor's
shape): any size from the default up to the default plus stride - 1, on every device."""
from __future__ import annotations

import os

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.converter_harness import paddle_inference_run, paddle_pir_static
from support.tolerances import assert_op_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


def _save(tmp_path, build, declared: dict) -> str:
    """A PIR program whose inputs are declared with `declared` ({name: (dims, dtype)}, -1 for a free dim)."""
    with paddle_pir_static() as paddle:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            inputs = [paddle.static.data(name, dims, dtype) for name, (dims, dtype) in declared.items()]
            out = build(paddle, *inputs)
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(str(tmp_path), "model")
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(prefix, inputs, [out], exe, program=main)
    return prefix + ".json"


def _run(path: str, device: str, feeds: dict):
    config = nb.Config()
    config.set_model_file(path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    try:
        for name, array in feeds.items():
            predictor.get_input_by_name(name).from_numpy(array)
        predictor.run()
        return predictor.get_output(0).numpy(), [op.type for op in predictor.host_ops], predictor.unsupported_reasons()
    finally:
        predictor.close()


def _pool_then_unpool(paddle, x):
    """ENet's pattern: the pooled map (scaled, so the values differ from the input's) unpooled with the mask to the
    input's run-time size."""
    functional = paddle.nn.functional
    pooled, mask = functional.max_pool2d(x, 2, 2, return_mask=True)
    return functional.max_unpool2d(pooled * 2.0 - 1.0, mask, 2, 2, output_size=[paddle.shape(x)[2], paddle.shape(x)[3]])


@pytest.mark.parametrize("device", DEVICES)
def test_unpool_of_a_max_pool_mask_runs_on_the_device(tmp_path, device):
    path = _save(tmp_path, _pool_then_unpool, {"x": ([-1, 3, -1, -1], "float32")})
    rng = np.random.default_rng(4)
    for shape in ([2, 3, 8, 6], [1, 3, 9, 7]):  # 9x7: the pool drops the last row and column, which stay 0
        feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
        (want,) = paddle_inference_run(path, None, feeds)
        got, host, reasons = _run(path, device, feeds)
        assert host == [], reasons
        assert_op_close(got, want, what=f"unpool on {device}, x {shape}")


def test_unpool_with_indices_from_elsewhere_runs_on_the_host(tmp_path):
    """Indices that are no pool mask may point anywhere in the output plane: the converter declines them and the
    host kernel places each value as Paddle does."""

    def build(paddle, x, indices):
        return paddle.nn.functional.max_unpool2d(x, indices, 2, 2, output_size=[6, 6])

    path = _save(tmp_path, build, {"x": ([2, 3, 3, 3], "float32"), "indices": ([2, 3, 3, 3], "int32")})
    rng = np.random.default_rng(5)
    indices = np.stack([rng.permutation(36)[:9] for _ in range(6)]).reshape(2, 3, 3, 3).astype(np.int32)
    feeds = {"x": rng.standard_normal((2, 3, 3, 3)).astype(np.float32), "indices": indices}
    (want,) = paddle_inference_run(path, None, feeds)
    got, host, reasons = _run(path, "builtin_device", feeds)
    assert host == ["unpool"] and "not the Mask of a max_pool2d_with_index" in reasons["unpool"]
    assert_op_close(got, want, what="unpool on the host")


def test_unpool_with_overlapping_windows_runs_on_the_host(tmp_path):
    """ksize 3, stride 2: windows overlap, an index may sit in a neighbour's window. Paddle's default output size
    (in - 1) * stride + ksize."""

    def build(paddle, x):
        functional = paddle.nn.functional
        pooled, mask = functional.max_pool2d(x, 3, 2, return_mask=True)
        return functional.max_unpool2d(pooled, mask, 3, 2)

    path = _save(tmp_path, build, {"x": ([1, 2, 9, 9], "float32")})
    feeds = {"x": np.random.default_rng(6).standard_normal((1, 2, 9, 9)).astype(np.float32)}
    (want,) = paddle_inference_run(path, None, feeds)
    got, host, reasons = _run(path, "builtin_device", feeds)
    assert host == ["unpool"] and "do not tile the input" in reasons["unpool"]
    assert_op_close(got, want, what="unpool with overlapping windows")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kernel, padding, shapes", [
    (2, 0, ([1, 3, 9, 7], [2, 3, 8, 6])),  # ENet's: 9x7 pooled to 4x3 comes back one past the default 8x6
    (3, 1, ([1, 3, 8, 6], [1, 3, 8, 8])),  # default 7x5 (7x7), asked 8x6 (8x8)
])
def test_conv2d_transpose_to_a_run_time_output_size_runs_on_the_device(tmp_path, device, kernel, padding, shapes):
    """Upsample by 2 back to the skip tensor's run-time size, then a relu (fused into the transposed conv)."""

    def build(paddle, x):
        weight = paddle.static.create_parameter([3, 4, kernel, kernel], "float32")
        bias = paddle.static.create_parameter([4], "float32")
        pooled = paddle.nn.functional.max_pool2d(x, 2, 2)
        up = paddle.nn.functional.conv2d_transpose(pooled, weight, bias, stride=2, padding=padding,
                                                   output_size=[paddle.shape(x)[2], paddle.shape(x)[3]])
        return paddle.nn.functional.relu(up)

    path = _save(tmp_path, build, {"x": ([-1, 3, -1, -1], "float32")})
    rng = np.random.default_rng(7)
    for shape in shapes:
        feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
        (want,) = paddle_inference_run(path, str(tmp_path / "model.pdiparams"), feeds)
        got, host, reasons = _run(path, device, feeds)
        assert host == [], reasons
        assert got.shape == want.shape
        assert_op_close(got, want, what=f"conv2d_transpose on {device}, x {shape}")
