"""Converters for the matrix products: fc, mul, matmul, matmul_v2, bmm (FULLY_CONNECTED, MAT_MUL), dot and einsum.

Paddle Lite's quantized forms (an int8 persistable weight with scale attrs) and Paddle's fake / QDQ quantized
forms go through `quantized_products`; a float weight keeps the float path here.

Imports only the converter toolkit (op_view, attrs, layout, emit, context, registry), `quantized_products` and the
standard.
"""
from __future__ import annotations

import numpy as np

from converters import quantized_products
from converters.attrs import bias_vector, input_dims, known_dims
from converters.context import ConversionContext
from converters.emit import (
    FUSED_PRODUCT_EMITS,
    binary,
    emit_chain,
    fuse_code_of,
    fused_activation_reason,
    fused_activation_steps,
    reduce_step,
    scalar_mul_step,
)
from converters.op_view import OpView
from converters.registry import converter
from nnadapter_bridge.nnadapter.codes import (
    FuseCode,
    dtype_precision,
)
from nnadapter_bridge.nnadapter.codes import (
    OperationType as T,
)

# -- matrix products --------------------------------------------------------------------------------------------

# Quantized products (an int8 persistable weight with Paddle Lite's scale attrs) go through quantized_products'
# QUANTIZE -> FULLY_CONNECTED -> DEQUANTIZE step; FULLY_CONNECTED flattens the input to rows, so the
# output is reshaped back to the input's leading dims.

def _quant_matmul_reason(op, ctx, x_slot: str, w_slot: str, out_slot: str, lead_count: int | None,
                         channel_dim: int) -> str | None:
    """Why the quantized path cannot take this op (None when it can or the weight is not int8).
    `lead_count`: how many leading X dims the output keeps (None: all but the last)."""
    v = OpView(op)
    if not quantized_products.has_int8_weight(ctx, op, w_slot):
        return None
    w = ctx.param(v.input(w_slot))
    if w.ndim != 2:
        return f"a quantized {w_slot} must be 2-D, got shape {list(w.shape)}"
    dims = input_dims(ctx, op, x_slot)
    if dims is not None:
        lead = dims[:lead_count] if lead_count is not None else dims[:-1]
        if len(lead) == 0:
            return f"a quantized product needs {x_slot} of rank >= 2"
        if len(lead) > 1 and sum(1 for d in lead if not known_dims([d])) > 1:
            return f"{x_slot} needs at most one unknown leading dim to reshape the quantized product back"
    return quantized_products.product_quant_reason(ctx, op, x_slot, w_slot, out_slot, w.shape[channel_dim],
                                           float_output_ok=True)


def _quant_matmul_steps(ctx, op, quant, x, w_slot: str, channel_dim: int, bias_name: str | None,
                        fuse: FuseCode, out_name: str, lead_count: int | None) -> list:
    """Chain steps of a quantized product: the quantized FULLY_CONNECTED, then the reshape back."""
    v = OpView(op)
    steps = [("matmul_quant", quantized_products.quantized_fc_step(ctx, op, quant, v.input(w_slot), channel_dim,
                                                           bias_name, fuse, out_name))]
    lead = list(x.type.dims[:lead_count] if lead_count is not None else x.type.dims[:-1])
    if len(lead) > 1:
        units = ctx.param(v.input(w_slot)).shape[channel_dim]
        shape = [d if known_dims([d]) else -1 for d in lead] + [units]
        steps.append(("out_shape", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32(shape)], [out])))
    return steps


_QUANT_MATMUL_EMITS = [T.FULLY_CONNECTED, T.RESHAPE, *quantized_products.QUANT_EMITS]


def _check_fc(op, ctx) -> str | None:
    v = OpView(op)
    if v.attr("padding_weights", False):
        return "padding_weights (W stored with 4 padding rows/columns) is not converted"
    w = v.optional_input("W")
    if w is None or not (ctx.is_param(w) or _is_constant_operand(ctx, w)):
        return "W must be a persistable 2-D weight"
    w_dims = ctx.param(w).shape if ctx.is_param(w) else ctx.dims(w)
    if len(w_dims) != 2:
        return f"W must be 2-D, got shape {list(w_dims)}"
    bias = v.optional_input("Bias")
    if quantized_products.has_int8_weight(ctx, op, "W") and bias and not ctx.is_param(bias):
        return "a quantized fc needs a persistable Bias (it becomes an int32 constant)"
    return (fused_activation_reason(op, v.attr_str("activation_type", ""))
            or _quant_matmul_reason(op, ctx, "Input", "W", "Out", v.attr_int("in_num_col_dims", 1), 1))


