"""The partition picture people read: boxes of ops with their device, host ops with their reason, a legend.

Paddle Lite's debug DOT (partition.dump) draws every op and every var, weights included: a 200-op MobileNetV3
comes out 16000 x 26000 px, over graphviz's 32767 px limit for bitmaps, and says nothing about devices or
reasons. This picture is built for reading a 500+ op model:

* a box per run of ops that one device takes inside one subgraph (the subgraph's ops in program order, cut
  where the device changes), labelled with its subgraph, device, op count, op-index range and the most
  frequent op types; with one device, one box per subgraph;
* a box per run of host ops (consecutive in program order) that share a reason, labelled with the op types,
  their indices and that reason (ops the partition config forces there are dashed); a loop or branch in it
  (while, conditional_block) adds a line per body: its op count, block(s), how many of its ops run in the body's
  device subgraphs and its most frequent op types;
* the model's inputs and outputs as ellipses; weights are not drawn; an edge per pair of boxes that a var
  connects (its tooltip names the vars), what a loop or branch body reads and writes outside it included
  (partition.detector.op_reads / op_writes);
* one colour per device (in the listed order), the host in white with a red border, and a legend saying so.

The same structure is `Picture.as_dict()` (the `picture` field of `partition --json`). `render_picture` runs
graphviz's `dot` and checks the size it drew: a drawing over MAX_PIXELS on a side is scaled to fit with a
PictureSizeWarning naming the factor, never left for graphviz to shrink (or refuse) without a word.

Imports only partition.detector (what ops read and write, their bodies) and the ground's errors; no device,
driver or predictor code: the placements come in as data (Placement). partition.dump renders through it
(imported there on first use).
"""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import shutil
import subprocess
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from nnadapter_bridge.errors import ConfigError
from partition.detector import body_ops, op_reads, op_writes, sub_block_indices

# graphviz's limit on each side of a bitmap (and what most SVG viewers rasterise at), in pixels = points.
MAX_PIXELS = 32767
# Device colours in the listed order (ColorBrewer Set3, readable under black text); more devices cycle.
DEVICE_COLORS = ("#8dd3c7", "#80b1d3", "#fdb462", "#b3de69", "#bebada", "#fccde5", "#ffffb3", "#bc80bd")
HOST_FILL, HOST_BORDER = "#ffffff", "#d62728"
FORCED_FILL = "#eeeeee"
_BOUNDARY_OP_TYPES = frozenset({"feed", "fetch"})
_TYPES_SHOWN = 4  # op types named in a box label, most frequent first
_REASON_WIDTH, _REASON_LINES = 56, 4


class GraphvizNotFoundError(ConfigError):
    """Rendering was asked for but graphviz's `dot` program is not installed."""


class PictureSizeWarning(UserWarning):
    """The drawing was larger than graphviz's limit and was scaled to fit (render_picture)."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one op runs, as the picture needs it: its subgraph and device, or the host (device None) with the
    reason and whether the partition config forced it there."""

    subgraph: int | None
    device: str | None
    reason: str = ""
    forced: bool = False


@dataclasses.dataclass
class Box:
    """A node of the picture: a run of ops (kind "device" or "host"), or a model input/output."""

    id: str
    kind: str  # "device" | "host" | "input" | "output"
    ops: list = dataclasses.field(default_factory=list)  # OpInfo, program order
    subgraph: int | None = None
    device: str | None = None
    reason: str = ""
    forced: bool = False
    name: str = ""  # the var of an input/output box
    color: str = ""  # fill colour: the device's (build_picture)
    # (control-flow op, its body ops, how many of them run in the body's device subgraphs) of a host box
    bodies: list = dataclasses.field(default_factory=list)

    def op_types(self) -> dict:
        return _type_counts(self.ops)

    def as_dict(self) -> dict:
        data: dict[str, Any] = {"id": self.id, "kind": self.kind}
        if self.kind in ("input", "output"):
            data["var"] = self.name
            return data
        data.update(num_ops=len(self.ops), op_indices=[op.index for op in self.ops], op_types=self.op_types(),
                    subgraph=self.subgraph, device=self.device)
        if self.kind == "host":
            data.update(reason=self.reason, forced=self.forced)
            data["bodies"] = [{"op": holder.index, "type": holder.type, "blocks": sub_block_indices(holder),
                               "num_ops": len(ops), "on_devices": on_devices, "op_types": _type_counts(ops)}
                              for holder, ops, on_devices in self.bodies]
        return data


