"""google_xnnpack on quantized models: int8 operators against the NNAdapter reference, the quantized convolution
chain run as one TFLite int8 convolution, integer products judged with the DEQUANTIZE reading their sums,
convolutions whose filter is computed at run time, and Paddle's quantized zoo models (both PTQ encodings) running
their convolutions in int8 inside one XNNPACK delegate node. Accuracy of the quantized zoo models against Paddle
Inference is tests/e2e/test_quantized_models.py's, as for the other devices."""
from __future__ import annotations

import collections

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="the google_xnnpack driver needs ai-edge-litert "
                    "(install nnadapter-bridge[xnnpack])")

import nnadapter_bridge as nb  # noqa: E402
from hal.google_xnnpack import DRIVER  # noqa: E402
from hal.google_xnnpack import driver as xnnpack_driver  # noqa: E402
from hal.google_xnnpack.driver import delegate_gaps  # noqa: E402
from hal.protocol import Cache  # noqa: E402
from nnadapter_bridge.conformance.harness import Quant, build_op  # noqa: E402
from nnadapter_bridge.conformance.samples import randn  # noqa: E402
from nnadapter_bridge.nnadapter.codes import OperationType as T  # noqa: E402
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.model import Model  # noqa: E402
from nnadapter_bridge.nnadapter.reference import run_model  # noqa: E402
from nnadapter_bridge.nnadapter.types import OperandType  # noqa: E402
from support.quant_fixtures import CHANNEL, LAYER, quant_case_id  # noqa: E402
from support.tolerances import assert_op_close  # noqa: E402


@pytest.fixture(scope="module")
def context():
    ctx = DRIVER.create_context(DRIVER.open_device(), "")
    yield ctx
    DRIVER.destroy_context(ctx)


def _ops(program) -> collections.Counter:
    return collections.Counter(n["op_name"] for n in program.interpreter._get_ops_details())


def _int8_convolutions(program) -> int:
    """Convolutions whose input tensor is int8, from the interpreter's own node list and tensor types."""
    interpreter = program.interpreter
    types = {d["index"]: d["dtype"] for d in interpreter.get_tensor_details()}
    return sum(1 for n in interpreter._get_ops_details()
               if n["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D") and types[int(n["inputs"][0])] == np.int8)


def _run(context, model, feeds):
    assert DRIVER.unsupported_reasons(context, model) == [""] * len(model.operations)
    program = DRIVER.create_program(context, model, Cache())
    assert delegate_gaps(program.interpreter) == ""
    return program, DRIVER.run_arrays(program, feeds)


def _const(model, values, dtype=np.int32):
    return model.add_constant(np.asarray(values, dtype=dtype))


def _conv_inputs(model, x, filt, bias, pads, strides, group, dilations=(1, 1)):
    return [x, filt, bias, _const(model, [0]), _const(model, pads), _const(model, strides), _const(model, [group]),
            _const(model, dilations), _const(model, [0])]


