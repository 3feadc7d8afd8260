"""`nnadapter-bridge devices [--json]`: every NNAdapter device this installation knows, with vendor,
type and version, and whether its driver loads (and why not): `ok`, `unavailable: install
nnadapter-bridge[x]` (the driver's SDK is missing) or `fails to load: <why>`."""
from __future__ import annotations

import dataclasses
import json


def register(subparsers) -> None:
    parser = subparsers.add_parser("devices", help="list the NNAdapter devices and whether their drivers load",
                                   description="List every NNAdapter device found through the "
                                               "'nnadapter_bridge.devices' entry points (plus builtin_device).")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.set_defaults(func=run)


def run(args) -> int:
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    infos = DeviceManager.instance().list_devices()
    if args.json:
        print(json.dumps([dataclasses.asdict(info) for info in infos], indent=2))
        return 0
    header = ("name", "vendor", "type", "version", "status")
    rows = []
    for info in infos:
        status = info.status
        rows.append((info.name, info.vendor or "-", info.type or "-",
                     "-" if info.version is None else str(info.version), status))
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header) - 1)]
    for row in [header] + rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    return 0
