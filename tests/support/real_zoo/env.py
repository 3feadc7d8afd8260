"""The real-architecture zoo's side venv and the cached models built in it.

The official model-zoo packages (paddleclas 2.6, paddleseg 2.8, paddledet 2.6, paddlenlp 2.8.1, paddlex 3.7) pin old
dependencies (numpy<1.24, opencv<=4.6, gast 0.3.3, visualdl, faiss...) that cannot live in the project's venv. They
go in a side venv, built once per machine under ~/.cache/nnadapter-bridge/real-zoo-venv-<hash of the requirement
lists> (or $NNADAPTER_BRIDGE_REAL_ZOO_VENV) with the same Python as the project's venv: paddlepaddle 3.3.1 with
numpy<2 and exactly the modules the architectures' imports need (REQUIREMENTS), then the zoo packages with
`--no-deps` (ZOO_PACKAGES). Built under an exclusive file lock (support.fixture_cache.build_once), so concurrent
pytest workers and sessions build it at most once.

`ensure_model(name)` runs build_model.py in that venv and caches the export in
~/.cache/nnadapter-bridge/fixtures/real-zoo/<name>-<build id>/ (or under $NNADAPTER_BRIDGE_REAL_ZOO_DIR); the build
id hashes the requirement lists, the builder and the catalog, so a change of any of them rebuilds. Nothing is
downloaded at build time but the venv's packages: the models are made with pretrained=False.

Imports only the standard library and support.fixture_cache; never imports paddle or the zoo packages (they
live in the side venv; build_model.py runs there as a subprocess).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

from support.fixture_cache import build_once
from support.real_zoo.catalog import MODELS

HERE = os.path.dirname(os.path.abspath(__file__))
BUILDER = os.path.join(HERE, "build_model.py")

# Installed with their dependencies: paddle, and what the architecture modules' imports need (found by importing
# them: opencv, scikit-learn and six for paddleseg's utils; pycocotools for ppdet's heads; colorlog, packaging,
# filelock, pandas, prettytable for paddlex's modeling; huggingface_hub, aistudio-sdk, jieba, sentencepiece, regex,
# jinja2 for paddlenlp's transformers; requests, tqdm, pyyaml for all of them). huggingface_hub and aistudio-sdk
# are held at the API paddlenlp 2.8.1 imports (huggingface_hub 0.26 dropped repo_type_and_id_from_hf_id,
# aistudio-sdk 0.3 moved hub.download).
REQUIREMENTS = (
    "paddlepaddle==3.3.1", "numpy<2", "requests==2.34.2", "tqdm==4.70.1", "pyyaml==6.0.4",
    "opencv-python-headless==4.11.0.86", "scikit-learn==1.9.1", "six==1.17.0", "pycocotools==2.0.11",
    "colorlog==6.12.0", "packaging==26.4", "filelock==4.3.1", "pandas==3.0.6", "prettytable==3.18.0",
    "huggingface_hub==0.25.2", "aistudio-sdk==0.2.6", "jieba==0.42.1", "sentencepiece==0.2.3",
    "regex==2026.11.19", "jinja2==3.1.6",
)
# Installed with --no-deps: their declared pins would downgrade numpy and pull training-only stacks.
ZOO_PACKAGES = ("paddleclas==2.6.0", "paddleseg==2.8.0", "paddledet==2.6.0", "paddlenlp==2.8.1", "paddlex==3.7.2")

BUILD_TIMEOUT_S = 900


class RealZooError(RuntimeError):
    """The side venv cannot be built, or a model cannot be built in it."""


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:12]


def requirements_hash() -> str:
    return _digest(sys.version.split()[0].encode(), *[r.encode() for r in REQUIREMENTS + ("--no-deps",) + ZOO_PACKAGES])


def cache_root() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "nnadapter-bridge")


def venv_dir() -> str:
    return os.environ.get("NNADAPTER_BRIDGE_REAL_ZOO_VENV") or os.path.join(
        cache_root(), f"real-zoo-venv-{requirements_hash()}")


def _run(command: list, what: str, timeout: float) -> None:
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)
    except subprocess.CalledProcessError as exc:
        raise RealZooError(f"{what} failed (rc {exc.returncode}): {' '.join(exc.cmd)}\n"
                           f"{(exc.stdout or '')[-1500:]}\n{(exc.stderr or '')[-3000:]}") from None
    except subprocess.TimeoutExpired:
        raise RealZooError(f"{what} did not finish in {timeout:.0f} s: {' '.join(command)}") from None


def _venv_python_version(venv: str) -> str | None:
    """The Python version a venv was made with (its pyvenv.cfg's `version`), None when it cannot be read."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    return value.strip()
    except OSError:
        pass
    return None


def superseded_venv(path: str) -> bool:
    """Whether the entry at `path` is a real-zoo venv that a new one for this interpreter replaces: one made with the
    same Python version (a venv of another Python is another interpreter's, kept)."""
    return (os.path.basename(path).startswith("real-zoo-venv-")
            and _venv_python_version(path) == sys.version.split()[0])


def ensure_venv() -> str:
    """The side venv's python, building the venv first if no complete one exists."""
    root = venv_dir()
    if os.environ.get("NNADAPTER_BRIDGE_REAL_ZOO_VENV"):  # a venv the user made: used as it is
        python = os.path.join(root, "bin", "python")
        if not os.path.isfile(python):
            raise RealZooError(f"NNADAPTER_BRIDGE_REAL_ZOO_VENV={root} has no bin/python")
        return python

    def build(staging: str) -> str:
        # The interpreter the project's venv runs on (venvs are not relocatable: build in place, see below).
        base = getattr(sys, "_base_executable", None) or sys.executable
        _run([base, "-m", "venv", staging], "creating the real-zoo venv", 300)
        python = os.path.join(staging, "bin", "python")
        _run([python, "-m", "pip", "install", "-q", *REQUIREMENTS], "installing the real-zoo requirements", 1800)
        _run([python, "-m", "pip", "install", "-q", "--no-deps", *ZOO_PACKAGES], "installing the zoo packages", 900)
        return "\n".join(REQUIREMENTS + ("--no-deps",) + ZOO_PACKAGES) + "\n"

    # A venv records its own path in its scripts and pyvenv.cfg, so it is built where it will live: build_once's
    # staging directory is renamed into place, which leaves `bin/python` (a symlink to the base interpreter) and
    # `python -m pip` working; the console scripts' shebangs (unused here) keep the staging path.
    # A venv of other requirements on the same Python is an older build (1.5 GB): removed once this one is built. One
    # of another Python version is kept: with two interpreters in use (pyenv's and the system's) each build would
    # otherwise remove the other's venv.
    final = build_once(os.path.dirname(root), os.path.basename(root), build,
                       supersedes=lambda entry: superseded_venv(os.path.join(os.path.dirname(root), entry)))
    return os.path.join(final, "bin", "python")


def model_build_id() -> str:
    """Changes with the venv's requirements, the builder script and the catalog."""
    with open(BUILDER, "rb") as f:
        builder = f.read()
    with open(os.path.join(HERE, "catalog.py"), "rb") as f:
        catalog = f.read()
    return _digest(requirements_hash().encode(), builder, catalog)


def models_root() -> str:
    root = os.environ.get("NNADAPTER_BRIDGE_REAL_ZOO_DIR") or os.path.join(cache_root(), "fixtures", "real-zoo")
    os.makedirs(root, exist_ok=True)
    return root


def ensure_model(name: str) -> str:
    """The directory of `name`'s export (`<name>.json`, `<name>.pdiparams`, feeds.json, build.json), building it
    in the side venv first if no complete copy exists."""
    if name not in MODELS:
        raise RealZooError(f"unknown real-zoo model {name!r}; known: {', '.join(MODELS)}")
    python = ensure_venv()

    def build(staging: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FLAGS_"))}
        env.update(GLOG_minloglevel="3", PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="ignore")
        started = time.monotonic()
        try:
            proc = subprocess.run([python, BUILDER, name, staging], env=env, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S, cwd=staging)
        except subprocess.TimeoutExpired:
            raise RealZooError(f"building real-zoo model {name} took over {BUILD_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            raise RealZooError(f"building real-zoo model {name} failed (rc {proc.returncode}):\n"
                               f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        with open(os.path.join(staging, "build.json"), "w") as f:
            json.dump({"model": name, "build_seconds": round(time.monotonic() - started, 1),
                       "build_id": model_build_id(), "log": proc.stderr[-2000:]}, f, indent=1)
        return model_build_id() + "\n"

    # The same model under another build id (the id has no '-') is an older export: removed once this one is built.
    return build_once(models_root(), f"{name}-{model_build_id()}", build,
                      supersedes=lambda entry: entry.rsplit("-", 1)[0] == name)


def model_path(name: str) -> str:
    """Path of `name`'s PIR program (`.json`; its `.pdiparams` beside it)."""
    return os.path.join(ensure_model(name), f"{name}.json")


def feeds_spec(name: str) -> list:
    """feeds.json's inputs of `name`: [{name, declared, shape, dtype, low, high}]."""
    with open(os.path.join(ensure_model(name), "feeds.json")) as f:
        return json.load(f)["inputs"]


if __name__ == "__main__":  # `python -m support.real_zoo.env [NAME...]` from tests/: build the venv (and models)
    print("real-zoo side venv:", ensure_venv())
    for model in sys.argv[1:]:
        print(model, model_path(model))
