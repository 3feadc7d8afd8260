"""Single-op programs Paddle Inference 3.3.1 runs that used to fail or differ here (issue 28, item 2), each run on
every device against Paddle Inference on the same saved program, as a legacy ProgramDesc (static mode with PIR
off, or an OpDesc for ops paddle's API no longer writes) and, where the op exists there, as a PIR program:

- `reverse` (the legacy op: flip on a tensor);
- float64 where Paddle's CPU kernel is registered for double: `yolo_box`, `prior_box`, `roi_align`,
  `deformable_conv`, `multiclass_nms3` (results come back float64); `where` on bool values;
- `p_norm` with porder 0 (the count of non-zeros) and of a 0-d tensor along its axis, `histogram`, `pad3d` in
  `circular` mode, `elementwise_mul` / `_add` on bool, `elementwise_add` / `_floordiv` on int8 and uint8;
- `dequantize_linear` / `quantize_linear` with zero and negative scales (Paddle just multiplies / divides);
- `top_k_v2` of a 0-d tensor;
- `pool2d` windows reaching past the padded input: the output size in C++ integer division (a kernel larger
  than the padded input still gives one position, or an empty output), divisors bounded by the leading pad,
  and 0 / 0 = NaN for an exclusive average over a window with no element;
- interpolation with a 0-d Scale tensor (RESIZE was given one scale for two axes), sizes mixing 0-d and [1];
- `tile` with an empty repeat_times (OpenVINO read it as garbage); `broadcast_tensors` (no path before);
- a tensor array a `paddle.jit.save`d loop appends to, read by its length (the array var has no producer: Paddle's
  executor starts it empty).
"""
from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from support.converter_harness import (
    SavedProgram,
    opdesc_program,
    paddle_inference_run,
    pir_program,
    run_predictor,
    static_program,
)
from support.tolerances import assert_op_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
rng = np.random.default_rng(28)


def assert_devices_match_paddle(saved: SavedProgram, devices=DEVICES) -> list:
    """`saved` through the predictor on each device against Paddle Inference on the same files (shape, dtype and
    values; NaN where Paddle has NaN)."""
    want = paddle_inference_run(saved.model_path, saved.params_path, saved.feeds)
    for device in devices:
        got = run_predictor(saved, device)
        assert len(got) == len(want), device
        for k, (g, w) in enumerate(zip(got, want)):
            what = f"output {k} on {device}"
            assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {g.shape} {g.dtype} != {w.shape} {w.dtype}"
            assert_op_close(g, w, what=what)
    return want


def legacy_and_pir(tmp_path, build, feeds, devices=DEVICES, pir_devices=None):
    assert_devices_match_paddle(static_program(tmp_path / "legacy", build, feeds), devices)
    assert_devices_match_paddle(pir_program(tmp_path / "pir", build, feeds, run_paddle=False),
                                devices if pir_devices is None else pir_devices)


def one_op(tmp_path, op_type, inputs, outputs, attrs, feeds, out_dtype="float32", **kwargs) -> SavedProgram:
    os.makedirs(tmp_path, exist_ok=True)
    out_vars = [{"name": n, "dtype": out_dtype, "shape": []} for names in outputs.values() for n in names]
    return opdesc_program(tmp_path, op_type, inputs=inputs, outputs=outputs, attrs=attrs, feeds=feeds,
                          extra_vars=out_vars, run_paddle=False, **kwargs)


# -- reverse -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis, dtype", [([0, 2], "float32"), ([-1], "float32"), ([1], "int64")])
def test_reverse_is_flip(tmp_path, axis, dtype):
    x = (rng.standard_normal((2, 3, 4)) * 10).astype(dtype)
    assert_devices_match_paddle(one_op(tmp_path, "reverse", {"X": ["x"]}, {"Out": ["out"]}, {"axis": axis},
                                       {"x": x}, out_dtype=dtype))


