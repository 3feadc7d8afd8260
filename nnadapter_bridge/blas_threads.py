"""One process-wide cap on the BLAS thread pool, shared by builtin_device's programs and the host executor.

numpy's matmul/einsum paths are the only multi-threaded parts of the numpy references and host kernels; their
pool is global to the process. `limit_blas_threads(n)` caps it (through `threadpoolctl`, a dependency) while
the block runs. Entries from several threads share one cap: the first to start sets it, the last to end
restores the original limits, so entries that overlap never restore each other's limits out of order and never
leave the pool capped. n <= 0 (or threadpoolctl missing): no cap.
"""
from __future__ import annotations

import contextlib
import threading

try:  # optional: a clean, process-local way to cap BLAS threads
    import threadpoolctl as _threadpoolctl
except ImportError:  # pragma: no cover - depends on the environment
    _threadpoolctl = None

_LOCK = threading.Lock()
_state = {"users": 0, "limits": None, "controller": None}  # the BLAS limit while capped blocks run


def _controller():
    """One ThreadpoolController for the process: it finds the BLAS libraries once (threadpool_limits would
    scan them on every entry, about 0.4 ms)."""
    if _state["controller"] is None:
        _state["controller"] = _threadpoolctl.ThreadpoolController()
    return _state["controller"]


@contextlib.contextmanager
def _shared_limit(num_threads: int):
    with _LOCK:
        if _state["users"] == 0:
            _state["limits"] = _controller().limit(limits=num_threads, user_api="blas")
        _state["users"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["users"] -= 1
            if _state["users"] == 0:
                limits, _state["limits"] = _state["limits"], None
                limits.restore_original_limits()


def limit_blas_threads(num_threads: int):
    """A context manager capping the BLAS pool at `num_threads` (module docstring)."""
    if num_threads > 0 and _threadpoolctl is not None:
        return _shared_limit(num_threads)
    return contextlib.nullcontext()


def blas_thread_counts() -> list:
    """The current thread count of each BLAS library loaded in the process ([] without threadpoolctl)."""
    if _threadpoolctl is None:
        return []
    return [info["num_threads"] for info in _controller().info() if info.get("user_api") == "blas"]
