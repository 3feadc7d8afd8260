"""The zoo in Paddle 3's PIR format (`<name>.json` + `.pdiparams`, paddle.jit.save with PIR on), against the
legacy export of the same weights.

1. The loader's translation of the PIR program is the legacy program: the same op types (as a multiset and
   op by op, in order), the same attributes on corresponding ops, the same data flow (every op reads the
   same parameters, feeds, or outputs of the corresponding earlier op; the fetches are the same values), the
   same parameters bit for bit, the same inputs and output count. Where the two formats legitimately differ,
   the normalisation is spelled out below (FRAMEWORK_ATTRS, ONE_SIDED_OUTPUT_SLOTS, ONE_SIDED_ATTRS).
2. Every PIR zoo model runs through the predictor on each device against Paddle Inference reading the same
   `.json` (batch 1), at DESIGN.md's whole-model tolerance.
"""
from __future__ import annotations

import collections
import difflib
import os
import subprocess
import sys

import numpy as np
import pytest

import nnadapter_bridge as nb
from devtools import zoo
from nnadapter_bridge.loader import load_model
from support.tolerances import assert_model_close

ZOO = list(zoo.MODELS + zoo.EXTRA_MODELS)
DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]

# Normalisation 1: attributes the legacy writer adds to every op for its training framework (device placement,
# name scope, op role, the Python call stack, the quantization marker). They carry no semantics; PIR does not
# keep them (the reader drops its own op_role/op_callstack likewise). Removed from both sides.
FRAMEWORK_ATTRS = frozenset({"op_device", "op_namescope", "op_role", "op_role_var", "op_callstack",
                             "with_quant_attr"})
# Normalisation 2: output slots one format declares and the other does not, each never read by any op nor
# fetched (checked), keyed by (op type or "*", slot) -> the side that has it:
#   XShape                   legacy reshape2/transpose2/squeeze2/flatten_contiguous_range/... keep the input
#                            shape for the gradient; PIR's ops have no such result.
#   batch_norm.ReserveSpace  cuDNN workspace: PIR declares it, the legacy inference export omits it.
#   dropout.Mask             the training mask: PIR declares it, the legacy export with is_test omits it.
ONE_SIDED_OUTPUT_SLOTS = {("*", "XShape"): "legacy", ("batch_norm", "ReserveSpace"): "pir",
                          ("dropout", "Mask"): "pir"}
# Normalisation 3: attributes present on one side only, per (op type, attribute), with why they cannot change
# the inference result:
#   pool2d.use_cudnn                legacy-only GPU kernel choice (PIR's pool2d has none; CPU ignores it).
#   dropout.seed, dropout.fix_seed  Paddle's op_compat lists them as `extra` attributes of dropout, which the
#                                   legacy export clips (clip_extra=True); PIR keeps them. Unused with is_test.
ONE_SIDED_ATTRS = {("pool2d", "use_cudnn"): "legacy", ("dropout", "seed"): "pir", ("dropout", "fix_seed"): "pir"}
# Normalisation 5: attributes PIR's op does not have at all, because PIR fixes their value: pd_op.hardswish is
# legacy hard_swish with threshold 6, scale 6, offset 3; pd_op.split (sections) is legacy split with num 0
# (num > 0 is pd_op.split_with_num). The legacy export writes them; they are dropped from the legacy side only
# when they hold exactly that value (the legacy op's default, which our converters also take when absent).
PIR_FIXED_ATTRS = {("hard_swish", "threshold"): 6.0, ("hard_swish", "scale"): 6.0, ("hard_swish", "offset"): 3.0,
                   ("split", "num"): 0}
