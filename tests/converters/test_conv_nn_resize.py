"""Converters of tensor.py (pad2d, pad3d, pad), resize.py (the interp family, v1 and v2, every size source)
and shape.py (pixel_shuffle), each a one-op Paddle program compared with Paddle's own result.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import ConversionError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from support.converter_harness import check_program, convert_and_run, opdesc_program, static_program

rng = np.random.default_rng(77)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def operation_types(result):
    return [op.type for op in result.model.operations]


# -- pad2d / pad3d / pad --------------------------------------------------------------------------------

# pad2d is gone from Paddle 3's executor (pad3d replaced it); its definition is numpy's pad with the
# same mode names (constant / reflect / edge) over [top, bottom, left, right].
_NUMPY_MODE = {"constant": "constant", "reflect": "reflect", "edge": "edge"}


def _pad2d_oracle(x, paddings, mode, value, layout):
    top, bottom, left, right = paddings
    widths = [(0, 0), (0, 0), (top, bottom), (left, right)] if layout == "NCHW" else \
        [(0, 0), (top, bottom), (left, right), (0, 0)]
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode=_NUMPY_MODE[mode])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pad2d(tmp_path, mode, layout):
    x = randn(1, 2, 4, 5) if layout == "NCHW" else randn(1, 4, 5, 2)
    saved = opdesc_program(tmp_path, "pad2d", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"paddings": [1, 2, 3, 0], "mode": mode, "pad_value": 1.5, "data_format": layout},
                           feeds={"x": x}, run_paddle=False)
    check_program(saved, want=[_pad2d_oracle(x, [1, 2, 3, 0], mode, 1.5, layout)])


def test_pad2d_defaults(tmp_path):
    x = randn(1, 2, 3, 3)
    saved = opdesc_program(tmp_path, "pad2d", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"paddings": [1, 0, 0, 1]}, feeds={"x": x}, run_paddle=False)
    check_program(saved, want=[_pad2d_oracle(x, [1, 0, 0, 1], "constant", 0.0, "NCHW")])


def test_pad2d_paddings_tensor(tmp_path):
    x = randn(2, 3, 4, 4)
    saved = opdesc_program(
        tmp_path,
        "pad2d",
        inputs={"X": ["x"], "Paddings": ["p"]},
        outputs={"Out": ["out"]},
        attrs={"paddings": [0, 0, 0, 0], "mode": "constant", "pad_value": -2.0, "data_format": "NCHW"},
        feeds={"x": x, "p": np.array([0, 1, 2, 1], dtype=np.int32)},
        run_paddle=False,
    )
    _, result = check_program(saved, want=[_pad2d_oracle(x, [0, 1, 2, 1], "constant", -2.0, "NCHW")])
    assert T.CONCAT in operation_types(result)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_pad3d(tmp_path, mode, layout):
    x_shape = (1, 2, 3, 4, 5) if layout == "NCDHW" else (1, 3, 4, 5, 2)
    saved = opdesc_program(tmp_path, "pad3d", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"paddings": [1, 2, 0, 1, 2, 1], "mode": mode, "value": 0.5, "data_format": layout},
                           feeds={"x": randn(*x_shape)})
    check_program(saved)


def test_pad3d_paddings_tensor(tmp_path):
    saved = opdesc_program(tmp_path, "pad3d", inputs={"X": ["x"], "Paddings": ["p"]}, outputs={"Out": ["out"]},
                           attrs={"paddings": [0] * 6, "mode": "constant", "value": 0.0, "data_format": "NCDHW"},
                           feeds={"x": randn(1, 2, 3, 3, 3), "p": np.array([1, 0, 2, 1, 0, 2], dtype=np.int32)})
    _, result = check_program(saved)
    assert T.GATHER in operation_types(result)


def test_pad3d_static_builder(tmp_path):
    import paddle

    check_program(static_program(tmp_path, lambda x: paddle.nn.functional.pad(x, [1, 2, 0, 1], mode="reflect"),
                                 {"x": randn(1, 2, 4, 5)}))


def test_pad3d_circular_wraps_like_paddle(tmp_path):
    # Paddle reads output index i of an axis of size n from input (i - begin) mod n, wider pads wrapping again.
    saved = opdesc_program(
        tmp_path,
        "pad3d",
        inputs={"X": ["x"]},
        outputs={"Out": ["out"]},
        attrs={"paddings": [1, 3, 0, 2, 2, 0], "mode": "circular"},
        feeds={"x": randn(1, 2, 2, 2, 3)},
    )
    _, result = check_program(saved)
    assert operation_types(result) == [T.GATHER, T.GATHER, T.GATHER]


def test_pad3d_circular_with_run_time_paddings_is_rejected(tmp_path):
    saved = opdesc_program(tmp_path, "pad3d", inputs={"X": ["x"], "Paddings": ["p"]}, outputs={"Out": ["out"]},
                           attrs={"mode": "circular"}, run_paddle=False,
                           feeds={"x": randn(1, 1, 2, 2, 2), "p": np.ones(6, np.int32)})
    with pytest.raises(ConversionError, match="circular"):
        convert_and_run(saved.model_path, saved.feeds)


def test_pad(tmp_path):
    x = randn(2, 3, 4)
    paddings = [1, 0, 0, 2, 3, 1]
    saved = opdesc_program(tmp_path, "pad", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"paddings": paddings, "pad_value": 0.25}, feeds={"x": x}, run_paddle=False)
    # The original pad op may be gone from Paddle's executor; numpy's constant pad is its definition.
    want = np.pad(x, [(1, 0), (0, 2), (3, 1)], constant_values=0.25)
    check_program(saved, want=[want])


# -- interpolation --------------------------------------------------------------------------------------

INTERP_V2 = [
    # (attrs, extra inputs {slot: (name, array)})
    ({"out_h": 7, "out_w": 9}, {}),
    ({"out_h": 3, "out_w": 5}, {}),
    ({"scale": [2.0, 1.5]}, {}),
    ({"scale": [1.7, 0.6]}, {}),
    ({"out_h": 4, "out_w": 4}, {"OutSize": ("size", np.array([6, 11], dtype=np.int32))}),
    ({"out_h": 4, "out_w": 4}, {"Scale": ("scale", np.array([1.5], dtype=np.float32))}),
    ({"out_h": 4, "out_w": 4}, {"Scale": ("scale", np.array([1.5, 2.5], dtype=np.float32))}),
]


# align_mode only matters for bilinear without align_corners.
INTERP_V2_MODES = [("nearest_interp_v2", False, 1), ("nearest_interp_v2", True, 1), ("bilinear_interp_v2", False, 1),
                   ("bilinear_interp_v2", False, 0), ("bilinear_interp_v2", True, 1)]


@pytest.mark.parametrize("op_type,align_corners,align_mode", INTERP_V2_MODES)
@pytest.mark.parametrize("attrs,extra", INTERP_V2)
def test_interp_v2(tmp_path, op_type, align_corners, align_mode, attrs, extra):
    method = "nearest" if op_type.startswith("nearest") else "bilinear"
    full = {"interp_method": method, "align_corners": align_corners, "align_mode": align_mode, "data_layout": "NCHW",
            "out_d": -1, "out_h": -1, "out_w": -1}
    full.update(attrs)  # an empty `scale` is left out: the writer could only type it as INTS
    inputs, feeds = {"X": ["x"]}, {"x": randn(2, 3, 5, 6)}
    for slot, (name, value) in extra.items():
        inputs[slot] = [name]
        feeds[name] = value
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["out"]}, attrs=full, feeds=feeds)
    _, result = check_program(saved)
    assert (T.RESIZE_NEAREST if method == "nearest" else T.RESIZE_LINEAR) in operation_types(result)


@pytest.mark.parametrize("op_type", ["nearest_interp_v2", "bilinear_interp_v2"])
def test_interp_v2_size_tensor(tmp_path, op_type):
    method = "nearest" if op_type.startswith("nearest") else "bilinear"
    saved = opdesc_program(
        tmp_path,
        op_type,
        inputs={"X": ["x"], "SizeTensor": ["h", "w"]},
        outputs={"Out": ["out"]},
        attrs={"interp_method": method, "align_corners": False, "align_mode": 0, "out_h": 2, "out_w": 2},
        feeds={"x": randn(1, 2, 4, 5), "h": np.array([7], np.int32), "w": np.array([3], np.int32)},
    )
    _, result = check_program(saved)
    assert operation_types(result)[0] == T.CONCAT


def _interp_size_and_scale(op_type, size_slot, scale_kind, align_corners):
    """A one-op interp program on x[1, 2, 5, 6] whose size is [8, 4] from `size_slot` (OutSize or
    SizeTensor) plus a scale of 1.5 (per axis 1.5, 2.5 for v2) from the attr or the Scale tensor."""
    v1 = op_type in ("nearest_interp", "bilinear_interp")
    method = "nearest" if op_type.startswith("nearest") else "bilinear"
    attrs = {"interp_method": method, "align_corners": align_corners, "align_mode": 1, "out_h": -1, "out_w": -1}
    inputs, feeds = {"X": ["x"]}, {"x": randn(1, 2, 5, 6)}
    if size_slot == "OutSize":
        inputs["OutSize"], feeds["size"] = ["size"], np.array([8, 4], dtype=np.int32)
    else:
        inputs["SizeTensor"], feeds["h"], feeds["w"] = ["h", "w"], np.array([8], np.int32), np.array([4], np.int32)
    if scale_kind == "attr":
        attrs["scale"] = 1.5 if v1 else [1.5, 2.5]
    else:
        inputs["Scale"], feeds["scale"] = ["scale"], np.array([1.5] if v1 else [1.5, 2.5], dtype=np.float32)
    return inputs, feeds, attrs


INTERP_ALL = ["nearest_interp", "bilinear_interp", "nearest_interp_v2", "bilinear_interp_v2"]


@pytest.mark.parametrize("op_type", INTERP_ALL)
@pytest.mark.parametrize("scale_kind", ["attr", "tensor"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interp_size_tensor_ignores_scale(tmp_path, op_type, scale_kind, align_corners):
    # Paddle takes SizeTensor's size and samples with in / out whatever scale is set: converted, exact.
    inputs, feeds, attrs = _interp_size_and_scale(op_type, "SizeTensor", scale_kind, align_corners)
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["out"]}, attrs=attrs, feeds=feeds)
    assert saved.outputs[0].shape == (1, 2, 8, 4)
    check_program(saved)


def _nearest_rows_cols(x, out_hw, ratios):
    rows = np.minimum((np.arange(out_hw[0]) * ratios[0]).astype(int), x.shape[2] - 1)
    cols = np.minimum((np.arange(out_hw[1]) * ratios[1]).astype(int), x.shape[3] - 1)
    return x[:, :, rows][:, :, :, cols]


@pytest.mark.parametrize("op_type", INTERP_ALL)
@pytest.mark.parametrize("scale_kind", ["attr", "tensor"])
def test_interp_out_size_with_scale_is_rejected(tmp_path, op_type, scale_kind):
    # Without align_corners Paddle (v1 as v2) takes OutSize's size but samples with 1 / scale, which RESIZE
    # (in / out) cannot express.
    inputs, feeds, attrs = _interp_size_and_scale(op_type, "OutSize", scale_kind, False)
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["out"]}, attrs=attrs, feeds=feeds)
    if op_type.startswith("nearest"):
        scales = [1.5, 1.5] if op_type == "nearest_interp" else [1.5, 2.5]
        x, want = feeds["x"], saved.outputs[0]
        np.testing.assert_array_equal(want, _nearest_rows_cols(x, (8, 4), [1 / scales[0], 1 / scales[1]]))
        assert not np.array_equal(want, _nearest_rows_cols(x, (8, 4), [5 / 8, 6 / 4]))
    with pytest.raises(ConversionError, match="1/scale"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


@pytest.mark.parametrize("op_type", INTERP_ALL)
def test_interp_out_size_with_scale_align_corners(tmp_path, op_type):
    # With align_corners the scale plays no part: OutSize's size, sampled with (in - 1) / (out - 1).
    inputs, feeds, attrs = _interp_size_and_scale(op_type, "OutSize", "attr", True)
    check_program(opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["out"]}, attrs=attrs, feeds=feeds))


@pytest.mark.parametrize("op_type", ["nearest_interp_v2", "bilinear_interp_v2"])
def test_interp_v2_nhwc(tmp_path, op_type):
    method = "nearest" if op_type.startswith("nearest") else "bilinear"
    saved = opdesc_program(tmp_path, op_type, inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"interp_method": method, "align_corners": False, "align_mode": 1, "out_h": 8,
                                  "out_w": 7, "data_layout": "NHWC"},
                           feeds={"x": randn(1, 4, 5, 3)})
    _, result = check_program(saved)
    assert operation_types(result)[0] == T.TRANSPOSE


def test_interp_static_builder(tmp_path):
    import paddle

    def build(x):
        a = paddle.nn.functional.interpolate(x, scale_factor=2, mode="nearest")
        b = paddle.nn.functional.interpolate(x, size=[7, 9], mode="bilinear", align_corners=False)
        c = paddle.nn.functional.interpolate(x, size=[3, 4], mode="bilinear", align_corners=True)
        return a, b, c

    check_program(static_program(tmp_path, build, {"x": randn(1, 2, 5, 6)}))


@pytest.mark.parametrize("op_type", ["nearest_interp", "bilinear_interp"])
@pytest.mark.parametrize("attrs,extra", [
    ({"out_h": 7, "out_w": 9}, {}),
    ({"scale": 1.55}, {}),
    ({"scale": 2.0, "align_corners": False}, {}),
    ({"out_h": 3, "out_w": 3}, {"OutSize": ("size", np.array([8, 4], dtype=np.int32))}),
])
def test_interp_v1(tmp_path, op_type, attrs, extra):
    method = "nearest" if op_type.startswith("nearest") else "bilinear"
    full = {"interp_method": method, "align_corners": True, "align_mode": 1, "out_h": -1, "out_w": -1, "scale": 0.0}
    full.update(attrs)
    inputs, feeds = {"X": ["x"]}, {"x": randn(1, 2, 5, 6)}
    for slot, (name, value) in extra.items():
        inputs[slot] = [name]
        feeds[name] = value
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs={"Out": ["out"]}, attrs=full, feeds=feeds)
    check_program(saved)


# -- pixel_shuffle -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("factor,layout,x_shape", [(2, "NCHW", (2, 8, 3, 4)), (3, "NCHW", (1, 9, 2, 2)),
                                                   (2, "NHWC", (1, 3, 4, 8))])
def test_pixel_shuffle(tmp_path, factor, layout, x_shape):
    saved = opdesc_program(tmp_path, "pixel_shuffle", inputs={"X": ["x"]}, outputs={"Out": ["out"]},
                           attrs={"upscale_factor": factor, "data_format": layout}, feeds={"x": randn(*x_shape)})
    check_program(saved)
