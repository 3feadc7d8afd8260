"""The test fixture cache removes the builds a new build supersedes (support/fixture_cache.py): on a CI machine whose
cache outlives its runs, every change of a key used to leave a side venv or a model export behind until the disk
filled."""
from __future__ import annotations

import fcntl
import os

from support.fixture_cache import MARKER, build_once


def _build(text: str):
    def build(staging: str) -> str:
        with open(os.path.join(staging, "data"), "w") as f:
            f.write(text)
        return text
    return build


def test_a_new_build_removes_what_it_supersedes_and_nothing_else(tmp_path):
    root = str(tmp_path)
    old = build_once(root, "model-aaaa", _build("old"))
    other = build_once(root, "model2-aaaa", _build("other model"))
    assert os.path.isfile(os.path.join(old, MARKER))
    new = build_once(root, "model-bbbb", _build("new"), supersedes=lambda entry: entry.rsplit("-", 1)[0] == "model")
    assert sorted(e for e in os.listdir(root) if not e.startswith(".")) == ["model-bbbb", "model2-aaaa"]
    assert open(os.path.join(new, "data")).read() == "new" and os.path.isdir(other)
    assert not os.path.exists(os.path.join(root, ".model-aaaa.lock"))


def test_an_entry_being_built_elsewhere_is_left_alone(tmp_path):
    root = str(tmp_path)
    build_once(root, "venv-aaaa", _build("old"))
    with open(os.path.join(root, ".venv-aaaa.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process holds it
        build_once(root, "venv-bbbb", _build("new"), supersedes=lambda entry: entry.startswith("venv-"))
    assert os.path.isdir(os.path.join(root, "venv-aaaa")) and os.path.isdir(os.path.join(root, "venv-bbbb"))


def test_a_real_zoo_venv_of_another_python_is_not_superseded(tmp_path):
    """Two interpreters (pyenv's and the system's) build two real-zoo venvs; each build must keep the other's."""
    import sys

    from support.real_zoo.env import superseded_venv

    def venv(name: str, version: str) -> str:
        path = tmp_path / name
        path.mkdir()
        (path / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {version}\n")
        return str(path)

    this = sys.version.split()[0]
    assert superseded_venv(venv("real-zoo-venv-older", this))
    assert not superseded_venv(venv("real-zoo-venv-other", "3.9.0" if this != "3.9.0" else "3.10.0"))
    assert not superseded_venv(venv("paddlelite-venv-py310", this))
    (tmp_path / "real-zoo-venv-broken").mkdir()
    assert not superseded_venv(str(tmp_path / "real-zoo-venv-broken"))
