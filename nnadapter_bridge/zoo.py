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
`python -m nnadapter_bridge.zoo NAME OUT_DIR [--layout L] [--keep-extra]`.

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
LAYOUTS = ("pdmodel", "combined", "per-var")
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
    layouts it is `out_dir` itself.
    """
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
    cmd = [sys.executable, "-m", "nnadapter_bridge.zoo", name, "--seed", str(seed)]
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
    def fits_int32(v):
        return -(1 << 31) <= v < (1 << 31)

    if isinstance(value, bool):
        return pb.BOOLEAN
    if isinstance(value, int):
        return pb.INT if fits_int32(value) else pb.LONG
    if isinstance(value, float):
        return pb.FLOAT
    if isinstance(value, str):
        return pb.STRING
    if isinstance(value, BlockRef):
        return pb.BLOCK
    if isinstance(value, VarRef):
        return pb.VAR
    if isinstance(value, (list, tuple)):
        if not value:
            return pb.INTS
        first = value[0]
        if isinstance(first, bool):
            return pb.BOOLEANS
        if isinstance(first, int):
            return pb.INTS if all(fits_int32(v) for v in value) else pb.LONGS
        if isinstance(first, float):
            return pb.FLOATS
        if isinstance(first, str):
            return pb.STRINGS
        if isinstance(first, BlockRef):
            return pb.BLOCKS
        if isinstance(first, VarRef):
            return pb.VARS
    raise ZooError(f"cannot infer the AttrType of {value!r}; pass (AttrType, value)")


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnadapter_bridge.zoo",
                                     description="Build a paddle.vision model in the legacy inference format.")
    parser.add_argument("name", choices=MODELS + EXTRA_MODELS)
    parser.add_argument("out_dir", nargs="?", help="output directory (for one --layout)")
    parser.add_argument("--layout", choices=LAYOUTS, default="pdmodel")
    parser.add_argument("--to", action="append", default=[], metavar="LAYOUT=DIR",
                        help="save in several layouts at once (repeatable); used by build_models")
    parser.add_argument("--keep-extra", action="store_true", help="clip_extra=False: keep extra op attributes")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    targets = dict(item.split("=", 1) for item in args.to)
    if args.out_dir:
        targets[args.layout] = args.out_dir
    if not targets:
        parser.error("give OUT_DIR or --to LAYOUT=DIR")
    try:
        if "paddle" in sys.modules or os.environ.get("FLAGS_enable_pir_api") != "0":
            paths = build_models(args.name, targets, clip_extra=not args.keep_extra, seed=args.seed)
        else:
            for layout in targets:
                if layout not in LAYOUTS:
                    raise ZooError(f"unknown layout '{layout}'; choose one of: {', '.join(LAYOUTS)}")
            _export_in_this_process(args.name, targets, not args.keep_extra, args.seed)
            paths = {layout: model_path(args.name, layout, d) for layout, d in targets.items()}
    except BridgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for layout, path in paths.items():
        print(f"{layout}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
