"""Losses with no NNAdapter operation: huber_loss, bce_loss, kldiv_loss, log_loss, nll_loss and
sigmoid_cross_entropy_with_logits.

float32 and float64, as Paddle 3.3.1's CPU kernels take them (log_loss float32 only; nll_loss labels int64, or int32 where Paddle
takes them); the result keeps the input dtype. Inputs outside a loss's domain raise where Paddle's kernel
checks them (bce_loss inputs outside [0, 1], nll_loss labels outside [0, C)), naming the op.
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host.kernels.registry import OpScope, host_kernel

FLOATS = frozenset(np.dtype(t) for t in ("float32", "float64"))


def float_input(io: OpScope, slot: str) -> np.ndarray:
    x = io.input(slot)
    if x.dtype not in FLOATS:
        raise io.error(f"Paddle's CPU kernel has no {x.dtype} form (it takes float32, float64)")
    return x


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
