"""The detector's debug dump in Paddle Lite's format (facts §4.6), and DOT/graphviz output of it.

The dump is what users copy a partition config from: `subgraph clusters: N`, a DOT graph whose op
nodes are coloured by subgraph, then `subgraph operators: ` and every op in config syntax
(`op_type:in1,in2:out1`). One deliberate difference from Paddle Lite: DOT node ids count from 0 in each
dump instead of from a process-wide counter, so the same model always gives the same text.

Entry points: `dump_text`, `print_dump_if_verbose`, `write_dot`, `render`. Imports partition.config,
partition.picture and errors only.
"""
from __future__ import annotations

import os
import sys

from partition.config import config_line, op_input_names, op_output_names, unwritable_reason

# Paddle Lite's subgraph colours, in its order: subgraph i gets SUBGRAPH_COLORS[i % 48].
SUBGRAPH_COLORS = (
    "red", "green", "cyan", "bisque3", "coral", "darkseagreen1", "goldenrod1", "darkorchid",
    "antiquewhite", "aquamarine", "azure", "bisque4", "blue2", "brown1", "burlywood1", "cadetblue1",
    "chartreuse1", "chocolate1", "coral1", "cornsilk", "crimson", "cyan4", "darkgoldenrod4",
    "darkolivegreen2", "darkorange2", "darkorchid2", "darkseagreen3", "darkslategray", "deeppink2",
    "deepskyblue2", "dodgerblue", "firebrick", "floralwhite", "gold1", "skyblue3", "indianred", "indigo",
    "lavenderblush2", "lightblue1", "lightsalmon3", "khaki1", "ivory4", "sandybrown", "olivedrab2",
    "turquoise4", "snow3", "sienna4", "salmon2",
)
HOST_OP_COLOR = "white"
_INDENT = "   "
VERBOSE_LEVEL = 5  # GLOG_v at which Paddle Lite's users expect to see the dump


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Dot:
    """A DOT digraph built like Paddle Lite's: ids in creation order, nodes printed sorted by name."""

    def __init__(self):
        self._nodes: dict[str, tuple[str, list]] = {}  # name -> (id, [(attr, value)])
        self._edges: list[tuple[str, str]] = []

    def add_node(self, name: str, attrs: list) -> None:
        self._nodes[name] = (f"node_{len(self._nodes)}", attrs)

    def has_node(self, name: str) -> bool:
        return name in self._nodes

    def add_edge(self, source: str, target: str) -> None:
        self._edges.append((self._nodes[source][0], self._nodes[target][0]))

    def build(self) -> str:
        lines = ["digraph G {"]
        for name in sorted(self._nodes):
            node_id, attrs = self._nodes[name]
            fields = [f"label={_quote(name)}"] + [f"{key}={_quote(value)}" for key, value in attrs]
            lines.append(f"{_INDENT}{node_id}[{' '.join(fields)}]")
        lines.extend(f"{_INDENT}{a}->{b}" for a, b in self._edges)
        lines.append("} // end G")
        return "\n".join(lines)


def dot_text(graph, result) -> str:
    """The DOT graph of block 0: op nodes filled with their subgraph's colour (white on the host)."""
    dot = _Dot()
    seen_per_type: dict[str, int] = {}
    for op in graph.ops():
        n = seen_per_type.get(op.type, 0)
        seen_per_type[op.type] = n + 1
        op_name = f"{op.type}_{n}_op"
        color = HOST_OP_COLOR
        index = result.subgraph_index_of(op)
        if index is not None:
            op_name += f"_subgraph_{index}"
            color = SUBGRAPH_COLORS[index % len(SUBGRAPH_COLORS)]
        dot.add_node(op_name, [("shape", "box"), ("style", "filled"), ("color", "black"), ("fillcolor", color)])
        for name in op_input_names(op):
            if not dot.has_node(name):
                dot.add_node(name, [])
            dot.add_edge(name, op_name)
        for name in op_output_names(op):
            if not dot.has_node(name):
                dot.add_node(name, [])
            dot.add_edge(op_name, name)
    return dot.build()


def operator_lines(graph) -> list[str]:
    """Every op of block 0 in partition-config syntax, `op_type:inputs:outputs`, in program order. An op whose
    names the syntax cannot hold (a var called 'a:b' or 'a,b'; Paddle Lite's format has no escaping) gets a
    `#` comment line saying so instead: the config parser skips it, and no line names another op by mistake."""
    return [operator_line(op) for op in graph.ops()]


def operator_line(op) -> str:
    """One op in partition-config syntax, or the `#` comment line saying why it cannot be written (operator_lines)."""
    inputs, outputs = op_input_names(op), op_output_names(op)
    line = config_line(op.type, inputs, outputs)
    if line is None:
        reason = unwritable_reason(op.type, inputs, outputs)
        line = (f"# {op.type!r} op #{op.index}: {reason}, which a partition config line cannot hold; "
                f"this op cannot be named by its vars")
    return line


def dump_text(graph, result) -> str:
    """The whole dump, byte for byte as Paddle Lite prints it (save the node ids, see the module doc)."""
    parts = [f"subgraph clusters: {len(result.subgraphs)}\n", dot_text(graph, result), "\n",
             "subgraph operators: \n"]
    parts.extend(line + "\n" for line in operator_lines(graph))
    parts.append("\n")
    return "".join(parts)


def print_dump_if_verbose(graph, result, environ=os.environ, stream=None) -> bool:
    """Print the dump when env GLOG_v >= 5, as Paddle Lite users expect; returns whether it printed."""
    try:
        level = int(environ.get("GLOG_v", "0").strip() or 0)
    except ValueError:
        return False
    if level < VERBOSE_LEVEL:
        return False
    (stream or sys.stdout).write(dump_text(graph, result))
    return True


def write_dot(graph, result, path) -> None:
    """Write the DOT graph to `path` (view it with graphviz or an online DOT viewer)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(dot_text(graph, result) + "\n")


def render(graph, result, path, fmt: str = "svg") -> None:
    """Render the DOT graph to `path` as svg or png through graphviz's `dot` executable (its size checked:
    partition.picture.render_picture). Paddle Lite's full graph; `partition --svg` draws the readable
    picture (partition.picture) instead."""
    from partition.picture import render_picture  # the picture's drawing code loads only to render

    render_picture(dot_text(graph, result), path, fmt)
