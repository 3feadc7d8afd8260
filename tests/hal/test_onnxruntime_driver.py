"""microsoft_onnxruntime beyond the shared contract: context properties (threads, execution providers,
graph optimization level, environment fallback), symbolic dims, INVALID_DIMENSIONS, truthful
validate_program, program bytes, and the message when onnxruntime is not installed."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest

from hal.common import lower
from hal.microsoft_onnxruntime import DRIVER
from hal.microsoft_onnxruntime.driver import (
    EXECUTION_PROVIDERS_KEY,
    GRAPH_OPTIMIZATION_LEVEL_KEY,
    NUM_THREADS_KEY,
)
from hal.microsoft_onnxruntime.graph import OPSET, convert_model
from hal.microsoft_onnxruntime.operations import OPERATIONS
from hal.protocol import Argument, Cache
from nnadapter_bridge.conformance.harness import Const, build_op
from nnadapter_bridge.errors import InvalidDimensionsError, NNAdapterError, PropertiesError
from nnadapter_bridge.nnadapter.codes import UNKNOWN, AutoPad, FuseCode, Precision, ResultCode
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.runtime import (
    Compilation,
    Context,
    DeviceManager,
    Execution,
    HostBuffer,
    array_input_access,
    host_buffer_output_access,
)
from nnadapter_bridge.nnadapter.types import OperandType
from support.tolerances import assert_op_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def device():
    return DRIVER.open_device()


def _dynamic_model():
    """y = softmax(relu(x) + [1, 2, 3]) with x of dims [?, 3]."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (UNKNOWN, 3)), "x")
    relu = model.add_output("relu")
    model.add_operation(T.RELU, [x], [relu])
    added = model.add_output("added")
    model.add_operation(T.ADD, [relu, model.add_constant(np.float32([1, 2, 3])), model.add_constant(np.int32([0]))],
                        [added])
    out = model.add_output("out")
    model.add_operation(T.SOFTMAX, [added, model.add_constant(np.int32([1]))], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def _reference(x):
    z = np.maximum(x, 0) + np.float32([1, 2, 3])
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _run(program, *arrays):
    holders = [HostBuffer() for _ in program.output_types]
    DRIVER.execute_program(program, [Argument(k, a, array_input_access) for k, a in enumerate(arrays)],
                           [Argument(k, h, host_buffer_output_access) for k, h in enumerate(holders)])
    return [h.array for h in holders]


# -- properties ---------------------------------------------------------------------------------------
def test_default_context_uses_cpu_and_all_optimizations(device):
    import onnxruntime as ort

    context = DRIVER.create_context(device, "")
    assert context.providers == ["CPUExecutionProvider"]
    assert context.num_threads == 0
    assert context.optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL


def test_num_threads_reaches_the_session(device):
    context = DRIVER.create_context(device, f"{NUM_THREADS_KEY}=1;")
    program = DRIVER.create_program(context, _dynamic_model(), Cache())
    assert program.session.get_session_options().intra_op_num_threads == 1
    x = np.float32([[1, -2, 3], [0.5, 0, -1]])
    assert_op_close(_run(program, x)[0], _reference(x))


def test_negative_or_malformed_thread_count_is_rejected(device):
    with pytest.raises(NNAdapterError, match=NUM_THREADS_KEY) as info:
        DRIVER.create_context(device, f"{NUM_THREADS_KEY}=-2")
    assert info.value.code == ResultCode.INVALID_PARAMETER
    with pytest.raises(PropertiesError, match="not an integer"):
        DRIVER.create_context(device, f"{NUM_THREADS_KEY}=many")


def test_properties_fall_back_to_the_environment(device, monkeypatch):
    monkeypatch.setenv(NUM_THREADS_KEY, "3")
    monkeypatch.setenv(GRAPH_OPTIMIZATION_LEVEL_KEY, "basic")
    import onnxruntime as ort

    context = DRIVER.create_context(device, "")
    assert context.num_threads == 3
    assert context.optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    # The properties string wins over the environment.
    assert DRIVER.create_context(device, f"{NUM_THREADS_KEY}=2").num_threads == 2


@pytest.mark.parametrize("level", ["disable", "basic", "extended", "all", "ALL"])
def test_every_optimization_level_compiles_and_runs(device, level):
    context = DRIVER.create_context(device, f"{GRAPH_OPTIMIZATION_LEVEL_KEY}={level}")
    program = DRIVER.create_program(context, _dynamic_model(), Cache())
    x = np.float32([[1, -2, 3]])
    assert_op_close(_run(program, x)[0], _reference(x))


def test_unknown_optimization_level_lists_the_choices(device):
    with pytest.raises(NNAdapterError, match="disable, basic, extended, all"):
        DRIVER.create_context(device, f"{GRAPH_OPTIMIZATION_LEVEL_KEY}=maximum")


def test_unavailable_provider_error_lists_the_available_ones(device):
    import onnxruntime as ort

    with pytest.raises(NNAdapterError) as info:
        DRIVER.create_context(device, f"{EXECUTION_PROVIDERS_KEY}=NoSuchExecutionProvider")
    message = str(info.value)
    assert "NoSuchExecutionProvider" in message
    for available in ort.get_available_providers():
        assert available in message
    assert info.value.code == ResultCode.INVALID_PARAMETER


def test_gpu_provider_is_rejected_clearly_or_used_when_present(device):
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        context = DRIVER.create_context(device, f"{EXECUTION_PROVIDERS_KEY}=cuda")
        assert context.providers == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    else:
        with pytest.raises(NNAdapterError, match="'cuda' is not available"):
            DRIVER.create_context(device, f"{EXECUTION_PROVIDERS_KEY}=cuda")


def test_short_and_full_provider_names(device):
    context = DRIVER.create_context(device, f"{EXECUTION_PROVIDERS_KEY}=cpu, CPUExecutionProvider")
    assert context.providers == ["CPUExecutionProvider"]


# -- dims -------------------------------------------------------------------------------------------------
def test_symbolic_dims_accept_any_batch(device):
    context = DRIVER.create_context(device, "")
    model = _dynamic_model()
    graph_input = convert_model(model, OPERATIONS).graph.input[0]
    dims = graph_input.type.tensor_type.shape.dim
    assert dims[0].dim_param and dims[1].dim_value == 3
    program = DRIVER.create_program(context, model, Cache())
    for batch in (1, 4, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)
        (got,) = _run(program, x)
        assert got.shape == (batch, 3)
        assert_op_close(got, _reference(x))


def test_rank_change_is_invalid_dimensions(device):
    program = DRIVER.create_program(DRIVER.create_context(device, ""), _dynamic_model(), Cache())
    with pytest.raises(InvalidDimensionsError) as info:
        _run(program, np.zeros((2, 3, 1), np.float32))
    assert info.value.code == ResultCode.INVALID_DIMENSIONS


def test_other_value_on_a_fixed_axis_is_invalid_dimensions(device):
    program = DRIVER.create_program(DRIVER.create_context(device, ""), _dynamic_model(), Cache())
    with pytest.raises(InvalidDimensionsError):
        _run(program, np.zeros((2, 4), np.float32))


def test_static_model_rejects_other_dims_through_the_runtime():
    model, (x,) = build_op(T.RELU, [np.float32([[1, -1], [2, -2]])])
    context = Context([DeviceManager.instance().acquire("microsoft_onnxruntime")])
    compilation = Compilation(model, context=context)
    compilation.finish()
    execution = Execution(compilation)
    np.testing.assert_array_equal(execution.run([x])[0], np.maximum(x, 0))
    with pytest.raises(InvalidDimensionsError):
        execution.run([np.zeros((3, 2), np.float32)])
    context.destroy()


def test_wrong_dtype_is_invalid_parameter(device):
    program = DRIVER.create_program(DRIVER.create_context(device, ""), _dynamic_model(), Cache())
    with pytest.raises(NNAdapterError, match="dtype") as info:
        _run(program, np.zeros((2, 3), np.float64))
    assert info.value.code == ResultCode.INVALID_PARAMETER


# -- validate_program ------------------------------------------------------------------------------------
def test_validate_is_false_for_operations_onnx_cannot_express(device):
    context = DRIVER.create_context(device, "")
    boxes = np.zeros((1, 4, 4), np.float32)
    # NON_MAX_SUPPRESSION on pixel boxes (normalized false): NonMaxSuppression has no +1 convention.
    nms, _ = build_op(T.NON_MAX_SUPPRESSION, [boxes, np.zeros((1, 2, 4), np.float32), None, -1, 0.0, -1, 0.5, 1.0, -1,
                                              False, False], n_outputs=2)
    assert DRIVER.validate_program(context, nms) == [False]
    uneven, _ = build_op(T.ADAPTIVE_MAX_POOL_2D, [np.zeros((1, 1, 7, 9), np.float32), Const([3, 4])])
    divisible, _ = build_op(T.ADAPTIVE_MAX_POOL_2D, [np.zeros((1, 1, 6, 8), np.float32), Const([3, 4])])
    assert DRIVER.validate_program(context, uneven) == [True]  # Paddle's scan over Gathers (_adaptive_max_by_bins)
    assert DRIVER.validate_program(context, divisible) == [True]
    runtime_alpha, _ = build_op(T.LEAKY_RELU, [np.zeros((2, 2), np.float32), np.float32([0.1])])
    assert DRIVER.validate_program(context, runtime_alpha) == [False]
    with pytest.raises(NNAdapterError) as info:
        DRIVER.create_program(context, nms, Cache())
    assert info.value.code == ResultCode.FEATURE_NOT_SUPPORTED


def _same_pool_model(batch: int, spatial) -> Model:
    """MAX_POOL_2D 3x3, stride 2, SAME padding, over x of dims [batch, 2, *spatial] (UNKNOWN allowed)."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (batch, 2, *spatial)), "x")
    out = model.add_output("out")
    model.add_operation(T.MAX_POOL_2D, [x, model.add_constant(np.int32([int(AutoPad.AUTO_PAD_SAME)])), None,
                                        model.add_constant(np.int32([3, 3])), model.add_constant(np.int32([2, 2]))],
                        [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


@pytest.mark.parametrize("batch, spatial", [(UNKNOWN, (7, 8)), (1, (UNKNOWN, UNKNOWN)), (UNKNOWN, (UNKNOWN, 8))])
def test_same_padding_needs_no_batch_and_takes_unknown_spatial_dims_as_same_upper(device, batch, spatial):
    """SAME reads the spatial dims only (an unknown batch declines nothing); unknown spatial dims take ONNX's
    SAME_UPPER, Paddle's rule, so one program runs every size as the reference does."""
    model = _same_pool_model(batch, spatial)
    context = DRIVER.create_context(device, "")
    assert DRIVER.validate_program(context, model) == [True]
    assert DRIVER.unsupported_reasons(context, model) == [""]
    program = DRIVER.create_program(context, model, Cache())
    for shape in ([1, 2, 7, 8], [3, 2, 9, 8]):
        if any(d != UNKNOWN and d != s for d, s in zip((batch, 2, *spatial), shape)):
            continue
        x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
        (want,) = run_model(_same_pool_model(*shape[:1], shape[2:]), [x])
        (got,) = _run(program, x)
        np.testing.assert_array_equal(got, want)


def _one_operation(op_type, dims, inputs) -> Model:
    """`op_type` over x of `dims` (UNKNOWN allowed) and constant `inputs` (numpy arrays)."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, tuple(dims)), "x")
    out = model.add_output("out")
    model.add_operation(op_type, [x] + [model.add_constant(v) for v in inputs], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


@pytest.mark.parametrize("op_type, inputs", [
    (T.ROLL, [np.int64([1, -2]), np.int32([1, 2])]),
    (T.FLATTEN, [np.int32([1]), np.int32([2])]),
    (T.LAYER_NORMALIZATION, [np.linspace(0.5, 2, 20, dtype=np.float32), np.linspace(-1, 1, 20, dtype=np.float32),
                             np.int32([2]), np.float32([1e-5])]),
], ids=["ROLL", "FLATTEN", "LAYER_NORMALIZATION"])
def test_unknown_dims_the_mapping_does_not_read_decline_nothing(device, op_type, inputs):
    """Unknown batch and trailing dims: ROLL reads only its axes' sizes, FLATTEN and LAYER_NORMALIZATION take the
    trailing dims at run time."""
    shape = (3, 4, 5, 4)
    dims = {T.ROLL: (UNKNOWN, 4, 5, UNKNOWN)}.get(op_type, (UNKNOWN, 4, UNKNOWN, UNKNOWN))
    model = _one_operation(op_type, dims, inputs)
    context = DRIVER.create_context(device, "")
    assert DRIVER.unsupported_reasons(context, model) == [""]
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    (want,) = run_model(_one_operation(op_type, shape, inputs), [x])
    (got,) = _run(DRIVER.create_program(context, model, Cache()), x)
    assert_op_close(got, want, what=op_type.name)


@pytest.mark.parametrize("x_shape, repeats", [((2, 3), [2, 1]), ((2, 3), [3]), ((2, 3), [2, 1, 2]), ((), [4])],
                         ids=["one-per-axis", "fewer", "more", "0-d"])
def test_tile_by_run_time_repeats_follows_numpys_rule_for_any_count(device, x_shape, repeats):
    """RT-DETR tiles a 0-d tensor by a [1] computed at run time: numpy.tile's rule (leading 1s for the shorter
    of dims and repeats) by the count the repeats operand's dims give."""
    x = np.arange(int(np.prod(x_shape)), dtype=np.int32).reshape(x_shape)
    model, feeds = build_op(T.TILE, [x, np.int64(repeats)])
    assert not model.operations[0].inputs[1].is_constant
    context = DRIVER.create_context(device, "")
    assert DRIVER.unsupported_reasons(context, model) == [""]
    (got,) = _run(DRIVER.create_program(context, model, Cache()), *feeds)
    np.testing.assert_array_equal(got, np.tile(x, repeats))
    np.testing.assert_array_equal(got, run_model(model, feeds)[0])


