"""Converters: one per Paddle op type, each emitting NNAdapter operations into a Model.

Importing this package registers every converter of the modules in `CONVERTER_MODULES` in
`registry.CONVERTERS`. The modules are named by the NNAdapter operation family they mostly emit (the
families of `nnadapter_bridge.nnadapter.operations`). They share: `op_view` (reading an op's slots and
attrs), `attrs` (tensor-or-attr forms, known dims), `layout` (channel-first/last, paddings), `emit`
(operation forms, broadcasting, the activation table), `context` (var name -> operand, constants,
`convert_subgraph`) and `quantized_products` (the quantized forms of conv and matmul). A converter is
`convert_<op>(ctx: ConversionContext, v: OpView) -> None` (see `registry`).

Entry points (re-exported here, the package's API): `CONVERTERS` / `get_converter`, `converter`,
`ConversionContext`. Imports the ground only (the standard, the loader's program model, errors); never hal,
partition, the host or the subgraph machinery (the layers contract).
"""
from __future__ import annotations

import importlib

from converters.context import ConversionContext  # noqa: F401
from converters.registry import CONVERTERS, ConverterSpec, converter, get_converter  # noqa: F401

# The converter modules, in the order of the standard's families (nnadapter.operations.FAMILY_MODULES), with
# `tensor_index` (gather-like indexing and slice assignment, compositions of GATHER and WHERE) beside `tensor`.
# A module missing from this list registers nothing, which test_converter_coverage catches.
CONVERTER_MODULES = (
    "elementwise", "activation", "conv", "pool", "normalization", "matmul", "resize", "reduce", "shape",
    "tensor", "tensor_index", "generate", "quantization", "sampling", "detection",
)


def _load_all() -> None:
    for name in CONVERTER_MODULES:
        importlib.import_module(f"{__name__}.{name}")


_load_all()
