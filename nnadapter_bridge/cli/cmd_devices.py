"""`nnadapter-bridge devices [--json]`: every NNAdapter device this installation knows, with vendor,
type and version, and whether its driver loads (and why not): `ok`, `unavailable: install
nnadapter-bridge[x]` (the driver's SDK is missing) or `fails to load: <why>`. A driver whose SDK is missing is
not usable, so it is never shown as loaded: "loaded" is false in the JSON and its version is "-" in the table.
With the figures of `nnadapter-bridge calibrate` (calibration.json; --cache-dir names the model cache they are kept
beside): each device's float32, relaxed float32 and int8 execution time relative to builtin_device; "-" when not
calibrated.

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Imports the runtime's device list inside `run` only.
"""
from __future__ import annotations

import dataclasses


def register(subparsers) -> None:
    parser = subparsers.add_parser("devices", help="list the NNAdapter devices and whether their drivers load",
                                   description="List every NNAdapter device found through the "
                                               "'nnadapter_bridge.devices' entry points (plus builtin_device).")
    parser.add_argument("--json", action="store_true",
                        help='print {"devices": [{name, vendor, type, version, loaded, error, source, '
                             'unavailable, calibration}, ...]} instead of a table')
    parser.add_argument("--cache-dir", metavar="DIR", default="",
                        help="the model cache dir whose calibration figures are shown (default: the one "
                             "`nnadapter-bridge calibrate` uses without --cache-dir)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from nnadapter_bridge.commands.output import format_table, print_json
    from nnadapter_bridge.nnadapter.runtime import DeviceManager
    from nnadapter_bridge.subgraph.calibration import stored_figures

    # A driver module that imports but whose SDK is missing cannot run anything: not "loaded" (issue 26).
    infos = [dataclasses.replace(info, loaded=False) if info.unavailable else info
             for info in DeviceManager.instance().list_devices()]
    figures = stored_figures([info.name for info in infos if info.loaded], "", args.cache_dir or None)
    if args.json:
        print_json({"devices": [dataclasses.asdict(info) | {
            "calibration": figures[info.name].as_dict() if figures.get(info.name) is not None else None}
            for info in infos]})
        return 0
    rows = []
    for info in infos:
        version = "-" if info.version is None or not info.loaded else str(info.version)
        rows.append((info.name, info.vendor or "-", info.type or "-", version, info.status))
    print(format_table(("name", "vendor", "type", "version", "status"), rows))
    measured = [(name, found) for name, found in figures.items() if found is not None]
    if measured:  # the figures of `nnadapter-bridge calibrate`, a table of their own (the one above keeps its columns)
        print("\ncalibration: execution time relative to builtin_device (lower is faster; power: unknown)")
        table = format_table(("device", "float32", "relaxed", "int8", "run us"),
                             [(name, *_relative(found), f"{found.call_seconds * 1e6:.0f}") for name, found in measured])
        print("\n".join("  " + line for line in table.splitlines()))
    return 0


def _relative(figures) -> tuple:
    precisions = figures.capabilities.precisions
    return tuple(f"{precisions[p].exec_time:.3g}x" if p in precisions else "-"
                 for p in ("float32", "relaxed_float16", "int8"))
