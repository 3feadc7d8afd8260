"""Converters: gather-like indexing (gather, gather_nd, index_select, lookup_table / lookup_table_v2, take_along_axis),
one_hot_v2, tril_triu, diag_v2, set_value (slice assignment) and index_put (`x[idx] = t`), each a GATHER or a
composition of comparisons with WHERE.

Also the Paddle semantics of set_value's region (`set_value_bounds`, `set_value_assign_layout`,
`set_value_constant`), which the host kernel shares.

Imports only the converter toolkit (op_view, attrs, emit, context, registry) and the standard.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import input_dims, known_dim, needs_constant, scalar_attr_or_tensor
from converters.context import ConversionContext
from converters.emit import binary, cast_to
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import PadMode, Precision, dtype_precision, precision_dtype


def _index_vector(ctx: ConversionContext, name: str, var: str):
    """Paddle's gather takes an index of shape [N] or [N, 1] (read as [N]), or 0-D."""
    index = ctx.input(name)
    dims = ctx.dims(index)
    if len(dims) == 2 and dims[1] == 1:
        flat = ctx.temp(var, "index")
        ctx.add(T.RESHAPE, [index, ctx.const_i32([-1])], [flat])
        return flat
    return index


@converter("gather", emits=[T.GATHER, T.RESHAPE], check=needs_constant("Axis", what="GATHER's axis"))
def convert_gather(ctx: ConversionContext, v: OpView) -> None:
    """Rows of X along `axis` (the `Axis` tensor, else the attr, default 0) at `Index` (int32/int64)."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    axis = scalar_attr_or_tensor(ctx, v.op, "axis", "Axis", 0)
    index = _index_vector(ctx, v.input("Index"), var)
    ctx.add(T.GATHER, [x, index, ctx.const_i32(axis)], [ctx.output(var)])


@converter("index_select", emits=[T.GATHER])
def convert_index_select(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    index = ctx.input(v.input("Index"))
    ctx.add(T.GATHER, [x, index, ctx.const_i32(v.attr_int("dim", 0))], [ctx.output(v.output("Out"))])


def _lookup(ctx: ConversionContext, op, ids):
    """W[ids] with the rows looked up for `padding_idx` (-1: none) reading as zeros.

    A parameter table gets the padding row zeroed in its constant; a run-time table is masked with
    WHERE(ids == padding_idx, 0, W[ids])."""
    v = OpView(op)
    var = v.output("Out")
    table_name = v.input("W")
    padding_idx = v.attr_int("padding_idx", -1)
    out = ctx.output(var)
    if padding_idx == -1:
        ctx.add(T.GATHER, [ctx.input(table_name), ids, ctx.const_i32(0)], [out])
        return
    if ctx.is_param(table_name):
        table = np.array(ctx.param(table_name), copy=True)
        if 0 <= padding_idx < table.shape[0]:
            table[padding_idx] = 0
        ctx.add(T.GATHER, [ctx.const(table, dtype_precision(table.dtype)), ids, ctx.const_i32(0)], [out])
        return
    rows = ctx.temp(var, "rows")
    ctx.add(T.GATHER, [ctx.input(table_name), ids, ctx.const_i32(0)], [rows])
    is_padding = ctx.temp(var, "is_padding")
    ctx.add(T.EQUAL, [ids, ctx.const_like(padding_idx, ids)], [is_padding])
    mask = ctx.temp(var, "is_padding_row")
    ctx.add(T.UNSQUEEZE, [is_padding, ctx.const_i32([-1])], [mask])
    ctx.add(T.WHERE, [mask, ctx.const_like(0, rows), rows], [out])


@converter("lookup_table_v2", emits=[T.GATHER, T.EQUAL, T.UNSQUEEZE, T.WHERE])
def convert_lookup_table_v2(ctx: ConversionContext, v: OpView) -> None:
    """Embedding: output dims = Ids dims + [W dims[1]]."""
    _lookup(ctx, v.op, ctx.input(v.input("Ids")))


@converter("lookup_table", emits=[T.SQUEEZE, T.GATHER, T.EQUAL, T.UNSQUEEZE, T.WHERE])
def convert_lookup_table(ctx: ConversionContext, v: OpView) -> None:
    """v1: Ids end in a size-1 dim that the output replaces by the embedding size."""
    ids = ctx.input(v.input("Ids"))
    dims = ctx.dims(ids)
    if dims and dims[-1] == 1:
        squeezed = ctx.temp(v.output("Out"), "ids")
        ctx.add(T.SQUEEZE, [ids, ctx.const_i32([len(dims) - 1])], [squeezed])
        ids = squeezed
    _lookup(ctx, v.op, ids)


def check_one_hot(op, ctx):
    v = OpView(op)
    if v.attr_precision("dtype", 5) is None:
        return f"dtype {v.attr('dtype')} is not a tensor element type NNAdapter has"
    if not v.inputs("depth_tensor") and v.attr_int("depth", -1) < 0:
        return "neither a 'depth' attr nor a 'depth_tensor' input"
    return None


@converter("one_hot_v2", emits=[T.RANGE, T.CAST, T.RESHAPE, T.UNSQUEEZE, T.EQUAL], check=check_one_hot)
def convert_one_hot_v2(ctx: ConversionContext, v: OpView) -> None:
    """out[..., j] = (x[...] == j) for j in [0, depth), in `dtype` (default float32). Ids outside
    [0, depth) give an all-zero row (Paddle raises there unless `allow_out_of_range`)."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    precision = x.type.precision
    names = v.inputs("depth_tensor")
    if names:
        depth = ctx.cast(ctx.input(names[0]), precision, var, "depth")
        if ctx.rank(depth) == 0:
            as_vector = ctx.temp(var, "depth_vector")
            ctx.add(T.RESHAPE, [depth, ctx.const_i32([1])], [as_vector])
            depth = as_vector
    else:
        depth = ctx.const_like(v.attr_int("depth", -1), x)
    classes = ctx.temp(var, "classes")
    ctx.add(T.RANGE, [ctx.const_like(0, x), depth, ctx.const_like(1, x)], [classes])
    ids = ctx.temp(var, "ids")
    ctx.add(T.UNSQUEEZE, [x, ctx.const_i32([-1])], [ids])
    hits = ctx.temp(var, "hits")
    ctx.add(T.EQUAL, [ids, classes], [hits])
    out_precision = v.attr_precision("dtype", 5)
    if out_precision is None:  # check_one_hot refused it already
        raise ctx.error(f"dtype {v.attr('dtype')!r} is not a tensor element type NNAdapter has")
    cast_to(ctx, hits, out_precision, ctx.output(var))


