"""Recurrent layers, sequence decoding, sequence metrics and segment reductions (a host family: the standard has no
recurrent operation): the `rnn` op (paddle.nn.LSTM / GRU / SimpleRNN), viterbi_decode (paddle.text.viterbi_decode,
PaddleNLP's lexical analysis), the legacy crf_decoding (padded form, or one sequence), gather_tree (beam search's
back-tracking, paddle.nn.functional.gather_tree), segment_pool (paddle.geometric.segment_sum / mean / max / min),
ctc_align, edit_distance, chunk_eval and cvm.

rnn: multi-layer, uni- or bidirectional, time-major, with optional SequenceLength. WeightList holds every
layer/direction's [weight_ih, weight_hh] first, then every [bias_ih, bias_hh], in layer-major,
forward-then-reverse order. Gates follow Paddle's cells: LSTM chunks (i, f, g, o); GRU chunks (r, z, c) with
the reset gate applied to the hidden projection after its bias. Steps past a sequence's length leave the state
unchanged and output zeros. Dropout between layers is an inference no-op here. The loop runs over time steps
(inherently sequential); each step is one matmul per gate block.

Decoding: no NNAdapter operation expresses a best-path search with back-pointers, so both decoders run here,
vectorised over the batch and the tags (one numpy step per time step). Ties go to the lowest tag index, as
Paddle's kernels keep the first maximum.

gather_tree walks the beams back one time step at a time, vectorised over batch and beams. segment_pool reduces
each run of equal (sorted) segment ids with one numpy reduceat per pooltype.

Speech and tagging metrics: ctc_align (CTC greedy decoding: merge repeats, drop the blank), edit_distance
(Levenshtein distance per sequence pair) and chunk_eval (chunk precision / recall / F1 for the IOB, IOE, IOBES and
plain schemes). Each has a padded form (lengths in a tensor) and a LoD form; this scope keeps no LoD, so the LoD
form's input is read as one sequence (what Paddle gives for a LoD of one sequence). Each is vectorised within a
sequence and loops over sequences; edit_distance fills its table one row at a time (the insertions along a row are
a running minimum). cvm (the show / click features of a CTR model) is elementwise and reads no LoD.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import FLOATS, OpScope, host_kernel, require

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # no overflow warning for large |x|


def _step(mode: str, x_proj: np.ndarray, h: np.ndarray, c, w_hh: np.ndarray, b_hh: np.ndarray):
    h_proj = h @ w_hh.T + b_hh
    if mode == "LSTM":
        i, f, g, o = np.split(x_proj + h_proj, 4, axis=-1)
        c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c_new), c_new
    if mode == "GRU":
        x_r, x_z, x_c = np.split(x_proj, 3, axis=-1)
        h_r, h_z, h_c = np.split(h_proj, 3, axis=-1)
        r = _sigmoid(x_r + h_r)
        z = _sigmoid(x_z + h_z)
        candidate = np.tanh(x_c + r * h_c)
        return (h - candidate) * z + candidate, None
    pre = x_proj + h_proj
    return (np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0.0)), None


def _direction(mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths, reverse):
    """One layer, one direction over x [T, N, I]; returns (outputs [T, N, H], h_n, c_n)."""
    steps = x.shape[0]
    x_proj = x @ w_ih.T + b_ih  # all time steps' input projections at once
    h, c = h0, c0
    outputs = np.zeros((steps, x.shape[1], h0.shape[-1]), np.float64)
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        h_new, c_new = _step(mode, x_proj[t], h, c, w_hh, b_hh)
        if lengths is not None:
            live = (t < lengths)[:, None]
            h_new = np.where(live, h_new, h)
            if c_new is not None:
                c_new = np.where(live, c_new, c)
            outputs[t] = np.where(live, h_new, 0.0)
        else:
            outputs[t] = h_new
        h, c = h_new, c_new
    return outputs, h, c


@host_kernel("rnn")
def rnn(io: OpScope) -> None:
    mode = str(io.attr("mode", "LSTM"))
    if mode not in GATES:
        raise io.error(f"mode '{mode}' is not one of {sorted(GATES)}")
    x = io.input("Input")
    layers = int(io.attr("num_layers", 1))
    directions = 2 if io.attr("is_bidirec", False) else 1
    weights = [w.astype(np.float64) for w in io.inputs("WeightList")]
    cells = layers * directions
    if len(weights) != 4 * cells:
        raise io.error(f"WeightList must hold {4 * cells} tensors for {layers} layer(s) x {directions} "
                       f"direction(s), got {len(weights)}")
    states = [s.astype(np.float64) for s in io.inputs("PreState")]
    h0 = states[0]
    c0 = states[1] if mode == "LSTM" else None
    lengths = io.input("SequenceLength").reshape(-1).astype(np.int64) if io.has_input("SequenceLength") else None
    layer_input = x.astype(np.float64)
    h_last, c_last = [], []
    for layer in range(layers):
        outputs = []
        for direction in range(directions):
            cell = layer * directions + direction
            w_ih, w_hh = weights[2 * cell], weights[2 * cell + 1]
            b_ih, b_hh = weights[2 * cells + 2 * cell], weights[2 * cells + 2 * cell + 1]
            out, h, c = _direction(mode, layer_input, h0[cell], None if c0 is None else c0[cell], w_ih, w_hh,
                                   b_ih, b_hh, lengths, reverse=direction == 1)
            outputs.append(out)
            h_last.append(h)
            c_last.append(c)
        layer_input = np.concatenate(outputs, axis=-1)
    io.set_output("Out", layer_input.astype(x.dtype))
    final = [np.stack(h_last).astype(x.dtype)]
    if mode == "LSTM":
        final.append(np.stack(c_last).astype(x.dtype))
    io.set_outputs("State", final)


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


@host_kernel("gather_tree")
def gather_tree(io: OpScope) -> None:
    """Paddle's gather_tree: Ids and Parents [max_time, batch, beam]; Out's last step is Ids', and each earlier
    step takes the id of the beam the later step's parent points to, following parents back from every final
    beam."""
    ids, parents = io.input("Ids"), io.input("Parents")
    if ids.ndim != 3 or parents.shape != ids.shape:
        raise io.error(f"Ids and Parents must be [max_time, batch, beam] of one shape, got {list(ids.shape)} and "
                       f"{list(parents.shape)}")
    if ids.dtype.kind != "i" or parents.dtype.kind != "i":
        raise io.error(f"Ids and Parents must be int32 or int64, got {ids.dtype} and {parents.dtype}")
    beams = ids.shape[2]
    if parents.size and (parents.min() < 0 or parents.max() >= beams):
        raise io.error(f"Parents must lie in [0, {beams}) (beam indices), got [{int(parents.min())}, "
                       f"{int(parents.max())}]")
    out = np.empty_like(ids)
    if ids.shape[0]:
        out[-1] = ids[-1]
        parent = parents[-1].astype(np.int64)
        for step in range(ids.shape[0] - 2, -1, -1):
            out[step] = np.take_along_axis(ids[step], parent, axis=1)
            parent = np.take_along_axis(parents[step], parent, axis=1).astype(np.int64)
    io.set_output("Out", out)


@host_kernel("segment_pool")
def segment_pool(io: OpScope) -> None:
    """Paddle's segment_pool on CPU: X's rows reduced per segment id (SegmentIds: sorted, >= 0) into Out [last id +
    1, ...], a row of zeros for an id no row carries; no rows give no segments (Paddle's CPU kernel crashes there).
    SUM and MEAN (an integer MEAN truncates toward zero, as Eigen's mean does); MAX and MIN skip NaN and give NaN
    only when every value is NaN (Eigen's reductions in Paddle's CPU kernel). SummedIds, a gradient helper, is left
    unset, as Paddle's CPU kernel leaves it."""
    x, ids = io.input("X"), io.input("SegmentIds")
    pooltype = str(io.attr("pooltype", "SUM")).upper()
    if pooltype not in ("SUM", "MEAN", "MAX", "MIN"):
        raise io.error(f"pooltype {pooltype!r} is not one of SUM, MEAN, MAX, MIN")
    if x.dtype not in (np.float32, np.float64, np.int32, np.int64):
        raise io.error(f"X must be float32, float64, int32 or int64, got {x.dtype}")
    if ids.dtype.kind != "i":
        raise io.error(f"SegmentIds must be int32 or int64, got {ids.dtype}")
    ids = ids.reshape(-1).astype(np.int64)
    if x.ndim == 0 or ids.size != x.shape[0]:
        raise io.error(f"SegmentIds holds {ids.size} ids for X of shape {list(x.shape)}: one id per row of X")
    if ids.size and ids[0] < 0:
        raise io.error(f"SegmentIds must be >= 0, got {int(ids[0])} first")
    descending = np.flatnonzero(np.diff(ids) < 0)
    if descending.size:
        i = int(descending[0])
        raise io.error(f"SegmentIds must be sorted ascending, got {int(ids[i])} before {int(ids[i + 1])}")
    segments = int(ids[-1]) + 1 if ids.size else 0
    out = np.zeros((segments,) + x.shape[1:], x.dtype)
    if ids.size:
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        present = ids[starts]
        reduce = {"SUM": np.add, "MEAN": np.add, "MAX": np.fmax, "MIN": np.fmin}[pooltype]
        pooled = reduce.reduceat(x, starts, axis=0)
        if pooltype == "MEAN":
            counts = np.diff(np.r_[starts, ids.size]).reshape((-1,) + (1,) * (x.ndim - 1))
            if x.dtype.kind == "i":
                pooled = np.sign(pooled) * (np.abs(pooled) // counts)
            else:
                pooled = pooled / counts.astype(x.dtype)
        out[present] = pooled
    io.set_output("Out", out)


# -- ctc_align, edit_distance, chunk_eval, cvm ------------------------------------------------------------------
def _sequence_lengths(io: OpScope, slot: str, batch: int, steps: int) -> np.ndarray:
    """A padded form's lengths (one per row, any shape holding `batch` values) checked against the row width."""
    lengths = io.input(slot).reshape(-1).astype(np.int64)
    if lengths.size != batch:
        raise io.error(f"{slot} holds {lengths.size} lengths for {batch} sequences")
    if lengths.size and (lengths.min() < 0 or lengths.max() > steps):
        raise io.error(f"{slot} {lengths.tolist()} must lie in [0, {steps}] (the padded sequence length)")
    return lengths


def _ctc_keep(tokens: np.ndarray, blank: int, merge_repeated: bool) -> np.ndarray:
    """Which tokens of one sequence CTC decoding keeps: not the blank, and (with merge_repeated) not equal to the
    token before. Paddle compares with the blank as unsigned 32-bit ints (an int64 token 2**32 is the blank 0), and
    its `previous` starts at -1, so a leading -1 counts as a repeat."""
    not_blank = (tokens.astype(np.int64) & 0xFFFFFFFF) != (blank & 0xFFFFFFFF)
    if not merge_repeated:
        return not_blank
    previous = np.concatenate([np.array([-1], tokens.dtype), tokens[:-1]])
    return not_blank & (tokens != previous)


@host_kernel("ctc_align")
def ctc_align(io: OpScope) -> None:
    """Paddle's CTCAlignKernel. Padded form (InputLength given): Input [batch, time] and InputLength [batch, 1] of
    one int dtype; Output [batch, time] holds each decoded sequence then `padding_value`, OutputLength its length.
    LoD form (no InputLength): Input [N, 1] read as one sequence; Output [M, 1] the decoded tokens, or [[-1]] when
    none is left."""
    tokens = io.input("Input")
    if tokens.dtype not in (np.int32, np.int64):
        raise io.error(f"Input must be int32 or int64 (Paddle's CPU kernel), got {tokens.dtype}")
    blank = int(io.attr("blank", 0))
    merge = bool(io.attr("merge_repeated", True))
    if not io.has_input("InputLength"):
        if tokens.ndim != 2 or tokens.shape[1] != 1:
            raise io.error(f"Input of shape {list(tokens.shape)} without InputLength: the LoD form takes [N, 1] "
                           "(read as one sequence); the padded form needs InputLength")
        kept = tokens[_ctc_keep(tokens[:, 0], blank, merge)]
        io.set_output("Output", kept if kept.size else np.full((1, 1), -1, tokens.dtype))
        return
    lengths_in = io.input("InputLength")
    if lengths_in.dtype != tokens.dtype:
        raise io.error(f"InputLength must have Input's dtype {tokens.dtype} (Paddle reads both as one type), got "
                       f"{lengths_in.dtype}")
    if tokens.ndim != 2:
        raise io.error(f"Input must be [batch, time] with InputLength, got shape {list(tokens.shape)}")
    batch, steps = tokens.shape
    lengths = _sequence_lengths(io, "InputLength", batch, steps)
    out = np.full(tokens.shape, int(io.attr("padding_value", 0)), tokens.dtype)
    out_lengths = np.zeros((batch, 1), tokens.dtype)
    for row in range(batch):
        kept = tokens[row, :lengths[row]]
        kept = kept[_ctc_keep(kept, blank, merge)]
        out[row, :kept.size] = kept
        out_lengths[row, 0] = kept.size
    io.set_output("Output", out)
    io.set_output("OutputLength", out_lengths)


def _levenshtein(hyp: np.ndarray, ref: np.ndarray) -> int:
    """The edit distance of two token sequences; the table is filled one row (hypothesis token) at a time: deletions
    and substitutions from the row above, then the insertions along the row as a running minimum."""
    if hyp.size == 0 or ref.size == 0:
        return max(hyp.size, ref.size)
    columns = np.arange(ref.size + 1, dtype=np.int64)
    row = columns.copy()
    for i, token in enumerate(hyp.tolist(), start=1):
        above = np.minimum(row[1:] + 1, row[:-1] + (ref != token))
        candidates = np.concatenate([[i], above])
        row = np.minimum.accumulate(candidates - columns) + columns
    return int(row[-1])


@host_kernel("edit_distance")
def edit_distance(io: OpScope) -> None:
    """Paddle's EditDistanceKernel: Out [sequences, 1] float32, each pair's Levenshtein distance (divided by the
    reference's length when `normalized`, which needs every reference non-empty), SequenceNum [1] int64 their count.
    Padded form: Hyps [batch, Th] and Refs [batch, Tr] int64 with HypsLength / RefsLength [batch] int64; LoD form
    (no lengths): Hyps [N, 1] and Refs [M, 1], each read as one sequence."""
    hyps, refs = io.input("Hyps"), io.input("Refs")
    for name, value in (("Hyps", hyps), ("Refs", refs)):
        if value.dtype != np.int64:
            raise io.error(f"{name} must be int64 (Paddle's CPU kernel reads int64 tokens), got {value.dtype}")
        if value.ndim != 2:
            raise io.error(f"{name} must be 2-D ([batch, time] padded, or [N, 1]), got shape {list(value.shape)}")
    if io.has_input("HypsLength") != io.has_input("RefsLength"):
        raise io.error("HypsLength and RefsLength come together (the padded form) or not at all (the LoD form)")
    if io.has_input("HypsLength"):
        if hyps.shape[0] != refs.shape[0]:
            raise io.error(f"Hyps and Refs must hold one row per pair, got {hyps.shape[0]} and {refs.shape[0]} rows")
        for name in ("HypsLength", "RefsLength"):
            if io.input(name).dtype != np.int64:
                raise io.error(f"{name} must be int64 (Paddle's CPU kernel), got {io.input(name).dtype}")
        hyp_lengths = _sequence_lengths(io, "HypsLength", hyps.shape[0], hyps.shape[1])
        ref_lengths = _sequence_lengths(io, "RefsLength", refs.shape[0], refs.shape[1])
        pairs = [(hyps[i, :hyp_lengths[i]], refs[i, :ref_lengths[i]]) for i in range(hyps.shape[0])]
    else:
        pairs = [(hyps.reshape(-1), refs.reshape(-1))]
    normalized = bool(io.attr("normalized", False))
    out = np.zeros((len(pairs), 1), np.float32)
    for i, (hyp, ref) in enumerate(pairs):
        if normalized and ref.size == 0:
            raise io.error(f"reference string {i + 1} is empty: a normalized distance divides by its length")
        distance = np.float32(_levenshtein(hyp, ref))
        out[i, 0] = distance / np.float32(ref.size) if normalized else distance
    io.set_output("SequenceNum", np.array([len(pairs)], np.int64))
    io.set_output("Out", out)


# chunk_scheme -> (tag types, begin, inside, end, single); -1: the scheme has no such tag
CHUNK_SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1), "IOBES": (4, 0, 1, 2, 3),
                 "plain": (1, -1, -1, -1, -1)}


def _chunks(labels: np.ndarray, tag_types: int, other: int, scheme: tuple) -> set:
    """The chunks (first, last, type) of one tag sequence, as Paddle's GetSegments finds them. A label is
    type * tag_types + tag (C's truncating division and remainder); type `other` (= num_chunk_types) is outside
    every chunk. Whether a chunk ends before, and one begins at, each position depends only on the tag and type
    there and before (ChunkEnd / ChunkBegin), so both are computed for every position at once; whether a chunk is
    open carries from the last position where one began or ended."""
    _, begin, inside, end, single = scheme
    if labels.size == 0:
        return set()
    quotient = np.abs(labels) // tag_types * np.sign(labels)
    tags, types = labels - quotient * tag_types, quotient
    prev_tags = np.concatenate([[-1], tags[:-1]])
    prev_types = np.concatenate([[other], types[:-1]])
    same = types == prev_types

    def tag_is(values, *wanted):  # a literal comparison, as Paddle's: a negative label's tag can equal -1
        return np.isin(values, wanted)

    # ChunkEnd and ChunkBegin, their tests in Paddle's order (the first that applies decides)
    ends = np.select(
        [prev_types == other, types == other, ~same, prev_tags == begin, prev_tags == inside, prev_tags == end,
         prev_tags == single],
        [False, True, True, tag_is(tags, begin, single), tag_is(tags, begin, single), True, True], False)
    begins = np.select(
        [prev_types == other, types == other, ~same, tags == begin, tags == inside, tags == end, tags == single],
        [types != other, False, True, True, tag_is(prev_tags, end, single), tag_is(prev_tags, end, single), True],
        False)
    positions = np.arange(labels.size)
    # the state after each position: open (1) where a chunk begins, closed (0) where one only ends, else carried
    decided = np.where(begins | ends, positions, -1)
    last_decided = np.maximum.accumulate(decided)
    open_after = np.where(last_decided >= 0, begins[np.maximum(last_decided, 0)], False)
    open_before = np.concatenate([[False], open_after[:-1]])
    last_begin = np.maximum.accumulate(np.where(begins, positions, -1))
    start_before = np.concatenate([[-1], last_begin[:-1]])
    closing = np.flatnonzero(open_before & ends)
    found = set(zip(start_before[closing].tolist(), (closing - 1).tolist(), prev_types[closing].tolist()))
    if open_after[-1]:
        found.add((int(last_begin[-1]), labels.size - 1, int(types[-1])))
    return found


@host_kernel("chunk_eval")
def chunk_eval(io: OpScope) -> None:
    """Paddle's ChunkEvalKernel: Precision, Recall, F1-Score ([1] float32) and NumInferChunks, NumLabelChunks,
    NumCorrectChunks ([1] int64) over every sequence; a chunk is correct when Inference has it with the same first
    and last position and type; types in excluded_chunk_types are not counted. A ratio with nothing to divide is 0.
    Padded form: Inference and Label [batch, time] (or [batch, time, 1]) int64 with SeqLength [batch] int64; LoD
    form (no SeqLength): [N, 1], read as one sequence. Labels above num_chunk_types * tag types raise, as Paddle's do
    (a negative label is read with C's division, as Paddle reads it)."""
    inference, label = io.input("Inference"), io.input("Label")
    for name, value in (("Inference", inference), ("Label", label)):
        if value.dtype != np.int64:
            raise io.error(f"{name} must be int64 (Paddle's CPU kernel), got {value.dtype}")
    if inference.shape != label.shape:
        raise io.error(f"Inference and Label must have one shape, got {list(inference.shape)} and "
                       f"{list(label.shape)}")
    scheme_name = str(io.attr("chunk_scheme", "IOB"))
    if scheme_name not in CHUNK_SCHEMES:
        raise io.error(f"chunk_scheme '{scheme_name}' is not one of {sorted(CHUNK_SCHEMES)}")
    scheme = CHUNK_SCHEMES[scheme_name]
    chunk_types = int(io.attr("num_chunk_types", 0))
    excluded = {int(t) for t in io.attr("excluded_chunk_types", []) or []}
    if io.has_input("SeqLength"):
        if inference.ndim not in (2, 3) or (inference.ndim == 3 and inference.shape[2] != 1):
            raise io.error(f"Inference must be [batch, time] or [batch, time, 1] with SeqLength, got shape "
                           f"{list(inference.shape)}")
        if io.input("SeqLength").dtype != np.int64:
            raise io.error(f"SeqLength must be int64 (Paddle's CPU kernel), got {io.input('SeqLength').dtype}")
        lengths = _sequence_lengths(io, "SeqLength", inference.shape[0], inference.shape[1])
        rows = [(inference[i, :lengths[i]].reshape(-1), label[i, :lengths[i]].reshape(-1))
                for i in range(inference.shape[0])]
    else:
        rows = [(inference.reshape(-1), label.reshape(-1))]
    largest = chunk_types * scheme[0]
    infer_count = label_count = correct = 0
    for infer_row, label_row in rows:
        for name, values in (("Label", label_row), ("Inference", infer_row)):
            if values.size and values.max() > largest:
                raise io.error(f"{name} holds {int(values.max())}, above {chunk_types} chunk types x {scheme[0]} "
                               f"tag types = {largest}")
        label_chunks = {c for c in _chunks(label_row, scheme[0], chunk_types, scheme) if c[2] not in excluded}
        infer_chunks = {c for c in _chunks(infer_row, scheme[0], chunk_types, scheme) if c[2] not in excluded}
        infer_count += len(infer_chunks)
        label_count += len(label_chunks)
        correct += len(infer_chunks & label_chunks)
    # float32 arithmetic throughout, as Paddle's kernel computes them in T
    precision = np.float32(correct) / np.float32(infer_count) if infer_count else np.float32(0)
    recall = np.float32(correct) / np.float32(label_count) if label_count else np.float32(0)
    f1 = np.float32(2) * precision * recall / (precision + recall) if correct else np.float32(0)
    for name, value in (("Precision", precision), ("Recall", recall), ("F1-Score", f1)):
        io.set_output(name, np.array([value], np.float32))
    for name, value in (("NumInferChunks", infer_count), ("NumLabelChunks", label_count),
                        ("NumCorrectChunks", correct)):
        io.set_output(name, np.array([value], np.int64))


@host_kernel("cvm")
def cvm(io: OpScope) -> None:
    """Paddle's CVMKernel: X [N, D] whose first two columns are a feature's show and click counts. use_cvm: Y [N, D]
    with show -> log(show + 1) and click -> log(click + 1) - log(show + 1) (the rounded first), the rest copied;
    otherwise Y [N, D - 2], X without the two. CVM (the counts of the batch) only feeds the gradient."""
    x = io.input("X")
    require(io, x, FLOATS)
    if x.ndim != 2 or x.shape[1] < 2:
        raise io.error(f"X must be [N, D] with D >= 2 (show, click, then the embedding), got shape {list(x.shape)}")
    if not bool(io.attr("use_cvm", True)):
        io.set_output("Y", x[:, 2:].copy())
        return
    y = x.copy()
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf and log(< 0) = NaN are Paddle's results
        y[:, 0] = np.log(x[:, 0] + x.dtype.type(1))
        y[:, 1] = np.log(x[:, 1] + x.dtype.type(1)) - y[:, 0]
    io.set_output("Y", y)
