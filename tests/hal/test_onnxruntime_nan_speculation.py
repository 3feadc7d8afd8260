"""microsoft_onnxruntime's NaN-kept relus (hal/microsoft_onnxruntime/nan_speculation.py): a relu runs as a plain
ONNX Relu where a NaN it keeps would show in a float output, and a run whose outputs hold a NaN is run again by
the exact program. Checked here: every operation the analysis trusts to propagate NaN does so in onnxruntime
(against builtin_device's reference, which computes Paddle's relu), which relus the analysis keeps, and whole
programs against Paddle Inference with NaN inputs."""
from __future__ import annotations

import numpy as np
import pytest

import hal.microsoft_onnxruntime.driver as ort_driver
from hal.common import lower, unpack
from hal.microsoft_onnxruntime import DRIVER
from hal.microsoft_onnxruntime.graph import convert_model
from hal.microsoft_onnxruntime.nan_speculation import (
    METADATA_KEY,
    NAN_KEPT_RELU_SUFFIX,
    NAN_PROBE_OUTPUT,
    NAN_PROPAGATING,
    exact_model_bytes,
    nan_kept_relus,
    nan_probe_operands,
    probe_saw_nan,
)
from hal.microsoft_onnxruntime.operations import OPERATIONS
from hal.protocol import Argument, Cache
from nnadapter_bridge.conformance.harness import build_op
from nnadapter_bridge.conformance.samples import SAMPLES
from nnadapter_bridge.nnadapter.codes import FuseCode
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.runtime import HostBuffer, array_input_access, host_buffer_output_access
from support.tolerances import assert_op_close


def _float_inputs_at(sample) -> list:
    """Positions of the sample's float32 model inputs that the operation propagates NaN through."""
    positions = NAN_PROPAGATING[sample.type]
    return [k for k, item in enumerate(sample.inputs)
            if isinstance(item, np.ndarray) and item.dtype == np.float32 and item.size > 1
            and (positions is None or k in positions)]


CASES = [(sample, k) for sample in SAMPLES if sample.type in NAN_PROPAGATING for k in _float_inputs_at(sample)]


def _run_program(program, arrays):
    holders = [HostBuffer() for _ in program.output_types]
    DRIVER.execute_program(program, [Argument(k, a, array_input_access) for k, a in enumerate(arrays)],
                           [Argument(k, h, host_buffer_output_access) for k, h in enumerate(holders)])
    return [h.array for h in holders]


@pytest.fixture
def exact_builds(monkeypatch):
    """The speculative programs' bytes, one for each exact program the driver builds (a run that fell back)."""
    built = []

    def counting(model_bytes):
        built.append(bytes(model_bytes))
        return exact_model_bytes(model_bytes)

    monkeypatch.setattr(ort_driver, "exact_model_bytes", counting)
    return built


def test_every_operation_of_the_table_has_a_case():
    covered = {sample.type for sample, _ in CASES}
    assert covered == set(NAN_PROPAGATING), set(NAN_PROPAGATING) - covered


