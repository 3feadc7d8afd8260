"""The NNAdapter standard in Python: codes, OperandType/Operand/Operation, Model, the per-operation
signatures and shape inference (operations/), model serialization, the runtime and the .nnc cache."""
from nnadapter_bridge.nnadapter.codes import (  # noqa: F401
    UNKNOWN,
    AutoPad,
    DeviceType,
    FuseCode,
    InterpolateMode,
    Layout,
    Lifetime,
    OperationType,
    PadMode,
    Precision,
    ResultCode,
)
from nnadapter_bridge.nnadapter.model import Model  # noqa: F401
from nnadapter_bridge.nnadapter.types import Operand, OperandType, Operation  # noqa: F401
