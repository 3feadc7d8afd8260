"""HostExecutor: runs single Paddle ops on the host, converter first, numpy host kernel otherwise.

An op with a converter is converted alone (`convert_subgraph([op], ...)`, input types taken from the actual
scope arrays) and run through the NNAdapter standard's reference (nnadapter.reference, the semantics
builtin_device also runs): that is the path every converter test exercises.
The converted model is a plan, cached per (op, input-shape/dtype signature), so a loop or a second
`Predictor.run` with the same shapes converts nothing. When the converter refuses the op with its inputs as
model inputs (a reshape whose shape comes from a computed tensor, say), the op is converted once more with
every input frozen as a constant; such a plan depends on the input values too, so it is cached under their
digest. Ops whose inputs are tensor arrays (Python lists in the scope), ops carrying sub-blocks, and ops the
converter still refuses go to their host kernel.

Attributes Paddle lets an op take from a tensor (Variable-valued attributes, `VarRef`s: `reduce_sum`'s `dim`,
`cumsum`'s `axis`, PIR `range`'s `start`, ...) are read from the scope before anything else, so the converter
and the host kernel both see plain values; the plan is then cached per those values too.

Host execution always uses the numpy reference: `device_names` is kept for the error messages and for the
predictor's bookkeeping; it does not change how a host op runs.

A loop or branch body runs op by op, or, when the partition put some of it on the devices, in the order
`block_steps` gives: its host ops here, its subgraphs through the callables the predictor hands in.

Entry points: `HostExecutor` (`run`, `run_block`, `can_run`, `unsupported_ops`), `HostExecutionError`. Imports
converters, the loader's program model, the standard's reference and the host kernels; never `hal`.
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from converters.context import convert_subgraph
from converters.op_view import has_var_attrs, resolve_var_attrs, var_attr_names
from nnadapter_bridge.errors import BridgeError, ConversionError, UnsupportedOpError
from nnadapter_bridge.host.kernels import HOST_KERNELS, OpScope
from nnadapter_bridge.loader.program import EMPTY_VAR_NAME, BlockRef
from nnadapter_bridge.nnadapter.codes import dtype_precision
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.types import OperandType

# The predictor handles these; they are never "unsupported" and never run here.
FEED_FETCH = ("feed", "fetch")

PATH_CONVERTER = "converter"
PATH_FROZEN = "converter (inputs frozen as constants)"
PATH_HOST_KERNEL = "host kernel"

# Frozen conversions kept per op signature; a loop feeding ever new values must not grow memory forever.
MAX_FROZEN_VALUES = 32

# Ops whose host kernel gives Paddle's answer where the NNAdapter operations of their converter may not: on the host
# the kernel runs. top_k's order of equal keys is the one libstdc++'s std::partial_sort / std::nth_element leave,
# argsort's std::sort's (the kernels replay them, numpy's sort when no key ties); TOP_K orders them by index, and
# float keys do tie (the zeros of CenterNet / FairMOT's peak-masked heatmap when k exceeds the peaks). On a device
# the converters' run-time conditions send them here when their keys tie.
KERNEL_FIRST = {op_type: "the host kernel gives Paddle's order of equal keys (TOP_K orders them by index)"
                for op_type in ("top_k", "top_k_v2", "argsort")}


class HostExecutionError(BridgeError):
    """A host op failed to run; the message names the op and the path it took."""


@dataclasses.dataclass
class HostPlan:
    """How one op runs for one input signature: the path, and the converted model(s) when converted."""

    path: str
    conversion: Any = None  # ConversionResult for PATH_CONVERTER
    frozen: dict = dataclasses.field(default_factory=dict)  # value digest -> ConversionResult (PATH_FROZEN)
    runs: int = 0
    reason: str = ""  # why the converter was not used (PATH_HOST_KERNEL)


def _has_sub_block(op) -> bool:
    return any(isinstance(v, BlockRef) or (isinstance(v, list) and v and isinstance(v[0], BlockRef))
               for v in op.attrs.values())


def _names(names: Iterable[str]) -> list[str]:
    return [n for n in dict.fromkeys(names) if n != EMPTY_VAR_NAME]


class HostExecutor:
    """Runs Paddle ops of `graph` on numpy, one at a time, against a scope dict."""

    def __init__(self, graph, device_names=("builtin_device",)):
        self.graph = graph
        self.device_names = tuple(device_names)
        self._plans: dict[tuple, HostPlan] = {}
        self.plans_built = 0  # conversions/plans made (a cache miss each)
        self.plan_hits = 0  # runs that reused a plan
        # block -> its run order when the partition put some of a loop or branch body on the devices: host ops, and
        # callables taking the scope (a device subgraph's run); a block absent runs op by op (run_block).
        self.block_steps: dict[int, list] = {}

    # -- capability ----------------------------------------------------------------------------------
    @staticmethod
    def _converter(op_type: str):
        from converters import get_converter

        return get_converter(op_type)

    def can_run(self, op) -> bool:
        """True when a converter or a host kernel exists for `op.type` (attributes are checked at run time)."""
        return op.type in HOST_KERNELS or self._converter(op.type) is not None

    def unsupported_op_types(self, ops) -> list[str]:
        """Sorted op types among `ops` and every sub-block they reach that nothing here can run."""
        return sorted({op.type for op in self.unsupported_ops(ops)})

    def unsupported_ops(self, ops) -> list:
        """The ops among `ops` and in every sub-block they reach (loop and branch bodies, nested ones too) that
        nothing here can run: `ops` in order, each sub-block's ops after the op holding it."""
        missing: list = []
        seen_blocks: set[int] = set()

        def visit(op_list):
            for op in op_list:
                if op.type not in FEED_FETCH and not self.can_run(op):
                    missing.append(op)
                for value in op.attrs.values():
                    refs = value if isinstance(value, list) else [value]
                    for ref in refs:
                        if isinstance(ref, BlockRef) and ref.idx not in seen_blocks:
                            seen_blocks.add(ref.idx)
                            visit(self.graph.blocks[ref.idx].ops)

        visit(ops)
        return missing

    def plan_for(self, op, scope: dict) -> HostPlan | None:
        """The cached plan `op` would use with the current scope's input shapes (None before its first run)."""
        return self._plans.get(self._key(op, scope)[1])

    def _key(self, op, scope: dict) -> tuple:
        """(the op with its tensor-valued attributes read from the scope, its plan key): those values are part
        of the op the plan was made for."""
        resolved = self._resolved(op, scope)
        if resolved is op:  # no tensor-valued attribute: nothing more to key on (the common case, every run)
            return op, self._signature(op, scope)
        read = tuple((name, repr(resolved.attrs[name])) for name, value in op.attrs.items() if var_attr_names(value))
        return resolved, self._signature(resolved, scope) + (read,)

    def _resolved(self, op, scope: dict):
        """`op` with every Variable-valued attribute replaced by its tensor's value in the scope (or the params)."""
        if not has_var_attrs(op):
            return op

        def value_of(name):
            value = scope.get(name)
            if value is None:
                value = self.graph.params.get(name)
            if value is None:
                # Not in the scope (a device subgraph made it and only this attribute reads it): a value
                # computable at conversion time (fill_constant, assign_value, shape arithmetic) is computed.
                from converters.context import graph_constant

                value = graph_constant(self.graph, self.graph.params, name, op)
            return None if value is None or isinstance(value, list) else np.asarray(value)

        resolved = resolve_var_attrs(op, value_of)
        missing = sorted({n for name, v in resolved.attrs.items() for n in var_attr_names(v)})
        if missing:
            raise HostExecutionError(f"{op.label()}: its attribute(s) "
                                     f"{', '.join(n for n, v in resolved.attrs.items() if var_attr_names(v))} "
                                     f"come from tensor(s) {', '.join(missing)}, which have no value in the scope")
        return resolved

    # -- running -------------------------------------------------------------------------------------
    def run(self, op, scope: dict) -> None:
        """Run `op`: read its inputs from `scope`, write its outputs into `scope`."""
        if op.type in FEED_FETCH:
            raise HostExecutionError(f"{op.label()}: feed/fetch ops are the predictor's, not the host executor's")
        op, key = self._key(op, scope)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._make_plan(op, scope)
            self.plans_built += 1
        else:
            self.plan_hits += 1
        plan.runs += 1
        if plan.path == PATH_HOST_KERNEL:
            self.run_host_kernel(op, scope)
        elif plan.path == PATH_CONVERTER:
            self._execute(op, scope, plan.conversion)
        else:
            self._run_frozen(op, scope, plan)

    def run_block(self, block_idx: int, scope: dict) -> None:
        """Run sub-block `block_idx` (control-flow kernels call this): its steps in `block_steps` when the
        partition gave it some (its subgraphs on the devices), else every op in order."""
        steps = self.block_steps.get(block_idx)
        if steps is None:
            for op in self.graph.blocks[block_idx].ops:
                if op.type not in FEED_FETCH:
                    self.run(op, scope)
            return
        for step in steps:
            if callable(step):
                step(scope)
            else:
                self.run(step, scope)

    def _signature(self, op, scope: dict) -> tuple:
        parts = []
        for name in _names(op.input_names()):
            value = scope.get(name)
            if value is None and name in self.graph.params:
                value = self.graph.params[name]
            if isinstance(value, list):
                # Tensor arrays always go to a host kernel: their length must not multiply the plans.
                parts.append((name, "array"))
            elif value is None:
                parts.append((name, "absent"))
            else:
                value = np.asarray(value)
                parts.append((name, value.dtype.str, value.shape))
        return (op.block_idx, op.index, tuple(parts))

    def _make_plan(self, op, scope: dict) -> HostPlan:
        spec = self._converter(op.type)
        has_kernel = op.type in HOST_KERNELS
        if spec is None:
            return HostPlan(PATH_HOST_KERNEL, reason="no converter")
        if op.type in KERNEL_FIRST and has_kernel:
            return HostPlan(PATH_HOST_KERNEL, reason=KERNEL_FIRST[op.type])
        if _has_sub_block(op) or any(isinstance(scope.get(n), list) for n in _names(op.input_names())):
            if has_kernel:
                return HostPlan(PATH_HOST_KERNEL, reason="sub-block or tensor-array input")
            raise HostExecutionError(f"{op.label()}: has a sub-block or a tensor-array input, which a converter "
                                     f"cannot take, and no host kernel")
        label = f"{op.label()}: "
        try:
            return HostPlan(PATH_CONVERTER, conversion=self._convert(op, scope, frozen=False))
        except ConversionError as first:
            reason = str(first).removeprefix(label)
        try:
            conversion = self._convert(op, scope, frozen=True)
            return HostPlan(PATH_FROZEN, frozen={self._value_digest(op, scope): conversion})
        except ConversionError as second:
            again = str(second).removeprefix(label)
            if again != reason:  # the same reason twice says nothing more
                reason = f"{reason}; with constant inputs: {again}"
        if has_kernel:
            return HostPlan(PATH_HOST_KERNEL, reason=reason)
        raise HostExecutionError(f"{op.label()}: {reason} (and no host kernel runs '{op.type}' instead)")

    def _convert(self, op, scope: dict, *, frozen: bool):
        """Convert `op` alone; inputs not in the params become model inputs typed from the scope arrays."""
        params = dict(self.graph.params)
        input_types = {}
        for name in sorted(_names(op.input_names())):
            # Params stay constants even when the predictor also put them in the scope: converters need
            # weights as constants.
            if name in self.graph.params:
                continue
            value = self._read(op, scope, name)
            if frozen:
                params[name] = value
                continue
            try:
                input_types[name] = OperandType(precision=dtype_precision(value.dtype), dims=value.shape)
            except ValueError as exc:
                raise ConversionError(f"{op.label()}: input '{name}': {exc}") from exc
        # convert_subgraph's one error: a ConversionError naming the op, a converter's own bug included.
        return convert_subgraph([op], params, input_types, _names(op.output_names()), self.graph)

    def _read(self, op, scope: dict, name: str) -> np.ndarray:
        if name in scope:
            value = scope[name]
        elif name in self.graph.params:
            value = self.graph.params[name]
        else:
            raise HostExecutionError(f"{op.label()}: input var '{name}' has no value in the scope")
        if isinstance(value, list):
            raise HostExecutionError(f"{op.label()}: input var '{name}' is a tensor array, not a tensor")
        return np.asarray(value)

    def _execute(self, op, scope: dict, conversion) -> None:
        arrays = [self._read(op, scope, name) for name in conversion.input_names]
        try:
            outputs = run_model(conversion.model, arrays)
        except BridgeError as exc:
            raise HostExecutionError(f"{op.label()}: running its converted model through the NNAdapter reference: "
                                     f"{exc}") from exc
        for name, array in zip(conversion.output_names, outputs):
            scope[name] = self._as_declared_dtype(op, name, np.asarray(array))

    def _as_declared_dtype(self, op, name: str, array: np.ndarray) -> np.ndarray:
        # NNAdapter models may carry a narrower integer type than Paddle declares (INT32 indices for an
        # INT64 var); downstream host kernels and the predictor's outputs expect the declared dtype.
        try:
            var = self.graph.var(name, op.block_idx)
        except BridgeError:
            return array
        if var.dtype is not None and var.dtype.kind in "biuf" and array.dtype != var.dtype:
            if array.dtype.kind in "iu" and var.dtype.kind in "iu" and array.dtype.itemsize > var.dtype.itemsize:
                # A wider integer than declared: the op computed on the dtypes it was given at run time. paddle
                # 2.6.2 declares kthvalue's and mode's Indices with X's dtype (int32 for an int32 X), and so the
                # `scale` save_inference_model appends after them; Paddle's kernels write int64 and follow it.
                return array
            if array.dtype.kind in "iu" and var.dtype.kind == "f":
                # Integer indices declared float (paddle 2.6.2 declares kthvalue's and mode's int64 Indices
                # float64): Paddle's kernel writes the integers whatever the program declares, and so do we.
                return array
            if array.dtype.kind == "f" and var.dtype.kind in "iu":
                # Real values of a var declared integer: a Paddle Lite int8 op's output (int8 storage at its
                # Output0_scale), which the converter dequantizes, as a device subgraph hands it on; its
                # consumer quantizes again at its Input0_scale. Casting would truncate every value to 0.
                return array
            return array.astype(var.dtype)
        return array

    def _value_digest(self, op, scope: dict) -> str:
        """A digest of the op's non-param input values (frozen plans depend on them)."""
        digest = hashlib.md5()
        for name in sorted(_names(op.input_names())):
            if name in self.graph.params:
                continue
            value = self._read(op, scope, name)  # not np.ascontiguousarray: it makes a 0-d value shape [1]
            digest.update(name.encode() + b"\0" + value.dtype.str.encode() + repr(value.shape).encode())
            digest.update(value.tobytes())
        return digest.hexdigest()

    def _run_frozen(self, op, scope: dict, plan: HostPlan) -> None:
        key = self._value_digest(op, scope)
        conversion = plan.frozen.get(key)
        if conversion is None:
            if len(plan.frozen) >= MAX_FROZEN_VALUES:
                del plan.frozen[next(iter(plan.frozen))]  # the oldest
            try:
                conversion = plan.frozen[key] = self._convert(op, scope, frozen=True)
            except ConversionError as exc:
                if op.type not in HOST_KERNELS:
                    raise HostExecutionError(f"{op.label()}: {exc}") from exc
                self.run_host_kernel(op, scope)
                return
        self._execute(op, scope, conversion)

    def run_host_kernel(self, op, scope: dict) -> None:
        """Run `op` through its host kernel regardless of any converter (tests and forced fallbacks)."""
        kernel = HOST_KERNELS.get(op.type)
        if kernel is None:
            raise UnsupportedOpError(f"{op.label()}: no converter and no host kernel for '{op.type}' "
                                     f"(devices: {', '.join(self.device_names)})")
        try:
            kernel.fn(OpScope(op, scope, self))
        except BridgeError:
            raise
        except Exception as exc:
            raise HostExecutionError(f"{op.label()}: host kernel failed: {type(exc).__name__}: {exc}") from exc
