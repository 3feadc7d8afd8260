"""Subgraph detector: whitebox cases with hand-picked support sets (NNAPI style), then properties over
random DAGs (acyclic quotient, convex subgraphs, coverage, a valid schedule, determinism)."""
from __future__ import annotations

import random
import time

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partition.detector import Subgraph, detect_subgraphs
from support.partition_programs import FakeProgram, chain_ops, real_program


def supported_types(*types):
    return lambda o: o.type in types


def everything(o):
    return True


def summary(result):
    """Subgraphs as (index, op indices, inputs, outputs, weights, local, unused), host op indices, steps."""
    subgraphs = [(s.index, [o.index for o in s.ops], s.input_names, s.output_names, s.weight_names,
                  s.local_names, s.unused_names) for s in result.subgraphs]
    steps = [f"sg{s.index}" if isinstance(s, Subgraph) else s.index for s in result.steps()]
    return subgraphs, [o.index for o in result.host_ops], steps


# -- whitebox ---------------------------------------------------------------------------------------------

def test_supported_chain_is_one_subgraph():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("conv2d", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["c"]}),
        ("relu", ["c"], ["r"]),
        ("softmax", ["r"], ["s"]),
        ("fetch", ["s"], ["fetch"]),
    ]), params=["w"])
    result = detect_subgraphs(program, supported_types("conv2d", "relu", "softmax"))
    assert summary(result) == (
        [(0, [1, 2, 3], ["x"], ["s"], ["w"], ["c", "r"], [])],
        [0, 4],
        [0, "sg0", 4],
    )
    assert result.subgraph_index_of(program.ops()[2]) == 0
    assert result.subgraph_index_of(program.ops()[0]) is None


def test_unsupported_op_splits_a_chain():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("conv2d", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["c"]}),
        ("relu", ["c"], ["r"]),
        ("softmax", ["r"], ["s"]),
        ("fetch", ["s"], ["fetch"]),
    ]), params=["w"])
    result = detect_subgraphs(program, supported_types("conv2d", "softmax"))
    assert summary(result) == (
        [(0, [1], ["x"], ["c"], ["w"], [], []), (1, [3], ["r"], ["s"], [], [], [])],
        [0, 2, 4],
        [0, "sg0", 2, "sg1", 4],
    )


DIAMOND = [
    ("feed", ["feed"], ["x"]),
    ("a_op", ["x"], ["a"]),
    ("b_op", ["a"], ["b"]),
    ("c_op", ["a"], ["c"]),
    ("d_op", ["b", "c"], ["d"]),
    ("fetch", ["d"], ["fetch"]),
]


def test_diamond_with_unsupported_middle_splits_to_avoid_a_cycle():
    # a_op and d_op together would need b_op (host) both after and before the subgraph.
    result = detect_subgraphs(real_program(chain_ops(DIAMOND)), supported_types("a_op", "c_op", "d_op"))
    assert summary(result) == (
        [(0, [1, 3], ["x"], ["a", "c"], [], [], []), (1, [4], ["b", "c"], ["d"], [], [], [])],
        [0, 2, 5],
        [0, "sg0", 2, "sg1", 5],
    )


def test_diamond_fully_supported_is_one_subgraph():
    result = detect_subgraphs(real_program(chain_ops(DIAMOND)), supported_types("a_op", "b_op", "c_op", "d_op"))
    assert summary(result) == (
        [(0, [1, 2, 3, 4], ["x"], ["d"], [], ["a", "b", "c"], [])],
        [0, 5],
        [0, "sg0", 5],
    )


def test_branch_feeding_back_through_the_host():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("a_op", ["x"], ["a"]),
        ("host_op", ["a"], ["h"]),
        ("c_op", ["a", "h"], ["c"]),
        ("e_op", ["c"], ["e"]),
        ("fetch", ["e"], ["fetch"]),
    ]))
    result = detect_subgraphs(program, supported_types("a_op", "c_op", "e_op"))
    assert summary(result) == (
        [(0, [1], ["x"], ["a"], [], [], []), (1, [3, 4], ["a", "h"], ["e"], [], ["c"], [])],
        [0, 2, 5],
        [0, "sg0", 2, "sg1", 5],
    )