@pytest.mark.parametrize("sample,position", CASES, ids=[f"{s.id}-input{k}" for s, k in CASES])
def test_operation_propagates_nan_on_onnxruntime(sample, position, exact_builds):
    """relu -> operation, a NaN fed to the relu: onnxruntime must give builtin_device's answer (the NaN became
    0). An operation that dropped the NaN instead of propagating it would give another finite answer."""
    model, feeds = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs,
                            relu_before=[position])
    feed_index = [k for k, item in enumerate(sample.inputs) if isinstance(item, np.ndarray)].index(position)
    poisoned = feeds[feed_index].copy()
    flat = poisoned.reshape(-1)
    flat[0] = flat[flat.size // 2] = np.nan
    feeds[feed_index] = poisoned
    want = run_model(model, feeds)
    device = DRIVER.open_device()
    context = DRIVER.create_context(device, "")
    declined = [r for r in DRIVER.unsupported_reasons(context, lower(model, OPERATIONS)) if r]
    if declined:
        pytest.skip(f"microsoft_onnxruntime declines this form: {declined[0]}")
    program = DRIVER.create_program(context, model, Cache())
    assert program.exact is not None, "the relu before the operation was not NaN-kept"
    got = _run_program(program, feeds)
    for g, w in zip(got, want):
        assert_op_close(g, w, what=f"{sample.id} after a NaN-kept relu")
    if any(np.isnan(np.asarray(w, dtype=np.float64)).any() for w in want if w.dtype.kind == "f"):
        return  # the reference itself holds NaN (e.g. a NaN weight path): the comparison above is the check
    # No NaN in Paddle's answer: the fast program's NaN either reached an output (and the exact program ran)
    # or reached nothing.
    assert len(exact_builds) <= 1


def _sample(sample_id: str):
    return next(s for s in SAMPLES if s.id == sample_id)


@pytest.mark.parametrize("sample_id,kept", [
    ("SIGMOID", True), ("CONV_2D_pads_relu", True), ("SOFTMAX", True),
    ("MAX_POOL_2D_ceil", False),  # onnxruntime's max skips NaN
    ("ARG_MAX_int64", False),       # an integer output cannot show a NaN
    ("LOG", False),           # not in the table: exact
])
def test_which_relus_are_kept(sample_id, kept):
    """Kept: a NaN the relu keeps shows in a float output. The others are kept plain too, and watched: the probe
    sums the relu's own output. Either way the program is speculative and writes no ThresholdedRelu."""
    sample = _sample(sample_id)
    model, _ = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs,
                        relu_before=[0])
    relu = next(op for op in model.operations if op.type == T.RELU)
    assert (id(relu) in nan_kept_relus(model)) is kept
    watched: list = []
    assert id(relu) in nan_kept_relus(model, watched=watched)
    assert [o.index for o in watched] == ([] if kept else [relu.outputs[0].index])
    proto = convert_model(lower(model, OPERATIONS), OPERATIONS, keep_nan_where_visible=True)
    (marked,) = [n for n in proto.graph.node if n.name.endswith(NAN_KEPT_RELU_SUFFIX) and n.name.startswith("RELU#")]
    assert {p.key: p.value for p in proto.metadata_props}.get(METADATA_KEY) == "1"
    assert "ThresholdedRelu" not in [n.op_type for n in proto.graph.node]
    probe_sums = {n.input[0] for n in proto.graph.node
                  if n.op_type == "ReduceSumSquare" and n.name.endswith("nan_probe")}
    assert (marked.output[0] in probe_sums) is (not kept)


@pytest.mark.parametrize("sample_id", ["MAX_POOL_2D_ceil", "ARG_MAX_int64", "LOG"])
def test_a_watched_relu_gives_paddles_answer_for_a_nan(sample_id, exact_builds):
    """relu -> an operation that does not show its NaN (a max pool drops it, an arg max's output is an integer, a
    log is not in the table): the relu runs plain, the probe sums its output, and a run where it holds a NaN is
    run again exactly. A finite run is not."""
    sample = _sample(sample_id)
    model, feeds = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs,
                            relu_before=[0])
    program = DRIVER.create_program(DRIVER.create_context(DRIVER.open_device(), ""), model, Cache())
    assert program.exact is not None, "the relu is written exactly"
    for got, want in zip(_run_program(program, feeds), run_model(model, feeds)):
        assert_op_close(got, want, what=f"{sample_id}, a finite run")
    assert not exact_builds
    poisoned = feeds[0].copy()
    poisoned.reshape(-1)[0] = poisoned.reshape(-1)[-1] = np.nan
    for got, want in zip(_run_program(program, [poisoned, *feeds[1:]]), run_model(model, [poisoned, *feeds[1:]])):
        assert_op_close(got, want, what=f"{sample_id} after a NaN the relu turns into 0")
    assert len(exact_builds) == 1


