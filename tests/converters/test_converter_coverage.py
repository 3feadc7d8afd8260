"""Coverage of the converters: every Paddle op type Paddle Lite converts (facts §5.1) and every op type
this project converts beyond that table has a registered converter and a converter test that names it; the number
of collected converter tests stays above a floor."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import converters
from nnadapter_bridge.nnadapter.codes import OperationType

HERE = os.path.dirname(os.path.abspath(__file__))
CONVERTER_TESTS = HERE  # the converter tests sit beside this file
THIS_FILE = os.path.basename(__file__)
DATA = os.path.join(os.path.dirname(HERE), "support", "data")
MIN_COLLECTED_CONVERTER_TESTS = 300

# Paddle Lite's 122 converted op types (tests/support/data/paddle_lite_nnadapter_ops.txt).
PADDLE_LITE_OPS = """
batch_norm bmm cast clip conv2d depthwise_conv2d deformable_conv dropout pool2d matmul matmul_v2 softmax
cumsum conv2d_transpose reshape reshape2 unsqueeze unsqueeze2 mul lookup_table lookup_table_v2
elementwise_add elementwise_sub elementwise_mul elementwise_div elementwise_max elementwise_min
elementwise_pow fusion_elementwise_add_activation fusion_elementwise_sub_activation
fusion_elementwise_mul_activation fusion_elementwise_div_activation fusion_elementwise_min_activation
fusion_elementwise_max_activation fusion_elementwise_pow_activation fusion_elementwise_floordiv_activation
pow sigmoid relu relu6 leaky_relu tanh abs exp instance_norm layer_norm group_norm log swish prelu gelu
hard_sigmoid hard_swish arg_max arg_min assign equal expand expand_v2 not_equal greater_than greater_equal
less_than less_equal lrn reduce_mean reduce_max reduce_sum top_k top_k_v2 scale transpose transpose2 shape
slice strided_slice squeeze squeeze2 range stack fill_constant fill_any_like fill_zeros_like
fill_constant_batch_size_like concat split calib nearest_interp nearest_interp_v2 bilinear_interp
bilinear_interp_v2 flatten flatten2 flatten_contiguous_range fc norm pad2d pad3d prior_box gather
logical_not logical_and floor meshgrid sqrt square tile sum unstack where softplus shuffle_channel yolo_box
log_softmax roi_align multiclass_nms3 sin cos silu rsqrt roll elementwise_floordiv
""".split()

# The op types this project converts beyond Paddle Lite's table.
BEYOND_TABLE_OPS = """
brelu elu selu mish logsigmoid softsign tanh_shrink thresholded_relu hard_shrink softshrink reciprocal log2
log10 log1p ceil round sign elementwise_mod logical_or logical_xor isnan_v2 isinf_v2 isfinite_v2 reduce_min
reduce_any reduce_all p_norm logsumexp expand_as_v2 flip index_select one_hot_v2 pixel_shuffle
max_pool2d_with_index depthwise_conv2d_transpose deformable_conv_v1 pad dot bmm unbind tril_triu share_data
assign_value argsort unfold fold pool3d
""".split()


def test_paddle_lite_table_has_122_types():
    assert len(PADDLE_LITE_OPS) == len(set(PADDLE_LITE_OPS)) == 122
    reference = os.path.join(DATA, "paddle_lite_nnadapter_ops.txt")
    listed = [line.split()[0] for line in open(reference) if line.strip() and not line.startswith("#")]
    assert sorted(listed) == sorted(PADDLE_LITE_OPS)


def _test_sources() -> str:
    text = []
    if os.path.isdir(CONVERTER_TESTS):
        for name in sorted(os.listdir(CONVERTER_TESTS)):
            if name.startswith("test_") and name.endswith(".py") and name != THIS_FILE:
                with open(os.path.join(CONVERTER_TESTS, name), encoding="utf-8") as f:
                    text.append(f.read())
    return "\n".join(text)


@pytest.mark.parametrize("op_type", sorted(set(PADDLE_LITE_OPS) | set(BEYOND_TABLE_OPS)))
def test_op_type_has_converter_and_test(op_type):
    spec = converters.get_converter(op_type)
    assert spec is not None, f"no converter registered for Paddle op '{op_type}'"
    assert spec.emits, f"converter for '{op_type}' declares no emitted NNAdapter operations"
    assert all(isinstance(e, OperationType) for e in spec.emits)
    assert re.search(rf"[\"']{re.escape(op_type)}[\"']", _test_sources()), \
        f"no test in tests/converters names the Paddle op '{op_type}'"


def test_every_registered_converter_is_tested():
    sources = _test_sources()
    untested = [t for t in sorted(converters.CONVERTERS) if not re.search(rf"[\"']{re.escape(t)}[\"']", sources)]
    assert not untested, f"converters without a test naming them: {untested}"


def test_every_converter_module_is_listed():
    """Discovery is the explicit CONVERTER_MODULES list: importing every module of the package registers
    nothing more, and every listed module registers at least one converter (a helper module registers none)."""
    import importlib
    import pkgutil

    before = dict(converters.CONVERTERS)
    for info in pkgutil.iter_modules(converters.__path__):
        importlib.import_module(f"converters.{info.name}")
    unlisted = sorted({spec.fn.__module__ for name, spec in converters.CONVERTERS.items() if name not in before})
    assert not unlisted, f"converter modules missing from converters.CONVERTER_MODULES: {unlisted}"
    registering = {spec.fn.__module__.rsplit(".", 1)[1] for spec in converters.CONVERTERS.values()}
    assert set(converters.CONVERTER_MODULES) == registering


def test_collected_converter_tests_floor():
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", CONVERTER_TESTS,
                             "--ignore", os.path.join(CONVERTER_TESTS, THIS_FILE)],
                            capture_output=True, text=True, cwd=os.path.dirname(HERE))
    match = re.search(r"(\d+) tests? collected", result.stdout)
    assert match, f"could not read the collection count:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    assert int(match.group(1)) >= MIN_COLLECTED_CONVERTER_TESTS
