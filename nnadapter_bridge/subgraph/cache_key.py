"""The model cache key: what makes a compiled program (and a support verdict) reusable.

Owns the cache token of a subgraph program (`extended_cache_token`, or Paddle Lite's own with
Config.set_paddle_lite_cache_token: `paddle_lite_cache_token`), the subgraph fingerprint inside it
(`subgraph_fingerprint`), the versions string (`versions`: nnadapter-bridge, a digest of its code, the drivers and
their environment) that both the token and the support verdict store are keyed by, and the semantic attributes of
an op (`semantic_attrs`: those that can change its meaning) that the fingerprint and the support signature read.
docs/architecture.md ("The cache key") gives the recipe line by line.

Imports the standard's types and nothing of the converters or the runtime: the engine, the plan and the support
decisions import it on every start.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nnadapter_bridge import __version__
from nnadapter_bridge.nnadapter.source_digest import files_digest
from nnadapter_bridge.nnadapter.text_digest import md5_hex
from nnadapter_bridge.nnadapter.types import OperandType

CACHE_FORMAT_VERSION = 2  # 2: the subgraph fingerprint is sha256

# Attributes Paddle writes for bookkeeping; no converter reads them, so they must not split signatures.
BOOKKEEPING_ATTRS = frozenset({
    "op_callstack", "op_device", "op_namescope", "op_role", "op_role_var", "with_quant_attr",
    "use_mkldnn", "use_cudnn", "use_quantizer", "mkldnn_data_type",
})


def freeze(value) -> Any:
    """A hashable, deterministic stand-in for an attribute value (lists become tuples, refs tagged)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (bool, int, float, str, bytes)) or value is None:
        return value
    if dataclasses.is_dataclass(value):  # BlockRef / VarRef
        return (type(value).__name__,) + tuple(freeze(getattr(value, f.name)) for f in dataclasses.fields(value))
    if hasattr(value, "tolist"):
        return freeze(value.tolist())
    return (type(value).__name__, repr(value))


def semantic_attrs(op) -> tuple:
    """The op's attributes that can change its meaning, sorted by name and frozen."""
    return tuple(sorted((name, freeze(value)) for name, value in op.attrs.items() if name not in BOOKKEEPING_ATTRS))


def code_digest() -> str:
    """md5 (16 hex) of the source of the packages whose behaviour a cached program or verdict depends on:
    converters, the NNAdapter standard and the in-tree drivers. Once per process; remembered across starts by the
    files' identities (nnadapter.source_digest: ~1 MB read otherwise)."""
    return files_digest("code", _code_files)


def _code_files() -> list:
    files = []
    for package in ("converters", "hal", "nnadapter_bridge.nnadapter"):
        # Located, not imported: a warm start that restores everything never imports the converters.
        spec = importlib.util.find_spec(package)
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        for root in roots:
            for directory, subdirs, names in os.walk(root):
                subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
                for name in sorted(f for f in names if f.endswith(".py")):
                    path = os.path.join(directory, name)
                    files.append((f"{package}/{os.path.relpath(path, root)}", path))
    return files


def versions(context) -> str:
    """nnadapter-bridge's version, a digest of its converter/standard/driver code, and every device driver's
    name and version of `context`: a change to what a converter or driver produces (a release, or an edit in
    a development install) must not hit a cache or support verdict the old code wrote."""
    parts = [f"nnadapter-bridge={__version__}", f"code={code_digest()}"] + \
        [f"{d.name}={d.version}" for d in context.devices]
    # Drivers fall back to environment variables named after them (e.g. INTEL_OPENVINO_INFERENCE_NUM_THREADS)
    # for keys the properties string leaves out: those values shape the program too.
    prefixes = tuple(d.name.upper() + "_" for d in context.devices)
    environment = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(prefixes))
    # What else shapes a driver's programs on this machine (driver_protocol's optional cache_environment: whether
    # the SDK drivers take int8 kernels, which depends on the CPU): a cache dir moved to another machine must not
    # bring programs made otherwise.
    for d in context.devices:
        extra = getattr(getattr(d, "driver", None), "cache_environment", None)
        text = extra() if extra is not None else ""
        if text:
            parts.append(f"{d.name}:{text}")
    return ",".join(parts + environment)


