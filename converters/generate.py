"""Converters for the ops that make a tensor from attributes or another tensor's shape: assign_value,
fill_constant, empty (zeros), fill_any_like, fill_zeros_like, fill_constant_batch_size_like, shape, size, range,
linspace and eye (FILL, FILL_LIKE, SHAPE, RANGE; ASSIGN of a constant for assign_value, size and eye; linspace in
arithmetic operations, or a constant when its bounds and count are known). `linspace_values` is Paddle's linspace,
which the host kernel shares.

Paddle names element types by VarType code (`dtype`, `in_dtype`, `out_dtype` attrs);
`op_view.VARTYPE_PRECISIONS` maps them to NNAdapter precisions. FILL/FILL_LIKE produce FLOAT16/32/64, INT32,
INT64 or BOOL8; other target types are filled in the nearest of those and CAST.

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry) and the standard.
"""
from __future__ import annotations

import math

import numpy as np

from converters.attrs import check_dtype_attr, known_dims
from converters.context import ConversionContext
from converters.emit import cast_to
from converters.op_view import VARTYPE_PRECISIONS, OpView, precision_of_var_type, var_attr_names, vartype_precision
from converters.registry import converter
from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision, dtype_precision, precision_dtype
from nnadapter_bridge.nnadapter.codes import OperationType as T

_FILLABLE = frozenset({Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64, Precision.INT32, Precision.INT64,
                       Precision.BOOL8})


def _fill_precision(target: Precision) -> Precision:
    """The FILL precision to produce before a CAST to `target` (itself when FILL can produce it)."""
    if target in _FILLABLE:
        return target
    return Precision.INT64 if target == Precision.UINT64 else Precision.INT32


_ASSIGN_VALUE_ATTRS = {
    Precision.FLOAT32: "fp32_values", Precision.INT32: "int32_values", Precision.INT64: "int64_values",
    Precision.BOOL8: "bool_values", Precision.FLOAT64: "fp64_values",
}


def _assign_value_array(op) -> np.ndarray:
    v = OpView(op)
    precision = vartype_precision(v.attr("dtype", 5))
    values = v.attr("values")  # Paddle 3: one list of scalars whatever the dtype
    if not values:
        values = v.attr(_ASSIGN_VALUE_ATTRS.get(precision, ""))
    if values is None:
        values = []
    shape = [int(d) for d in v.attr("shape", [len(values)])]
    array = np.asarray(values, dtype=precision_dtype(precision))
    return array.reshape(shape)


def _check_assign_value(op, ctx):
    v = OpView(op)
    reason = check_dtype_attr(op, "dtype", 5)
    if reason:
        return reason
    if v.optional_input("ValuesTensor"):
        return None
    try:
        _assign_value_array(op)
    except ValueError as exc:
        return f"assign_value values do not fit shape {v.attr('shape', [])}: {exc}"
    return None


@converter("assign_value", emits=[T.ASSIGN], check=_check_assign_value)
def convert_assign_value(ctx: ConversionContext, v: OpView) -> None:
    """The values attr as a constant, bound to Out (consumers then see a constant, as from a parameter).

    emits lists ASSIGN: when the constant is itself a subgraph output, the conversion copies it out."""
    values_tensor = v.optional_input("ValuesTensor")
    if values_tensor:
        ctx.add(T.ASSIGN, [ctx.input(values_tensor)], [ctx.output(v.output("Out"))])
        return
    array = _assign_value_array(v.op)
    # The precision is explicit: fp64_values stay float64 (and int64 values int64).
    # np.asarray(order="C"), not np.ascontiguousarray: that one turns a shape-[] value into [1].
    ctx.bind(v.output("Out"), ctx.const(np.asarray(array, order="C"), dtype_precision(array.dtype),
                                        name=v.output("Out")))


# -- fill_constant ----------------------------------------------------------------------------------------

def _fill_value(op, precision: Precision):
    """`str_value` when non-empty (it spells inf/nan), else `value`.

    Paddle 3 parses str_value as a double before casting to the dtype (so int64 values past 2^53 round),
    and so does this converter."""
    v = OpView(op)
    text = v.attr_str("str_value", "").strip()
    value = float(text.lower()) if text else v.attr_float("value", 0.0)
    if precision == Precision.BOOL8:
        return value != 0.0
    if precision in (Precision.FLOAT16, Precision.FLOAT32, Precision.FLOAT64):
        return value
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"value {value} does not fit an integer dtype")
    return int(value)