def _stem_model():
    """ResNet-vd's stem: a stride-2 conv+relu, two stride-1 conv+relus, a 3x3 stride-2 max pool."""
    from nnadapter_bridge.nnadapter.codes import Precision
    from nnadapter_bridge.nnadapter.model import Model
    from nnadapter_bridge.nnadapter.types import OperandType

    rng = np.random.default_rng(0)
    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (1, 3, 12, 12)), "x")
    h = x
    for k, stride in enumerate((2, 1, 1)):
        out = model.add_output(f"conv{k}")
        w = rng.standard_normal((4, 3 if k == 0 else 4, 3, 3)).astype(np.float32) * 0.3
        model.add_operation(T.CONV_2D, [h, model.add_constant(w), model.add_constant(np.zeros(4, np.float32)),
                                        model.add_constant(np.int32(0)), model.add_constant(np.int32([1, 1, 1, 1])),
                                        model.add_constant(np.int32([stride, stride])), model.add_constant(np.int32(1)),
                                        model.add_constant(np.int32([1, 1])),
                                        model.add_constant(np.int32(int(FuseCode.FUSED_RELU)))], [out])
        h = out
    pooled = model.add_output("pooled")
    window = [np.int32([0]), np.int32([1, 1, 1, 1]), np.int32([3, 3]), np.int32([2, 2]), np.bool_([False]),
              np.bool_([False]), np.int32([int(Precision.INT32)]), np.int32([0])]
    model.add_operation(T.MAX_POOL_2D, [h] + [model.add_constant(v) for v in window], [pooled])
    model.identify_inputs_and_outputs([x], [pooled])
    model.finish()
    return model


def test_a_watched_relu_also_watches_the_relus_before_it(exact_builds):
    """The stem's last relu is watched; a NaN of the first two reaches it through convolutions that read every
    element, so they need no probe of their own. Every relu is plain, and a NaN anywhere in the input gives Paddle's
    answer (builtin_device's), by the exact program."""
    model = _stem_model()
    convs = [op for op in model.operations if op.type == T.CONV_2D]
    watched: list = []
    kept = nan_kept_relus(model, watched=watched)
    assert all(id(c) in kept for c in convs)
    assert [o.index for o in watched] == [convs[2].outputs[0].index]
    assert not nan_kept_relus(model)  # without watching, none would be
    proto = convert_model(lower(model, OPERATIONS), OPERATIONS, keep_nan_where_visible=True)
    assert "ThresholdedRelu" not in [n.op_type for n in proto.graph.node]
    program = DRIVER.create_program(DRIVER.create_context(DRIVER.open_device(), ""), model, Cache())
    x = np.random.default_rng(1).standard_normal((1, 3, 12, 12)).astype(np.float32)
    assert_op_close(_run_program(program, [x])[0], run_model(model, [x])[0], what="the stem, a finite run")
    assert not exact_builds
    for flat in (0, 77, x.size - 1):
        poisoned = x.copy()
        poisoned.reshape(-1)[flat] = np.nan
        want = run_model(model, [poisoned])[0]
        assert np.isfinite(want).all()  # Paddle's relu turned the NaN into 0
        assert_op_close(_run_program(program, [poisoned])[0], want, what=f"the stem, a NaN at {flat}")
    assert len(exact_builds) == 1  # built once, on the first run that needed it


WINDOW_SAMPLES = [s for s in SAMPLES if s.type in (T.CONV_2D, T.AVERAGE_POOL_2D, T.PAD, T.CONV_2D_TRANSPOSE,
                                                   T.RESIZE_NEAREST, T.RESIZE_LINEAR)
                  and isinstance(s.inputs[0], np.ndarray) and s.inputs[0].dtype == np.float32]