def test_unsupported_reasons_say_why_validate_program_declines(device):
    context = DRIVER.create_context(device, "")
    integer_mean, _ = build_op(T.REDUCE_MEAN, [np.zeros((2, 3), np.int32), Const(np.int32([1])), False])
    assert DRIVER.validate_program(context, integer_mean) == [False]
    (reason,) = DRIVER.unsupported_reasons(context, integer_mean)
    assert "integer mean" in reason


@pytest.mark.parametrize("x_shape, out_hw", [((2, 3, 16, 16), [6, 6]), ((1, 2, 7, 9), [3, 4]), ((1, 1, 5, 8), [5, 3])])
def test_adaptive_average_pool_with_uneven_bins_matches_paddle(device, x_shape, out_hw):
    """PSPNet and Fast-SCNN pool a 16x16 (or 8x8) map into 3x3 and 6x6 bins, which overlap and differ in size:
    ONNX has no adaptive pool, so the driver sums the bins with two constant 0/1 matrices and divides by the bin
    sizes, as Paddle's kernel does."""
    import paddle

    x = np.random.default_rng(5).standard_normal(x_shape).astype(np.float32)
    want = paddle.nn.functional.adaptive_avg_pool2d(paddle.to_tensor(x), out_hw).numpy()
    model, feeds = build_op(T.ADAPTIVE_AVERAGE_POOL_2D, [x, Const(out_hw)])
    context = DRIVER.create_context(device, "")
    assert DRIVER.unsupported_reasons(context, model) == [""]
    (got,) = _run(DRIVER.create_program(context, model, Cache()), *feeds)
    assert_op_close(got, want, what=f"adaptive average pool {x_shape[2:]} -> {out_hw}")


