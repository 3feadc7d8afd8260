"""What the SDK drivers claim in float64, and that a claim is exact.

Every operation sample of nnadapter_bridge/conformance/samples.py is rebuilt with its float32 tensors in
float64 (model inputs and float constants alike). For each SDK driver (intel_openvino,
microsoft_onnxruntime) and each such sample the standard accepts, `validate_program` either answers false
(OpenVINO's CPU plugin computes float64 in float32; onnxruntime lacks float64 kernels for some operators),
or the driver's output equals the float64 reference (builtin_device's interpreter, computing in float64)
at float64 precision: a driver that rounded through float32 would miss it by ~1e-7.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.conformance.harness import Const, Quant, build_op
from nnadapter_bridge.conformance.samples import SAMPLES
from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.reference import run_model
from nnadapter_bridge.nnadapter.runtime import Compilation, Context, DeviceManager, Execution

SDK_DRIVERS = [name for name in ("microsoft_onnxruntime", "intel_openvino") if name in DeviceManager.instance().names()]

# Float64 results agree to a few ulps of the summation order; a float32 round trip misses by ~1e-7.
F64_RTOL = 1e-9
F64_ATOL = 1e-12


def _widen(item):
    """A sample input with float32 widened to float64 (None for a quantized one: no float64 form)."""
    if isinstance(item, Quant):
        return None
    if isinstance(item, Const):
        value = np.asarray(item.value)
        if value.dtype == np.float32 and item.precision in (None, Precision.FLOAT32):
            return Const(value.astype(np.float64), Precision.FLOAT64 if item.precision is not None else None)
        return item
    if isinstance(item, np.ndarray) and item.dtype == np.float32:
        return item.astype(np.float64)
    if isinstance(item, (float, np.floating)) and not isinstance(item, bool):
        return np.float64(item)
    return item


def _float64_samples():
    samples = []
    for sample in SAMPLES:
        if any(isinstance(item, Quant) for item in sample.inputs):
            continue
        inputs = [_widen(item) for item in sample.inputs]
        if not any(isinstance(item, np.ndarray) and item.dtype == np.float64 for item in inputs):
            continue
        samples.append((sample, inputs))
    return samples


FLOAT64_SAMPLES = _float64_samples()


def _build(sample, inputs):
    """The float64 model, or None when the standard does not take this operation in float64."""
    from nnadapter_bridge.errors import NNAdapterError

    try:
        model, feeds = build_op(sample.type, inputs, sample.n_outputs, null_outputs=sample.null_outputs)
    except (NNAdapterError, ValueError):
        return None
    if not any(o.type.precision == Precision.FLOAT64 for o in model.input_operands):
        return None
    return model, feeds


def test_float64_samples_cover_the_common_operations():
    covered = {sample.type for sample, _ in FLOAT64_SAMPLES}
    for t in (T.ADD, T.MUL, T.DIV, T.MAT_MUL, T.FULLY_CONNECTED, T.CONV_2D, T.AVERAGE_POOL_2D, T.MAX_POOL_2D,
              T.SOFTMAX, T.REDUCE_SUM, T.RESHAPE, T.TRANSPOSE, T.CONCAT, T.GATHER, T.SIGMOID):
        assert t in covered


@pytest.mark.parametrize("driver_name", SDK_DRIVERS)
def test_float64_claims_are_exact(driver_name):
    device = DeviceManager.instance().acquire(driver_name)
    claimed, refused, mismatched = [], [], []
    for sample, inputs in FLOAT64_SAMPLES:
        built = _build(sample, inputs)
        if built is None:
            continue
        model, feeds = built
        want = run_model(model, feeds)
        context = Context([device])
        try:
            flags = context.validate(model, 0)
            if not flags or not flags[0]:
                refused.append(sample.id)
                continue
            claimed.append(sample.id)
            compiled = Compilation(model, "", context=context)
            compiled.finish()
            got = Execution(compiled).run(feeds)
            compiled.destroy()
        finally:
            context.destroy()
        for k, (g, w) in enumerate(zip(got, want)):
            if w is None:
                continue
            g, w = np.asarray(g), np.asarray(w)
            if g.dtype != w.dtype or g.shape != w.shape:
                mismatched.append(f"{sample.id}[{k}]: {g.dtype}{g.shape} != {w.dtype}{w.shape}")
            elif w.dtype.kind == "f" and not np.allclose(g, w, rtol=F64_RTOL, atol=F64_ATOL, equal_nan=True):
                worst = float(np.nanmax(np.abs(g.astype(np.float64) - w)))
                mismatched.append(f"{sample.id}[{k}]: max |error| {worst:.3g}")
            elif w.dtype.kind != "f" and not np.array_equal(g, w):
                mismatched.append(f"{sample.id}[{k}]: values differ")
    assert not mismatched, f"{driver_name} claims float64 operations it does not compute exactly: {mismatched}"
    if driver_name == "intel_openvino":
        # The CPU plugin converts float64 to float32: nothing in float64 may be claimed.
        assert not claimed, f"intel_openvino claims float64 operations: {claimed}"
    else:
        assert claimed, "onnxruntime has float64 kernels for elementwise ops, MatMul, Softmax...: none claimed"
