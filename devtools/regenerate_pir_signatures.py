"""Dev-time generator of ``pir_signatures.json``: the operand/attribute/result names of Paddle's PIR ops.

A Paddle 3 PIR program (``model.json``) lists an op's operands and results by position only. To turn
``pd_op.X`` back into the legacy ProgramDesc op that the rest of the loader speaks, we need every PIR op's
signature: its input names in operand order (PIR appends the *mutable* attributes -- Scalar / IntArray such as
reshape's ``shape``, slice's ``starts``/``ends``, scale's ``scale`` -- as operands after the tensor inputs), its
attribute names, and its output names. Paddle knows them (``op.get_input_names()`` / ``get_attr_names()`` /
``get_output_names()``); this script asks it and writes the answers down, so that the runtime never needs paddle.

It runs two phases, each in its own interpreter (``FLAGS_enable_pir_api`` is read when paddle is imported):

* **legacy** (``FLAGS_enable_pir_api=0``): for every registered legacy op proto (``core.get_all_op_protos()``,
  minus grad ops and ``c_*`` collectives) build a one-op legacy program, translate it with
  ``paddle.base.libpaddle.pir.translate_to_pir`` and record the main PIR op it becomes. Dummy programs follow a
  retry ladder (2-D inputs; then also the extra/intermediate outputs; 4-D; without dispensable inputs; 3-D; 1-D),
  attributes without a default are filled from their type, and :data:`OVERRIDES` gives the ops that need more
  (shapes per slot, dtypes, attribute values, tensor arrays, sub-blocks). Each attempt runs in a forked child,
  so a crash in paddle costs one attempt, not the run.
* **api** (``FLAGS_enable_pir_api=1``): ops that ``paddle.jit.save`` emits but that no legacy proto translates to
  (``pd_op.shape64``, ``pd_op.matmul``, inplace ``pd_op.relu_``, ``pd_op.if`` ...) are built through the Python
  API in PIR static mode (:func:`_api_cases`, one forked child per case); every op of those programs is recorded
  unless the legacy phase already has it.

Output (deterministic: keys sorted, one entry per line)::

    "pd_op.<name>": {"legacy": <legacy type>, "legacy_aliases": [...], "in": [...], "attr": [...], "out": [...]}
    "pd_op.<name>": {"legacy": ..., "noyaml": true, "num_operands": n, "num_results": m, "num_regions": r,
                     "operand_slots": [legacy input slot of each operand, null if the translator made it]}
    "_generated_by": "<this module> with paddlepaddle <version>"
    "_no_legacy_proto": [legacy types the project converts that paddle registers no proto for]
    "_untranslated": {legacy type: paddle's (first) error; "should have corresponding OpInfo" = no PIR twin,
                      otherwise no dummy program here was valid for it}

``legacy_aliases`` only appears when several legacy types become the same PIR op: ``legacy`` is then the name
Paddle's op_compat table (``pir_op_compat.tsv``) gives, else the most modern one (``_v2`` over none). API-built
ops that no legacy proto translates to take ``legacy`` from ``pir_op_compat.tsv`` (an inplace ``x_`` from ``x``),
then from :data:`API_LEGACY`; null means there is no legacy counterpart (``pd_op.full_int_array``). ``noyaml``
ops (control flow, select_input/output) have no yaml op info: their operand counts are those of the dummy
program (``pd_op.while``: condition + loop variables, ``pd_op.if``: the condition) and ``operand_slots`` is only
known for ops from the legacy phase. Entries of other dialects (``onednn_op.*``) are kept as paddle gives them.

Requires paddlepaddle 3.3.1 (another version runs too, but regenerate the table only with the version the
loader targets). Takes under a minute on two cores. Run from the repository root::

    python -m devtools.regenerate_pir_signatures [--out PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The tables are package data of the loader, one folder over from this (development-only) script.
HERE = Path(__file__).resolve().parent.parent / "nnadapter_bridge" / "loader"
DEFAULT_OUT = HERE / "pir_signatures.json"
COMPAT_TSV = HERE / "pir_op_compat.tsv"

# PIR ops that the translator (or the API) inserts around the op of interest: never taken as a legacy op's twin
# while another op is there. (Their own signatures are still recorded: model.json has them too.)
HELPER_OPS = frozenset({
    "pd_op.data", "pd_op.feed", "pd_op.fetch", "pd_op.full", "pd_op.full_int_array", "pd_op.create_array",
    "pd_op.create_array_like",
})


def _structural(op_name: str) -> bool:
    """builtin.* / cf.* ops (combine, split, parameter, yield, ...): no op signature to record."""
    return op_name.startswith(("builtin.", "cf."))


# Legacy types the project converts. Those paddle does not register (any more) are listed under "_no_legacy_proto";
# the others must come out with an entry (or an "_untranslated" reason).
PROJECT_LEGACY_TYPES = tuple(sorted(set("""
    arg_max arg_min assign_value batch_norm bicubic_interp_v2 bilinear_interp bilinear_interp_v2 bmm box_coder calib
    cast channel_shuffle clip conditional_block conv2d conv2d_transpose conv3d conv3d_transpose deformable_conv
    deformable_conv_v1 density_prior_box depthwise_conv2d depthwise_conv2d_transpose depthwise_conv3d dropout einsum
    expand expand_as_v2 eye fill_constant_batch_size_like fill_zeros_like flatten flatten2 flatten_contiguous_range
    flip fusion_elementwise_add_activation fusion_elementwise_div_activation fusion_elementwise_max_activation
    fusion_elementwise_min_activation fusion_elementwise_mul_activation fusion_elementwise_sub_activation gather
    generate_proposals_v2 grid_sampler group_norm increment index_select instance_norm layer_norm linear_interp_v2
    linspace lod_array_length lookup_table lrn matmul matrix_nms max_pool2d_with_index max_pool3d_with_index mul
    multiclass_nms3 nearest_interp nearest_interp_v2 norm pad pad2d pad3d pixel_shuffle pool2d pool3d prelu prior_box
    range read_from_array rnn roi_align roll scatter scatter_nd_add select_input select_output set_value
    shuffle_channel slice squeeze squeeze2 strided_slice sync_batch_norm take_along_axis tensor_array_to_tensor top_k
    transpose transpose2 trilinear_interp_v2 unique unsqueeze unsqueeze2 unstack while write_to_array yolo_box
