"""Whole models through the predictor on every SDK driver, against Paddle Inference; the .nnc cache
restores without compiling; a detection model mixing supported and unsupported ops splits correctly.

The vendor drivers (intel_openvino, microsoft_onnxruntime) are dependencies of the test extra, so they
must load here: a driver that fails to load fails these tests rather than skipping them.
"""
from __future__ import annotations

import numpy as np
import pytest

import nnadapter_bridge as nb
from support.tolerances import assert_model_close

MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet50", "squeezenet1_0", "shufflenet_v2_x1_0"]
DRIVERS = ["intel_openvino", "microsoft_onnxruntime"]
# One thread each: the suite runs two test workers on two cores.
PROPERTIES = "INTEL_OPENVINO_INFERENCE_NUM_THREADS=1;MICROSOFT_ONNXRUNTIME_NUM_THREADS=1;BUILTIN_DEVICE_NUM_THREADS=1"


def _predictor(path, devices, cache_dir=None, partition_config=None):
    config = nb.Config()
    config.set_model_file(path)
    config.set_nnadapter_device_names(devices)
    config.set_nnadapter_context_properties(PROPERTIES)
    if cache_dir is not None:
        config.set_nnadapter_model_cache_dir(str(cache_dir))
    if partition_config is not None:
        config.set_nnadapter_subgraph_partition_config_buffer(partition_config)
    return nb.create_predictor(config)


def _run(predictor, feeds):
    for name, array in feeds.items():
        predictor.get_input_by_name(name).from_numpy(array)
    predictor.run()
    return [predictor.get_output(k).numpy() for k in range(len(predictor.get_output_names()))]


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_on_driver_matches_paddle_and_restores_from_cache(
    name, driver, zoo_model, paddle_reference, tmp_path
):
    assert nb.check_nnadapter_device_name(driver), f"{driver} does not load"
    path = zoo_model(name, "pdmodel")
    x = np.random.default_rng(5).standard_normal((1, 3, 224, 224)).astype(np.float32)
    want = paddle_reference(path, {"x": x})

    first = _predictor(path, [driver], tmp_path)
    got = _run(first, {"x": x})
    for k, expected in enumerate(want):
        assert_model_close(got[k], expected, what=f"{name} on {driver} output {k}")
    assert first.stats.builds >= 1 and first.stats.cache_hits_file == 0
    # Every op of these models runs on the SDK device: nothing is left on the host.
    assert first.stats.host_ops == 0, first.unsupported_reasons()
    assert nb.wait_for_cache_writes(timeout=120)  # the .nnc is written by a thread of its own
    assert list(tmp_path.glob("*.nnc")), "no .nnc written after the first run"

    second = _predictor(path, [driver], tmp_path)
    restored = _run(second, {"x": x})
    assert second.stats.builds == 0, "the second predictor compiled instead of restoring the .nnc"
    assert second.stats.cache_hits_file == second.stats.subgraphs >= 1
    for k in range(len(got)):
        np.testing.assert_array_equal(restored[k], got[k])


def _detector_feeds(batch: int):
    rng = np.random.default_rng(batch)
    image = rng.standard_normal((batch, 3, 64, 64)).astype(np.float32)
    im_shape = np.tile(np.array([[64, 64]], np.int32), (batch, 1))
    return {"image": image, "im_shape": im_shape}


@pytest.mark.slow
def test_detection_model_on_builtin_device_batch_1_then_2(zoo_model, paddle_reference):
    path = zoo_model("yolo_detector", "pdmodel")
    predictor = _predictor(path, ["builtin_device"])
    for batch in (1, 2):
        feeds = _detector_feeds(batch)
        got = _run(predictor, feeds)
        want = paddle_reference(path, feeds)
        assert len(got) == len(want) == 2
        assert_model_close(got[0], want[0], what=f"detections batch {batch}")
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.slow
def test_detection_model_on_openvino_splits_at_the_unsupported_op(zoo_model, paddle_reference):
    """intel_openvino declines this detector's multiclass_nms3 (pixel boxes, normalized false: its
    NonMaxSuppression has no +1 convention, hal/intel_openvino/nms.py): that op runs on the host, everything
    before it on the device."""
    path = zoo_model("yolo_detector", "pdmodel")
    predictor = _predictor(path, ["intel_openvino"])
    host_types = sorted(op.type for op in predictor.host_ops)
    assert host_types == ["multiclass_nms3"]
    device_types = {op.type for sub in predictor.partition.subgraphs for op in sub.ops}
    assert {"conv2d", "batch_norm", "relu", "pool2d", "yolo_box"} <= device_types
    feeds = _detector_feeds(1)
    got = _run(predictor, feeds)
    want = paddle_reference(path, feeds)
    assert_model_close(got[0], want[0], what="detections")
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.slow
def test_partition_config_forcing_ops_to_the_host_keeps_the_outputs(zoo_model, paddle_reference):
    """Forcing the detection head's conv and yolo_box to the host splits the device part differently but
    leaves every output equal to Paddle's; the subgraph count follows from the config."""
    path = zoo_model("yolo_detector", "pdmodel")
    feeds = _detector_feeds(1)
    want = paddle_reference(path, feeds)
    plain = _predictor(path, ["builtin_device"])
    forced = _predictor(path, ["builtin_device"], partition_config="# keep post-processing off the device\n"
                                                                     "yolo_box\r\nmulticlass_nms3\n")
    assert sorted(op.type for op in forced.host_ops) == ["multiclass_nms3", "yolo_box"]
    # The device part before yolo_box and the transpose after it cannot join: two subgraphs.
    assert len(forced.partition.subgraphs) == 2
    assert len(plain.partition.subgraphs) == 1 and not plain.host_ops
    for predictor in (plain, forced):
        got = _run(predictor, feeds)
        assert_model_close(got[0], want[0], what="detections")
        np.testing.assert_array_equal(got[1], want[1])
