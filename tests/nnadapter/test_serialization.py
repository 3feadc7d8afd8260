"""builtin_device program bytes (facts §2.5): a hand-decoded layout, the round trip of every operand
kind (constants, quant params, per-channel scales, null operands), rejection of bad buffers, DOT text."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from nnadapter_bridge.errors import NNAdapterError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Lifetime, OperationType, Precision
from nnadapter_bridge.nnadapter.dot import model_to_dot
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import pack_container, unpack_container
from nnadapter_bridge.nnadapter.serialization import deserialize_model, serialize_model
from nnadapter_bridge.nnadapter.types import OperandType, Operation


def relu_model() -> Model:
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2,)), "x")
    y = model.add_output("y")
    model.add_operation(OperationType.RELU, [x], [y])
    model.identify_inputs_and_outputs([x], [y])
    model.finish()
    return model


def test_layout_decoded_by_hand():
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2,)), "x")
    c = model.add_constant(np.array([1.5, -2.0], dtype=np.float32))
    fuse = model.add_constant(0)
    y = model.add_output("y")
    model.add_operation(OperationType.ADD, [x, c, fuse], [y])
    model.identify_inputs_and_outputs([x], [y])
    entries = unpack_container(serialize_model(model))
    assert sorted(entries) == ["input_operands", "operands", "operations", "output_operands"]

    operands = entries["operands"]
    assert struct.unpack_from("<Q", operands, 0) == (4,)
    offset = 8
    # operand 0: model input, no value
    assert struct.unpack_from("<iii", operands, offset) == (10, 0, int(Lifetime.MODEL_INPUT))
    offset += 328
    # operand 1: float constant, u64 length then the raw bytes
    assert struct.unpack_from("<iii", operands, offset) == (10, 0, int(Lifetime.CONSTANT_COPY))
    offset += 328
    assert struct.unpack_from("<Q", operands, offset) == (8,)
    assert struct.unpack_from("<2f", operands, offset + 8) == (1.5, -2.0)
    offset += 16
    # operand 2: int32 scalar constant
    assert struct.unpack_from("<i", operands, offset) == (int(Precision.INT32),)
    offset += 328
    assert struct.unpack_from("<Qi", operands, offset) == (4, 0)
    offset += 12
    offset += 328  # operand 3: the output
    assert offset == len(operands)

    assert entries["operations"] == struct.pack("<Qi", 1, int(OperationType.ADD)) + struct.pack("<Q3q", 3, 0, 1, 2) \
        + struct.pack("<Qq", 1, 3)
    assert entries["input_operands"] == struct.pack("<Qq", 1, 0)
    assert entries["output_operands"] == struct.pack("<Qq", 1, 3)


def rich_model() -> Model:
    """Every kind of operand the format has to carry; operations are attached structurally (the
    serializer does not need the operations' semantics)."""
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 3, UNKNOWN, UNKNOWN),
                                      dynamic_dims=((1, 3, 8, 8), (1, 3, 16, 16))), "x")
    q_in = model.add_operand(OperandType(precision=Precision.QUANT_UINT8_ASYMM_PER_LAYER, dims=(4,), scale=0.125,
                                         zero_point=128), "q")
    weight = model.add_constant(np.arange(-6, 6, dtype=np.int8).reshape(3, 1, 2, 2),
                                Precision.QUANT_INT8_SYMM_PER_CHANNEL, scales=(0.5, 0.25, 0.125), channel_dim=0)
    bias = model.add_constant(np.array([1, -2, 3], dtype=np.int32), Precision.QUANT_INT32_SYMM_PER_CHANNEL,
                              scales=(0.0625, 0.03125, 0.015625))
    per_layer = model.add_constant(np.array([7, -7], dtype=np.int8), Precision.QUANT_INT8_SYMM_PER_LAYER, scale=0.5)
    flags = model.add_constant(np.array([True, False]))
    wide = model.add_constant(np.array([2 ** 40, -3], dtype=np.int64))
    half = model.add_constant(np.array([0.5, 1.25], dtype=np.float16))
    referenced = model.add_constant(np.array([[1.0, 2.0]], dtype=np.float32), copy=False)
    out0 = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 3, UNKNOWN, UNKNOWN)), "out0")
    out1 = model.add_operand(OperandType(precision=Precision.INT32, dims=(2,)), "out1")
    model.operations.append(Operation(OperationType.CONV_2D, [x, weight, bias, None, per_layer], [out0], 0))
    model.operations.append(Operation(OperationType.MAX_POOL_2D, [out0, flags, wide, half, referenced, q_in],
                                      [out1, None], 1))
    model.identify_inputs_and_outputs([x, q_in], [out0, out1])
    model.finish()
    return model


