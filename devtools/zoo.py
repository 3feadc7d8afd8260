"""The model zoo: real Paddle inference models built with paddlepaddle, for tests, demos and benchmarks.

`build_model(name, out_dir, layout)` builds one of `paddle.vision.models` (MODELS) with random weights from
a fixed seed, in eval mode, with one feed `x` of shape [-1, 3, 224, 224] (dynamic batch), and saves it in
Paddle's legacy ProgramDesc format in one of three layouts (LAYOUTS):

  "pdmodel"   <name>.pdmodel + <name>.pdiparams      (paddle.static.save_inference_model)
  "combined"  __model__ + __params__                  (the same program and combined params, old names)
  "per-var"   __model__ + one file per persistable var (save_inference_model(separate_parameters=True))

paddlepaddle is optional for this package: it is imported lazily, in a child process. The legacy format
needs FLAGS_enable_pir_api=0 before paddle is first imported, which the parent process cannot promise
(paddle may already be loaded in PIR mode), so the export always runs in a fresh interpreter:
`python -m devtools.zoo NAME OUT_DIR [--layout L] [--keep-extra]`.

The PIR format (PIR_LAYOUT = "pir"; Paddle 3's default export): `<out_dir>/<name>.json` + `<name>.pdiparams`,
written by `paddle.jit.save` (through `paddle.jit.to_static(full_graph=True)`) in a fresh interpreter with PIR
on (FLAGS_enable_pir_api unset), from the network built in dygraph (eval mode) with named InputSpecs:
`build_pir_model(name, out_dir, weights_from=None)`, or `build_model(name, out_dir, layout="pir")`, or
`python -m devtools.zoo NAME OUT_DIR --layout pir [--weights-from LEGACY_MODEL]`.

  - a zoo model (MODELS, EXTRA_MODELS: `x` [-1, 3, 224, 224] float32; yolo_detector: `image`, `im_shape`)
    gets exactly the weights of its legacy export: every parameter and persistable buffer is set by name
    from `load_model(weights_from).params` (our own loader), and any name, shape or dtype that does not
    match is an error. Without `weights_from` the legacy export is built first (same seed) in a temporary
    directory. So the PIR and the legacy export of a zoo model compute the same function.
  - PIR_MODELS exist only in this format (the legacy exporter cannot write them): a TransformerEncoder
    text classifier (int64 ids), LSTM and GRU models, a CRNN recogniser with a bidirectional LSTM, a two-scale
    yolo_box + multiclass_nms3 head, a `paddle.static.nn.cond` model and a data-dependent `while` loop.
    Tiny, random weights from the seed; each builder's docstring gives its feeds and fetches.

Programs Paddle cannot export. In legacy static mode paddle 3.3.1 refuses some single-op functions
(abs, matmul, multiply, sum, tanh, logical_*: "argument must be Value, but got Variable"). Build such a
program directly as an OpDesc list with our own protobuf module instead: `write_program(path, blocks_spec)`
below writes a ProgramDesc from a plain description (vars, ops with slots and attributes; feed/fetch ops
added for you), and `write_combined_params(path, arrays)` writes the matching `__params__`. Paddle itself
loads the result with `paddle.static.load_inference_model(dir, exe, model_filename=..., params_filename=...)`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from nnadapter_bridge.errors import BridgeError

MODELS = ("mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet50", "squeezenet1_0", "shufflenet_v2_x1_0")
# Not part of the vision set the loader tests sweep: a detection-style model for demos and host-op tests.
EXTRA_MODELS = ("yolo_detector",)
DETECTOR_SIZE = 64
DETECTOR_CLASSES = 4
LAYOUTS = ("pdmodel", "combined", "per-var")  # the legacy ProgramDesc layouts
PIR_LAYOUT = "pir"  # <name>.json + <name>.pdiparams (paddle.jit.save with PIR on)
# Models only the PIR export can write (see the module docstring).
PIR_MODELS = ("transformer_encoder", "lstm", "gru", "crnn", "yolo_head", "cond_branch", "while_loop")
INPUT_NAME = "x"
INPUT_SHAPE = (-1, 3, 224, 224)
DEFAULT_SEED = 2024


class ZooError(BridgeError):
    """A zoo model could not be built (paddlepaddle missing, unknown name, the export failed)."""


def require_paddle() -> None:
    """Raise ZooError with an install hint when paddlepaddle is not importable (without importing it)."""
    import importlib.util

    if importlib.util.find_spec("paddle") is None:
        raise ZooError("paddlepaddle is not installed; the model zoo needs it: pip install 'nnadapter-bridge[paddle]'")


def build_model(name: str, out_dir: str, layout: str = "pdmodel", clip_extra: bool = True,
                seed: int = DEFAULT_SEED, timeout: float = 900.0) -> str:
    """Build zoo model `name` into `out_dir` (created) in `layout`; returns the path to hand to load_model.

    For "pdmodel" that is the `<name>.pdmodel` file (its `.pdiparams` sits next to it); for the other two
    layouts it is `out_dir` itself. Layout "pir" is build_pir_model: the `<name>.json` file.
    """
    if layout == PIR_LAYOUT:
        return build_pir_model(name, out_dir, seed=seed, timeout=timeout)
    return build_models(name, {layout: out_dir}, clip_extra=clip_extra, seed=seed, timeout=timeout)[layout]


def build_models(name: str, out_dirs: dict, clip_extra: bool = True, seed: int = DEFAULT_SEED,
                 timeout: float = 900.0) -> dict:
    """Build one model once and save it in several layouts: {layout: out_dir} -> {layout: path}."""
    if name not in MODELS + EXTRA_MODELS:
        raise ZooError(f"unknown zoo model '{name}'; choose one of: {', '.join(MODELS + EXTRA_MODELS)}")
    for layout in out_dirs:
        if layout not in LAYOUTS:
            raise ZooError(f"unknown layout '{layout}'; choose one of: {', '.join(LAYOUTS)}")
    require_paddle()
    cmd = [sys.executable, "-m", "devtools.zoo", name, "--seed", str(seed)]
    for layout, out_dir in out_dirs.items():
        cmd += ["--to", f"{layout}={os.path.abspath(out_dir)}"]
    if not clip_extra:
        cmd.append("--keep-extra")
    env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_minloglevel=os.environ.get("GLOG_minloglevel", "2"))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise ZooError(f"exporting '{name}' failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return {layout: model_path(name, layout, out_dir) for layout, out_dir in out_dirs.items()}


def demo_models_dir() -> str:
    """Where the demos keep their zoo models: $NNADAPTER_BRIDGE_DEMO_DIR, else <tmp>/nnadapter-bridge-demo."""
    return os.environ.get("NNADAPTER_BRIDGE_DEMO_DIR") or os.path.join(tempfile.gettempdir(), "nnadapter-bridge-demo")


def ensure_model(name: str, out_dir: str, layout: str = "pdmodel") -> str:
    """The path of zoo model `name` in `out_dir`, building it there first when it is missing."""
    path = model_path(name, layout, out_dir)
    if not os.path.exists(path):
        print(f"building {name} (random weights) into {out_dir} ...", flush=True)
        build_model(name, out_dir, layout)
    return path


def model_path(name: str, layout: str, out_dir: str) -> str:
    """Where build_model puts a model of `layout` inside `out_dir` (what load_model should be given)."""
    if layout == "pdmodel":
        return os.path.join(out_dir, f"{name}.pdmodel")
    if layout == PIR_LAYOUT:
        return os.path.join(out_dir, f"{name}.json")
    return out_dir


# ----------------------------------------------------------------------------------------------------------
# The export itself: runs only in the child interpreter started by build_models.

def _export_in_this_process(name: str, targets: dict, clip_extra: bool, seed: int) -> None:
    if os.environ.get("FLAGS_enable_pir_api") != "0" or "paddle" in sys.modules:
        raise ZooError("the export must run in a fresh interpreter with FLAGS_enable_pir_api=0; "
                       "use build_model() rather than calling this directly")
    import paddle

    paddle.enable_static()
    paddle.seed(seed)
    np.random.seed(seed)
    main = paddle.static.Program()
    startup = paddle.static.Program()
    main.random_seed = seed
    startup.random_seed = seed
    with paddle.static.program_guard(main, startup):
        feeds, fetches = _build_network(paddle, name)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    _randomize_batch_norm_stats(paddle, main, seed)
    for layout, out_dir in targets.items():
        os.makedirs(out_dir, exist_ok=True)
        if layout == "pdmodel":
            paddle.static.save_inference_model(os.path.join(out_dir, name), feeds, fetches, exe, program=main,
                                               clip_extra=clip_extra)
        elif layout == "per-var":
            paddle.static.save_inference_model(os.path.join(out_dir, name), feeds, fetches, exe, program=main,
                                               clip_extra=clip_extra, separate_parameters=True)
        else:  # combined: Paddle's combined params file is the same bytes whatever it is called
            with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
                paddle.static.save_inference_model(os.path.join(tmp, name), feeds, fetches, exe, program=main,
                                                   clip_extra=clip_extra)
                shutil.move(os.path.join(tmp, f"{name}.pdmodel"), os.path.join(out_dir, "__model__"))
                shutil.move(os.path.join(tmp, f"{name}.pdiparams"), os.path.join(out_dir, "__params__"))


def _build_network(paddle, name: str):
    """Build zoo model `name` into the current static program; returns (feed vars, fetch vars)."""
    if name == "yolo_detector":
        return _build_yolo_detector(paddle)
    x = paddle.static.data(INPUT_NAME, list(INPUT_SHAPE), "float32")
    net = getattr(paddle.vision.models, name)()
    net.eval()
    return [x], [net(x)]


def _build_yolo_detector(paddle):
    """A small detection-style model: a conv backbone (conv/bn/relu/pool), a YOLO head decoded by
    `yolo_box`, and `multiclass_nms3` (appended as a raw op: paddle 3.3.1 has no legacy-static Python API
    for it). Feeds `image` [-1, 3, 64, 64] and `im_shape` [-1, 2] int32; fetches the NMS rows [No, 6] and
    the kept-box count per image."""
    from paddle.base.layer_helper import LayerHelper

    image = paddle.static.data("image", [-1, 3, DETECTOR_SIZE, DETECTOR_SIZE], "float32")
    im_shape = paddle.static.data("im_shape", [-1, 2], "int32")
    h = image
    for cin, cout in ((3, 16), (16, 32)):
        h = paddle.nn.Conv2D(cin, cout, 3, stride=1, padding=1, bias_attr=False)(h)
        h = paddle.nn.BatchNorm2D(cout)(h)
        h = paddle.nn.functional.relu(h)
        h = paddle.nn.functional.max_pool2d(h, 2, 2)
    anchors = [10, 13, 16, 30, 33, 23]
    head = paddle.nn.Conv2D(32, 3 * (5 + DETECTOR_CLASSES), 1)(h)
    boxes, scores = paddle.vision.ops.yolo_box(head, im_shape, anchors=anchors, class_num=DETECTOR_CLASSES,
                                               conf_thresh=0.01, downsample_ratio=4)
    scores = paddle.transpose(scores, [0, 2, 1])
    helper = LayerHelper("multiclass_nms3")
    out = helper.create_variable_for_type_inference("float32")
    index = helper.create_variable_for_type_inference("int32")
    rois_num = helper.create_variable_for_type_inference("int32")
    helper.append_op(type="multiclass_nms3", inputs={"BBoxes": boxes, "Scores": scores},
                     outputs={"Out": out, "Index": index, "NmsRoisNum": rois_num},
                     attrs={"background_label": -1, "score_threshold": 0.05, "nms_top_k": 100,
                            "nms_threshold": 0.5, "nms_eta": 1.0, "keep_top_k": 20, "normalized": False})
    return [image, im_shape], [out, rois_num]


def _randomize_batch_norm_stats(paddle, program, seed: int) -> None:
    """Give batch-norm running mean/variance random values: the defaults (0 and 1) would let a wrong
    mean/variance wiring go unnoticed in numeric tests."""
    rng = np.random.default_rng(seed)
    scope = paddle.static.global_scope()
    for op in program.global_block().ops:
        if op.type != "batch_norm":
            continue
        for slot, low, high in (("Mean", -0.1, 0.1), ("Variance", 0.5, 1.5)):
            for var_name in op.input(slot):
                tensor = scope.find_var(var_name).get_tensor()
                shape = np.array(tensor).shape
                tensor.set(rng.uniform(low, high, shape).astype(np.float32), paddle.CPUPlace())


# ----------------------------------------------------------------------------------------------------------
# Hand-built programs (ops that legacy Paddle cannot export from Python).

def write_program(path: str, blocks_spec, feeds=None, fetches=None) -> bytes:
    """Write a ProgramDesc built from plain data to `path` (None: only return the bytes).

    blocks_spec: a list of blocks, each {"vars": [var...], "ops": [op...], "parent_idx": -1}, where
      var = {"name", "dtype": "float32" (None for non-tensors), "shape": [...], "persistable": False,
             "var_type": VarTypeCode (default LOD_TENSOR), "lod_level": 0, "need_check_feed": False}
      op  = {"type", "inputs": {slot: [names]}, "outputs": {slot: [names]}, "attrs": {name: value}}
    Attribute types follow the Python value (bool, int -> INT or LONG when it does not fit 32 bits, float,
    str, lists of those, BlockRef/VarRef); pass (AttrType, value) to choose explicitly.
    feeds / fetches: var names; block 0 then gets the `feed`/`fetch` vars and ops with their `col` attrs,
    as save_inference_model writes them.
    """
    from nnadapter_bridge.loader import dtypes
    from nnadapter_bridge.loader import framework_pb2 as pb

    program = pb.ProgramDesc()
    program.version.version = 0
    for idx, spec in enumerate(blocks_spec):
        block = program.blocks.add(idx=idx, parent_idx=spec.get("parent_idx", -1 if idx == 0 else 0))
        var_specs = list(spec.get("vars", []))
        op_specs = list(spec.get("ops", []))
        if idx == 0 and feeds:
            var_specs.insert(0, {"name": "feed", "dtype": None, "var_type": dtypes.VarTypeCode.FEED_MINIBATCH,
                                 "persistable": True})
            op_specs = [{"type": "feed", "inputs": {"X": ["feed"]}, "outputs": {"Out": [n]}, "attrs": {"col": i}}
                        for i, n in enumerate(feeds)] + op_specs
        if idx == 0 and fetches:
            var_specs.append({"name": "fetch", "dtype": None, "var_type": dtypes.VarTypeCode.FETCH_LIST,
                              "persistable": True})
            op_specs += [{"type": "fetch", "inputs": {"X": [n]}, "outputs": {"Out": ["fetch"]},
                          "attrs": {"col": i}} for i, n in enumerate(fetches)]
        for v in var_specs:
            _fill_var(block.vars.add(), v, dtypes, pb)
        for o in op_specs:
            _fill_op(block.ops.add(), o, pb)
    data = program.SerializeToString()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def write_combined_params(path: str | None, arrays: dict) -> bytes:
    """The combined params file for {name: array}: records in sorted-name order (facts §7.3)."""
    from nnadapter_bridge.loader.params import encode_lod_tensor

    data = b"".join(encode_lod_tensor(np.asarray(arrays[name])) for name in sorted(arrays))
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def _fill_var(vdesc, spec, dtypes, pb) -> None:
    vdesc.name = spec["name"]
    kind = int(spec.get("var_type", dtypes.VarTypeCode.LOD_TENSOR))
    vdesc.type.type = kind
    dtype = spec.get("dtype", "float32")
    if dtype is not None:
        if kind == dtypes.VarTypeCode.LOD_TENSOR_ARRAY:
            holder = vdesc.type.tensor_array
        else:
            holder = vdesc.type.lod_tensor
        holder.tensor.data_type = dtypes.var_type_of_dtype(dtype)
        holder.tensor.dims.extend(int(d) for d in spec.get("shape", []))
        holder.lod_level = int(spec.get("lod_level", 0))
    vdesc.persistable = bool(spec.get("persistable", False))
    vdesc.need_check_feed = bool(spec.get("need_check_feed", False))


def _fill_op(odesc, spec, pb) -> None:
    from nnadapter_bridge.loader.program import BlockRef, VarRef

    odesc.type = spec["type"]
    for slot, names in spec.get("inputs", {}).items():
        odesc.inputs.add(parameter=slot, arguments=list(names))
    for slot, names in spec.get("outputs", {}).items():
        odesc.outputs.add(parameter=slot, arguments=list(names))
    for name, value in spec.get("attrs", {}).items():
        attr = odesc.attrs.add(name=name)
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], int) and not isinstance(
                value[1], int):
            attr.type, value = value
        else:
            attr.type = _infer_attr_type(value, pb, BlockRef, VarRef)
        _set_attr_value(attr, value, pb, BlockRef, VarRef)


def _infer_attr_type(value, pb, BlockRef, VarRef) -> int:
    from nnadapter_bridge.loader.program import infer_attr_type

    attr_type = infer_attr_type(value)
    if attr_type is None:
        raise ZooError(f"cannot infer the AttrType of {value!r}; pass (AttrType, value)")
    return attr_type


def _set_attr_value(attr, value, pb, BlockRef, VarRef) -> None:
    t = attr.type
    scalar_fields = {pb.INT: "i", pb.LONG: "l", pb.FLOAT: "f", pb.FLOAT64: "float64", pb.STRING: "s",
                     pb.BOOLEAN: "b"}
    list_fields = {pb.INTS: "ints", pb.LONGS: "longs", pb.FLOATS: "floats", pb.FLOAT64S: "float64s",
                   pb.STRINGS: "strings", pb.BOOLEANS: "bools"}
    if t in scalar_fields:
        setattr(attr, scalar_fields[t], value)
    elif t in list_fields:
        getattr(attr, list_fields[t]).extend(value)
    elif t == pb.BLOCK:
        attr.block_idx = value.idx if isinstance(value, BlockRef) else int(value)
    elif t == pb.BLOCKS:
        attr.blocks_idx.extend(v.idx if isinstance(v, BlockRef) else int(v) for v in value)
    elif t == pb.VAR:
        attr.var_name = value.name if isinstance(value, VarRef) else str(value)
    elif t == pb.VARS:
        attr.vars_name.extend(v.name if isinstance(v, VarRef) else str(v) for v in value)

# ----------------------------------------------------------------------------------------------------------
# The PIR format: <name>.json + <name>.pdiparams, written by paddle.jit.save with PIR on (Paddle 3's default).

def build_pir_model(name: str, out_dir: str, weights_from: str | None = None, seed: int = DEFAULT_SEED,
                    timeout: float = 900.0) -> str:
    """Export `name` as a PIR program into `out_dir` (created); returns the `<name>.json` path.

    A zoo model (MODELS, EXTRA_MODELS) gets exactly the weights of its legacy export: `weights_from` is that
    export (a path for load_model); None builds it first (same seed) in a temporary directory. A PIR-only
    model (PIR_MODELS) has random weights from `seed`.
    """
    if name not in MODELS + EXTRA_MODELS + PIR_MODELS:
        raise ZooError(f"unknown zoo model '{name}'; choose one of: {', '.join(MODELS + EXTRA_MODELS + PIR_MODELS)}")
    require_paddle()
    if name in PIR_MODELS:
        if weights_from is not None:
            raise ZooError(f"'{name}' exists only in the PIR format; it has no legacy export to take weights from")
        return _run_pir_child(name, out_dir, None, seed, timeout)
    if weights_from is not None:
        return _run_pir_child(name, out_dir, weights_from, seed, timeout)
    with tempfile.TemporaryDirectory(prefix=f"{name}-legacy-") as tmp:
        legacy = build_model(name, tmp, "pdmodel", seed=seed, timeout=timeout)
        return _run_pir_child(name, out_dir, legacy, seed, timeout)


def _run_pir_child(name: str, out_dir: str, weights_from: str | None, seed: int, timeout: float) -> str:
    cmd = [sys.executable, "-m", "devtools.zoo", name, "--seed", str(seed),
           "--to", f"{PIR_LAYOUT}={os.path.abspath(out_dir)}"]
    if weights_from is not None:
        cmd += ["--weights-from", os.path.abspath(weights_from)]
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_enable_pir_api"}  # PIR is the default
    env["GLOG_minloglevel"] = os.environ.get("GLOG_minloglevel", "2")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise ZooError(f"exporting '{name}' as PIR failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return model_path(name, PIR_LAYOUT, out_dir)


def _pir_export_in_this_process(name: str, out_dir: str, weights_from: str | None, seed: int) -> None:
    if os.environ.get("FLAGS_enable_pir_api", "1") in ("0", "false", "False") or "paddle" in sys.modules:
        raise ZooError("the PIR export must run in a fresh interpreter with FLAGS_enable_pir_api unset; "
                       "use build_pir_model() rather than calling this directly")
    if name in PIR_MODELS and weights_from is not None:
        raise ZooError(f"'{name}' exists only in the PIR format; it has no legacy export to take weights from")
    if name not in PIR_MODELS and weights_from is None:
        raise ZooError(f"the PIR export of zoo model '{name}' needs --weights-from (its legacy export)")
    import paddle

    paddle.disable_static()
    paddle.seed(seed)
    np.random.seed(seed)
    net, specs = _build_dygraph_network(paddle, name, seed)
    net.eval()
    if weights_from is not None:
        _set_weights_from_legacy(net, weights_from)
    os.makedirs(out_dir, exist_ok=True)
    static_net = paddle.jit.to_static(net, input_spec=specs, full_graph=True)
    paddle.jit.save(static_net, os.path.join(out_dir, name))
    path = model_path(name, PIR_LAYOUT, out_dir)
    if not os.path.isfile(path):
        raise ZooError(f"paddle.jit.save wrote no {os.path.basename(path)} into {out_dir} (is PIR off?): "
                       f"{sorted(os.listdir(out_dir))}")


def _set_weights_from_legacy(net, legacy_path: str) -> None:
    """Give every parameter and persistable buffer of `net` the value of the legacy export's var of the same
    name (the dygraph layers are built in the legacy program's order, so the unique names agree)."""
    from nnadapter_bridge.loader import load_model

    legacy = load_model(legacy_path).params
    tensors = {t.name: t for t in net.state_dict().values()}
    missing = sorted(set(tensors) - set(legacy))
    extra = sorted(set(legacy) - set(tensors))
    if missing or extra:
        raise ZooError(f"the dygraph network and the legacy export {legacy_path} disagree on their weights: "
                       f"only in dygraph {missing[:10]} ({len(missing)}), only in the legacy export {extra[:10]} "
                       f"({len(extra)})")
    for var_name, tensor in tensors.items():
        value = np.asarray(legacy[var_name])
        if tuple(tensor.shape) != value.shape or str(tensor.numpy().dtype) != str(value.dtype):
            raise ZooError(f"weight '{var_name}': dygraph {tuple(tensor.shape)} {tensor.numpy().dtype} != legacy "
                           f"{value.shape} {value.dtype} ({legacy_path})")
        tensor.set_value(np.asarray(value, order="C"))  # keeps a 0-d weight 0-d
        if not np.array_equal(tensor.numpy(), value):
            raise ZooError(f"weight '{var_name}' did not take the legacy value")


def _build_dygraph_network(paddle, name: str, seed: int):
    """(dygraph Layer, [InputSpec]) for `name`; layers are created in the legacy builder's order."""
    spec = paddle.static.InputSpec
    if name in MODELS:
        return getattr(paddle.vision.models, name)(), [spec(list(INPUT_SHAPE), "float32", INPUT_NAME)]
    if name == "yolo_detector":
        return _YoloDetector.make(paddle), [spec([-1, 3, DETECTOR_SIZE, DETECTOR_SIZE], "float32", "image"),
                                            spec([-1, 2], "int32", "im_shape")]
    builder = {
        "transformer_encoder": _pir_transformer_encoder,
        "lstm": _pir_lstm,
        "gru": _pir_gru,
        "crnn": _pir_crnn,
        "yolo_head": _pir_yolo_head,
        "cond_branch": _pir_cond_branch,
        "while_loop": _pir_while_loop,
    }[name]
    net, specs = builder(paddle)
    _randomize_dygraph_batch_norm_stats(paddle, net, seed)
    return net, specs


def _randomize_dygraph_batch_norm_stats(paddle, net, seed: int) -> None:
    """As _randomize_batch_norm_stats, for the batch norms of a dygraph network."""
    rng = np.random.default_rng(seed)
    for layer in net.sublayers():
        if isinstance(layer, paddle.nn.layer.norm._BatchNormBase):
            layer._mean.set_value(rng.uniform(-0.1, 0.1, layer._mean.shape).astype(np.float32))
            layer._variance.set_value(rng.uniform(0.5, 1.5, layer._variance.shape).astype(np.float32))


class _YoloDetector:
    """The dygraph twin of _build_yolo_detector (same layers in the same order, so the same weight names);
    multiclass_nms3 comes from paddle._C_ops, which under to_static emits pd_op.multiclass_nms3."""

    @staticmethod
    def make(paddle):
        nn = paddle.nn

        class YoloDetector(nn.Layer):
            def __init__(self):
                super().__init__()
                self.convs = nn.LayerList()
                self.norms = nn.LayerList()
                for cin, cout in ((3, 16), (16, 32)):
                    self.convs.append(nn.Conv2D(cin, cout, 3, stride=1, padding=1, bias_attr=False))
                    self.norms.append(nn.BatchNorm2D(cout))
                self.head = nn.Conv2D(32, 3 * (5 + DETECTOR_CLASSES), 1)

            def forward(self, image, im_shape):
                h = image
                for conv, norm in zip(self.convs, self.norms):
                    h = nn.functional.max_pool2d(nn.functional.relu(norm(conv(h))), 2, 2)
                boxes, scores = paddle.vision.ops.yolo_box(self.head(h), im_shape, anchors=[10, 13, 16, 30, 33, 23],
                                                           class_num=DETECTOR_CLASSES, conf_thresh=0.01,
                                                           downsample_ratio=4)
                scores = paddle.transpose(scores, [0, 2, 1])
                out, _index, rois_num = paddle._C_ops.multiclass_nms3(boxes, scores, None, 0.05, 100, 20, 0.5,
                                                                      False, 1.0, -1)
                return out, rois_num

        return YoloDetector()


# The PIR-only models: what the legacy exporter cannot write (dygraph-only layers, control flow through
# to_static). Tiny, random weights from the seed.
TRANSFORMER_VOCAB, TRANSFORMER_SEQ, TRANSFORMER_DIM, TRANSFORMER_CLASSES = 64, 16, 32, 4
RNN_STEPS, RNN_FEATURES, RNN_HIDDEN = 10, 8, 16
CRNN_SHAPE, CRNN_CLASSES = (3, 32, 64), 11
YOLO_HEAD_SIZE, YOLO_HEAD_CLASSES = 64, 3
COND_FEATURES, WHILE_FEATURES = 8, 8


def _pir_transformer_encoder(paddle):
    """Text classifier: token + position embedding, a 2-layer TransformerEncoder, mean over tokens plus the
    first (CLS) token, linear. Feed `ids` int64 [-1, 16]; fetch logits [N, 4]."""
    nn = paddle.nn

    class TransformerClassifier(nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(TRANSFORMER_VOCAB, TRANSFORMER_DIM)
            self.pos = self.create_parameter([1, TRANSFORMER_SEQ, TRANSFORMER_DIM],
                                             default_initializer=nn.initializer.Normal(std=0.1))
            layer = nn.TransformerEncoderLayer(TRANSFORMER_DIM, 4, 64, dropout=0.0)
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.classify = nn.Linear(2 * TRANSFORMER_DIM, TRANSFORMER_CLASSES)

        def forward(self, ids):
            h = self.encoder(self.embed(ids) + self.pos)
            return self.classify(paddle.concat([h.mean(axis=1), h[:, 0]], axis=-1))

    return TransformerClassifier(), [paddle.static.InputSpec([-1, TRANSFORMER_SEQ], "int64", "ids")]


def _pir_rnn(paddle, cell: str):
    nn = paddle.nn

    class RnnModel(nn.Layer):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, cell)(RNN_FEATURES, RNN_HIDDEN, num_layers=2)
            self.fc = nn.Linear(RNN_HIDDEN, 4)

        def forward(self, x):
            out, state = self.rnn(x)
            h = state[0] if isinstance(state, (tuple, list)) else state
            return self.fc(out[:, -1]), h

    return RnnModel(), [paddle.static.InputSpec([-1, RNN_STEPS, RNN_FEATURES], "float32", "x")]


def _pir_lstm(paddle):
    """2-layer paddle.nn.LSTM over `x` [-1, 10, 8]; fetches linear(last step) [N, 4] and h [2, N, 16]."""
    return _pir_rnn(paddle, "LSTM")


def _pir_gru(paddle):
    """2-layer paddle.nn.GRU over `x` [-1, 10, 8]; fetches linear(last step) [N, 4] and h [2, N, 16]."""
    return _pir_rnn(paddle, "GRU")


def _pir_crnn(paddle):
    """CRNN-style recogniser: conv/bn/relu/pool backbone to height 1, a bidirectional LSTM over the width,
    dropout (downscale_in_infer, p=0.3), linear and softmax per step. Feed `image` [-1, 3, 32, 64]; fetch
    [N, 16, 11] probabilities."""
    nn = paddle.nn

    class Crnn(nn.Layer):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(
                nn.Conv2D(3, 16, 3, padding=1), nn.BatchNorm2D(16), nn.ReLU(), nn.MaxPool2D(2, 2),
                nn.Conv2D(16, 32, 3, padding=1), nn.BatchNorm2D(32), nn.ReLU(), nn.MaxPool2D(2, 2),
                nn.Conv2D(32, 32, 3, padding=1), nn.BatchNorm2D(32), nn.ReLU(), nn.MaxPool2D((2, 1), (2, 1)),
                nn.AdaptiveAvgPool2D((1, None)))
            self.rnn = nn.LSTM(32, 24, direction="bidirect")
            # Scales by 1 - p at inference: a dropout whose probability matters (p is an operand in PIR).
            self.dropout = nn.Dropout(0.3, mode="downscale_in_infer")
            self.fc = nn.Linear(48, CRNN_CLASSES)

        def forward(self, image):
            f = self.backbone(image)                       # [N, 32, 1, 16]
            seq = paddle.transpose(paddle.squeeze(f, axis=2), [0, 2, 1])  # [N, 16, 32]
            out, _ = self.rnn(seq)
            return nn.functional.softmax(self.fc(self.dropout(out)), axis=-1)

    return Crnn(), [paddle.static.InputSpec([-1, *CRNN_SHAPE], "float32", "image")]


def _pir_yolo_head(paddle):
    """Two-scale YOLO head: two yolo_box decodes (strides 8 and 16) concatenated into one multiclass_nms3
    (background class 0, keep 10). Feeds `image` [-1, 3, 64, 64] and `im_shape` int32 [-1, 2]; fetches the
    NMS rows [No, 6], their Index [No, 1] and the per-image count."""
    nn = paddle.nn

    class YoloHead(nn.Layer):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2D(3, 16, 3, stride=2, padding=1), nn.BatchNorm2D(16), nn.LeakyReLU(0.1),
                                      nn.Conv2D(16, 32, 3, stride=2, padding=1), nn.BatchNorm2D(32), nn.LeakyReLU(0.1),
                                      nn.Conv2D(32, 32, 3, stride=2, padding=1), nn.BatchNorm2D(32), nn.LeakyReLU(0.1))
            self.down = nn.Conv2D(32, 32, 3, stride=2, padding=1)
            self.head8 = nn.Conv2D(32, 2 * (5 + YOLO_HEAD_CLASSES), 1)
            self.head16 = nn.Conv2D(32, 2 * (5 + YOLO_HEAD_CLASSES), 1)

        def forward(self, image, im_shape):
            f8 = self.stem(image)
            f16 = self.down(f8)
            b8, s8 = paddle.vision.ops.yolo_box(self.head8(f8), im_shape, anchors=[10, 14, 23, 27],
                                                class_num=YOLO_HEAD_CLASSES, conf_thresh=0.02, downsample_ratio=8,
                                                clip_bbox=True, scale_x_y=1.05)
            b16, s16 = paddle.vision.ops.yolo_box(self.head16(f16), im_shape, anchors=[37, 58, 81, 82],
                                                  class_num=YOLO_HEAD_CLASSES, conf_thresh=0.02, downsample_ratio=16)
            boxes = paddle.concat([b8, b16], axis=1)
            scores = paddle.transpose(paddle.concat([s8, s16], axis=1), [0, 2, 1])
            out, index, rois_num = paddle._C_ops.multiclass_nms3(boxes, scores, None, 0.03, 50, 10, 0.45,
                                                                 False, 1.0, 0)
            return out, index, rois_num

    return YoloHead(), [paddle.static.InputSpec([-1, 3, YOLO_HEAD_SIZE, YOLO_HEAD_SIZE], "float32", "image"),
                        paddle.static.InputSpec([-1, 2], "int32", "im_shape")]


