"""google_xnnpack: every operation sample it claims against the NNAdapter reference (compiled, run, restored from
its .nnc bytes), XNNPACK covering the whole subgraph, the declines and their reasons, the layout (no transposes
around the convolutions), the context property, shapes and dtypes refused, clones, and the zoo CNNs through the
predictor against Paddle Inference.

The driver is registered per test through the register_device fixture (tests/conftest.py) until its entry point
is installed."""
from __future__ import annotations

import collections
import hashlib
import os
import warnings

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="the google_xnnpack driver needs ai-edge-litert "
                    "(install nnadapter-bridge[xnnpack])")

import nnadapter_bridge as nb  # noqa: E402
from hal.google_xnnpack import DRIVER  # noqa: E402
from hal.google_xnnpack.driver import NUM_THREADS_KEY, delegate_gaps, open_interpreter  # noqa: E402
from hal.google_xnnpack.graph import convert_model  # noqa: E402
from hal.google_xnnpack.operations import OPERATIONS  # noqa: E402
from hal.protocol import Cache  # noqa: E402
from nnadapter_bridge.conformance.harness import Const, build_op  # noqa: E402
from nnadapter_bridge.conformance.samples import SAMPLES, randn  # noqa: E402
from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError, PropertiesError  # noqa: E402
from nnadapter_bridge.nnadapter.codes import FuseCode, PadMode, Precision, ResultCode  # noqa: E402
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model  # noqa: E402
from nnadapter_bridge.nnadapter.reference import run_model  # noqa: E402
from nnadapter_bridge.nnadapter.runtime import STATS, Compilation, Context, DeviceFallbackWarning, Execution  # noqa: E402
from nnadapter_bridge.nnadapter.types import OperandType  # noqa: E402
from support.tolerances import assert_model_close, assert_op_close  # noqa: E402

# The samples the driver runs: a change that silently declines one of them fails test_claims_what_it_runs.
CLAIMED = {
    "ADD_broadcast", "SUB_broadcast", "MUL_broadcast", "MAX_broadcast", "MIN_broadcast", "ADD_relu6_const",
    "SUB_relu1", "MUL_relu", "DIV_float", "ABS", "COS", "EXP", "FLOOR", "RELU", "RELU6", "SIGMOID", "SIN", "SQUARE",
    "SWISH", "TANH", "LOG", "RSQRT", "CLIP", "GELU_erf", "GELU_tanh", "HARD_SWISH", "LEAKY_RELU",
    "PRELU_per_channel", "PRELU_shared", "CONV_2D_pads_relu", "CONV_2D_same_dilated", "CONV_2D_depthwise_valid",
    "AVERAGE_POOL_2D_same", "ADAPTIVE_AVERAGE_POOL_2D_global", "ADAPTIVE_AVERAGE_POOL_2D_divisible",
    "BATCH_NORMALIZATION", "FULLY_CONNECTED_relu",
    "FULLY_CONNECTED_no_bias", "MAT_MUL_transposes", "SOFTMAX", "SOFTMAX_default_axis",
    "RESIZE_LINEAR_align_corners", "RESIZE_LINEAR_half_pixel", "RESIZE_LINEAR_asymmetric",
    "RESIZE_LINEAR_scales_half_pixel", "RESIZE_LINEAR_half_pixel_to_one_row", "RESIZE_LINEAR_half_pixel_to_one_pixel",
    "REDUCE_MEAN", "RESHAPE_copy_and_infer", "FLATTEN", "SQUEEZE_axes",
    "SQUEEZE_all", "UNSQUEEZE", "TRANSPOSE", "SLICE_no_axes", "CONCAT", "SPLIT", "HARD_SIGMOID", "ASSIGN",
    "CONV_2D_TRANSPOSE", "SUM_three", "LAYER_NORMALIZATION", "GROUP_NORMALIZATION", "REDUCE_MAX", "REDUCE_SUM_all",
    "CHANNEL_SHUFFLE", "STACK",
    "MAX_POOL_2D_ceil", "PRIOR_BOX",  # PRIOR_BOX: folded to constants (hal.common.lower), copied out by XNNPACK
    "QUANTIZE_int8", "DEQUANTIZE_int8", "ADD_quant", "CONV_2D_quant_per_channel",  # TFLite's int8 operators
    "AVERAGE_POOL_2D_pads_exclusive",  # zero PAD, VALID average, times window size / input elements
}
# Declines and the words their reason must hold: what XNNPACK does not take, or TFLite computes otherwise.
DECLINED = {
    "PAD_constant": "a non-zero pad value",
    "RESIZE_LINEAR_scales_not_whole": "Paddle samples every 1 / scale",
    "RESIZE_NEAREST_shape": "no google_xnnpack implementation",  # XNNPACK leaves it to LiteRT
    "LOG_SOFTMAX": "no google_xnnpack implementation",  # XNNPACK leaves it to LiteRT
    "PAD_reflect": "only the constant mode",
    "MAX_POOL_2D_indices": "indices output",
    "AVERAGE_POOL_2D_ceil_partial_window": "TFLite's window gives",
    "ADD_int32": "only float32 tensors",
    "CONV_2D_TRANSPOSE_output_shape": "groups (TFLite's TRANSPOSE_CONV has none)",
    "SIGMOID_quant": "only float32 tensors",  # XNNPACK's int8 LOGISTIC has a fixed output scale
    "CONCAT_quant": "only float32 tensors",  # XNNPACK concatenates int8 values of one scale only
    "QUANTIZE_uint8": "only symmetric per-layer int8",
    "QUANTIZE_per_channel": "only symmetric per-layer int8",
    "DEQUANTIZE_uint8": "only float32 tensors",
    "SLICE_steps": "step 1 only",
    "MAT_MUL_vector": "1-D operand",
    "CLIP_low_above_high": "min 1 > max -1",
}
SAMPLE_BY_ID = {s.id: s for s in SAMPLES}


