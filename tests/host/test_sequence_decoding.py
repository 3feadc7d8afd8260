"""CRF decoding of NLP taggers on the host (nnadapter_bridge/host/kernels/k_sequence.py) against Paddle:
viterbi_decode from a PIR program (paddle.text.viterbi_decode, as PaddleNLP's lexical analysis exports it) and the
legacy crf_decoding from an OpDesc program Paddle's executor runs, through the predictor with a device named (both
ops go to the host)."""
from __future__ import annotations

import numpy as np
import pytest

from support.converter_harness import opdesc_program, pir_program, run_predictor

pytestmark = pytest.mark.filterwarnings("ignore::nnadapter_bridge.subgraph.plan.HostPlacementWarning")


def _viterbi_feeds(seed: int, ties: bool):
    rng = np.random.default_rng(seed)
    batch, steps, tags = 3, 6, 5
    potentials = rng.standard_normal((batch, steps, tags)).astype(np.float32)
    if ties:  # integer scores: many equal sums, where the first maximum must win
        potentials = np.round(potentials)
    lengths = np.array([6, 3, 1], np.int64)
    return {"potentials": potentials, "lengths": lengths}


@pytest.mark.parametrize("include_bos_eos_tag", [True, False])
@pytest.mark.parametrize("ties", [False, True])
def test_viterbi_decode_matches_paddle(tmp_path, include_bos_eos_tag, ties):
    feeds = _viterbi_feeds(3, ties)
    rng = np.random.default_rng(4)
    transition = rng.standard_normal((5, 5)).astype(np.float32)
    if ties:
        transition = np.round(transition)

    def build(potentials, lengths):
        import paddle
        weights = paddle.assign(transition)
        scores, path = paddle.text.viterbi_decode(potentials * 1.0, weights, lengths, include_bos_eos_tag)
        return [scores, path]
    saved = pir_program(tmp_path, build, feeds)
    scores, path = run_predictor(saved, "builtin_device")
    np.testing.assert_allclose(scores, saved.outputs[0], rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(path, saved.outputs[1])


def test_viterbi_decode_rejects_an_empty_sequence():
    from nnadapter_bridge.host.kernels import HOST_KERNELS, OpScope
    from nnadapter_bridge.host.kernels.registry import HostKernelError
    from nnadapter_bridge.loader.program import OpInfo

    op = OpInfo("viterbi_decode", 0, 0, {"Input": ["p"], "Transition": ["t"], "Length": ["l"]},
                {"Scores": ["s"], "Path": ["path"]}, {"include_bos_eos_tag": True}, {})
    scope = {"p": np.zeros((2, 3, 4), np.float32), "t": np.zeros((4, 4), np.float32), "l": np.array([3, 0])}
    with pytest.raises(HostKernelError, match=r"Length \[3, 0\] must lie in \[1, 3\]"):
        HOST_KERNELS["viterbi_decode"].fn(OpScope(op, scope))


@pytest.mark.parametrize("length_shape", ["[B]", "[B, 1]"])
@pytest.mark.parametrize("with_label", [False, True])
def test_crf_decoding_matches_paddle(tmp_path, length_shape, with_label):
    rng = np.random.default_rng(5)
    batch, steps, tags = 3, 5, 4
    lengths = np.array([5, 2, 1], np.int64)
    feeds = {"emission": rng.standard_normal((batch, steps, tags)).astype(np.float32),
             "length": lengths if length_shape == "[B]" else lengths.reshape(batch, 1)}
    inputs = {"Emission": ["emission"], "Transition": ["transition"], "Length": ["length"]}
    if with_label:
        feeds["label"] = rng.integers(0, tags, (batch, steps)).astype(np.int64)
        inputs["Label"] = ["label"]
    saved = opdesc_program(tmp_path, "crf_decoding", inputs=inputs, outputs={"ViterbiPath": ["path"]}, feeds=feeds,
                           params={"transition": rng.standard_normal((tags + 2, tags)).astype(np.float32)},
                           extra_vars=[{"name": "path", "dtype": "int64", "shape": [-1, -1]}])
    (path,) = run_predictor(saved, "builtin_device")
    np.testing.assert_array_equal(path, saved.outputs[0])
