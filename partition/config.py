"""The subgraph partition config: which Paddle ops are forced to stay on the host (facts §4.5).

Owns parsing the config text, finding it among the four sources (API buffer, API path, env file, env
buffer, in that order), and matching its specs against the ops of a program.

Syntax, one or more specs per line separated by `-`:

    op_type                   every op of that type
    op_type:in1,in2           ops of that type whose inputs include in1 and in2
    op_type::out              ops of that type whose outputs include out
    op_type:in1:out1,out2     both conditions

Matching follows Paddle Lite: names are a subset test (order does not matter, weights count as inputs),
and every op that matches is taken. Where Paddle Lite silently mis-reads a file, this parser is lenient:
whitespace around every field is trimmed, CRLF and CR line ends are accepted, a UTF-8 byte order mark is
dropped, blank lines and `#` comments are ignored. A spec that matches no op is reported with a
`PartitionConfigWarning` naming its line and the nearest op type or var name, because a typo is the
usual reason a config "does not work".

Entry points: `resolve_partition_config`, `PartitionConfig`, `op_key`. Imports the loader's program model and
errors only.
"""
from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Mapping

from nnadapter_bridge.errors import ConfigError
from nnadapter_bridge.loader.program import EMPTY_VAR_NAME, VarRef
from nnadapter_bridge.nnadapter.record import plain_dataclass

ENV_CONFIG_FILE = "SUBGRAPH_PARTITION_CONFIG_FILE"
ENV_CONFIG_BUFFER = "SUBGRAPH_PARTITION_CONFIG_BUFFER"

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class PartitionConfigWarning(UserWarning):
    """A partition config problem that does not stop the run: a missing file, a spec matching no op."""


def op_key(op) -> tuple:
    """The key of a block-0 op, the same as its node in `ProgramGraph.graph`: ("op", index)."""
    return ("op", op.index)


def op_input_names(op) -> list[str]:
    """The op's input var names, each once, in slot order, then the vars its Variable-valued attributes name (a
    PIR mutable attribute computed at run time, e.g. arange's end: read as much as an input, so a subgraph that
    computes one must hand it out), without Paddle's empty-slot marker."""
    names = list(op.input_names())
    for value in op.attrs.values():
        names.extend(ref.name for ref in (value if isinstance(value, (list, tuple)) else [value])
                     if isinstance(ref, VarRef))
    return [n for n in dict.fromkeys(names) if n != EMPTY_VAR_NAME]


def op_output_names(op) -> list[str]:
    """The op's output var names, each once, in slot order, without Paddle's empty-slot marker."""
    return [n for n in dict.fromkeys(op.output_names()) if n != EMPTY_VAR_NAME]


# What the syntax gives a meaning to: a name holding one of these (or a line break, or space at either end,
# which is trimmed) cannot be written in a spec. Paddle Lite's format has no escaping, so such an op cannot be
# named field by field (a spec with only its op type still matches it, with every other op of that type).
SPECIAL_CHARACTERS = ":,-#"


def unwritable_reason(op_type: str, inputs, outputs) -> str | None:
    """Why `op_type:inputs:outputs` cannot be written as a config line that reads back as the same spec, or
    None when it can."""
    if not op_type:
        return "an empty op type"
    for what, name in [("op type", op_type)] + [("var", n) for n in list(inputs) + list(outputs) if n]:
        special = sorted({c for c in name if c in SPECIAL_CHARACTERS})
        if special:
            return f"{what} {name!r} holds {', '.join(repr(c) for c in special)}"
        if _LINE_BREAK.search(name) or name != name.strip():
            return f"{what} {name!r} holds a line break or starts or ends with white space"
    return None


def config_line(op_type: str, inputs, outputs) -> str | None:
    """The spec naming an op with these inputs and outputs (`op_type:in1,in2:out1`), or None when one of the
    names cannot be written in the syntax (unwritable_reason). Empty names are left out: the parser drops them
    too, and a spec's names are a subset test."""
    if unwritable_reason(op_type, inputs, outputs) is not None:
        return None
    return f"{op_type}:{','.join(n for n in inputs if n)}:{','.join(n for n in outputs if n)}"


