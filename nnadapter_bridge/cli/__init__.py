"""The `nnadapter-bridge` command line: one module per command (`cmd_<name>.py`), each exposing
`register(subparsers)` that adds its parser and sets `func(args) -> int`.

main() runs the command inside a channel.Channel: warnings are collected, every failure the user can cause
(a BridgeError, a bad option, an OSError on a file they named, Ctrl-C) becomes one error line, or under --json
one JSON document on stdout, with the exit statuses of channel's docstring. Anything else is a bug and keeps
its traceback (under --json on stderr, beside the error document, exit status 70).

Entry points: `main` (the `nnadapter-bridge` script, `python -m nnadapter_bridge`) and `build_parser`. The top
floor: it may import every floor below, and nothing imports it but `__main__`. main imports every command module to
build the parser, so a command imports the predictor, the converters and the drivers inside its `run`: building the
parser loads none of them.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import traceback

from nnadapter_bridge.cli import interrupts
from nnadapter_bridge.commands import channel as channel_module
from nnadapter_bridge.commands.channel import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, Channel, CommandError
from nnadapter_bridge.errors import BridgeError

DESCRIPTION = ("Run PaddlePaddle inference models through NNAdapter devices. Look at a model (inspect, "
               "partition), at this installation (devices, ops, conformance, calibrate), compile and run it "
               "(convert, run, bench), write Paddle Lite's .nb (opt), and validate many models at once (batch). "
               "`nnadapter-bridge COMMAND --help` says more about each.")
EPILOG = ("exit status: 0 done; 1 a check that was asked for failed (run --compare-paddle, batch, conformance); "
          "2 a usage or input error; 3 a device or compile failure; 70 an internal error (a bug); 130 interrupted. "
          "Under --json every command "
          "prints one JSON document, {\"ok\": false, \"error\": {...}} when it fails.")


class UsageError(CommandError):
    """A command line argparse cannot parse."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is raised (main reports it through the channel, as JSON under --json)."""

    quiet_usage = False

    def error(self, message):
        if not _Parser.quiet_usage:
            self.print_usage(sys.stderr)
        raise UsageError(message, hint=f"`{self.prog} --help` lists the options")


def _version() -> str:
    try:
        import importlib.metadata

        return importlib.metadata.version("nnadapter-bridge")
    except Exception:  # noqa: BLE001 - a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="nnadapter-bridge", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"nnadapter-bridge {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            module.register(subparsers)
    return parser


def _command_name(argv) -> str:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return ""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in argv
    channel = Channel(_command_name(argv), json_mode)
    _Parser.quiet_usage = json_mode
    with channel_module.activated(channel), _no_progress_bars(json_mode), interrupts.handled():
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            if not getattr(args, "func", None):
                parser.print_help()
                return EXIT_USAGE
            channel.command = args.command
            channel.devices = list(getattr(args, "devices", None) or [])
            with channel.collecting():
                try:
                    status = int(args.func(args) or 0)
                finally:
                    _wait_for_cache_writes()  # their warnings belong to this command
            interrupts.raise_if_interrupted()  # a Ctrl-C whose KeyboardInterrupt Python lost (interrupts.py)
            channel.flush_warnings()
            return status
        except KeyboardInterrupt as exc:
            return channel.fail(exc, EXIT_INTERRUPTED)
        except BridgeError as exc:
            return channel.fail(exc, channel_module.exit_status_of(exc))
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):
                return 0
            if exc.filename is None:
                raise  # not about a file the user named: a bug
            return channel.fail(CommandError(f"{exc.filename}: {exc.strerror or exc}"), EXIT_USAGE)
        except Exception as exc:
            if not json_mode:
                raise  # a bug: its traceback is what a report needs
            traceback.print_exc()  # on stderr; stdout still gets its one document
            return channel.fail(exc, EXIT_INTERNAL)


@contextlib.contextmanager
def _no_progress_bars(json_mode: bool):
    """Under --json nothing but the document is printed: no progress bars on stderr either."""
    from nnadapter_bridge.subgraph.progress import ENV_PROGRESS

    if not json_mode:
        yield
        return
    saved = os.environ.get(ENV_PROGRESS)
    os.environ[ENV_PROGRESS] = "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(ENV_PROGRESS, None)
        else:
            os.environ[ENV_PROGRESS] = saved


def _wait_for_cache_writes() -> None:
    nnc = sys.modules.get("nnadapter_bridge.nnadapter.nnc")
    if nnc is not None:
        nnc.wait_for_cache_writes()


if __name__ == "__main__":
    sys.exit(main())
