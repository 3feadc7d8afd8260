"""Context properties: the `KEY=value;KEY=value;` string every device of a context receives (facts §6.2).

Paddle Lite's parser is strict (no trimming, `;;` fails). This one keeps its meaning but is kinder:
spaces around keys and values are trimmed, empty sections (a trailing `;`, `;;`, blank lines) are
skipped, and newlines (LF or CRLF) separate entries like `;` does, so a properties file can hold one
entry per line. An entry without `=`, with an empty key or value, or with a second `=` is a
PropertiesError that quotes the entry. Later duplicates override earlier ones, as in Lite.

Every lookup falls back to the environment variable of the same name, as the HALs do.

Each driver declares the keys it reads (`property_keys`); `unknown_keys` finds the keys of a string that no
device knows (a typo such as INTEL_OPENVINO_INFERENCE_NUM_THREAD), each with the nearest known key, and the
predictor warns about them once (UnknownPropertyWarning): a key nobody reads would otherwise be silently
ignored. A key that starts with the name of a device whose driver declares no keys is not judged.

Entry points: `parse_properties`, `Properties`, `unknown_keys`, `parse_bool`. Imports only `errors`.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from nnadapter_bridge.errors import PropertiesError

SYNTAX = "KEY=value;KEY=value; (entries separated by ';' or newlines, exactly one '=' per entry)"
_SEPARATORS = re.compile(r";|\r\n|\n|\r")
_TRUE_WORDS = ("true", "1")


def parse_properties(text: str | None) -> dict:
    """{key: value} of a properties string; raises PropertiesError on a malformed entry."""
    result: dict = {}
    if not text:
        return result
    for section in _SEPARATORS.split(text):
        entry = section.strip()
        if not entry:
            continue
        parts = entry.split("=")
        if len(parts) != 2:
            problem = "has no '='" if len(parts) == 1 else f"has {len(parts) - 1} '=' signs"
            raise PropertiesError(f"context property entry '{entry}' {problem}; expected {SYNTAX}")
        key, value = parts[0].strip(), parts[1].strip()
        if not key:
            raise PropertiesError(f"context property entry '{entry}' has an empty key; expected {SYNTAX}")
        if not value:
            raise PropertiesError(f"context property entry '{entry}' has an empty value; expected {SYNTAX}")
        result[key] = value
    return result


class UnknownPropertyWarning(UserWarning):
    """A context-property key that no device reads (module docstring)."""


def unknown_keys(keys: Iterable[str], declared: Mapping[str, Iterable[str] | None]) -> list:
    """[(key, nearest known key or None)] for every key of `keys` no device declares. `declared` maps each
    device name to the keys its driver reads (None: it does not say, so keys starting with its name in upper
    case and '_' are not judged)."""
    known = sorted({k for keys_of in declared.values() if keys_of is not None for k in keys_of})
    silent = [name.upper() + "_" for name, keys_of in declared.items() if keys_of is None]
    found = []
    for key in keys:
        if key in known or any(key.upper().startswith(prefix) for prefix in silent):
            continue
        import difflib  # only for a key no device reads

        nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        found.append((key, nearest[0] if nearest else None))
    return found


def parse_bool(value: str) -> bool:
    """Lite's boolean rule: case-insensitive `true` or `1` is true, anything else false."""
    return value.strip().lower() in _TRUE_WORDS


class Properties:
    """Parsed properties with environment fallback: `get` looks in the string, then in os.environ."""

    def __init__(self, text: str | None = "", environ: Mapping[str, str] | None = None):
        self.text = text or ""
        self.values = parse_properties(self.text)
        self._environ = environ

    def _env(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def __contains__(self, key: str) -> bool:
        return key in self.values or key in self._env()

    def get(self, key: str, default: str | None = None) -> str | None:
        if key in self.values:
            return self.values[key]
        value = self._env().get(key)
        if value is None or not value.strip():
            return default
        return value.strip()

    def get_bool(self, key: str, default: bool = False) -> bool:
        value = self.get(key)
        return default if value is None else parse_bool(value)

    def get_int(self, key: str, default: int = 0) -> int:
        value = self.get(key)
        if value is None:
            return default
        try:
            return int(value, 10)
        except ValueError:
            where = "context property" if key in self.values else "environment variable"
            raise PropertiesError(f"{where} {key}={value!r} is not an integer") from None

    def get_list(self, key: str, default: list | None = None) -> list:
        """A comma-separated value as a list of trimmed, non-empty strings."""
        value = self.get(key)
        if value is None:
            return list(default or [])
        return [item.strip() for item in value.split(",") if item.strip()]

    def __repr__(self) -> str:
        return f"Properties({self.values!r})"
