"""Binary elementwise ops with no NNAdapter operation (the standard's elementwise family): the bitwise
ops bitwise_and / or / xor / not and the shifts bitwise_left_shift / bitwise_right_shift (arithmetic or
logical); atan2, lerp, elementwise_fmax / elementwise_fmin (NaN-ignoring max / min), elementwise_heaviside,
elementwise_mod (float remainders), copysign, nextafter, trunc_divide; label_smooth; isclose (and the closeness
test `close_mask` that reduce's allclose shares); the fused binary + unary pairs fused_elemwise_activation and
fused_elemwise_add_activation; add_position_encoding (x plus a sinusoidal position table).

Bitwise: Paddle's CPU kernels take bool, uint8, int8, int16, int32 and int64 (the shifts: the integer types
only) and broadcast the two operands numpy-style; the result keeps the operand dtype. The others take float32
and float64, and int32/int64 for fmax, fmin, heaviside and mod; copysign and trunc_divide also take the other
integer types, nextafter only float32/float64; the result keeps the input dtype.

isclose follows Paddle 3.3.1's CPU kernel, not numpy's: for each pair (a, b) of equal-shaped operands (no
broadcasting) it is true when either is NaN only if `equal_nan` and both are; otherwise when a == b, or
left <= right, or |left - right| <= 1e-15, where left = |a - b| and right = atol + rtol * |b| is computed in double
and stored in the element type (rounded to float32; truncated for allclose's integer types). So inf and -inf are
close (inf <= inf) unless rtol is 0 (0 * inf is NaN). rtol and atol are string attributes ("1e-05"), or the
`Rtol` / `Atol` tensors where a program computes them. isclose takes float32/float64, allclose also int32, int64
and bool.

fused_elemwise_activation (and fused_elemwise_add_activation, the same kernel in Paddle 3.3.1: its name does not
restrict the pair) runs one of the nine pairs Paddle's CPU kernel implements, float32 or float64. `functor_list`
[binary, unary] is Binary(X, Unary(Y)), IntermediateOut = Unary(Y) in Y's dims; [unary, binary] is
Unary(Binary(X, Y)), IntermediateOut = Binary(X, Y) in Out's dims; IntermediateOut is written only with
`save_intermediate_out`. The smaller operand (by element count; Y on a tie) broadcasts into the larger one the
legacy way: its dims, trailing 1s dropped, must equal the larger's dims from `axis` on (-1: aligned at the end);
Out has the larger's dims. The unary functors are Paddle's, clamps included: relu is x * (x > 0) (so relu(-inf)
is NaN), tanh clips 2x to [-40, 13] (tanh of 6.5 or more is 0.9999955, not 1), sigmoid clips x to [-40, 13], gelu
is the tanh approximation, scale multiplies by `scale`; all in the element type.

add_position_encoding: Out = alpha * X + beta * PE for X [batch, seq, enc] (enc even; Paddle takes no other rank),
where PE[j, k] = sin(j / 10000^(k / (half - 1))) for k < half = enc / 2 and the cosine of the same angle for
the k - half of the second half (j / 10000 when half is 1); alpha * X in X's dtype, the sum in float64, rounded
once, as Paddle's kernel does. (A LoD X, sequences of several lengths in one tensor, does not reach the host: its
scope keeps no LoD, so X is read as a padded [batch, seq, enc] tensor.)

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import FLOATS, OpScope, host_kernel, require, slot

_BITWISE_DTYPES = frozenset(np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "int32", "int64"))


_BINARY = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


def slot_value(io: OpScope, *slots: str) -> np.ndarray:
    """The first of `slots` the op fills (the PIR-only shift ops keep their lower-case slot names)."""
    for name in slots:
        if io.has_input(name):
            return io.input(name)
    raise io.error(f"none of the input slots {list(slots)} is filled")


def set_out(io: OpScope, value) -> None:
    io.set_output("Out" if io.has_output("Out") else "out", value)


def check_dtype(io: OpScope, *arrays: np.ndarray, allowed=_BITWISE_DTYPES) -> np.dtype:
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) != 1:
        raise io.error(f"operands must share one dtype, got {sorted(map(str, dtypes))}")
    dtype = dtypes.pop()
    if dtype not in allowed:
        raise io.error(f"Paddle's CPU kernel has no {dtype} form (it takes {sorted(map(str, allowed))})")
    return dtype


@host_kernel(*_BINARY)
def bitwise_binary(io: OpScope) -> None:
    x, y = slot_value(io, "X", "x"), slot_value(io, "Y", "y")
    check_dtype(io, x, y)
    set_out(io, _BINARY[io.op.type](x, y))


@host_kernel("bitwise_not")
def bitwise_not(io: OpScope) -> None:
    x = slot_value(io, "X", "x")
    check_dtype(io, x)
    set_out(io, np.invert(x))


_SHIFT_DTYPES = _BITWISE_DTYPES - {np.dtype(bool)}


def shift_operands(io: OpScope):
    x, y = slot_value(io, "X", "x"), slot_value(io, "Y", "y")
    dtype = check_dtype(io, x, y, allowed=_SHIFT_DTYPES)
    x, y = np.broadcast_arrays(x, y)
    # Paddle's functors treat a shift count outside [0, bits) specially instead of leaving it undefined.
    bits = dtype.itemsize * 8
    out_of_range = (y < 0) | (y >= bits)
    safe_y = np.where(out_of_range, 0, y).astype(dtype)
    return x, safe_y, out_of_range, dtype


@host_kernel("bitwise_left_shift")
def bitwise_left_shift(io: OpScope) -> None:
    x, y, out_of_range, dtype = shift_operands(io)
    # arithmetic and logical left shifts agree; a count out of range gives 0
    set_out(io, np.where(out_of_range, 0, np.left_shift(x, y)).astype(dtype))


@host_kernel("bitwise_right_shift")
def bitwise_right_shift(io: OpScope) -> None:
    x, y, out_of_range, dtype = shift_operands(io)
    if io.attr("is_arithmetic", True):
        # a count out of range keeps only the sign: -1 for a negative value, 0 otherwise
        fill = np.where(x < 0, -1, 0).astype(dtype)
        out = np.where(out_of_range, fill, np.right_shift(x, y))
    else:
        unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
        shifted = np.right_shift(np.ascontiguousarray(x).view(unsigned), y.astype(unsigned)).view(dtype)
        out = np.where(out_of_range, 0, shifted)
    set_out(io, out.astype(dtype))


INTS = frozenset(np.dtype(t) for t in ("uint8", "int8", "int16", "int32", "int64"))


INT32_64 = frozenset(np.dtype(t) for t in ("int32", "int64"))


@host_kernel("atan2")
def atan2(io: OpScope) -> None:
    x1, x2 = io.input("X1"), io.input("X2")
    out = np.arctan2(x1, x2)
    # Paddle computes integer atan2 in float64 and returns float64.
    io.set_output("Out", out if x1.dtype.kind == "f" else out.astype(np.float64))


@host_kernel("lerp")
def lerp(io: OpScope) -> None:
    x, y, weight = io.input("X"), io.input("Y"), io.input("Weight")
    require(io, x, FLOATS)
    weight = weight.astype(x.dtype, copy=False)
    with np.errstate(invalid="ignore"):  # inf - inf gives NaN, as in Paddle
        io.set_output("Out", (x + weight * (y - x)).astype(x.dtype, copy=False))


def aligned(io: OpScope, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`y` placed at the legacy `axis` of `x` (axis -1: numpy's trailing alignment)."""
    axis = int(io.attr("axis", -1))
    if axis == -1 or y.ndim >= x.ndim:
        return y
    return y.reshape(y.shape + (1,) * (x.ndim - axis - y.ndim))


