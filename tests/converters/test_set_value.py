"""Slice assignment (`x[...] = v`: Paddle's set_value, PIR's pd_op.set_value_ / set_value_with_tensor_) in every
form Paddle's front end writes, against Paddle Inference on each device, in PIR programs (`paddle.jit.save` of a
layer, as users export) and in legacy ProgramDescs (`save_inference_model` with PIR off).

Forms: a constant on a decreased axis (`x[:, 1] = 0.5`), a tensor through an ellipsis, an advanced index
(`x[i] = t`: index_put, then set_value over the whole tensor), a start computed at run time with a step, negative
indices and steps (`[:, -1, 1:4:2]`, `[1:, ::-1]`), none axes (`x[None, 0, :, -2]`), broadcasting values, int32 /
int64 / bool tensors, a float constant into an int tensor, an empty region, Swin's attention-mask pattern on a
tensor whose dims are known only at run time (`zeros([1, H, W, 1])[:, 0:-2, -2:, :] = 1`), and (PIR only, through
`_C_ops`) starts / ends given as whole run-time tensors rather than stacks of scalars.

The programs are built once per paddle version in a subprocess (PIR on for jit.save, off for the legacy
exporter) and cached under the fixture root (tests/support/fixture_cache.build_once).
"""
from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.converter_harness import paddle_inference_run
from support.fixture_cache import build_once
from support.model_zoo_fixtures import fixture_root
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]
BUILD_ID = "set-value-forms-v3"

# The body both exporters run: `x` [2, 3, 4] f32, `t` [2, 3, 2] f32, `i` [1] i64, `xi` [2, 3] i32, `xl` [2, 4] i64,
# `xd` [-1, 3, -1] f32; each statement block is one output. (PIR's jit.save needs every feed used.)
FORMS = """
y = x * 1.0
y[:, 1] = 0.5
y[..., 0:2] = t
outs.append(y)
z = x * 2.0
z[i] = t[0, :, 0:1]  # PIR only: paddle 3.3.1's legacy static setitem fails on a tensor index
outs.append(z)
w = x * 3.0
w[:, i:i + 2, ::2] = 7
outs.append(w)
v = x * 4.0
v[:, -1, 1:4:2] = t[:, 0, :]
outs.append(v)
u = x * 5.0
u[None, 0, :, -2] = 1.5
outs.append(u)
k = xi * 2
k[1:, ::-1] = 3
outs.append(k)
b = x * 6.0
b[:, :, 1] = t[:, 0:1, 0]
outs.append(b)
l = xl + 1
l[0, 1:3] = xl[1, 2:4]
l[:, -1] = 9
outs.append(l)
f = xi + 0
f[:, 0] = 2.7
outs.append(f)
e = x * 7.0
e[:, 3:3] = 9.0
e[1, ::-2, 0] = -1.0
outs.append(e)
m = paddle.zeros([1, paddle.shape(xd)[2], paddle.shape(xd)[2], 1])
m[:, 0:-2, -2:, :] = 1.0
m[:, -2:, 0:-2, :] = 2.0
outs.append(m)
d = xd * 1.0
d[:, :, -1] = 0.0
d[:, 1:, 0:2] = xd[:, 0:2, 0:2] * 3.0
outs.append(d)
bm = x > 0
bm[:, 0] = True
outs.append(bm.astype("int32"))
g = x * 8.0  # PIR only (each line of a PIR-only statement is marked: the legacy build drops the marked lines)
g = paddle._C_ops.set_value_with_tensor(g, t[:, 0:2, 0:1], paddle.concat([i, i - 1]),  # PIR only
paddle.concat([i + 2, i + 1]), paddle.full([2], 1, "int64"), [1, 2], [], [])  # PIR only: run-time bound tensors
outs.append(g)  # PIR only
"""

SPECS = [("x", [2, 3, 4], "float32"), ("t", [2, 3, 2], "float32"), ("i", [1], "int64"), ("xi", [2, 3], "int32"),
         ("xl", [2, 4], "int64"), ("xd", [-1, 3, -1], "float32")]

