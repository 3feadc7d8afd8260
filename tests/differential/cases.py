"""The differential tester's case generator: seeded random single-op Paddle programs.

One case is one Paddle API call (one Paddle op type) on fresh inputs: a dtype the op takes, a rank (0-d
included), broadcast shapes, attribute combinations and special values (NaN, +-inf, -0.0, huge, tiny, empty
dims). `generate_cases(seed)` is deterministic: every case draws from its own generator seeded with
(seed, op type, case number), so adding an op or changing one op's cases leaves every other case as it was.

A case's `build(paddle, **inputs)` is called with one `paddle.static.data` per feed and returns the output
value(s). Whether Paddle accepts it (build, then run) is decided later by `programs.py`; cases Paddle rejects
are discarded there, never counted.
"""
from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable

import numpy as np

# Bump when a case's inputs, attributes or the set of ops change: it keys the cache of generated programs.
GENERATOR_VERSION = 6
DEFAULT_SEED = 20260
CASES_PER_OP = 10

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)

# Input variants: "plain" (rank 1..4, ordinary values), "0d" (a 0-d tensor), "special" (NaN, +-inf, -0.0,
# huge and tiny normal values mixed in), "subnormal" (denormal floats and zeros mixed in: Paddle's CPU kernels
# flush some of them to zero), "empty" (a dim of size 0), "broadcast" (binary ops: shapes that broadcast).
UNARY_VARIANTS = ("plain", "plain", "0d", "special", "special", "empty", "subnormal")
BINARY_VARIANTS = ("plain", "broadcast", "broadcast", "0d", "special", "special", "empty", "subnormal")


@dataclasses.dataclass
class Case:
    case_id: str
    op_type: str       # the Paddle op type the call must produce (a key of converters.CONVERTERS)
    dtype: str         # the dtype of the main input
    variant: str
    feeds: dict        # {local input name: array}
    build: Callable    # build(paddle, **inputs) -> value or list of values
    attrs: str = ""    # a short description of the attributes drawn, for failure messages


@dataclasses.dataclass
class OpSpec:
    op_type: str
    make: Callable     # make(rng) -> (dtype, variant, feeds, build, attrs)


# -- input data ------------------------------------------------------------------------------------------------


def rand_shape(rng, rank: int, lo: int = 1, hi: int = 4) -> list:
    return [int(d) for d in rng.integers(lo, hi + 1, size=rank)]


def shape_for(rng, variant: str, min_rank: int = 0, max_rank: int = 4) -> list:
    if variant == "0d" and min_rank == 0:
        return []
    rank = int(rng.integers(max(min_rank, 1), max_rank + 1))
    shape = rand_shape(rng, rank)
    if variant == "empty":
        shape[int(rng.integers(0, rank))] = 0
    return shape


def special_values(dtype: str, variant: str = "special") -> np.ndarray:
    if variant == "subnormal":
        if dtype == "float32":
            return np.array([1e-40, -1e-40, 1e-45, -3e-39, 0.0, -0.0], np.float32)
        return np.array([1e-310, -1e-310, 5e-324, -3e-309, 0.0, -0.0], np.float64)
    if dtype == "float32":
        return np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -3e38, 1e-30, -1e-30, 1e-20], np.float32)
    return np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e300, -1e300, 1e-300, -1e-300, 1e-200], np.float64)


def values(rng, dtype: str, shape, *, variant: str = "plain", low: float = -4.0, high: float = 4.0,
           nonzero: bool = False) -> np.ndarray:
    """Random data of `dtype` and `shape`; with the "special" variant, about a third of the elements of a
    float tensor are special values (subnormal ones with the "subnormal" variant). Integers stay in
    [low, high] (no zero with `nonzero`)."""
    shape = tuple(shape)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype in INTS:
        a = rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
        if nonzero:
            a[a == 0] = 1
        return a
    a = rng.uniform(low, high, size=shape).astype(dtype)
    if nonzero:
        a[np.abs(a) < 0.1] = 0.5
    if variant in ("special", "subnormal") and a.size:
        pool = special_values(dtype, variant)
        mask = rng.random(shape) < 0.35
        a[mask] = rng.choice(pool, size=int(mask.sum()))
    return a


def broadcast_partner(rng, shape: list) -> list:
    """A shape that broadcasts with `shape`: a suffix of it with some dims set to 1 (or `shape` itself)."""
    if not shape:
        return []
    start = int(rng.integers(0, len(shape)))
    other = list(shape[start:])
    for i in range(len(other)):
        if rng.random() < 0.4:
            other[i] = 1
    return other


def pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


# -- op families -----------------------------------------------------------------------------------------------


def unary(op_type: str, api: Callable, dtypes=FLOATS, *, low=-4.0, high=4.0, variants=UNARY_VARIANTS,
          attrs: Callable | None = None) -> OpSpec:
    """An elementwise op of one input; `attrs(rng, dtype)` draws keyword arguments passed to `api`."""
    def make(rng):
        dtype, variant = pick(rng, dtypes), pick(rng, variants)
        x = values(rng, dtype, shape_for(rng, variant), variant=variant, low=low, high=high)
        kwargs = attrs(rng, dtype) if attrs else {}
        return dtype, variant, {"x": x}, (lambda paddle, x: api(paddle, x, **kwargs)), _describe(kwargs)
    return OpSpec(op_type, make)


def binary(op_type: str, api: Callable, dtypes=NUMERIC, *, nonzero_y: bool = False, low=-4.0, high=4.0,
           y_low=None, y_high=None, variants=BINARY_VARIANTS) -> OpSpec:
    def make(rng):
        dtype, variant = pick(rng, dtypes), pick(rng, variants)
        shape = shape_for(rng, "plain" if variant == "broadcast" else variant)
        y_shape = broadcast_partner(rng, shape) if variant == "broadcast" else list(shape)
        if variant == "broadcast" and rng.random() < 0.5:
            shape, y_shape = y_shape, shape
        x = values(rng, dtype, shape, variant=variant, low=low, high=high)
        y = values(rng, dtype, y_shape, variant=variant, low=y_low if y_low is not None else low,
                   high=y_high if y_high is not None else high, nonzero=nonzero_y and dtype in INTS)
        return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: api(paddle, x, y)), ""
    return OpSpec(op_type, make)


def reduction(op_type: str, api: Callable, dtypes=NUMERIC, *, keepdim=True, axis_none=True,
              variants=UNARY_VARIANTS, axis_kw="axis", single_axis=False) -> OpSpec:
    def make(rng):
        dtype, variant = pick(rng, dtypes), pick(rng, variants)
        shape = shape_for(rng, variant)
        x = values(rng, dtype, shape, variant=variant)
        kwargs = {}
        rank = len(shape)
        if rank and (not axis_none or rng.random() < 0.7):
            if single_axis:
                kwargs[axis_kw] = int(rng.integers(-rank, rank))
            else:
                count = int(rng.integers(1, rank + 1))
                axes = sorted(rng.choice(rank, size=count, replace=False).tolist())
                kwargs[axis_kw] = [a - rank if rng.random() < 0.3 else a for a in axes]
        elif not axis_none:
            kwargs[axis_kw] = 0 if single_axis else [0]
            if not rank:
                kwargs[axis_kw] = 0 if single_axis else []
        if keepdim:
            kwargs["keepdim"] = bool(rng.random() < 0.5)
        return dtype, variant, {"x": x}, (lambda paddle, x: api(paddle, x, **kwargs)), _describe(kwargs)
    return OpSpec(op_type, make)


def custom(op_type: str, make: Callable) -> OpSpec:
    return OpSpec(op_type, make)


def _describe(kwargs: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(kwargs.items()))


F = lambda name: (lambda paddle, *a, **k: getattr(paddle.nn.functional, name)(*a, **k))  # noqa: E731
P = lambda name: (lambda paddle, *a, **k: getattr(paddle, name)(*a, **k))  # noqa: E731


# -- ops with their own inputs ---------------------------------------------------------------------------------


def _reshape(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d", "empty"))
    shape = shape_for(rng, variant)
    x = values(rng, dtype, shape, variant=variant)
    size = int(np.prod(shape)) if shape else 1
    choices = [[size], [-1], [1, -1], [-1, 1]] + ([[]] if size == 1 else [])
    if len(shape) >= 2:
        choices.append([0, -1])
    if size == 0:
        choices = [[0, -1] if shape and shape[0] == 0 else list(shape)]
    target = pick(rng, choices)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.reshape(x, target)), f"shape={target}"


def _transpose(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d", "empty"))
    shape = shape_for(rng, variant)
    perm = rng.permutation(len(shape)).tolist()
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.transpose(x, perm)), f"perm={perm}"


def _squeeze(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d"))
    shape = shape_for(rng, variant)
    if shape:
        shape[int(rng.integers(0, len(shape)))] = 1
    ones = [i for i, d in enumerate(shape) if d == 1]
    axis = None if not ones or rng.random() < 0.3 else pick(rng, ones)
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.squeeze(x, axis=axis)), f"axis={axis}"


def _unsqueeze(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d", "empty"))
    shape = shape_for(rng, variant, max_rank=3)
    axis = int(rng.integers(-len(shape) - 1, len(shape) + 1))
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.unsqueeze(x, axis=axis)), f"axis={axis}"


def _flatten(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d"))
    shape = shape_for(rng, variant)
    rank = max(len(shape), 1)
    start = int(rng.integers(0, rank))
    stop = int(rng.integers(start, rank))
    x = values(rng, dtype, shape, variant=variant)
    if not shape:
        start, stop = 0, -1
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.flatten(x, start, stop)), f"{start}..{stop}"


