"""The Paddle model loader: framework.proto and its generated module, ProgramDesc -> ProgramGraph,
the params readers (facts §7) and the dtype table. Entry point: `load_model`.

The loader floor: it imports the ground (errors, the standard's codes) and nothing from converters, partition,
hal or any floor above; paddlepaddle is not needed to load a model.
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
