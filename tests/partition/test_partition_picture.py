"""The readable partition picture (issue 26 item 10): runs of ops collapsed into boxes per subgraph and device,
host ops labelled with their reason, a legend with the device colours, no weights, the same structure as data,
and a rendered size never silently over graphviz's 32767 px limit (checked with graphviz when it is installed)."""
from __future__ import annotations

import re
import shutil
import warnings

import pytest

from partition import MAX_PIXELS, PictureSizeWarning, Placement, build_picture, detect_subgraphs, render_picture
from partition.picture import DEVICE_COLORS, svg_size
from support.partition_programs import chain_ops, real_program

needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")


def long_chain(n_ops: int, host_every: int):
    """feed, `n_ops` ops in a chain (every `host_every`-th a 'host_op' no device takes, the others conv2d / relu
    with a weight on each conv2d), fetch."""
    specs, params = [("feed", ["feed"], ["v0"])], []
    for i in range(n_ops):
        if i % host_every == host_every - 1:
            specs.append(("host_op", [f"v{i}"], [f"v{i + 1}"]))
        elif i % 2:
            specs.append(("relu", [f"v{i}"], [f"v{i + 1}"]))
        else:
            params.append(f"w{i}")
            specs.append(("conv2d", {"Input": [f"v{i}"], "Filter": [f"w{i}"]}, {"Output": [f"v{i + 1}"]}))
    specs.append(("fetch", [f"v{n_ops}"], ["fetch"]))
    program = real_program(chain_ops(specs), params=params)
    return program, detect_subgraphs(program, lambda op: op.type in ("conv2d", "relu"))


def host_placements(program, result, reason="no converter for Paddle op 'host_op'"):
    return {op.index: Placement(None, None, reason) for op in result.host_ops if op.type == "host_op"}


def node_ids(dot: str) -> list:
    return [name for name in re.findall(r"^  (\w+) \[", dot, flags=re.M) if name not in ("graph", "node", "edge")]


def test_a_600_op_model_is_a_few_dozen_boxes_without_weights():
    program, result = long_chain(600, host_every=50)
    picture = build_picture(program, result, host_placements(program, result), ["builtin_device"])
    kinds = [b.kind for b in picture.boxes]
    assert kinds.count("host") == 12 and kinds.count("device") == 12  # ops #50, #100, ... #600 on the host
    assert kinds.count("input") == 1 and kinds.count("output") == 1
    assert sum(len(b.ops) for b in picture.boxes) == 600
    dot = picture.dot()
    assert len(node_ids(dot)) == 27  # 26 boxes + the legend
    assert "w0" not in dot and "v1" not in dot.split("->")[0]  # neither weights nor vars are nodes
    first = next(b for b in picture.boxes if b.kind == "device")
    assert "subgraph 0 on builtin_device\\n49 ops (#1-#49)\\nconv2d x25, relu x24" in dot
    assert first.as_dict()["op_types"] == {"conv2d": 25, "relu": 24}
    assert "host: 1 op (#50)\\nhost_op\\nwhy: no converter for Paddle op 'host_op'" in dot
    assert "legend" in dot and "on builtin_device" in dot and "on the host" in dot
    # Every box after the input feeds the next: one edge per consecutive pair, in program order.
    assert len(picture.edges) == 25