@pytest.fixture
def xnnpack(register_device):
    register_device(DRIVER)
    return DRIVER


@pytest.fixture(scope="module")
def context():
    ctx = DRIVER.create_context(DRIVER.open_device(), "")
    yield ctx
    DRIVER.destroy_context(ctx)


def _feeds_in_order(model, feeds) -> list:
    return list(feeds) if isinstance(feeds, (list, tuple)) else [feeds[o.name] for o in model.input_operands]


def test_claims_what_it_runs(context):
    claimed = set()
    for sample in SAMPLES:
        model, _ = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
        if DRIVER.validate_program(context, model)[0]:
            claimed.add(sample.id)
    assert claimed == CLAIMED, f"newly claimed {sorted(claimed - CLAIMED)}, no longer {sorted(CLAIMED - claimed)}"


@pytest.mark.parametrize("sample_id", sorted(DECLINED))
def test_declines_with_a_reason(context, sample_id):
    sample = SAMPLE_BY_ID[sample_id]
    model, _ = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    assert DRIVER.validate_program(context, model) == [False]
    reason = DRIVER.unsupported_reasons(context, model)[0]
    assert DECLINED[sample_id] in reason, reason


@pytest.mark.parametrize("sample_id", sorted(CLAIMED))
def test_claimed_sample_matches_the_reference_and_restores_from_its_bytes(xnnpack, sample_id, tmp_path):
    sample = SAMPLE_BY_ID[sample_id]
    model, feeds = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    want = run_model(model, feeds)
    context = Context([nb_device()])
    try:
        token = hashlib.md5(f"google_xnnpack/{sample_id}".encode()).hexdigest()
        compiled = Compilation(model, token, cache_dir=str(tmp_path), context=context)
        compiled.finish()
        got = Execution(compiled).run(feeds)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_op_close(g, w, what=f"google_xnnpack {sample_id} output {k}")
        assert compiled.wait_for_cache_write(timeout=60)
        assert (tmp_path / f"{token}.nnc").is_file()
        compiled.destroy()
        restores = STATS.cache_restores
        restored = Compilation(None, token, cache_dir=str(tmp_path), context=context)
        restored.finish()
        assert restored.restored_from_cache and STATS.cache_restores == restores + 1
        for k, (g, r) in enumerate(zip(got, Execution(restored).run(feeds))):
            np.testing.assert_array_equal(r, g, err_msg=f"{sample_id} output {k} after restore")
        restored.destroy()
    finally:
        context.destroy()


def nb_device():
    from nnadapter_bridge.nnadapter.runtime import DeviceManager

    return DeviceManager.instance().acquire("google_xnnpack")


@pytest.mark.parametrize("sample_id", sorted(CLAIMED))
def test_xnnpack_runs_every_operator_of_a_claimed_sample(context, sample_id):
    """From the interpreter's own node list: one DELEGATE node computes the outputs from the inputs and constants,
    so nothing runs on LiteRT's reference kernels."""
    sample = SAMPLE_BY_ID[sample_id]
    model, _ = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    program = DRIVER.create_program(context, model, Cache())
    nodes = program.interpreter._get_ops_details()
    delegates = [n for n in nodes if n["op_name"] == "DELEGATE"]
    assert len(delegates) == 1, [n["op_name"] for n in nodes]
    outputs = {int(d["index"]) for d in program.interpreter.get_output_details()}
    assert outputs <= {int(t) for t in delegates[0]["outputs"]}
    produced = {int(t) for n in nodes if n["op_name"] != "DELEGATE" for t in n["outputs"]}
    assert not produced & {int(t) for t in delegates[0]["inputs"]}
    assert delegate_gaps(program.interpreter) == ""


