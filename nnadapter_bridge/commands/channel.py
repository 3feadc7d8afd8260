"""The command line's one error and warning channel: what a command says besides its result, and its exit status.

Every command runs inside a Channel (cli.main sets it up). Python warnings raised while it runs (a device that
fell back, a partition spec that matches nothing, a cache file that could not be written, from any thread) are
collected, each distinct message once; without --json each is one `nnadapter-bridge CMD: warning: ...` line on
stderr, under --json they go into the command's one JSON document as "warnings". A failure is one
`nnadapter-bridge CMD: error: ...` line (and a `hint: ...` line when there is advice), or under --json the document
`{"ok": false, "error": {"type", "message", "hint"}, "warnings": [...]}` on stdout.

Exit statuses (docs/cli.md):
  0    the command did what it was asked
  1    it ran, and a check it was asked for failed (run --compare-paddle, batch, conformance)
  2    a usage or input error: a bad option, a missing or unreadable file, a model that cannot run
  3    a device or compile failure: a device that cannot open or compile, a compiled program that cannot be written
  70   an internal error (a bug in nnadapter-bridge): its traceback on stderr, and under --json the error
       document on stdout all the same, so a script reading it never gets an empty stdout
  130  interrupted (Ctrl-C): the line "interrupted", no traceback

Messages from the library name its API (Config.set_nnadapter_device_names, ...); the channel says the CLI option
that set the value instead, and drops the NNAdapter result code in brackets. This module imports only the
standard library and nnadapter_bridge.errors: it is loaded for every command, before any model code.

Entry points: `Channel`, `activated`, `current`, `CommandError`, `DeviceError`, `exit_status_of`, `hint_of`.
"""
from __future__ import annotations

import contextlib
import json
import re
import sys
import warnings

from nnadapter_bridge.errors import BridgeError

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_DEVICE = 3
EXIT_INTERNAL = 70  # sysexits' EX_SOFTWARE
EXIT_INTERRUPTED = 130
INTERNAL_HINT = "this is a bug in nnadapter-bridge: please report it with the traceback printed on stderr"

DEVICES_HINT = "`nnadapter-bridge devices` says which devices load here"

# Library API names in messages -> the option of this command line that sets the same thing.
_API_TO_OPTION = (
    ("set_nnadapter_device_names", "--device"),
    ("set_nnadapter_context_properties", "--context-properties"),
    ("set_nnadapter_model_cache_dir", "--cache-dir"),
    ("set_nnadapter_subgraph_partition_config_path", "--partition-config"),
    ("set_nnadapter_dynamic_shape_info", "--dynamic-shape"),
    ("set_min_subgraph_size", "--min-subgraph-size"),
    ("set_param_file", "--params"),
)
_API_CALL = re.compile(r"(?:Config\.)?(" + "|".join(api for api, _ in _API_TO_OPTION) + r")(\([^()]*\))?")
_RESULT_CODE = re.compile(r" ?\[[A-Z]+(?:_[A-Z]+)+\]")


def user_text(message: str) -> str:
    """`message` as a CLI user reads it: options instead of API calls, no trailing [RESULT_CODE]."""
    options = dict(_API_TO_OPTION)
    text = _API_CALL.sub(lambda m: options[m.group(1)], str(message).strip())
    return _RESULT_CODE.sub("", text)


class CommandError(BridgeError):
    """A command that cannot do what it was asked: a message, optional advice (`hint`) and its exit status."""

    exit_status = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None):
        self.hint = hint
        super().__init__(message)


class DeviceError(CommandError):
    """A device that cannot open, compile or run what it was asked to, or whose program cannot be written."""

    exit_status = EXIT_DEVICE


def exit_status_of(exc: BaseException) -> int:
    from nnadapter_bridge.errors import ConversionError, DeviceNotFoundError, NNAdapterError, PropertiesError

    if isinstance(exc, CommandError):
        return exc.exit_status
    if isinstance(exc, (DeviceNotFoundError, PropertiesError)):
        return EXIT_USAGE  # a misspelled device name or property string: the user's input
    if isinstance(exc, (NNAdapterError, ConversionError)):
        return EXIT_DEVICE
    return EXIT_USAGE


def hint_of(exc: BaseException) -> str | None:
    from nnadapter_bridge.errors import DeviceNotFoundError

    hint = getattr(exc, "hint", None)
    if hint:
        return hint
    if isinstance(exc, DeviceNotFoundError):
        return "`nnadapter-bridge devices` lists the installed drivers"
    return None


