"""The batch report for people: the summary table the command prints, and the Markdown page with each
model's entries, programs, host ops and partition pictures (<out>/report.md).

Entry points: `render_summary`, `render_markdown`. Imports the commands' output (tables) only.
"""
from __future__ import annotations

import collections
import os

from nnadapter_bridge.commands.output import format_table, human_bytes


def _bytes(n) -> str:
    return human_bytes(n) if n else "-"


def _num(value, fmt="{:.3g}") -> str:
    return "-" if value is None else fmt.format(value)


NOTE_WIDTH = 90  # the summary table's note column; a longer note is shortened there and given whole below


def entry_note(r: dict) -> str:
    note = r.get("error") or r.get("note") or ""
    if r.get("run", {}).get("reused"):
        note = ("reused; " + note) if note else "reused (done before)"
    return note


def _shortened(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    cut = text[: width - 3].rsplit(" ", 1)[0]
    return cut.rstrip(";,:") + " ..."


def entry_row(r: dict, note_width: int | None = NOTE_WIDTH) -> list:
    programs = r.get("programs") or []
    size = sum(p.get("bytes") or 0 for p in programs)
    subgraphs = "-"
    if "num_subgraphs" in r:
        made = [f"{r[k]} {k}" for k in ("compiled", "restored") if r.get(k)]
        subgraphs = f"{r['num_subgraphs']}" + (f" ({', '.join(made)})" if made else "")
    note = entry_note(r)
    return [r["id"], r["status"].upper(), subgraphs, r.get("num_host_ops", "-"), _bytes(size),
            _num(r.get("timings", {}).get("compile_s"), "{:.2f}"), _num(r.get("max_rel_error")),
            note if note_width is None else _shortened(note, note_width)]


SUMMARY_HEADER = ["entry", "result", "subgraphs", "host ops", ".nnc", "compile s", "max rel err", "note"]


def render_summary(report: dict) -> str:
    c = report["counts"]
    rows = [entry_row(r) for r in report["entries"]]
    engine = report["engine"]
    where = engine["name"] + (f", {engine['jobs']} jobs" if engine.get("jobs") else "")
    if engine["name"] == "ray":
        where += f", address {engine.get('address')}"
    lines = [format_table(SUMMARY_HEADER, rows, right_align={3, 4, 5, 6}), "",
             f"{c['total']} entries: {c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['invalid']} invalid; "
             f"{c['ran']} ran, {c['reused']} reused from earlier runs ({where}, {report['wall_s']:.1f} s)",
             f"report: {os.path.join(report['out_dir'], 'report.json')} and report.md; cache: {report['cache_dir']}"]
    for r in report["entries"]:
        if r["status"] == "invalid":
            lines.append(f"invalid entry {r['id']} ({r.get('where', '')}): {r['error']}")
        elif len(entry_note(r)) > NOTE_WIDTH:  # the whole note, which the table had to shorten
            lines.append(f"{r['id']}: {entry_note(r)}")
    lines.append("PASS: every entry passed" if report["passed"] else "FAIL: some entries did not pass")
    return "\n".join(lines)


def _md_escape(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header, rows) -> list:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: dict) -> str:
    c = report["counts"]
    lines = ["# nnadapter-bridge batch report", "",
             f"Manifest `{report['manifest']}`, engine {report['engine']['name']}, {report['wall_s']:.1f} s. "
             f"{c['total']} entries: {c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['invalid']} invalid "
             f"({c['reused']} reused from earlier runs). Cache: `{report['cache_dir']}`.", ""]
    lines += _md_table(SUMMARY_HEADER, [entry_row(r, note_width=None) for r in report["entries"]])
    by_model = collections.OrderedDict()
    for r in report["entries"]:
        if r["status"] == "invalid":
            continue
        model = (r.get("entry") or {}).get("model") or r.get("model") or "?"
        name = (r.get("entry") or {}).get("model_name") or os.path.basename(model.rstrip("/"))
        by_model.setdefault((name, model), []).append(r)
    invalid = [r for r in report["entries"] if r["status"] == "invalid"]
    if invalid:
        lines += ["", "## Invalid entries", ""]
        lines += [f"- `{r['id']}` ({r.get('where', '')}): {_md_escape(r['error'])}" for r in invalid]
    partitions = os.path.join(report["out_dir"], "partitions")
    for (name, model), entries in by_model.items():
        lines += ["", f"## {name}", "", f"`{model}`"]
        for r in entries:
            lines += ["", f"### {r['id']}: {r['status'].upper()}", ""]
            lines.append(f"Devices {', '.join(r.get('devices', []))}"
                         + (f"; properties `{r['context_properties']}`" if r.get("context_properties") else "")
                         + (f"; reference: {r['reference']}" if r.get("reference") else "")
                         + (f"; max abs error {_num(r.get('max_abs_error'))}, max rel error "
                            f"{_num(r.get('max_rel_error'))}" if r.get("max_abs_error") is not None else "") + ".")
            if r.get("error"):
                lines += ["", f"Error: {_md_escape(r['error'])}"]
            if r.get("programs"):
                lines += [""] + _md_table(["subgraph", "ops", "devices", "token", "program", ".nnc", "size"], [
                    [p["subgraph"], p["ops"], "+".join(p.get("devices", [])), f"`{p['token']}`", p["source"],
                     p["file"] or "-", _bytes(p["bytes"])] for p in r["programs"]])
            if r.get("host_ops"):
                lines += ["", "Host ops:", ""] + _md_table(["op", "type", "why not on a device"], [
                    [h["index"], h["type"], h["reason"]] for h in r["host_ops"]])
            svg = os.path.join(partitions, r["id"] + ".svg")
            dot = os.path.join(partitions, r["id"] + ".dot")
            if os.path.isfile(svg):
                lines += ["", f"![partition of {r['id']}](partitions/{r['id']}.svg)"]
            elif os.path.isfile(dot):
                lines += ["", f"Partition graph: [partitions/{r['id']}.dot](partitions/{r['id']}.dot) "
                              "(render with graphviz: `dot -Tsvg`)"]
    return "\n".join(lines) + "\n"