""".split())))

# --------------------------------------------------------------------------------------------------------------
# legacy phase: dummy programs
# --------------------------------------------------------------------------------------------------------------

FLOAT = "float32"
I32 = "int32"
I64 = "int64"
BOOL = "bool"


def T(*shape: int, dtype: str = FLOAT) -> dict:
    """A dense tensor variable of the given shape and dtype."""
    return {"shape": list(shape), "dtype": dtype}


def ARRAY(dtype: str = FLOAT) -> dict:
    """A tensor-array variable (LOD_TENSOR_ARRAY)."""
    return {"vartype": "LOD_TENSOR_ARRAY", "dtype": dtype}


SCOPES = {"vartype": "STEP_SCOPES"}  # the scope list of conditional_block / while


NCHW = T(1, 4, 4, 4)
NCDHW = T(1, 4, 4, 4, 4)
IDX1 = T(2, dtype=I64)
SCALAR_I64 = T(1, dtype=I64)
SCALAR_F = T(1)


class SubBlock:
    """Attribute placeholder: a fresh sub-block whose body assigns input slot ``src`` to output slot ``dst``."""

    def __init__(self, src: str | None = None, dst: str | None = None):
        self.src, self.dst = src, dst


# Rungs of the retry ladder: (default input shape, create dispensable inputs, create extra outputs).
LADDER = (
    ([2, 2], True, False),
    ([2, 2], True, True),
    ([1, 4, 4, 4], True, True),
    ([1, 4, 4, 4], False, True),
    ([2, 2], False, True),
    ([2, 2, 2], False, True),
    ([4], False, True),
)

_CONV = dict(inputs={"Input": NCHW, "Filter": T(4, 4, 1, 1)},
             attrs={"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1})
_DWCONV = dict(inputs={"Input": NCHW, "Filter": T(4, 1, 1, 1)},
               attrs={"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 4})
_CONV3D = dict(inputs={"Input": NCDHW, "Filter": T(4, 4, 1, 1, 1)},
               attrs={"strides": [1, 1, 1], "paddings": [0, 0, 0], "dilations": [1, 1, 1], "groups": 1})
_INTERP2D = dict(inputs={"X": NCHW, "OutSize": None, "SizeTensor": None, "Scale": None},
                 attrs={"out_h": 8, "out_w": 8, "interp_method": "nearest"})
_POOL = dict(inputs={"X": NCHW}, attrs={"ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]})
_NMS = dict(inputs={"BBoxes": T(1, 4, 4), "Scores": T(1, 2, 4), "RoisNum": None},
            attrs={"score_threshold": 0.1, "nms_top_k": 4, "keep_top_k": 4, "nms_threshold": 0.5,
                   "post_threshold": 0.1, "background_label": 0})
_NORM_STATS = {"Scale": T(4), "Bias": T(4), "Mean": T(4), "Variance": T(4)}

# Per-op dummy-program settings, applied on top of every ladder rung. Keys:
#   shape   default input shape (replaces the rung's)
#   inputs  slot -> T(...) | ARRAY(...) | [spec, ...] (duplicable) | None (leave the slot out)
#   outputs slot -> count (0 leaves it out) | "<input slot>" (write in place into that input's variable)
#           | T(...) / ARRAY(...) / SCOPES (one variable of that kind)
#   attrs   name -> value (SubBlock(...) for a fresh sub-block)
OVERRIDES: dict[str, dict[str, Any]] = {
    "arg_max": dict(attrs={"axis": 0, "dtype": 3}),
    "arg_min": dict(attrs={"axis": 0, "dtype": 3}),
    "assign_value": dict(inputs={"ValuesTensor": None}, attrs={"shape": [2], "dtype": 5, "values": [1.0, 2.0]}),
    "batch_norm": dict(inputs={"X": NCHW, **_NORM_STATS, "MomentumTensor": None},
                       outputs={"MeanOut": "Mean", "VarianceOut": "Variance"}),
    "sync_batch_norm": dict(inputs={"X": NCHW, **_NORM_STATS},
                            outputs={"MeanOut": "Mean", "VarianceOut": "Variance"}),
    "bicubic_interp_v2": _INTERP2D,
    "bilinear_interp": _INTERP2D,
    "bilinear_interp_v2": _INTERP2D,
    "nearest_interp": _INTERP2D,
    "nearest_interp_v2": _INTERP2D,
    "bicubic_interp": _INTERP2D,
    "linear_interp_v2": dict(inputs={"X": T(1, 4, 4), "OutSize": None, "SizeTensor": None, "Scale": None},
                             attrs={"out_w": 8, "data_layout": "NCHW", "interp_method": "linear"}),
    "linear_interp": dict(inputs={"X": T(1, 4, 4), "OutSize": None, "SizeTensor": None, "Scale": None},
                          attrs={"out_w": 8, "data_layout": "NCHW", "interp_method": "linear"}),
    "trilinear_interp_v2": dict(inputs={"X": NCDHW, "OutSize": None, "SizeTensor": None, "Scale": None},
                                attrs={"out_d": 8, "out_h": 8, "out_w": 8, "interp_method": "trilinear"}),
    "trilinear_interp": dict(inputs={"X": NCDHW, "OutSize": None, "SizeTensor": None, "Scale": None},
                             attrs={"out_d": 8, "out_h": 8, "out_w": 8, "interp_method": "trilinear"}),
    "bmm": dict(inputs={"X": T(2, 2, 3), "Y": T(2, 3, 2)}),
    "box_coder": dict(inputs={"PriorBox": T(4, 4), "PriorBoxVar": T(4, 4), "TargetBox": T(4, 4)},
                      attrs={"code_type": "encode_center_size", "box_normalized": True}),
    "cast": dict(attrs={"in_dtype": 5, "out_dtype": 3}),
    "channel_shuffle": dict(inputs={"X": NCHW}, attrs={"groups": 2}),
    "shuffle_channel": dict(inputs={"X": NCHW}, attrs={"group": 2}),
    "clip": dict(inputs={"Min": None, "Max": None}, attrs={"min": 0.0, "max": 1.0}),
    "conditional_block": dict(inputs={"Cond": T(1, dtype=BOOL), "Input": T(2, 2)}, outputs={"Scope": SCOPES},
                              attrs={"sub_block": SubBlock("Input", "Out"), "is_scalar_condition": True}),
    "while": dict(inputs={"Condition": T(1, dtype=BOOL), "X": T(2, 2)}, outputs={"StepScopes": SCOPES},
                  attrs={"sub_block": SubBlock("X", "Out")}),
    "conv2d": _CONV,
    "conv2d_transpose": dict(_CONV, inputs={"Input": NCHW, "Filter": T(4, 4, 1, 1), "Bias": None}),
    "depthwise_conv2d": _DWCONV,
    "depthwise_conv2d_transpose": dict(_DWCONV, inputs={"Input": NCHW, "Filter": T(4, 1, 1, 1), "Bias": None}),
    "conv3d": _CONV3D,
    "conv3d_transpose": _CONV3D,
    "depthwise_conv3d": _CONV3D,
    "deformable_conv": dict(inputs={"Input": NCHW, "Offset": T(1, 2, 4, 4), "Mask": T(1, 1, 4, 4),
                                    "Filter": T(4, 4, 1, 1)},
                            attrs={"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
                                   "deformable_groups": 1, "im2col_step": 1}),
    "deformable_conv_v1": dict(inputs={"Input": NCHW, "Offset": T(1, 2, 4, 4), "Filter": T(4, 4, 1, 1)},
                               attrs={"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
                                      "deformable_groups": 1, "im2col_step": 1}),
    "density_prior_box": dict(inputs={"Input": NCHW, "Image": T(1, 3, 16, 16)},
                              attrs={"densities": [1], "fixed_sizes": [4.0], "fixed_ratios": [1.0],
                                     "variances": [0.1, 0.1, 0.2, 0.2]}),
    "prior_box": dict(inputs={"Input": NCHW, "Image": T(1, 3, 16, 16)},
                      attrs={"min_sizes": [4.0], "aspect_ratios": [1.0], "variances": [0.1, 0.1, 0.2, 0.2]}),
    "dropout": dict(inputs={"Seed": None}, attrs={"dropout_prob": 0.5, "is_test": True}),
    "einsum": dict(inputs={"Operands": [T(2, 3), T(3, 2)]}, outputs={"InnerCache": 2, "XShape": 2},
                   attrs={"equation": "ij,jk->ik"}),
    "expand": dict(inputs={"ExpandTimes": None, "expand_times_tensor": None}, attrs={"expand_times": [1, 2]}),
    "expand_as_v2": dict(inputs={"Y": None}, attrs={"target_shape": [2, 2]}),
    "eye": dict(attrs={"num_rows": 2, "num_columns": 2, "dtype": 5}),
    "fill_constant_batch_size_like": dict(attrs={"shape": [-1, 2], "value": 0.0, "dtype": 5}),
    "flatten2": dict(attrs={"axis": 1}),
    "flatten": dict(attrs={"axis": 1}),
    "flatten_contiguous_range": dict(attrs={"start_axis": 0, "stop_axis": -1}),
    "flip": dict(attrs={"axis": [0]}),
    "gather": dict(inputs={"Index": IDX1, "Axis": None}),
    "generate_proposals_v2": dict(inputs={"Scores": T(1, 3, 4, 4), "BboxDeltas": T(1, 12, 4, 4),
                                          "ImShape": T(1, 2), "Anchors": T(4, 4, 3, 4), "Variances": T(4, 4, 3, 4)},
                                  attrs={"pre_nms_topN": 10, "post_nms_topN": 5, "nms_thresh": 0.5,
                                         "min_size": 0.1, "eta": 1.0}),
    "grid_sampler": dict(inputs={"X": NCHW, "Grid": T(1, 4, 4, 2)}),
    "group_norm": dict(inputs={"X": NCHW, "Scale": T(4), "Bias": T(4)}, attrs={"groups": 2}),
    "instance_norm": dict(inputs={"X": NCHW, "Scale": T(4), "Bias": T(4)}),
    "layer_norm": dict(inputs={"X": T(2, 4), "Scale": T(4), "Bias": T(4)}, attrs={"begin_norm_axis": 1}),
    "increment": dict(inputs={"X": SCALAR_F}, attrs={"step": 1.0}),
    "index_select": dict(inputs={"Index": IDX1}, attrs={"dim": 0}),
    "linspace": dict(inputs={"Start": SCALAR_F, "Stop": SCALAR_F, "Num": T(1, dtype=I32)}, attrs={"dtype": 5}),
    "range": dict(inputs={"Start": SCALAR_F, "End": SCALAR_F, "Step": SCALAR_F}),
    "lookup_table": dict(inputs={"W": T(10, 4), "Ids": T(2, 1, dtype=I64)}),
    "lookup_table_v2": dict(inputs={"W": T(10, 4), "Ids": T(2, dtype=I64)}),
    "lrn": dict(inputs={"X": NCHW}, outputs={"MidOut": 1}, attrs={"n": 3}),
    "matrix_nms": dict(_NMS, outputs={"Index": 1, "RoisNum": 1}),
    "multiclass_nms3": dict(_NMS, outputs={"Index": 1, "NmsRoisNum": 1}),
    "max_pool2d_with_index": dict(_POOL, outputs={"Mask": 1}),
    "max_pool3d_with_index": dict(inputs={"X": NCDHW}, outputs={"Mask": 1},
                                  attrs={"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0]}),
    "pool2d": dict(_POOL, attrs=dict(_POOL["attrs"], pooling_type="max")),
    "pool3d": dict(inputs={"X": NCDHW},
                   attrs={"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0], "pooling_type": "max"}),
    "norm": dict(outputs={"Norm": 1}, attrs={"axis": 1, "epsilon": 1e-10}),
    "pad": dict(attrs={"paddings": [1, 1, 1, 1], "pad_value": 0.0}),
    "pad2d": dict(inputs={"X": NCHW, "Paddings": None}, attrs={"paddings": [1, 1, 1, 1]}),
    "pad3d": dict(inputs={"X": NCDHW, "Paddings": None}, attrs={"paddings": [1, 1, 1, 1, 1, 1]}),
    "pixel_shuffle": dict(inputs={"X": NCHW}, attrs={"upscale_factor": 2}),
    "prelu": dict(inputs={"X": NCHW, "Alpha": T(1)}, attrs={"mode": "all"}),
    "rnn": dict(inputs={"Input": T(2, 1, 4), "PreState": [T(1, 1, 4), T(1, 1, 4)],
                        "WeightList": [T(16, 4), T(16, 4), T(16), T(16)], "SequenceLength": None},
                outputs={"State": 2, "DropoutState": 1, "Reserve": 1},
                attrs={"mode": "LSTM", "hidden_size": 4, "input_size": 4, "num_layers": 1, "is_test": True}),
    "roi_align": dict(inputs={"X": NCHW, "ROIs": T(1, 4), "RoisNum": T(1, dtype=I32)},
                      attrs={"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0, "sampling_ratio": 1}),
    "roll": dict(inputs={"ShiftsTensor": None}, attrs={"shifts": [1], "axis": [0]}),
    "scatter": dict(inputs={"Ids": IDX1, "Updates": T(2, 2)}),
    "scatter_nd_add": dict(inputs={"Index": T(2, 1, dtype=I64), "Updates": T(2, 2)}),
    "set_value": dict(inputs={"ValueTensor": T(1, 2), "StartsTensorList": None, "EndsTensorList": None,
                              "StepsTensorList": None},
                      attrs={"axes": [0], "starts": [0], "ends": [1], "steps": [1]}),
    "slice": dict(inputs={"StartsTensor": None, "EndsTensor": None, "StartsTensorList": None,
                          "EndsTensorList": None},
                  attrs={"axes": [0], "starts": [0], "ends": [1]}),
    "strided_slice": dict(inputs={"StartsTensor": None, "EndsTensor": None, "StridesTensor": None,
                                  "StartsTensorList": None, "EndsTensorList": None, "StridesTensorList": None},
                          attrs={"axes": [0], "starts": [0], "ends": [1], "strides": [1], "infer_flags": [1]}),
    "squeeze": dict(inputs={"X": T(2, 1)}, attrs={"axes": [1]}),
    "squeeze2": dict(inputs={"X": T(2, 1)}, attrs={"axes": [1]}),
    "unsqueeze": dict(inputs={"AxesTensor": None, "AxesTensorList": None}, attrs={"axes": [0]}),
    "unsqueeze2": dict(inputs={"AxesTensor": None, "AxesTensorList": None}, attrs={"axes": [0]}),
    "take_along_axis": dict(inputs={"Index": T(2, 2, dtype=I64)}, attrs={"Axis": 0}),
    "top_k": dict(inputs={"K": None}, attrs={"k": 1}),
    "top_k_v2": dict(inputs={"K": None}, attrs={"k": 1}),
    "transpose": dict(attrs={"axis": [1, 0]}),
    "transpose2": dict(attrs={"axis": [1, 0]}),
    "unique": dict(inputs={"X": T(4)}, outputs={"Index": 1, "Indices": 1, "Counts": 1},
                   attrs={"dtype": 3, "is_sorted": True}),
    "unstack": dict(outputs={"Y": 2}, attrs={"axis": 0, "num": 2}),
    "yolo_box": dict(inputs={"X": T(1, 14, 4, 4), "ImgSize": T(1, 2, dtype=I32)},
                     attrs={"anchors": [10, 13, 16, 30], "class_num": 2, "conf_thresh": 0.01,
                            "downsample_ratio": 32}),
    "lod_array_length": dict(inputs={"X": ARRAY()}),
    "read_from_array": dict(inputs={"X": ARRAY(), "I": SCALAR_I64}),
    "write_to_array": dict(inputs={"X": T(2, 2), "I": SCALAR_I64}, outputs={"Out": ARRAY()}),
    "tensor_array_to_tensor": dict(inputs={"X": ARRAY()}, attrs={"axis": 0, "use_stack": False}),
    "select_input": dict(inputs={"X": [T(2, 2), T(2, 2)], "Mask": T(1, dtype=I32)}),
    "select_output": dict(inputs={"X": T(2, 2), "Mask": T(1, dtype=I32)}, outputs={"Out": 2}),
    "array_to_tensor": dict(inputs={"X": ARRAY()}),
    # not needed by the converters today, but cheap to have
    "conv2d_transpose_bias": dict(_CONV, inputs={"Input": NCHW, "Filter": T(4, 4, 1, 1), "Bias": T(4)}),
    "affine_grid": dict(inputs={"Theta": T(1, 2, 3), "OutputShape": None}, attrs={"output_shape": [1, 4, 4, 4]}),
    "unfold": dict(inputs={"X": NCHW}, attrs={"kernel_sizes": [2, 2], "strides": [1, 1], "paddings": [0, 0, 0, 0],
                                              "dilations": [1, 1]}),
    "maxout": dict(inputs={"X": NCHW}, attrs={"groups": 2}),
    "crop_tensor": dict(inputs={"Shape": None, "Offsets": None, "ShapeTensor": None, "OffsetsTensor": None},
                        attrs={"shape": [1, 1], "offsets": [0, 0]}),
    "mv": dict(inputs={"X": T(2, 2), "Vec": T(2)}),
    "roi_pool": dict(inputs={"X": NCHW, "ROIs": T(1, 4), "RoisNum": T(1, dtype=I32)},
                     attrs={"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0}),
    "psroi_pool": dict(inputs={"X": T(1, 8, 4, 4), "ROIs": T(1, 4), "RoisNum": T(1, dtype=I32)},
                       attrs={"output_channels": 2, "pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0}),
    "index_add": dict(inputs={"Index": IDX1, "AddValue": T(2, 2)}, attrs={"axis": 0}),
    "range_v2": dict(inputs={"Start": SCALAR_F, "End": SCALAR_F, "Step": SCALAR_F}),
    "logspace": dict(inputs={"Start": SCALAR_F, "Stop": SCALAR_F, "Num": T(1, dtype=I32), "Base": SCALAR_F},
                     attrs={"dtype": 5}),
    "softmax_with_cross_entropy": dict(inputs={"Logits": T(2, 4), "Label": T(2, 1, dtype=I64)}),
    "shard_index": dict(inputs={"X": T(2, 1, dtype=I64)}, attrs={"index_num": 4, "nshards": 2, "shard_id": 0}),
    "fold": dict(inputs={"X": T(1, 16, 9)}, attrs={"output_sizes": [4, 4], "kernel_sizes": [2, 2],
                                                   "strides": [1, 1], "paddings": [0, 0, 0, 0], "dilations": [1, 1]}),
    "unpool3d": dict(inputs={"X": NCDHW, "Indices": T(1, 4, 4, 4, 4, dtype=I32)},
                     attrs={"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0],
                            "output_size": [8, 8, 8], "unpooling_type": "max"}),
    "viterbi_decode": dict(inputs={"Input": T(1, 3, 4), "Transition": T(4, 4), "Length": T(1, dtype=I64)}),
    "fractional_max_pool2d": dict(inputs={"x": NCHW}, attrs={"output_size": [2, 2]}),
    "fractional_max_pool3d": dict(inputs={"x": NCDHW}, attrs={"output_size": [2, 2, 2]}),
}

# Default attribute values by proto AttrType, for attributes that have no default and no override.
_ATTR_FILL = {0: 1, 1: 0.5, 2: "", 3: [1], 4: [1.0], 5: [""], 6: False, 7: [False], 9: 1, 11: [1], 12: [1.0], 15: 0.5}


def _legacy_signature_worker(proto, rung) -> dict:
    """Build one dummy program for ``proto`` at ladder ``rung`` and translate it to PIR.

    Returns ``{"ops": [signature, ...]}`` for the top-level ops it became, minus those standing for its inputs.
    """
    import paddle
    import paddle.base.libpaddle as lp
    from paddle.base import core

    shape0, with_dispensable, with_extra = rung
    over = OVERRIDES.get(proto.type, {})
    shape0 = over.get("shape", shape0)
    in_over, out_over, attr_over = over.get("inputs", {}), over.get("outputs", {}), over.get("attrs", {})

    main = paddle.static.Program()
    block = main.global_block()
    counter = iter(range(10 ** 6))

    def make(spec: dict, slot: str):
        name = f"{slot}__{next(counter)}"  # _operand_slots() reads the slot back from the name
        if "vartype" in spec:
            return block.create_var(name=name, type=getattr(core.VarDesc.VarType, spec["vartype"]),
                                    dtype=spec.get("dtype"))
        return block.create_var(name=name, shape=spec["shape"], dtype=spec["dtype"])

    inputs: dict[str, list] = {}
    for slot in proto.inputs:
        if slot.name in in_over:
            spec = in_over[slot.name]
            if spec is None:
                continue
            specs = spec if isinstance(spec, list) else [spec]
            inputs[slot.name] = [make(s, slot.name) for s in specs]
        elif not slot.extra and (with_dispensable or not slot.dispensable):
            inputs[slot.name] = [make(T(*shape0), slot.name)]
    outputs: dict[str, list] = {}
    for slot in proto.outputs:
        want = out_over.get(slot.name, 0 if slot.extra and not with_extra else 1)
        if isinstance(want, dict):
            outputs[slot.name] = [make(want, slot.name)]
        elif isinstance(want, str):
            outputs[slot.name] = inputs[want]
        elif want:
            outputs[slot.name] = [make(T(*shape0), slot.name) for _ in range(want)]
    defaults = core.get_op_attrs_default_value(proto.type.encode())
    attrs: dict[str, Any] = {}
    for attr in proto.attrs:
        if attr.name in attr_over:
            value = attr_over[attr.name]
            if isinstance(value, SubBlock):
                sub = main._create_block()
                if value.src:
                    for src, dst in zip(inputs[value.src], outputs[value.dst]):
                        sub.append_op(type="assign", inputs={"X": [src]}, outputs={"Out": [dst]})
                main._rollback()
                value = sub
            attrs[attr.name] = value
        elif attr.name not in defaults and not attr.extra and attr.type in _ATTR_FILL:
            attrs[attr.name] = _ATTR_FILL[attr.type]
    block.append_op(type=proto.type, inputs=inputs, outputs=outputs, attrs=attrs)
    program = lp.pir.translate_to_pir(main.desc)
    ops = []
    for op in program.global_block().ops:  # top level only: a sub-block's ops are not the twin
        if _structural(op.name()) or _makes_input(op, inputs):
            continue
        ops.append(_signature(op))
        if ops[-1].get("noyaml"):
            ops[-1]["operand_slots"] = _operand_slots(op)
    return {"ops": ops}


def _makes_input(op, inputs: dict[str, list]) -> bool:
    """Whether the translator made ``op`` to stand for one of the dummy program's input variables."""
    if op.name() == "pd_op.data":
        return op.attrs().get("name") in {var.name for vars_ in inputs.values() for var in vars_}
    return op.name() in ("pd_op.create_array", "pd_op.create_array_like")