def test_reverse_of_a_tensor_array(tmp_path):
    from devtools.zoo import write_program
    from nnadapter_bridge.loader.dtypes import VarTypeCode

    array = int(VarTypeCode.LOD_TENSOR_ARRAY)
    specs = [("x", "float32", [2, 3], None), ("i0", "int64", [1], None), ("i1", "int64", [1], None),
             ("x1", "float32", [2, 3], None), ("arr", "float32", [2, 3], array), ("rev", "float32", [2, 3], array),
             ("out", "float32", [4, 3], None), ("index", "int32", [2], None)]
    var_specs = [dict(name=n, dtype=d, shape=s, **({"var_type": t} if t else {})) for n, d, s, t in specs]
    ops = [
        {"type": "fill_constant", "outputs": {"Out": ["i0"]}, "attrs": {"shape": [1], "dtype": 3, "value": 0.0}},
        {"type": "fill_constant", "outputs": {"Out": ["i1"]}, "attrs": {"shape": [1], "dtype": 3, "value": 1.0}},
        {"type": "scale", "inputs": {"X": ["x"]}, "outputs": {"Out": ["x1"]}, "attrs": {"scale": 2.0, "bias": 1.0}},
        {"type": "write_to_array", "inputs": {"X": ["x"], "I": ["i0"]}, "outputs": {"Out": ["arr"]}},
        {"type": "write_to_array", "inputs": {"X": ["x1"], "I": ["i1"]}, "outputs": {"Out": ["arr"]}},
        {"type": "reverse", "inputs": {"X": ["arr"]}, "outputs": {"Out": ["rev"]}, "attrs": {"axis": [0]}},
        {
            "type": "tensor_array_to_tensor",
            "inputs": {"X": ["rev"]},
            "outputs": {"Out": ["out"], "OutIndex": ["index"]},
            "attrs": {"axis": 0, "use_stack": False},
        },
    ]
    model = os.path.join(str(tmp_path), "__model__")
    write_program(model, [{"vars": var_specs, "ops": ops}], feeds=["x"], fetches=["out"])
    want = assert_devices_match_paddle(SavedProgram(model, None, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)},
                                                    None))
    assert want[0][0, 0] == 1.0  # the second element (x * 2 + 1) comes first


def test_reverse_without_axis_is_refused_as_paddle_refuses_it(tmp_path):
    import nnadapter_bridge as nb

    saved = one_op(
        tmp_path, "reverse", {"X": ["x"]}, {"Out": ["out"]}, {"axis": []}, {"x": np.ones((2, 3), np.float32)}
    )
    with pytest.raises(Exception, match="can not be empty"):
        paddle_inference_run(saved.model_path, None, saved.feeds)
    with pytest.raises(nb.BridgeError, match="can not be empty"):
        run_predictor(saved, "builtin_device")


# -- float64 -------------------------------------------------------------------------------------------------

def _yolo_box(x, size):
    import paddle

    return paddle.vision.ops.yolo_box(x, size, anchors=[10, 13, 16, 30, 33, 23], class_num=2, conf_thresh=0.01,
                                      downsample_ratio=8, scale_x_y=1.2)


def test_yolo_box_on_float64(tmp_path):
    feeds = {"x": rng.standard_normal((1, 3 * 7, 4, 4)), "size": np.array([[32, 48]], np.int32)}
    # PIR declares the scores float32 although the double kernel writes float64: the PIR loader declares them
    # as the kernel writes them (loader/pir.py _fix_yolo_box), so the SDK devices, whose drivers decline
    # float64 YOLO_BOX and leave it to the host kernel, give Paddle's float64 scores too.
    legacy_and_pir(tmp_path, _yolo_box, feeds)


def test_detection_and_sampling_ops_on_float64(tmp_path):
    import paddle

    ops = paddle.vision.ops
    x = rng.standard_normal((1, 2, 4, 4))
    feeds = {"x": x, "image": rng.standard_normal((1, 3, 16, 16)), "rois": np.array([[0, 0, 3, 3], [1, 1, 4, 4.0]]),
             "rois_num": np.array([2], np.int32), "offset": rng.standard_normal((1, 18, 2, 2)) * 0.5,
             "w": rng.standard_normal((3, 2, 3, 3))}

    def build(x, image, rois, rois_num, offset, w):
        return [ops.prior_box(x, image, min_sizes=[2.0], aspect_ratios=[1.0, 2.0], flip=True, clip=True)[0],
                ops.roi_align(x, rois, rois_num, 2, spatial_scale=0.5), ops.deform_conv2d(x, offset, w)]

    legacy_and_pir(tmp_path, build, feeds)