def test_multiple_outputs_are_classified():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("split", ["x"], {"Out": ["p", "q", "u"]}),
        ("reshape2", {"X": ["p"], "Shape": ["shape_w"]}, {"Out": ["r"], "XShape": ["r_xshape"]}),
        ("host_op", ["q"], ["h"]),
        ("concat", ["r", "h"], ["y"]),
        ("fetch", ["y"], ["fetch"]),
        ("fetch", ["r"], ["fetch"]),
    ]), params=["shape_w"])
    result = detect_subgraphs(program, supported_types("split", "reshape2", "concat"))
    subgraphs, host, steps = summary(result)
    assert subgraphs == [
        # r is read inside (concat) but is also fetched: an output. u and r_xshape have no reader.
        (0, [1, 2], ["x"], ["q", "r"], ["shape_w"], ["p"], ["r_xshape", "u"]),
        (1, [4], ["h", "r"], ["y"], [], [], []),
    ]
    assert host == [0, 3, 5, 6]
    assert steps == [0, "sg0", 3, "sg1", 5, 6]


def test_program_output_without_fetch_op_is_an_output():
    ops = chain_ops([("feed", ["feed"], ["x"]), ("relu", ["x"], ["r"]), ("exp", ["r"], ["e"])])
    program = real_program(ops)
    program.outputs = ["r", "e"]
    result = detect_subgraphs(program, supported_types("relu", "exp"))
    assert summary(result)[0] == [(0, [1, 2], ["x"], ["e", "r"], [], [], [])]


def test_min_subgraph_size_drops_small_clusters_and_renumbers():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("relu", ["x"], ["a"]),
        ("host_op", ["a"], ["b"]),
        ("relu", ["b"], ["c"]),
        ("relu", ["c"], ["d"]),
        ("fetch", ["d"], ["fetch"]),
    ]))
    assert summary(detect_subgraphs(program, supported_types("relu"), min_subgraph_size=2)) == (
        [(0, [3, 4], ["b"], ["d"], [], ["c"], [])],
        [0, 1, 2, 5],
        [0, 1, 2, "sg0", 5],
    )
    with pytest.raises(ValueError, match="min_subgraph_size"):
        detect_subgraphs(program, everything, min_subgraph_size=0)


def test_feed_and_fetch_never_join_a_subgraph():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("relu", ["x"], ["r"]),
        ("fetch", ["r"], ["fetch"]),
    ]))
    assert summary(detect_subgraphs(program, everything)) == (
        [(0, [1], ["x"], ["r"], [], [], [])],
        [0, 2],
        [0, "sg0", 2],
    )


def test_config_forced_ops_stay_on_the_host():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("relu", ["x"], ["a"]),
        ("softmax", ["a"], ["b"]),
        ("relu", ["b"], ["c"]),
        ("fetch", ["c"], ["fetch"]),
    ]))
    result = detect_subgraphs(program, everything, forced_op_keys={("op", 2)})
    assert summary(result) == (
        [(0, [1], ["x"], ["a"], [], [], []), (1, [3], ["b"], ["c"], [], [], [])],
        [0, 2, 4],
        [0, "sg0", 2, "sg1", 4],
    )
    assert result.forced_op_keys == frozenset({("op", 2)})


def test_in_place_batch_norm_statistics_are_weights_and_unused_outputs():
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("batch_norm", {"X": ["x"], "Scale": ["s"], "Bias": ["b"], "Mean": ["m"], "Variance": ["v"]},
         {"Y": ["y"], "MeanOut": ["m"], "VarianceOut": ["v"], "SavedMean": ["sm"], "SavedVariance": ["sv"]}),
        ("fetch", ["y"], ["fetch"]),
    ]), params=["s", "b", "m", "v"])
    assert summary(detect_subgraphs(program, everything))[0] == [
        (0, [1], ["x"], ["y"], ["b", "m", "s", "v"], [], ["m", "sm", "sv", "v"]),
    ]


