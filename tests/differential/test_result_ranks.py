"""Result ranks of legacy programs, per layout and per exporting paddle version (docs/result_ranks.md).

rank_programs.py builds one legacy program holding the op families issue 28 names (unary math, clip, logical
ops, shrink, elu, leaky_relu, hard_sigmoid, cast, assign, conditional_block and while outputs) on 0-d feeds,
a 0-d and a [1] parameter, with paddle 3.3.1 (FLAGS_enable_pir_api=0, the families its legacy mode builds) and
with paddle 2.6.2 (the Python 3.10 side venv, all of them), each saved as model.pdmodel + model.pdiparams and
as __model__ + one file per parameter. Each of the four programs runs on Paddle Inference 3.3.1 and on our
predictor (builtin_device), fed 0-d and then [1]: every output must have Paddle's shape, dtype and values.
The programs are cached under the fixture root, keyed by rank_programs.py's content. (The same rule for every
op type, in legacy and PIR programs of both versions, is held by the differential tester's sweep.)
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from differential import runner
from support.converter_harness import paddle_inference_run

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "rank_programs.py")
VERSIONS = ("3.3.1", "2.6.2")
LAYOUTS = ("combined", "separate")


def _programs(version: str) -> str:
    """The directory of `version`'s programs (built once, under a lock, marked COMPLETE last)."""
    from support.model_zoo_fixtures import fixture_root

    with open(SCRIPT, "rb") as f:
        key = hashlib.sha1(f.read()).hexdigest()[:12]
    final = os.path.join(fixture_root(), f"result-ranks-{key}-paddle{version}")
    if os.path.isfile(os.path.join(final, "COMPLETE")):
        return final
    with open(final + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(final, "COMPLETE")):
            return final
        shutil.rmtree(final, ignore_errors=True)
        staging = tempfile.mkdtemp(prefix=os.path.basename(final) + "-", dir=os.path.dirname(final))
        if version == "2.6.2":
            from support.paddlelite_env import ensure_venv

            python = ensure_venv()
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FLAGS_"))}
        else:
            import sys

            python, env = sys.executable, dict(os.environ, FLAGS_enable_pir_api="0")
        proc = subprocess.run([python, SCRIPT, staging], env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(f"rank_programs.py with paddle {version} failed: {proc.stderr[-1500:]}")
        with open(os.path.join(staging, "COMPLETE"), "w") as f:
            f.write(version + "\n")
        os.rename(staging, final)
    return final


def _ours(directory: str, layout: str, feeds: dict) -> list:
    import warnings

    import nnadapter_bridge as nb

    config = nb.Config()
    if layout == "separate":
        config.set_model_dir(os.path.join(directory, layout))
    else:
        config.set_model_file(os.path.join(directory, layout, "model.pdmodel"))
        config.set_param_file(os.path.join(directory, layout, "model.pdiparams"))
    config.set_nnadapter_device_names(["builtin_device"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        predictor = nb.create_predictor(config)
        try:
            for name in predictor.get_input_names():
                predictor.get_input_by_name(name).from_numpy(feeds[name])
            predictor.run()
            return [predictor.get_output(k).numpy() for k in range(len(predictor.get_output_names()))]
        finally:
            predictor.close()


def _paddle(directory: str, layout: str, feeds: dict) -> list:
    if layout == "separate":
        return paddle_inference_run(os.path.join(directory, layout), None, feeds)
    return paddle_inference_run(os.path.join(directory, layout, "model.pdmodel"),
                                os.path.join(directory, layout, "model.pdiparams"), feeds)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fed", ["0-d", "[1]"])
def test_legacy_results_have_paddle_inference_ranks(version, layout, fed):
    pytest.importorskip("paddle")
    directory = _programs(version)
    with np.load(os.path.join(directory, "feeds.npz")) as data:
        feeds = {name: data[name] for name in data.files}
    if fed == "[1]":
        feeds = {name: array.reshape(1) for name, array in feeds.items()}
    want = _paddle(directory, layout, feeds)
    got = _ours(directory, layout, feeds)
    assert len(got) == len(want) >= 12  # the families paddle 3.3.1's legacy mode builds, at least
    problems = [f"output {k}: {runner.judge(np.asarray(g), np.asarray(w))}" for k, (g, w) in enumerate(zip(got, want))
                if runner.judge(np.asarray(g), np.asarray(w))[0]]
    assert not problems, f"paddle {version}, {layout}, fed {fed}:\n" + "\n".join(problems)
    if fed == "0-d":  # the families keep 0-d results (x * w1 broadcasts to [1])
        assert sum(1 for w in want if np.ndim(w) == 0) >= len(want) - 1
