"""Converting and validating many models on many devices: `nnadapter-bridge batch MANIFEST` (docs/batch.md).

    manifest  (manifest.py)  the models x devices to do, checked entry by entry
    task      (task.py)      one entry: convert + compile into the cache, run, compare with the reference
    engines   (engines.py)   where tasks run: this process, a local process pool, or Ray
    runner    (runner.py)    what still needs doing (resume), dispatch, results as they finish, the report
    report    (report.py)    the summary table and the Markdown page

    from nnadapter_bridge.batch import run_batch, LocalEngine, RayEngine
    report = run_batch("zoo.yaml", "out/", engine=LocalEngine(jobs=2))

Imports the commands, validation, the predictor and below; never the CLI (`cli/cmd_batch.py` is its front end) or
conformance.
"""
from __future__ import annotations

from nnadapter_bridge.batch.engines import BatchError, InlineEngine, LocalEngine, RayEngine, parse_resources  # noqa: F401
from nnadapter_bridge.batch.manifest import Entry, InvalidEntry, ManifestError, load_manifest  # noqa: F401
from nnadapter_bridge.batch.runner import run_batch  # noqa: F401
