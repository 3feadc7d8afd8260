"""The decoded program kept in the model cache dir (loader.snapshot): a start that finds the files unchanged reads
it instead of parsing the model file, and gets the very graph a parse gives; anything else parses.

The graphs compared here come from the loader's parse (tests/loader/test_loader_zoo.py checks that one against
Paddle's own load), so "the same graph" is checked against the parse, value types included.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from nnadapter_bridge.loader import graph as graph_module
from nnadapter_bridge.loader import load_model, snapshot
from nnadapter_bridge.loader.framework_pb2 import AttrType as ProtoAttrType
from nnadapter_bridge.loader.program import AttrType, BlockRef, VarRef
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning
from support.predictor_programs import add_relu_scale_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def not_racy(monkeypatch):
    """Files written by the test a moment ago count as old enough to be trusted (RACY_NS is tested apart)."""
    monkeypatch.setattr(snapshot, "RACY_NS", -(1 << 62))


def _no_parse(monkeypatch):
    def refuse(source):
        raise AssertionError(f"parsed {source.model_path} although its snapshot should have been read")

    monkeypatch.setattr(graph_module, "_load", refuse)


def _snapshots(cache) -> list:
    snapshot.wait_for_snapshot_writes()  # load_model writes it in a thread of its own
    return sorted(n for n in os.listdir(cache) if n.startswith("program-"))


def _assert_same_graph(got, want):
    assert snapshot._same(got.blocks, want.blocks)
    assert list(got.params) == list(want.params)
    for name, array in want.params.items():
        assert got.params[name].dtype == array.dtype and got.params[name].shape == array.shape, name
        assert got.params[name].tobytes() == array.tobytes(), name
        assert not got.params[name].flags.writeable
    assert (got.source_digest, got.format, got.format_version, got.layout, got.inputs, got.outputs) == \
        (want.source_digest, want.format, want.format_version, want.layout, want.inputs, want.outputs)


def test_attr_type_is_framework_protos():
    assert {t.name: t.value for t in AttrType} == dict(ProtoAttrType.items())


def test_a_second_load_reads_the_snapshot_and_gives_the_parsed_graph(tmp_path, monkeypatch, not_racy):
    model = add_relu_scale_model(tmp_path / "m", extra_ops=["relu"])
    cache = tmp_path / "cache"
    cache.mkdir()
    parsed = load_model(model, snapshot_dir=str(cache))
    assert len(_snapshots(cache)) == 1
    _no_parse(monkeypatch)
    kept = load_model(model, snapshot_dir=str(cache))
    _assert_same_graph(kept, parsed)
    # The ProgramDesc (only saving a .nb reads it) is parsed again on first use.
    assert kept.program_desc.SerializeToString() == parsed.program_desc.SerializeToString()


@pytest.mark.slow
@pytest.mark.parametrize("form", ["pdmodel", "combined", "pir"])
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50"])
def test_zoo_models_round_trip(zoo_model, pir_model, tmp_path, monkeypatch, not_racy, name, form):
    path = pir_model(name) if form == "pir" else zoo_model(name, form)  # combined: DIR/__model__ + DIR/__params__
    parsed = load_model(path, snapshot_dir=str(tmp_path))
    assert len(_snapshots(tmp_path)) == 1
    _no_parse(monkeypatch)
    _assert_same_graph(load_model(path, snapshot_dir=str(tmp_path)), parsed)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bigru_crf", "rtdetr", "ppocrv5_rec", "ernie_seq_cls", "yolov3", "swin"])
def test_real_zoo_models_round_trip(real_zoo_model, tmp_path, monkeypatch, not_racy, name):
    """Control flow (bigru_crf's while), detection heads, transformers: what the encoding must carry exactly."""
    path = real_zoo_model(name)
    parsed = load_model(path, snapshot_dir=str(tmp_path))
    assert len(_snapshots(tmp_path)) == 1, "the graph did not round-trip exactly, so no snapshot was kept"
    _no_parse(monkeypatch)
    _assert_same_graph(load_model(path, snapshot_dir=str(tmp_path)), parsed)


def test_a_model_rewritten_with_the_same_size_and_times_is_parsed_again(tmp_path, not_racy):
    """The cheap content check: same size, same modification (and access) time, same inode: the status-change
    time, which no user can set back, tells the files apart."""
    model = add_relu_scale_model(tmp_path / "a", weight=[1.0, 2.0, 3.0, 4.0], extra_ops=["relu"])
    other = add_relu_scale_model(tmp_path / "b", weight=[5.0, 6.0, 7.0, 8.0], extra_ops=["tanh"])
    first = load_model(model, snapshot_dir=str(tmp_path))
    assert len(_snapshots(tmp_path)) == 1
    for name in ("model.pdmodel", "model.pdiparams"):
        path = os.path.join(os.path.dirname(model), name)
        before = os.stat(path)
        with open(os.path.join(os.path.dirname(other), name), "rb") as f:
            data = f.read()
        assert len(data) == before.st_size, name
        with open(path, "r+b") as f:  # in place: the same inode
            f.write(data)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = os.stat(path)
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    again = load_model(model, snapshot_dir=str(tmp_path))
    assert [op.type for op in first.ops()][-2] == "relu" and [op.type for op in again.ops()][-2] == "tanh"
    assert again.params["w"].tolist() == [5.0, 6.0, 7.0, 8.0]


def test_files_changed_a_moment_ago_get_no_snapshot(tmp_path):
    model = add_relu_scale_model(tmp_path / "m")  # written just now: within RACY_NS of the load
    load_model(model, snapshot_dir=str(tmp_path))
    assert _snapshots(tmp_path) == []


def test_a_snapshot_of_another_loader_is_stale(tmp_path, monkeypatch, not_racy):
    model = add_relu_scale_model(tmp_path / "m")
    load_model(model, snapshot_dir=str(tmp_path))
    assert len(_snapshots(tmp_path)) == 1
    monkeypatch.setattr(snapshot, "loader_code_digest", lambda: "0" * 16)
    parses = []
    real = graph_module._load
    monkeypatch.setattr(graph_module, "_load", lambda source: parses.append(source) or real(source))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stale is not damaged: no warning
        load_model(model, snapshot_dir=str(tmp_path))
        snapshot.wait_for_snapshot_writes()
    assert len(parses) == 1


@pytest.mark.parametrize("damage", ["truncated", "not json", "bad tag", "bad tag in a list", "attributes not an object",
                                    "param beyond the file", "symlink"])
def test_a_damaged_snapshot_is_one_warning_and_a_parse(tmp_path, not_racy, damage):
    model = add_relu_scale_model(tmp_path / "m")
    want = load_model(model, snapshot_dir=str(tmp_path))
    (name,) = _snapshots(tmp_path)
    path = tmp_path / name
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "not json":
        path.write_bytes(b"\x00" * 64)
    elif damage == "bad tag":
        path.write_bytes(data.replace(b'"axis":-1', b'"axis":{"x":1}'))
    elif damage == "bad tag in a list":
        path.write_bytes(data.replace(b'"axis":-1', b'"axis":[1,{"x":1}]'))
    elif damage == "attributes not an object":
        import orjson

        document = orjson.loads(data)
        document["blocks"][0]["ops"][-1][5] = [1]
        path.write_bytes(orjson.dumps(document))
    elif damage == "param beyond the file":
        import orjson

        document = orjson.loads(data)
        document["param_places"][0][3] = 1 << 40
        path.write_bytes(orjson.dumps(document))
    else:
        target = tmp_path / "elsewhere.json"
        target.write_bytes(data)
        path.unlink()
        path.symlink_to(target)
    with pytest.warns(NncCacheWarning, match="program snapshot .* is unusable"):
        got = load_model(model, snapshot_dir=str(tmp_path))
    _assert_same_graph(got, want)


@pytest.mark.parametrize("value", [
    1, -(1 << 62), 2.5, -0.0, math.inf, -math.inf, "text", True, None, [], [1, 2], [1.0, 2.0], (1, 2),
    [True, False], ["a", "b"], ["a", "a", "b"], ("a", "b"), [["x", "y"], ["y"]], [""], BlockRef(3),
    [BlockRef(1), BlockRef(2)], VarRef("v"), [VarRef("a")], [[1], [2.0]],
])
def test_attribute_values_round_trip_with_their_types(value):
    import orjson

    strings: dict = {}
    data = orjson.loads(orjson.dumps(snapshot._encode(value, strings)))
    again = snapshot._decode(data, list(strings))
    assert snapshot._same(again, value)


def test_nan_round_trips():
    import orjson

    again = snapshot._decode(orjson.loads(orjson.dumps(snapshot._encode([math.nan], {}))), [])
    assert isinstance(again[0], float) and math.isnan(again[0])


@pytest.mark.parametrize("value", [np.float32(1.0), {"a": 1}, b"raw", 1 << 70])
def test_a_value_the_encoding_cannot_carry_leaves_the_model_without_a_snapshot(tmp_path, not_racy, value):
    model = add_relu_scale_model(tmp_path / "m")
    real = graph_module._load

    def with_odd_attr(source):
        graph = real(source)
        graph.blocks[0].ops[-1].attrs["odd"] = value
        return graph

    import unittest.mock

    with unittest.mock.patch.object(graph_module, "_load", with_odd_attr):
        load_model(model, snapshot_dir=str(tmp_path))
    assert _snapshots(tmp_path) == []


def test_a_model_given_as_bytes_gets_no_snapshot(tmp_path, not_racy):
    model = add_relu_scale_model(tmp_path / "m")
    with open(model, "rb") as f, open(model[: -len(".pdmodel")] + ".pdiparams", "rb") as g:
        load_model(model_bytes=f.read(), params_bytes=g.read(), snapshot_dir=str(tmp_path))
    assert _snapshots(tmp_path) == []


def test_the_predictor_keeps_no_snapshot_with_an_integrity_key(tmp_path):
    """A warm start with an integrity key parses: the snapshot has no MAC."""
    model = add_relu_scale_model(tmp_path / "m")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        import numpy as np
        import nnadapter_bridge as nb
        from nnadapter_bridge.loader import snapshot
        snapshot.RACY_NS = -(1 << 62)
        for key in (None, b"k" * 32):
            config = nb.Config()
            config.set_model_file({str(model)!r})
            config.set_nnadapter_device_names(["builtin_device"])
            cache = {str(tmp_path)!r} + ("/keyed" if key else "/plain")
            config.set_nnadapter_model_cache_dir(cache)
            if key:
                config.set_nnadapter_model_cache_key(key)
            predictor = nb.create_predictor(config)
            predictor.get_input(0).from_numpy(np.ones((2, 4), np.float32))
            predictor.run()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(_snapshots(tmp_path / "plain")) == 1
    assert _snapshots(tmp_path / "keyed") == []


def test_a_copy_of_the_model_elsewhere_gets_its_own_snapshot(tmp_path, monkeypatch, not_racy):
    model = add_relu_scale_model(tmp_path / "m")
    cache = tmp_path / "cache"
    cache.mkdir()
    load_model(model, snapshot_dir=str(cache))
    copy = shutil.copytree(tmp_path / "m", tmp_path / "copy")
    graph = load_model(os.path.join(copy, "model.pdmodel"), snapshot_dir=str(cache))
    assert graph.model_path.startswith(str(copy))
    assert len(_snapshots(cache)) == 2  # keyed by the files' real paths
    _no_parse(monkeypatch)
    assert load_model(os.path.join(copy, "model.pdmodel"), snapshot_dir=str(cache)).model_path == graph.model_path


@pytest.mark.parametrize("a, b", [([1], [True]), ([1.0], [1]), (-0.0, 0.0), ([1, 2], (1, 2)), (["a", "b"], ["a", "c"]),
                                  ({"x": 1, "y": 2}, {"y": 2, "x": 1}), ([["a"]], [["a", "b"]])])
def test_the_round_trip_check_tells_types_and_values_apart(a, b):
    assert not snapshot._same(a, b) and not snapshot._same(b, a)


def test_a_per_var_params_directory_gets_no_snapshot(zoo_model, tmp_path, not_racy):
    """One file per parameter (DIR/__model__ + DIR/<var>): hundreds of identities to check; parsed at every start."""
    load_model(zoo_model("mobilenet_v2", "per-var"), snapshot_dir=str(tmp_path))
    assert _snapshots(tmp_path) == []
