"""An out-of-tree NNAdapter driver for nnadapter-bridge: the template a vendor starts from (README.md).

`DRIVER` is what the entry point `example_device = "example_driver:DRIVER"` (group
`nnadapter_bridge.devices`, in pyproject.toml) names; nnadapter-bridge finds it by that name.
"""
from example_driver.driver import DRIVER, ExampleDriver  # noqa: F401

__version__ = "0.1.0"
