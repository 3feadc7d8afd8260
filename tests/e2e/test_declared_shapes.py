"""Declared shapes are hints: programs fed shapes other than their feed vars declare, against Paddle Inference.

Paddle does not enforce a VarDesc's shape: a [1] fed to a var declared [] runs, so does 300x300 into a var
declared [-1, 3, 224, 224]. The predictor compiles one program per actual input-shape signature, never runs
one compiled for another, and a warm start (cache present) converts nothing for any signature it has seen.

The reference feeds Paddle Inference with `np.asarray(order="C")`: np.ascontiguousarray would turn a 0-d
feed into shape [1], and Paddle then answers [1] where a 0-d feed gives 0-d.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.subgraph.engine import ShapeFallbackWarning
from support.converter_harness import paddle_inference_run
from support.converter_harness import save_declared as _save
from support.tolerances import assert_model_close

PADDLE_DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


def _predictor(model, params, device="builtin_device", cache_dir=None, strict=False):
    config = nb.Config()
    config.set_model_file(model)
    if params:
        config.set_param_file(params)
    config.set_nnadapter_device_names([device])
    if cache_dir:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    if strict:
        config.set_strict()
    return nb.create_predictor(config)


def _run(predictor, feeds: dict) -> list:
    for name, array in feeds.items():
        predictor.get_input_by_name(name).from_numpy(np.asarray(array))
    predictor.run()
    return [predictor.get_output(k).numpy() for k in range(len(predictor.get_output_names()))]


def _assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"output {k}: shape {list(g.shape)}, Paddle's {list(w.shape)}"
        assert_model_close(g, w, what=f"output {k}")


def _value(shape, seed=0):
    rng = np.random.default_rng(seed)
    return np.asarray(rng.uniform(0.1, 0.9, size=shape), dtype=np.float32)


# -- (a) 0-d and [1] for each other ---------------------------------------------------------------------------

def _scale(x):
    import paddle
    return paddle.scale(x, 2.0, 0.5)


def _relu(x):
    import paddle
    return paddle.nn.functional.relu(x)


def _sum(x):
    import paddle
    if paddle.framework.in_pir_mode():
        return paddle.sum(x)
    # paddle 3.3.1's legacy static mode cannot build paddle.sum (it wants a PIR Value): the op itself then.
    helper = paddle.base.layer_helper.LayerHelper("reduce_sum")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="reduce_sum", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"dim": [], "keep_dim": False, "reduce_all": True})
    return out


def _add(x, y):
    return x + y


# (name, build, declared, fed); Paddle's output shape follows the fed shapes.
SWAPS = [
    ("scale", _scale, {"x": []}, {"x": [1]}),
    ("scale", _scale, {"x": [1]}, {"x": []}),
    ("relu", _relu, {"x": []}, {"x": [1]}),
    ("relu", _relu, {"x": [1]}, {"x": []}),
    ("reduce_sum", _sum, {"x": []}, {"x": [1]}),
    ("reduce_sum", _sum, {"x": [3]}, {"x": [1]}),
    ("reduce_sum", _sum, {"x": [1]}, {"x": []}),
    ("elementwise_add", _add, {"x": [], "y": []}, {"x": [1], "y": []}),
    ("elementwise_add", _add, {"x": [], "y": []}, {"x": [], "y": [1]}),
    ("elementwise_add", _add, {"x": [1], "y": []}, {"x": [], "y": []}),
    ("elementwise_add", _add, {"x": [1], "y": [1]}, {"x": [], "y": []}),
]


@pytest.mark.parametrize("pir", [True, False], ids=["pir", "legacy"])
@pytest.mark.parametrize("name, build, declared, fed", SWAPS,
                         ids=[f"{n}-{d}-fed-{f}" for n, _, d, f in SWAPS])
def test_a_0d_var_fed_1_and_back_runs_as_paddle_runs_it(tmp_path, pir, name, build, declared, fed):
    model, params = _save(tmp_path, build, declared, pir=pir)
    feeds = {var: _value(shape, k) for k, (var, shape) in enumerate(fed.items())}
    want = paddle_inference_run(model, params, feeds)
    predictor = _predictor(model, params)
    _assert_same(_run(predictor, feeds), want)
    assert predictor.stats.builds == 1 and predictor.stats.subgraph_host_runs == 0


# -- (b) other spatial sizes than declared ---------------------------------------------------------------

def _conv_pool(x):
    import paddle
    y = paddle.nn.Conv2D(3, 4, 3, padding=1)(x)
    return paddle.nn.functional.max_pool2d(paddle.nn.functional.relu(y), 2, 2)


@pytest.mark.parametrize("device", PADDLE_DEVICES)
def test_conv_pool_declared_224_fed_300(tmp_path, device):
    model, params = _save(tmp_path, _conv_pool, {"x": [-1, 3, 224, 224]})
    feeds = {"x": _value([1, 3, 300, 300])}
    want = paddle_inference_run(model, params, feeds)
    assert want[0].shape == (1, 4, 150, 150)
    predictor = _predictor(model, params, device)
    _assert_same(_run(predictor, feeds), want)
    stats = predictor.stats
    assert (stats.subgraphs, stats.host_ops, stats.subgraph_host_runs) == (1, 0, 0)


@pytest.mark.parametrize("device", PADDLE_DEVICES)
def test_mobilenet_v1_at_300x300(zoo_model, paddle_reference, device):
    model = zoo_model("mobilenet_v1")
    config = nb.Config()
    if os.path.isdir(model):
        config.set_model_dir(model)
    else:
        config.set_model_file(model)
        config.set_param_file(model[: -len(".pdmodel")] + ".pdiparams")
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    image = _value([1, 3, 300, 300], 3)
    name = predictor.get_input_names()[0]
    declared = list(predictor.get_input(0).declared_shape)
    assert declared[2:] != [300, 300], f"the zoo model already declares {declared}: the test proves nothing"
    got = _run(predictor, {name: image})
    want = paddle_reference(model, {name: image})
    _assert_same(got, [np.asarray(w) for w in want])


# -- (c) another batch than a fixed declared one -----------------------------------------------------------

def _relu_times_two(x):
    import paddle
    return paddle.nn.functional.relu(x - 0.5) * 2.0


@pytest.mark.parametrize("pir", [True, False], ids=["pir", "legacy"])
def test_declared_2x3_fed_4x3_then_2x3(tmp_path, pir):
    model, params = _save(tmp_path, _relu_times_two, {"x": [2, 3]}, pir=pir)
    predictor = _predictor(model, params)
    for shape in ([4, 3], [2, 3], [4, 3]):
        feeds = {"x": _value(shape, len(shape))}
        _assert_same(_run(predictor, feeds), paddle_inference_run(model, params, feeds))
    assert predictor.stats.builds == 2  # one program per signature, the [4, 3] one reused


# -- (d) 0-d feeds: what Paddle gives, op by op ------------------------------------------------------------

def _ops_0d():
    import paddle

    F = paddle.nn.functional
    return {
        "relu": F.relu, "sigmoid": F.sigmoid, "tanh": paddle.tanh, "exp": paddle.exp, "log": paddle.log,
        "abs": paddle.abs, "floor": paddle.floor, "sin": paddle.sin, "cos": paddle.cos, "atan": paddle.atan,
        "tan": paddle.tan, "erf": paddle.erf, "acos": paddle.acos, "square": paddle.square,
        "rsqrt": paddle.rsqrt, "gelu": F.gelu, "silu": F.silu, "softplus": F.softplus, "relu6": F.relu6,
        "leaky_relu": F.leaky_relu, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "mish": F.mish,
        "swish": F.swish, "clip": lambda x: paddle.clip(x, 0.2, 0.5), "cast": lambda x: paddle.cast(x, "float64"),
        "sum": paddle.sum, "mean": paddle.mean, "max": paddle.max, "prod": paddle.prod,
        "logsumexp": paddle.logsumexp, "argmax": paddle.argmax, "numel": paddle.numel,
        "unsqueeze": lambda x: paddle.unsqueeze(x, 0), "reshape_1": lambda x: paddle.reshape(x, [1]),
        "flatten": paddle.flatten, "squeeze": paddle.squeeze, "assign": paddle.assign,
        "full_like": lambda x: paddle.full_like(x, 2.0), "add_self": lambda x: x + x,
        "greater_than": lambda x: x > 0.4, "isnan": paddle.isnan, "cumsum": paddle.cumsum,
        "expand": lambda x: paddle.expand(x, [2, 3]), "tile": lambda x: paddle.tile(x, [2]),
        "stack": lambda x: paddle.stack([x, x]),
        # Their converters combine x with scalar constants (or, softmax, write a constant): Paddle keeps 0-d.
        "scale": lambda x: paddle.scale(x, 2.0, 0.5), "sqrt": paddle.sqrt, "sign": paddle.sign, "elu": F.elu,
        "selu": F.selu, "reciprocal": paddle.reciprocal, "log1p": paddle.log1p,
        "pow": lambda x: paddle.pow(x, 2.0), "round": paddle.round, "ceil": paddle.ceil,
        "softmax": F.softmax, "log_softmax": F.log_softmax,
    }


# Ops whose converters add scalar constants (or, softmax/log_softmax, a FILL_LIKE) around x: the constants
# must be 0-d next to a 0-d x, else the result broadcasts to [1].
WITH_SCALARS = ["ceil", "elu", "log1p", "log_softmax", "pow", "reciprocal", "round", "scale", "selu", "sign",
                "softmax", "sqrt"]


def _op_names():
    return ["relu", "sigmoid", "tanh", "exp", "log", "abs", "floor", "sin", "cos", "atan", "tan", "erf", "acos",
            "square", "rsqrt", "gelu", "silu", "softplus", "relu6", "leaky_relu", "hardswish", "hardsigmoid",
            "mish", "swish", "clip", "cast", "sum", "mean", "max", "prod", "logsumexp", "argmax", "numel",
            "unsqueeze", "reshape_1", "flatten", "squeeze", "assign", "full_like", "add_self", "greater_than",
            "isnan", "cumsum", "expand", "tile", "stack", *WITH_SCALARS]


@pytest.mark.parametrize("op", _op_names())
def test_0d_feed_gives_paddles_output_shape(tmp_path, op):
    model, params = _save(tmp_path, _ops_0d()[op], {"x": []})
    feeds = {"x": np.asarray(0.3, dtype=np.float32)}
    want = paddle_inference_run(model, params, feeds)
    _assert_same(_run(_predictor(model, params), feeds), want)


@pytest.mark.parametrize("device", PADDLE_DEVICES[1:])
@pytest.mark.parametrize("op", WITH_SCALARS)
def test_0d_feed_with_scalar_constants_on_the_sdk_drivers(tmp_path, op, device):
    # Whether the driver takes the 0-d constants or leaves the op to the host, the result is Paddle's.
    model, params = _save(tmp_path, _ops_0d()[op], {"x": []})
    feeds = {"x": np.asarray(0.3, dtype=np.float32)}
    want = paddle_inference_run(model, params, feeds)
    _assert_same(_run(_predictor(model, params, device), feeds), want)


@pytest.mark.parametrize("device", PADDLE_DEVICES[1:])
@pytest.mark.parametrize("op", [op for op in WITH_SCALARS if op not in ("softmax", "log_softmax")])
def test_0d_scalar_constants_run_on_the_sdk_driver(tmp_path, op, device):
    model, params = _save(tmp_path, _ops_0d()[op], {"x": []})
    stats = _predictor(model, params, device).stats
    assert (stats.subgraphs, stats.host_ops) == (1, 0)


@pytest.mark.parametrize("device", PADDLE_DEVICES[1:])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_0d_softmax_runs_on_the_sdk_driver(tmp_path, op, device):
    # A FILL_LIKE with a [1] value: no 0-d constant, so both drivers take it.
    model, params = _save(tmp_path, _ops_0d()[op], {"x": []})
    stats = _predictor(model, params, device).stats
    assert (stats.subgraphs, stats.host_ops) == (1, 0)


# -- the program cache across signatures -------------------------------------------------------------------

def test_a_program_compiled_for_one_signature_never_runs_another_and_warm_starts_convert_nothing(tmp_path):
    model, params = _save(tmp_path, _add, {"x": [], "y": []})
    cache = tmp_path / "cache"
    signatures = [([], []), ([1], []), ([], [1]), ([1], [1]), ([], [])]
    cold = _predictor(model, params, cache_dir=cache)
    for k, (xs, ys) in enumerate(signatures):
        feeds = {"x": _value(xs, k), "y": _value(ys, k + 10)}
        _assert_same(_run(cold, feeds), paddle_inference_run(model, params, feeds))
    assert cold.stats.builds == 4 and len(set(cold.cache_tokens())) == 4
    assert nb.wait_for_cache_writes(timeout=60)  # the .nnc files are written by threads of their own
    assert len([f for f in os.listdir(cache) if f.endswith(".nnc")]) == 4

    warm = _predictor(model, params, cache_dir=cache)
    assert warm.support.conversions == 0
    for k, (xs, ys) in enumerate(reversed(signatures)):
        feeds = {"x": _value(xs, k), "y": _value(ys, k + 10)}
        _assert_same(_run(warm, feeds), paddle_inference_run(model, params, feeds))
    assert (warm.stats.builds, warm.stats.cache_hits_file) == (0, 4)


# -- shapes the support decision did not foresee -----------------------------------------------------------

def _avg_pool_k2(x):
    import paddle
    return paddle.nn.functional.avg_pool2d(x, 2, 1)


def test_a_subgraph_the_actual_shapes_cannot_convert_runs_on_the_host(tmp_path):
    # Declared 8x8 the pool converts; fed 1x1 a 2x2 window leaves Paddle an empty [1, 3, 0, 0] output, which the
    # converter refuses (no NNAdapter pooling gives an empty tensor) and the host kernel gives: the subgraph runs
    # on the host for 1x1.
    model, params = _save(tmp_path, _avg_pool_k2, {"x": [1, 3, 8, 8]})
    predictor = _predictor(model, params)
    assert predictor.stats.subgraphs == 1
    for shape in ([1, 3, 8, 8], [1, 3, 1, 1], [1, 3, 1, 1]):
        feeds = {"x": _value(shape)}
        if shape[2] == 1 and predictor.stats.subgraph_host_runs == 0:
            with pytest.warns(ShapeFallbackWarning, match="'x' declared \\[1, 3, 8, 8\\], given \\[1, 3, 1, 1\\]"):
                got = _run(predictor, feeds)
        else:
            got = _run(predictor, feeds)
        want = paddle_inference_run(model, params, feeds)
        assert [g.shape for g in got] == [w.shape for w in want]
        _assert_same(got, want)
    assert (predictor.stats.builds, predictor.stats.subgraph_host_runs) == (1, 2)

    strict = _predictor(model, params, strict=True)
    with pytest.raises(nb.InputError, match="input 'x' expects float32 with shape \\[1, 3, 8, 8\\].*got shape "
                                            "\\[1, 3, 1, 1\\], and the model fails on it"):
        _run(strict, {"x": _value([1, 3, 1, 1])})


def _relu_bicubic(x):
    import paddle.nn.functional as F
    return [F.interpolate(F.relu(x) * 2.0, size=[9, 5], mode="bicubic", align_corners=False) + 1.0]


@pytest.mark.parametrize("device", PADDLE_DEVICES)
def test_bicubic_with_unknown_spatial_dims_runs_on_the_device(tmp_path, device):
    """bicubic_interp_v2's converter builds its taps from the input's sizes, which [-1, 3, -1, -1] leaves unknown:
    the support decision takes it once they are concrete, and each input shape converts with its own sizes."""
    model, params = _save(tmp_path, _relu_bicubic, {"x": [-1, 3, -1, -1]})
    predictor = _predictor(model, params, device)
    assert not predictor.host_ops
    for shape in [(1, 3, 6, 7), (2, 3, 4, 4)]:
        feeds = {"x": _value(shape)}
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no split, no fallback
            got = _run(predictor, feeds)
        _assert_same(got, paddle_inference_run(model, params, feeds))
    assert predictor.stats.subgraph_host_runs == 0


def test_an_op_its_converter_refuses_for_the_given_shapes_runs_alone_on_the_host(tmp_path, monkeypatch):
    """The support decision took an op with its declared dims; its converter refuses the concrete shapes of a run:
    that op runs on the host and the rest of its subgraph on the device (a SubgraphSplitWarning names it)."""
    import dataclasses

    from converters import registry
    from nnadapter_bridge.subgraph.engine import SubgraphSplitWarning

    model, params = _save(tmp_path, _relu_bicubic, {"x": [-1, 3, -1, -1]})
    bicubic = registry.CONVERTERS["bicubic_interp_v2"]

    def picky(op, ctx):  # refuses a height of 5, which no declaration shows; else the converter's own check
        dims = ctx.dims(op.input("X")[0]) if ctx.has(op.input("X")[0]) else ()
        if len(dims) == 4 and dims[2] == 5:
            return "a height of 5 (this test's refusal)"
        return bicubic.check(op, ctx)
    # The host runs the refused op with its host kernel (the host executor tries the converter first).
    monkeypatch.setitem(registry.CONVERTERS, "bicubic_interp_v2", dataclasses.replace(bicubic, check=picky))
    predictor = _predictor(model, params)
    assert not predictor.host_ops
    feeds = {"x": _value((1, 3, 5, 6))}
    refusal = r"its converter, for these input shapes: cannot be converted: a height of 5 \(this test's refusal\)"
    with pytest.warns(SubgraphSplitWarning, match=r"bicubic_interp_v2#\d+ .*" + refusal):
        got = _run(predictor, feeds)
    _assert_same(got, paddle_inference_run(model, params, feeds))
    (moved,) = [p for p in predictor.placements() if p.at_run]
    assert moved.op.type == "bicubic_interp_v2"
    other = {"x": _value((1, 3, 4, 6))}  # another height: the whole subgraph on the device again
    _assert_same(_run(predictor, other), paddle_inference_run(model, params, other))
