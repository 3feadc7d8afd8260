"""The `nnadapter-bridge` command line: one module per command (`cmd_<name>.py`), each exposing
`register(subparsers)` that adds its parser and sets `func(args) -> int`.

A BridgeError becomes one line on stderr and exit status 2; nothing else is caught, so a bug still
shows its traceback.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from nnadapter_bridge.errors import BridgeError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnadapter-bridge",
        description="Run PaddlePaddle inference models through NNAdapter devices: inspect a model, "
                    "list devices and converters, partition, convert to cached device programs, run, bench.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            module.register(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except BridgeError as exc:
        print(f"nnadapter-bridge {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
