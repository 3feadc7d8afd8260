"""`python -m nnadapter_bridge` runs the command line.

Imports only `cli`.
"""
import signal
import sys

from nnadapter_bridge.cli import main

try:
    status = main()
except KeyboardInterrupt:  # a Ctrl-C in the moment between the command's handler and the exit
    status = 130
# The command has said how it ended (interrupted: 130): a Ctrl-C during the interpreter's shutdown must not turn
# that into a death by SIGINT (seen once under load: exit status -2 after "interrupted" was printed).
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.exit(status)