def test_multiclass_nms3_on_float64(tmp_path):
    boxes = rng.uniform(0, 10, (1, 6, 4))
    boxes[..., 2:] += boxes[..., :2]
    attrs = {"background_label": -1, "score_threshold": 0.1, "nms_top_k": 10, "nms_threshold": 0.3, "nms_eta": 1.0,
             "keep_top_k": 5, "normalized": False}
    saved = opdesc_program(tmp_path, "multiclass_nms3", inputs={"BBoxes": ["b"], "Scores": ["s"]},
                           outputs={"Out": ["out"], "Index": ["index"], "NmsRoisNum": ["count"]}, attrs=attrs,
                           feeds={"b": boxes, "s": rng.uniform(0, 1, (1, 2, 6))}, run_paddle=False,
                           extra_vars=[{"name": "out", "dtype": "float64", "shape": []},
                                       {"name": "index", "dtype": "int32", "shape": []},
                                       {"name": "count", "dtype": "int32", "shape": []}])
    assert_devices_match_paddle(saved)


def test_where_on_bool_values(tmp_path):
    import paddle

    # paddle 3.3.1's legacy static API refuses bool X/Y; its PIR program runs in Paddle Inference.
    feeds = {"c": np.array([True, False, True]), "a": np.array([True, True, False]), "b": np.array([False, True, True])}
    assert_devices_match_paddle(pir_program(tmp_path, lambda c, a, b: paddle.where(c, a, b), feeds, run_paddle=False))


# -- ops and modes -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_p_norm_order_0_counts_non_zeros(tmp_path, dtype):
    import paddle

    x = np.array([[0, 1, 2], [0, 0, 3.0], [np.nan, 0, -0.0]], dtype)
    legacy_and_pir(tmp_path, lambda x: [paddle.linalg.norm(x, p=0, axis=1),
                                        paddle.linalg.norm(x, p=0, axis=0, keepdim=True)], {"x": x})


@pytest.mark.parametrize("porder, keepdim", [(2.0, True), (3.0, False), (0.0, False), (np.inf, True), (-np.inf, False)])
def test_p_norm_of_a_0d_tensor_along_its_axis(tmp_path, porder, keepdim):
    import paddle

    # Paddle's kernel reduces a 0-d x along axis 0 over no element: 0, or -inf / +inf for the orders +-inf.
    legacy_and_pir(tmp_path, lambda x: paddle.linalg.norm(x, p=porder, axis=0, keepdim=keepdim),
                   {"x": np.array(-1.5, np.float32)})


def test_histogram(tmp_path):
    import paddle

    x = rng.standard_normal((3, 5)).astype(np.float32)
    feeds = {"x": x, "w": rng.uniform(0, 1, (3, 5)).astype(np.float32), "i": rng.integers(0, 12, (10,))}
    legacy_and_pir(tmp_path, lambda x, w, i: [
        paddle.histogram(x, 4, -1, 1), paddle.histogram(x, 7), paddle.histogram(x * 0 + 2, 3),
        paddle.histogram(i, 5, 0, 10), paddle.histogram(x, 4, -1, 1, weight=w),
        paddle.histogram(x, 4, -1, 1, density=True)], feeds)


@pytest.mark.parametrize("paddings, data_format", [([1, 2, 0, 1, 2, 0], "NCDHW"), ([6, 2, 4, 5, 3, 3], "NCDHW"),
                                                   ([1, 1, 2, 0, 0, 1], "NDHWC")], ids=["small", "wraps", "ndhwc"])
def test_pad3d_circular(tmp_path, paddings, data_format):
    import paddle

    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    legacy_and_pir(tmp_path, lambda x: paddle.nn.functional.pad(x, paddings, mode="circular",
                                                                 data_format=data_format), {"x": x})


