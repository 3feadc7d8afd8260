"""bicubic_interp_v2 converted (converters/resize.py): no NNAdapter operation resizes bicubically, so each axis is
four GATHER / MUL taps ADDed in Paddle's order, with the taps of nnadapter.interp_rules (which the host kernel uses
too). Compared bit for bit with Paddle Inference on every device that takes GATHER, an inf in the input included
(it reaches only the outputs whose taps read it, as in Paddle's kernel); the op must be on the device, not on the
host kernel.
"""
from __future__ import annotations

import numpy as np
import pytest

from support.converter_harness import pir_program

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]

X = np.random.default_rng(31).standard_normal((2, 3, 5, 7)).astype(np.float32)
X[0, 1, 2, 3] = np.inf
X[1, 2, 4, 0] = -np.inf


def _interpolate(**kwargs):
    def build(x):
        import paddle.nn.functional as F
        if kwargs.get("data_format") == "NHWC":
            x = x.transpose([0, 2, 3, 1])
        return [F.interpolate(x, mode="bicubic", **kwargs)]
    return build


CASES = {
    "size": dict(size=[9, 4]),
    "size_aligned": dict(size=[9, 4], align_corners=True),
    "scale": dict(scale_factor=1.7),
    "scales_aligned": dict(scale_factor=[0.6, 2.0], align_corners=True),
    "one_position": dict(size=[1, 1]),
    "same_size": dict(size=[5, 7]),
    "one_axis": dict(size=[5, 11]),
    "channels_last": dict(size=[6, 2], data_format="NHWC"),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def saved(request, tmp_path_factory):
    return pir_program(tmp_path_factory.mktemp(request.param), _interpolate(**CASES[request.param]), {"x": X})


@pytest.mark.parametrize("device", DEVICES)
def test_bicubic_on_the_device_matches_paddle_bit_for_bit(saved, device):
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    assert [op.type for op in predictor.graph.ops() if "interp" in op.type] == ["bicubic_interp_v2"]
    assert not predictor.host_ops, [op.type for op in predictor.host_ops]
    predictor.get_input(0).from_numpy(X)
    predictor.run()
    got, want = predictor.get_output(0).numpy(), saved.outputs[0]
    assert got.shape == want.shape
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.where(finite, 0, got), np.where(finite, 0, want))  # the same infs
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=1e-6)
