"""Paddle Lite's Python names on top of nnadapter-bridge, so a Paddle Lite script ports by its import.

    from paddlelite.lite import *            ->   from nnadapter_bridge.lite import *

`CxxConfig` and `MobileConfig` are nnadapter_bridge.Config (MobileConfig's `set_model_from_file` takes a
Paddle model, not an optimized `.nb`); `create_paddle_predictor` returns a nnadapter_bridge.Predictor;
`Place`, `TargetType`, `PrecisionType`, `DataLayoutType` and `PowerMode` are accepted where Paddle Lite
takes them (the devices come from set_nnadapter_device_names).
"""
from __future__ import annotations

import dataclasses
import enum

from nnadapter_bridge.config import Config, check_nnadapter_device_name
from nnadapter_bridge.predictor import Predictor, create_predictor
from nnadapter_bridge.tensor import DataLayoutType, PrecisionType, TargetType, Tensor

__all__ = ["CxxConfig", "MobileConfig", "create_paddle_predictor", "Place", "TargetType", "PrecisionType",
           "DataLayoutType", "PowerMode", "Tensor", "CxxPredictor", "LightPredictor",
           "check_nnadapter_device_name"]


class PowerMode(enum.IntEnum):
    """Paddle Lite's ARM power modes (accepted, no effect here)."""

    LITE_POWER_HIGH = 0
    LITE_POWER_LOW = 1
    LITE_POWER_FULL = 2
    LITE_POWER_NO_BIND = 3
    LITE_POWER_RAND_HIGH = 4
    LITE_POWER_RAND_LOW = 5


@dataclasses.dataclass(frozen=True)
class Place:
    """Paddle Lite's Place(target, precision=FP32, layout=NCHW, device=0)."""

    target: TargetType = TargetType.Host
    precision: PrecisionType = PrecisionType.FP32
    layout: DataLayoutType = DataLayoutType.NCHW
    device: int = 0


class CxxConfig(Config):
    """Paddle Lite's CxxConfig (full API: model dir/files, valid places, NNAdapter settings)."""


class MobileConfig(Config):
    """Paddle Lite's MobileConfig (light API)."""


CxxPredictor = Predictor
LightPredictor = Predictor


def create_paddle_predictor(config: Config) -> Predictor:
    """Paddle Lite's factory: a predictor for a CxxConfig or a MobileConfig."""
    return create_predictor(config)
