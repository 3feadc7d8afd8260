"""Converters for shape and tensor manipulation, end to end: a one-op Paddle program -> our converters ->
builtin_device, compared with Paddle running the same saved program (integers exact).

Ops Paddle 3.3.1 still builds in legacy static mode use `static_program`; the rest are written as OpDescs.
Where Paddle 3.3.1 no longer executes an op type (squeeze, unsqueeze, flatten v1) the expectation is a
numpy formula of the op's documented semantics.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import ConversionError
from support.converter_harness import (
    check_program,
    convert_and_run,
    opdesc_program,
    run_opdesc,
    run_pir,
    run_static,
    static_program,
)

rng = np.random.default_rng(20261121)


def rand(shape, dtype="float32"):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in ("int32", "int64"):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def assert_rejected(tmp_path, op_type, inputs, outputs, attrs, feeds, reason_part):
    saved = opdesc_program(tmp_path, op_type, inputs=inputs, outputs=outputs, attrs=attrs, feeds=feeds,
                           run_paddle=False)
    with pytest.raises(ConversionError, match=reason_part):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


# -- reshape -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,target", [((2, 3, 4), [0, -1]), ((2, 3, 4), [-1]), ((2, 3, 4), [4, 3, 2]),
                                          ((6,), [2, -1, 1]), ((1, 2, 3, 4), [0, 0, 12])])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_reshape2_attr(tmp_path, shape, target, dtype):
    import paddle

    # paddle.reshape emits "reshape2"
    run_static(tmp_path, "reshape2", lambda x: paddle.reshape(x, target), {"x": rand(shape, dtype)})


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_reshape2_other_dtypes(tmp_path, dtype):
    import paddle

    run_static(tmp_path, "reshape2", lambda x: paddle.reshape(x, [3, -1]), {"x": rand((2, 3, 2), dtype)})


def test_reshape2_shape_tensor_list(tmp_path):
    import paddle

    # A list of tensors becomes the `ShapeTensor` input: its elements CONCATenated at run time.
    # (Feeds only: a Python int in the list would add a fill_constant op, another family's converter.)
    feeds = {"x": rand((2, 3, 4)), "rows": np.array([4], dtype="int32"), "cols": np.array([-1], dtype="int64")}
    run_static(tmp_path, "reshape2", lambda x, rows, cols: paddle.reshape(x, [rows, cols]), feeds)


def test_reshape2_shape_tensor_list_mixed_param(tmp_path):
    # One element a parameter (folded), one computed at run time; the attr is ignored.
    run_opdesc(tmp_path, "reshape2", {"X": ["x"], "ShapeTensor": ["a", "b"]}, {"Out": ["y"]}, {"shape": [24]},
               {"x": rand((2, 3, 4)), "b": np.array([-1], "int32")}, params={"a": np.array([6], "int32")})


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_reshape2_shape_tensor(tmp_path, dtype):
    import paddle

    feeds = {"x": rand((2, 3, 4)), "s": np.array([4, 0, -1], dtype=dtype)}
    run_static(tmp_path, "reshape2", lambda x, s: paddle.reshape(x, s), feeds)


def test_reshape_v1(tmp_path):
    run_opdesc(tmp_path, "reshape", {"X": ["x"]}, {"Out": ["y"]}, {"shape": [0, -1, 2]}, {"x": rand((2, 3, 4))})


def test_reshape2_param_shape_tensor(tmp_path):
    # `Shape` given as a parameter is folded into a constant.
    run_opdesc(tmp_path, "reshape2", {"X": ["x"], "Shape": ["s"]}, {"Out": ["y"]}, {"shape": [99]},
               {"x": rand((2, 3, 4))}, params={"s": np.array([3, 8], dtype="int32")})


# -- flatten -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,start,stop", [((2, 3, 4), 1, 2), ((2, 3, 4), 0, -1), ((2, 3, 4, 5), -3, -2),
                                              ((2, 3, 4, 5), 0, 0), ((2, 3, 4, 5), 1, -1)])
def test_flatten_contiguous_range(tmp_path, shape, start, stop):
    import paddle

    # paddle.flatten emits "flatten_contiguous_range"
    run_static(tmp_path, "flatten_contiguous_range", lambda x: paddle.flatten(x, start, stop), {"x": rand(shape)})


def test_flatten_contiguous_range_defaults(tmp_path):
    # Missing attrs take the OpMaker defaults start_axis=1, stop_axis=1 (merging one dim: no change).
    # Paddle 3.3.1 refuses to run the op without them, so the expectation is the identity.
    x = rand((2, 3, 4))
    run_opdesc(tmp_path, "flatten_contiguous_range", {"X": ["x"]}, {"Out": ["y"]}, {}, {"x": x}, want=[x])


@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_flatten2(tmp_path, axis):
    # XShape left out, as Paddle's exporters drop it. Paddle 3.3.1 crashes (SIGSEGV) running flatten2
    # without XShape, so the expectation is the documented formula.
    x = rand((2, 3, 4))
    want = x.reshape(int(np.prod(x.shape[:axis])), -1)
    run_opdesc(tmp_path, "flatten2", {"X": ["x"]}, {"Out": ["y"]}, {"axis": axis}, {"x": x}, want=[want])


@pytest.mark.parametrize("axis", [0, 1, 2, 3, None])
def test_flatten_v1(tmp_path, axis):
    x = rand((2, 3, 4))
    a = 1 if axis is None else axis
    want = x.reshape(int(np.prod(x.shape[:a])), -1)
    attrs = {} if axis is None else {"axis": axis}
    run_opdesc(tmp_path, "flatten", {"X": ["x"]}, {"Out": ["y"]}, attrs, {"x": x}, want=[want])


# -- squeeze / unsqueeze -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 4), []), ((1, 3, 1, 4), [0]), ((1, 3, 1, 4), [0, -2]),
                                        ((1, 3, 1, 4), [1]), ((1, 1), [])])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_squeeze2(tmp_path, shape, axes, dtype):
    import paddle

    # paddle.squeeze emits "squeeze2"; an axis whose dim is not 1 is ignored.
    run_static(tmp_path, "squeeze2", lambda x: paddle.squeeze(x, axes), {"x": rand(shape, dtype)})


def test_squeeze_v1_default_axes(tmp_path):
    x = rand((1, 3, 1, 4))
    run_opdesc(tmp_path, "squeeze", {"X": ["x"]}, {"Out": ["y"]}, {}, {"x": x}, want=[x.reshape(3, 4)])


@pytest.mark.parametrize("axes", [[0], [-1], [0, 2], [1, -1], [2, 0]])
def test_unsqueeze2(tmp_path, axes):
    import paddle

    # paddle.unsqueeze emits "unsqueeze2"
    run_static(tmp_path, "unsqueeze2", lambda x: paddle.unsqueeze(x, axes), {"x": rand((2, 3), "int64")})


def test_unsqueeze2_axes_tensor_list_params(tmp_path):
    run_opdesc(tmp_path, "unsqueeze2", {"X": ["x"], "AxesTensorList": ["a0", "a1"]}, {"Out": ["y"]}, {},
               {"x": rand((2, 3))}, params={"a0": np.array([0], "int32"), "a1": np.array([-1], "int32")})


def test_unsqueeze_v1(tmp_path):
    x = rand((2, 3))
    run_opdesc(tmp_path, "unsqueeze", {"X": ["x"]}, {"Out": ["y"]}, {"axes": [1]}, {"x": x},
               want=[x.reshape(2, 1, 3)])


def test_unsqueeze2_runtime_axes_rejected(tmp_path):
    assert_rejected(tmp_path, "unsqueeze2", {"X": ["x"], "AxesTensor": ["a"]}, {"Out": ["y"]}, {},
                    {"x": rand((2, 3)), "a": np.array([0], "int32")}, "AxesTensor")


# -- transpose ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,perm", [((2, 3, 4), [2, 0, 1]), ((2, 3), [1, 0]), ((2, 3, 4, 5), [0, 2, 3, 1]),
                                        ((2, 3, 4), [-1, 0, 1])])
def test_transpose2(tmp_path, shape, perm):
    import paddle

    run_static(tmp_path, "transpose2", lambda x: paddle.transpose(x, perm), {"x": rand(shape)})


def test_transpose_v1(tmp_path):
    run_opdesc(
        tmp_path, "transpose", {"X": ["x"]}, {"Out": ["y"]}, {"axis": [1, 0, 2]}, {"x": rand((2, 3, 4), "int32")}
    )


# -- concat / split / stack / unstack / unbind -------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_concat(tmp_path, axis, dtype):
    import paddle

    feeds = {"a": rand((2, 3, 4), dtype), "b": rand((2, 3, 4), dtype), "c": rand((2, 3, 4), dtype)}
    run_static(tmp_path, "concat", lambda a, b, c: paddle.concat([a, b, c], axis=axis), feeds)


def test_concat_axis_tensor_param(tmp_path):
    run_opdesc(tmp_path, "concat", {"X": ["a", "b"], "AxisTensor": ["axis"]}, {"Out": ["y"]}, {"axis": 0},
               {"a": rand((2, 3)), "b": rand((2, 5))}, params={"axis": np.array([1], "int32")})


def test_concat_runtime_axis_rejected(tmp_path):
    assert_rejected(tmp_path, "concat", {"X": ["a", "b"], "AxisTensor": ["axis"]}, {"Out": ["y"]}, {},
                    {"a": rand((2, 3)), "b": rand((2, 3)), "axis": np.array([1], "int32")}, "AxisTensor")


@pytest.mark.parametrize("sections,axis", [(3, 1), ([1, -1], 1), ([2, 1, 1], -1), (2, 0), ([4], 2)])
def test_split(tmp_path, sections, axis):
    import paddle

    run_static(tmp_path, "split", lambda x: paddle.split(x, sections, axis=axis), {"x": rand((2, 3, 4))})


def test_split_sections_tensor_list_params(tmp_path):
    run_opdesc(tmp_path, "split", {"X": ["x"], "SectionsTensorList": ["s0", "s1"]}, {"Out": ["y0", "y1"]},
               {"axis": 2, "sections": [-1, -1]}, {"x": rand((2, 3, 4))},
               params={"s0": np.array([1], "int32"), "s1": np.array([3], "int32")})


@pytest.mark.parametrize("s0, s1, dtype", [([5], [15], "int64"), ([-1], [12], "int32"), ([12], [-1], "int64"),
                                           ([0], [20], "int32")])
def test_split_sections_known_at_run_time_only(tmp_path, s0, s1, dtype):
    """Deformable DETR's levels: the sizes come from the feature maps' shapes at run time (a -1 is the rest)."""
    run_opdesc(tmp_path, "split", {"X": ["x"], "SectionsTensorList": ["s0", "s1"]}, {"Out": ["y0", "y1"]},
               {"axis": 1, "sections": [-1, -1]},
               {"x": rand((2, 20, 3)), "s0": np.array(s0, dtype), "s1": np.array(s1, dtype)})


@pytest.mark.parametrize("counts", [[7], [3, 4], [0, 7]])
def test_split_sections_in_one_run_time_tensor(tmp_path, counts):
    """Cascade R-CNN's per-image box counts: PIR's split takes a list of run-time values as one stacked tensor,
    which the translated op keeps as a tensor-valued `sections` attribute."""
    def build(x, n):
        sizes = [n[0]] if len(counts) == 1 else [n[0], n[1]]
        return x.split(sizes, axis=0)

    feeds = {"x": rand((7, 4)), "n": np.array(counts, "int64")}
    _, result, _ = run_pir(tmp_path, "split", build, feeds)
    assert "split" in {origin.type for origin in result.operation_origin if origin is not None}


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_split_sections_known_at_run_time_only_run_on_the_device(tmp_path, device):
    from support.converter_harness import device_predictor

    saved = opdesc_program(tmp_path, "split", inputs={"X": ["x"], "SectionsTensorList": ["s0", "s1", "s2"]},
                           outputs={"Out": ["y0", "y1", "y2"]}, attrs={"axis": -2, "sections": [-1, -1, -1]},
                           feeds={"x": rand((1, 21, 4)), "s0": np.array([16], "int64"),
                                  "s1": np.array([4], "int64"), "s2": np.array([1], "int64")})
    predictor = device_predictor(saved.model_path, device, saved.params_path)
    for name in predictor.get_input_names():
        predictor.get_input_by_name(name).from_numpy(saved.feeds[name])
    predictor.run()
    assert not predictor.host_ops, predictor.unsupported_reasons()
    for k, want in enumerate(saved.outputs):
        np.testing.assert_array_equal(predictor.get_output(k).numpy(), want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack(tmp_path, axis):
    import paddle

    run_static(tmp_path, "stack", lambda a, b: paddle.stack([a, b], axis=axis), {"a": rand((2, 3)), "b": rand((2, 3))})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unstack(tmp_path, axis):
    import paddle

    run_static(tmp_path, "unstack", lambda x: paddle.unstack(x, axis=axis), {"x": rand((2, 3, 4), "int32")})


@pytest.mark.parametrize("axis", [0, -2])
def test_unbind(tmp_path, axis):
    import paddle

    run_static(tmp_path, "unbind", lambda x: paddle.unbind(x, axis=axis), {"x": rand((2, 3, 4))})


# -- slice / strided_slice / flip -------------------------------------------------------------------------


@pytest.mark.parametrize("axes,starts,ends", [([0], [1], [2]), ([1, 2], [-2, 0], [100, -1]),
                                              ([2], [-100], [3]), ([0, 1, 2], [0, 1, 1], [1, 3, 4])])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_slice(tmp_path, axes, starts, ends, dtype):
    import paddle

    run_static(tmp_path, "slice", lambda x: paddle.slice(x, axes, starts, ends), {"x": rand((2, 3, 4), dtype)})


@pytest.mark.parametrize("index", ["row", "element", "mixed"])
def test_slice_decrease_axis(tmp_path, index):
    def build(x):
        if index == "row":
            return x[1]
        if index == "element":
            return x[1, 2, 3]  # every axis decreased: a 0-D result
        return x[1, :, 1:3]

    run_static(tmp_path, "slice", build, {"x": rand((2, 3, 4))})


def test_slice_starts_tensor_list(tmp_path):
    import paddle

    feeds = {"x": rand((2, 3, 4)), "s": np.array([1], "int32"), "s2": np.array([-3], "int32"),
             "e": np.array([3], "int64")}
    run_static(tmp_path, "slice", lambda x, s, s2, e: paddle.slice(x, [1, 2], [s, s2], [e, e]), feeds)


def test_slice_starts_ends_tensors(tmp_path):
    import paddle

    feeds = {"x": rand((2, 3, 4)), "s": np.array([0, -3], "int64"), "e": np.array([1, 100], "int64")}
    run_static(tmp_path, "slice", lambda x, s, e: paddle.slice(x, [0, 2], s, e), feeds)


@pytest.mark.parametrize("axes,starts,ends,strides", [
    ([0, 2], [0, 3], [2, 0], [1, -1]),
    ([1], [0], [3], [2]),
    ([2], [-1], [-100], [-1]),
    ([2], [100], [-5], [-2]),
    ([0, 1], [-1, 2], [-3, -4], [-1, -1]),
    ([2], [-100], [100], [3]),
    ([2], [-1], [-1], [-1]),
    ([1, 2], [-10, 10], [0, 2], [-1, -3]),
])
def test_strided_slice(tmp_path, axes, starts, ends, strides):
    import paddle

    run_static(
        tmp_path,
        "strided_slice",
        lambda x: paddle.strided_slice(x, axes, starts, ends, strides),
        {"x": rand((2, 3, 4))},
    )


@pytest.mark.parametrize("index", ["reverse", "reverse_step2", "range_back", "neg_range_back", "step_decrease"])
def test_strided_slice_indexing(tmp_path, index):
    def build(x):
        return {"reverse": lambda: x[::-1], "reverse_step2": lambda: x[:, ::-2],
                "range_back": lambda: x[:, :, 3:0:-1], "neg_range_back": lambda: x[:, -1:-4:-1],
                "step_decrease": lambda: x[1, ::2]}[index]()

    run_static(tmp_path, "strided_slice", build, {"x": rand((2, 3, 4), "int32")})


def test_strided_slice_runtime_starts_positive_strides(tmp_path):
    import paddle

    feeds = {"x": rand((2, 3, 4)), "s": np.array([1], "int32")}
    run_static(tmp_path, "strided_slice", lambda x, s: paddle.strided_slice(x, [2], [s], [4], [2]), feeds)


def test_strided_slice_runtime_strides(tmp_path):
    # Strides computed at run time (negative here) go to SLICE's steps operand as they are.
    run_opdesc(tmp_path, "strided_slice", {"Input": ["x"], "StridesTensor": ["st"]}, {"Out": ["y"]},
               {"axes": [0, 1], "starts": [-1, 0], "ends": [-100, 3], "strides": [1, 1], "infer_flags": [-1, -1]},
               {"x": rand((3, 4)), "st": np.array([-1, 2], "int32")})


def test_strided_slice_zero_stride_rejected(tmp_path):
    assert_rejected(tmp_path, "strided_slice", {"Input": ["x"]}, {"Out": ["y"]},
                    {"axes": [1], "starts": [0], "ends": [2], "strides": [0]}, {"x": rand((2, 3))}, "contain 0")


@pytest.mark.parametrize("axis,dtype", [([0], "float32"), ([0, 2], "float32"), ([-1], "int64"), ([1], "bool")])
def test_flip(tmp_path, axis, dtype):
    import paddle

    run_static(tmp_path, "flip", lambda x: paddle.flip(x, axis), {"x": rand((2, 3, 4), dtype)})


# -- expand / tile -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,target", [((3, 1), [2, 3, 4]), ((3, 1), [3, 5]), ((1, 4), [2, -1, 4]),
                                          ((2, 3), [2, 3])])
def test_expand_v2(tmp_path, shape, target):
    import paddle

    # paddle.expand emits "expand_v2"
    run_static(tmp_path, "expand_v2", lambda x: paddle.expand(x, target), {"x": rand(shape)})


def test_expand_v2_shape_tensor(tmp_path):
    import paddle

    feeds = {"x": rand((3, 1), "int64"), "s": np.array([2, 3, 4], "int32")}
    run_static(tmp_path, "expand_v2", lambda x, s: paddle.expand(x, s), feeds)


def test_expand_v2_shape_tensor_list(tmp_path):
    import paddle

    feeds = {"x": rand((3, 1)), "m": np.array([3], "int32"), "n": np.array([5], "int32")}
    run_static(tmp_path, "expand_v2", lambda x, m, n: paddle.expand(x, [m, n]), feeds)


@pytest.mark.parametrize("times", [[1, 2, 1], [2, 1, 3]])
def test_expand_v1(tmp_path, times):
    run_opdesc(tmp_path, "expand", {"X": ["x"]}, {"Out": ["y"]}, {"expand_times": times}, {"x": rand((2, 3, 4))})


def test_expand_v1_times_tensor(tmp_path):
    run_opdesc(tmp_path, "expand", {"X": ["x"], "ExpandTimes": ["t"]}, {"Out": ["y"]}, {"expand_times": [1, 1]},
               {"x": rand((2, 3)), "t": np.array([2, 3], "int32")})


def test_expand_as_v2(tmp_path):
    run_opdesc(tmp_path, "expand_as_v2", {"X": ["x"], "Y": ["t"]}, {"Out": ["y"]}, {"target_shape": [2, 3, 4]},
               {"x": rand((3, 1)), "t": rand((2, 3, 4))})


def test_expand_as_v2_target_shape_only(tmp_path):
    run_opdesc(tmp_path, "expand_as_v2", {"X": ["x"]}, {"Out": ["y"]}, {"target_shape": [2, 2, 3, 4]},
               {"x": rand((2, 3, 4), "int32")})


@pytest.mark.parametrize("repeats", [[2, 1, 1], [2, 2], [1, 2, 3, 2]])
@pytest.mark.parametrize("dtype", ["float32", "bool"])
def test_tile(tmp_path, repeats, dtype):
    import paddle

    run_static(tmp_path, "tile", lambda x: paddle.tile(x, repeats), {"x": rand((2, 3, 4), dtype)})


def test_tile_repeat_tensor_forms(tmp_path):
    import paddle

    feeds = {"x": rand((2, 3)), "r": np.array([2, 3], "int32"), "n": np.array([2], "int32")}
    run_static(tmp_path, "tile", lambda x, r, n: [paddle.tile(x, r), paddle.tile(x, [n, n])], feeds)


@pytest.mark.parametrize("repeats,axis", [(2, 1), (3, 0), (2, -1), (1, 2)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_repeat_interleave(tmp_path, repeats, axis, dtype):
    """CodeGen's rotary tables repeat each sin / cos column twice: [32, 8] -> [32, 16] along axis 1."""
    import paddle

    from support.converter_harness import run_pir

    run_pir(tmp_path, "repeat_interleave", lambda x: paddle.repeat_interleave(x, repeats, axis=axis),
            {"x": rand((2, 3, 4), dtype)}, exact=True)