# Normalisation 6: batch_norm's use_global_stats, when both sides have is_test=True and
# trainable_statistics=False. Paddle's kernel then uses the running statistics whatever use_global_stats says
# (global_stats = is_test && !trainable_statistics || use_global_stats). The yolo_detector's legacy layers are
# built in static mode without eval() (use_global_stats False, is_test set by save_inference_model), its
# dygraph twin in eval mode (True): the same inference function.
# Normalisation 4 (a rewrite of the legacy side): the conv-bias pattern of paddle.nn.Conv2D. paddle 3.3.1's
# legacy export writes it as reshape2(bias [C] -> shape [1, C, 1, 1]) + elementwise_add(conv, reshaped,
# axis=-1); the PIR reader folds PIR's reshape + add into elementwise_add(conv, bias, axis=1), the same
# function (a [C] bias broadcast along axis 1 of NCHW). The legacy pair is folded likewise, only when all of
# it holds: the reshape2 reads a rank-1 parameter with no shape tensors, its shape is [1, C, 1, 1], its only
# reader is that add as Y, the add has axis -1 and its X is a conv2d/depthwise_conv2d output in NCHW.
CONV_TYPES = ("conv2d", "depthwise_conv2d")


def _plain(op) -> dict:
    return {"type": op.type, "inputs": {k: list(v) for k, v in op.inputs.items()},
            "outputs": {k: list(v) for k, v in op.outputs.items()}, "attrs": dict(op.attrs)}


def _fold_legacy_conv_bias(ops: list, params: dict) -> list:
    """Normalisation 4 on a list of _plain ops (see above)."""
    readers = collections.defaultdict(list)
    producer = {}
    for i, op in enumerate(ops):
        for names in op["inputs"].values():
            for n in names:
                readers[n].append(i)
        for names in op["outputs"].values():
            for n in names:
                producer[n] = i
    drop = set()
    for i, op in enumerate(ops):
        if op["type"] != "reshape2" or op["inputs"].get("Shape") or op["inputs"].get("ShapeTensor"):
            continue
        bias = op["inputs"]["X"][0]
        out = op["outputs"]["Out"][0]
        if bias not in params or params[bias].ndim != 1:
            continue
        if list(op["attrs"].get("shape", [])) != [1, params[bias].shape[0], 1, 1] or len(readers[out]) != 1:
            continue
        add = ops[readers[out][0]]
        if add["type"] != "elementwise_add" or add["inputs"].get("Y") != [out] or add["attrs"].get("axis") != -1:
            continue
        conv = ops[producer.get(add["inputs"]["X"][0], i)]
        if conv["type"] not in CONV_TYPES or conv["attrs"].get("data_format", "NCHW") != "NCHW":
            continue
        add["inputs"]["Y"] = [bias]
        add["attrs"]["axis"] = 1
        drop.add(i)
    return [op for i, op in enumerate(ops) if i not in drop]


def _paths(name, zoo_model, pir_model):
    return zoo_model(name, "pdmodel"), pir_model(name)


def _feeds(name: str, seed: int = 5) -> dict:
    rng = np.random.default_rng(seed)
    if name == "yolo_detector":
        size = zoo.DETECTOR_SIZE
        return {"image": rng.standard_normal((1, 3, size, size)).astype(np.float32),
                "im_shape": np.array([[size, size]], np.int32)}
    return {zoo.INPUT_NAME: rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}


def _canonical(graph, side: str):
    """Block 0 of `graph` as comparable data: per op (type, inputs, output slots, attrs), where every var an op
    reads is named by what defines it (a parameter or feed by its name, anything else ("#", i, slot, k): result
    k of slot `slot` of the i-th non-feed/fetch op); plus the fetched values in the same terms. Applies the
    normalisations above and checks that what they remove is never read."""
    ops = [_plain(op) for op in graph.ops() if op.type not in ("feed", "fetch")]
    if side == "legacy":
        ops = _fold_legacy_conv_bias(ops, graph.params)
    defined = {}
    dropped = set()
    canon = []
    for i, op in enumerate(ops):
        reads = {slot: [defined.get(n, n) for n in names] for slot, names in op["inputs"].items() if names}
        hidden = [r for names in reads.values() for r in names if r in dropped]
        assert not hidden, f"{side} op #{i} {op['type']} reads {hidden}, an output the normalisation dropped"
        slots = []
        for slot, names in op["outputs"].items():
            if not names:
                continue
            one_sided = ONE_SIDED_OUTPUT_SLOTS.get((op["type"], slot), ONE_SIDED_OUTPUT_SLOTS.get(("*", slot)))
            if one_sided == side:
                dropped.update(("#", i, slot, k) for k in range(len(names)))
            else:
                slots.append(slot)
            for k, n in enumerate(names):
                defined[n] = ("#", i, slot, k)
        attrs = {k: v for k, v in op["attrs"].items()
                 if k not in FRAMEWORK_ATTRS and ONE_SIDED_ATTRS.get((op["type"], k)) != side}
        if side == "legacy":
            for k in [k for k in attrs if (op["type"], k) in PIR_FIXED_ATTRS]:
                if _attr_equal(attrs[k], PIR_FIXED_ATTRS[(op["type"], k)]):
                    del attrs[k]
        if op["type"] == "batch_norm" and attrs.get("is_test") is True and attrs.get("trainable_statistics") is False:
            attrs.pop("use_global_stats", None)
        canon.append({"type": op["type"], "inputs": reads, "outputs": sorted(slots), "attrs": attrs})
    fetched = [defined.get(n, n) for n in graph.outputs]
    assert not set(fetched) & dropped
    return canon, fetched


