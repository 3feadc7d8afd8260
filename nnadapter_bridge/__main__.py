"""`python -m nnadapter_bridge` runs the command line.

Imports only `cli` (and ctypes at exit, for `_forget_caught_keyboard_interrupts`).
"""
import signal
import sys

from nnadapter_bridge.cli import main


def _forget_caught_keyboard_interrupts() -> None:
    """CPython remembers, in a process-wide flag, a KeyboardInterrupt that left Python code which C code ran through
    PyRun_String (as some extension modules evaluate code), and at exit kills the process with SIGINT when the flag
    is set, even though the command caught that KeyboardInterrupt and said how it ended. Measured: exit status -2
    after "interrupted" in about 1 bench in 10 interrupted soon after a cold start under load, always with the flag
    set. The command's own ending stands: the flag is cleared."""
    import ctypes

    try:
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (AttributeError, ValueError):  # another Python, or a build that does not export the flag
        pass


try:
    status = main()
except KeyboardInterrupt:  # a Ctrl-C in the moment between the command's handler and the exit
    status = 130
finally:  # also when argparse exits (--help, a usage error)
    # A Ctrl-C during the interpreter's shutdown must not turn the command's ending into a death by SIGINT either.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _forget_caught_keyboard_interrupts()
sys.exit(status)