def test_repeat_interleave_per_element_repeats_stay_unconverted(tmp_path):
    """A legacy program's RepeatsTensor (PIR writes repeat_interleave_with_tensor_index): its host kernel runs it."""
    saved = opdesc_program(tmp_path, "repeat_interleave", inputs={"X": ["x"], "RepeatsTensor": ["r"]},
                           outputs={"Out": ["out"]}, attrs={"dim": 1},
                           feeds={"x": rand((2, 3)), "r": np.array([1, 2, 3], "int64")}, run_paddle=False)
    with pytest.raises(ConversionError, match="output length known only at run time"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)


# -- shape / range / meshgrid ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 4), (5,)])
def test_shape(tmp_path, shape):
    """A program is converted for its inputs' dims: the SHAPE is computed then (a constant, handed out
    by an ASSIGN), and matches Paddle's."""
    import paddle

    from nnadapter_bridge.nnadapter.codes import OperationType as T

    _, result = check_program(static_program(tmp_path, lambda x: paddle.shape(x), {"x": rand(shape)}))
    assert result.folded == {T.SHAPE: 1}
    assert [op.type for op in result.model.operations] == [T.ASSIGN]


@pytest.mark.parametrize("dtype,values", [("float32", (0.5, 4.0, 0.75)), ("int64", (2, 11, 3)),
                                          ("int32", (10, -2, -3))])
