"""Host kernels for sequence, speech, CTR and matching ops (row_conv, im2sequence, ctc_align, edit_distance,
chunk_eval, cvm, bipartite_match, interp_antialias) against Paddle: each program is built with Paddle's API (PIR
static mode, or the legacy static mode where only that builds the op), saved, loaded with our loader and run op by
op on the host kernels, and compared with Paddle Inference on the saved program. Ops whose LoD form Paddle reads a
LoD for get their reference from Paddle Inference with the LoD of one sequence set on the feed; the host carries no
LoD and takes such inputs as one sequence.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.host.kernels.registry import HostKernelError
from support.converter_harness import paddle_inference_run, pir_program, static_program
from support.host_kernel_check import check, run_on_host

RNG = np.random.default_rng(31)


def paddle_with_lod(saved, lods: dict) -> list:
    """Paddle Inference on `saved` with a LoD set on the feeds named in `lods`."""
    return paddle_inference_run(saved.model_path, saved.params_path, saved.feeds, lods)


# -- interp_antialias -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_interp_antialias(tmp_path, dtype):
    import paddle.nn.functional as F

    x = RNG.standard_normal((2, 3, 11, 13)).astype(dtype)
    x[1, 2, 4, 5] = np.inf  # reaches only the outputs whose support holds it

    def build(x):
        outs = []
        for mode in ("bilinear", "bicubic"):
            outs += [F.interpolate(x, size=[4, 5], mode=mode, antialias=True),  # downscale: a widened filter
                     F.interpolate(x, size=[17, 6], mode=mode, antialias=True),  # up along H, down along W
                     F.interpolate(x, size=[1, 13], mode=mode, antialias=True),  # one row; W unchanged
                     F.interpolate(x, size=[5, 20], mode=mode, antialias=True, align_corners=True),
                     F.interpolate(x, size=[1, 1], mode=mode, antialias=True, align_corners=True),
                     F.interpolate(x, scale_factor=0.4, mode=mode, antialias=True),  # ratio 1 / 0.4, not 11 / 4
                     F.interpolate(x, scale_factor=[1.7, 0.3], mode=mode, antialias=True)]
        return outs

    check(pir_program(tmp_path, build, {"x": x}), {"interp_antialias"}, exact=True)


def test_interp_antialias_nhwc_and_tensor_sizes(tmp_path):
    import paddle
    import paddle.nn.functional as F

    x = RNG.standard_normal((1, 9, 14, 2)).astype(np.float32)
    size = np.array([4, 6], np.int32)
    scale = np.array([0.45], np.float32)

    def build(x, s, f):
        nchw = paddle.transpose(x, [0, 3, 1, 2])
        return [F.interpolate(x, size=[3, 5], mode="bilinear", antialias=True, data_format="NHWC"),
                F.interpolate(x, scale_factor=0.5, mode="bicubic", antialias=True, data_format="NHWC"),
                F.interpolate(nchw, size=s, mode="bilinear", antialias=True),  # out_size
                F.interpolate(nchw, size=[s[0], 7], mode="bicubic", antialias=True),  # size_tensor
                F.interpolate(nchw, scale_factor=f, mode="bilinear", antialias=True)]  # scale_tensor

    check(pir_program(tmp_path, build, {"x": x, "s": size, "f": scale}), {"interp_antialias"}, exact=True)


def test_interp_antialias_rejects_uint8(tmp_path):
    import paddle.nn.functional as F

    feeds = {"x": np.zeros((1, 1, 6, 6), np.uint8)}
    saved = pir_program(tmp_path, lambda x: F.interpolate(x, size=[3, 3], mode="bilinear", antialias=True), feeds,
                        run_paddle=False)
    with pytest.raises(HostKernelError, match="interp_antialias.*uint8"):
        run_on_host(saved)


# -- ctc_align --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_ctc_align_padded(tmp_path, dtype):
    import paddle

    tokens = np.array([[-1, -1, 1, 0, 1, 1, 2],  # a leading -1 repeats Paddle's initial "previous" token: dropped
                       [3, 3, 0, 3, 0, 0, 5],
                       [0, 0, 0, 0, 0, 0, 0],  # all blank: nothing left
                       [4, 4, 4, 1, 3, 3, 0]], dtype)
    lengths = np.array([[7], [5], [3], [0]], dtype)

    def build(x, n):
        return [*paddle._C_ops.ctc_align(x, n, 0, True, -7), *paddle._C_ops.ctc_align(x, n, 3, False, 0),
                *paddle._C_ops.ctc_align(x, n, 4, True, 9)]

    check(pir_program(tmp_path, build, {"x": tokens, "n": lengths}), {"ctc_align"})


def test_ctc_align_compares_the_blank_in_32_bits(tmp_path):
    import paddle

    tokens = np.array([[2 ** 32, 2 ** 32 + 1, 1, 5, 2 ** 32 + 5]], np.int64)  # 2**32 is the blank 0 to Paddle
    lengths = np.array([[5]], np.int64)
    check(pir_program(tmp_path, lambda x, n: list(paddle._C_ops.ctc_align(x, n, 0, True, 0)),
                      {"x": tokens, "n": lengths}), {"ctc_align"})


@pytest.mark.parametrize("tokens", [[0, 1, 1, 0, 2, 2, 0, 2], [0, 0, 0]])
def test_ctc_align_one_sequence(tmp_path, tokens):
    """The LoD form as one sequence; nothing left gives [[-1]]."""
    import paddle

    x = np.array(tokens, np.int32).reshape(-1, 1)
    saved = pir_program(tmp_path, lambda x: paddle._C_ops.ctc_align(x, None, 0, True, 0)[0], {"x": x},
                        run_paddle=False)
    check(saved, {"ctc_align"}, want=paddle_with_lod(saved, {"x": [[0, x.shape[0]]]}))


def test_ctc_align_rejects_lengths_past_the_row(tmp_path):
    import paddle

    feeds = {"x": np.zeros((2, 3), np.int32), "n": np.array([[3], [4]], np.int32)}
    saved = pir_program(tmp_path, lambda x, n: paddle._C_ops.ctc_align(x, n, 0, True, 0)[0], feeds,
                        run_paddle=False)
    with pytest.raises(HostKernelError, match=r"ctc_align.*InputLength \[3, 4\] must lie in \[0, 3\]"):
        run_on_host(saved)


# -- edit_distance ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("normalized", [False, True])
def test_edit_distance_padded(tmp_path, normalized):
    import paddle

    hyps = RNG.integers(0, 4, (6, 9)).astype(np.int64)
    refs = RNG.integers(0, 4, (6, 7)).astype(np.int64)
    refs[2, :5] = hyps[2, :5]  # identical pair: 0
    hyp_lengths = np.array([9, 0, 5, 4, 1, 7], np.int64)  # an empty hypothesis: the reference's length
    ref_lengths = np.array([7, 3, 5, 1, 6, 2], np.int64)
    if not normalized:
        ref_lengths[3] = 0  # an empty reference: the hypothesis's length (normalized needs none empty)

    def build(h, r, hl, rl):
        return list(paddle._C_ops.edit_distance(h, r, hl, rl, normalized))

    check(pir_program(tmp_path, build, {"h": hyps, "r": refs, "hl": hyp_lengths, "rl": ref_lengths}),
          {"edit_distance"})


def test_edit_distance_one_sequence(tmp_path):
    import paddle

    hyps = RNG.integers(0, 3, (11, 1)).astype(np.int64)
    refs = RNG.integers(0, 3, (8, 1)).astype(np.int64)
    saved = pir_program(tmp_path, lambda h, r: list(paddle._C_ops.edit_distance(h, r, None, None, True)),
                        {"h": hyps, "r": refs}, run_paddle=False)
    check(saved, {"edit_distance"}, want=paddle_with_lod(saved, {"h": [[0, 11]], "r": [[0, 8]]}))


def test_edit_distance_normalized_rejects_an_empty_reference(tmp_path):
    import paddle

    feeds = {"h": np.ones((2, 3), np.int64), "r": np.ones((2, 3), np.int64), "hl": np.array([3, 2], np.int64),
             "rl": np.array([3, 0], np.int64)}
    saved = pir_program(tmp_path, lambda h, r, hl, rl: paddle._C_ops.edit_distance(h, r, hl, rl, True)[1], feeds,
                        run_paddle=False)
    with pytest.raises(HostKernelError, match="edit_distance.*reference string 2 is empty"):
        run_on_host(saved)


# -- chunk_eval -------------------------------------------------------------------------------------------------
CHUNK_TAG_TYPES = {"IOB": 2, "IOE": 2, "IOBES": 4, "plain": 1}


def _every_label_pair(symbols: int) -> np.ndarray:
    """A de Bruijn sequence of order 2 over range(symbols): every ordered pair of labels follows once."""
    out, visited = [0], set()
    while len(visited) < symbols * symbols:
        for nxt in range(symbols - 1, -1, -1):  # Martin's greedy: the largest symbol that makes a new pair
            if (out[-1], nxt) not in visited:
                visited.add((out[-1], nxt))
                out.append(nxt)
                break
        else:
            raise AssertionError(f"no new label pair after {out[-1]}")
    return np.array(out, np.int64)


@pytest.mark.parametrize("scheme", sorted(CHUNK_TAG_TYPES))
def test_chunk_eval_every_tag_transition(tmp_path, scheme):
    """Every (previous label, label) pair of two chunk types and the outside label, so every branch of Paddle's
    ChunkBegin / ChunkEnd decides somewhere."""
    import paddle

    top = 2 * CHUNK_TAG_TYPES[scheme]
    label = _every_label_pair(top + 1)
    inference = np.roll(label, 1)
    inference[::5] = label[::5]
    lengths = np.array([label.size, label.size - 3], np.int64)
    feeds = {"i": np.stack([inference, label]), "lab": np.stack([label, inference[::-1]]), "n": lengths}

    def build(i, lab, n):
        return list(paddle._C_ops.chunk_eval(i, lab, n, 2, scheme, []))

    check(pir_program(tmp_path, build, feeds), {"chunk_eval"})


@pytest.mark.parametrize("scheme", sorted(CHUNK_TAG_TYPES))
def test_chunk_eval_padded(tmp_path, scheme):
    import paddle

    chunk_types = 3
    top = chunk_types * CHUNK_TAG_TYPES[scheme]  # the "outside" label
    label = RNG.integers(0, top + 1, (5, 12)).astype(np.int64)
    inference = np.where(RNG.random(label.shape) < 0.75, label, RNG.integers(0, top + 1, label.shape))
    inference[4, :3] = -1  # Paddle reads negative labels too (C's division: type 0, tag -1)
    lengths = np.array([12, 7, 0, 1, 12], np.int64)

    def build(i, lab, n):
        return [*paddle._C_ops.chunk_eval(i, lab, n, chunk_types, scheme, []),
                *paddle._C_ops.chunk_eval(i, lab, n, chunk_types, scheme, [1]),
                *paddle._C_ops.chunk_eval(i[:, :, None], lab[:, :, None], n, chunk_types, scheme, [0, 2])]

    check(pir_program(tmp_path, build, {"i": inference, "lab": label, "n": lengths}), {"chunk_eval"})


def test_chunk_eval_one_sequence_and_no_chunks(tmp_path):
    import paddle

    label = np.array([0, 1, 1, 4, 2, 3, 4, 4, 0, 0, 1], np.int64).reshape(-1, 1)
    inference = np.array([0, 1, 4, 4, 2, 3, 4, 0, 1, 0, 1], np.int64).reshape(-1, 1)
    outside = np.full_like(label, 4)

    def build(i, lab, o):
        return [*paddle._C_ops.chunk_eval(i, lab, None, 2, "IOB", []),
                *paddle._C_ops.chunk_eval(o, o, None, 2, "IOB", [])]  # no chunk anywhere: every ratio 0

    saved = pir_program(tmp_path, build, {"i": inference, "lab": label, "o": outside}, run_paddle=False)
    lod = [[0, label.shape[0]]]
    check(saved, {"chunk_eval"}, want=paddle_with_lod(saved, {"i": lod, "lab": lod, "o": lod}))


def test_chunk_eval_rejects_a_label_past_the_outside_tag(tmp_path):
    import paddle

    feeds = {"i": np.zeros((1, 3), np.int64), "lab": np.array([[0, 5, 1]], np.int64), "n": np.array([3], np.int64)}
    saved = pir_program(tmp_path, lambda i, lab, n: paddle._C_ops.chunk_eval(i, lab, n, 2, "IOB", [])[0], feeds,
                        run_paddle=False)
    with pytest.raises(HostKernelError, match=r"chunk_eval.*Label holds 5, above 2 chunk types x 2 tag types = 4"):
        run_on_host(saved)


# -- cvm --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cvm(tmp_path, dtype):
    import paddle

    x = RNG.uniform(0, 20, (6, 5)).astype(dtype)
    x[1, :2] = [0, 0]  # log(1) = 0
    x[2, :2] = [-1, 3]  # log(0) = -inf, and the click column inf
    x[3, :2] = [5, -2]  # log of a negative: NaN
    counts = np.ones((6, 2), dtype)

    def build(x, c):
        return [paddle._C_ops.cvm(x, c, True), paddle._C_ops.cvm(x, c, False)]

    check(pir_program(tmp_path, build, {"x": x, "c": counts}), {"cvm"})


# -- bipartite_match --------------------------------------------------------------------------------------------
def _match_build(x):
    import paddle

    match = paddle._C_ops.bipartite_match
    return [*match(x, "bipartite", 0.5), *match(x, "per_prediction", 0.3)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bipartite_match(tmp_path, dtype):
    dist = np.round(RNG.uniform(0, 1, (7, 11)), 1).astype(dtype)  # ties: the first in column-major order wins
    dist[0, :3] = [5e-7, 1e-6, np.nan]  # below 1e-6 and NaN never match; 1e-6 (as the dtype) does
    dist[3] = 0.95
    dist[:, 10] = 0
    check(pir_program(tmp_path, _match_build, {"x": dist}), {"bipartite_match"})


@pytest.mark.parametrize("rows", [0, 1])
def test_bipartite_match_few_rows(tmp_path, rows):
    dist = RNG.uniform(0, 1, (rows, 5)).astype(np.float32)
    check(pir_program(tmp_path, _match_build, {"x": dist}), {"bipartite_match"})


@pytest.mark.parametrize("ties", [False, True])
def test_bipartite_match_sorted_pairs(tmp_path, ties):
    """From 130 rows Paddle walks the pairs in std::sort's order: equal distances in introsort's order, a match only
    for a distance > 0 (no 1e-6 floor), and NaN upsetting the sort."""
    dist = RNG.uniform(-0.2, 1, (140, 24)).astype(np.float32)
    if ties:
        dist = np.round(dist, 1)
        dist[5, :4] = [np.nan, 5e-7, np.nan, 0.9]
    check(pir_program(tmp_path, _match_build, {"x": dist}), {"bipartite_match"})


@pytest.mark.parametrize("rows", [3, 130])
def test_bipartite_match_tiny_distances(tmp_path, rows):
    """Below 130 rows a distance under 1e-6 never matches (1e-6 itself does); from 130 rows any distance > 0 does."""
    dist = np.zeros((rows, 3), np.float32)
    dist[0, 0], dist[1, 1], dist[2, 2] = 5e-7, 1e-6, 2e-7
    check(pir_program(tmp_path, _match_build, {"x": dist}), {"bipartite_match"})


def test_bipartite_match_one_instance(tmp_path):
    dist = np.round(RNG.uniform(0, 1, (4, 6)), 1).astype(np.float32)
    saved = pir_program(tmp_path, _match_build, {"x": dist}, run_paddle=False)
    check(saved, {"bipartite_match"}, want=paddle_with_lod(saved, {"x": [[0, 4]]}))


# -- im2sequence ------------------------------------------------------------------------------------------------
def test_im2sequence(tmp_path):
    import paddle

    x = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)

    def build(x):
        im2seq = paddle._C_ops.im2sequence
        return [im2seq(x, None, [2, 2], [1, 1], [0, 0, 0, 0], [1, 1]),
                im2seq(x, None, [3, 2], [2, 3], [1, 0, 2, 1], [1, 1]),  # paddings [top, left, bottom, right]
                im2seq(x, None, [8, 3], [2, 2], [0, 0, 0, 0], [1, 1]),  # (7 - 8) / 2 + 1 = 1 with C's division
                im2seq(x, None, [8, 1], [1, 1], [0, 0, 0, 0], [1, 1]),  # (7 - 8) / 1 + 1 = 0: no rows
                im2seq(x[:1], x[:1, 0, 0, :2], [2, 2], [1, 1], [0, 0, 0, 0], [2, 2])]  # one image: Y ignored

    check(pir_program(tmp_path, build, {"x": x}), {"im2sequence"}, exact=True)


def test_im2sequence_real_image_sizes(tmp_path):
    """With Y and more than one image each image's windows cover its real size / out_stride (rounded up); a real size
    past the image reads zeros."""
    import paddle

    x = RNG.standard_normal((3, 2, 6, 7)).astype(np.float32)
    real = np.array([[6, 7], [3.9, 5], [12, 2]], np.float32)  # 3.9 truncates to 3; 12 runs past the image

    def build(x, y):
        return [paddle._C_ops.im2sequence(x, y, [2, 2], [1, 1], [0, 0, 0, 0], [2, 2]),
                paddle._C_ops.im2sequence(x, y, [2, 3], [1, 2], [1, 1, 0, 1], [1, 1])]

    check(pir_program(tmp_path, build, {"x": x, "y": real}), {"im2sequence"}, exact=True)


def test_im2sequence_rejects_a_kernel_past_the_image(tmp_path):
    """(7 - 9) / 1 + 1 = -1 windows: Paddle fails to allocate the output; the host kernel says why."""
    import paddle

    feeds = {"x": np.zeros((1, 1, 7, 7), np.float32)}
    saved = pir_program(tmp_path, lambda x: paddle._C_ops.im2sequence(x, None, [9, 1], [1, 1], [0, 0, 0, 0], [1, 1]),
                        feeds, run_paddle=False)
    with pytest.raises(HostKernelError, match="im2sequence.*windows do not fit"):
        run_on_host(saved)


# -- row_conv ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,lookahead", [((3, 9, 4), 2), ((2, 3, 5), 4), ((1, 1, 2), 0)])
def test_row_conv(tmp_path, shape, lookahead):
    """paddle.static.nn.row_conv builds in the legacy static mode only; a lookahead past the sequence end reads
    nothing there."""
    import paddle

    x = RNG.standard_normal(shape).astype(np.float32)
    saved = static_program(tmp_path, lambda x: paddle.static.nn.row_conv(x, lookahead), {"x": x})
    check(saved, {"row_conv"}, want=paddle_inference_run(saved.model_path, saved.params_path, saved.feeds))


def test_row_conv_one_sequence(tmp_path):
    import paddle

    x = RNG.standard_normal((6, 3)).astype(np.float32)
    saved = static_program(tmp_path, lambda x: paddle.static.nn.row_conv(x, 2), {"x": x})
    check(saved, {"row_conv"}, want=paddle_with_lod(saved, {"x": [[0, 6]]}))