def test_an_operator_xnnpack_leaves_to_litert_is_named():
    """FLOOR_DIV (no XNNPACK kernel) after an ADD: the coverage check names it and no program is built."""
    from hal.common import Unsupported
    from hal.google_xnnpack.graph import BuiltinOperator as B
    from hal.google_xnnpack.graph import TfliteBuilder

    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 3)), "x")
    out = model.add_output("out")
    model.add_operation(T.RELU, [x], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    g = TfliteBuilder()
    g._model_input(x)
    summed = g.one(B.ADD, [g.values[x.index].tensor, g.values[x.index].tensor], (2, 3))
    g.values[out.index] = type(g.values[x.index])(g.one(B.FLOOR_DIV, [summed, summed], (2, 3)), "plain")
    with pytest.raises(Unsupported, match="XNNPACK does not take FLOOR_DIV"):
        open_interpreter(g.finish(model), 1)


def test_program_bytes_are_stable_for_the_same_model(context):
    sample = SAMPLE_BY_ID["CONV_2D_pads_relu"]
    model, _ = build_op(sample.type, sample.inputs, sample.n_outputs)
    first, second = Cache(token="t", dir="d"), Cache(token="t", dir="d")
    DRIVER.create_program(context, model, first)
    DRIVER.create_program(context, model, second)
    assert bytes(first.buffer) and bytes(first.buffer) == bytes(second.buffer)
    assert bytes(first.buffer)[4:8] == b"TFL3"


# -- layout -------------------------------------------------------------------------------------------------
def _conv_chain_model():
    """conv 3x3 (pads 1, relu) -> depthwise 3x3 -> add the first conv's output -> global average -> reshape."""
    rng = np.random.default_rng(3)
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, 4, 8, 8)), "x")

    def const(a, dtype=np.int32):
        return model.add_constant(np.asarray(a, dtype=dtype))

    def conv(inp, filt, group, fuse):
        out = model.add_output("conv")
        model.add_operation(T.CONV_2D, [inp, model.add_constant(filt), model.add_constant(
            rng.standard_normal(filt.shape[0]).astype(np.float32)), const([0]), const([1, 1, 1, 1]), const([1, 1]),
            const([group]), const([1, 1]), const([int(fuse)])], [out])
        return out

    a = conv(x, rng.standard_normal((8, 4, 3, 3)).astype(np.float32), 1, FuseCode.FUSED_RELU)
    b = conv(a, rng.standard_normal((8, 1, 3, 3)).astype(np.float32), 8, FuseCode.FUSED_RELU6)
    s = model.add_output("sum")
    model.add_operation(T.ADD, [a, b, const([0])], [s])
    m = model.add_output("mean")
    model.add_operation(T.ADAPTIVE_AVERAGE_POOL_2D, [s, const([1, 1])], [m])
    r = model.add_output("flat")
    model.add_operation(T.RESHAPE, [m, const([1, 8])], [r])
    model.identify_inputs_and_outputs([x], [r, s])
    model.finish()
    return model


def test_a_conv_chain_is_transposed_at_the_boundary_only(context):
    model = _conv_chain_model()
    program = DRIVER.create_program(context, model, Cache())
    names = collections.Counter(n["op_name"] for n in program.interpreter._get_ops_details())
    # one transpose of the NCHW input, one of the NCHW output `sum`; the [1, 8] output needs none
    assert names["TRANSPOSE"] == 2, names
    assert names["DEPTHWISE_CONV_2D"] == 1 and names["CONV_2D"] == 1 and names["MEAN"] == 1
    feeds = [randn(1, 4, 8, 8, seed=5)]
    got = DRIVER.run_arrays(program, feeds)
    for g, w in zip(got, run_model(model, feeds)):
        assert_op_close(g, w, what="conv chain")


