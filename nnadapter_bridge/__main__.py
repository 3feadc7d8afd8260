"""`python -m nnadapter_bridge` runs the command line."""
import sys

from nnadapter_bridge.cli import main

sys.exit(main())
