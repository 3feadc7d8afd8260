"""The elementwise unary operations and the softmaxes: math and parameterless activations (ABS, COS, EXP,
FLOOR, LOG, RELU, RELU6, RSQRT, SIGMOID, SIN, SQUARE, SWISH, TANH), ASSIGN, CAST, the activations with
parameters (CLIP, GELU, HARD_SIGMOID, HARD_SWISH, LEAKY_RELU, PRELU, SOFTPLUS), SOFTMAX and LOG_SOFTMAX;
signatures, shape inference and numpy references.

The output has the input's shape. Where the spec appendix is known to be wrong (SOFTPLUS lists an
`alpha`; nnadapter.h has `beta`, `threshold`) the header's order is used; ASSIGN accepts the integer
types Paddle models route through it. Quantized operands reach the references dequantized (float32).
Float results are computed in float32, or in float64 for float64 inputs and where a composite formula would
otherwise accumulate rounding, and always returned in the input's dtype. ABS and SQUARE take int32/int64 as
Paddle's kernels do.

NaN, infinities and overflow follow Paddle's CPU kernels (checked against Paddle 3.3.1): RELU is
`x > 0 ? x : 0`, so NaN gives 0 (the other clamps propagate NaN); float32 exact GELU forms
x * (1 + erf(x / sqrt2)) and HARD_SWISH forms min(max(x + offset, 0), threshold) * x before scaling, so
a huge input overflows to inf there; SOFTMAX and LOG_SOFTMAX clip the max-shifted input at -64.

Entry points: its registrations (read through `registry.OPERATIONS` / `REFERENCES`); `erf`, which the host's
activation kernels share. Imports only `registry`, `common`, the standard's codes and types and `errors`: never the
model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.errors import OperationError
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision, precision_dtype
from nnadapter_bridge.nnadapter.operations.common import (
    as_compute_float,
    const_int,
    first_value,
    in_dtype_of,
    known,
    normalize_axis,
    param_int,
    result_type,
    same_as_input,
)
from nnadapter_bridge.nnadapter.operations.registry import (
    BOOL,
    DATA_MOVEMENT,
    FLOATS,
    FLOATS_Q8,
    INT32,
    INT32_64,
    Slot,
    operation,
    reference,
)

_CASTABLE = frozenset({
    Precision.BOOL8, Precision.INT8, Precision.UINT8, Precision.INT16, Precision.INT32, Precision.INT64,
    Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64,
})
_ASSIGNABLE = DATA_MOVEMENT


# -- unary math and parameterless activations ----------------------------------------------------------

def _register_unary_signature(type, formula, precisions=FLOATS_Q8):
    def prepare(op):
        return [same_as_input(op)]

    prepare.__doc__ = f"{formula}; output has the input's type and shape."
    prepare.__name__ = f"prepare_{type.name.lower()}"
    operation(type, inputs=[Slot("input", precisions)], outputs=[Slot("output")])(prepare)


for _type, _formula in [
    (T.ABS, "abs(input)"),
    (T.COS, "cos(input)"),
    (T.EXP, "e ^ input"),
    (T.FLOOR, "floor(input)"),
    (T.LOG, "ln(input)"),
    (T.RELU, "max(0, input)"),
    (T.RELU6, "min(6, max(0, input))"),
    (T.RSQRT, "1 / sqrt(input)"),
    (T.SIGMOID, "1 / (1 + e ^ -input)"),
    (T.SIN, "sin(input)"),
    (T.SQUARE, "input ^ 2"),
    (T.SWISH, "input / (1 + e ^ -input)"),
    (T.TANH, "tanh(input)"),
]:
    # Paddle's abs and square kernels take int32/int64 too; the other math kernels take floats only.
    _register_unary_signature(_type, _formula,
                              FLOATS_Q8 | INT32_64 if _type in (T.ABS, T.SQUARE) else FLOATS_Q8)

_register_unary_signature(T.ASSIGN, "a copy of input", _ASSIGNABLE)


def _sigmoid64(x):
    # In float64 exp(-x) overflows only past |x| ~ 709, far outside float32 inputs that matter.
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


_UNARY = {
    T.ABS: np.abs,
    T.COS: np.cos,
    T.EXP: np.exp,
    T.FLOOR: np.floor,
    T.LOG: np.log,
    # Paddle's CPU relu is `x > 0 ? x : 0`: NaN gives 0.
    T.RELU: lambda x: np.where(x > 0, x, np.zeros((), x.dtype)),
    T.RELU6: lambda x: np.minimum(np.maximum(x, 0), 6),
    T.RSQRT: lambda x: 1.0 / np.sqrt(x.astype(np.float64)),
    T.SIGMOID: _sigmoid64,
    T.SIN: np.sin,
    T.SQUARE: np.square,
    T.SWISH: lambda x: x.astype(np.float64) * _sigmoid64(x),
    T.TANH: np.tanh,
    T.ASSIGN: np.copy,
}


def _register_unary_reference(type, fn):
    def run(op, inputs):
        x = inputs[0]
        # log/rsqrt of negatives and zero give NaN/inf like the reference; no warnings.
        with np.errstate(all="ignore"):
            return [in_dtype_of(fn(x), x)]

    run.__name__ = type.name.lower()
    reference(type)(run)


for _type, _fn in _UNARY.items():
    _register_unary_reference(_type, _fn)


# -- conversions -----------------------------------------------------------------------------------------

@operation(T.CAST, inputs=[Slot("input", _CASTABLE), Slot("dtype", INT32)], outputs=[Slot("output")])
def prepare_cast(op):
    """input converted to the precision code given by the constant `dtype`; the input's shape."""
    code = const_int(op, 1)
    if code is None:
        raise OperationError(f"{op.type.name}: dtype must be a constant INT32 precision code")
    allowed = {int(p) for p in _CASTABLE}
    if code not in allowed:
        names = ", ".join(p.name for p in sorted(_CASTABLE, key=int))
        raise OperationError(f"{op.type.name}: dtype {code} is not a supported target precision ({names})")
    return [result_type(op.inputs[0].type, precision=Precision(code))]