@dataclasses.dataclass
class Picture:
    """Boxes, the edges between them (with the vars each one carries) and the device colours."""

    boxes: list
    edges: dict  # (from id, to id) -> [var names]
    colors: dict  # device name -> fill colour

    def as_dict(self) -> dict:
        return {"boxes": [b.as_dict() for b in self.boxes],
                "edges": [{"from": a, "to": b, "vars": names} for (a, b), names in self.edges.items()],
                "legend": {"devices": dict(self.colors), "host": {"fill": HOST_FILL, "border": HOST_BORDER},
                           "forced": {"fill": FORCED_FILL, "style": "dashed"}}}

    def dot(self) -> str:
        lines = ["digraph partition {",
                 '  graph [rankdir=TB, nodesep=0.25, ranksep=0.35, fontname="Helvetica", '
                 'labelloc=t, label="Partition: boxes of ops by device; host ops with the reason"];',
                 '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
                 '  edge [color="#555555", arrowsize=0.6];']
        lines.extend(self._legend())
        for box in self.boxes:
            lines.append(f"  {box.id} [{self._attributes(box)}];")
        for (a, b), names in self.edges.items():
            lines.append(f"  {a} -> {b} [tooltip={_quote(_short(', '.join(names), 200))}];")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _legend(self) -> list:
        rows = [f'<TR><TD BGCOLOR="{color}"> </TD><TD ALIGN="LEFT">on {_html(name)}</TD></TR>'
                for name, color in self.colors.items()]
        rows.append(f'<TR><TD BGCOLOR="{HOST_FILL}" COLOR="{HOST_BORDER}"> </TD>'
                    '<TD ALIGN="LEFT">on the host (the reason is in the box)</TD></TR>')
        rows.append(f'<TR><TD BGCOLOR="{FORCED_FILL}"> </TD>'
                    '<TD ALIGN="LEFT">on the host: forced by the partition config</TD></TR>')
        table = ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="3">'
                 '<TR><TD COLSPAN="2"><B>legend</B></TD></TR>' + "".join(rows) + "</TABLE>")
        return [f"  legend [shape=plaintext, style=solid, label=<{table}>];"]

    @staticmethod
    def _attributes(box: Box) -> str:
        if box.kind in ("input", "output"):
            return (f"shape=ellipse, style=solid, label={_quote(box.kind + ': ' + _short(box.name, 40))}")
        label = _quote(_label(box))
        if box.kind == "device":
            return f"label={label}, fillcolor={_quote(box.color)}"
        if box.forced:
            return f'label={label}, fillcolor="{FORCED_FILL}", style="rounded,filled,dashed"'
        return f'label={label}, fillcolor="{HOST_FILL}", color="{HOST_BORDER}", penwidth=2'


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _indices(ops: Sequence) -> str:
    first, last = ops[0].index, ops[-1].index
    return f"#{first}" if len(ops) == 1 else f"#{first}-#{last}"


def _type_counts(ops: Sequence) -> dict:
    """op type -> count, most frequent first."""
    counts = collections.Counter(op.type for op in ops)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _types_text(ops: Sequence) -> str:
    types = list(_type_counts(ops).items())
    shown = [f"{t} x{n}" if n > 1 else t for t, n in types[:_TYPES_SHOWN]]
    if len(types) > _TYPES_SHOWN:
        shown.append(f"+{len(types) - _TYPES_SHOWN} more types")
    return ", ".join(shown)


def _types_line(box: Box) -> list:
    return textwrap.wrap(_types_text(box.ops), _REASON_WIDTH)


def _bodies_lines(box: Box) -> list:
    lines = []
    for holder, ops, on_devices in box.bodies:
        blocks = ", ".join(str(b) for b in sub_block_indices(holder))
        lines += textwrap.wrap(f"body of {holder.type}#{holder.index}: {len(ops)} op{'s' if len(ops) != 1 else ''} "
                               f"(block {blocks}, {on_devices} on devices): {_types_text(ops)}", _REASON_WIDTH)
    return lines


def _label(box: Box) -> str:
    count = f"{len(box.ops)} op{'s' if len(box.ops) != 1 else ''} ({_indices(box.ops)})"
    if box.kind == "device":
        head = [f"subgraph {box.subgraph} on {box.device}", count]
        return "\n".join(head + _types_line(box))
    reason = textwrap.wrap("why: " + box.reason, _REASON_WIDTH)
    if len(reason) > _REASON_LINES:
        reason = reason[:_REASON_LINES - 1] + [_short(reason[_REASON_LINES - 1] + " ...", _REASON_WIDTH)]
    return "\n".join([f"host: {count}"] + _types_line(box) + _bodies_lines(box) + reason)