# -- int8 operators of the standard -----------------------------------------------------------------------------
def _int8_pool_model(kind: T, size: int, kernel, pads, strides):
    model = Model()
    x = model.add_operand(OperandType(Precision.QUANT_INT8_SYMM_PER_LAYER, (1, 3, size, size), scale=0.05), "x")
    out = model.add_output("pool")
    if kind == T.MAX_POOL_2D:
        inputs = [x, _const(model, [0]), _const(model, pads), _const(model, kernel), _const(model, strides),
                  model.add_constant(np.array([False])), None, None, _const(model, [0])]
    else:
        inputs = [x, _const(model, [0]), _const(model, pads), _const(model, kernel), _const(model, strides),
                  model.add_constant(np.array([False])), model.add_constant(np.array([False])), _const(model, [0])]
    model.add_operation(kind, inputs, [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


@pytest.mark.parametrize("kind, size, kernel, pads, strides", [
    (T.MAX_POOL_2D, 8, [3, 3], [0, 1, 0, 1], [2, 2]),  # TFLite's SAME pads
    (T.MAX_POOL_2D, 9, [3, 3], [0, 0, 0, 0], [2, 2]),
    (T.AVERAGE_POOL_2D, 7, [7, 7], [0, 0, 0, 0], [1, 1]),  # global: a MEAN
])
def test_an_int8_pool_matches_the_reference(context, kind, size, kernel, pads, strides):
    model = _int8_pool_model(kind, size, kernel, pads, strides)
    feeds = [np.random.default_rng(4).integers(-128, 128, (1, 3, size, size)).astype(np.int8)]
    program, got = _run(context, model, feeds)
    assert got[0].dtype == np.int8
    assert_op_close(got[0], run_model(model, feeds)[0], what=f"int8 {kind.name}")
    assert _ops(program)["MEAN" if kind == T.AVERAGE_POOL_2D else "MAX_POOL_2D"] == 1


def test_an_int8_average_pool_other_than_global_is_declined(context):
    model = _int8_pool_model(T.AVERAGE_POOL_2D, 8, [2, 2], [0, 0, 0, 0], [2, 2])
    assert "XNNPACK does not take int8 AVERAGE_POOL_2D" in DRIVER.unsupported_reasons(context, model)[0]


def test_int8_elementwise_needs_two_int8_values_of_one_shape(context):
    model, _ = build_op(T.ADD, [Quant(np.int8([[1, 2, 3]]), 0.1), Quant(np.int8([1, 2, 3]), 0.2), 0],
                        output_types=[OperandType(Precision.QUANT_INT8_SYMM_PER_LAYER, scale=0.3)])
    assert "different shapes" in DRIVER.unsupported_reasons(context, model)[0]


# -- integer products and their chains ------------------------------------------------------------------------------
def _chain_model(relu: bool, with_batch_norm: bool = True, sums_read_raw: bool = False, depthwise: bool = False,
                 group: int = 1, pool: bool = False, requantized: bool = True, kernel: int = 3, stride: int = 2,
                 pad: int = 1, dilation: int = 1):
    """QUANTIZE(x) -> CONV_2D (int8 x int8 -> int32 sums) -> DEQUANTIZE -> [BATCH_NORMALIZATION] -> [RELU6] ->
    QUANTIZE -> DEQUANTIZE: what the converters make of a quantized Paddle conv (docs/quantization.md); without
    `requantized` the float result (before the last QUANTIZE) is the model's output."""
    rng = np.random.default_rng(11)
    channels, out_channels = 4, 4 if depthwise else 6
    x_scale, out_scale = 0.02, 0.03
    w_scales = rng.uniform(0.005, 0.02, out_channels)
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, channels, 9, 9)), "x")
    xq = model.add_output("xq")
    model.add_operation(T.QUANTIZE, [x, None, model.add_constant(np.float32([x_scale])), None], [xq])
    weights = rng.integers(-127, 128, (out_channels, 1 if depthwise else channels // group, kernel, kernel))
    weights = weights.astype(np.int8)
    filt = model.add_constant(weights, Precision.QUANT_INT8_SYMM_PER_CHANNEL, scales=tuple(w_scales.tolist()))
    sums = model.add_output("sums", OperandType(Precision.QUANT_INT32_SYMM_PER_CHANNEL,
                                                scales=tuple((x_scale * w_scales).tolist()), channel_dim=1))
    model.add_operation(T.CONV_2D, _conv_inputs(model, xq, filt, None, [pad] * 4, [stride] * 2,
                                                channels if depthwise else group, [dilation] * 2), [sums])
    real = model.add_output("real")
    model.add_operation(T.DEQUANTIZE, [sums], [real])
    outputs = [sums] if sums_read_raw else []
    if with_batch_norm:
        normalized = model.add_output("bn")
        statistics = (rng.uniform(-1.5, 1.5, out_channels), rng.standard_normal(out_channels),
                      rng.standard_normal(out_channels), rng.uniform(0.5, 2, out_channels))
        constants = [model.add_constant(a.astype(np.float32)) for a in statistics]
        model.add_operation(T.BATCH_NORMALIZATION, [real, *constants, model.add_constant(np.float32([1e-5]))],
                            [normalized])
        real = normalized
    if relu:
        activated = model.add_output("relu6")
        model.add_operation(T.RELU6, [real], [activated])
        real = activated
    if pool:
        pooled = model.add_output("pool")
        model.add_operation(T.MAX_POOL_2D, [real, _const(model, [0]), _const(model, [1, 1, 1, 1]),
                                            _const(model, [2, 2]), _const(model, [2, 2]),
                                            model.add_constant(np.array([False])), None, None, _const(model, [0])],
                            [pooled])
        real = pooled
    if not requantized:
        model.identify_inputs_and_outputs([x], outputs + [real])
        model.finish()
        return model, 0.0
    q = model.add_output("q")
    model.add_operation(T.QUANTIZE, [real, None, model.add_constant(np.float32([out_scale])), None], [q])
    y = model.add_output("y")
    model.add_operation(T.DEQUANTIZE, [q], [y])
    model.identify_inputs_and_outputs([x], outputs + [y])
    model.finish()
    return model, out_scale


@pytest.mark.parametrize("relu, with_batch_norm, depthwise", [(True, True, False), (False, True, False),
                                                              (True, False, False), (True, True, True)])
def test_a_quantized_conv_chain_is_one_int8_convolution(context, relu, with_batch_norm, depthwise):
    model, out_scale = _chain_model(relu, with_batch_norm, depthwise=depthwise)
    feeds = [randn(1, 4, 9, 9, seed=12)]
    program, got = _run(context, model, feeds)
    assert _int8_convolutions(program) == 1
    ops = _ops(program)
    assert ops["BATCH_NORMALIZATION"] == ops["MUL"] == ops["RELU6"] == 0, ops  # folded into the convolution
    want = run_model(model, feeds)[0]
    # the batch norm folded into the weight scales moves a value across a rounding boundary now and then: one step
    assert np.abs(got[0] - want).max() <= out_scale * 1.001
    assert np.mean(got[0] == want) > 0.95


def test_a_max_pool_between_a_conv_chain_and_its_quantize_is_an_int8_pool(context):
    """conv -> dequantize -> batch norm -> relu6 -> max pool (2x2, stride 2, Paddle's pads 1 on 5x5: not TFLite's
    SAME pads, so edge copies) -> quantize: one int8 convolution and one int8 max pool, within one step of the
    reference."""
    model, out_scale = _chain_model(True, pool=True)
    feeds = [randn(1, 4, 9, 9, seed=12)]
    program, got = _run(context, model, feeds)
    assert _int8_convolutions(program) == 1
    types = {d["index"]: d["dtype"] for d in program.interpreter.get_tensor_details()}
    pools = [n for n in program.interpreter._get_ops_details() if n["op_name"] == "MAX_POOL_2D"]
    assert len(pools) == 1 and types[int(pools[0]["inputs"][0])] == np.int8
    assert _ops(program)["CONCATENATION"] == 2  # the edge copies, in int8
    want = run_model(model, feeds)[0]
    assert np.abs(got[0] - want).max() <= out_scale * 1.001
    assert np.mean(got[0] == want) > 0.95


def _dynamic_int8_convolutions(program) -> int:
    """CONV_2Ds with a float input and an int8 filter: XNNPACK's dynamically quantized convolution."""
    interpreter = program.interpreter
    types = {d["index"]: d["dtype"] for d in interpreter.get_tensor_details()}
    return sum(1 for n in interpreter._get_ops_details() if n["op_name"] == "CONV_2D"
               and types[int(n["inputs"][0])] == np.float32 and types[int(n["inputs"][1])] == np.int8)


@pytest.mark.parametrize("relu, with_batch_norm, kernel, stride, pad, dilation", [
    (False, True, 1, 1, 0, 1),  # mobilenet_v2's projection before a float residual add
    (True, True, 1, 2, 0, 1),  # resnet50's strided shortcut
    (True, False, 3, 2, 1, 1),  # Paddle's pads, not TFLite's SAME ones: a zero PAD
    (False, True, 3, 1, 2, 2),
])
def test_an_integer_product_not_requantized_is_a_dynamically_quantized_int8_convolution(
        context, relu, with_batch_norm, kernel, stride, pad, dilation):
    """A product whose float result is the output (no QUANTIZE right after it) cannot be an int8 operator (they
    write int8); it runs as XNNPACK's dynamically quantized convolution on its int8 input widened by the -128 /
    127 range channels, which makes that quantization give the int8 values back: the result is the exact int32
    sums times the scales (with the batch norm and relu folded in), within float32 rounding of the reference.
    Without the range channels XNNPACK rounds each pixel to its own grid, 0.2-0.7% of the largest value off."""
    model, _ = _chain_model(relu, with_batch_norm, requantized=False, kernel=kernel, stride=stride, pad=pad,
                            dilation=dilation)
    feeds = [randn(1, 4, 9, 9, seed=12) * np.float32(0.5)]  # within the int8 range: few pixels span it already
    program, got = _run(context, model, feeds)
    assert _dynamic_int8_convolutions(program) == 1 and _int8_convolutions(program) == 0, _ops(program)
    assert _ops(program)["CONCATENATION"] == 1  # the range channels, appended in int8
    assert_op_close(got[0], run_model(model, feeds)[0], what="dynamically quantized conv of a float tail")


def test_a_grouped_quantized_conv_chain_computes_in_float(context):
    """Only group 1 and depthwise are built as int8 convolutions: a grouped one takes the float path (exact)."""
    model, _ = _chain_model(True, group=2)
    feeds = [randn(1, 4, 9, 9, seed=12)]
    program, got = _run(context, model, feeds)
    assert _int8_convolutions(program) == _dynamic_int8_convolutions(program) == 0
    assert_op_close(got[0], run_model(model, feeds)[0], what="grouped quantized conv chain")


def test_int32_sums_read_raw_are_declined_with_their_reason(context):
    model, _ = _chain_model(True, sums_read_raw=True)
    reasons = DRIVER.unsupported_reasons(context, model)
    assert "read other than by a DEQUANTIZE" in reasons[1] and "read other than by a DEQUANTIZE" in reasons[2]
    assert reasons[0] == "" and reasons[-1] == ""


def test_an_integer_product_and_its_dequantize_are_judged_together(context):
    """The product's int32 sums are built as their real values, which only a DEQUANTIZE gives out: with its
    DEQUANTIZE the product is supported (and so is that DEQUANTIZE), with its sums a model output it is not."""
    chained, _ = _chain_model(False, with_batch_norm=False)
    assert [op.type for op in chained.operations][1:3] == [T.CONV_2D, T.DEQUANTIZE]
    assert DRIVER.unsupported_reasons(context, chained) == [""] * len(chained.operations)
    raw, _ = _chain_model(False, with_batch_norm=False, sums_read_raw=True)
    reasons = DRIVER.unsupported_reasons(context, raw)
    assert "int32 sums are read other than by a DEQUANTIZE" in reasons[1], reasons


# -- filters computed at run time (a quantized Paddle conv decided alone) -------------------------------------------
@pytest.mark.parametrize("x_shape, w_shape, stride, pad, group, dilation", [
    ((1, 3, 16, 16), (8, 3, 3, 3), 2, 1, 1, 1),  # 9 taps: more than one CONCATENATION (XNNPACK's take 5)
    ((2, 8, 10, 10), (4, 8, 3, 3), 1, 1, 1, 2),
    ((1, 8, 9, 9), (8, 1, 3, 3), 2, 1, 8, 1),  # depthwise
    ((1, 4, 6, 6), (5, 4, 1, 1), 1, 0, 1, 1),
])
def test_a_filter_computed_at_run_time_matches_the_reference(context, x_shape, w_shape, stride, pad, group, dilation):
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, x_shape), "x")
    w = model.add_operand(OperandType(Precision.FLOAT32, w_shape), "w")
    out = model.add_output("out")
    model.add_operation(T.CONV_2D, _conv_inputs(model, x, w, model.add_constant(randn(w_shape[0], seed=1)),
                                                [pad] * 4, [stride] * 2, group, [dilation] * 2), [out])
    model.identify_inputs_and_outputs([x, w], [out])
    model.finish()
    feeds = [randn(*x_shape, seed=2), randn(*w_shape, seed=3)]
    _, got = _run(context, model, feeds)
    assert_op_close(got[0], run_model(model, feeds)[0], what="conv with a run-time filter")


