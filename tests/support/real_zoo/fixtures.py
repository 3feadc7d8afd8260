"""Pytest fixtures of the real-architecture zoo (registered in tests/conftest.py's pytest_plugins).

  real_zoo_model(name) -> path of the model's PIR program `<name>.json` (its `.pdiparams` beside it), built once per
      machine in the side venv (support.real_zoo.env) and cached; the side venv is built on first need.
  real_zoo_feeds(name, seed=0) -> {input name: array} drawn as the model's feeds.json says.

A side venv or model that cannot be built makes the test fail with the build's error (RealZooError), never skip.
Imports only the standard library, numpy, pytest and support.real_zoo.env (not paddle: the tests' reference runs
through support.model_zoo_fixtures.paddle_reference).
"""
from __future__ import annotations

import numpy as np
import pytest

from support.real_zoo import env


def feeds_for(name: str, seed: int = 0) -> dict:
    """Feeds for `name` drawn uniformly in each input's [low, high) with the shape feeds.json gives."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in env.feeds_spec(name):
        if spec["dtype"].startswith("int"):
            feeds[spec["name"]] = rng.integers(int(spec["low"]), int(spec["high"]), spec["shape"]).astype(spec["dtype"])
        elif spec["low"] == spec["high"]:
            feeds[spec["name"]] = np.full(spec["shape"], spec["low"], spec["dtype"])
        else:
            feeds[spec["name"]] = rng.uniform(spec["low"], spec["high"], spec["shape"]).astype(spec["dtype"])
    return feeds


@pytest.fixture(scope="session")
def real_zoo_model():
    """Factory: real_zoo_model(name) -> path of the cached `<name>.json` (built on first use)."""
    return env.model_path


@pytest.fixture(scope="session")
def real_zoo_feeds():
    """Factory: real_zoo_feeds(name, seed=0) -> {input name: array}."""
    return feeds_for
