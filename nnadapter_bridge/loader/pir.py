"""Paddle 3 PIR programs (`<name>.json`) -> the BlockInfo / OpInfo / VarInfo of a legacy ProgramDesc.

Paddle >= 3.0 saves inference programs as PIR: a JSON encoding of an SSA program (format facts in
docs/pir.md). The rest of nnadapter-bridge (converters, host kernels, partition config, dump, cache) speaks
the legacy op vocabulary, so this module translates: `pd_op.matmul` becomes `matmul_v2` with slots
`X`/`Y`/`Out`, `pd_op.full` becomes `fill_constant`, `builtin.parameter` a persistable var, `pd_op.data` /
`pd_op.fetch` become `feed` / `fetch` ops with their `col`, and PIR's mutable attributes (operands produced
by `pd_op.full` / `pd_op.full_int_array`) fold back into the legacy attribute, or become the legacy tensor
input (`ShapeTensor`, `StartsTensorList`, ...) when they are computed at run time. `builtin.combine` /
`builtin.split` are the list slots they stand for; `pd_op.if` becomes two `conditional_block` ops (the
second on `logical_not(cond)`) whose sub-blocks assign the branch results, `pd_op.while` a `while` op
over loop-carried vars that its sub-block assigns (the legacy form; the host executor runs both), and
`pd_op.pylayer` (a PyLayer's forward) its forward's ops inlined, the results assigned from what it yields.

Value names: a parameter keeps its name, a `pd_op.data` result its feed name, a fetched value the fetch's
`name` (`fetch_name_0`, what Paddle Inference reports as the output name); every other value is named
`<legacy op type>_<n>.tmp_<k>`: n counts that legacy type's ops over the whole program in file order
(nested blocks included, depth first), k is the result index. Names are therefore stable for a file, and
are what a partition config names.

Names and operand orders come from two tables (see loader.pir_tables); ops that need more than a
rename (control flow, constants, in-place forms, the conv-bias pattern of `paddle.nn.Conv2D`) have their
own handler below.

Entry points: `translate`, `looks_like_pir`, `parse_json`. Imports the loader's program model, checks and
tables; never paddle.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson

from nnadapter_bridge.errors import ModelFormatError
from nnadapter_bridge.loader import dtypes, validate
from nnadapter_bridge.loader import framework_pb2 as pb
from nnadapter_bridge.loader.pir_tables import compat, compat_by_legacy, signatures
from nnadapter_bridge.loader.program import BlockInfo, BlockRef, OpInfo, VarInfo, VarRef, infer_attr_type

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# The serialization versions of paddle 3.0-3.3's PIR writer (base_code.version).
SUPPORTED_VERSIONS = (1, 2, 3, 4)
DIALECTS = {"0": "builtin", "1": "pd_op", "2": "cf", "3": "custom_op", "4": "pd_dist"}
# PIR dtype type names (`0.t_f32`) -> Paddle VarType element codes.
_TYPE_CODES = {
    "t_bool": dtypes.VarTypeCode.BOOL, "t_i8": dtypes.VarTypeCode.INT8, "t_ui8": dtypes.VarTypeCode.UINT8,
    "t_i16": dtypes.VarTypeCode.INT16, "t_i32": dtypes.VarTypeCode.INT32, "t_i64": dtypes.VarTypeCode.INT64,
    "t_f16": dtypes.VarTypeCode.FP16, "t_bf16": dtypes.VarTypeCode.BF16, "t_f32": dtypes.VarTypeCode.FP32,
    "t_f64": dtypes.VarTypeCode.FP64, "t_c64": dtypes.VarTypeCode.COMPLEX64,
    "t_c128": dtypes.VarTypeCode.COMPLEX128,
}
# `1.a_dtype` strings -> VarType element codes (the legacy `dtype` / `out_dtype` attributes hold these).
DTYPE_NAMES = {
    "bool": 0, "int16": 1, "int32": 2, "int64": 3, "float16": 4, "float32": 5, "float64": 6, "uint8": 20,
    "int8": 21, "bfloat16": 22, "complex64": 23, "complex128": 24,
}
# Attributes PIR writes that no legacy op has (provenance, distribution, placement).
_DROPPED_ATTRS = frozenset({"struct_name", "op_dist_attr", "op_role", "chunk_id", "op_callstack", "place",
                            "op_namescope", "persistable", "stop_gradient"})
_A = pb.AttrType
_SCALAR_ATTR_TYPES = {"0.a_bool": _A.BOOLEAN, "0.a_i32": _A.INT, "0.a_i64": _A.LONG, "0.a_f32": _A.FLOAT,
                      "0.a_f64": _A.FLOAT64, "0.a_str": _A.STRING, "1.a_dtype": _A.INT,
                      "1.a_datatype": _A.INT, "1.a_layout": _A.STRING, "1.a_place": _A.INT}
_LIST_ATTR_TYPES = {_A.BOOLEAN: _A.BOOLEANS, _A.INT: _A.INTS, _A.LONG: _A.LONGS, _A.FLOAT: _A.FLOATS,
                    _A.FLOAT64: _A.FLOAT64S, _A.STRING: _A.STRINGS}
# Element types of folded mutable attributes, as op_compat names them.
_KIND_TYPES = {"int": _A.INT, "int64_t": _A.LONG, "float": _A.FLOAT, "double": _A.FLOAT64, "bool": _A.BOOLEAN,
               # allclose/isclose keep rtol/atol as decimal strings in a ProgramDesc
               "std::string": _A.STRING}
# Elementwise binaries: legacy ops carry `axis` (-1: numpy broadcasting, which is PIR's only rule).
_ELEMENTWISE = frozenset({"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                          "elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_mod",
                          "elementwise_floordiv", "elementwise_fmax", "elementwise_fmin"})


def parse_json(data, where: str):
    """Bytes of a `.json` model -> the decoded document, parsed once by orjson (the fastest parser that fits,
    benchmarks/bench_pir_load.py; it refuses more than 1024 levels of nesting, so no input recurses deeply)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        data = memoryview(data)  # an mmap of a big file: parsed in place, never copied into bytes first
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:  # bad UTF-8 included
        if "depth limit" in str(exc):
            raise ModelFormatError(f"the JSON nests deeper than 1024 levels ({exc}); no PIR program paddle writes "
                                   f"is that deep, the file is corrupt or forged", path=where) from None
        raise ModelFormatError(f"not valid JSON ({exc}); the PIR program is truncated or corrupt", path=where) \
            from None


# What the special handlers emit (the legacy op types a PIR op with its own handler becomes).
SPECIAL_LEGACY = {
    "pd_op.data": "feed", "pd_op.fetch": "fetch", "pd_op.full": "fill_constant",
    "pd_op.full_int_array": "assign_value", "pd_op.assign_value": "assign_value",
    "pd_op.assign_value_": "assign_value", "pd_op.full_with_tensor": "fill_constant",
    "pd_op.if": "conditional_block", "pd_op.while": "while", "pd_op.create_array": None,
    "pd_op.array_write_": "write_to_array", "pd_op.array_read": "read_from_array",
    "pd_op.array_length": "lod_array_length", "pd_op.slice_array_dense": "slice", "pd_op.shape64": "shape",
    "pd_op.shape": "shape",
    "builtin.combine": None, "builtin.split": None, "builtin.slice": None, "builtin.shadow_output": None,
    "builtin.parameter": None, "cf.yield": None,
}


def known_ops() -> dict:
    """Every PIR op name the translation knows -> the legacy op type it becomes (None: it becomes no op, only
    vars or list slots). Ops with a signature translate through op_compat; the rest have handlers here."""
    table = {}
    rows = compat()
    for name, sig in signatures().items():
        short = name.split(".", 1)[1]
        base = short[:-1] if short.endswith("_") else short
        row = rows.get(short) or rows.get(base)
        legacy = (row.legacy if row is not None else "") or sig.legacy or None
        table[name] = _RENAMED_BY_FIXUP.get(legacy, legacy)
    table.update(SPECIAL_LEGACY)
    return table


def looks_like_pir(data) -> bool:
    """True when a model buffer is JSON (a PIR program) rather than a serialized ProgramDesc."""
    head = bytes(data[:64]).lstrip()
    return head[:1] in (b"{", b"[")  # an array is JSON too: translate() then says it is not a PIR object