class Channel:
    """Warnings and the final document of one command (module docstring).

    Warnings are printed as they come, except those about cache files (written by threads of their own after a
    run), device fallbacks and the host share they cause (which a command may turn into its error): they wait for the
    end of the command, where a failure that already says the same thing absorbs them, so no reason is printed twice."""

    DEFERRED = frozenset({"NncCacheWarning", "DeviceFallbackWarning", "HostPlacementWarning"})

    def __init__(self, command: str, json_mode: bool, stream=None):
        self.command = command or "nnadapter-bridge"
        self.json_mode = json_mode
        self.stream = stream
        self.warnings: list = []  # {"category": name, "message": text}, each distinct one once
        self._seen: set = set()
        self._deferred: list = []
        self.absorbed: set = set()  # warning texts an error says again (not repeated)
        self.documents = 0
        self.devices: list = []  # the --device names of the command, to name them in a driver's error

    @property
    def err(self):
        return self.stream if self.stream is not None else sys.stderr

    def prefix(self) -> str:
        return f"nnadapter-bridge {self.command}" if self.command != "nnadapter-bridge" else self.command

    # -- warnings ----------------------------------------------------------------------------------------
    def warn(self, message: str, category: str = "UserWarning") -> None:
        text = user_text(message)
        if (category, text) in self._seen:
            return
        self._seen.add((category, text))
        self.warnings.append({"category": category, "message": text})
        if self.json_mode:
            return
        if category in self.DEFERRED:
            self._deferred.append(text)
        else:
            print(f"{self.prefix()}: warning: {text}", file=self.err, flush=True)

    def flush_warnings(self, absorbed_by: str = "") -> None:
        """Print the deferred warnings, but not one that `absorbed_by` (the error message) already says."""
        deferred, self._deferred = self._deferred, []
        for text in deferred:
            if text not in absorbed_by and text not in self.absorbed:
                print(f"{self.prefix()}: warning: {text}", file=self.err, flush=True)

    def warnings_of(self, category: str) -> list:
        return [w["message"] for w in self.warnings if w["category"] == category]

    @contextlib.contextmanager
    def collecting(self):
        """Route every Python warning (from any thread) to warn() while the command runs."""
        def show(message, category, filename, lineno, file=None, line=None):
            self.warn(str(message), category.__name__)

        with warnings.catch_warnings():
            warnings.simplefilter("always")
            # Python's own note of a file or socket left to the garbage collector (off outside its dev mode): a
            # Ctrl-C between an open() and its `with` leaves one, and it is nothing the user can act on.
            warnings.simplefilter("ignore", ResourceWarning)
            warnings.showwarning = show
            yield self

    # -- documents -------------------------------------------------------------------------------------
    def print_document(self, data) -> None:
        """The command's result: under --json, one JSON object with "ok" and "warnings" added."""
        if isinstance(data, dict):
            document = {"ok": True, **data, "warnings": list(self.warnings)}
        else:
            document = data
        self.documents += 1
        print(json.dumps(document, indent=2, default=str), flush=True)

    def fail(self, exc: BaseException, status: int) -> int:
        """Say that the command failed (one line, or the JSON error document); returns `status`."""
        if isinstance(exc, KeyboardInterrupt):
            kind, message, hint = "Interrupted", "interrupted", None
        elif status == EXIT_INTERNAL:
            kind, message, hint = "InternalError", f"{type(exc).__name__}: {exc}", INTERNAL_HINT
        else:
            kind, message, hint = type(exc).__name__, user_text(str(exc)), hint_of(exc)
            named = [d for d in self.devices if message.startswith(f"{d}: ")]
            if named and not isinstance(exc, CommandError):  # a driver's own error: the option that chose it
                message = f"--device {message}"
                hint = hint or DEVICES_HINT
            if hint:  # said once, as the hint
                message = message.replace(f"; {hint}", "").replace(f". {hint}", ".")
        self.flush_warnings(absorbed_by=message)
        if self.json_mode:
            if self.documents == 0:
                warnings_left = [w for w in self.warnings
                                 if w["message"] not in message and w["message"] not in self.absorbed]
                print(json.dumps({"ok": False, "error": {"type": kind, "message": message, "hint": hint},
                                  "exit_status": status, "warnings": warnings_left}, indent=2), flush=True)
            elif kind == "Interrupted":
                print(f"{self.prefix()}: interrupted", file=self.err, flush=True)
            return status
        if kind == "Interrupted":
            print(f"{self.prefix()}: interrupted", file=self.err, flush=True)
        else:  # one line: the message, then the advice
            joint = " " if message.endswith(("?", ".")) else "; "
            print(f"{self.prefix()}: error: {message}" + (f"{joint}{hint}" if hint else ""), file=self.err, flush=True)
        return status


_CURRENT: Channel | None = None


def current() -> Channel:
    """The channel of the command running now (a plain one outside cli.main, e.g. a command called directly)."""
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = Channel("", json_mode=False)
    return _CURRENT


@contextlib.contextmanager
def activated(channel: Channel):
    global _CURRENT
    previous, _CURRENT = _CURRENT, channel
    try:
        yield channel
    finally:
        _CURRENT = previous


def raise_for_device_fallbacks(since: int = 0, *, what: str = "") -> None:
    """DeviceError when a device fell back since warning number `since`: a device the user asked for did not
    take its part of the model (it could not open, or could not compile or run it). `what` says which step."""
    channel = current()
    fallbacks = [w["message"] for w in channel.warnings[since:] if w["category"] == "DeviceFallbackWarning"]
    if not fallbacks:
        return
    channel.absorbed.update(fallbacks)
    # the ops the failed device left on the host are that failure's consequence, not news
    channel.absorbed.update(w["message"] for w in channel.warnings if w["category"] == "HostPlacementWarning")
    message = fallbacks[0]
    reason = re.sub(r"; (?:its part of the model|it) runs on .*$", "", message)
    match = re.match(r"device '([^']+)' (.*)$", reason, re.S)
    if match:
        reason = f"--device {match.group(1)}: {match.group(2)}"
    more = f" (and {len(fallbacks) - 1} more device failure(s), listed in the warnings)" if len(fallbacks) > 1 else ""
    raise DeviceError(f"{reason}{more}" + (f"; {what}" if what else ""),
                      hint=DEVICES_HINT)
