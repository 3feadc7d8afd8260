"""What the CPU can do that changes how a driver should compute: `exact_int8_kernels()`, whether its int8 dot
products are exact (the SDK drivers take integer products to the SDKs' int8 kernels only then), and the override
INT8_KERNELS_ENV. Read once from /proc/cpuinfo. Imports nothing of the project: the cache key (which a warm start
computes) and the drivers import it.
"""
from __future__ import annotations

import os

# The x86 CPU flags of an exact int8 dot product (VPDPBUSD and AMX's tiles). Without them oneDNN (OpenVINO's CPU
# plugin) and onnxruntime's MLAS multiply u8 x s8 with VPMADDUBSW, whose pairwise int16 sums saturate, and oneDNN
# halves the weights to avoid that: the int8 products lose a bit. Measured on an AMD EPYC with AVX2 only: the
# quantized MobileNetV1 came out at cosine 0.985 against Paddle Inference on both SDKs (ResNet50: top-1 agreement
# 3%), 0.99999999 with the same products computed in float.
EXACT_INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
INT8_KERNELS_ENV = "NNADAPTER_BRIDGE_INT8_KERNELS"  # "1" / "0": take or refuse the SDKs' int8 kernels anyway
_exact_int8: bool | None = None


def exact_int8_kernels() -> bool:
    """Whether the SDK drivers run integer products (int8 x int8 -> int32) on the SDKs' int8 kernels: on a CPU
    with an exact int8 dot product (EXACT_INT8_FLAGS in /proc/cpuinfo), unless NNADAPTER_BRIDGE_INT8_KERNELS says
    otherwise. Elsewhere (no such flag, or no /proc/cpuinfo to tell) they compute them in float on the dequantized
    operands: the same values, exact sums up to float32 rounding."""
    global _exact_int8
    override = os.environ.get(INT8_KERNELS_ENV, "").strip()
    if override in ("0", "1"):
        return override == "1"
    if _exact_int8 is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
        except OSError:
            flags = []
        _exact_int8 = bool(EXACT_INT8_FLAGS.intersection(flags))
    return _exact_int8
