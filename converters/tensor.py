"""Converters for the tensor ops of the standard's tensor family: concat, split, stack, unstack, unbind,
slice, strided_slice, flip / reverse, meshgrid, roll (CONCAT, SPLIT, STACK, UNSTACK, SLICE, MESHGRID, ROLL)
and the paddings pad2d, pad3d and pad (PAD). Gather-like indexing is in `tensor_index`.

Tensor forms of attributes become operands (pad2d/pad3d `Paddings`); where an emitted operation needs a
constant a run-time tensor would supply (CONCAT axis, SPLIT sizes), the op's `check` says so and the op stays
on the host.

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry) and the standard.
"""
from __future__ import annotations

import numpy as np

from converters.attrs import (
    input_dims,
    known_dim,
    known_dims,
    needs_constant,
    runtime_inputs,
    scalar_attr_or_tensor,
)
from converters.context import ConversionContext
from converters.emit import binary, compare
from converters.layout import is_channel_last, layout_reason
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader.dtypes import VarTypeCode
from nnadapter_bridge.loader.program import VarRef
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import PadMode, Precision

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


# -- joining and splitting ---------------------------------------------------------------------------


@converter("concat", emits=[T.CONCAT], check=needs_constant("AxisTensor", what="CONCAT's axis"))
def convert_concat(ctx: ConversionContext, v: OpView) -> None:
    axis = scalar_attr_or_tensor(ctx, v.op, "axis", "AxisTensor", 0)
    parts = [ctx.input(n) for n in v.inputs("X")]
    ctx.add(T.CONCAT, [*parts, ctx.const_i32(axis)], [ctx.output(v.output("Out"))])


def _split_at_run_time(ctx: ConversionContext, v: OpView, x, axis: int, outs: list,
                       sections: str | None = None) -> None:
    """SPLIT by sizes known only at run time (Deformable DETR's and DINO's levels: each H * W from the feature
    maps' shapes, one tensor each in `SectionsTensorList`; or all in the one tensor `sections` names, Cascade
    R-CNN's per-image box counts): each part a SLICE between running sums of the sizes, a -1 among them the axis's
    rest (Paddle infers at most one)."""
    var = outs[0]
    sizes = []
    for k in range(len(outs)):
        flat = ctx.temp(var, f"section{k}_1d")
        if sections is None:
            ctx.add(T.RESHAPE, [ctx.input(v.inputs("SectionsTensorList")[k]), ctx.const_i32([1])], [flat])
        else:
            ctx.add(T.SLICE, [ctx.input(sections), ctx.const_i32([0]), ctx.const_i32([k]), ctx.const_i32([k + 1]),
                              ctx.const_i32([1])], [flat])
        sizes.append(ctx.cast(flat, Precision.INT32, var, f"section{k}"))
    shape = ctx.temp(var, "shape")
    ctx.add(T.SHAPE, [x, ctx.const_i32(int(Precision.INT32))], [shape])
    length = ctx.temp(var, "axis_length")
    ctx.add(T.SLICE, [shape, ctx.const_i32([0]), ctx.const_i32([axis]), ctx.const_i32([axis + 1]),
                      ctx.const_i32([1])], [length])
    total = sizes[0]
    for k, size in enumerate(sizes[1:], 1):
        total = binary(ctx, T.ADD, total, size, ctx.temp(var, f"sections_upto{k}"))
    rest = binary(ctx, T.SUB, binary(ctx, T.SUB, length, total, ctx.temp(var, "length_minus_sections")),
                  ctx.const_i32([1]), ctx.temp(var, "inferred"))  # the -1's size: length - (the others - 1) - 1
    start = ctx.const_i32([0])
    for k, (size, out) in enumerate(zip(sizes, outs)):
        inferred = compare(ctx, T.EQUAL, size, ctx.const_i32([-1]), ctx.temp(var, f"section{k}_inferred"))
        fixed = ctx.temp(var, f"section{k}_size")
        ctx.add(T.WHERE, [inferred, rest, size], [fixed])
        end = binary(ctx, T.ADD, start, fixed, ctx.temp(var, f"section{k}_end"))
        ctx.add(T.SLICE, [x, ctx.const_i32([axis]), start, end, ctx.const_i32([1])], [ctx.output(out)])
        start = end