def _operand_slots(op) -> list:
    """For each operand of a translated op, the legacy input slot it came from (None: made by the translator)."""
    slots = []
    for value in op.operands_source():
        source = value.get_defining_op()  # None for a block argument
        name = source.attrs().get("name", "") if source is not None and source.name() == "pd_op.data" else ""
        slots.append(name.split("__")[0] if "__" in name else None)
    return slots


def _walk(block):
    """All ops of a PIR block, nested blocks included (depth first, in program order)."""
    for op in block.ops:
        yield op
        for sub in op.blocks():
            yield from _walk(sub)


def _signature(op) -> dict:
    """``{"name", "in", "attr", "out"}`` of a PIR op, or its counts when it has no yaml op info."""
    sig: dict[str, Any] = {"name": op.name()}
    try:
        sig.update({"in": list(op.get_input_names()), "attr": list(op.get_attr_names()),
                    "out": list(op.get_output_names())})
    except (ValueError, RuntimeError):
        sig.update({"noyaml": True, "num_operands": op.num_operands(), "num_results": op.num_results(),
                    "num_regions": op.num_regions()})
    return sig


def _in_child(fn: Callable[[], Any]) -> dict:
    """Run ``fn`` in a forked child; return {"ok": result} or {"err": first line of the error}."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        try:
            payload = {"ok": fn()}
        except BaseException as exc:  # noqa: BLE001 - anything paddle raises is a result here
            lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
            payload = {"err": _clean_reason(lines[0] if lines else type(exc).__name__)}
        with os.fdopen(wfd, "wb") as pipe:
            pipe.write(json.dumps(payload).encode())
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        code = os.waitstatus_to_exitcode(status)
        return {"err": f"crash (signal {-code})" if code < 0 else f"crash (exit {code})"}
    return json.loads(data)


def _clean_reason(text: str) -> str:
    """First line of paddle's message, minus its hint, source location and unstable numbers (deterministic)."""
    text = re.sub(r"\s*\[Hint:.*$", "", text)
    text = re.sub(r"\s*\(at /[^)]*\)", "", text)
    text = re.sub(r"0x[0-9a-fA-F]+|\d{9,}", "<garbage>", text)  # uninitialised sizes / pointers: not stable
    return text[:240]