@pytest.mark.parametrize("sample", WINDOW_SAMPLES, ids=[s.id for s in WINDOW_SAMPLES])
def test_reads_every_element_against_nan_fed_to_each_element(sample):
    """_reads_every_element (strides, kernels, dilations, pads, auto_pad, ceil_mode, crops, resize modes) against
    the reference kernels: a NaN put in one input element at a time must reach some output element. Where the
    analysis says every element is read, each must be; it says so exactly for convolutions, pools and pads, for
    upsampling resizes only, and never for a transposed convolution."""
    from hal.microsoft_onnxruntime.nan_speculation import _reads_every_element

    model, feeds = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    op = next(o for o in model.operations if o.type == sample.type)
    fuse = unpack(op).position("fuse_code") if sample.type in (T.CONV_2D, T.AVERAGE_POOL_2D, T.CONV_2D_TRANSPOSE) \
        else len(op.inputs)
    if fuse < len(op.inputs) and op.inputs[fuse] is not None:  # a fused relu would turn the NaN into 0
        op.inputs[fuse].value = np.array(int(FuseCode.FUSED_NONE), dtype=np.int32)
    read = []
    for flat in range(feeds[0].size):
        x = feeds[0].copy()
        x.reshape(-1)[flat] = np.nan
        read.append(bool(np.isnan(run_model(model, [x, *feeds[1:]])[0]).any()))
    claimed = _reads_every_element(op, 0)
    if sample.type == T.CONV_2D_TRANSPOSE:
        assert not claimed
    elif sample.type in (T.RESIZE_NEAREST, T.RESIZE_LINEAR):  # claimed for upsampling only
        assert not claimed or all(read), f"{sum(not r for r in read)} of {len(read)} elements are read by none"
        upsampling = all(i <= o for i, o in zip(op.inputs[0].type.dims[2:], op.outputs[0].type.dims[2:]))
        assert claimed == upsampling
    else:
        assert claimed == all(read), f"{sum(not r for r in read)} of {len(read)} elements are read by no window"


def _upsampling(sample) -> bool:
    model, _ = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    op = next(o for o in model.operations if o.type == sample.type)
    return all(0 <= i <= o for i, o in zip(op.inputs[0].type.dims[2:], op.outputs[0].type.dims[2:]))


UPSAMPLING = [s for s in WINDOW_SAMPLES if s.type in (T.RESIZE_NEAREST, T.RESIZE_LINEAR) and _upsampling(s)]


