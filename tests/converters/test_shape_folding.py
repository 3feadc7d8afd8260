"""Programs are compiled for concrete shapes, so their shape arithmetic is folded (converters/context.py).

Paddle programs exported with inputs declared [-1, 3, -1, -1] compute their reshape targets, expand shapes,
interpolation sizes and fill shapes from `paddle.shape` at run time. Each subgraph is converted for one input
signature, so all of that is known then: these tests build the patterns the model zoos use (SegFormer's
`reshape([B, C, -1])` before a layer norm and its attention reshapes, DeiT's `cls_token.expand([B, -1, -1])`,
PP-LiteSeg's `interpolate(size=paddle.shape(x)[2:])`, `full` with a computed shape, ShuffleNet's channel
shuffle through shape slices, an anchor grid from `arange` over H and W) and check, on every device, that the whole
program runs there (strict mode:
no host op, no fallback), that the model each driver receives has every dim known and no SHAPE left, and
that the outputs match Paddle Inference for two input signatures. Then one converter-level test per kind of
fold, against Paddle, and the declared-dims conversion the support decisions make, where nothing folds.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.nnadapter.codes import UNKNOWN, Precision
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.types import OperandType
from support.converter_harness import SavedProgram, check_program, paddle_inference_run, paddle_pir_static
from support.driver_models import record_driver_models, unknown_dim_operands
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
DECLARED = [-1, 3, -1, -1]
SIGNATURES = [(1, 3, 16, 16), (2, 3, 24, 32)]


def _save(directory: str, build, declared=None, seed: int = 7) -> tuple:
    """`build(paddle, x)` in PIR static mode with x declared `declared`, saved as model.json; (model, params)."""
    with paddle_pir_static() as paddle:
        paddle.seed(seed)
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", shape=list(declared or DECLARED), dtype="float32")
            outs = build(paddle, x)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(directory, "model")
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(prefix, [x], outs, exe, program=main)
    params = prefix + ".pdiparams"
    return prefix + ".json", params if os.path.exists(params) else None


def _feed(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


# -- the patterns ------------------------------------------------------------------------------------------

def segformer_block(paddle, x):
    """paddleseg's mix_transformer: B, H, W (and N) from paddle.shape, C a Python int."""
    y = paddle.nn.Conv2D(3, 8, 3, padding=1)(x)
    shape = paddle.shape(y)
    b, h, w = shape[0], shape[2], shape[3]
    tokens = paddle.nn.LayerNorm(8)(y.reshape([b, 8, -1]).transpose([0, 2, 1]))
    n = paddle.shape(tokens)[1]
    heads = tokens.reshape([b, n, 2, 4]).transpose([0, 2, 1, 3])
    attended = paddle.nn.functional.softmax(heads, -1).transpose([0, 2, 1, 3]).reshape([b, n, 8])
    return attended.transpose([0, 2, 1]).reshape([b, 8, h, w])


def deit_tokens(paddle, x):
    """DeiT: the class token expanded to the run-time batch with -1 for the other dims."""
    patches = paddle.nn.Conv2D(3, 8, 4, stride=4)(x).flatten(2).transpose([0, 2, 1])
    cls_token = paddle.create_parameter([1, 1, 8], "float32")
    batch = paddle.shape(patches)[0]
    tokens = paddle.concat([cls_token.expand([batch, -1, -1]), patches], axis=1)
    return paddle.nn.LayerNorm(8)(tokens)


def interpolate_to_shape(paddle, x):
    """PP-LiteSeg / DeepLabV3+: back to the input's size, given as a shape slice, as 0-d elements, and as a
    mix of a [1] slice and a 0-d element."""
    f = paddle.nn.functional
    y = paddle.nn.Conv2D(3, 4, 3, stride=2, padding=1)(x)
    shape = paddle.shape(x)
    a = f.interpolate(y, size=shape[2:], mode="bilinear", align_corners=False)
    b = f.interpolate(y, size=[shape[2], shape[3]], mode="nearest")
    c = f.interpolate(y, size=[shape[2:3], shape[3]], mode="bilinear", align_corners=True)
    return a + b + c