@converter("tril_triu", emits=[T.SHAPE, T.SLICE, T.RANGE, T.UNSQUEEZE, T.SUB, T.LESS_EQUAL,
                                T.GREATER_EQUAL, T.WHERE, T.AND])
def convert_tril_triu(ctx: ConversionContext, v: OpView) -> None:
    """Keep x[..., i, j] where j - i <= diagonal (`lower`) or >= diagonal (upper), else 0 (False for a bool x).

    The mask compares RANGE(rows) with RANGE(cols) taken from the input's SHAPE, so it follows the
    run-time dims."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    if ctx.rank(x) < 2:
        raise ctx.error(f"the input must have rank >= 2, got dims {list(ctx.dims(x))}")
    shape = ctx.temp(var, "shape")
    ctx.add(T.SHAPE, [x, ctx.const_i32(int(Precision.INT32))], [shape])

    def axis_range(start: int, stop: int, purpose: str):
        size = ctx.temp(var, f"{purpose}_count")
        ctx.add(T.SLICE, [shape, ctx.const_i32([0]), ctx.const_i32([start]), ctx.const_i32([stop]), None], [size])
        values = ctx.temp(var, purpose)
        ctx.add(T.RANGE, [ctx.const_i32(0), size, ctx.const_i32(1)], [values])
        return values

    rows = axis_range(-2, -1, "rows")
    cols = axis_range(-1, np.iinfo(np.int32).max, "cols")
    row_column = ctx.temp(var, "rows_column")
    ctx.add(T.UNSQUEEZE, [rows, ctx.const_i32([1])], [row_column])
    offset = binary(ctx, T.SUB, cols, row_column, ctx.temp(var, "offset"))
    keep = ctx.temp(var, "keep")
    compare = T.LESS_EQUAL if v.attr_bool("lower", True) else T.GREATER_EQUAL
    ctx.add(compare, [offset, ctx.const_i32(v.attr_int("diagonal", 0))], [keep])
    if x.type.precision == Precision.BOOL8:
        # WHERE takes no BOOL8 values (QWen's causal mask is the tril of a boolean ones matrix): keep AND x.
        ctx.add(T.AND, [keep, x], [ctx.output(var)])
        return
    ctx.add(T.WHERE, [keep, x, ctx.const_like(0, x)], [ctx.output(var)])


# -- diag_v2 ----------------------------------------------------------------------------------------------------
#
# paddle.diag: a 0-D or 1-D x of n elements becomes the square matrix of side n + |offset| holding x on diagonal
# `offset` (above the main one when positive) and `padding_value` everywhere else; a 2-D x gives its diagonal
# `offset` as a vector. NNAdapter has no diagonal operation: the matrix is WHERE(on_diagonal, x, padding), so an
# infinite x (CCNet masks its criss-cross attention with diag(inf)) never meets a multiply by 0.

_DIAG_VALUES = frozenset({Precision.FLOAT32, Precision.FLOAT64, Precision.INT32, Precision.INT64})


def _check_diag_v2(op, ctx) -> str | None:
    dims = input_dims(ctx, op, "X")
    if dims is None:
        return None
    precision = ctx.input(OpView(op).input("X")).type.precision
    if precision not in _DIAG_VALUES:
        return f"a {precision.name} input: the matrix is a WHERE, which selects float32/64 and int32/64 values"
    if len(dims) > 2:
        return f"X must be 0-D, 1-D or 2-D, got dims {list(dims)}"
    if len(dims) == 2 and not all(known_dim(d) for d in dims):
        return "the diagonal of a matrix with dims known only at run time has a run-time length"
    return None


@converter("diag_v2", emits=[T.RESHAPE, T.PAD, T.SHAPE, T.SLICE, T.RANGE, T.UNSQUEEZE, T.SUB, T.EQUAL, T.WHERE,
                             T.FLATTEN, T.GATHER], check=_check_diag_v2)
def convert_diag_v2(ctx: ConversionContext, v: OpView) -> None:
    """A vector x (0-D read as one element): x padded by |offset| at its end is read by row (offset >= 0: row i
    holds x[i] at column i + offset) or by column (offset < 0: column j holds x[j] at row j - offset), and WHERE
    keeps it where column - row == offset (a RANGE over the side from SHAPE, as tril_triu's mask), else
    `padding_value`. A matrix x: its diagonal GATHERed from the flattened matrix (dims known)."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    out = ctx.output(var)
    offset = v.attr_int("offset", 0)
    if ctx.rank(x) == 2:
        height, width = (int(d) for d in ctx.dims(x))
        first_row, first_col = max(-offset, 0), max(offset, 0)
        length = min(height - first_row, width - first_col)
        if length <= 0:
            raise ctx.error(f"diagonal {offset} of a {height}x{width} matrix is empty")
        flat = ctx.temp(var, "flat")
        ctx.add(T.FLATTEN, [x, ctx.const_i32(0), ctx.const_i32(1)], [flat])
        index = (first_row + np.arange(length)) * width + first_col + np.arange(length)
        ctx.add(T.GATHER, [flat, ctx.const_i32(index), ctx.const_i32(0)], [out])
        return
    if ctx.rank(x) == 0:
        vector = ctx.temp(var, "vector")
        ctx.add(T.RESHAPE, [x, ctx.const_i32([1])], [vector])
        x = vector
    if offset:
        padded = ctx.temp(var, "padded")
        ctx.add(T.PAD, [x, ctx.const_i32([0, abs(offset)]), ctx.const_i32(int(PadMode.CONSTANT)),
                        ctx.const_like(0, x)], [padded])
        x = padded
    side = ctx.temp(var, "side")
    ctx.add(T.SHAPE, [x, ctx.const_i32(int(Precision.INT32))], [side])
    positions = ctx.temp(var, "positions")
    ctx.add(T.RANGE, [ctx.const_i32(0), side, ctx.const_i32(1)], [positions])
    rows = ctx.temp(var, "rows")
    ctx.add(T.UNSQUEEZE, [positions, ctx.const_i32([1])], [rows])
    offsets = binary(ctx, T.SUB, positions, rows, ctx.temp(var, "offsets"))
    on_diagonal = ctx.temp(var, "on_diagonal")
    ctx.add(T.EQUAL, [offsets, ctx.const_i32(offset)], [on_diagonal])
    values = x
    if offset >= 0:  # by row: a column vector
        values = ctx.temp(var, "by_row")
        ctx.add(T.UNSQUEEZE, [x, ctx.const_i32([1])], [values])
    padding = ctx.const_like(v.attr_float("padding_value", 0.0), x)
    ctx.add(T.WHERE, [on_diagonal, values, padding], [out])


# -- set_value: slice assignment ------------------------------------------------------------------------------
#
# `x[region] = value` in Paddle is `set_value` (a constant `values` attribute or a `ValueTensor`; PIR's
# pd_op.set_value / set_value_with_tensor). The region is a strided box: per axis in `axes`, starts / ends /
# steps normalized by Python's slice rule, as Paddle applies it (set_value_bounds). The value broadcasts (numpy
# rules) to the region's dims without the `decrease_axes` (integer-indexed axes) and with a 1 at each `none_axes`
# position.
# NNAdapter has no scatter, so the converter composes WHERE(in_region, placed_value, x): `in_region` is the
# outer AND of one mask per sliced axis, and `placed_value` is the value GATHERed along each sliced axis with
# the index of the region element each position holds (clamped; WHERE ignores it outside the region). Bounds
# and dims known at conversion time make both constants; otherwise they are computed with RANGE / FLOOR_DIV.

def set_value_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """(first index, element count) of `start:end:step` on an axis of `dim` elements. Paddle 3.3.1's set_value
    follows Python's slice rule exactly (checked against its kernel over every start / end in [-8, 8] and the
    int32 / int64 extremes, steps +-1..3: out-of-range bounds clamp, a reversed range is empty; the setitem front
    end writes x[::-1] as start INT64_MAX, end INT64_MIN). Raises ValueError for a zero step."""
    if step == 0:
        raise ValueError("a step of 0")
    span = range(*slice(start, end, step).indices(max(dim, 0)))
    return span.start, len(span)


def set_value_assign_layout(rank: int, decrease_axes, none_axes) -> list:
    """The value's target dims as positions: for each, an input axis (an int) or None (a `none_axes` 1), in
    Paddle's order (SetValueImpl: the none axes go before the input axis of the same index)."""
    decrease, none = sorted(int(a) % max(rank, 1) for a in decrease_axes), sorted(int(a) for a in none_axes)
    layout: list[int | None] = []
    n = 0
    for axis in range(rank):
        while n < len(none) and none[n] <= axis:
            layout.append(None)
            n += 1
        if axis not in decrease:
            layout.append(axis)
    layout.extend([None] * (len(none) - n))
    return layout


def set_value_constant(op) -> np.ndarray | None:
    """The constant value of a set_value without a ValueTensor: `values` (Paddle >= 2.6) or the older
    per-dtype `*_values` attributes, shaped by `shape`; None when it has none."""
    values = op.attr("values")
    if not (isinstance(values, (list, tuple)) and values):
        values = None
        for name in ("fp32_values", "int32_values", "int64_values", "bool_values", "fp64_values", "fp16_values"):
            found = op.attr(name)
            if found:
                values = found
                break
    if values is None:
        return None
    array = np.asarray(values)
    shape = [int(d) for d in (op.attr("shape") or [])]
    if shape and int(np.prod(shape)) == array.size:
        array = array.reshape(shape)
    return array


def _bound_values(ctx, op, slot: str, attr: str) -> list | None:
    """One bound list (starts / ends / steps) when known at conversion time, else None. A `*TensorList` entry may
    hold several values (PIR's run-time IntArray): they are read flattened, in order."""
    v = OpView(op)
    names = v.inputs(slot)
    if not names:
        return [int(a) for a in (v.attr(attr) or [])]
    values: list[int] = []
    for name in names:
        known = ctx.constant_value(name) if ctx is not None else None
        if known is None:
            return None
        values.extend(int(a) for a in np.asarray(known).reshape(-1))
    return values


def check_set_value(op, ctx) -> str | None:
    v = OpView(op)
    if not v.inputs("ValueTensor") and set_value_constant(op) is None:
        return "neither a ValueTensor nor constant values"
    axes = v.attr_ints("axes")
    steps = _bound_values(ctx, op, "StepsTensorList", "steps")
    if steps is None:
        return "steps computed at run time (their signs decide the bounds rule)"
    if any(s == 0 for s in steps):
        return f"steps {steps} contain 0"
    for slot, attr in (("StartsTensorList", "starts"), ("EndsTensorList", "ends")):
        known = _bound_values(ctx, op, slot, attr) if ctx is not None else None
        if known is not None and len(known) != len(axes):
            return f"{len(known)} {attr} for {len(axes)} axes"
    if steps and len(steps) != len(axes):
        return f"{len(steps)} steps for {len(axes)} axes"
    return None


class _SetValue:
    """One set_value's conversion (see the section comment)."""

    def __init__(self, ctx: ConversionContext, op):
        self.ctx, self.op, self.v = ctx, op, OpView(op)
        self.var = self.v.output("Out")
        self.x = ctx.input(self.v.input("Input"))
        self.rank = ctx.rank(self.x)
        self.axes = [a % self.rank for a in self.v.attr_ints("axes")] if self.rank else []

    def temp(self, purpose: str):
        return self.ctx.temp(self.var, purpose)

    def op_out(self, type, inputs, purpose: str):
        out = self.temp(purpose)
        self.ctx.add(type, inputs, [out])
        return out

    # -- the per-axis region ------------------------------------------------------------------------------------
    def bound_operands(self, slot: str, attr: str):
        """Per axis: an int (known) or a [1] INT64 operand (computed at run time)."""
        known = _bound_values(self.ctx, self.op, slot, attr)
        if known is not None:
            return known
        vector = self.ctx.ints_operand(self.op, attr, tensor_list=slot, precision=Precision.INT64)
        return [self.op_out(T.SLICE, [vector, self.ctx.const_i32([0]), self.ctx.const_i64([k]),
                                      self.ctx.const_i64([k + 1]), None], f"{attr}{k}")
                for k in range(len(self.axes))]

    def axis_region(self, k: int, axis: int, start, end, step: int):
        """(in_region [dim] BOOL8, source index [dim] INT64) of one sliced axis: constants when the dim and
        bounds are known, else computed."""
        ctx = self.ctx
        dim = ctx.dims(self.x)[axis]
        if known_dim(dim) and isinstance(start, int) and isinstance(end, int):
            try:
                first, count = set_value_bounds(dim, start, end, step)
            except ValueError as exc:
                raise ctx.error(f"axis {axis}: {exc}") from None
            position = np.arange(dim, dtype=np.int64)
            offset = (position - first) * np.sign(step)
            inside = (offset >= 0) & (offset % abs(step) == 0) & (offset // abs(step) < count)
            source = np.clip(offset // abs(step), 0, max(count - 1, 0))
            return ctx.const(inside, Precision.BOOL8), ctx.const_i64(source)
        return self.computed_axis_region(k, axis, start, end, step)

    def computed_axis_region(self, k: int, axis: int, start, end, step: int):
        ctx = self.ctx
        i64 = lambda value: ctx.const_i64([value])  # noqa: E731
        dim = ctx.dims(self.x)[axis]
        if known_dim(dim):
            size = i64(dim)
        else:
            shape = self.op_out(T.SHAPE, [self.x, ctx.const_i32(int(Precision.INT64))], f"axis{k}/shape")
            size = self.op_out(T.SLICE, [shape, ctx.const_i32([0]), i64(axis), i64(axis + 1), None],
                               f"axis{k}/dim")
        start = i64(start) if isinstance(start, int) else start
        end = i64(end) if isinstance(end, int) else end
        zero = i64(0)

        def binary_op(type, a, b, purpose):
            return binary(ctx, type, a, b, self.temp(f"axis{k}/{purpose}"))

        def wrap_negative(value, below, purpose):  # value + dim where value < below
            negative = self.op_out(T.LESS, [value, i64(below)], f"axis{k}/{purpose}_negative")
            shifted = binary_op(T.ADD, value, size, f"{purpose}_shifted")
            return self.op_out(T.WHERE, [negative, shifted, value], f"axis{k}/{purpose}_wrapped")

        # Python's slice rule (set_value_bounds): wrap negatives once, clamp to [0, dim] for a positive step and
        # to [-1, dim - 1] for a negative one
        if step > 0:
            low, high = zero, size
        else:
            low, high = i64(-1), binary_op(T.SUB, size, i64(1), "last_index")

        def clamped(value, purpose):
            wrapped = wrap_negative(value, 0, purpose)
            return binary_op(T.MIN, binary_op(T.MAX, wrapped, low, f"{purpose}_floor"), high, purpose)

        first, last = clamped(start, "start"), clamped(end, "end")
        numerator = binary_op(T.ADD, binary_op(T.SUB, last, first, "span"), i64(step - 1 if step > 0 else step + 1),
                              "span_rounded")
        count = binary_op(T.MAX, binary_op(T.FLOOR_DIV, numerator, i64(step), "count_raw"), zero, "count")
        position = self.op_out(T.RANGE, [ctx.const_i64(0), size, ctx.const_i64(1)], f"axis{k}/positions")
        offset = binary_op(T.SUB, position, first, "offset")
        quotient = binary_op(T.FLOOR_DIV, offset, i64(step), "quotient")
        exact = self.op_out(T.EQUAL, [binary_op(T.MUL, quotient, i64(step), "stepped"), offset], f"axis{k}/exact")
        after = self.op_out(T.GREATER_EQUAL, [quotient, zero], f"axis{k}/after_start")
        before = self.op_out(T.LESS, [quotient, count], f"axis{k}/before_end")
        inside = self.op_out(T.AND, [self.op_out(T.AND, [exact, after], f"axis{k}/on_step"), before],
                             f"axis{k}/inside")
        last_source = binary_op(T.MAX, binary_op(T.SUB, count, i64(1), "count_less_one"), zero, "last_source")
        source = binary_op(T.MAX, binary_op(T.MIN, quotient, last_source, "source_ceil"), zero, "source")
        return inside, source

    def along(self, operand, axis: int, purpose: str):
        """A [dim] operand reshaped to rank `rank` with its dims on `axis` (to broadcast against x)."""
        shape = [1] * self.rank
        shape[axis] = -1
        if operand.is_constant:
            return self.ctx.const(np.asarray(operand.value).reshape(shape), operand.type.precision)
        return self.op_out(T.RESHAPE, [operand, self.ctx.const_i32(shape)], purpose)

    # -- the value ----------------------------------------------------------------------------------------------
    def value_operand(self, precision):
        """The value in `precision`, laid out with one dim per input axis (1 or the region's extent)."""
        ctx = self.ctx
        names = self.v.inputs("ValueTensor")
        if names:
            value = ctx.cast(ctx.input(names[0]), precision, self.var, "value_cast")
        else:
            constant = set_value_constant(self.op)
            if constant is None:  # check_set_value refused it already
                raise ctx.error("neither a ValueTensor nor constant values")
            array = constant.astype(precision_dtype(precision))
            if array.size == 1:
                return ctx.const(array.reshape([1] * self.rank), precision)
            value = ctx.const(array, precision)
        layout = set_value_assign_layout(self.rank, self.v.attr_ints("decrease_axes"),
                                         self.v.attr_ints("none_axes"))
        dims = list(ctx.dims(value))
        if len(dims) > len(layout):  # broadcasting drops leading 1s only
            extra = len(dims) - len(layout)
            if any(d != 1 for d in dims[:extra]):
                raise ctx.error(f"the value's dims {dims} do not broadcast to the region's {len(layout)} dims")
            value = self.op_out(T.SQUEEZE, [value, ctx.const_i32(list(range(extra)))], "value_rank")
        elif len(dims) < len(layout):
            value = self.op_out(T.UNSQUEEZE, [value, ctx.const_i32(list(range(len(layout) - len(dims))))],
                                "value_rank")
        nones = [p for p, axis in enumerate(layout) if axis is None]
        if nones:
            value = self.op_out(T.SQUEEZE, [value, ctx.const_i32(nones)], "value_none_axes")
        kept = [axis for axis in layout if axis is not None]
        dropped = [axis for axis in range(self.rank) if axis not in kept]
        if dropped:
            value = self.op_out(T.UNSQUEEZE, [value, ctx.const_i32(dropped)], "value_decreased_axes")
        return value

    def convert(self):
        ctx = self.ctx
        starts = self.bound_operands("StartsTensorList", "starts")
        ends = self.bound_operands("EndsTensorList", "ends")
        steps = _bound_values(ctx, self.op, "StepsTensorList", "steps") or [1] * len(self.axes)
        x = self.x
        if x.type.precision == Precision.BOOL8:  # WHERE selects numbers: a bool tensor goes through INT32
            x = ctx.cast(x, Precision.INT32, self.var, "as_int")
        value = self.value_operand(x.type.precision)
        mask = None
        for k, axis in enumerate(self.axes):
            inside, source = self.axis_region(k, axis, starts[k], ends[k], steps[k])
            inside = self.along(inside, axis, f"axis{k}/inside_along")
            mask = inside if mask is None else self.op_out(T.AND, [mask, inside], f"axis{k}/region")
            value_dim = ctx.dims(value)[axis]
            if value_dim == 1:
                continue  # broadcast along this axis: every position reads the one element
            if not known_dim(value_dim):  # 1 (broadcast) or the region's extent: clamp to what it holds
                shape = self.op_out(T.SHAPE, [value, ctx.const_i32(int(Precision.INT64))], f"axis{k}/value_shape")
                extent = self.op_out(T.SLICE, [shape, ctx.const_i32([0]), ctx.const_i64([axis]),
                                               ctx.const_i64([axis + 1]), None], f"axis{k}/value_dim")
                last = binary(ctx, T.SUB, extent, ctx.const_i64([1]), self.temp(f"axis{k}/value_last"))
                source = binary(ctx, T.MIN, source, last, self.temp(f"axis{k}/source_clamped"))
            value = self.op_out(T.GATHER, [value, source, ctx.const_i32(axis)], f"axis{k}/placed")
        if mask is None:
            mask = ctx.const(np.ones([1] * self.rank, bool), Precision.BOOL8)
        if x is self.x:
            ctx.add(T.WHERE, [mask, value, x], [ctx.output(self.var)])
        else:
            cast_to(ctx, self.op_out(T.WHERE, [mask, value, x], "as_int_assigned"), Precision.BOOL8,
                    ctx.output(self.var))


@converter("set_value", emits=[T.WHERE, T.GATHER, T.AND, T.RESHAPE, T.SQUEEZE, T.UNSQUEEZE, T.CAST, T.SHAPE,
                                T.SLICE, T.CONCAT, T.RANGE, T.ADD, T.SUB, T.MUL, T.FLOOR_DIV, T.MIN, T.MAX,
                                T.LESS, T.EQUAL, T.GREATER_EQUAL], check=check_set_value)
def convert_set_value(ctx: ConversionContext, v: OpView) -> None:
    """x with `x[region] = value` (see the section comment above)."""
    _SetValue(ctx, v.op).convert()


# -- take_along_axis ------------------------------------------------------------------------------------------


def check_take_along_axis(op, ctx) -> str | None:
    dims = input_dims(ctx, op, "Input")
    if dims is None:
        return None
    axis = OpView(op).attr_int("Axis", 0)
    if not -len(dims) <= axis < max(len(dims), 1):
        return f"Axis {axis} is out of range for rank {len(dims)}"
    axis %= max(len(dims), 1)
    unknown = [d for d in range(axis, len(dims)) if not known_dim(dims[d]) and d > 0]
    if unknown:
        return (f"Input dims {list(dims)}: the row-major strides need the dims from axis {axis} on, dims {unknown} "
                f"are known only at run time")
    return None


@converter("take_along_axis", emits=[T.CAST, T.LESS, T.ADD, T.WHERE, T.MUL, T.SHAPE, T.SLICE, T.RANGE, T.RESHAPE,
                                      T.GATHER], check=check_take_along_axis)
def convert_take_along_axis(ctx: ConversionContext, v: OpView) -> None:
    """Result[p] = Input[p with `Axis` replaced by Index[p]] (Index no larger than Input on the other axes; a
    negative index counts from the end): a GATHER from the flattened Input at the row-major offset of each
    position, Index * stride(Axis) + sum over the other axes of position * stride. Only the dims behind the first
    enter the strides, so a run-time batch is fine; the positions along an axis of unknown size come from RANGE."""
    x = ctx.input(v.input("Input"))
    var = v.output("Result")
    dims = list(ctx.dims(x))
    rank = len(dims)
    axis = v.attr_int("Axis", 0) % max(rank, 1)
    index = ctx.cast(ctx.input(v.input("Index")), Precision.INT64, var, "index")
    index_dims = list(ctx.dims(index))
    if len(index_dims) != rank:
        raise ctx.error(f"Index has rank {len(index_dims)}, Input rank {rank}; they must be equal")
    strides = [int(np.prod(dims[d + 1:], dtype=np.int64)) for d in range(rank)]
    size = ctx.const_i64([dims[axis]])
    negative = ctx.temp(var, "negative")
    ctx.add(T.LESS, [index, ctx.const_i64([0])], [negative])
    wrapped = binary(ctx, T.ADD, index, size, ctx.temp(var, "wrapped"))
    positive = ctx.temp(var, "positive")
    ctx.add(T.WHERE, [negative, wrapped, index], [positive])
    offset = binary(ctx, T.MUL, positive, ctx.const_i64([strides[axis]]), ctx.temp(var, "offset_axis"))
    for d in range(rank):
        if d == axis or (known_dim(index_dims[d]) and index_dims[d] == 1):
            continue  # position 0 along a size-1 axis adds nothing
        shape = [1] * rank
        shape[d] = -1
        if known_dim(index_dims[d]):
            positions = ctx.const_i64(np.arange(index_dims[d], dtype=np.int64) * strides[d])
            positions = ctx.const(np.asarray(positions.value).reshape(shape), Precision.INT64)
        else:
            index_shape = ctx.temp(var, f"axis{d}/index_shape")
            ctx.add(T.SHAPE, [index, ctx.const_i32(int(Precision.INT64))], [index_shape])
            count = ctx.temp(var, f"axis{d}/count")
            ctx.add(T.SLICE, [index_shape, ctx.const_i32([0]), ctx.const_i64([d]), ctx.const_i64([d + 1]), None],
                    [count])
            steps = ctx.temp(var, f"axis{d}/positions")
            ctx.add(T.RANGE, [ctx.const_i64([0]), count, ctx.const_i64([1])], [steps])
            scaled = binary(ctx, T.MUL, steps, ctx.const_i64([strides[d]]), ctx.temp(var, f"axis{d}/scaled"))
            positions = ctx.temp(var, f"axis{d}/along")
            ctx.add(T.RESHAPE, [scaled, ctx.const_i32(shape)], [positions])
        offset = binary(ctx, T.ADD, offset, positions, ctx.temp(var, f"offset_axis{d}"))
    flat = ctx.temp(var, "flat_input")
    ctx.add(T.RESHAPE, [x, ctx.const_i32([-1])], [flat])
    ctx.add(T.GATHER, [flat, offset, ctx.const_i32(0)], [ctx.output(var)])


# -- index_put ------------------------------------------------------------------------------------------------


def _index_put_slot(view: OpView, legacy: str, pir: str) -> str:
    """The slot name the op uses (index_put has no op_compat row: a PIR program keeps the lower-case names)."""
    return legacy if view.inputs(legacy) or view.outputs(legacy) else pir


def check_index_put(op, ctx) -> str | None:
    v = OpView(op)
    if v.attr_bool("accumulate", False):
        return "accumulate=True (a scatter-add; NNAdapter has no scatter)"
    x_name = v.optional_input(_index_put_slot(v, "X", "x"))
    names = v.inputs(_index_put_slot(v, "Indices", "indices"))
    if ctx is None or x_name is None or not ctx.has(x_name) or not all(ctx.has(n) for n in names):
        return None
    dims = list(ctx.dims(x_name))
    if not names or len(names) > len(dims):
        return f"{len(names)} index tensors for an input of rank {len(dims)}"
    if _single_value_mask(ctx, v, dims, names):
        return None
    for name in names:
        index = ctx.input(name)
        if index.type.precision not in (Precision.INT32, Precision.INT64):
            return (f"index '{name}' is {index.type.precision.name}: a bool mask selects a data-dependent count "
                    "(taken only with a one-element value)")
        if not all(known_dim(d) for d in index.type.dims):
            return f"index '{name}' has dims {list(index.type.dims)} known only at run time"
    if not all(known_dim(d) for d in dims):
        return f"the input's dims {dims} are known only at run time"
    return None


def _single_value_mask(ctx, v: OpView, dims: list, names: list) -> bool:
    """x[mask] = value with one bool mask over x's leading axes (its dims theirs, all known) and a one-element
    value: every selected element gets that value, whatever the count (SpeechT5's relative positions,
    `pos_seq[pos_seq < -max_length] = -max_length`)."""
    if len(names) != 1:
        return False
    mask = ctx.input(names[0])
    value_name = v.optional_input(_index_put_slot(v, "Value", "value"))
    if mask.type.precision != Precision.BOOL8 or value_name is None or not ctx.has(value_name):
        return False
    mask_dims, value_dims = list(mask.type.dims), list(ctx.dims(value_name))
    return (0 < len(mask_dims) <= len(dims) and all(known_dim(d) for d in mask_dims + value_dims)
            and mask_dims == list(dims[:len(mask_dims)]) and int(np.prod(value_dims, dtype=np.int64)) == 1)


@converter("index_put", emits=[T.CAST, T.LESS, T.ADD, T.WHERE, T.MUL, T.RESHAPE, T.EQUAL, T.REDUCE_MAX, T.GREATER,
                                T.SUB, T.MAX, T.EXPAND, T.GATHER], check=check_index_put)
def convert_index_put(ctx: ConversionContext, v: OpView) -> None:
    """x[indices] = value with integer index tensors (broadcast together, indexing the leading axes; negative
    entries count from the end; the last of repeated positions wins, as Paddle's CPU kernel writes in order), or
    with one bool mask and a one-element value (_single_value_mask): WHERE(mask, value, x).

    The indexed axes are flattened to M positions and the K index tuples to their row-major offsets; EQUAL of the
    two gives a [K, M] hit table, whose REDUCE_MAX of (k + 1) names the last tuple writing each position (0:
    none). The value, broadcast to [K, rest], is GATHERed at those tuples and WHERE keeps x elsewhere."""
    x = ctx.input(v.input(_index_put_slot(v, "X", "x")))
    var = v.output(_index_put_slot(v, "Out", "out"))
    dims = list(ctx.dims(x))
    names = v.inputs(_index_put_slot(v, "Indices", "indices"))
    if _single_value_mask(ctx, v, dims, names):
        mask = ctx.input(names[0])
        if ctx.rank(mask) < len(dims):  # over the leading axes: broadcast along the others
            spread = ctx.temp(var, "mask")
            ctx.add(T.RESHAPE, [mask, ctx.const_i32(list(ctx.dims(mask)) + [1] * (len(dims) - ctx.rank(mask)))],
                    [spread])
            mask = spread
        value = ctx.cast(ctx.input(v.input(_index_put_slot(v, "Value", "value"))), x.type.precision, var,
                         "value_cast")
        single = ctx.temp(var, "value_scalar")
        ctx.add(T.RESHAPE, [value, ctx.const_i32([1])], [single])
        ctx.add(T.WHERE, [mask, single, x], [ctx.output(var)])
        return
    indices = [ctx.cast(ctx.input(n), Precision.INT64, var, f"index{k}")
               for k, n in enumerate(v.inputs(_index_put_slot(v, "Indices", "indices")))]
    n = len(indices)
    lead, rest = dims[:n], dims[n:]
    positions = int(np.prod(lead, dtype=np.int64))
    batch = list(np.broadcast_shapes(*(tuple(ctx.dims(i)) for i in indices)))
    tuples = int(np.prod(batch, dtype=np.int64))
    offset = None
    for k, index in enumerate(indices):
        negative = ctx.temp(var, f"index{k}/negative")
        ctx.add(T.LESS, [index, ctx.const_i64([0])], [negative])
        wrapped = binary(ctx, T.ADD, index, ctx.const_i64([lead[k]]), ctx.temp(var, f"index{k}/wrapped"))
        positive = ctx.temp(var, f"index{k}/positive")
        ctx.add(T.WHERE, [negative, wrapped, index], [positive])
        stride = int(np.prod(lead[k + 1:], dtype=np.int64))
        term = positive if stride == 1 else binary(ctx, T.MUL, positive, ctx.const_i64([stride]),
                                                   ctx.temp(var, f"index{k}/offset"))
        offset = term if offset is None else binary(ctx, T.ADD, offset, term, ctx.temp(var, f"offset{k}"))
    column = ctx.temp(var, "offsets")
    ctx.add(T.RESHAPE, [offset, ctx.const_i32([tuples, 1])], [column])  # broadcasts the index tensors too
    if list(ctx.dims(column)) != [tuples, 1]:
        raise ctx.error(f"the index tensors do not broadcast to {batch}")
    hits = ctx.temp(var, "hits")
    ctx.add(T.EQUAL, [column, ctx.const(np.arange(positions, dtype=np.int64).reshape(1, positions), Precision.INT64)],
            [hits])
    # float32 writer numbers (exact below 2**24): drivers reduce floats everywhere, integers not always
    writers = ctx.temp(var, "writers")
    ctx.add(T.WHERE, [hits, ctx.const(np.arange(1, tuples + 1, dtype=np.float32).reshape(tuples, 1), Precision.FLOAT32),
                      ctx.const_f32([0.0])], [writers])
    last = ctx.temp(var, "last_writer")
    ctx.add(T.REDUCE_MAX, [writers, ctx.const_i32([0]), ctx.const_bool(False)], [last])
    written = ctx.temp(var, "written")
    ctx.add(T.GREATER, [last, ctx.const_f32([0.0])], [written])
    source = ctx.cast(binary(ctx, T.MAX, binary(ctx, T.SUB, last, ctx.const_f32([1.0]), ctx.temp(var, "writer")),
                             ctx.const_f32([0.0]), ctx.temp(var, "writer_index")), Precision.INT32, var, "source")
    value = ctx.cast(ctx.input(v.input(_index_put_slot(v, "Value", "value"))), x.type.precision, var, "value_cast")
    expanded = ctx.temp(var, "value_expanded")
    ctx.add(T.EXPAND, [value, ctx.const_i64(batch + rest)], [expanded])
    rows = ctx.temp(var, "value_rows")
    ctx.add(T.RESHAPE, [expanded, ctx.const_i32([tuples] + rest)], [rows])
    placed = ctx.temp(var, "placed")
    ctx.add(T.GATHER, [rows, source, ctx.const_i32(0)], [placed])
    flat = ctx.temp(var, "flat_input")
    ctx.add(T.RESHAPE, [x, ctx.const_i32([positions] + rest)], [flat])
    mask = ctx.temp(var, "written_rows")
    ctx.add(T.RESHAPE, [written, ctx.const_i32([positions] + [1] * len(rest))], [mask])
    assigned = ctx.temp(var, "assigned")
    ctx.add(T.WHERE, [mask, placed, flat], [assigned])
    ctx.add(T.RESHAPE, [assigned, ctx.const_i32(dims)], [ctx.output(var)])


# -- gather_nd ------------------------------------------------------------------------------------------------


def check_gather_nd(op, ctx) -> str | None:
    v = OpView(op)
    dims, index_dims = input_dims(ctx, op, "X"), input_dims(ctx, op, "Index")
    if dims is None or index_dims is None:
        return None
    precision = ctx.input(v.input("Index")).type.precision
    if precision not in (Precision.INT32, Precision.INT64):
        return f"Index is {precision.name}, not an integer tensor"
    if not index_dims or not known_dim(index_dims[-1]) or not 1 <= index_dims[-1] <= len(dims):
        return f"Index dims {list(index_dims)}: the last one (the indexed axes) must be known, 1..{len(dims)}"
    k = index_dims[-1]
    unknown = [d for d in range(k, len(dims)) if not known_dim(dims[d])]
    if unknown:
        return f"X dims {list(dims)}: dims {unknown} (each gathered slice's) are known only at run time"
    return None


@converter("gather_nd", emits=[T.CAST, T.SLICE, T.SQUEEZE, T.LESS, T.ADD, T.WHERE, T.MUL, T.SHAPE, T.RESHAPE,
                                T.GATHER], check=check_gather_nd)
def convert_gather_nd(ctx: ConversionContext, v: OpView) -> None:
    """Out[p] = X[Index[p, 0], ..., Index[p, k - 1], ...] (negative entries count from the end, as Paddle's kernel
    reads them): a GATHER from X with its first k axes flattened, at each tuple's row-major offset. An indexed dim
    known only at run time (DINO's encoder proposals: one per position of every level) enters the wrap and the
    strides as a SLICE of X's SHAPE; the dims of each gathered slice must be known."""
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    dims = list(ctx.dims(x))
    index = ctx.cast(ctx.input(v.input("Index")), Precision.INT64, var, "index")
    last = ctx.rank(index) - 1
    k = ctx.dims(index)[-1]
    sizes: dict = {}

    def dim_size(d: int):
        """X's dim d as an INT64 [1] operand: a constant when known, else a SLICE of X's SHAPE (built once)."""
        if known_dim(dims[d]):
            return ctx.const_i64([dims[d]])
        if d not in sizes:
            if "shape" not in sizes:
                sizes["shape"] = ctx.temp(var, "input_shape")
                ctx.add(T.SHAPE, [x, ctx.const_i32(int(Precision.INT64))], [sizes["shape"]])
            sizes[d] = ctx.temp(var, f"input_dim{d}")
            ctx.add(T.SLICE, [sizes["shape"], ctx.const_i32([0]), ctx.const_i64([d]), ctx.const_i64([d + 1]), None],
                    [sizes[d]])
        return sizes[d]

    offset = None
    for j in range(k):
        column = ctx.temp(var, f"index{j}/column")
        ctx.add(T.SLICE, [index, ctx.const_i32([last]), ctx.const_i64([j]), ctx.const_i64([j + 1]), None], [column])
        entry = ctx.temp(var, f"index{j}/entry")
        ctx.add(T.SQUEEZE, [column, ctx.const_i32([last])], [entry])
        size = dim_size(j)
        negative = ctx.temp(var, f"index{j}/negative")
        ctx.add(T.LESS, [entry, ctx.const_i64([0])], [negative])
        wrapped = binary(ctx, T.ADD, entry, size, ctx.temp(var, f"index{j}/wrapped"))
        positive = ctx.temp(var, f"index{j}/positive")
        ctx.add(T.WHERE, [negative, wrapped, entry], [positive])
        term = positive
        known_stride = int(np.prod([d for d in dims[j + 1:k] if known_dim(d)], dtype=np.int64))
        if known_stride != 1:
            term = binary(ctx, T.MUL, term, ctx.const_i64([known_stride]), ctx.temp(var, f"index{j}/offset"))
        for d in range(j + 1, k):
            if not known_dim(dims[d]):  # a stride factor known at run time only
                term = binary(ctx, T.MUL, term, dim_size(d), ctx.temp(var, f"index{j}/offset_by_dim{d}"))
        offset = term if offset is None else binary(ctx, T.ADD, offset, term, ctx.temp(var, f"offset{j}"))
    if last == 0:  # one index tuple: its entries are 0-d, and the [1] constants above broadcast them to [1]
        scalar = ctx.temp(var, "offset/0d")
        ctx.add(T.RESHAPE, [offset, ctx.const_i32([])], [scalar])
        offset = scalar  # so the GATHER gives Paddle's Index.shape[:-1] + X.shape[k:]: 0-d for an [1] index of [n]
    flat = ctx.temp(var, "flat_input")
    ctx.add(T.RESHAPE, [x, ctx.const_i32([-1] + dims[k:])], [flat])
    ctx.add(T.GATHER, [flat, offset, ctx.const_i32(0)], [ctx.output(var)])
