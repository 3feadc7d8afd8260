"""`nnadapter-bridge ops [--json] [--pir]`: the Paddle op types with a converter (and the NNAdapter operations
each may emit), and per installed device the NNAdapter operations its driver implements; with `--pir`, every
PIR op name the `.json` reader translates, the legacy op it becomes and what runs that op. A device whose SDK
is missing is listed as `unavailable: install nnadapter-bridge[x]` (JSON: an "unavailable" object, present only
then), never a traceback.

Entry points: `register(subparsers)` (cli.main), `run(args)`, `collect`, `collect_pir`. Imports the converters, the
host kernels, the loader's PIR reader and the runtime only inside the functions that list them.
"""
from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ops", help="list converters (Paddle op -> NNAdapter operations) and each device's operations",
        description="List every Paddle op type that has a converter, with the NNAdapter operations it may "
                    "emit, and for every device that loads, the NNAdapter operations it implements.")
    parser.add_argument("--json", action="store_true",
                        help='print {"converters": {op: [operations]}, "devices": {device: [operations]}}')
    parser.add_argument("--device", action="append", default=None, metavar="NAME",
                        help="only these devices (repeatable; an unknown name or a driver that fails to load "
                             "is an error; default: every device that loads)")
    parser.add_argument("--pir", action="store_true",
                        help="list instead every PIR op (pd_op.*, builtin.*, cf.*) a Paddle 3 .json model may hold: "
                             "the legacy op it becomes and what runs it (a converter, a host kernel, the reader "
                             "itself, or nothing yet, in which case a model holding it loads but cannot run)")
    parser.set_defaults(func=run)


def check_device_names(manager, device_names) -> None:
    """CliError naming the available devices when a requested device is unknown, its driver fails to load or
    its SDK is missing."""
    from nnadapter_bridge.commands.options import CliError
    from nnadapter_bridge.errors import DeviceNotFoundError

    for name in device_names or []:
        try:
            manager.driver(name)
        except DeviceNotFoundError as exc:
            hint = manager.unavailable_reason(name)
            reason = f"unavailable: {hint}" if hint else str(exc).rsplit(" [", 1)[0]  # without the result code
            raise CliError(f"--device {name}: {reason}; `nnadapter-bridge devices` lists the installed "
                           "drivers") from exc
        hint = manager.unavailable_reason(name)
        if hint:
            raise CliError(f"--device {name}: unavailable: {hint}")


def _operation_names(driver) -> list:
    declared = getattr(driver, "operation_types", None)
    return [op.name for op in sorted(declared())] if callable(declared) else []


def collect(device_names=None) -> dict:
    import converters
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    manager = DeviceManager.instance()
    check_device_names(manager, device_names)
    result = {
        "converters": {
            op_type: [e.name for e in spec.emits] for op_type, spec in sorted(converters.CONVERTERS.items())
        },
        "devices": {},
        "unavailable": {},  # device -> what to install (its SDK is missing)
    }
    for info in manager.list_devices():
        if device_names and info.name not in device_names:
            continue
        if info.unavailable:
            result["unavailable"][info.name] = info.unavailable
            continue
        if not info.loaded:
            continue
        try:
            result["devices"][info.name] = _operation_names(manager.driver(info.name))
        except ImportError as exc:  # a driver importing its SDK only now, and without the advice: still no traceback
            result["unavailable"][info.name] = f"{type(exc).__name__}: {exc}"
    if not result["unavailable"]:
        del result["unavailable"]  # present only when some device's SDK is missing
    return result


# What runs a translated PIR op.
PIR_CONVERTER, PIR_HOST, PIR_READER, PIR_NOTHING = "converter", "host kernel", "reader", "nothing"


def collect_pir() -> dict:
    """{pir op name: {"legacy": legacy op type or None, "runs": PIR_CONVERTER | PIR_HOST | PIR_READER |
    PIR_NOTHING}}: the reader's vocabulary, and where each op ends up."""
    import converters
    from nnadapter_bridge.host.kernels import HOST_KERNELS
    from nnadapter_bridge.loader import pir

    result = {}
    for name, legacy in sorted(pir.known_ops().items()):
        if legacy in ("feed", "fetch") or (legacy is None and name in pir.SPECIAL_LEGACY):
            runs = PIR_READER  # the predictor's inputs/outputs, or structure (vars, list slots)
        elif legacy in converters.CONVERTERS or name in converters.CONVERTERS:
            runs = PIR_CONVERTER
        elif legacy in HOST_KERNELS:
            runs = PIR_HOST
        else:
            runs = PIR_NOTHING
        result[name] = {"legacy": legacy, "runs": runs}
    return result


def _run_pir(args) -> int:
    data = collect_pir()
    if args.json:
        from nnadapter_bridge.commands.output import print_json

        print_json({"pir": data})
        return 0
    counts = {kind: sum(1 for v in data.values() if v["runs"] == kind)
              for kind in (PIR_CONVERTER, PIR_HOST, PIR_READER, PIR_NOTHING)}
    print(f"{len(data)} PIR ops known: {counts[PIR_CONVERTER]} reach a converter, {counts[PIR_HOST]} a host "
          f"kernel only, {counts[PIR_READER]} are structure the reader resolves, {counts[PIR_NOTHING]} load but "
          "nothing runs them yet")
    width = max(len(k) for k in data)
    for name, entry in data.items():
        legacy = entry["legacy"] or "-"
        print(f"  {name.ljust(width)}  {legacy.ljust(36)}  {entry['runs']}")
    return 0


def run(args) -> int:
    if args.pir:
        return _run_pir(args)
    data = collect(args.device)
    if args.json:
        from nnadapter_bridge.commands.output import print_json

        print_json(data)
        return 0
    conv = data["converters"]
    width = max((len(k) for k in conv), default=10)
    print(f"{len(conv)} Paddle op types have a converter:")
    for op_type, emits in conv.items():
        print(f"  {op_type.ljust(width)}  -> {', '.join(emits)}")
    print()
    for device, why in data.get("unavailable", {}).items():
        print(f"{device}: unavailable: {why}")
    for device, ops in data["devices"].items():
        print(f"{device}: {len(ops)} NNAdapter operations")
        line = "   "
        for name in ops:
            if len(line) + len(name) + 1 > 100:
                print(line)
                line = "   "
            line += " " + name
        if line.strip():
            print(line)
    return 0
