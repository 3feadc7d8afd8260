"""`python -m nnadapter_bridge` runs the command line.

Imports only `cli`.
"""
import sys

from nnadapter_bridge.cli import main

sys.exit(main())
