"""The .nnc container, CRC, operand-type records and compilation records against hand-built bytes
(facts §2.1–2.4, §10.1, §10.2), and the rule that a damaged cache is a warned miss, never a crash."""
from __future__ import annotations

import os
import random
import struct
import time
import warnings

import numpy as np
import pytest

from nnadapter_bridge.nnadapter import nnc
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Layout, Lifetime, OperationType, Precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import (
    CompilationRecord,
    NncCacheWarning,
    NncFormatError,
    ProgramRecord,
    crc32c_naive,
    load_compilation_record,
    pack_compilation_record,
    pack_container,
    pack_operand_type,
    unpack_compilation_record,
    unpack_container,
    unpack_operand_type,
)
from nnadapter_bridge.nnadapter.types import OperandType


def bitwise_crc(data: bytes) -> int:
    """Independent reference: reflected 0x82F63B78, init 0, no final xor, one bit at a time."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            if crc & 1:
                crc = (crc >> 1) ^ 0x82F63B78
            else:
                crc >>= 1
    return crc


# -- CRC ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, 5, 255, 4095, 4096, 4097, 20011, 65536 + 7])
def test_crc_matches_bitwise_reference(size):
    data = random.Random(size).randbytes(size)
    assert crc32c_naive(data) == bitwise_crc(data)


def test_crc_is_not_standard_crc32c():
    # Standard CRC-32C("123456789") is 0xE3069283; the naive variant must differ from it.
    assert crc32c_naive(b"123456789") == bitwise_crc(b"123456789")
    assert crc32c_naive(b"123456789") != 0xE3069283


def test_crc_of_large_buffer_is_fast_and_consistent():
    data = np.random.default_rng(0).integers(0, 256, 32 * 1024 * 1024, dtype=np.uint8).tobytes()
    start = time.perf_counter()
    whole = crc32c_naive(data)
    elapsed = time.perf_counter() - start
    assert elapsed < 20, f"32 MB took {elapsed:.1f} s"
    # Linearity check against a different split: crc(A+B) from crc(A) fed through B's bytes.
    head = crc32c_naive(data[:1000])
    tail = data[1000:1000 + 3000]
    crc = head
    for byte in tail:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    assert crc == crc32c_naive(data[:4000])
    assert whole == crc32c_naive(memoryview(data))


# -- the container --------------------------------------------------------------------------------------
def hand_built_entry(key: bytes, value: bytes) -> bytes:
    raw = struct.pack("<QQ", len(key), len(value)) + key + value
    return raw + b"\0" * (-len(raw) % 4)


def test_facts_10_1_container_byte_for_byte():
    buffer = bytes([1, 2, 3, 4, 5])
    body = (hand_built_entry(b"cache_0_device_name", b"builtin_device")
            + hand_built_entry(b"cache_0_model_buffer", buffer)
            + hand_built_entry(b"num_caches", struct.pack("<Q", 1)))
    assert [len(hand_built_entry(k, v)) for k, v in [(b"cache_0_device_name", b"builtin_device"),
                                                      (b"cache_0_model_buffer", buffer),
                                                      (b"num_caches", b"\0" * 8)]] == [52, 44, 36]
    header = bytes.fromhex("636e6e2e") + struct.pack("<I", 1) + struct.pack("<I", bitwise_crc(body)) \
        + b"\0" * 4 + struct.pack("<Q", 3)
    expected = header + body
    assert len(expected) == 156

    packed = pack_container({"num_caches": struct.pack("<Q", 1), "cache_0_model_buffer": buffer,
                             "cache_0_device_name": b"builtin_device"})
    assert packed == expected
    assert unpack_container(expected) == {"cache_0_device_name": b"builtin_device",
                                          "cache_0_model_buffer": buffer,
                                          "num_caches": struct.pack("<Q", 1)}


def test_container_round_trip_and_bytewise_key_order():
    entries = {"b": b"x" * 7, "a": b"", "cache_10_x": b"1", "cache_1_x": b"22", "\u00e9": b"\xff"}
    packed = pack_container(entries)
    assert unpack_container(packed) == entries
    keys = list(unpack_container(packed))
    assert keys == sorted(keys, key=lambda k: k.encode())
    assert keys.index("cache_10_x") < keys.index("cache_1_x")  # '0' < '_'
    assert len(packed) % 4 == 0


def test_empty_container():
    packed = pack_container({})
    assert len(packed) == 24
    assert unpack_container(packed) == {}


def corrupt_with_valid_crc(body: bytes, count: int) -> bytes:
    return b"cnn." + struct.pack("<IIIQ", 1, bitwise_crc(body), 0, count) + body


@pytest.mark.parametrize("case,body,count,message", [
    ("unsorted", hand_built_entry(b"b", b"1") + hand_built_entry(b"a", b"2"), 2, "not after"),
    ("duplicate", hand_built_entry(b"a", b"1") + hand_built_entry(b"a", b"2"), 2, "not after"),
    ("too few entries", hand_built_entry(b"a", b"1") + hand_built_entry(b"b", b"2"), 1, "left after"),
    ("too many entries", hand_built_entry(b"a", b"1"), 2, "runs past"),
    ("huge value size", struct.pack("<QQ", 1, 2 ** 63) + b"a\0\0\0", 1, "only"),
    ("non-zero padding", struct.pack("<QQ", 1, 1) + b"ab\1\0", 1, "padding"),
])
def test_container_rejects_inconsistent_bytes(case, body, count, message):
    with pytest.raises(NncFormatError, match=message):
        unpack_container(corrupt_with_valid_crc(body, count))


def test_container_rejects_bad_header_fields():
    good = pack_container({"k": b"v"})
    for offset, what in [(0, "magic"), (4, "version"), (8, "CRC"), (12, "padding")]:
        bad = bytearray(good)
        bad[offset] ^= 0x40
        with pytest.raises(NncFormatError, match=what):
            unpack_container(bytes(bad))


# -- operand type records -------------------------------------------------------------------------------
def test_operand_type_record_layout():
    t = OperandType(precision=Precision.FLOAT32, dims=(1, UNKNOWN, 224, 224), layout=Layout.NHWC,
                    lifetime=Lifetime.MODEL_INPUT, dynamic_dims=((1, 3, 224, 224), (1, 3, 448, 448)))
    record = pack_operand_type(t)
    assert len(record) == 328
    assert struct.unpack_from("<iiiI", record, 0) == (10, 1, 4, 4)
    assert struct.unpack_from("<8i", record, 16) == (1, -65535, 224, 224, 0, 0, 0, 0)
    assert struct.unpack_from("<I", record, 48) == (2,)
    assert struct.unpack_from("<8i", record, 52) == (1, 3, 224, 224, 0, 0, 0, 0)
    assert struct.unpack_from("<8i", record, 52 + 32) == (1, 3, 448, 448, 0, 0, 0, 0)
    assert record[52 + 64:] == b"\0" * (328 - 52 - 64)
    back, _ = unpack_operand_type(record)
    assert back == t


def test_quant_params_in_the_union():
    symm = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_LAYER, dims=(4,), scale=0.5)
    record = pack_operand_type(symm)
    assert struct.unpack_from("<f", record, 312) == (0.5,)
    assert record[316:] == b"\0" * 12
    assert unpack_operand_type(record)[0] == symm

    asymm = OperandType(precision=Precision.QUANT_UINT8_ASYMM_PER_LAYER, dims=(4,), scale=0.25, zero_point=128)
    record = pack_operand_type(asymm)
    assert struct.unpack_from("<fi", record, 312) == (0.25, 128)
    assert unpack_operand_type(record)[0] == asymm

    per_channel = OperandType(precision=Precision.QUANT_INT8_SYMM_PER_CHANNEL, dims=(3, 2), scales=(0.5, 1.0, 2.0),
                              channel_dim=1)
    record = pack_operand_type(per_channel)
    assert struct.unpack_from("<IIQ", record, 312) == (1, 3, 0)  # the scales pointer is written as 0
    back, scale_count = unpack_operand_type(record)
    assert scale_count == 3
    assert back.scales is None  # documented loss: the values are not in the record
    assert back == per_channel.copy(scales=None)


def test_operand_type_record_rejects_bad_codes():
    record = bytearray(pack_operand_type(OperandType(precision=Precision.FLOAT32, dims=(2,))))
    struct.pack_into("<i", record, 0, 99)
    with pytest.raises(NncFormatError):
        unpack_operand_type(bytes(record))
    record = bytearray(pack_operand_type(OperandType(precision=Precision.FLOAT32, dims=(2,))))
    struct.pack_into("<I", record, 12, 9)
    with pytest.raises(NncFormatError):
        unpack_operand_type(bytes(record))


# -- compilation records ---------------------------------------------------------------------------------
def f32(*dims, lifetime=Lifetime.TEMPORARY_VARIABLE):
    return OperandType(precision=Precision.FLOAT32, dims=dims, lifetime=lifetime)


def single_program_record(buffer=b"program-bytes"):
    in_t, out_t = f32(1, 3, lifetime=Lifetime.MODEL_INPUT), f32(1, 3, lifetime=Lifetime.MODEL_OUTPUT)
    return CompilationRecord([in_t], [out_t], [ProgramRecord("builtin_device", [in_t], [-1], [out_t], [-1], buffer)])


def test_facts_10_2_single_device_key_order_and_sizes():
    packed = pack_compilation_record(single_program_record(b"12345"))
    entries = unpack_container(packed)
    assert list(entries) == ["cache_0_device_name", "cache_0_input_indexes", "cache_0_input_types",
                             "cache_0_model_buffer", "cache_0_output_indexes", "cache_0_output_types",
                             "input_types", "num_caches", "output_types"]
    assert entries["cache_0_input_indexes"] == struct.pack("<i", -1)
    assert entries["cache_0_output_indexes"] == struct.pack("<i", -1)
    assert entries["num_caches"] == struct.pack("<Q", 1)
    assert len(entries["input_types"]) == 328 == len(entries["cache_0_output_types"])
    expected_size = 24 + sum((16 + len(k) + len(v) + 3) // 4 * 4 for k, v in entries.items())
    assert len(packed) == expected_size


def test_compilation_record_round_trip_multi_program():
    a = f32(2, 2, lifetime=Lifetime.MODEL_INPUT)
    b = f32(2, 2, lifetime=Lifetime.MODEL_OUTPUT)
    shared = f32(2, 2, lifetime=Lifetime.MODEL_OUTPUT)
    record = CompilationRecord([a], [b], [
        ProgramRecord("dev_a", [a], [-1], [shared], [0], b"first"),
        ProgramRecord("dev_b", [shared.copy(lifetime=Lifetime.MODEL_INPUT)], [0], [b], [-1], b"second"),
    ])
    back = unpack_compilation_record(pack_compilation_record(record))
    assert back == record


def test_legacy_file_without_program_io_gets_default_indexes():
    in_types = [f32(1, lifetime=Lifetime.MODEL_INPUT), f32(2, lifetime=Lifetime.MODEL_INPUT)]
    out_types = [f32(3, lifetime=Lifetime.MODEL_OUTPUT)]
    packed = pack_container({
        "input_types": nnc.pack_operand_types(in_types),
        "output_types": nnc.pack_operand_types(out_types),
        "num_caches": struct.pack("<Q", 1),
        "cache_0_device_name": b"builtin_device",
        "cache_0_model_buffer": b"xyz",
    })
    record = unpack_compilation_record(packed)
    program = record.programs[0]
    assert program.input_indexes == [-1, -2] and program.output_indexes == [-1]
    assert program.input_types == in_types and program.output_types == out_types


@pytest.mark.parametrize("drop", ["num_caches", "cache_0_device_name", "cache_0_model_buffer"])
def test_missing_required_key_is_a_warned_miss(drop):
    entries = unpack_container(pack_compilation_record(single_program_record()))
    del entries[drop]
    with pytest.warns(NncCacheWarning, match=drop):
        assert load_compilation_record(pack_container(entries), "test") is None


def test_index_naming_a_missing_model_input_is_rejected():
    entries = unpack_container(pack_compilation_record(single_program_record()))
    entries["cache_0_input_indexes"] = struct.pack("<i", -2)
    with pytest.raises(NncFormatError, match="names model input 1"):
        unpack_compilation_record(pack_container(entries))


def test_device_outside_the_context_is_a_warned_miss():
    packed = pack_compilation_record(single_program_record())
    with pytest.warns(NncCacheWarning, match="not in the context"):
        assert load_compilation_record(packed, "test", known_devices=["intel_openvino"]) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_compilation_record(packed, "test", known_devices=["builtin_device"]) is not None


# -- a real cache file: every flip and every truncation is a miss -----------------------------------------
@pytest.fixture(scope="module")
def real_cache_file(tmp_path_factory):
    from nnadapter_bridge.nnadapter.runtime import Compilation, Context, Execution, acquire_device

    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2, 3)), "x")
    y = model.add_output("y")
    model.add_operation(OperationType.RELU, [x], [y])
    z = model.add_output("z")
    model.add_operation(OperationType.ADD, [y, model.add_constant(np.arange(3, dtype=np.float32)),
                                            model.add_constant(0)], [z])
    model.identify_inputs_and_outputs([x], [z])
    model.finish()
    cache_dir = str(tmp_path_factory.mktemp("nnc"))
    context = Context([acquire_device("builtin_device")])
    compilation = Compilation(model, "0123456789abcdef0123456789abcdef", None, cache_dir, context)
    compilation.finish()
    Execution(compilation).run([np.ones((2, 3), np.float32)])
    assert compilation.wait_for_cache_write(timeout=60)
    with open(compilation.cache_path, "rb") as f:
        return f.read()


def assert_single_warned_miss(data: bytes, what: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = load_compilation_record(data, what, known_devices=["builtin_device"])
    assert result is None, f"{what}: accepted"
    assert len(caught) == 1 and issubclass(caught[0].category, NncCacheWarning), \
        f"{what}: warnings {[str(w.message) for w in caught]}"


def test_real_file_loads(real_cache_file):
    record = load_compilation_record(real_cache_file, "real", known_devices=["builtin_device"])
    assert record is not None and record.programs[0].device_name == "builtin_device"


def test_every_single_byte_flip_is_a_miss(real_cache_file):
    rng = random.Random(7)
    for offset in range(len(real_cache_file)):
        damaged = bytearray(real_cache_file)
        damaged[offset] ^= rng.randrange(1, 256)
        assert_single_warned_miss(bytes(damaged), f"flip at {offset}")


def test_every_truncation_is_a_miss(real_cache_file):
    for length in range(len(real_cache_file)):
        assert_single_warned_miss(real_cache_file[:length], f"truncated to {length}")
    assert_single_warned_miss(real_cache_file + b"\0\0\0\0", "four extra bytes")


# -- files -----------------------------------------------------------------------------------------------
def test_missing_file_is_a_silent_miss(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nnc.read_nnc_file(str(tmp_path / "absent.nnc")) is None


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    path = str(tmp_path / "sub" / "t.nnc")
    nnc.write_file_atomically(path, b"first")
    nnc.write_file_atomically(path, b"second")
    assert open(path, "rb").read() == b"second"
    assert os.listdir(tmp_path / "sub") == ["t.nnc"]


def test_failed_atomic_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "t.nnc")
    nnc.write_file_atomically(path, b"old")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        nnc.write_file_atomically(path, b"new")
    assert open(path, "rb").read() == b"old"
    assert os.listdir(tmp_path) == ["t.nnc"]


@pytest.mark.parametrize("length", [0, 1, 3, 63, 64, 65, 1000, 4097, 65536 + 7, 1_000_003])
def test_the_c_crc_is_the_naive_crc_for_every_buffer_kind(length):
    """google-crc32c (reg init 0 via extend(0xFFFFFFFF) ^ 0xFFFFFFFF) computes the naive CRC32C: against the
    bitwise reference for short inputs, and for long ones split in two through crc_shift (pure Python, the CRC's
    linearity: crc(A + B) = shift(crc(A), len(B)) ^ crc(B)); bytes, bytearray views and numpy arrays alike."""
    from nnadapter_bridge.nnadapter import nnc

    data = np.random.default_rng(length).integers(0, 256, length, dtype=np.uint8).tobytes()
    whole = nnc.crc32c_naive(data)
    assert whole == nnc.crc32c_naive(memoryview(bytearray(data))) == nnc.crc32c_naive(np.frombuffer(data, np.uint8))
    if length <= 4097:
        assert whole == bitwise_crc(data)
    head, tail = data[:length // 3], data[length // 3:]
    assert whole == nnc.crc_shift(nnc.crc32c_naive(head), len(tail)) ^ nnc.crc32c_naive(tail)
    assert whole == nnc.crc32c_naive_update(nnc.crc32c_naive(head), tail)


@pytest.mark.parametrize("programs, why", [
    # The only program writes a shared buffer, nothing writes model output 0.
    (lambda a, b: [ProgramRecord("builtin_device", [a], [-1], [b], [5], b"p")], "written by 0 programs"),
    # Model output 0 written twice.
    (lambda a, b: [ProgramRecord("builtin_device", [a], [-1], [b], [-1], b"p"),
                   ProgramRecord("builtin_device", [a], [-1], [b], [-1], b"q")], "written by 2 programs"),
    # A program reading a shared buffer nobody wrote before it.
    (lambda a, b: [ProgramRecord("builtin_device", [a], [3], [b], [-1], b"p")], "reads shared buffer 3"),
])
def test_records_whose_dataflow_cannot_run_are_a_miss(programs, why):
    """CRC-valid files with inconsistent indexes would run and hand back unfilled outputs: a miss instead."""
    a = OperandType(precision=Precision.FLOAT32, dims=(1, 4), lifetime=Lifetime.MODEL_INPUT)
    b = OperandType(precision=Precision.FLOAT32, dims=(1, 4), lifetime=Lifetime.MODEL_OUTPUT)
    data = nnc.pack_compilation_record(CompilationRecord([a], [b], programs(a, b)))
    with pytest.raises(nnc.NncFormatError, match=why):
        nnc.unpack_compilation_record(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert nnc.load_compilation_record(data, "test", ["builtin_device"]) is None
    assert len(caught) == 1


def test_builtin_device_rejects_cached_programs_with_invalid_operations():
    """A builtin program (serialized model) whose ADD lacks operands deserializes, but must not run: the
    driver re-checks every operation and answers INVALID_PARAMETER (a cache miss for the runtime)."""
    from hal.builtin_device import DRIVER
    from hal.protocol import Cache
    from nnadapter_bridge.errors import NNAdapterError
    from nnadapter_bridge.nnadapter.codes import ResultCode
    from nnadapter_bridge.nnadapter.serialization import serialize_model
    from nnadapter_bridge.nnadapter.types import Operation

    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 4)))
    y = model.add_output()
    y.type.precision, y.type.dims = Precision.FLOAT32, (1, 4)
    model.operations.append(Operation(OperationType.ADD, [x], [y], 0))  # forged: no input1, no fuse code
    model.identify_inputs_and_outputs([x], [y])
    model.finish()
    context = DRIVER.create_context(DRIVER.open_device(), "", None)
    with pytest.raises(NNAdapterError) as raised:
        DRIVER.create_program(context, None, Cache(buffer=bytearray(serialize_model(model))))
    assert raised.value.code == ResultCode.INVALID_PARAMETER
