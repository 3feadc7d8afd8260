"""Build a cached fixture directory once: under an exclusive file lock (pytest-xdist workers and concurrent
sessions build it at most once), into a staging directory renamed into place with a `COMPLETE` marker written
last, so an interrupted build is never mistaken for a finished one (a copy without its marker is rebuilt)."""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable

MARKER = "COMPLETE"


def is_complete(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, MARKER))


def build_once(root: str, name: str, build: Callable[[str], str]) -> str:
    """`<root>/<name>`, made first by `build(staging_dir) -> marker text` when no complete copy exists."""
    final = os.path.join(root, name)
    if is_complete(final):
        return final
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, f".{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if is_complete(final):
            return final  # another worker finished it while we waited
        if os.path.exists(final):
            shutil.rmtree(final)  # a copy without its marker: interrupted; rebuild
        staging = tempfile.mkdtemp(prefix=f".{name}-", dir=root)
        try:
            text = build(staging)
            with open(os.path.join(staging, MARKER), "w") as f:
                f.write(text)
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return final
