"""grid_sample, top_k and take_along_axis at their edges, against Paddle Inference on each device.

grid_sample: both modes x the three padding modes x align_corners, on grid points exactly at -1 / 1, just
outside, far outside and on exact half-pixel ties (the nearest mode's rounding: Paddle rounds half to even,
also after a reflection folds a point onto a tie). top_k: tie-heavy rows through both of Paddle's CPU paths
(k * 64 < n takes a partial sort, else nth_element + sort), largest and smallest, integers, NaN. Values must
match exactly; indices exactly where the value is not tied with another selected or rejected one (Paddle's tie
order is whatever libstdc++'s partial sort / introselect leave, which no SDK reproduces). take_along_axis (on the
device: a GATHER at row-major offsets): negative indices, an index smaller than the input on the other axes
(broadcast=False) and a broadcast index.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from support.converter_harness import pir_program, run_predictor

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
GRID_COMBOS = list(itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"], [True, False]))


def _grid(values) -> np.ndarray:
    gx, gy = np.meshgrid(np.asarray(values, np.float32), np.asarray(values, np.float32)[::-1])
    return np.stack([gx, gy], -1)[None].astype(np.float32)


@pytest.fixture(scope="module")
def grid_program(tmp_path_factory):
    rng = np.random.default_rng(3)
    # a 4 x 5 input: with align_corners false, y = -0.5 / 0.5 and x = -0.6 / 0.2 are exact half-pixel ties; with
    # reflection, y = -2.5 and 1.5 fold onto one (2.5)
    edges = [-1, 1, -1.05, 1.07, -3, 3.2, 0, 0.25, -0.75, 0.5, -0.5, 0.2, -0.6, 0.999, -1.0001, 1.5, -2.5]
    feeds = {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32),
             "g": np.concatenate([_grid(edges), _grid(edges[::-1])])}

    def build(x, g):
        import paddle.nn.functional as F
        return [F.grid_sample(x, g, mode=m, padding_mode=p, align_corners=a) for m, p, a in GRID_COMBOS]
    return pir_program(tmp_path_factory.mktemp("grid_sample"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_grid_sample_edges_and_ties_match_paddle(grid_program, device):
    got = run_predictor(grid_program, device)
    for (mode, padding, align), out, want in zip(GRID_COMBOS, got, grid_program.outputs):
        # bilinear weights are products of two float32 fractions: a few ulps of rounding
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{mode} / {padding} / align_corners={align} on {device}")


@pytest.fixture(scope="module")
def nonfinite_grid_program(tmp_path_factory):
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32),
             "g": _grid([np.inf, -np.inf, np.nan, 0.5, 1e30, -1e30, 0.1])}

    def build(x, g):
        import paddle.nn.functional as F
        return [F.grid_sample(x, g, mode=m, padding_mode=p, align_corners=a) for m, p, a in GRID_COMBOS]
    return pir_program(tmp_path_factory.mktemp("grid_sample_nonfinite"), build, feeds)


# OpenVINO's GridSample clamps an infinite coordinate under border padding where Paddle's kernel computes NaN
# weights (inf - floor(inf)), and onnxruntime's reads 0 (or the border) at an infinite or NaN coordinate: both
# drivers make a grid holding one a run-time fault, and the part runs elsewhere
@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_grid_sample_nonfinite_grid_matches_paddle(nonfinite_grid_program, device):
    got = run_predictor(nonfinite_grid_program, device)
    for combo, out, want in zip(GRID_COMBOS, got, nonfinite_grid_program.outputs):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=f"{combo} on {device}")


TOPK_CASES = [("small", 4, -1, True), ("small", 4, -1, False), ("small", 10, -1, True), ("small", 2, 0, True),
              ("big", 5, -1, True), ("big", 5, -1, False), ("big", 300, -1, True), ("mid", 20, -1, True),
              ("mid", 39, -1, False), ("ints", 7, -1, True), ("ints", 3, 0, False)]


@pytest.fixture(scope="module")
def topk_program(tmp_path_factory):
    rng = np.random.default_rng(0)
    feeds = {"small": rng.integers(0, 3, (3, 10)).astype(np.float32),  # nth_element + sort
             "big": rng.integers(0, 4, (2, 700)).astype(np.float32),   # k * 64 < n: partial sort
             "mid": rng.integers(0, 5, (2, 40)).astype(np.float32),
             "ints": rng.integers(-2, 2, (4, 20)).astype(np.int64)}

    def build(small, big, mid, ints):
        import paddle
        env = dict(small=small, big=big, mid=mid, ints=ints)
        outs = []
        for name, k, axis, largest in TOPK_CASES:
            outs += list(paddle.topk(env[name], k, axis=axis, largest=largest))
        return outs
    return pir_program(tmp_path_factory.mktemp("top_k"), build, feeds)


def _assert_top_k(x, axis, values, indices, want_values, want_indices, what):
    np.testing.assert_array_equal(values, want_values, err_msg=what)
    assert indices.dtype == want_indices.dtype, what
    # each index points at its value, no index twice, and where a value is untied Paddle's index exactly
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis), values, err_msg=what)
    moved = np.moveaxis(indices, axis, -1).reshape(-1, indices.shape[axis])
    assert all(len(set(row)) == len(row) for row in moved.tolist()), what
    counts = np.moveaxis(x, axis, -1).reshape(moved.shape[0], -1)
    unique = np.array([[np.count_nonzero(row == v) == 1 for v in vals]
                       for row, vals in zip(counts, np.moveaxis(want_values, axis, -1).reshape(moved.shape))])
    want_moved = np.moveaxis(want_indices, axis, -1).reshape(moved.shape)
    np.testing.assert_array_equal(moved[unique], want_moved[unique], err_msg=what)


@pytest.mark.parametrize("device", DEVICES)
def test_top_k_ties_match_paddle_up_to_tie_order(topk_program, device):
    got = run_predictor(topk_program, device)
    for j, (name, k, axis, largest) in enumerate(TOPK_CASES):
        _assert_top_k(topk_program.feeds[name], axis, got[2 * j], got[2 * j + 1], topk_program.outputs[2 * j],
                      topk_program.outputs[2 * j + 1], f"topk({name}, k={k}, axis={axis}, largest={largest}) "
                                                       f"on {device}")


@pytest.fixture(scope="module")
def take_program(tmp_path_factory):
    rng = np.random.default_rng(0)
    feeds = {"arr": rng.standard_normal((4, 5, 3)).astype(np.float32),
             "negative": rng.integers(-5, 5, (4, 2, 3)).astype(np.int64),
             "smaller": rng.integers(0, 5, (2, 3, 1)).astype(np.int64),
             "broadcast": rng.integers(-4, 4, (1, 5, 3)).astype(np.int32),
             "last": rng.integers(0, 3, (4, 5, 1)).astype(np.int64)}

    def build(arr, negative, smaller, broadcast, last):
        import paddle
        return [paddle.take_along_axis(arr, negative, axis=1),
                paddle.take_along_axis(arr, smaller, axis=1, broadcast=False),
                paddle.take_along_axis(arr, broadcast, axis=0),
                paddle.take_along_axis(arr, last, axis=-1)]
    return pir_program(tmp_path_factory.mktemp("take_along_axis"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_take_along_axis_edges_match_paddle(take_program, device):
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(take_program.model_path)
    config.set_nnadapter_device_names([device])
    on_host = [p.op.label() for p in nb.create_predictor(config).placements(per_device=False)
               if p.op.type == "take_along_axis" and p.device is None]
    assert not on_host, f"take_along_axis left on the host by {device}: {on_host}"
    got = run_predictor(take_program, device)
    for k, (out, want) in enumerate(zip(got, take_program.outputs)):
        assert out.shape == want.shape, f"output {k} on {device}"
        np.testing.assert_array_equal(out, want, err_msg=f"output {k} on {device}")


@pytest.fixture(scope="module")
def topk_nan_program(tmp_path_factory):
    feeds = {"x": np.array([[1, np.nan, 3, 2, np.nan, 0], [5, 4, 3, 2, 1, np.nan]], np.float32)}

    def build(x):
        import paddle
        return list(paddle.topk(x, 3)) + list(paddle.topk(x, 3, largest=False))
    return pir_program(tmp_path_factory.mktemp("top_k_nan"), build, feeds)


# (OpenVINO's CPU TopK leaves NaN in place, topk([1, nan, 3, 2, nan, 0], 3) giving 1, nan, 3: the driver makes an
# input holding NaN a device fault, and the part runs elsewhere)
@pytest.mark.parametrize("device", ["builtin_device", "microsoft_onnxruntime", "intel_openvino"])
def test_top_k_orders_nan_as_paddle(topk_nan_program, device):
    got = run_predictor(topk_nan_program, device)
    for out, want in zip(got, topk_nan_program.outputs):
        np.testing.assert_array_equal(out, want, err_msg=device)


@pytest.fixture(scope="module")
def gather_nd_program(tmp_path_factory):
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((3, 5, 4)).astype(np.float32),
             "pairs": np.array([[[0, 4], [2, -1]], [[-3, 0], [1, 2]]], np.int64),  # negative entries wrap
             "rows": np.array([[2], [-1], [0]], np.int32),
             "triples": np.array([[1, 2, 3], [-1, -5, -4]], np.int64),
             "a": rng.standard_normal((2, 6)).astype(np.float32)}

    def build(x, pairs, rows, triples, a):
        import paddle
        return [paddle.gather_nd(x, pairs), paddle.gather_nd(x, rows), paddle.gather_nd(x, triples),
                paddle.bitwise_and(a > -0.5, a < 0.5).astype("int32"),
                paddle.bitwise_or(a > 1.0, a < -1.0).astype("int32"),
                paddle.bitwise_xor(a > 0, a > 0.5).astype("int32"), paddle.bitwise_not(a > 0).astype("int32")]
    return pir_program(tmp_path_factory.mktemp("gather_nd"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_gather_nd_and_bool_bitwise_ops_match_paddle_on_the_device(gather_nd_program, device):
    import nnadapter_bridge as nb
    from nnadapter_bridge.loader import load_model

    types = {op.type for op in load_model(gather_nd_program.model_path, None).ops()}
    assert {"gather_nd", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"} <= types, types
    config = nb.Config()
    config.set_model_file(gather_nd_program.model_path)
    config.set_nnadapter_device_names([device])
    on_host = [f"{p.op.label()}: {p.reason}" for p in nb.create_predictor(config).placements(per_device=False)
               if p.op.type.startswith(("gather_nd", "bitwise")) and p.device is None]
    assert not on_host, on_host
    got = run_predictor(gather_nd_program, device)
    for k, (out, want) in enumerate(zip(got, gather_nd_program.outputs)):
        assert out.shape == want.shape, f"output {k} on {device}"
        np.testing.assert_array_equal(out, want, err_msg=f"output {k} on {device}")


@pytest.fixture(scope="module")
def gather_nd_run_time_dims_program(tmp_path_factory):
    # X's indexed dim 1 is data-dependent (the positions a mask keeps), as DINO's encoder proposals are known only at
    # run time: the strides and the wrap of negative entries come from X's shape at run time.
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((2, 9, 4)).astype(np.float32),
             "keep": np.array([1, 0, 1, 1, 0, 1, 1, 1, 0], np.float32),
             "pairs": np.array([[[0, 4], [1, -1], [0, 0]], [[-2, 3], [1, 2], [0, -6]]], np.int64)}

    def build(x, keep, pairs):
        import paddle
        kept = paddle.gather(x, paddle.nonzero(keep > 0).reshape([-1]), axis=1)  # [2, 6 (data-dependent), 4]
        return [paddle.gather_nd(kept, pairs)]
    return pir_program(tmp_path_factory.mktemp("gather_nd_run_time_dims"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_gather_nd_with_indexed_dims_known_at_run_time_only_runs_on_the_device(gather_nd_run_time_dims_program,
                                                                               device):
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(gather_nd_run_time_dims_program.model_path)
    config.set_nnadapter_device_names([device])
    on_host = [f"{p.op.label()}: {p.reason}" for p in nb.create_predictor(config).placements(per_device=False)
               if p.op.type == "gather_nd" and p.device is None]
    assert not on_host, on_host
    (got,) = run_predictor(gather_nd_run_time_dims_program, device)
    np.testing.assert_array_equal(got, gather_nd_run_time_dims_program.outputs[0], err_msg=device)
