"""1-D linear interpolation (linear_interp_v2 from paddle.nn.functional.interpolate(mode="linear")) converted as a
RESIZE_LINEAR of an [N, C, 1, W] view (converters/resize.py), against Paddle Inference on a PIR program:
each way Paddle gives the size (size list, size from a tensor, scale factor), both alignments, NCW and NWC, on
builtin_device through the converter alone and on every device through the predictor; half-pixel sampling to a
single position, where the two differ, stays on the host."""
from __future__ import annotations

import numpy as np
import pytest

from support.converter_harness import run_pir
from support.tolerances import assert_model_close

DEVICES = ["builtin_device", "intel_openvino", "microsoft_onnxruntime"]


def _run_on_device(saved, device) -> np.ndarray:
    """The program's output through the predictor on `device`, which must take the interpolation itself."""
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names([device])
    predictor = nb.create_predictor(config)
    (placement,) = [p for p in predictor.placements() if p.op.type == "linear_interp_v2"]
    assert placement.device == device, f"linear_interp_v2 on the host: {placement.reason}"
    predictor.get_input_by_name("x").from_numpy(saved.feeds["x"])
    predictor.run()
    return predictor.get_output(0).numpy()

CASES = {
    "size": dict(size=[11]),
    "size_align_corners": dict(size=[11], align_corners=True),
    "shrink_half_pixel_align_mode_0": dict(size=[3], align_corners=False, align_mode=0),
    "scale_factor": dict(scale_factor=2.0),
    "scale_factor_align_mode_0": dict(scale_factor=1.5, align_mode=0),
    "nwc": dict(size=[9], data_format="NWC"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_linear_interp_1d_matches_paddle(tmp_path, case):
    kwargs = dict(CASES[case])
    fmt = kwargs.setdefault("data_format", "NCW")
    shape = [2, 7, 3] if fmt == "NWC" else [2, 3, 7]
    feeds = {"x": np.random.default_rng(6).standard_normal(shape).astype(np.float32)}

    def build(x):
        import paddle
        return paddle.nn.functional.interpolate(x, mode="linear", **kwargs)
    got, result, saved = run_pir(tmp_path, "linear_interp_v2", build, feeds, exact=True)
    for device in DEVICES:
        assert_model_close(_run_on_device(saved, device), saved.outputs[0], what=f"{case} on {device}")


def test_linear_interp_1d_size_from_a_tensor(tmp_path):
    # The width comes from the data: twice the input width, through paddle.shape (OutSize / SizeTensor).
    feeds = {"x": np.random.default_rng(7).standard_normal([1, 2, 5]).astype(np.float32)}

    def build(x):
        import paddle
        width = paddle.shape(x)[2] * 2
        return paddle.nn.functional.interpolate(x, size=[width], mode="linear", align_corners=False)
    _, _, saved = run_pir(tmp_path, "linear_interp_v2", build, feeds)
    for device in DEVICES:
        assert_model_close(_run_on_device(saved, device), saved.outputs[0], what=device)


@pytest.mark.parametrize("size_kwargs", [dict(size=[1]), dict(scale_factor=0.25)], ids=["size_1", "scale_to_1"])
@pytest.mark.filterwarnings("ignore::nnadapter_bridge.subgraph.plan.HostPlacementWarning")
def test_half_pixel_to_a_single_position_stays_on_the_host(tmp_path, size_kwargs):
    # Paddle's 1-D kernel samples a single output position between inputs (in/out, or 1/scale, half a step in);
    # RESIZE_LINEAR reads input 0 there, so the op is left to the host kernel, which matches Paddle.
    from support.converter_harness import pir_program, run_predictor

    feeds = {"x": np.random.default_rng(8).standard_normal([2, 2, 5]).astype(np.float32)}

    def build(x):
        import paddle
        return paddle.nn.functional.interpolate(x, mode="linear", align_corners=False, **size_kwargs)
    saved = pir_program(tmp_path, build, feeds)
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(saved.model_path)
    config.set_nnadapter_device_names(["builtin_device"])
    placement = [p for p in nb.create_predictor(config).placements() if p.op.type == "linear_interp_v2"][0]
    assert placement.device is None and "single output position" in placement.reason, placement
    assert_model_close(run_predictor(saved, "builtin_device")[0], saved.outputs[0])