def test_sigmoid_keeps_relative_precision_in_the_tail_as_paddle_does(device):
    """onnxruntime's own Sigmoid is accurate to ~6e-8 absolute (1% relative at x = -13, 0 below -17); YOLOX's
    scores sqrt(sigmoid(class) x sigmoid(objectness)) live there, so the driver computes 1 / (1 + e^-x) as Paddle
    does: Paddle's own sigmoid is the reference, to its relative precision, including 0 and 1 at the extremes."""
    import paddle

    x = np.concatenate([np.linspace(-100, 100, 401), [-88.5, -87.0, 0.0, 17.0, 30.0]]).astype(np.float32)
    want = paddle.nn.functional.sigmoid(paddle.to_tensor(x)).numpy()
    model, feeds = build_op(T.SIGMOID, [x])
    context = DRIVER.create_context(device, "")
    (got,) = _run(DRIVER.create_program(context, model, Cache()), *feeds)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)

def _sigmoid_times(gate_by_input: bool) -> Model:
    """sigmoid(x) * x (a SiLU written out) when gate_by_input, else sigmoid(x) * y."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 201)), "x")
    y = model.add_operand(OperandType(Precision.FLOAT32, (2, 201)), "y")
    gate, out = model.add_operand(OperandType(Precision.FLOAT32, (2, 201)), "gate"), model.add_output("out")
    model.add_operation(T.SIGMOID, [x], [gate])
    model.add_operation(T.MUL, [x if gate_by_input else y, gate, model.add_constant(np.int32([0]))], [out])
    model.identify_inputs_and_outputs([x, y], [out])
    model.finish()
    return model


def test_a_sigmoid_gating_its_own_input_keeps_onnxruntimes_sigmoid():
    """x * sigmoid(x) (YOLOX's 74 activations) keeps the one fast Sigmoid, whose absolute error 6e-8 stays 6e-8 |x|
    in the product; a sigmoid multiplied by anything else is computed to Paddle's relative precision."""
    gated = [n.op_type for n in convert_model(_sigmoid_times(True), OPERATIONS).graph.node]
    scaled = [n.op_type for n in convert_model(_sigmoid_times(False), OPERATIONS).graph.node]
    assert "Sigmoid" in gated and "Exp" not in gated
    assert "Sigmoid" not in scaled and "Exp" in scaled
    x = np.linspace(-40, 40, 402).astype(np.float32).reshape(2, 201)
    y = np.full_like(x, 3.0)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    (got,) = _run_on_onnxruntime(_sigmoid_times(True), [x, y])
    np.testing.assert_allclose(got, x * exact, rtol=1e-6, atol=1e-7 * 40)  # Sigmoid's 6e-8 times |x| <= 40
    (got,) = _run_on_onnxruntime(_sigmoid_times(False), [x, y])
    np.testing.assert_allclose(got, 3 * exact, rtol=1e-6, atol=0)  # the tail to its relative precision


@pytest.mark.parametrize("transpose_x,transpose_y", [(False, False), (True, False), (False, True), (True, True)])
def test_a_two_dimensional_matmul_by_a_constant_is_a_gemm(transpose_x, transpose_y):
    """A classifier head's matmul (nn.Linear: matmul + add in a PIR export) runs as onnxruntime's Gemm, the
    transposes as its attributes; the answer is the reference's."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 3) if transpose_x else (3, 6)).astype(np.float32)
    w = rng.standard_normal((5, 6) if transpose_y else (6, 5)).astype(np.float32)
    model, feeds = build_op(T.MAT_MUL, [x, Const(w), transpose_x, transpose_y])
    nodes = convert_model(model, OPERATIONS).graph.node
    (gemm,) = [n for n in nodes if n.op_type == "Gemm"]
    assert "MatMul" not in [n.op_type for n in nodes]
    assert {a.name: a.i for a in gemm.attribute} == {"transA": int(transpose_x), "transB": int(transpose_y)}
    (got,) = _run_on_onnxruntime(model, feeds)
    assert_op_close(got, run_model(model, feeds)[0], what="matmul as Gemm")
    # a weight fed at run time stays MatMul
    fed, _ = build_op(T.MAT_MUL, [x, w, transpose_x, transpose_y])
    assert "Gemm" not in [n.op_type for n in convert_model(fed, OPERATIONS).graph.node]


def _channel_gate(y_is_a_sigmoid: bool = False) -> Model:
    """y * sigmoid(s), s of shape (2, 3, 1, 1) over y of (2, 3, 4, 5): a channel attention's gate (PP-HGNet's ESE,
    EfficientNet's squeeze-and-excitation); with `y_is_a_sigmoid`, y = sigmoid(x) (a product of two scores)."""
    model = Model()
    s = model.add_operand(OperandType(Precision.FLOAT32, (2, 3, 1, 1)), "s")
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 3, 4, 5)), "x")
    gate, out = model.add_operand(OperandType(Precision.FLOAT32, (2, 3, 1, 1)), "gate"), model.add_output("out")
    model.add_operation(T.SIGMOID, [s], [gate])
    y = x
    if y_is_a_sigmoid:
        y = model.add_operand(OperandType(Precision.FLOAT32, (2, 3, 4, 5)), "y")
        model.add_operation(T.SIGMOID, [x], [y])
    model.add_operation(T.MUL, [y, gate, model.add_constant(np.int32([0]))], [out])
    model.identify_inputs_and_outputs([s, x], [out])
    model.finish()
    return model


