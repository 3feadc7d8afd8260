"""A PIR mutable attribute computed at run time reaches the legacy op as a Variable-valued attribute (arange's
end here, as RT-DETR's decoder has it); the partition counts that var as read, so the device subgraph computing it
hands it out to the op that reads it (it was left inside: "its attribute(s) end come from tensor(s) ..., which
have no value in the scope")."""
from __future__ import annotations

import numpy as np
import pytest

from support.converter_harness import pir_program, run_predictor

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


@pytest.fixture(scope="module")
def arange_program(tmp_path_factory):
    feeds = {"x": np.array([[3, 1], [2, 5]], np.int64), "y": np.arange(6, dtype=np.float32).reshape(2, 3)}

    def build(x, y):
        import paddle
        end = paddle.max(x * 2) + 1  # computed on the device, read by the host's range
        steps = paddle.arange(0, end, 1, dtype="int64")
        return [steps * 3, paddle.sum(y) + end.astype("float32")]
    return pir_program(tmp_path_factory.mktemp("arange"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_run_time_arange_end_matches_paddle(arange_program, device):
    from nnadapter_bridge.loader import load_model
    from nnadapter_bridge.loader.program import VarRef

    graph = load_model(arange_program.model_path, arange_program.params_path)
    (range_op,) = [op for op in graph.ops() if op.type == "range"]
    assert isinstance(range_op.attr("end"), VarRef)  # the form under test
    got = run_predictor(arange_program, device)
    for out, want in zip(got, arange_program.outputs):
        np.testing.assert_array_equal(out, want, err_msg=device)
