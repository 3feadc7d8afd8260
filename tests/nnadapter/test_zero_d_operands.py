"""0-d operands in the standard: a 0-d ndarray constant stays 0-d (a Python scalar is a [1] parameter), axis
-1 and 0 both name a 0-d tensor's one element (Paddle takes either on a 0-d input), and a 0-d constant
broadcasts next to any operand."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.operations.common import normalize_axis
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.types import OperandType


def test_add_constant_keeps_a_0d_array_and_makes_a_scalar_shape_1():
    model = Model()
    assert model.add_constant(np.asarray(2.5, np.float32)).type.dims == ()
    assert model.add_constant(2.5).type.dims == (1,)
    assert model.add_constant(np.float32(2.5)).type.dims == (1,)
    assert model.add_constant(np.int32(3)).type.dims == (1,)


@pytest.mark.parametrize("axis", [-1, 0])
def test_normalize_axis_of_rank_0(axis):
    assert normalize_axis(axis, 0) == 0


@pytest.mark.parametrize("axis", [1, -2])
def test_normalize_axis_of_rank_0_out_of_range(axis):
    with pytest.raises(OperationError, match="out of range for rank 0"):
        normalize_axis(axis, 0)


@pytest.mark.parametrize("rank, axis, want", [(1, -1, 0), (3, -1, 2), (3, 0, 0), (3, -3, 0)])
def test_normalize_axis_of_other_ranks_unchanged(rank, axis, want):
    assert normalize_axis(axis, rank) == want


@pytest.mark.parametrize("operation, want", [(T.SOFTMAX, 1.0), (T.LOG_SOFTMAX, 0.0)])
def test_softmax_of_a_0d_operand_with_axis_minus_1(operation, want):
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=()), "x")
    out = model.add_output("out")
    model.add_operation(operation, [x, model.add_constant(np.int32(-1))], [out])
    assert out.type.dims == ()
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    (got,) = run_model(model, [np.asarray(0.3, np.float32)])
    assert got.shape == () and got == np.float32(want)


@pytest.mark.parametrize("dims", [(), (3,), (2, 3)])
def test_a_0d_constant_broadcasts_to_any_operand(dims):
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=dims), "x")
    out = model.add_output("out")
    model.add_operation(T.MUL, [x, model.add_constant(np.asarray(2.0, np.float32)), model.add_constant(np.int32(0))],
                        [out])
    assert out.type.dims == dims
