"""The 96 NNAdapter operations, whole: each family module holds the signatures, the shape inference
(`prepare`) and the numpy references of its operations.

    elementwise    ADD SUB MUL DIV MAX MIN POW FLOOR_DIV SUM, the comparisons, AND OR XOR NOT, WHERE
    activation     unary math and activations, ASSIGN, CAST, CLIP GELU HARD_SIGMOID HARD_SWISH LEAKY_RELU
                   PRELU SOFTPLUS, SOFTMAX LOG_SOFTMAX
    conv           CONV_2D CONV_2D_TRANSPOSE
    pool           AVERAGE_POOL_2D MAX_POOL_2D ADAPTIVE_AVERAGE_POOL_2D ADAPTIVE_MAX_POOL_2D
    normalization  BATCH/GROUP/INSTANCE/LAYER/LP_NORMALIZATION LRN
    matmul         FULLY_CONNECTED MAT_MUL
    resize         RESIZE_NEAREST RESIZE_LINEAR
    reduce         REDUCE_MEAN REDUCE_MAX REDUCE_SUM CUM_SUM ARG_MAX ARG_MIN TOP_K
    shape          RESHAPE FLATTEN SQUEEZE UNSQUEEZE TRANSPOSE CHANNEL_SHUFFLE TILE EXPAND
    tensor         SLICE CONCAT STACK SPLIT UNSTACK MESHGRID GATHER ROLL PAD
    generate       SHAPE FILL FILL_LIKE RANGE
    quantization   QUANTIZE DEQUANTIZE
    sampling       DEFORMABLE_CONV_2D GRID_SAMPLE ROI_ALIGN
    detection      PRIOR_BOX NON_MAX_SUPPRESSION YOLO_BOX

Helpers hold no operation: `registry` (the OPERATIONS and REFERENCES tables, their decorators, the
shared precision sets, quantize/dequantize), `common` (result types, parameter readers, the fused
activation) and `window` (the sliding-window arithmetic of convolution and pooling).

Importing this package registers every operation in `registry.OPERATIONS` and every reference in
`registry.REFERENCES`.

Entry points: `OPERATIONS`, `REFERENCES`, `prepare_operation`, `get_spec`, `quantize` / `dequantize`. The
package and its family modules import only each other, the standard's codes and types and `errors`: never the
model, the reference, the runtime or anything above the ground.
"""
from __future__ import annotations

import importlib

from nnadapter_bridge.nnadapter.operations.registry import (  # noqa: F401
    OPERATIONS,
    REFERENCES,
    OperationSpec,
    Reference,
    Slot,
    check_signature,
    dequantize,
    get_spec,
    operation,
    prepare_operation,
    quantize,
    reference,
)

FAMILY_MODULES = (
    "elementwise", "activation", "conv", "pool", "normalization", "matmul", "resize",
    "reduce", "shape", "tensor", "generate", "quantization", "sampling", "detection",
)


def _load_all() -> None:
    # Each family module registers its operations' signatures and references when it is imported. A
    # family module must not be named like a function re-exported above (the import would rebind the
    # package attribute to the module): hence `quantization`, not `quantize`.
    for name in FAMILY_MODULES:
        importlib.import_module(f"{__name__}.{name}")


_load_all()