@pytest.mark.parametrize("sample", UPSAMPLING, ids=[s.id for s in UPSAMPLING])
def test_onnxruntime_resize_carries_a_nan_from_every_element_it_is_said_to_read(sample):
    """What the analysis trusts an upsampling resize with, on onnxruntime's own kernels: a NaN in any one input
    element reaches some output element (a linear kernel that skipped a weight of 0 would drop it)."""
    from hal.microsoft_onnxruntime.nan_speculation import _reads_every_element

    model, feeds = build_op(sample.type, sample.inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    assert _reads_every_element(next(o for o in model.operations if o.type == sample.type), 0)
    program = DRIVER.create_program(DRIVER.create_context(DRIVER.open_device(), ""), model, Cache())
    unseen = []
    for flat in range(feeds[0].size):
        x = feeds[0].copy()
        x.reshape(-1)[flat] = np.nan
        if not np.isnan(_run_program(program, [x, *feeds[1:]])[0]).any():
            unseen.append(flat)
    assert not unseen, f"a NaN in these input elements reached no output: {unseen}"


def test_relu_read_by_a_max_pool_is_kept_when_another_reader_shows_every_nan():
    """A max pool drops NaN; the relu before it may still be plain when another reader carries a NaN from any of
    its elements to a float output: here the relu's output is a model output of its own."""
    sample = _sample("MAX_POOL_2D_ceil")
    model, _ = build_op(sample.type, sample.inputs, sample.n_outputs, relu_before=[0])
    relu = next(op for op in model.operations if op.type == T.RELU)
    assert id(relu) not in nan_kept_relus(model)  # the max pool alone
    model.finished = False  # a second consumer of the relu, as a model output of its own
    model.identify_inputs_and_outputs(model.input_operands, [*model.output_operands, relu.outputs[0]])
    model.finish()
    assert id(relu) in nan_kept_relus(model)


def test_exact_model_follows_each_kept_relu_with_thresholded_relu():
    sample = _sample("SIGMOID")
    model, feeds = build_op(sample.type, sample.inputs, relu_before=[0])
    fast = convert_model(lower(model, OPERATIONS), OPERATIONS, keep_nan_where_visible=True)
    import onnx
    exact = onnx.load_from_string(exact_model_bytes(fast.SerializeToString()))
    kinds = [n.op_type for n in exact.graph.node]
    assert kinds.index("ThresholdedRelu") == kinds.index("Relu") + 1
    assert {p.key: p.value for p in exact.metadata_props}[METADATA_KEY] == "0"
    import onnxruntime as ort

    x = feeds[0].copy()
    x.reshape(-1)[0] = np.nan
    session = ort.InferenceSession(exact.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x})
    assert_op_close(got, run_model(model, [x])[0], what="the exact program")
    assert [o.name for o in fast.graph.output][-1] == NAN_PROBE_OUTPUT
    assert NAN_PROBE_OUTPUT not in [o.name for o in exact.graph.output]
    assert not any(NAN_PROBE_OUTPUT in n.output for n in exact.graph.node)


