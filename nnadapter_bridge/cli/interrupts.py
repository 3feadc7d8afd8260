"""Ctrl-C that always stops a command, and says nothing but "interrupted".

Python turns SIGINT into a KeyboardInterrupt raised wherever the main thread happens to be. Where that is a
finaliser (a weakref callback such as importlib's module-lock cleanup, a `__del__`), Python prints "Exception ignored
in ..." and goes on as if nothing happened; some C code also clears what it meets. Measured: about 1 bench in 100,
interrupted while another thread was importing on a loaded 2-core machine, ran on until killed.

So while a command runs (`handled`), the SIGINT handler also sets a flag that outlives a lost KeyboardInterrupt:
the long loops of the commands ask `raise_if_interrupted()` at each step, and a command that returns after a
Ctrl-C still ends as interrupted (the caller raises it again). A KeyboardInterrupt lost in a finaliser is not
printed. Outside a command (the library, tests calling main()) nothing changes.

Imports the standard library only.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading

_interrupted = threading.Event()


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed during this command (whether or not its first one was lost)."""
    if _interrupted.is_set():
        raise KeyboardInterrupt


def interrupted() -> bool:
    return _interrupted.is_set()


def _on_sigint(signum, frame):
    _interrupted.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def handled():
    """The handler and the quiet unraisable hook for one command, when Python's default SIGINT handler is in place in
    the main thread (anything else, such as a host application's own handler, is left alone)."""
    _interrupted.clear()
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    previous_hook = sys.unraisablehook

    def quiet_hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            return  # the flag has it; the command stops at its next step
        previous_hook(unraisable)

    signal.signal(signal.SIGINT, _on_sigint)
    sys.unraisablehook = quiet_hook
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if sys.unraisablehook is quiet_hook:
            sys.unraisablehook = previous_hook
        _interrupted.clear()