def _concat(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "empty", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    axis = int(rng.integers(-len(shape), len(shape)))
    n = int(rng.integers(1, 4))
    feeds = {}
    for i in range(n):
        s = list(shape)
        s[axis] = int(rng.integers(0 if variant == "empty" else 1, 4))
        feeds[f"x{i}"] = values(rng, dtype, s, variant=variant)
    return dtype, variant, feeds, (lambda paddle, **xs: paddle.concat([xs[k] for k in sorted(xs)], axis=axis)), \
        f"n={n}, axis={axis}"


def _stack(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d", "empty"))
    shape = shape_for(rng, variant, max_rank=3)
    axis = int(rng.integers(-len(shape) - 1, len(shape) + 1))
    n = int(rng.integers(1, 4))
    feeds = {f"x{i}": values(rng, dtype, shape, variant=variant) for i in range(n)}
    return dtype, variant, feeds, (lambda paddle, **xs: paddle.stack([xs[k] for k in sorted(xs)], axis=axis)), \
        f"n={n}, axis={axis}"


def _split(rng):
    dtype, variant = pick(rng, ALL), "plain"
    shape = shape_for(rng, variant, min_rank=1)
    axis = int(rng.integers(-len(shape), len(shape)))
    dim = shape[axis]
    sections = dim if rng.random() < 0.5 else [dim - dim // 2, dim // 2] if dim > 1 else 1
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.split(x, sections, axis=axis)), \
        f"sections={sections}, axis={axis}"


def _slice(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    x = values(rng, dtype, shape, variant=variant)
    axes = sorted(rng.choice(len(shape), size=int(rng.integers(1, len(shape) + 1)), replace=False).tolist())
    starts = [int(rng.integers(-shape[a], shape[a])) for a in axes]
    ends = [int(rng.integers(-shape[a], shape[a] + 3)) for a in axes]
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.slice(x, axes, starts, ends)), \
        f"axes={axes}, starts={starts}, ends={ends}"


def _strided_slice(rng):
    dtype, variant = pick(rng, NUMERIC), "plain"
    shape = shape_for(rng, variant, min_rank=1)
    x = values(rng, dtype, shape)
    axes = sorted(rng.choice(len(shape), size=int(rng.integers(1, len(shape) + 1)), replace=False).tolist())
    strides = [int(pick(rng, (1, 2, -1))) for _ in axes]
    starts, ends = [], []
    for a, s in zip(axes, strides):
        if s > 0:
            starts.append(int(rng.integers(0, shape[a])))
            ends.append(int(rng.integers(starts[-1] + 1, shape[a] + 2)))
        else:
            starts.append(int(rng.integers(0, shape[a])))
            ends.append(int(rng.integers(-shape[a] - 1, starts[-1])) if starts[-1] > -shape[a] - 1 else -shape[a] - 1)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.strided_slice(x, axes, starts, ends, strides)), \
        f"axes={axes}, starts={starts}, ends={ends}, strides={strides}"


def _expand(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d"))
    shape = shape_for(rng, variant, max_rank=3)
    shape = [1 if rng.random() < 0.5 else d for d in shape]
    lead = rand_shape(rng, int(rng.integers(0, 2)))
    target = lead + [d if d != 1 else int(rng.integers(1, 4)) for d in shape]
    target = [(-1 if (i >= len(lead) and shape[i - len(lead)] == t and rng.random() < 0.3) else t)
              for i, t in enumerate(target)]
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.expand(x, target)), f"shape={target}"


def _tile(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d"))
    shape = shape_for(rng, variant, max_rank=3)
    reps = [int(rng.integers(1, 3)) for _ in range(int(rng.integers(1, 4)))]
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.tile(x, reps)), f"repeat_times={reps}"


def _flip(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    axis = sorted(set(int(a) for a in rng.integers(0, len(shape), size=int(rng.integers(1, len(shape) + 1)))))
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.flip(x, axis)), f"axis={axis}"


def _roll(rng):
    dtype, variant = pick(rng, NUMERIC), "plain"
    shape = shape_for(rng, variant, min_rank=1)
    x = values(rng, dtype, shape)
    if rng.random() < 0.3:
        shifts, axis = int(rng.integers(-5, 6)), None
    else:
        axis = [int(rng.integers(0, len(shape)))]
        shifts = [int(rng.integers(-5, 6))]
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.roll(x, shifts, axis)), f"shifts={shifts}, axis={axis}"


def _gather(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    axis = int(rng.integers(0, len(shape)))
    index_dtype = pick(rng, INTS)
    index = rng.integers(0, shape[axis], size=int(rng.integers(1, 5))).astype(index_dtype)
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x, "index": index}, \
        (lambda paddle, x, index: paddle.gather(x, index, axis=axis)), f"axis={axis}, index {index_dtype}"


def _index_select(rng):
    dtype, variant = pick(rng, NUMERIC), "plain"
    shape = shape_for(rng, variant, min_rank=1)
    axis = int(rng.integers(-len(shape), len(shape)))
    index = rng.integers(0, shape[axis], size=int(rng.integers(1, 5))).astype(pick(rng, INTS))
    x = values(rng, dtype, shape)
    return dtype, variant, {"x": x, "index": index}, \
        (lambda paddle, x, index: paddle.index_select(x, index, axis=axis)), f"axis={axis}"


def _shape(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "0d", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.shape(x)), ""


def _full_like(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "0d", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    fill = pick(rng, (0, 1, -2, 3.5) if dtype in FLOATS else (0, 1, -2))
    out_dtype = pick(rng, (None, "float32", "int64", "bool"))
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.full_like(x, fill, dtype=out_dtype)), \
        f"fill={fill}, dtype={out_dtype}"


def _fill_constant(rng):
    dtype = pick(rng, ALL)
    variant = pick(rng, ("plain", "0d"))
    shape = [] if variant == "0d" else rand_shape(rng, int(rng.integers(1, 4)))
    fill = {"bool": True}.get(dtype, pick(rng, (0, 1, -3)))
    return dtype, variant, {}, (lambda paddle: paddle.full(shape, fill, dtype=dtype)), f"shape={shape}, fill={fill}"


def _tril_triu(rng):
    dtype, variant = pick(rng, NUMERIC), "plain"
    shape = shape_for(rng, variant, min_rank=2, max_rank=3)
    diagonal = int(rng.integers(-2, 3))
    api = pick(rng, ("tril", "triu"))
    x = values(rng, dtype, shape)
    return dtype, variant, {"x": x}, (lambda paddle, x: getattr(paddle, api)(x, diagonal)), f"{api}({diagonal})"


def _topk(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    x = values(rng, dtype, shape, variant=variant)
    axis = int(rng.integers(-len(shape), len(shape)))
    k = int(rng.integers(1, shape[axis] + 1))
    largest = bool(rng.random() < 0.6)
    # Ties make the indices ambiguous; keep them unique for integers (values from a permutation).
    if dtype in INTS:
        x = rng.permutation(x.size).reshape(shape).astype(dtype)
    return dtype, variant, {"x": x}, (lambda paddle, x: list(paddle.topk(x, k, axis=axis, largest=largest))), \
        f"k={k}, axis={axis}, largest={largest}"


def _argsort(rng):
    dtype, variant = pick(rng, NUMERIC), "plain"
    shape = shape_for(rng, variant, min_rank=1)
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(dtype)
    axis = int(rng.integers(-len(shape), len(shape)))
    descending = bool(rng.random() < 0.5)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.argsort(x, axis=axis, descending=descending)), \
        f"axis={axis}, descending={descending}"


def _arg(api):
    def make(rng):
        dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "0d"))
        shape = shape_for(rng, variant)
        x = rng.permutation(max(int(np.prod(shape)), 1)).reshape(shape).astype(dtype)
        kwargs = {"keepdim": bool(rng.random() < 0.5)}
        if shape and rng.random() < 0.8:
            kwargs["axis"] = int(rng.integers(-len(shape), len(shape)))
        if rng.random() < 0.3:
            kwargs["dtype"] = "int32"
        return dtype, variant, {"x": x}, (lambda paddle, x: getattr(paddle, api)(x, **kwargs)), _describe(kwargs)
    return make


def _cumsum(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "0d", "special"))
    shape = shape_for(rng, variant)
    x = values(rng, dtype, shape, variant=variant)
    axis = None if not shape or rng.random() < 0.3 else int(rng.integers(-len(shape), len(shape)))
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.cumsum(x, axis=axis)), f"axis={axis}"


def _softmax(api):
    def make(rng):
        dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "0d", "special"))
        shape = shape_for(rng, variant)
        x = values(rng, dtype, shape, variant=variant)
        axis = -1 if not shape else int(rng.integers(-len(shape), len(shape)))
        return dtype, variant, {"x": x}, (lambda paddle, x: getattr(paddle.nn.functional, api)(x, axis=axis)), \
            f"axis={axis}"
    return make


def _where(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "broadcast", "0d", "special"))
    shape = shape_for(rng, "plain" if variant == "broadcast" else variant)
    other = broadcast_partner(rng, shape) if variant == "broadcast" else list(shape)
    cond = values(rng, "bool", shape)
    x = values(rng, dtype, other, variant=variant)
    y = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"cond": cond, "x": x, "y": y}, \
        (lambda paddle, cond, x, y: paddle.where(cond, x, y)), ""


def _matmul(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "broadcast", "special"))
    m, k, n = (int(v) for v in rng.integers(1, 5, size=3))
    batch = rand_shape(rng, int(rng.integers(0, 3)))
    tx, ty = bool(rng.random() < 0.3), bool(rng.random() < 0.3)
    xs = batch + ([k, m] if tx else [m, k])
    ys = (batch[-1:] if variant == "broadcast" else batch) + ([n, k] if ty else [k, n])
    if rng.random() < 0.15:
        xs = [k]
        tx = False
    x = values(rng, dtype, xs, variant=variant)
    y = values(rng, dtype, ys, variant=variant)
    return dtype, variant, {"x": x, "y": y}, \
        (lambda paddle, x, y: paddle.matmul(x, y, transpose_x=tx, transpose_y=ty)), f"tx={tx}, ty={ty}"


def _bmm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "special"))
    b, m, k, n = (int(v) for v in rng.integers(1, 4, size=4))
    x = values(rng, dtype, [b, m, k], variant=variant)
    y = values(rng, dtype, [b, k, n], variant=variant)
    return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.bmm(x, y)), ""


def _dot(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = [int(rng.integers(1, 6))] if rng.random() < 0.6 else rand_shape(rng, 2)
    x = values(rng, dtype, shape, variant=variant)
    y = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.dot(x, y)), ""


def _cast(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "0d", "special", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant, low=-300, high=300)
    if dtype in FLOATS and variant == "special":
        x = np.where(np.isfinite(x) & (np.abs(x) < 1e9), x, 1.5).astype(dtype)  # float->int of NaN/inf is UB
    target = pick(rng, ALL)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.cast(x, target)), f"to {target}"


def _scale(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, UNARY_VARIANTS)
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    scale = float(pick(rng, (2.0, -0.5, 1.0, 0.0)))
    bias = float(pick(rng, (0.0, 1.0, -3.0)))
    after = bool(rng.random() < 0.5)
    if dtype in INTS:
        scale, bias = float(int(scale)), float(int(bias))
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.scale(x, scale=scale, bias=bias, bias_after_scale=after)), \
        f"scale={scale}, bias={bias}, after={after}"


def _clip(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, UNARY_VARIANTS)
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    lo = float(rng.integers(-3, 1))
    hi = float(lo + rng.integers(0, 4))
    if dtype in INTS:
        lo, hi = int(lo), int(hi)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.clip(x, lo, hi)), f"min={lo}, max={hi}"


def _pow(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, UNARY_VARIANTS)
    x = values(rng, dtype, shape_for(rng, variant), variant=variant, low=0 if dtype in INTS else -4)
    factor = pick(rng, (2.0, 3.0, 0.5, -1.0, 0.0)) if dtype in FLOATS else pick(rng, (2, 3, 0))
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.pow(x, factor)), f"factor={factor}"


def _sum_n(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "0d", "special"))
    shape = shape_for(rng, variant)
    n = int(rng.integers(2, 4))
    feeds = {f"x{i}": values(rng, dtype, shape, variant=variant) for i in range(n)}
    return dtype, variant, feeds, (lambda paddle, **xs: paddle.add_n([xs[k] for k in sorted(xs)])), f"n={n}"


def _p_norm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    x = values(rng, dtype, shape, variant=variant)
    p = pick(rng, (2.0, 1.0, 3.0, float("inf")))
    axis = int(rng.integers(-len(shape), len(shape)))
    keepdim = bool(rng.random() < 0.5)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.norm(x, p=p, axis=axis, keepdim=keepdim)), \
        f"p={p}, axis={axis}, keepdim={keepdim}"


