"""Converters: shape and tensor manipulation (reshape, flatten, squeeze/unsqueeze, transpose, concat, split,
stack/unstack/unbind, slice/strided_slice/flip/reverse, expand/expand_v2/expand_as_v2/tile/broadcast_tensors,
shape, range, meshgrid, shuffle_channel, roll).

Reductions, arg/top-k/cumsum live in reduce.py, gather-like indexing in tensor_index.py.
Attributes Paddle also accepts as tensors go through
`ctx.ints_operand` (params fold into constants). Where an emitted operation needs a constant that a
run-time tensor would supply (UNSQUEEZE axes, CONCAT axis, SPLIT sizes), the op's `check` says so and the
op stays on the host.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from converters.attrs import known_dim, known_dims, needs_constant, scalar_attr_or_tensor
from converters.context import ConversionContext
from converters.op_view import OpView, precision_of_var_type, var_attr_names
from converters.registry import converter
from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader.dtypes import VarTypeCode
from nnadapter_bridge.nnadapter.codes import OperationType as T, Precision, precision_dtype

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


# -- reshape family ---------------------------------------------------------------------------------


@converter("reshape", "reshape2", emits=[T.RESHAPE, T.CONCAT, T.CAST])
def convert_reshape(ctx: ConversionContext, op):
    """Shape source priority: the `ShapeTensor` list, then the `Shape` tensor, then the `shape` attr
    (0 copies the input dim, -1 is inferred: RESHAPE's own rule). `XShape` is not produced."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    shape = ctx.ints_operand(op, "shape", tensor="Shape", tensor_list="ShapeTensor", list_first=True)
    ctx.add(T.RESHAPE, [x, shape], [ctx.output(v.output("Out"))])


@converter("flatten", "flatten2", emits=[T.RESHAPE, T.FLATTEN])
def convert_flatten(ctx: ConversionContext, op):
    """A 2-D result [prod(dims[:axis]), prod(dims[axis:])]; `axis` (default 1) lies in [0, rank]."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    rank = ctx.rank(x)
    axis = v.attr_int("axis", 1)
    if not 0 <= axis <= rank:
        raise ctx.error(f"axis {axis} must lie in [0, {rank}] for an input of rank {rank}")
    out = ctx.output(v.output("Out"))
    if axis == 0:
        ctx.add(T.RESHAPE, [x, ctx.const_i32([1, -1])], [out])
    elif axis == rank:
        ctx.add(T.RESHAPE, [x, ctx.const_i32([-1, 1])], [out])
    else:
        head = x
        if axis > 1:
            head = ctx.temp(v.output("Out"), "flatten_head")
            ctx.add(T.FLATTEN, [x, ctx.const_i32(0), ctx.const_i32(axis - 1)], [head])
        ctx.add(T.FLATTEN, [head, ctx.const_i32(1), ctx.const_i32(-1)], [out])


@converter("flatten_contiguous_range", emits=[T.FLATTEN])
def convert_flatten_contiguous_range(ctx: ConversionContext, op):
    v = OpView(op)
    x = ctx.input(v.input("X"))
    start, stop = v.attr_int("start_axis", 1), v.attr_int("stop_axis", 1)
    if ctx.rank(x) == 0:
        start = stop = 0  # Paddle flattens a 0-D tensor to [1]; FLATTEN does the same for rank 0
    ctx.add(T.FLATTEN, [x, ctx.const_i32(start), ctx.const_i32(stop)], [ctx.output(v.output("Out"))])


@converter("squeeze", "squeeze2", emits=[T.SQUEEZE])
def convert_squeeze(ctx: ConversionContext, op):
    """`axes` empty (the default) removes every size-1 dim; named axes whose dim is not 1 are kept."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    axes = v.attr_ints("axes")
    ctx.add(T.SQUEEZE, [x, ctx.const_i32(axes) if axes else None], [ctx.output(v.output("Out"))])


@converter("unsqueeze", "unsqueeze2", emits=[T.UNSQUEEZE, T.CONCAT, T.CAST],
           check=needs_constant("AxesTensor", "AxesTensorList", what="UNSQUEEZE's axes"))
def convert_unsqueeze(ctx: ConversionContext, op):
    v = OpView(op)
    x = ctx.input(v.input("X"))
    axes = ctx.ints_operand(op, "axes", tensor="AxesTensor", tensor_list="AxesTensorList", list_first=False)
    ctx.add(T.UNSQUEEZE, [x, axes], [ctx.output(v.output("Out"))])


@converter("transpose", "transpose2", emits=[T.TRANSPOSE])
def convert_transpose(ctx: ConversionContext, op):
    v = OpView(op)
    x = ctx.input(v.input("X"))
    perm = v.attr_ints("axis")
    ctx.add(T.TRANSPOSE, [x, ctx.const_i32(perm)], [ctx.output(v.output("Out"))])


# -- joining and splitting ---------------------------------------------------------------------------


@converter("concat", emits=[T.CONCAT], check=needs_constant("AxisTensor", what="CONCAT's axis"))
def convert_concat(ctx: ConversionContext, op):
    v = OpView(op)
    axis = scalar_attr_or_tensor(ctx, op, "axis", "AxisTensor", 0)
    parts = [ctx.input(n) for n in v.inputs("X")]
    ctx.add(T.CONCAT, [*parts, ctx.const_i32(axis)], [ctx.output(v.output("Out"))])


@converter("split", emits=[T.SPLIT],
           check=needs_constant("AxisTensor", "SectionsTensorList", what="SPLIT's axis and sizes"))
def convert_split(ctx: ConversionContext, op):
    """`num` > 0 cuts the axis into equal parts; otherwise `sections` (one -1 inferred, or the
    `SectionsTensorList` of parameters) gives the sizes."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    axis = scalar_attr_or_tensor(ctx, op, "axis", "AxisTensor", 0)
    outs = v.outputs("Out")
    num = v.attr_int("num", 0)
    if v.inputs("SectionsTensorList"):  # known now: the check refuses run-time sizes
        sizes = [int(np.asarray(ctx.constant_value(n)).reshape(-1)[0]) for n in v.inputs("SectionsTensorList")]
    elif num > 0:
        dims = ctx.dims(x)
        dim = dims[axis + len(dims) if axis < 0 else axis]
        if not known_dim(dim):
            raise ctx.error(f"split into num={num} parts needs the size of axis {axis}, which is unknown")
        if dim % num:
            raise ctx.error(f"axis {axis} of size {dim} does not split into {num} equal parts")
        sizes = [dim // num] * num
    else:
        sizes = v.attr_ints("sections")
    if len(sizes) != len(outs):
        raise ctx.error(f"{len(sizes)} sections {sizes} but {len(outs)} outputs")
    ctx.add(T.SPLIT, [x, ctx.const_i32(axis), ctx.const_i32(sizes)], [ctx.output(n) for n in outs])


@converter("stack", emits=[T.STACK])
def convert_stack(ctx: ConversionContext, op):
    v = OpView(op)
    parts = [ctx.input(n) for n in v.inputs("X")]
    ctx.add(T.STACK, [*parts, ctx.const_i32(v.attr_int("axis", 0))], [ctx.output(v.output("Y"))])


def _unstack(ctx: ConversionContext, op, out_slot: str):
    v = OpView(op)
    x = ctx.input(v.input("X"))
    axis = v.attr_int("axis", 0)
    outs = v.outputs(out_slot)
    ctx.add(T.UNSTACK, [x, ctx.const_i32(axis), ctx.const_i32(len(outs))], [ctx.output(n) for n in outs])


@converter("unstack", emits=[T.UNSTACK])
def convert_unstack(ctx: ConversionContext, op):
    _unstack(ctx, op, "Y")


@converter("unbind", emits=[T.UNSTACK])
def convert_unbind(ctx: ConversionContext, op):
    _unstack(ctx, op, "Out")


# -- slicing ---------------------------------------------------------------------------------------


def _squeeze_decreased(ctx: ConversionContext, op, sliced, decrease_axis):
    """Drop the `decrease_axis` dims (each of size 1 after slicing) into the op's output."""
    v = OpView(op)
    if not decrease_axis:
        return
    ctx.add(T.SQUEEZE, [sliced, ctx.const_i32(decrease_axis)], [ctx.output(v.output("Out"))])


def _slice_target(ctx: ConversionContext, op, decrease_axis):
    v = OpView(op)
    return ctx.temp(v.output("Out"), "slice") if decrease_axis else ctx.output(v.output("Out"))


@converter("slice", emits=[T.SLICE, T.SQUEEZE, T.CONCAT, T.CAST])
def convert_slice(ctx: ConversionContext, op):
    """input[starts:ends] along `axes` (negative indices count from the end, out-of-range bounds clamp:
    SLICE's Python rule, which is Paddle's for step 1). Bounds come from `StartsTensor`/`EndsTensor`
    first, then the tensor lists, then the attrs; `decrease_axis` squeezes the sliced axes."""
    v = OpView(op)
    x = ctx.input(v.input("Input"))
    axes = v.attr_ints("axes")
    starts = ctx.ints_operand(op, "starts", tensor="StartsTensor", tensor_list="StartsTensorList",
                              list_first=False, precision=Precision.INT64)
    ends = ctx.ints_operand(op, "ends", tensor="EndsTensor", tensor_list="EndsTensorList",
                            list_first=False, precision=Precision.INT64)
    decrease_axis = v.attr_ints("decrease_axis")
    sliced = _slice_target(ctx, op, decrease_axis)
    ctx.add(T.SLICE, [x, ctx.const_i32(axes), starts, ends, None], [sliced])
    _squeeze_decreased(ctx, op, sliced, decrease_axis)


def _constant_ints(op, ctx, attr, tensor, tensor_list):
    """An int-list attribute's values when constant (the attr, or values known now in its tensor forms:
    parameters, shapes computed at conversion), else None."""
    v = OpView(op)
    for slot in (tensor, tensor_list):
        names = v.inputs(slot)
        if names:
            values = [ctx.constant_value(n) for n in names] if ctx is not None else [None]
            if any(value is None for value in values):
                return None
            return [int(x) for value in values for x in np.asarray(value).reshape(-1)]
    return v.attr_ints(attr)


def check_strided_slice(op, ctx) -> Optional[str]:
    strides = _constant_ints(op, ctx, "strides", "StridesTensor", "StridesTensorList")
    if strides is not None and any(s == 0 for s in strides):
        return f"strides {strides} contain 0"
    return None


@converter("strided_slice", emits=[T.SLICE, T.SQUEEZE, T.CONCAT, T.CAST], check=check_strided_slice)
def convert_strided_slice(ctx: ConversionContext, op):
    """input[starts:ends:strides] along `axes`. Paddle 3's bounds rule is Python's for either stride
    sign (verified: x[::-1] is starts=INT32_MAX, ends=INT32_MIN; an end of -1 with a negative stride
    selects nothing), which is SLICE's. One legacy encoding differs: starts=-1, ends=0 with infer flag -1
    on a decreased axis means "the last element", not an empty range."""
    v = OpView(op)
    x = ctx.input(v.input("Input"))
    axes = v.attr_ints("axes")
    decrease_axis = v.attr_ints("decrease_axis")
    infer_flags = v.attr_ints("infer_flags") or [1] * len(axes)
    starts = _constant_ints(op, ctx, "starts", "StartsTensor", "StartsTensorList")
    ends = _constant_ints(op, ctx, "ends", "EndsTensor", "EndsTensorList")
    strides = _constant_ints(op, ctx, "strides", "StridesTensor", "StridesTensorList")
    if starts is not None and ends is not None and strides is not None:
        for i, (a, s, e, f) in enumerate(zip(axes, starts, ends, infer_flags)):
            if a in decrease_axis and s == -1 and e == 0 and f == -1:
                ends[i], strides[i] = INT64_MAX, 1
        starts_op, ends_op, steps_op = ctx.const_i64(starts), ctx.const_i64(ends), ctx.const_i64(strides)
    else:
        starts_op = ctx.ints_operand(op, "starts", tensor="StartsTensor", tensor_list="StartsTensorList",
                                     list_first=False, precision=Precision.INT64)
        ends_op = ctx.ints_operand(op, "ends", tensor="EndsTensor", tensor_list="EndsTensorList",
                                   list_first=False, precision=Precision.INT64)
        steps_op = ctx.ints_operand(op, "strides", tensor="StridesTensor", tensor_list="StridesTensorList",
                                    list_first=False, precision=Precision.INT64)
    sliced = _slice_target(ctx, op, decrease_axis)
    ctx.add(T.SLICE, [x, ctx.const_i32(axes), starts_op, ends_op, steps_op], [sliced])
    _squeeze_decreased(ctx, op, sliced, decrease_axis)


def _check_flip(op, ctx) -> Optional[str]:
    v = OpView(op)
    if v.type == "reverse" and not v.attr_ints("axis"):
        return "reverse needs at least one axis (Paddle rejects an empty 'axis')"
    graph = getattr(ctx, "graph", None)
    x = v.optional_input("X")
    if graph is not None and x:
        try:
            var = graph.var(x, getattr(ctx, "block", 0))
        except ModelFormatError:
            return None
        if var.var_type == int(VarTypeCode.LOD_TENSOR_ARRAY):
            return f"X '{x}' is a tensor array: its elements are reversed on the host"
    return None


@converter("flip", "reverse", emits=[T.SLICE, T.ASSIGN], check=_check_flip)
def convert_flip(ctx: ConversionContext, op):
    """Reverse each axis in `axis`: a SLICE from the last element past the first with step -1. The legacy
    `reverse` op is the same on a tensor (its tensor-array form runs on the host: k_control)."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    axes = v.attr_ints("axis")
    out = ctx.output(v.output("Out"))
    if not axes:
        ctx.add(T.ASSIGN, [x], [out])
        return
    n = len(axes)
    ctx.add(T.SLICE, [x, ctx.const_i32(axes), ctx.const_i64([-1] * n), ctx.const_i64([INT64_MIN] * n),
                      ctx.const_i64([-1] * n)], [out])


# -- broadcasting and repeating -----------------------------------------------------------------------


@converter("expand", emits=[T.TILE, T.CONCAT, T.CAST])
def convert_expand(ctx: ConversionContext, op):
    """expand (v1) repeats each dim `expand_times[i]` times: TILE. `ExpandTimes` wins over the
    `expand_times_tensor` list, which wins over the attr."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    times = ctx.ints_operand(op, "expand_times", tensor="ExpandTimes", tensor_list="expand_times_tensor",
                             list_first=False)
    ctx.add(T.TILE, [x, times], [ctx.output(v.output("Out"))])