def _cropped_conv_model(size: int, kernel: int, stride: int, pad: int, group: int, axes, starts, ends):
    """conv (symmetric pads) -> SLICE of its output -> batch norm: Paddle's EfficientNet writes TensorFlow's SAME
    padding of a strided conv as pads (k - 1) / 2 + stride and a crop of the first row and column."""
    rng = np.random.default_rng(7)
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, 4, size, size)), "x")
    c = lambda v, dtype=np.int32: model.add_constant(np.asarray(v, dtype=dtype))  # noqa: E731
    conv = model.add_output("conv")
    model.add_operation(T.CONV_2D, [x, c(rng.standard_normal((4, 4 // group, kernel, kernel)), np.float32),
                                    c(rng.standard_normal(4), np.float32), c([0]), c([pad] * 4), c([stride] * 2),
                                    c([group]), c([1, 1]), c([0])], [conv])
    crop = model.add_output("crop")
    model.add_operation(T.SLICE, [conv, c(axes), c(starts), c(ends), c([1] * len(axes))], [crop])
    bn = model.add_output("bn")
    params = [rng.uniform(0.5, 1.5, 4), rng.standard_normal(4), rng.standard_normal(4) * 0.1, rng.uniform(0.5, 2, 4)]
    model.add_operation(T.BATCH_NORMALIZATION, [crop] + [c(p, np.float32) for p in params] + [c(1e-3, np.float32)],
                        [bn])
    model.identify_inputs_and_outputs([x], [bn])
    model.finish()
    return model


_BIG = 2 ** 31 - 1


@pytest.mark.parametrize("size, kernel, stride, pad, group, axes, starts, ends, folded", [
    (12, 3, 2, 2, 1, [2, 3], [1, 1], [_BIG, _BIG], True),  # EfficientNet's stem: TFLite's SAME conv
    (12, 5, 2, 3, 4, [2, 3], [1, 1], [_BIG, _BIG], True),  # its 5x5 depthwise
    (13, 3, 1, 1, 1, [-2, -1], [0, 1], [-1, _BIG], True),  # a trailing row dropped, a leading column
    (12, 3, 2, 2, 1, [2, 3], [2, 2], [_BIG, _BIG], False),  # the first kept window would start above the pads
    (12, 3, 2, 2, 1, [1], [0], [_BIG], False),  # channels (all of them): not a crop of windows
])
def test_a_cropped_conv_is_one_conv_with_smaller_pads(context, size, kernel, stride, pad, group, axes, starts, ends,
                                                       folded):
    model = _cropped_conv_model(size, kernel, stride, pad, group, axes, starts, ends)
    program = DRIVER.create_program(context, model, Cache())
    assert delegate_gaps(program.interpreter) == ""
    names = collections.Counter(n["op_name"] for n in program.interpreter._get_ops_details())
    if folded:  # no SLICE, and the batch norm folds into the conv as it does without a crop
        assert set(names) <= {"DELEGATE", "TRANSPOSE", "CONV_2D", "DEPTHWISE_CONV_2D", "PAD"}, names
    else:
        assert names["SLICE"] == 1, names
    feeds = [randn(1, 4, size, size, seed=6)]
    assert_op_close(DRIVER.run_arrays(program, feeds)[0], run_model(model, feeds)[0], what="cropped conv")


def _max_pool_model(size: int, pads, ceil_mode: bool):
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, 3, size, size)), "x")
    out = model.add_output("pool")
    c = lambda v: model.add_constant(np.asarray(v, dtype=np.int32))  # noqa: E731
    model.add_operation(T.MAX_POOL_2D, [x, c([0]), c(pads), c([3, 3]), c([2, 2]),
                                        model.add_constant(np.array([ceil_mode])), None, None, c([0])], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


@pytest.mark.parametrize("size, pads, ceil_mode", [(8, [1, 1, 1, 1], False), (112, [1, 1, 1, 1], False),
                                                   (9, [0, 0, 0, 0], True), (8, [1, 0, 0, 1], True)])
def test_a_padded_max_pool_pads_with_edge_copies_as_paddle_pads_with_minus_infinity(context, size, pads, ceil_mode):
    """Paddle's -inf padding (the resnet stem's pool: pads 1 on an even size, not TFLite's SAME pads), and ceil_mode
    windows past the end: on all-negative inputs a zero PAD would give 0 at the borders, the edge copies do not."""
    model = _max_pool_model(size, pads, ceil_mode)
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    feeds = [-np.abs(randn(1, 3, size, size, seed=2)) - 1.0]
    want = run_model(model, feeds)[0]
    assert want.max() < 0
    assert_op_close(DRIVER.run_arrays(program, feeds)[0], want, what=f"max pool pads {pads} ceil {ceil_mode}")


@pytest.mark.parametrize("rank", [2, 4])
def test_a_zero_pad_matches_the_reference(context, rank):
    x = randn(*([2, 3, 4, 5][:rank]), seed=4)
    pads = np.int32([1, 0, 0, 2, 2, 1, 0, 1][:2 * rank])
    model, feeds = build_op(T.PAD, [x, Const(pads), int(PadMode.CONSTANT), 0.0])
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    assert_op_close(DRIVER.run_arrays(program, _feeds_in_order(model, feeds))[0], run_model(model, feeds)[0],
                    what=f"PAD rank {rank}")


@pytest.mark.parametrize("scale", [0.5, 1.5])
def test_a_bilinear_resize_by_a_scale_steps_by_one_over_the_scale_as_paddle_does(xnnpack, tmp_path, scale):
    """11 rows at scale 0.5 give 5: Paddle samples every 2 source rows (1 / scale), TFLite every 2.2 (in / out);
    the resize is left to the host, which computes Paddle's."""
    import paddle

    from support.converter_harness import pir_program, run_predictor

    x = randn(1, 3, 11, 9, seed=6)
    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.interpolate(x, scale_factor=scale, mode="bilinear"),
                        {"x": x})
    assert_op_close(run_predictor(saved, "google_xnnpack")[0], saved.outputs[0], what=f"bilinear by {scale}")


@pytest.mark.parametrize("size", [(1, 1), (1, 3), (4, 1)])
def test_a_bilinear_resize_to_one_row_reads_row_0_as_paddle_does(xnnpack, tmp_path, size):
    """Paddle's bilinear_interp_v2 samples an output axis of length 1 at source 0 (DSNet's attention branch resizes
    2x2 maps to 1x1); TFLite's half-pixel centers would average the middle rows."""
    import paddle

    from support.converter_harness import pir_program, run_predictor

    x = randn(1, 3, 6, 5, seed=5)
    saved = pir_program(tmp_path, lambda x: paddle.nn.functional.interpolate(x, size=size, mode="bilinear"), {"x": x})
    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names(["google_xnnpack"])
    assert not nb.create_predictor(config).host_ops
    assert_op_close(run_predictor(saved, "google_xnnpack")[0], saved.outputs[0], what=f"bilinear to {size}")


def test_hard_swish_with_other_attributes_is_declined(context):
    model, _ = build_op(T.HARD_SWISH, [randn(2, 3), 0.2, 0.5])
    assert "TFLite's HARD_SWISH is x * relu6(x + 3) / 6" in DRIVER.unsupported_reasons(context, model)[0]