def assert_same_model(a: Model, b: Model) -> None:
    assert len(a.operands) == len(b.operands)
    for oa, ob in zip(a.operands, b.operands):
        expected_lifetime = Lifetime.CONSTANT_COPY if oa.type.is_constant else oa.type.lifetime
        assert ob.type == oa.type.copy(lifetime=expected_lifetime), f"operand {oa.index}"
        if oa.type.is_constant:
            assert ob.value.dtype == oa.value.dtype and ob.value.shape == oa.value.shape
            np.testing.assert_array_equal(ob.value, oa.value)
        else:
            assert ob.value is None
    index = {id(o): i for i, o in enumerate(a.operands)}
    index_b = {id(o): i for i, o in enumerate(b.operands)}

    def positions(operands, table):
        return [None if o is None else table[id(o)] for o in operands]

    assert [op.type for op in a.operations] == [op.type for op in b.operations]
    for oa, ob in zip(a.operations, b.operations):
        assert positions(oa.inputs, index) == positions(ob.inputs, index_b)
        assert positions(oa.outputs, index) == positions(ob.outputs, index_b)
    assert positions(a.input_operands, index) == positions(b.input_operands, index_b)
    assert positions(a.output_operands, index) == positions(b.output_operands, index_b)


def test_round_trip_of_every_operand_kind():
    model = rich_model()
    data = serialize_model(model)
    back = deserialize_model(data)
    assert back.finished
    assert_same_model(model, back)
    assert back.operands[2].type.scales == (0.5, 0.25, 0.125)
    assert back.operations[0].inputs[3] is None and back.operations[1].outputs[1] is None
    # Only the CONSTANT_REFERENCE lifetime changes (to CONSTANT_COPY); after that the bytes are stable.
    again = serialize_model(back)
    assert again != data
    assert serialize_model(deserialize_model(again)) == again


def test_restored_constants_are_private_copies():
    c = Model()
    x = c.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2,)), "x")
    value = np.array([1.0, 2.0], dtype=np.float32)
    k = c.add_constant(value, copy=False)
    y = c.add_output("y")
    c.add_operation(OperationType.ADD, [x, k, c.add_constant(0)], [y])
    c.identify_inputs_and_outputs([x], [y])
    back = deserialize_model(serialize_model(c))
    restored = back.operands[1]
    assert restored.type.lifetime == Lifetime.CONSTANT_COPY
    value[0] = 99.0
    assert restored.value[0] == 1.0


def _replace_entry(data: bytes, key: str, value: bytes) -> bytes:
    entries = unpack_container(data)
    entries[key] = value
    return pack_container(entries)


@pytest.mark.parametrize(
    "key,value,message",
    [
        (
            "operations",
            struct.pack("<Qi", 1, 3) + struct.pack("<Q3q", 3, 0, 1, 9) + struct.pack("<Qq", 1, 3),
            "operand index 9",
        ),
        (
            "operations",
            struct.pack("<Qi", 1, 500) + struct.pack("<Q", 0) + struct.pack("<Q", 0),
            "unknown operation code",
        ),
        ("input_operands", struct.pack("<Qq", 1, 0) + b"\0", "trailing"),
        ("input_operands", struct.pack("<Q", 2**62), "cannot fit"),
        ("output_operands", struct.pack("<Qq", 1, -1), "null operand"),
    ],
)
def test_bad_program_bytes_are_rejected(key, value, message):
    good = serialize_model(relu_model_with_constant())
    with pytest.raises(NNAdapterError, match=message):
        deserialize_model(_replace_entry(good, key, value))


def relu_model_with_constant() -> Model:
    """Operands in this order: x, the float constant, the fuse code, y."""
    model = Model()
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(2,)), "x")
    ones = model.add_constant(np.ones(2, np.float32))
    fuse = model.add_constant(0)
    y = model.add_output("y")
    model.add_operation(OperationType.ADD, [x, ones, fuse], [y])
    model.identify_inputs_and_outputs([x], [y])
    model.finish()
    return model


def test_constant_with_wrong_length_is_rejected():
    data = serialize_model(relu_model_with_constant())
    entries = unpack_container(data)
    operands = bytearray(entries["operands"])
    length_at = 8 + 328 + 328
    assert struct.unpack_from("<Q", operands, length_at) == (8,)
    struct.pack_into("<Q", operands, length_at, 4)
    with pytest.raises(NNAdapterError, match="constant operand 1"):
        deserialize_model(_replace_entry(data, "operands", bytes(operands)))


def test_missing_key_and_bad_container_are_rejected():
    entries = unpack_container(serialize_model(relu_model()))
    del entries["operations"]
    with pytest.raises(NNAdapterError, match="operations"):
        deserialize_model(pack_container(entries))
    with pytest.raises(NNAdapterError, match="magic"):
        deserialize_model(b"\0" * 64)


def test_dot_text():
    model = relu_model_with_constant()
    text = model_to_dot(model, "m", device_of=[0])
    assert text.startswith('digraph "m" {') and text.rstrip().endswith("}")
    assert 'operation_0 [label="ADD#0" shape=box style=filled fillcolor=lightblue' in text
    assert "operand_0 -> operation_0 [label=0];" in text
    assert "operand_1 -> operation_0 [label=1];" in text
    assert "operation_0 -> operand_3 [label=0];" in text
    assert text.count("->") == 4
    assert "fillcolor=lightgrey" in text  # constants are grey
    assert model_to_dot(model, "m", device_of=[0]) == text


def test_dot_labels_escape_newlines_and_quotes():
    model = relu_model_with_constant()
    model.operands[0].name = 'in"put'
    text = model_to_dot(model)
    assert 'operand_0 [label="in\\"put\\nFLOAT32[2]" shape=ellipse peripheries=2];' in text
