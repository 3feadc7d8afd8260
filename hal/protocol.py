"""The HAL driver protocol as drivers import it. The definitions live in the standard
(`nnadapter_bridge.nnadapter.driver_protocol`), which the runtime shares without importing the HAL."""
from nnadapter_bridge.nnadapter.driver_protocol import (  # noqa: F401
    ENTRY_POINT_GROUP,
    REQUIRED_ATTRIBUTES,
    REQUIRED_METHODS,
    AccessFunction,
    Argument,
    Cache,
    ContextCallback,
    Driver,
    check_driver,
)

__all__ = ["ENTRY_POINT_GROUP", "REQUIRED_ATTRIBUTES", "REQUIRED_METHODS", "AccessFunction", "Argument", "Cache",
           "ContextCallback", "Driver", "check_driver"]
