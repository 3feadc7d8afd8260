"""Progress bars on a terminal: converting and compiling the subgraphs of a large model, a batch's entries.

On a terminal (the stream is a tty) it draws one transient `rich` progress bar with the current step, e.g.
`converting subgraph 3/12 (conv2d x 20, ...)`, and the time left, and removes it when done. It is silent when the
stream is not a tty, under `--json` (the CLI sets NNADAPTER_BRIDGE_PROGRESS=0 then) or with
NNADAPTER_BRIDGE_PROGRESS=0. `rich` is imported only when a bar is drawn, never on the library's import path;
without it the same text is one rewritten line.

Entry points: `Progress`, `progress_wanted`, `summarize_op_types`. Imports nothing of the project.
"""
from __future__ import annotations

import collections
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

ENV_PROGRESS = "NNADAPTER_BRIDGE_PROGRESS"


def summarize_op_types(ops: Sequence, limit: int = 3) -> str:
    """`conv2d x 20, batch_norm x 20, relu x 15...`: the most frequent op types of a subgraph."""
    counts = collections.Counter(op.type for op in ops)
    common = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{op_type} x {n}" for op_type, n in common[:limit])
    return text + ("..." if len(common) > limit else "")


def progress_wanted(stream, environ: Mapping[str, str] = os.environ) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and environ.get(ENV_PROGRESS, "1").strip() != "0"


class TerminalProgress:
    """One bar of `total` steps: show(completed, text) moves it, done() removes it."""

    def __init__(self, total: int, stream: TextIO | None = None, environ: Mapping[str, str] = os.environ,
                 enabled: bool | None = None):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_wanted(self.stream, environ) if enabled is None else enabled
        self._bar = None
        self._task = None
        self._width = 0  # the plain line's width, without rich

    def _start(self) -> bool:
        if self._bar is not None:
            return True
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
        except ImportError:
            return False
        import shutil  # here: a start that shows no progress does not import it

        console = Console(file=self.stream, width=shutil.get_terminal_size((100, 20)).columns)
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=16), TimeRemainingColumn(),
                             console=console, transient=True, auto_refresh=False)
        self._bar.start()
        self._task = self._bar.add_task("", total=max(self.total, 1))
        return True

    def show(self, completed: int, text: str, total: int | None = None) -> None:
        """Move the bar to `completed` (of `total`, when the total changes) with `text` beside it."""
        if not self.enabled:
            return
        if total is not None:
            self.total = total
        if self._start():
            self._bar.update(self._task, completed=completed, description=text, total=max(self.total, 1))
            self._bar.refresh()
            return
        import shutil

        columns = shutil.get_terminal_size((80, 20)).columns
        text = text[: max(columns - 1, 10)]
        self.stream.write("\r" + text + " " * max(self._width - len(text), 0))
        self.stream.flush()
        self._width = len(text)

    def done(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


class Progress(TerminalProgress):
    """Shows `<verb> subgraph i/n (<ops>)` while subgraphs convert and compile."""

    def update(self, number: int, ops: Sequence = (), verb: str = "converting") -> None:
        if not self.enabled:
            return
        text = f"{verb} subgraph {number}/{self.total}"
        if ops:
            text += f" ({summarize_op_types(ops)})"
        self.show(number - 1, text)
