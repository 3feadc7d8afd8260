"""Operation's readers of its inputs: `input(i)` for an input the signature requires (the operand, or an
OperationError naming the operation when it is absent) and `input_value(i)` (a constant's value, None when
the input is absent, computed at run time or past the end)."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import Lifetime, OperationType, Precision
from nnadapter_bridge.nnadapter.types import Operand, OperandType, Operation


def _operands():
    x = Operand(OperandType(Precision.FLOAT32, dims=(2,), lifetime=Lifetime.MODEL_INPUT), name="x", index=0)
    axis = Operand(OperandType(Precision.INT32, dims=(1,), lifetime=Lifetime.CONSTANT_COPY),
                   np.array([0], np.int32), name="axis", index=1)
    out = Operand(OperandType(Precision.FLOAT32, dims=(2,)), name="out", index=2)
    return x, axis, out


def test_input_returns_the_operand_that_is_there():
    x, axis, out = _operands()
    op = Operation(OperationType.CUM_SUM, [x, axis, None, None], [out], index=3)
    assert op.input(0) is x
    assert op.input(1) is axis


def test_input_names_the_operation_when_the_operand_is_absent():
    x, axis, out = _operands()
    op = Operation(OperationType.CUM_SUM, [x, axis, None, None], [out], index=3)
    with pytest.raises(OperationError, match=r"CUM_SUM#3: input 2 is required"):
        op.input(2)


def test_input_value_is_the_constant_or_none():
    x, axis, out = _operands()
    op = Operation(OperationType.CUM_SUM, [x, axis, None], [out], index=3)
    assert op.input_value(1).tolist() == [0]
    assert op.input_value(0) is None  # a model input: known at run time only
    assert op.input_value(2) is None  # absent
    assert op.input_value(7) is None  # past the end