def _one_hot(rng):
    dtype = pick(rng, INTS)
    variant = pick(rng, ("plain", "0d"))
    depth = int(rng.integers(2, 6))
    shape = shape_for(rng, variant, max_rank=3)
    x = rng.integers(0, depth, size=tuple(shape)).astype(dtype)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.nn.functional.one_hot(x, depth)), f"depth={depth}"


def _pad(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "special"))
    shape = [int(rng.integers(1, 3)), int(rng.integers(1, 3))] + rand_shape(rng, 2, 2, 4)
    pads = [int(v) for v in rng.integers(0, 3, size=4)]
    mode = pick(rng, ("constant", "reflect", "replicate"))
    value = float(pick(rng, (0.0, 1.5)))
    pads = [min(p, shape[2 + i // 2] - 1) for i, p in enumerate(pads)] if mode == "reflect" else pads
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.pad(x, pads, mode=mode, value=value, data_format="NCHW")), \
        f"pads={pads}, mode={mode}"


def _unstack(rng):
    dtype, variant = pick(rng, NUMERIC), "plain"
    shape = shape_for(rng, variant, min_rank=1, max_rank=3)
    axis = int(rng.integers(-len(shape), len(shape)))
    x = values(rng, dtype, shape)
    return dtype, variant, {"x": x}, (lambda paddle, x: list(paddle.unstack(x, axis=axis))), f"axis={axis}"


def _conv2d(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    c_in, groups = int(rng.integers(1, 3)), 1
    c_out = int(rng.integers(1, 4))
    if rng.random() < 0.3:
        groups = c_in
        c_out = c_in * int(rng.integers(1, 3))
    k = int(rng.integers(1, 4))
    stride, padding, dilation = int(rng.integers(1, 3)), int(rng.integers(0, 2)), int(rng.integers(1, 3))
    size = int(rng.integers(k * dilation, k * dilation + 4))
    x = values(rng, dtype, [int(rng.integers(1, 3)), c_in, size, size], variant=variant)
    w = values(rng, dtype, [c_out, c_in // groups, k, k])
    return dtype, variant, {"x": x, "w": w}, \
        (lambda paddle, x, w: paddle.nn.functional.conv2d(x, w, stride=stride, padding=padding, dilation=dilation,
                                                          groups=groups)), \
        f"k={k}, stride={stride}, pad={padding}, dil={dilation}, groups={groups}"


def _pool2d(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    kind = pick(rng, ("max", "avg", "adaptive_avg", "adaptive_max"))
    size = int(rng.integers(2, 7))
    x = values(rng, dtype, [1, int(rng.integers(1, 3)), size, size], variant=variant)
    if kind.startswith("adaptive"):
        out = int(rng.integers(1, size + 1))
        api = f"{kind}_pool2d"
        return dtype, variant, {"x": x}, (lambda paddle, x: getattr(paddle.nn.functional, api)(x, out)), \
            f"{api} {out}"
    k = int(rng.integers(1, size + 1))
    stride, padding = int(rng.integers(1, 3)), int(rng.integers(0, (k // 2) + 1))
    ceil_mode = bool(rng.random() < 0.3)
    kwargs = {"kernel_size": k, "stride": stride, "padding": padding, "ceil_mode": ceil_mode}
    if kind == "avg":
        kwargs["exclusive"] = bool(rng.random() < 0.5)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: getattr(paddle.nn.functional, f"{kind}_pool2d")(x, **kwargs)), f"{kind} {_describe(kwargs)}"


def _layer_norm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=2)
    begin = int(rng.integers(1, len(shape)))
    eps = float(pick(rng, (1e-5, 1e-3)))
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.layer_norm(x, shape[begin:], epsilon=eps)), f"begin={begin}"


def _meshgrid(rng):
    dtype = pick(rng, NUMERIC)
    n = int(rng.integers(2, 4))
    feeds = {f"x{i}": values(rng, dtype, [int(rng.integers(1, 4))]) for i in range(n)}
    return dtype, "plain", feeds, (lambda paddle, **xs: list(paddle.meshgrid(*[xs[k] for k in sorted(xs)]))), f"n={n}"


def _logical(api, unary_=False):
    def make(rng):
        dtype, variant = pick(rng, ("bool", "bool", "int32", "float32")), pick(rng, BINARY_VARIANTS)
        shape = shape_for(rng, "plain" if variant == "broadcast" else variant)
        other = broadcast_partner(rng, shape) if variant == "broadcast" else list(shape)
        x = values(rng, dtype, shape, variant=variant, low=-1, high=1)
        if unary_:
            return dtype, variant, {"x": x}, (lambda paddle, x: getattr(paddle, api)(x)), ""
        y = values(rng, dtype, other, variant=variant, low=-1, high=1)
        return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: getattr(paddle, api)(x, y)), ""
    return make


def _range(rng):
    dtype = pick(rng, NUMERIC)
    start = float(rng.integers(-5, 5))
    step = float(pick(rng, (1, 2, -1, 0.5) if dtype in FLOATS else (1, 2, -1)))
    end = start + step * int(rng.integers(0, 7))
    return dtype, "plain", {}, (lambda paddle: paddle.arange(start, end, step, dtype=dtype)), \
        f"start={start}, end={end}, step={step}"


def _act_attr(name, choices):
    return lambda rng, dtype: {name: float(pick(rng, choices))}


OPS: list = [
    # elementwise math and activations
    unary("abs", P("abs"), NUMERIC),
    unary("ceil", P("ceil")),
    unary("floor", P("floor")),
    unary("round", P("round")),
    unary("sign", P("sign"), NUMERIC),
    unary("cos", P("cos")),
    unary("sin", P("sin")),
    unary("exp", P("exp")),
    unary("log", P("log"), low=-0.5, high=8),
    unary("log2", P("log2"), low=-0.5, high=8),
    unary("log10", P("log10"), low=-0.5, high=8),
    unary("log1p", P("log1p"), low=-1.5, high=8),
    unary("sqrt", P("sqrt"), low=-0.5, high=8),
    unary("rsqrt", P("rsqrt"), low=-0.5, high=8),
    unary("square", P("square"), NUMERIC),
    unary("reciprocal", P("reciprocal")),
    unary("relu", F("relu"), NUMERIC),
    unary("relu6", F("relu6")),
    unary("sigmoid", F("sigmoid")),
    unary("tanh", P("tanh")),
    unary("silu", F("silu")),
    unary("softsign", F("softsign")),
    unary("softplus", F("softplus"), attrs=lambda rng, d: {"beta": float(pick(rng, (1.0, 2.0))),
                                                           "threshold": float(pick(rng, (20.0, 1.0)))}),
    unary("mish", F("mish")),
    unary("logsigmoid", F("log_sigmoid")),
    unary("tanh_shrink", F("tanhshrink")),
    unary("gelu", F("gelu"), attrs=lambda rng, d: {"approximate": bool(rng.random() < 0.5)}),
    unary("elu", F("elu"), attrs=_act_attr("alpha", (1.0, 0.5))),
    unary("selu", F("selu")),
    unary("leaky_relu", F("leaky_relu"), attrs=_act_attr("negative_slope", (0.01, 0.2, -0.5))),
    unary("hard_sigmoid", F("hardsigmoid")),
    unary("hard_swish", F("hardswish")),
    unary("hard_shrink", F("hardshrink"), attrs=_act_attr("threshold", (0.5, 1.5))),
    unary("softshrink", F("softshrink"), attrs=_act_attr("threshold", (0.5, 1.5))),
    unary("thresholded_relu", F("thresholded_relu"), attrs=_act_attr("threshold", (1.0, 0.0))),
    unary("swish", F("swish")),
    unary("assign", P("assign"), ALL),
    unary("isnan_v2", P("isnan"), NUMERIC, variants=("special", "special", "plain", "0d", "empty")),
    unary("isinf_v2", P("isinf"), NUMERIC, variants=("special", "special", "plain", "0d", "empty")),
    unary("isfinite_v2", P("isfinite"), NUMERIC, variants=("special", "special", "plain", "0d", "empty")),
    custom("logical_not", _logical("logical_not", unary_=True)),
    custom("scale", _scale),
    custom("clip", _clip),
    custom("pow", _pow),
    custom("cast", _cast),
    # binary
    binary("elementwise_add", P("add")),
    binary("elementwise_sub", P("subtract")),
    binary("elementwise_mul", P("multiply")),
    binary("elementwise_div", P("divide"), nonzero_y=True),
    binary("elementwise_max", P("maximum")),
    binary("elementwise_min", P("minimum")),
    binary("elementwise_pow", P("pow"), low=0.0, high=3.0, y_low=-2.0, y_high=3.0),
    binary("elementwise_mod", P("remainder"), nonzero_y=True),
    binary("elementwise_floordiv", P("floor_divide"), INTS, nonzero_y=True),
    binary("equal", P("equal"), ALL),
    binary("not_equal", P("not_equal"), ALL),
    binary("greater_than", P("greater_than"), NUMERIC),
    binary("greater_equal", P("greater_equal"), NUMERIC),
    binary("less_than", P("less_than"), NUMERIC),
    binary("less_equal", P("less_equal"), NUMERIC),
    custom("logical_and", _logical("logical_and")),
    custom("logical_or", _logical("logical_or")),
    custom("logical_xor", _logical("logical_xor")),
    custom("where", _where),
    custom("matmul_v2", _matmul),
    custom("bmm", _bmm),
    custom("dot", _dot),
    custom("sum", _sum_n),
    # reductions
    reduction("reduce_sum", P("sum")),
    reduction("reduce_mean", P("mean"), FLOATS),
    reduction("reduce_max", P("max")),
    reduction("reduce_min", P("min")),
    reduction("reduce_all", P("all"), ("bool",)),
    reduction("reduce_any", P("any"), ("bool",)),
    reduction("logsumexp", P("logsumexp"), FLOATS),
    custom("arg_max", _arg("argmax")),
    custom("arg_min", _arg("argmin")),
    custom("cumsum", _cumsum),
    custom("softmax", _softmax("softmax")),
    custom("log_softmax", _softmax("log_softmax")),
    custom("p_norm", _p_norm),
    custom("top_k_v2", _topk),
    custom("argsort", _argsort),
    # shape and tensor ops
    custom("reshape2", _reshape),
    custom("transpose2", _transpose),
    custom("squeeze2", _squeeze),
    custom("unsqueeze2", _unsqueeze),
    custom("flatten_contiguous_range", _flatten),
    custom("concat", _concat),
    custom("stack", _stack),
    custom("split", _split),
    custom("slice", _slice),
    custom("strided_slice", _strided_slice),
    custom("expand_v2", _expand),
    custom("tile", _tile),
    custom("flip", _flip),
    custom("roll", _roll),
    custom("gather", _gather),
    custom("index_select", _index_select),
    custom("shape", _shape),
    custom("fill_any_like", _full_like),
    custom("fill_constant", _fill_constant),
    custom("tril_triu", _tril_triu),
    custom("unstack", _unstack),
    custom("meshgrid", _meshgrid),
    custom("one_hot_v2", _one_hot),
    custom("range", _range),
    # nn
    custom("conv2d", _conv2d),
    custom("pool2d", _pool2d),
    custom("layer_norm", _layer_norm),
    custom("pad3d", _pad),
]


# -- more op types (generator 2): unary math, binary, scans, indexing, linear algebra, nn, losses ------------------


def _param(paddle, array: np.ndarray):
    """A persistable parameter holding `array` (saved with the program, read by both sides as a constant)."""
    return paddle.create_parameter(list(array.shape), str(array.dtype),
                                   default_initializer=paddle.nn.initializer.Assign(array))


def _index_array(rng, high: int, size, dtype=None) -> np.ndarray:
    return rng.integers(0, max(high, 1), size=size).astype(dtype or pick(rng, INTS))


def _logit_attrs(rng, dtype):
    eps = pick(rng, (None, 0.0, 1e-3, 0.2))
    return {} if eps is None else {"eps": eps}


def _celu_attrs(rng, dtype):
    return {"alpha": float(pick(rng, (1.0, 0.5, 2.0)))}


def _hardtanh_attrs(rng, dtype):
    lo = float(pick(rng, (-1.0, -0.5, 0.0)))
    return {"min": lo, "max": float(lo + pick(rng, (0.5, 2.0)))}


def _stanh_attrs(rng, dtype):
    return {"scale_a": float(pick(rng, (0.67, 1.0))), "scale_b": float(pick(rng, (1.7159, 0.5)))}


def _bitwise_not(rng):
    dtype, variant = pick(rng, INTS + ("bool",)), pick(rng, ("plain", "plain", "0d", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), low=-300, high=300)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.bitwise_not(x)), ""


def _lerp(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "broadcast", "0d", "special", "empty"))
    shape = shape_for(rng, "plain" if variant == "broadcast" else variant)
    other = broadcast_partner(rng, shape) if variant == "broadcast" else list(shape)
    x = values(rng, dtype, shape, variant=variant)
    y = values(rng, dtype, other, variant=variant)
    if rng.random() < 0.5:
        weight = float(pick(rng, (0.0, 0.25, 0.5, 1.0, 1.5, -0.5)))
        return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.lerp(x, y, weight)), f"weight={weight}"
    w = values(rng, dtype, broadcast_partner(rng, shape) if variant == "broadcast" else list(shape), low=-0.5,
               high=1.5)
    return dtype, variant, {"x": x, "y": y, "w": w}, (lambda paddle, x, y, w: paddle.lerp(x, y, w)), "weight tensor"


def _frobenius_norm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special", "empty"))
    shape = shape_for(rng, variant, min_rank=2)
    axes = sorted(rng.choice(len(shape), size=2, replace=False).tolist())
    keepdim = bool(rng.random() < 0.5)
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.linalg.norm(x, "fro", axis=axes, keepdim=keepdim)), f"axis={axes}, keepdim={keepdim}"


def _c_op(name, *args):
    return lambda paddle, x: getattr(paddle._C_ops, name)(x, *args)


def _squared_l2_norm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "0d", "special", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    return dtype, variant, {"x": x}, _c_op("squared_l2_norm"), ""


def _clip_by_norm(rng):
    dtype, variant = pick(rng, ("float32",)), pick(rng, ("plain", "plain", "0d", "special", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    max_norm = float(pick(rng, (1.0, 0.5, 100.0)))
    return dtype, variant, {"x": x}, _c_op("clip_by_norm", max_norm), f"max_norm={max_norm}"


def _mean_all(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "0d", "special", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    return dtype, variant, {"x": x}, _c_op("mean_all"), ""


def _scan(api, dtypes, axis_kw):
    def make(rng):
        dtype, variant = pick(rng, dtypes), pick(rng, ("plain", "plain", "0d", "special", "empty"))
        shape = shape_for(rng, variant)
        x = values(rng, dtype, shape, variant=variant, low=-2, high=2)
        axis = int(rng.integers(-len(shape), len(shape))) if shape else None
        if api == "logcumsumexp" and rng.random() < 0.3:
            axis = None
        return dtype, variant, {"x": x}, (lambda paddle, x: getattr(paddle, api)(x, **{axis_kw: axis})), \
            f"{axis_kw}={axis}"
    return make


def _kth(api):
    def make(rng):
        dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special", "0d"))
        shape = shape_for(rng, variant)
        x = values(rng, dtype, shape, variant=variant)
        if dtype in INTS and api == "kthvalue":  # ties make the index ambiguous
            x = rng.permutation(max(x.size, 1)).reshape(shape).astype(dtype)
        axis = int(rng.integers(-len(shape), len(shape))) if shape else -1
        keepdim = bool(rng.random() < 0.5)
        if api == "kthvalue":
            k = int(rng.integers(1, (shape[axis] if shape else 1) + 1))
            return dtype, variant, {"x": x}, \
                (lambda paddle, x: list(paddle.kthvalue(x, k, axis=axis, keepdim=keepdim))), \
                f"k={k}, axis={axis}, keepdim={keepdim}"
        if api == "mode":
            x = rng.permutation(max(x.size, 1)).reshape(shape).astype(dtype) if rng.random() < 0.5 else \
                rng.integers(0, 3, size=x.shape).astype(dtype)
            return dtype, variant, {"x": x}, (lambda paddle, x: list(paddle.mode(x, axis=axis, keepdim=keepdim))), \
                f"axis={axis}, keepdim={keepdim}"
        mode = pick(rng, ("avg", "min"))
        ax = None if rng.random() < 0.3 else axis
        return dtype, variant, {"x": x}, \
            (lambda paddle, x: paddle.median(x, axis=ax, keepdim=keepdim, mode=mode)), \
            f"axis={ax}, keepdim={keepdim}, mode={mode}"
    return make


def _gather_nd(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    depth = int(rng.integers(0 if rng.random() < 0.1 else 1, len(shape) + 1))
    lead = rand_shape(rng, int(rng.integers(1, 3)))
    index = np.stack([rng.integers(-shape[d] if rng.random() < 0.2 else 0, shape[d], size=lead)
                      for d in range(depth)], axis=-1) if depth else np.zeros(lead + [0], np.int64)
    index = index.astype(pick(rng, INTS))
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x, "index": index}, (lambda paddle, x, index: paddle.gather_nd(x, index)), \
        f"depth={depth}"


def _scatter(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1, max_rank=3)
    overwrite = bool(rng.random() < 0.5)
    m = int(rng.integers(1, shape[0] + 2))
    index = (rng.permutation(shape[0])[:m] if overwrite else rng.integers(0, shape[0], size=m)).astype(pick(rng, INTS))
    x = values(rng, dtype, shape, variant=variant)
    updates = values(rng, dtype, [len(index)] + shape[1:], variant=variant)
    return dtype, variant, {"x": x, "index": index, "updates": updates}, \
        (lambda paddle, x, index, updates: paddle.scatter(x, index, updates, overwrite=overwrite)), \
        f"overwrite={overwrite}"


def _scatter_nd_add(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special", "empty"))
    shape = shape_for(rng, "plain", min_rank=1)
    depth = int(rng.integers(1, len(shape) + 1))
    lead = rand_shape(rng, int(rng.integers(1, 3)))
    if variant == "empty":
        lead[0] = 0
    index = np.stack([rng.integers(0, shape[d], size=lead) for d in range(depth)], axis=-1).astype(pick(rng, INTS))
    x = values(rng, dtype, shape, variant=variant)
    updates = values(rng, dtype, lead + shape[depth:], variant=variant)
    return dtype, variant, {"x": x, "index": index, "updates": updates}, \
        (lambda paddle, x, index, updates: paddle.scatter_nd_add(x, index, updates)), f"depth={depth}"


def _take_along_axis(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1)
    axis = int(rng.integers(-len(shape), len(shape)))
    ishape = [int(rng.integers(1, d + 1)) for d in shape]
    ishape[axis] = int(rng.integers(1, 5))
    index = rng.integers(0, shape[axis], size=ishape).astype(pick(rng, INTS))
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x, "index": index}, \
        (lambda paddle, x, index: paddle.take_along_axis(x, index, axis)), f"axis={axis}"


def _put_along_axis(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1, max_rank=3)
    axis = int(rng.integers(-len(shape), len(shape)))
    ishape = list(shape)
    ishape[axis] = int(rng.integers(1, 4))
    index = rng.integers(0, shape[axis], size=ishape).astype(pick(rng, INTS))
    reduce = pick(rng, ("assign", "add", "mul", "mean", "amin", "amax"))
    if reduce == "assign":  # duplicate targets make assign order-dependent
        index = np.argsort(rng.random(shape), axis=axis).take(range(min(ishape[axis], shape[axis])), axis=axis)
        index = index.astype(pick(rng, INTS))
        ishape = list(index.shape)
    include_self = bool(rng.random() < 0.7)
    x = values(rng, dtype, shape, variant=variant)
    v = values(rng, dtype, ishape, variant=variant)
    return dtype, variant, {"x": x, "index": index, "v": v}, \
        (lambda paddle, x, index, v: paddle.put_along_axis(x, index, v, axis, reduce=reduce,
                                                           include_self=include_self)), \
        f"axis={axis}, reduce={reduce}, include_self={include_self}"


def _index_sample(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    n, m, k = (int(v) for v in rng.integers(1, 5, size=3))
    x = values(rng, dtype, [n, m], variant=variant)
    index = _index_array(rng, m, [n, k])
    return dtype, variant, {"x": x, "index": index}, (lambda paddle, x, index: paddle.index_sample(x, index)), ""


def _index_add(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1, max_rank=3)
    axis = int(rng.integers(-len(shape), len(shape)))
    index = _index_array(rng, shape[axis], int(rng.integers(1, 5)))
    vshape = list(shape)
    vshape[axis] = len(index)
    x = values(rng, dtype, shape, variant=variant)
    v = values(rng, dtype, vshape, variant=variant)
    return dtype, variant, {"x": x, "index": index, "v": v}, \
        (lambda paddle, x, index, v: paddle.index_add(x, index, axis, v)), f"axis={axis}"


def _masked_select(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "broadcast", "0d", "special", "empty"))
    shape = shape_for(rng, "plain" if variant == "broadcast" else variant)
    mshape = broadcast_partner(rng, shape) if variant == "broadcast" else list(shape)
    if variant == "broadcast" and rng.random() < 0.5:
        shape, mshape = mshape, shape
    x = values(rng, dtype, shape, variant=variant)
    mask = values(rng, "bool", mshape)
    return dtype, variant, {"x": x, "mask": mask}, (lambda paddle, x, mask: paddle.masked_select(x, mask)), ""


def _masked_fill(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "broadcast", "0d", "special"))
    shape = shape_for(rng, "plain" if variant == "broadcast" else variant)
    mshape = broadcast_partner(rng, shape) if variant == "broadcast" else list(shape)
    x = values(rng, dtype, shape, variant=variant)
    mask = values(rng, "bool", mshape)
    value = pick(rng, (0, -2, 3)) if dtype in INTS else float(pick(rng, (0.0, -2.5, np.inf)))
    return dtype, variant, {"x": x, "mask": mask}, (lambda paddle, x, mask: paddle.masked_fill(x, mask, value)), \
        f"value={value}"


def _nonzero(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "special", "empty"))
    x = values(rng, dtype, shape_for(rng, variant, min_rank=1), variant=variant, low=-1, high=1)
    if dtype in FLOATS:
        x[rng.random(x.shape) < 0.4] = 0.0
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.nonzero(x)), ""


def _searchsorted(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    lead = rand_shape(rng, int(rng.integers(0, 2)))
    seq = np.sort(values(rng, dtype, lead + [int(rng.integers(1, 6))]), axis=-1)
    vals = values(rng, dtype, lead + [int(rng.integers(1, 5))], variant=variant)
    right, out_int32 = bool(rng.random() < 0.5), bool(rng.random() < 0.3)
    return dtype, variant, {"seq": seq, "v": vals}, \
        (lambda paddle, seq, v: paddle.searchsorted(seq, v, out_int32=out_int32, right=right)), \
        f"right={right}, out_int32={out_int32}"


def _unique(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "0d", "empty"))
    shape = shape_for(rng, variant, max_rank=3)
    x = rng.integers(-2, 3, size=shape).astype(dtype)
    flags = [bool(rng.random() < 0.5) for _ in range(3)]
    axis = None if not shape or rng.random() < 0.6 else int(rng.integers(-len(shape), len(shape)))
    if variant == "empty":
        axis = None  # paddle 3.3.1's unique along an axis of an empty tensor crashes (SIGSEGV in its concat)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.unique(x, return_index=flags[0], return_inverse=flags[1], return_counts=flags[2],
                                         axis=axis)), \
        f"index/inverse/counts={flags}, axis={axis}"