def test_a_sigmoid_gating_channels_keeps_onnxruntimes_sigmoid():
    """A channel gate's sigmoid broadcast over a feature keeps the fast Sigmoid (its error 6e-8 |x| in the product,
    the rounding of x); a product of two sigmoids (YOLOX's class x objectness score) stays exact."""
    gated = [n.op_type for n in convert_model(_channel_gate(), OPERATIONS).graph.node]
    assert "Sigmoid" in gated and "Exp" not in gated
    scores = [n.op_type for n in convert_model(_channel_gate(y_is_a_sigmoid=True), OPERATIONS).graph.node]
    assert "Sigmoid" not in scores and scores.count("Exp") == 2
    rng = np.random.default_rng(2)
    s = np.linspace(-40, 40, 6).astype(np.float32).reshape(2, 3, 1, 1)
    x = (rng.standard_normal((2, 3, 4, 5)) * 10).astype(np.float32)
    exact = 1 / (1 + np.exp(-s.astype(np.float64)))
    (got,) = _run_on_onnxruntime(_channel_gate(), [s, x])
    np.testing.assert_allclose(got, x * exact, rtol=1e-6, atol=1e-7 * np.abs(x).max())


# -- programs ------------------------------------------------------------------------------------------------
def test_program_bytes_are_an_onnx_model_that_restores_without_converting(device, monkeypatch):
    context = DRIVER.create_context(device, "")
    cache = Cache(token="0" * 32, dir="/unused", input_types=[], output_types=[])
    model = _dynamic_model()
    DRIVER.create_program(context, model, cache)
    proto = onnx.load_from_string(bytes(cache.buffer))
    assert any(o.version == OPSET for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    import hal.microsoft_onnxruntime.driver as driver_module

    def no_conversion(*_args):
        raise AssertionError("a restore must not convert")

    monkeypatch.setattr(driver_module, "convert_model", no_conversion)
    restore = Cache(cache.token, cache.dir, [o.type.copy() for o in model.input_operands],
                    [o.type.copy() for o in model.output_operands], bytearray(cache.buffer))
    program = DRIVER.create_program(context, None, restore)
    x = np.float32([[3, -1, 0], [1, 1, 1]])
    assert_op_close(_run(program, x)[0], _reference(x))


def test_garbage_program_bytes_are_rejected(device):
    context = DRIVER.create_context(device, "")
    t = OperandType(Precision.FLOAT32, (1, 3))
    with pytest.raises(NNAdapterError) as info:
        DRIVER.create_program(context, None, Cache("0" * 32, "", [t], [t], bytearray(b"not an onnx model")))
    assert info.value.code == ResultCode.DEVICE_INTERNAL_ERROR
    with pytest.raises(NNAdapterError):
        DRIVER.create_program(context, None, Cache())


def test_destroyed_program_cannot_run(device):
    program = DRIVER.create_program(DRIVER.create_context(device, ""), _dynamic_model(), Cache())
    DRIVER.destroy_program(program)
    with pytest.raises(NNAdapterError, match="destroyed"):
        _run(program, np.zeros((1, 3), np.float32))


# -- installation --------------------------------------------------------------------------------------------
def test_missing_onnxruntime_says_what_to_install():
    # A child process where importing onnxruntime fails, as without the optional extra.
    script = (
        "import sys, json\n"
        "sys.modules['onnxruntime'] = None\n"
        "from nnadapter_bridge.nnadapter.runtime import DeviceManager\n"
        "infos = {i.name: i for i in DeviceManager().list_devices()}\n"
        "info = infos['microsoft_onnxruntime']\n"
        "print(json.dumps([info.loaded, info.error, infos['builtin_device'].loaded]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    import json

    loaded, error, builtin_loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded is False and builtin_loaded is True
    assert "install nnadapter-bridge[onnxruntime]" in error


# -- YOLO_BOX (composed from ONNX ops in float64) ---------------------------------------------------------------
def _run_on_onnxruntime(model, feeds):
    context = Context([DeviceManager.instance().acquire("microsoft_onnxruntime")])
    try:
        assert all(context.validate(model, 0))
        compilation = Compilation(model, context=context)
        compilation.finish()
        return Execution(compilation).run(feeds)
    finally:
        context.destroy()


def _yolo_inputs(seed, n=2, anchors=(10, 13, 16, 30, 33, 23), class_num=3, h=4, w=5, conf_thresh=0.01,
                 downsample=32, clip_bbox=True, scale_x_y=1.0, iou_aware=False, iou_factor=0.5, spread=2.0):
    a = len(anchors) // 2
    channels = a * (5 + class_num) + (a if iou_aware else 0)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, channels, h, w)) * spread).astype(np.float32)
    imgsize = rng.integers(32, 640, size=(n, 2)).astype(np.int32)
    return [x, imgsize, Const(np.int32(anchors)), class_num, conf_thresh, downsample, clip_bbox, scale_x_y,
            iou_aware, iou_factor]


