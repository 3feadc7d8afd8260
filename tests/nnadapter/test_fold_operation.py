"""nnadapter.lowering.fold_operation, the test the converters apply to each operation they emit, and the Model
calls that put its result in place (replace_with_constants, drop_unused_operands).

An operation folds when its inputs are constants, or when it reads only the dims of an input (SHAPE,
FILL_LIKE, PRIOR_BOX) and those are known; and only when every output is small and not quantized. Each kind
is checked against the reference, and each refusal (an unknown dim, dims that change from run to run, a
large output, a quantized operand, a reference that rejects the values) leaves the operation in place.
Last, CONCAT's rule for the 0-d parts that size lists are made of.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, FuseCode, Lifetime, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.lowering import EAGER_FOLD_MAX_ELEMENTS, fold_operation
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import OperandType


def _model_with_input(dims, precision=Precision.FLOAT32, **type_args):
    model = Model()
    x = model.add_operand(OperandType(precision=precision, dims=tuple(dims), **type_args), "x")
    return model, x


def _add(model, type, inputs, n_outputs=1):
    outputs = [model.add_output(f"out{k}") for k in range(n_outputs)]
    return model.add_operation(type, inputs, outputs)


def test_shape_of_known_dims_folds():
    model, x = _model_with_input((2, 3, 5, 7))
    op = _add(model, T.SHAPE, [x, model.add_constant(np.int32([int(Precision.INT64)]))])
    (value,) = fold_operation(op)
    np.testing.assert_array_equal(value, np.array([2, 3, 5, 7], np.int64))
    assert value.dtype == np.int64


def test_shape_of_a_quantized_input_folds_its_dims():
    model, x = _model_with_input((1, 4), Precision.QUANT_INT8_SYMM_PER_LAYER, scale=0.5)
    op = _add(model, T.SHAPE, [x, model.add_constant(np.int32([int(Precision.INT32)]))])
    (value,) = fold_operation(op)
    np.testing.assert_array_equal(value, np.array([1, 4], np.int32))


@pytest.mark.parametrize("dims, dynamic", [((UNKNOWN, 3, 5, 7), ()), ((2, 3, 5, 7), ((1, 3, 5, 7), (4, 3, 5, 7)))],
                         ids=["unknown-dim", "dynamic-dims"])
def test_shape_of_dims_not_fixed_does_not_fold(dims, dynamic):
    model, x = _model_with_input(dims, dynamic_dims=dynamic)
    op = _add(model, T.SHAPE, [x, model.add_constant(np.int32([int(Precision.INT32)]))])
    assert fold_operation(op) is None


def test_fill_like_of_known_dims_folds_to_the_value():
    model, x = _model_with_input((2, 3))
    op = _add(model, T.FILL_LIKE, [x, model.add_constant(np.float32([1.5]))])
    (value,) = fold_operation(op)
    np.testing.assert_array_equal(value, np.full((2, 3), 1.5, np.float32))


def test_prior_box_folds_from_the_spatial_dims_alone():
    from nnadapter_bridge.conformance.harness import Const, build_op

    feature = np.zeros((1, 8, 3, 4), np.float32)
    image = np.zeros((1, 3, 24, 32), np.float32)
    model, _ = build_op(T.PRIOR_BOX, [feature, image, Const(np.float32([4.0])), None, Const(np.float32([2.0])),
                                      Const(np.float32([0.1, 0.1, 0.2, 0.2])), False, True, 0.0, 0.0, 0.5, False],
                        n_outputs=2)
    (op,) = model.operations
    for operand in op.inputs[:2]:
        operand.type.dims = (UNKNOWN, UNKNOWN) + tuple(operand.type.dims[2:])  # batch and channels never read
    boxes, variances = fold_operation(op)
    assert boxes.shape == (3, 4, 2, 4) and variances.shape == (3, 4, 2, 4)


@pytest.mark.parametrize("type, a, b, want", [
    (T.MUL, np.int32([6]), np.int32([7]), np.int32([42])),
    (T.FLOOR_DIV, np.int64([17]), np.int64([4]), np.int64([4])),
    (T.ADD, np.float32([0.25]), np.float32([0.5]), np.float32([0.75])),
], ids=["mul", "floor_div", "add"])
def test_arithmetic_on_constants_folds(type, a, b, want):
    model = Model()
    op = _add(model, type, [model.add_constant(a), model.add_constant(b),
                            model.add_constant(np.int32([int(FuseCode.FUSED_NONE)]))])
    (value,) = fold_operation(op)
    np.testing.assert_array_equal(value, want)
    assert value.dtype == want.dtype


def test_slice_cast_concat_gather_chain_folds():
    model = Model()
    shape = model.add_constant(np.int64([2, 3, 16, 24]))
    i32 = model.add_constant(np.int32([0]))
    sliced = _add(model, T.SLICE, [shape, i32, model.add_constant(np.int64([2])), model.add_constant(np.int64([4])),
                                   None])
    (hw,) = fold_operation(sliced)
    np.testing.assert_array_equal(hw, [16, 24])
    cast = _add(model, T.CAST, [model.add_constant(hw), model.add_constant(np.int32([int(Precision.FLOAT32)]))])
    (as_float,) = fold_operation(cast)
    assert as_float.dtype == np.float32
    concat = _add(model, T.CONCAT, [model.add_constant(np.int64([1])), model.add_constant(hw), i32])
    (joined,) = fold_operation(concat)
    np.testing.assert_array_equal(joined, [1, 16, 24])
    gather = _add(model, T.GATHER, [model.add_constant(joined), model.add_constant(np.int32([2, 1])), i32])
    (picked,) = fold_operation(gather)
    np.testing.assert_array_equal(picked, [24, 16])


def test_a_run_time_input_does_not_fold():
    model, x = _model_with_input((2,), Precision.INT32)
    op = _add(model, T.ADD, [x, model.add_constant(np.int32([1])), model.add_constant(np.int32([0]))])
    assert fold_operation(op) is None


def test_a_large_output_keeps_its_operation_with_known_dims():
    model = Model()
    side = int(np.sqrt(EAGER_FOLD_MAX_ELEMENTS)) + 1
    op = _add(model, T.FILL, [model.add_constant(np.int32([side, side])), model.add_constant(np.float32([0.5]))])
    assert op.outputs[0].type.dims == (side, side)
    assert fold_operation(op) is None
    assert fold_operation(op, max_elements=side * side) is not None


def test_quantized_constants_do_not_fold():
    model = Model()
    weights = model.add_constant(np.int8([[4, -8]]), Precision.QUANT_INT8_SYMM_PER_LAYER, scale=0.25)
    op = _add(model, T.DEQUANTIZE, [weights])
    assert fold_operation(op) is None
    transposed = _add(model, T.TRANSPOSE, [weights, model.add_constant(np.int32([1, 0]))])
    assert fold_operation(transposed) is None


def test_a_reference_rejection_leaves_the_operation():
    model = Model()
    values = model.add_constant(np.int32([3]))
    op = _add(model, T.GATHER, [values, model.add_constant(np.int32([5])), model.add_constant(np.int32([0]))])
    assert fold_operation(op) is None  # index 5 of a length-1 tensor: run time reports it


def test_replace_with_constants_and_drop_unused_operands():
    model, x = _model_with_input((2, 3))
    shape = _add(model, T.SHAPE, [x, model.add_constant(np.int32([int(Precision.INT32)]))])
    relu = _add(model, T.RELU, [x])
    values = fold_operation(shape)
    model.replace_with_constants(shape, values)
    assert model.operations == [relu] and relu.index == 0
    folded = shape.outputs[0]
    assert folded.is_constant and folded.type.lifetime == Lifetime.CONSTANT_COPY
    np.testing.assert_array_equal(folded.value, [2, 3])
    before = len(model.operands)
    removed = model.drop_unused_operands(keep=[x, relu.outputs[0]])
    assert removed == 2  # the SHAPE's dtype parameter and its unread result
    assert len(model.operands) == before - 2
    assert [o.index for o in model.operands] == list(range(len(model.operands)))
    assert x in model.operands and relu.outputs[0] in model.operands


def test_replace_with_constants_refuses_values_of_another_shape():
    model, x = _model_with_input((2, 3))
    op = _add(model, T.SHAPE, [x, model.add_constant(np.int32([int(Precision.INT32)]))])
    with pytest.raises(OperationError, match="the value is int32"):
        model.replace_with_constants(op, [np.int32([2, 3, 4])])
    assert model.operations == [op]


def test_concat_of_0d_inputs_is_refused_with_the_fix():
    """CONCAT joins along an axis: 0-d parts (a size list of shape elements) must be reshaped to [1] first,
    as the converters do; the rule says so instead of inferring a 0-d result numpy cannot compute."""
    model = Model()
    parts = [model.add_constant(np.asarray(np.int32(4))), model.add_constant(np.asarray(np.int32(6)))]
    with pytest.raises(OperationError, match=r"0-d inputs have no axis to join along \(reshape them to \[1\]"):
        _add(model, T.CONCAT, [*parts, model.add_constant(np.int32([0]))])
