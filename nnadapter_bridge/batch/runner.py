"""The batch coordinator: which entries still need doing, handing them to an engine, recording each result
as it arrives, and the report.

Output directory layout (docs/batch.md):

    <out>/entries/<entry id>.json   one result per entry, written atomically when the entry finishes
    <out>/partitions/<entry id>.dot (.svg with graphviz)   the entry's partition picture
    <out>/references/<key>.npz      Paddle Inference's outputs, shared by the entries of one model and inputs
    <out>/batch.log                 one JSON line per event: start, done, skip, lost, invalid
    <out>/report.json, report.md    the whole batch (rewritten at the end of every run)
    <out>/cache/                    the model cache (<token>.nnc), unless --cache-dir says otherwise

An entry is done, and skipped by a rerun, when its result file exists for the same entry key (the entry's
fields, the content digests of its model, params, partition config and reference files, and the versions the
cache token depends on: nnadapter-bridge, its code digest, the drivers' versions and `<DEVICE>_*`
environment variables) and every `.nnc` it recorded is present in the cache dir and passes its checks
(container, CRC, identity: the recorded token and subgraph fingerprint). So a batch killed at any point
resumes where it stopped; no finished entry is done twice.

Entry point: `run_batch`. Imports the manifest, the task, the engines and the report; the loader's model files, the
runtime, the cache key's versions and the `.nnc` format for the resume checks; nothing of the CLI.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable

from nnadapter_bridge.batch.manifest import Entry, InvalidEntry, Manifest, load_manifest
from nnadapter_bridge.batch.task import RESULT_VERSION

_DIGESTS: dict = {}


def _file_digest(path: str) -> str:
    info = os.stat(path)
    key = (path, info.st_size, info.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _path_digest(path: str | None) -> str:
    """sha256 of a file, or of every regular file of a directory (names and contents); '' for None."""
    if not path:
        return ""
    if os.path.isdir(path):
        digest = hashlib.sha256()
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if os.path.isfile(full):
                digest.update(name.encode() + b"\0" + _file_digest(full).encode())
        return digest.hexdigest()
    return _file_digest(path)


def model_digest(entry: Entry) -> str:
    from nnadapter_bridge.loader.model_files import resolve

    source = resolve(entry.model, entry.params)
    return hashlib.sha256(f"{_path_digest(source.model_path)}|{_path_digest(source.params_path)}".encode()).hexdigest()


def versions_of(devices) -> str:
    """cache_key.versions for these devices, without opening them (what their cache tokens depend on)."""
    from nnadapter_bridge.nnadapter.runtime import DeviceManager
    from nnadapter_bridge.subgraph import cache_key

    manager = DeviceManager.instance()
    fake = []
    for name in devices:
        try:
            driver = manager.driver(name)
            version = int(driver.version)
        except Exception:  # noqa: BLE001 - a driver that does not load: the task will say so
            driver, version = None, -1
        fake.append(types.SimpleNamespace(name=name, version=version, driver=driver))
    return cache_key.versions(types.SimpleNamespace(devices=fake))


SPEC_FIELDS = ("model", "params", "devices", "context_properties", "input_shapes", "dynamic_shapes",
               "partition_config", "min_subgraph_size", "seed", "reference_inputs", "reference_outputs", "compare")


def entry_key(entry: Entry) -> str:
    """The entry's identity for resuming (module docstring)."""
    spec = entry.fields(SPEC_FIELDS)
    files = {"model": entry.model_digest, "partition_config": _path_digest(entry.partition_config)}
    for field in ("reference_inputs", "reference_outputs"):
        files[field] = {name: _path_digest(path) for name, path in getattr(entry, field).items()}
    text = json.dumps({"spec": spec, "files": files, "versions": versions_of(entry.devices),
                       "result_version": RESULT_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _write_json_atomically(path: str, data) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_text_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class BatchLog:
    """<out>/batch.log: one JSON object per line, appended (a killed batch leaves whole lines behind).

    An entry's record is its result file, renamed into place in one step; its "done" line follows. A kill
    between the two leaves a result without its line, so a run first writes the missing "done" lines (marked
    `recovered`) for the results it finds: every finished entry has exactly one "done" line, whenever the
    previous run was killed."""

    def __init__(self, path: str):
        self.path = path
        self.attempts: dict = {}
        self.done: set = set()
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue  # a torn last line of a killed run
                    key = (event.get("entry"), event.get("key"))
                    if event.get("event") == "start":
                        self.attempts[key] = self.attempts.get(key, 0) + 1
                    elif event.get("event") == "done":
                        self.done.add(key)

    def write(self, event: str, **fields) -> None:
        record = {"event": event, "time": round(time.time(), 3), "pid": os.getpid(), **fields}
        key = (fields.get("entry"), fields.get("key"))
        if event == "start":
            self.attempts[key] = self.attempts.get(key, 0) + 1
        elif event == "done":
            self.done.add(key)
        line = json.dumps(record, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def is_done(entry: Entry, key: str, result_path: str, cache_dir: str, retry_failed: bool = False) -> dict | None:
    """The recorded result when the entry is done (module docstring), else None."""
    from nnadapter_bridge.nnadapter.nnc import CacheIdentity, read_nnc_file

    try:
        with open(result_path) as f:
            result = json.load(f)
    except (OSError, ValueError):
        return None
    if result.get("key") != key or result.get("result_version") != RESULT_VERSION:
        return None
    if retry_failed and result.get("status") != "pass":
        return None
    for program in result.get("programs") or []:
        if not program.get("file"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            record = read_nnc_file(os.path.join(cache_dir, program["file"]),
                                   expect=CacheIdentity(program["token"], program.get("fingerprint", "")))
        if record is None:
            return None
    return result


class Progress:
    """A terminal's progress bar on stderr: `batch: 7/18 done (6 pass, 1 fail; 3 reused) last: ...`
    (nnadapter_bridge.subgraph.progress: rich on a tty, nothing otherwise)."""

    def __init__(self, total: int, enabled: bool | None = None, stream=None):
        from nnadapter_bridge.subgraph.progress import TerminalProgress

        self.total = total
        self.bar = TerminalProgress(total, stream or sys.stderr, enabled=enabled)
        self.enabled = self.bar.enabled

    def show(self, counts: dict, last: str = "") -> None:
        if not self.enabled:
            return
        done = sum(counts.values())
        parts = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        self.bar.show(done, f"batch: {done}/{self.total} done" + (f" ({parts})" if parts else "")
                      + (f"; last: {last}" if last else ""))

    def done(self) -> None:
        self.bar.done()


def _render_svg(dot_path: str) -> str | None:
    exe = shutil.which("dot")
    if exe is None:
        return None
    svg = dot_path[: -len(".dot")] + ".svg"
    completed = subprocess.run([exe, "-Tsvg", "-o", svg, dot_path], capture_output=True, check=False)
    return svg if completed.returncode == 0 else None


def run_batch(manifest_path: str, out_dir: str, *, engine=None, cache_dir: str | None = None,
              collect_programs: bool = False, retry_failed: bool = False, progress: bool | None = None,
              on_result: Callable[[dict], None] | None = None) -> dict:
    """Run the manifest (module docstring); returns the report (also written to <out>/report.json)."""
    from nnadapter_bridge.batch.engines import LocalEngine

    engine = engine or LocalEngine(os.cpu_count() or 1)
    started = time.time()
    wall = time.perf_counter()
    manifest: Manifest = load_manifest(manifest_path)
    out_dir = os.path.abspath(out_dir)
    cache_dir = os.path.abspath(cache_dir or os.path.join(out_dir, "cache"))
    entries_dir = os.path.join(out_dir, "entries")
    partitions_dir = os.path.join(out_dir, "partitions")
    references_dir = os.path.join(out_dir, "references")
    for d in (out_dir, cache_dir, entries_dir, partitions_dir, references_dir):
        os.makedirs(d, exist_ok=True)
    lock = _lock_out_dir(out_dir)
    try:
        for d in (out_dir, entries_dir, partitions_dir, references_dir):  # a killed batch's half-written files
            for name in os.listdir(d):
                if name.startswith(".tmp-"):
                    try:
                        os.unlink(os.path.join(d, name))
                    except OSError:
                        pass
        return _run_locked(manifest, out_dir, cache_dir, entries_dir, partitions_dir, references_dir, engine,
                           collect_programs, retry_failed, progress, on_result, started, wall)
    finally:
        lock.close()


def _lock_out_dir(out_dir: str):
    """An exclusive lock on <out>/.batch.lock for this batch's lifetime (released when the process ends, even
    killed): two batches writing one output dir would record each other's entries."""
    from nnadapter_bridge.batch.engines import BatchError

    handle = open(os.path.join(out_dir, ".batch.lock"), "w")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return handle
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise BatchError(f"--out {out_dir}: another batch is running with this output dir") from None
    return handle


def _run_locked(manifest, out_dir, cache_dir, entries_dir, partitions_dir, references_dir, engine,
                collect_programs, retry_failed, progress, on_result, started, wall) -> dict:
    from nnadapter_bridge.batch.report import render_markdown

    log = BatchLog(os.path.join(out_dir, "batch.log"))

    results: dict = {}
    counts = {"pass": 0, "fail": 0, "error": 0, "invalid": 0}
    reused = 0
    tasks = []
    for entry in manifest.entries:
        if isinstance(entry, InvalidEntry):
            results[entry.id] = {"id": entry.id, "status": "invalid", "where": entry.where, "errors": entry.errors,
                                 "error": entry.message}
            counts["invalid"] += 1
            log.write("invalid", entry=entry.id, errors=entry.errors)
            continue
        try:
            entry.model_digest = model_digest(entry)
            key = entry_key(entry)
        except Exception as exc:  # noqa: BLE001 - an unreadable file: this entry's error only
            results[entry.id] = {"id": entry.id, "status": "error", "model": entry.model,
                                 "devices": entry.devices, "error": f"{type(exc).__name__}: {exc}"}
            counts["error"] += 1
            continue
        result_path = os.path.join(entries_dir, entry.id + ".json")
        previous = is_done(entry, key, result_path, cache_dir, retry_failed)
        if previous is not None:
            previous.setdefault("run", {})["reused"] = True
            results[entry.id] = previous
            counts[previous["status"] if previous["status"] in counts else "error"] += 1
            reused += 1
            if (entry.id, key) not in log.done:  # the previous run was killed between result and log line
                log.write("done", entry=entry.id, key=key, status=previous["status"], recovered=True)
            log.write("skip", entry=entry.id, key=key)
            continue
        tasks.append({"entry": entry, "key": key, "cache_dir": cache_dir, "collect_programs": collect_programs,
                      "reference_dir": references_dir})

    display = Progress(len(manifest.entries), progress)
    display.show({**counts, "reused": reused})
    lost = 0

    def started_tasks():
        for task in tasks:
            log.write("start", entry=task["entry"].id, key=task["key"], engine=engine.name)
            yield task

    try:
        for task, payload in engine.run(list(started_tasks())):
            entry, result = task["entry"], payload["result"]
            result.setdefault("run", {})
            result["run"].update(engine=engine.name, reused=False,
                                 attempt=log.attempts.get((entry.id, task["key"]), 1))
            result["entry"] = entry.fields(SPEC_FIELDS + ("model_name", "resources", "where"))
            if payload.get("programs"):
                from nnadapter_bridge.nnadapter.nnc import write_file_atomically

                for name, data in payload["programs"].items():
                    if os.path.basename(name) == name:
                        write_file_atomically(os.path.join(cache_dir, name), data)
            if payload.get("dot"):
                dot_path = os.path.join(partitions_dir, entry.id + ".dot")
                _write_text_atomically(dot_path, payload["dot"] + "\n")
                _render_svg(dot_path)
            if result.get("lost"):
                lost += 1
                log.write("lost", entry=entry.id, key=task["key"], error=result.get("error"))
            else:
                _write_json_atomically(os.path.join(entries_dir, entry.id + ".json"), result)
                log.write("done", entry=entry.id, key=task["key"], status=result["status"])
            results[entry.id] = result
            status = result["status"] if result["status"] in counts else "error"
            counts[status] += 1
            display.show({**counts, "reused": reused}, entry.id)
            if on_result is not None:
                on_result(result)
    finally:
        display.done()

    ordered = [results[e.id] for e in manifest.entries if e.id in results]
    report = {
        "manifest": manifest.path, "out_dir": out_dir, "cache_dir": cache_dir,
        "engine": engine.describe(), "collect_programs": collect_programs,
        "started": started, "wall_s": round(time.perf_counter() - wall, 3),
        "counts": {**counts, "reused": reused, "ran": len(tasks), "lost": lost, "total": len(manifest.entries)},
        "passed": counts["fail"] == counts["error"] == counts["invalid"] == 0,
        "entries": ordered,
    }
    _write_json_atomically(os.path.join(out_dir, "report.json"), report)
    _write_text_atomically(os.path.join(out_dir, "report.md"), render_markdown(report))
    return report