def test_the_probe_is_nan_exactly_when_a_float_output_holds_a_nan():
    """The speculative model's last output sums every float32 output: NaN when any of them holds one, whichever
    output it is in; a finite run gives a finite probe."""
    import onnx
    import onnxruntime as ort

    sample = _sample("SPLIT")
    model, feeds = build_op(sample.type, sample.inputs, sample.n_outputs, relu_before=[0])
    assert len(model.output_operands) >= 2
    fast = convert_model(lower(model, OPERATIONS), OPERATIONS, keep_nan_where_visible=True)
    assert [o.name for o in fast.graph.output][-1] == NAN_PROBE_OUTPUT
    assert fast.graph.output[-1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    session = ort.InferenceSession(fast.SerializeToString(), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    *_, probe = session.run(None, {name: feeds[0]})
    assert not probe_saw_nan(probe)
    for flat in (0, feeds[0].size - 1):  # the first element goes to the first output, the last to the last one
        x = feeds[0].copy()
        x.reshape(-1)[flat] = np.nan
        results = session.run(None, {name: x})
        assert sum(np.isnan(r).any() for r in results[:-1]) == 1
        assert probe_saw_nan(results[-1])


def test_infinities_of_both_signs_in_an_output_are_not_taken_for_a_nan(exact_builds):
    """relu(x) * w with w of both signs and x past float32's range over w: the output holds +inf and -inf, which
    is Paddle's answer. A plain sum of the output would be NaN (+inf + -inf) and send the run to the exact program
    for nothing; the probe sums squares, so it is +inf, and the fast program's answer stands."""
    from nnadapter_bridge.nnadapter.codes import Precision
    from nnadapter_bridge.nnadapter.model import Model
    from nnadapter_bridge.nnadapter.types import OperandType

    model = Model()
    x = model.add_operand(OperandType(Precision.FLOAT32, (2, 4)), "x")
    relu = model.add_output("relu")
    model.add_operation(T.RELU, [x], [relu])
    product = model.add_output("product")
    w = np.float32([[1e30, -1e30, 2.0, -3.0]] * 2)
    model.add_operation(T.MUL, [relu, model.add_constant(w), model.add_constant(np.int32([0]))], [product])
    model.identify_inputs_and_outputs([x], [product])
    model.finish()
    program = DRIVER.create_program(DRIVER.create_context(DRIVER.open_device(), ""), model, Cache())
    assert program.exact is not None, "the relu is NaN-kept"
    feed = np.float32([[1e30, 1e30, 1.0, -1.0], [-2.0, 1e30, 0.5, 4.0]])
    want = run_model(model, [feed])[0]
    assert np.isposinf(want).any() and np.isneginf(want).any()  # the case itself: both infinities
    got = _run_program(program, [feed])[0]
    np.testing.assert_array_equal(got, want)
    assert not exact_builds
    poisoned = feed.copy()
    poisoned[1, 0] = np.nan  # and a NaN still goes to the exact program
    np.testing.assert_array_equal(_run_program(program, [poisoned])[0], run_model(model, [poisoned])[0])
    assert len(exact_builds) == 1


def _probe_input(sample_id: str, **build) -> tuple:
    """(model, the name of the tensor the speculative ONNX program's probe sums, the program's output names)."""
    sample = _sample(sample_id)
    model, _ = build_op(sample.type, sample.inputs, sample.n_outputs, relu_before=[0], **build)
    fast = convert_model(lower(model, OPERATIONS), OPERATIONS, keep_nan_where_visible=True)
    (probe,) = [n for n in fast.graph.node if NAN_PROBE_OUTPUT in n.output]
    return model, probe.input[0], [o.name for o in fast.graph.output]


def test_the_probe_of_an_upsampled_output_sums_the_upsamplings_input():
    """relu -> bilinear upsampling (5x7 -> 8x11): every NaN the relu keeps reaches the output through the
    upsampling's input, so the probe sums that (70 elements) rather than the output (176)."""
    model, probed, outputs = _probe_input("RESIZE_LINEAR_half_pixel")
    (relu,) = [op for op in model.operations if op.type == T.RELU]
    assert [o.index for o in nan_probe_operands(model, nan_kept_relus(model))] == [relu.outputs[0].index]
    assert probed not in outputs


@pytest.mark.parametrize("sample_id", [
    "RESIZE_NEAREST_downscale",  # a downsampling may skip the NaN: a NaN in its input need not reach the output
    "SIGMOID",                   # elementwise: the input is no smaller than the output
])
def test_the_probe_sums_the_output_when_no_smaller_tensor_sees_every_nan(sample_id):
    _, probed, outputs = _probe_input(sample_id)
    assert probed == outputs[0]


def test_the_probe_stops_at_an_operation_with_two_computed_inputs():
    """relu(x) + y, y broadcast: a NaN in the output may come from either input, so the output is summed."""
    model, _ = build_op(T.ADD, [np.ones((2, 3), np.float32), np.ones((1, 3), np.float32), 0], relu_before=[1])
    assert [o.index for o in nan_probe_operands(model, nan_kept_relus(model))] == [model.output_operands[0].index]


def _upsampled_net(x):
    """conv-relu (kept) -> 1x1 conv to 2 channels -> bilinear x4: BiSeNetV2's head in small."""
    import paddle
    import paddle.nn.functional as F

    a = F.relu(F.conv2d(x, paddle.create_parameter([8, 3, 3, 3], "float32"), padding=1))
    b = F.conv2d(a, paddle.create_parameter([2, 8, 1, 1], "float32"))
    return F.interpolate(b, scale_factor=4, mode="bilinear", align_corners=False)


@pytest.mark.parametrize("poisoned", [False, True])
def test_upsampled_program_with_a_probe_upstream_gives_paddles_answer(tmp_path, poisoned, exact_builds):
    """The probe reads the upsampling's input: a NaN that reaches a kept relu is still seen there, and the exact
    program gives Paddle's answer (the relu turned the NaN into 0)."""
    pytest.importorskip("paddle")
    from support.converter_harness import pir_program

    x = np.random.default_rng(8).standard_normal((1, 3, 6, 6)).astype(np.float32)
    if poisoned:
        x.reshape(-1)[[4, 40]] = np.nan
    saved = pir_program(tmp_path, _upsampled_net, {"x": x})
    assert not np.isnan(saved.outputs[0]).any()
    got = _run(_predictor(saved, tmp_path), {"x": x})
    np.testing.assert_allclose(got, saved.outputs[0], rtol=1e-4, atol=1e-4)
    assert len(exact_builds) == int(poisoned)


# -- whole programs against Paddle Inference ----------------------------------------------------------------------
def _paddle_net(x, y):
    """conv-relu -> max pool (that relu is watched: the probe sums its output) -> + y -> conv-relu (kept) -> concat
    -> conv-relu (kept) -> global average pool: a NaN in y reaches the kept relus, a NaN in x the watched one."""
    import paddle
    import paddle.nn.functional as F

    a = F.relu(F.conv2d(x, paddle.create_parameter([8, 3, 3, 3], "float32"), padding=1))
    m = F.max_pool2d(a, 2)
    b = F.relu(F.conv2d(m + y, paddle.create_parameter([8, 8, 3, 3], "float32"), padding=1))
    c = paddle.concat([b, m], axis=1)
    d = F.relu(F.conv2d(c, paddle.create_parameter([6, 16, 1, 1], "float32")))
    return F.adaptive_avg_pool2d(d, 1)


def _predictor(saved, tmp_path, properties=""):
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names(["microsoft_onnxruntime"])
    config.set_nnadapter_context_properties(properties)
    config.set_nnadapter_model_cache_dir(str(tmp_path / "cache"))
    return nb.create_predictor(config)


def _run(predictor, feeds):
    for name in predictor.get_input_names():
        predictor.get_input_by_name(name).from_numpy(feeds[name])
    predictor.run()
    return predictor.get_output(0).numpy()


@pytest.mark.parametrize("poisoned", ["none", "x", "y"])
def test_program_with_kept_relus_gives_paddles_answer_for_nan_inputs(tmp_path, poisoned, exact_builds):
    pytest.importorskip("paddle")
    from support.converter_harness import pir_program

    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32),
             "y": rng.standard_normal((1, 8, 4, 4)).astype(np.float32)}
    if poisoned != "none":
        feeds[poisoned].reshape(-1)[[5, 17]] = np.nan
    saved = pir_program(tmp_path, _paddle_net, feeds)
    want = saved.outputs[0]
    assert not np.isnan(want).any()  # Paddle's relu turned every NaN into 0
    got = _run(_predictor(saved, tmp_path), feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # a NaN that reached a relu (a kept one through y, the watched one through x) needed the exact program
    assert len(exact_builds) == (0 if poisoned == "none" else 1)


def _relu_read_by_a_max_pool_and(reader: str):
    """PP-HGNetV2's stem in small: a relu read by a max pool (which drops NaN) and by `reader`."""
    def net(x):
        import paddle
        import paddle.nn.functional as F

        a = F.relu(F.conv2d(x, paddle.create_parameter([4, 3, 1, 1], "float32")))
        if reader == "slice":
            other = a[:, :, 2:, 2:] * 2.0
        else:
            size, stride, pad = {"3x3": (3, 1, 1), "3x3_stride2": (3, 2, 1), "1x1_stride3": (1, 3, 0)}[reader]
            other = F.conv2d(a, paddle.create_parameter([4, 4, size, size], "float32"), stride=stride,
                             padding=pad)
        return [F.max_pool2d(a, 2), other]
    return net


# reader, the max-pool window whose elements are all NaN, and whether the relu is NaN-kept (a plain Relu whose
# NaN shows through the reader): a reader that reads every element of the relu's output shows every NaN; one that
# leaves out that window's elements (a slice, a 1x1 convolution of stride 3) would let the max pool drop them
# unseen, so the relu is watched (the probe sums its output). Either way the run is redone exactly.
READERS = [("3x3", 0, True), ("3x3_stride2", 0, True), ("slice", 0, False), ("1x1_stride3", 2, False)]


@pytest.mark.parametrize("reader,window,kept", READERS, ids=[r[0] for r in READERS])
def test_relu_read_by_a_max_pool_and_another_reader(tmp_path, reader, window, kept, exact_builds):
    """Every element of one max-pool window NaN (the 1x1 convolution keeps it in place): Paddle's relu makes
    them 0, so that window's maximum is 0; a plain Relu would leave the max pool nothing to take."""
    pytest.importorskip("paddle")
    from support.converter_harness import pir_program

    x = np.random.default_rng(6).standard_normal((1, 3, 6, 6)).astype(np.float32)
    rows = slice(2 * window, 2 * window + 2)
    x[:, :, rows, rows] = np.nan
    saved = pir_program(tmp_path, _relu_read_by_a_max_pool_and(reader), {"x": x})
    predictor = _predictor(saved, tmp_path)
    predictor.get_input_by_name("x").from_numpy(x)
    predictor.run()
    for k, want in enumerate(saved.outputs):
        assert not np.isnan(want).any()
        np.testing.assert_allclose(predictor.get_output(k).numpy(), want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"output {k}")
    assert len(exact_builds) == 1
    import onnx

    speculative = onnx.load_from_string(exact_builds[0])
    (relu,) = [n for n in speculative.graph.node if n.name.endswith(NAN_KEPT_RELU_SUFFIX)]
    probe_sums = {n.input[0] for n in speculative.graph.node if n.op_type == "ReduceSumSquare"
                  and n.name.endswith("nan_probe")}
    assert (relu.output[0] in probe_sums) is (not kept)  # watched where the reader does not show every NaN


def test_program_restored_from_cache_keeps_its_exact_fallback(tmp_path, exact_builds):
    pytest.importorskip("paddle")
    from support.converter_harness import pir_program

    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32),
             "y": rng.standard_normal((1, 8, 4, 4)).astype(np.float32)}
    saved = pir_program(tmp_path, _paddle_net, feeds)
    _run(_predictor(saved, tmp_path), feeds)  # compiles and writes the cache
    warm = _predictor(saved, tmp_path)
    clean = _run(warm, feeds)
    np.testing.assert_allclose(clean, saved.outputs[0], rtol=1e-4, atol=1e-4)
    assert warm.stats.cache_hits_file == 1 and warm.stats.cache_misses == 0
    poisoned = {k: v.copy() for k, v in feeds.items()}
    poisoned["y"].reshape(-1)[3] = np.nan
    got = _run(warm, poisoned)
    assert not np.isnan(got).any() and len(exact_builds) == 1


def test_outputs_that_hold_nan_of_their_own_run_exactly_after_a_few_runs(monkeypatch):
    """A model whose output is NaN whatever the relus do (a NaN input passed through): after EXACT_ONLY_AFTER
    fallbacks the program runs the exact session alone."""
    sample = _sample("SIGMOID")
    model, feeds = build_op(sample.type, sample.inputs, relu_before=[0])
    device = DRIVER.open_device()
    program = DRIVER.create_program(DRIVER.create_context(device, ""), model, Cache())
    fast_runs = []
    original = ort_driver.OnnxRuntimeDriver._session_run
    fast = program.session

    def counting(session, output_names, feeds):
        if session is fast:
            fast_runs.append(1)
        return original(session, output_names, feeds)

    monkeypatch.setattr(ort_driver.OnnxRuntimeDriver, "_session_run", staticmethod(counting))
    x = feeds[0].copy()
    x.reshape(-1)[0] = np.nan
    for _ in range(ort_driver.EXACT_ONLY_AFTER + 2):
        (got,) = _run_program(program, [x])
        assert_op_close(got, run_model(model, [x])[0])
    assert program.exact.exact_only
    assert len(fast_runs) == ort_driver.EXACT_ONLY_AFTER
