"""Converters: reductions (reduce_mean/max/min/sum/any/all, mean, logsumexp), arg_max/arg_min, cumsum,
top_k/top_k_v2 and argsort.

NNAdapter has REDUCE_MEAN/MAX/SUM only: reduce_min is max of the negation (the bitwise complement
-1 - x for integers, which cannot overflow), reduce_any/all go through INT32 and NOT, logsumexp is the
stable max + log(sum(exp(x - max))). Paddle's reduce_* read `dim` (default [0]); `reduce_all` or an
empty `dim` reduce every axis. logsumexp reads `axis`, whose op default is [] (every axis). argsort is a TOP_K over
the whole axis, which orders equal keys by index: float keys, and any key sorted `stable`; an unstable argsort of
integer or bool keys, which tie as a rule, is left to the host kernel, which orders them as Paddle's std::sort does.
top_k / top_k_v2 of integer keys and top_k_v2 with sorted=False are left to the host kernel likewise (Paddle's
order of equal keys is std::partial_sort's or std::nth_element's). Float keys stay on TOP_K with run-time
conditions (context.py) that no two keys picked tie, nor the last picked with one left out: where they do
(CenterNet's mostly-zero heatmap), the engine runs the op on the host kernel for those shapes.

Imports only the converter toolkit (op_view, attrs, emit, context, registry) and the standard.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import input_dims, known_dim, var_precision
from converters.context import ConversionContext
from converters.emit import FLOATS, binary, cast_to
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision


def reduce_axes(op, dim_attr: str = "dim", all_attr: str = "reduce_all", default=(0,)) -> list:
    """The axes to reduce; [] means every axis (reduce_all, or an empty list, as Paddle decides)."""
    v = OpView(op)
    if v.attr_bool(all_attr, False):
        return []
    return v.attr_ints(dim_attr, list(default))


def _axes_for(ctx: ConversionContext, x, axes: list) -> list:
    # A 0-D input has no axis to name: reducing it over "every axis" keeps it 0-D, as Paddle does.
    return [] if ctx.rank(x) == 0 else axes


def _reduce(ctx: ConversionContext, type: T, x, axes: list, keepdim: bool, out):
    ctx.add(type, [x, ctx.const_i32(axes), ctx.const_bool(keepdim)], [out])
    return out


def _out_dtype(op) -> Precision | None:
    v = OpView(op)
    code = v.attr_int("out_dtype", -1)
    return None if code < 0 else v.attr_precision("out_dtype", -1)


def check_out_dtype(op, ctx) -> str | None:
    v = OpView(op)
    code = v.attr_int("out_dtype", -1)
    if code >= 0 and v.attr_precision("out_dtype", -1) is None:
        return f"out_dtype {code} is not a tensor element type NNAdapter has"
    return None


def _finish(ctx: ConversionContext, op, reduced, precision: Precision | None):
    """Bind `reduced` (a temp) to the output, with a CAST when `out_dtype` asks for another precision."""
    v = OpView(op)
    if precision is None or precision == reduced.type.precision:
        ctx.bind(v.output("Out"), reduced)
    else:
        cast_to(ctx, reduced, precision, ctx.output(v.output("Out")))


def _reduce_to_output(ctx: ConversionContext, op, type: T, x, axes, keepdim):
    v = OpView(op)
    precision = _out_dtype(op)
    if precision is None or precision == x.type.precision:
        return _reduce(ctx, type, x, axes, keepdim, ctx.output(v.output("Out")))
    reduced = _reduce(ctx, type, x, axes, keepdim, ctx.temp(v.output("Out"), "reduced"))
    _finish(ctx, op, reduced, precision)


@converter("reduce_mean", emits=[T.REDUCE_MEAN, T.CAST], check=check_out_dtype)
def convert_reduce_mean(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    _reduce_to_output(ctx, v.op, T.REDUCE_MEAN, x, _axes_for(ctx, x, reduce_axes(v.op)), v.attr_bool("keep_dim", False))


@converter("mean", emits=[T.REDUCE_MEAN])
def convert_mean(ctx: ConversionContext, v: OpView) -> None:
    """The mean of every element: a 0-D result, as Paddle 3's mean op."""
    x = ctx.input(v.input("X"))
    _reduce(ctx, T.REDUCE_MEAN, x, [], False, ctx.output(v.output("Out")))