@converter("split", emits=[T.SPLIT, T.RESHAPE, T.CAST, T.SHAPE, T.SLICE, T.ADD, T.SUB, T.EQUAL, T.WHERE],
           check=needs_constant("AxisTensor", what="SPLIT's axis"))
def convert_split(ctx: ConversionContext, v: OpView) -> None:
    """`num` > 0 cuts the axis into equal parts; otherwise `sections` (one -1 inferred, or the
    `SectionsTensorList`, or one tensor of all the sizes) gives the sizes: parameters or values known now make one
    SPLIT, sizes known only at run time SLICEs (_split_at_run_time)."""
    x = ctx.input(v.input("X"))
    axis = scalar_attr_or_tensor(ctx, v.op, "axis", "AxisTensor", 0)
    outs = v.outputs("Out")
    num = v.attr_int("num", 0)
    sections = v.op.attr("sections")
    if isinstance(sections, VarRef):  # one run-time tensor of the sizes (a known one was resolved into the attr)
        if tuple(ctx.dims(sections.name)) != (len(outs),):
            raise ctx.error(f"sections tensor {sections.name!r} of shape {ctx.dims(sections.name)} for "
                            f"{len(outs)} outputs")
        _split_at_run_time(ctx, v, x, axis + ctx.rank(x) if axis < 0 else axis, outs, sections=sections.name)
        return
    if v.inputs("SectionsTensorList") and runtime_inputs(v.op, ctx, "SectionsTensorList"):
        if len(v.inputs("SectionsTensorList")) != len(outs):
            raise ctx.error(f"{len(v.inputs('SectionsTensorList'))} sections but {len(outs)} outputs")
        rank = ctx.rank(x)
        _split_at_run_time(ctx, v, x, axis + rank if axis < 0 else axis, outs)
        return
    if v.inputs("SectionsTensorList"):
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
def convert_stack(ctx: ConversionContext, v: OpView) -> None:
    parts = [ctx.input(n) for n in v.inputs("X")]
    ctx.add(T.STACK, [*parts, ctx.const_i32(v.attr_int("axis", 0))], [ctx.output(v.output("Y"))])


def _unstack(ctx: ConversionContext, op, out_slot: str):
    v = OpView(op)
    x = ctx.input(v.input("X"))
    axis = v.attr_int("axis", 0)
    outs = v.outputs(out_slot)
    ctx.add(T.UNSTACK, [x, ctx.const_i32(axis), ctx.const_i32(len(outs))], [ctx.output(n) for n in outs])


@converter("unstack", emits=[T.UNSTACK])
def convert_unstack(ctx: ConversionContext, v: OpView) -> None:
    _unstack(ctx, v.op, "Y")


@converter("unbind", emits=[T.UNSTACK])
def convert_unbind(ctx: ConversionContext, v: OpView) -> None:
    _unstack(ctx, v.op, "Out")


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


def _tensor_array_input(op, ctx, slot: str) -> str | None:
    """The name of input `slot` of `op` when it is a tensor array (which no NNAdapter operation takes), else None."""
    graph = getattr(ctx, "graph", None)
    name = OpView(op).optional_input(slot)
    if graph is None or not name:
        return None
    try:
        var = graph.var(name, getattr(ctx, "block", 0))
    except ModelFormatError:
        return None
    return name if var.var_type == int(VarTypeCode.LOD_TENSOR_ARRAY) else None


def _check_slice(op, ctx) -> str | None:
    array = _tensor_array_input(op, ctx, "Input")
    return f"Input '{array}' is a tensor array: its element is taken on the host" if array else None


@converter("slice", emits=[T.SLICE, T.SQUEEZE, T.CONCAT, T.CAST], check=_check_slice)
def convert_slice(ctx: ConversionContext, v: OpView) -> None:
    """input[starts:ends] along `axes` (negative indices count from the end, out-of-range bounds clamp:
    SLICE's Python rule, which is Paddle's for step 1). Bounds come from `StartsTensor`/`EndsTensor`
    first, then the tensor lists, then the attrs; `decrease_axis` squeezes the sliced axes."""
    x = ctx.input(v.input("Input"))
    axes = v.attr_ints("axes")
    starts = ctx.ints_operand(v.op, "starts", tensor="StartsTensor", tensor_list="StartsTensorList",
                              list_first=False, precision=Precision.INT64)
    ends = ctx.ints_operand(v.op, "ends", tensor="EndsTensor", tensor_list="EndsTensorList",
                            list_first=False, precision=Precision.INT64)
    decrease_axis = v.attr_ints("decrease_axis")
    sliced = _slice_target(ctx, v.op, decrease_axis)
    ctx.add(T.SLICE, [x, ctx.const_i32(axes), starts, ends, None], [sliced])
    _squeeze_decreased(ctx, v.op, sliced, decrease_axis)


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


