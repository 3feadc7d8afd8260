"""Issue 31: the partition plan kept in the model cache dir (subgraph.plan_store).

A warm start of the same program reads its plan and runs the detector not at all, with the same subgraphs, host
ops, run order and reasons as a start that partitions; a model changed in place (same size, same modification
time) gets a fresh plan; other partition settings another plan; a damaged plan file is one warning, then the
plan is worked out again and the file rewritten. Read from counters, files and the partitions themselves.
"""
from __future__ import annotations

import glob
import json
import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning
from nnadapter_bridge.subgraph import plan as plan_module
from nnadapter_bridge.subgraph.plan import HostPlacementWarning
from support.predictor_programs import add_relu_scale_model, reference_add_relu_scale

X = np.random.default_rng(31).standard_normal((2, 4)).astype(np.float32)


def start(model, cache_dir, min_subgraph_size=1):
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(["builtin_device"])
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    config.set_min_subgraph_size(min_subgraph_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HostPlacementWarning)  # erf stays on the host on purpose
        predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    return predictor


def layout(predictor) -> tuple:
    """Every subgraph's ops and boundary names, the host ops, and the run order."""
    result = predictor.partition
    return (tuple((s.index, tuple(op.index for op in s.ops), tuple(s.input_names), tuple(s.output_names),
                   tuple(s.weight_names), tuple(s.local_names), tuple(s.unused_names)) for s in result.subgraphs),
            tuple(op.index for op in result.host_ops),
            tuple(("subgraph", step.ops[0].index) if hasattr(step, "ops") else ("op", step.index)
                  for step in result.steps()))


def plan_files(cache_dir) -> list:
    return sorted(glob.glob(os.path.join(str(cache_dir), "plan-*.json")))


@pytest.fixture
def model(tmp_path):
    return add_relu_scale_model(tmp_path / "model", extra_ops=["erf", "relu", "sigmoid"])


@pytest.fixture
def detections(monkeypatch):
    """Counts the detector's runs in plan_partition."""
    calls = []
    real = plan_module.detect_subgraphs

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_module, "detect_subgraphs", counting)
    return calls


def test_a_warm_start_reads_the_plan_and_partitions_as_the_detector(model, tmp_path, detections):
    cache = tmp_path / "cache"
    fresh = start(model, None)
    first = start(model, cache)
    assert len(detections) == 2 and len(plan_files(cache)) == 1
    second = start(model, cache)
    assert len(detections) == 2, "the warm start ran the detector"
    assert layout(second) == layout(first) == layout(fresh)
    assert first.host_ops, "the model must keep an op on the host for this test to mean anything"
    assert second.support.conversions == 0
    assert second.unsupported_reasons() == first.unsupported_reasons() == fresh.unsupported_reasons()
    assert [p.as_dict() for p in second.plan.placements()] == [p.as_dict() for p in first.plan.placements()]
    np.testing.assert_array_equal(second.get_output(0).numpy(), first.get_output(0).numpy())


def test_a_model_changed_in_place_to_the_same_size_and_time_gets_a_fresh_plan(model, tmp_path, detections):
    cache = tmp_path / "cache"
    first = start(model, cache)
    before = os.stat(model)
    with open(model, "rb") as f:
        data = f.read()
    assert data.count(b"erf") == 1
    with open(model, "wb") as f:
        f.write(data.replace(b"erf", b"exp"))  # erf has no converter; exp runs on the device
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(model)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    detections.clear()
    second = start(model, cache)
    assert detections == [1]
    assert first.host_ops and not second.host_ops, "exp runs on the device: no host op is left"
    assert len(plan_files(cache)) == 2
    expected = 1.0 / (1.0 + np.exp(-np.maximum(np.exp(reference_add_relu_scale(X)), 0.0)))
    np.testing.assert_allclose(second.get_output(0).numpy(), expected, rtol=1e-5)


def test_other_partition_settings_get_another_plan(model, tmp_path, detections):
    cache = tmp_path / "cache"
    start(model, cache)
    detections.clear()
    bigger = start(model, cache, min_subgraph_size=3)
    assert detections == [1] and len(plan_files(cache)) == 2
    assert [len(s.ops) for s in bigger.partition.subgraphs] == [3]  # the [relu, sigmoid] cluster went to the host
    assert layout(start(model, cache, min_subgraph_size=3)) == layout(bigger) and detections == [1]


