"""`nnadapter-bridge calibrate [--device D ...] [--cache-dir DIR] [--force] [--json]`: measure the devices' performance
figures on this machine (subgraph.calibration: a fixed reference workload, relative to builtin_device) and keep them
in calibration.json beside the model cache, where the device selection ("fastest", "low_power") reads them. Without
--device: every installed device whose driver loads. Figures already measured for the same device, SDK version,
CPU model and thread count are reused unless --force.

Entry points: `register(subparsers)` (cli.main) and `run(args)`. Thin: the measuring is subgraph.calibration's,
imported inside `run`.
"""
from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser("calibrate", help="measure the devices' speed on this machine (device selection)",
                                   description="Run a fixed reference workload (conv chain, depthwise + pointwise, "
                                               "transformer block, int8 conv) on each device and keep the "
                                               "figures, relative to builtin_device, in calibration.json.")
    parser.add_argument("--device", metavar="D", action="append", dest="devices",
                        help="device to measure (repeatable); default: every installed device whose driver loads")
    parser.add_argument("--cache-dir", metavar="DIR", default="",
                        help="the model cache dir the figures are kept in (default: $XDG_CACHE_HOME or "
                             "~/.cache, under nnadapter-bridge/)")
    parser.add_argument("--context-properties", metavar="S", default="",
                        help="device context properties (a thread-count key keys the figures)")
    parser.add_argument("--force", action="store_true", help="measure again even when figures are kept")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.set_defaults(func=run)


def figure_text(figures, precision: str, family: str | None = None) -> str:
    """'0.172x' (relative execution time), or '-' when not known."""
    table = figures.capabilities.families if family else figures.capabilities.precisions
    info = table.get(family or precision)
    return "-" if info is None else f"{info.exec_time:.3g}x"


def run(args) -> int:
    from nnadapter_bridge.commands.channel import CommandError
    from nnadapter_bridge.commands.output import format_table, print_json
    from nnadapter_bridge.nnadapter.runtime import DeviceManager
    from nnadapter_bridge.subgraph.calibration import calibrate

    manager = DeviceManager.instance()
    names = args.devices or [info.name for info in manager.list_devices() if info.loaded and not info.unavailable]
    for name in names:
        if not manager.has_device(name):
            raise CommandError(f"--device {name}: no such device; `nnadapter-bridge devices` lists them")
    calibration = calibrate(names, args.context_properties, args.cache_dir or None, force=args.force)
    if args.json:
        print_json(calibration.as_dict())
        return 0
    rows = []
    for name in names:
        figures = calibration.figures(name)
        rows.append((name, figure_text(figures, "float32"), figure_text(figures, "float32", "conv"),
                     figure_text(figures, "float32", "depthwise"), figure_text(figures, "float32", "matmul"),
                     figure_text(figures, "relaxed_float16"), figure_text(figures, "int8"),
                     f"{figures.call_seconds * 1e6:.0f}", "unknown",
                     figures.source if name in calibration.devices else "none (taken as the CPU)"))
    print(format_table(("device", "float32", "conv", "depthwise", "matmul", "relaxed", "int8", "run us", "power",
                        "source"), rows))
    measured = (f"measured {', '.join(calibration.measured)} in {calibration.measured_seconds:.1f} s"
                if calibration.measured else "nothing measured: every figure was kept")
    print(f"\nexecution time relative to builtin_device's float32 (lower is faster); relaxed: float32 computed on the "
          f"driver's float16/bf16 path ('-': it has none); {measured}; kept in {calibration.path}")
    return 0