def test_bool_multiply_and_add(tmp_path):
    a = rng.integers(0, 2, (2, 4)).astype(bool)
    b = rng.integers(0, 2, (4,)).astype(bool)
    legacy_and_pir(tmp_path, lambda a, b: [a * b, a + b], {"a": a, "b": b})


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_narrow_integer_add_and_floor_divide_wrap_like_paddle(tmp_path, dtype):
    import paddle

    info = np.iinfo(dtype)
    feeds = {"a": np.array([info.max, info.min, 5, 7, 100], dtype), "b": np.array([3, 2, 2, 3, 100], dtype)}
    # Paddle's CPU add and floor_divide take int8 / uint8 (subtract and multiply do not run in Paddle Inference).
    assert_devices_match_paddle(pir_program(tmp_path, lambda a, b: [a + b, paddle.floor_divide(a, b)], feeds,
                                            run_paddle=False))


# -- quantization parameters ---------------------------------------------------------------------------------

SCALES = {"negative": np.array([-2.0], np.float32), "zero": np.array([0.0], np.float32),
          "channels": np.array([1.0, -0.5, 0.0, 2.0], np.float32)}


def _linear_program(tmp_path, ops, feeds, params, fetch) -> SavedProgram:
    from devtools.zoo import write_combined_params, write_program

    written = {n for op in ops for names in op["outputs"].values() for n in names}
    var_specs = [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in feeds.items()]
    var_specs += [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape), "persistable": True}
                  for n, a in params.items()]
    var_specs += [{"name": n, "dtype": "float32", "shape": []} for n in sorted(written)]
    model_path = os.path.join(str(tmp_path), "__model__")
    params_path = os.path.join(str(tmp_path), "__params__")
    write_program(model_path, [{"vars": var_specs, "ops": ops}], feeds=list(feeds), fetches=[fetch])
    write_combined_params(params_path, params)
    return SavedProgram(model_path, params_path, dict(feeds), None)


def _linear_op(op_type, x, y, axis, round_type):
    return {"type": op_type, "inputs": {"X": [x], "Scale": ["s"], "ZeroPoint": ["z"]}, "outputs": {"Y": [y]},
            "attrs": {"quant_axis": axis, "bit_length": 8, "round_type": round_type, "is_test": True}}


@pytest.mark.parametrize("round_type", [0, 1])
@pytest.mark.parametrize("scale", sorted(SCALES))
@pytest.mark.parametrize("op_type", ["quantize_linear", "dequantize_linear"])
def test_linear_quantization_with_zero_and_negative_scales(tmp_path, op_type, scale, round_type):
    s = SCALES[scale]
    axis = -1 if s.size == 1 else 0
    x = (rng.standard_normal((4, 3)) * 3).astype(np.float32)
    if op_type == "dequantize_linear":
        x = np.round(x * 20)  # Paddle's float-held integers
    saved = _linear_program(tmp_path, [_linear_op(op_type, "x", "y", axis, round_type)], {"x": x},
                            {"s": s, "z": np.zeros(s.shape, np.float32)}, "y")
    assert_devices_match_paddle(saved)


def test_dequantize_linear_of_an_int8_weight_with_negative_scales(tmp_path):
    w = rng.integers(-127, 128, (4, 3)).astype(np.int8)
    s = SCALES["channels"]
    saved = _linear_program(tmp_path, [_linear_op("dequantize_linear", "w", "y", 0, 0)], {},
                            {"w": w, "s": s, "z": np.zeros(s.shape, np.float32)}, "y")
    assert_devices_match_paddle(saved)


def test_dequantize_linear_on_float64(tmp_path):
    x = np.round(rng.standard_normal((4, 3)) * 20)
    saved = one_op(tmp_path, "dequantize_linear", {"X": ["x"], "Scale": ["s"], "ZeroPoint": ["z"]}, {"Y": ["y"]},
                   {"quant_axis": 0, "bit_length": 8, "round_type": 0, "is_test": True}, {"x": x}, out_dtype="float64",
                   params={"s": np.array([2.0, -1.0, 0.5, 3.0]), "z": np.zeros(4)})
    assert_devices_match_paddle(saved)


def test_quantize_then_dequantize_with_a_negative_scale(tmp_path):
    x = (rng.standard_normal((4, 3)) * 3).astype(np.float32)
    ops = [_linear_op("quantize_linear", "x", "q", -1, 0), _linear_op("dequantize_linear", "q", "y", -1, 0)]
    saved = _linear_program(tmp_path, ops, {"x": x}, {"s": SCALES["negative"], "z": np.zeros(1, np.float32)}, "y")
    assert_devices_match_paddle(saved)


