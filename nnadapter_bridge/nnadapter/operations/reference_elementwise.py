"""Reference semantics (numpy) of the elementwise operations: binary arithmetic, comparisons, logic, unary
math, activations.

Quantized operands arrive dequantized (float32) and leave requantized through the registry, so every
function here is written for float32, integer or bool arrays. Float results are computed in float32, or
in float64 where a composite formula would otherwise accumulate rounding, and always returned in the
input's dtype.
"""
from __future__ import annotations

from functools import reduce

import numpy as np

from nnadapter_bridge.nnadapter.codes import FuseCode, OperationType as T, Precision, precision_dtype
from nnadapter_bridge.nnadapter.operations.registry import reference


def _scalar(array):
    """The single value of a shape-[1] parameter operand, as a numpy scalar of its dtype."""
    return np.asarray(array).reshape(-1)[0]


def apply_fuse_code(x: np.ndarray, fuse_code, in_place: bool = False) -> np.ndarray:
    """The fused activation of `fuse_code` applied to x. `in_place=True` clamps x itself, for callers
    whose x is a result they just computed (never an input array: that would change the caller's data)."""
    code = FuseCode(int(_scalar(fuse_code)))
    if code == FuseCode.FUSED_NONE:
        return x
    low, high = {FuseCode.FUSED_RELU: (0, None), FuseCode.FUSED_RELU1: (-1, 1), FuseCode.FUSED_RELU6: (0, 6)}[code]
    if in_place and x.flags.writeable and x.ndim:
        if high is None:
            return np.maximum(x, low, out=x)
        return np.clip(x, low, high, out=x)
    if high is None:
        return np.maximum(x, low).astype(x.dtype, copy=False)
    return np.clip(x, low, high).astype(x.dtype, copy=False)


def _like(result, x: np.ndarray) -> np.ndarray:
    """`result` in x's dtype (float64 intermediates back to float32, numpy scalars back to arrays)."""
    return np.asarray(result).astype(x.dtype, copy=False)


# -- binary arithmetic ---------------------------------------------------------------------------------

def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _truncating_divide(a, b):
    """Integer division rounded toward zero, as C (Paddle's integer elementwise_div kernels)."""
    quotient = np.floor_divide(a, b)
    remainder = np.remainder(a, b)
    # floor and truncation differ only for inexact quotients of opposite-signed operands.
    inexact_negative = (remainder != 0) & ((a < 0) != (b < 0))
    return quotient + inexact_negative.astype(quotient.dtype)


def _divide(a, b):
    if _is_int(a):
        return _truncating_divide(a, b)
    return np.divide(a, b)


def _integer_power(a, b):
    """Exact integer power; a negative exponent gives C's truncation of 1 / a^|b|: 1 and -1 keep
    their magnitude, every other base gives 0 (as paddle.pow on integer tensors)."""
    result = np.power(a, np.maximum(b, 0))
    negative = b < 0
    if np.any(negative):
        odd = (np.abs(b) % 2) == 1
        reciprocal = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(result.dtype)
        result = np.where(negative, reciprocal, result)
    return result


def _power(a, b):
    if _is_int(a):
        return _integer_power(a, b)
    return np.power(a, b)


_ARITHMETIC = {
    T.ADD: np.add,
    T.SUB: np.subtract,
    T.MUL: np.multiply,
    T.DIV: _divide,
    T.MAX: np.maximum,
    T.MIN: np.minimum,
    T.POW: _power,
    # numpy's floor_divide is paddle.floor_divide for floats (floor of the exact quotient, computed via
    # fmod) and for integers (floor, not truncation); a plain floor(a / b) can be off by one.
    T.FLOOR_DIV: np.floor_divide,
}


def _register_arithmetic(type, fn):
    def run(op, inputs):
        a, b, fuse = inputs
        # Division by zero and overflow follow IEEE / wrap-around like the C kernels; no warnings.
        with np.errstate(all="ignore"):
            out = fn(a, b)
        # `out` is a fresh result (never a or b), so the activation may clamp it in place.
        return [apply_fuse_code(_like(out, a), fuse, in_place=out is not a and out is not b)]

    run.__name__ = type.name.lower()
    reference(type)(run)


for _type, _fn in _ARITHMETIC.items():
    _register_arithmetic(_type, _fn)


@reference(T.SUM)
def sum_inputs(op, inputs):
    return [_like(reduce(np.add, inputs), inputs[0])]


# -- comparisons and logic ---------------------------------------------------------------------------

_TO_BOOL = {
    T.EQUAL: np.equal,
    T.NOT_EQUAL: np.not_equal,
    T.GREATER: np.greater,
    T.GREATER_EQUAL: np.greater_equal,
    T.LESS: np.less,
    T.LESS_EQUAL: np.less_equal,
    T.AND: np.logical_and,
    T.OR: np.logical_or,
    T.XOR: np.logical_xor,
}