def test_range(tmp_path, dtype, values):
    import paddle

    feeds = {n: np.array([v], dtype) for n, v in zip(("s", "e", "d"), values)}
    run_static(tmp_path, "range", lambda s, e, d: paddle.arange(s, e, d, dtype=dtype), feeds)


def test_meshgrid(tmp_path):
    import paddle

    feeds = {"a": rand((3,)), "b": rand((4,)), "c": rand((2,))}
    run_static(tmp_path, "meshgrid", lambda a, b, c: paddle.meshgrid(a, b, c), feeds)


# -- shuffle_channel / channel_shuffle / roll ----------------------------------------------------------------


@pytest.mark.parametrize("group", [1, 2, 3])
def test_shuffle_channel(tmp_path, group):
    run_opdesc(tmp_path, "shuffle_channel", {"X": ["x"]}, {"Out": ["y"]}, {"group": group},
               {"x": rand((2, 6, 2, 3))})


def test_channel_shuffle(tmp_path):
    import paddle

    run_static(
        tmp_path, "channel_shuffle", lambda x: paddle.nn.functional.channel_shuffle(x, 3), {"x": rand((1, 6, 2, 2))}
    )


@pytest.mark.parametrize("shifts,axis", [([1], [1]), ([1, -2], [0, 2]), ([5], []), ([-7], None), ([2], [-1])])
def test_roll(tmp_path, shifts, axis):
    attrs = {"shifts": shifts} if axis is None else {"shifts": shifts, "axis": axis}
    run_opdesc(tmp_path, "roll", {"X": ["x"]}, {"Out": ["y"]}, attrs, {"x": rand((2, 3, 4))})