# Ops the translator wraps around the real twin of some legacy ops (mul: reshape, matmul, reshape;
# lookup_table: embedding, squeeze).
_GLUE_OPS = frozenset({"pd_op.reshape", "pd_op.squeeze", "pd_op.unsqueeze", "pd_op.cast", "pd_op.transpose"})


def _main_op(legacy_type: str, ops: list[dict]) -> dict | None:
    """The PIR twin among the ops a legacy op became: the one named like it, else the last non-glue one."""
    if not ops:
        return None
    stem = re.sub(r"(_v\d+|2)$", "", legacy_type)
    for op in ops:
        if op["name"].split(".", 1)[1] in (legacy_type, stem):
            return op
    ops = [op for op in ops if op["name"] not in HELPER_OPS] or ops  # fill_constant -> full, feed -> data
    return ([op for op in ops if op["name"] not in _GLUE_OPS] or ops)[-1]


def legacy_phase() -> dict:
    """Translate every legacy op proto (see the module docstring); records keyed by legacy type."""
    from paddle.base import core, framework

    protos = {}
    for raw in core.get_all_op_protos():
        proto = framework.framework_pb2.OpProto.FromString(raw) if isinstance(raw, bytes) else raw
        protos[proto.type] = proto
    records, reasons = {}, {}
    for op_type in sorted(protos):
        if "grad" in op_type or op_type.startswith("c_"):
            continue
        first_error = None
        for rung in LADDER:
            result = _in_child(functools.partial(_legacy_signature_worker, protos[op_type], rung))
            main = _main_op(op_type, result["ok"]["ops"]) if "ok" in result else None
            if main is not None:
                records[op_type] = main
                break
            first_error = first_error or result.get("err", "translates to no PIR op")
            if "corresponding OpInfo" in first_error:
                break  # the translator has no PIR twin for it: no dummy program helps
        if op_type not in records:
            reasons[op_type] = first_error
    return {"records": records, "untranslated": reasons,
            "no_legacy_proto": sorted(t for t in PROJECT_LEGACY_TYPES if t not in protos)}