def full_of_computed_shape(paddle, x):
    """`full` / `zeros` whose shapes are paddle.shape elements and the whole shape."""
    shape = paddle.shape(x)
    mask = paddle.full([shape[0], 1, shape[2], shape[3]], 0.5)
    zeros = paddle.zeros(shape)
    return x * mask + zeros


def channel_shuffle(paddle, x):
    """ShuffleNet's channel shuffle spelled with shape slices, then a layer norm over the channels."""
    y = paddle.nn.Conv2D(3, 8, 3, padding=1)(x)
    shape = paddle.shape(y)
    b, c, h, w = shape[0], shape[1], shape[2], shape[3]
    y = y.reshape([b, 2, c // 2, h, w]).transpose([0, 2, 1, 3, 4]).reshape([b, c, h, w])
    return paddle.nn.LayerNorm(8)(y.transpose([0, 2, 3, 1]))


def position_grid(paddle, x):
    """RT-DETR / PicoDet anchor points: arange over the run-time H and W (PIR `range` with Variable-valued
    bounds), meshgrid, stack."""
    shape = paddle.shape(x)
    ys = paddle.arange(shape[2], dtype="float32") + 0.5
    xs = paddle.arange(shape[3], dtype="float32") * 0.25
    grid_y, grid_x = paddle.meshgrid(ys, xs)
    return x + paddle.stack([grid_y, grid_x, grid_x * grid_y]).unsqueeze(0)


PATTERNS = {f.__name__: f for f in (segformer_block, deit_tokens, interpolate_to_shape, full_of_computed_shape,
                                    channel_shuffle, position_grid)}


@pytest.fixture(scope="module")
def saved_patterns(tmp_path_factory):
    """Each pattern saved once, with Paddle Inference's outputs for every signature."""
    saved = {}
    for name, build in PATTERNS.items():
        directory = str(tmp_path_factory.mktemp(name))
        model, params = _save(directory, build)
        feeds = [{"x": _feed(shape, k)} for k, shape in enumerate(SIGNATURES)]
        saved[name] = (model, params, feeds, [paddle_inference_run(model, params, f) for f in feeds])
    return saved


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_shape_arithmetic_folds_and_the_program_stays_on_the_device(saved_patterns, monkeypatch, pattern, device):
    model, params, feeds, wants = saved_patterns[pattern]
    driver_models = record_driver_models(monkeypatch)
    config = nb.Config()
    config.set_model_file(model)
    if params:
        config.set_param_file(params)
    config.set_nnadapter_device_names([device])
    config.set_strict()  # a host op or a subgraph falling to the host is an error
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = nb.create_predictor(config)
        for feed, want in zip(feeds, wants):
            predictor.get_input_by_name("x").from_numpy(feed["x"])
            predictor.run()
            got = [predictor.get_output(k).numpy() for k in range(len(want))]
            for k, (g, w) in enumerate(zip(got, want)):
                assert_model_close(g, w, what=f"{pattern} on {device}, input {list(feed['x'].shape)}, output {k}")
    ours = [str(w.message) for w in caught if issubclass(w.category, UserWarning)
            and "nnadapter_bridge" in (w.filename or "") + w.category.__module__]
    assert not ours, f"{pattern} on {device} warned: {ours}"
    assert predictor.stats.subgraph_host_runs == 0
    assert len(driver_models) == len(SIGNATURES), [name for name, _ in driver_models]
    for (name, received), feed in zip(driver_models, feeds):
        where = f"{pattern}: the model {name} received for input {list(feed['x'].shape)}"
        assert not unknown_dim_operands(received), f"{where} has unknown dims: {unknown_dim_operands(received)}"
        assert T.SHAPE not in {op.type for op in received.operations}, f"{where} still computes a SHAPE"


# -- one conversion per kind of fold, against Paddle ---------------------------------------------------------

def _convert(tmp_path, build, shape=(2, 3, 8, 12)):
    """Convert the saved program for x of `shape` (the predictor's per-signature conversion) and compare with
    Paddle Inference; the ConversionResult."""
    model, params = _save(str(tmp_path), build)
    feeds = {"x": _feed(shape)}
    _, result = check_program(SavedProgram(model, params, feeds, paddle_inference_run(model, params, feeds)),
                              model_tolerance=True)
    operands = unknown_dim_operands(result.model)
    assert not operands, f"unknown dims after conversion: {operands}"
    return result


def _types(result) -> list:
    return [op.type for op in result.model.operations]


def _folded(result, *types) -> None:
    for t in types:
        assert result.folded.get(t, 0) > 0, f"{t.name} was not folded: folded {result.folded}, emitted {_types(result)}"


def test_shape_slices_and_their_arithmetic_fold(tmp_path):
    def build(paddle, x):
        shape = paddle.shape(x)
        area = paddle.cast(shape[2] * shape[3] // 4 + 1, "float32")  # mul, floordiv, add, cast
        return x.mean() * 0 + area

    result = _convert(tmp_path, build)
    _folded(result, T.SHAPE, T.SLICE)
    assert T.SHAPE not in _types(result) and T.CAST not in _types(result)


def test_stack_concat_and_gather_of_shape_elements_fold_into_a_reshape_target(tmp_path):
    def build(paddle, x):
        shape = paddle.shape(x)
        wh = paddle.gather(shape, paddle.to_tensor([3, 2]))
        target = paddle.concat([paddle.stack([shape[0] * shape[1]]), wh])  # [N * C, W, H]
        return x.transpose([0, 1, 3, 2]).reshape(target)

    result = _convert(tmp_path, build)
    _folded(result, T.SHAPE, T.GATHER, T.STACK, T.CONCAT)
    reshape = next(op for op in result.model.operations if op.type == T.RESHAPE)
    assert reshape.inputs[1].is_constant


def test_reshape_target_from_shape_gives_known_dims_to_layer_norm(tmp_path):
    result = _convert(tmp_path, segformer_block)
    assert T.SHAPE not in _types(result)
    for op in result.model.operations:
        if op.type == T.RESHAPE:
            assert op.inputs[1].is_constant
        if op.type == T.LAYER_NORMALIZATION:
            assert op.inputs[0].type.dims == (2, 96, 8)


def test_expand_with_minus_one_and_a_run_time_batch_folds(tmp_path):
    # The class token is a parameter: expanded to the batch of 3, it is a [3, 1, 8] constant.
    result = _convert(tmp_path, deit_tokens, shape=(3, 3, 8, 8))
    _folded(result, T.EXPAND)
    concat = next(op for op in result.model.operations if op.type == T.CONCAT)
    assert concat.inputs[0].is_constant and concat.inputs[0].type.dims == (3, 1, 8)


def test_expand_of_a_computed_tensor_gets_a_constant_target(tmp_path):
    def build(paddle, x):
        shape = paddle.shape(x)
        pooled = x.mean(axis=[2, 3], keepdim=True)
        return pooled.expand([shape[0], -1, shape[2], shape[3]]) - x

    result = _convert(tmp_path, build)
    expand = next(op for op in result.model.operations if op.type == T.EXPAND)
    assert expand.inputs[1].is_constant and expand.outputs[0].type.dims == (2, 3, 8, 12)


def test_interpolation_sizes_fold(tmp_path):
    result = _convert(tmp_path, interpolate_to_shape)
    resizes = [op for op in result.model.operations if op.type in (T.RESIZE_LINEAR, T.RESIZE_NEAREST)]
    assert len(resizes) == 3
    for op in resizes:
        assert op.inputs[1].is_constant and op.outputs[0].type.dims == (2, 4, 8, 12)


@pytest.mark.parametrize("declared", [(2, 3, 8, 12), (-1, 3, -1, -1)], ids=["static", "dynamic"])
def test_legacy_interpolation_size_of_0d_and_1_parts(tmp_path, declared):
    """A legacy program's SizeTensor list mixing a [1] slice and a 0-d element (issue 28: "inputs have
    different ranks: [[], [1]]"): joined into one size, folded when the dims are known, read at run time when
    they are not."""
    import paddle

    from converters.context import convert_subgraph
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.nnadapter.reference import run_model
    from support.converter_harness import static_program

    def build(x):
        shape = paddle.shape(x)
        return paddle.nn.functional.interpolate(x, size=[shape[2:3] * 2, shape[3]], mode="nearest")

    x = _feed((2, 3, 8, 12))
    saved = static_program(tmp_path, build, {"x": x})
    graph = load_model(saved.model_path, saved.params_path)
    assert any(op.type == "nearest_interp_v2" and op.inputs.get("SizeTensor") for op in graph.ops())
    dims = tuple(UNKNOWN if d < 0 else d for d in declared)
    result = convert_subgraph([op for op in graph.ops() if op.type not in ("feed", "fetch")], graph.params,
                              {"x": OperandType(precision=Precision.FLOAT32, dims=dims)}, graph.outputs, graph)
    (got,) = run_model(result.model, [x])
    assert_model_close(got, saved.outputs[0])
    resize = next(op for op in result.model.operations if op.type == T.RESIZE_NEAREST)
    assert resize.inputs[1].is_constant == (UNKNOWN not in dims)


def test_interpolation_scale_computed_from_shapes_folds(tmp_path):
    def build(paddle, x):
        shape = paddle.cast(paddle.shape(x), "float32")
        scale = paddle.concat([16.0 / shape[2:3], 24.0 / shape[3:4]])  # back to a fixed 16 x 24
        return paddle.nn.functional.interpolate(x, scale_factor=scale, mode="nearest")

    result = _convert(tmp_path, build)
    resize = next(op for op in result.model.operations if op.type == T.RESIZE_NEAREST)
    assert resize.outputs[0].type.dims == (2, 3, 16, 24)


def test_arange_over_shape_elements_folds(tmp_path):
    result = _convert(tmp_path, position_grid)
    _folded(result, T.RANGE, T.MESHGRID, T.STACK)
    assert _types(result) == [T.ADD]  # the grid is a constant


def test_fill_with_a_computed_shape_folds_the_shape_and_keeps_a_large_fill(tmp_path):
    def build(paddle, x):
        shape = paddle.shape(x)
        small = paddle.full([shape[0], 1, shape[2], 1], 2.0)  # 2 * 8 values: a constant
        large = paddle.full([shape[0], 64, shape[2], shape[3]], 0.5)  # 12288 values: FILL of a constant shape
        return x * small + large[:, :3]

    result = _convert(tmp_path, build)
    fills = [op for op in result.model.operations if op.type == T.FILL]
    assert len(fills) == 1 and fills[0].inputs[0].is_constant and fills[0].outputs[0].type.dims == (2, 64, 8, 12)
    _folded(result, T.FILL)


def test_declared_unknown_dims_fold_nothing_that_depends_on_them(tmp_path):
    """The support decisions convert with declared dims: there a run-time shape stays an operation, and the
    converted model still computes Paddle's answer."""
    from converters.context import convert_subgraph
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.nnadapter.reference import run_model

    model, params = _save(str(tmp_path), segformer_block)
    graph = load_model(model, params)
    ops = [op for op in graph.ops() if op.type not in ("feed", "fetch")]
    declared = OperandType(precision=Precision.FLOAT32, dims=(UNKNOWN, 3, UNKNOWN, UNKNOWN))
    result = convert_subgraph(ops, graph.params, {"x": declared}, graph.outputs, graph)
    assert T.SHAPE in _types(result) and T.SHAPE not in result.folded
    feeds = {"x": _feed((1, 3, 8, 8))}
    (got,) = run_model(result.model, [feeds["x"]])
    assert_model_close(got, paddle_inference_run(model, params, feeds)[0])