# -- top_k_v2 ------------------------------------------------------------------------------------------------

def test_top_k_of_a_0d_tensor(tmp_path):
    import paddle

    legacy_and_pir(tmp_path, lambda x: list(paddle.topk(x, 1)), {"x": np.array(2.5, np.float32)})


# -- pooling edges -------------------------------------------------------------------------------------------

POOL_EDGES = list(itertools.product(
    ["avg", "max"], [False, True], [True, False],
    # (input H/W, ksize, stride, paddings): windows wholly in the padding, kernels past the padded input,
    # trailing pads larger than the leading ones.
    [((1, 1), 1, 2, [1, 1]), ((1, 1), 2, 2, [0, 0]), ((1, 1), 3, 3, [2, 2]), ((3, 3), 2, 2, [0, 1, 0, 1]),
     ((2, 3), 4, 3, [1, 0, 0, 1]), ((5, 4), 3, 2, [1, 1]), ((4, 4), 5, 4, [1, 1])]))


@pytest.mark.parametrize(
    "pooling_type, ceil_mode, exclusive, geometry",
    POOL_EDGES,
    ids=[
        f"{p}-ceil{int(c)}-excl{int(e)}-{g[0][0]}x{g[0][1]}k{g[1]}s{g[2]}p{''.join(map(str, g[3]))}"
        for p, c, e, g in POOL_EDGES
    ],
)
def test_pool2d_windows_past_the_input(tmp_path, pooling_type, ceil_mode, exclusive, geometry):
    hw, k, s, paddings = geometry
    x = rng.standard_normal((2, 3, *hw)).astype(np.float32)
    attrs = {"pooling_type": pooling_type, "ksize": [k, k], "strides": [s, s], "paddings": paddings,
             "global_pooling": False, "ceil_mode": ceil_mode, "exclusive": exclusive, "adaptive": False,
             "data_format": "NCHW", "padding_algorithm": "EXPLICIT"}
    assert_devices_match_paddle(one_op(tmp_path, "pool2d", {"X": ["x"]}, {"Out": ["out"]}, attrs, {"x": x}))


def test_pool2d_empty_output_and_nhwc_float64(tmp_path):
    attrs = {"pooling_type": "avg", "ksize": [2, 2], "strides": [1, 1], "paddings": [0, 0], "global_pooling": False,
             "ceil_mode": False, "exclusive": True, "adaptive": False, "data_format": "NCHW",
             "padding_algorithm": "EXPLICIT"}
    x = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    want = assert_devices_match_paddle(one_op(tmp_path / "empty", "pool2d", {"X": ["x"]}, {"Out": ["out"]}, attrs,
                                              {"x": x}))
    assert want[0].shape == (2, 3, 0, 0)
    attrs.update(ksize=[2, 2], strides=[2, 2], paddings=[0, 1, 1, 0], ceil_mode=True, data_format="NHWC")
    for pooling_type, exclusive in itertools.product(["avg", "max"], [True, False]):
        attrs.update(pooling_type=pooling_type, exclusive=exclusive)
        x = rng.standard_normal((1, 3, 3, 2))
        assert_devices_match_paddle(one_op(tmp_path / f"{pooling_type}{exclusive}", "pool2d", {"X": ["x"]},
                                           {"Out": ["out"]}, attrs, {"x": x}, out_dtype="float64"))


@pytest.mark.parametrize("hw, k, s, p, ceil_mode", [((1, 1), 2, 2, 0, False), ((3, 3), 2, 2, 0, True),
                                                   ((3, 3), 3, 2, 1, True), ((4, 5), 3, 3, 1, True)])
def test_max_pool_with_index_and_pool3d_windows_past_the_input(tmp_path, hw, k, s, p, ceil_mode):
    import paddle

    F = paddle.nn.functional
    feeds = {"x": rng.standard_normal((1, 2, *hw)).astype(np.float32),
             "v": rng.standard_normal((1, 2, 2, *hw)).astype(np.float32)}
    legacy_and_pir(tmp_path, lambda x, v: [*F.max_pool2d(x, k, s, p, ceil_mode=ceil_mode, return_mask=True),
                                           F.avg_pool3d(v, k, s, p, ceil_mode=ceil_mode, exclusive=False),
                                           F.max_pool3d(v, k, s, p, ceil_mode=ceil_mode)], feeds)


