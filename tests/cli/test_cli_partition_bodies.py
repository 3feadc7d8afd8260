"""`nnadapter-bridge partition` on a model with control flow (issues 25 and 24): the ops of loop and branch bodies
are listed too (every block but 0, nested ones included), each with its block, where it runs (a body subgraph on a
device, or the host), whether a host kernel can run it and the control-flow op holding its block, in the text and
under "body_ops" in --json; the bodies' subgraphs are in the subgraph table with their block; the picture's box
holding the loop counts its body; `--strict` accepts the control flow (no NNAdapter device runs it) with one
warning, and still fails on an op a device declines, in block 0 or in a body.

The model: relu, then a while loop whose body takes kthvalue (a host kernel, no converter; or max, which converts)
and holds a branch (conditional_block) with tanh in it; saved the Paddle 3 way."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nnadapter_bridge.cli import main
from support.converter_harness import pir_program
from support.placement_devices import PICKY, DecliningDevice

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], np.float32)


def _nested(tmp_path_factory, with_kthvalue: bool) -> str:
    def build(x):
        import paddle

        def body(i, acc):
            if with_kthvalue:
                values, _ = paddle.kthvalue(acc, 2, axis=-1, keepdim=True)
            else:
                values = acc.max(axis=-1, keepdim=True)
            acc = paddle.static.nn.cond(values.sum() > 0, lambda: paddle.tanh(acc + values), lambda: acc * 0.5)
            return i + 1, acc
        start = paddle.nn.functional.relu(x)
        _, acc = paddle.static.nn.while_loop(lambda i, acc: i < 3, body, [paddle.full([1], 0, "int64"), start])
        return [acc]
    return pir_program(tmp_path_factory.mktemp("nested_cf"), build, {"x": X}, run_paddle=False).model_path


@pytest.fixture(scope="module")
def nested_model(tmp_path_factory) -> str:
    return _nested(tmp_path_factory, True)


@pytest.fixture(scope="module")
def convertible_model(tmp_path_factory) -> str:
    return _nested(tmp_path_factory, False)


def _table(lines: list) -> list:
    """The rows of a text table (header, dashes, rows) as lists of cells, cut where the dash row's columns are."""
    spans, start = [], 0
    dashes = lines[1]
    while start < len(dashes):
        end = dashes.find("  ", start)
        end = len(dashes) if end < 0 else end
        spans.append((start, end))
        start = end + 2
    return [[line[a:b].strip() for a, b in spans[:-1]] + [line[spans[-1][0]:].strip()] for line in lines[2:]]


def _graph(path):
    from nnadapter_bridge.loader import load_model

    graph = load_model(path, None)
    (loop,) = [op for op in graph.ops() if op.type == "while"]
    body = graph.blocks[loop.attr("sub_block").idx]
    branches = [op for op in body.ops if op.type == "conditional_block"]
    return graph, loop, body, branches


def test_partition_lists_body_ops_with_block_and_holder(nested_model, capsys, monkeypatch):
    from nnadapter_bridge.host.kernels import HOST_KERNELS

    monkeypatch.delitem(HOST_KERNELS, "kthvalue")  # nothing runs it now: the table says so (partition never refuses)
    graph, loop, body, branches = _graph(nested_model)
    assert branches, "the loop body holds no branch (paddle changed how cond is saved?)"
    inner = [op for branch in branches for op in graph.blocks[branch.attr("sub_block").idx].ops]
    assert main(["partition", nested_model, "--device", "builtin_device"]) == 0
    out = capsys.readouterr().out
    total = len(body.ops) + len(inner)
    # On the host in the bodies: kthvalue (no converter) and the two branches (control flow).
    head = out.splitlines()[3]
    assert f"; {total} more in loop and branch bodies, {total - 3} of them on devices in " in head, out
    table = out[out.index("loop and branch bodies:"):].splitlines()[1:]
    assert table[0].split() == ["block", "op", "body", "op", "type", "runs", "on", "host", "kernel", "in", "the",
                                "body", "of"]
    rows = _table([line for line in table if line.strip() and not line.startswith("host share")])
    assert len(rows) == total
    kth = next(r for r in rows if r[2] == "kthvalue")
    assert kth == [str(body.idx), str(next(op.index for op in body.ops if op.type == "kthvalue")), "kthvalue", "host",
                   "NO", loop.label()]
    tanh = next(r for r in rows if r[2] == "tanh")
    holder = next(b for b in branches if graph.blocks[b.attr("sub_block").idx].ops[0].block_idx == int(tanh[0]))
    assert tanh[3].startswith("subgraph ") and tanh[3].endswith(" on builtin_device")
    assert tanh[4] == "yes" and tanh[5] == holder.label()  # a nested body: held by the branch, not the loop
    # The subgraph table names each body subgraph with its block.
    subgraphs = _table(out[out.index("subgraph  block"):].split("\n\n")[0].splitlines())
    number = tanh[3].split()[1]
    assert [r[1] for r in subgraphs if r[0] == number] == [tanh[0]]


