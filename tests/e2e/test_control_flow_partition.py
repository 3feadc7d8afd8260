"""Loop and branch bodies across the partition (issue 25), each from a small Paddle program saved the Paddle 3 way
(PIR .json) and run by the predictor against Paddle Inference:

- a `while` body reading, through a Variable-valued attribute (arange's end), a value a device subgraph computes:
  the partition counts what a sub-block reads from outside as read by the control-flow op (and PIR's translation
  lists it in the while op's X slot, tests/loader/test_pir_outer_reads.py), so the subgraph exports it (it was
  left inside: "its attribute(s) end come from tensor(s) ..., which have no value in the scope");
- a decoder-style loop writing rows into a buffer by a tensor index (set_value_with_tensor, read as set_value);
- an op inside a loop body that nothing runs: UnsupportedOpError names it and the loop holding it (the list was
  filtered by block-0 op types and came out empty).
"""
from __future__ import annotations

import numpy as np
import pytest

from support.converter_harness import pir_program, run_predictor

DEVICES = ["builtin_device", "microsoft_onnxruntime"]

# A while op has no device path: it is always on the host, and in these small programs above the 5% share.
pytestmark = pytest.mark.filterwarnings("ignore::nnadapter_bridge.subgraph.plan.HostPlacementWarning")


