"""Converters: gather-like indexing (gather, index_select, lookup_table / lookup_table_v2), one_hot_v2
and tril_triu, each a GATHER or a composition of comparisons with WHERE.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import needs_constant, scalar_attr_or_tensor
from converters.context import ConversionContext
from converters.emit import binary, cast_to
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import OperationType as T, Precision, dtype_precision


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
def convert_gather(ctx: ConversionContext, op):
    """Rows of X along `axis` (the `Axis` tensor, else the attr, default 0) at `Index` (int32/int64)."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    var = v.output("Out")
    axis = scalar_attr_or_tensor(ctx, op, "axis", "Axis", 0)
    index = _index_vector(ctx, v.input("Index"), var)
    ctx.add(T.GATHER, [x, index, ctx.const_i32(axis)], [ctx.output(var)])


@converter("index_select", emits=[T.GATHER])
def convert_index_select(ctx: ConversionContext, op):
    v = OpView(op)
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
def convert_lookup_table_v2(ctx: ConversionContext, op):
    """Embedding: output dims = Ids dims + [W dims[1]]."""
    v = OpView(op)
    _lookup(ctx, op, ctx.input(v.input("Ids")))


@converter("lookup_table", emits=[T.SQUEEZE, T.GATHER, T.EQUAL, T.UNSQUEEZE, T.WHERE])
def convert_lookup_table(ctx: ConversionContext, op):
    """v1: Ids end in a size-1 dim that the output replaces by the embedding size."""
    v = OpView(op)
    ids = ctx.input(v.input("Ids"))
    dims = ctx.dims(ids)
    if dims and dims[-1] == 1:
        squeezed = ctx.temp(v.output("Out"), "ids")
        ctx.add(T.SQUEEZE, [ids, ctx.const_i32([len(dims) - 1])], [squeezed])
        ids = squeezed
    _lookup(ctx, op, ids)


def check_one_hot(op, ctx):
    v = OpView(op)
    if v.attr_precision("dtype", 5) is None:
        return f"dtype {v.attr('dtype')} is not a tensor element type NNAdapter has"
    if not v.inputs("depth_tensor") and v.attr_int("depth", -1) < 0:
        return "neither a 'depth' attr nor a 'depth_tensor' input"
    return None


@converter("one_hot_v2", emits=[T.RANGE, T.CAST, T.RESHAPE, T.UNSQUEEZE, T.EQUAL], check=check_one_hot)
def convert_one_hot_v2(ctx: ConversionContext, op):
    """out[..., j] = (x[...] == j) for j in [0, depth), in `dtype` (default float32). Ids outside
    [0, depth) give an all-zero row (Paddle raises there unless `allow_out_of_range`)."""
    v = OpView(op)
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
    cast_to(ctx, hits, v.attr_precision("dtype", 5), ctx.output(var))


@converter("tril_triu", emits=[T.SHAPE, T.SLICE, T.RANGE, T.UNSQUEEZE, T.SUB, T.LESS_EQUAL,
                                T.GREATER_EQUAL, T.WHERE])
def convert_tril_triu(ctx: ConversionContext, op):
    """Keep x[..., i, j] where j - i <= diagonal (`lower`) or >= diagonal (upper), else 0.

    The mask compares RANGE(rows) with RANGE(cols) taken from the input's SHAPE, so it follows the
    run-time dims."""
    v = OpView(op)
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
    ctx.add(T.WHERE, [keep, x, ctx.const_like(0, x)], [ctx.output(var)])