def _yolo_atol(inputs) -> float:
    """YOLO_BOX runs as the standard's decomposition, in float32 as Paddle's yolo_box does, while the
    reference decodes in float64: a corner x1 = cx - w / 2 that nearly cancels keeps float32's absolute
    rounding of the image-scale operands (a few ulp of the largest image side), which the one-operation atol
    cannot absorb."""
    return 16 * float(np.spacing(np.float32(np.max(inputs[1]))))


_YOLO_CASES = {
    "defaults": {},
    "no_clip": dict(clip_bbox=False),
    "scale_x_y": dict(scale_x_y=1.05),
    "scale_x_y_no_clip": dict(scale_x_y=1.2, clip_bbox=False),
    "high_threshold": dict(conf_thresh=0.6),
    "zero_threshold": dict(conf_thresh=0.0),
    "iou_aware": dict(iou_aware=True, iou_factor=0.5),
    "iou_aware_factor_0_4": dict(iou_aware=True, iou_factor=0.4, scale_x_y=1.1, clip_bbox=False),
    "one_anchor_one_class": dict(anchors=(7, 9), class_num=1),
    "many_classes": dict(class_num=11, downsample=8, h=3, w=7),
    "downsample_16_square": dict(downsample=16, h=6, w=6, n=1),
    "wide_logits": dict(spread=8.0, conf_thresh=0.3),
}


@pytest.mark.parametrize("case", sorted(_YOLO_CASES))
def test_yolo_box_matches_builtin_device(case):
    inputs = _yolo_inputs(sum(map(ord, case)), **_YOLO_CASES[case])
    model, feeds = build_op(T.YOLO_BOX, inputs, n_outputs=2)
    want = run_model(model, feeds)
    got = _run_on_onnxruntime(model, feeds)
    assert want[0].any(), "every box under the threshold: the case checks nothing"
    if case in ("high_threshold", "wide_logits"):
        assert (want[1] == 0).all(axis=-1).any(), "no box under the threshold: the case checks less than it says"
    for k, (g, w) in enumerate(zip(got, want)):
        assert_op_close(g, w, what=f"YOLO_BOX {case} output {k}", atol=_yolo_atol(inputs))


