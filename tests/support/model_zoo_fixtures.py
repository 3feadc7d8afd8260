"""Pytest fixtures for the model zoo: real Paddle models built once and cached outside the repo.

Cache root: $NNADAPTER_BRIDGE_FIXTURE_DIR, else ~/.cache/nnadapter-bridge/fixtures/<paddle version>/.
Each model is built in all three zoo layouts into `<root>/<model>-<build id>/<layout>/`. A build goes to a
temporary directory that is renamed into place only when complete (a `COMPLETE` marker is written last),
under an exclusive file lock per model, so concurrent pytest-xdist workers (or sessions) never build the
same model twice or see a half-written one; later sessions reuse what is there.

Fixtures:
  zoo_model(name, layout="pdmodel") -> path for load_model (session scope)
  pir_model(name) -> path of the PIR program `<name>.json` (its `.pdiparams` next to it; session scope)
  paddle_reference(model_path, feeds, params_path=None, disable_mkldnn=True) -> [outputs] from Paddle Inference

PIR models (`zoo.build_pir_model`) live in `<root>/<model>-<PIR_BUILD_ID>/pir/`, built the same way (lock,
staging directory, COMPLETE marker). A zoo model's PIR export takes its weights from the cached legacy export,
so the PIR build id contains the legacy one. Paddle Inference reads a `.json` program in these test processes
too, although conftest sets FLAGS_enable_pir_api=0 (checked with paddle 3.3.1: the flag governs the Python
static-graph API, not the inference predictor, and the outputs are bit-identical to a process with the flag
on), so `paddle_reference(json_path, feeds)` runs in-process like the legacy references.

Helpers: `paddle_load(path, layout)` flattens what `paddle.static.load_inference_model` reports (ops, attrs,
vars, feed/fetch targets, the parameters in its scope) into plain data; `ours_flat_op` / `ours_flat_var` put
the loader's OpInfo / VarInfo in the same shape, so tests compare like with like.
"""
from __future__ import annotations

import importlib.metadata
import os

import numpy as np
import pytest

from devtools import zoo
from support.fixture_cache import build_once, is_complete

# Bump when the zoo's export changes (seed, weight init, names) so stale caches are not reused.
BUILD_ID = f"seed{zoo.DEFAULT_SEED}-v1"


def fixture_root() -> str:
    root = os.environ.get("NNADAPTER_BRIDGE_FIXTURE_DIR")
    if not root:
        try:
            version = importlib.metadata.version("paddlepaddle")
        except importlib.metadata.PackageNotFoundError:
            version = "no-paddle"
        root = os.path.join(os.path.expanduser("~"), ".cache", "nnadapter-bridge", "fixtures", version)
    os.makedirs(root, exist_ok=True)
    return root


def ensure_zoo_model(name: str, root: str | None = None) -> str:
    """The directory holding `name` in every layout, building it first if no complete copy exists."""
    def build(staging: str) -> str:
        zoo.build_models(name, {layout: os.path.join(staging, layout) for layout in zoo.LAYOUTS})
        return BUILD_ID + "\n"

    return build_once(root or fixture_root(), f"{name}-{BUILD_ID}", build)


def zoo_model_path(name: str, layout: str = "pdmodel") -> str:
    if layout == zoo.PIR_LAYOUT:
        return pir_model_path(name)
    return zoo.model_path(name, layout, os.path.join(ensure_zoo_model(name), layout))


# Bump the suffix when the PIR export changes; a change of the legacy export (BUILD_ID) changes it too.
PIR_BUILD_ID = f"{BUILD_ID}-pir-v2"


def ensure_pir_model(name: str, root: str | None = None) -> str:
    """The directory holding `name` as a PIR program (`pir/<name>.json`), building it first if no complete
    copy exists. A zoo model (zoo.MODELS, zoo.EXTRA_MODELS) takes the weights of its cached legacy export."""
    root = root or fixture_root()
    key = f"{name}-{PIR_BUILD_ID}"
    if is_complete(os.path.join(root, key)):
        return os.path.join(root, key)
    legacy = None
    if name not in zoo.PIR_MODELS:
        legacy = zoo.model_path(name, "pdmodel", os.path.join(ensure_zoo_model(name, root), "pdmodel"))

    def build(staging: str) -> str:
        zoo.build_pir_model(name, os.path.join(staging, zoo.PIR_LAYOUT), weights_from=legacy)
        return PIR_BUILD_ID + "\n" + (f"weights from {legacy}\n" if legacy else "")

    return build_once(root, key, build)


def pir_model_path(name: str) -> str:
    return zoo.model_path(name, zoo.PIR_LAYOUT, os.path.join(ensure_pir_model(name), zoo.PIR_LAYOUT))


@pytest.fixture(scope="session")
def pir_model():
    """Factory: pir_model(name) -> path of the cached PIR export `<name>.json` of a zoo or PIR-only model."""
    try:
        zoo.require_paddle()
    except zoo.ZooError as exc:
        pytest.skip(f"model zoo unavailable: {exc}")
    return pir_model_path


@pytest.fixture(scope="session")
def zoo_model():
    """Factory: zoo_model(name, layout="pdmodel") -> path of a cached zoo model (built on first use)."""
    try:
        zoo.require_paddle()
    except zoo.ZooError as exc:
        pytest.skip(f"model zoo unavailable: {exc}")
    return zoo_model_path


