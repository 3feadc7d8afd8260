"""`nnadapter-bridge ops`: converters with the NNAdapter operations they emit, and each device's operations."""
from __future__ import annotations

import json

from nnadapter_bridge.cli import main
from nnadapter_bridge.nnadapter.codes import OperationType


def test_ops_json_lists_converters_and_devices(capsys):
    assert main(["ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"ok", "converters", "devices", "warnings"} and data["ok"] is True
    assert "CONV_2D" in data["converters"]["conv2d"]
    # FILL_LIKE: softmax of a 0-d input; MAX: a row of -inf made finite where Paddle gives it 1 / n
    assert data["converters"]["softmax"] == ["SOFTMAX", "FILL_LIKE", "MAX"]
    names = {op.name for op in OperationType}
    for op_type, emits in data["converters"].items():
        assert emits and set(emits) <= names, op_type
    # builtin_device implements every operation.
    assert sorted(data["devices"]["builtin_device"]) == sorted(names)
    for device, ops in data["devices"].items():
        assert set(ops) <= names, device


def test_ops_table_and_device_filter(capsys):
    assert main(["ops", "--device", "builtin_device"]) == 0
    out = capsys.readouterr().out
    assert "Paddle op types have a converter" in out
    assert f"builtin_device: {len(OperationType)} NNAdapter operations" in out
    assert "conv2d" in out


def test_an_unknown_device_is_one_line_listing_the_available_ones(capsys):
    assert main(["ops", "--device", "builtin_device", "--device", "nosuch"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("nnadapter-bridge ops: error: --device nosuch: ")
    assert "no NNAdapter device named 'nosuch'; available: " in err and "builtin_device" in err
    # under --json the same error is the one JSON document on stdout
    assert main(["ops", "--device", "builtin_device", "--device", "nosuch", "--json"]) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert err == "" and error["message"].startswith("--device nosuch: no NNAdapter device named 'nosuch'")


def test_ops_pir_lists_the_readers_vocabulary_and_what_runs_each_op(capsys):
    import converters
    from nnadapter_bridge.host.kernels import HOST_KERNELS

    assert main(["ops", "--pir", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["pir"]
    assert data["pd_op.matmul"] == {"legacy": "matmul_v2", "runs": "converter"}
    assert data["pd_op.add"]["legacy"] == "elementwise_add"
    assert data["pd_op.split_with_num"] == {"legacy": "split", "runs": "converter"}  # renamed by the reader
    assert data["pd_op.data"]["runs"] == data["builtin.combine"]["runs"] == "reader"
    for name, entry in data.items():
        legacy, runs = entry["legacy"], entry["runs"]
        if runs == "converter":
            assert legacy in converters.CONVERTERS or name in converters.CONVERTERS, name
        elif runs == "host kernel":
            assert legacy in HOST_KERNELS and legacy not in converters.CONVERTERS, name
        elif runs == "nothing":
            assert legacy not in converters.CONVERTERS and legacy not in HOST_KERNELS, name
    assert main(["ops", "--pir"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{len(data)} PIR ops known: ")
    assert any(line.split() == ["pd_op.matmul", "matmul_v2", "converter"] for line in out.splitlines())