class PirProgram:
    """A translated PIR program: legacy blocks, the parameter specs in .pdiparams order, the version."""

    def __init__(self, blocks: list[BlockInfo], param_specs: list, version: int):
        self.blocks = blocks
        self.param_specs = param_specs
        self.version = version


def translate(doc: Any, where: str) -> PirProgram:
    """A decoded PIR document -> PirProgram; ModelFormatError naming `where` for anything malformed."""
    try:
        return _Translator(doc, where).run()
    except ModelFormatError:
        raise
    except RecursionError:
        raise ModelFormatError("the PIR program nests regions too deeply to read", path=where) from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        # The structure checks below name what they expect; anything that still slips through is a document
        # shaped unlike any paddle writes.
        raise ModelFormatError(f"malformed PIR program ({type(exc).__name__}: {exc}); the file is corrupt or "
                               f"was not written by paddle.jit.save / save_inference_model", path=where) from None


class _Value:
    """One SSA value: its legacy var name(s), type and, for constants, the numpy data."""

    __slots__ = ("name", "members", "dtype_code", "shape", "const", "is_intarray", "kind", "producer", "block")

    def __init__(self, name=None, members=None, dtype_code=None, shape=(), kind="tensor"):
        self.name = name
        self.members = members  # list[_Value] for vector values (builtin.combine, multi-tensor results)
        self.dtype_code = dtype_code
        self.shape = shape
        self.const = None  # np.ndarray for full / full_int_array / assign_value results
        self.is_intarray = False  # produced by full_int_array (a list), not full (a scalar)
        self.kind = kind  # "tensor", "vec", "array" (tensor array), "none"
        self.producer = None  # the PIR op name that made it
        self.block = 0  # the legacy block it is defined in: visible there and in the blocks nested in it

    def names(self) -> list:
        if self.members is not None:
            return [m.name for m in self.members]
        return [self.name]