# --------------------------------------------------------------------------------------------------------------
# api phase: ops built through the Python API in PIR static mode
# --------------------------------------------------------------------------------------------------------------


def _api_cases() -> dict[str, Callable[[], None]]:
    """name -> function that adds ops to the current (PIR) program. Imported lazily: needs paddle."""
    import paddle
    import paddle.nn.functional as F

    def x(*shape, dtype="float32", name="x"):
        return paddle.static.data(name, list(shape), dtype)

    def elementwise():
        a, b = x(2, 2, name="a"), x(2, 2, name="b")
        for fn in (paddle.add, paddle.subtract, paddle.multiply, paddle.divide, paddle.maximum, paddle.minimum,
                   paddle.remainder, paddle.floor_divide, paddle.pow, paddle.equal, paddle.not_equal,
                   paddle.greater_than, paddle.greater_equal, paddle.less_equal, paddle.less_than):
            fn(a, b)

    def logical():
        a, b = x(2, 2, dtype="bool", name="a"), x(2, 2, dtype="bool", name="b")
        paddle.logical_and(a, b), paddle.logical_or(a, b), paddle.logical_not(a), paddle.logical_xor(a, b)
        paddle.where(a, x(2, 2, name="c"), x(2, 2, name="d"))

    def unary():
        t = x(2, 2)
        for fn in (F.sigmoid, F.gelu, F.hardswish, F.hardsigmoid, F.swish, F.silu, F.mish, F.leaky_relu, F.elu,
                   F.relu6, F.relu, F.tanh, paddle.sqrt, paddle.rsqrt, paddle.exp, paddle.log, paddle.abs,
                   paddle.isnan, paddle.isinf, paddle.isfinite, F.log_softmax, F.softplus, paddle.sign,
                   paddle.floor, paddle.ceil, paddle.round, paddle.reciprocal, paddle.square, paddle.erf,
                   paddle.sin, paddle.cos, F.softsign, F.tanhshrink, F.selu, F.celu, F.hardtanh, F.hardshrink,
                   F.softshrink, F.log_sigmoid, paddle.log1p, paddle.log2, paddle.log10, paddle.expm1):
            fn(t)
        F.softmax(t, axis=-1)
        paddle.scale(t, scale=2.0, bias=1.0)
        paddle.pow(t, 2.0)
        paddle.clip(t, 0.0, 1.0)
        paddle.cast(t, "int32")
        F.relu_(x(2, 2, name="y"))

    def reductions():
        t = x(2, 2)
        for fn in (paddle.sum, paddle.mean, paddle.max, paddle.min, paddle.prod, paddle.logsumexp,
                   paddle.amax, paddle.amin):
            fn(t, axis=1, keepdim=True)
        b = x(2, 2, dtype="bool", name="b")
        paddle.any(b, axis=0), paddle.all(b, axis=0)
        paddle.argmax(t, axis=1), paddle.argmin(t, axis=1)
        paddle.norm(t, p=2, axis=1), paddle.cumsum(t, axis=1), paddle.cumprod(t, dim=1)
        paddle.topk(t, k=1), paddle.argsort(t, axis=1), paddle.sort(t, axis=1)
        paddle.std(t), paddle.var(t)

    def shapes():
        t = x(2, 1, 2)
        paddle.shape(t)
        paddle.squeeze(t, axis=1), paddle.unsqueeze(t, axis=0), paddle.flatten(t, 0, 1)
        paddle.reshape(t, [2, 2]), paddle.transpose(t, [2, 1, 0])
        paddle.slice(t, axes=[0], starts=[0], ends=[1]), paddle.strided_slice(t, [0], [0], [2], [1])
        paddle.concat([t, t], axis=0), paddle.stack([t, t]), paddle.unstack(t, axis=0)
        paddle.split(t, 2, axis=0), paddle.split(t, [1, 1], axis=0)
        paddle.tile(t, [1, 2, 1]), paddle.expand(t, [2, 3, 2]), paddle.expand_as(t, x(2, 3, 2, name="y"))
        paddle.flip(t, axis=[0]), paddle.roll(t, shifts=1, axis=0), paddle.broadcast_to(t, [2, 2, 2])
        t[0], t[:, 0:1]

    def dynamic_shapes():
        t = x(-1, 2)
        n = paddle.shape(t)[0]
        paddle.full([n, 2], 1.0)
        paddle.reshape(t, [n, 2])
        paddle.slice(t, axes=[0], starts=[0], ends=[n])
        paddle.zeros_like(t), paddle.ones_like(t), paddle.full_like(t, 2.0)
        paddle.arange(0, n, 1), paddle.arange(0, 10, 1, dtype="int64")
        paddle.linspace(0.0, 1.0, 5)
        paddle.expand(t, [n, 2])
        paddle.tile(t, [n, 1])

    def indexing():
        t, i = x(4, 2), x(2, dtype="int64", name="i")
        paddle.gather(t, i), paddle.index_select(t, i), paddle.gather_nd(t, x(2, 1, dtype="int64", name="j"))
        paddle.take_along_axis(t, x(4, 1, dtype="int64", name="k"), axis=1)
        paddle.scatter(t, i, x(2, 2, name="u")), paddle.scatter_nd_add(t, x(2, 1, dtype="int64", name="j2"),
                                                                      x(2, 2, name="u2"))
        F.one_hot(i, 4), F.embedding(i, x(10, 4, name="w")), paddle.masked_select(t, t > 0)
        paddle.nonzero(t), paddle.unique(i), paddle.index_sample(t, x(4, 1, dtype="int64", name="k2"))
        paddle.repeat_interleave(t, x(2, dtype="int64", name="r"), axis=1)  # pd_op.repeat_interleave_with_tensor_index

    def slice_assignment():
        # what `t[...] = v` writes in a to_static'ed layer: pd_op.set_value_ (constant `values` attribute) and
        # pd_op.set_value_with_tensor_ (a tensor value), plus the out-of-place forms _C_ops offers
        from paddle import _C_ops
        t = x(2, 3)
        t[:, 1] = 0.5
        t[0:1] = x(1, 3, name="v")
        _C_ops.set_value(x(2, 3, name="a"), [0], [1], [1], [0], [], [], [1], [2.0])
        _C_ops.set_value_with_tensor(x(2, 3, name="b"), x(1, 3, name="w"), [0], [1], [1], [0], [], [])

    def matmuls():
        a, b = x(2, 2, 3, name="a"), x(2, 3, 2, name="b")
        paddle.matmul(a, b), paddle.bmm(a, b), paddle.einsum("bij,bjk->bik", a, b)
        F.linear(x(2, 3, name="c"), x(3, 4, name="w"), x(4, name="bias"))

    def norms():
        t = x(1, 4, 4, 4)
        F.layer_norm(t, [4]), F.group_norm(t, 2), F.instance_norm(t)
        F.normalize(t, axis=1), F.local_response_norm(t, 3)
        mean, var = x(4, name="m"), x(4, name="v")
        F.batch_norm(t, mean, var, training=False)
        F.dropout(t, p=0.5, training=True), F.dropout(t, p=0.5, training=False)
        paddle.nn.BatchNorm2D(4)(t)
        F.prelu(t, x(1, name="alpha"))

    def convs():
        t = x(1, 4, 4, 4)
        F.conv2d(t, x(4, 4, 1, 1, name="w")), F.conv2d(t, x(4, 1, 1, 1, name="dw"), groups=4)
        F.conv2d_transpose(t, x(4, 4, 1, 1, name="tw"))
        F.conv2d_transpose(t, x(4, 1, 1, 1, name="tdw"), groups=4)
        F.conv2d_transpose(t, x(4, 4, 1, 1, name="tw2"), output_size=[4, 4])
        F.conv3d(x(1, 4, 4, 4, 4, name="v"), x(4, 4, 1, 1, 1, name="w3"))
        F.conv3d_transpose(x(1, 4, 4, 4, 4, name="v2"), x(4, 4, 1, 1, 1, name="w4"))

    def pools():
        t = x(1, 4, 4, 4)
        F.max_pool2d(t, 2), F.avg_pool2d(t, 2), F.max_pool2d(t, 2, return_mask=True)
        F.adaptive_avg_pool2d(t, 1), F.adaptive_max_pool2d(t, 1)
        F.max_pool3d(x(1, 4, 4, 4, 4, name="v"), 2), F.max_pool3d(x(1, 4, 4, 4, 4, name="v2"), 2, return_mask=True)

    def resize():
        t = x(1, 4, 4, 4)
        for mode in ("nearest", "bilinear", "bicubic"):
            F.interpolate(t, scale_factor=2, mode=mode)
        F.interpolate(x(1, 4, 4, name="l"), scale_factor=2, mode="linear", data_format="NCW")
        F.interpolate(x(1, 4, 4, 4, 4, name="v"), scale_factor=2, mode="trilinear")
        F.pad(t, [1, 1, 1, 1]), F.pad(x(2, 2, name="p"), [1, 1, 1, 1]), F.pad(t, [1, 1, 1, 1], mode="reflect")
        F.pixel_shuffle(t, 2), F.pixel_unshuffle(t, 2), F.channel_shuffle(t, 2)
        F.grid_sample(t, x(1, 4, 4, 2, name="g")), F.affine_grid(x(1, 2, 3, name="th"), [1, 4, 4, 4])

    def detection():
        from paddle.vision import ops as V
        t = x(1, 14, 4, 4)
        V.yolo_box(t, x(1, 2, dtype="int32", name="s"), anchors=[10, 13, 16, 30], class_num=2,
                   conf_thresh=0.01, downsample_ratio=32)
        V.roi_align(x(1, 4, 4, 4, name="f"), x(1, 4, name="r"), x(1, dtype="int32", name="n"), 2)
        V.prior_box(x(1, 4, 4, 4, name="p"), x(1, 3, 16, 16, name="img"), min_sizes=[4.0])
        V.box_coder(x(4, 4, name="pb"), x(4, 4, name="pbv"), x(4, 4, name="tb"))
        V.nms(x(4, 4, name="b"), 0.5)
        V.deform_conv2d(x(1, 4, 4, 4, name="d"), x(1, 2, 4, 4, name="o"), x(4, 4, 1, 1, name="w"))
        V.distribute_fpn_proposals(x(4, 4, name="fr"), 2, 5, 4, 224, rois_num=x(1, dtype="int32", name="rn"))
        V.generate_proposals(x(1, 3, 4, 4, name="sc"), x(1, 12, 4, 4, name="bd"), x(1, 2, name="ims"),
                             x(4, 4, 3, 4, name="an"), x(4, 4, 3, 4, name="va"), return_rois_num=True)
        V.matrix_nms(x(1, 4, 4, name="mb"), x(1, 2, 4, name="ms"), 0.1, 0.1, 4, 4)
        _multiclass_nms3(x(1, 4, 4, name="nb"), x(1, 2, 4, name="ns"))

    def _multiclass_nms3(bboxes, scores):
        from paddle import _C_ops
        _C_ops.multiclass_nms3(bboxes, scores, None, 0.1, 4, 4, 0.5, True, 1.0, 0)

    def rnn():
        paddle.nn.LSTM(4, 4)(x(1, 2, 4)), paddle.nn.GRU(4, 4)(x(1, 2, 4, name="g"))

    def assigns():
        t = x(2, 2)
        paddle.assign(t), paddle.assign([1.0, 2.0]), paddle.assign(t, paddle.zeros([2, 2]))
        counter = paddle.full([1], 0, "int64")
        paddle.increment(counter)
        paddle.full_like(t, 1.0), paddle.numel(t)
        paddle.linspace(x(1, name="s"), x(1, name="e"), 5)
        paddle.increment(paddle.full([1], 0.0, "float32"))

    def control_flow():
        t = x(2, 2)
        paddle.static.nn.cond(paddle.mean(t) > 0, lambda: t + 1, lambda: t - 1)
        i = paddle.full([1], 0, "int64")
        paddle.static.nn.while_loop(lambda i, t: i < 3, lambda i, t: [i + 1, t * 2], [i, t])

    def arrays():
        arr = paddle.tensor.create_array("float32")
        i = paddle.full([1], 0, "int64")
        paddle.tensor.array_write(x(2, 2), i, array=arr)
        paddle.tensor.array_read(arr, i), paddle.tensor.array_length(arr)

    def fused_and_triangular():
        from paddle import _C_ops
        t, w, b = x(2, 3), x(3, 4, name="w"), x(4, name="b")
        _C_ops.fc(t, w, b, 1, "", False)  # legacy fc translates to onednn_op.fc; inference passes make pd_op.fc
        _C_ops.matmul_with_flatten(t, w, 1, 1)  # legacy mul translates to reshape + matmul + reshape
        paddle.tril(t), paddle.triu(t)

    def batch_norm_not_inplace():
        from paddle import _C_ops
        t, mean, var = x(1, 4, 4, 4), x(4, name="m"), x(4, name="v")
        _C_ops.batch_norm(t, mean, var, None, None, True, 0.9, 1e-5, "NCHW", False, False)

    def matrix_rank_float_tol():
        # pd_op.matrix_rank (a float or no tol) has no legacy proto that translates to it: matrix_rank's proto
        # becomes pd_op.matrix_rank_tol
        t = x(3, 3)
        paddle.linalg.matrix_rank(t), paddle.linalg.matrix_rank(t, tol=0.1)

    cases = {name: fn for name, fn in locals().items() if callable(fn) and not name.startswith("_") and name != "x"}
    for name, make_args in _INPLACE_CASES.items():
        cases[f"inplace_{name}"] = _inplace_case(name, make_args, x)
    return cases


