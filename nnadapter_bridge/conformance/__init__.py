"""The conformance kit for NNAdapter HAL drivers (docs/conformance.md).

    from nnadapter_bridge.conformance import run_conformance, assert_conformance
    report = run_conformance("my_device", level="quick")
    print(report.table()); assert report.passed, report.failures()

Also `nnadapter-bridge conformance --device D`. The kit needs only the installed package: its operation
samples (`samples`) and one-operation model harness (`harness`) live here, and the repository's tests
import them from here.

Entry points: `run_conformance`, `assert_conformance` (from `kit`). Imports validation, the command output and
below; never the CLI or batch.
"""
from __future__ import annotations

__all__ = ["run_conformance", "assert_conformance", "ConformanceReport", "LEVELS"]


def __getattr__(name):  # the kit (numpy models, the runtime) is imported on first use, not with the package
    if name in __all__:
        from nnadapter_bridge.conformance import kit

        return getattr(kit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