def _register_to_bool(type, fn):
    def run(op, inputs):
        a, b = inputs
        return [np.asarray(fn(a, b), dtype=np.bool_)]

    run.__name__ = type.name.lower()
    reference(type)(run)


for _type, _fn in _TO_BOOL.items():
    _register_to_bool(_type, _fn)


@reference(T.NOT)
def logical_not(op, inputs):
    return [np.logical_not(inputs[0])]


@reference(T.WHERE)
def where(op, inputs):
    condition, a, b = inputs
    return [_like(np.where(condition, a, b), a)]


# -- unary math ------------------------------------------------------------------------------------------

def _sigmoid64(x):
    # In float64 exp(-x) overflows only past |x| ~ 709, far outside float32 inputs that matter.
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


_UNARY = {
    T.ABS: np.abs,
    T.COS: np.cos,
    T.EXP: np.exp,
    T.FLOOR: np.floor,
    T.LOG: np.log,
    T.RELU: lambda x: np.maximum(x, 0),
    T.RELU6: lambda x: np.minimum(np.maximum(x, 0), 6),
    T.RSQRT: lambda x: 1.0 / np.sqrt(x.astype(np.float64)),
    T.SIGMOID: _sigmoid64,
    T.SIN: np.sin,
    T.SQUARE: np.square,
    T.SWISH: lambda x: x.astype(np.float64) * _sigmoid64(x),
    T.TANH: np.tanh,
    T.ASSIGN: np.copy,
}


def _register_unary(type, fn):
    def run(op, inputs):
        x = inputs[0]
        # log/rsqrt of negatives and zero give NaN/inf like the reference; no warnings.
        with np.errstate(all="ignore"):
            return [_like(fn(x), x)]

    run.__name__ = type.name.lower()
    reference(type)(run)


for _type, _fn in _UNARY.items():
    _register_unary(_type, _fn)


@reference(T.CAST)
def cast(op, inputs):
    x, code = inputs
    target = precision_dtype(Precision(int(_scalar(code))))
    if x.dtype.kind == "f" and target.kind in "iu":
        # Float to integer truncates toward zero, then wraps modulo 2^bits like a C cast through int64
        # (paddle.cast(-1.5, uint8) == 255); NaN/inf have no defined result.
        with np.errstate(invalid="ignore"):
            return [np.trunc(x).astype(np.int64).astype(target)]
    if target.kind == "b":
        return [x != 0]
    return [x.astype(target)]


# -- activations with parameters ---------------------------------------------------------------------------

@reference(T.CLIP)
def clip(op, inputs):
    x, low, high = inputs
    low = _scalar(low).astype(x.dtype)
    high = _scalar(high).astype(x.dtype)
    # min(max(x, low), high) as the spec writes it: when low > high every element becomes high.
    return [_like(np.minimum(np.maximum(x, low), high), x)]


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
    if approximate is not None and bool(_scalar(approximate)):
        out = 0.5 * x64 * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x64 + 0.044715 * x64 ** 3)))
    else:
        out = 0.5 * x64 * (1.0 + erf(x64 / np.sqrt(2.0)))
    return [_like(out, x)]


def _hard_sigmoid64(x, alpha, beta):
    return np.clip(float(_scalar(alpha)) * x.astype(np.float64) + float(_scalar(beta)), 0.0, 1.0)


@reference(T.HARD_SIGMOID)
def hard_sigmoid(op, inputs):
    x, alpha, beta = inputs
    return [_like(_hard_sigmoid64(x, alpha, beta), x)]


@reference(T.HARD_SWISH)
def hard_swish(op, inputs):
    x, alpha, beta = inputs
    return [_like(x.astype(np.float64) * _hard_sigmoid64(x, alpha, beta), x)]


@reference(T.LEAKY_RELU)
def leaky_relu(op, inputs):
    x, alpha = inputs
    return [_like(np.where(x >= 0, x, x * _scalar(alpha).astype(x.dtype)), x)]


@reference(T.PRELU)
def prelu(op, inputs):
    x, slope = inputs
    slope = np.asarray(slope, dtype=x.dtype).reshape(-1)
    if slope.size > 1:
        # One slope per channel on axis 1 (NCHW): shape it [1, C, 1, ...] to broadcast.
        slope = slope.reshape((1, -1) + (1,) * (x.ndim - 2))
    else:
        slope = slope.reshape(())
    return [_like(np.where(x >= 0, x, x * slope), x)]


@reference(T.SOFTPLUS)
def softplus(op, inputs):
    x, beta, threshold = inputs
    beta = float(_scalar(beta))
    threshold = float(_scalar(threshold))
    scaled = beta * x.astype(np.float64)
    # logaddexp(0, t) = log(1 + e^t) without overflow for large t or loss for very negative t.
    smooth = np.logaddexp(0.0, scaled) / beta
    return [_like(np.where(scaled > threshold, x, smooth), x)]