def _damage(path, how: str) -> None:
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    if how == "not json":
        data = b"{not json"
    else:
        if how == "wrong key":
            document["key"] = "0" * 64
        elif how == "index out of range":
            document["subgraphs"][0]["ops"].append(99)
        elif how == "op in two subgraphs":
            document["subgraphs"][1]["ops"].insert(0, document["subgraphs"][0]["ops"][-1])
        elif how == "step left out":
            document["steps"].pop()
        elif how == "step twice":
            document["steps"].append(document["steps"][0])
        elif how == "name not a string":
            document["subgraphs"][0]["inputs"] = [1]
        elif how == "other op count":
            document["ops"] += 1
        data = json.dumps(document).encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("how", ["not json", "wrong key", "index out of range", "op in two subgraphs",
                                 "step left out", "step twice", "name not a string", "other op count"])
def test_a_damaged_plan_is_one_warning_then_rewritten(model, tmp_path, detections, how):
    cache = tmp_path / "cache"
    first = start(model, cache)
    (path,) = plan_files(cache)
    _damage(path, how)
    detections.clear()
    with pytest.warns(NncCacheWarning, match="partition plan cache") as caught:
        second = start(model, cache)
    assert len([w for w in caught if "partition plan cache" in str(w.message)]) == 1
    assert detections == [1] and layout(second) == layout(first)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NncCacheWarning)
        third = start(model, cache)  # the file was rewritten whole
    assert detections == [1] and layout(third) == layout(first)


def test_a_plan_file_that_is_a_symbolic_link_is_not_followed(model, tmp_path, detections):
    cache = tmp_path / "cache"
    first = start(model, cache)
    (path,) = plan_files(cache)
    os.replace(path, tmp_path / "elsewhere.json")
    os.symlink(tmp_path / "elsewhere.json", path)
    detections.clear()
    with pytest.warns(NncCacheWarning, match="partition plan cache"):
        second = start(model, cache)
    assert detections == [1] and layout(second) == layout(first)


@pytest.fixture(scope="module")
def loop_model(tmp_path_factory):
    """relu, then a loop whose body holds a device cluster and kthvalue (no converter: on the host), saved the Paddle 3
    way."""
    from support.converter_harness import pir_program

    def build(x):
        import paddle

        def body(i, acc):
            values, _ = paddle.kthvalue(acc, 2, axis=-1, keepdim=True)
            return i + 1, paddle.tanh(acc + values) * 0.5
        start = paddle.nn.functional.relu(x)
        _, acc = paddle.static.nn.while_loop(lambda i, acc: i < 3, body, [paddle.full([1], 0, "int64"), start])
        return [acc]
    return pir_program(tmp_path_factory.mktemp("plan_loop"), build, {"x": X[:, :3]})


def body_layout(predictor) -> tuple:
    """Each body's subgraphs (index, block, ops, boundary names), host ops and run order."""
    found = []
    for block, body in sorted(predictor.partition.bodies.items()):
        found.append((block, tuple((s.index, s.block, tuple(op.index for op in s.ops), tuple(s.input_names),
                                    tuple(s.output_names)) for s in body.subgraphs),
                      tuple(op.index for op in body.host_ops),
                      tuple(("subgraph", step.index) if hasattr(step, "ops") else ("op", step.index)
                            for step in body.steps())))
    return tuple(found)


def test_a_warm_start_reads_the_bodies_partitions_too(loop_model, tmp_path, detections):
    cache = tmp_path / "cache"

    def loop_start():
        config = nb.Config()
        config.set_model_file(loop_model.model_path)
        config.set_nnadapter_device_names(["builtin_device"])
        config.set_nnadapter_model_cache_dir(str(cache))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HostPlacementWarning)  # kthvalue and the loop: on the host on purpose
            predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(X[:, :3])
        predictor.run()
        return predictor

    first = loop_start()
    (saved,) = plan_files(cache)
    with open(saved, encoding="utf-8") as f:
        document = json.load(f)
    assert [entry["block"] for entry in document["bodies"]] == sorted(first.partition.bodies)
    second = loop_start()
    assert len(detections) == 1  # the second start read the plan
    assert body_layout(second) == body_layout(first) and body_layout(first)
    assert any(body.subgraphs for body in second.partition.bodies.values())
    np.testing.assert_array_equal(second.get_output(0).numpy(), first.get_output(0).numpy())
    np.testing.assert_allclose(first.get_output(0).numpy(), loop_model.outputs[0], rtol=1e-5, atol=1e-6)
    # A body entry naming a block the program does not have is a damaged plan: one warning, partitioned afresh.
    document["bodies"][0]["block"] = 99
    with open(saved, "w", encoding="utf-8") as f:
        json.dump(document, f)
    with pytest.warns(NncCacheWarning, match="is not a block of this program"):
        third = loop_start()
    assert len(detections) == 2 and body_layout(third) == body_layout(first)