def test_yolo_box_without_scores_output():
    inputs = _yolo_inputs(5, iou_aware=True, iou_factor=0.3)
    model, feeds = build_op(T.YOLO_BOX, inputs, n_outputs=2, null_outputs=[1])
    (want,) = run_model(model, feeds)
    (got,) = _run_on_onnxruntime(model, feeds)
    assert_op_close(got, want, what="YOLO_BOX boxes only", atol=_yolo_atol(inputs))


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_yolo_box_overflowing_logits_match_including_nan_and_inf():
    # exp of a huge w/h logit overflows to inf in both; unclipped, a box under the threshold is inf * 0 = NaN.
    inputs = _yolo_inputs(9, clip_bbox=False)
    inputs[0][:, 2] = 800.0
    model, feeds = build_op(T.YOLO_BOX, inputs, n_outputs=2)
    want = run_model(model, feeds)
    assert not np.isfinite(want[0]).all()
    for k, (g, w) in enumerate(zip(_run_on_onnxruntime(model, feeds), want)):
        assert_op_close(g, w, what=f"YOLO_BOX overflow output {k}")


def _yolo_model(dims):
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, dims), "x")
    imgsize = model.add_operand(OperandType(Precision.INT32, (dims[0], 2)), "imgsize")
    params = [model.add_constant(np.int32([10, 13, 16, 30])), model.add_constant(np.int32([2])),
              model.add_constant(np.float32([0.05])), model.add_constant(np.int32([32])),
              model.add_constant(np.bool_([True])), model.add_constant(np.float32([1.0])),
              model.add_constant(np.bool_([False])), model.add_constant(np.float32([0.5]))]
    boxes, scores = model.add_output("boxes"), model.add_output("scores")
    model.add_operation(T.YOLO_BOX, [x, imgsize] + params, [boxes, scores])
    model.identify_inputs_and_outputs([x, imgsize], [boxes, scores])
    model.finish()
    return model


def test_yolo_box_symbolic_batch_runs_any_batch_and_unknown_grid_is_not_claimed(device):
    context = DRIVER.create_context(device, "")
    assert DRIVER.validate_program(context, _yolo_model((1, 14, UNKNOWN, 5))) == [False]
    assert DRIVER.validate_program(context, _yolo_model((1, 14, 4, UNKNOWN))) == [False]
    model = _yolo_model((UNKNOWN, 14, 3, 4))
    assert DRIVER.validate_program(context, model) == [True]
    program = DRIVER.create_program(context, model, Cache())
    for batch in (1, 3):
        rng = np.random.default_rng(batch)
        x = rng.standard_normal((batch, 14, 3, 4)).astype(np.float32)
        imgsize = rng.integers(100, 500, size=(batch, 2)).astype(np.int32)
        fixed, feeds = build_op(T.YOLO_BOX, [x, imgsize, Const(np.int32([10, 13, 16, 30])), 2, 0.05, 32, True,
                                             1.0, False, 0.5], n_outputs=2)
        got = _run(program, x, imgsize)
        for k, (g, w) in enumerate(zip(got, run_model(fixed, feeds))):
            assert g.shape == (batch, 2 * 3 * 4, 4 if k == 0 else 2)
            assert_op_close(g, w, what=f"YOLO_BOX batch {batch} output {k}")


# -- pooling over the whole plane --------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type, onnx_op", [(T.AVERAGE_POOL_2D, "GlobalAveragePool"),
                                              (T.MAX_POOL_2D, "GlobalMaxPool")], ids=["average", "max"])
def test_window_over_the_whole_plane_is_a_global_pool(op_type, onnx_op):
    x = np.random.default_rng(3).standard_normal((1, 4, 5, 6)).astype(np.float32)
    tail = [False, False, int(FuseCode.FUSED_RELU)] if op_type == T.AVERAGE_POOL_2D else \
        [False, False, int(Precision.INT32), int(FuseCode.FUSED_RELU)]
    model, feeds = build_op(op_type, [x, 0, Const([0, 0, 0, 0]), Const([5, 6]), Const([1, 1])] + tail)
    ops = [n.op_type for n in convert_model(model, OPERATIONS).graph.node]
    assert onnx_op in ops and "AveragePool" not in ops and "MaxPool" not in ops
    (want,) = run_model(model, feeds)
    assert_op_close(_run_on_onnxruntime(model, feeds)[0], want, what=onnx_op)
    # A padded window over the plane stays a plain pool.
    padded, _ = build_op(op_type, [x, 0, Const([1, 0, 0, 0]), Const([5, 6]), Const([1, 1])] + tail)
    assert onnx_op not in [n.op_type for n in convert_model(padded, OPERATIONS).graph.node]