def _compare_programs(want_ops, want_fetched, got_ops, got_fetched) -> list:
    """Differences between the canonical legacy (want) and PIR (got) programs, as readable lines. The ops are
    aligned by their type sequence (difflib); ops without a counterpart are differences, and a PIR op's
    reference to an earlier op is mapped through the alignment before comparing data flow."""
    matcher = difflib.SequenceMatcher(None, [o["type"] for o in want_ops], [o["type"] for o in got_ops],
                                      autojunk=False)
    to_legacy = {}
    problems = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            to_legacy.update(zip(range(j1, j2), range(i1, i2)))
        else:
            problems.append(f"no counterpart: legacy ops #{i1}..#{i2 - 1} {[o['type'] for o in want_ops[i1:i2]]}"
                            f" vs pir ops #{j1}..#{j2 - 1} {[o['type'] for o in got_ops[j1:j2]]}")

    def mapped(ref):
        if isinstance(ref, tuple):
            return ("#", to_legacy.get(ref[1], f"pir-only #{ref[1]}"), ref[2], ref[3])
        return ref

    for j, i in sorted(to_legacy.items()):
        got, want = got_ops[j], want_ops[i]
        where = f"op #{i} {want['type']} (pir #{j})"
        got_inputs = {slot: [mapped(r) for r in refs] for slot, refs in got["inputs"].items()}
        if got_inputs != want["inputs"]:
            problems.append(f"{where}: inputs {got_inputs} != legacy {want['inputs']}")
        if got["outputs"] != want["outputs"]:
            problems.append(f"{where}: output slots {got['outputs']} != legacy {want['outputs']}")
        for k in sorted(set(got["attrs"]) | set(want["attrs"])):
            if k not in got["attrs"] or k not in want["attrs"]:
                side = "pir" if k in got["attrs"] else "legacy"
                value = got["attrs"].get(k, want["attrs"].get(k))
                problems.append(f"{where}: attribute {k} only in {side} ({value!r})")
            elif not _attr_equal(got["attrs"][k], want["attrs"][k]):
                problems.append(f"{where}: attribute {k} = {got['attrs'][k]!r} != legacy {want['attrs'][k]!r}")
    if [mapped(r) for r in got_fetched] != want_fetched:
        problems.append(f"the fetches are other values: {[mapped(r) for r in got_fetched]} != legacy {want_fetched}")
    return problems