@host_kernel("elementwise_fmax", "elementwise_fmin")
def fmax_fmin(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOATS | INT32_64)
    fn = np.fmax if io.op.type == "elementwise_fmax" else np.fmin
    io.set_output("Out", fn(x, aligned(io, x, y)).astype(x.dtype, copy=False))


@host_kernel("elementwise_heaviside")
def heaviside(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOATS | INT32_64)
    y = aligned(io, x, y)
    # Paddle's functor: x == 0 ? y : (x > 0), so a NaN x gives 0 (numpy's heaviside would give NaN)
    io.set_output("Out", np.where(x == 0, y, x > 0).astype(x.dtype))


@host_kernel("elementwise_mod")
def elementwise_mod(io: OpScope) -> None:
    """Paddle's remainder: r = fmod(x, y), then r += y where r != 0 and r's sign differs from y's (so the result
    takes the divisor's sign). fmod is exact, which x - floor(x / y) * y is not for huge x or y = +-inf (the
    converter composes that form only for integers). Integer division by zero raises, as Paddle does."""
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOATS | INT32_64)
    y = aligned(io, x, y).astype(x.dtype, copy=False)
    if x.dtype.kind in "iu" and (y == 0).any():
        raise io.error("integer division by zero")
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.fmod(x, y)
        fix = (r != 0) & ((r < 0) != (y < 0))
        io.set_output("Out", np.where(fix, r + y, r).astype(x.dtype, copy=False))