def _repeat_interleave(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "0d"))
    shape = shape_for(rng, variant, max_rank=3)
    x = values(rng, dtype, shape)
    axis = None if not shape or rng.random() < 0.3 else int(rng.integers(-len(shape), len(shape)))
    if rng.random() < 0.5 or variant == "0d":
        repeats = int(rng.integers(0, 4))
        return dtype, variant, {"x": x}, (lambda paddle, x: paddle.repeat_interleave(x, repeats, axis=axis)), \
            f"repeats={repeats}, axis={axis}"
    n = int(np.prod(shape)) if axis is None else shape[axis]
    reps = rng.integers(0, 4, size=n).astype(pick(rng, INTS))
    return dtype, variant, {"x": x, "reps": reps}, \
        (lambda paddle, x, reps: paddle.repeat_interleave(x, reps, axis=axis)), f"repeats tensor, axis={axis}"


def _expand_as(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "plain", "0d"))
    shape = shape_for(rng, variant, max_rank=3)
    shape = [1 if rng.random() < 0.5 else d for d in shape]
    target = rand_shape(rng, int(rng.integers(0, 2))) + [d if d != 1 else int(rng.integers(1, 4)) for d in shape]
    x = values(rng, dtype, shape)
    y = values(rng, dtype, target)
    return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.expand_as(x, y)), f"to {target}"