# -- properties, shapes, clones ------------------------------------------------------------------------------
def test_num_threads_from_the_properties_and_the_environment(monkeypatch):
    device = DRIVER.open_device()
    assert DRIVER.create_context(device, "").num_threads == 0
    assert DRIVER.create_context(device, f"{NUM_THREADS_KEY}=2").num_threads == 2
    monkeypatch.setenv(NUM_THREADS_KEY, "3")
    assert DRIVER.create_context(device, "").num_threads == 3
    with pytest.raises(NNAdapterError, match="expected 0"):
        DRIVER.create_context(device, f"{NUM_THREADS_KEY}=-1")
    with pytest.raises((NNAdapterError, PropertiesError)):
        DRIVER.create_context(device, f"{NUM_THREADS_KEY}=many")
    assert NUM_THREADS_KEY in DRIVER.property_keys and NUM_THREADS_KEY.endswith("_NUM_THREADS")


def test_set_threads_fills_the_thread_count(xnnpack, zoo_model):
    captured = []
    original = DRIVER.create_context

    def spy(device, properties, callback=None):
        ctx = original(device, properties, callback)
        captured.append(ctx.num_threads)
        return ctx

    config = nb.Config()
    config.set_model_file(zoo_model("mobilenet_v1", "pdmodel"))
    config.set_nnadapter_device_names(["google_xnnpack"])
    config.set_threads(2)
    try:
        DRIVER.create_context = spy
        nb.create_predictor(config)
    finally:
        del DRIVER.create_context
    assert captured and captured[-1] == 2


def test_other_shapes_and_dtypes_are_refused(context):
    sample = SAMPLE_BY_ID["SOFTMAX"]
    model, feeds = build_op(sample.type, sample.inputs)
    program = DRIVER.create_program(context, model, Cache())
    x = _feeds_in_order(model, feeds)[0]
    with pytest.raises(InvalidDimensionsError):
        DRIVER.run_arrays(program, [np.concatenate([x, x])])
    with pytest.raises(NNAdapterError) as info:
        DRIVER.run_arrays(program, [x.astype(np.float64)])
    assert info.value.code == ResultCode.INVALID_PARAMETER
    DRIVER.destroy_program(program)
    with pytest.raises(NNAdapterError, match="destroyed"):
        DRIVER.run_arrays(program, [x])


def test_a_clone_runs_on_its_own_interpreter(context):
    model = _conv_chain_model()
    program = DRIVER.create_program(context, model, Cache())
    clone = DRIVER.clone_program(program)
    assert clone.interpreter is not program.interpreter
    a, b = randn(1, 4, 8, 8, seed=1), randn(1, 4, 8, 8, seed=2)
    first = DRIVER.run_arrays(program, [a])
    other = DRIVER.run_arrays(clone, [b])
    DRIVER.destroy_program(program)
    np.testing.assert_array_equal(DRIVER.run_arrays(clone, [a])[0], first[0])
    assert not np.array_equal(other[0], first[0])