PIR_BUILD = f'''
import sys, paddle
class Forms(paddle.nn.Layer):
    def forward(self, x, t, i, xi, xl, xd):
        outs = []
{"".join("        " + line + chr(10) for line in FORMS.strip().splitlines())}
        return outs
specs = [paddle.static.InputSpec(shape, dtype, name) for name, shape, dtype in {SPECS!r}]
paddle.jit.save(paddle.jit.to_static(Forms(), input_spec=specs, full_graph=True), sys.argv[1])
'''

# Legacy static mode refuses `x[...] = v`: the same statements as `x = paddle.static.setitem(x, index, v)`.
_LEGACY_FORMS = re.sub(r"^(\w+)\[(.*)\] = (.*)$", r"\1 = paddle.static.setitem(\1, INDEX[\2], \3)",
                       re.sub(r"^.*# PIR only.*\n", "", FORMS.strip() + "\n", flags=re.M), flags=re.M)

LEGACY_BUILD = f'''
import sys, paddle
paddle.enable_static()
class Index:
    def __getitem__(self, index):
        return index
INDEX = Index()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    feeds = [paddle.static.data(name, shape, dtype) for name, shape, dtype in {SPECS!r}]
    x, t, i, xi, xl, xd = feeds
    outs = []
{"".join("    " + line + chr(10) for line in _LEGACY_FORMS.splitlines())}
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
paddle.static.save_inference_model(sys.argv[1], feeds, outs, exe, program=main)
'''


