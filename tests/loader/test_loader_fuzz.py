"""Damaged real model files (truncations, byte flips, random bytes) raise ModelFormatError or load: never
another exception, a hang, or a huge allocation."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import load_model

FUZZ = settings(max_examples=60, deadline=2000, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def small_model(zoo_model):
    """squeezenet1_0 (__model__ + __params__, ~5 MB): the smallest zoo model."""
    directory = zoo_model("squeezenet1_0", "combined")
    with open(os.path.join(directory, "__model__"), "rb") as f:
        model = f.read()
    with open(os.path.join(directory, "__params__"), "rb") as f:
        params = f.read()
    load_model(model_bytes=model, params_bytes=params)  # the undamaged pair loads
    return model, params


def _load_or_format_error(model: bytes, params: bytes) -> None:
    try:
        load_model(model_bytes=model, params_bytes=params)
    except ModelFormatError as exc:
        assert "<model buffer>" in str(exc) or "<params buffer>" in str(exc)


def _damage(data: bytes, draw) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "splice"]))
    if kind == "truncate":
        return data[:draw(st.integers(0, len(data) - 1))]
    buf = bytearray(data)
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            pos = draw(st.integers(0, len(buf) - 1))
            buf[pos] ^= draw(st.integers(1, 255))
        return bytes(buf)
    pos = draw(st.integers(0, len(buf) - 1))  # overwrite a run with random bytes
    junk = draw(st.binary(min_size=1, max_size=64))
    buf[pos:pos + len(junk)] = junk
    return bytes(buf)


@FUZZ
@given(data=st.data())
def test_damaged_model_file(small_model, data):
    model, params = small_model
    _load_or_format_error(_damage(model, data.draw), params)


@FUZZ
@given(data=st.data())
def test_damaged_params_file(small_model, data):
    model, params = small_model
    damaged = _damage(params, data.draw)
    if len(damaged) != len(params):
        # The file must be consumed exactly, so any change of length is an error (naming the buffer).
        with pytest.raises(ModelFormatError, match="<params buffer>"):
            load_model(model_bytes=model, params_bytes=damaged)
    else:
        # Same length: header damage raises; damage inside tensor data is invisible (no checksum) and loads.
        _load_or_format_error(model, damaged)


@FUZZ
@given(model=st.binary(max_size=4096), params=st.binary(max_size=4096))
def test_random_bytes(model, params):
    _load_or_format_error(model, params)