def paddle_inference_outputs(model_path: str, feeds: dict, params_path: str | None = None,
                             disable_mkldnn: bool = True) -> list[np.ndarray]:
    """Run Paddle Inference on CPU: `model_path` is a model directory (legacy layouts) or a model file
    (then `params_path`, or its .pdiparams sibling). Returns the outputs in fetch order."""
    import paddle.inference as paddle_infer

    if os.path.isdir(model_path):
        if os.path.isfile(os.path.join(model_path, "__params__")):
            config = paddle_infer.Config(os.path.join(model_path, "__model__"),
                                         os.path.join(model_path, "__params__"))
        else:
            config = paddle_infer.Config(model_path)
    else:
        if params_path is None:
            for suffix in (".pdmodel", ".json"):  # legacy program / PIR program
                if model_path.endswith(suffix):
                    params_path = model_path[: -len(suffix)] + ".pdiparams"
        config = paddle_infer.Config(model_path, params_path)
    config.disable_gpu()
    if disable_mkldnn:
        config.disable_mkldnn()
    config.switch_ir_optim(False)  # the reference is the program as written, not Paddle's fused rewrite
    config.set_cpu_math_library_num_threads(1)
    predictor = paddle_infer.create_predictor(config)
    for name in predictor.get_input_names():
        handle = predictor.get_input_handle(name)
        array = np.asarray(feeds[name], order="C")  # a 0-d feed stays 0-d (np.ascontiguousarray gives [1])
        handle.reshape(list(array.shape))
        handle.copy_from_cpu(array)
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


@pytest.fixture(scope="session")
def paddle_reference():
    """paddle_reference(model_path, feeds, params_path=None, disable_mkldnn=True) -> list of outputs."""
    try:
        zoo.require_paddle()
    except zoo.ZooError as exc:
        pytest.skip(f"Paddle Inference unavailable: {exc}")
    return paddle_inference_outputs


# ----------------------------------------------------------------------------------------------------------
# What Paddle itself reports for a model on disk: the reference for the loader tests.

def paddle_load(path: str, layout: str) -> dict:
    """`path`/`layout` as returned by the zoo (or a dir for 'combined'/'per-var'); -> flattened program."""
    import paddle

    was_dynamic = paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        return _paddle_load_static(paddle, path, layout)
    finally:
        if was_dynamic:  # later tests in this worker may compare with eager paddle
            paddle.disable_static()


def _paddle_load_static(paddle, path: str, layout: str) -> dict:
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        if layout == "pdmodel":
            program, feeds, fetches = paddle.static.load_inference_model(path[: -len(".pdmodel")], exe)
        elif layout == "combined":
            program, feeds, fetches = paddle.static.load_inference_model(
                path, exe, model_filename="__model__", params_filename="__params__")
        elif layout == "per-var":
            program, feeds, fetches = paddle.static.load_inference_model(path, exe, model_filename="__model__")
        else:
            raise ValueError(layout)
        truth = {"feeds": list(feeds), "fetches": [v.name for v in fetches], "blocks": [], "params": {}}
        for b in range(program.num_blocks):
            block = program.block(b)
            truth["blocks"].append({
                "idx": block.idx,
                "parent_idx": block.parent_idx,
                "ops": [_flatten_op(op) for op in block.ops],
                "vars": {name: _flatten_var(var) for name, var in block.vars.items()},
            })
        for name, var in program.global_block().vars.items():
            if var.persistable and name not in ("feed", "fetch"):
                truth["params"][name] = np.array(scope.find_var(name).get_tensor())
    return truth


def _paddle_attr(op, name):
    """op.attr(name) as plain data; BLOCK(S) and VAR(S) attributes become ("block", idx) / ("var", name)."""
    kind = int(op.desc.attr_type(name, True))
    if kind == 8:  # BLOCK: Paddle hands back a BlockDesc
        return ("block", op._block_attr_id(name))
    if kind == 10:  # BLOCKS
        return [("block", i) for i in op._blocks_attr_ids(name)]
    if kind == 13:  # VAR: op.attr() refuses; the desc gives the VarDesc
        return ("var", op.desc.attr(name, True).name())
    if kind == 14:  # VARS
        return [("var", v.name()) for v in op.desc.attr(name, True)]
    return op.attr(name)


def _flatten_op(op) -> dict:
    return {
        "type": op.type,
        "inputs": {slot: list(op.input(slot)) for slot in op.input_names},
        "outputs": {slot: list(op.output(slot)) for slot in op.output_names},
        "attrs": {name: _paddle_attr(op, name) for name in op.attr_names},
        "attr_types": {name: int(op.desc.attr_type(name, True)) for name in op.attr_names},
    }


def _flatten_var(var) -> dict:
    flat = {"type": int(var.type), "persistable": bool(var.persistable),
            "need_check_feed": bool(var.desc.need_check_feed())}
    if int(var.type) in (7, 8, 13):  # LOD_TENSOR / SELECTED_ROWS / LOD_TENSOR_ARRAY carry a tensor desc
        flat["shape"] = tuple(var.shape)
        flat["data_type"] = int(var.dtype)
        if int(var.type) in (7, 13):
            flat["lod_level"] = int(var.lod_level)
    return flat


def ours_flat_op(op) -> dict:
    """Our OpInfo in the shape of _flatten_op."""
    from nnadapter_bridge.loader import BlockRef, VarRef

    def value(v):
        if isinstance(v, BlockRef):
            return ("block", v.idx)
        if isinstance(v, VarRef):
            return ("var", v.name)
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    return {"type": op.type, "inputs": op.inputs, "outputs": op.outputs,
            "attrs": {k: value(v) for k, v in op.attrs.items()}, "attr_types": op.attr_types}


def ours_flat_var(var) -> dict:
    flat = {"type": var.var_type, "persistable": var.persistable, "need_check_feed": var.need_check_feed}
    if var.var_type in (7, 8, 13):
        flat["shape"] = var.shape
        flat["data_type"] = var.data_type
        if var.var_type in (7, 13):
            flat["lod_level"] = var.lod_level
    return flat
