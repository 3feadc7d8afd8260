"""Stale temporary files of interrupted cache writes, removed once per cache dir and process.

Owns `TMP_PREFIX`, `tmp_max_age_s` (NNADAPTER_BRIDGE_CACHE_TMP_MAX_AGE_S) and `clean_stale_temp_files`: a
``.tmp-*.nnc`` older than that age counts as left by an interrupted write (a write in progress keeps touching its
file). Imports nothing of the project.
"""
from __future__ import annotations

import os
import re
import stat
import threading
import time

TMP_PREFIX = ".tmp-"
TMP_MAX_AGE_ENV = "NNADAPTER_BRIDGE_CACHE_TMP_MAX_AGE_S"
DEFAULT_TMP_MAX_AGE_S = 300.0
# mkstemp's names: the prefix, 8 characters of [a-z0-9_], the suffix. Nothing else is ever removed.
_TMP_NAME = re.compile(r"\.tmp-[a-z0-9_]+\.nnc\Z")
_CLEANED_DIRS: set = set()
_CLEANED_LOCK = threading.Lock()


def tmp_max_age_s() -> float:
    """How old a `.tmp-*.nnc` must be to count as left by an interrupted write: NNADAPTER_BRIDGE_CACHE_TMP_MAX_AGE_S
    when it is a number >= 0, else 300 s (a write in progress keeps touching its file)."""
    try:
        value = float(os.environ.get(TMP_MAX_AGE_ENV, ""))
    except ValueError:
        return DEFAULT_TMP_MAX_AGE_S
    return value if value >= 0 else DEFAULT_TMP_MAX_AGE_S


def clean_stale_temp_files(cache_dir: str, *, force: bool = False) -> list:
    """Remove the temporary files of interrupted atomic writes (`.tmp-*.nnc` not modified for
    `tmp_max_age_s()`) from `cache_dir`; done once per dir per process unless `force`. Returns the names
    removed. Never raises."""
    if not cache_dir:
        return []
    directory = os.path.abspath(cache_dir)
    with _CLEANED_LOCK:
        if directory in _CLEANED_DIRS and not force:
            return []
        _CLEANED_DIRS.add(directory)
    cutoff = time.time() - tmp_max_age_s()
    removed = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not _TMP_NAME.match(entry.name):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                    if (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)) and info.st_mtime <= cutoff:
                        os.unlink(entry.path)
                        removed.append(entry.name)
                except OSError:
                    continue  # gone meanwhile (another process cleaned it) or not ours to remove
    except OSError:
        pass  # no such dir yet, or unreadable: nothing to clean
    return removed


