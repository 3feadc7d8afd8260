"""`nnadapter-bridge ops`: converters with the NNAdapter operations they emit, and each device's operations."""
from __future__ import annotations

import json

from nnadapter_bridge.cli import main
from nnadapter_bridge.nnadapter.codes import OperationType


def test_ops_json_lists_converters_and_devices(capsys):
    assert main(["ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"converters", "devices"}
    assert "CONV_2D" in data["converters"]["conv2d"]
    assert data["converters"]["softmax"] == ["SOFTMAX"]
    names = {op.name for op in OperationType}
    for op_type, emits in data["converters"].items():
        assert emits and set(emits) <= names, op_type
    # builtin_device implements every one of the 96 operations.
    assert sorted(data["devices"]["builtin_device"]) == sorted(names)
    for device, ops in data["devices"].items():
        assert set(ops) <= names, device


def test_ops_table_and_device_filter(capsys):
    assert main(["ops", "--device", "builtin_device"]) == 0
    out = capsys.readouterr().out
    assert "Paddle op types have a converter" in out
    assert "builtin_device: 96 NNAdapter operations" in out
    assert "conv2d" in out


def test_an_unknown_device_is_one_line_listing_the_available_ones(capsys):
    assert main(["ops", "--device", "builtin_device", "--device", "nosuch", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("nnadapter-bridge ops: error: --device nosuch: ")
    assert "no NNAdapter device named 'nosuch'; available: " in err and "builtin_device" in err