# -- float bits and integer division ----------------------------------------------------------------------
@host_kernel("copysign")
def copysign(io: OpScope) -> None:
    x, y = io.input(slot(io, "X", "x")), io.input(slot(io, "Y", "y"))
    require(io, x, FLOATS | INTS | {np.dtype(bool)})
    if x.dtype.kind == "f":
        out = np.copysign(x, y.astype(x.dtype, copy=False))
    else:
        # Paddle computes std::copysign in double and casts back to the integer type
        out = np.copysign(x.astype(np.float64), y.astype(np.float64)).astype(x.dtype)
    io.set_output(slot(io, "Out", "out"), np.asarray(out).astype(x.dtype, copy=False))


@host_kernel("nextafter")
def nextafter(io: OpScope) -> None:
    x, y = io.input(slot(io, "X", "x")), io.input(slot(io, "Y", "y"))
    require(io, x, FLOATS)
    if y.dtype != x.dtype:
        raise io.error(f"x and y must have one dtype, got {x.dtype} and {y.dtype}")
    io.set_output(slot(io, "Out", "out"), np.asarray(np.nextafter(x, y)))


@host_kernel("trunc_divide")
def trunc_divide(io: OpScope) -> None:
    x, y = io.input(slot(io, "X", "x")), io.input(slot(io, "Y", "y"))
    require(io, x, FLOATS | INTS)
    y = y.astype(x.dtype, copy=False)
    if x.dtype.kind == "f":
        with np.errstate(all="ignore"):
            out = np.trunc(x / y)
    else:
        if (y == 0).any():
            raise io.error("integer division by zero")
        q = np.abs(x.astype(np.int64)) // np.abs(y.astype(np.int64))
        out = np.where((x < 0) != (y < 0), -q, q).astype(x.dtype)
    io.set_output(slot(io, "Out", "out"), np.asarray(out).astype(x.dtype, copy=False))


@host_kernel("label_smooth")
def label_smooth(io: OpScope) -> None:
    label = io.input("X")
    if label.dtype.kind != "f":
        raise io.error(f"X must be a float tensor, got {label.dtype}")
    epsilon = label.dtype.type(io.attr("epsilon", 0.0))
    one = label.dtype.type(1)
    prior = io.input("PriorDist", None)
    if prior is not None:
        # prior_dist broadcasts along label's rows; the result keeps label's shape (a 0-d label stays 0-d)
        out = ((one - epsilon) * label + epsilon * prior.reshape(-1).astype(label.dtype)).reshape(label.shape)
    else:
        classes = label.shape[-1] if label.ndim else 1
        out = (one - epsilon) * label + epsilon / label.dtype.type(classes)
    io.set_output("Out", np.asarray(out, dtype=label.dtype))


# -- closeness ----------------------------------------------------------------------------------------------
CLOSE_DEFAULTS = {"rtol": 1e-5, "atol": 1e-8}