@converter("expand_v2", emits=[T.EXPAND, T.CONCAT, T.CAST])
def convert_expand_v2(ctx: ConversionContext, op):
    """Broadcast to `shape` (-1 keeps the input dim): `Shape`, then `expand_shapes_tensor`, then the attr."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    shape = ctx.ints_operand(op, "shape", tensor="Shape", tensor_list="expand_shapes_tensor", list_first=False)
    ctx.add(T.EXPAND, [x, shape], [ctx.output(v.output("Out"))])


def _check_broadcast_tensors(op, ctx) -> Optional[str]:
    if ctx is None:
        return None
    dims = [ctx.dims(ctx.input(n)) for n in OpView(op).inputs("X") if ctx.has(n)]
    if not all(known_dims(d) for d in dims):
        return "the broadcast shape needs every input's dims (the host broadcasts at run time)"
    return None


@converter("broadcast_tensors", emits=[T.EXPAND, T.ASSIGN], check=_check_broadcast_tensors)
def convert_broadcast_tensors(ctx: ConversionContext, op):
    """Every X broadcast to the inputs' common shape (numpy's rule, as paddle.broadcast_tensors): an EXPAND each."""
    v = OpView(op)
    parts = [ctx.input(n) for n in v.inputs("X")]
    outs = v.outputs("Out")
    if len(parts) != len(outs):
        raise ctx.error(f"{len(parts)} inputs X but {len(outs)} outputs Out")
    try:
        shape = np.broadcast_shapes(*(tuple(ctx.dims(p)) for p in parts))
    except ValueError as exc:
        raise ctx.error(f"the inputs do not broadcast: {exc}") from exc
    for part, out in zip(parts, outs):
        if tuple(ctx.dims(part)) == tuple(shape):
            ctx.add(T.ASSIGN, [part], [ctx.output(out)])
        else:
            ctx.add(T.EXPAND, [part, ctx.const_i32(list(shape))], [ctx.output(out)])


@converter("expand_as_v2", emits=[T.EXPAND, T.SHAPE])
def convert_expand_as(ctx: ConversionContext, op):
    """Broadcast X to the dims of Y when given (its static dims, else its SHAPE at run time), else to
    the `target_shape` attr."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    target_names = v.inputs("Y") or v.inputs("target_tensor")
    if target_names:
        target = ctx.input(target_names[0])
        dims = ctx.dims(target)
        if all(known_dim(d) for d in dims):
            shape = ctx.const_i32(list(dims))
        else:
            shape = ctx.temp(v.output("Out"), "target_shape")
            ctx.add(T.SHAPE, [target, ctx.const_i32(int(Precision.INT32))], [shape])
    else:
        shape = ctx.const_i32(v.attr_ints("target_shape"))
    ctx.add(T.EXPAND, [x, shape], [out])


