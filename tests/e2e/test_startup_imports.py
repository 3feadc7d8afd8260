"""Issue 31: a warm start imports only what it runs.

A fresh process starts a predictor from a warm cache dir (every program restored, the partition plan read) and
lists the modules it imported. The project's modules must be exactly the ones below (a module added to a warm
start's path fails here: make it load where it is used, or add it with the reason), and the third-party packages
those of the table: no converter, no partition dump or picture, no CLI, no flatbuffers (Paddle Lite's .nb reader),
no difflib (close-match hints), no threadpoolctl unless the device computes with numpy. And the classes whose
dataclass code is generated at import are only those made per operand or per run (GENERATED).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from nnadapter_bridge.loader import snapshot
from support.predictor_programs import add_relu_scale_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT = ("nnadapter_bridge", "partition", "hal", "converters", "devtools")

# What every warm start imports of the project: the predictor, the loader's data model and its program snapshot
# (loader.snapshot: the decoded program kept in the cache dir, so neither protobuf nor the parser and its checks
# load), the runtime and the .nnc reader, the plan store, the partition config and the detector's result types.
CORE = {
    "hal", "hal.protocol", "nnadapter_bridge", "nnadapter_bridge.errors", "nnadapter_bridge.loader",
    "nnadapter_bridge.loader.dtypes", "nnadapter_bridge.loader.graph", "nnadapter_bridge.loader.model_files",
    "nnadapter_bridge.loader.program", "nnadapter_bridge.loader.snapshot", "nnadapter_bridge.nnadapter",
    "nnadapter_bridge.nnadapter.blas_threads", "nnadapter_bridge.nnadapter.codes",
    "nnadapter_bridge.nnadapter.contraction", "nnadapter_bridge.nnadapter.driver_protocol",
    "nnadapter_bridge.nnadapter.model", "nnadapter_bridge.nnadapter.nnc", "nnadapter_bridge.nnadapter.nnc.cleanup",
    "nnadapter_bridge.nnadapter.nnc.container", "nnadapter_bridge.nnadapter.nnc.files",
    "nnadapter_bridge.nnadapter.nnc.identity", "nnadapter_bridge.nnadapter.nnc.records",
    "nnadapter_bridge.nnadapter.nnc.writer", "nnadapter_bridge.nnadapter.properties",
    "nnadapter_bridge.nnadapter.record", "nnadapter_bridge.nnadapter.source_digest",
    "nnadapter_bridge.nnadapter.text_digest",
    "nnadapter_bridge.nnadapter.runtime", "nnadapter_bridge.nnadapter.runtime.compilation",
    "nnadapter_bridge.nnadapter.runtime.context", "nnadapter_bridge.nnadapter.runtime.devices",
    "nnadapter_bridge.nnadapter.runtime.execution", "nnadapter_bridge.nnadapter.runtime.faults",
    "nnadapter_bridge.nnadapter.types", "nnadapter_bridge.predictor", "nnadapter_bridge.predictor.config",
    "nnadapter_bridge.predictor.predictor", "nnadapter_bridge.predictor.settings",
    "nnadapter_bridge.predictor.tensor", "nnadapter_bridge.subgraph", "nnadapter_bridge.subgraph.cache_key",
    "nnadapter_bridge.subgraph.engine", "nnadapter_bridge.subgraph.mixed_precision", "nnadapter_bridge.subgraph.plan",
    "nnadapter_bridge.subgraph.plan_store", "nnadapter_bridge.subgraph.progress",
    "nnadapter_bridge.subgraph.support_decisions", "partition", "partition.config", "partition.detector",
}
# builtin_device computes with the standard's reference operations (numpy): those, and threadpoolctl to cap numpy.
BUILTIN_DEVICE = {
    "hal.builtin_device", "hal.builtin_device.driver", "hal.fusion", "nnadapter_bridge.nnadapter.reference",
    "nnadapter_bridge.nnadapter.serialization", "nnadapter_bridge.nnadapter.operations",
    *(f"nnadapter_bridge.nnadapter.operations.{name}" for name in (
        "activation", "common", "conv", "detection", "elementwise", "generate", "matmul", "normalization", "pool",
        "quantization", "reduce", "registry", "resize", "sampling", "shape", "tensor", "window")),
}
# (cpu_features: the token says whether the driver takes OpenVINO's int8 kernels, which depends on the CPU)
INTEL_OPENVINO = {"hal.intel_openvino", "hal.intel_openvino.checks", "hal.intel_openvino.driver",
                  "nnadapter_bridge.nnadapter.cpu_features"}
# Third-party packages (top level): numpy; google_crc32c (the .nnc CRC); ml_dtypes (bfloat16 params); orjson (the
# verdict store, the plan and the program snapshot); the device's SDK and what it loads. Not protobuf (`google`):
# the program comes from its snapshot.
THIRD_PARTY = {"numpy", "google_crc32c", "ml_dtypes", "orjson"}
# The dataclasses a warm start still generates code for (dataclasses.dataclass: ~0.45 ms each at import): the ones
# made per operand or per run, where a generated __init__ is faster than plain_dataclass's generic one.
GENERATED = ["nnadapter_bridge.loader.program.BlockRef", "nnadapter_bridge.loader.program.VarInfo",
             "nnadapter_bridge.loader.program.VarRef", "nnadapter_bridge.nnadapter.driver_protocol.Argument",
             "nnadapter_bridge.nnadapter.runtime.execution._Binding", "nnadapter_bridge.nnadapter.types.OperandType"]
# builtin_device's reference operations: their registry's records (one per operation and slot, made at import)
# and NMS's attributes (per call).
REFERENCE_GENERATED = ["nnadapter_bridge.nnadapter.operations.detection.NmsAttributes",
                       "nnadapter_bridge.nnadapter.operations.registry.OperationSpec",
                       "nnadapter_bridge.nnadapter.operations.registry.Reference",
                       "nnadapter_bridge.nnadapter.operations.registry.Slot"]
EXPECTED = {
    "builtin_device": (CORE | BUILTIN_DEVICE, THIRD_PARTY | {"threadpoolctl"}),
    # openvino without its model converter (openvino.tools.ovc, which brings openvino_telemetry and packaging).
    "intel_openvino": (CORE | INTEL_OPENVINO, THIRD_PARTY | {"openvino"}),
}
SCRIPT = """
    import json, sys
    # What the interpreter loaded before the start (site, an installation's sitecustomize, ...) is not the start's.
    AT_STARTUP = set(sys.modules)
    sys.path.insert(0, {root!r})
    import numpy as np
    import nnadapter_bridge as nb
    config = nb.Config()
    config.set_model_file({model!r})
    config.set_nnadapter_device_names([{device!r}])
    config.set_nnadapter_model_cache_dir({cache!r})
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(np.ones((2, 4), np.float32))
    predictor.run()
    stats = predictor.stats
    assert {check}, stats
    print("MODULES", json.dumps(sorted(set(sys.modules) - AT_STARTUP)))
    from nnadapter_bridge.nnadapter import record
    generated = sorted(f"{{m}}.{{k}}" for m, module in list(sys.modules.items())
                       if m.split(".")[0] in ("nnadapter_bridge", "partition", "hal", "converters")
                       for k, v in vars(module).items()
                       if isinstance(v, type) and v.__module__ == m and "__dataclass_fields__" in v.__dict__
                       and v.__init__ is not record._init)
    print("GENERATED", json.dumps(generated))