# Inplace ``_C_ops.<name>_`` calls (what static PIR API code rarely emits but to_static'ed code can):
# name -> function(x) -> positional args, x(*shape, dtype=..., name=...) making a data op.
_UNARY_INPLACE = ("abs acos asin atan ceil cos cosh sin sinh tan tanh exp expm1 floor log log10 log1p log2 "
                  "reciprocal relu rsqrt sigmoid silu sqrt square erf trunc").split()
_INPLACE_CASES: dict[str, Callable] = {
    **{name: (lambda x: (x(2, 2),)) for name in _UNARY_INPLACE},
    **{name: (lambda x: (x(2, 2, name="a"), x(2, 2, name="b")))
       for name in ("add subtract multiply divide remainder floor_divide equal not_equal less_than less_equal "
                    "greater_than greater_equal").split()},
    **{name: (lambda x: (x(2, 2, dtype="bool", name="a"), x(2, 2, dtype="bool", name="b")))
       for name in ("logical_and", "logical_or", "logical_xor")},
    "logical_not": lambda x: (x(2, 2, dtype="bool"),),
    "leaky_relu": lambda x: (x(2, 2), 0.1),
    "elu": lambda x: (x(2, 2), 1.0),
    "hardtanh": lambda x: (x(2, 2), -1.0, 1.0),
    "clip": lambda x: (x(2, 2), 0.0, 1.0),
    "scale": lambda x: (x(2, 2), 2.0, 0.0, True),
    "pow": lambda x: (x(2, 2), 2.0),
    "round": lambda x: (x(2, 2), 0),
    "cast": lambda x: (x(2, 2), _paddle_dtype("float64")),
    "softmax": lambda x: (x(2, 2), -1),
    "reshape": lambda x: (x(2, 2), [4]),
    "squeeze": lambda x: (x(2, 1), [1]),
    "unsqueeze": lambda x: (x(2, 2), [0]),
    "flatten": lambda x: (x(2, 2), 0, 1),
    "transpose": lambda x: (x(2, 2), [1, 0]),
    "cumsum": lambda x: (x(2, 2), 0, False, False, False),
    "where": lambda x: (x(2, 2, dtype="bool", name="c"), x(2, 2, name="a"), x(2, 2, name="b")),
    "scatter": lambda x: (x(4, 2), x(2, dtype="int64", name="i"), x(2, 2, name="u"), True),
}