def _pir_cond_branch(paddle):
    """paddle.static.nn.cond on mean(x) > 0: linear*2 on one branch, relu(linear)-1 on the other. Feed `x`
    float32 [-1, 8]; fetch [N, 8]. A positive and a negative input take different branches."""
    nn = paddle.nn

    class CondBranch(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(COND_FEATURES, COND_FEATURES)
            self.fc2 = nn.Linear(COND_FEATURES, COND_FEATURES)

        def forward(self, x):
            h = paddle.tanh(x)
            return paddle.static.nn.cond(paddle.mean(x) > 0.0,
                                         lambda: self.fc1(h) * 2.0,
                                         lambda: nn.functional.relu(self.fc2(h)) - 1.0)

    return CondBranch(), [paddle.static.InputSpec([-1, COND_FEATURES], "float32", "x")]


def _pir_while_loop(paddle):
    """A data-dependent while loop (to_static turns the Python `while` on tensors into one): h = tanh(fc(h))
    + h/2, run `n` times (feed `n` int64 [1]); feed `x` float32 [-1, 8]; fetches h [N, 8] and the trip
    count (int64 [1])."""
    nn = paddle.nn

    class WhileLoop(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(WHILE_FEATURES, WHILE_FEATURES)

        def forward(self, x, n):
            i = paddle.zeros([1], dtype="int64")
            h = x
            while i < n:
                h = paddle.tanh(self.fc(h)) + h * 0.5
                i = i + 1
            return h, i

    return WhileLoop(), [paddle.static.InputSpec([-1, WHILE_FEATURES], "float32", "x"),
                         paddle.static.InputSpec([1], "int64", "n")]



def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.zoo",
                                     description="Build a zoo model: paddle.vision models in the legacy inference "
                                                 "format, and any zoo model in the PIR format (--layout pir).")
    parser.add_argument("name", choices=MODELS + EXTRA_MODELS + PIR_MODELS)
    parser.add_argument("out_dir", nargs="?", help="output directory (for one --layout)")
    parser.add_argument("--layout", choices=LAYOUTS + (PIR_LAYOUT,), default=None,
                        help="default: pdmodel; pir for the PIR-only models or with --weights-from")
    parser.add_argument("--to", action="append", default=[], metavar="LAYOUT=DIR",
                        help="save in several layouts at once (repeatable); used by build_models")
    parser.add_argument("--keep-extra", action="store_true", help="clip_extra=False: keep extra op attributes")
    parser.add_argument("--weights-from", metavar="MODEL",
                        help="layout pir: the legacy export whose weights the PIR export takes (default: build it)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_intermixed_args(argv)  # options may come before OUT_DIR
    targets = dict(item.split("=", 1) for item in args.to)
    if args.out_dir:
        layout = args.layout or (PIR_LAYOUT if args.name in PIR_MODELS or args.weights_from else "pdmodel")
        targets[layout] = args.out_dir
    if not targets:
        parser.error("give OUT_DIR or --to LAYOUT=DIR")
    pir_dir = targets.pop(PIR_LAYOUT, None)
    if args.weights_from and pir_dir is None:
        parser.error("--weights-from goes with --layout pir")
    paths = {}
    try:
        if targets:
            if args.name not in MODELS + EXTRA_MODELS:
                raise ZooError(f"'{args.name}' exists only in the PIR format; use --layout {PIR_LAYOUT}")
            if "paddle" in sys.modules or os.environ.get("FLAGS_enable_pir_api") != "0":
                paths = build_models(args.name, targets, clip_extra=not args.keep_extra, seed=args.seed)
            else:
                for layout in targets:
                    if layout not in LAYOUTS:
                        raise ZooError(f"unknown layout '{layout}'; choose one of: {', '.join(LAYOUTS)}")
                _export_in_this_process(args.name, targets, not args.keep_extra, args.seed)
                paths = {layout: model_path(args.name, layout, d) for layout, d in targets.items()}
        if pir_dir is not None:
            weights_from = args.weights_from
            if weights_from is None and args.name not in PIR_MODELS and "pdmodel" in paths:
                weights_from = paths["pdmodel"]  # built just now with the same seed
            pir_on = os.environ.get("FLAGS_enable_pir_api", "1") not in ("0", "false", "False")
            if "paddle" not in sys.modules and pir_on and (weights_from is not None or args.name in PIR_MODELS):
                _pir_export_in_this_process(args.name, pir_dir, weights_from, args.seed)
                paths[PIR_LAYOUT] = model_path(args.name, PIR_LAYOUT, pir_dir)
            else:
                paths[PIR_LAYOUT] = build_pir_model(args.name, pir_dir, weights_from, seed=args.seed)
    except BridgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for layout, path in paths.items():
        print(f"{layout}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
