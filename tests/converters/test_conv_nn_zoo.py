"""Every op of the NN family in the six zoo vision models converts and runs: each such op becomes its own
one-op NNAdapter model (inputs typed from the program's var descs, batch 1) and its outputs must have the
shapes Paddle's var descs declare. The numbers of each op type are covered by test_conv_nn*.py (converters/conv.py,
pool.py, normalization.py, matmul.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from converters.context import convert_subgraph
from converters.registry import get_converter
from devtools import zoo
from nnadapter_bridge.loader import load_model
from nnadapter_bridge.nnadapter.codes import dtype_precision
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.types import OperandType

pytest.importorskip("paddle", reason="the zoo models are exported by Paddle")

NN_FAMILY = {"batch_norm", "conv2d", "depthwise_conv2d", "pool2d", "matmul_v2", "dropout", "softmax", "fc", "mul",
             "matmul", "conv2d_transpose", "layer_norm", "bilinear_interp_v2", "nearest_interp_v2"}


@pytest.mark.parametrize("name", zoo.MODELS)
def test_family_ops_of_zoo_model_convert(zoo_model, name):
    graph = load_model(zoo_model(name))
    rng = np.random.default_rng(0)
    seen = 0
    for op in graph.ops():
        if op.type not in NN_FAMILY:
            continue
        seen += 1
        assert get_converter(op.type) is not None, op.label()
        feeds, types = {}, {}
        for name_ in op.input_names():
            if name_ in graph.params:
                continue
            var = graph.var(name_)
            shape = tuple(1 if d < 0 else d for d in var.shape)
            feeds[name_] = rng.standard_normal(shape).astype(var.dtype)
            types[name_] = OperandType(precision=dtype_precision(var.dtype), dims=shape)
        wanted = [n for n in op.output_names() if graph.var(n).persistable is False and graph.consumers(n)]
        result = convert_subgraph([op], graph.params, dict(sorted(types.items())), wanted, graph)
        outs = run_model(result.model, [feeds[n] for n in result.input_names])
        for out_name, array in zip(result.output_names, outs):
            declared = tuple(1 if d < 0 else d for d in graph.var(out_name).shape)
            assert array.shape == declared, f"{op.label()}: {out_name} {array.shape} != {declared}"
            assert np.all(np.isfinite(array)), op.label()
    assert seen > 0
