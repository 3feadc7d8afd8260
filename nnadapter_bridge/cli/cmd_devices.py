"""`nnadapter-bridge devices [--json]`: every NNAdapter device this installation knows, with vendor,
type and version, and whether its driver loads (and why not): `ok`, `unavailable: install
nnadapter-bridge[x]` (the driver's SDK is missing) or `fails to load: <why>`. A driver whose SDK is missing is
not usable, so it is never shown as loaded: "loaded" is false in the JSON and its version is "-" in the table.

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
                             'unavailable}, ...]} instead of a table')
    parser.set_defaults(func=run)


def run(args) -> int:
    from nnadapter_bridge.commands.output import format_table, print_json
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    # A driver module that imports but whose SDK is missing cannot run anything: not "loaded" (issue 26).
    infos = [dataclasses.replace(info, loaded=False) if info.unavailable else info
             for info in DeviceManager.instance().list_devices()]
    if args.json:
        print_json({"devices": [dataclasses.asdict(info) for info in infos]})
        return 0
    rows = []
    for info in infos:
        version = "-" if info.version is None or not info.loaded else str(info.version)
        rows.append((info.name, info.vendor or "-", info.type or "-", version, info.status))
    print(format_table(("name", "vendor", "type", "version", "status"), rows))
    return 0