def close_tolerances(io: OpScope) -> tuple[float, float]:
    """isclose / allclose's (rtol, atol): the `Rtol` / `Atol` tensor where the program computes one, else the
    string attribute Paddle keeps them in ("1e-05")."""
    values = []
    for name, tensor_slot in (("rtol", "Rtol"), ("atol", "Atol")):
        if io.has_input(tensor_slot):
            tensor = np.asarray(io.input(tensor_slot))
            if tensor.size != 1:
                raise io.error(f"{tensor_slot} must hold one value, got shape {list(tensor.shape)}")
            values.append(float(tensor.reshape(-1)[0]))
            continue
        raw = io.attr(name, CLOSE_DEFAULTS[name])
        try:
            values.append(float(raw))
        except (TypeError, ValueError):
            raise io.error(f"attribute '{name}' must be a number (or its string), got {raw!r}") from None
    return values[0], values[1]


def close_mask(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """Paddle 3.3.1's CPU isclose / allclose test per element (module docstring), in its element type T."""
    dtype = a.dtype
    # bool arithmetic goes through int8, as C++ promotes bool to int; the results are stored back in bool below
    work = np.dtype(np.int8) if dtype == np.bool_ else dtype
    av, bv = a.astype(work, copy=False), b.astype(work, copy=False)
    with np.errstate(all="ignore"):
        scaled = np.where(bv > 0, rtol * bv.astype(np.float64), -rtol * bv.astype(np.float64))
        # `T right = atol + ...`: computed in double, then rounded (float) or truncated (integer) into T
        right = np.asarray(atol + scaled).astype(dtype).astype(work)
        left = np.where(av > bv, av - bv, bv - av).astype(dtype).astype(work)
        diff = np.where(left > right, left - right, right - left).astype(dtype).astype(work)
        # C++ compares T with the double 1e-15, so the comparison is made in float64
        close = (av == bv) | (left <= right) | (diff.astype(np.float64) <= 1e-15)
    if dtype.kind != "f":
        return close
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    return np.where(a_nan | b_nan, equal_nan & (a_nan == b_nan), close)


def close_operands(io: OpScope, allowed) -> tuple[np.ndarray, np.ndarray]:
    x, y = io.input("Input"), io.input("Other")
    require(io, x, allowed)
    if y.dtype != x.dtype:
        raise io.error(f"Input and Other must have one dtype, got {x.dtype} and {y.dtype}")
    if x.shape != y.shape:
        raise io.error(f"Input {list(x.shape)} and Other {list(y.shape)} must have one shape (Paddle does not "
                       f"broadcast them)")
    return x, y


@host_kernel("isclose")
def isclose(io: OpScope) -> None:
    x, y = close_operands(io, FLOATS)
    rtol, atol = close_tolerances(io)
    io.set_output("Out", close_mask(x, y, rtol, atol, bool(io.attr("equal_nan", False))))


# -- fused binary + unary pairs -----------------------------------------------------------------------------
def _relu(x: np.ndarray, _scale) -> np.ndarray:
    return x * (x > 0).astype(x.dtype)


def _tanh(x: np.ndarray, _scale) -> np.ndarray:
    one, two = x.dtype.type(1), x.dtype.type(2)
    return two / (one + np.exp(-np.clip(two * x, -40, 13).astype(x.dtype))) - one


def _sigmoid(x: np.ndarray, _scale) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-np.clip(x, -40, 13).astype(x.dtype)))


def _gelu(x: np.ndarray, _scale) -> np.ndarray:
    t = x.dtype.type
    return x * t(0.5) * (t(1.0) + np.tanh(t(0.79788456) * x * (t(1) + t(0.044715) * x * x)))


def _scale(x: np.ndarray, scale) -> np.ndarray:
    return x * x.dtype.type(scale)


_UNARY_FUNCTORS = {"scale": _scale, "relu": _relu, "tanh": _tanh, "sigmoid": _sigmoid, "gelu": _gelu}
_BINARY_FUNCTORS = {"elementwise_add": np.add, "elementwise_mul": np.multiply}
# the pairs Paddle 3.3.1's RunFunctors implements ([binary, unary] or [unary, binary])
_FUSED_PAIRS = frozenset({("elementwise_add", "scale"), ("scale", "elementwise_add"), ("elementwise_add", "relu"),
                          ("relu", "elementwise_add"), ("elementwise_mul", "scale"), ("tanh", "elementwise_add"),
                          ("elementwise_mul", "tanh"), ("elementwise_mul", "sigmoid"), ("gelu", "elementwise_add")})