def test_an_unknown_dim_is_refused_at_compile_time(context):
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (-1, 3)), "x")
    out = model.add_output("out")
    model.add_operation(T.RELU, [x], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    assert DRIVER.validate_program(context, model) == [True]  # the compiled program has the concrete dims
    with pytest.raises(NNAdapterError, match="must be known") as info:
        DRIVER.create_program(context, model, Cache())
    assert info.value.code == ResultCode.FEATURE_NOT_SUPPORTED


def _declared_model(kind: T, x_dims, out_dims, second):
    """One operation on a model input declared with -1 dims, as the support decision asks about it."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, x_dims), "x")
    out = model.add_operand(OperandType(Precision.FLOAT32, out_dims), "out")
    if kind == T.RESHAPE:
        inputs = [x, model.add_constant(np.int32(second))]
    else:
        inputs = [x, model.add_constant(np.asarray(second, np.float32)), model.add_constant(np.array([False])),
                  model.add_constant(np.array([False]))]
    model.add_operation(kind, inputs, [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


@pytest.mark.parametrize("kind, x_dims, out_dims, second", [
    # Swin's window partition: [-1, 4, 4, 96] -> [-1, 8, 8, 4, 4, 96]; made 1, the -1s hold 1536 and 98304 elements
    (T.RESHAPE, (-1, 4, 4, 8), (-1, 2, 2, 4, 4, 8), [-1, 2, 2, 4, 4, 8]),
    # segmenter's [-1, -1, -1] -> [0, 0, 19] (Paddle's 0 copies the input's dim)
    (T.RESHAPE, (-1, -1, -1), (-1, -1, 19), [0, 0, 19]),
    # segmenter's projection of [-1, -1, -1] by a constant [192, 192] weight: made 1, it contracts 1 with 192
    (T.MAT_MUL, (-1, -1, -1), (-1, -1, 6), np.ones((5, 6))),
], ids=["reshape", "reshape_copying_dims", "matmul"])
def test_declared_dims_that_disagree_once_made_1_are_decided_as_a_concrete_program_has_them(
        context, kind, x_dims, out_dims, second):
    """The trial build for validate_program makes every -1 a 1; where that disagrees with the operation's other
    dims, LiteRT's XNNPACK delegate refuses to prepare the trial ("failed to reshape runtimeNode"), though a
    compiled program, whose dims are concrete and agree, runs. The trial gives the input the size it must have."""
    model = _declared_model(kind, x_dims, out_dims, second)
    assert DRIVER.unsupported_reasons(context, model) == [""]
    concrete_dims = {(-1, 4, 4, 8): ((8, 4, 4, 8), (2, 2, 2, 4, 4, 8)), (-1, -1, -1): ((2, 3, 19), (2, 3, 19))}
    if kind == T.MAT_MUL:
        concrete_dims = {(-1, -1, -1): ((2, 3, 5), (2, 3, 6))}
    concrete = _declared_model(kind, *concrete_dims[x_dims], second)
    feeds = [randn(*concrete.input_operands[0].type.dims, seed=3)]
    program = DRIVER.create_program(context, concrete, Cache())
    assert_op_close(DRIVER.run_arrays(program, feeds)[0], run_model(concrete, feeds)[0], what=kind.name)


def test_convert_model_names_the_operation_it_cannot_build():
    from hal.common import Unsupported

    model, _ = build_op(T.PAD, [randn(2, 3), Const(np.int32([1, 1, 0, 0])), int(PadMode.REFLECT), 0.0])
    with pytest.raises(Unsupported, match="PAD#0: only the constant mode"):
        convert_model(model, OPERATIONS)


def test_missing_litert_says_what_to_install():
    """A child process where importing ai_edge_litert fails, as without the optional extra: the package's import
    error (what the device manager shows as the device's status) names the extra."""
    import subprocess
    import sys

    script = ("import sys\n"
              "sys.modules['ai_edge_litert'] = None\n"
              "try:\n"
              "    import hal.google_xnnpack\n"
              "except ImportError as exc:\n"
              "    print('ImportError:', exc)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "install nnadapter-bridge[xnnpack]" in result.stdout, result.stdout


# -- whole models through the predictor, against Paddle Inference ---------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_0", "resnet50",
                                  "shufflenet_v2_x1_0"])
def test_zoo_model_runs_wholly_on_xnnpack_and_matches_paddle(xnnpack, name, zoo_model, paddle_reference, tmp_path):
    path = zoo_model(name, "pdmodel")
    x = np.random.default_rng(7).standard_normal((1, 3, 224, 224)).astype(np.float32)
    want = paddle_reference(path, {"x": x})
    for attempt in ("compiled", "restored"):
        config = nb.Config()
        config.set_model_file(path)
        config.set_nnadapter_device_names(["google_xnnpack"])
        config.set_nnadapter_model_cache_dir(str(tmp_path))
        config.set_threads(1)
        predictor = nb.create_predictor(config)
        predictor.get_input(0).from_numpy(x)
        predictor.run()
        assert_model_close(predictor.get_output(0).numpy(), want[0], what=f"{name} {attempt}")
        placements = predictor.placements()
        assert placements and {p.device for p in placements} == {"google_xnnpack"}, \
            [(p.op.type, p.reason) for p in placements if p.device != "google_xnnpack"]
        if attempt == "restored":
            assert predictor.stats.cache_hits_file == 1 and predictor.stats.builds == 0, predictor.stats
        predictor.close()


# -- NaN: XNNPACK's clamps pass it on, Paddle's relu gives 0 (driver._NAN_FAULT) -------------------------------
@pytest.fixture(scope="module")
def conv_relu_program(tmp_path_factory):
    """relu(x) + 1 and relu(conv(x)), saved the Paddle 3 way (support.converter_harness.pir_program)."""
    from support.converter_harness import pir_program

    def build(x):
        import paddle

        paddle.seed(3)
        conv = paddle.nn.Conv2D(3, 4, 3, padding=1)
        return [paddle.nn.functional.relu(x) + 1.0, paddle.nn.functional.relu(conv(x))]
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    return pir_program(tmp_path_factory.mktemp("xnn_nan"), build, {"x": x})


def _conv_relu_predictor(saved):
    config = nb.Config()
    config.set_model_file(saved.model_path)
    if saved.params_path:
        config.set_param_file(saved.params_path)
    config.set_nnadapter_device_names(["google_xnnpack"])
    return nb.create_predictor(config)


def test_a_nan_input_runs_elsewhere_and_gives_paddles_zeros(xnnpack, conv_relu_program):
    from support.converter_harness import paddle_inference_run

    x = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)
    x[0, 0, 2, 2], x[0, 1, 5, 5] = np.nan, -np.inf
    want = paddle_inference_run(conv_relu_program.model_path, conv_relu_program.params_path, {"x": x})
    assert not any(np.isnan(w).any() for w in want)  # Paddle's relu turned the NaN into 0
    predictor = _conv_relu_predictor(conv_relu_program)
    predictor.get_input(0).from_numpy(x)
    with pytest.warns(DeviceFallbackWarning, match="holds NaN or infinity"):
        predictor.run()
    for k, w in enumerate(want):
        got = predictor.get_output(k).numpy()
        assert not np.isnan(got).any()
        assert_model_close(got, w, what=f"output {k}")