def test_roll_shifts_tensor(tmp_path):
    run_opdesc(tmp_path, "roll", {"X": ["x"], "ShiftsTensor": ["s"]}, {"Out": ["y"]}, {"axis": [0, 1]},
               {"x": rand((2, 3, 4), "int64"), "s": np.array([1, 2], "int64")})


# -- repeat_interleave ---------------------------------------------------------------------------------------
# Before its converter, repeat_interleave ran only as a host kernel (SegNeXt's Hamburger head repeats its bases by
# the batch size: the op stayed on the host on every device).


@pytest.mark.parametrize("repeats,axis", [(2, 1), (3, 0), (1, 2), (2, None)])  # axis -1 hangs paddle 3.3.1 static
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_repeat_interleave_one_count(tmp_path, repeats, axis, dtype):
    import paddle

    build, feeds = (lambda x: paddle.repeat_interleave(x, repeats, axis)), {"x": rand((2, 3, 4), dtype)}
    if axis is None:  # paddle flattens x first (a flatten_contiguous_range op before it)
        check_program(static_program(tmp_path, build, feeds))
    else:
        run_static(tmp_path, "repeat_interleave", build, feeds)


def test_repeat_interleave_counts_per_element(tmp_path):
    """Counts per element (a constant tensor, zeros included) GATHER each index as often as its count says."""
    import paddle

    def build(x):
        counts = paddle.to_tensor(np.array([2, 0, 3], "int64"))
        return paddle.repeat_interleave(x, counts, 1)

    got, result = run_static(tmp_path, "repeat_interleave", build, {"x": rand((2, 3, 4))})  # `RepeatsTensor`
    assert got[next(iter(got))].shape == (2, 5, 4)


