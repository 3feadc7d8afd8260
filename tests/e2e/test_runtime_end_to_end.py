"""conv -> relu -> max-pool -> fully connected -> softmax through the whole runtime on builtin_device:
compile, write the .nnc, restore it in a fresh Compilation without the model, identical outputs, and
both against a plain-numpy computation written here."""
from __future__ import annotations

import numpy as np
import pytest

from nnadapter_bridge.nnadapter.codes import OperationType as T
from nnadapter_bridge.nnadapter.codes import Precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import unpack_container
from nnadapter_bridge.nnadapter.operations import OPERATIONS, REFERENCES
from nnadapter_bridge.nnadapter.runtime import STATS, Compilation, Context, Execution, acquire_device
from nnadapter_bridge.nnadapter.types import OperandType
from support.tolerances import assert_op_close

NEEDED = (T.CONV_2D, T.RELU, T.MAX_POOL_2D, T.FULLY_CONNECTED, T.SOFTMAX)
MISSING = [op.name for op in NEEDED if op not in OPERATIONS or op not in REFERENCES]
pytestmark = pytest.mark.skipif(bool(MISSING), reason="operation signature or builtin kernel not registered yet: "
                                                       + ", ".join(MISSING))

TOKEN = "e2e0e2e0e2e0e2e0e2e0e2e0e2e0e2e0"


def build_model(weights):
    conv_w, conv_b, fc_w, fc_b = weights
    model = Model()
    i32 = lambda values: model.add_constant(np.array(values, dtype=np.int32))  # noqa: E731
    x = model.add_operand(OperandType(precision=Precision.FLOAT32, dims=(1, 2, 6, 6)), "x")
    conv = model.add_output("conv")
    model.add_operation(T.CONV_2D, [x, model.add_constant(conv_w), model.add_constant(conv_b), i32([0]),
                                    i32([1, 1, 1, 1]), i32([1, 1]), i32([1]), i32([1, 1]), i32([0])], [conv])
    relu = model.add_output("relu")
    model.add_operation(T.RELU, [conv], [relu])
    pool = model.add_output("pool")
    model.add_operation(T.MAX_POOL_2D, [relu, i32([0]), i32([0, 0, 0, 0]), i32([2, 2]), i32([2, 2]),
                                        model.add_constant(np.array([False])), model.add_constant(np.array([False])),
                                        i32([int(Precision.INT32)]), i32([0])], [pool, None])
    fc = model.add_output("fc")
    model.add_operation(T.FULLY_CONNECTED, [pool, model.add_constant(fc_w), model.add_constant(fc_b), i32([0])], [fc])
    prob = model.add_output("prob")
    model.add_operation(T.SOFTMAX, [fc, i32([-1])], [prob])
    model.identify_inputs_and_outputs([x], [prob])
    model.finish()
    return model


def numpy_reference(x, weights):
    conv_w, conv_b, fc_w, fc_b = (w.astype(np.float64) for w in weights)
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    cout, cin, kh, kw = conv_w.shape
    conv = np.zeros((1, cout, 6, 6))
    for o in range(cout):
        for i in range(6):
            for j in range(6):
                conv[0, o, i, j] = np.sum(x[0, :, i:i + kh, j:j + kw] * conv_w[o]) + conv_b[o]
    relu = np.maximum(conv, 0)
    pool = relu.reshape(1, cout, 3, 2, 3, 2).max(axis=(3, 5))
    fc = pool.reshape(1, -1) @ fc_w.T + fc_b
    e = np.exp(fc - fc.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_conv_stack_compiles_caches_and_restores(tmp_path):
    rng = np.random.default_rng(11)
    weights = (rng.standard_normal((3, 2, 3, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32),
               rng.standard_normal((4, 27)).astype(np.float32), rng.standard_normal(4).astype(np.float32))
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    STATS.reset()
    context = Context([acquire_device("builtin_device")])
    compilation = Compilation(build_model(weights), TOKEN, None, str(tmp_path), context)
    compilation.finish()
    compiled_out = Execution(compilation).run([x])[0]
    assert compilation.wait_for_cache_write(timeout=60)
    assert compiled_out.shape == (1, 4)
    assert_op_close(compiled_out, numpy_reference(x, weights).astype(np.float32), what="conv stack")

    path = tmp_path / f"{TOKEN}.nnc"
    entries = unpack_container(path.read_bytes())
    # Paddle Lite's keys, plus the token this record is for (docs/cache.md; no fingerprint: none was given).
    assert list(entries) == ["cache_0_device_name", "cache_0_input_indexes", "cache_0_input_types",
                             "cache_0_model_buffer", "cache_0_output_indexes", "cache_0_output_types",
                             "input_types", "nnadapter_bridge_token", "num_caches", "output_types"]
    assert entries["nnadapter_bridge_token"] == TOKEN.encode()

    fresh = Compilation(None, TOKEN, None, str(tmp_path), Context([acquire_device("builtin_device")]))
    fresh.finish()
    assert fresh.restored_from_cache
    assert (STATS.compiles, STATS.cache_restores, STATS.cache_writes) == (1, 1, 1)
    restored_out = Execution(fresh).run([x])[0]
    np.testing.assert_array_equal(restored_out, compiled_out)