def test_finite_inputs_stay_on_xnnpack(xnnpack, conv_relu_program):
    predictor = _conv_relu_predictor(conv_relu_program)
    predictor.get_input(0).from_numpy(conv_relu_program.feeds["x"])
    predictor.run()
    for k, w in enumerate(conv_relu_program.outputs):
        assert_model_close(predictor.get_output(k).numpy(), w, what=f"output {k}")
    assert predictor.stats.host_ops == 0 and predictor.stats.subgraph_host_runs == 0, predictor.stats


@pytest.mark.parametrize("kind, count, axis", [(T.CONCAT, 7, 1), (T.CONCAT, 12, 3), (T.CONCAT, 6, 0),
                                               (T.STACK, 6, 1), (T.STACK, 25, 4)])
def test_a_concat_of_more_inputs_than_xnnpack_takes_at_once_is_split(context, kind, count, axis):
    """XNNPACK concatenates at most 5 inputs in one operator (PP-HGNet concatenates 6 and more, RT-DETR stacks 6
    and SLANet 25): a tree of them."""
    model = Model()
    parts = [model.add_operand(OperandType(Precision.FLOAT32, (2, 3, 4, 5)), f"x{k}") for k in range(count)]
    out = model.add_output("out")
    model.add_operation(kind, parts + [model.add_constant(np.int32([axis]))], [out])
    model.identify_inputs_and_outputs(parts, [out])
    model.finish()
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    assert delegate_gaps(program.interpreter) == ""
    feeds = [randn(2, 3, 4, 5, seed=k) for k in range(count)]
    np.testing.assert_array_equal(DRIVER.run_arrays(program, feeds)[0], run_model(model, feeds)[0])


