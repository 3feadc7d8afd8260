"""Paddle Lite 2.13 as the reference for `.nb` models: a side virtual environment and what runs in it.

Paddle Lite's wheel (paddlelite==2.13rc0) exists only for CPython 3.10 and needs numpy<2, so it cannot live in the
test venv. This module builds, once, `~/.cache/nnadapter-bridge/paddlelite-venv-py310` (or
$NNADAPTER_BRIDGE_PADDLELITE_VENV) with pyenv's Python 3.10 and `pip install "numpy<2" paddlelite==2.13rc0
paddlepaddle==2.6.2 flatbuffers`, under an exclusive file lock (pytest-xdist workers and concurrent sessions build
it at most once; a `COMPLETE` marker is written last). Without Python 3.10 the tests that need it FAIL with a
message saying how to get it: they never skip silently.

`run_side(command, args, arrays)` runs tests/support/paddlelite_side.py in that venv (a subprocess, never
imported here); arrays go in and out as .npy files in a temporary directory. On top of it:
  lite_opt(model_file, param_file, out_prefix, meta_version1=False) -> path of the `.nb` Paddle Lite's opt wrote
  lite_run(nb_path or bytes, feeds) -> list of outputs of Paddle Lite's MobileConfig predictor
  ensure_zoo_nb(name) -> the cached `.nb` of a zoo model (~/.cache/nnadapter-bridge/fixtures/nb-2.13rc0/...)
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

PYTHON_VERSION = "3.10.13"
PACKAGES = ("numpy<2", "paddlelite==2.13rc0", "paddlepaddle==2.6.2", "flatbuffers")
LITE_VERSION = "2.13rc0"
_MARKER = "COMPLETE"
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SIDE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paddlelite_side.py")
# Bump when the way fixtures are made changes (opt options, the zoo export), so stale caches are not reused.
NB_BUILD_ID = "x86-v1"


class SideEnvError(RuntimeError):
    """The Paddle Lite side environment cannot be built or a command in it failed."""


HOW_TO_GET_PYTHON = (
    f"the .nb tests compare with Paddle Lite 2.13, whose wheel needs CPython 3.10: install it with pyenv "
    f"(`curl https://pyenv.run | bash; pyenv install {PYTHON_VERSION}`) or point "
    f"NNADAPTER_BRIDGE_PYTHON310 at a python3.10 executable")


def venv_dir() -> str:
    return os.environ.get("NNADAPTER_BRIDGE_PADDLELITE_VENV") or os.path.join(
        os.path.expanduser("~"), ".cache", "nnadapter-bridge", "paddlelite-venv-py310")


def _find_python310() -> list:
    """The command that starts Python 3.10: $NNADAPTER_BRIDGE_PYTHON310, else pyenv's 3.10.13."""
    explicit = os.environ.get("NNADAPTER_BRIDGE_PYTHON310")
    if explicit:
        return [explicit]
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        candidate = os.path.join(os.path.expanduser("~"), ".pyenv", "bin", "pyenv")
        pyenv = candidate if os.path.isfile(candidate) else None
    if pyenv is None:
        raise SideEnvError(f"pyenv not found on PATH nor in ~/.pyenv/bin; {HOW_TO_GET_PYTHON}")
    env = dict(os.environ, PYENV_VERSION=PYTHON_VERSION)
    probe = subprocess.run([pyenv, "exec", "python", "-c", "import sys; print(sys.version_info[:2])"],
                           env=env, capture_output=True, text=True)
    if probe.returncode != 0 or "(3, 10)" not in probe.stdout:
        raise SideEnvError(f"pyenv has no Python {PYTHON_VERSION} ({probe.stderr.strip()[-300:]}); "
                           f"{HOW_TO_GET_PYTHON}")
    # The interpreter itself, so the venv does not depend on PYENV_VERSION later.
    where = subprocess.run([pyenv, "exec", "python", "-c", "import sys; print(sys.executable)"], env=env,
                           capture_output=True, text=True, check=True)
    return [where.stdout.strip()]


