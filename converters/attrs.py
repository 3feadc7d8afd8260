"""What converters and checks of several families read beyond the op view: attributes Paddle also accepts
as tensors (and the checks that keep an op on the host when such a tensor is only known at run time),
whether dims are known at conversion time, a var's precision or dims before it is converted, the float
parameters (biases, scales) that go with an input's precision, and the element-type attributes NNAdapter holds.

Checks run with a context during conversion; during partitioning there may be none (ctx is None).

Imports op_view, the standard and errors only.
"""
from __future__ import annotations

import numpy as np

from converters.op_view import VARTYPE_PRECISIONS, OpView
from nnadapter_bridge.errors import BridgeError, ConversionError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision, dtype_precision, precision_dtype
from nnadapter_bridge.nnadapter.types import Operand


def known_dim(d) -> bool:
    return d != UNKNOWN and d >= 0


def known_dims(dims) -> bool:
    return all(known_dim(d) for d in dims)


def input_dims(ctx, op, slot: str) -> tuple | None:
    """Dims of the op's first `slot` input, or None when it has no operand yet (check before conversion)."""
    name = OpView(op).optional_input(slot)
    if name is None or not ctx.has(name):
        return None
    return tuple(ctx.dims(name))


def var_precision(ctx, name: str | None) -> Precision | None:
    """The precision of var `name` when it is already known (an operand or a declared var), else None."""
    if ctx is None or not name:
        return None
    try:
        if ctx.has(name):
            return ctx.input(name).type.precision
    except ConversionError:  # an unmapped var: fall back to the program's declaration
        pass
    graph = getattr(ctx, "graph", None)
    if graph is None:
        return None
    try:
        dtype = graph.var(name, getattr(ctx, "block", 0)).dtype
        return dtype_precision(dtype) if dtype is not None else None
    except (BridgeError, KeyError, ValueError):  # undeclared var, or a dtype with no NNAdapter precision
        return None


def runtime_inputs(op, ctx, *slots) -> list:
    """Vars in `slots` whose values exist only at run time (not parameters, nor constants computed at
    conversion: a shape the subgraph's input dims fix)."""
    known = (lambda name: ctx.constant_value(name) is not None) if ctx is not None else (lambda name: False)
    view = OpView(op)
    return [name for slot in slots for name in view.inputs(slot) if not known(name)]


def needs_constant(*slots, what: str = ""):
    """A check: the tensor forms in `slots` must be parameters, since the emitted operation needs constants."""

    def check(op, ctx):
        late = runtime_inputs(op, ctx, *slots)
        if late:
            view = OpView(op)
            slot = next(s for s in slots if set(view.inputs(s)) & set(late))
            return (f"'{slot}' ({', '.join(late)}) is computed at run time, but {what or 'the emitted operation'} "
                    "needs it as a constant")
        return None

    return check


def scalar_attr_or_tensor(ctx, op, attr: str, slot: str, default: int) -> int:
    """An int attr that may also come as a one-element tensor in `slot` (whose value must be known now)."""
    view = OpView(op)
    name = view.optional_input(slot)
    if name is not None:
        value = ctx.constant_value(name)
        if value is None:
            raise ctx.error(f"'{slot}' ({name}) is computed at run time; its value is needed now")
        return int(np.asarray(value).reshape(-1)[0])
    return view.attr_int(attr, default)


# -- parameters ------------------------------------------------------------------------------------------

def param_float(like: Operand | None) -> Precision:
    """The precision of a float parameter that goes with `like`: float64 for a float64 input (Paddle's
    double kernels take double parameters), float32 otherwise (float32, float16 and quantized inputs)."""
    return Precision.FLOAT64 if like is not None and like.type.precision == Precision.FLOAT64 else Precision.FLOAT32


def float_param_const(ctx, value: np.ndarray, like: Operand | None, name: str):
    precision = param_float(like)
    return ctx.const(np.asarray(value).astype(precision_dtype(precision)), precision, name=name)


def bias_vector(ctx, op, slot: str, size: int, like_name: str, like: Operand | None = None):
    """The op's bias as a 1-D operand of `size` values (a zero constant when the slot is empty), in the
    float precision that goes with the input `like`."""
    v = OpView(op)
    name = v.optional_input(slot)
    if name is None:
        return float_param_const(ctx, np.zeros(size), like, f"{like_name}/zero_bias")
    if ctx.is_param(name):
        return float_param_const(ctx, ctx.param(name).reshape(-1), like, name)
    return ctx.input(name)


def check_dtype_attr(op, attr: str, default: int, allow_same: bool = False) -> str | None:
    """Why the op's element-type attribute `attr` cannot be expressed (None when it can; -1 is "same as the
    input" when `allow_same`)."""
    v = OpView(op)
    code = v.attr(attr, default)
    if allow_same and int(code) == -1:
        return None
    if int(code) not in VARTYPE_PRECISIONS:
        return f"{attr} {code} is not a Paddle element type NNAdapter can hold"
    return None