@pytest.mark.parametrize("kind, axis", [(T.CONCAT, 0), (T.CONCAT, 2), (T.STACK, 0), (T.STACK, 4)])
def test_a_concat_or_stack_of_one_input_is_a_copy_xnnpack_takes(context, kind, axis):
    """XNNPACK takes no one-input CONCATENATION (RetinaNet's decode stacks the boxes of its single image): a
    RESHAPE to the same shape instead, on the device."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 3, 4, 5)), "x")
    out = model.add_output("out")
    model.add_operation(kind, [x, model.add_constant(np.int32([axis]))], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    assert delegate_gaps(program.interpreter) == ""
    feeds = [randn(2, 3, 4, 5, seed=3)]
    got = DRIVER.run_arrays(program, feeds)[0]
    want = run_model(model, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("size, stride", [(10, 2), (7, 2), (9, 3)])
def test_a_one_by_one_max_pool_with_a_stride_runs_on_xnnpack(context, size, stride):
    """FPN's extra pyramid level (SOLOv2's P6) max-pools P5 with a 1x1 window and stride 2, which XNNPACK does not
    take: a DEPTHWISE_CONV_2D by ones picks the same elements, exactly."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, 3, size, size)), "x")
    out = model.add_output("pool")
    c = lambda v: model.add_constant(np.asarray(v, dtype=np.int32))  # noqa: E731
    model.add_operation(T.MAX_POOL_2D, [x, c([0]), c([0, 0, 0, 0]), c([1, 1]), c([stride, stride]),
                                        model.add_constant(np.array([False])), None, None, c([0])], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    assert delegate_gaps(program.interpreter) == ""
    feeds = [randn(1, 3, size, size, seed=8)]
    got = DRIVER.run_arrays(program, feeds)[0]
    want = run_model(model, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("size, kernel, stride, pads", [(8, 3, 2, [1, 1, 1, 1]), (7, 3, 2, [1, 0, 0, 1]),
                                                        (6, 2, 2, [1, 1, 1, 1])])
def test_an_exclusive_average_pool_with_pads_tflite_would_not_choose(context, size, kernel, stride, pads):
    """Paddle's average of the input elements only (count_include_pad false), with the pads of a stride-2 pool on an
    even size (Res2Net, ResNeSt): not TFLite's SAME pads, so a zero PAD, a VALID average and a per-position factor."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, 3, size, size)), "x")
    out = model.add_output("pool")
    c = lambda v: model.add_constant(np.asarray(v, dtype=np.int32))  # noqa: E731
    flag = model.add_constant(np.array([False]))
    model.add_operation(T.AVERAGE_POOL_2D, [x, c([0]), c(pads), c([kernel, kernel]), c([stride, stride]), flag, flag,
                                            c([0])], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    feeds = [randn(1, 3, size, size, seed=6)]
    assert_op_close(DRIVER.run_arrays(program, feeds)[0], run_model(model, feeds)[0], what=f"average pool {pads}")


def test_an_input_read_only_for_its_shape_may_be_of_any_type(xnnpack, tmp_path):
    """A subgraph input whose values nothing reads (a full_like of a bool mask, folded to a constant for the
    declared dims: QWen's attention mask) is a program input of its own type that no operator touches, so the
    program compiles: before, every model input had to be float32 and the subgraph the support decision accepted
    failed to compile and ran on the host."""
    import paddle

    from support.converter_harness import pir_program

    def build(x):
        mask = paddle.logical_and(x > 0, x < 1)  # bool, on the host (XNNPACK has no comparison)
        return paddle.full_like(mask, 2.0, dtype="float32") * x

    x = np.random.default_rng(8).standard_normal((2, 3)).astype(np.float32)
    saved = pir_program(tmp_path, build, {"x": x})
    predictor = _conv_relu_predictor(saved)
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    assert_model_close(predictor.get_output(0).numpy(), saved.outputs[0], what="output")
    assert "fill_any_like" not in {op.type for op in predictor.host_ops}
    assert predictor.stats.subgraph_host_runs == 0, predictor.stats


def test_an_unread_bool_model_input_builds_and_runs(context):
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 3)), "x")
    mask = model.add_operand(OperandType(Precision.BOOL8, (2, 3)), "mask")
    y = model.add_output("y")
    model.add_operation(T.ABS, [x], [y])
    model.identify_inputs_and_outputs([x, mask], [y])
    model.finish()
    program = DRIVER.create_program(context, model, Cache())
    feeds = [randn(2, 3, seed=4), np.ones((2, 3), bool)]
    np.testing.assert_array_equal(DRIVER.run_arrays(program, feeds)[0], np.abs(feeds[0]))


def test_a_float32_cast_to_float32_is_a_copy(context):
    """Paddle's cast to the dtype a value has already (CLIP's vision embeddings) is built, as a copy; before,
    every CAST but int8 -> float32 was declined and the op ran on the host."""
    model, feeds = build_op(T.CAST, [randn(2, 3, seed=5), int(Precision.FLOAT32)], 1)
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    np.testing.assert_array_equal(DRIVER.run_arrays(program, feeds)[0], feeds[0])


# -- infinity: a causal mask's -inf (Paddle's decoders add it to the attention scores) -------------------------
def _infinity_program(tmp_path, with_pool: bool):
    """relu(softmax(q k^T + mask) v) with the mask an input (-inf above the diagonal), saved the Paddle 3 way; with
    `with_pool`, an average pool after (AVERAGE_POOL_2D may drop a NaN an infinity makes)."""
    from support.converter_harness import pir_program

    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((1, 6, 8)).astype(np.float32) for _ in range(3))
    mask = np.triu(np.full((6, 6), -np.inf, np.float32), 1)

    def build(q, k, v, mask):
        import paddle

        scores = paddle.matmul(q, k, transpose_y=True) + mask
        attended = paddle.nn.functional.relu(paddle.matmul(paddle.nn.functional.softmax(scores, -1), v))
        return paddle.nn.functional.avg_pool1d(attended, 2) if with_pool else attended
    return pir_program(tmp_path, build, {"q": q, "k": k, "v": v, "mask": mask})


@pytest.mark.parametrize("with_pool", [False, True])
def test_an_infinite_mask_runs_on_xnnpack_where_every_operator_passes_nan_on(xnnpack, tmp_path, with_pool):
    saved = _infinity_program(tmp_path, with_pool)
    predictor = _conv_relu_predictor(saved)
    for name, value in saved.feeds.items():
        predictor.get_input_by_name(name).from_numpy(value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor.run()
    assert_model_close(predictor.get_output(0).numpy(), saved.outputs[0], what="output")
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, DeviceFallbackWarning)]
    if with_pool:  # the pool may drop a NaN: the infinite input runs elsewhere
        assert fallbacks and all("holds NaN or infinity" in f for f in fallbacks), fallbacks
        assert predictor.stats.subgraph_host_runs >= 1, predictor.stats
    else:
        assert not fallbacks, fallbacks
        assert predictor.stats.subgraph_host_runs == 0, predictor.stats


@pytest.mark.parametrize("size, out, on_xnnpack", [((14, 14), (7, 7), True), ((21, 8), (7, 2), True),
                                                    ((7, 7), (7, 7), True), ((10, 10), (3, 3), False)])
def test_an_adaptive_average_pool_dividing_its_input_is_an_average_pool(xnnpack, tmp_path, size, out, on_xnnpack):
    """ERNIE-Layout (UIE-X) pools its ResNet features to 7x7 adaptively: with the output dividing the input, Paddle's
    bins are the windows of a plain average pool; other outputs stay off XNNPACK."""
    from support.converter_harness import pir_program

    x = np.random.default_rng(4).standard_normal((1, 3, *size)).astype(np.float32)
    saved = pir_program(tmp_path, lambda x: paddle_adaptive_pool(x, out) * 2.0, {"x": x})
    predictor = _conv_relu_predictor(saved)
    predictor.get_input(0).from_numpy(x)
    predictor.run()
    assert_model_close(predictor.get_output(0).numpy(), saved.outputs[0], what="output")
    assert ("pool2d" not in {op.type for op in predictor.host_ops}) == on_xnnpack, predictor.unsupported_reasons()


def paddle_adaptive_pool(x, out):
    import paddle

    return paddle.nn.functional.adaptive_avg_pool2d(x, out)