# -- tokens ------------------------------------------------------------------------------------------
def _lite_token_string(device_names: Sequence[str], input_dims: Mapping[str, Sequence[int]],
                       dynamic_shape_info: Mapping[str, Sequence[Sequence[int]]] | None = None) -> str:
    dynamic_shape_info = dynamic_shape_info or {}
    parts = list(device_names)
    for name in sorted(input_dims, key=lambda n: n.encode("utf-8")):
        parts.append(name)
        shapes = dynamic_shape_info.get(name)
        if shapes:
            parts.extend(str(int(d)) for shape in shapes for d in shape)
        else:
            parts.extend(str(int(d)) for d in input_dims[name])
    return "".join(parts)


def paddle_lite_cache_token(device_names: Sequence[str], input_dims: Mapping[str, Sequence[int]],
                            dynamic_shape_info: Mapping[str, Sequence[Sequence[int]]] | None = None) -> str:
    """Paddle Lite's own token (facts §1): md5 of device names + sorted inputs with dims or dynamic shapes."""
    return md5_hex(_lite_token_string(device_names, input_dims, dynamic_shape_info))


def extended_cache_token(device_names: Sequence[str], input_dims: Mapping[str, Sequence[int]],
                         dynamic_shape_info: Mapping[str, Sequence[Sequence[int]]] | None,
                         input_dtypes: Mapping[str, np.dtype], fingerprint: str, context_properties: str,
                         input_types: Mapping[str, OperandType] | None = None,
                         versions: str = "") -> str:
    """The token the engine uses (see the module docstring for the exact recipe)."""
    names = sorted(input_dims, key=lambda n: n.encode("utf-8"))
    lines = [
        f"nnadapter-bridge-cache-v{CACHE_FORMAT_VERSION}",
        "dtypes:" + ",".join(f"{name}={np.dtype(input_dtypes[name]).name}" for name in names),
        "subgraph:" + fingerprint,
        "properties:" + (context_properties or ""),
    ]
    if input_types is not None:
        # Paddle Lite's string runs dims together ("x" + 1,23 == "x" + 12,3): the compiled input types,
        # separated, make such shapes (and dynamic-shape programs built from different current shapes) distinct.
        lines.append("inputs:" + ";".join(
            f"{name}=" + ",".join(str(int(d)) for d in input_types[name].dims)
            + "".join("|" + ",".join(str(int(d)) for d in shape) for shape in input_types[name].dynamic_dims)
            for name in names))
    if versions:
        lines.append("versions:" + versions)
    text = _lite_token_string(device_names, input_dims, dynamic_shape_info) + "\n" + "\n".join(lines)
    return md5_hex(text)


def subgraph_fingerprint(ops: Sequence, input_names: Sequence[str], output_names: Sequence[str],
                         weight_names: Sequence[str], params: Mapping[str, np.ndarray],
                         float_ops: Sequence[int] = ()) -> str:
    """sha256 (hex) of the subgraph's ops, attributes, var names and weight bytes (module docstring).

    sha256 rather than md5 here: it hashes the weights (all of a model's bytes) about twice as fast where the
    CPU has SHA instructions, and this runs at every predictor start."""
    import hashlib  # OpenSSL's, for the weights; a warm start whose fingerprints are kept does not load it

    digest = hashlib.sha256()

    def line(text: str) -> None:
        digest.update(text.encode("utf-8") + b"\n")

    for op in ops:
        line(f"op {op.type}")
        for slot in sorted(op.inputs):
            line(f"in {slot}={','.join(op.inputs[slot])}")
        for slot in sorted(op.outputs):
            line(f"out {slot}={','.join(op.outputs[slot])}")
        for name, value in semantic_attrs(op):
            line(f"attr {name}={value!r}")
    line("inputs " + ",".join(sorted(input_names)))
    line("outputs " + ",".join(sorted(output_names)))
    for name in sorted(weight_names):
        array = np.asarray(params[name], order="C")  # keeps a 0-d weight 0-d (np.ascontiguousarray would not)
        line(f"weight {name} {array.dtype.name} {list(array.shape)}")
        digest.update(memoryview(array.reshape(-1)).cast("B"))
    if float_ops:  # the mixed-precision quantization config changes what the converters emit
        line("float_ops " + ",".join(str(int(i)) for i in sorted(float_ops)))
    return digest.hexdigest()