# -- MICROSOFT_ONNXRUNTIME_RELU_NAN_TO_ZERO ------------------------------------------------------------------------
def _relu_conv_run(tmp_path, properties: str, monkeypatch):
    import onnx
    import onnxruntime as ort
    import paddle.nn.functional as F

    import nnadapter_bridge as nb
    from support.converter_harness import pir_program

    x = np.ones((1, 2, 4, 4), np.float32)
    x[0, 0, 1, 1] = np.nan
    w = np.ones((3, 2, 1, 1), np.float32)
    saved = pir_program(tmp_path, lambda x, w: F.relu(F.conv2d(x, w)), {"x": x, "w": w})
    models = []
    original = ort.InferenceSession

    class Spy(original):
        def __init__(self, model, *args, **kwargs):
            if isinstance(model, (bytes, bytearray)):
                models.append(onnx.load_from_string(bytes(model)))
            super().__init__(model, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", Spy)
    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names(["microsoft_onnxruntime"])
    config.set_nnadapter_context_properties(properties)
    predictor = nb.create_predictor(config)
    for name in predictor.get_input_names():
        predictor.get_input_by_name(name).from_numpy(saved.feeds[name])
    predictor.run()
    kinds = {node.op_type for m in models for node in m.graph.node}
    return saved.outputs[0], predictor.get_output(0).numpy(), kinds


def test_relu_maps_nan_to_zero_by_default_and_keeps_it_on_request(tmp_path, monkeypatch):
    pytest.importorskip("paddle")
    want, got, kinds = _relu_conv_run(tmp_path / "exact", "", monkeypatch)
    assert not np.isnan(want).any()  # Paddle's relu: x > 0 ? x : 0
    np.testing.assert_array_equal(got, want)
    assert {"Relu", "ThresholdedRelu"} <= kinds

    want, got, kinds = _relu_conv_run(tmp_path / "fast", "MICROSOFT_ONNXRUNTIME_RELU_NAN_TO_ZERO=0", monkeypatch)
    assert "Relu" in kinds and "ThresholdedRelu" not in kinds
    finite = ~np.isnan(got)
    assert np.isnan(got[0, :, 1, 1]).all()  # the documented trade: onnxruntime's Relu keeps the NaN
    np.testing.assert_array_equal(got[finite], want[finite])


def test_relu_nan_to_zero_rejects_other_values(tmp_path, monkeypatch):
    pytest.importorskip("paddle")
    with pytest.raises(Exception, match="MICROSOFT_ONNXRUNTIME_RELU_NAN_TO_ZERO=7"):
        _relu_conv_run(tmp_path, "MICROSOFT_ONNXRUNTIME_RELU_NAN_TO_ZERO=7", monkeypatch)


# -- quantized conv chains (qdq.py) --------------------------------------------------------------------------------
def test_folded_batch_norm_keeps_the_conv_exact_with_negative_factors():
    """Folding BN into the int8 conv: weights negated where gamma < 0, per-channel scales |a|, the bias at the
    accumulator scale; the folded conv equals conv -> BN up to the bias rounding (half an accumulator step)."""
    from types import SimpleNamespace as NS

    from hal.quantized_chains import ConvChain, fold_chain

    rng = np.random.default_rng(5)
    channels, inputs = 6, 5
    weights = rng.integers(-127, 128, (channels, inputs, 1, 1)).astype(np.int8)
    w_scales = rng.uniform(0.001, 0.01, channels)
    x_scale = 0.02
    gamma = np.array([1.5, -0.7, 0.2, -2.0, 1.0, 0.5])
    beta, mean = rng.normal(size=channels), rng.normal(size=channels)
    var = rng.uniform(0.1, 2.0, channels)
    conv = NS(inputs=[NS(type=NS(scale=x_scale)),
                      NS(value=weights, type=NS(scales=tuple(w_scales), scale=None)), None])
    bn = NS(inputs=[None] + [NS(value=v.astype(np.float32)) for v in (gamma, beta, mean, var)]
            + [NS(value=np.array([1e-5], np.float32))])
    chain = ConvChain(conv, None, bn, None, None)
    result = fold_chain(chain)
    folded, scales, bias, bias_scales = result.weights, result.scales, result.bias, result.bias_scales
    assert folded.dtype == np.int8 and np.all(scales > 0)
    assert np.array_equal(np.sign(folded[gamma < 0]), -np.sign(weights[gamma < 0]))
    x = rng.integers(-127, 128, (10, inputs)).astype(np.float64) * x_scale
    w = weights.reshape(channels, inputs).astype(np.float64) * w_scales[:, None]
    a = gamma / np.sqrt(var + np.float32(1e-5))
    want = a * (x @ w.T - mean) + beta
    got = x @ (folded.reshape(channels, inputs) * scales[:, None].astype(np.float64)).T \
        + bias * bias_scales.astype(np.float64)
    assert np.abs(got - want).max() <= 0.5 * bias_scales.max() + 1e-6



# -- max pool after a relu: no -FLT_MAX fix-up (it would break the NCHWc layout) ------------------------------------
def _relu_affine_max_pool(scale: float, shift: float):
    """x -> RELU -> MUL(scale) -> ADD(shift) -> MAX_POOL_2D 2x2 / 2 (PP-HGNetV2's stem: a learnable affine block
    between the relu and the pool)."""
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, 2, 4, 4)), "x")
    relu, scaled, shifted, pooled = (model.add_output(n) for n in ("relu", "scaled", "shifted", "pooled"))
    model.add_operation(T.RELU, [x], [relu])
    model.add_operation(T.MUL, [relu, model.add_constant(np.float32([scale])), model.add_constant(np.int32([0]))],
                        [scaled])
    model.add_operation(T.ADD, [scaled, model.add_constant(np.float32([shift])), model.add_constant(np.int32([0]))],
                        [shifted])
    window = [np.int32([0]), np.int32([0, 0, 0, 0]), np.int32([2, 2]), np.int32([2, 2]), np.bool_([False]),
              np.bool_([False]), np.int32([int(Precision.INT32)]), np.int32([0])]
    model.add_operation(T.MAX_POOL_2D, [shifted] + [model.add_constant(v) for v in window], [pooled])
    model.identify_inputs_and_outputs([x], [pooled])
    model.finish()
    return model


