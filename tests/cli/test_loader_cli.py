"""`nnadapter-bridge inspect`: the JSON report against what Paddle loads, the table, and error exits."""
from __future__ import annotations

import collections
import json

from nnadapter_bridge.cli import main
from support.model_zoo_fixtures import paddle_load


def test_inspect_json_matches_paddle(zoo_model, capsys):
    path = zoo_model("shufflenet_v2_x1_0", "combined")
    assert main(["inspect", path, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    truth = paddle_load(path, "combined")
    assert set(report) == {"ok", "format", "format_version", "layout", "inputs", "outputs", "op_types", "num_ops",
                           "num_blocks", "params", "load_seconds", "warnings"}
    assert (report["format"], report["format_version"]) == ("program_desc", None)
    assert report["layout"] == "dir+__params__"
    assert report["inputs"] == [{"name": "x", "shape": [-1, 3, 224, 224], "dtype": "float32"}]
    assert [o["name"] for o in report["outputs"]] == truth["fetches"]
    ops = [op["type"] for block in truth["blocks"] for op in block["ops"]]
    assert report["op_types"] == dict(collections.Counter(ops))
    assert report["op_types"]["feed"] == 1 and report["op_types"]["fetch"] == 1
    assert report["num_ops"] == len(ops) and report["num_blocks"] == len(truth["blocks"])
    assert report["params"] == {"count": len(truth["params"]),
                                "bytes": sum(a.nbytes for a in truth["params"].values())}
    assert 0 < report["load_seconds"] < 10


def test_inspect_table_and_explicit_params(zoo_model, capsys):
    model = zoo_model("squeezenet1_0", "pdmodel")
    params = model[: -len(".pdmodel")] + ".pdiparams"
    assert main(["inspect", model, "--params", params]) == 0
    out = capsys.readouterr().out
    assert "layout       files" in out
    assert "x       [-1, 3, 224, 224]  float32" in out
    assert "conv2d" in out and "load time" in out


def test_inspect_bad_model_exits_2_with_one_line(tmp_path, capsys):
    (tmp_path / "__model__").write_bytes(b"garbage!")
    assert main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("nnadapter-bridge inspect: error: ") and str(tmp_path / "__model__") in err