def _build(script: str, pir: bool):
    def build(staging: str) -> str:
        env = dict(os.environ, FLAGS_enable_pir_api="1" if pir else "0", GLOG_minloglevel="3")
        source = os.path.join(staging, "build_forms.py")  # to_static reads the layer's source from a file
        with open(source, "w", encoding="utf-8") as f:
            f.write(script)
        proc = subprocess.run([sys.executable, source, os.path.join(staging, "forms")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return BUILD_ID + "\n"
    return build


def _older_build(entry: str) -> bool:
    """A build of an earlier BUILD_ID (support.fixture_cache removes it once this one is built)."""
    return entry.startswith("set-value-forms-") and not entry.startswith(f"{BUILD_ID}-")


@pytest.fixture(scope="module")
def programs() -> dict:
    pytest.importorskip("paddle")
    root = fixture_root()
    pir_dir = build_once(root, f"{BUILD_ID}-pir", _build(PIR_BUILD, True), supersedes=_older_build)
    legacy_dir = build_once(root, f"{BUILD_ID}-legacy", _build(LEGACY_BUILD, False), supersedes=_older_build)
    return {"pir": os.path.join(pir_dir, "forms.json"), "legacy": os.path.join(legacy_dir, "forms.pdmodel")}


def _feeds(xd_shape=(2, 3, 5)) -> dict:
    rng = np.random.default_rng(5)
    return {"x": rng.standard_normal((2, 3, 4)).astype(np.float32),
            "t": rng.standard_normal((2, 3, 2)).astype(np.float32),
            "i": np.array([1], np.int64),
            "xi": rng.integers(-9, 10, (2, 3)).astype(np.int32),
            "xl": rng.integers(-9, 10, (2, 4)).astype(np.int64),
            "xd": rng.standard_normal(xd_shape).astype(np.float32)}


def _params(model: str):
    params = model[: model.rindex(".")] + ".pdiparams"
    return params if os.path.exists(params) else None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["pir", "legacy"])
def test_slice_assignment_matches_paddle_inference(programs, form, device):
    model = programs[form]
    config = nb.Config()
    config.set_model_file(model)
    if _params(model):
        config.set_param_file(_params(model))
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    set_values = [p for p in predictor.placements(per_device=False) if p.op.type == "set_value"]
    assert len(set_values) >= 14, [p.op.type for p in predictor.placements(per_device=False)]
    on_host = [f"{p.op.label()}: {p.reason}" for p in set_values if p.device is None]
    assert not on_host, "set_value ops left on the host:\n" + "\n".join(on_host)
    # the same predictor follows the run-time dims of `xd` (Swin's mask size, a dynamic decreased axis)
    for xd_shape in ((2, 3, 5), (1, 3, 3)):
        feeds = _feeds(xd_shape)
        want = paddle_inference_run(model, _params(model), feeds)
        for name in predictor.get_input_names():
            predictor.get_input_by_name(name).from_numpy(feeds[name])
        predictor.run()
        assert len(predictor.get_output_names()) == len(want)
        for k, expected in enumerate(want):
            got = predictor.get_output(k).numpy()
            assert got.dtype == expected.dtype, f"output {k}: {got.dtype} vs Paddle's {expected.dtype}"
            assert_model_close(got, expected, what=f"{form} on {device}, xd {xd_shape}, output {k}")


def test_the_programs_hold_the_forms_under_test(programs):
    """The PIR export has both in-place PIR forms, constant and run-time bounds; the legacy one set_value ops
    with and without a ValueTensor and a run-time StartsTensorList."""
    import json

    from nnadapter_bridge.loader import load_model

    with open(programs["pir"], encoding="utf-8") as f:
        names = json.dumps(json.load(f))
    assert '"1.set_value_"' in names and '"1.set_value_with_tensor_"' in names and '"1.index_put"' in names
    for form in ("pir", "legacy"):
        graph = load_model(programs[form], _params(programs[form]))
        ops = [op for op in graph.ops() if op.type == "set_value"]
        assert any(op.input("ValueTensor") for op in ops) and any(not op.input("ValueTensor") for op in ops)
        assert any(op.input("StartsTensorList") for op in ops), form
        assert any(op.attr("none_axes") for op in ops) and any(op.attr("decrease_axes") for op in ops)


_EDGES = list(range(-7, 8)) + [2**31 - 1, -2**31, 2**63 - 1, -2**63]


def test_set_value_bounds_follow_paddles_kernel():
    """set_value_bounds (shared by the converter's constant path and the host kernel) against Paddle's own kernel
    (eager `_C_ops.set_value`), for every start / end in [-7, 7] and the int32 / int64 extremes, steps +-1..3."""
    paddle = pytest.importorskip("paddle")
    from paddle import _C_ops

    from converters.tensor_index import set_value_bounds

    mismatches = []
    for dim, step in itertools.product((1, 5), (-3, -2, -1, 1, 2, 3)):
        for start, end in itertools.product(_EDGES, _EDGES):
            out = _C_ops.set_value(paddle.zeros([dim], "float32"), [start], [end], [step], [0], [], [], [1], [1.0])
            want = np.flatnonzero(out.numpy()).tolist()
            first, count = set_value_bounds(dim, start, end, step)
            got = sorted(first + k * step for k in range(count))
            if got != want:
                mismatches.append(f"dim {dim}, {start}:{end}:{step}: Paddle sets {want}, we {got}")
    assert not mismatches, "\n".join(mismatches[:20])


SWEEP_BUILD = '''
import sys, paddle
class Sweep(paddle.nn.Layer):
    def forward(self, x, a, b):
        outs = []
        for step in (1, 2, -1, -2):
            y = x * 1.0
            y[:, a:b:step] = -5.0
            outs.append(y)
        z = x * 1.0
        z[a:b, 1] = x[0, 0:1] * 10.0   # a run-time region on axis 0 with a broadcast tensor value
        outs.append(z)
        return outs
specs = [paddle.static.InputSpec([3, 6], "float32", "x"), paddle.static.InputSpec([1], "int64", "a"),
         paddle.static.InputSpec([1], "int64", "b")]
paddle.jit.save(paddle.jit.to_static(Sweep(), input_spec=specs, full_graph=True), sys.argv[1])
'''


@pytest.fixture(scope="module")
def sweep_program() -> str:
    pytest.importorskip("paddle")
    return os.path.join(build_once(fixture_root(), f"{BUILD_ID}-sweep", _build(SWEEP_BUILD, True),
                                   supersedes=_older_build), "forms.json")


@pytest.mark.parametrize("device", DEVICES)
def test_run_time_bounds_follow_paddle(sweep_program, device):
    """Bounds known only at run time take the converter's computed path (RANGE / FLOOR_DIV / WHERE): one predictor,
    many (start, end) pairs, each step sign, against Paddle Inference."""
    config = nb.Config()
    config.set_model_file(sweep_program)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    on_host = [p.op.label() for p in predictor.placements(per_device=False)
               if p.op.type == "set_value" and p.device is None]
    assert not on_host, on_host
    x = np.arange(18, dtype=np.float32).reshape(3, 6)
    failures = []
    for a, b in itertools.product((-8, -6, -2, 0, 1, 3, 5, 7), (-9, -3, -1, 0, 2, 6, 2**31 - 1)):
        feeds = {"x": x, "a": np.array([a], np.int64), "b": np.array([b], np.int64)}
        want = paddle_inference_run(sweep_program, None, feeds)
        for name, value in feeds.items():
            predictor.get_input_by_name(name).from_numpy(value)
        predictor.run()
        for k, expected in enumerate(want):
            got = predictor.get_output(k).numpy()
            if not np.array_equal(got, expected):
                failures.append(f"a={a}, b={b}, output {k}:\n{got}\nPaddle:\n{expected}")
    assert not failures, "\n".join(failures[:5])


@pytest.fixture(scope="module")
def index_put_program(tmp_path_factory):
    from support.converter_harness import pir_program

    rng = np.random.default_rng(9)
    feeds = {"x": rng.standard_normal((5, 4, 3)).astype(np.float32),
             "rows": np.array([4, -1, 0, 2, 0], np.int64),     # -1 and 4 name the same row: the last write wins
             "cols": np.array([[1], [3]], np.int32),             # broadcasts against `rows2`
             "rows2": np.array([0, 2, -5], np.int64),
             "v1": rng.standard_normal((5, 4, 3)).astype(np.float32),
             "v2": rng.standard_normal((3,)).astype(np.float32),  # broadcast over the tuples
             "xi": rng.integers(-9, 10, (4, 6)).astype(np.int32),
             "mask": rng.integers(0, 2, (4, 6)).astype(bool),
             "lead_mask": rng.integers(0, 2, (5, 4)).astype(bool)}
    feeds["picked"] = rng.integers(-9, 10, int(feeds["mask"].sum())).astype(np.int32)  # one value per selected

    def build(x, rows, cols, rows2, v1, v2, xi, mask, lead_mask, picked):
        import paddle
        return [paddle.index_put(x, (rows,), v1),
                paddle.index_put(x, (rows2, cols), v2),
                paddle.index_put(xi, (rows2[:2],), paddle.full([1], 7, "int32")),
                # a bool mask with one value (SpeechT5's `pos[pos < -m] = -m`): WHERE, over all or the leading axes
                paddle.index_put(xi, (mask,), paddle.full([1], -1, "int32")),
                paddle.index_put(x, (lead_mask,), paddle.full([1], 2.5, "float32")),
                paddle.index_put(x, (rows,), v1, accumulate=True),       # a scatter-add: on the host
                paddle.index_put(xi, (mask,), picked)]  # a value per selected element (a data-dependent count): host
    return pir_program(tmp_path_factory.mktemp("index_put"), build, feeds)


@pytest.mark.parametrize("device", DEVICES)
def test_index_put_matches_paddle(index_put_program, device):
    """`x[idx] = t` is index_put: integer index tensors (negative, repeated, broadcast against each other, value
    broadcast) and a bool mask with a one-element value convert; accumulate and a bool mask with a value per
    selected element stay on the host with the reason."""
    config = nb.Config()
    config.set_model_file(index_put_program.model_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    placed = [p for p in predictor.placements(per_device=False) if p.op.type == "index_put"]
    assert [p.device is not None for p in placed] == [True, True, True, True, True, False, False], \
        [(p.op.label(), p.reason) for p in placed]
    for name, value in index_put_program.feeds.items():
        predictor.get_input_by_name(name).from_numpy(value)
    predictor.run()
    for k, want in enumerate(index_put_program.outputs):
        got = predictor.get_output(k).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"output {k} on {device}")
