"""The `rnn` op (paddle.nn.LSTM / GRU / SimpleRNN): multi-layer, uni- or bidirectional, time-major, with
optional SequenceLength.

WeightList holds every layer/direction's [weight_ih, weight_hh] first, then every [bias_ih, bias_hh], in
layer-major, forward-then-reverse order. Gates follow Paddle's cells: LSTM chunks (i, f, g, o); GRU chunks
(r, z, c) with the reset gate applied to the hidden projection after its bias. Steps past a sequence's
length leave the state unchanged and output zeros. Dropout between layers is an inference no-op here.
The loop runs over time steps (inherently sequential); each step is one matmul per gate block.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

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
