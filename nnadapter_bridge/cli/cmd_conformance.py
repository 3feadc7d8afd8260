"""`nnadapter-bridge conformance --device D`: the conformance kit on one installed driver (docs/conformance.md).

Every NNAdapter operation sample, seeded variants of them (new values, other precisions, random shapes and
attribute values), random graphs of 2-6 operations and a stress phase are run on the driver and compared with
the standard's reference (builtin_device's interpreter) at the NNAPI CTS tolerance of each type. It prints
one row per operation x precision (pass / fail / not claimed, worst error), the graph and stress results,
and the verdict; `--json` prints the whole report, `--output F` also writes it to F. Exit status 1 when
anything the driver claims fails.

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the command plumbing and validation; the
kit, the predictor, the converters and the drivers only inside `run`, so building the parser loads none of them.
"""
from __future__ import annotations

import json
import re

from nnadapter_bridge.commands import options, output
from nnadapter_bridge.commands.options import CliError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "conformance", help="check a driver against the NNAdapter reference on every operation it claims",
        description="Run the conformance kit on one NNAdapter driver: for every operation sample and seeded "
                    "variants (values, precisions, shapes and attributes) that its validate_program claims, the "
                    "program must compile, run, match the reference (builtin_device's interpreter) at the NNAPI "
                    "CTS tolerance of its type and round-trip through a .nnc; then random graphs of 2-6 "
                    "operations and a stress phase (many programs, many executions, threads). Exit status 1 "
                    "when a claim fails.")
    parser.add_argument("--device", metavar="D", required=True,
                        help="the driver to check (an entry point of group nnadapter_bridge.devices; "
                             "`nnadapter-bridge devices` lists them)")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--quick", dest="level", action="store_const", const="quick",
                       help="fewer variants, graphs and stress iterations (a few seconds)")
    level.add_argument("--full", dest="level", action="store_const", const="full",
                       help="many more variants, graphs and stress iterations")
    parser.set_defaults(level="default")
    parser.add_argument("--seed", metavar="N", type=int, default=0, help="seed of every random case (default: 0)")
    parser.add_argument("--context-properties", metavar="S", default="",
                        help="the driver's context properties, 'KEY=value;KEY=value'")
    parser.add_argument("--operation", metavar="OP", action="append", dest="operations",
                        help="check only this NNAdapter operation (e.g. CONV_2D; repeatable); skips the graphs")
    parser.add_argument("--allow-no-cache", action="store_true",
                        help="a driver that fills no program bytes (cannot be cached in a .nnc) is not a failure")
    parser.add_argument("--all-rows", action="store_true",
                        help="also list the operation x precision rows the driver does not claim")
    parser.add_argument("--output", metavar="F", help="also write the JSON report to F")
    options.add_json_argument(parser)
    parser.set_defaults(func=run)


def check_operation_names(names: list) -> None:
    """CliError for an --operation that is no NNAdapter operation, with the nearest names (CONV2D -> CONV_2D)."""
    import difflib

    from nnadapter_bridge.nnadapter.codes import OperationType

    known = sorted(t.name for t in OperationType)
    squashed = {name.replace("_", ""): name for name in known}
    for name in names:
        wanted = name.strip().upper()
        if wanted in known:
            continue
        near = [squashed[wanted.replace("_", "")]] if wanted.replace("_", "") in squashed else \
            difflib.get_close_matches(wanted, known, n=3, cutoff=0.6)
        raise CliError(f"--operation {name}: no NNAdapter operation of that name"
                       + (f"; did you mean {' or '.join(near)}?" if near else ""),
                       hint="`nnadapter-bridge ops` lists each device's operations")


def run(args) -> int:
    from nnadapter_bridge.conformance.kit import run_conformance
    from nnadapter_bridge.errors import DeviceNotFoundError
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    if args.seed < 0:
        raise CliError(f"--seed {args.seed}: must be 0 or more")
    check_operation_names(args.operations or [])
    manager = DeviceManager.instance()
    if not manager.is_declared(args.device):
        raise CliError(f"--device {args.device}: no such driver; installed: {', '.join(manager.names())}")
    from nnadapter_bridge.subgraph.progress import TerminalProgress

    bar = TerminalProgress(1)
    done = {"completed": 0}

    def progress(text: str) -> None:  # "operations: case 12/96 (CONV_2D)", then "graphs", "stress"
        counted = re.search(r"(\d+)/(\d+)", text)
        if counted:
            done["completed"], total = int(counted.group(1)), int(counted.group(2))
            bar.show(done["completed"], f"conformance {args.device}: {text}", total=total)
        else:
            bar.show(done["completed"], f"conformance {args.device}: {text}")

    try:
        with output.one_line_warnings("conformance"):
            report = run_conformance(args.device, level=args.level, seed=args.seed,
                                     properties=args.context_properties, operations=args.operations,
                                     allow_no_cache=args.allow_no_cache, progress=progress)
    except DeviceNotFoundError as exc:
        raise CliError(f"--device {args.device}: {str(exc).rsplit(' [', 1)[0]}") from exc
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    finally:
        bar.done()
    data = report.to_json()
    if args.output:
        try:
            with open(args.output, "w") as f:
                json.dump(data, f, indent=2)
        except OSError as exc:
            raise CliError(f"--output {args.output}: {exc.strerror or exc}") from exc
    if args.json:
        output.print_json(data)
    else:
        output.print_text(report.table(only_claimed=not args.all_rows))
    return 0 if report.passed else 1