def test_pool_api_kernel_larger_than_the_input(tmp_path):
    import paddle

    F = paddle.nn.functional
    x = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    legacy_and_pir(tmp_path, lambda x: [F.avg_pool2d(x, 2, 2), F.max_pool2d(x, 2, 2),
                                        F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, exclusive=False)], {"x": x})


# -- interpolation sizes and scales --------------------------------------------------------------------------

def test_interpolation_size_and_scale_tensors_0d_and_1(tmp_path):
    import paddle

    F = paddle.nn.functional
    feeds = {"x": rng.standard_normal((1, 2, 4, 4)).astype(np.float32), "s": np.array(2.0, np.float32),
             "h": np.array(6, np.int64), "w": np.array([5], np.int64)}
    legacy_and_pir(tmp_path, lambda x, s, h, w: [F.interpolate(x, scale_factor=s, mode="bilinear"),
                                                 F.interpolate(x, size=[h, w], mode="nearest")], feeds)


# -- tile, broadcast_tensors ---------------------------------------------------------------------------------

def test_broadcast_tensors(tmp_path):
    import paddle

    feeds = {"a": rng.standard_normal((1, 3)).astype(np.float32), "b": rng.standard_normal((2, 1)).astype(np.float32),
             "c": np.arange(6).reshape(2, 3)}
    legacy_and_pir(tmp_path, lambda a, b, c: paddle.broadcast_tensors([a, b]) + paddle.broadcast_tensors(
        [paddle.cast(a, "int64"), c]), feeds)


def test_broadcast_tensors_host_kernel(tmp_path):
    from nnadapter_bridge.host import HostExecutor
    from nnadapter_bridge.loader import load_model

    feeds = {"a": rng.standard_normal((1, 3)).astype(np.float32), "b": rng.standard_normal((2, 1)).astype(np.float32)}
    saved = opdesc_program(tmp_path, "broadcast_tensors", inputs={"X": ["a", "b"]}, outputs={"Out": ["p", "q"]},
                           feeds=feeds)
    graph = load_model(saved.model_path)
    scope = dict(feeds)
    HostExecutor(graph).run_host_kernel(next(op for op in graph.ops() if op.type == "broadcast_tensors"), scope)
    for name, want in zip(["p", "q"], saved.outputs):
        assert_op_close(scope[name], want, what=name)


def test_tile_with_empty_repeat_times(tmp_path):
    import paddle

    x = rng.standard_normal((2, 3)).astype(np.float32)
    legacy_and_pir(tmp_path, lambda x: [paddle.tile(x, []), paddle.tile(x, [2])], {"x": x})


# -- tensor arrays -------------------------------------------------------------------------------------------

def _jit_save_legacy(tmp_path, fn, spec) -> str:
    """`paddle.jit.save` of `fn` with PIR off (conftest): a legacy .pdmodel, as paddle2onnx-style exporters write."""
    import paddle

    class Layer(paddle.nn.Layer):
        def forward(self, x):
            return fn(x)

    paddle.disable_static()
    prefix = os.path.join(str(tmp_path), "model")
    paddle.jit.save(paddle.jit.to_static(Layer(), input_spec=[spec], full_graph=True), prefix)
    return prefix + ".pdmodel"


def _appended_in_a_loop(x):
    import paddle

    rows = []
    i = 0
    while i < paddle.shape(x)[0]:
        rows.append(x[i] * 2.0)
        i += 1
    return paddle.stack(rows), paddle.to_tensor(len(rows))


def test_array_appended_in_a_loop_and_read_by_its_length(tmp_path):
    import paddle

    model = _jit_save_legacy(tmp_path, _appended_in_a_loop, paddle.static.InputSpec([3, 2], "float32", "x"))
    from nnadapter_bridge.loader import load_model

    types = {op.type for op in load_model(model).ops()}
    assert {"while", "lod_array_length"} <= types, types
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert_devices_match_paddle(SavedProgram(model, None, {"x": x}, None))