def ensure_venv() -> str:
    """The side venv's python, building the venv first if no complete one exists."""
    root = venv_dir()
    python = os.path.join(root, "bin", "python")
    if os.path.isfile(os.path.join(root, _MARKER)):
        return python
    os.makedirs(os.path.dirname(root), exist_ok=True)
    with open(root + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if os.path.isfile(os.path.join(root, _MARKER)):
            return python
        if os.path.exists(root):
            shutil.rmtree(root)  # an interrupted build: start again
        base = _find_python310()
        try:
            subprocess.run(base + ["-m", "venv", root], check=True, capture_output=True, text=True)
            subprocess.run([python, "-m", "pip", "install", "-q", *PACKAGES], check=True, capture_output=True,
                           text=True, timeout=1800)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise SideEnvError(f"building the Paddle Lite venv at {root} failed: {exc.cmd}: "
                               f"{(exc.stderr or '')[-2000:]}") from None
        with open(os.path.join(root, _MARKER), "w") as f:
            f.write("\n".join(PACKAGES) + "\n")
    return python


def run_side(command: str, args: dict, arrays: dict | None = None, timeout: float = 600) -> tuple:
    """Run `paddlelite_side.py command` in the side venv with `args` (JSON) and `arrays` (.npy files).
    Returns (result dict the script printed, list of output arrays in order)."""
    python = ensure_venv()
    with tempfile.TemporaryDirectory(prefix="nb-side-") as work:
        names = []
        for k, (name, array) in enumerate((arrays or {}).items()):
            np.save(os.path.join(work, f"in{k}.npy"), np.asarray(array), allow_pickle=False)
            names.append(name)
        request = dict(args, inputs=names, work=work)
        with open(os.path.join(work, "request.json"), "w") as f:
            json.dump(request, f)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FLAGS_"))}
        env.update(GLOG_minloglevel="3", PYTHONDONTWRITEBYTECODE="1")
        if args.get("meta_version1"):
            env["PADDLE_LITE_MODEL_VERSION1"] = "1"
        proc = subprocess.run([python, _SIDE_SCRIPT, command, work], env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=work)
        result_path = os.path.join(work, "result.json")
        if proc.returncode != 0 or not os.path.isfile(result_path):
            raise SideEnvError(f"Paddle Lite side command {command!r} failed (rc {proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        with open(result_path) as f:
            result = json.load(f)
        outputs = [np.load(os.path.join(work, f"out{k}.npy"), allow_pickle=False)
                   for k in range(result.get("num_outputs", 0))]
    return result, outputs


def lite_opt(model_file: str, param_file: str | None, out_prefix: str, meta_version1: bool = False,
             valid_places: str = "x86") -> str:
    """Paddle Lite's opt on a legacy model (`.pdmodel` + `.pdiparams`, or a `__model__` dir when param_file is
    None) -> `<out_prefix>.nb`."""
    run_side("opt", {"model_file": model_file, "param_file": param_file, "out": out_prefix,
                     "valid_places": valid_places, "meta_version1": meta_version1})
    return out_prefix + ".nb"


def lite_run(nb, feeds: dict, from_buffer: bool = False) -> list:
    """Paddle Lite's MobileConfig predictor on a `.nb` (path, or bytes: written to a temp file and loaded with
    set_model_from_buffer) with `feeds` (name -> array, given by input name) -> outputs in order."""
    if isinstance(nb, (bytes, bytearray)):
        with tempfile.NamedTemporaryFile(suffix=".nb", delete=False) as f:
            f.write(nb)
        try:
            return lite_run(f.name, feeds, from_buffer=True)
        finally:
            os.unlink(f.name)
    _, outputs = run_side("run", {"nb": os.path.abspath(nb), "from_buffer": from_buffer}, feeds)
    return outputs


def nb_fixture_root() -> str:
    root = os.environ.get("NNADAPTER_BRIDGE_NB_FIXTURE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "nnadapter-bridge", "fixtures", f"nb-{LITE_VERSION}")
    os.makedirs(root, exist_ok=True)
    return root


def ensure_nb(key: str, make) -> str:
    """A cached `.nb` built by `make(out_prefix) -> path` once (support.fixture_cache.build_once)."""
    from support.fixture_cache import build_once

    stem = key.split("-")[0] + ".nb"

    def build(staging: str) -> str:
        made = make(os.path.join(staging, stem[:-len(".nb")]))
        if os.path.basename(made) != stem:
            raise SideEnvError(f"fixture {key}: made {made}, expected {stem}")
        return key + "\n"

    return os.path.join(build_once(nb_fixture_root(), key, build), stem)


def lite_export_zoo(name: str, source_model: str, out_dir: str) -> str:
    """Zoo model `name` re-exported by the side venv's paddle 2.6.2 with the weights of `source_model` (our
    cached paddle 3.3.1 export, read by our own loader): Paddle Lite's opt does not read 3.3.1's exports.
    Returns the `.pdmodel` path (its `.pdiparams` beside it)."""
    from nnadapter_bridge.loader import load_model

    params = load_model(source_model).params
    result, _ = run_side("export", {"name": name, "out_dir": out_dir, "repo": _REPO},
                         {k: np.ascontiguousarray(v) for k, v in params.items()})
    return result["model_file"]


def ensure_zoo_nb(name: str, meta_version1: bool = False) -> str:
    """The `.nb` Paddle Lite's opt (x86) makes of zoo model `name`: the cached zoo export, re-exported with
    paddle 2.6.2 (lite_export_zoo), then opt."""
    from support.model_zoo_fixtures import BUILD_ID, zoo_model_path

    source = zoo_model_path(name, "pdmodel")
    key = f"{name}-{BUILD_ID}-{NB_BUILD_ID}" + ("-meta1" if meta_version1 else "")

    def make(prefix):
        model_file = lite_export_zoo(name, source, os.path.join(os.path.dirname(prefix), "paddle262"))
        return lite_opt(model_file, model_file[: -len(".pdmodel")] + ".pdiparams", prefix,
                        meta_version1=meta_version1)

    return ensure_nb(key, make)


SMALL_MODELS = ("fc_net", "embedding_net")


def ensure_small_nb(name: str) -> tuple:
    """(the `.nb` opt makes of paddlelite_side's small program `name`, its paddle 2.6.2 `.pdmodel`)."""
    key = f"{name}-{NB_BUILD_ID}"

    def make(prefix):
        result, _ = run_side("export_small", {"name": name, "out_dir": os.path.dirname(prefix)})
        return lite_opt(result["model_file"], result["param_file"], prefix)

    nb_path = ensure_nb(key, make)
    return nb_path, os.path.join(os.path.dirname(nb_path), name + ".pdmodel")


def ensure_lite_quant_nb(name: str, weight_quantize_type: str) -> tuple:
    """(the `.nb` Paddle Lite's opt (x86) makes of a paddle 2.6.2 post-training quantization of zoo model `name`,
    Paddle Inference's output of that quantized model on lite_quant_input()). opt turns the fake quant ops into
    Paddle Lite's own int8 form: `enable_int8` convs and matmuls with Input0_scale / Filter0_scale / Output0_scale
    attributes and a `calib` op quantizing the image. (Paddle Lite 2.13rc0's x86 build runs such a file into
    NaN, so Paddle Inference on the quantized source is the reference.)"""
    from support.model_zoo_fixtures import BUILD_ID

    float_nb = ensure_zoo_nb(name)
    source = os.path.join(os.path.dirname(float_nb), "paddle262", f"{name}.pdmodel")
    tag = "channel" if weight_quantize_type == "channel_wise_abs_max" else "layer"
    key = f"{name}-{BUILD_ID}-{NB_BUILD_ID}-ptq-{tag}"

    def make(prefix):
        out_dir = os.path.join(os.path.dirname(prefix), "paddle262_ptq")
        result, outputs = run_side(
            "ptq",
            {
                "model_file": source,
                "param_file": source[: -len(".pdmodel")] + ".pdiparams",
                "out_dir": out_dir,
                "weight_quantize_type": weight_quantize_type,
                "input_name": "x",
            },
            {"x": lite_quant_input()},
        )
        np.save(os.path.join(os.path.dirname(prefix), "paddle_inference.npy"), outputs[0], allow_pickle=False)
        return lite_opt(result["model_file"], result["param_file"], prefix)

    nb_path = ensure_nb(key, make)
    return nb_path, np.load(os.path.join(os.path.dirname(nb_path), "paddle_inference.npy"), allow_pickle=False)


def lite_quant_input() -> np.ndarray:
    return np.random.default_rng(7).standard_normal((1, 3, 224, 224)).astype(np.float32)