def _is_constant_operand(ctx, name: str) -> bool:
    """True when `name` is bound to a constant operand (a weight folded by dequantize_linear) or to the
    DEQUANTIZE of one (an int8 weight read through dequantize_linear)."""
    if not ctx.has(name) or ctx.is_param(name):
        return False
    operand = ctx.input(name)
    return operand.is_constant or quantized_products.is_dequantized_constant(ctx, operand)


@converter("fc", emits=[T.RESHAPE, T.MAT_MUL, T.ADD, *FUSED_PRODUCT_EMITS, *_QUANT_MATMUL_EMITS], check=_check_fc)
def convert_fc(ctx: ConversionContext, v: OpView) -> None:
    out_name = v.output("Out")
    floats = quantized_products.float_product_operands(
        ctx, v.op, "Input", "W", 1, out_name
    )  # listed in mixed precision
    x = floats[0] if floats else ctx.input(v.input("Input"))
    w = floats[1] if floats else ctx.input(v.input("W"))
    k, n = w.type.dims
    num_col_dims = v.attr_int("in_num_col_dims", 1)
    act_type = v.attr_str("activation_type", "")
    fuse = fuse_code_of(act_type)
    fuse = FuseCode.FUSED_NONE if fuse is None else fuse
    quant = quantized_products.product_quant(ctx, v.op, "Input", "W", "Out")
    if quant is not None:  # quantized path: the bias and the fuse code go into FULLY_CONNECTED
        steps = _quant_matmul_steps(ctx, v.op, quant, x, "W", 1, v.optional_input("Bias"), fuse, out_name,
                                    num_col_dims)
        emit_chain(ctx, out_name, x, steps + fused_activation_steps(v.op, act_type))
        return
    bias = bias_vector(ctx, v.op, "Bias", n, out_name, x)
    steps = []
    if len(x.type.dims) != num_col_dims + 1:
        # Rows are the first in_num_col_dims dims; the rest flatten into the K columns.
        steps.append(("reshape", lambda ctx, x, out: ctx.add(
            T.RESHAPE, [x, ctx.const_i32([0] * num_col_dims + [-1])], [out])))
    steps.append(("matmul", lambda ctx, x, out: ctx.add(
        T.MAT_MUL, [x, w, ctx.const_bool(False), ctx.const_bool(False)], [out])))
    steps.append(("add", lambda ctx, x, out: binary(ctx, T.ADD, x, bias, out, fuse)))
    steps += fused_activation_steps(v.op, act_type)
    emit_chain(ctx, out_name, x, steps)


def _check_mul(op, ctx) -> str | None:
    v = OpView(op)
    for slot, attr in (("X", "x_num_col_dims"), ("Y", "y_num_col_dims")):
        dims = input_dims(ctx, op, slot)
        k = v.attr_int(attr, 1)
        if dims is not None and not 1 <= k < len(dims):
            return f"{attr} {k} must be in [1, rank({slot}) = {len(dims)})"
        if slot == "Y" and dims is not None and not known_dims(dims):
            return "Y needs known dims to flatten it into a matrix"
    return _quant_matmul_reason(op, ctx, "X", "Y", "Out", v.attr_int("x_num_col_dims", 1), 1)