def _fill_value_operand(ctx, op, target: Precision, out_name: str):
    """The FILL `value` operand: ValueTensor (cast to the fill precision) or a constant from the attrs."""
    v = OpView(op)
    fill = _fill_precision(target)
    value_name = v.optional_input("ValueTensor")
    if value_name:
        operand = ctx.input(value_name)
        if operand.type.precision != fill:
            operand = cast_to(ctx, operand, fill, ctx.temp(out_name, "value_cast"))
        return operand
    return ctx.const(np.asarray([_fill_value(op, target)], dtype=precision_dtype(fill)), fill)


def _finish_fill(ctx, type: T, first, value, target: Precision, out_name: str) -> None:
    """FILL / FILL_LIKE into Out, with a CAST when the target type is not one FILL produces."""
    if _fill_precision(target) == target:
        ctx.add(type, [first, value], [ctx.output(out_name)])
        return
    filled = ctx.temp(out_name, "fill")
    ctx.add(type, [first, value], [filled])
    cast_to(ctx, filled, target, ctx.output(out_name))


def _shape_from_list(ctx, names, out_name: str):
    """CONCAT of the ShapeTensorList entries (each a [1] int tensor) into one INT32/INT64 shape."""
    parts = [ctx.input(n) for n in names]
    precision = Precision.INT64 if any(p.type.precision == Precision.INT64 for p in parts) else Precision.INT32
    aligned = []
    for i, part in enumerate(parts):
        if part.type.precision != precision:
            part = cast_to(ctx, part, precision, ctx.temp(out_name, f"shape_{i}_cast"))
        if part.type.rank == 0:
            reshaped = ctx.temp(out_name, f"shape_{i}_1d")
            ctx.add(T.RESHAPE, [part, ctx.const_i32([1])], [reshaped])
            part = reshaped
        aligned.append(part)
    if len(aligned) == 1:
        return aligned[0]
    shape = ctx.temp(out_name, "shape")
    ctx.add(T.CONCAT, [*aligned, ctx.const_i32(0)], [shape])
    return shape


def _fill_shape(ctx, v: OpView, out_name: str):
    """The shape operand of fill_constant / empty: ShapeTensor > ShapeTensorList > the `shape` attr."""
    shape_tensor, shape_list = v.optional_input("ShapeTensor"), v.inputs("ShapeTensorList")
    if shape_tensor:
        return ctx.input(shape_tensor)
    if shape_list:
        return _shape_from_list(ctx, shape_list, out_name)
    return ctx.const(np.asarray(v.attr("shape", []), dtype=np.int64).reshape(-1))


def _check_fill_constant(op, ctx):
    v = OpView(op)
    reason = check_dtype_attr(op, "dtype", 5)
    if reason:
        return reason
    if not v.optional_input("ValueTensor"):
        try:
            _fill_value(op, vartype_precision(v.attr("dtype", 5)))
        except ValueError as exc:
            return f"fill value: {exc}"
    return None


@converter("fill_constant", emits=[T.FILL, T.CONCAT, T.CAST, T.RESHAPE], check=_check_fill_constant)
def convert_fill_constant(ctx: ConversionContext, v: OpView) -> None:
    """A tensor of `shape` filled with `value`; shape from ShapeTensor > ShapeTensorList > the attr."""
    out_name = v.output("Out")
    target = vartype_precision(v.attr("dtype", 5))
    shape = _fill_shape(ctx, v, out_name)
    value = _fill_value_operand(ctx, v.op, target, out_name)
    _finish_fill(ctx, T.FILL, shape, value, target, out_name)


@converter("empty", emits=[T.FILL, T.CONCAT, T.CAST, T.RESHAPE], check=lambda op, ctx: check_dtype_attr(op, "dtype", 5))
def convert_empty(ctx: ConversionContext, v: OpView) -> None:
    """A tensor of `shape` (ShapeTensor > ShapeTensorList > the attr, as fill_constant) whose values Paddle leaves
    uninitialized: zeros, as the host kernel gives (a model reads only what it writes into it, e.g. with set_value:
    Falcon's causal mask)."""
    out_name = v.output("Out")
    target = vartype_precision(v.attr("dtype", 5))
    shape = _fill_shape(ctx, v, out_name)
    fill = _fill_precision(target)
    _finish_fill(ctx, T.FILL, shape, ctx.const(np.zeros([1], dtype=precision_dtype(fill)), fill), target, out_name)