@converter("reduce_max", emits=[T.REDUCE_MAX, T.CAST], check=check_out_dtype)
def convert_reduce_max(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    _reduce_to_output(ctx, v.op, T.REDUCE_MAX, x, _axes_for(ctx, x, reduce_axes(v.op)), v.attr_bool("keep_dim", False))


@converter("reduce_sum", emits=[T.REDUCE_SUM, T.CAST], check=check_out_dtype)
def convert_reduce_sum(ctx: ConversionContext, v: OpView) -> None:
    """Paddle sums bool and int32 inputs into int64 unless `out_dtype` says otherwise; the input is cast
    first so the sum accumulates in the output's type, as Paddle's kernel does."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    precision = _out_dtype(v.op)
    if precision is None:
        precision = Precision.INT64 if x.type.precision in (Precision.BOOL8, Precision.INT32) else x.type.precision
    x = ctx.cast(x, precision, var, "sum_input")
    _reduce(ctx, T.REDUCE_SUM, x, _axes_for(ctx, x, reduce_axes(v.op)), v.attr_bool("keep_dim", False),
            ctx.output(var))


# reduce_prod: NNAdapter has no product reduction. Over axes of known length (Deformable DETR and DINO multiply
# each level's [H, W] into its size, an axis of 2), the product is the axis's slices multiplied in index order, as
# Paddle's CPU kernel accumulates them (rounding aside: its float reduction may pair them otherwise).
MAX_PRODUCT_FACTORS = 64  # slices multiplied along all reduced axes together; longer products stay on the host


def _check_reduce_prod(op, ctx):
    reason = check_out_dtype(op, ctx)
    if reason:
        return reason
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return None
    if not dims:
        return "a 0-D input (the host kernel gives it back)"
    axes = _dropped_axes(len(dims), reduce_axes(op))
    lengths = [dims[a] for a in axes]
    if not all(known_dim(n) for n in lengths):
        return "a reduced axis has a length known only at run time (the product is built from its slices)"
    if any(int(n) == 0 for n in lengths):
        return "a reduced axis is empty (the product of nothing is 1, which the host kernel gives)"
    if sum(int(n) for n in lengths) > MAX_PRODUCT_FACTORS:
        return (f"the reduced axes hold {sum(int(n) for n in lengths)} slices, more than the "
                f"{MAX_PRODUCT_FACTORS} multiplied on a device")
    return None


@converter("reduce_prod", emits=[T.SLICE, T.MUL, T.SQUEEZE, T.CAST], check=_check_reduce_prod)
def convert_reduce_prod(ctx: ConversionContext, v: OpView) -> None:
    """The product over each reduced axis: its slices (kept as length-1 axes) multiplied in index order; the
    reduced axes squeezed away unless keep_dim."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    rank = ctx.rank(x)
    axes = _dropped_axes(rank, reduce_axes(v.op))
    product = x
    for axis in axes:
        length = int(ctx.dims(product)[axis])
        factors = []
        for i in range(length):
            part = ctx.temp(var, f"axis{axis}_slice{i}")
            ctx.add(T.SLICE, [product, ctx.const_i32([axis]), ctx.const_i32([i]), ctx.const_i32([i + 1]),
                              ctx.const_i32([1])], [part])
            factors.append(part)
        acc = factors[0]
        for i, factor in enumerate(factors[1:], 1):
            out = ctx.temp(var, f"axis{axis}_upto{i}")
            binary(ctx, T.MUL, acc, factor, out)
            acc = out
        product = acc
    if not v.attr_bool("keep_dim", False):
        product = _drop_reduced(ctx, product, rank, axes, var, "prod")
    _finish(ctx, v.op, product, _out_dtype(v.op))


def _negate(ctx: ConversionContext, x, var: str, purpose: str):
    """An order-reversing bijection: -x for floats, the complement -1 - x for integers (no overflow)."""
    out = ctx.temp(var, purpose)
    if x.type.precision in (Precision.INT32, Precision.INT64):
        binary(ctx, T.SUB, ctx.const_like(-1, x), x, out)
    else:
        binary(ctx, T.MUL, x, ctx.const_like(-1.0, x), out)
    return out


def _dropped_axes(rank: int, axes: list) -> list:
    """The axes a reduction without keepdim removes ([] = all of them), ascending and nonnegative."""
    return sorted({a + rank if a < 0 else a for a in axes}) if axes else list(range(rank))


def _drop_reduced(ctx: ConversionContext, kept, rank: int, axes: list, var: str, purpose: str):
    """A keepdim reduction result with its reduced axes squeezed away (a 0-D result when all go)."""
    out = ctx.temp(var, purpose)
    ctx.add(T.SQUEEZE, [kept, ctx.const_i32(_dropped_axes(rank, axes))], [out])
    return out


@converter("reduce_min", emits=[T.REDUCE_MAX, T.MUL, T.SUB, T.SQUEEZE, T.CAST], check=check_out_dtype)
def convert_reduce_min(ctx: ConversionContext, v: OpView) -> None:
    """min(x) = -max(-x) (integers: -1 - max(-1 - x)). The reduction keeps its dims until the second
    negation, whose shape-[1] constant would otherwise turn a 0-D result into [1]."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    rank = ctx.rank(x)
    axes = _axes_for(ctx, x, reduce_axes(v.op))
    keepdim = v.attr_bool("keep_dim", False)
    flipped = _negate(ctx, x, var, "negated")
    peak = _reduce(ctx, T.REDUCE_MAX, flipped, axes, True, ctx.temp(var, "max"))
    low = _negate(ctx, peak, var, "min_kept")
    if not keepdim:
        low = _drop_reduced(ctx, low, rank, axes, var, "min")
    _finish(ctx, v.op, low, _out_dtype(v.op))


def _any(ctx: ConversionContext, x, axes, keepdim: bool, var: str, out):
    """any(x) along `axes` as BOOL8: the max of x (as INT32) > 0. Greater than 0, not != 0: over an empty axis the
    devices' max is INT32's lowest (no identity), which must read False (any of nothing is False, all of nothing
    True, as in Paddle). A max, not a sum: intel_openvino computes an INT32 max exactly (a TopK), not a sum."""
    if x.type.precision != Precision.BOOL8:
        nonzero = ctx.temp(var, "nonzero")
        ctx.add(T.NOT_EQUAL, [x, ctx.const_like(0, x)], [nonzero])
        x = nonzero
    as_int = ctx.cast(x, Precision.INT32, var, "as_int")
    reduced = _reduce(ctx, T.REDUCE_MAX, as_int, _axes_for(ctx, x, axes), keepdim, ctx.temp(var, "max"))
    ctx.add(T.GREATER, [reduced, ctx.const_like(0, reduced)], [out])
    return out


@converter("reduce_any", emits=[T.NOT_EQUAL, T.CAST, T.REDUCE_MAX, T.GREATER])
def convert_reduce_any(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    _any(ctx, x, reduce_axes(v.op), v.attr_bool("keep_dim", False), var, ctx.output(var))


@converter("reduce_all", emits=[T.NOT_EQUAL, T.NOT, T.CAST, T.REDUCE_MAX, T.GREATER])
def convert_reduce_all(ctx: ConversionContext, v: OpView) -> None:
    """all(x) = not any(not x)."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    if x.type.precision != Precision.BOOL8:
        nonzero = ctx.temp(var, "nonzero")
        ctx.add(T.NOT_EQUAL, [x, ctx.const_like(0, x)], [nonzero])
        x = nonzero
    inverted = ctx.temp(var, "not_x")
    ctx.add(T.NOT, [x], [inverted])
    some_false = _any(ctx, inverted, reduce_axes(v.op), v.attr_bool("keep_dim", False), var, ctx.temp(var, "any"))
    ctx.add(T.NOT, [some_false], [ctx.output(var)])


@converter("logsumexp", emits=[T.REDUCE_MAX, T.SUB, T.EXP, T.REDUCE_SUM, T.LOG, T.ADD, T.SQUEEZE])
def convert_logsumexp(ctx: ConversionContext, v: OpView) -> None:
    """max + log(sum(exp(x - max))) over `axis`; `reduce_all`, [] or a missing `axis` (Paddle's op
    default is []) = every axis."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    keepdim = v.attr_bool("keepdim", False)
    axes = _axes_for(ctx, x, reduce_axes(v.op, "axis", "reduce_all", default=()))
    peak = _reduce(ctx, T.REDUCE_MAX, x, axes, True, ctx.temp(var, "max"))
    shifted = binary(ctx, T.SUB, x, peak, ctx.temp(var, "shifted"))
    exps = ctx.temp(var, "exp")
    ctx.add(T.EXP, [shifted], [exps])
    total = _reduce(ctx, T.REDUCE_SUM, exps, axes, keepdim, ctx.temp(var, "sum"))
    logs = ctx.temp(var, "log")
    ctx.add(T.LOG, [total], [logs])
    if not keepdim:
        peak = _drop_reduced(ctx, peak, ctx.rank(x), axes, var, "max_squeezed")
    binary(ctx, T.ADD, logs, peak, ctx.output(var))


# -- arg max/min, cumsum ------------------------------------------------------------------------------


def _index_precision(op) -> Precision | None:
    """arg_max/arg_min `dtype`: VarType 2 -> INT32, 3 (and the legacy default -1) -> INT64."""
    v = OpView(op)
    code = v.attr_int("dtype", 3)
    return {2: Precision.INT32, 3: Precision.INT64, -1: Precision.INT64}.get(code)


def check_arg(op, ctx) -> str | None:
    v = OpView(op)
    if _index_precision(op) is None:
        return f"dtype {v.attr('dtype')} is neither int32 (2) nor int64 (3)"
    return None


def _convert_arg(ctx: ConversionContext, op, type: T):
    """Index of the extreme along `axis` (default -1); `flatten` searches the flattened tensor
    (a 0-D result, or [1]*rank with `keepdims`)."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    keepdims = v.attr_bool("keepdims", False)
    precision = _index_precision(op)
    if precision is None:  # check_arg refused it already
        raise ctx.error(f"dtype {v.attr('dtype')} is neither int32 (2) nor int64 (3)")
    dtype = ctx.const_i32(int(precision))
    out = ctx.output(var)
    if v.attr_bool("flatten", False):
        rank = ctx.rank(x)
        flat = ctx.temp(var, "flat")
        ctx.add(T.RESHAPE, [x, ctx.const_i32([-1])], [flat])
        if keepdims:
            index = ctx.temp(var, "index")
            ctx.add(type, [flat, ctx.const_i32(0), ctx.const_bool(False), dtype], [index])
            ctx.add(T.RESHAPE, [index, ctx.const_i32([1] * rank)], [out])
        else:
            ctx.add(type, [flat, ctx.const_i32(0), ctx.const_bool(False), dtype], [out])
        return
    ctx.add(type, [x, ctx.const_i32(v.attr_int("axis", -1)), ctx.const_bool(keepdims), dtype], [out])


@converter("arg_max", emits=[T.ARG_MAX, T.RESHAPE], check=check_arg)
def convert_arg_max(ctx: ConversionContext, v: OpView) -> None:
    _convert_arg(ctx, v.op, T.ARG_MAX)


@converter("arg_min", emits=[T.ARG_MIN, T.RESHAPE], check=check_arg)
def convert_arg_min(ctx: ConversionContext, v: OpView) -> None:
    _convert_arg(ctx, v.op, T.ARG_MIN)


@converter("cumsum", emits=[T.CUM_SUM, T.RESHAPE])
def convert_cumsum(ctx: ConversionContext, v: OpView) -> None:
    """Running sum along `axis` (default -1); `flatten` sums the flattened tensor (a 1-D result)."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    axis = v.attr_int("axis", -1)
    if v.attr_bool("flatten", False):
        flat = ctx.temp(var, "flat")
        ctx.add(T.RESHAPE, [x, ctx.const_i32([-1])], [flat])
        x, axis = flat, 0
    ctx.add(T.CUM_SUM, [x, ctx.const_i32(axis), ctx.const_bool(v.attr_bool("exclusive", False)),
                        ctx.const_bool(v.attr_bool("reverse", False))], [ctx.output(var)])


# -- top-k and sorting ---------------------------------------------------------------------------------


def _k_operand(ctx: ConversionContext, op):
    """The `K` tensor when given (a run-time scalar is fine for TOP_K), else the `k` attr (default 1)."""
    v = OpView(op)
    names = v.inputs("K")
    if names:
        return ctx.input(names[0])
    return ctx.const_i32(v.attr_int("k", 1))


def _top_k(ctx: ConversionContext, op, x, k, axis: int, largest: bool, sorted_: bool):
    """TOP_K into the op's `Out` and `Indices`. A 0-d input (Paddle gives its value and index 0, both 0-d) is
    sorted as [1] and reshaped back: TOP_K needs an axis. Where the conversion checks run-time conditions, the keys
    picked must not tie (_top_k_without_ties)."""
    v = OpView(op)
    out, indices = ctx.output(v.output("Out")), ctx.output(v.output("Indices"))
    zero_d = ctx.rank(x) == 0
    if zero_d:
        flat = ctx.temp(v.output("Out"), "as_1d")
        ctx.add(T.RESHAPE, [x, ctx.const_i32([1])], [flat])
        x, axis = flat, 0
        targets = [ctx.temp(v.output("Out"), "top_1d"), ctx.temp(v.output("Indices"), "top_1d")]
    else:
        targets = [out, indices]
    if ctx.checks_conditions and not zero_d and _tie_checked(ctx, op, x, axis):
        _top_k_without_ties(ctx, v.output("Out"), x, k, axis, largest, sorted_, targets)
    else:
        _emit_top_k(ctx, x, k, axis, largest, sorted_, targets)
    if zero_d:
        for target, result in zip(targets, (out, indices)):
            ctx.add(T.RESHAPE, [target, ctx.const_i32([])], [result])


def _emit_top_k(ctx: ConversionContext, x, k, axis: int, largest: bool, sorted_: bool, targets) -> None:
    ctx.add(T.TOP_K, [x, k, ctx.const_i32(axis), ctx.const_bool(largest), ctx.const_bool(sorted_),
                      ctx.const_i32(int(Precision.INT64))], targets)


def _slice_along(ctx: ConversionContext, source, axis: int, start: int, stop: int, target):
    ctx.add(T.SLICE, [source, ctx.const_i32([axis]), ctx.const_i32([start]), ctx.const_i32([stop]),
                      ctx.const_i32([1])], [target])
    return target


# TOP_K orders equal keys by index; Paddle's top_k as std::partial_sort / std::nth_element leave them, its unstable
# argsort as std::sort does (host/kernels/reduce.py replays both). Where no two of the keys picked are equal and
# none left out equals the last picked, there is one answer and TOP_K gives it; elsewhere the run-time conditions
# below send the op to the host kernel (converters/context.py, run-time conditions). Float keys tie on real data:
# CenterNet and FairMOT pick the top 100 of a peak-masked heatmap that is mostly zeros.
TIE_CONDITION_EMITS = [T.SLICE, T.EQUAL, T.NOT_EQUAL, T.CAST, T.REDUCE_MAX, T.RESHAPE, T.MUL, T.ADD]
TOP_K_TIES = ("its keys tie: Paddle orders equal keys as std::partial_sort / std::nth_element leave them, TOP_K by "
              "index; the host kernel replays Paddle's order")
ARGSORT_TIES = ("its keys tie: Paddle's unstable argsort orders equal keys as std::sort leaves them, TOP_K by index; "
                "the host kernel replays std::sort")
INSERTION_SORTED = 16  # libstdc++'s std::sort of at most this many keys is an insertion sort: stable


def _tie_checked(ctx: ConversionContext, op, x, axis: int) -> bool:
    """Whether the order of equal keys can differ from TOP_K's: always for top_k; for argsort, unless it is stable
    or sorts at most INSERTION_SORTED keys (both order equal keys by index, as TOP_K does)."""
    if op.type != "argsort":
        return True
    n = ctx.dims(x)[axis]
    return not OpView(op).attr_bool("stable", False) and not (known_dim(n) and n <= INSERTION_SORTED)


def _top_k_without_ties(ctx: ConversionContext, var: str, x, k, axis: int, largest: bool, sorted_: bool,
                        targets) -> None:
    """TOP_K with run-time conditions that no two keys picked are equal, nor the last picked and the best left out:
    TOP_K picks one key more than asked (when there is one more), whose values are compared with their neighbours,
    and the first k are the op's. NaN keys count as a tie (NaN equals nothing, but Paddle's comparator leaves NaNs
    unordered among themselves). Without a k known now, TOP_K alone (no condition can be sliced)."""
    n = ctx.dims(x)[axis]
    k_value = int(np.asarray(k.value).reshape(-1)[0]) if k.is_constant else None
    if k_value is None or not known_dim(n) or not 1 <= k_value <= n:
        _emit_top_k(ctx, x, k, axis, largest, sorted_, targets)
        return
    if k_value == n:  # nothing is left out: only the picked keys can tie
        picked, values = k_value, targets[0]
        _emit_top_k(ctx, x, k, axis, largest, sorted_, targets)
    else:
        picked = k_value + 1
        values, positions = ctx.temp(var, "top_k_plus_1"), ctx.temp(var, "top_k_plus_1_indices")
        _emit_top_k(ctx, x, ctx.const_i32(picked), axis, largest, sorted_, [values, positions])
        for source, target in zip((values, positions), targets):
            _slice_along(ctx, source, axis, 0, k_value, target)

    if picked >= 2:
        tied = ctx.temp(var, "tied")
        head = _slice_along(ctx, values, axis, 0, picked - 1, ctx.temp(var, "head"))
        tail = _slice_along(ctx, values, axis, 1, picked, ctx.temp(var, "tail"))
        ctx.add(T.EQUAL, [head, tail], [tied])
        ctx.add_condition(tied)
    if values.type.precision in FLOATS:
        nan = ctx.temp(var, "nan")
        ctx.add(T.NOT_EQUAL, [values, values], [nan])
        ctx.add_condition(nan)


def _check_top_k(op, ctx):
    v = OpView(op)
    precision = var_precision(ctx, v.optional_input("X"))
    if precision is not None and precision not in FLOATS:
        # Paddle's top_k leaves equal keys as std::partial_sort / std::nth_element leave them, TOP_K orders them by
        # index; integer keys tie as a rule.
        return (f"a top_k of {precision.name} keys, which tie: Paddle orders equal keys as std::partial_sort / "
                "std::nth_element leave them, TOP_K by index; the host kernel replays them")
    if op.type == "top_k_v2" and not v.attr_bool("sorted", True):
        return ("top_k_v2 with sorted=False: Paddle gives the k keys in the order std::nth_element leaves them, "
                "which the host kernel replays; TOP_K gives another")
    return None


@converter("top_k", emits=[T.TOP_K, T.RESHAPE, *TIE_CONDITION_EMITS], check=_check_top_k, condition=TOP_K_TIES)
def convert_top_k(ctx: ConversionContext, v: OpView) -> None:
    """The k largest along the last axis, sorted; indices INT64."""
    _top_k(ctx, v.op, ctx.input(v.input("X")), _k_operand(ctx, v.op), -1, True, True)


@converter("top_k_v2", emits=[T.TOP_K, T.RESHAPE, *TIE_CONDITION_EMITS], check=_check_top_k,
           condition=TOP_K_TIES)
def convert_top_k_v2(ctx: ConversionContext, v: OpView) -> None:
    _top_k(ctx, v.op, ctx.input(v.input("X")), _k_operand(ctx, v.op), v.attr_int("axis", -1),
           v.attr_bool("largest", True), v.attr_bool("sorted", True))


def _check_argsort(op, ctx):
    v = OpView(op)
    precision = var_precision(ctx, v.optional_input("X"))
    if precision is not None and precision not in FLOATS and not v.attr_bool("stable", False):
        # Integer and bool keys tie as a rule (PP-DocLayoutV2 sorts a 0/1 mask). TOP_K orders equal keys by index;
        # Paddle's unstable argsort leaves them in std::sort's order, which the host kernel replays.
        return (f"an unstable argsort of {precision.name} keys, which tie: Paddle orders equal keys as std::sort "
                "leaves them, TOP_K by index; the host kernel replays std::sort")
    return None


@converter("argsort", emits=[T.TOP_K, T.SHAPE, T.SLICE, T.RESHAPE, *TIE_CONDITION_EMITS], check=_check_argsort,
           condition=ARGSORT_TIES)
def convert_argsort(ctx: ConversionContext, v: OpView) -> None:
    """A TOP_K over the whole `axis` (default -1): ascending unless `descending`."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    axis = v.attr_int("axis", -1)
    dims = ctx.dims(x)
    size = dims[axis] if dims else 1
    if known_dim(size):
        k = ctx.const_i32(size)
    else:
        shape = ctx.temp(var, "shape")
        ctx.add(T.SHAPE, [x, ctx.const_i32(int(Precision.INT32))], [shape])
        k = ctx.temp(var, "k")
        stop = axis + 1 if axis != -1 else len(dims)
        ctx.add(T.SLICE, [shape, ctx.const_i32([0]), ctx.const_i32([axis]), ctx.const_i32([stop]), None], [k])
    _top_k(ctx, v.op, x, k, axis, v.attr_bool("descending", False), True)