@converter("tile", emits=[T.TILE, T.CONCAT, T.CAST, T.ASSIGN])
def convert_tile(ctx: ConversionContext, op):
    """`RepeatTimes`, then `repeat_times_tensor`, then the attr; the shorter of repeats and dims gets
    leading 1s (TILE's rule, as paddle.tile)."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    repeats = ctx.ints_operand(op, "repeat_times", tensor="RepeatTimes", tensor_list="repeat_times_tensor",
                               list_first=False)
    if repeats.is_constant and repeats.value.size < ctx.rank(x):
        # Spelled out (OpenVINO's Tile reads an empty repeats list as garbage rather than "repeat nothing").
        times = [1] * (ctx.rank(x) - repeats.value.size) + [int(t) for t in repeats.value.reshape(-1)]
        if all(t == 1 for t in times):
            ctx.add(T.ASSIGN, [x], [out])
            return
        repeats = ctx.const_i32(times)
    ctx.add(T.TILE, [x, repeats], [out])


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
def convert_shape(ctx: ConversionContext, op):
    """The input's dims as a 1-D tensor; INT32 (Paddle's `shape` op) unless the program declares INT64."""
    v = OpView(op)
    x = ctx.input(v.input("Input"))
    out = v.output("Out")
    precision = declared_precision(ctx, out, Precision.INT32)
    ctx.add(T.SHAPE, [x, ctx.const_i32(int(precision))], [ctx.output(out)])


@converter("range", emits=[T.RANGE, T.CAST])
def convert_range(ctx: ConversionContext, op):
    """start, start + step, ... below end; the three tensors take Start's precision.

    PIR's `range` holds start/end/step as attributes (constants folded by the loader, run-time tensors as
    Variable-valued attributes); they take the op's `dtype`. A Variable known now (a shape element, folded
    for the input signature) is a constant; one known only at run time is read as an operand."""
    v = OpView(op)
    var = v.output("Out")
    if v.optional_input("Start") is None:
        precision = v.attr_precision("dtype", 5) or Precision.FLOAT32
        dtype = precision_dtype(precision)

        def bound(attr):
            refs = var_attr_names(op.attrs.get(attr))
            if refs:  # unresolved: computed at run time
                return ctx.cast(ctx.input(refs[0]), precision, var, attr)
            return ctx.const(np.asarray(v._scalar(attr, None), dtype=dtype).reshape(1), precision)

        ctx.add(T.RANGE, [bound("start"), bound("end"), bound("step")], [ctx.output(var)])
        return
    start = ctx.input(v.input("Start"))
    end = ctx.cast(ctx.input(v.input("End")), start.type.precision, var, "end")
    step = ctx.cast(ctx.input(v.input("Step")), start.type.precision, var, "step")
    ctx.add(T.RANGE, [start, end, step], [ctx.output(var)])


@converter("meshgrid", emits=[T.MESHGRID])
def convert_meshgrid(ctx: ConversionContext, op):
    v = OpView(op)
    parts = []
    for name in v.inputs("X"):
        part = ctx.input(name)
        if part.type.rank == 0:  # Paddle's meshgrid takes a 0-d input as one of size 1 (MESHGRID wants 1-D)
            flat = ctx.temp(name, "meshgrid/as_vector")
            ctx.add(T.RESHAPE, [part, ctx.const_i32([1])], [flat])
            part = flat
        parts.append(part)
    ctx.add(T.MESHGRID, parts, [ctx.output(n) for n in v.outputs("Out")])


# -- moving elements -----------------------------------------------------------------------------------


@converter("shuffle_channel", emits=[T.CHANNEL_SHUFFLE])
def convert_shuffle_channel(ctx: ConversionContext, op):
    v = OpView(op)
    x = ctx.input(v.input("X"))
    ctx.add(T.CHANNEL_SHUFFLE, [x, ctx.const_i32(v.attr_int("group", 1))], [ctx.output(v.output("Out"))])


def check_channel_shuffle(op, ctx) -> Optional[str]:
    v = OpView(op)
    layout = v.attr("data_format", "NCHW")
    if layout not in ("NCHW", "AnyLayout", "NHWC"):
        return f"data_format '{layout}' is neither NCHW nor NHWC"
    return None


@converter("channel_shuffle", emits=[T.CHANNEL_SHUFFLE, T.TRANSPOSE], check=check_channel_shuffle)
def convert_channel_shuffle(ctx: ConversionContext, op):
    """paddle.nn.functional.channel_shuffle: `groups` on an NCHW input (the same regrouping); an NHWC input is
    transposed to NCHW and back (CHANNEL_SHUFFLE regroups axis 1)."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    out = ctx.output(v.output("Out"))
    groups = ctx.const_i32(v.attr_int("groups", 1))
    if v.attr("data_format", "NCHW") != "NHWC":
        ctx.add(T.CHANNEL_SHUFFLE, [x, groups], [out])
        return
    first, shuffled = ctx.temp(v.output("Out"), "channel_first"), ctx.temp(v.output("Out"), "shuffled")
    ctx.add(T.TRANSPOSE, [x, ctx.const_i32([0, 3, 1, 2])], [first])
    ctx.add(T.CHANNEL_SHUFFLE, [first, groups], [shuffled])
    ctx.add(T.TRANSPOSE, [shuffled, ctx.const_i32([0, 2, 3, 1])], [out])


@converter("roll", emits=[T.ROLL, T.CONCAT, T.CAST])
def convert_roll(ctx: ConversionContext, op):
    """Rotate along `axis` by `shifts` (or the `ShiftsTensor`); no axis rolls the flattened tensor."""
    v = OpView(op)
    x = ctx.input(v.input("X"))
    shifts = ctx.ints_operand(op, "shifts", tensor="ShiftsTensor", list_first=False, precision=Precision.INT64)
    axes = v.attr_ints("axis")
    ctx.add(T.ROLL, [x, shifts, ctx.const_i32(axes) if axes else None], [ctx.output(v.output("Out"))])