def test_var_overwritten_in_place_is_not_read_after_the_overwrite():
    # q_op (host) reads the first value of t; r_op overwrites t in place. Putting r_op in p_op's
    # subgraph would run the overwrite before q_op reads t, so r_op must start a later subgraph.
    program = real_program(chain_ops([
        ("feed", ["feed"], ["x"]),
        ("p_op", ["x"], ["t"]),
        ("q_op", ["t"], ["u"]),
        ("r_op", ["t"], ["t"]),
        ("s_op", ["t", "u"], ["v"]),
        ("fetch", ["v"], ["fetch"]),
    ]))
    result = detect_subgraphs(program, supported_types("p_op", "r_op", "s_op"))
    assert summary(result) == (
        [(0, [1], ["x"], ["t"], [], [], []), (1, [3, 4], ["t", "u"], ["v"], [], ["t"], [])],
        [0, 2, 5],
        [0, "sg0", 2, "sg1", 5],
    )


def test_deterministic_for_the_same_input():
    ops = chain_ops(DIAMOND)
    support = supported_types("a_op", "c_op", "d_op")
    first = summary(detect_subgraphs(real_program(ops), support))
    assert summary(detect_subgraphs(real_program(ops), support)) == first


def test_long_model_is_partitioned_quickly():
    # A ResNet-like stack of residual blocks with a host op every 50 blocks; the reverse DFS must not blow up.
    specs = [("feed", ["feed"], ["x0"])]
    for i in range(600):
        kind = "host_op" if i % 50 == 49 else "conv2d"
        specs += [(kind, [f"x{i}"], [f"c{i}"]), ("add", [f"x{i}", f"c{i}"], [f"x{i + 1}"])]
    specs.append(("fetch", ["x600"], ["fetch"]))
    start = time.perf_counter()
    result = detect_subgraphs(real_program(chain_ops(specs)), supported_types("conv2d", "add"))
    assert time.perf_counter() - start < 20
    # Each host conv2d cuts: its add reads the host value, so it opens the next subgraph.
    assert [len(s.ops) for s in result.subgraphs] == [98] + [99] * 11 + [1]


# -- properties over random DAGs --------------------------------------------------------------------------

@st.composite
def random_programs(draw):
    """An SSA program: feeds, ops reading earlier vars (and sometimes a weight), fetches of some vars."""
    specs = []
    available = []
    for i in range(draw(st.integers(1, 2))):
        specs.append(("feed", ["feed"], [f"in{i}"], {"col": i}))
        available.append(f"in{i}")
    weights = []
    flags = []
    for i in range(draw(st.integers(1, 14))):
        reads = draw(st.lists(st.sampled_from(available), min_size=1, max_size=3, unique=True))
        if draw(st.booleans()):
            weights.append(f"w{i}")
            reads = reads + [f"w{i}"]
        writes = [f"v{i}_{k}" for k in range(draw(st.integers(1, 2)))]
        specs.append((f"t{draw(st.integers(0, 3))}", reads, writes))
        available.extend(writes)
        flags.append((draw(st.booleans()), draw(st.integers(0, 9)) == 0))  # (supported, forced)
    fetched = draw(st.lists(st.sampled_from(available), min_size=1, max_size=3, unique=True))
    specs.extend(("fetch", [name], ["fetch"], {"col": k}) for k, name in enumerate(fetched))
    ops = chain_ops(specs)
    first = len(specs) - len(flags) - len(fetched)
    supported = {first + k for k, (ok, _) in enumerate(flags) if ok}
    forced = {("op", first + k) for k, (_, f) in enumerate(flags) if f}
    return ops, weights, supported, forced


