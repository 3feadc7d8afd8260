"""The standard's lowering passes (nnadapter.lowering) keep a model's meaning: for random inputs the lowered
model, run through the reference, equals the original run through it. Covers YOLO_BOX decomposition (every
attribute combination the drivers composed, and the cases they refused), PRIOR_BOX folding, constant folding
of a chain, and models with nothing to lower coming back unchanged."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.conformance.harness import Const, build_op
from nnadapter_bridge.conformance.samples import YOLO_BOX_CASES
from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, FuseCode, Lifetime, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.lowering import decompose, fold_constants, fold_prior_box
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations import dequantize
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.types import OperandType

rng = np.random.default_rng(29)

# Decomposed operations are FLOAT32 where the reference computes YOLO_BOX in float64 and rounds once.
RTOL, ATOL = 2e-5, 2e-3


def _types(model: Model) -> list:
    return [op.type for op in model.topological_operations()]


def _snapshot(model: Model):
    """Everything a pass must not change in its input model."""
    return ([(op.type, [None if o is None else o.index for o in op.inputs],
              [None if o is None else o.index for o in op.outputs]) for op in model.operations],
            [(o.type.precision, o.type.dims, o.type.lifetime) for o in model.operands])


# -- YOLO_BOX -----------------------------------------------------------------------------------------------

YOLO_CASES = YOLO_BOX_CASES


def _yolo_model(case, n=2, h=5, w=6, with_scores=True, batch_known=True):
    anchors, class_num, conf_thresh, downsample, clip_bbox, scale_x_y, iou_aware, iou_factor = case
    a = len(anchors) // 2
    channels = a * (5 + class_num) + (a if iou_aware else 0)
    x = (rng.standard_normal((n, channels, h, w)) * 2).astype(np.float32)
    imgsize = np.array([[h * downsample, w * downsample], [300, 417]][:n] * (n // 2 + 1), dtype=np.int32)[:n]
    inputs = [x, imgsize, Const(np.int32(anchors)), class_num, float(conf_thresh), downsample, clip_bbox,
              float(scale_x_y), iou_aware, float(iou_factor)]
    model, feeds = build_op(T.YOLO_BOX, inputs, n_outputs=2, null_outputs=() if with_scores else (1,))
    if not batch_known:
        for operand in (model.input_operands[0], model.input_operands[1], *model.output_operands):
            operand.type.dims = (UNKNOWN,) + tuple(operand.type.dims[1:])
    return model, feeds


@pytest.mark.parametrize("case", YOLO_CASES, ids=lambda c: f"a{len(c[0]) // 2}k{c[1]}t{c[2]}clip{int(c[4])}"
                         f"s{c[5]}iou{int(c[6])}")
def test_decomposed_yolo_box_equals_the_reference(case):
    model, feeds = _yolo_model(case)
    before = _snapshot(model)
    lowered = decompose(model, [T.YOLO_BOX])
    assert _snapshot(model) == before, "decompose changed its input model"
    assert T.YOLO_BOX not in _types(lowered)
    want = run_model(model, feeds)
    got = run_model(lowered, feeds)
    for g, wnt, name in zip(got, want, ("boxes", "scores")):
        assert g.dtype == wnt.dtype == np.float32 and g.shape == wnt.shape, name
        np.testing.assert_allclose(g, wnt, rtol=RTOL, atol=ATOL, err_msg=f"YOLO_BOX {name} {case}")
    # The threshold zeroes exactly the same boxes and scores.
    np.testing.assert_array_equal(got[0] == 0, want[0] == 0)
    np.testing.assert_array_equal(got[1] == 0, want[1] == 0)


def test_decomposed_yolo_box_uses_only_operations_every_driver_has():
    basic = {T.ADD, T.SUB, T.MUL, T.DIV, T.MAX, T.MIN, T.POW, T.SIGMOID, T.EXP, T.RESHAPE, T.SPLIT, T.CONCAT,
             T.TRANSPOSE, T.CAST, T.GREATER_EQUAL}
    for case in YOLO_CASES:
        lowered = decompose(_yolo_model(case)[0], [T.YOLO_BOX])
        assert set(_types(lowered)) <= basic, set(_types(lowered)) - basic


def test_decomposed_yolo_box_without_scores_and_with_an_unknown_batch():
    case = YOLO_CASES[4]
    model, feeds = _yolo_model(case, n=3, with_scores=False, batch_known=False)
    lowered = decompose(model, [T.YOLO_BOX])
    assert len(lowered.output_operands) == 1 and lowered.output_operands[0].type.dims[0] == UNKNOWN
    (got,), (want,) = run_model(lowered, feeds), run_model(model, feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    # The same lowered model runs a different batch size.
    x, imgsize = feeds
    (got,), (want,) = run_model(lowered, [x[:1], imgsize[:1]]), run_model(model, [x[:1], imgsize[:1]])
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_decompose_keeps_the_rest_of_the_model():
    # x -> RELU -> YOLO_BOX -> boxes, plus a second output computed from x alone.
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 14, 4, 4)), "x")
    imgsize = model.add_operand(OperandType(precision=Precision.INT32, dims=(1, 2)), "imgsize")
    relu = model.add_output("relu")
    model.add_operation(T.RELU, [x], [relu])
    boxes = model.add_output("boxes")
    params = [model.add_constant(np.int32([10, 13, 16, 30])), model.add_constant(2), model.add_constant(0.1),
              model.add_constant(8), model.add_constant(np.array([True])), model.add_constant(1.0),
              model.add_constant(np.array([False])), model.add_constant(0.5)]
    model.add_operation(T.YOLO_BOX, [relu, imgsize, *params], [boxes])
    doubled = model.add_output("doubled")
    model.add_operation(T.ADD, [x, x, model.add_constant(np.int32(FuseCode.FUSED_NONE))], [doubled])
    model.identify_inputs_and_outputs([x, imgsize], [boxes, doubled])
    model.finish()
    feeds = [rng.standard_normal((1, 14, 4, 4)).astype(np.float32), np.int32([[32, 32]])]
    lowered = decompose(model, [T.YOLO_BOX])
    assert [o.name for o in lowered.input_operands] == ["x", "imgsize"]
    assert [o.name for o in lowered.output_operands] == ["boxes", "doubled"]
    assert lowered.finished and T.RELU in _types(lowered) and T.YOLO_BOX not in _types(lowered)
    for got, want in zip(run_model(lowered, feeds), run_model(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def _refused(model: Model, match: str) -> None:
    before = _snapshot(model)
    with pytest.raises(NNAdapterError, match=match):
        decompose(model, [T.YOLO_BOX])
    assert _snapshot(model) == before


def test_decompose_refuses_an_unknown_grid():
    model, _ = _yolo_model(YOLO_CASES[0])
    model.input_operands[0].type.dims = (2, 21, UNKNOWN, 6)
    _refused(model, "height and width")


def test_decompose_refuses_run_time_attributes():
    case = YOLO_CASES[1]
    anchors, class_num, conf_thresh, downsample, clip_bbox, scale_x_y, iou_aware, iou_factor = case
    x = np.zeros((1, 2 * (5 + class_num), 3, 3), np.float32)
    inputs = [x, np.int32([[48, 48]]), Const(np.int32(anchors)), class_num, np.float32([conf_thresh]), downsample,
              clip_bbox, float(scale_x_y), iou_aware, float(iou_factor)]
    model, _ = build_op(T.YOLO_BOX, inputs, n_outputs=2)
    _refused(model, "conf_thresh must be a constant")


@pytest.mark.parametrize("downsample, class_num", [(0, 2), (8, 0)])
def test_decompose_refuses_invalid_attributes(downsample, class_num):
    x = np.zeros((1, 2 * (5 + class_num), 3, 3), np.float32)
    inputs = [x, np.int32([[48, 48]]), Const(np.int32([10, 13, 16, 30])), class_num, 0.5, downsample, True, 1.0,
              False, 0.5]
    model, _ = build_op(T.YOLO_BOX, inputs, n_outputs=2)
    _refused(model, "class_num")


def test_decompose_refuses_a_type_without_decomposition():
    model, _ = _yolo_model(YOLO_CASES[0])
    with pytest.raises(NNAdapterError, match="no decomposition of NON_MAX_SUPPRESSION"):
        decompose(model, [T.NON_MAX_SUPPRESSION])


# -- PRIOR_BOX folding ---------------------------------------------------------------------------------------

PRIOR_BOX_CASES = [
    # (min_sizes, max_sizes, aspect_ratios, variances, flip, clip, steps, offset, min_max_order)
    ([16.0], [], [1.0], [0.1, 0.1, 0.2, 0.2], False, False, [0.0, 0.0], 0.5, False),
    ([16.0], [32.0], [2.0], [0.1, 0.1, 0.2, 0.2], True, False, [0.0, 0.0], 0.5, True),
    ([10.0, 20.0], [25.0, 40.0], [2.0, 3.0], [0.1, 0.2, 0.3, 0.4], True, True, [8.0, 8.0], 0.5, False),
    ([7.5], [60.0], [1.5], [1.0, 1.0, 1.0, 1.0], False, False, [5.0, 0.0], 1.0, True),
]


def _prior_box_inputs(case, feature, image):
    min_sizes, max_sizes, ratios, variances, flip, clip, steps, offset, order = case
    return [feature, image, Const(np.float32(min_sizes)), Const(np.float32(max_sizes)) if max_sizes else None,
            Const(np.float32(ratios)), Const(np.float32(variances)), flip, clip, float(steps[0]), float(steps[1]),
            float(offset), order]


@pytest.mark.parametrize("case", PRIOR_BOX_CASES)
@pytest.mark.parametrize("fold", [fold_constants, fold_prior_box], ids=["fold_constants", "fold_prior_box"])
def test_prior_box_folds_to_the_reference_values(case, fold):
    feature = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    image = rng.standard_normal((2, 3, 40, 48)).astype(np.float32)
    model, feeds = build_op(T.PRIOR_BOX, _prior_box_inputs(case, feature, image), n_outputs=2)
    before = _snapshot(model)
    lowered = fold(model)
    assert _snapshot(model) == before, "folding changed its input model"
    # The model outputs are now ASSIGNs of constants; the model inputs stay (now unused).
    assert _types(lowered) == [T.ASSIGN, T.ASSIGN]
    assert all(op.inputs[0].is_constant for op in lowered.operations)
    assert len(lowered.input_operands) == 2
    for got, want in zip(run_model(lowered, feeds), run_model(model, feeds)):
        np.testing.assert_array_equal(got, want)
    assert fold(lowered) is lowered, "folding a folded model again changes nothing"


def test_prior_box_folds_when_only_the_spatial_dims_are_known():
    case = PRIOR_BOX_CASES[2]
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(UNKNOWN, 3, 5, 6)), "x")
    image = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(UNKNOWN, 3, 40, 48)), "image")
    feature = model.add_output("feature")
    model.add_operation(T.SIGMOID, [x], [feature])  # the feature map is computed at run time
    boxes, variances = model.add_output("boxes"), model.add_output("variances")
    built, _ = build_op(T.PRIOR_BOX, _prior_box_inputs(case, np.zeros((1, 3, 5, 6), np.float32),
                                                       np.zeros((1, 3, 40, 48), np.float32)), n_outputs=2)
    params = [None if o is None else model.add_constant(o.value, o.type.precision)
              for o in built.operations[0].inputs[2:]]
    model.add_operation(T.PRIOR_BOX, [feature, image, *params], [boxes, variances])
    model.identify_inputs_and_outputs([x, image], [boxes, variances, feature])
    model.finish()
    feeds = [rng.standard_normal((1, 3, 5, 6)).astype(np.float32), np.zeros((1, 3, 40, 48), np.float32)]
    lowered = fold_prior_box(model)
    assert T.PRIOR_BOX not in _types(lowered) and T.SIGMOID in _types(lowered)
    for got, want in zip(run_model(lowered, feeds), run_model(model, feeds)):
        np.testing.assert_array_equal(got, want)
    # Unknown spatial dims: nothing to fold.
    model.input_operands[0].type.dims = (UNKNOWN, 3, UNKNOWN, 6)
    model.operations[0].outputs[0].type.dims = (UNKNOWN, 3, UNKNOWN, 6)
    assert fold_prior_box(model) is model


def test_prior_box_with_run_time_attributes_does_not_fold():
    case = PRIOR_BOX_CASES[0]
    inputs = _prior_box_inputs(case, np.zeros((1, 3, 5, 6), np.float32), np.zeros((1, 3, 40, 48), np.float32))
    inputs[2] = np.float32([16.0])  # min_sizes as a model input
    model, _ = build_op(T.PRIOR_BOX, inputs, n_outputs=2)
    assert fold_constants(model) is model


# -- constant folding ----------------------------------------------------------------------------------------

def _chain_model():
    """y = x + relu(c1 * c2) reshaped; the constant part (MUL, RELU, RESHAPE of a constant) folds."""
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2, 3)), "x")
    none = model.add_constant(np.int32(FuseCode.FUSED_NONE))
    c1 = model.add_constant(rng.standard_normal(6).astype(np.float32), name="c1")
    c2 = model.add_constant(rng.standard_normal(6).astype(np.float32), name="c2")
    product, relu, shaped, y = (model.add_output(n) for n in ("product", "relu", "shaped", "y"))
    model.add_operation(T.MUL, [c1, c2, none], [product])
    model.add_operation(T.RELU, [product], [relu])
    model.add_operation(T.RESHAPE, [relu, model.add_constant(np.int32([2, 3]))], [shaped])
    model.add_operation(T.ADD, [x, shaped, none], [y])
    model.identify_inputs_and_outputs([x], [y])
    model.finish()
    return model


def test_a_constant_chain_folds_whole():
    model = _chain_model()
    before = _snapshot(model)
    lowered = fold_constants(model)
    assert _snapshot(model) == before
    assert _types(lowered) == [T.ADD]
    folded = lowered.operations[0].inputs[1]
    assert folded.is_constant and folded.type.lifetime == Lifetime.CONSTANT_COPY and folded.type.dims == (2, 3)
    feeds = [rng.standard_normal((2, 3)).astype(np.float32)]
    np.testing.assert_array_equal(run_model(lowered, feeds)[0], run_model(model, feeds)[0])


def test_should_fold_limits_what_folds():
    model = _chain_model()
    lowered = fold_constants(model, lambda op: op.type == T.MUL)
    assert _types(lowered) == [T.RELU, T.RESHAPE, T.ADD]
    feeds = [rng.standard_normal((2, 3)).astype(np.float32)]
    np.testing.assert_array_equal(run_model(lowered, feeds)[0], run_model(model, feeds)[0])
    assert fold_constants(model, lambda op: False) is model


def test_quantized_constants_fold_to_quantized_constants():
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(4,)), "x")
    q = model.add_constant(np.int8([-100, -3, 0, 77]), Precision.QUANT_INT8_SYMM_PER_LAYER, scale=0.05)
    relu = model.add_operand(OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, scale=0.05), "relu")
    model.add_operation(T.RELU, [q], [relu])
    real = model.add_output("real")
    model.add_operation(T.DEQUANTIZE, [relu], [real])
    y = model.add_output("y")
    model.add_operation(T.ADD, [x, real, model.add_constant(np.int32(0))], [y])
    model.identify_inputs_and_outputs([x], [y])
    model.finish()
    lowered = fold_constants(model)
    assert _types(lowered) == [T.ADD]
    feeds = [np.float32([1, 2, 3, 4])]
    np.testing.assert_array_equal(run_model(lowered, feeds)[0], run_model(model, feeds)[0])
    np.testing.assert_array_equal(dequantize(np.int8([0, 0, 0, 77]), relu.type), lowered.operations[0].inputs[1].value)


def test_an_operation_the_reference_rejects_is_left_for_run_time():
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2,)), "x")
    table = model.add_constant(np.float32([1, 2, 3]))
    gathered = model.add_output("gathered")
    model.add_operation(T.GATHER, [table, model.add_constant(np.int32([7, 0])), model.add_constant(0)], [gathered])
    y = model.add_output("y")
    model.add_operation(T.ADD, [x, gathered, model.add_constant(np.int32(0))], [y])
    model.identify_inputs_and_outputs([x], [y])
    model.finish()
    assert fold_constants(model) is model
    with pytest.raises(NNAdapterError, match="indices must lie in"):
        run_model(model, [np.zeros(2, np.float32)])


# -- nothing to lower ----------------------------------------------------------------------------------------

def test_a_model_with_nothing_to_lower_is_returned_unchanged():
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    model, feeds = build_op(T.CONV_2D, [x, Const(rng.standard_normal((4, 2, 1, 1)).astype(np.float32)),
                                        Const(np.zeros(4, np.float32)), 0, Const(np.int32([0, 0, 0, 0])),
                                        Const(np.int32([1, 1])), 1, Const(np.int32([1, 1])), 0])
    before = _snapshot(model)
    assert fold_constants(model) is model
    assert fold_prior_box(model) is model
    assert decompose(model, [T.YOLO_BOX]) is model
    assert _snapshot(model) == before
