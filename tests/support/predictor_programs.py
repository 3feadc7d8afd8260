"""Tiny hand-built Paddle models for the predictor, engine and cache tests (builders only, no tests).

Each builder writes `<dir>/model.pdmodel` + `<dir>/model.pdiparams` with zoo.write_program and returns the
model file path; `reference_*` computes the expected output with plain numpy, independently of the code
under test.
"""
from __future__ import annotations

import os

import numpy as np

from devtools import zoo


def _write(directory, vars_, ops, params, feeds, fetches) -> str:
    os.makedirs(directory, exist_ok=True)
    model = os.path.join(directory, "model.pdmodel")
    zoo.write_program(model, [{"vars": vars_, "ops": ops}], feeds=feeds, fetches=fetches)
    zoo.write_combined_params(os.path.join(directory, "model.pdiparams"), params)
    return model


def add_relu_scale_model(directory, weight=None, feed_shape=(-1, 4), extra_ops=()) -> str:
    """out = 2 * relu(x + w) + 0.5 (then each of `extra_ops`, unary op types, applied in turn)."""
    width = feed_shape[-1]
    w = np.asarray(weight if weight is not None else np.linspace(-1.0, 1.0, width), dtype=np.float32)
    vars_ = [
        {"name": "x", "dtype": "float32", "shape": list(feed_shape)},
        {"name": "w", "dtype": "float32", "shape": [width], "persistable": True},
        {"name": "t0", "dtype": "float32", "shape": list(feed_shape)},
        {"name": "t1", "dtype": "float32", "shape": list(feed_shape)},
        {"name": "s0", "dtype": "float32", "shape": list(feed_shape)},
    ]
    ops = [
        {"type": "elementwise_add", "inputs": {"X": ["x"], "Y": ["w"]}, "outputs": {"Out": ["t0"]},
         "attrs": {"axis": -1}},
        {"type": "relu", "inputs": {"X": ["t0"]}, "outputs": {"Out": ["t1"]}},
        {"type": "scale", "inputs": {"X": ["t1"]}, "outputs": {"Out": ["s0"]},
         "attrs": {"scale": 2.0, "bias": 0.5, "bias_after_scale": True}},
    ]
    last = "s0"
    for k, op_type in enumerate(extra_ops):
        name = f"e{k}"
        vars_.append({"name": name, "dtype": "float32", "shape": list(feed_shape)})
        ops.append({"type": op_type, "inputs": {"X": [last]}, "outputs": {"Out": [name]}})
        last = name
    return _write(directory, vars_, ops, {"w": w}, ["x"], [last])


def reference_add_relu_scale(x, weight=None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    w = np.asarray(weight if weight is not None else np.linspace(-1.0, 1.0, x.shape[-1]), dtype=np.float32)
    return (2.0 * np.maximum(x + w, 0.0) + 0.5).astype(np.float32)