@converter("mul", emits=[T.RESHAPE, T.MAT_MUL, *_QUANT_MATMUL_EMITS], check=_check_mul)
def convert_mul(ctx: ConversionContext, v: OpView) -> None:
    if quantized_products.emit_integer_product(ctx, v.op):  # Paddle's fake or QDQ quantized form: int8 x int8 -> int32
        return
    out_name = v.output("Out")
    x_name, y_name = v.input("X"), v.input("Y")
    floats = quantized_products.float_product_operands(ctx, v.op, "X", "Y", 1, out_name)  # listed in mixed precision
    x = floats[0] if floats else ctx.input(x_name)
    xk, yk = v.attr_int("x_num_col_dims", 1), v.attr_int("y_num_col_dims", 1)
    quant = quantized_products.product_quant(ctx, v.op, "X", "Y", "Out")
    if quant is not None:  # quantized path; the check keeps Y 2-D, so y_num_col_dims is 1
        emit_chain(ctx, out_name, x, _quant_matmul_steps(ctx, v.op, quant, x, "Y", 1, None, FuseCode.FUSED_NONE,
                                                         out_name, xk))
        return
    y_dims = ctx.dims(y_name)
    rows, cols = int(np.prod(y_dims[:yk])), int(np.prod(y_dims[yk:]))
    if floats:  # the quantized-path check keeps Y 2-D
        y = floats[1]
    elif ctx.is_param(y_name):
        matrix = ctx.param(y_name).reshape(rows, cols)
        y = ctx.const(matrix, dtype_precision(matrix.dtype), name=y_name)  # a float64 weight stays float64
    elif len(y_dims) != 2:
        y = ctx.temp(out_name, "y_matrix")
        ctx.add(T.RESHAPE, [ctx.input(y_name), ctx.const_i32([rows, cols])], [y])
    else:
        y = ctx.input(y_name)
    steps = []
    if len(x.type.dims) != xk + 1:
        steps.append(("x_matrix", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([0] * xk + [-1])], [out])))
    steps.append(("matmul", lambda ctx, x, out: ctx.add(T.MAT_MUL, [x, y, ctx.const_bool(False), ctx.const_bool(False)],
                                                        [out])))
    if len(y_dims) - yk > 1:
        # Out is X's leading dims followed by Y's trailing dims.
        tail = list(y_dims[yk:])
        steps.append(("out_shape", lambda ctx, x, out: ctx.add(T.RESHAPE, [x, ctx.const_i32([0] * xk + tail)], [out])))
    emit_chain(ctx, out_name, x, steps)


def _matmul(ctx, op, transpose_x: bool, transpose_y: bool, alpha: float = 1.0):
    if quantized_products.emit_integer_product(ctx, op):  # Paddle's fake or QDQ quantized form: int8 x int8 -> int32
        return None
    v = OpView(op)
    out_name = v.output("Out")
    # Listed in the mixed-precision config: float X and Y (Y's output units along axis 0 when transposed).
    floats = quantized_products.float_product_operands(ctx, op, "X", "Y", 0 if transpose_y else 1, out_name)
    x, y = floats if floats else (ctx.input(v.input("X")), ctx.input(v.input("Y")))
    quant = quantized_products.product_quant(ctx, op, "X", "Y", "Out")
    if quant is not None:  # quantized path: Y's output units are axis 0 when transposed, else axis 1
        steps = _quant_matmul_steps(ctx, op, quant, x, "Y", 0 if transpose_y else 1, None, FuseCode.FUSED_NONE,
                                    out_name, None)
    else:
        steps = [("matmul", lambda ctx, x, out: ctx.add(
            T.MAT_MUL, [x, y, ctx.const_bool(transpose_x), ctx.const_bool(transpose_y)], [out]))]
    if alpha != 1.0:
        steps.append(("alpha", scalar_mul_step(alpha)))
    return emit_chain(ctx, out_name, x, steps)


def _check_matmul(op, ctx) -> str | None:
    v = OpView(op)
    x, y = input_dims(ctx, op, "X"), input_dims(ctx, op, "Y")
    if x is not None and y is not None and len(x) == 1 and len(y) == 1:
        return "matmul (v1) of two 1-D vectors gives shape [1], which MAT_MUL (a 0-D result) does not"
    for name in ("fused_reshape_X", "fused_reshape_Y", "fused_reshape_Out", "fused_transpose_X",
                 "fused_transpose_Y", "fused_transpose_Out"):
        if v.attr_ints(name, []):
            return f"the oneDNN-fused attribute {name} is not converted"
    if int(v.attr("head_number", 1) or 1) != 1:
        return "head_number > 1 (multi-head matmul) is not converted"
    return _quant_matmul_v_reason(op, ctx, "transpose_X", "transpose_Y")


def _quant_matmul_v_reason(op, ctx, trans_x_attr: str, trans_y_attr: str) -> str | None:
    """The quantized-path conditions of matmul / matmul_v2: X not transposed, a 2-D int8 Y."""
    v = OpView(op)
    if not quantized_products.has_int8_weight(ctx, op, "Y"):
        return None
    if v.attr(trans_x_attr, False):
        return f"a quantized matmul with {trans_x_attr} is not converted"
    return _quant_matmul_reason(op, ctx, "X", "Y", "Out", None, 0 if v.attr(trans_y_attr, False) else 1)


