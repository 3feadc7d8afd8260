"""The drivers' API: what a driver, in this tree or out of it, imports to implement the HAL protocol (`Driver`,
`Argument`, `Cache`, the callbacks, the run-time faults that name an operation: `operation_fault` and the fault
output names) and to check itself (`check_driver`, REQUIRED_METHODS/ATTRIBUTES, the entry point group). Kept as the
drivers' stable import path on purpose: the definitions live in the standard
(`nnadapter_bridge.nnadapter.driver_protocol`), which the runtime shares without importing the HAL. Imports only
the ground."""
from nnadapter_bridge.nnadapter.driver_protocol import (  # noqa: F401
    ENTRY_POINT_GROUP,
    REQUIRED_ATTRIBUTES,
    REQUIRED_METHODS,
    AccessFunction,
    Argument,
    Cache,
    Capabilities,
    ContextCallback,
    Driver,
    PerformanceInfo,
    check_driver,
    fault_operand,
    fault_output_name,
    operation_fault,
    parse_fault_output_name,
)

__all__ = ["ENTRY_POINT_GROUP", "REQUIRED_ATTRIBUTES", "REQUIRED_METHODS", "AccessFunction", "Argument", "Cache",
           "Capabilities", "ContextCallback", "Driver", "PerformanceInfo", "check_driver",
           "fault_operand", "fault_output_name", "operation_fault", "parse_fault_output_name"]
