"""What a predictor start skips when the model cache is warm, and what it must still not get wrong.

The support verdicts persist next to the `.nnc` files (support.VerdictStore): a second predictor converts
nothing to decide support (SupportDecider.conversions == 0) and partitions exactly as the first; other
devices or context properties never reuse them; a damaged verdict file is one warning, then rewritten.
The `.nnc` read path hands the program bytes on as views of the file data, and its CRC skips the copy.
Everything is read from counters and object identity, never from timings.
"""
from __future__ import annotations

import glob
import json
import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.nnc import (
    CompilationRecord,
    NncCacheWarning,
    ProgramRecord,
    crc32c_naive,
    crc32c_naive_tail,
    crc_shift,
    pack_compilation_record,
    unpack_compilation_record,
    unpack_container,
    unpack_container_views,
)
from nnadapter_bridge.nnadapter.types import OperandType
from nnadapter_bridge.subgraph.plan import HostPlacementWarning
from nnadapter_bridge.subgraph.support_decisions import VerdictStore, signature_text
from support.predictor_programs import add_relu_scale_model

X = np.random.default_rng(5).standard_normal((2, 4)).astype(np.float32)
EXTRA_OPS = ["erf", "relu", "sinh", "relu", "sigmoid"]  # erf and sinh have host kernels only


def start(model, cache_dir, devices=("builtin_device",), properties=None):
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(list(devices))
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    if properties is not None:
        config.set_nnadapter_context_properties(properties)
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    return predictor


def layout(predictor) -> tuple:
    """The partition: every subgraph's op indexes and the host ops, in order."""
    return (tuple((s.index, tuple(op.index for op in s.ops)) for s in predictor.partition.subgraphs),
            tuple(op.index for op in predictor.partition.host_ops))


def verdict_files(cache_dir) -> list:
    return sorted(glob.glob(os.path.join(str(cache_dir), "support-*.json")))


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model", extra_ops=EXTRA_OPS)


# -- support verdicts ------------------------------------------------------------------------------------
def test_second_predictor_converts_nothing_and_partitions_identically(model, tmp_path):
    cache = tmp_path / "cache"
    first = start(model, cache)
    assert first.support.conversions > 0 and first.support.restored == 0
    assert len(verdict_files(cache)) == 1
    second = start(model, cache)
    assert second.support.conversions == 0
    assert second.support.restored == first.support.conversions + len(
        [r for r in first.support.reasons.values() if r.startswith("no converter")])
    assert layout(second) == layout(first)
    assert layout(first)[1], "the model must keep some ops on the host for this test to mean anything"
    assert second.unsupported_reasons() == first.unsupported_reasons()
    np.testing.assert_array_equal(second.get_output(0).numpy(), first.get_output(0).numpy())


def test_without_a_cache_dir_nothing_persists(model, tmp_path):
    first = start(model, None)
    second = start(model, None)
    assert second.support.conversions == first.support.conversions > 0
    assert first.support.store is None


def test_other_properties_or_devices_do_not_reuse_verdicts(model, tmp_path):
    cache = tmp_path / "cache"
    first = start(model, cache)
    other_properties = start(model, cache, properties="BUILTIN_DEVICE_NUM_THREADS=1;")
    assert other_properties.support.restored == 0
    assert other_properties.support.conversions == first.support.conversions
    assert len(verdict_files(cache)) == 2
    assert layout(other_properties) == layout(first)
    pytest.importorskip("openvino")
    other_devices = start(model, cache, devices=("intel_openvino", "builtin_device"))
    assert other_devices.support.restored == 0 and other_devices.support.conversions > 0
    assert len(verdict_files(cache)) == 3


def test_store_key_depends_on_every_part():
    base = VerdictStore.store_key(["builtin_device"], "", "v")
    assert len({base, VerdictStore.store_key(["intel_openvino"], "", "v"),
                VerdictStore.store_key(["builtin_device", "intel_openvino"], "", "v"),
                VerdictStore.store_key(["builtin_device"], "A=1;", "v"),
                VerdictStore.store_key(["builtin_device"], "", "w")}) == 5
    assert VerdictStore.store_key(["builtin_device"], "", "v") == base


