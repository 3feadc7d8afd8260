"""Tensor arrays in Paddle 3.3.1 PIR exports: a Python list a to_static loop appends to becomes a tensor array
(pd_op.create_array, typed `1.t_dense_tensor_array` by paddle 3.3.1), read back by indexing (pd_op.slice_array_dense,
the legacy `slice` of an array: loader/pir.py `_slice_array_dense`, run by the host's `slice` kernel) and by concat
(pd_op.array_to_tensor). ppdet's R-CNN exports do all three (RPNHead._gen_proposal's per-image RoIs, RoIAlign's
`roi[0]`, BBoxPostProcess.get_pred's per-image boxes).

The model is exported by `paddle.jit.save` (PIR on) in a child interpreter (support.pir_export) and run through the
predictor against Paddle Inference reading the same `.json`, with two trip counts (so `outs[-1]` moves).
"""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest

import nnadapter_bridge as nb
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.loader.dtypes import VarTypeCode
from support.converter_harness import paddle_inference_run
from support.pir_export import export_in_child
from support.tolerances import assert_model_close

# The loop and the array reads have no device path: they run on the host, above the 5% share of this small program.
pytestmark = pytest.mark.filterwarnings("ignore::nnadapter_bridge.subgraph.plan.HostPlacementWarning")

_EXPORT = r'''
import os, sys
import paddle

out = sys.argv[1]
spec = paddle.static.InputSpec


class Appended(paddle.nn.Layer):
    def forward(self, x, n):
        outs = []
        i = paddle.zeros([1], dtype="int64")
        while i < n:
            outs.append(x * (i.astype("float32") + 1.0) - 0.5)
            i = i + 1
        return outs[0], outs[-1], outs[1], paddle.concat(outs)


net = Appended()
net.eval()
specs = [spec([-1, 3], "float32", "x"), spec([1], "int64", "n")]
paddle.jit.save(paddle.jit.to_static(net, input_spec=specs, full_graph=True), os.path.join(out, "appended", "appended"))
'''


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("pir_tensor_arrays"))
    export_in_child(root, _EXPORT)
    return os.path.join(root, "appended", "appended.json")


def test_array_indexing_is_a_legacy_slice_of_the_array(model):
    with open(model) as f:
        text = f.read()
    assert "1.t_dense_tensor_array" in text and "1.slice_array_dense" in text, "paddle changed how it saves arrays"
    graph = load_model(model, None)
    slices = [op for op in graph.ops() if op.type == "slice"]
    assert len(slices) == 3
    for op in slices:
        (array,) = op.input("Input")
        assert graph.var(array, op.block_idx).var_type == int(VarTypeCode.LOD_TENSOR_ARRAY)
    assert sorted(op.attrs["starts"][0] for op in slices) == [-1, 0, 1]


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino"])
def test_array_reads_run_as_paddle(model, device):
    rng = np.random.default_rng(3)
    config = nb.Config()
    config.set_model_file(model)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    try:
        for n in (3, 2):
            feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32), "n": np.array([n], np.int64)}
            want = paddle_inference_run(model, None, feeds)
            for input_name, value in feeds.items():
                predictor.get_input_by_name(input_name).from_numpy(value)
            predictor.run()
            for k, expected in enumerate(want):
                assert_model_close(predictor.get_output(k).numpy(), expected, what=f"output {k} with n={n}")
        # The array's element reads stay on the host (a converter would take the array var for a tensor).
        assert collections.Counter(op.type for op in predictor.host_ops)["slice"] == 3
    finally:
        predictor.close()