def check_strided_slice(op, ctx) -> str | None:
    strides = _constant_ints(op, ctx, "strides", "StridesTensor", "StridesTensorList")
    if strides is not None and any(s == 0 for s in strides):
        return f"strides {strides} contain 0"
    return None


@converter("strided_slice", emits=[T.SLICE, T.SQUEEZE, T.CONCAT, T.CAST], check=check_strided_slice)
def convert_strided_slice(ctx: ConversionContext, v: OpView) -> None:
    """input[starts:ends:strides] along `axes`. Paddle 3's bounds rule is Python's for either stride
    sign (verified: x[::-1] is starts=INT32_MAX, ends=INT32_MIN; an end of -1 with a negative stride
    selects nothing), which is SLICE's. One legacy encoding differs: starts=-1, ends=0 with infer flag -1
    on a decreased axis means "the last element", not an empty range."""
    x = ctx.input(v.input("Input"))
    axes = v.attr_ints("axes")
    decrease_axis = v.attr_ints("decrease_axis")
    infer_flags = v.attr_ints("infer_flags") or [1] * len(axes)
    starts = _constant_ints(v.op, ctx, "starts", "StartsTensor", "StartsTensorList")
    ends = _constant_ints(v.op, ctx, "ends", "EndsTensor", "EndsTensorList")
    strides = _constant_ints(v.op, ctx, "strides", "StridesTensor", "StridesTensorList")
    if starts is not None and ends is not None and strides is not None:
        for i, (a, s, e, f) in enumerate(zip(axes, starts, ends, infer_flags)):
            if a in decrease_axis and s == -1 and e == 0 and f == -1:
                ends[i], strides[i] = INT64_MAX, 1
        starts_op, ends_op, steps_op = ctx.const_i64(starts), ctx.const_i64(ends), ctx.const_i64(strides)
    else:
        starts_op = ctx.ints_operand(v.op, "starts", tensor="StartsTensor", tensor_list="StartsTensorList",
                                     list_first=False, precision=Precision.INT64)
        ends_op = ctx.ints_operand(v.op, "ends", tensor="EndsTensor", tensor_list="EndsTensorList",
                                   list_first=False, precision=Precision.INT64)
        steps_op = ctx.ints_operand(v.op, "strides", tensor="StridesTensor", tensor_list="StridesTensorList",
                                    list_first=False, precision=Precision.INT64)
    sliced = _slice_target(ctx, v.op, decrease_axis)
    ctx.add(T.SLICE, [x, ctx.const_i32(axes), starts_op, ends_op, steps_op], [sliced])
    _squeeze_decreased(ctx, v.op, sliced, decrease_axis)


def _check_flip(op, ctx) -> str | None:
    v = OpView(op)
    if v.type == "reverse" and not v.attr_ints("axis"):
        return "reverse needs at least one axis (Paddle rejects an empty 'axis')"
    array = _tensor_array_input(op, ctx, "X")
    return f"X '{array}' is a tensor array: its elements are reversed on the host" if array else None


@converter("flip", "reverse", emits=[T.SLICE, T.ASSIGN], check=_check_flip)
def convert_flip(ctx: ConversionContext, v: OpView) -> None:
    """Reverse each axis in `axis`: a SLICE from the last element past the first with step -1. The legacy
    `reverse` op is the same on a tensor (its tensor-array form runs on the host: k_control)."""
    x = ctx.input(v.input("X"))
    axes = v.attr_ints("axis")
    out = ctx.output(v.output("Out"))
    if not axes:
        ctx.add(T.ASSIGN, [x], [out])
        return
    n = len(axes)
    ctx.add(T.SLICE, [x, ctx.const_i32(axes), ctx.const_i64([-1] * n), ctx.const_i64([INT64_MIN] * n),
                      ctx.const_i64([-1] * n)], [out])


