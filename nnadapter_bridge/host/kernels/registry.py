"""The host-kernel registry (Paddle op type -> numpy function) and `OpScope`, what a kernel reads and writes.

One decorator next to each kernel registers it; aliases are extra op types; a duplicate fails at import:

    @host_kernel("erf")
    def erf(io: OpScope) -> None:
        io.set_output("Out", ...)

A kernel reads its inputs by Paddle slot name from the scope (params live there too) and writes its
outputs back; it never mutates an input array, because the same array may be bound to other var names.

Entry points: `host_kernel`, `HOST_KERNELS`, `OpScope`. Imports the loader's dtypes and program model and `errors`;
never `hal` or a floor above the host.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from nnadapter_bridge.errors import BridgeError
from nnadapter_bridge.loader.dtypes import VarTypeCode
from nnadapter_bridge.loader.program import EMPTY_VAR_NAME

LOD_TENSOR_ARRAY = int(VarTypeCode.LOD_TENSOR_ARRAY)


class HostKernelError(BridgeError):
    """A host kernel was given inputs or attributes it cannot run (the message names the op)."""


@dataclasses.dataclass(frozen=True)
class HostKernel:
    op_type: str
    fn: Callable


HOST_KERNELS: dict[str, HostKernel] = {}


def host_kernel(op_type: str, *aliases: str):
    """Register the decorated `fn(io: OpScope)` for `op_type` and its aliases."""

    def register(fn):
        for name in (op_type, *aliases):
            if name in HOST_KERNELS:
                raise ValueError(f"host kernel for Paddle op '{name}' registered twice "
                                 f"({HOST_KERNELS[name].fn.__module__} and {fn.__module__})")
            HOST_KERNELS[name] = HostKernel(name, fn)
        return fn

    return register


_MISSING = object()


class OpScope:
    """One op bound to a scope: slot-level access to its input values and output vars.

    `executor` is the HostExecutor running the op (control-flow kernels run sub-blocks through it).
    """

    def __init__(self, op, scope: dict, executor=None):
        self.op = op
        self.scope = scope
        self.executor = executor

    # -- attributes ----------------------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        """Attr `name`; one Paddle let come from a tensor (a Variable-valued attribute) is read from the scope:
        a list when `default` is a list, a scalar when `default` is a scalar and the tensor holds one value
        (the executor normally resolves these before the kernel runs; this serves direct kernel calls)."""
        from converters.op_view import tensor_attr_value, var_attr_names

        value = self.op.attr(name, default)
        refs = var_attr_names(value)
        if not refs:
            return value
        arrays = []
        for ref in refs:
            known = self.value(ref)
            if isinstance(known, list):
                raise self.error(f"attribute '{name}' comes from '{ref}', a tensor array, not a tensor")
            arrays.append(np.asarray(known))
        if isinstance(value, list):  # VARS: one tensor per element
            return [v for a in arrays for v in a.reshape(-1).tolist()]
        resolved = tensor_attr_value(arrays[0])
        if isinstance(default, (list, tuple)):
            return resolved if isinstance(resolved, list) else [resolved]
        if default is not None and isinstance(resolved, list) and len(resolved) == 1:
            return resolved[0]
        return resolved

    # -- inputs --------------------------------------------------------------------------------------
    def input_names(self, slot: str) -> list[str]:
        return [n for n in self.op.input(slot) if n != EMPTY_VAR_NAME]

    def has_input(self, slot: str) -> bool:
        return bool(self.input_names(slot))

    def value(self, name: str) -> Any:
        try:
            return self.scope[name]
        except KeyError:
            pass
        if self._declared_array(name):
            # Paddle's executor creates every declared var before running a block: a tensor array nothing has
            # written yet is an empty array (a list a to_static loop appends to, first read by its length).
            self.scope[name] = []
            return self.scope[name]
        raise self.error(f"input var '{name}' has no value in the scope (nothing produced it before this op)")

    def _declared_array(self, name: str) -> bool:
        graph = getattr(self.executor, "graph", None)
        if graph is None:
            return False
        try:
            var = graph.var(name, self.op.block_idx)
        except BridgeError:
            return False
        return var.var_type == LOD_TENSOR_ARRAY

    def input(self, slot: str, default: Any = _MISSING) -> Any:
        """The value of the first var in `slot` (an ndarray, or a list for a tensor array)."""
        names = self.input_names(slot)
        if not names:
            if default is _MISSING:
                raise self.error(f"input slot '{slot}' is empty")
            return default
        value = self.value(names[0])
        return value if isinstance(value, list) else np.asarray(value)

    def inputs(self, slot: str) -> list:
        return [np.asarray(v) if not isinstance(v, list) else v for v in map(self.value, self.input_names(slot))]

    # -- outputs -------------------------------------------------------------------------------------
    def output_names(self, slot: str) -> list[str]:
        return [n for n in self.op.output(slot) if n != EMPTY_VAR_NAME]

    def has_output(self, slot: str) -> bool:
        return bool(self.output_names(slot))

    def set_output(self, slot: str, value: Any, index: int = 0) -> None:
        """Bind output `slot`[index] to `value`; a slot the program leaves empty is skipped."""
        names = self.output_names(slot)
        if index < len(names):
            self.scope[names[index]] = value

    def set_outputs(self, slot: str, values: list) -> None:
        for i, value in enumerate(values):
            self.set_output(slot, value, i)

    def output_dtype(self, slot: str, fallback) -> np.dtype:
        """The declared dtype of output `slot`'s var (the program's VarDesc), else `fallback`."""
        names = self.output_names(slot)
        graph = getattr(self.executor, "graph", None)
        if names and graph is not None:
            try:
                var = graph.var(names[0], self.op.block_idx)
            except BridgeError:
                var = None
            if var is not None and var.dtype is not None:
                return np.dtype(var.dtype)
        return np.dtype(fallback)

    def error(self, message: str) -> HostKernelError:
        return HostKernelError(f"{self.op.label()}: host kernel: {message}")


# -- helpers the kernel families share -------------------------------------------------------------------
FLOATS = frozenset(np.dtype(t) for t in ("float32", "float64"))


def require(io: OpScope, x: np.ndarray, allowed) -> None:
    """Raise, naming the op, when `x`'s dtype is not one Paddle's CPU kernel takes (`allowed`)."""
    if x.dtype not in allowed:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes {sorted(map(str, allowed))})")


def float_input(io: OpScope, slot: str = "X") -> np.ndarray:
    """Input `slot`, which Paddle's CPU kernel takes in float32 or float64 only."""
    x = io.input(slot)
    require(io, x, FLOATS)
    return x


def slot(io: OpScope, legacy: str, new: str) -> str:
    """The slot name the op uses: ops absent from the compat table keep their PIR (lower-case) names."""
    return legacy if io.input_names(legacy) or io.output_names(legacy) else new


def paddle_dtype(code: int | None, fallback="float32") -> np.dtype:
    """The numpy dtype of a Paddle `dtype` attribute (a VarType.Type code); `fallback` for -1/None."""
    from nnadapter_bridge.loader import dtypes

    if code is None or int(code) < 0:
        return np.dtype(fallback)
    return np.dtype(dtypes.numpy_dtype(int(code)))