# -- fill_*_like --------------------------------------------------------------------------------------------

def _check_fill_any_like(op, ctx):
    return check_dtype_attr(op, "dtype", -1, allow_same=True)


@converter("fill_any_like", emits=[T.FILL_LIKE, T.CAST], check=_check_fill_any_like)
def convert_fill_any_like(ctx: ConversionContext, v: OpView) -> None:
    """X's shape filled with `value`; `dtype` -1 (the default) keeps X's element type."""
    x = ctx.input(v.input("X"))
    code = v.attr_int("dtype", -1)
    target = x.type.precision if code == -1 else vartype_precision(code)
    if target not in VARTYPE_PRECISIONS.values():
        target = Precision.FLOAT32  # quantized X: Paddle's tensor is float
    value = v.attr_float("value", 0.0)
    fill = _fill_precision(target)
    constant = ctx.const(np.asarray([value != 0.0 if fill == Precision.BOOL8 else value], dtype=precision_dtype(fill)),
                         fill)
    _finish_fill(ctx, T.FILL_LIKE, x, constant, target, v.output("Out"))


@converter("fill_zeros_like", emits=[T.FILL_LIKE, T.CAST])
def convert_fill_zeros_like(ctx: ConversionContext, v: OpView) -> None:
    x = ctx.input(v.input("X"))
    target = x.type.precision if x.type.precision in VARTYPE_PRECISIONS.values() else Precision.FLOAT32
    fill = _fill_precision(target)
    _finish_fill(ctx, T.FILL_LIKE, x, ctx.const(np.zeros([1], dtype=precision_dtype(fill)), fill), target,
                 v.output("Out"))


def _check_fill_batch(op, ctx):
    v = OpView(op)
    reason = _check_fill_constant(op, ctx)
    if reason:
        return reason
    shape = v.attr("shape", [])
    out_idx = v.attr_int("output_dim_idx", 0)
    if not -len(shape) <= out_idx < len(shape):
        return f"output_dim_idx {out_idx} is outside shape {shape}"
    return None


@converter("fill_constant_batch_size_like", emits=[T.FILL, T.SHAPE, T.SLICE, T.CONCAT, T.CAST],
           check=_check_fill_batch)
def convert_fill_constant_batch_size_like(ctx: ConversionContext, v: OpView) -> None:
    """fill_constant whose shape[output_dim_idx] is Input's dim input_dim_idx (read at run time when unknown)."""
    out_name = v.output("Out")
    x = ctx.input(v.input("Input"))
    target = vartype_precision(v.attr("dtype", 5))
    shape = [int(d) for d in v.attr("shape", [])]
    in_idx, out_idx = v.attr_int("input_dim_idx", 0), v.attr_int("output_dim_idx", 0)
    in_idx = in_idx + x.type.rank if in_idx < 0 else in_idx
    out_idx = out_idx + len(shape) if out_idx < 0 else out_idx
    if not 0 <= in_idx < x.type.rank:
        raise ctx.error(f"input_dim_idx {v.attr('input_dim_idx', 0)} is outside Input's rank {x.type.rank}")
    batch = x.type.dims[in_idx]
    if batch != UNKNOWN and batch >= 0:
        shape[out_idx] = batch
        shape_operand = ctx.const(np.asarray(shape, dtype=np.int32))
    else:
        dims = ctx.temp(out_name, "input_shape")
        ctx.add(T.SHAPE, [x, ctx.const_i32(int(Precision.INT32))], [dims])
        picked = ctx.temp(out_name, "batch")
        ctx.add(T.SLICE, [dims, ctx.const_i32([0]), ctx.const_i32([in_idx]), ctx.const_i32([in_idx + 1]),
                          ctx.const_i32([1])], [picked])
        pieces = []
        if out_idx > 0:
            pieces.append(ctx.const_i32(shape[:out_idx]))
        pieces.append(picked)
        if out_idx + 1 < len(shape):
            pieces.append(ctx.const_i32(shape[out_idx + 1:]))
        if len(pieces) == 1:
            shape_operand = picked
        else:
            shape_operand = ctx.temp(out_name, "shape")
            ctx.add(T.CONCAT, [*pieces, ctx.const_i32(0)], [shape_operand])
    value = _fill_value_operand(ctx, v.op, target, out_name)
    _finish_fill(ctx, T.FILL, shape_operand, value, target, out_name)