def float_to_integer(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Paddle's `static_cast<T>(float)` on x86: truncation toward zero by cvttss2si/cvttsd2si into int32 (int64
    for 64-bit targets); NaN, +-inf and values outside that range give the "integer indefinite" INT_MIN; a
    narrower target keeps the low bits (paddle.cast(-1.5, uint8) == 255, paddle.cast(3e9, int32) == INT_MIN)."""
    wide = np.dtype(np.int64 if target.itemsize == 8 else np.int32)
    lowest = np.iinfo(wide).min
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(np.float32) if x.dtype == np.float16 else x)
        valid = (t >= lowest) & (t < -float(lowest))  # False for NaN
        ints = np.where(valid, t, 0).astype(wide)
    return np.where(valid, ints, wide.type(lowest)).astype(target)


@reference(T.CAST)
def cast(op, inputs):
    x, code = inputs
    target = precision_dtype(Precision(int(first_value(code))))
    if x.dtype.kind == "f" and target.kind in "iu":
        return [float_to_integer(x, target)]
    if target.kind == "b":
        return [x != 0]
    return [x.astype(target)]


# -- activations with parameters ---------------------------------------------------------------------

@operation(T.CLIP, inputs=[Slot("input", FLOATS_Q8), Slot("min", FLOATS_Q8), Slot("max", FLOATS_Q8)],
           outputs=[Slot("output")])
def prepare_clip(op):
    """min(max(input, min), max); output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.GELU, inputs=[Slot("input", FLOATS_Q8), Slot("approximate", BOOL)], outputs=[Slot("output")])
def prepare_gelu(op):
    """input * Phi(input) (erf form), or its tanh approximation when `approximate` is true."""
    return [same_as_input(op)]


@operation(T.HARD_SIGMOID, inputs=[Slot("input", FLOATS_Q8), Slot("alpha", FLOATS), Slot("beta", FLOATS)],
           outputs=[Slot("output")])
def prepare_hard_sigmoid(op):
    """max(0, min(1, alpha * input + beta)); output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.HARD_SWISH, inputs=[Slot("input", FLOATS_Q8), Slot("alpha", FLOATS), Slot("beta", FLOATS)],
           outputs=[Slot("output")])
def prepare_hard_swish(op):
    """input * max(0, min(1, alpha * input + beta)); output has the input's type and shape."""
    return [same_as_input(op)]


