"""`nnadapter-bridge convert`: compiles every subgraph into <cache dir>/<token>.nnc, reports tokens, files and
sizes, and a second convert restores everything from the cache; bad options are one-line errors."""
from __future__ import annotations

import json
import os
import re

import pytest

from nnadapter_bridge.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YOLO_CONFIG = os.path.join(ROOT, "configs", "partition_yolo_detector.txt")
TOKEN = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def yolo(zoo_model):
    return zoo_model("yolo_detector")


def convert_json(capsys, *argv):
    assert main(["convert", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_first_convert_compiles_and_writes_files_second_restores(yolo, capsys, tmp_path):
    cache = tmp_path / "cache"
    first = convert_json(capsys, yolo, "--cache-dir", str(cache), "--partition-config", YOLO_CONFIG)
    assert (first["num_subgraphs"], first["compiled"], first["restored"]) == (2, 2, 0)
    assert [p["subgraph"] for p in first["programs"]] == [0, 1]
    assert [p["ops"] for p in first["programs"]] == [11, 1]
    for p in first["programs"]:
        assert TOKEN.match(p["token"]) and p["source"] == "compiled"
        assert p["file"] == os.path.join(str(cache), p["token"] + ".nnc")
        assert os.path.getsize(p["file"]) == p["bytes"] > 0
    assert sorted(f for f in os.listdir(cache) if f.endswith(".nnc")) == \
        sorted(p["token"] + ".nnc" for p in first["programs"])
    assert first["input_shapes"] == {"image": [1, 3, 64, 64], "im_shape": [1, 2]}

    second = convert_json(capsys, yolo, "--cache-dir", str(cache), "--partition-config", YOLO_CONFIG)
    assert (second["compiled"], second["restored"]) == (0, 2)
    assert [p["token"] for p in second["programs"]] == [p["token"] for p in first["programs"]]
    assert {p["source"] for p in second["programs"]} == {"restored from cache"}


def test_input_shape_and_dynamic_shape_change_the_token(yolo, capsys, tmp_path):
    base = convert_json(capsys, yolo, "--cache-dir", str(tmp_path))
    batch2 = convert_json(capsys, yolo, "--cache-dir", str(tmp_path), "--input-shape", "image:2,3,64,64",
                          "--input-shape", "im_shape:2,2")
    dynamic = convert_json(capsys, yolo, "--cache-dir", str(tmp_path), "--dynamic-shape",
                           "image:1,3,64,64;2,3,64,64")
    assert batch2["input_shapes"]["image"] == [2, 3, 64, 64]
    assert dynamic["dynamic_shapes"] == {"image": [[1, 3, 64, 64], [2, 3, 64, 64]]}
    tokens = {d["programs"][0]["token"] for d in (base, batch2, dynamic)}
    assert len(tokens) == 3 and all(TOKEN.match(t) for t in tokens)
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".nnc")]) == 3


def test_table_output(yolo, capsys, tmp_path):
    assert main(["convert", yolo, "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 compiled, 0 restored" in out
    row = next(line for line in out.splitlines() if line.lstrip().startswith("0 "))
    token = next(word for word in row.split() if TOKEN.match(word))
    assert "compiled" in row and os.path.join(str(tmp_path), token + ".nnc") in row


@pytest.mark.parametrize("argv, message", [
    (["--input-shape", "image=1,3,64,64"], "--input-shape 'image=1,3,64,64': expected NAME:D,D,..."),
    (["--input-shape", "image:1,3,x,64"], "axis 2 is 'x', not an integer"),
    (["--input-shape", "image:1,3,0,64"], "axis 2 is 0; every size must be positive"),
    (["--input-shape", "photo:1,3,64,64"], "the model has no input 'photo'; its inputs are image, im_shape"),
    (["--input-shape", "image:1,3,64"], "input 'image' expects float32 with shape [-1, 3, 64, 64]"),
    (["--dynamic-shape", "image:1,3,64,64;2,3"], "the shapes have different ranks"),
    (["--device", "nope"], "no NNAdapter device named 'nope'"),
    (["--seed", "-1"], "--seed -1: must be 0 or more"),
    (["--dynamic-shape", "image:-1,3,64,64"], "the first shape [-1, 3, 64, 64] has -1 axes"),
])
def test_errors_are_one_line(yolo, capsys, tmp_path, argv, message):
    assert main(["convert", yolo, "--cache-dir", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("cache_dir, message", [
    ("/proc/nnadapter-bridge-test", "--cache-dir /proc/nnadapter-bridge-test: cannot create the directory: "),
    ("{d}/file/cache", "--cache-dir {d}/file/cache: cannot create the directory: "),
    ("{d}/file", "--cache-dir {d}/file: exists and is not a directory"),
])
def test_a_cache_dir_that_cannot_be_made_is_one_line(yolo, capsys, tmp_path, cache_dir, message):
    (tmp_path / "file").write_text("x")
    assert main(["convert", yolo, "--cache-dir", cache_dir.format(d=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(d=tmp_path) in err, err


def test_help_says_a_later_predictor_needs_the_dynamic_shape_info(capsys):
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "also needs the same dynamic shape info" in text
    assert "`run`/`bench --dynamic-shape` with the same values" in text


def test_cache_dir_is_required(yolo, capsys):
    assert main(["convert", yolo]) == 2
    assert "--cache-dir" in capsys.readouterr().err
