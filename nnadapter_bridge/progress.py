"""A one-line progress display for converting and compiling the subgraphs of a large model.

On a terminal (stderr is a tty) it rewrites one line, e.g. `converting subgraph 3/12 (conv2d x 20, ...)`,
and clears it when done. It is silent when stderr is not a tty or when NNADAPTER_BRIDGE_PROGRESS=0.
"""
from __future__ import annotations

import collections
import os
import shutil
import sys
from typing import Mapping, Optional, Sequence, TextIO

ENV_PROGRESS = "NNADAPTER_BRIDGE_PROGRESS"


def summarize_op_types(ops: Sequence, limit: int = 3) -> str:
    """`conv2d x 20, batch_norm x 20, relu x 15...`: the most frequent op types of a subgraph."""
    counts = collections.Counter(op.type for op in ops)
    common = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{op_type} x {n}" for op_type, n in common[:limit])
    return text + ("..." if len(common) > limit else "")


class Progress:
    """Shows `<verb> subgraph i/n (<ops>)` while work is under way."""

    def __init__(self, total: int, stream: Optional[TextIO] = None, environ: Mapping[str, str] = os.environ):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self._width = 0
        isatty = getattr(self.stream, "isatty", None)
        on_terminal = bool(isatty and isatty())
        self.enabled = on_terminal and environ.get(ENV_PROGRESS, "1").strip() != "0"

    def update(self, number: int, ops: Sequence = (), verb: str = "converting") -> None:
        if not self.enabled:
            return
        text = f"{verb} subgraph {number}/{self.total}"
        if ops:
            text += f" ({summarize_op_types(ops)})"
        columns = shutil.get_terminal_size((80, 20)).columns
        text = text[: max(columns - 1, 10)]
        padding = " " * max(self._width - len(text), 0)
        self.stream.write("\r" + text + padding)
        self.stream.flush()
        self._width = len(text)

    def done(self) -> None:
        if not self.enabled or not self._width:
            return
        self.stream.write("\r" + " " * self._width + "\r")
        self.stream.flush()
        self._width = 0