def test_a_fully_connected_weight_computed_at_run_time_matches_the_reference(context):
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (3, 8)), "x")
    w = model.add_operand(OperandType(Precision.FLOAT32, (5, 8)), "w")
    out = model.add_output("out")
    model.add_operation(T.FULLY_CONNECTED, [x, w, model.add_constant(randn(5, seed=4)), _const(model, [1])], [out])
    model.identify_inputs_and_outputs([x, w], [out])
    model.finish()
    feeds = [randn(3, 8, seed=5), randn(5, 8, seed=6)]
    _, got = _run(context, model, feeds)
    assert_op_close(got[0], run_model(model, feeds)[0], what="fully connected with a run-time weight")


# -- Paddle's quantized models ----------------------------------------------------------------------------------------
# (model, PTQ encoding, weights) -> (the convolutions that are int8 operators, those that are dynamically quantized
# int8 convolutions): every convolution runs in int8. int8 operators are those whose result is requantized right
# away (hal/quantized_chains.py). The others write a float result (a float residual add or pool reads it) and run
# as dynamically quantized convolutions on their int8 input: mobilenet_v1's last pointwise conv (its relu feeds the
# float pool); mobilenet_v2's last 1x1 conv and the 15 projections a float residual add reads (the 10 residual
# blocks' and the 5 whose next block is residual); resnet50's 16 block outputs and 4 shortcuts before the float
# residual add (the stem's max pool is an int8 one: it commutes with the quantization, Paddle's -inf padding as
# edge copies). In the fake encoding mobilenet_v2's 2 projections that are requantized right away are dynamic
# ones too: their quantizer clips at -range (-127 steps) first, where a conv's int8 result saturates at -128.
INT8_CASES = {("mobilenet_v1", True, CHANNEL): (26, 1), ("mobilenet_v1", False, LAYER): (26, 1),
              ("mobilenet_v2", True, CHANNEL): (36, 16), ("mobilenet_v2", False, CHANNEL): (34, 18),
              ("resnet50", True, CHANNEL): (33, 20)}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(INT8_CASES), ids=[quant_case_id(*c) for c in sorted(INT8_CASES)])
def test_a_quantized_zoo_model_runs_its_convolutions_in_int8(xnnpack_programs, quant_model, case):
    path = quant_model(*case)
    config = nb.Config()
    config.set_model_file(path)
    config.set_param_file(path[: -len(".pdmodel")] + ".pdiparams")
    config.set_nnadapter_device_names(["google_xnnpack"])
    config.set_strict(True)
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(randn(1, 3, 224, 224, seed=9))
    predictor.run()
    assert predictor.stats.host_ops == 0 and predictor.stats.subgraphs == 1
    program = xnnpack_programs[-1]
    assert delegate_gaps(program.interpreter) == ""  # every operator, int8 ones included, inside XNNPACK's node
    assert (_int8_convolutions(program), _dynamic_int8_convolutions(program)) == INT8_CASES[case], _ops(program)
    predictor.close()


@pytest.fixture
def xnnpack_programs(monkeypatch):
    """The programs google_xnnpack builds during the test, newest last."""
    built = []
    make = xnnpack_driver.XnnpackDriver._program

    def recording(self, *args):
        program = make(self, *args)
        built.append(program)
        return program
    monkeypatch.setattr(xnnpack_driver.XnnpackDriver, "_program", recording)
    return built
