"""The one-operation model harness; its home is nnadapter_bridge.conformance.harness (the conformance kit
needs it in the installed package). Re-exported here for the tests."""
from nnadapter_bridge.conformance.harness import Const, Quant, build_op, check_inferred, run_op  # noqa: F401
