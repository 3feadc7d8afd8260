"""The differential tester's paddle 2.6.2 side: builds cases into legacy programs with paddle 2.6.2 (run by
tests/differential/programs.py in the Python 3.10 side venv of tests/support/paddlelite_env.py, never imported).

    python side262.py probe REQUEST.json    # which of the request's cases paddle 2.6.2 builds in static mode
    python side262.py export REQUEST.json   # request["batches"]: [{"dir", "ids"}], each one program in its dir

A request names the case set, seed, cases per op and case ids. `probe` appends "<id>\\tstart" and then
"<id>\\tlegacy" or "<id>\\tnone" per case to request["progress"] as it goes, so a case whose build kills the
process is known from the last line. `export` writes each batch's record to <dir>/record.json, or the reason
paddle 2.6.2 refused it to <dir>/error.txt. Imports only numpy, paddle and tests/differential's export module.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from differential.export import cases_of, export, probe


def main(command: str, request_path: str) -> None:
    with open(request_path) as f:
        request = json.load(f)
    by_id = {c.case_id: c for c in cases_of(request["case_set"], request["seed"], request["cases_per_op"])}
    warnings.simplefilter("ignore")
    if command == "probe":
        with open(request["progress"], "a") as progress:
            for case in [by_id[i] for i in request["ids"]]:
                progress.write(f"{case.case_id}\tstart\n")
                progress.flush()
                progress.write(f"{case.case_id}\t{probe(case, ('legacy',)) or 'none'}\n")
                progress.flush()
    elif command == "export":
        for batch in request["batches"]:
            os.makedirs(batch["dir"], exist_ok=True)
            try:
                record = export([by_id[i] for i in batch["ids"]], "legacy", batch["dir"], record_mode="legacy262")
            except Exception as exc:  # noqa: BLE001 - paddle 2.6.2 refuses the batch: the caller splits it
                with open(os.path.join(batch["dir"], "error.txt"), "w") as f:
                    f.write(f"{type(exc).__name__}: {exc}"[-2000:])
                continue
            with open(os.path.join(batch["dir"], "record.json"), "w") as f:
                json.dump(record, f)
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
