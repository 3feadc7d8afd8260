"""One conversion, one error (issue 27): the engine, the predictor's dynamic-shape check, the support decisions and the
host executor all convert through converters.context.convert_subgraph, whose failure is a ConversionError naming the
Paddle op, a converter's own bug (any exception) included; a malformed model (ModelFormatError) stays what it is."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import nnadapter_bridge as nb
from converters.context import convert_subgraph
from converters.registry import CONVERTERS
from nnadapter_bridge.errors import BridgeError, ConversionError, ModelFormatError
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.types import OperandType
from support.predictor_programs import add_relu_scale_model


@pytest.fixture
def graph(tmp_path):
    return load_model(add_relu_scale_model(tmp_path / "m"))


def _broken_relu(monkeypatch, error: Exception):
    def fn(ctx, view):
        raise error

    monkeypatch.setitem(CONVERTERS, "relu", dataclasses.replace(CONVERTERS["relu"], fn=fn))


def _relu(graph):
    return next(op for op in graph.ops() if op.type == "relu")


def test_a_converter_bug_is_a_conversion_error_naming_the_op(graph, monkeypatch):
    _broken_relu(monkeypatch, ValueError("a bug"))
    op = _relu(graph)
    types = {op.inputs["X"][0]: OperandType(precision=Precision.FLOAT32, dims=(2, 4))}
    with pytest.raises(
        ConversionError, match=rf"^{re.escape(op.label())}: converter failed: ValueError: a bug$"
    ) as caught:
        convert_subgraph([op], graph.params, types, op.outputs["Out"], graph)
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_malformed_model_stays_a_model_format_error(graph, monkeypatch):
    _broken_relu(monkeypatch, ModelFormatError("relu: attribute 'x' is a float"))
    op = _relu(graph)
    types = {op.inputs["X"][0]: OperandType(precision=Precision.FLOAT32, dims=(2, 4))}
    with pytest.raises(ModelFormatError):
        convert_subgraph([op], graph.params, types, op.outputs["Out"], graph)


def test_every_caller_sees_the_same_error(monkeypatch, tmp_path):
    """The support decision keeps it as its reason (the op goes to the host), and the host executor, which has no
    relu kernel to fall back to, fails the run with the same words."""
    _broken_relu(monkeypatch, ValueError("a bug"))
    config = nb.Config()
    config.set_model_file(add_relu_scale_model(tmp_path / "m2"))
    config.set_nnadapter_device_names(["builtin_device"])
    with pytest.warns(UserWarning, match="converter failed: ValueError: a bug"):
        predictor = nb.create_predictor(config)
    try:
        assert "converter failed: ValueError: a bug" in predictor.unsupported_reasons()["relu"]
        predictor.get_input(0).from_numpy(np.ones((2, 4), np.float32))
        with pytest.raises(BridgeError, match=r"relu#\d+ .*converter failed: ValueError: a bug"):
            predictor.run()
    finally:
        predictor.close()