def _legacy_broadcast(io: OpScope, large: np.ndarray, small: np.ndarray) -> np.ndarray:
    """`small` reshaped to broadcast into `large` as Paddle's fused elementwise kernels place it."""
    axis = int(io.attr("axis", -1))
    if axis == -1:
        axis = large.ndim - small.ndim
    dims = list(small.shape)
    while dims and dims[-1] == 1:
        dims.pop()
    if not dims:
        return small.reshape(())
    if not 0 <= axis <= large.ndim - len(dims) or list(large.shape[axis:axis + len(dims)]) != dims:
        raise io.error(f"operand dims {list(small.shape)} (trailing 1s dropped) must equal the dims of "
                       f"{list(large.shape)} from axis {axis} on (Paddle's legacy broadcast)")
    return small.reshape((1,) * axis + tuple(dims) + (1,) * (large.ndim - axis - len(dims)))


@host_kernel("fused_elemwise_activation", "fused_elemwise_add_activation")
def fused_elemwise_activation(io: OpScope) -> None:
    x, y = io.input("X"), io.input("Y")
    require(io, x, FLOATS)
    if y.dtype != x.dtype:
        raise io.error(f"X and Y must have one dtype, got {x.dtype} and {y.dtype}")
    functors = tuple(str(f) for f in io.attr("functor_list", []))
    if functors not in _FUSED_PAIRS:
        raise io.error(f"functor_list {list(functors)} is not a pair Paddle implements "
                       f"({sorted(','.join(p) for p in _FUSED_PAIRS)})")
    scale = float(io.attr("scale", 0.0))
    xb, yb = x, y
    if x.shape != y.shape:
        if x.size >= y.size:
            yb = _legacy_broadcast(io, x, y)
        else:
            xb = _legacy_broadcast(io, y, x)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 and inf - inf give NaN, as in Paddle
        if functors[0] in _BINARY_FUNCTORS:  # Binary(X, Unary(Y))
            intermediate = _UNARY_FUNCTORS[functors[1]](y, scale)
            inter_b = intermediate if yb is y else intermediate.reshape(yb.shape)
            out = _BINARY_FUNCTORS[functors[0]](xb, inter_b)
        else:  # Unary(Binary(X, Y))
            intermediate = _BINARY_FUNCTORS[functors[1]](xb, yb)
            out = _UNARY_FUNCTORS[functors[0]](intermediate, scale)
    io.set_output("Out", np.ascontiguousarray(out, dtype=x.dtype))
    if io.attr("save_intermediate_out", False):
        io.set_output("IntermediateOut", np.ascontiguousarray(intermediate, dtype=x.dtype))


# -- position encoding --------------------------------------------------------------------------------------
@host_kernel("add_position_encoding")
def add_position_encoding(io: OpScope) -> None:
    x = io.input("X")
    require(io, x, FLOATS)
    if x.ndim != 3:
        raise io.error(f"X must be 3-D [batch, seq, enc], got dims {list(x.shape)}")
    enc = x.shape[2]
    if enc % 2:
        raise io.error(f"X's last dim (the encoding size) must be even, got {enc}")
    alpha = x.dtype.type(np.float32(io.attr("alpha", 1.0)))
    beta = np.float64(np.float32(io.attr("beta", 1.0)))
    half = enc // 2
    position = np.arange(x.shape[1], dtype=np.float64)[:, None]
    if half > 1:
        angle = position / np.power(10000.0, np.arange(half, dtype=np.float64) / (half - 1))
    else:
        angle = position / 10000.0  # [seq, 1]: half is 1
    table = np.concatenate([np.sin(angle), np.cos(angle)], axis=1) * beta
    io.set_output("Out", ((x * alpha).astype(np.float64) + table).astype(x.dtype))