@pytest.mark.parametrize("scale,fixed_up", [(0.5, False), (-0.5, True), (0.0, True)])
def test_max_pool_after_relu_and_positive_affine_needs_no_lowest_fix_up(scale, fixed_up):
    """Paddle's max pool starts at -FLT_MAX, onnxruntime's at -inf: only an input that can hold -inf (or NaN) needs
    the Max that maps one to the other. A relu's output scaled by a positive constant cannot; scaled by a negative
    one it can (+inf * -0.5), and by 0 it can hold NaN (inf * 0)."""
    model = _relu_affine_max_pool(scale, 1.0)
    kinds = [n.op_type for n in convert_model(lower(model, OPERATIONS), OPERATIONS).graph.node]
    assert ("Max" in kinds) is fixed_up
    x = np.float32(np.arange(32).reshape(1, 2, 4, 4) - 16)
    x[0, 0, :2, :2] = np.inf   # a whole window of +inf: -inf after a negative scale
    x[0, 1, 2:, 2:] = np.nan   # a whole window of NaN: 0 after Paddle's relu
    x[0, 1, 0, 0] = -np.inf
    (want,) = run_model(model, [x])
    (got,) = _run_on_onnxruntime(model, [x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("size_in,size_out", [(128, 32), (32, 128), (128, 64)])
def test_align_corners_bilinear_places_source_pixels_as_paddle_does(tmp_path, size_in, size_out):
    """onnxruntime's Resize (align_corners) computes a source coordinate as out * (in - 1) / (out - 1), Paddle as
    float32((in - 1) / (out - 1)) * out: one ulp of position apart, which a steep input turned into 3e-5 on
    values of 1 (and LPSNet's logits into 4e-4). The driver now gathers Paddle's taps with Paddle's weights."""
    import paddle.nn.functional as F

    from support.converter_harness import pir_program, run_predictor

    x = np.random.default_rng(0).standard_normal((1, 2, size_in, size_in)).astype(np.float32)
    saved = pir_program(tmp_path, lambda x: F.interpolate(x, size=(size_out, size_out), mode="bilinear",
                                                          align_corners=True), {"x": x})
    got = run_predictor(saved, "microsoft_onnxruntime")[0]
    assert float(np.max(np.abs(got - saved.outputs[0]))) <= 1e-6


@pytest.mark.parametrize("size_in,size_out", [(4, 8), (16, 6), (7, 3)])
def test_adaptive_max_pool_with_irregular_bins_runs_on_onnxruntime(tmp_path, size_in, size_out):
    """Adaptive max pooling whose bins are no regular window (RTFormer's 4x4 -> 8x8) stayed on the host; it is
    now Paddle's scan over Gathers per bin position: NaN skipped, -FLT_MAX start, first of equal maxima."""
    import paddle.nn.functional as F

    from support.converter_harness import device_predictor, pir_program

    x = np.random.default_rng(1).standard_normal((1, 3, size_in, size_in)).astype(np.float32)
    x[0, 0, 0, :] = np.nan
    x[0, 1, :, 0] = -np.inf
    x[0, 2, 1:3, 1:3] = 5.0  # equal maxima: Paddle's index is the first in the scan
    saved = pir_program(tmp_path, lambda x: list(F.adaptive_max_pool2d(x, size_out, return_mask=True)), {"x": x})
    predictor = device_predictor(saved.model_path, "microsoft_onnxruntime", saved.params_path)
    predictor.get_input_by_name("x").from_numpy(x)
    predictor.run()
    assert not predictor.host_ops, predictor.unsupported_reasons()
    for k, want in enumerate(saved.outputs):
        np.testing.assert_array_equal(predictor.get_output(k).numpy(), want)


@pytest.mark.parametrize("size, transform", [((7, 9), "half_pixel"), ((1, 4), "pytorch_half_pixel")])
def test_half_pixel_linear_resize_takes_onnxruntimes_blocked_upsample_where_it_can(size, transform):
    # half_pixel and pytorch_half_pixel place every source coordinate alike unless an output axis has length 1
    # (pytorch_half_pixel reads row 0 there, as Paddle); only a half_pixel Resize becomes the NCHWc Upsample
    model, _ = build_op(T.RESIZE_LINEAR, [np.zeros((1, 2, 5, 6), np.float32), Const(np.int32(size)), None, False, 0])
    (resize,) = [n for n in convert_model(model, OPERATIONS).graph.node if n.op_type == "Resize"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in resize.attribute}
    assert attrs["coordinate_transformation_mode"] == transform.encode()


def test_a_bilinear_upsample_of_a_convolution_map_matches_paddle_in_the_blocked_layout(tmp_path):
    # a segmentation head: conv -> bilinear x8 (align_corners False, align_mode 0), the Upsample in NCHWc
    import paddle

    from support.converter_harness import pir_program, run_predictor

    def build(x):
        features = paddle.nn.Conv2D(8, 19, 3, padding=1)(x)
        return paddle.nn.functional.interpolate(features, scale_factor=8, mode="bilinear", align_corners=False)

    x = np.random.default_rng(2).standard_normal((1, 8, 12, 16)).astype(np.float32)
    saved = pir_program(tmp_path, build, {"x": x})
    assert_op_close(run_predictor(saved, "microsoft_onnxruntime")[0], saved.outputs[0], what="conv -> bilinear x8")


def test_top_k_takes_a_0d_run_time_k(tmp_path):
    """Paddle's top_k_v2 takes a 0-d K tensor (PointRend's point count: the min of a concat), ONNX TopK a K of shape
    [1] only: onnxruntime refused the run ("k tensor should be a 1D tensor of size 1") and the subgraph fell back to
    the host. The driver now reshapes a run-time K to [1]."""
    import paddle

    from support.converter_harness import device_predictor, pir_program

    feeds = {"x": np.random.default_rng(3).permutation(24).astype(np.float32).reshape(2, 12),
             "k": np.array(5, np.int32)}
    saved = pir_program(tmp_path, lambda x, k: list(paddle.topk(x, k, axis=1)), feeds)
    predictor = device_predictor(saved.model_path, "microsoft_onnxruntime", saved.params_path)
    for name, array in feeds.items():
        predictor.get_input_by_name(name).from_numpy(array)
    predictor.run()
    assert not predictor.host_ops and predictor.stats.subgraph_host_runs == 0, predictor.unsupported_reasons()
    for k, want in enumerate(saved.outputs):
        np.testing.assert_array_equal(predictor.get_output(k).numpy(), want)
