"""One process-wide cap on the BLAS thread pool, shared by builtin_device's programs and the host executor.

numpy's matmul/einsum paths are the only multi-threaded parts of the numpy references and host kernels; their
pool is global to the process. `limit_blas_threads(n)` caps it (through `threadpoolctl`, a dependency) while
the block runs. Entries from several threads share one cap: the first to start sets it, the last to end
restores the original limits, so entries that overlap never restore each other's limits out of order and never
leave the pool capped. n <= 0 (or threadpoolctl missing): no cap.

Entry points: `limit_blas_threads`, `resolve_thread_count`, `automatic_thread_count` (the predictor and
builtin_device call them). Imports nothing of the project.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

_LOCK = threading.Lock()
# the BLAS limit while capped blocks run
_state: dict[str, Any] = {"users": 0, "limits": None, "controller": None}

def _threadpoolctl():
    """threadpoolctl (optional: a clean, process-local way to cap BLAS threads), or None when it is missing;
    imported on first use: a start whose ops all run on a device's own threads never caps numpy's pool."""
    if "module" not in _state:
        try:
            import threadpoolctl
        except ImportError:  # pragma: no cover - depends on the environment
            threadpoolctl = None
        _state["module"] = threadpoolctl
    return _state["module"]



def _controller():
    """One ThreadpoolController for the process: it finds the BLAS libraries once (threadpool_limits would
    scan them on every entry, about 0.4 ms)."""
    if _state["controller"] is None:
        _state["controller"] = _threadpoolctl().ThreadpoolController()
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


USER_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_AUTO_INTERVAL = 1.0  # seconds between two looks at the load
_auto: dict[str, Any] = {"at": -_AUTO_INTERVAL, "threads": 1}


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _own_runnable_threads() -> int:
    count = 0
    try:
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            count += state == b"R"
    except OSError:
        return 1
    return max(count, 1)


def free_cores() -> int:
    """The usable cores no other process is running on now (module docstring); usable_cores() where the load
    cannot be read."""
    cores = usable_cores()
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return cores
    others = max(running - _own_runnable_threads(), 0)
    return max(1, min(cores, cores - others))


def automatic_thread_count() -> int:
    """The BLAS thread count for "automatic" (0): free_cores(), re-read at most once a second."""
    now = time.monotonic()
    if now - _auto["at"] >= _AUTO_INTERVAL:
        _auto["threads"], _auto["at"] = free_cores(), now
    return _auto["threads"]


def resolve_thread_count(num_threads: int) -> int:
    """The cap a thread count setting means: itself when positive, none (-1) when negative or when the user set
    the BLAS's own variable, automatic_thread_count() for 0."""
    if num_threads != 0:
        return num_threads
    if any(os.environ.get(name, "").strip() for name in USER_THREAD_VARIABLES):
        return -1
    return automatic_thread_count()


def limit_blas_threads(num_threads: int):
    """A context manager capping the BLAS pool at `num_threads`; 0 is automatic (module docstring)."""
    num_threads = resolve_thread_count(num_threads)
    if num_threads > 0 and _threadpoolctl() is not None:
        return _shared_limit(num_threads)
    return contextlib.nullcontext()


def blas_thread_counts() -> list:
    """The current thread count of each BLAS library loaded in the process ([] without threadpoolctl)."""
    if _threadpoolctl() is None:
        return []
    return [info["num_threads"] for info in _controller().info() if info.get("user_api") == "blas"]
