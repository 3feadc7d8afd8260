"""Paddle parameter files: the serialized LoDTensor record (facts §7.2) and the two file layouts (§7.3).

Reading is zero-copy: a file is memory-mapped read-only and every array is an `np.frombuffer` view of the
map (or of the caller's bytes), so arrays are read-only and may be unaligned. Every size field is checked
against the bytes that are left before anything is sized from it, so a forged header cannot allocate.
`encode_lod_tensor` writes the same record; tests and `devtools.zoo.write_program` use it.

Entry points: `read_combined`, `read_single`, `encode_lod_tensor` (the buffers come from model_files.map_file).
Imports the loader's protobuf module and checks only.
"""
from __future__ import annotations

import struct
from typing import cast

import numpy as np
from google.protobuf.message import DecodeError

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import dtypes
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.validate import MAX_RANK

# Var kinds that the Paddle writer never puts in a params file even when persistable (facts §7.3).
NOT_SAVED_KINDS = frozenset({
    dtypes.VarTypeCode.FEED_MINIBATCH,
    dtypes.VarTypeCode.FETCH_LIST,
    dtypes.VarTypeCode.READER,
    dtypes.VarTypeCode.RAW,
})

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")


# Per-var layouts hold one file per parameter: every mmap keeps a file descriptor open while its arrays
# live, so only the few really large ones are mapped (hundreds of mappings exhaust a default fd limit).
PER_VAR_MMAP_THRESHOLD = 16 << 20


class _Reader:
    """A cursor over one buffer that refuses to read past its end."""

    __slots__ = ("buf", "pos", "end", "path", "var")

    def __init__(self, buf, path: str | None, var: str | None = None, pos: int = 0):
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.path = path
        self.var = var

    def fail(self, message: str) -> ModelFormatError:
        return ModelFormatError(message, path=self.path, var=self.var)

    def need(self, n: int, what: str) -> None:
        left = self.end - self.pos
        if n > left:
            raise self.fail(f"truncated: {what} needs {n} bytes at offset {self.pos} but only {left} are left; "
                            f"the file is cut short or does not belong to this model")

    def unpack(self, fmt: struct.Struct, what: str) -> int:
        self.need(fmt.size, what)
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return value


def read_lod_tensor(reader: _Reader, expected_dtype=None, expected_shape=None) -> np.ndarray:
    """Decode one §7.2 record at the reader's position and return a view of its data."""
    version = reader.unpack(_U32, "the LoDTensor version")
    if version != 0:
        raise reader.fail(f"LoDTensor version {version} is not supported (only 0); the params file is corrupt "
                          f"or its records are out of order")
    lod_level = reader.unpack(_U64, "the LoD level count")
    # Each level costs at least its 8-byte size field: bound the count before looping over it.
    if lod_level > (reader.end - reader.pos) // 8:
        raise reader.fail(f"LoD level count {lod_level} exceeds what the remaining "
                          f"{reader.end - reader.pos} bytes can hold; the file is corrupt")
    for level in range(lod_level):
        level_bytes = reader.unpack(_U64, f"LoD level {level} size")
        if level_bytes % 8:
            raise reader.fail(f"LoD level {level} byte size {level_bytes} is not a multiple of 8")
        reader.need(level_bytes, f"LoD level {level} offsets")
        reader.pos += level_bytes  # parameters carry no LoD worth keeping; skip the offsets
    tensor_version = reader.unpack(_U32, "the Tensor version")
    if tensor_version != 0:
        raise reader.fail(f"Tensor version {tensor_version} is not supported (only 0); the file is corrupt")
    desc_size = reader.unpack(_I32, "the TensorDesc size")
    if desc_size < 0:
        raise reader.fail(f"negative TensorDesc size {desc_size}; the file is corrupt")
    reader.need(desc_size, "the TensorDesc")
    desc = pb.VarType.TensorDesc()
    try:
        desc.ParseFromString(bytes(reader.buf[reader.pos:reader.pos + desc_size]))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise reader.fail(f"unreadable TensorDesc ({exc}); the file is corrupt") from exc
    reader.pos += desc_size
    code = int(desc.data_type)
    if not dtypes.is_element_type(code):
        raise reader.fail(f"unknown or non-tensor data type {dtypes.type_name(code)}; the params file is corrupt "
                          f"or written by a newer Paddle")
    dtype = dtypes.numpy_dtype(code)
    shape = tuple(int(d) for d in desc.dims)
    if len(shape) > MAX_RANK:
        raise reader.fail(f"stored dims have {len(shape)} axes; NNAdapter holds at most {MAX_RANK} "
                          f"(NNADAPTER_MAX_SIZE_OF_DIMENSIONS); the file is corrupt or not for this loader")
    if any(d < 0 for d in shape):
        raise reader.fail(f"stored dims {list(shape)} contain a negative size; the file is corrupt")
    if expected_dtype is not None and np.dtype(expected_dtype) != dtype and not _int8_weight(dtype, expected_dtype):
        raise reader.fail(f"stored dtype {dtypes.type_name(code)} disagrees with the model's VarDesc "
                          f"({np.dtype(expected_dtype)}); the params file belongs to another model")
    if expected_shape is not None and not _shape_matches(shape, expected_shape):
        raise reader.fail(f"stored dims {list(shape)} disagree with the model's VarDesc dims "
                          f"{list(expected_shape)}; the params file belongs to another model")
    numel = 1
    for d in shape:
        numel *= d
    nbytes = numel * dtype.itemsize  # Python ints: no overflow, so a forged dim cannot wrap around
    reader.need(nbytes, f"the tensor data ({numel} x {dtype})")
    array = np.frombuffer(reader.buf, dtype=dtype, count=numel, offset=reader.pos).reshape(shape)
    reader.pos += nbytes
    return array