@converter("meshgrid", emits=[T.MESHGRID])
def convert_meshgrid(ctx: ConversionContext, v: OpView) -> None:
    parts = []
    for name in v.inputs("X"):
        part = ctx.input(name)
        if part.type.rank == 0:  # Paddle's meshgrid takes a 0-d input as one of size 1 (MESHGRID wants 1-D)
            flat = ctx.temp(name, "meshgrid/as_vector")
            ctx.add(T.RESHAPE, [part, ctx.const_i32([1])], [flat])
            part = flat
        parts.append(part)
    ctx.add(T.MESHGRID, parts, [ctx.output(n) for n in v.outputs("Out")])


@converter("roll", emits=[T.ROLL, T.CONCAT, T.CAST])
def convert_roll(ctx: ConversionContext, v: OpView) -> None:
    """Rotate along `axis` by `shifts` (or the `ShiftsTensor`); no axis rolls the flattened tensor."""
    x = ctx.input(v.input("X"))
    shifts = ctx.ints_operand(v.op, "shifts", tensor="ShiftsTensor", list_first=False, precision=Precision.INT64)
    axes = v.attr_ints("axis")
    ctx.add(T.ROLL, [x, shifts, ctx.const_i32(axes) if axes else None], [ctx.output(v.output("Out"))])


# -- padding ----------------------------------------------------------------------------------------------------

_PAD_MODES = {"constant": PadMode.CONSTANT, "reflect": PadMode.REFLECT, "edge": PadMode.EDGE,
              "replicate": PadMode.REPLICATE}


def _emit_pad(ctx, op, x, pads_operand, mode: str, value: float):
    v = OpView(op)
    ctx.add(T.PAD, [x, pads_operand, ctx.const_i32(int(_PAD_MODES[mode])), ctx.const_like(value, x)],
            [ctx.output(v.output("Out"))])


def _check_pad_nd(spatial: int, default_format: str, *, circular: bool = False):
    def check(op, ctx) -> str | None:
        v = OpView(op)
        mode = v.attr_str("mode", "constant")
        if circular and mode == "circular":
            runtime = v.optional_input("Paddings")
            if runtime and (ctx is None or ctx.constant_value(runtime) is None):
                return "mode 'circular' needs its paddings at conversion, the Paddings tensor is computed at run time"
            dims = input_dims(ctx, op, "X")
            if dims is not None and not known_dims(dims):
                return f"mode 'circular' needs the padded dims, X is {list(dims)}"
        elif mode not in _PAD_MODES:
            return f"mode '{mode}' has no NNAdapter pad mode (constant, reflect, edge, replicate)"
        reason = layout_reason(op, "data_format", default_format)
        if reason:
            return reason
        if not v.optional_input("Paddings") and len(v.attr_ints("paddings", [0] * 2 * spatial)) != 2 * spatial:
            return f"paddings must hold {2 * spatial} values"
        dims = input_dims(ctx, op, "X")
        if dims is not None and len(dims) != spatial + 2:
            return f"X must have rank {spatial + 2}, got {len(dims)}"
        return None

    return check


def _constant_pads(ctx, op, order: list, channel_last: bool, spatial: int) -> list | None:
    """PAD's [begin, end] per axis from Paddle's paddings when known at conversion (else None); `order` lists,
    per spatial axis in data order (D, H, W), the positions of its (begin, end) in Paddle's paddings."""
    v = OpView(op)
    zeros = [0, 0]
    runtime = v.optional_input("Paddings")
    known = ctx.constant_value(runtime) if runtime else None
    if runtime is not None and known is None:
        return None
    values = np.asarray(known).reshape(-1).tolist() if runtime else v.attr_ints("paddings", [0] * 2 * spatial)
    spatial_pads = [int(values[i]) for begin_end in order for i in begin_end]
    return zeros + spatial_pads + zeros if channel_last else zeros + zeros + spatial_pads


