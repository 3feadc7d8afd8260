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
from typing import Callable

import numpy as np

# Bump when a case's inputs, attributes or the set of ops change: it keys the cache of generated programs.
GENERATOR_VERSION = 1
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


def generate_cases(seed: int, cases_per_op: int = CASES_PER_OP) -> list:
    """Every op's `cases_per_op` cases for `seed`, in a fixed order."""
    cases = []
    for spec in OPS:
        for k in range(cases_per_op):
            rng = np.random.default_rng([seed, zlib.crc32(spec.op_type.encode()), k])
            dtype, variant, feeds, build, attrs = spec.make(rng)
            cases.append(Case(f"{spec.op_type}.{seed}.{k}", spec.op_type, dtype, variant, feeds, build, attrs))
    return cases