@converter("matmul", emits=[T.MAT_MUL, T.MUL, *_QUANT_MATMUL_EMITS], check=_check_matmul)
def convert_matmul(ctx: ConversionContext, v: OpView) -> None:
    _matmul(ctx, v.op, v.attr_bool("transpose_X", False), v.attr_bool("transpose_Y", False),
            v.attr_float("alpha", 1.0))


@converter("matmul_v2", emits=[T.MAT_MUL, *_QUANT_MATMUL_EMITS],
           check=lambda op, ctx: _quant_matmul_v_reason(op, ctx, "trans_x", "trans_y"))
def convert_matmul_v2(ctx: ConversionContext, v: OpView) -> None:
    _matmul(ctx, v.op, v.attr_bool("trans_x", False), v.attr_bool("trans_y", False))


@converter("bmm", emits=[T.MAT_MUL])
def convert_bmm(ctx: ConversionContext, v: OpView) -> None:
    _matmul(ctx, v.op, False, False)


def _check_dot(op, ctx) -> str | None:
    dims = input_dims(ctx, op, "X")
    if dims is not None and len(dims) not in (1, 2):
        return f"dot takes 1-D or 2-D inputs, X has rank {len(dims)}"
    return None


@converter("dot", emits=[T.MUL, T.REDUCE_SUM], check=_check_dot)
def convert_dot(ctx: ConversionContext, v: OpView) -> None:
    # Sum of products along the last axis: [N] x [N] -> [], [B, N] x [B, N] -> [B].
    out_name = v.output("Out")
    x, y = ctx.input(v.input("X")), ctx.input(v.input("Y"))
    emit_chain(ctx, out_name, x, [
        ("product", lambda ctx, x, out: binary(ctx, T.MUL, x, y, out)),
        ("sum", reduce_step(T.REDUCE_SUM, [-1], False)),
    ])


# -- einsum ----------------------------------------------------------------------------------------------
#
# Paddle's einsum (XLNet's relative attention, ChatGLM's and CodeGen's rotary tables) of one or two operands, as
# NNAdapter's transposes, reductions and one MAT_MUL: a label only one operand has and the output lacks is summed
# out first; then the labels both operands and the output have are the product's batch dims, the ones both have and
# the output lacks are contracted, and each operand's own labels are its free dims. MAT_MUL takes one free dim per
# side ([.., M, K] x [.., K, N]); the other free labels of a side become broadcast batch dims (size 1 on the other
# side). Two or more contracted labels take an elementwise product and a REDUCE_SUM instead.

def einsum_labels(equation: str, count: int) -> tuple[list, str] | str:
    """([each operand's labels], the output's labels) of `equation`, or why it is not converted (an ellipsis, a
    label repeated within one term: a diagonal). Without `->` the output is numpy's: the labels seen once, sorted."""
    equation = equation.replace(" ", "")
    if "." in equation:
        return f"einsum equation {equation!r} has an ellipsis, which is not converted"
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != count:
        return f"einsum equation {equation!r} names {len(terms)} operands, the op has {count}"
    if not arrow:
        seen = "".join(terms)
        output = "".join(sorted(c for c in set(seen) if seen.count(c) == 1))
    for term in [*terms, output]:
        if not term.isalpha() and term:
            return f"einsum term {term!r} of {equation!r} holds a character that is not a label"
        if len(set(term)) != len(term):
            return f"einsum term {term!r} of {equation!r} repeats a label (a diagonal), which is not converted"
    if set(output) - set("".join(terms)):
        return f"einsum output {output!r} of {equation!r} names a label no operand has"
    return terms, output


def _check_einsum(op, ctx) -> str | None:
    v = OpView(op)
    count = len(v.inputs("Operands"))
    if count not in (1, 2):
        return f"einsum of {count} operands is not converted (one or two are)"
    parsed = einsum_labels(str(v.attr("equation", "")), count)
    return parsed if isinstance(parsed, str) else None


def _einsum_sum_out(ctx, x, labels: str, keep: str, var: str, purpose: str):
    """x with the labels not in `keep` summed out: (operand, its labels)."""
    axes = [k for k, c in enumerate(labels) if c not in keep]
    if not axes:
        return x, labels
    out = ctx.temp(var, purpose)
    ctx.add(T.REDUCE_SUM, [x, ctx.const_i32(axes), ctx.const_bool(False)], [out])
    return out, "".join(c for c in labels if c in keep)


