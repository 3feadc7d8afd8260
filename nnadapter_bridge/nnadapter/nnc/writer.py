"""The background writer of `.nnc` files: a cache is exported, packed and written by a thread of its own.

Owns `PendingCacheWrite`, `wait_for_cache_writes`, `has_pending_writes`, `wait_for_pending_write` and the fork
handling (a forked child forgets the parent's writes: the thread writing them lives in the parent only).
docs/architecture.md ("The runtime: the model cache") tells why the writer is not a daemon. Imports only the
container (for its warning).
"""
from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable

from nnadapter_bridge.nnadapter.nnc.container import NncCacheWarning

_PENDING_WRITES: list = []
_PENDING_LOCK = threading.Lock()


class PendingCacheWrite:
    """A .nnc being exported, packed and written by its own thread. The thread is not a daemon: the
    interpreter's exit waits for it, so a process that ends right after its first result still leaves its
    cache. A failure is a NncCacheWarning from that thread (the file is then simply absent: a miss next time).
    Exporting reads the compiled program while the caller's thread may execute it: drivers' exporters are
    read-only on a compiled program (intel_openvino's export_model is const and releases the GIL). A process
    forked meanwhile has no such thread: in it, nothing waits for the parent's writes (they are forgotten at
    the fork, and wait() returns at once there), which the parent finishes."""

    def __init__(self, path: str, job: Callable[[], None]):
        self.path = os.path.abspath(path)
        self._pid = os.getpid()
        self._job: Callable[[], None] | None = job
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"nnc-write {os.path.basename(path)}", daemon=False)
        with _PENDING_LOCK:
            _PENDING_WRITES.append(self)
        self._thread.start()

    def _run(self) -> None:
        try:
            if self._job is not None:
                self._job()
        except BaseException as exc:  # never let a writer thread die with a traceback on stderr
            warnings.warn(f"writing the model cache {self.path} failed ({type(exc).__name__}: {exc}); no .nnc "
                          "written", NncCacheWarning, stacklevel=2)
        finally:
            self._job = None  # the program bytes it held
            with _PENDING_LOCK:
                if self in _PENDING_WRITES:
                    _PENDING_WRITES.remove(self)
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the file is written (or the write failed); False when `timeout` ran out first."""
        if threading.current_thread() is self._thread:
            return False  # a warning handler that waits from inside the write: never deadlock
        if os.getpid() != self._pid:
            return True  # a forked child: the thread writing it lives in the parent only
        return self._done.wait(timeout)


def wait_for_cache_writes(path: str | None = None, timeout: float | None = None) -> bool:
    """Block until every .nnc this process is writing in the background (or only the one to `path`) is on
    disk; True when none is left pending. Call it before copying or shipping a cache dir that this process
    has just filled; reading a cache path, destroying a compilation and the interpreter's exit already wait."""
    target = os.path.abspath(path) if path else None
    with _PENDING_LOCK:
        pending = [w for w in _PENDING_WRITES if target is None or w.path == target]
    deadline = None if timeout is None else time.monotonic() + timeout
    for write in pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not write.wait(left):
            return False
    return True


def _forget_pending_writes_after_fork() -> None:
    global _PENDING_LOCK
    _PENDING_LOCK = threading.Lock()  # the parent's lock may have been held by one of its threads at the fork
    _PENDING_WRITES.clear()


os.register_at_fork(after_in_child=_forget_pending_writes_after_fork)


def has_pending_writes() -> bool:
    """Whether this process is still writing any .nnc in the background."""
    with _PENDING_LOCK:
        return bool(_PENDING_WRITES)


def wait_for_pending_write(path: str) -> None:
    """Before reading the cache file `path`: wait when this process is writing it in the background."""
    if _PENDING_WRITES:
        wait_for_cache_writes(path)
