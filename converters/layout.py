"""Data layout and window attributes of the NN ops (conv, pool, norm, resize, pad, detection): channel-first
versus channel-last inputs, the TRANSPOSEs between them, and Paddle's padding forms.

The NNAdapter operations these ops map to take channel-first (NCHW) inputs, so a channel-last op is
converted as TRANSPOSE in, the operation, TRANSPOSE out.

Imports op_view and the standard only.
"""
from __future__ import annotations

from collections.abc import Sequence

from converters.op_view import OpView
from nnadapter_bridge.nnadapter.codes import AutoPad
from nnadapter_bridge.nnadapter.codes import OperationType as T

AUTO_PAD_OF = {"EXPLICIT": AutoPad.AUTO_PAD_NONE, "SAME": AutoPad.AUTO_PAD_SAME, "VALID": AutoPad.AUTO_PAD_VALID}
CHANNEL_FIRST = ("NCHW", "NCDHW", "AnyLayout", "ANYLAYOUT", "")
CHANNEL_LAST = ("NHWC", "NDHWC")


def explicit_pads(paddings: Sequence[int]) -> list | None:
    """Paddle's 2-value [h, w] or 4-value [top, bottom, left, right] paddings as [top, bottom, left, right]."""
    if len(paddings) == 2:
        return [paddings[0], paddings[0], paddings[1], paddings[1]]
    if len(paddings) == 4:
        return list(paddings)
    return None


def padding_reason(op) -> str | None:
    """Why a conv/pool op's `paddings` / `padding_algorithm` cannot be converted (None when they can)."""
    v = OpView(op)
    paddings = v.attr_ints("paddings", [0, 0])
    if explicit_pads(paddings) is None:
        return f"paddings {paddings} must hold 2 or 4 values"
    algorithm = v.attr_str("padding_algorithm", "EXPLICIT")
    if algorithm not in AUTO_PAD_OF:
        return f"padding_algorithm '{algorithm}' is not EXPLICIT, SAME or VALID"
    return None


def layout_reason(op, name: str, default: str = "NCHW") -> str | None:
    """Why the layout attr `name` is neither channel-first nor channel-last (None when it is one of them)."""
    layout = OpView(op).attr_str(name, default)
    if layout not in CHANNEL_FIRST + CHANNEL_LAST:
        return f"{name} '{layout}' is neither channel-first (NCHW/NCDHW) nor channel-last (NHWC/NDHWC)"
    return None


def is_channel_last(op, name: str, default: str = "NCHW") -> bool:
    return OpView(op).attr_str(name, default) in CHANNEL_LAST


def channel_first_perm(rank: int) -> list:
    """Permutation moving the last (channel) axis to position 1."""
    return [0, rank - 1] + list(range(1, rank - 1))


def channel_last_perm(rank: int) -> list:
    """The inverse of channel_first_perm."""
    return [0] + list(range(2, rank)) + [1]


def to_channel_first(ctx, x, out_name: str):
    """A TRANSPOSE of channel-last `x` to channel-first, as a `<out>/channel_first` temp."""
    perm = channel_first_perm(len(x.type.dims))
    temp = ctx.temp(out_name, "channel_first")
    ctx.add(T.TRANSPOSE, [x, ctx.const_i32(perm)], [temp])
    return temp
