"""The loader against Paddle itself on every zoo model and layout: ops, attrs, vars, feed/fetch order and
every parameter bitwise equal to what `paddle.static.load_inference_model` puts in its scope."""
from __future__ import annotations

import numpy as np
import pytest

from devtools import zoo
from nnadapter_bridge.loader import load_model
from support.model_zoo_fixtures import ours_flat_op, ours_flat_var, paddle_load

EXPECTED_LAYOUT = {"pdmodel": "pdmodel+pdiparams", "combined": "dir+__params__", "per-var": "dir+per-var"}


@pytest.mark.slow
@pytest.mark.parametrize("layout", zoo.LAYOUTS)
@pytest.mark.parametrize("name", zoo.MODELS)
def test_loader_matches_paddle(zoo_model, name, layout):
    path = zoo_model(name, layout)
    graph = load_model(path)
    truth = paddle_load(path, layout)

    assert graph.layout == EXPECTED_LAYOUT[layout]
    assert graph.inputs == truth["feeds"] == ["x"]
    assert graph.outputs == truth["fetches"]
    assert len(graph.blocks) == len(truth["blocks"])
    for ours, theirs in zip(graph.blocks, truth["blocks"]):
        assert (ours.idx, ours.parent_idx) == (theirs["idx"], theirs["parent_idx"])
        assert len(ours.ops) == len(theirs["ops"])
        for op, want in zip(ours.ops, theirs["ops"]):
            assert ours_flat_op(op) == want, op.label()
        assert {n: ours_flat_var(v) for n, v in ours.vars.items()} == theirs["vars"]

    # Topological order: a DAG with every op, and (for these straight-line programs) the file order.
    assert [op.index for op in graph.ops()] == list(range(len(graph.blocks[0].ops)))
    assert graph.var("x").shape == (-1, 3, 224, 224)

    assert sorted(graph.params) == sorted(truth["params"])
    for pname, want in truth["params"].items():
        got = graph.param(pname)
        assert got.dtype == want.dtype and got.shape == want.shape, pname
        assert got.tobytes() == want.tobytes(), pname


@pytest.mark.slow
def test_layouts_of_one_model_agree(zoo_model):
    """The same build saved three ways loads to the same parameters (bytes) and op types."""
    graphs = [load_model(zoo_model("squeezenet1_0", layout)) for layout in zoo.LAYOUTS]
    first = graphs[0]
    for other in graphs[1:]:
        assert [op.type for op in other.ops()] == [op.type for op in first.ops()]
        assert sorted(other.params) == sorted(first.params)
        for pname, array in first.params.items():
            assert other.params[pname].tobytes() == array.tobytes(), pname


def test_params_are_zero_copy_views(zoo_model):
    graph = load_model(zoo_model("mobilenet_v1", "combined"))
    for array in graph.params.values():
        assert not array.flags.owndata and not array.flags.writeable


def test_versioned_graph_is_a_dag_with_in_place_batch_norm(zoo_model):
    """batch_norm writes its running mean back into `Mean`'s var: that write is a new var version."""
    import networkx as nx

    graph = load_model(zoo_model("mobilenet_v2", "pdmodel"))
    g = graph.graph
    assert nx.is_directed_acyclic_graph(g)
    bn = next(op for op in graph.ops() if op.type == "batch_norm")
    mean = bn.input("Mean")[0]
    assert bn.output("MeanOut") == [mean]
    assert g.has_edge(("var", mean), ("op", bn.index))
    assert g.has_edge(("op", bn.index), ("var", mean, 1))
    assert g.nodes[("var", mean, 1)]["version"] == 1
    assert graph.producer(mean) is None  # a parameter: its first value comes from the params file
    first = graph.ops()[1]
    assert graph.producer(first.output_names()[0]) is first
    assert graph.producer("x").type == "feed"
    assert [op.type for op in graph.consumers("x")] == [first.type]
    op_nodes = [n for n in g if n[0] == "op"]
    assert len(op_nodes) == len(graph.blocks[0].ops)
    # ops() is file order without building this graph: the same order a topological sort of it gives.
    from nnadapter_bridge.loader.graph import _node_sort_key

    order = [g.nodes[n]["op"] for n in nx.lexicographical_topological_sort(g, key=_node_sort_key) if n[0] == "op"]
    assert order == graph.ops()


@pytest.mark.slow
def test_paddle_reference_runs_on_the_zoo(zoo_model, paddle_reference):
    """The reference-output helper other tests rely on: shape and determinism across layouts."""
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
    a = paddle_reference(zoo_model("mobilenet_v1", "pdmodel"), {"x": x})
    b = paddle_reference(zoo_model("mobilenet_v1", "combined"), {"x": x})
    c = paddle_reference(zoo_model("mobilenet_v1", "per-var"), {"x": x})
    assert a[0].shape == (2, 1000)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[0], c[0])