class _Translator:
    def __init__(self, doc, where: str):
        self.where = where
        self.doc = doc
        self.sigs = signatures()
        self.compat = compat()
        self.values: dict[int, _Value] = {}
        self.blocks: list[dict] = []  # {"idx", "parent", "ops": [OpInfo], "vars": {name: VarInfo}}
        self.counters: dict[str, int] = {}
        self.fetch_names: dict[int | None, str] = {}
        self.params: dict[str, tuple] = {}
        self.feed_col = 0
        self.current_block = 0
        self.removable: set = set()  # id(OpInfo) of ops that may go when nothing reads their outputs
        self.const_by_name: dict = {}  # legacy var name -> np.ndarray, for full / full_int_array / assign_value
        self.used_names: set = set()
        self._producer_op: dict[str, OpInfo] = {}  # var name -> the emitted op writing it

    # -- errors ---------------------------------------------------------------------------------------
    def fail(self, message: str, op=None, var: str | None = None) -> ModelFormatError:
        if op is not None:
            message = f"op {op.get('#', '?')!s}: {message}"
        return ModelFormatError(message, path=self.where, var=var)

    # -- entry ------------------------------------------------------------------------------------------
    def run(self) -> PirProgram:
        doc = self.doc
        if not isinstance(doc, dict) or not isinstance(doc.get("base_code"), dict):
            raise self.fail("not a PIR program: no 'base_code' object at the top level (expected "
                            "{\"base_code\": {\"magic\": \"pir\", ...}, \"program\": ...})")
        base = doc["base_code"]
        if base.get("magic") != "pir":
            raise self.fail(f"not a PIR program: base_code.magic is {base.get('magic')!r}, expected 'pir'")
        version = base.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
            raise self.fail(f"PIR serialization version {version!r} is not supported; this reader reads versions "
                            f"{', '.join(map(str, SUPPORTED_VERSIONS))} (paddle 3.0-3.3). Re-export with one "
                            f"of those paddle versions, or upgrade nnadapter-bridge")
        program = doc.get("program")
        regions = program.get("regions") if isinstance(program, dict) else None
        if not isinstance(regions, list) or not regions:
            raise self.fail("the PIR program has no regions; the file is corrupt")
        top = self._single_block(regions[0], None)
        self._prescan_fetches(top)
        self._new_block(-1)
        self._feed_fetch_vars()
        self._translate_ops(top.get("ops"), 0)
        blocks = self._finish()
        specs = [(name, dtypes.numpy_dtype(code), shape) for name, (code, shape) in sorted(self.params.items())]
        return PirProgram(blocks, specs, version)

    def _single_block(self, region, op) -> dict:
        if not isinstance(region, dict) or not isinstance(region.get("blocks"), list) or len(region["blocks"]) != 1:
            raise self.fail("a region must hold exactly one block", op)
        block = region["blocks"][0]
        if not isinstance(block, dict) or not isinstance(block.get("ops"), list):
            raise self.fail("a block must hold an 'ops' list", op)
        return block

    def _prescan_fetches(self, top: dict) -> None:
        for op in top["ops"]:
            if isinstance(op, dict) and op.get("#") == "1.fetch":
                operands = op.get("I") or []
                name = self._attrs(op).get("name")
                if operands and isinstance(operands[0], dict) and isinstance(name, str):
                    validate.text(name, "pd_op.fetch: the output name", self.where)
                    self.fetch_names.setdefault(operands[0].get("%"), name)

    def _new_block(self, parent: int) -> int:
        """A new legacy block inside `parent`. Refused past validate.MAX_BLOCK_DEPTH levels: the translation
        recurses once per level (if / while regions), so the limit bounds its recursion too."""
        idx = len(self.blocks)
        depth = self.blocks[parent]["depth"] + 1 if parent >= 0 else 0
        if depth > validate.MAX_BLOCK_DEPTH:
            raise self.fail(f"control flow (pd_op.if / pd_op.while regions) nests {depth} levels deep; this loader "
                            f"reads at most {validate.MAX_BLOCK_DEPTH}")
        self.blocks.append({"idx": idx, "parent": parent, "ops": [], "vars": {}, "depth": depth, "children": []})
        if parent >= 0:
            self.blocks[parent]["children"].append(idx)
        return idx

    def _feed_fetch_vars(self) -> None:
        vars0 = self.blocks[0]["vars"]
        vars0["feed"] = VarInfo("feed", int(dtypes.VarTypeCode.FEED_MINIBATCH), None, None, (), True, 0, False)
        vars0["fetch"] = VarInfo("fetch", int(dtypes.VarTypeCode.FETCH_LIST), None, None, (), True, 0, False)

    # -- types and attributes ---------------------------------------------------------------------------
    def _decode_type(self, tt, op, nesting: int = 0) -> tuple:
        """A `TT` object -> (kind, dtype code, shape, member types)."""
        if nesting > validate.MAX_VALUE_NESTING:
            raise self.fail(f"a type nests vectors more than {validate.MAX_VALUE_NESTING} levels deep", op)
        if not isinstance(tt, dict):
            raise self.fail(f"result type {tt!r} is not a type object", op)
        kind = tt.get("#")
        data = tt.get("D")
        # paddle 3.3.1 names a tensor array's type 1.t_dense_tensor_array (earlier 3.x: 1.t_tensor_array).
        if kind in ("0.t_dtensor", "0.t_dtensor_array", "1.t_dtensor_array", "1.t_tensor_array",
                    "1.t_dense_tensor_array", "0.t_selected_rows", "1.t_selected_rows"):
            if not isinstance(data, list) or not data or not isinstance(data[0], dict):
                raise self.fail(f"type {kind} without an element type", op)
            elem = str(data[0].get("#", ""))
            code = _TYPE_CODES.get(elem.split(".", 1)[-1])
            if code is None:
                raise self.fail(f"element type {elem!r} is not one this reader knows "
                                f"({', '.join(sorted(_TYPE_CODES))})", op)
            dims = data[1] if len(data) > 1 and "array" not in kind else []
            if not isinstance(dims, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
                raise self.fail(f"type {kind} has dims {dims!r}, expected a list of integers", op)
            dims = validate.check_dims(dims, f"op {op.get('#', '?') if isinstance(op, dict) else '?'}: type {kind}",
                                       self.where)
            return ("array" if "array" in kind else "tensor", int(code), tuple(dims), None)
        if kind == "0.t_vec":
            if not isinstance(data, list):
                raise self.fail("vector type without member types", op)
            return ("vec", None, (), [self._decode_type(t, op, nesting + 1) for t in data])
        if kind in (None, "0.t_null", "NULL"):
            return ("none", None, (), None)
        raise self.fail(f"type {kind!r} is not one this reader knows (dense tensors, vectors, tensor arrays)", op)

    def _attr_value(self, at, op, name: str, nesting: int = 0) -> tuple:
        """An `AT` object -> (python value, legacy AttrType)."""
        if nesting > validate.MAX_VALUE_NESTING:
            raise self.fail(f"attribute '{name}' nests arrays more than {validate.MAX_VALUE_NESTING} levels deep", op)
        if not isinstance(at, dict) or "#" not in at:
            raise self.fail(f"attribute '{name}' is not an attribute object", op)
        kind, data = at["#"], at.get("D")
        if kind == "0.a_array":
            if not isinstance(data, list):
                raise self.fail(f"attribute '{name}': array without a list", op)
            items = [self._attr_value(item, op, name, nesting + 1) for item in data]
            elem_type = items[0][1] if items else _A.INTS
            list_type = _LIST_ATTR_TYPES.get(elem_type, _A.INTS) if items else _A.INTS
            return [v for v, _ in items], list_type
        if kind == "1.a_intarray":
            if not isinstance(data, list) or not all(isinstance(v, int) and _INT64_MIN <= v <= _INT64_MAX
                                                     for v in data):
                raise self.fail(f"attribute '{name}': int array {str(data)[:80]} is not a list of 64-bit integers",
                                op)
            return [int(v) for v in data], _A.LONGS
        if kind in ("1.a_dtype", "1.a_datatype"):
            code = DTYPE_NAMES.get(str(data), -1) if not str(data).startswith("Undefined") else -1
            return code, _A.INT
        if kind == "1.a_place":
            return data, _A.INT
        if kind in ("1.a_scalar", "0.a_scalar"):
            if isinstance(data, dict):
                return self._attr_value(data, op, name, nesting + 1)
            return data, _A.FLOAT64 if isinstance(data, float) else _A.LONG
        if kind in _SCALAR_ATTR_TYPES:
            t = _SCALAR_ATTR_TYPES[kind]
            if t == _A.BOOLEAN and not isinstance(data, bool) or t in (_A.INT, _A.LONG) and (
                    not isinstance(data, int) or isinstance(data, bool) or not _INT64_MIN <= data <= _INT64_MAX):
                raise self.fail(f"attribute '{name}' of kind {kind} holds {str(data)[:80]}, not a 64-bit integer"
                                if t in (_A.INT, _A.LONG) else f"attribute '{name}' of kind {kind} holds {data!r}", op)
            if t in (_A.FLOAT, _A.FLOAT64):
                if data is None and "VD" in at:
                    # paddle 3.3.1 writes a non-finite float as {"#": "0.a_f64", "VD": "INF" | "-INF" | "NaN"}
                    data = at["VD"]
                    if not isinstance(data, str) or data.upper() not in ("INF", "-INF", "NAN"):
                        raise self.fail(f"attribute '{name}' of kind {kind} has special value {data!r}; "
                                        f"paddle writes only INF, -INF and NaN there", op)
                if isinstance(data, str):  # paddle writes non-finite floats as strings
                    text = data
                    try:
                        data = float(text)
                    except ValueError:
                        raise self.fail(f"attribute '{name}' of kind {kind} holds {text[:80]!r}, not a number",
                                        op) from None
                if not isinstance(data, (int, float)) or isinstance(data, bool):
                    raise self.fail(f"attribute '{name}' of kind {kind} holds {data!r}", op)
                data = float(data)
            if t == _A.STRING and not isinstance(data, str):
                raise self.fail(f"attribute '{name}' of kind {kind} holds {data!r}", op)
            if t == _A.STRING:
                data = validate.text(data, f"op {op.get('#', '?')}: attribute '{name}'", self.where, is_name=False)
            return data, t
        raise self.fail(f"attribute '{name}' has kind {kind!r}, which this reader does not know", op)

    def _attrs(self, op) -> dict:
        return {name: value for name, (value, _) in self._typed_attrs(op).items()}

    def _typed_attrs(self, op) -> dict:
        attrs = op.get("A")
        if attrs is None:
            return {}
        if not isinstance(attrs, list):
            raise self.fail("'A' must be a list of attributes", op)
        out = {}
        for a in attrs:
            if not isinstance(a, dict) or not isinstance(a.get("N"), str):
                raise self.fail("an attribute without a name", op)
            validate.text(a["N"], f"op {op.get('#', '?')}: an attribute name", self.where)
            if a["N"] in _DROPPED_ATTRS:
                continue
            out[a["N"]] = self._attr_value(a.get("AT"), op, a["N"])
        return out

    # -- values -----------------------------------------------------------------------------------------
    def _operand(self, ref, op) -> _Value | None:
        if not isinstance(ref, dict) or not isinstance(ref.get("%"), int):
            raise self.fail(f"operand {ref!r} is not a value reference", op)
        vid = ref["%"]
        if vid == 0:
            return None
        value = self.values.get(vid)
        if value is None:
            raise self.fail(f"uses value %{vid} before it is defined (or it is never defined); the file is corrupt",
                            op)
        if not self._visible(value, self.current_block):
            raise self.fail(f"uses value %{vid}, defined inside a nested region, outside that region; the file is "
                            f"corrupt", op)
        return value

    def _visible(self, value: _Value, block: int) -> bool:
        if value.members is not None:
            return all(self._visible(m, block) for m in value.members)
        seen = 0
        while block != value.block:
            if block < 0 or seen > len(self.blocks):
                return False
            block = self.blocks[block]["parent"]
            seen += 1
        return True

    def _operands(self, op) -> list:
        refs = op.get("I") or []
        if not isinstance(refs, list):
            raise self.fail("'I' must be a list of operands", op)
        return [self._operand(r, op) for r in refs]

    def _results(self, op) -> list:
        out = op.get("O")
        if out is None:
            return []
        if isinstance(out, dict):
            out = [out]
        if not isinstance(out, list):
            raise self.fail("'O' must be a list of results", op)
        for r in out:
            if not isinstance(r, dict) or not isinstance(r.get("%"), int) or r["%"] <= 0:
                raise self.fail(f"result {r!r} has no positive value id", op)
        return out

    def _name_for(self, legacy_type: str, counter_key: str | None = None) -> str:
        key = counter_key or legacy_type
        n = self.counters.get(key, 0)
        self.counters[key] = n + 1
        return f"{key}_{n}"

    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.used_names:
            name = f"{base}_{k}"
            k += 1
        self.used_names.add(name)
        return name

    def _define(self, block: int, ref: dict, name: str, op, persistable: bool = False) -> _Value:
        """Define result `ref` as var `name` (vector results get one var per member)."""
        vid = ref["%"]
        if vid in self.values:
            raise self.fail(f"defines value %{vid} twice; the file is corrupt", op)
        kind, code, shape, members = self._decode_type(ref.get("TT"), op)
        if kind == "vec":
            value = _Value(members=[], kind="vec")
            for j, (mkind, mcode, mshape, _) in enumerate(members):
                member = _Value(self._unique(f"{name}.{j}"), None, mcode, mshape, mkind)
                self._declare(block, member, False)
                value.members.append(member)
        else:
            value = _Value(self._unique(name), None, code, shape, kind)
            if kind != "none":
                self._declare(block, value, persistable)
        value.producer = op.get("#") if isinstance(op, dict) else None
        value.block = block
        if value.members is not None:
            for member in value.members:
                member.block = block
        self.values[vid] = value
        return value

    def _declare(self, block: int, value: _Value, persistable: bool) -> None:
        if value.kind == "array":
            var_type = int(dtypes.VarTypeCode.LOD_TENSOR_ARRAY)
        else:
            var_type = int(dtypes.VarTypeCode.LOD_TENSOR)
        dtype = dtypes.numpy_dtype(value.dtype_code) if dtypes.is_element_type(value.dtype_code) else None
        self.blocks[block]["vars"][value.name] = VarInfo(
            value.name, var_type, dtype, value.dtype_code, tuple(value.shape), persistable, 0, False)

    def _alias(self, ref: dict, value: _Value, op) -> None:
        vid = ref["%"]
        if vid in self.values:
            raise self.fail(f"defines value %{vid} twice; the file is corrupt", op)
        self.values[vid] = value

    # -- emission ---------------------------------------------------------------------------------------
    def _emit(self, block: int, op_type: str, inputs: dict, outputs: dict, attrs: dict | None = None,
              attr_types: dict | None = None, removable: bool = False) -> OpInfo:
        ops = self.blocks[block]["ops"]
        attrs = dict(attrs or {})
        types = dict(attr_types or {})
        for name, value in attrs.items():
            types.setdefault(name, infer_attr_type(value) or _A.STRING)
        info = OpInfo(op_type, len(ops), block, {k: list(v) for k, v in inputs.items()},
                      {k: list(v) for k, v in outputs.items()}, attrs, types)
        ops.append(info)
        for name in info.output_names():
            self._producer_op.setdefault(name, info)
        if removable:
            self.removable.add(id(info))
        return info

    def _unstacked(self, block: int, value: _Value) -> list | None:
        """A list of one-element tensors given for an IntArray argument reaches the PIR op as
        stack([reshape(cast(t, int64), []), ...]); the legacy op takes the tensors themselves in its
        `*TensorList` slot (where converters find parameters and constants). Returns their names, or None
        when `value` is not that chain. The chain's ops go when nothing else reads them."""
        stack = self._producer_op.get(value.name)
        if stack is None or stack.type != "stack" or stack.attrs.get("axis", 0) != 0:
            return None
        names, chain = [], [stack]
        for name in stack.input("X"):
            reshape = self._producer_op.get(name)
            if reshape is None or reshape.type != "reshape2" or list(reshape.attrs.get("shape", [None])) != []:
                # a bound written as a Python int next to a tensor one (x[:, i:i + 2, ::2] = v) is a 0-d full
                var = self._visible_var(block, name)
                if name not in self.const_by_name or var is None or var.data_type not in _INDEX_DTYPES \
                        or math.prod(var.shape) != 1:
                    return None
                names.append(name)
                continue
            chain.append(reshape)
            src = reshape.input("X")[0]
            cast = self._producer_op.get(src)
            if cast is not None and cast.type == "cast" and cast.attrs.get("in_dtype") in _INDEX_DTYPES:
                chain.append(cast)
                src = cast.input("X")[0]
            var = self._visible_var(block, src)
            if var is None or var.data_type not in _INDEX_DTYPES or math.prod(var.shape) != 1:
                return None
            names.append(src)
        self.removable.update(id(o) for o in chain)
        return names

    def _visible_var(self, block: int, name: str):
        while block >= 0:
            var = self.blocks[block]["vars"].get(name)
            if var is not None:
                return var
            block = self.blocks[block]["parent"]
        return None

    def _new_tmp(self, block: int, like: _Value, name: str) -> _Value:
        value = _Value(self._unique(name), None, like.dtype_code, like.shape, like.kind)
        value.block = block
        self._declare(block, value, False)
        return value

    # -- the walk ---------------------------------------------------------------------------------------
    def _translate_ops(self, ops, block: int) -> None:
        if not isinstance(ops, list):
            raise self.fail(f"block {block}: 'ops' must be a list")
        outer = self.current_block
        for op in ops:
            if not isinstance(op, dict) or not isinstance(op.get("#"), str):
                raise self.fail(f"block {block}: an op without a name ('#')")
            self.current_block = block
            self._translate_op(op, block)
        self.current_block = outer

    def _translate_op(self, op: dict, block: int) -> None:
        short = op["#"]
        if short == "p":
            return self._parameter(op, block)
        dialect, _, name = short.partition(".")
        if dialect not in DIALECTS or not name:
            raise self.fail(f"op name {short!r} is not '<dialect id>.<op>' with a known dialect "
                            f"({', '.join(f'{k}={v}' for k, v in DIALECTS.items())})")
        full = f"{DIALECTS[dialect]}.{name}"
        handler = _SPECIAL.get(full)
        if handler is not None:
            return handler(self, op, block)
        if dialect == "1":
            return self._generic(op, block, name)
        raise self.fail(f"op {full} has no translation to a legacy Paddle op; nnadapter-bridge cannot run this "
                        f"program (report the op with the model)", op)

    def _parameter(self, op: dict, block: int) -> None:
        attrs = op.get("A")
        flags = op.get("OA")
        if not isinstance(attrs, list) or len(attrs) < 4 or not isinstance(attrs[3], str) or not attrs[3]:
            raise self.fail("builtin.parameter without a name (A = [is_distributed, is_parameter, need_clip, name])",
                            op)
        name = validate.text(attrs[3], "builtin.parameter: the name", self.where)
        persistable = bool(flags[0]) if isinstance(flags, list) and flags else True
        (ref,) = self._results(op) or [None]
        if ref is None:
            raise self.fail(f"parameter '{name}' has no result", op, var=name)
        if name in self.used_names:
            raise self.fail(f"parameter '{name}' is declared twice", op, var=name)
        self.used_names.add(name)
        kind, code, shape, _ = self._decode_type(ref.get("TT"), op)
        if kind != "tensor":
            raise self.fail(f"parameter '{name}' is a {kind}, expected a dense tensor", op, var=name)
        value = _Value(name, None, code, shape, kind)
        if ref["%"] in self.values:
            raise self.fail(f"defines value %{ref['%']} twice; the file is corrupt", op)
        self.values[ref["%"]] = value
        value.producer = "p"
        self._declare(0, value, persistable)
        if persistable:
            if not dtypes.is_element_type(code):
                raise self.fail(f"parameter '{name}' has an element type this loader cannot hold", op, var=name)
            if any(d < 0 for d in shape):
                raise self.fail(f"parameter '{name}' declares dims {list(shape)}; a parameter's dims are its stored "
                                f"tensor's, all known", op, var=name)
            self.params[name] = (code, shape)

    def _result_name(self, ref: dict, legacy_type: str, index: int, base: str | None) -> str:
        fetched = self.fetch_names.get(ref["%"])
        if fetched is not None and fetched not in self.used_names:
            return fetched
        return f"{base}.tmp_{index}"

    def _define_results(self, op, block: int, legacy_type: str) -> list:
        refs = self._results(op)
        base = self._name_for(legacy_type)
        return [self._define(block, ref, self._result_name(ref, legacy_type, j, base), op)
                for j, ref in enumerate(refs)]

    def _generic(self, op: dict, block: int, name: str) -> None:
        # `relu_`, `batch_norm_`, ...: the in-place form computes what the plain op does (results are new SSA
        # values here), so it translates to the same legacy op.
        base_name = name[:-1] if name.endswith("_") else name
        sig = self.sigs.get(f"pd_op.{name}") or self.sigs.get(f"pd_op.{base_name}")
        row = self.compat.get(name) or self.compat.get(base_name)
        if row is None and sig is not None and sig.legacy:
            # pd_op.tril and pd_op.triu share the row op_compat keys by the legacy name (tril_triu)
            row = compat_by_legacy().get(sig.legacy)
        if sig is None:
            raise self.fail(f"pd_op.{name} has no known signature, so its operands cannot be named; "
                            f"nnadapter-bridge cannot translate this op yet (report it with the model)", op)
        legacy = (row.legacy if row is not None else "") or sig.legacy or base_name
        operands = self._operands(op)
        if len(operands) > len(sig.inputs):
            raise self.fail(f"has {len(operands)} operands but pd_op.{name} takes {len(sig.inputs)} "
                            f"({', '.join(sig.inputs)})", op)
        typed = self._typed_attrs(op)
        inputs: dict = {}
        attrs: dict = {}
        types: dict = {}
        rename_attr: dict[str, str] = {}
        if row is not None:
            # op_compat sometimes lists an attribute rename in the inputs column (mish: lambda=threshold)
            rename_attr.update((k, v) for k, v in row.inputs.items() if k in sig.attrs)
            rename_attr.update(row.attrs)
        for attr_name, (value, t) in typed.items():
            legacy_name = rename_attr.get(attr_name, attr_name)
            attrs[legacy_name] = value
            types[legacy_name] = t
        rename_in = row.inputs if row is not None else {}
        for pir_in, value in zip(sig.inputs, operands):
            if value is None:
                continue
            mutable = row.mutable.get(_OPERAND_ALIASES.get((base_name, pir_in), pir_in)) if row is not None else None
            if mutable is not None:
                self._mutable_operand(op, block, base_name, mutable, value, rename_attr, inputs, attrs, types,
                                      legacy)
                continue
            slot = rename_in.get(pir_in, pir_in)
            inputs[slot] = value.names()
        results = self._define_results(op, block, legacy)
        if len(results) > len(sig.outputs):
            raise self.fail(f"has {len(results)} results but pd_op.{name} gives {len(sig.outputs)}", op)
        rename_out = row.outputs if row is not None else {}
        outputs = {}
        for pir_out, value in zip(sig.outputs, results):
            if value.kind == "none":
                continue
            outputs[rename_out.get(pir_out, pir_out)] = value.names()
        if base_name in _IMPLIED_ATTRS:
            for attr_name, (attr_value, attr_type) in _IMPLIED_ATTRS[base_name].items():
                attrs[attr_name] = attr_value
                types[attr_name] = attr_type
        fix = _FIXUPS.get(legacy)
        if fix is not None:
            legacy = fix(self, op, block, legacy, inputs, outputs, attrs, types, operands) or legacy
        if legacy in _ELEMENTWISE:
            attrs.setdefault("axis", -1)
            types.setdefault("axis", _A.INT)
        self._emit(block, legacy, inputs, outputs, attrs, types)

    def _mutable_operand(self, op, block: int, base_name: str, mutable, value: _Value, rename_attr, inputs, attrs,
                         types, legacy: str = "") -> None:
        legacy_attr = rename_attr.get(mutable.name, mutable.name)
        list_slot = mutable.list_slot or _LIST_SLOTS.get((base_name, mutable.name))
        if list_slot and value.members is None:
            parts = self._unstacked(block, value)
            if parts is not None and all(n in self.const_by_name for n in parts):
                # constants only: fold into the attribute, as when the list had been written as integers
                items = [int(self.const_by_name[n].reshape(-1)[0]) for n in parts]
                attrs[legacy_attr] = items
                types[legacy_attr] = _A.INTS
                return
            if parts is not None:
                inputs[list_slot] = parts
                return
        folded = _constant_of(value)
        if folded is not None:
            scalar_type = _KIND_TYPES.get(mutable.kind, _A.FLOAT if folded.dtype.kind == "f" else _A.INT)
            # A list argument may also come as a 1-D constant tensor (paddle.reshape(x, paddle.assign([4, 6]))).
            if value.is_intarray or value.members is not None or (folded.ndim == 1 and folded.size != 1):
                items = [_python_scalar(v, scalar_type) for v in folded.reshape(-1)]
                attrs[legacy_attr] = items
                types[legacy_attr] = _LIST_ATTR_TYPES.get(scalar_type, _A.INTS)
            else:
                if folded.size != 1:
                    raise self.fail(f"mutable attribute '{mutable.name}' is a constant with {folded.size} "
                                    f"elements, expected one", op)
                attrs[legacy_attr] = _python_scalar(folded.reshape(-1)[0], scalar_type)
                types[legacy_attr] = scalar_type
            _as_declared(legacy, legacy_attr, attrs, types)
            return
        if value.members is not None and mutable.list_slot:
            inputs[mutable.list_slot] = value.names()
        elif value.members is not None and mutable.tensor_slot is None:
            raise self.fail(f"mutable attribute '{mutable.name}' is a list computed at run time, which the legacy "
                            f"op cannot take", op)
        elif mutable.tensor_slot:
            inputs[mutable.tensor_slot] = value.names()
        else:
            # VAR-attr (or attr-only, which paddle still lets a run-time value reach): the legacy op holds a
            # Variable-valued attribute, which converters and host kernels read as a tensor.
            names = value.names()
            if len(names) == 1:
                attrs[legacy_attr] = VarRef(names[0])
                types[legacy_attr] = _A.VAR
            else:
                attrs[legacy_attr] = [VarRef(n) for n in names]
                types[legacy_attr] = _A.VARS

    # -- finishing --------------------------------------------------------------------------------------
    def _read_names(self) -> set:
        """Every var some emitted op reads, through an input slot or a Variable-valued attribute."""
        read: set = set()
        for block in self.blocks:
            for op in block["ops"]:
                read.update(_op_reads(op))
        return read

    def _finish(self) -> list[BlockInfo]:
        # Drop removable ops (folded constants, reshaped conv biases) whose outputs nothing reads; repeat, since
        # dropping one can leave another unread.
        changed = True
        while changed:
            changed = False
            read = self._read_names()
            for block in self.blocks:
                keep = []
                for op in block["ops"]:
                    if id(op) in self.removable and not any(n in read for n in op.output_names()):
                        for n in op.output_names():
                            block["vars"].pop(n, None)
                        changed = True
                        continue
                    keep.append(op)
                block["ops"] = keep
        result = []
        for block in self.blocks:
            for i, op in enumerate(block["ops"]):
                op.index = i
            result.append(BlockInfo(block["idx"], block["parent"], -1, block["ops"], block["vars"]))
        return result


# ----------------------------------------------------------------------------------------------------------
# Special ops


def _data(tr: _Translator, op, block: int) -> None:
    attrs = tr._attrs(op)
    name = attrs.get("name")
    if not isinstance(name, str) or not name:
        raise tr.fail("pd_op.data without a 'name' attribute (the feed name)", op)
    validate.text(name, "pd_op.data: the feed name", tr.where)
    (ref,) = tr._results(op) or [None]
    if ref is None:
        raise tr.fail(f"pd_op.data '{name}' has no result", op)
    if name in tr.used_names:
        raise tr.fail(f"two inputs are called '{name}'", op, var=name)
    value = tr._define(block, ref, name, op)
    var = tr.blocks[block]["vars"][value.name]
    tr.blocks[block]["vars"][value.name] = VarInfo(var.name, var.var_type, var.dtype, var.data_type, var.shape,
                                                   False, 0, True)
    tr._emit(block, "feed", {"X": ["feed"]}, {"Out": [value.name]}, {"col": tr.feed_col}, {"col": _A.INT})
    tr.feed_col += 1


def _fetch(tr: _Translator, op, block: int) -> None:
    (value,) = tr._operands(op) or [None]
    if value is None:
        raise tr.fail("pd_op.fetch without an operand", op)
    attrs = tr._attrs(op)
    col = attrs.get("col", 0)
    refs = tr._results(op)
    source = value.name
    if value.members is not None:
        raise tr.fail("pd_op.fetch of a vector value", op)
    for ref in refs:
        tr._alias(ref, value, op)
    tr._emit(block, "fetch", {"X": [source]}, {"Out": ["fetch"]}, {"col": int(col)}, {"col": _A.INT})


def _full(tr: _Translator, op, block: int) -> None:
    attrs = tr._attrs(op)
    shape = attrs.get("shape", [])
    value = attrs.get("value", 0.0)
    code = attrs.get("dtype", 5)
    if not dtypes.is_element_type(code):
        raise tr.fail(f"pd_op.full with dtype code {code}", op)
    if not isinstance(shape, list) or any(d < 0 for d in shape) or math.prod(shape) > (1 << 24):
        raise tr.fail(f"pd_op.full with shape {shape!r}", op)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        scalar = value
    else:
        raise tr.fail(f"pd_op.full with value {value!r}", op)
    (result,) = tr._define_results(op, block, "fill_constant")
    np_dtype = dtypes.numpy_dtype(code)
    with np.errstate(all="ignore"):
        result.const = np.full(shape, scalar, dtype=np_dtype) if np_dtype.kind != "b" else np.full(shape, bool(scalar))
    tr.const_by_name[result.name] = result.const
    legacy_attrs = {"shape": [int(d) for d in shape], "value": float(scalar), "dtype": int(code),
                    "str_value": _str_value(scalar)}
    tr._emit(block, "fill_constant", {}, {"Out": [result.name]}, legacy_attrs,
             {"shape": _A.LONGS, "value": _A.FLOAT, "dtype": _A.INT, "str_value": _A.STRING}, removable=True)


def _full_int_array(tr: _Translator, op, block: int) -> None:
    attrs = tr._attrs(op)
    values = attrs.get("value", [])
    code = attrs.get("dtype", 3)
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
        raise tr.fail(f"pd_op.full_int_array with value {values!r}", op)
    if code not in (2, 3):
        code = 3
    (result,) = tr._define_results(op, block, "assign_value")
    result.const = np.asarray([int(v) for v in values], dtype=dtypes.numpy_dtype(code))
    tr.const_by_name[result.name] = result.const
    result.is_intarray = True
    tr._emit(block, "assign_value", {}, {"Out": [result.name]},
             {"shape": [len(values)], "dtype": int(code), "values": [int(v) for v in values]},
             {"shape": _A.INTS, "dtype": _A.INT, "values": _A.SCALARS}, removable=True)


def _assign_value(tr: _Translator, op, block: int) -> None:
    attrs = tr._attrs(op)
    operands = tr._operands(op)
    shape = attrs.get("shape", [])
    code = attrs.get("dtype", 5)
    values = attrs.get("values", [])
    if not dtypes.is_element_type(code) or not isinstance(values, list) or not isinstance(shape, list):
        raise tr.fail("pd_op.assign_value with malformed shape/dtype/values", op)
    if math.prod(shape) != len(values):
        raise tr.fail(f"pd_op.assign_value: shape {shape} holds {math.prod(shape)} values, got {len(values)}", op)
    (result,) = tr._define_results(op, block, "assign_value")
    result.const = np.asarray(values, dtype=dtypes.numpy_dtype(code)).reshape(shape)
    tr.const_by_name[result.name] = result.const
    inputs = {"X": operands[0].names()} if operands and operands[0] is not None else {}
    tr._emit(block, "assign_value", inputs, {"Out": [result.name]},
             {"shape": [int(d) for d in shape], "dtype": int(code), "values": values},
             {"shape": _A.INTS, "dtype": _A.INT, "values": _A.SCALARS}, removable=True)


def _combine(tr: _Translator, op, block: int) -> None:
    members = tr._operands(op)
    if any(m is None or m.members is not None for m in members):
        raise tr.fail("builtin.combine of a null or vector value", op)
    refs = tr._results(op)
    if len(refs) != 1:
        raise tr.fail("builtin.combine must have one result", op)
    value = _Value(members=list(members), kind="vec")
    value.producer = "builtin.combine"
    tr._alias(refs[0], value, op)


def _split(tr: _Translator, op, block: int) -> None:
    (source,) = tr._operands(op) or [None]
    if source is None or source.members is None:
        raise tr.fail("builtin.split of a value that is not a vector", op)
    refs = tr._results(op)
    if len(refs) != len(source.members):
        raise tr.fail(f"builtin.split into {len(refs)} results of a vector of {len(source.members)}", op)
    for ref, member in zip(refs, source.members):
        tr._alias(ref, member, op)


def _slice(tr: _Translator, op, block: int) -> None:
    (source,) = tr._operands(op) or [None]
    index = tr._attrs(op).get("index")
    if source is None or source.members is None or not isinstance(index, int) \
            or not 0 <= index < len(source.members):
        raise tr.fail("builtin.slice needs a vector operand and an 'index' inside it", op)
    (ref,) = tr._results(op)
    tr._alias(ref, source.members[index], op)


def _shadow_output(tr: _Translator, op, block: int) -> None:
    """builtin.shadow_output names a value for the executor's scope; it computes nothing."""
    tr._operands(op)


def _sub_regions(tr: _Translator, op, count: int) -> list:
    regions = op.get("regions")
    if not isinstance(regions, list) or len(regions) != count:
        raise tr.fail(f"expects {count} region(s), the file names {len(regions) if isinstance(regions, list) else 0}",
                      op)
    return [tr._single_block(r, op) for r in regions]


def _split_yield(tr: _Translator, ops: list, op) -> tuple:
    if not ops or not isinstance(ops[-1], dict) or ops[-1].get("#") != "2.yield":
        raise tr.fail("a control-flow block must end with cf.yield", op)
    return ops[:-1], ops[-1]


def _op_reads(op: OpInfo) -> list:
    """The vars `op` reads: its input slots, then the vars its Variable-valued attributes name (a range's `end`
    computed by another op, a set_value's run-time starts), in order, repeats kept."""
    names = list(op.input_names())
    for value in op.attrs.values():
        names.extend(ref.name for ref in (value if isinstance(value, list) else [value]) if isinstance(ref, VarRef))
    return names


def _outer_reads(tr: _Translator, sub_blocks: list) -> list:
    """The names sub-blocks read that none of them defines (what the control-flow op takes as inputs), through
    input slots or attributes (_op_reads): a body op whose attribute comes from an outer tensor reads it too."""
    defined, read = set(), []
    for b in sub_blocks:
        defined.update(tr.blocks[b]["vars"])
    for b in sub_blocks:
        for o in tr.blocks[b]["ops"]:
            for n in _op_reads(o):
                if n not in defined and n not in read:
                    read.append(n)
    return read


def _nested(tr: _Translator, parent: int) -> list:
    """Block `parent` and every block nested in it, in creation order (a walk of the children lists: the
    work is the size of the answer, not of the program)."""
    found, stack = [], [parent]
    while stack:
        idx = stack.pop()
        found.append(idx)
        stack.extend(tr.blocks[idx]["children"])
    return sorted(found)


def _if(tr: _Translator, op, block: int) -> None:
    (cond,) = tr._operands(op)[:1] or [None]
    if cond is None or cond.members is not None:
        raise tr.fail("pd_op.if needs a boolean condition operand", op)
    true_block, false_block = _sub_regions(tr, op, 2)
    results = tr._define_results(op, block, "conditional_block")
    branch_blocks = []
    for pir_block in (true_block, false_block):
        sub = tr._new_block(block)
        body, yield_op = _split_yield(tr, pir_block["ops"], op)
        tr._translate_ops(body, sub)
        tr.current_block = sub
        yielded = tr._operands(yield_op)
        tr.current_block = block
        if len(yielded) != len(results):
            raise tr.fail(f"a branch yields {len(yielded)} values for {len(results)} results", op)
        for value, target in zip(yielded, results):
            if value is None:
                continue
            tr._emit(sub, "assign", {"X": value.names()}, {"Out": target.names()})
        branch_blocks.append(sub)
    not_cond = tr._new_tmp(block, cond, f"{tr._name_for('logical_not')}.tmp_0")
    outs = [n for r in results for n in r.names()]
    for sub, condition in ((branch_blocks[0], cond.name), (branch_blocks[1], None)):
        if condition is None:
            tr._emit(block, "logical_not", {"X": [cond.name]}, {"Out": [not_cond.name]})
            condition = not_cond.name
        reads = _outer_reads(tr, _nested(tr, sub))
        tr._emit(block, "conditional_block", {"Cond": [condition], "Input": reads}, {"Out": outs, "Scope": []},
                 {"sub_block": BlockRef(sub), "is_scalar_condition": True},
                 {"sub_block": _A.BLOCK, "is_scalar_condition": _A.BOOLEAN})


def _while(tr: _Translator, op, block: int) -> None:
    operands = tr._operands(op)
    if not operands or operands[0] is None:
        raise tr.fail("pd_op.while needs a condition operand", op)
    cond, inits = operands[0], operands[1:]
    (body_block,) = _sub_regions(tr, op, 1)
    args = body_block.get("args") or []
    if not isinstance(args, list) or len(args) != len(inits):
        raise tr.fail(f"pd_op.while has {len(inits)} loop-carried operands but its block has "
                      f"{len(args) if isinstance(args, list) else 0} arguments", op)
    results = tr._define_results(op, block, "while")
    if len(results) != len(inits):
        raise tr.fail(f"pd_op.while has {len(inits)} loop-carried operands but {len(results)} results", op)
    loop_cond = tr._new_tmp(block, cond, f"{tr._name_for('while_cond')}.tmp_0")
    for init, result in zip(inits, results):
        if init is None or init.members is not None or result.members is not None:
            raise tr.fail("pd_op.while carries a null or vector value, which this reader cannot translate", op)
        tr._emit(block, "assign", {"X": [init.name]}, {"Out": [result.name]})
    tr._emit(block, "assign", {"X": [cond.name]}, {"Out": [loop_cond.name]})
    sub = tr._new_block(block)
    for arg, result in zip(args, results):
        if not isinstance(arg, dict) or not isinstance(arg.get("#"), int) or arg["#"] >= 0:
            raise tr.fail(f"block argument {arg!r} has no negative value id", op)
        if arg["#"] in tr.values:
            raise tr.fail(f"defines block argument %{arg['#']} twice", op)
        tr.values[arg["#"]] = result
    body, yield_op = _split_yield(tr, body_block["ops"], op)
    tr._translate_ops(body, sub)
    tr.current_block = sub
    yielded = tr._operands(yield_op)
    tr.current_block = block
    if len(yielded) != len(results) + 1 or yielded[0] is None:
        raise tr.fail(f"the loop body yields {len(yielded)} values, expected the condition and {len(results)}", op)
    new_cond, new_values = yielded[0], yielded[1:]
    carried = {r.name for r in results}
    staged = []
    for value, result in zip(new_values, results):
        if value is None or value.name == result.name:
            continue
        if value.name in carried:  # another carried var: copy before any carried var is overwritten
            tmp = tr._new_tmp(sub, value, f"{result.name}.next")
            tr._emit(sub, "assign", {"X": [value.name]}, {"Out": [tmp.name]})
            staged.append((tmp.name, result.name))
        else:
            staged.append((value.name, result.name))
    for src, dst in staged:
        tr._emit(sub, "assign", {"X": [src]}, {"Out": [dst]})
    tr._emit(sub, "assign", {"X": [new_cond.name]}, {"Out": [loop_cond.name]})
    reads = _outer_reads(tr, _nested(tr, sub))
    outs = [r.name for r in results] + [loop_cond.name]
    tr._emit(block, "while", {"X": reads, "Condition": [loop_cond.name]}, {"Out": outs, "StepScopes": []},
             {"sub_block": BlockRef(sub), "is_test": True}, {"sub_block": _A.BLOCK, "is_test": _A.BOOLEAN})


def _pylayer(tr: _Translator, op, block: int) -> None:
    """pd_op.pylayer (a `paddle.autograd.PyLayer` under to_static) runs its one region, the forward, once; its
    operands are what the forward was called with (the block reads them as outer values, or as block arguments
    bound to them) and its results what the forward's cf.yield gives. Inference has no backward, so the forward's
    ops are inlined into the enclosing block and the results assigned from the yielded values."""
    operands = tr._operands(op)
    (body_block,) = _sub_regions(tr, op, 1)
    args = body_block.get("args") or []
    if not isinstance(args, list) or args and len(args) != len(operands):
        raise tr.fail(f"pd_op.pylayer has {len(operands)} operands but its block has "
                      f"{len(args) if isinstance(args, list) else 0} arguments", op)
    for arg, operand in zip(args, operands):
        if not isinstance(arg, dict) or not isinstance(arg.get("#"), int) or arg["#"] >= 0:
            raise tr.fail(f"block argument {arg!r} has no negative value id", op)
        if arg["#"] in tr.values:
            raise tr.fail(f"defines block argument %{arg['#']} twice", op)
        if operand is None:
            raise tr.fail("pd_op.pylayer binds a block argument to a null operand", op)
        tr.values[arg["#"]] = operand
    body, yield_op = _split_yield(tr, body_block["ops"], op)
    tr._translate_ops(body, block)
    yielded = tr._operands(yield_op)
    results = tr._define_results(op, block, "assign")
    if len(yielded) != len(results):
        raise tr.fail(f"the forward yields {len(yielded)} values for {len(results)} results", op)
    for value, target in zip(yielded, results):
        if value is None or value.members is not None or target.members is not None:
            raise tr.fail("pd_op.pylayer yields a null or vector value, which this reader cannot translate", op)
        tr._emit(block, "assign", {"X": [value.name]}, {"Out": [target.name]})


def _yield_outside(tr: _Translator, op, block: int) -> None:
    raise tr.fail("cf.yield outside of an if/while block", op)


def _create_array(tr: _Translator, op, block: int) -> None:
    (ref,) = tr._results(op)
    code = tr._attrs(op).get("dtype", 5)
    value = tr._define(block, ref, f"{tr._name_for('create_array')}.tmp_0", op)
    value.kind = "array"
    var = tr.blocks[block]["vars"][value.name]
    tr.blocks[block]["vars"][value.name] = VarInfo(
        value.name, int(dtypes.VarTypeCode.LOD_TENSOR_ARRAY),
        dtypes.numpy_dtype(code) if dtypes.is_element_type(code) else var.dtype,
        code if dtypes.is_element_type(code) else var.data_type, (), False, 0, False)


def _array_write(tr: _Translator, op, block: int) -> None:
    array, x, i = (tr._operands(op) + [None, None, None])[:3]
    if array is None or x is None or i is None:
        raise tr.fail("pd_op.array_write_ needs (array, x, i)", op)
    # The legacy op writes the array in place: its result is the same var.
    for ref in tr._results(op):
        tr._alias(ref, array, op)
    tr._emit(block, "write_to_array", {"X": [x.name], "I": [i.name]}, {"Out": [array.name]})


def _array_read(tr: _Translator, op, block: int) -> None:
    array, i = (tr._operands(op) + [None, None])[:2]
    if array is None or i is None:
        raise tr.fail("pd_op.array_read needs (array, i)", op)
    (result,) = tr._define_results(op, block, "read_from_array")
    tr._emit(block, "read_from_array", {"X": [array.name], "I": [i.name]}, {"Out": [result.name]})


def _array_length(tr: _Translator, op, block: int) -> None:
    (array,) = tr._operands(op)[:1] or [None]
    if array is None:
        raise tr.fail("pd_op.array_length needs an array", op)
    (result,) = tr._define_results(op, block, "lod_array_length")
    tr._emit(block, "lod_array_length", {"X": [array.name]}, {"Out": [result.name]})


def _slice_array_dense(tr: _Translator, op, block: int) -> None:
    """`array[i]` on a tensor array (to_static's indexing of a list a loop appended to): one element, a negative
    index counting from the end. The legacy form is `slice` with the array as Input and axis 0 decreased, which
    Paddle's legacy kernel answers with the element at `starts[0]` (its `ends` unread): the host's `slice` kernel."""
    array, starts = (tr._operands(op) + [None, None])[:2]
    if array is None or starts is None:
        raise tr.fail("pd_op.slice_array_dense needs (input, starts)", op)
    inputs: dict = {"Input": [array.name]}
    attrs: dict = {"axes": [0], "decrease_axis": [0], "infer_flags": [-1]}
    folded = _constant_of(starts)
    if folded is not None and folded.size == 1:
        start = int(folded.reshape(-1)[0])
        attrs.update(starts=[start], ends=[start + 1], infer_flags=[1])
    else:
        inputs["StartsTensor"] = starts.names()
        attrs.update(starts=[-1], ends=[-1])
    (result,) = tr._define_results(op, block, "slice")
    tr._emit(block, "slice", inputs, {"Out": [result.name]}, attrs,
             {"axes": _A.INTS, "decrease_axis": _A.INTS, "infer_flags": _A.INTS, "starts": _A.INTS, "ends": _A.INTS})


def _shape64(tr: _Translator, op, block: int) -> None:
    (x,) = tr._operands(op)[:1] or [None]
    if x is None:
        raise tr.fail("pd_op.shape64 needs an input", op)
    (result,) = tr._define_results(op, block, "shape")
    tr._emit(block, "shape", {"Input": x.names()}, {"Out": [result.name]})


def _full_with_tensor(tr: _Translator, op, block: int) -> None:
    """full_with_tensor(value, shape): the legacy fill_constant with ValueTensor and ShapeTensor(List)."""
    value, shape = (tr._operands(op) + [None, None])[:2]
    if value is None or shape is None:
        raise tr.fail("pd_op.full_with_tensor needs (value, shape)", op)
    code = tr._attrs(op).get("dtype", 5)
    inputs: dict = {}
    attrs: dict = {"dtype": int(code), "str_value": ""}
    types: dict = {"dtype": _A.INT, "str_value": _A.STRING}
    const_value = _constant_of(value)
    if const_value is not None and const_value.size == 1:
        attrs["value"] = float(const_value.reshape(-1)[0])
        types["value"] = _A.FLOAT
    else:
        inputs["ValueTensor"] = value.names()
    const_shape = _constant_of(shape)
    if const_shape is not None:
        attrs["shape"] = [int(d) for d in const_shape.reshape(-1)]
        types["shape"] = _A.LONGS
    elif shape.members is not None:
        inputs["ShapeTensorList"] = shape.names()
    else:
        inputs["ShapeTensor"] = shape.names()
    (result,) = tr._define_results(op, block, "fill_constant")
    tr._emit(block, "fill_constant", inputs, {"Out": [result.name]}, attrs, types)


_SPECIAL = {
    "pd_op.full_with_tensor": _full_with_tensor,
    "pd_op.data": _data,
    "pd_op.fetch": _fetch,
    "pd_op.full": _full,
    "pd_op.full_int_array": _full_int_array,
    "pd_op.assign_value": _assign_value,
    "pd_op.assign_value_": _assign_value,
    "builtin.combine": _combine,
    "builtin.split": _split,
    "builtin.slice": _slice,
    "builtin.shadow_output": _shadow_output,
    "pd_op.if": _if,
    "pd_op.while": _while,
    "pd_op.pylayer": _pylayer,
    "cf.yield": _yield_outside,
    "pd_op.create_array": _create_array,
    "pd_op.array_write_": _array_write,
    "pd_op.array_read": _array_read,
    "pd_op.array_length": _array_length,
    "pd_op.slice_array_dense": _slice_array_dense,
    "pd_op.shape64": _shape64,
    "pd_op.shape": _shape64,
}


# ----------------------------------------------------------------------------------------------------------
# Per-legacy-op fixups after the generic renaming: what op_compat does not say.


def _fix_elementwise_add(tr, op, block, legacy, inputs, outputs, attrs, types, operands):
    """paddle.nn.Conv2D's bias in PIR is add(conv, reshape(bias, [1, C, 1, 1])); the legacy program (and
    Paddle Lite's conv+bias fusion) has elementwise_add(conv, bias, axis=1). Undo the reshape when the
    reshaped value is a parameter with one non-unit axis."""
    y = operands[1] if len(operands) > 1 else None
    if y is None or y.producer != "1.reshape":
        return None
    reshape = tr._producer_op.get(y.name)
    if reshape is None:
        return None
    src = reshape.input("X")
    if len(src) != 1 or src[0] not in tr.params:
        return None
    _, pshape = tr.params[src[0]]
    new_shape = list(y.shape)
    non_unit = [k for k, d in enumerate(new_shape) if d != 1]
    if len(pshape) != 1 or len(non_unit) != 1 or new_shape[non_unit[0]] != pshape[0]:
        return None
    inputs["Y"] = [src[0]]
    attrs["axis"] = non_unit[0]
    types["axis"] = _A.INT
    tr.removable.add(id(reshape))
    return None


def _fix_cast(tr, op, block, legacy, inputs, outputs, attrs, types, operands):
    x = operands[0]
    attrs["out_dtype"] = attrs.pop("dtype", 5)
    attrs["in_dtype"] = int(x.dtype_code) if x is not None and x.dtype_code is not None else 5
    types["out_dtype"] = types["in_dtype"] = _A.INT
    types.pop("dtype", None)
    return None


def _fix_reduce(tr, op, block, legacy, inputs, outputs, attrs, types, operands):
    dims = attrs.get("dim")
    if isinstance(dims, list):
        attrs["reduce_all"] = len(dims) == 0
        types["reduce_all"] = _A.BOOLEAN
    return None


def _fix_split_with_num(tr, op, block, legacy, inputs, outputs, attrs, types, operands):
    """pd_op.split_with_num(x, axis){num} is the legacy split with `num` (AxisTensor when axis is computed)."""
    if "x" in inputs:  # op_compat lists no input renames for split_with_num
        inputs["X"] = inputs.pop("x")
    for slot in [k for k in inputs if k != "X"]:
        inputs["AxisTensor"] = inputs.pop(slot)
    if "out" in outputs:
        outputs["Out"] = outputs.pop("out")
    attrs.setdefault("sections", [])
    types.setdefault("sections", _A.INTS)
    return "split"


# `*TensorList` slots of legacy ops whose op_compat row names none (it makes the argument a VAR-attr).
_LIST_SLOTS = {("split", "sections"): "SectionsTensorList"}
# int32 and int64 (VarType codes): the element types a legacy `*TensorList` tensor may have.
_INDEX_DTYPES = (2, 3)
# Operands whose PIR name differs from the name op_compat gives their mutable attribute.
_OPERAND_ALIASES = {("one_hot", "num_classes"): "depth"}
# Attributes a legacy op holds that the PIR op's name implies (two PIR ops, one legacy op).
_IMPLIED_ATTRS = {"tril": {"lower": (True, _A.BOOLEAN)}, "triu": {"lower": (False, _A.BOOLEAN)}}

# Legacy types a fixup turns into another legacy type.
_RENAMED_BY_FIXUP: dict[str | None, str | None] = {"split_with_num": "split"}


def _fix_set_value(tr, op, block, legacy, inputs, outputs, attrs, types, operands):
    """pd_op.set_value(_with_tensor): starts / ends / steps computed as one run-time int tensor (not a stack of
    scalars) reach the legacy op as that tensor in its `*TensorList` slot, which the kernels read flattened."""
    for attr, slot in (("starts", "StartsTensorList"), ("ends", "EndsTensorList"), ("steps", "StepsTensorList")):
        ref = attrs.get(attr)
        if isinstance(ref, VarRef):
            inputs[slot] = [ref.name]
            del attrs[attr]
            types.pop(attr, None)
    return None


def _fix_yolo_box(tr, op, block, legacy, inputs, outputs, attrs, types, operands):
    """Paddle 3.3.1's PIR file declares yolo_box's Scores float32 whatever X is, but its CPU kernel writes them in
    X's type (float64 for a float64 X: what Paddle Inference returns): declared as the kernel writes them."""
    x = operands[0]
    if x is None or x.dtype_code is None:
        return None
    names = set(outputs.get("Scores", []))
    for value in tr.values.values():
        if value.name in names and value.dtype_code != x.dtype_code:
            value.dtype_code = x.dtype_code
            tr._declare(value.block, value, False)
    return None


_FIXUPS = {
    "yolo_box": _fix_yolo_box,
    "set_value": _fix_set_value,
    "split_with_num": _fix_split_with_num,
    "elementwise_add": _fix_elementwise_add,
    "cast": _fix_cast,
    "reduce_sum": _fix_reduce,
    "reduce_mean": _fix_reduce,
    "reduce_max": _fix_reduce,
    "reduce_min": _fix_reduce,
    "reduce_prod": _fix_reduce,
    "reduce_all": _fix_reduce,
    "reduce_any": _fix_reduce,
}


# ----------------------------------------------------------------------------------------------------------
# helpers


def _constant_of(value: _Value):
    """The numpy data of a constant value (full, full_int_array, or a combine of constants), else None."""
    if value.members is not None:
        parts = [_constant_of(m) for m in value.members]
        if any(p is None for p in parts):
            return None
        return np.concatenate([p.reshape(-1) for p in parts]) if parts else np.zeros(0, np.int64)
    return value.const


_SCALAR_OF_LIST = {_A.INTS: _A.INT, _A.LONGS: _A.LONG, _A.FLOATS: _A.FLOAT, _A.FLOAT64S: _A.FLOAT64,
                   _A.BOOLEANS: _A.BOOLEAN}


def _as_declared(legacy: str, name: str, attrs: dict, types: dict) -> None:
    """A folded constant in the form Paddle's proto declares for the legacy attribute: a one-element constant
    becomes a list where a list is declared (a 0-d `full` for an IntArray), an integral float an int where an
    int is declared (a float `full` for eye's num_columns). What cannot be converted stays, for validate to
    refuse."""
    declared = validate.paddle_attr_types().get(legacy, {}).get(name)
    if declared is None:
        return
    value = attrs[name]
    element = _SCALAR_OF_LIST.get(declared)
    if element is not None and not isinstance(value, list):
        value = [value]
        types[name] = declared
    want = element if element is not None else declared
    if want in (_A.INT, _A.LONG):
        items = value if isinstance(value, list) else [value]
        if all(isinstance(v, float) and v.is_integer() for v in items):
            items = [int(v) for v in items]
            value = items if isinstance(value, list) else items[0]
            types[name] = declared
    attrs[name] = value


def _python_scalar(v, attr_type):
    if attr_type in (_A.FLOAT, _A.FLOAT64):
        return float(v)
    if attr_type == _A.BOOLEAN:
        return bool(v)
    if attr_type == _A.STRING:
        return repr(float(v))
    return int(v)


def _str_value(scalar) -> str:
    if isinstance(scalar, float) and not math.isfinite(scalar):
        return "nan" if math.isnan(scalar) else ("inf" if scalar > 0 else "-inf")
    return ""