def _diag(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1, max_rank=2)
    offset = int(rng.integers(-2, 3))
    padding = pick(rng, (0, 2)) if dtype in INTS else float(pick(rng, (0.0, 1.5)))
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.diag(x, offset=offset, padding_value=padding)), \
        f"offset={offset}, padding={padding}"


def _diag_like(api):
    def make(rng):
        dtype, variant = pick(rng, NUMERIC + (("bool",) if api == "diagonal" else ())), \
            pick(rng, ("plain", "plain", "special"))
        shape = shape_for(rng, variant, min_rank=2)
        a1, a2 = (int(v) for v in rng.choice(len(shape), size=2, replace=False))
        a1 = a1 - len(shape) if rng.random() < 0.3 else a1
        offset = int(rng.integers(-2, 3))
        x = values(rng, dtype, shape, variant=variant)
        return dtype, variant, {"x": x}, \
            (lambda paddle, x: getattr(paddle, api)(x, offset=offset, axis1=a1, axis2=a2)), \
            f"offset={offset}, axes={a1},{a2}"
    return make


def _kron(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    x = values(rng, dtype, shape_for(rng, variant, min_rank=1, max_rank=3), variant=variant)
    y = values(rng, dtype, shape_for(rng, variant, min_rank=1, max_rank=3), variant=variant)
    return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.kron(x, y)), ""


def _cross(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, variant, min_rank=1, max_rank=3)
    axis = int(rng.integers(-len(shape), len(shape)))
    shape[axis] = 3
    x = values(rng, dtype, shape, variant=variant)
    y = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.cross(x, y, axis=axis)), f"axis={axis}"


def _dist(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "broadcast", "special", "0d"))
    shape = shape_for(rng, "plain" if variant == "broadcast" else variant)
    other = broadcast_partner(rng, shape) if variant == "broadcast" else list(shape)
    p = float(pick(rng, (2.0, 1.0, 0.0, 3.0, np.inf, -np.inf)))
    x = values(rng, dtype, shape, variant=variant)
    y = values(rng, dtype, other, variant=variant)
    return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.dist(x, y, p)), f"p={p}"


def _mv(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    m, n = (int(v) for v in rng.integers(1, 5, size=2))
    x = values(rng, dtype, [m, n], variant=variant)
    v = values(rng, dtype, [n], variant=variant)
    return dtype, variant, {"x": x, "v": v}, (lambda paddle, x, v: paddle.mv(x, v)), ""


def _addmm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "broadcast", "special"))
    m, k, n = (int(v) for v in rng.integers(1, 5, size=3))
    ishape = [m, n] if variant != "broadcast" else pick(rng, ([1, n], [m, 1], [n], [1, 1]))
    beta, alpha = float(pick(rng, (1.0, 0.5, 0.0))), float(pick(rng, (1.0, -2.0)))
    i = values(rng, dtype, ishape, variant=variant)
    x = values(rng, dtype, [m, k], variant=variant)
    y = values(rng, dtype, [k, n], variant=variant)
    return dtype, variant, {"i": i, "x": x, "y": y}, \
        (lambda paddle, i, x, y: paddle.addmm(i, x, y, beta=beta, alpha=alpha)), f"beta={beta}, alpha={alpha}"


def _unfold(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    k = [int(v) for v in rng.integers(1, 3, size=2)]
    strides = [int(v) for v in rng.integers(1, 3, size=2)]
    pads = [int(v) for v in rng.integers(0, 2, size=4)]
    dil = [int(v) for v in rng.integers(1, 3, size=2)]
    hw = [int(rng.integers(k[i] * dil[i], k[i] * dil[i] + 3)) for i in range(2)]
    x = values(rng, dtype, [int(rng.integers(1, 3)), int(rng.integers(1, 3))] + hw, variant=variant)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.unfold(x, k, strides, pads, dil)), \
        f"k={k}, strides={strides}, pads={pads}, dil={dil}"


def _temporal_shift(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    seg = int(rng.integers(1, 4))
    n = seg * int(rng.integers(1, 3))
    fmt = pick(rng, ("NCHW", "NHWC"))
    c = int(rng.integers(1, 9))
    ratio = float(pick(rng, (0.25, 0.4, 0.125)))
    hw = rand_shape(rng, 2, 1, 3)
    shape = [n, c] + hw if fmt == "NCHW" else [n] + hw + [c]
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.temporal_shift(x, seg, ratio, data_format=fmt)), \
        f"seg={seg}, ratio={ratio}, {fmt}"


def _pad_full(rng):
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special", "0d"))
    shape = shape_for(rng, "plain" if variant == "0d" else variant, max_rank=4)
    pads = [int(v) for v in rng.integers(0, 3, size=2 * len(shape))]
    value = float(pick(rng, (0.0, 1.5, -2.0))) if dtype in FLOATS else float(pick(rng, (0, 3)))
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.nn.functional.pad(x, pads, value=value)), \
        f"pads={pads}, value={value}"


def _pixel_shuffle(api):
    def make(rng):
        dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
        fmt = pick(rng, ("NCHW", "NHWC"))
        r = int(rng.integers(1, 4))
        n = int(rng.integers(1, 3))
        if api == "pixel_shuffle":
            c, hw = r * r * int(rng.integers(1, 3)), rand_shape(rng, 2, 1, 3)
        else:
            c, hw = int(rng.integers(1, 3)), [r * int(v) for v in rng.integers(1, 3, size=2)]
        shape = [n, c] + hw if fmt == "NCHW" else [n] + hw + [c]
        x = values(rng, dtype, shape, variant=variant)
        return dtype, variant, {"x": x}, \
            (lambda paddle, x: getattr(paddle.nn.functional, api)(x, r, data_format=fmt)), f"r={r}, {fmt}"
    return make


def _channel_shuffle(rng):
    dtype, variant = pick(rng, FLOATS), "plain"
    fmt = pick(rng, ("NCHW", "NHWC"))
    g = int(rng.integers(1, 4))
    c = g * int(rng.integers(1, 3))
    hw = rand_shape(rng, 2, 1, 3)
    shape = [int(rng.integers(1, 3)), c] + hw if fmt == "NCHW" else [int(rng.integers(1, 3))] + hw + [c]
    x = values(rng, dtype, shape)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.channel_shuffle(x, g, data_format=fmt)), f"groups={g}, {fmt}"


def _crop(rng):
    dtype, variant = pick(rng, NUMERIC), "plain"
    shape = shape_for(rng, variant, min_rank=1)
    offsets = [int(rng.integers(0, d)) for d in shape]
    size = [int(rng.integers(1, d - o + 1)) for d, o in zip(shape, offsets)]
    if rng.random() < 0.3:
        size[0] = -1
    x = values(rng, dtype, shape)
    return (
        dtype,
        variant,
        {"x": x},
        (lambda paddle, x: paddle.crop(x, size, offsets)),
        f"shape={size}, offsets={offsets}",
    )