@operation(T.LEAKY_RELU, inputs=[Slot("input", FLOATS_Q8), Slot("alpha", FLOATS)], outputs=[Slot("output")])
def prepare_leaky_relu(op):
    """input if input >= 0 else alpha * input; output has the input's type and shape."""
    return [same_as_input(op)]


def _validate_prelu(op):
    slope = op.inputs[1].type
    if slope.rank != 1 or not known(slope.dims[0]):
        raise OperationError(f"{op.type.name}: slope must have shape [1] or [C], got {slope.describe()}")
    count = slope.dims[0]
    if count == 1:
        return
    data = op.inputs[0].type
    if data.rank < 2:
        raise OperationError(f"{op.type.name}: a per-channel slope of {count} values needs an input of rank >= 2 "
                             f"(channels on axis 1), got {data.describe()}")
    if known(data.dims[1]) and data.dims[1] != count:
        raise OperationError(f"{op.type.name}: slope has {count} values but the input {data.describe()} "
                             f"has {data.dims[1]} channels on axis 1")


@operation(T.PRELU, inputs=[Slot("input", FLOATS_Q8), Slot("slope", FLOATS)], outputs=[Slot("output")],
           validate=_validate_prelu)
def prepare_prelu(op):
    """input if input >= 0 else slope * input, slope shared ([1]) or per channel on axis 1 ([C])."""
    return [same_as_input(op)]


@operation(T.SOFTPLUS, inputs=[Slot("input", FLOATS_Q8), Slot("beta", FLOATS), Slot("threshold", FLOATS)],
           outputs=[Slot("output")])
def prepare_softplus(op):
    """log(1 + e ^ (beta * input)) / beta, or input where beta * input > threshold."""
    return [same_as_input(op)]


@reference(T.CLIP)
def clip(op, inputs):
    x, low, high = inputs
    low = first_value(low).astype(x.dtype)
    high = first_value(high).astype(x.dtype)
    # min(max(x, low), high) as the spec writes it: when low > high every element becomes high.
    return [in_dtype_of(np.minimum(np.maximum(x, low), high), x)]


# erf(z) = 2/sqrt(pi) * exp(-z^2) * sum_n 2^n z^(2n+1) / (1*3*...*(2n+1)). Every term is positive, so the
# sum has no cancellation and is accurate to a few float64 ulps for all |z|; beyond |z| = 6 erf is 1 to
# float64 precision. The term ratio 2 z^2 / (2n+3) falls below 1 after n ~ z^2, so 160 terms suffice at 6.
_ERF_SATURATION = 6.0
_ERF_MAX_TERMS = 160


def erf(z: np.ndarray) -> np.ndarray:
    """The error function in float64, vectorized (numpy has none and scipy is not a dependency)."""
    z = np.asarray(z, dtype=np.float64)
    a = np.minimum(np.abs(z), _ERF_SATURATION)
    a2 = a * a
    term = a.copy()
    total = a.copy()
    for n in range(1, _ERF_MAX_TERMS):
        term *= 2.0 * a2 / (2 * n + 1)
        total += term
        if not np.any(term > 1e-17 * total):
            break
    magnitude = np.minimum(2.0 / np.sqrt(np.pi) * np.exp(-a2) * total, 1.0)
    return np.copysign(magnitude, z)


_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)


@reference(T.GELU)
def gelu(op, inputs):
    x, approximate = inputs
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # -inf * 0 is NaN, as Paddle gives it: no warning
        if approximate is not None and bool(first_value(approximate)):
            out = 0.5 * x64 * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x64 + 0.044715 * x64 ** 3)))
        else:
            doubled = x64 * (1.0 + erf(x64 / np.sqrt(2.0)))
            # Paddle forms x * (1 + erf(x / sqrt2)) in the input's type before halving: past half the
            # type's maximum it overflows to inf.
            out = 0.5 * _overflowing(doubled, x.dtype)
    return [in_dtype_of(out, x)]


def _overflowing(values64, dtype):
    """float64 `values64` as the input's float type would hold them: beyond its range, +-inf."""
    if np.dtype(dtype).kind != "f" or np.dtype(dtype) == np.float64:
        return values64
    limit = float(np.finfo(dtype).max)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(values64) > limit, np.copysign(np.inf, values64), values64)


