"""Losses with no NNAdapter operation (a host family: the standard has no loss operation):
softmax_with_cross_entropy (PIR `cross_entropy_with_softmax`), huber_loss, bce_loss, kldiv_loss, log_loss,
nll_loss and sigmoid_cross_entropy_with_logits.

float32 and float64, as Paddle 3.3.1's CPU kernels take them (log_loss float32 only; nll_loss labels int64, or
int32 where Paddle takes them); the result keeps the input dtype. Inputs outside a loss's domain raise where
Paddle's kernel checks them (bce_loss inputs outside [0, 1], nll_loss labels outside [0, C)), naming the op.

softmax_with_cross_entropy follows Paddle's CPU path step by step, because its clamps show in the results:
- the softmax clips `x - max` at -64 before exp, so no probability underflows to 0 (a logit 1000 below
  the max gives exp(-64), and a loss of 64, not inf);
- the loss is -log(prob) of the label's probability (hard labels) or -sum(label * log(prob)) (soft
  labels), each log clamped to +-1e20 (Paddle's TolerableValue), so log(0) gives 1e20 and 0 * log(0) is 0;
- `use_softmax=False` takes Logits as probabilities already, and Softmax is then Logits itself;
- a hard label equal to `ignore_index` gives loss 0; any other label outside [0, classes) is an error.

Entry points: its kernels, registered with `@host_kernel` (the executor finds them in `registry.HOST_KERNELS`).
Imports the registry and numpy; never a driver (`hal`) or a floor above the host.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, float_input, host_kernel

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


@host_kernel("huber_loss")
def huber_loss(io: OpScope) -> None:
    x, y = float_input(io, "X"), io.input("Y").astype(io.input("X").dtype, copy=False)
    delta = x.dtype.type(io.attr("delta", 1.0))
    residual = y - x
    abs_r = np.abs(residual)
    half = x.dtype.type(0.5)
    loss = np.where(abs_r <= delta, half * residual * residual, delta * (abs_r - half * delta))
    io.set_output("Residual", residual)
    io.set_output("Out", loss.astype(x.dtype, copy=False))


@host_kernel("bce_loss")
def bce_loss(io: OpScope) -> None:
    x, label = float_input(io, "X"), io.input("Label")
    label = label.astype(x.dtype, copy=False)
    if x.size and not ((x >= 0) & (x <= 1)).all():
        raise io.error("Input(X) must be in [0, 1] (Paddle's kernel checks it)")
    one, floor = x.dtype.type(1), x.dtype.type(-100)
    with np.errstate(divide="ignore"):
        # log clamped at -100, as Paddle's functor does
        loss = -(label * np.maximum(np.log(x), floor) + (one - label) * np.maximum(np.log(one - x), floor))
    io.set_output("Out", loss.astype(x.dtype, copy=False))


def reduce_loss(io: OpScope, loss: np.ndarray, reduction: str, batch: int) -> np.ndarray:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(np.sum(loss), dtype=loss.dtype)
    if reduction == "mean":
        return np.asarray(np.mean(loss) if loss.size else np.nan, dtype=loss.dtype)
    if reduction == "batchmean":
        return np.asarray(np.sum(loss) / loss.dtype.type(batch) if batch else np.nan, dtype=loss.dtype)
    raise io.error(f"reduction must be none, mean, sum or batchmean, got {reduction!r}")


@host_kernel("kldiv_loss")
def kldiv_loss(io: OpScope) -> None:
    x, target = float_input(io, "X"), io.input("Target")
    target = target.astype(x.dtype, copy=False)
    with np.errstate(all="ignore"):
        if io.attr("log_target", False):
            loss = np.exp(target) * (target - x)
        else:
            # Paddle's functor: target * (log(target) - x) where target > 0, else 0
            loss = np.where(target > 0, target * (np.log(target) - x), x.dtype.type(0))
    batch = x.shape[0] if x.ndim else 1
    io.set_output("Loss", reduce_loss(io, loss.astype(x.dtype), str(io.attr("reduction", "mean")), batch))


@host_kernel("log_loss")
def log_loss(io: OpScope) -> None:
    p, label = io.input("Predicted"), io.input("Labels")
    if p.dtype != np.float32:
        raise io.error(f"Paddle's CPU kernel has no {p.dtype} form (it takes float32)")
    label = label.astype(p.dtype, copy=False)
    eps, one = p.dtype.type(io.attr("epsilon", 1e-4)), p.dtype.type(1)
    with np.errstate(all="ignore"):
        loss = -label * np.log(p + eps) - (one - label) * np.log(one - p + eps)
    io.set_output("Loss", loss.astype(p.dtype, copy=False))


@host_kernel("nll_loss")
def nll_loss(io: OpScope) -> None:
    x, label = float_input(io, "X"), io.input("Label")
    if label.dtype not in (np.int64, np.int32):
        raise io.error(f"Label must be int64, got {label.dtype}")
    if x.ndim not in (2, 4):
        raise io.error(f"X must be [N, C] or [N, C, H, W], got rank {x.ndim}")
    classes = x.shape[1]
    weight = io.input("Weight", None)
    weight = np.ones(classes, x.dtype) if weight is None else weight.astype(x.dtype, copy=False)
    ignore_index = int(io.attr("ignore_index", -100))
    reduction = str(io.attr("reduction", "mean"))
    label = label.astype(np.int64)
    ignored = label == ignore_index
    bad = ~ignored & ((label < 0) | (label >= classes))
    if bad.any():
        raise io.error(f"label value {label[bad][0]} is outside [0, {classes}) and not ignore_index")
    safe = np.where(ignored, 0, label)
    picked = np.take_along_axis(x, np.expand_dims(safe, 1), axis=1).squeeze(1)
    w = np.where(ignored, x.dtype.type(0), weight[safe])
    loss = (-picked * w).astype(x.dtype)
    total_weight = np.asarray(np.sum(w), dtype=x.dtype)
    if reduction == "none":
        out = loss
    elif reduction == "sum":
        out = np.asarray(np.sum(loss), dtype=x.dtype)
    elif reduction == "mean":
        # Paddle's kernel: sum(loss) / total_weight, and 0 when every label is ignored
        total = np.sum(loss)
        out = np.asarray(total / total_weight if total_weight != 0 else 0, dtype=x.dtype)
    else:
        raise io.error(f"reduction must be none, mean or sum, got {reduction!r}")
    io.set_output("Out", out)
    io.set_output("Total_weight", total_weight)


@host_kernel("sigmoid_cross_entropy_with_logits")
def sigmoid_cross_entropy_with_logits(io: OpScope) -> None:
    x = float_input(io, "X")
    label = io.input("Label").astype(x.dtype, copy=False)
    pos_weight_slot = next((s for s in ("pos_weight", "PosWeight") if io.has_input(s)), None)
    ignore_index = x.dtype.type(io.attr("ignore_index", -100))
    zero, one = x.dtype.type(0), x.dtype.type(1)
    with np.errstate(all="ignore"):
        if pos_weight_slot is None:
            loss = np.maximum(x, zero) - x * label + np.log1p(np.exp(-np.abs(x)))
        else:
            # the op's pos_weight is already the log weight 1 + (pos_weight - 1) * label: paddle's API computes it
            log_weight = io.input(pos_weight_slot).astype(x.dtype, copy=False)
            loss = (one - label) * x + log_weight * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, zero))
    ignored = label == ignore_index
    loss = np.where(ignored, zero, loss).astype(x.dtype)
    if io.attr("normalize", False):
        count = max(int(np.count_nonzero(~ignored)), 1)
        loss = (loss / x.dtype.type(count)).astype(x.dtype)
    io.set_output("Out", loss)