def _numel(rng):
    dtype, variant = pick(rng, ALL), pick(rng, ("plain", "0d", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.numel(x)), ""


def _assign_value(rng):
    dtype = pick(rng, ALL)
    variant = pick(rng, ("plain", "0d", "special"))
    shape = shape_for(rng, variant, max_rank=3)
    data = values(rng, dtype, shape, variant=variant if dtype in FLOATS else "plain", low=-1000, high=1000)
    return dtype, variant, {}, (lambda paddle: paddle.assign(data)), f"shape={shape}"


def _linspace(rng):
    dtype = pick(rng, NUMERIC)
    start = float(pick(rng, (0.0, -3.0, 2.5, 10.0)))
    stop = float(pick(rng, (1.0, 7.0, -4.5, 10.0)))
    num = int(pick(rng, (1, 2, 5, 7, 0)))
    if dtype in INTS:
        start, stop = float(int(start)), float(int(stop))
    return dtype, "plain", {}, (lambda paddle: paddle.linspace(start, stop, num, dtype=dtype)), \
        f"start={start}, stop={stop}, num={num}"


def _eye(rng):
    dtype = pick(rng, NUMERIC)
    n = int(rng.integers(0, 5))
    m = None if rng.random() < 0.4 else int(rng.integers(0, 5))
    return dtype, "plain", {}, (lambda paddle: paddle.eye(n, m, dtype=dtype)), f"n={n}, m={m}"


def _unbind(rng):
    dtype, variant = pick(rng, ALL), "plain"
    shape = shape_for(rng, variant, min_rank=1, max_rank=3)
    axis = int(rng.integers(-len(shape), len(shape)))
    x = values(rng, dtype, shape)
    return dtype, variant, {"x": x}, (lambda paddle, x: list(paddle.unbind(x, axis=axis))), f"axis={axis}"


# nn


def _conv_transpose(rng, nd: int, depthwise: bool = False):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    c_in = int(rng.integers(1, 4)) if not depthwise else int(rng.integers(2, 4))
    groups = c_in if depthwise else (c_in if c_in > 1 and rng.random() < 0.2 else 1)
    c_out_per_group = 1 if depthwise else int(rng.integers(1, 3))
    k = [int(v) for v in rng.integers(1, 4, size=nd)]
    stride = int(rng.integers(1, 3))
    dilation = int(rng.integers(1, 3))
    padding = int(rng.integers(0, 2))
    out_pad = int(rng.integers(0, max(stride, dilation))) if rng.random() < 0.3 else 0
    spatial = rand_shape(rng, nd, 1, 4)
    x = values(rng, dtype, [int(rng.integers(1, 3)), c_in] + spatial, variant=variant)
    w = values(rng, dtype, [c_in, c_out_per_group] + k)
    fn = "conv3d_transpose" if nd == 3 else "conv2d_transpose"
    return dtype, variant, {"x": x, "w": w}, \
        (lambda paddle, x, w: getattr(paddle.nn.functional, fn)(x, w, stride=stride, padding=padding,
                                                                output_padding=out_pad, dilation=dilation,
                                                                groups=groups)), \
        f"k={k}, stride={stride}, pad={padding}, out_pad={out_pad}, dil={dilation}, groups={groups}"


def _depthwise_conv2d(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    c_in = int(rng.integers(2, 4))
    c_out = c_in * int(rng.integers(1, 3))
    k = int(rng.integers(1, 4))
    stride, padding, dilation = int(rng.integers(1, 3)), int(rng.integers(0, 2)), int(rng.integers(1, 3))
    size = int(rng.integers(k * dilation, k * dilation + 4))
    fmt = pick(rng, ("NCHW", "NCHW", "NHWC"))
    shape = [int(rng.integers(1, 3)), c_in, size, size]
    if fmt == "NHWC":
        shape = [shape[0], size, size, c_in]
    x = values(rng, dtype, shape, variant=variant)
    w = values(rng, dtype, [c_out, 1, k, k])
    return dtype, variant, {"x": x, "w": w}, \
        (lambda paddle, x, w: paddle.nn.functional.conv2d(x, w, stride=stride, padding=padding, dilation=dilation,
                                                          groups=c_in, data_format=fmt)), \
        f"k={k}, stride={stride}, pad={padding}, dil={dilation}, {fmt}"


def _conv3d(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    c_in = int(rng.integers(1, 3))
    groups = c_in if c_in > 1 and rng.random() < 0.3 else 1
    c_out = groups * int(rng.integers(1, 3))
    k = int(rng.integers(1, 3))
    stride, padding, dilation = int(rng.integers(1, 3)), int(rng.integers(0, 2)), int(rng.integers(1, 3))
    spatial = [int(rng.integers(k * dilation, k * dilation + 3)) for _ in range(3)]
    x = values(rng, dtype, [1, c_in] + spatial, variant=variant)
    w = values(rng, dtype, [c_out, c_in // groups, k, k, k])
    return dtype, variant, {"x": x, "w": w}, \
        (lambda paddle, x, w: paddle.nn.functional.conv3d(x, w, stride=stride, padding=padding, dilation=dilation,
                                                          groups=groups)), \
        f"k={k}, stride={stride}, pad={padding}, dil={dilation}, groups={groups}"


def _pool3d(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    kind = pick(rng, ("max", "avg", "adaptive_avg", "adaptive_max"))
    size = [int(v) for v in rng.integers(2, 5, size=3)]
    x = values(rng, dtype, [1, int(rng.integers(1, 3))] + size, variant=variant)
    if kind.startswith("adaptive"):
        out = [int(rng.integers(1, s + 1)) for s in size]
        api = f"{kind}_pool3d"
        return dtype, variant, {"x": x}, (lambda paddle, x: getattr(paddle.nn.functional, api)(x, out)), \
            f"{api} {out}"
    k = int(rng.integers(1, min(size) + 1))
    stride, padding = int(rng.integers(1, 3)), int(rng.integers(0, (k // 2) + 1))
    kwargs = {"kernel_size": k, "stride": stride, "padding": padding, "ceil_mode": bool(rng.random() < 0.3)}
    if kind == "avg":
        kwargs["exclusive"] = bool(rng.random() < 0.5)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: getattr(paddle.nn.functional, f"{kind}_pool3d")(x, **kwargs)), f"{kind} {_describe(kwargs)}"


def _max_pool_with_index(spatial: int, size_limit: int):
    """max_pool{2,3}d / adaptive_max_pool{2,3}d with return_mask (max_pool{2,3}d_with_index)."""
    def make(rng):
        dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
        size = int(rng.integers(2, size_limit))
        shape = [1, int(rng.integers(1, 3))] + [size] * (spatial - 1) + [int(rng.integers(2, size_limit))]
        x = values(rng, dtype, shape, variant=variant)
        functional = f"max_pool{spatial}d"
        if rng.random() < 0.3:
            out = int(rng.integers(1, size + 1))
            return dtype, variant, {"x": x}, \
                (lambda paddle, x: list(getattr(paddle.nn.functional, "adaptive_" + functional)(
                    x, out, return_mask=True))), f"adaptive {out}"
        k = int(rng.integers(1, size + 1))
        stride, padding = int(rng.integers(1, 3)), int(rng.integers(0, (k // 2) + 1))
        return dtype, variant, {"x": x}, \
            (lambda paddle, x: list(getattr(paddle.nn.functional, functional)(x, k, stride, padding,
                                                                              return_mask=True))), \
            f"k={k}, stride={stride}, pad={padding}"
    return make


def _batch_norm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    rank = int(rng.integers(2, 6))
    c = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 3)), c] + rand_shape(rng, rank - 2, 1, 3)
    fmt = {2: "NC", 3: "NCL", 4: "NCHW", 5: "NCDHW"}[rank]
    if rank == 4 and rng.random() < 0.3:
        fmt, shape = "NHWC", [shape[0], shape[2], shape[3], c]
    eps = float(pick(rng, (1e-5, 1e-3)))
    mean = values(rng, dtype, [c])
    var = rng.uniform(0.1, 3.0, size=c).astype(dtype)
    scale, bias = values(rng, dtype, [c]), values(rng, dtype, [c])
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.batch_norm(
            x, _param(paddle, mean), _param(paddle, var), _param(paddle, scale), _param(paddle, bias),
            training=False, epsilon=eps, data_format=fmt)), f"{fmt}, eps={eps}"


def _instance_norm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    rank = int(rng.integers(3, 6))
    c = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 3)), c] + rand_shape(rng, rank - 2, 1, 4)
    eps = float(pick(rng, (1e-5, 1e-3)))
    affine = bool(rng.random() < 0.6)
    scale, bias = values(rng, dtype, [c]), values(rng, dtype, [c])
    x = values(rng, dtype, shape, variant=variant)
    fmt = {3: "NCL", 4: "NCHW", 5: "NCDHW"}[rank]
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.instance_norm(
            x, weight=_param(paddle, scale) if affine else None, bias=_param(paddle, bias) if affine else None,
            eps=eps, data_format=fmt)), f"eps={eps}, affine={affine}"


def _group_norm(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    groups = int(rng.integers(1, 4))
    c = groups * int(rng.integers(1, 3))
    rank = int(rng.integers(3, 6))
    shape = [int(rng.integers(1, 3)), c] + rand_shape(rng, rank - 2, 1, 4)
    eps = float(pick(rng, (1e-5, 1e-3)))
    affine = bool(rng.random() < 0.6)
    scale, bias = values(rng, dtype, [c]), values(rng, dtype, [c])
    x = values(rng, dtype, shape, variant=variant)
    fmt = {3: "NCL", 4: "NCHW", 5: "NCDHW"}[rank]
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.group_norm(
            x, groups, epsilon=eps, weight=_param(paddle, scale) if affine else None,
            bias=_param(paddle, bias) if affine else None, data_format=fmt)), \
        f"groups={groups}, eps={eps}, affine={affine}"


def _prelu(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    rank = int(rng.integers(2, 5))
    shape = shape_for(rng, "plain", min_rank=rank, max_rank=rank)
    fmt = "NCHW" if rank != 4 or rng.random() < 0.7 else "NHWC"
    c = shape[1] if fmt == "NCHW" else shape[-1]
    per_channel = bool(rng.random() < 0.6)
    w = values(rng, dtype, [c] if per_channel else [1], low=-1, high=1)
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.prelu(x, _param(paddle, w), data_format=fmt)), \
        f"{fmt}, per_channel={per_channel}"


def _interp(mode, nd):
    fmts = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}[nd]

    def make(rng):
        dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
        fmt = pick(rng, fmts)
        spatial = rand_shape(rng, nd, 1, 5)
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        shape = [n, c] + spatial if fmt[1] == "C" else [n] + spatial + [c]
        kwargs = {"mode": mode, "data_format": fmt}
        if rng.random() < 0.5:
            kwargs["size"] = [int(v) for v in rng.integers(1, 8, size=nd)]
        else:
            kwargs["scale_factor"] = float(pick(rng, (2.0, 0.5, 1.5, 3.0)))
        if mode != "nearest":
            kwargs["align_corners"] = bool(rng.random() < 0.4)
            if mode == "bilinear" and not kwargs["align_corners"]:
                kwargs["align_mode"] = int(rng.integers(0, 2))
        x = values(rng, dtype, shape, variant=variant)
        return dtype, variant, {"x": x}, (lambda paddle, x: paddle.nn.functional.interpolate(x, **kwargs)), \
            _describe(kwargs)
    return make


def _grid_sample(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    x = values(rng, dtype, [n, c] + rand_shape(rng, 2, 1, 5), variant=variant)
    grid = rng.uniform(-1.3, 1.3, size=[n] + rand_shape(rng, 2, 1, 4) + [2]).astype(dtype)
    mode = pick(rng, ("bilinear", "nearest"))
    pad = pick(rng, ("zeros", "reflection", "border"))
    align = bool(rng.random() < 0.5)
    return dtype, variant, {"x": x, "grid": grid}, \
        (lambda paddle, x, grid: paddle.nn.functional.grid_sample(x, grid, mode=mode, padding_mode=pad,
                                                                  align_corners=align)), \
        f"mode={mode}, padding={pad}, align_corners={align}"


def _affine_grid(rng):
    dtype, variant = pick(rng, FLOATS), "plain"
    n = int(rng.integers(1, 3))
    spatial = rand_shape(rng, 3 if rng.random() < 0.3 else 2, 1, 5)
    out_shape = [n, int(rng.integers(1, 3))] + spatial
    theta = values(rng, dtype, [n, len(spatial), len(spatial) + 1], low=-1.5, high=1.5)
    align = bool(rng.random() < 0.5)
    return dtype, variant, {"theta": theta}, \
        (lambda paddle, theta: paddle.nn.functional.affine_grid(theta, out_shape, align_corners=align)), \
        f"out_shape={out_shape}, align_corners={align}"


def _embedding(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "0d", "special"))
    vocab, dim = int(rng.integers(2, 7)), int(rng.integers(1, 5))
    ids = _index_array(rng, vocab, shape_for(rng, variant, max_rank=3))
    pad = None if rng.random() < 0.5 else int(rng.integers(-vocab, vocab))
    w = values(rng, dtype, [vocab, dim], variant=variant)
    return dtype, variant, {"ids": ids}, \
        (lambda paddle, ids: paddle.nn.functional.embedding(ids, _param(paddle, w), padding_idx=pad)), \
        f"vocab={vocab}, padding_idx={pad}"


def _maxout(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    groups = int(rng.integers(2, 4))
    c = groups * int(rng.integers(1, 3))
    axis = pick(rng, (1, -1))
    hw = rand_shape(rng, 2, 1, 3)
    shape = [int(rng.integers(1, 3)), c] + hw if axis == 1 else [int(rng.integers(1, 3))] + hw + [c]
    x = values(rng, dtype, shape, variant=variant)
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.nn.functional.maxout(x, groups, axis=axis)), \
        f"groups={groups}, axis={axis}"


def _label_smooth(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, "plain", min_rank=1, max_rank=3)
    eps = float(pick(rng, (0.1, 0.0, 0.5)))
    x = values(rng, dtype, shape, variant=variant, low=0, high=1)
    if rng.random() < 0.4:
        prior = rng.dirichlet(np.ones(shape[-1])).reshape(1, shape[-1]).astype(dtype)
        return dtype, variant, {"x": x, "prior": prior}, \
            (lambda paddle, x, prior: paddle.nn.functional.label_smooth(x, prior, epsilon=eps)), f"eps={eps}, prior"
    return dtype, variant, {"x": x}, (lambda paddle, x: paddle.nn.functional.label_smooth(x, epsilon=eps)), \
        f"eps={eps}"


def _dropout(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "0d", "special", "empty"))
    x = values(rng, dtype, shape_for(rng, variant), variant=variant)
    p = float(pick(rng, (0.0, 0.3, 0.5, 1.0)))
    mode = pick(rng, ("upscale_in_train", "downscale_in_infer"))
    return dtype, variant, {"x": x}, \
        (lambda paddle, x: paddle.nn.functional.dropout(x, p, training=False, mode=mode)), f"p={p}, mode={mode}"


# losses


def _probabilities(rng, dtype, shape, variant):
    a = rng.uniform(0.0, 1.0, size=shape).astype(dtype)
    if variant == "special" and a.size:
        a[rng.random(shape) < 0.3] = pick(rng, (0.0, 1.0))
    return a


def _log_loss(rng):
    dtype, variant = "float32", pick(rng, ("plain", "plain", "special"))
    n = int(rng.integers(1, 6))
    eps = float(pick(rng, (1e-4, 1e-7, 0.0)))
    x = _probabilities(rng, dtype, [n, 1], variant)
    y = _probabilities(rng, dtype, [n, 1], "plain")
    return dtype, variant, {"x": x, "y": y}, (lambda paddle, x, y: paddle.nn.functional.log_loss(x, y, eps)), \
        f"eps={eps}"


def _bce_loss(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, "plain", min_rank=1, max_rank=3)
    x = _probabilities(rng, dtype, shape, variant)
    y = _probabilities(rng, dtype, shape, "plain")
    return dtype, variant, {"x": x, "y": y}, \
        (lambda paddle, x, y: paddle.nn.functional.binary_cross_entropy(x, y, reduction="none")), ""


def _kldiv_loss(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, "plain", min_rank=1, max_rank=3)
    x = values(rng, dtype, shape, variant=variant, low=-3, high=0)
    log_target = bool(rng.random() < 0.4)
    y = values(rng, dtype, shape, low=-3, high=0) if log_target else _probabilities(rng, dtype, shape, variant)
    reduction = pick(rng, ("none", "mean", "sum", "batchmean"))
    return dtype, variant, {"x": x, "y": y}, \
        (lambda paddle, x, y: paddle.nn.functional.kl_div(x, y, reduction=reduction, log_target=log_target)), \
        f"reduction={reduction}, log_target={log_target}"


def _nll_loss(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    # [N, C] only: paddle 3.3.1's nll_loss over [N, C, H, W] aborts or hangs the process now and then
    n, c = int(rng.integers(1, 5)), int(rng.integers(2, 5))
    x = values(rng, dtype, [n, c], variant=variant, low=-4, high=0)
    label = rng.integers(0, c, size=[n]).astype("int64")
    ignore = pick(rng, (-100, 0, 1))
    reduction = pick(rng, ("none", "mean", "sum"))
    use_weight = bool(rng.random() < 0.4)
    weight = rng.uniform(0.2, 2.0, size=c).astype(dtype)
    return dtype, variant, {"x": x, "label": label}, \
        (lambda paddle, x, label: paddle.nn.functional.nll_loss(
            x, label, weight=_param(paddle, weight) if use_weight else None, ignore_index=ignore,
            reduction=reduction)), f"ignore={ignore}, reduction={reduction}, weight={use_weight}"


def _sigmoid_ce(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, "plain", min_rank=1, max_rank=3)
    x = values(rng, dtype, shape, variant=variant, low=-6, high=6)
    y = _probabilities(rng, dtype, shape, "plain")
    return dtype, variant, {"x": x, "y": y}, \
        (lambda paddle, x, y: paddle.nn.functional.binary_cross_entropy_with_logits(x, y, reduction="none")), ""


def _softmax_ce(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, "plain", min_rank=1, max_rank=3)
    axis = int(rng.integers(-len(shape), len(shape)))
    soft = bool(rng.random() < 0.4)
    x = values(rng, dtype, shape, variant=variant)
    lshape = list(shape)
    if soft:
        label = rng.dirichlet(np.ones(shape[axis]), size=int(np.prod(shape)) // shape[axis]).astype(dtype)
        label = np.moveaxis(label.reshape([d for i, d in enumerate(shape) if i != axis % len(shape)] + [shape[axis]]),
                            -1, axis % len(shape))
    else:
        lshape[axis] = 1
        label = rng.integers(0, shape[axis], size=lshape).astype("int64")
    ignore = int(pick(rng, (-100, 0)))
    return dtype, variant, {"x": x, "label": label}, \
        (lambda paddle, x, label: list(paddle.nn.functional.softmax_with_cross_entropy(
            x, label, soft_label=soft, ignore_index=ignore, axis=axis, return_softmax=True))), \
        f"axis={axis}, soft={soft}, ignore={ignore}"


def _huber_loss(rng):
    dtype, variant = pick(rng, FLOATS), pick(rng, ("plain", "plain", "special"))
    shape = shape_for(rng, "plain", min_rank=1, max_rank=3)
    delta = float(pick(rng, (1.0, 0.5, 2.0)))
    x = values(rng, dtype, shape, variant=variant)
    y = values(rng, dtype, shape)
    return dtype, variant, {"x": x, "y": y}, \
        (lambda paddle, x, y: paddle.nn.functional.smooth_l1_loss(x, y, reduction="none", delta=delta)), \
        f"delta={delta}"


OPS += [
    # more elementwise math
    unary("atan", P("atan")),
    unary("tan", P("tan")),
    unary("asin", P("asin"), low=-1.2, high=1.2),
    unary("acos", P("acos"), low=-1.2, high=1.2),
    unary("sinh", P("sinh")),
    unary("cosh", P("cosh")),
    unary("asinh", P("asinh")),
    unary("acosh", P("acosh"), low=0.5, high=6.0),
    unary("atanh", P("atanh"), low=-1.2, high=1.2),
    unary("erf", P("erf")),
    unary("erfinv", P("erfinv"), low=-1.1, high=1.1),
    unary("expm1", P("expm1")),
    unary("lgamma", P("lgamma")),
    unary("digamma", P("digamma")),
    unary("i0", P("i0")),
    unary("i0e", P("i0e")),
    unary("i1", P("i1")),
    unary("i1e", P("i1e")),
    unary("trunc", P("trunc"), NUMERIC),
    unary("logit", P("logit"), low=-0.2, high=1.2, attrs=_logit_attrs),
    unary("celu", F("celu"), attrs=_celu_attrs),
    unary("stanh", P("stanh"), attrs=_stanh_attrs),
    unary("brelu", F("hardtanh"), attrs=_hardtanh_attrs),
    custom("bitwise_not", _bitwise_not),
    binary("elementwise_fmax", P("fmax")),
    binary("elementwise_fmin", P("fmin")),
    binary("atan2", P("atan2")),
    binary("elementwise_heaviside", P("heaviside")),
    binary("copysign", P("copysign")),
    binary("nextafter", P("nextafter"), FLOATS),
    binary("bitwise_and", P("bitwise_and"), INTS + ("bool",), low=-300, high=300),
    binary("bitwise_or", P("bitwise_or"), INTS + ("bool",), low=-300, high=300),
    binary("bitwise_xor", P("bitwise_xor"), INTS + ("bool",), low=-300, high=300),
    custom("lerp", _lerp),
    # reductions and scans
    reduction("reduce_amax", P("amax")),
    reduction("reduce_amin", P("amin")),
    reduction("reduce_prod", P("prod")),
    custom("frobenius_norm", _frobenius_norm),
    custom("squared_l2_norm", _squared_l2_norm),
    custom("clip_by_norm", _clip_by_norm),
    custom("mean", _mean_all),
    custom("cumprod", _scan("cumprod", NUMERIC, "dim")),
    custom("logcumsumexp", _scan("logcumsumexp", FLOATS, "axis")),
    custom("kthvalue", _kth("kthvalue")),
    custom("mode", _kth("mode")),
    custom("median", _kth("median")),
    # indexing
    custom("gather_nd", _gather_nd),
    custom("scatter", _scatter),
    custom("scatter_nd_add", _scatter_nd_add),
    custom("take_along_axis", _take_along_axis),
    custom("put_along_axis", _put_along_axis),
    custom("index_sample", _index_sample),
    custom("index_add", _index_add),
    custom("masked_select", _masked_select),
    custom("masked_fill", _masked_fill),
    custom("where_index", _nonzero),
    custom("searchsorted", _searchsorted),
    custom("unique", _unique),
    custom("repeat_interleave", _repeat_interleave),
    custom("expand_as_v2", _expand_as),
    # linear algebra
    custom("diag_v2", _diag),
    custom("diagonal", _diag_like("diagonal")),
    custom("trace", _diag_like("trace")),
    custom("kron", _kron),
    custom("cross", _cross),
    custom("dist", _dist),
    custom("mv", _mv),
    custom("addmm", _addmm),
    # shape and creation
    custom("unfold", _unfold),
    custom("temporal_shift", _temporal_shift),
    custom("pad", _pad_full),
    custom("pixel_shuffle", _pixel_shuffle("pixel_shuffle")),
    custom("pixel_unshuffle", _pixel_shuffle("pixel_unshuffle")),
    custom("channel_shuffle", _channel_shuffle),
    custom("crop_tensor", _crop),
    custom("size", _numel),
    custom("assign_value", _assign_value),
    custom("linspace", _linspace),
    custom("eye", _eye),
    custom("unbind", _unbind),
    # nn
    custom("conv2d_transpose", lambda rng: _conv_transpose(rng, 2)),
    custom("depthwise_conv2d_transpose", lambda rng: _conv_transpose(rng, 2, depthwise=True)),
    custom("depthwise_conv2d", _depthwise_conv2d),
    custom("conv3d", _conv3d),
    custom("conv3d_transpose", lambda rng: _conv_transpose(rng, 3)),
    custom("pool3d", _pool3d),
    custom("max_pool2d_with_index", _max_pool_with_index(2, 6)),
    custom("batch_norm", _batch_norm),
    custom("instance_norm", _instance_norm),
    custom("group_norm", _group_norm),
    custom("prelu", _prelu),
    custom("bilinear_interp_v2", _interp("bilinear", 2)),
    custom("nearest_interp_v2", _interp("nearest", 2)),
    custom("linear_interp_v2", _interp("linear", 1)),
    custom("bicubic_interp_v2", _interp("bicubic", 2)),
    custom("trilinear_interp_v2", _interp("trilinear", 3)),
    custom("grid_sampler", _grid_sample),
    custom("affine_grid", _affine_grid),
    custom("lookup_table_v2", _embedding),
    custom("maxout", _maxout),
    custom("label_smooth", _label_smooth),
    custom("dropout", _dropout),
    # losses
    custom("log_loss", _log_loss),
    custom("bce_loss", _bce_loss),
    custom("kldiv_loss", _kldiv_loss),
    custom("nll_loss", _nll_loss),
    custom("sigmoid_cross_entropy_with_logits", _sigmoid_ce),
    custom("softmax_with_cross_entropy", _softmax_ce),
    custom("huber_loss", _huber_loss),
]


# -- vision ops (generator 4), max_pool3d_with_index and set_value (5, 6) ----------------------------------------------


def _deform_conv(rng):
    dtype, variant = "float32", pick(rng, ("plain", "plain", "special"))
    n, c_in, c_out, k = (
        int(rng.integers(1, 3)),
        int(rng.integers(1, 3)),
        int(rng.integers(1, 3)),
        int(rng.integers(1, 4)),
    )
    stride, padding = int(rng.integers(1, 3)), int(rng.integers(0, 2))
    size = int(rng.integers(k, k + 4))
    out = (size + 2 * padding - k) // stride + 1
    x = values(rng, dtype, [n, c_in, size, size], variant=variant)
    offset = values(rng, dtype, [n, 2 * k * k, out, out], low=-1.5, high=1.5)
    w = values(rng, dtype, [c_out, c_in, k, k])
    with_mask = bool(rng.random() < 0.5)
    feeds = {"x": x, "offset": offset, "w": w}
    if with_mask:
        feeds["mask"] = values(rng, dtype, [n, k * k, out, out], low=0.0, high=1.0)

        def build(paddle, x, offset, w, mask):
            return paddle.vision.ops.deform_conv2d(x, offset, w, stride=stride, padding=padding, mask=mask)
    else:
        def build(paddle, x, offset, w):
            return paddle.vision.ops.deform_conv2d(x, offset, w, stride=stride, padding=padding)
    return dtype, variant, feeds, build, f"k={k}, stride={stride}, pad={padding}, mask={with_mask}"


def _roi_align(rng):
    dtype, variant = "float32", "plain"
    c, h, w = int(rng.integers(1, 3)), int(rng.integers(4, 9)), int(rng.integers(4, 9))
    x = values(rng, dtype, [1, c, h, w])
    count = int(rng.integers(1, 4))
    x0, y0 = rng.uniform(0, w - 1, count), rng.uniform(0, h - 1, count)
    boxes = np.stack([x0, y0, x0 + rng.uniform(0.5, w, count), y0 + rng.uniform(0.5, h, count)], 1).astype(dtype)
    out_size = int(rng.integers(1, 4))
    scale = float(pick(rng, (1.0, 0.5)))
    ratio = int(pick(rng, (-1, 1, 2)))
    aligned = bool(rng.random() < 0.5)
    num = np.array([count], np.int32)
    return dtype, variant, {"x": x, "boxes": boxes, "num": num}, \
        (lambda paddle, x, boxes, num: paddle.vision.ops.roi_align(x, boxes, num, out_size, spatial_scale=scale,
                                                                   sampling_ratio=ratio, aligned=aligned)), \
        f"out={out_size}, scale={scale}, ratio={ratio}, aligned={aligned}"


def _yolo_box(rng):
    dtype, variant = "float32", "plain"
    anchors = [10, 13, 16, 30] if rng.random() < 0.5 else [10, 13, 16, 30, 33, 23]
    classes = int(rng.integers(1, 4))
    h = w = int(rng.integers(2, 5))
    x = values(rng, dtype, [1, len(anchors) // 2 * (5 + classes), h, w])
    img = np.array([[int(rng.integers(32, 128)), int(rng.integers(32, 128))]], np.int32)
    threshold = float(pick(rng, (0.01, 0.5)))
    clip = bool(rng.random() < 0.5)
    scale_xy = float(pick(rng, (1.0, 1.05)))
    return dtype, variant, {"x": x, "img": img}, \
        (lambda paddle, x, img: paddle.vision.ops.yolo_box(x, img, anchors, classes, threshold, 32,
                                                           clip_bbox=clip, scale_x_y=scale_xy)), \
        f"anchors={anchors}, classes={classes}, thresh={threshold}, clip={clip}, scale_xy={scale_xy}"


def _prior_box(rng):
    dtype, variant = "float32", "plain"
    h = w = int(rng.integers(2, 5))
    x = values(rng, dtype, [1, 2, h, w])
    image = values(rng, dtype, [1, 3, h * 8, w * 8])
    min_sizes = [float(pick(rng, (8.0, 16.0)))]
    max_sizes = [min_sizes[0] * 2] if rng.random() < 0.5 else None
    ratios = [1.0, 2.0] if rng.random() < 0.5 else [1.0]
    flip, clip = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
    return dtype, variant, {"x": x, "image": image}, \
        (lambda paddle, x, image: paddle.vision.ops.prior_box(x, image, min_sizes, max_sizes, ratios, flip=flip,
                                                              clip=clip)), \
        f"min={min_sizes}, max={max_sizes}, ratios={ratios}, flip={flip}, clip={clip}"


def _set_value(rng):
    """`x[...] = v` in a static program: Paddle's set_value (a scalar) or set_value_with_tensor (a tensor)."""
    dtype, variant = pick(rng, NUMERIC), pick(rng, ("plain", "plain", "special"))
    shape = rand_shape(rng, int(rng.integers(1, 4)), 2, 5)
    x = values(rng, dtype, shape, variant=variant if dtype.startswith("float") else "plain")
    start = int(rng.integers(-shape[0], shape[0]))
    stop = int(rng.integers(start % shape[0] + 1, shape[0] + 1))
    step = int(pick(rng, (1, 1, 2)))
    index = slice(start % shape[0], stop, step)
    if rng.random() < 0.5:
        scalar = float(rng.integers(-3, 4)) if dtype.startswith("float") else int(rng.integers(-3, 4))

        def build(paddle, x):  # paddle.static.setitem: out of place (`y[i] = v` on an assign is pruned away)
            return paddle.static.setitem(x, index, scalar)
        return dtype, variant, {"x": x}, build, f"[{index.start}:{index.stop}:{index.step}] = {scalar}"
    rows = len(range(*index.indices(shape[0])))
    v = values(rng, dtype, [rows] + shape[1:])

    def build_tensor(paddle, x, v):
        return paddle.static.setitem(x, index, v)
    return dtype, variant, {"x": x, "v": v}, build_tensor, f"[{index.start}:{index.stop}:{index.step}] = tensor"


VISION_OPS = [
    custom("deformable_conv", _deform_conv),
    custom("roi_align", _roi_align),
    custom("yolo_box", _yolo_box),
    custom("prior_box", _prior_box),
    custom("max_pool3d_with_index", _max_pool_with_index(3, 5)),
    custom("set_value", _set_value),
]


def generate_cases(seed: int, cases_per_op: int = CASES_PER_OP) -> list:
    """Every op's `cases_per_op` cases for `seed`, in a fixed order."""
    cases = []
    for spec in OPS + VISION_OPS:
        for k in range(cases_per_op):
            rng = np.random.default_rng([seed, zlib.crc32(spec.op_type.encode()), k])
            dtype, variant, feeds, build, attrs = spec.make(rng)
            cases.append(Case(f"{spec.op_type}.{seed}.{k}", spec.op_type, dtype, variant, feeds, build, attrs))
    return cases


# -- the rank and dtype sweep ------------------------------------------------------------------------------------
# Derived from the generated cases, so every op gets them whatever the seed drew: "0d" (the op's first drawn 0-d
# case, or else a copy of its first plain case with each input cut to its first element), "1" (the 0-d
# case with every 0-d input shaped [1]), "0d+1" (a case of several inputs with the first 0-d and the others [1])
# and a float64 copy of the op's first float32 case when no float64 case was drawn. Cases Paddle rejects (an axis
# a 0-d input lacks, a dtype the op does not take) are discarded like any other. The sweep is exported in every
# program format (legacy and PIR programs of paddle 3.3.1, legacy programs of paddle 2.6.2): how Paddle
# Inference shapes a result may depend on the format, so each format is judged against Paddle Inference on itself.
SWEEP_VARIANTS = ("0d", "1", "0d+1")


def _derived(case: Case, tag: str, variant: str, dtype: str, feeds: dict) -> Case:
    return Case(f"{case.case_id}.{tag}", case.op_type, dtype, variant, feeds, case.build, case.attrs)


def _first_element(array: np.ndarray) -> np.ndarray:
    return np.array(array.reshape(-1)[0], dtype=array.dtype)


def sweep_cases(seed: int, cases_per_op: int = CASES_PER_OP) -> list:
    """The rank and dtype sweep of `seed` (see above), in a fixed order."""
    by_op: dict = {}
    for case in generate_cases(seed, cases_per_op):
        by_op.setdefault(case.op_type, []).append(case)
    derived = []
    for cases in by_op.values():
        zero_d = [c for c in cases if c.variant == "0d" and c.feeds][:1]
        if zero_d:
            derived.append(_derived(zero_d[0], "z", "0d", zero_d[0].dtype, dict(zero_d[0].feeds)))
        else:
            plain = next((c for c in cases if c.variant in ("plain", "broadcast") and c.feeds
                          and all(a.size for a in c.feeds.values())), None)
            if plain is not None:
                zero_d = [_derived(plain, "d0", "0d", plain.dtype,
                                   {n: _first_element(a) for n, a in plain.feeds.items()})]
                derived.append(zero_d[0])
        if zero_d:
            base = zero_d[0]
            derived.append(_derived(base, "d1", "1", base.dtype,
                                    {n: a.reshape(1) if a.ndim == 0 else a for n, a in base.feeds.items()}))
            names = [n for n, a in base.feeds.items() if a.ndim == 0]
            if len(names) > 1:
                derived.append(_derived(base, "d01", "0d+1", base.dtype,
                                        {n: a.reshape(1) if n in names[1:] else a for n, a in base.feeds.items()}))
        if not any(c.dtype == "float64" for c in cases):
            single = next((c for c in cases if c.dtype == "float32"), None)
            if single is not None:
                derived.append(_derived(single, "f64", single.variant, "float64",
                                        {n: a.astype(np.float64) if a.dtype == np.float32 else a
                                         for n, a in single.feeds.items()}))
    return derived