def test_several_devices_get_their_own_colours_and_boxes():
    program, result = long_chain(20, host_every=10)
    placements = host_placements(program, result)
    for op in result.ops:  # relu goes to the second device, conv2d to the first
        if op.type == "relu":
            placements[op.index] = Placement(result.subgraph_index_of(op), "dev_b")
        elif op.type == "conv2d":
            placements[op.index] = Placement(result.subgraph_index_of(op), "dev_a")
    picture = build_picture(program, result, placements, ["dev_a", "dev_b"])
    assert picture.colors == {"dev_a": DEVICE_COLORS[0], "dev_b": DEVICE_COLORS[1]}
    device_boxes = [b for b in picture.boxes if b.kind == "device"]
    assert {b.device for b in device_boxes} == {"dev_a", "dev_b"}
    assert all(len(b.ops) == 1 for b in device_boxes)  # the device changes at every op
    dot = picture.dot()
    assert f'fillcolor="{DEVICE_COLORS[1]}"' in dot and "on dev_a" in dot and "on dev_b" in dot
    data = picture.as_dict()
    assert data["legend"]["devices"] == {"dev_a": DEVICE_COLORS[0], "dev_b": DEVICE_COLORS[1]}
    host = [b for b in data["boxes"] if b["kind"] == "host"]
    assert host and all(b["reason"] == "no converter for Paddle op 'host_op'" for b in host)


def test_forced_host_ops_are_dashed_with_the_config_line():
    program, result = long_chain(6, host_every=3)
    placements = {op.index: Placement(None, None, "forced to the host by the partition config (c.txt:1: 'host_op')",
                                      forced=True) for op in result.host_ops if op.type == "host_op"}
    dot = build_picture(program, result, placements, ["builtin_device"]).dot()
    assert 'style="rounded,filled,dashed"' in dot
    assert "why: forced to the host by the partition config\\n(c.txt:1: 'host_op')" in dot


@needs_graphviz
def test_rendered_600_op_picture_stays_within_graphviz_limits(tmp_path):
    program, result = long_chain(600, host_every=50)
    picture = build_picture(program, result, host_placements(program, result), ["builtin_device"])
    path = tmp_path / "p.svg"
    with warnings.catch_warnings():
        warnings.simplefilter("error", PictureSizeWarning)
        width, height = render_picture(picture.dot(), path)
    assert max(svg_size(path.read_text())) <= MAX_PIXELS and max(width, height) <= MAX_PIXELS


@needs_graphviz
def test_a_drawing_over_the_limit_is_scaled_to_fit_and_says_so(tmp_path):
    # Host op every other op: 600 boxes in a chain, far taller than 32767 px at natural size.
    program, result = long_chain(600, host_every=2)
    picture = build_picture(program, result, host_placements(program, result), ["builtin_device"])
    path = tmp_path / "p.svg"
    with pytest.warns(PictureSizeWarning, match=r"over graphviz's 32767 px limit: written scaled by 0\.\d+"):
        render_picture(picture.dot(), path)
    assert max(svg_size(path.read_text())) <= MAX_PIXELS


@needs_graphviz
def test_mobilenet_v3_picture_is_small_and_has_a_legend(zoo_model, tmp_path, capsys):
    from nnadapter_bridge.cli import main

    svg = tmp_path / "mv3.svg"
    assert main(["partition", zoo_model("mobilenet_v3_small"), "--svg", str(svg)]) == 0
    text = svg.read_text()
    # Paddle Lite's DOT of this model draws 15969 x 25820 pt; the picture is one subgraph box and the legend.
    assert max(svg_size(text)) < 2000
    assert "legend" in text and "subgraph 0 on builtin_device" in text and "195 ops" in text
    assert f"wrote {svg}" in capsys.readouterr().out


def test_an_op_moved_to_the_host_at_run_time_leaves_its_subgraph_box():
    program, result = long_chain(5, host_every=10)  # no host_op: one subgraph of 5 ops
    relu = next(op for op in result.ops if op.type == "relu")
    moved = {relu.index: Placement(0, None, "declined once subgraph 0 was compiled for the actual input shapes")}
    picture = build_picture(program, result, moved, ["builtin_device"])
    kinds = [(b.kind, [op.index for op in b.ops]) for b in picture.boxes if b.kind in ("device", "host")]
    assert kinds == [("device", [1]), ("host", [2]), ("device", [3, 4, 5])]
    assert picture.boxes[2].reason.startswith("declined once subgraph 0")
