"""Host kernels against Paddle: run a saved program op by op on the host executor, every op that has a host kernel
through that kernel (forced, even where a converter exists), and compare its outputs with Paddle Inference's.

Entry points: `run_on_host`, `check`. Used by the host-kernel test modules (tests/host/test_host_*_kernels.py).
"""
from __future__ import annotations

import numpy as np

from nnadapter_bridge.host import HOST_KERNELS, HostExecutor
from nnadapter_bridge.loader import load_model
from support.tolerances import assert_op_close


def run_on_host(saved, expect_ops=()):
    """The outputs of `saved` (a converter_harness.SavedProgram) run on the host; each op type in `expect_ops` must
    have run through its host kernel."""
    graph = load_model(saved.model_path, saved.params_path)
    executor = HostExecutor(graph)
    scope = {**graph.params, **saved.feeds}
    ran = set()
    for op in graph.ops():
        if op.type in ("feed", "fetch"):
            continue
        if op.type in HOST_KERNELS:
            executor.run_host_kernel(op, scope)
            ran.add(op.type)
        else:
            executor.run(op, scope)
    missing = set(expect_ops) - ran
    assert not missing, f"no host kernel ran for {sorted(missing)} (ran {sorted(ran)})"
    return [scope[name] for name in graph.outputs]


def check(saved, expect_ops=(), *, exact=False, want=None, **tolerance):
    """run_on_host's outputs against `want` (default: Paddle's, saved.outputs): same dtypes and shapes, integer and
    bool values (and all with `exact`) equal, float values within the op tolerance (`tolerance` overrides it)."""
    got = run_on_host(saved, expect_ops)
    want = saved.outputs if want is None else want
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, Paddle {w.dtype}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape}, Paddle {w.shape}"
        if exact or g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
        else:
            assert_op_close(g, w, what=f"output {i}", **tolerance)
    return got