def _einsum_align(ctx, x, labels: str, target: list, var: str, purpose: str):
    """x laid out in the order `target` (labels, None for a placeholder): its labels transposed into that order,
    then a size-1 dim at each target position it lacks."""
    present = [c for c in target if c is not None and c in labels]
    perm = [labels.index(c) for c in present]
    if perm != list(range(len(perm))):
        moved = ctx.temp(var, f"{purpose}_transposed")
        ctx.add(T.TRANSPOSE, [x, ctx.const_i32(perm)], [moved])
        x = moved
    missing = [k for k, c in enumerate(target) if c is None or c not in labels]
    if missing:
        expanded = ctx.temp(var, f"{purpose}_aligned")
        ctx.add(T.UNSQUEEZE, [x, ctx.const_i32(missing)], [expanded])
        x = expanded
    return x


def _einsum_finish(ctx, x, labels: list, output: str, out) -> None:
    """x (dims in the order `labels`, each in `output`) transposed into the output's order, written to `out`."""
    perm = [labels.index(c) for c in output]
    if perm == list(range(len(perm))):
        ctx.add(T.ASSIGN, [x], [out])
    else:
        ctx.add(T.TRANSPOSE, [x, ctx.const_i32(perm)], [out])


@converter("einsum", emits=[T.REDUCE_SUM, T.TRANSPOSE, T.UNSQUEEZE, T.MAT_MUL, T.SQUEEZE, T.MUL, T.ASSIGN],
           check=_check_einsum)
def convert_einsum(ctx: ConversionContext, v: OpView) -> None:
    names = v.inputs("Operands")
    parsed = einsum_labels(str(v.attr("equation", "")), len(names))
    if isinstance(parsed, str):
        raise ctx.error(parsed)
    terms, output = parsed
    var = v.output("Out")
    out = ctx.output(var)
    if len(names) == 1:
        x, labels = _einsum_sum_out(ctx, ctx.input(names[0]), terms[0], output, var, "sum")
        _einsum_finish(ctx, x, list(labels), output, out)
        return
    a_labels, b_labels = terms
    a, a_labels = _einsum_sum_out(ctx, ctx.input(names[0]), a_labels, b_labels + output, var, "x_sum")
    b, b_labels = _einsum_sum_out(ctx, ctx.input(names[1]), b_labels, a_labels + output, var, "y_sum")
    batch = [c for c in a_labels if c in b_labels and c in output]
    contract = [c for c in a_labels if c in b_labels and c not in output]
    free_a = [c for c in a_labels if c not in b_labels]
    free_b = [c for c in b_labels if c not in a_labels]
    if len(contract) > 1:
        # Labels [batch, free_a, free_b, contract] on both sides, multiplied (broadcast), contracted by a sum.
        order = batch + free_a + free_b + contract
        a = _einsum_align(ctx, a, a_labels, order, var, "x")
        b = _einsum_align(ctx, b, b_labels, order, var, "y")
        product = binary(ctx, T.MUL, a, b, ctx.temp(var, "product"))
        summed = ctx.temp(var, "contracted")
        axes = list(range(len(order) - len(contract), len(order)))
        ctx.add(T.REDUCE_SUM, [product, ctx.const_i32(axes), ctx.const_bool(False)], [summed])
        _einsum_finish(ctx, summed, order[:len(order) - len(contract)], output, out)
        return
    m = free_a[-1:] or [None]
    n = free_b[-1:] or [None]
    k = contract or [None]
    batch_dims = batch + free_a[:-1] + free_b[:-1]
    a = _einsum_align(ctx, a, a_labels, batch_dims + m + k, var, "x")
    b = _einsum_align(ctx, b, b_labels, batch_dims + k + n, var, "y")
    product = ctx.temp(var, "product")
    ctx.add(T.MAT_MUL, [a, b, ctx.const_bool(False), ctx.const_bool(False)], [product])
    labels = batch_dims + m + n
    placeholders = [j for j, c in enumerate(labels) if c is None]
    if placeholders:  # no free label on a side: its size-1 M or N goes
        squeezed = ctx.temp(var, "squeezed")
        ctx.add(T.SQUEEZE, [product, ctx.const_i32(placeholders)], [squeezed])
        product = squeezed
        labels = [c for c in labels if c is not None]
    _einsum_finish(ctx, product, labels, output, out)