def build_picture(graph, result, placements: Mapping[int, Placement], device_names: Sequence[str]) -> Picture:
    """The picture of `result` (partition.PartitionResult of `graph`); `placements`: op index -> Placement for
    the ops of block 0 (feed/fetch need none; an op without one is placed by `result`: its subgraph on the
    listed devices, or the host)."""
    colors: dict[str, str] = {}
    for name in device_names:
        colors.setdefault(name, DEVICE_COLORS[len(colors) % len(DEVICE_COLORS)])
    joined = "|".join(device_names) or "the devices"

    def place(op) -> Placement:
        found = placements.get(op.index)
        if found is not None:
            return found
        index = result.subgraph_index_of(op)
        return Placement(index, joined if index is not None else None)

    boxes: list = []
    box_of: dict = {}  # op index -> Box
    # Device boxes: each subgraph's ops in program order, cut where the device changes.
    for subgraph in result.subgraphs:
        current = None
        for op in subgraph.ops:
            device = place(op).device
            if device is None:  # moved to the host at run time: drawn with the host ops
                current = None
                continue
            if current is None or current.device != device:
                current = Box("", "device", subgraph=subgraph.index, device=device)
                boxes.append(current)
            current.ops.append(op)
            box_of[op.index] = current
    # Host boxes: runs of host ops, consecutive in program order, sharing a reason.
    current = None
    for op in result.ops:
        if op.type in _BOUNDARY_OP_TYPES:
            continue
        where = place(op)
        if where.device is not None:
            current = None
            continue
        if current is None or (current.reason, current.forced) != (where.reason, where.forced):
            current = Box("", "host", reason=where.reason, forced=where.forced)
            boxes.append(current)
        current.ops.append(op)
        if sub_block_indices(op):
            inside = body_ops(graph, op)
            current.bodies.append((op, inside, sum(result.subgraph_index_of(o) is not None for o in inside)))
        box_of[op.index] = current
    for box in boxes:
        box.color = colors.get(box.device, DEVICE_COLORS[0]) if box.kind == "device" else HOST_FILL
    # Boxes in program order of their first op (the order dot ranks ties in), then the boundary vars.
    boxes.sort(key=lambda b: b.ops[0].index)
    for k, box in enumerate(boxes):
        box.id = f"b{k}"
    producer: dict = {}  # var name -> box id of its latest writer
    edges: dict = {}
    inputs = {name: Box(f"in{k}", "input", name=name) for k, name in enumerate(graph.inputs)}
    for name, box in inputs.items():
        producer[name] = box.id
    for op in result.ops:
        box = box_of.get(op.index)
        if box is None:
            continue
        for name in op_reads(graph, op):
            source = producer.get(name)
            if source is not None and source != box.id:
                edges.setdefault((source, box.id), [])
                if name not in edges[(source, box.id)]:
                    edges[(source, box.id)].append(name)
        for name in op_writes(graph, op):
            producer[name] = box.id
    outputs = []
    for k, name in enumerate(graph.outputs):
        box = Box(f"out{k}", "output", name=name)
        outputs.append(box)
        source = producer.get(name)
        if source is not None:
            edges.setdefault((source, box.id), []).append(name)
    return Picture(list(inputs.values()) + boxes + outputs, edges, colors)


def svg_size(svg_text: str) -> tuple:
    """(width, height) in points of an SVG graphviz wrote (its `<svg width="..pt" height="..pt"`)."""
    found = re.search(r'<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"', svg_text)
    if not found:
        raise ConfigError("graphviz's SVG has no width/height in points; cannot check the drawing's size")
    return float(found.group(1)), float(found.group(2))


def _run_dot(dot_exe: str, fmt: str, text: str, path) -> subprocess.CompletedProcess:
    args = [dot_exe, f"-T{fmt}"] + (["-o", os.fspath(path)] if path is not None else [])
    return subprocess.run(args, input=text.encode("utf-8"), capture_output=True, check=False)


def dot_program(path) -> str:
    dot_exe = shutil.which("dot")
    if dot_exe is None:
        raise GraphvizNotFoundError(f"cannot render {os.fspath(path)}: graphviz's 'dot' program is not on PATH; "
                                    f"install graphviz: apt-get install graphviz (or brew install graphviz), "
                                    f"or write the DOT text with --dot and render it elsewhere")
    return dot_exe


def _failed(path, completed) -> ConfigError:
    message = completed.stderr.decode("utf-8", "replace").strip()
    return ConfigError(f"graphviz 'dot' failed to render {os.fspath(path)} (exit {completed.returncode}): {message}")


def render_picture(dot_text: str, path, fmt: str = "svg") -> tuple:
    """Render DOT text to `path` (svg or png) with graphviz, checking the drawing's size first: over MAX_PIXELS
    on a side it is drawn scaled to fit (graph attribute `size`), with a PictureSizeWarning. Returns the
    (width, height) in pixels of what was written."""
    if fmt not in ("svg", "png"):
        raise ConfigError(f"cannot render the partition graph as '{fmt}': choose 'svg' or 'png'")
    dot_exe = dot_program(path)
    measured = _run_dot(dot_exe, "svg", dot_text, None)
    if measured.returncode != 0:
        raise _failed(path, measured)
    width, height = svg_size(measured.stdout.decode("utf-8", "replace"))
    scale = min(1.0, (MAX_PIXELS - 1) / max(width, height, 1.0))
    if scale < 1.0:
        inches = (MAX_PIXELS - 1) / 72.0
        # A graph attribute statement right after the opening brace: scales the whole drawing down to fit.
        dot_text = dot_text.replace("{", f'{{\n  graph [size="{inches:.2f},{inches:.2f}"];', 1)
        warnings.warn(f"{os.fspath(path)}: the drawing is {width:.0f} x {height:.0f} px, over graphviz's "
                      f"{MAX_PIXELS} px limit: written scaled by {scale:.2f} to fit (zoom the SVG, or read the "
                      "JSON of `partition --json` for every box)", PictureSizeWarning, stacklevel=2)
        width, height = width * scale, height * scale
    completed = _run_dot(dot_exe, fmt, dot_text, path)
    if completed.returncode != 0:
        raise _failed(path, completed)
    return round(width), round(height)