@plain_dataclass(frozen=True)
class PartitionSpec:
    """One `op_type[:inputs[:outputs]]` spec; `line` is 1-based within its source."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    line: int
    text: str

    def matches(self, op) -> bool:
        if op.type != self.op_type:
            return False
        # Subset tests on sets: a name listed twice asks for nothing more than one listed once.
        return (set(self.inputs) <= set(op_input_names(op))
                and set(self.outputs) <= set(op_output_names(op)))

    def __str__(self) -> str:
        return f"{self.op_type}:{','.join(self.inputs)}:{','.join(self.outputs)}"


@plain_dataclass(frozen=True)
class SpecMatch:
    """The ops (keys) one spec matched; empty when the spec matched nothing."""

    spec: PartitionSpec
    op_keys: frozenset


def _split_names(field: str) -> tuple[str, ...]:
    # Empty names (`a,,b`, a trailing comma) could never match a var; dropping them is what the user meant.
    return tuple(dict.fromkeys(n.strip() for n in field.split(",") if n.strip()))


class PartitionConfig:
    """A parsed partition config: its specs in file order and where it came from."""

    def __init__(self, specs: Iterable[PartitionSpec], source: str = "<buffer>"):
        self.specs: list[PartitionSpec] = list(specs)
        self.source = source

    @classmethod
    def from_text(cls, text: str | bytes, source: str = "<buffer>") -> PartitionConfig:
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(f"{source}: the partition config is not UTF-8 text ({e})") from e
        text = text.removeprefix("\ufeff")
        specs = []
        for line_no, raw_line in enumerate(_LINE_BREAK.split(text), start=1):
            line = raw_line.split("#", 1)[0]
            for raw_spec in line.split("-"):
                spec_text = raw_spec.strip()
                if not spec_text:
                    continue
                fields = [f.strip() for f in spec_text.split(":")]
                if any(fields[3:]):  # empty trailing fields (`op:a::`) say nothing more
                    warnings.warn(f"{source}:{line_no}: '{spec_text}' has {len(fields)} ':'-separated fields; "
                                  f"only op_type:inputs:outputs are read, the rest is ignored",
                                  PartitionConfigWarning, stacklevel=2)
                if not fields[0]:
                    warnings.warn(f"{source}:{line_no}: '{spec_text}' has no op type; the spec is ignored",
                                  PartitionConfigWarning, stacklevel=2)
                    continue
                inputs = _split_names(fields[1]) if len(fields) > 1 else ()
                outputs = _split_names(fields[2]) if len(fields) > 2 else ()
                specs.append(PartitionSpec(fields[0], inputs, outputs, line_no, spec_text))
        return cls(specs, source)

    @classmethod
    def from_path(cls, path: str | os.PathLike) -> PartitionConfig:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ConfigError(f"{os.fspath(path)}: cannot read the partition config ({e.strerror})") from e
        return cls.from_text(data, source=os.fspath(path))

    def __len__(self) -> int:
        return len(self.specs)

    def __repr__(self) -> str:
        return f"PartitionConfig(source={self.source!r}, specs={len(self.specs)})"

    def match_specs(self, ops: Iterable) -> list[SpecMatch]:
        """For each spec, in config order, the keys of every op it matches."""
        ops = list(ops)
        return [SpecMatch(spec, frozenset(op_key(op) for op in ops if spec.matches(op))) for spec in self.specs]

    def match(self, ops: Iterable, warn: bool = True) -> set:
        """The keys of the ops any spec matches; with `warn`, a warning for each spec that matched none."""
        ops = list(ops)
        matched: set = set()
        for result in self.match_specs(ops):
            matched |= result.op_keys
            if warn and not result.op_keys:
                warnings.warn(self.explain_no_match(result.spec, ops), PartitionConfigWarning, stacklevel=2)
        return matched

    def explain_no_match(self, spec: PartitionSpec, ops: list) -> str:
        """Why `spec` matched no op, with the nearest op type or var name when one is close."""
        where = f"{self.source}:{spec.line}: '{spec.text}' matches no op"
        op_types = sorted({op.type for op in ops})
        same_type = [op for op in ops if op.type == spec.op_type]
        if not same_type:
            return where + f": no op has type '{spec.op_type}'" + _suggest(spec.op_type, op_types, "op type")
        seen_inputs = {n for op in same_type for n in op_input_names(op)}
        seen_outputs = {n for op in same_type for n in op_output_names(op)}
        for kind, listed, seen in (("input", spec.inputs, seen_inputs), ("output", spec.outputs, seen_outputs)):
            for name in listed:
                if name in seen:
                    continue
                hint = _suggest(name, sorted(seen), "var name")
                if not hint:
                    all_names = {n for op in ops for n in op_input_names(op) + op_output_names(op)}
                    hint = _suggest(name, sorted(all_names), "var name")
                other = "output" if kind == "input" else "input"
                if name in (seen_outputs if kind == "input" else seen_inputs):
                    hint = f"; '{name}' is an {other} of a {spec.op_type} op, not an {kind}" + hint
                return where + f": no {spec.op_type} op has {kind} '{name}'" + hint
        return where + (f": each name belongs to some {spec.op_type} op, but no single one has all of "
                        f"inputs {list(spec.inputs)} and outputs {list(spec.outputs)}")


def _suggest(word: str, candidates: list[str], what: str) -> str:
    import difflib  # only for a word no op matches

    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean {what} '{close[0]}'?" if close else ""


def resolve_partition_config(buffer: str | bytes | None = None, path: str | os.PathLike | None = None,
                             environ: Mapping[str, str] = os.environ) -> PartitionConfig | None:
    """The partition config from the first source that provides one, or None (facts §4.5).

    Order: the API buffer, the API path, env SUBGRAPH_PARTITION_CONFIG_FILE, env
    SUBGRAPH_PARTITION_CONFIG_BUFFER. A path that does not exist is warned about and skipped, as in
    Paddle Lite, so a later source can still apply.
    """
    if buffer:
        return PartitionConfig.from_text(buffer, source="<api buffer>")
    if path:
        if os.path.isfile(path):
            return PartitionConfig.from_path(path)
        warnings.warn(f"partition config file {os.fspath(path)} (set_nnadapter_subgraph_partition_config_path) "
                      f"does not exist; it is ignored", PartitionConfigWarning, stacklevel=2)
    env_path = environ.get(ENV_CONFIG_FILE, "")
    if env_path:
        if os.path.isfile(env_path):
            return PartitionConfig.from_path(env_path)
        warnings.warn(f"partition config file {env_path} (env {ENV_CONFIG_FILE}) does not exist; it is ignored",
                      PartitionConfigWarning, stacklevel=2)
    env_buffer = environ.get(ENV_CONFIG_BUFFER, "")
    if env_buffer:
        return PartitionConfig.from_text(env_buffer, source=f"<env {ENV_CONFIG_BUFFER}>")
    return None
