"""The Paddle model loader: framework.proto and its generated module, ProgramDesc -> ProgramGraph,
the params readers (facts §7) and the dtype table. Entry point: `load_model`.

The loader imports nothing from converters, partition or hal; paddlepaddle is not needed to load a model.
"""
from nnadapter_bridge.loader.graph import (  # noqa: F401
    BlockInfo,
    BlockRef,
    OpInfo,
    ProgramGraph,
    VarInfo,
    VarRef,
    load_model,
)
from nnadapter_bridge.loader.model_files import LAYOUTS  # noqa: F401

__all__ = ["load_model", "ProgramGraph", "BlockInfo", "OpInfo", "VarInfo", "BlockRef", "VarRef", "LAYOUTS"]