def _paddle_dtype(name: str):
    import paddle

    return getattr(paddle, name)


def _inplace_case(name: str, make_args: Callable, x: Callable) -> Callable[[], None]:
    def case():
        from paddle import _C_ops

        getattr(_C_ops, name + "_")(*make_args(x))

    return case


def _api_case_worker(fn: Callable[[], None]) -> dict:
    import paddle

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        fn()
    return {"ops": [_signature(op) for op in _walk(main.global_block()) if not _structural(op.name())]}


def api_phase() -> dict:
    """Build every API case; records keyed by PIR op name (first case that makes it wins)."""
    cases = _api_cases()
    records, errors = {}, {}
    for name in sorted(cases):
        result = _in_child(functools.partial(_api_case_worker, cases[name]))
        if "err" in result:
            errors[name] = result["err"]
            continue
        for op in result["ok"]["ops"]:
            records.setdefault(op["name"], op)
    return {"records": records, "errors": errors}


# --------------------------------------------------------------------------------------------------------------
# merge and write
# --------------------------------------------------------------------------------------------------------------


# API-built ops that neither a legacy proto nor pir_op_compat.tsv names.
API_LEGACY = {"assign_out_": "assign", "tril": "tril_triu", "triu": "tril_triu"}


def read_compat_tsv(path: Path = COMPAT_TSV) -> dict[str, str]:
    """pir_name -> legacy_name from the project's compat table (comment lines and the header skipped)."""
    table = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if cols[0] == "pir_name":
            continue
        table[cols[0]] = cols[1]
    return table