@pytest.mark.parametrize("content", [b"not json", b"\xff\xfe", b"[]", b'{"format": "other"}',
                                     "verdicts-not-an-object", "verdict-with-bad-type", "wrong-key"])
def test_a_damaged_verdict_file_is_one_warning_then_rewritten(model, tmp_path, content):
    cache = tmp_path / "cache"
    first = start(model, cache)
    (path,) = verdict_files(cache)
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    if content == "verdicts-not-an-object":
        document["verdicts"] = list(document["verdicts"])
    elif content == "verdict-with-bad-type":
        text = next(iter(document["verdicts"]))
        document["verdicts"][text] = {"supported": "yes", "reason": ""}
    elif content == "wrong-key":
        document["key"] = "0" * 32
    data = content if isinstance(content, bytes) else json.dumps(document).encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    with pytest.warns(NncCacheWarning, match="support verdict cache") as caught:
        second = start(model, cache)
    assert len([w for w in caught if "support verdict cache" in str(w.message)]) == 1
    assert second.support.conversions == first.support.conversions
    assert layout(second) == layout(first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # The model keeps erf and sinh on the host on purpose: that warning is expected, any other is an error.
        warnings.simplefilter("ignore", HostPlacementWarning)
        third = start(model, cache)  # the file was rewritten whole
    assert third.support.conversions == 0


def test_signature_text_is_canonical_and_keeps_types_apart():
    signature = ("scale", (("bias", 0.5), ("flag", True), ("n", 1), ("s", "1"), ("b", b"\x01"), ("none", None)),
                 ((("X", "data", "float32", (-1, 4)),), (("Out", 1),)))
    text = signature_text(signature)
    assert text == signature_text(tuple(signature))
    assert json.loads(text)[1][4] == ["b", {"bytes": "01"}]
    variants = [("op", 1), ("op", 1.0), ("op", True), ("op", "1"), ("op", b"1"), ("op", (1,)), ("op", None)]
    assert len({signature_text(v) for v in variants}) == len(variants)
    assert signature_text(("op", object())) is None  # not persisted, decided afresh every start


# -- the .nnc read path -------------------------------------------------------------------------------------
@pytest.mark.parametrize("size,start", [(1, 0), (30, 24), (5000, 24), (100_003, 24), (100_003, 99_999)])
def test_crc_of_a_tail_matches_the_crc_of_a_copy(size, start):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    want = crc32c_naive(bytes(data[start:]))  # a copy of the tail
    assert crc32c_naive_tail(data, start) == want
    assert crc32c_naive_tail(bytearray(data), start) == want
    assert crc32c_naive_tail(memoryview(data), start) == want


def test_crc_shift_is_feeding_zero_bytes():
    for length in (0, 1, 7, 4096, 65537):
        crc = crc32c_naive(b"head")
        assert crc_shift(crc, length) == crc32c_naive(b"head" + bytes(length))


def _record(program_bytes: bytes) -> bytes:
    types = [OperandType(precision=Precision.FLOAT32, dims=(2, 4))]
    return pack_compilation_record(CompilationRecord(types, types, [
        ProgramRecord("builtin_device", types, [-1], types, [-1], program_bytes)]))


def test_program_bytes_are_views_of_the_data_read():
    data = _record(b"program-bytes" * 100)
    record = unpack_compilation_record(data)
    buffer = record.programs[0].model_buffer
    assert isinstance(buffer, memoryview) and buffer.readonly and buffer.obj is data
    assert buffer == b"program-bytes" * 100
    views = unpack_container_views(data)
    assert all(isinstance(v, memoryview) and v.obj is data for v in views.values())
    assert unpack_container(data) == {k: bytes(v) for k, v in views.items()}
    assert all(type(v) is bytes for v in unpack_container(bytearray(data)).values())


def test_openvino_restores_from_a_read_only_view(model, tmp_path):
    pytest.importorskip("openvino")
    cache = tmp_path / "cache"
    first = start(model, cache, devices=("intel_openvino",))
    assert first.stats.builds > 0
    second = start(model, cache, devices=("intel_openvino",))
    assert (second.stats.builds, second.stats.cache_hits_file) == (0, first.stats.builds)
    np.testing.assert_array_equal(second.get_output(0).numpy(), first.get_output(0).numpy())
