"""Graphviz DOT text of an NNAdapter Model: operands as ellipses, operations as boxes.

Deterministic: node ids come from operand and operation positions, nodes are written in list order,
edges in operation order. Constants are drawn grey, model inputs and outputs with a double border;
`device_of` (operation -> device index) fills operation boxes with one colour per device, which is
how a multi-device partition is shown.

Entry point: `model_to_dot`. Imports the standard's model and codes only.
"""
from __future__ import annotations

from collections.abc import Sequence

from nnadapter_bridge.nnadapter.codes import Lifetime
from nnadapter_bridge.nnadapter.model import Model

_DEVICE_COLORS = ("lightblue", "palegreen", "lightsalmon", "khaki", "plum", "lightcyan", "wheat", "pink")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def model_to_dot(model: Model, name: str = "model", device_of: Sequence[int] | None = None) -> str:
    """The DOT text of `model`; `device_of[i]` is the device index of model.operations[i]."""
    positions = {id(o): i for i, o in enumerate(model.operands)}
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;"]
    for i, operand in enumerate(model.operands):
        t = operand.type
        label = f"{operand.label()}\n{t.describe()}"
        attrs = [f"label={_quote(label)}", "shape=ellipse"]
        if t.is_constant:
            attrs += ["style=filled", "fillcolor=lightgrey"]
        if t.lifetime in (Lifetime.MODEL_INPUT, Lifetime.MODEL_OUTPUT):
            attrs.append("peripheries=2")
        lines.append(f"  operand_{i} [{' '.join(attrs)}];")
    for k, op in enumerate(model.operations):
        attrs = [f"label={_quote(op.type.name + '#' + str(k))}", "shape=box"]
        if device_of is not None:
            color = _DEVICE_COLORS[device_of[k] % len(_DEVICE_COLORS)]
            attrs += ["style=filled", f"fillcolor={color}", f"tooltip={_quote('device ' + str(device_of[k]))}"]
        lines.append(f"  operation_{k} [{' '.join(attrs)}];")
    for k, op in enumerate(model.operations):
        for slot, source in enumerate(op.inputs):
            if source is not None:
                lines.append(f"  operand_{positions[id(source)]} -> operation_{k} [label={slot}];")
        for slot, result in enumerate(op.outputs):
            if result is not None:
                lines.append(f"  operation_{k} -> operand_{positions[id(result)]} [label={slot}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
