"""Loss ops with no NNAdapter operation: softmax_with_cross_entropy (PIR `cross_entropy_with_softmax`).

Paddle's CPU path, reproduced step by step because its clamps show in the results:
- the softmax clips `x - max` at -64 before exp, so no probability underflows to 0 (a logit 1000 below
  the max gives exp(-64), and a loss of 64, not inf);
- the loss is -log(prob) of the label's probability (hard labels) or -sum(label * log(prob)) (soft
  labels), each log clamped to +-1e20 (Paddle's TolerableValue), so log(0) gives 1e20 and 0 * log(0) is 0;
- `use_softmax=False` takes Logits as probabilities already, and Softmax is then Logits itself;
- a hard label equal to `ignore_index` gives loss 0; any other label outside [0, classes) is an error.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

SOFTMAX_EXP_FLOOR = -64.0  # Paddle's ValueClip threshold in SoftmaxFunctor
TOLERABLE_LOG = 1e20  # Paddle's TolerableValue bound


def paddle_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        shifted = np.maximum(x - np.max(x, axis=axis, keepdims=True), x.dtype.type(SOFTMAX_EXP_FLOOR))
        exps = np.exp(shifted)
        return (exps / np.sum(exps, axis=axis, keepdims=True)).astype(x.dtype, copy=False)


def tolerable_log(prob: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(np.log(prob), -TOLERABLE_LOG, TOLERABLE_LOG).astype(prob.dtype, copy=False)


@host_kernel("softmax_with_cross_entropy")
def softmax_with_cross_entropy(io: OpScope) -> None:
    logits, label = io.input("Logits"), io.input("Label")
    if logits.dtype not in (np.float32, np.float64):
        raise io.error(f"Paddle's CPU kernel has no {logits.dtype} form (it takes float32 and float64)")
    axis = int(io.attr("axis", -1)) % max(logits.ndim, 1)
    soft_label = bool(io.attr("soft_label", False))
    ignore_index = int(io.attr("ignore_index", -100))
    prob = paddle_softmax(logits, axis) if io.attr("use_softmax", True) else logits
    log_prob = tolerable_log(prob)
    if soft_label:
        loss = -np.sum(label.astype(logits.dtype) * log_prob, axis=axis, keepdims=True)
    else:
        classes = logits.shape[axis]
        label = label.astype(np.int64)
        if label.ndim == logits.ndim - 1:  # a label without the class axis
            label = np.expand_dims(label, axis)
        ignored = label == ignore_index
        bad = ~ignored & ((label < 0) | (label >= classes))
        if bad.any():
            value = int(label[bad][0])
            raise io.error(f"label value {value} is outside [0, {classes}) and is not ignore_index "
                           f"({ignore_index})")
        picked = np.take_along_axis(log_prob, np.where(ignored, 0, label), axis=axis)
        loss = np.where(ignored, logits.dtype.type(0), -picked)
    io.set_output("Softmax", prob)
    io.set_output("Loss", loss.astype(logits.dtype, copy=False))