def test_partition_json_has_the_body_ops(nested_model, capsys):
    graph, loop, body, branches = _graph(nested_model)
    assert main(["partition", nested_model, "--device", "builtin_device", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ops = data["body_ops"]
    assert data["num_body_ops"] == len(ops) > len(body.ops)
    in_body = [(o["block"], o["index"]) for o in ops if o["block"] == body.idx]
    assert in_body == [(body.idx, op.index) for op in body.ops]
    assert all(o["under"] == loop.label() for o in ops)
    kth = next(o for o in ops if o["type"] == "kthvalue")
    assert kth["in"] == loop.label() and kth["in_type"] == "while" and kth["host_kernel"] is True
    assert kth["device"] is None and kth["subgraph"] is None and kth["at_run"] is False
    assert kth["host_reason"] == f"in the body of {loop.label()}: no converter for Paddle op 'kthvalue'"
    nested = [o for o in ops if o["block"] != body.idx]
    assert nested and {o["in_type"] for o in nested} == {"conditional_block"}
    assert all(o["device"] == "builtin_device" and o["host_reason"] is None for o in nested), nested
    assert data["num_body_subgraphs"] == len({o["subgraph"] for o in ops if o["subgraph"] is not None})
    assert [s["block"] for s in data["subgraphs"]][:data["num_subgraphs"]] == [0] * data["num_subgraphs"]
    (placed,) = [p for p in data["placements"] if p["type"] == "while"]
    assert placed["control_flow"] is True and placed["declined"] == {}
    # The picture's host box holding the loop names its body too (the nested branch's ops counted in it).
    (box,) = [b for b in data["picture"]["boxes"] if b["kind"] == "host" and loop.index in b["op_indices"]]
    (drawn,) = box["bodies"]
    assert drawn["op"] == loop.index and drawn["blocks"] == [body.idx] and drawn["num_ops"] == len(ops), drawn
    assert drawn["op_types"]["kthvalue"] == 1
    assert drawn["on_devices"] == data["body_ops_on_devices"] == sum(1 for o in ops if o["device"] is not None)


def test_partition_strict_accepts_control_flow_with_a_warning(convertible_model, capsys):
    assert main(["partition", convertible_model, "--device", "builtin_device", "--strict", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (warning,) = data["warnings"]
    assert warning["category"] == "ControlFlowOnHostWarning", warning
    assert warning["message"].startswith("strict mode: while#") and "strict mode accepts them" in warning["message"]
    assert "(with 2 loops or branches nested in the bodies)" in warning["message"], warning["message"]


def test_partition_strict_still_fails_on_a_declined_op(convertible_model, capsys, register_device):
    register_device(DecliningDevice(PICKY))  # declines RELU
    assert main(["partition", convertible_model, "--device", PICKY, "--strict"]) == 2
    err = capsys.readouterr().err
    assert "strict mode: 1 of" in err and "relu (x1, relu#" in err, err
    assert "also run on the host, as no NNAdapter device runs control flow" in err, err


def test_partition_strict_fails_on_a_body_op_no_device_takes(nested_model, capsys):
    assert main(["partition", nested_model, "--device", "builtin_device", "--strict"]) == 2
    err = capsys.readouterr().err
    assert "strict mode: 1 of" in err and "kthvalue (x1, kthvalue#" in err and ", block 1)): in the body of" in err