"""


def warm_start_modules(tmp_path, device: str) -> list:
    model = add_relu_scale_model(tmp_path / "device_only", extra_ops=["relu", "sigmoid"])  # no host op
    # The cold start keeps the program snapshot only for files older than loader.snapshot.RACY_NS.
    time.sleep(max(0.0, os.stat(model).st_ctime + snapshot.RACY_NS / 1e9 + 0.1 - time.time()))
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONWARNINGS="ignore")

    def script(check: str) -> str:
        return textwrap.dedent(SCRIPT.format(root=ROOT, model=str(model), device=device, cache=str(cache),
                                             check=check))

    cold = subprocess.run([sys.executable, "-c", script("stats.builds == stats.subgraphs > 0")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert cold.returncode == 0, cold.stderr[-2000:]
    assert any(name.startswith("plan-") for name in os.listdir(cache)), "the partition plan was not kept"
    assert any(name.startswith("program-") for name in os.listdir(cache)), "the program snapshot was not kept"
    warm = subprocess.run([sys.executable, "-c", script(
        "stats.builds == 0 and stats.cache_hits_file == stats.subgraphs > 0 and stats.host_ops == 0")],
        capture_output=True, text=True, timeout=300, env=env)
    assert warm.returncode == 0, warm.stderr[-2000:]
    found = {}
    for key in ("MODULES", "GENERATED"):
        line = next(ln for ln in warm.stdout.splitlines() if ln.startswith(key + " "))
        found[key] = json.loads(line[len(key) + 1:])
    return found


@pytest.mark.parametrize("device", ["builtin_device", "intel_openvino"])
def test_a_warm_start_imports_exactly_the_modules_it_runs(tmp_path, device):
    if device == "intel_openvino":
        pytest.importorskip("openvino")
    found = warm_start_modules(tmp_path, device)
    modules = found["MODULES"]
    # Classes whose dataclass methods were generated (exec'd) at import: only those made per operand or per run.
    generated = GENERATED + (REFERENCE_GENERATED if device == "builtin_device" else [])
    assert found["GENERATED"] == sorted(generated), "make it a plain_dataclass unless it is made per operand or run"
    project, third_party = EXPECTED[device]
    ours = {m for m in modules if m.split(".")[0] in PROJECT}
    assert not ours - project, f"a warm start now imports {sorted(ours - project)}: load it where it is used"
    assert not project - ours, f"no longer imported (take them off the list): {sorted(project - ours)}"
    top = {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - set(PROJECT)
    top = {m for m in top if not m.startswith("_") and m != "site"}  # the interpreter's own and the install's hooks
    assert top <= third_party, f"a warm start now imports {sorted(top - third_party)}"
    # importlib.metadata: this distribution's devices load by their entry points without reading the metadata;
    # tempfile (and shutil, bz2, lzma): a warm start writes no file; hashlib and hmac (OpenSSL): its keys are
    # digests of short texts (nnadapter.text_digest).
    unwanted = {"difflib", "subprocess", "openvino.tools.ovc", "importlib.metadata", "tempfile", "shutil", "hashlib",
                "hmac"}
    assert not unwanted & set(modules), sorted(unwanted & set(modules))
