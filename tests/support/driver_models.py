"""What the drivers receive: a test-only observer of the NNAdapter models handed to `create_program`.

`record_driver_models(monkeypatch)` wraps the runtime's one call site of every driver hook
(`nnadapter.runtime.compilation.call_driver`, where programs are created) and returns a list that fills, as the
predictor compiles, with one
`(device name, Model)` per program a driver builds from a model (restores from a cache hand over bytes, not
a model, and are not recorded). `unknown_dim_operands(model)` lists the operands of such a model whose dims
are not all known, as "OPERATION output [dims]". `run_through_execute_program(compilation, arrays)` runs a
compilation through its drivers' `execute_program` and the access callbacks (bound inputs and outputs), where
`Execution.run` takes a driver's `run_arrays` when it has one.
"""
from __future__ import annotations

from nnadapter_bridge.nnadapter.codes import UNKNOWN
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.runtime import Compilation, Execution, HostBuffer, compilation


def record_driver_models(monkeypatch) -> list:
    seen: list = []
    call_driver = compilation.call_driver

    def observe(what: str, fn, *args):
        if what.endswith(".create_program") and len(args) > 1 and isinstance(args[1], Model):
            seen.append((what.rsplit(".", 1)[0], args[1]))
        return call_driver(what, fn, *args)

    monkeypatch.setattr(compilation, "call_driver", observe)
    return seen


def run_through_execute_program(compiled: Compilation, arrays) -> list:
    execution = Execution(compiled)
    for k, array in enumerate(arrays):
        execution.set_input(k, array)
    holders = [HostBuffer() for _ in compiled.output_types]
    for k, holder in enumerate(holders):
        execution.set_output(k, holder)
    execution.compute()
    return [holder.array for holder in holders]


def unknown_dim_operands(model: Model) -> list:
    operands = []
    for op in model.operations:
        for operand in (*op.inputs, *op.outputs):
            if operand is not None and any(d == UNKNOWN or d < 0 for d in operand.type.dims):
                operands.append(f"{op.type.name} {operand.label()} {list(operand.type.dims)}")
    return sorted(set(operands))
