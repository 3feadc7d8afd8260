"""The attribute checks of loader/validate.py, each confirmed against Paddle Inference 3.3.1.

For every case the loader refuses the program with a ModelFormatError naming the op and the attribute, and
Paddle Inference, given the very same files, refuses it too (ValueError / RuntimeError from its InferShape or
its attribute checker). Two cases kill Paddle's process (SIGFPE) instead: they run in a child interpreter.
Paddle computes windows without elements for a plain pool2d with ksize 0 (-FLT_MAX / NaN everywhere), and
loops forever on pixel_shuffle with a negative factor: the loader refuses both, the first is shown here.
Neighbouring valid values load and run in Paddle, so no rule refuses more than Paddle does.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from devtools import zoo
from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.loader.validate import RULES, paddle_attr_types
from support.converter_harness import paddle_inference_run

pytest.importorskip("paddle")

X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
X4 = np.linspace(-1, 1, 256, dtype=np.float32).reshape(1, 4, 8, 8)
CONV = {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1, "data_format": "NCHW",
        "padding_algorithm": "EXPLICIT"}
CONV_T = dict(CONV, output_size=[], output_padding=[])
POOL = {"pooling_type": "max", "ksize": [2, 2], "strides": [1, 1], "paddings": [0, 0]}


class Case:
    """One op program: `op_type` with `attrs` on input x (and filter w for convolutions)."""

    def __init__(self, op_type, attrs, *, x=X, inputs=None, outputs=None, filter_shape=None, attr="", why=""):
        self.op_type, self.attrs, self.x = op_type, attrs, x
        self.inputs = inputs or ({"Input": ["x"], "Filter": ["w"]} if filter_shape else {"X": ["x"]})
        self.outputs = outputs or ({"Output": ["y"]} if filter_shape else {"Out": ["y"]})
        self.params = {"w": np.ones(filter_shape, np.float32)} if filter_shape else {}
        self.attr = attr  # the attribute the loader's message names ("" when it names the op only)
        self.why = why

    def write(self, directory) -> tuple:
        var_specs = [{"name": "x", "shape": list(self.x.shape)}, {"name": "y", "shape": []}]
        var_specs += [{"name": n, "shape": list(a.shape), "persistable": True} for n, a in self.params.items()]
        fetch = [n for names in self.outputs.values() for n in names][:1]
        op = {"type": self.op_type, "inputs": self.inputs, "outputs": self.outputs, "attrs": self.attrs}
        model = os.path.join(str(directory), "__model__")
        zoo.write_program(model, [{"vars": var_specs, "ops": [op]}], feeds=["x"], fetches=fetch)
        params = None
        if self.params:
            params = os.path.join(str(directory), "__params__")
            zoo.write_combined_params(params, self.params)
        return model, params


def conv(op_type="conv2d", filter_shape=(4, 4, 3, 3), x=X4, **attrs):
    base = CONV_T if "transpose" in op_type else CONV
    return Case(op_type, {**base, **attrs}, x=x, filter_shape=filter_shape)


def with_attr(case: Case, attr: str) -> Case:
    case.attr = attr
    return case


REFUSED = {
    # convolutions (ConvInferMeta / ConvTransposeInferMeta)
    "conv2d groups 0": with_attr(conv(groups=0), "groups"),
    "conv2d groups -1": with_attr(conv(groups=-1), "groups"),
    "conv2d groups 3 of 4 channels": with_attr(conv(groups=3), "groups"),
    "conv2d groups 2 of 3 filters": with_attr(conv(groups=2, filter_shape=(3, 2, 3, 3)), "groups"),
    "conv2d channels != filter channels * groups": with_attr(conv(groups=2, filter_shape=(4, 4, 3, 3)), "groups"),
    "conv2d stride 0": with_attr(conv(strides=[0, 1]), "strides"),
    "conv2d stride -1": with_attr(conv(strides=[-1, 1]), "strides"),
    "conv2d dilation 0": with_attr(conv(dilations=[0, 1]), "dilations"),
    "conv2d one stride": with_attr(conv(strides=[1]), "strides"),
    "conv2d 3-D filter": conv(filter_shape=(4, 4, 3)),
    "conv2d 3-D input": conv(x=X4.reshape(1, 4, 64)),
    "conv2d groups float": with_attr(conv(groups=(pb.FLOAT, 1.0)), "groups"),
    "conv2d strides floats": with_attr(conv(strides=(pb.FLOATS, [1.0, 1.0])), "strides"),
    "depthwise_conv2d groups 0": with_attr(conv("depthwise_conv2d", (4, 1, 3, 3), groups=0), "groups"),
    "conv2d_transpose groups -1": with_attr(conv("conv2d_transpose", groups=-1), "groups"),
    "conv2d_transpose stride 0": with_attr(conv("conv2d_transpose", strides=[0, 1]), "strides"),
    "conv2d_transpose filter for 3 channels": conv("conv2d_transpose", filter_shape=(3, 4, 3, 3)),
    "conv2d_transpose 3-D filter": conv("conv2d_transpose", filter_shape=(4, 4, 3)),
    # pool2d (PoolInferMeta)
    "pool2d stride 0": Case("pool2d", {**POOL, "strides": [0, 1]}, x=X4, attr="strides"),
    "pool2d stride -1": Case("pool2d", {**POOL, "strides": [-1, 1]}, x=X4, attr="strides"),
    "pool2d global stride 0": Case("pool2d", {**POOL, "strides": [0, 0], "global_pooling": True}, x=X4,
                                   attr="strides"),
    "pool2d one ksize": Case("pool2d", {**POOL, "ksize": [2]}, x=X4, attr="ksize"),
    "pool2d global one ksize": Case("pool2d", {**POOL, "ksize": [2], "global_pooling": True}, x=X4, attr="ksize"),
    "pool2d ksize floats": Case("pool2d", {**POOL, "ksize": (pb.FLOATS, [2.0, 2.0])}, x=X4, attr="ksize"),
    # axes in range
    "softmax axis 2": Case("softmax", {"axis": 2}, attr="axis"),
    "softmax axis -3": Case("softmax", {"axis": -3}, attr="axis"),
    "softmax axis 1.5": Case("softmax", {"axis": (pb.FLOAT, 1.5)}, attr="axis"),
    "softmax axis 1.0": Case("softmax", {"axis": (pb.FLOAT, 1.0)}, attr="axis"),
    "softmax axis string": Case("softmax", {"axis": (pb.STRING, "1")}, attr="axis"),
    "softmax axis list": Case("softmax", {"axis": (pb.INTS, [1])}, attr="axis"),
    "log_softmax axis 5": Case("log_softmax", {"axis": 5}, attr="axis"),
    "log_softmax axis float": Case("log_softmax", {"axis": (pb.FLOAT, 1.0)}, attr="axis"),
    "concat axis 2": Case("concat", {"axis": 2}, inputs={"X": ["x", "x"]}, attr="axis"),
    "concat axis -3": Case("concat", {"axis": -3}, inputs={"X": ["x", "x"]}, attr="axis"),
    "concat axis float": Case("concat", {"axis": (pb.FLOAT, 0.0)}, inputs={"X": ["x", "x"]}, attr="axis"),
    "split axis 5": Case("split", {"axis": 5, "num": 1, "sections": []}, attr="axis"),
    "split axis -3": Case("split", {"axis": -3, "num": 1, "sections": []}, attr="axis"),
    "split num 0": Case("split", {"axis": 0, "num": 0, "sections": []}, attr="num"),
    "transpose2 axis 5": Case("transpose2", {"axis": [0, 5]}, outputs={"Out": ["y"], "XShape": []}, attr="axis"),
    "transpose2 axis twice": Case("transpose2", {"axis": [0, 0]}, outputs={"Out": ["y"], "XShape": []},
                                  attr="axis"),
    "transpose2 one axis": Case("transpose2", {"axis": [0]}, outputs={"Out": ["y"], "XShape": []}, attr="axis"),
    "reduce_sum dim 5": Case("reduce_sum", {"dim": [5], "keep_dim": False, "reduce_all": False}, attr="dim"),
    "reduce_sum dim -3": Case("reduce_sum", {"dim": [-3], "keep_dim": False, "reduce_all": False}, attr="dim"),
    "reduce_sum dim 5 reduce_all": Case("reduce_sum", {"dim": [5], "keep_dim": False, "reduce_all": True},
                                        attr="dim"),
    "flatten stop before start": Case("flatten_contiguous_range", {"start_axis": 5, "stop_axis": -1},
                                      outputs={"Out": ["y"], "XShape": []}, attr="stop_axis"),
    "arg_max axis 5": Case("arg_max", {"axis": 5, "keepdims": False, "flatten": False, "dtype": 3}, attr="axis"),
    "arg_max axis -3": Case("arg_max", {"axis": -3, "keepdims": False, "flatten": False, "dtype": 3},
                            attr="axis"),
    "arg_max axis 5 flatten": Case("arg_max", {"axis": 5, "keepdims": False, "flatten": True, "dtype": 3},
                                   attr="axis"),
    "cumsum axis 5": Case("cumsum", {"axis": 5}, attr="axis"),
    "cumsum axis 5 flatten": Case("cumsum", {"axis": 5, "flatten": True}, attr="axis"),
    "unsqueeze2 axis 9": Case("unsqueeze2", {"axes": [9]}, outputs={"Out": ["y"], "XShape": []}, attr="axes"),
    "unsqueeze2 axis 3": Case("unsqueeze2", {"axes": [3]}, outputs={"Out": ["y"], "XShape": []}, attr="axes"),
    "unsqueeze2 axis -4": Case("unsqueeze2", {"axes": [-4]}, outputs={"Out": ["y"], "XShape": []}, attr="axes"),
    "squeeze2 axis 9": Case("squeeze2", {"axes": [9]}, outputs={"Out": ["y"], "XShape": []}, attr="axes"),
    "squeeze2 axis -3": Case("squeeze2", {"axes": [-3]}, outputs={"Out": ["y"], "XShape": []}, attr="axes"),
    "top_k_v2 axis 5": Case("top_k_v2", {"axis": 5, "k": 1}, outputs={"Out": ["y"], "Indices": []}, attr="axis"),
    "top_k_v2 axis -3": Case("top_k_v2", {"axis": -3, "k": 1}, outputs={"Out": ["y"], "Indices": []},
                             attr="axis"),
    "stack axis 5": Case("stack", {"axis": 5}, inputs={"X": ["x", "x"]}, outputs={"Y": ["y"]}, attr="axis"),
    "stack axis -4": Case("stack", {"axis": -4}, inputs={"X": ["x", "x"]}, outputs={"Y": ["y"]}, attr="axis"),
    "unstack axis 5": Case("unstack", {"axis": 5, "num": 2}, outputs={"Y": ["y"]}, attr="axis"),
    "unstack axis -3": Case("unstack", {"axis": -3, "num": 2}, outputs={"Y": ["y"]}, attr="axis"),
    "layer_norm begin 0": Case("layer_norm", {"begin_norm_axis": 0, "epsilon": 1e-5}, outputs={"Y": ["y"]},
                               attr="begin_norm_axis"),
    "layer_norm begin -1": Case("layer_norm", {"begin_norm_axis": -1, "epsilon": 1e-5}, outputs={"Y": ["y"]},
                                attr="begin_norm_axis"),
    "layer_norm begin 2": Case("layer_norm", {"begin_norm_axis": 2, "epsilon": 1e-5}, outputs={"Y": ["y"]},
                               attr="begin_norm_axis"),
    "pixel_shuffle factor 0": Case("pixel_shuffle", {"upscale_factor": 0}, x=X4[:, :, :2, :2],
                                   attr="upscale_factor"),
    "pixel_shuffle factor 3 of 4 channels": Case("pixel_shuffle", {"upscale_factor": 3}, x=X4[:, :, :2, :2],
                                                 attr="upscale_factor"),
}

# Neighbours of the refused values: both the loader and Paddle take them.
ACCEPTED = {
    "conv2d NHWC groups 2": conv(groups=2, filter_shape=(4, 2, 3, 3), x=X4.transpose(0, 2, 3, 1).copy(),
                                 data_format="NHWC"),
    "conv2d padding -2 (Paddle runs it)": conv(paddings=[-2, 0]),
    "conv2d_transpose groups 3 (Paddle runs it)": conv("conv2d_transpose", groups=3),
    "pool2d adaptive stride 0": Case("pool2d", {**POOL, "strides": [0, 0], "adaptive": True}, x=X4),
    "pool2d global ksize 0": Case("pool2d", {**POOL, "ksize": [0, 0], "global_pooling": True}, x=X4),
    "softmax axis -2": Case("softmax", {"axis": -2}),
    "concat axis 1": Case("concat", {"axis": 1}, inputs={"X": ["x", "x"]}),
    "split num -1 (Paddle runs it)": Case("split", {"axis": 0, "num": -1, "sections": []}),
    "transpose2 negative axes": Case("transpose2", {"axis": [-1, 0]}, outputs={"Out": ["y"], "XShape": []}),
    "flatten start -3 (Paddle runs it)": Case("flatten_contiguous_range", {"start_axis": -3, "stop_axis": -1},
                                              outputs={"Out": ["y"], "XShape": []}),
    "unsqueeze2 axis -3": Case("unsqueeze2", {"axes": [-3]}, outputs={"Out": ["y"], "XShape": []}),
    "unsqueeze2 axis 2": Case("unsqueeze2", {"axes": [2]}, outputs={"Out": ["y"], "XShape": []}),
    "stack axis 2": Case("stack", {"axis": 2}, inputs={"X": ["x", "x"]}, outputs={"Y": ["y"]}),
    "slice axis -3 (Paddle runs it)": Case("slice", {"axes": [-3], "starts": [0], "ends": [1], "decrease_axis": [],
                                                     "infer_flags": [1]}, inputs={"Input": ["x"]}),
    "relu with an unknown float attribute": Case("relu", {"foo": (pb.FLOAT, 1.5)}),
}


@pytest.mark.parametrize("case_id", sorted(REFUSED))
def test_the_loader_refuses(tmp_path, case_id):
    case = REFUSED[case_id]
    model, params = case.write(tmp_path)
    with pytest.raises(ModelFormatError) as info:
        load_model(model, params)
    text = str(info.value)
    assert model in text and f"op {case.op_type}#1 (out: y)" in text, text
    if case.attr:
        assert f"attribute '{case.attr}'" in text, text


@pytest.mark.parametrize("case_id", sorted(REFUSED))
def test_paddle_inference_refuses_the_same_program(tmp_path, case_id):
    model, params = REFUSED[case_id].write(tmp_path)
    with pytest.raises(Exception) as info:  # noqa: PT011 - Paddle raises ValueError, RuntimeError, IndexError
        paddle_inference_run(model, params, {"x": REFUSED[case_id].x})
    assert not isinstance(info.value, (AssertionError, KeyError)), info.value


@pytest.mark.parametrize("case_id", sorted(ACCEPTED))
def test_neighbouring_values_load_and_run_in_paddle(tmp_path, case_id):
    model, params = ACCEPTED[case_id].write(tmp_path)
    load_model(model, params)
    paddle_inference_run(model, params, {"x": ACCEPTED[case_id].x})


def test_pool2d_ksize_zero_has_no_meaningful_result_in_paddle(tmp_path):
    """Paddle runs pool2d with ksize [0, 0] over windows without elements; the loader refuses it."""
    for pooling_type, degenerate in (("max", lambda a: np.all(a == -np.finfo(np.float32).max)),
                                     ("avg", lambda a: np.all(np.isnan(a)))):
        case = Case("pool2d", {**POOL, "pooling_type": pooling_type, "ksize": [0, 0]}, x=X4)
        (tmp_path / pooling_type).mkdir()
        model, params = case.write(tmp_path / pooling_type)
        (out,) = paddle_inference_run(model, params, {"x": X4})
        assert degenerate(out), out
        with pytest.raises(ModelFormatError, match="every window size must be > 0"):
            load_model(model, params)


CRASHES = {
    "conv2d_transpose groups 0": conv("conv2d_transpose", groups=0),
    "pool2d adaptive ksize 0": Case("pool2d", {**POOL, "ksize": [0, 0], "adaptive": True, "pooling_type": "avg"},
                                    x=X4),
}


@pytest.mark.parametrize("case_id", sorted(CRASHES))
def test_programs_that_kill_paddle_are_refused(tmp_path, case_id):
    case = CRASHES[case_id]
    model, params = case.write(tmp_path)
    with pytest.raises(ModelFormatError, match=f"op {case.op_type}#1"):
        load_model(model, params)
    np.save(tmp_path / "x.npy", case.x)
    script = textwrap.dedent(f"""
        import numpy as np
        from support.converter_harness import paddle_inference_run
        paddle_inference_run({model!r}, {params!r}, {{"x": np.load({str(tmp_path / 'x.npy')!r})}})
        print("RAN")
    """)
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests_dir, os.path.dirname(tests_dir)]),
               GLOG_minloglevel="3", FLAGS_enable_pir_api="0")
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    output = child.stdout[-2000:] + child.stderr[-2000:]
    assert "RAN" not in child.stdout, output
    # killed by the signal (Paddle's handler prints its FatalError first), not an import or Python error
    assert child.returncode == -signal.SIGFPE or "Erroneous arithmetic operation" in output, output


def test_every_rule_is_for_an_op_paddle_declares():
    """The rules and the attribute-type table speak the same op types (a typo would silently check nothing)."""
    declared = paddle_attr_types()
    assert set(RULES) <= set(declared)
    assert declared["softmax"]["axis"] == pb.INT and declared["conv2d"]["strides"] == pb.INTS


def test_op_view_refuses_a_float_where_an_integer_is_read():
    """The converters' central reader: an op Paddle declares no proto for (or one built in memory) still cannot
    turn axis 1.5 into 1."""
    from converters.op_view import OpView
    from nnadapter_bridge.loader.program import OpInfo, VarRef

    def op(value, attr_type):
        return OpInfo("fusion_elementwise_add_activation", 3, 0, {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]},
                      {"axis": value}, {"axis": attr_type})

    with pytest.raises(ModelFormatError, match="fusion_elementwise_add_activation#3 .*attribute 'axis' is a float"):
        OpView(op(1.5, pb.FLOAT)).attr_int("axis", -1)
    with pytest.raises(ModelFormatError, match="attribute 'axis' is a list of floats"):
        OpView(op([1.0], pb.FLOATS)).attr_ints("axis")
    assert OpView(op(1, pb.INT)).attr_int("axis", -1) == 1
    assert OpView(op(1, pb.LONG)).attr_ints("axis") == [1]
    assert OpView(op(True, pb.BOOLEAN)).attr_int("axis", -1) == 1  # bool attributes read as 0/1 stay allowed
    assert OpView(op(VarRef("t"), pb.VAR)).attr_int("missing", 7) == 7


def test_a_float_integer_attribute_of_an_op_without_a_paddle_proto_refuses_the_model(tmp_path):
    """Paddle Lite's fused ops have no proto in Paddle 3.3.1, so the load-time table cannot check them; the
    converter's OpView read refuses the float and the predictor reports it instead of running the op on the
    host with a truncated axis."""
    import nnadapter_bridge as nb
    from support.converter_harness import opdesc_program

    x = np.ones((2, 3), np.float32)
    saved = opdesc_program(tmp_path, "fusion_elementwise_add_activation", inputs={"X": ["x"], "Y": ["y"]},
                           outputs={"Out": ["out"]}, attrs={"axis": 1.5, "act_type": "relu"},
                           feeds={"x": x, "y": x}, run_paddle=False)
    config = nb.Config()
    config.set_model_file(saved.model_path)
    with pytest.raises(ModelFormatError, match="attribute 'axis' is a float"):
        nb.create_predictor(config)