@pytest.fixture(scope="module")
def loop_reading_an_attribute(tmp_path_factory):
    feeds = {"x": np.array([[3, 1], [2, 5]], np.int64), "y": np.arange(6, dtype=np.float32).reshape(2, 3)}

    def build(x, y):
        import paddle
        end = paddle.max(x * 2) + 1  # on the device; only the loop body reads it, through arange's end

        def body(i, acc):
            steps = paddle.arange(0, end, 1, dtype="int64")
            return i + 1, acc + y * steps.sum().astype("float32")
        _, acc = paddle.static.nn.while_loop(lambda i, acc: i < 3, body,
                                             [paddle.full([1], 0, "int64"), paddle.zeros([2, 3], "float32")])
        return [acc]
    return pir_program(tmp_path_factory.mktemp("loop_attr"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_loop_body_reads_a_device_value_through_an_attribute(loop_reading_an_attribute, device):
    import nnadapter_bridge as nb
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.loader.program import VarRef

    saved = loop_reading_an_attribute
    graph = load_model(saved.model_path, saved.params_path)
    (loop,) = [op for op in graph.ops() if op.type == "while"]
    body_range = [op for op in graph.blocks[loop.attr("sub_block").idx].ops if op.type == "range"]
    end = body_range[0].attr("end")
    assert isinstance(end, VarRef)  # the form under test: an attribute tensor read in the body only

    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    exporting = [s for s in predictor.partition.subgraphs if end.name in s.output_names]
    assert exporting, f"no subgraph hands out {end.name}: {predictor.partition.subgraphs}"

    got = run_predictor(saved, device)
    np.testing.assert_array_equal(got[0], saved.outputs[0], err_msg=device)


def test_decoder_loop_writes_rows_into_a_buffer(tmp_path):
    feeds = {"y": np.arange(12, dtype=np.float32).reshape(4, 3)}

    def build(y):
        import paddle

        def body(i, buf, rows):
            row = paddle.gather(rows, i) * 2.0 + 1.0  # [1, 3]
            buf = paddle.static.setitem(buf, i, row)  # set_value_with_tensor at a tensor index
            return i + 1, buf, rows
        _, buf, _ = paddle.static.nn.while_loop(lambda i, buf, rows: i < 4, body,
                                                [paddle.full([1], 0, "int64"), paddle.zeros([4, 3], "float32"), y])
        return [buf]
    saved = pir_program(tmp_path, build, feeds)
    from nnadapter_bridge.loader import load_model
    graph = load_model(saved.model_path, saved.params_path)
    body_types = {op.type for block in graph.blocks[1:] for op in block.ops}
    assert "set_value" in body_types, sorted(body_types)
    for device in DEVICES:
        np.testing.assert_array_equal(run_predictor(saved, device)[0], saved.outputs[0], err_msg=device)


def test_unsupported_op_inside_a_loop_body_is_named(tmp_path, monkeypatch):
    feeds = {"y": np.arange(6, dtype=np.float32).reshape(2, 3)}

    def build(y):
        import paddle

        def body(i, acc):
            values, _ = paddle.kthvalue(acc, 2, axis=-1, keepdim=True)
            return i + 1, acc + values
        _, acc = paddle.static.nn.while_loop(lambda i, acc: i < 2, body, [paddle.full([1], 0, "int64"), y * 1.0])
        return [acc]
    saved = pir_program(tmp_path, build, feeds, run_paddle=False)
    import nnadapter_bridge as nb
    from nnadapter_bridge.host.kernels import HOST_KERNELS

    # kthvalue has a host kernel and no converter: without the kernel, nothing runs it.
    monkeypatch.delitem(HOST_KERNELS, "kthvalue")
    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names(["builtin_device"])
    with pytest.raises(nb.UnsupportedOpError) as caught:
        nb.create_predictor(config)
    message = str(caught.value)
    assert "can run neither on builtin_device nor on the host:\n  kthvalue (x1, first kthvalue#" in message, message
    assert "block 1), in the body of while#" in message, message
    # Strict mode: the same error, and no word that it accepts the loop (ControlFlowOnHostWarning) before it.
    import warnings

    from nnadapter_bridge.subgraph.plan import ControlFlowOnHostWarning

    config.set_strict()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(nb.UnsupportedOpError) as strict:
            nb.create_predictor(config)
    assert str(strict.value) == message
    assert not [w for w in said if issubclass(w.category, ControlFlowOnHostWarning)]


def _shuffle_into_a_loop(x):
    import paddle
    s = paddle.shape(x)
    n, c, h, w = s[0], s[1], s[2], s[3]
    y = paddle.reshape(x, paddle.stack([n, paddle.full([], 2, s.dtype), c // 2, h, w]))
    y = paddle.reshape(paddle.transpose(y, [0, 2, 1, 3, 4]), paddle.stack([n, c, h, w]))
    a, b = paddle.split(y, 2, axis=1)
    _, acc = paddle.static.nn.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, paddle.tanh(acc + a * b)),
                                         [paddle.full([1], 0, "int64"), a * 1.0])
    return [acc]


@pytest.fixture(scope="module")
def shuffle_into_a_loop(tmp_path_factory):
    """Issue 25's channel shuffle: reshape targets stacked from paddle.shape slices, a split in two along the
    channels, then a loop over the halves; the input's shape is declared in full ([1, 4, 3, 5])."""
    feeds = {"x": np.random.default_rng(1).standard_normal([1, 4, 3, 5]).astype(np.float32)}
    return pir_program(tmp_path_factory.mktemp("shuffle_loop"), _shuffle_into_a_loop, feeds)


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino", "microsoft_onnxruntime"])
def test_shuffle_split_stays_on_the_device(shuffle_into_a_loop, device):
    # The split's input is declared [-1, -1, -1, -1] (its reshape target is a tensor); the declared [1, 4, 3, 5]
    # input fixes its channels through shape -> slice -> stack -> reshape, and the decision uses them.
    import nnadapter_bridge as nb
    from nnadapter_bridge.loader import load_model
    from support.tolerances import assert_model_close

    saved = shuffle_into_a_loop
    graph = load_model(saved.model_path, saved.params_path)
    (split,) = [op for op in graph.ops() if op.type == "split"]
    assert graph.var(split.input("X")[0]).shape == (-1, -1, -1, -1)  # the form under test
    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    host = [(p.op.type, p.reason) for p in predictor.placements() if p.device is None]
    assert [t for t, _ in host] == ["while"], host  # no NNAdapter device runs a loop
    (got,) = run_predictor(saved, device)
    assert_model_close(got, saved.outputs[0], what=device)
    assert not [p for p in predictor.placements() if p.at_run]


def test_fixed_dims_follow_the_shape_arithmetic(shuffle_into_a_loop):
    # What the decision reads: the sizes the declared input fixes through shape -> slice -> stack -> reshape, and
    # nothing for the loop-carried var, whose writes (before the loop and by the loop) may differ.
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.subgraph.support_decisions import infer_block_dims

    graph = load_model(shuffle_into_a_loop.model_path, None)
    fixed = infer_block_dims(graph)
    (split,) = [op for op in graph.ops() if op.type == "split"]
    (loop,) = [op for op in graph.ops() if op.type == "while"]
    assert fixed[split.input("X")[0]] == (1, 4, 3, 5)
    assert [fixed[name] for name in split.output("Out")] == [(1, 2, 3, 5), (1, 2, 3, 5)]
    carried = [name for name in loop.output("Out") if graph.var(name).dtype == np.float32]
    assert carried and not any(name in fixed for name in carried), {n: fixed.get(n) for n in carried}


def test_shuffle_with_an_unknown_batch_stays_on_the_device(tmp_path):
    # With the batch declared -1, `shape` does not fold; the channels, equal whatever the batch, still count as fixed
    # by the declarations, so the split is decided with them; run at two batch sizes, the result is Paddle's.
    import nnadapter_bridge as nb
    from nnadapter_bridge.subgraph.support_decisions import infer_block_dims
    from support.converter_harness import paddle_inference_run, paddle_pir_static
    from support.tolerances import assert_model_close

    with paddle_pir_static() as paddle:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            feed = paddle.static.data("x", shape=[-1, 4, 3, 5], dtype="float32")
            outs = _shuffle_into_a_loop(feed)
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            paddle.static.save_inference_model(str(tmp_path / "model"), [feed], outs, exe, program=main)
    model = str(tmp_path / "model.json")
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)
    (split,) = [op for op in predictor.graph.ops() if op.type == "split"]
    assert infer_block_dims(predictor.graph)[split.input("X")[0]] == (-1, 4, 3, 5)
    host = sorted({p.op.type for p in predictor.placements() if p.device is None})
    assert host == ["while"], host
    for batch in (2, 3):
        x = np.random.default_rng(batch).standard_normal([batch, 4, 3, 5]).astype(np.float32)
        (want,) = paddle_inference_run(model, None, {"x": x})
        predictor.get_input_by_name("x").from_numpy(x)
        predictor.run()
        assert_model_close(predictor.get_output(0).numpy(), want, what=f"builtin_device, batch {batch}")
    assert not [p for p in predictor.placements() if p.at_run]


def test_fixed_dims_are_walked_only_for_a_declined_op(tmp_path, monkeypatch):
    # Every op supported with its declared dims (a batch of -1): the start converts no extra walk of the program.
    import nnadapter_bridge as nb
    from nnadapter_bridge.subgraph import support_decisions
    from support.predictor_programs import add_relu_scale_model

    def walked(*args, **kwargs):
        raise AssertionError("infer_block_dims ran although no op was declined")

    monkeypatch.setattr(support_decisions, "infer_block_dims", walked)
    config = nb.Config()
    config.set_model_file(add_relu_scale_model(tmp_path / "m", extra_ops=("sigmoid", "tanh")))
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)
    assert not [p for p in predictor.placements() if p.device is None]


def test_a_warm_start_names_the_device_of_a_split_decided_with_fixed_dims(shuffle_into_a_loop, tmp_path):
    # The second start reads the verdicts recorded for the program; asked which of two devices takes the split,
    # it is converted with the sizes the declarations fix again (not declined by both as with its declared dims).
    import nnadapter_bridge as nb

    devices = ["builtin_device", "microsoft_onnxruntime"]
    for start in ("cold", "warm"):
        config = nb.Config()
        config.set_model_file(shuffle_into_a_loop.model_path)
        config.set_nnadapter_device_names(devices)
        config.set_nnadapter_model_cache_dir(str(tmp_path / "cache"))
        predictor = nb.create_predictor(config)
        if start == "warm":
            assert predictor.support.conversions == 0  # nothing decided afresh
        (split,) = [p for p in predictor.placements() if p.op.type == "split"]
        assert (split.device, split.declined) == ("builtin_device", {}), (start, split)
