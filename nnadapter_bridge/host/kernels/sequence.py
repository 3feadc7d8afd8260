"""Sequence decoding of CRF taggers: viterbi_decode (paddle.text.viterbi_decode, PaddleNLP's lexical analysis)
and the legacy crf_decoding (padded form, or one sequence). No NNAdapter operation expresses a best-path search
with back-pointers, so both run here, vectorised over the batch and the tags (one numpy step per time step).

Ties go to the lowest tag index, as Paddle's kernels keep the first maximum. Imports only numpy and the registry.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel


def _lengths(io: OpScope, slot: str, batch: int, steps: int, shortest: int) -> np.ndarray:
    lengths = np.asarray(io.input(slot)).astype(np.int64).reshape(-1)
    if lengths.shape[0] != batch:
        raise io.error(f"{slot} holds {lengths.shape[0]} lengths for a batch of {batch}")
    if lengths.size and (lengths.min() < shortest or lengths.max() > steps):
        raise io.error(f"{slot} {lengths.tolist()} must lie in [{shortest}, {steps}] (the time axis of the input)")
    return lengths


@host_kernel("viterbi_decode")
def viterbi_decode(io: OpScope) -> None:
    """Paddle's ViterbiDecodeKernel: Scores [B] and Path [B, max(Length)]. With include_bos_eos_tag the last tag is
    the start tag (every path starts from it) and the second last the stop tag (its row of Transition is added at
    each sequence's last step). A shorter sequence's score stops at its length; its path is 0 past it, as Paddle's
    back-pointer walk writes it."""
    potentials = np.asarray(io.input("Input"))
    transition = np.asarray(io.input("Transition")).astype(potentials.dtype, copy=False)
    if potentials.ndim != 3:
        raise io.error(f"Input must be [batch, time, tags], got shape {list(potentials.shape)}")
    batch, steps, tags = potentials.shape
    if transition.shape != (tags, tags):
        raise io.error(f"Transition must be [{tags}, {tags}] for {tags} tags, got {list(transition.shape)}")
    # An empty sequence has no best path (Paddle's kernel crashes when every length is 0).
    lengths = _lengths(io, "Length", batch, steps, shortest=1)
    with_tags = bool(io.attr("include_bos_eos_tag", True))
    max_len = int(lengths.max()) if lengths.size else 0
    left = lengths[:, None].copy()  # [B, 1], steps left per sequence
    if with_tags:
        alpha = np.full((batch, tags), -1e4, potentials.dtype)
        alpha[:, -1] = 0  # every path starts from the start tag
    else:
        alpha = np.zeros((batch, tags), potentials.dtype)
    history = []
    for t in range(max_len):
        logit = potentials[:, t, :]
        if t == 0 and not with_tags:
            alpha = logit.copy()
            left -= 1
            continue
        scores = alpha[:, :, None] + transition[None, :, :]  # [B, from, to]
        best_from = scores.argmax(axis=1)
        if t > 0:
            history.append(best_from)
        alpha_next = scores.max(axis=1) + logit
        alpha = np.where(left > 0, alpha_next, alpha)
        if with_tags:
            alpha = alpha + (left == 1) * transition[-2][None, :]  # the stop tag's row
        left -= 1
    out_scores = alpha.max(axis=1)
    last = alpha.argmax(axis=1).astype(np.int64)
    left = left[:, 0]
    path = [last * (left >= 0)]
    rows = np.arange(batch)
    for best_from in reversed(history):
        left = left + 1
        back = best_from[rows, last].astype(np.int64) * (left > 0)
        ended = left == 0
        back = np.where(ended, last, back)
        path.insert(0, back)
        last = back + (left < 0) * last
    io.set_output("Scores", out_scores.astype(potentials.dtype, copy=False))
    io.set_output("Path", np.stack(path, axis=1) if max_len else np.zeros((batch, 0), np.int64))


def _crf_best_paths(emission: np.ndarray, transition: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Paddle's CRFDecoding for a padded batch: emission [B, T, N]; transition [N + 2, N] (row 0 the start weights,
    row 1 the end weights, then the [N, N] tag-to-tag weights); the best tag path [B, T], 0 past each length."""
    batch, steps, tags = emission.shape
    start, end, pair = transition[0], transition[1], transition[2:]
    path = np.zeros((batch, steps), np.int64)
    if steps == 0:
        return path
    alpha = start[None, :] + emission[:, 0, :]
    alphas = [alpha]
    track = []
    for t in range(1, steps):
        scores = alpha[:, :, None] + pair[None, :, :]  # [B, from, to]
        track.append(scores.argmax(axis=1))
        alpha = scores.max(axis=1) + emission[:, t, :]
        alphas.append(alpha)
    rows = np.arange(batch)
    stacked = np.stack(alphas, axis=1)  # [B, T, N]
    final = stacked[rows, np.maximum(lengths - 1, 0), :] + end[None, :]
    last_tag = final.argmax(axis=1).astype(np.int64)  # each sequence's tag at its own last step
    for t in range(steps - 1, -1, -1):
        if t < steps - 1:
            came_from = track[t][rows, path[:, t + 1]]  # the back-pointer of step t + 1
            tag = np.where(t == lengths - 1, last_tag, came_from)
        else:
            tag = last_tag
        path[:, t] = np.where(t < lengths, tag, 0)
    return path


@host_kernel("crf_decoding")
def crf_decoding(io: OpScope) -> None:
    emission = np.asarray(io.input("Emission"))
    transition = np.asarray(io.input("Transition")).astype(emission.dtype, copy=False)
    has_length = bool(io.input_names("Length"))
    if emission.ndim == 3 and has_length:
        batch, steps, tags = emission.shape
        lengths = _lengths(io, "Length", batch, steps, shortest=0)
        padded = emission
    elif emission.ndim == 2 and not has_length:
        # The LoD form: this scope keeps no LoD, so the whole input is read as one sequence.
        steps, tags = emission.shape
        padded, lengths = emission[None], np.array([steps], np.int64)
    else:
        raise io.error(f"Emission of shape {list(emission.shape)} {'with' if has_length else 'without'} Length: "
                       "expects [batch, time, tags] with Length, or one [time, tags] sequence without")
    if transition.shape != (tags + 2, tags):
        raise io.error(f"Transition must be [{tags + 2}, {tags}] for {tags} tags (start row, end row, then the "
                       f"tag-to-tag weights), got {list(transition.shape)}")
    path = _crf_best_paths(padded, transition, lengths)
    if io.input_names("Label"):
        # With a label the output says where the best path agrees with it (1) or not (0); 0 past each length.
        label = np.asarray(io.input("Label")).astype(np.int64)
        if label.size != path.size:
            raise io.error(f"Label of shape {list(label.shape)} does not match the {list(path.shape)} tag positions")
        inside = np.arange(path.shape[1])[None, :] < lengths[:, None]
        path = ((label.reshape(path.shape) == path) & inside).astype(np.int64)
    io.set_output("ViterbiPath", path if emission.ndim == 3 else path.reshape(-1, 1))
