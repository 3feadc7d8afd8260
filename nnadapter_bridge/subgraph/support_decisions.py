"""The support decision: can a Paddle op run on the selected NNAdapter devices?

Owns `SupportDecider` (an op's verdict from its converter and the devices' answer about the operations it emits,
once per op signature; the program's verdicts by op), `VerdictStore` (the verdicts persisted as
`<cache_dir>/support-<key>.json`), `FingerprintMemo`, `declined_reasons` (each device's reason for declining the
operations of a concrete model, which the engine splits on) and `infer_block_dims`. An op declined as declared is
decided again with the dims the declarations fix, then with its unknown dims concrete (PROBE_DIM), then with the
values that follow from the input sizes alone as the constants a compiled program makes of them
(`SupportDecider._taken_by_folding`). Entry points: `SupportDecider`, `VerdictStore`, `declined_reasons`.

Imports the ground, partition and the cache key; the converters only when an op must actually be
decided (a warm start reads its verdicts and must not load them: tests/e2e/test_startup_memory.py); never the
engine, the plan or anything above. docs/architecture.md ("The support decision") tells how declared dims are
decided, and docs/cache.md what the store file holds and why it can be read safely.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections import ChainMap
from typing import Any

import numpy as np

from nnadapter_bridge.errors import BridgeError, ConversionError
from nnadapter_bridge.loader.dtypes import VarTypeCode
from nnadapter_bridge.loader.program import EMPTY_VAR_NAME
from nnadapter_bridge.loader.snapshot import loader_code_digest
from nnadapter_bridge.nnadapter.codes import UNKNOWN, dtype_precision
from nnadapter_bridge.nnadapter.model import Model
from nnadapter_bridge.nnadapter.nnc import (
    NncCacheWarning,
    clean_stale_temp_files,
    file_identity,
    read_kept_json,
    write_file_atomically,
)
from nnadapter_bridge.nnadapter.record import plain_dataclass
from nnadapter_bridge.nnadapter.text_digest import md5_hex, sha256_hex
from nnadapter_bridge.nnadapter.types import OperandType
from nnadapter_bridge.subgraph.cache_key import semantic_attrs
from partition.detector import op_reads, op_writes, sub_block_indices

SIGNATURE_FORMAT_VERSION = 6  # bump when signature(), signature_text(), the verdict file layout or the decision changes
# 2: the file also records each program's verdicts by op (VerdictStore.program_record)
# 3: an unknown declared dim no longer declines an op the devices take once it is concrete (PROBE_DIM)
# 4: an op declined with declared -1 dims is decided again with the dims the declarations fix (infer_block_dims)
# 5: a tensor array is no tensor (it declines the op reading or writing it); a converter's refusal with declared -1
#    dims that follow the model's input sizes is decided again with them concrete (PROBE_DIM)
# 6: an op declined as declared is decided again with the values that depend only on the input sizes folded into
#    constants (SupportDecider._folded_verdict); such verdicts are kept by op, in the program record
# The size an unknown declared dim takes when the decision asks whether the devices would accept the op once its
# dims are concrete: divisible by the strides and pooling bins models use (2, 3, 4, 6, 8, 16, 32), larger than
# common kernels.
PROBE_DIM = 96
# A second such size, for telling the sizes that follow an unknown input size from those that do not
# (infer_block_dims): 5 x 32 where PROBE_DIM is 3 x 32, so the two agree on no size computed from them.
SECOND_PROBE_DIM = 160
_STORE_FORMAT = f"nnadapter-bridge-support-v{SIGNATURE_FORMAT_VERSION}"
MAX_STORE_BYTES = 64 << 20  # a verdict store of tens of thousands of signatures is a few MB


@plain_dataclass(frozen=True)
class SupportVerdict:
    supported: bool
    reason: str = ""  # why not, for partition output and strict errors
    persistent: bool = dataclasses.field(default=True, compare=False)  # False: may differ on the next start


def _canonical(value) -> Any:
    """A signature as JSON-ready data: tuples become lists (signatures hold no lists), bytes a tagged hex
    string; anything else raises TypeError."""
    if isinstance(value, tuple):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    raise TypeError(f"{type(value).__name__} in a support signature")


def signature_text(signature: tuple) -> str | None:
    """The canonical JSON text of a signature (one text per signature, the same in every process), or None
    when it holds a value JSON cannot carry exactly (such a verdict is simply not persisted)."""
    try:
        return json.dumps(_canonical(signature), ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError):
        return None


_SUPPORTED = SupportVerdict(True)
FOLDS_AWAY = "\0folds away"  # SupportDecider.folded_values: every var the op writes folds into a constant
# A tensor array (a loop body's list of tensors) is no tensor: no NNAdapter operation takes one.
_TENSOR_ARRAY = int(VarTypeCode.LOD_TENSOR_ARRAY)
_HEX64 = re.compile(r"[0-9a-f]{64}")
class VerdictStore:
    """The persisted verdicts of one set of devices, context properties and versions (module docstring)."""

    def __init__(self, path: str, key: str, verdicts: dict, programs: dict | None = None,
                 fingerprints: dict | None = None):
        self.path = path
        self.key = key
        self._verdicts = verdicts  # signature text -> SupportVerdict
        # program key -> {"signatures": n, "ops": [True | "reason" | None per block-0 op]} (program_record)
        self._programs = programs if programs is not None else {}
        self._fingerprints = fingerprints if fingerprints is not None else {}  # FingerprintMemo key -> sha256 hex
        self._dirty = False

    @staticmethod
    def store_key(device_names, context_properties: str, versions: str) -> str:
        text = "\n".join([_STORE_FORMAT, "devices:" + ",".join(device_names),
                          "properties:" + (context_properties or ""), "versions:" + versions])
        return md5_hex(text)

    @classmethod
    def open(cls, cache_dir: str, device_names, context_properties: str, versions: str) -> VerdictStore:
        """The store for these devices, properties and versions in `cache_dir`, with what its file holds (a
        missing file is an empty store; an unreadable or invalid one too, with one warning)."""
        clean_stale_temp_files(cache_dir)  # the first use of the dir in this process (once per dir)
        key = cls.store_key(device_names, context_properties, versions)
        path = os.path.join(cache_dir, f"support-{key}.json")
        document, problem = read_kept_json(path, MAX_STORE_BYTES)
        if problem:
            cls._warn(path, problem)
        if document is None:
            return cls(path, key, {})
        try:
            verdicts, programs, fingerprints = cls._parse(document, key)
        except ValueError as exc:
            cls._warn(path, str(exc))
            return cls(path, key, {})
        return cls(path, key, verdicts, programs, fingerprints)

    @staticmethod
    def _warn(path: str, reason: str) -> None:
        warnings.warn(f"support verdict cache {path} is unusable ({reason}); deciding support afresh",
                      NncCacheWarning, stacklevel=4)

    @staticmethod
    def _parse(document, key: str) -> dict:
        if not isinstance(document, dict) or document.get("format") != _STORE_FORMAT:
            raise ValueError(f"not a {_STORE_FORMAT} file")
        if document.get("key") != key:
            raise ValueError(f"its key is {document.get('key')!r}, expected {key!r}")
        entries = document.get("verdicts")
        if not isinstance(entries, dict):
            raise ValueError("'verdicts' is not an object")
        verdicts = {}
        for text, entry in entries.items():
            if (not isinstance(entry, dict) or set(entry) != {"supported", "reason"}
                    or not isinstance(entry["supported"], bool) or not isinstance(entry["reason"], str)):
                raise ValueError(f"the verdict for {text[:80]} is not {{\"supported\": bool, \"reason\": str}}")
            verdicts[text] = SupportVerdict(entry["supported"], entry["reason"])
        programs = document.get("programs", {})
        if not isinstance(programs, dict):
            raise ValueError("'programs' is not an object")
        for name, record in programs.items():
            if (not isinstance(record, dict) or set(record) != {"signatures", "ops"}
                    or type(record["signatures"]) is not int or not isinstance(record["ops"], list)
                    or not all(v is True or v is None or isinstance(v, str) for v in record["ops"])):
                raise ValueError(f"the program record {name[:80]} is not {{\"signatures\": int, \"ops\": "
                                 "[true | reason | null]}")
        fingerprints = document.get("fingerprints", {})
        if not isinstance(fingerprints, dict) or not all(
                isinstance(v, str) and _HEX64.fullmatch(v) for v in fingerprints.values()):
            raise ValueError("'fingerprints' is not an object of sha256 hex digests")
        return verdicts, programs, fingerprints

    def get(self, text: str) -> SupportVerdict | None:
        return self._verdicts.get(text)

    def program_record(self, program_key: str) -> dict | None:
        """The verdicts recorded for one exact program (SupportDecider.program_key): {"signatures": how many
        distinct signatures they came from, "ops": per block-0 op in order, True (supported), the reason it is
        not, or None (never asked: feed/fetch, forced to the host)}; None when there is none."""
        return self._programs.get(program_key)

    def fingerprint(self, memo_key: str) -> str | None:
        return self._fingerprints.get(memo_key)

    def put_fingerprint(self, memo_key: str, fingerprint: str) -> None:
        if self._fingerprints.get(memo_key) != fingerprint:
            self._fingerprints[memo_key] = fingerprint
            self._dirty = True

    @property
    def dirty(self) -> bool:
        return self._dirty

    def put_program_record(self, program_key: str, record: dict) -> None:
        if self._programs.get(program_key) != record:
            self._programs[program_key] = record
            self._dirty = True

    def put(self, text: str, verdict: SupportVerdict) -> None:
        if verdict.persistent and self._verdicts.get(text) != verdict:
            self._verdicts[text] = verdict
            self._dirty = True

    def save(self) -> bool:
        """Write the file if verdicts were added since it was read; a failed write is a warning. True when
        written."""
        if not self._dirty:
            return False
        document = {"format": _STORE_FORMAT, "key": self.key,
                    "verdicts": {text: {"supported": v.supported, "reason": v.reason}
                                 for text, v in sorted(self._verdicts.items())},
                    "programs": dict(sorted(self._programs.items())),
                    "fingerprints": dict(sorted(self._fingerprints.items()))}
        try:
            write_file_atomically(self.path, json.dumps(document, ensure_ascii=False, indent=0).encode("utf-8"))
        except OSError as exc:
            warnings.warn(f"cannot write the support verdict cache {self.path}: {exc}", NncCacheWarning,
                          stacklevel=3)
            return False
        self._dirty = False
        return True


class FingerprintMemo:
    """Subgraph fingerprints (cache_key.subgraph_fingerprint: every weight's bytes hashed) remembered across
    starts in the verdict store, so a warm start does not read the weights to name its programs.

    A fingerprint is reused only for the same program (SupportDecider.program_key: the model's bytes, the
    params' dtypes and shapes, the loader), the same subgraph (its op indices, boundary and weight names) and
    the same params file: same path, device, inode, size, modification and status-change times (the status
    change time cannot be set back by a user: any write to the file changes it). One is recorded only when
    the file last changed more than RACY_NS before its weights were hashed (a change in the same clock tick
    could not be told apart otherwise), and never when an integrity key is set: the verdict store has no MAC,
    and with a key a recorded fingerprint must not be able to name an older program of other weights."""

    RACY_NS = 2_000_000_000

    def __init__(self, store: VerdictStore, program_key: str, identity: tuple):
        self.store = store
        self.program_key = program_key
        self.identity = identity  # (path, st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) of the params file
        self.pending = False  # a fingerprint was added: the store is saved after the run (flush)

    @classmethod
    def for_graph(cls, store: VerdictStore | None, graph, program_key: str | None,
                  integrity_key: bool) -> FingerprintMemo | None:
        """The memo for `graph`'s params file, or None: no store, no program key, an integrity key, or params
        that are not one regular file (buffers, per-var files)."""
        path = getattr(graph, "params_path", None)
        if store is None or program_key is None or integrity_key or not path:
            return None
        identity = file_identity(path, resolve=True)
        return cls(store, program_key, tuple(identity)) if identity is not None else None

    def _key(self, parts: tuple) -> str:
        text = "\n".join(["fingerprint-memo-v1", self.program_key, repr(self.identity), repr(parts)])
        return sha256_hex(text)

    def get(self, parts: tuple) -> str | None:
        """The fingerprint recorded for the subgraph described by `parts` (hashable, repr-stable), or None."""
        return self.store.fingerprint(self._key(parts))

    def put(self, parts: tuple, fingerprint: str, hashed_since_ns: int) -> None:
        """Record a fingerprint whose weights were hashed from `hashed_since_ns` (time.time_ns()) on."""
        if hashed_since_ns - self.identity[5] > self.RACY_NS:
            self.store.put_fingerprint(self._key(parts), fingerprint)
            self.pending = True

    def flush(self) -> None:
        self.pending = False
        self.store.save()


def declined_reasons(context, model) -> list:
    """Per operation of `model`: "" when a device of `context` accepts it, else why each device declines it
    ("device: reason; ..."). A driver's optional `unsupported_reasons` hook gives its reasons; a driver without one
    (or whose hook fails) is asked `validate_program` through the context, which handles its faults."""
    count = len(model.operations)
    per_device = []
    for k, device in enumerate(context.devices):
        reasons = None
        hook = getattr(device.driver, "unsupported_reasons", None)
        if hook is not None:
            try:
                reasons = [str(r or "") for r in hook(context.device_contexts[k], model)]
            except Exception:  # a hook is an explanation only: validate_program below is the answer
                reasons = None
            if reasons is not None and len(reasons) != count:
                reasons = None
        if reasons is None:
            flags = context.validate(model, k)
            flags = [True] * count if flags is None else flags  # cannot tell: assumed to take all (as elsewhere)
            reasons = ["" if ok else "declined (its validate_program gives no reason)" for ok in flags]
        per_device.append((device.name, reasons))
    answer = []
    for i in range(count):
        if any(not reasons[i] for _, reasons in per_device):
            answer.append("")
        elif len(per_device) == 1:
            answer.append(per_device[0][1][i])
        else:
            answer.append("; ".join(f"{name}: {reasons[i]}" for name, reasons in per_device))
    return answer


def infer_block_dims(graph, block: int = 0, walk=None) -> dict:
    """var name -> the dims the declarations fix, for the vars of `block` declared with a -1 where a size follows
    from declared ones (module docstring); a var whose dims nothing refines is absent.

    The block's ops are converted in order into one scratch model whose inputs are typed from their declarations
    (the conversion folds `shape`, slices, stacks and arithmetic on them, so a reshape gets a constant target and its
    output known dims): `_walk_dims`. A declared size is never replaced, and a rank other than the declared one, or
    a size of 0, refines nothing.

    A model input declared with an unknown size (a batch of -1) keeps `shape` from folding, and with it every size
    computed from the others (the channel count of a shuffle whose input is [-1, 4, 3, 5]). So block 0 is walked
    twice more, with each unknown size of the model's inputs made PROBE_DIM, then SECOND_PROBE_DIM: a size that
    comes out the same both times does not follow the unknown ones, and is taken as fixed by the declarations. It
    only decides support (programs are compiled for the shapes fed); a size that merely happens to agree (a min()
    of the batch and a constant above both probes) is the PROBE_DIM kind of optimism the engine corrects.

    `walk(probe)`: the block's `_walk_dims` at that probe, when the caller keeps them (SupportDecider._walk)."""
    if walk is None:
        def walk(probe):
            return _walk_dims(graph, block, probe)
    exact = walk(0)
    probes = []
    if block == 0 and any(d < 0 for name in graph.inputs for d in _declared_shape(graph, name, block)):
        probes = [walk(probe) for probe in (PROBE_DIM, SECOND_PROBE_DIM)]
    refined = {}
    for name, dims in exact.items():
        try:
            var = graph.var(name, block)
        except BridgeError:
            continue
        declared = tuple(int(d) for d in var.shape)
        if dims is None or len(dims) != len(declared):
            continue
        guesses = [walk.get(name) for walk in probes]
        merged = []
        for axis, (d, inferred) in enumerate(zip(declared, dims)):
            # A size of 0 is never taken from the inference: a declaration does not fix an empty axis, and a shape
            # rule that makes one from unknown sizes must not decide an op as if its input were empty.
            if d < 0 and inferred <= 0 and guesses and all(g is not None and len(g) == len(dims) for g in guesses):
                first = guesses[0][axis]
                inferred = first if first > 0 and all(g[axis] == first for g in guesses) else UNKNOWN
            merged.append(d if d >= 0 else (inferred if inferred > 0 else -1))
        if tuple(merged) != declared:
            refined[name] = tuple(merged)
    return refined


def _declared_shape(graph, name: str, block: int) -> tuple:
    try:
        var = graph.var(name, block)
    except BridgeError:
        return ()
    return tuple(var.shape) if var.dtype is not None else ()


def _walk_dims(graph, block: int, probe: int = 0, constants: dict | None = None) -> dict:
    """var name -> its dims as the converters infer them when the block's ops are converted in order from the
    declared types (infer_block_dims), UNKNOWN where they do not know; None for a var written with other ranks.
    `probe`: the size given to each unknown size of the model's inputs (0: they stay unknown). An op that cannot be
    converted (no converter, a sub-block, a tensor array) gives the vars it writes their declared types and the walk
    goes on; a var written more than once keeps a size only where every write agrees.
    `constants`, when given, is filled with var name -> the value the conversion folded it into (an array), or None
    for a var computed at run time: a var that is constant here depends only on the model's input sizes and the
    parameters (a var written twice counts as computed)."""
    # Imported here, as below: the converters load only when an op is decided (a warm start decides nothing).
    from converters import get_converter
    from converters.context import ConversionContext
    from converters.op_view import OpView

    ctx = ConversionContext(Model(), graph.params, graph, block)
    seen: dict = {}

    def note(name, dims):
        earlier = seen.get(name, dims)
        if earlier is None or len(earlier) != len(dims):
            seen[name] = None
        else:
            seen[name] = tuple(a if a == b else UNKNOWN for a, b in zip(earlier, dims))

    def bind_declared(names, unknown=UNKNOWN):
        for name in names:
            try:
                var = graph.var(name, block)
                precision = dtype_precision(var.dtype) if var.dtype is not None else None
            except (BridgeError, ValueError):
                continue
            if precision is None:
                continue
            dims = tuple(unknown if d < 0 else int(d) for d in var.shape)
            ctx.add_model_input(name, OperandType(precision=precision, dims=dims))
            note(name, dims)

    for op in graph.blocks[block].ops:
        if op.type in ("feed", "fetch"):
            bind_declared([n for n in op.output_names() if n != EMPTY_VAR_NAME], probe or UNKNOWN)
            continue
        bind_declared(n for n in op_reads(graph, op) if n != EMPTY_VAR_NAME and not ctx.has(n))
        spec = get_converter(op.type)
        writes = [n for n in dict.fromkeys(op_writes(graph, op)) if n != EMPTY_VAR_NAME]
        converted = False
        if spec is not None and not sub_block_indices(op):
            ctx.current_op = op
            try:
                view = ctx.resolved(op)
                if spec.check is None or not spec.check(view, ctx):
                    spec.fn(ctx, OpView(view))
                    converted = True
            except Exception:  # noqa: BLE001 - an op that does not convert here only refines nothing
                converted = False
            ctx.current_op = None
        if not converted:
            bind_declared(writes)
            if constants is not None:
                constants.update((name, None) for name in writes)
            continue
        for name in writes:
            if ctx.has(name) and name not in graph.params:
                operand = ctx.input(name)
                note(name, tuple(operand.type.dims))
                if constants is not None:
                    constants[name] = (np.asarray(operand.value) if operand.is_constant and name not in constants
                                       else None)
            else:
                bind_declared([name])
                if constants is not None:
                    constants[name] = None
    return seen


class SupportDecider:
    """Answers `is_supported(op)` for the ops of one program on one NNAdapter context."""

    def __init__(self, graph, context, block: int = 0, store: VerdictStore | None = None):
        self.graph = graph
        self.context = context
        self.block = block
        self.store = store
        self._verdicts: dict[tuple, SupportVerdict] = {}
        self.reasons: dict[str, str] = {}  # op type -> reason of its first unsupported signature
        self.conversions = 0  # scratch conversions done (one per distinct signature reaching step 3)
        self.restored = 0  # distinct signatures whose verdict came from the store
        self._by_op: dict = {}  # op index -> SupportVerdict, this program's (record_program)
        self._volatile = False  # some verdict may differ next start (a validation fault): nothing recorded
        self._fixed_dims: dict | None = None  # infer_block_dims of the block, computed when first needed
        self._refined: set = set()  # (block, index) of the ops decided with those dims (_refined_verdict)
        self._probed_dims: dict | None = None  # _walk_dims of block 0 at PROBE_DIM (_follows_the_inputs)
        self._probed_constants: dict = {}  # and the values that walk folded (_folded_verdict)
        self._walks: dict = {}  # (block, probe) -> _walk_dims' (dims, folded values), made once (_walk)
        self._folding: set | None = None  # _taken_by_folding, computed when first needed
        self._untaken: dict = {}  # its candidates left out, op index -> why (said in their verdicts)
        self._candidates: dict | None = None  # its candidates (op index -> (op, folded_values)), computed once
        self._refuted: set = set()  # candidates a partition showed their folded values crossing (refute_crossing_folds)
        self._writers: dict | None = None  # _flow
        self._chains: dict = {}  # _folded_chain
        self._readers: dict = {}
        # A start with this very program (same bytes, params types, devices, properties, versions) decided
        # before: its verdicts by op, without computing a signature (program_key, record_program).
        self.program_key = self._program_key() if store is not None and block == 0 else None
        self._recorded = None
        self._record_put = False  # record_program put this program's record in the store
        if self.program_key is not None:
            record = store.program_record(self.program_key)
            if record is not None and len(record["ops"]) == len(graph.blocks[0].ops):
                self._recorded = record["ops"]
                self.restored = record["signatures"]

    @property
    def recorded(self) -> bool:
        """This program's verdicts by op are recorded in the store (read at this start, or put by
        record_program): a warm start of it asks no signature, and its partition plan may be kept
        (subgraph.plan_store)."""
        return self._recorded is not None or self._record_put

    def _program_key(self) -> str | None:
        """What the verdicts of this program's ops depend on beyond the store's key: the model's bytes (ops,
        attributes, declared vars: ProgramGraph.source_digest), every parameter's dtype and shape (the
        params file decides an int8 weight), and the loader's code; None when the graph has no digest."""
        digest = getattr(self.graph, "source_digest", None)
        if not digest:
            return None
        text = "\n".join([digest, "loader:" + loader_code_digest()] + [
            f"{name}:{array.dtype.str}:{array.shape}" for name, array in sorted(self.graph.params.items())])
        return sha256_hex(text)

    def record_program(self) -> None:
        """Record this program's verdicts by op in the store (VerdictStore.program_record), unless one may
        differ next start."""
        if self.program_key is None or self._recorded is not None or self._volatile:
            return
        ops = []
        for op in self.graph.blocks[0].ops:
            found = self._by_op.get(op.index)
            ops.append(None if found is None else True if found.supported else found.reason)
        signatures = sum(1 for key in self._verdicts if signature_text(key) is not None)
        self.store.put_program_record(self.program_key, {"signatures": signatures, "ops": ops})
        self._record_put = True

    # -- signatures ---------------------------------------------------------------------------------
    def _var(self, name: str, op=None):
        """The declaration of `name` as `op` sees it (from its block: a loop or branch body's op is decided too)."""
        try:
            return self.graph.var(name, self.block if op is None else getattr(op, "block_idx", self.block))
        except BridgeError:
            return None

    def dims(self, name: str, var, op=None) -> tuple:
        """The dims the decision on `op` uses for its input `name` (declared `var`): the declared ones, or, for an op
        decided with the sizes the declarations fix (_refined_verdict), those in place of -1."""
        if op is None or (getattr(op, "block_idx", 0), op.index) not in self._refined:
            return tuple(var.shape)
        if self._fixed_dims is None:
            self._fixed_dims = infer_block_dims(self.graph, self.block,
                                                walk=lambda probe: self._walk(self.block, probe)[0])
        return self._fixed_dims.get(name, tuple(var.shape))

    def _input_signature(self, op) -> tuple:
        parts = []
        for slot in sorted(op.inputs):
            for name in op.inputs[slot]:
                if name == EMPTY_VAR_NAME:
                    parts.append((slot, None))
                    continue
                if name in self.graph.params:
                    array = self.graph.params[name]
                    parts.append((slot, "param", str(array.dtype), tuple(array.shape)))
                    continue
                var = self._var(name, op)
                if var is None or var.dtype is None or var.var_type == _TENSOR_ARRAY:
                    parts.append((slot, "opaque", None if var is None else var.var_type))
                else:
                    # The declared dims, not only the rank: some checks read dims (e.g. pool2d's partial
                    # last window, pixel_shuffle, mul), so ops differing only in dims may differ in verdict.
                    parts.append((slot, "data", str(var.dtype), self.dims(name, var, op)))
        outputs = tuple((slot, len(names)) for slot, names in sorted(op.outputs.items()))
        arrays = tuple(name for name in op.output_names() if name != EMPTY_VAR_NAME
                       and getattr(self._var(name, op), "var_type", None) == _TENSOR_ARRAY)
        return tuple(parts) + (outputs,) + ((("writes tensor arrays", len(arrays)),) if arrays else ())

    def signature(self, op) -> tuple:
        return (op.type, semantic_attrs(op), self._input_signature(op))

    # -- the decision ------------------------------------------------------------------------------
    def verdict(self, op) -> SupportVerdict:
        recorded = self._recorded
        if recorded is not None and getattr(op, "block_idx", 0) == 0 and recorded[op.index] is not None:
            entry = recorded[op.index]
            found = _SUPPORTED if entry is True else SupportVerdict(False, entry)
            if not found.supported:
                self.reasons.setdefault(op.type, found.reason)
            return found
        found = self._signature_verdict(op)
        if not found.supported:
            found = self._refined_verdict(op, found)
        if not found.supported:
            found = self._folded_verdict(op, found)
        if not found.supported:
            self.reasons.setdefault(op.type, found.reason)
        if getattr(op, "block_idx", 0) == self.block:
            self._by_op[op.index] = found
            if not found.persistent:
                self._volatile = True
        return found

    def _signature_verdict(self, op) -> SupportVerdict:
        key = self.signature(op)
        found = self._verdicts.get(key)
        if found is None:
            text = signature_text(key) if self.store is not None else None
            found = self.store.get(text) if text is not None else None
            if found is not None:
                self.restored += 1
            else:
                found = self._decide(op)
                if text is not None:
                    self.store.put(text, found)
            self._verdicts[key] = found
        return found

    def _refined_verdict(self, op, declined: SupportVerdict) -> SupportVerdict:
        """The verdict on `op` with the sizes the declarations fix in place of its inputs' -1s (infer_block_dims),
        when the declared dims gave `declined` and fixing them changes the op's signature (refine); else `declined`.
        Only then is the block walked (once): most programs have no such op, and their start pays nothing for it."""
        return self._signature_verdict(op) if self.refine(op) else declined

    def refine(self, op) -> bool:
        """Decide `op` from now on with the sizes the declarations fix in place of its inputs' -1s; False (and
        nothing changed) when that changes nothing: no converter, a sub-block, no -1, or no size fixed."""
        from converters import get_converter

        key = (getattr(op, "block_idx", 0), op.index)
        # The sizes fixed are this decider's block's (a body's op is decided with its declared dims and the probe).
        if (key[0] != self.block or key in self._refined or get_converter(op.type) is None or sub_block_indices(op)
                or not self._declares_unknown_dims(op)):
            return False
        declared = self.signature(op)
        self._refined.add(key)
        if self.signature(op) == declared:
            self._refined.discard(key)
            return False
        return True

    # -- values that fold into constants -------------------------------------------------------------------
    def _probe_walk(self) -> dict:
        """The block-0 walk with each unknown input size made PROBE_DIM (made once, when first needed): var name ->
        dims. `_probed_constants` gets the values it folded whose size does not follow the input sizes (the same
        in the walk at SECOND_PROBE_DIM, made only when the model has an unknown input size): the converters fold a
        value only up to a bound on its size (nnadapter.lowering.EAGER_FOLD_MAX_ELEMENTS), so a grid the size of a
        feature map (an anchor meshgrid) folds at small inputs and not at larger ones, while a shape, a resize's
        size or a reshape's target folds at any."""
        if self._probed_dims is None:
            self._probed_dims, first = self._walk(0, PROBE_DIM)
            if any(d < 0 for name in self.graph.inputs for d in _declared_shape(self.graph, name, 0)):
                second = self._walk(0, SECOND_PROBE_DIM)[1]
                first = {name: value if value is not None and second.get(name) is not None
                         and second[name].shape == value.shape else None for name, value in first.items()}
            self._probed_constants = first
        return self._probed_dims

    def _walk(self, block: int, probe: int) -> tuple:
        """(dims, folded values) of `_walk_dims` over `block` at `probe`, made once per decider: infer_block_dims and
        the probe walk above ask for the same walks."""
        found = self._walks.get((block, probe))
        if found is None:
            constants: dict = {}
            found = self._walks[(block, probe)] = (_walk_dims(self.graph, block, probe, constants), constants)
        return found

    def folded_values(self, op) -> dict | None:
        """For a block-0 op that the probe walk shows reading or writing values that depend only on the model's input
        sizes and the parameters (shape arithmetic: `shape`, the slices, casts, stacks and arithmetic on it, a
        resize's size, a reshape's target): var name -> its value at the probe sizes, for every such var the op
        reads, and the key `FOLDS_AWAY` when every var it writes is one. None when the op touches no such value
        (or is a body's op: the walk is block 0's). Only asked of an op declined as declared (_folded_verdict)."""
        if getattr(op, "block_idx", 0) != 0 or self.block != 0 or sub_block_indices(op):
            return None
        self._probe_walk()
        constants = self._probed_constants
        from converters.op_view import var_attr_names

        reads = op.input_names() + [name for value in op.attrs.values() for name in var_attr_names(value)]
        found = {name: constants[name] for name in dict.fromkeys(reads)
                 if name != EMPTY_VAR_NAME and name not in self.graph.params and constants.get(name) is not None}
        writes = [n for n in dict.fromkeys(op.output_names()) if n != EMPTY_VAR_NAME]
        if writes and all(constants.get(n) is not None for n in writes):
            found[FOLDS_AWAY] = True
        return found or None

    def folded_scratch(self, op, values: dict) -> tuple:
        """scratch_model of `op` with the `values` of folded_values as constants (what a program compiled for
        concrete input shapes sees: the converters fold them) and its other inputs at the probe walk's sizes."""
        constants = {name: value for name, value in values.items() if name != FOLDS_AWAY}
        return self.scratch_model(op, unknown_as=PROBE_DIM, constants=constants, walked=self._probe_walk())

    def _folded_verdict(self, op, declined: SupportVerdict) -> SupportVerdict:
        """The verdict on `op`, declined as declared, once the values that depend only on the input sizes are
        constants (folded_values; _taken_by_folding decides). Not kept by signature (two ops of one signature may
        differ in what folds): by op, in the program record."""
        if getattr(op, "block_idx", 0) != 0 or self.block != 0:
            return declined
        if op.index in self._taken_by_folding():
            return _SUPPORTED
        why = self._untaken.get(op.index)
        if why is None:
            return declined
        # Its value would fold, but not where it would run: said, so the partition does not read as the device's
        # plain lack of an operation.
        return SupportVerdict(False, f"{declined.reason}; its value follows from the input sizes and would fold into "
                                     f"a constant in a compiled subgraph, but {why}", declined.persistent)

    def _taken_by_folding(self) -> set:
        """The block-0 ops declined as declared that the devices take once the values that depend only on the input
        sizes are constants, as they are in a program compiled for concrete input shapes (the converters fold them):
        an op whose every output is such a value is converted into constants and reaches no device; an op reading one
        (a resize by a computed size, a reshape to a computed target) is asked again with it constant. Such a value
        must stay inside the devices' subgraphs to be folded, so an op is taken only while the ops computing each such
        value it reads are on the devices (_folded_chain), and, when its outputs fold away, while every op reading them
        is too (a fetch, a loop or a branch is not): the largest set that holds, found by dropping ops until none
        breaks it.
        Where a concrete model still contradicts it, the engine splits the subgraph around that operation. Computed
        once per program, when a block-0 op is first declined."""
        if self._folding is not None:
            return self._folding
        self._folding = set()  # while computing: the signature verdicts below never come back here
        ops = [op for op in self.graph.blocks[0].ops if op.type not in ("feed", "fetch")]
        base = {op.index: not sub_block_indices(op) and self._refined_verdict(op, self._signature_verdict(op)).supported
                for op in ops}
        if self._candidates is None:
            self._candidates = {}  # op index -> (op, folded_values)
            for op in ops:
                if base[op.index] or sub_block_indices(op):
                    continue
                values = self.folded_values(op)
                if values is not None and (values.get(FOLDS_AWAY) or self._accepted_with_values(op, values)):
                    self._candidates[op.index] = (op, values)
        candidates = {index: found for index, found in self._candidates.items() if index not in self._refuted}
        if not candidates:
            return self._folding
        writer, readers = self._flow()
        fetched = set(getattr(self.graph, "outputs", ()))
        taken = set(candidates)

        def on_devices(other) -> bool:
            return other.index in taken or base.get(other.index, False) if other.type not in ("feed", "fetch") \
                else False

        def breaks(op, values) -> str:
            """Why `op` cannot be taken while `taken` holds ("" when it can)."""
            for name in values:
                if name == FOLDS_AWAY:
                    continue
                chain = self._folded_chain(name)
                off = [w for w in chain if not on_devices(w)] if chain is not None else None
                if off is None or off:
                    where = f" ({off[0].label()})" if off else ""
                    return f"{name} is computed off the devices{where}"
            if values.get(FOLDS_AWAY):
                for name in dict.fromkeys(op.output_names()):
                    if name == EMPTY_VAR_NAME:
                        continue
                    if name in fetched:
                        return f"{name} is fetched"
                    off = [r for r in readers.get(name, ()) if r is not op and not on_devices(r)]
                    if off:
                        return f"{off[0].label()} reads it off the devices"
            return ""

        dropped = True
        while dropped:
            dropped = False
            for index in sorted(taken):
                why = breaks(*candidates[index])
                if why:
                    taken.discard(index)
                    self._untaken[index] = why
                    dropped = True
        self._folding = taken
        return taken

    def _flow(self) -> tuple:
        """(var name -> the block-0 op writing it last, var name -> the block-0 ops reading it)."""
        if self._writers is None:
            self._writers, self._readers = {}, {}
            for op in self.graph.blocks[0].ops:
                for name in op_writes(self.graph, op):
                    self._writers[name] = op
                for name in op_reads(self.graph, op):
                    self._readers.setdefault(name, []).append(op)
        return self._writers, self._readers

    def _folded_chain(self, name: str) -> list | None:
        """The block-0 ops that compute the folded value `name`: its writer and, through the folded values each of
        them reads, theirs (a value reaching back to a real tensor stops there: `shape` reads only its dims). All of
        them must run in the subgraph reading it for the conversion to fold it; None when one is not known."""
        chains = self._chains
        if name in chains:
            return chains[name]
        writer, _ = self._flow()
        constants = self._probed_constants
        chains[name] = None  # a cycle (none in a block's data flow) stays unknown
        op = writer.get(name)
        if op is None:
            return None
        found = {op.index: op}
        for read in op.input_names():
            if read == EMPTY_VAR_NAME or read in self.graph.params or constants.get(read) is None:
                continue
            before = self._folded_chain(read)
            if before is None:
                return None
            found.update((o.index, o) for o in before)
        chains[name] = list(found.values())
        return chains[name]

    def refute_crossing_folds(self, result) -> bool:
        """After block 0 is partitioned with the ops _taken_by_folding: the folded values must be made and read in one
        subgraph, and the detector may still part them (a subgraph is never merged across a host op it feeds and
        reads from, as Swin's shape chains around its host rolls are). Each op taken by folding that reads such a
        value made in another subgraph (or on the host), or whose folded outputs are read outside its own, is no
        longer taken. True when some op was: the caller partitions again (what follows from it, the fixpoint
        drops). A program's subgraphs then never hand a folded value to each other."""
        if not self._folding:
            return False
        home = result.subgraph_index_of
        _, readers = self._flow()
        refuted = set()
        for index in self._folding:
            op, values = self._candidates[index]
            where = home(op)
            chains = [self._folded_chain(name) for name in values if name != FOLDS_AWAY]
            if where is None or any(chain is None or any(home(o) != where for o in chain) for chain in chains):
                refuted.add(index)
            elif values.get(FOLDS_AWAY) and any(home(reader) != where
                                                for name in op.output_names() if name != EMPTY_VAR_NAME
                                                for reader in readers.get(name, ()) if reader is not op):
                refuted.add(index)
        if not refuted:
            return False
        for index in refuted:
            self._untaken[index] = "the partition parts it from the ops computing or reading its value"
        self._refuted |= refuted
        self._folding = None
        return True

    def _accepted_with_values(self, op, values: dict) -> bool:
        """Whether the devices take `op` with the folded `values` it reads as constants. Not when an output of it
        folds too but is no value the walk could keep (a var the host writes as well, a loop's carried value): it
        would leave the subgraph as a copy of a constant, a device operation of its element type."""
        from nnadapter_bridge.nnadapter.lowering import is_folded_output  # as the converters: only when deciding

        model, refusal = self.folded_scratch(op, values)
        if refusal is not None or any(is_folded_output(operation) for operation in model.operations):
            return False
        if not model.operations:
            return True
        try:
            return all(self.context.get_supported_operations(model))
        except BridgeError:
            return False

    def is_supported(self, op) -> bool:
        return self.verdict(op).supported

    def reason(self, op) -> str | None:
        v = self.verdict(op)
        return None if v.supported else v.reason

    def _decide(self, op) -> SupportVerdict:
        model, refusal = self.scratch_model(op, counted=True)
        if refusal is not None:
            return SupportVerdict(True) if self._accepted_once_concrete(op, refused=True) else refusal
        if not model.operations:
            return SupportVerdict(True)
        try:
            flags = self.context.get_supported_operations(model)
        except BridgeError as exc:
            return SupportVerdict(False, f"the devices could not validate it: {exc}", persistent=False)
        rejected = [i for i, ok in enumerate(flags) if not ok]
        if not rejected:
            return SupportVerdict(True)
        if self._accepted_once_concrete(op):
            return SupportVerdict(True)
        devices = ", ".join(self.context.device_names)
        reasons = declined_reasons(self.context, model)
        why = "; ".join(dict.fromkeys(f"{model.operations[i].type.name}: {reasons[i]}" for i in rejected
                                      if reasons[i]))
        names = ", ".join(dict.fromkeys(model.operations[i].type.name for i in rejected))
        return SupportVerdict(False, f"{names} not accepted by {devices}" + (f" ({why})" if why else ""))

    def _accepted_once_concrete(self, op, refused: bool = False) -> bool:
        """Whether the devices accept `op` converted with its unknown declared dims made concrete (PROBE_DIM):
        programs are compiled for concrete input shapes, so a check that needs a dim the declaration leaves
        unknown (SAME padding's spatial dims, a resize's input size, a converter that builds constants from the
        sizes, as bicubic's taps) must not keep the op off the devices, whether the devices or the converter
        declined it with the declared dims. A converter's refusal (`refused`) is taken back only when the unknown
        dims follow the model's input sizes (_follows_the_inputs): a size the data decides (a nonzero's count, a
        filter picked by the data) would have each new value compiled again.
        Optimistic: a program whose concrete model contradicts it is split around the operation the device (or the
        converter) declines (engine.SubgraphEngine), which says so."""
        model = self.concrete_scratch(op, refused)
        if model is None:
            return False
        try:
            return all(self.context.get_supported_operations(model))
        except BridgeError:
            return False

    def concrete_scratch(self, op, refused: bool = False):
        """The scratch model _accepted_once_concrete asks the devices about (`op` with its unknown declared dims
        made PROBE_DIM), or None when there is none to ask: no unknown dim, a converter's refusal (`refused`) of
        sizes the data decides, or the converter refuses the concrete op too. plan._DeviceVerdicts asks each
        device with it, so a device selection by cost places by the same verdicts the partition makes."""
        if not self._declares_unknown_dims(op) or (refused and not self._follows_the_inputs(op)):
            return None
        model, refusal = self.scratch_model(op, unknown_as=PROBE_DIM)
        return None if refusal is not None or not model.operations else model

    def _follows_the_inputs(self, op) -> bool:
        """Whether every unknown declared dim of `op`'s inputs becomes known once the model's inputs have concrete
        sizes: the block-0 walk of the converters with each unknown input size made PROBE_DIM (_walk_dims, made
        once, when first needed) gives them a size. False for a loop or branch body's op (the walk is block 0's)."""
        if getattr(op, "block_idx", 0) != 0:
            return False
        self._probe_walk()
        for name in op.input_names():
            if name == EMPTY_VAR_NAME or name in self.graph.params:
                continue
            var = self._var(name, op)
            if var is None or var.dtype is None or all(d >= 0 for d in var.shape):
                continue
            walked = self._probed_dims.get(name)
            if walked is None or len(walked) != len(var.shape) or any(d <= 0 for d in walked):
                return False
        return True

    def _declares_unknown_dims(self, op) -> bool:
        for name in op.input_names():
            if name == EMPTY_VAR_NAME or name in self.graph.params:
                continue
            var = self._var(name, op)
            if var is not None and var.dtype is not None and any(d < 0 for d in self.dims(name, var, op)):
                return True
        return False

    def scratch_model(self, op, *, counted: bool = False, unknown_as: int = 0, constants: dict | None = None,
                      walked: dict | None = None) -> tuple:
        """(the NNAdapter Model of `op` converted alone, None), or (None, the verdict saying why it cannot be
        converted): what the devices are asked about (module docstring). subgraph.plan asks each device
        separately with it to say which device takes an op and why the others decline. `counted`: a
        conversion of the support decision itself (self.conversions). `unknown_as`: a size given to every
        dim the inputs declare unknown (-1), 0 to keep them unknown. `constants`: inputs given as constants of these
        values (folded_scratch); `walked`: dims taken, where known, in place of the declared ones."""
        from converters import get_converter
        from converters.context import convert_subgraph
        from converters.op_view import var_attr_names

        spec = get_converter(op.type)
        if spec is None:
            return None, SupportVerdict(False, f"no converter for Paddle op '{op.type}'")
        input_types = {}
        # The vars Variable-valued attributes name are inputs too (PIR range's end): the subgraph reads them.
        attr_vars = [name for value in op.attrs.values() for name in var_attr_names(value)]
        constants = constants or {}
        for name in dict.fromkeys(op.input_names() + attr_vars):
            if name == EMPTY_VAR_NAME or name in self.graph.params or name in input_types or name in constants:
                continue
            var = self._var(name, op)
            if var is None or var.dtype is None:
                return None, SupportVerdict(False, f"input '{name}' is not a dense tensor")
            if var.var_type == _TENSOR_ARRAY:
                return None, SupportVerdict(False, f"input '{name}' is a tensor array, which no NNAdapter operation "
                                                   "takes: the host runs it")
            try:
                precision = dtype_precision(var.dtype)
            except ValueError:
                return None, SupportVerdict(False, f"input '{name}' has dtype {var.dtype}, which NNAdapter lacks")
            dims = self.dims(name, var, op)
            seen = walked.get(name) if walked is not None else None
            if seen is not None and len(seen) == len(dims):
                dims = tuple(d if d >= 0 or s <= 0 else s for d, s in zip(dims, seen))
            dims = tuple((unknown_as or UNKNOWN) if d < 0 else int(d) for d in dims)
            input_types[name] = OperandType(precision=precision, dims=dims)
        outputs = [n for n in dict.fromkeys(op.output_names()) if n != EMPTY_VAR_NAME]
        for name in outputs:
            var = self._var(name, op)
            if var is not None and var.var_type == _TENSOR_ARRAY:
                return None, SupportVerdict(False, f"output '{name}' is a tensor array, which no NNAdapter operation "
                                                   "makes: the host runs it")
        self.conversions += counted
        try:
            params = ChainMap(constants, self.graph.params) if constants else self.graph.params
            result = convert_subgraph([op], params, input_types, outputs, self.graph)
        except ConversionError as exc:  # "not on a device", the reason kept; a malformed op (ModelFormatError) raises
            return None, SupportVerdict(False, f"conversion failed: {exc}")
        return result.model, None