def test_repeat_interleave_run_time_count(tmp_path):
    """A one-element count fed at run time (SegNeXt's batch size) tiles the axis of size 1 that many times."""
    import paddle

    feeds = {"x": rand((1, 3, 4)), "r": np.array([3], "int64")}
    got, _ = run_static(tmp_path, "repeat_interleave", lambda x, r: paddle.repeat_interleave(x, r, 0), feeds)
    assert got[next(iter(got))].shape == (3, 3, 4)


def test_repeat_interleave_with_tensor_index_from_the_batch_size(tmp_path):
    """PIR's repeat_interleave_with_tensor_index (`RepeatTensor`), counted by another input's batch size as
    SegNeXt's NMF bases are (paddleseg.models.layers.nmf_2d)."""
    import paddle

    feeds = {"x": rand((1, 3, 4)), "y": rand((2, 5))}
    build = lambda x, y: paddle.repeat_interleave(x, paddle.shape(y)[0:1], 0)  # noqa: E731
    got, _, _ = run_pir(tmp_path, "repeat_interleave_with_tensor_index", build, feeds)
    assert got[next(iter(got))].shape == (2, 3, 4)


def test_repeat_interleave_run_time_counts_per_element_stay_on_the_host(tmp_path):
    import paddle

    feeds = {"x": rand((2, 3)), "r": np.array([1, 2, 1], "int64")}
    saved = static_program(tmp_path, lambda x, r: paddle.repeat_interleave(x, r, 1), feeds)
    with pytest.raises(ConversionError, match="per element computed at run time"):
        convert_and_run(saved.model_path, saved.feeds, saved.params_path)
