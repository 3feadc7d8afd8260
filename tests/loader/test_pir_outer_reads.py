"""What a loop or branch body reads from outside, through an attribute too, is an input of the control-flow op
(loader/pir.py `_outer_reads`): a body op whose attribute comes from an outer tensor (PIR's arange with a
computed `end`, translated to a legacy `range` whose `end` is a Variable-valued attribute) makes that tensor part of
the while op's X slot and of the conditional_block's Input slot, as a legacy ProgramDesc lists it.

The models are exported by `paddle.jit.save` (paddle 3.3.1, PIR on) in a child interpreter
(support.pir_export), and run through the predictor against Paddle Inference reading the same `.json`.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from nnadapter_bridge.loader import load_model
from nnadapter_bridge.loader.program import VarRef
from support.converter_harness import paddle_inference_run
from support.pir_export import export_in_child
from support.tolerances import assert_model_close

# The control-flow op has no device path: it runs on the host, above the 5% share of these small programs.
pytestmark = pytest.mark.filterwarnings("ignore::nnadapter_bridge.subgraph.plan.HostPlacementWarning")

_EXPORT = r'''
import os, sys
import paddle

out = sys.argv[1]
spec = paddle.static.InputSpec


class LoopRange(paddle.nn.Layer):
    def forward(self, x, n):
        end = paddle.max(paddle.abs(x)).astype("int64") + 2  # computed outside; only the body reads it
        i = paddle.zeros([1], dtype="int64")
        h = x
        while i < n:
            steps = paddle.arange(0, end, 1, dtype="int64")
            h = h * 0.5 + steps.sum().astype("float32")
            i = i + 1
        return h


class CondRange(paddle.nn.Layer):
    def forward(self, x):
        end = paddle.max(paddle.abs(x)).astype("int64") + 3
        if paddle.mean(x) > 0:
            h = x + paddle.arange(0, end, 1, dtype="int64").sum().astype("float32")
        else:
            h = x - 1.0
        return h


for name, net, specs in [("loop_range", LoopRange(), [spec([2, 3], "float32", "x"), spec([1], "int64", "n")]),
                         ("cond_range", CondRange(), [spec([2, 3], "float32", "x")])]:
    net.eval()
    paddle.jit.save(paddle.jit.to_static(net, input_spec=specs, full_graph=True), os.path.join(out, name, name))
'''

FEEDS = {"loop_range": {"x": np.array([[1.5, -4.2, 0.3], [2.0, 0.1, -0.7]], np.float32), "n": np.array([3], np.int64)},
         "cond_range": {"x": np.array([[1.5, -4.2, 3.3], [2.0, 0.1, 0.7]], np.float32)}}
HOLDER = {"loop_range": ("while", "X"), "cond_range": ("conditional_block", "Input")}


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("pir_outer_reads"))
    export_in_child(root, _EXPORT)
    return root


@pytest.mark.parametrize("name", sorted(FEEDS))
def test_an_attribute_read_in_a_body_is_an_input_of_the_control_flow_op(exports, name):
    model = os.path.join(exports, name, f"{name}.json")
    graph = load_model(model, None)
    op_type, slot = HOLDER[name]
    body_ranges = [op for block in graph.blocks[1:] for op in block.ops if op.type == "range"]
    assert body_ranges, "the export holds no range in a body (paddle changed how arange is saved?)"
    (holder,) = [op for op in graph.ops()
                 if op.type == op_type and op.attr("sub_block").idx == body_ranges[0].block_idx]
    end = body_ranges[0].attr("end")
    assert isinstance(end, VarRef), f"range's end is {end!r}, not an attribute tensor: the form under test is gone"
    assert end.name in graph.blocks[0].vars, end.name  # an outer tensor, made in block 0
    assert end.name in holder.input(slot), f"{holder.label()} {slot} = {holder.input(slot)} lacks {end.name}"


@pytest.mark.parametrize("name", sorted(FEEDS))
def test_bodies_reading_attributes_run_as_paddle(exports, name):
    import nnadapter_bridge as nb

    model = os.path.join(exports, name, f"{name}.json")
    (want,) = paddle_inference_run(model, None, FEEDS[name])
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names(["builtin_device"])
    predictor = nb.create_predictor(config)
    for input_name, value in FEEDS[name].items():
        predictor.get_input_by_name(input_name).from_numpy(value)
    predictor.run()
    assert_model_close(predictor.get_output(0).numpy(), want, what=name)