def _pads_operand(ctx, op, order: list, channel_last: bool, spatial: int):
    """PAD's pads operand (see _constant_pads): a constant, or the run-time Paddings tensor reordered."""
    v = OpView(op)
    pads = _constant_pads(ctx, op, order, channel_last, spatial)
    if pads is not None:
        return ctx.const_i32(pads)
    runtime = v.optional_input("Paddings")
    # A run-time Paddings tensor: reorder it with GATHER when Paddle's order is not D, H, W, then CONCAT
    # the zeros of the batch and channel axes around it.
    paddings = ctx.input(runtime)
    flat_order = [i for begin_end in order for i in begin_end]
    out_name = v.output("Out")
    if flat_order != list(range(2 * spatial)):
        reordered = ctx.temp(out_name, "paddings")
        ctx.add(T.GATHER, [paddings, ctx.const_i32(flat_order), ctx.const_i32(0)], [reordered])
        paddings = reordered
    dtype = paddings.type.dtype
    zero2 = ctx.const(np.zeros(2, dtype=dtype))
    parts = [zero2, paddings, zero2] if channel_last else [zero2, zero2, paddings]
    pads = ctx.temp(out_name, "pads")
    ctx.add(T.CONCAT, parts + [ctx.const_i32(0)], [pads])
    return pads


@converter("pad2d", emits=[T.PAD, T.CONCAT], check=_check_pad_nd(2, "NCHW"))
def convert_pad2d(ctx: ConversionContext, v: OpView) -> None:
    # Paddle: [top, bottom, left, right].
    x = ctx.input(v.input("X"))
    pads = _pads_operand(ctx, v.op, [(0, 1), (2, 3)], is_channel_last(v.op, "data_format"), 2)
    _emit_pad(ctx, v.op, x, pads, v.attr_str("mode", "constant"), v.attr_float("pad_value", 0.0))


def _emit_circular_pad(ctx, op, x, pads: list) -> None:
    """Paddle's circular padding: output index i of an axis of size n reads input ((i - begin) mod n), so a
    pad wider than the axis wraps around again; one GATHER of those constant indices per padded axis."""
    v = OpView(op)
    out_name = v.output("Out")
    padded = [axis for axis in range(len(pads) // 2) if pads[2 * axis] or pads[2 * axis + 1]]
    if not padded:
        ctx.add(T.ASSIGN, [x], [ctx.output(out_name)])
        return
    dims = ctx.dims(x)
    for k, axis in enumerate(padded):
        begin, end = pads[2 * axis], pads[2 * axis + 1]
        size = int(dims[axis])
        if size + begin + end < 0 or (size == 0 and begin + end > 0):
            raise ctx.error(f"circular padding ({begin}, {end}) of an axis of size {size}")
        indices = [(i - begin) % size for i in range(size + begin + end)]
        target = ctx.output(out_name) if k == len(padded) - 1 else ctx.temp(out_name, f"circular_{axis}")
        ctx.add(T.GATHER, [x, ctx.const_i32(indices), ctx.const_i32(axis)], [target])
        x = target


@converter("pad3d", emits=[T.PAD, T.CONCAT, T.GATHER, T.ASSIGN], check=_check_pad_nd(3, "NCDHW", circular=True))
def convert_pad3d(ctx: ConversionContext, v: OpView) -> None:
    # Paddle: [left, right, top, bottom, front, back], i.e. W first; PAD wants D, H, W.
    x = ctx.input(v.input("X"))
    order, channel_last = [(4, 5), (2, 3), (0, 1)], is_channel_last(v.op, "data_format", "NCDHW")
    if v.attr_str("mode", "constant") == "circular":
        pads = _constant_pads(ctx, v.op, order, channel_last, 3)
        if pads is None:  # the check refused run-time paddings already
            raise ctx.error("mode 'circular' needs its paddings at conversion, the Paddings tensor is computed "
                            "at run time")
        _emit_circular_pad(ctx, v.op, x, pads)
        return
    pads = _pads_operand(ctx, v.op, order, channel_last, 3)
    _emit_pad(ctx, v.op, x, pads, v.attr_str("mode", "constant"), v.attr_float("value", 0.0))


def _check_pad(op, ctx) -> str | None:
    v = OpView(op)
    dims = input_dims(ctx, op, "X")
    paddings = v.attr_ints("paddings", [])
    if dims is not None and len(paddings) != 2 * len(dims):
        return f"paddings {paddings} must hold 2 * rank(X) = {2 * len(dims)} values"
    return None


@converter("pad", emits=[T.PAD], check=_check_pad)
def convert_pad(ctx: ConversionContext, v: OpView) -> None:
    # The original pad op: [before_0, after_0, before_1, ...] over every axis, constant fill.
    x = ctx.input(v.input("X"))
    _emit_pad(ctx, v.op, x, ctx.const_i32(v.attr_ints("paddings", [])), "constant", v.attr_float("pad_value", 0.0))