def _hard_sigmoid64(x, alpha, beta):
    return np.clip(float(first_value(alpha)) * x.astype(np.float64) + float(first_value(beta)), 0.0, 1.0)


@reference(T.HARD_SIGMOID)
def hard_sigmoid(op, inputs):
    x, alpha, beta = inputs
    return [in_dtype_of(_hard_sigmoid64(x, alpha, beta), x)]


@reference(T.HARD_SWISH)
def hard_swish(op, inputs):
    x, alpha, beta = inputs
    gate = _hard_sigmoid64(x, alpha, beta)
    # Paddle computes min(max(x + offset, 0), threshold) * x (threshold = 1 / alpha) before dividing by
    # the scale, so a float32 product past FLT_MAX is inf.
    alpha = float(first_value(alpha))
    with np.errstate(all="ignore"):
        scaled = _overflowing(x.astype(np.float64) * gate / alpha, x.dtype) if alpha != 0 else None
        out = x.astype(np.float64) * gate if scaled is None else scaled * alpha
    return [in_dtype_of(out, x)]


@reference(T.LEAKY_RELU)
def leaky_relu(op, inputs):
    x, alpha = inputs
    return [in_dtype_of(np.where(x >= 0, x, x * first_value(alpha).astype(x.dtype)), x)]


@reference(T.PRELU)
def prelu(op, inputs):
    x, slope = inputs
    slope = np.asarray(slope, dtype=x.dtype).reshape(-1)
    if slope.size > 1:
        # One slope per channel on axis 1 (NCHW): shape it [1, C, 1, ...] to broadcast.
        slope = slope.reshape((1, -1) + (1,) * (x.ndim - 2))
    else:
        slope = slope.reshape(())
    return [in_dtype_of(np.where(x >= 0, x, x * slope), x)]


@reference(T.SOFTPLUS)
def softplus(op, inputs):
    x, beta, threshold = inputs
    beta = float(first_value(beta))
    threshold = float(first_value(threshold))
    # logaddexp(0, t) = log(1 + e^t) without overflow for large t or loss for very negative t; beta = 0 gives
    # inf / NaN as Paddle does, without numpy's warning
    with np.errstate(all="ignore"):
        scaled = beta * x.astype(np.float64)
        smooth = np.logaddexp(0.0, scaled) / beta
    return [in_dtype_of(np.where(scaled > threshold, x, smooth), x)]


# -- softmax ----------------------------------------------------------------------------------------------------
def _softmax_prepare(op):
    normalize_axis(const_int(op, 1, 1), op.inputs[0].type.rank, op)
    return [same_as_input(op)]


@operation(T.SOFTMAX, inputs=[Slot("input", FLOATS_Q8), Slot("axis", INT32, optional=True)], outputs=[Slot("output")])
def prepare_softmax(op):
    """exp(x) / sum(exp(x)) along axis (default 1)."""
    return _softmax_prepare(op)


@operation(T.LOG_SOFTMAX, inputs=[Slot("input", FLOATS_Q8), Slot("axis", INT32, optional=True)],
           outputs=[Slot("output")])
def prepare_log_softmax(op):
    """log(softmax(x)) along axis (default 1)."""
    return _softmax_prepare(op)


# Paddle's softmax kernels clip the max-shifted input from below at -64 (exp(-64) ~ 1.6e-28).
_SHIFT_FLOOR = -64.0


def _shifted(x, axis):
    with np.errstate(invalid="ignore"):
        shifted = x - x.max(axis=axis, keepdims=True)
        return np.where(shifted < _SHIFT_FLOOR, x.dtype.type(_SHIFT_FLOOR), shifted)


@reference(T.SOFTMAX)
def softmax(op, inputs):
    x = as_compute_float(inputs[0])
    axis = param_int(inputs[1] if len(inputs) > 1 else None, 1)
    e = np.exp(_shifted(x, axis))
    e /= e.sum(axis=axis, keepdims=True, dtype=x.dtype)
    return [e]


@reference(T.LOG_SOFTMAX)
def log_softmax(op, inputs):
    x = as_compute_float(inputs[0])
    axis = param_int(inputs[1] if len(inputs) > 1 else None, 1)
    shifted = _shifted(x, axis)
    shifted -= np.log(np.exp(shifted).sum(axis=axis, keepdims=True, dtype=x.dtype))
    return [shifted]
