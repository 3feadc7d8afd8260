"""The conversion context: what a converter reads (Paddle ops, params) and writes (NNAdapter operations).

It maps Paddle var names to operands (a stack per name, so a later producer of the same name shadows
the earlier one, as Paddle Lite's converter does), turns parameters into constant operands (referenced,
not copied; a 0-d parameter stays 0-d), makes scalar parameters as shape-[1] tensors and scalar values
that combine with an operand (`const_like`) 0-d next to a 0-d operand, names synthesized operands
`<var>/<purpose>`, and records which Paddle op emitted each operation.

`convert_subgraph` drives a list of Paddle ops through their converters into one finished Model.

Shapes are folded as the converters emit (a subgraph is converted for one input-shape signature, so what Paddle
computes from dims becomes constants): docs/architecture.md, "Shapes folded as the converters emit".

Run-time conditions: where a converter's operations give Paddle's answer only for some data (TOP_K orders equal keys
by index, Paddle's top_k as std::partial_sort leaves them), the engine's conversion (`conditions=True`) appends one
INT32 [1] model output per condition after the subgraph's outputs: -1 while the condition holds, else the block-0
index of the Paddle op it is about, so that a program restored from the cache, which keeps no origins, still names
the op. The engine moves that op to the host for those shapes (docs/architecture.md, "Run-time conditions").

Entry points: `ConversionContext`, `convert_subgraph`, `graph_constant`. Imports op_view, registry, the standard
(model, lowering, reference) and errors only.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from converters.op_view import OpView, has_var_attrs, resolve_var_attrs
from nnadapter_bridge.errors import ConversionError, ModelFormatError, NNAdapterError
from nnadapter_bridge.nnadapter.codes import OperationType, Precision, dtype_precision, precision_dtype
from nnadapter_bridge.nnadapter.lowering import fold_operation
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.types import Operand, OperandType


class ConversionContext:
    def __init__(self, model: Model, params: Mapping[str, np.ndarray], graph=None, block: int = 0):
        self.model = model
        self.params = params
        self.graph = graph
        self.block = block
        self.current_op = None  # the Paddle OpInfo being converted (for error messages and origins)
        self.operation_origin: list = []  # operation index -> Paddle OpInfo that emitted it
        # The vars the model being converted must hand out (convert_subgraph sets them): a converter keeps
        # an internal (quantized) form of a var only when it is not one of them.
        self.output_names: frozenset = frozenset()
        self.float_ops: frozenset = frozenset()  # block-0 op indices kept in float (mixed-precision config)
        self._operands: dict[str, list[Operand]] = {}
        self._param_operands: dict[str, Operand] = {}
        # Operations computed at conversion time instead of emitted (see the module docstring), by type.
        self.folded: dict[OperationType, int] = {}
        # Run-time conditions (convert_subgraph(conditions=True): the engine's programs). A converter whose
        # operations give Paddle's answer only while the data meets a condition (top_k: keys that do not tie)
        # emits a BOOL8 operand true where it fails, with `add_condition`; the model hands out one
        # CONDITION_PRECISION [1] output per condition (module docstring).
        self.checks_conditions = False
        self.conditions: list = []  # (violated operand, Paddle op)

    # -- var name -> operand --------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self._operands or name in self.params

    def input(self, name: str) -> Operand:
        """The operand for var `name`: the latest one produced, else a constant made from the parameter."""
        stack = self._operands.get(name)
        if stack:
            return stack[-1]
        if name in self._param_operands:
            return self._param_operands[name]
        if name in self.params:
            array = np.asarray(self.params[name])
            operand = self.model.add_constant(array, dtype_precision(array.dtype), name=name, copy=False)
            self._param_operands[name] = operand
            return operand
        raise self.error(f"var '{name}' has no operand: it is neither produced by an earlier op of this "
                         "subgraph, nor a subgraph input, nor a parameter")

    def param(self, name: str) -> np.ndarray:
        """The value of a persistable var; a ConversionError when `name` is not a parameter."""
        if name not in self.params:
            raise self.error(f"var '{name}' must be a parameter (persistable) for this conversion")
        return np.asarray(self.params[name])

    def is_param(self, name: str) -> bool:
        return name in self.params and name not in self._operands

    def constant_value(self, name: str) -> np.ndarray | None:
        """The value of var `name` when it is known at conversion time (a parameter, or a constant operand an
        earlier op of this subgraph made), else None."""
        if self.is_param(name):
            return np.asarray(self.params[name])
        stack = self._operands.get(name)
        if stack:
            return np.asarray(stack[-1].value) if stack[-1].is_constant else None
        if self.graph is not None and self.current_op is not None:
            return graph_constant(self.graph, self.params, name, self.current_op)
        return None

    def resolved(self, op):
        """`op` with its Variable-valued attributes folded wherever their tensors are known now (see
        `constant_value`); the others stay references, which OpView refuses with a ConversionError."""
        return resolve_var_attrs(op, self.constant_value) if has_var_attrs(op) else op

    def bind(self, name: str, operand: Operand) -> Operand:
        """Map var `name` to `operand` (shadowing any earlier one)."""
        self._operands.setdefault(name, []).append(operand)
        return operand

    def output(self, name: str, type: OperandType | None = None) -> Operand:
        """A fresh operand for the Paddle output var `name`, mapped to that name."""
        return self.bind(name, self.model.add_output(name, type))

    def temp(self, var: str, purpose: str, type: OperandType | None = None) -> Operand:
        """A fresh intermediate operand named `<var>/<purpose>`, not mapped to any var."""
        return self.model.add_output(f"{var}/{purpose}", type)

    def add_model_input(self, name: str, type: OperandType) -> Operand:
        return self.bind(name, self.model.add_operand(type, name))

    # -- constants ---------------------------------------------------------------------------------
    def const(self, value, precision: Precision | None = None, name: str = "", **quant) -> Operand:
        return self.model.add_constant(value, precision, name=name, **quant)

    def const_i32(self, value) -> Operand:
        return self.model.add_constant(np.asarray(value, dtype=np.int32).reshape(-1))

    def const_i64(self, value) -> Operand:
        return self.model.add_constant(np.asarray(value, dtype=np.int64).reshape(-1))

    def const_f32(self, value) -> Operand:
        return self.model.add_constant(np.asarray(value, dtype=np.float32).reshape(-1))

    def const_bool(self, value) -> Operand:
        return self.model.add_constant(np.asarray(value, dtype=np.bool_).reshape(-1))

    def const_like(self, value, like: Operand, name: str = "") -> Operand:
        """A constant with the plain precision of `like` (float32/float64/int32/int64...)."""
        precision = like.type.precision if not like.type.is_quantized else Precision.FLOAT32
        dtype = precision_dtype(precision)
        # A scalar is 0-d next to a 0-d `like` (so x op c keeps x's rank, as Paddle's result does), else
        # [1]: the form drivers and existing caches know, and the same broadcast for any rank >= 1.
        array = np.asarray(value, dtype=dtype)
        if array.ndim == 0 and like.type.rank != 0:
            array = array.reshape(1)
        # The precision is passed on: left to itself the model would store a float64 array as float32.
        return self.model.add_constant(array, precision, name=name)

    # -- operations ------------------------------------------------------------------------------
    def add(self, type: OperationType, inputs: Sequence[Operand | None], outputs: Sequence[Operand | None]):
        """Emit an operation, or, when its outputs are known now (module docstring), make them constants."""
        try:
            operation = self.model.add_operation(type, inputs, outputs)
        except NNAdapterError as exc:
            raise self.error(f"emitting {OperationType(type).name}: {exc}") from exc
        values = fold_operation(operation)
        if values is not None:
            self.model.replace_with_constants(operation, values)
            self.folded[operation.type] = self.folded.get(operation.type, 0) + 1
            return operation
        self.operation_origin.append(self.current_op)
        return operation

    def add_condition(self, violated: Operand) -> None:
        """Record `violated` (BOOL8, any shape: true anywhere means the operations just emitted for the current op
        would not give Paddle's answer for this data) as a run-time condition of the current op. Only while
        `checks_conditions`: a converter asks first, and emits nothing for a condition nobody checks."""
        if not self.checks_conditions:
            raise self.error("add_condition outside a conversion that checks conditions")
        if violated.type.precision != Precision.BOOL8:
            raise self.error(f"a run-time condition must be BOOL8, got {violated.type.precision.name}")
        self.conditions.append((violated, self.current_op))

    def dims(self, operand_or_name) -> tuple:
        operand = operand_or_name if isinstance(operand_or_name, Operand) else self.input(operand_or_name)
        return operand.type.dims

    def rank(self, operand_or_name) -> int:
        return len(self.dims(operand_or_name))

    # -- attribute forms (attr list OR tensor OR tensor list) --------------------------------------------
    def cast(self, operand: Operand, precision: Precision, var: str, purpose: str) -> Operand:
        """`operand` converted to `precision` with a CAST (no operation when it already has it)."""
        if operand.type.precision == precision:
            return operand
        if operand.is_constant:
            return self.const(np.asarray(operand.value).astype(precision_dtype(precision)), precision)
        out = self.temp(var, purpose)
        self.add(OperationType.CAST, [operand, self.const_i32(int(precision))], [out])
        return out

    def ints_operand(self, op, attr: str, *, tensor: str | None = None, tensor_list: str | None = None,
                     list_first: bool = True, default=(), precision: Precision = Precision.INT32) -> Operand:
        """One 1-D integer operand for an attribute Paddle accepts as an attr list, a tensor or a tensor list.

        Paddle ops differ in which tensor form wins (reshape2: the `ShapeTensor` list before the `Shape`
        tensor; slice, tile, expand_v2: the single tensor first), so `list_first` picks the order; the attr
        comes last, and a missing attr takes `default`. Values known now (parameters, constants of folded
        operations) become constants (so shape inference stays static); a tensor list becomes a CONCAT of its
        elements, each reshaped to [1].
        Every value ends up in `precision` (INT32 constants saturate, which keeps INT64 "to the end" bounds
        meaningful)."""
        dtype = precision_dtype(precision)
        var = op.output_names()[0] if op.output_names() else op.type
        view = OpView(op)

        def fold(values):
            values = np.asarray(values).reshape(-1)
            if values.dtype.kind in "iu" and dtype == np.int32:
                values = np.clip(values, np.iinfo(np.int32).min, np.iinfo(np.int32).max)
            return self.const(values.astype(dtype), precision)

        def from_tensor(name):
            value = self.constant_value(name)
            if value is not None:
                return fold(value)
            operand = self.cast(self.input(name), precision, var, f"{name}/cast")
            if operand.type.rank == 0:
                flat = self.temp(var, f"{name}/as_vector")
                self.add(OperationType.RESHAPE, [operand, self.const_i32([1])], [flat])
                operand = flat
            return operand

        def from_list(names):
            values = [self.constant_value(n) for n in names]
            if all(value is not None for value in values):
                return fold(np.concatenate([value.reshape(-1) for value in values if value is not None]))
            parts = [from_tensor(n) for n in names]
            out = self.temp(var, f"{tensor_list}/concat")
            self.add(OperationType.CONCAT, [*parts, self.const_i32(0)], [out])
            return out

        sources = [("list", tensor_list), ("tensor", tensor)]
        for kind, slot in (sources if list_first else sources[::-1]):
            names = view.inputs(slot) if slot else []
            if names:
                return from_list(names) if kind == "list" else from_tensor(names[0])
        return fold(np.asarray(view.attr(attr, default), dtype=np.int64))

    # -- quantization -------------------------------------------------------------------------------
    def quant_scales(self, op, slot: str, index: int = 0) -> list | None:
        """Scales from the op's `<slot><index>_scale` attr (Paddle Lite's naming), or None."""
        value = op.attr(f"{slot}{index}_scale")
        if value is None:
            return None
        return [float(v) for v in (value if isinstance(value, (list, tuple)) else [value])]

    # -- errors ------------------------------------------------------------------------------------
    def error(self, message: str) -> ConversionError:
        where = self.current_op.label() if self.current_op is not None else "conversion"
        return ConversionError(f"{where}: {message}")


# How far back `graph_constant` follows producers (shape arithmetic is a few ops deep).
MAX_CONSTANT_DEPTH = 8
# Ops whose output is no constant however constant their inputs are.
_NOT_CONSTANT = frozenset({"feed", "fetch", "gaussian_random", "uniform_random", "randint", "randperm",
                           "dropout", "bernoulli", "multinomial", "empty", "while", "conditional_block"})


def graph_constant(graph, params: Mapping[str, np.ndarray], name: str, reader, depth: int = 0) -> np.ndarray | None:
    """The value of var `name` as op `reader` reads it, when it is computable at conversion time: a parameter,
    or the output of ops (fill_constant, assign_value, shape arithmetic on them) whose inputs are all such
    values, found by converting each producer alone and running it through the NNAdapter reference. None when
    any producer depends on a run-time value (a feed, a random op) or cannot be converted."""
    if name in params:
        return np.asarray(params[name])
    if depth >= MAX_CONSTANT_DEPTH:
        return None
    try:
        writers = [w for w in graph.writers(name, reader.block_idx) if w.index < reader.index]
    except Exception:  # an unknown block or var: not a constant we can see
        return None
    if not writers or reader.block_idx != writers[-1].block_idx:
        return None
    producer = writers[-1]
    if producer.type in _NOT_CONSTANT or any(isinstance(v, list) and v and type(v[0]).__name__ == "BlockRef"
                                             for v in producer.attrs.values()):
        return None
    known = {}
    for input_name in dict.fromkeys(producer.input_names()):
        if input_name == "@EMPTY@":
            continue
        value = graph_constant(graph, params, input_name, producer, depth + 1)
        if value is None:
            return None
        known[input_name] = value
    from nnadapter_bridge.nnadapter.reference import run_model

    try:
        producer = resolve_var_attrs(producer, lambda n: graph_constant(graph, params, n, producer, depth + 1))
        outputs = [n for n in dict.fromkeys(producer.output_names()) if n != "@EMPTY@"]
        result = convert_subgraph([producer], {**params, **known}, {}, outputs, graph)
        values = dict(zip(result.output_names, run_model(result.model, [])))
    except Exception:  # no converter, or one that cannot take this op: not foldable here
        return None
    value = values.get(name)
    return None if value is None else np.asarray(value)


def _drop_unread_dequantizes(model: Model, origin: list, outputs: Sequence[Operand]) -> None:
    """Remove the DEQUANTIZE operations whose result nothing reads: a dequantize_linear whose only reader
    became an integer product (quantized_products.emit_integer_product reads the quantized operand itself)."""
    kept_outputs = {o.index for o in outputs}
    read = {o.index for op in model.operations for o in op.inputs if o is not None}
    dead = [k for k, op in enumerate(model.operations)
            if op.type == OperationType.DEQUANTIZE and op.outputs[0] is not None
            and op.outputs[0].index not in read and op.outputs[0].index not in kept_outputs]
    if not dead:
        return
    for k in reversed(dead):
        del model.operations[k]
        if k < len(origin):
            del origin[k]
    for k, op in enumerate(model.operations):
        op.index = k


@dataclasses.dataclass
class ConversionResult:
    model: Model
    input_names: list
    output_names: list  # outputs that have an operand (others, like XShape, are dropped)
    operation_origin: list
    folded: dict = dataclasses.field(default_factory=dict)  # OperationType -> operations computed at conversion
    conditions: int = 0  # run-time condition outputs after those of output_names (module docstring)
    # the vars the ops wrote whose values the conversion folded into constants (shape arithmetic, for these shapes)
    constant_names: frozenset = frozenset()


CONDITION_HOLDS = -1  # the value of a run-time condition output while its condition holds


def convert_subgraph(ops: Sequence, params: Mapping[str, np.ndarray], input_types: Mapping[str, OperandType],
                     output_names: Sequence[str], graph=None, float_ops: frozenset = frozenset(),
                     conditions: bool = False) -> ConversionResult:
    """Convert Paddle ops (in topological order) into one finished NNAdapter Model.

    `input_types` maps each subgraph input var (sorted by the caller) to its operand type; `output_names`
    are the vars the subgraph must produce; `float_ops` the block-0 indices of the ops the mixed-precision
    quantization config keeps in float. `conditions`: the converters emit their run-time conditions, handed out
    after the outputs (module docstring); only a caller that checks them asks (the subgraph engine's programs).

    Every caller (the subgraph engine, the predictor's dynamic-shape check, the support decisions, the host
    executor) converts through here and gets one error: any failure of a converter is a ConversionError naming
    the Paddle op (a converter's own bug too: "converter failed: ValueError: ..."), and a malformed model
    (ModelFormatError: an attribute of the wrong type, say) stays what it is.
    """
    from converters.registry import get_converter

    model = Model()
    # The block the ops are in (a loop or branch body's subgraph): their var declarations are looked up from there.
    ctx = ConversionContext(model, params, graph, getattr(ops[0], "block_idx", 0) if ops else 0)
    ctx.output_names = frozenset(output_names)
    ctx.float_ops = frozenset(float_ops)
    ctx.checks_conditions = conditions
    inputs = [ctx.add_model_input(name, t.copy()) for name, t in input_types.items()]
    for op in ops:
        spec = get_converter(op.type)
        if spec is None:
            raise ConversionError(f"{op.label()}: Paddle op '{op.type}' has no converter")
        ctx.current_op = op
        try:
            # Converters read the op with its tensor-valued attributes folded (operation_origin keeps `op`).
            view = ctx.resolved(op)
            if spec.check is not None:
                reason = spec.check(view, ctx)
                if reason:
                    raise ctx.error(f"cannot be converted: {reason}")
            spec.fn(ctx, OpView(view))
        except ConversionError as exc:
            # A converter's refusal names its op, so the subgraph engine can run that op alone on the host when the
            # concrete input shapes meet it (a converter bug, below, does not: it is an error).
            exc.failed_op = op
            raise
        except ModelFormatError:
            raise
        except Exception as exc:  # a converter bug still must not escape without the op's name
            raise ConversionError(f"{op.label()}: converter failed: {type(exc).__name__}: {exc}") from exc
    ctx.current_op = None
    try:
        return _finish_conversion(ctx, model, inputs, input_types, output_names)
    except (ConversionError, ModelFormatError):
        raise
    except Exception as exc:  # the finished model fails its own checks: a converter emitted something wrong
        first = ops[0].label() if len(ops) else "an empty subgraph"
        raise ConversionError(f"the model converted from {len(ops)} op(s) (first {first}) is invalid: "
                              f"{type(exc).__name__}: {exc}") from exc


def _finish_conversion(ctx: ConversionContext, model: Model, inputs: list, input_types: Mapping[str, OperandType],
                       output_names: Sequence[str]) -> ConversionResult:
    """The model's outputs identified and the model finished (convert_subgraph)."""
    outputs, names = [], []
    for name in output_names:
        stack = ctx._operands.get(name)
        if not stack:
            continue
        outputs.append(stack[-1])
        names.append(name)
    outputs += [_condition_output(ctx, violated, op) for violated, op in ctx.conditions]
    _drop_unread_dequantizes(model, ctx.operation_origin, outputs)
    # An output that is also an input or a constant needs its own operand: ASSIGN makes one.
    for k, operand in enumerate(outputs):
        if operand in inputs or operand.is_constant or outputs.index(operand) != k:
            copy = model.add_output(f"{(names + ['condition'] * len(ctx.conditions))[k]}/output")
            model.add_operation(OperationType.ASSIGN, [operand], [copy])
            ctx.operation_origin.append(None)
            outputs[k] = copy
    model.drop_unused_operands(keep=inputs + outputs)  # parameters only folded operations read
    model.identify_inputs_and_outputs(inputs, outputs)
    model.finish()
    constant_names = frozenset(name for name, stack in ctx._operands.items()
                               if stack and stack[-1].is_constant and name not in input_types)
    return ConversionResult(model, list(input_types), names, ctx.operation_origin, dict(ctx.folded),
                            len(ctx.conditions), constant_names)


def _condition_output(ctx: ConversionContext, violated: Operand, op) -> Operand:
    """The INT32 [1] output of a run-time condition: -1 (CONDITION_HOLDS) while `violated` is false everywhere,
    else the block-0 index of `op`: max(violated as 0 / 1) * (index + 1) - 1."""
    ctx.current_op = op
    name = violated.name or "condition"
    flags = ctx.temp(name, "as_int")
    ctx.add(OperationType.CAST, [violated, ctx.const_i32(int(Precision.INT32))], [flags])
    flag = ctx.temp(name, "any")
    ctx.add(OperationType.REDUCE_MAX, [flags, ctx.const_i32(list(range(violated.type.rank))), ctx.const_bool(False)],
            [flag])
    flag_1d = ctx.temp(name, "any_1d")
    ctx.add(OperationType.RESHAPE, [flag, ctx.const_i32([1])], [flag_1d])
    scaled = ctx.temp(name, "op_index")
    ctx.add(OperationType.MUL, [flag_1d, ctx.const_i32([op.index + 1]), ctx.const_i32(0)], [scaled])
    code = ctx.temp(name, "code")
    ctx.add(OperationType.ADD, [scaled, ctx.const_i32([CONDITION_HOLDS]), ctx.const_i32(0)], [code])
    ctx.current_op = None
    return code