def _modernity(legacy: str) -> tuple:
    """Sort key, larger is more modern: the version suffix (``fetch_v2``, ``squeeze2``; none counts 1), then name."""
    m = re.search(r"(?:_v|(?<=[a-z]))(\d+)$", legacy)
    return (int(m.group(1)) if m else 1, legacy)


def merge(legacy: dict, api: dict, compat: dict[str, str], paddle_version: str) -> dict:
    """One entry per PIR op (legacy-phase records first, then API-built ones) plus the ``_`` keys, sorted."""
    by_pir: dict[str, list[tuple[str, dict]]] = {}
    for op_type, sig in legacy["records"].items():
        by_pir.setdefault(sig["name"], []).append((op_type, sig))
    entries: dict[str, dict] = {}
    for pir_name, items in by_pir.items():
        types = sorted(t for t, _ in items)
        preferred = compat.get(pir_name.split(".", 1)[1])
        main_type = preferred if preferred in types else max(types, key=_modernity)
        entry = {"legacy": main_type}
        aliases = [t for t in types if t != main_type]
        if aliases:
            entry["legacy_aliases"] = aliases
        entry.update({k: v for k, v in dict(items)[main_type].items() if k != "name"})
        entries[pir_name] = entry
    for pir_name, sig in api["records"].items():
        if pir_name in entries:
            known = entries[pir_name]
            if any(known.get(k) != sig.get(k) for k in ("in", "attr", "out")):
                print(f"warning: {pir_name}: the API-built signature differs from the translated one",
                      file=sys.stderr)
            continue
        short = pir_name.split(".", 1)[1]
        legacy_name = compat.get(short) or compat.get(short.rstrip("_")) or API_LEGACY.get(short)
        entries[pir_name] = {"legacy": legacy_name, **{k: v for k, v in sig.items() if k != "name"}}
    out: dict[str, Any] = dict(sorted(entries.items()))
    out["_generated_by"] = f"devtools.regenerate_pir_signatures with paddlepaddle {paddle_version}"
    out["_no_legacy_proto"] = legacy["no_legacy_proto"]
    out["_untranslated"] = dict(sorted(legacy["untranslated"].items()))
    return dict(sorted(out.items()))


def dump(table: dict, path: Path) -> None:
    """Deterministic JSON: sorted keys, one top-level entry per line."""
    lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in table.items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


def _run_phase(phase: str, pir_api: str, out_file: str) -> subprocess.Popen:
    """Start this file as a ``--phase`` worker with ``FLAGS_enable_pir_api`` set before paddle is imported."""
    env = dict(os.environ, FLAGS_enable_pir_api=pir_api, GLOG_minloglevel="3")
    command = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--phase-out", out_file]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSON (default: %(default)s)")
    parser.add_argument("--phase", choices=("legacy", "api"), help=argparse.SUPPRESS)
    parser.add_argument("--phase-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase:  # worker process
        import paddle

        paddle.enable_static()
        result = legacy_phase() if args.phase == "legacy" else api_phase()
        result["paddle_version"] = paddle.__version__
        Path(args.phase_out).write_text(json.dumps(result))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        files = {p: os.path.join(tmp, f"{p}.json") for p in ("legacy", "api")}
        procs = {"legacy": _run_phase("legacy", "0", files["legacy"]), "api": _run_phase("api", "1", files["api"])}
        results = {}
        for phase, proc in procs.items():
            _, err = proc.communicate()
            if proc.returncode != 0 or not os.path.exists(files[phase]):
                sys.stderr.write(err.decode(errors="replace")[-4000:])
                print(f"phase {phase} failed (exit {proc.returncode})", file=sys.stderr)
                return 1
            results[phase] = json.loads(Path(files[phase]).read_text())
    legacy, api = results["legacy"], results["api"]
    table = merge(legacy, api, read_compat_tsv(), legacy["paddle_version"])
    dump(table, args.out)
    n_ops = sum(1 for k in table if not k.startswith("_"))
    print(f"{n_ops} PIR ops ({sum(1 for k in table if k.startswith('pd_op.'))} pd_op) -> {args.out}; "
          f"{len(legacy['untranslated'])} legacy types untranslated; api case errors: {api['errors'] or 'none'}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