# -- shapes and generated tensors --------------------------------------------------------------------


def declared_precision(ctx: ConversionContext, name: str, default: Precision) -> Precision:
    """The precision the program declares for var `name` (when the graph is known and declares an int type)."""
    graph = getattr(ctx, "graph", None)
    if graph is None:
        return default
    try:
        info = graph.var(name, getattr(ctx, "block", 0))
    except ModelFormatError:  # a var the program does not declare: keep the default
        return default
    code = getattr(info, "data_type", None)
    precision = precision_of_var_type(code) if code is not None else None
    return precision if precision in (Precision.INT32, Precision.INT64) else default


@converter("shape", emits=[T.SHAPE])
def convert_shape(ctx: ConversionContext, v: OpView) -> None:
    """The input's dims as a 1-D tensor; INT32 (Paddle's `shape` op) unless the program declares INT64."""
    x = ctx.input(v.input("Input"))
    out = v.output("Out")
    precision = declared_precision(ctx, out, Precision.INT32)
    ctx.add(T.SHAPE, [x, ctx.const_i32(int(precision))], [ctx.output(out)])


@converter("range", emits=[T.RANGE, T.CAST])
def convert_range(ctx: ConversionContext, v: OpView) -> None:
    """start, start + step, ... below end; the three tensors take Start's precision.

    PIR's `range` holds start/end/step as attributes (constants folded by the loader, run-time tensors as
    Variable-valued attributes); they take the op's `dtype`. A Variable known now (a shape element, folded
    for the input signature) is a constant; one known only at run time is read as an operand."""
    var = v.output("Out")
    if v.optional_input("Start") is None:
        precision = v.attr_precision("dtype", 5) or Precision.FLOAT32
        dtype = precision_dtype(precision)

        def bound(attr):
            refs = var_attr_names(v.op.attrs.get(attr))
            if refs:  # unresolved: computed at run time
                return ctx.cast(ctx.input(refs[0]), precision, var, attr)
            return ctx.const(np.asarray(v._scalar(attr, None), dtype=dtype).reshape(1), precision)

        ctx.add(T.RANGE, [bound("start"), bound("end"), bound("step")], [ctx.output(var)])
        return
    start = ctx.input(v.input("Start"))
    end = ctx.cast(ctx.input(v.input("End")), start.type.precision, var, "end")
    step = ctx.cast(ctx.input(v.input("Step")), start.type.precision, var, "step")
    ctx.add(T.RANGE, [start, end, step], [ctx.output(var)])


# -- linspace ---------------------------------------------------------------------------------------------