def _int8_weight(stored, declared) -> bool:
    """An int8 tensor stored for a float32 var: what PostTrainingQuantization(onnx_format=True).save_quantized_model
    writes for every quantized weight (the scope tensor becomes int8, the VarDesc stays float32). Paddle reads the
    stored dtype, and so do we: the parameter is int8 (its dequantize_linear reads it as integers)."""
    return np.dtype(stored) == np.int8 and np.dtype(declared) == np.float32


def _shape_matches(stored, declared) -> bool:
    """The stored dims are the declared ones; a one-element tensor may be stored 0-d for a [1] (or [1, 1]...)
    var and the other way round (Paddle runs both, and quantized models store their scales that way)."""
    if tuple(stored) == tuple(declared):
        return True
    if stored and declared and tuple(d for d in stored if d != 1) == tuple(d for d in declared if d != 1):
        # The same elements with axes of size 1 added or dropped ([1, 32] stored for a [32] var): what Paddle's
        # PTQ writes for per-channel scales; Paddle reads the stored dims.
        return True
    return all(d == 1 for d in stored) and all(d == 1 for d in declared) and not (stored and declared)


def read_single(buf, path: str | None, name: str, expected_dtype=None, expected_shape=None) -> np.ndarray:
    """One per-var file: exactly one record, nothing after it."""
    reader = _Reader(buf, path, name)
    array = read_lod_tensor(reader, expected_dtype, expected_shape)
    if reader.pos != reader.end:
        raise reader.fail(f"{reader.end - reader.pos} unexpected bytes after the tensor; the file is not a "
                          f"single Paddle parameter")
    return array


def read_combined(buf, path: str | None, specs) -> dict[str, np.ndarray]:
    """A combined file: one record per (name, dtype, shape) of `specs`, in that order, consumed exactly."""
    reader = _Reader(buf, path)
    params: dict[str, np.ndarray] = {}
    for name, expected_dtype, expected_shape in specs:
        reader.var = name
        if reader.pos == reader.end:
            raise reader.fail(f"the file ends before this parameter ({len(params)} of {len(specs)} read); "
                              f"it is truncated or belongs to a model with fewer parameters")
        params[name] = read_lod_tensor(reader, expected_dtype, expected_shape)
    reader.var = None
    if reader.pos != reader.end:
        raise reader.fail(f"{reader.end - reader.pos} bytes left after the last of {len(specs)} parameters; "
                          f"the params file belongs to a model with more parameters")
    return params


def encode_lod_tensor(array: np.ndarray, data_type: int | None = None) -> bytes:
    """The §7.2 record of `array` (no LoD). `data_type` overrides the element code (e.g. BF16 as uint16)."""
    array = np.asarray(array, order="C")  # a 0-d array keeps dims [] (np.ascontiguousarray would write [1])
    code = dtypes.var_type_of_dtype(array.dtype) if data_type is None else int(data_type)
    desc = pb.VarType.TensorDesc(data_type=cast("pb.VarType.Type", code), dims=list(array.shape))
    desc_bytes = desc.SerializeToString()
    if array.dtype.byteorder == ">":  # files are little-endian whatever the array's order
        array = array.byteswap().view(array.dtype.newbyteorder("<"))
    data = array.tobytes()
    return b"".join([_U32.pack(0), _U64.pack(0), _U32.pack(0), _I32.pack(len(desc_bytes)), desc_bytes, data])
