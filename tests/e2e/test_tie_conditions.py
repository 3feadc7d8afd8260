"""Run-time conditions: top_k and unstable argsort on a device give Paddle's answer when their keys tie.

TOP_K orders equal keys by index; Paddle's top_k leaves them as std::partial_sort / std::nth_element do, its unstable
argsort as std::sort does. The converters add run-time condition outputs (no two keys picked tie, nor the last
picked with the best left out; no NaN): where one fails, the engine runs that op alone on the host kernel, which
replays Paddle's order, and leaves the rest on the device. CenterNet and FairMOT take the top 100 of a peak-masked
heatmap that is mostly zeros, so on real data the keys tie whenever k exceeds the peaks.
"""
from __future__ import annotations

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.errors import BridgeError
from support.converter_harness import pir_program, run_recording_splits
from support.tolerances import assert_op_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
HEATMAP = np.random.default_rng(0).standard_normal((1, 4, 16, 16)).astype(np.float32)


def peak_top_k(k: int):
    """CenterNet's decode head: sigmoid, a 3x3 max pool keeping the peaks, the top k of the flattened map."""

    def build(x):
        import paddle
        import paddle.nn.functional as F

        heat = F.sigmoid(x)
        keep = paddle.cast(F.max_pool2d(heat, 3, 1, 1) == heat, "float32")
        values, indices = paddle.topk(paddle.reshape(heat * keep, [1, -1]), k)
        return values * 2.0, indices

    return build


@pytest.fixture(scope="module")
def tied_heatmap(tmp_path_factory):
    """k = 300 of 1024 positions with about 170 peaks: the last ~130 picked are zeros, which tie."""
    saved = pir_program(tmp_path_factory.mktemp("tied"), peak_top_k(300), {"x": HEATMAP})
    values = saved.outputs[0].reshape(-1)
    assert (values == 0).sum() > 50  # the fixture does tie
    indices = saved.outputs[1].reshape(-1)
    zeros = indices[values == 0]
    assert not np.array_equal(zeros, np.sort(zeros))  # and Paddle's order of the tied keys is not index order
    return saved


@pytest.fixture(scope="module")
def untied_heatmap(tmp_path_factory):
    saved = pir_program(tmp_path_factory.mktemp("untied"), peak_top_k(40), {"x": HEATMAP})
    assert np.unique(saved.outputs[0]).size == 40
    return saved


def predictor_for(saved, device: str, cache_dir=None, strict: bool = False):
    config = nb.Config()
    config.set_model_file(saved.model_path)
    if saved.params_path:
        config.set_param_file(saved.params_path)
    config.set_nnadapter_device_names([device])
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    config.set_strict(strict)
    return nb.create_predictor(config)


def assert_paddles(got, saved):
    """Indices exactly Paddle's; values within DESIGN's op tolerance (a device's sigmoid may round otherwise)."""
    for g, w in zip(got, saved.outputs):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            assert_op_close(g, w)


@pytest.mark.parametrize("device", DEVICES)
def test_tied_keys_send_only_the_top_k_to_the_host(tied_heatmap, device):
    predictor = predictor_for(tied_heatmap, device)
    assert not predictor.host_ops and len(predictor.engines) == 1  # the whole head placed on the device
    got, said = run_recording_splits(predictor, tied_heatmap.feeds)
    assert_paddles(got, tied_heatmap)
    assert len(said) == 1 and "top_k_v2" in said[0] and "its keys tie" in said[0], said
    assert "the other 7 ops on " + device in said[0]
    builds = predictor.stats.builds
    got, said = run_recording_splits(predictor, tied_heatmap.feeds)
    assert_paddles(got, tied_heatmap)
    assert not said and predictor.stats.builds == builds  # the split runs at once
    assert predictor.stats.subgraph_host_runs == 0  # never the whole subgraph on the host
    where = {p.op.type: p for p in predictor.placements()}
    assert where["top_k_v2"].device is None and where["top_k_v2"].at_run
    assert "its keys tie" in where["top_k_v2"].reason
    assert where["sigmoid"].device == device and where["pool2d"].device == device


