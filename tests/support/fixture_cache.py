"""Build a cached fixture directory once: under an exclusive file lock (pytest-xdist workers and concurrent
sessions build it at most once), into a staging directory renamed into place with a `COMPLETE` marker written
last, so an interrupted build is never mistaken for a finished one (a copy without its marker is rebuilt).

Cached builds are keyed by what they were built from (a hash of requirements, of a builder script), so every change
of the key leaves the older build behind; on a machine whose cache outlives many runs (a CI machine) those pile up
until the disk is full (a 1.5 GB side venv per requirements change). A caller that knows which of its siblings an
entry supersedes says so (`supersedes`), and a new build removes them."""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable

MARKER = "COMPLETE"


def is_complete(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, MARKER))


def build_once(root: str, name: str, build: Callable[[str], str],
               supersedes: Callable[[str], bool] | None = None) -> str:
    """`<root>/<name>`, made first by `build(staging_dir) -> marker text` when no complete copy exists. When it is
    made, the other entries of `root` for which `supersedes(entry name)` is true (older builds of the same thing,
    under another key) are removed, but for one another process is building or using under its lock."""
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
    if supersedes is not None:
        remove_superseded(root, name, supersedes)
    return final


def remove_superseded(root: str, name: str, supersedes: Callable[[str], bool]) -> list:
    """Remove the entries of `root` (but `name`) that `supersedes` names, skipping one whose lock another process
    holds (it is being built); the removed entries' names."""
    removed = []
    for entry in sorted(os.listdir(root)):
        if entry == name or entry.startswith(".") or not supersedes(entry):
            continue
        path = os.path.join(root, entry)
        if not os.path.isdir(path):
            continue
        with open(os.path.join(root, f".{entry}.lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # another process is building it: theirs to keep
            shutil.rmtree(path, ignore_errors=True)
        try:
            os.unlink(os.path.join(root, f".{entry}.lock"))
        except OSError:
            pass
        removed.append(entry)
    return removed
