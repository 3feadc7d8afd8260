"""What the commands print: JSON, plain-text tables, numbers and byte sizes, one-line warnings, output
array summaries, and the per-subgraph program report (token, compiled or restored, .nnc file).

Entry points: `print_json`, `print_text`, `format_table`, `program_report`, `array_summary`, `one_line_warnings`.
Imports numpy; the channel, the `.nnc` format and `rich` only inside the functions that need them; nothing of the
predictor.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence

import numpy as np


def print_json(data) -> None:
    """The command's one JSON document (with "ok": true and the warnings collected so far; commands.channel)."""
    from nnadapter_bridge.commands.channel import current

    current().print_document(data)


def print_text(text: str) -> None:
    """A command's text result on stdout: on a terminal through `rich`, PASS green and FAIL red; as it is when
    stdout is a pipe or a file (and rich is imported only for a terminal)."""
    import sys

    isatty = getattr(sys.stdout, "isatty", None)
    if not (isatty and isatty()):
        print(text)
        return
    try:
        from rich.console import Console
        from rich.text import Text
    except ImportError:
        print(text)
        return
    rendered = Text.from_ansi(text)  # the tables' own styles (bold headers) come as ANSI codes
    rendered.highlight_regex(r"\bPASS\b", "bold green")
    rendered.highlight_regex(r"\bFAIL\b|\bERROR\b", "bold red")
    Console(soft_wrap=True, highlight=False).print(rendered)


def format_table(header: Sequence[str], rows: Sequence[Sequence], right_align: Iterable[int] = ()) -> str:
    """The rows under their header in aligned columns: laid out by `rich` (long cells wrapped to the terminal's
    width) when stdout is a terminal, in fixed plain-text columns otherwise (pipes, files, tests)."""
    import sys

    right = set(right_align)
    isatty = getattr(sys.stdout, "isatty", None)
    if isatty and isatty():
        rendered = _rich_table(header, rows, right)
        if rendered is not None:
            return rendered
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([line(cells[0]), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]])


def _rich_table(header: Sequence[str], rows: Sequence[Sequence], right: set) -> str | None:
    try:
        import io
        import shutil

        from rich import box
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        return None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for i, title in enumerate(header):
        table.add_column(str(title), justify="right" if i in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(str(c) for c in row))
    console = Console(file=io.StringIO(), width=shutil.get_terminal_size((120, 20)).columns, force_terminal=True,
                      color_system="standard")
    console.print(table)
    return console.file.getvalue().rstrip("\n")


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    return f"{n} B"


def format_number(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@contextlib.contextmanager
def one_line_warnings(command: str):
    """Python warnings (cache misses, partition config specs that match nothing) go to the command's channel:
    one line each on stderr, or the "warnings" of its JSON document (commands.channel)."""
    from nnadapter_bridge.commands.channel import current

    channel = current()
    if not channel.command:
        channel.command = command
    with channel.collecting():
        yield


def array_summary(array: np.ndarray) -> dict:
    """Shape, dtype and a few statistics (as Python numbers) of an output."""
    summary = {"shape": list(array.shape), "dtype": str(array.dtype)}
    if array.size and array.dtype.kind in "biuf":
        values = array.astype(np.float64)
        finite = np.isfinite(values)
        if not finite.all():
            # Statistics of the finite values, and the non-finite ones counted: a mean over inf is inf or
            # NaN and hides everything else (and numpy warns about it).
            summary.update(nan=int(np.isnan(values).sum()), posinf=int(np.isposinf(values).sum()),
                           neginf=int(np.isneginf(values).sum()))
            values = values[finite]
            if not values.size:
                return summary
        summary.update(min=float(values.min()), max=float(values.max()), mean=float(values.mean()),
                       std=float(values.std()))
    return summary


# -- compiled programs -----------------------------------------------------------------------------------
SOURCE_WORDS = {"build": "compiled", "file": "restored from cache", "buffer": "restored from cache buffer"}


def program_report(predictor) -> list:
    """One entry per program each subgraph engine built or restored: subgraph index, ops count, token,
    how it was obtained, and its .nnc file (path and size) when one exists."""
    from nnadapter_bridge.nnadapter.nnc import cache_file_path, wait_for_cache_writes

    cache_dir = predictor.config.nnadapter_model_cache_dir()
    wait_for_cache_writes()  # the .nnc files are written by threads of their own after the first run
    entries = []
    for index in sorted(predictor.engines):
        engine = predictor.engines[index]
        for program in engine.programs:
            path = cache_file_path(cache_dir, program.token) if cache_dir else None
            exists = bool(path) and os.path.isfile(path)
            entries.append({
                "subgraph": index,
                "ops": len(engine.subgraph.ops),
                "token": program.token,
                "source": SOURCE_WORDS.get(program.source, program.source),
                "file": path if exists else None,
                "bytes": os.path.getsize(path) if exists else None,
            })
    return entries