@pytest.mark.parametrize("device", DEVICES)
def test_keys_that_do_not_tie_stay_on_the_device(untied_heatmap, device):
    predictor = predictor_for(untied_heatmap, device)
    for _ in range(2):
        got, said = run_recording_splits(predictor, untied_heatmap.feeds)
        assert_paddles(got, untied_heatmap)
        assert not said
    assert predictor.stats.subgraph_host_runs == 0 and predictor.stats.host_op_runs == 0
    assert all(p.device == device for p in predictor.placements())


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_a_program_restored_from_the_cache_checks_its_conditions(tmp_path, tied_heatmap, device):
    """The conditions are outputs of the compiled program and name their op by its index: a warm start restores the
    program from the `.nnc`, converts nothing, and still sends only the top_k to the host."""
    cache = tmp_path / "cache"
    for start in ("cold", "warm"):
        predictor = predictor_for(tied_heatmap, device, cache)
        got, said = run_recording_splits(predictor, tied_heatmap.feeds)
        assert_paddles(got, tied_heatmap)
        assert len(said) == 1 and "its keys tie" in said[0], start
        if start == "warm":
            assert predictor.stats.cache_hits_file >= 1
        predictor.close()


def test_strict_mode_refuses_rather_than_answer_otherwise_than_paddle(tied_heatmap):
    predictor = predictor_for(tied_heatmap, "microsoft_onnxruntime", strict=True)
    predictor.get_input_by_name("x").from_numpy(tied_heatmap.feeds["x"])
    with pytest.raises(BridgeError, match="its keys tie.*strict mode"):
        predictor.run()


def argsort_program(tmp_path, stable: bool):
    """Scores quantised to a few levels (a detector's ranking of rounded confidences) sorted descending, then used."""
    import paddle

    x = np.random.default_rng(3).integers(0, 5, (2, 40)).astype(np.float32) / 4
    return pir_program(tmp_path, lambda x: paddle.argsort(x * 3.0, axis=-1, descending=True, stable=stable) + 1,
                       {"x": x})


@pytest.mark.parametrize("device", DEVICES)
def test_an_unstable_argsort_of_tied_keys_matches_paddle(tmp_path, device):
    saved = argsort_program(tmp_path, stable=False)
    predictor = predictor_for(saved, device)
    got, said = run_recording_splits(predictor, saved.feeds)
    assert_paddles(got, saved)
    assert len(said) == 1 and "argsort" in said[0] and "std::sort" in said[0]


@pytest.mark.parametrize("device", DEVICES)
def test_a_stable_argsort_of_tied_keys_stays_on_the_device(tmp_path, device):
    """A stable argsort orders equal keys by index, as TOP_K does: no condition, nothing moves."""
    saved = argsort_program(tmp_path, stable=True)
    predictor = predictor_for(saved, device)
    got, said = run_recording_splits(predictor, saved.feeds)
    assert_paddles(got, saved)
    assert not said and all(p.device == device for p in predictor.placements())


@pytest.mark.parametrize("device", ["intel_openvino", "microsoft_onnxruntime"])
def test_a_top_k_alone_in_its_subgraph_runs_on_the_host_for_tied_shapes(tmp_path, device):
    """Nothing to split around: the subgraph of the top_k alone runs on the host kernel for those shapes, said once."""
    import paddle

    x = np.zeros((2, 64), np.float32)
    x[:, ::9] = np.arange(8, dtype=np.float32)  # eight distinct keys a row, the rest tie at zero
    saved = pir_program(tmp_path, lambda x: list(paddle.topk(x, 12, axis=-1)), {"x": x})
    predictor = predictor_for(saved, device)
    assert len(predictor.engines) == 1 and not predictor.host_ops
    (engine,) = predictor.engines.values()
    assert [op.type for op in engine.subgraph.ops] == ["top_k_v2"]
    for run in range(2):
        got, said = run_recording_splits(predictor, saved.feeds)
        assert_paddles(got, saved)
        assert len(said) == (1 if run == 0 else 0) and (run or "its keys tie" in said[0])
    where = {p.op.type: p for p in predictor.placements()}
    assert where["top_k_v2"].device is None and "its keys tie" in where["top_k_v2"].reason
