"""Where each op runs, on the command line (issue 24 item 6): `partition` and `run` show per op which device took
it and why the other named devices declined it (text and --json), the host-share warning reaches the user once,
and `--strict` on run / convert / bench / partition exits non-zero with strict mode's message.

The declining device is builtin_device under another name refusing RELU (support.placement_devices); the model is
add -> relu -> scale -> sigmoid -> tanh, with scale forced to the host by a partition config."""
from __future__ import annotations

import json

import pytest

from nnadapter_bridge.cli import main
from support.placement_devices import PICKY, DecliningDevice, placement_model

RELU_REASON = f"RELU not accepted by {PICKY}"


@pytest.fixture
def model(tmp_path, register_device):
    register_device(DecliningDevice(PICKY))
    config = tmp_path / "force_scale.txt"
    config.write_text("scale\n")
    return placement_model(tmp_path / "m"), str(config)


def json_of(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_partition_lists_host_ops_with_each_reason_and_warns_of_the_share(model, capsys):
    path, config = model
    assert main(["partition", path, "--device", PICKY, "--partition-config", config, "--per-op"]) == 0
    out = capsys.readouterr().out
    relu = next(line for line in out.splitlines() if line.split()[:2] == ["2", "relu"])
    assert RELU_REASON in relu
    scale = next(line for line in out.splitlines() if line.split()[:2] == ["3", "scale"])
    assert "forced to the host by the partition config" in scale
    assert "host share   20.0% of the ops (forced ones not counted); over the 5% limit" in out
    # --per-op: every op, its subgraph and device, or the host with the reason
    per_op = out[out.index("declined by / why on the host"):].splitlines()
    rows = {line.split()[1]: line for line in per_op[2:] if line.strip()}
    assert set(rows) == {"elementwise_add", "relu", "scale", "sigmoid", "tanh"}
    assert rows["elementwise_add"].split()[2:4] == ["0", PICKY]
    assert rows["relu"].split()[2:4] == ["-", "host"] and RELU_REASON in rows["relu"]


def test_partition_json_has_every_placement_and_the_picture(model, capsys):
    path, config = model
    data = json_of(capsys, "partition", path, "--device", PICKY, "--partition-config", config)
    placed = {p["type"]: p for p in data["placements"]}
    assert placed["relu"]["device"] is None and placed["relu"]["host_reason"].startswith(RELU_REASON)
    assert placed["relu"]["declined"][PICKY].startswith(RELU_REASON)
    assert placed["scale"]["forced"] and placed["scale"]["declined"] == {}
    assert placed["sigmoid"]["device"] == PICKY and placed["sigmoid"]["subgraph"] is not None
    assert data["host_share"]["declined_ops"] == 1 and data["host_share"]["forced_ops"] == 1
    assert data["host_share"]["over_limit"] is True
    boxes = data["picture"]["boxes"]
    assert [b["kind"] for b in boxes] == ["input", "device", "host", "host", "device", "output"]
    assert boxes[2]["op_types"] == {"relu": 1} and boxes[2]["reason"].startswith(RELU_REASON)
    assert boxes[3]["forced"] and boxes[4]["op_types"] == {"sigmoid": 1, "tanh": 1}
    assert data["picture"]["legend"]["devices"] == {PICKY: "#8dd3c7"}


def test_with_two_devices_each_op_names_the_device_that_took_it(model, capsys):
    path, _ = model
    data = json_of(capsys, "partition", path, "--device", PICKY, "--device", "builtin_device")
    placed = {p["type"]: p for p in data["placements"]}
    assert placed["relu"]["device"] == "builtin_device"
    assert placed["relu"]["declined"] == {PICKY: "does not accept RELU"}
    assert {placed[t]["device"] for t in ("elementwise_add", "scale", "sigmoid", "tanh")} == {PICKY}
    assert data["subgraphs"][0]["devices"] == {PICKY: 4, "builtin_device": 1}
    assert data["num_host_ops"] == 0 and data["host_share"]["over_limit"] is False


@pytest.mark.parametrize("command", [["partition"], ["run"], ["convert"], ["bench", "--no-fresh-process"]])
def test_strict_exits_non_zero_naming_the_declined_op(model, capsys, tmp_path, command):
    path, config = model
    extra = ["--cache-dir", str(tmp_path / "cache")] if command[0] == "convert" else []
    status = main([command[0], path, "--device", PICKY, "--partition-config", config, "--strict", *command[1:], *extra])
    err = capsys.readouterr().err
    assert status == 2
    assert f"strict mode: 1 of 5 ops cannot run on {PICKY}:" in err
    assert f"relu (x1, relu#2 (out: t1)): {RELU_REASON}" in err
    assert "scale (x1" not in err  # kept on the host by the config: not an error


def test_run_warns_once_and_shows_where_each_op_ran(model, capsys):
    path, config = model
    assert main(["run", path, "--device", PICKY, "--partition-config", config]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if "run on the host although" in line]
    assert len(warnings) == 1 and f"1 of 5 ops (20.0%) run on the host although {PICKY} was named" in warnings[0]
    assert f"relu (x1, relu#2 (out: t1)): {RELU_REASON}" in err
    header = next(line for line in out.splitlines() if line.startswith("subgraph") and "device" in line)
    assert header.split()[:3] == ["subgraph", "device", "ops"]
    relu = next(line for line in out.splitlines() if line.split()[:2] == ["2", "relu"])
    assert RELU_REASON in relu


def test_run_per_op_lists_every_op_where_it_ran(model, capsys):
    path, config = model
    assert main(["run", path, "--device", PICKY, "--partition-config", config, "--per-op"]) == 0
    out = capsys.readouterr().out
    per_op = out[out.index("declined by / why on the host"):].splitlines()[2:]
    rows = {line.split()[1]: line.split() for line in per_op if line.strip()}
    assert set(rows) == {"elementwise_add", "relu", "scale", "sigmoid", "tanh"}
    assert rows["tanh"][3] == PICKY and rows["relu"][3] == "host" and rows["scale"][3] == "host"


def test_run_json_carries_the_placements_and_the_warning(model, capsys):
    path, config = model
    data = json_of(capsys, "run", path, "--device", PICKY, "--partition-config", config)
    placed = {p["type"]: p for p in data["placements"]}
    assert placed["relu"]["device"] is None and placed["relu"]["host_reason"].startswith(RELU_REASON)
    assert placed["tanh"]["device"] == PICKY and not placed["tanh"]["at_run"]
    assert data["host_share"]["op_share"] == pytest.approx(0.2)
    found = [w for w in data.get("warnings", []) if w["category"] == "HostPlacementWarning"]
    assert len(found) == 1 and RELU_REASON in found[0]["message"]


def test_bench_warm_start_child_is_strict_too(tmp_path):
    from nnadapter_bridge.cli import build_parser
    from nnadapter_bridge.cli.cmd_bench import child_command

    args = build_parser().parse_args(["bench", "m.pdmodel", "--strict"])
    assert "--strict" in child_command(args, str(tmp_path))
    args = build_parser().parse_args(["bench", "m.pdmodel"])
    assert "--strict" not in child_command(args, str(tmp_path))
