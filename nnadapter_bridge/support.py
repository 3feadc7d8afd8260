"""The support decision: can a Paddle op run on the selected NNAdapter devices?

An op is supported when (1) a converter exists for its type, (2) the converter's `check` accepts its
attributes, and (3) every NNAdapter operation the converter emits for it is accepted by at least one of
the selected devices (`validate_program`, through `Context.get_supported_operations`). For (3) the op is
converted alone into a scratch Model whose inputs are the op's non-parameter inputs, typed from their
VarDescs (dtype, shape with -1 as NNADAPTER_UNKNOWN); parameters become constants as in a real subgraph.

The answer is computed once per op signature (type, attributes, input dtypes and declared dims; parameter inputs
by dtype and full shape, because converters read their values) and reused for every op that shares it.
Every "no" keeps its reason, which the partition output and strict-mode errors show.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from nnadapter_bridge.errors import BridgeError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, dtype_precision
from nnadapter_bridge.nnadapter.types import OperandType

# Attributes Paddle writes for bookkeeping; no converter reads them, so they must not split signatures.
BOOKKEEPING_ATTRS = frozenset({
    "op_callstack", "op_device", "op_namescope", "op_role", "op_role_var", "with_quant_attr",
    "use_mkldnn", "use_cudnn", "use_quantizer", "mkldnn_data_type",
})
EMPTY_VAR_NAME = "@EMPTY@"


def freeze(value) -> Any:
    """A hashable, deterministic stand-in for an attribute value (lists become tuples, refs tagged)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (bool, int, float, str, bytes)) or value is None:
        return value
    if dataclasses.is_dataclass(value):  # BlockRef / VarRef
        return (type(value).__name__,) + tuple(freeze(getattr(value, f.name)) for f in dataclasses.fields(value))
    if hasattr(value, "tolist"):
        return freeze(value.tolist())
    return (type(value).__name__, repr(value))


def semantic_attrs(op) -> tuple:
    """The op's attributes that can change its meaning, sorted by name and frozen."""
    return tuple(sorted((name, freeze(value)) for name, value in op.attrs.items() if name not in BOOKKEEPING_ATTRS))


@dataclasses.dataclass(frozen=True)
class SupportVerdict:
    supported: bool
    reason: str = ""  # why not, for partition output and strict errors


class SupportDecider:
    """Answers `is_supported(op)` for the ops of one program on one NNAdapter context."""

    def __init__(self, graph, context, block: int = 0):
        self.graph = graph
        self.context = context
        self.block = block
        self._verdicts: dict[tuple, SupportVerdict] = {}
        self.reasons: dict[str, str] = {}  # op type -> reason of its first unsupported signature
        self.conversions = 0  # scratch conversions done (one per distinct signature reaching step 3)

    # -- signatures ---------------------------------------------------------------------------------
    def _var(self, name: str):
        try:
            return self.graph.var(name, self.block)
        except BridgeError:
            return None

    def _input_signature(self, op) -> tuple:
        parts = []
        for slot in sorted(op.inputs):
            for name in op.inputs[slot]:
                if name == EMPTY_VAR_NAME:
                    parts.append((slot, None))
                    continue
                if name in self.graph.params:
                    array = self.graph.params[name]
                    parts.append((slot, "param", str(array.dtype), tuple(array.shape)))
                    continue
                var = self._var(name)
                if var is None or var.dtype is None:
                    parts.append((slot, "opaque", None if var is None else var.var_type))
                else:
                    # The declared dims, not only the rank: some checks read dims (e.g. pool2d's partial
                    # last window, pixel_shuffle, mul), so ops differing only in dims may differ in verdict.
                    parts.append((slot, "data", str(var.dtype), tuple(var.shape)))
        outputs = tuple((slot, len(names)) for slot, names in sorted(op.outputs.items()))
        return tuple(parts) + (outputs,)

    def signature(self, op) -> tuple:
        return (op.type, semantic_attrs(op), self._input_signature(op))

    # -- the decision ------------------------------------------------------------------------------
    def verdict(self, op) -> SupportVerdict:
        key = self.signature(op)
        found = self._verdicts.get(key)
        if found is None:
            found = self._verdicts[key] = self._decide(op)
            if not found.supported:
                self.reasons.setdefault(op.type, found.reason)
        return found

    def is_supported(self, op) -> bool:
        return self.verdict(op).supported

    def reason(self, op) -> Optional[str]:
        v = self.verdict(op)
        return None if v.supported else v.reason

    def _decide(self, op) -> SupportVerdict:
        from converters import get_converter
        from converters.context import convert_subgraph

        spec = get_converter(op.type)
        if spec is None:
            return SupportVerdict(False, f"no converter for Paddle op '{op.type}'")
        input_types = {}
        for name in dict.fromkeys(op.input_names()):
            if name == EMPTY_VAR_NAME or name in self.graph.params or name in input_types:
                continue
            var = self._var(name)
            if var is None or var.dtype is None:
                return SupportVerdict(False, f"input '{name}' is not a dense tensor")
            try:
                precision = dtype_precision(var.dtype)
            except ValueError:
                return SupportVerdict(False, f"input '{name}' has dtype {var.dtype}, which NNAdapter lacks")
            dims = tuple(UNKNOWN if d < 0 else int(d) for d in var.shape)
            input_types[name] = OperandType(precision=precision, dims=dims)
        outputs = [n for n in dict.fromkeys(op.output_names()) if n != EMPTY_VAR_NAME]
        self.conversions += 1
        try:
            result = convert_subgraph([op], self.graph.params, input_types, outputs, self.graph)
        except Exception as exc:  # any converter failure means "not on a device"; the reason is kept
            return SupportVerdict(False, f"conversion failed: {type(exc).__name__}: {exc}")
        model = result.model
        if not model.operations:
            return SupportVerdict(True)
        try:
            flags = self.context.get_supported_operations(model)
        except BridgeError as exc:
            return SupportVerdict(False, f"the devices could not validate it: {exc}")
        rejected = sorted({model.operations[i].type.name for i, ok in enumerate(flags) if not ok})
        if rejected:
            devices = ", ".join(self.context.device_names)
            return SupportVerdict(False, f"{', '.join(rejected)} not accepted by {devices}")
        return SupportVerdict(True)