def _attr_equal(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and np.float32(a) == np.float32(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_attr_equal(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_pir_translation_is_the_legacy_program(name, zoo_model, pir_model):
    legacy_path, pir_path = _paths(name, zoo_model, pir_model)
    legacy = load_model(legacy_path)
    pir = load_model(pir_path)

    # Inputs: names, shapes, dtypes, in feed order; the same number of outputs.
    assert pir.inputs == legacy.inputs
    for n in legacy.inputs:
        assert (pir.var(n).shape, pir.var(n).data_type) == (legacy.var(n).shape, legacy.var(n).data_type), n
    assert len(pir.outputs) == len(legacy.outputs)
    for graph in (legacy, pir):
        types = [op.type for op in graph.ops()]
        assert (types.count("feed"), types.count("fetch")) == (len(graph.inputs), len(graph.outputs))

    # Parameters: the same names, each bit for bit (the PIR export took the legacy weights).
    assert sorted(pir.params) == sorted(legacy.params)
    for n, want in legacy.params.items():
        got = pir.params[n]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), n
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), f"parameter {n} differs"
        assert pir.var(n).persistable and pir.var(n).shape == legacy.var(n).shape, n

    assert len(pir.blocks) == len(legacy.blocks) == 1
    want_ops, want_fetched = _canonical(legacy, "legacy")
    got_ops, got_fetched = _canonical(pir, "pir")
    problems = []
    # Op types as a multiset (after normalisation 4; feed and fetch are one per input and output, checked above).
    extra = collections.Counter(o["type"] for o in got_ops) - collections.Counter(o["type"] for o in want_ops)
    missing = collections.Counter(o["type"] for o in want_ops) - collections.Counter(o["type"] for o in got_ops)
    if extra or missing:
        problems.append(f"op multiset: pir has extra {dict(extra)}, lacks {dict(missing)}")
    # Op by op, in order: type, data flow, output slots and attributes (after the normalisations above).
    problems += _compare_programs(want_ops, want_fetched, got_ops, got_fetched)
    assert not problems, f"{name}: {len(problems)} differences:\n" + "\n".join(problems[:40])


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_pir_export_computes_the_legacy_function(name, zoo_model, pir_model, paddle_reference):
    """Paddle Inference itself on both exports: the weights were carried over, so the answers agree."""
    legacy_path, pir_path = _paths(name, zoo_model, pir_model)
    feeds = _feeds(name)
    want = paddle_reference(legacy_path, feeds)
    got = paddle_reference(pir_path, feeds)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_model_close(g, w, what=f"{name} output {k}: PIR export vs legacy export in Paddle Inference")


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ZOO)
def test_pir_zoo_model_matches_paddle_inference(name, device, pir_model, paddle_reference):
    path = pir_model(name)
    config = nb.Config()
    config.set_model_file(path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    feeds = _feeds(name)
    assert predictor.get_input_names() == list(feeds)
    for input_name, array in feeds.items():
        predictor.get_input_by_name(input_name).from_numpy(array)
    predictor.run()
    want = paddle_reference(path, feeds)
    assert len(predictor.get_output_names()) == len(want)
    for k, expected in enumerate(want):
        assert_model_close(predictor.get_output(k).numpy(), expected, what=f"{name} on {device} output {k}")
    assert predictor.stats.subgraphs >= 1


def test_zoo_pir_layout_paths():
    assert zoo.model_path("resnet50", zoo.PIR_LAYOUT, "/m") == os.path.join("/m", "resnet50.json")
    assert zoo.PIR_LAYOUT not in zoo.LAYOUTS  # the legacy layouts, which other tests sweep, are unchanged
    assert not set(zoo.PIR_MODELS) & set(zoo.MODELS + zoo.EXTRA_MODELS)


@pytest.mark.slow
def test_pir_export_refuses_weights_that_do_not_match(zoo_model, tmp_path):
    """Weights come from the legacy export by name; another model's export is a loud error, not a guess."""
    zoo.require_paddle()
    with pytest.raises(zoo.ZooError, match="disagree on their weights"):
        zoo.build_pir_model("mobilenet_v1", str(tmp_path / "pir"), weights_from=zoo_model("squeezenet1_0"))


@pytest.mark.slow
def test_zoo_cli_writes_pir_models(tmp_path):
    """`python -m devtools.zoo NAME DIR` defaults to --layout pir for a PIR-only model, and the result
    loads (inputs as the model's docstring says)."""
    zoo.require_paddle()
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "devtools.zoo", "while_loop", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    path = zoo.model_path("while_loop", zoo.PIR_LAYOUT, str(tmp_path))
    assert proc.stdout.strip().endswith(path)
    assert os.path.isfile(path[: -len(".json")] + ".pdiparams")
    assert load_model(path).inputs == ["x", "n"]
    proc = subprocess.run([sys.executable, "-m", "devtools.zoo", "while_loop", str(tmp_path),
                           "--layout", "pdmodel"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "only in the PIR format" in proc.stderr