def op_dependency_graph(ops) -> nx.DiGraph:
    """op -> op when the second reads what the first wrote (the programs here are SSA)."""
    writer = {name: o.index for o in ops for name in o.output_names()}
    g = nx.DiGraph()
    g.add_nodes_from(o.index for o in ops)
    for o in ops:
        for name in o.input_names():
            if name in writer:
                g.add_edge(writer[name], o.index)
    return g


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_programs(), st.randoms(use_true_random=False))
def test_partition_properties(case, rnd):
    ops, weights, supported, forced = case
    support = lambda o: o.index in supported  # noqa: E731
    program = real_program(ops, params=weights)
    result = detect_subgraphs(program, support, forced)
    deps = op_dependency_graph(ops)
    unit = {}
    for s in result.subgraphs:
        for o in s.ops:
            assert o.index not in unit, "an op is in two subgraphs"
            unit[o.index] = ("sg", s.index)
    for o in result.host_ops:
        assert o.index not in unit
        unit[o.index] = ("op", o.index)
    assert sorted(unit) == [o.index for o in ops]

    # With min size 1 exactly the supported, unforced, non feed/fetch ops are in subgraphs.
    eligible = {o.index for o in ops
                if o.index in supported and ("op", o.index) not in forced and o.type not in ("feed", "fetch")}
    assert {i for i, u in unit.items() if u[0] == "sg"} == eligible

    # The quotient graph is acyclic, and every path between two members stays inside.
    quotient = nx.DiGraph()
    quotient.add_nodes_from(set(unit.values()))
    quotient.add_edges_from((unit[a], unit[b]) for a, b in deps.edges if unit[a] != unit[b])
    assert nx.is_directed_acyclic_graph(quotient)
    for s in result.subgraphs:
        members = {o.index for o in s.ops}
        below = set().union(*(nx.descendants(deps, m) for m in members)) - members
        above = set().union(*(nx.ancestors(deps, m) for m in members)) - members
        assert not (below & above), f"a path leaves and re-enters subgraph {s.index}"

    # Numbering by first op; ops in program order; boundary names sorted and classified.
    firsts = [s.ops[0].index for s in result.subgraphs]
    assert firsts == sorted(firsts)
    assert [s.index for s in result.subgraphs] == list(range(len(result.subgraphs)))
    fetched = {n for o in ops if o.type == "fetch" for n in o.input_names()}
    for s in result.subgraphs:
        assert [o.index for o in s.ops] == sorted(o.index for o in s.ops)
        members = {o.index for o in s.ops}
        written = {n for o in s.ops for n in o.output_names()}
        read = {n for o in s.ops for n in o.input_names()}
        outside_reads = {n for o in ops if o.index not in members for n in o.input_names()}
        assert s.weight_names == sorted(read & set(weights))
        assert s.input_names == sorted(read - written - set(weights))
        assert s.output_names == sorted(written & (outside_reads | fetched))
        assert s.local_names == sorted((written & read) - outside_reads - fetched)
        assert s.unused_names == sorted(written - read - outside_reads - fetched)

    # steps() lists every unit once, each after everything it depends on.
    steps = result.steps()
    position = {}
    for k, step in enumerate(steps):
        key = ("sg", step.index) if isinstance(step, Subgraph) else ("op", step.index)
        assert key not in position
        position[key] = k
    assert set(position) == set(unit.values())
    for a, b in quotient.edges:
        assert position[a] < position[b]

    # Deterministic: again, through the interface-only fake, and with graph nodes inserted shuffled.
    expected = summary(result)
    assert summary(detect_subgraphs(program, support, forced)) == expected
    assert summary(detect_subgraphs(FakeProgram(ops, weights), support, forced)) == expected
    shuffled = list(range(len(ops)))
    rnd.shuffle(shuffled)
    assert summary(detect_subgraphs(FakeProgram(ops, weights, shuffled), support, forced)) == expected


def test_shuffled_insertion_order_example():
    # A fixed instance of the property above, so a regression shows without hypothesis' shrinking.
    ops = chain_ops(DIAMOND)
    support = supported_types("a_op", "c_op", "d_op")
    order = list(range(len(ops)))
    random.Random(7).shuffle(order)
    assert order != sorted(order)
    assert summary(detect_subgraphs(FakeProgram(ops, (), order), support)) == \
        summary(detect_subgraphs(real_program(ops), support))