def linspace_values(start, stop, num: int, dtype) -> np.ndarray:
    """Paddle's linspace (its CPU kernel, matched on 1200 random cases of float32 / float64 / int32 / int64):
    `start` and `stop` (numpy scalars) are first cast to `dtype` (truncating for integers); the step and the values
    are computed in `dtype` itself for floats and in double for integers, the first half up from start
    (start + step * i), the second half down from stop (stop - step * (num - 1 - i)), then cast to `dtype`; one
    point is [start]. Raises ValueError for a negative count."""
    if num < 0:
        raise ValueError(f"Num must be non-negative, got {num}")
    dtype = np.dtype(dtype)
    compute = np.dtype(np.float64) if dtype.kind in "iub" else dtype
    first, last = (np.asarray(v).astype(dtype).astype(compute) for v in (start, stop))
    if num <= 1:
        return np.asarray([first][:num]).astype(dtype)
    step = (last - first) / compute.type(num - 1)
    i = np.arange(num).astype(compute)
    return np.where(i < num // 2, first + step * i, last - step * (compute.type(num - 1) - i)).astype(dtype)


@converter("linspace", emits=[T.ASSIGN, T.CAST, T.RANGE, T.SUB, T.MAX, T.DIV, T.FLOOR, T.MUL, T.ADD, T.LESS,
                              T.EQUAL, T.WHERE])
def convert_linspace(ctx: ConversionContext, v: OpView) -> None:
    """Paddle's values (`linspace_values`): a constant when Start, Stop and Num are known at conversion time, else
    computed as Paddle's kernel does (in `dtype` for floats, in FLOAT64 for integers, then CAST); ERNIE-CTM's
    positions 1 .. L - 2 from the sequence length."""
    var = v.output("Out")
    precision = v.attr_precision("dtype", 5) or Precision.FLOAT32
    names = [v.input(slot) for slot in ("Start", "Stop", "Num")]
    known = [ctx.constant_value(name) for name in names]
    scalars = [value.reshape(-1)[0] for value in known if value is not None and value.size == 1]
    if len(scalars) == 3:
        try:
            points = linspace_values(scalars[0], scalars[1], int(scalars[2]), precision_dtype(precision))
        except ValueError as exc:
            raise ctx.error(str(exc)) from None
        ctx.add(T.ASSIGN, [ctx.const(points, precision)], [ctx.output(var)])
        return
    dtype = np.dtype(precision_dtype(precision))
    compute = Precision.FLOAT64 if dtype.kind in "iub" else precision
    compute_dtype = precision_dtype(compute)

    def bound(name, purpose):  # Start / Stop in `dtype` first (truncated for integers), then computed with
        return ctx.cast(ctx.cast(ctx.input(name), precision, var, f"{purpose}_cast"), compute, var, purpose)

    def const(value):
        return ctx.const(np.asarray([value], compute_dtype), compute)

    def step(kind, a, b, purpose):
        out = ctx.temp(var, purpose)
        ctx.add(kind, [a, b, ctx.const_i32(0)] if kind in _FUSED else [a, b], [out])
        return out

    start, stop = bound(names[0], "start"), bound(names[1], "stop")
    count = ctx.cast(ctx.input(names[2]), compute, var, "num")
    index = ctx.temp(var, "index")
    ctx.add(T.RANGE, [const(0), count, const(1)], [index])
    last = step(T.SUB, count, const(1), "last")
    delta = step(T.DIV, step(T.SUB, stop, start, "span"), step(T.MAX, last, const(1), "intervals"), "step")
    half = ctx.temp(var, "half")
    ctx.add(T.FLOOR, [step(T.DIV, count, const(2), "count_halved")], [half])
    first = step(T.ADD, start, step(T.MUL, delta, index, "rise"), "from_start")
    second = step(T.SUB, stop, step(T.MUL, delta, step(T.SUB, last, index, "left"), "fall"), "from_stop")
    values = ctx.temp(var, "values")
    ctx.add(T.WHERE, [step(T.LESS, index, half, "first_half"), first, second], [values])
    single = ctx.temp(var, "values_or_start")
    ctx.add(T.WHERE, [step(T.EQUAL, count, const(1), "one_point"), start, values], [single])
    if compute == precision:
        ctx.add(T.ASSIGN, [single], [ctx.output(var)])
    else:
        cast_to(ctx, single, precision, ctx.output(var))


_FUSED = frozenset({T.ADD, T.SUB, T.MUL, T.DIV, T.MAX})


# -- size, eye --------------------------------------------------------------------------------------------

@converter("size", emits=[T.ASSIGN])
def convert_size(ctx: ConversionContext, v: OpView) -> None:
    """The input's element count, an int64 0-D constant: its dims are known once the subgraph is converted for its
    input shapes (BiT's weight standardisation divides by the numel of each weight)."""
    dims = ctx.dims(ctx.input(v.input("Input")))
    if not known_dims(dims):
        raise ctx.error(f"size of an input whose dims {list(dims)} are not known when it is converted")
    count = np.asarray(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
    ctx.add(T.ASSIGN, [ctx.const(count, Precision.INT64)], [ctx.output(v.output("Out"))])


@converter("eye", emits=[T.ASSIGN])
def convert_eye(ctx: ConversionContext, v: OpView) -> None:
    """The num_rows x num_columns identity (num_columns -1: square) in `dtype`, a constant (Nyströmformer's
    iterative pseudo-inverse starts from it)."""
    rows = v.attr_int("num_rows", 0)
    cols = v.attr_int("num_columns", -1)
    cols = rows if cols < 0 else cols
    if rows < 0:
        raise ctx.error(f"num_rows {rows} is negative")
    precision = v.attr_precision("dtype", 5) or Precision.FLOAT32
    identity = np.eye(rows, cols, dtype=precision_dtype(precision))
    ctx.add(T.ASSIGN, [ctx.const(identity, precision)], [ctx.output(v.output("Out"))])
