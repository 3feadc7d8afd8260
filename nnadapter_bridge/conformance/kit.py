"""The conformance kit: checks one HAL driver against the NNAdapter standard's reference (builtin_device's
interpreter, `nnadapter.reference.run_model`), the way the NNAPI CTS checks an Android driver.

Phases (docs/conformance.md has the full story):

1. **Operations.** Every case (the operation samples, seeded variants with new values, the samples in other
   precisions, operations with random shapes and attribute values) is built as a one-operation model and
   offered to the driver's `validate_program`. A claimed case must compile, run and match the reference at
   the tolerance of its output type (NNAPI CTS: float32 `1e-5 + 5 ulp`, float16 `5 x 2^-10`, quantized
   8-bit within one step, integers and booleans exactly); its program bytes must round-trip through a
   `.nnc` (a compilation with a token and cache dir writes it, a model-less one restores it) and the
   restored program must give identical outputs. A claim the driver then gets wrong at any step fails,
   naming the operation, the case and the step.
2. **Graphs.** Seeded random models of 2-6 float32 operations drawn from the kinds the driver passed alone:
   when it claims every operation, the model must match the reference at the whole-model tolerance, and
   round-trip through a `.nnc`.
3. **Stress.** Many programs alive at once, many executions of one program, and executions from several
   threads at once (clones of one program through the runtime, and separate programs of one context).

`run_conformance(device_name)` returns a ConformanceReport: per operation x precision pass / fail / not
claimed with the worst error, the graph and stress results, `.passed`, `.to_json()`, `.table()`.

Entry points: `run_conformance`, `assert_conformance`, `ConformanceReport`. Imports validation's tolerances, the
command output (tables), the harness, the samples and the standard; the runtime when a driver is run (found by name,
never by module: no `hal` import); never the CLI.
"""
from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from nnadapter_bridge.commands.output import format_table
from nnadapter_bridge.conformance import generators
from nnadapter_bridge.conformance.harness import build_op
from nnadapter_bridge.conformance.samples import SAMPLES
from nnadapter_bridge.nnadapter.codes import OperationType, Precision
from nnadapter_bridge.validation import tolerances

LEVELS = ("quick", "default", "full")


@dataclasses.dataclass(frozen=True)
class LevelPlan:
    """How much each phase does at a level."""

    value_variants: int   # new-value variants per sample
    precisions: tuple     # the precisions samples are recast into
    shape_rounds: int     # rounds of the random shape/attribute generators (one case per family each)
    graphs: int           # random graphs drawn
    programs_alive: int   # stress: programs alive at once
    executions: int       # stress: executions of one program
    threads: int          # stress: threads at once
    thread_runs: int      # stress: executions per thread


PLANS = {
    "quick": LevelPlan(1, ("float16", "float64", "int64"), 3, 12, 8, 30, 3, 8),
    "default": LevelPlan(2, ("float16", "float64", "int64"), 8, 30, 24, 150, 4, 20),
    "full": LevelPlan(6, ("float16", "float64", "int64"), 40, 200, 128, 1000, 8, 100),
}

# -- precisions and tolerances ----------------------------------------------------------------------------
_QUANT_NAMES = {
    Precision.QUANT_INT8_SYMM_PER_LAYER: "quant_int8", Precision.QUANT_INT8_SYMM_PER_CHANNEL: "quant_int8",
    Precision.QUANT_UINT8_ASYMM_PER_LAYER: "quant_uint8", Precision.QUANT_INT16_SYMM_PER_LAYER: "quant_int16",
    Precision.QUANT_INT16_SYMM_PER_CHANNEL: "quant_int16", Precision.QUANT_UINT16_ASYMM_PER_LAYER: "quant_uint16",
    Precision.QUANT_INT32_SYMM_PER_LAYER: "quant_int32", Precision.QUANT_INT32_SYMM_PER_CHANNEL: "quant_int32",
    Precision.QUANT_UINT32_ASYMM_PER_LAYER: "quant_uint32",
}


def precision_name(precision) -> str:
    precision = Precision(precision)
    return _QUANT_NAMES.get(precision) or precision.name.lower()


def case_precision(model) -> str:
    """The precision a one-operation case is filed under: its first model input's (else its operation's
    first operand's)."""
    operands = list(model.input_operands) or [o for o in model.operations[0].inputs if o is not None]
    return precision_name(operands[0].type.precision) if operands else "none"


def tolerance_of(precision) -> tuple:
    """(atol, rtol) of one operation's output of this precision; (0, 0) means exactly."""
    precision = Precision(precision)
    if precision == Precision.FLOAT32:
        return tolerances.OP_ATOL, tolerances.OP_RTOL
    if precision == Precision.FLOAT16:
        return tolerances.FLOAT16_ATOL, tolerances.FLOAT16_RTOL
    if precision == Precision.FLOAT64:
        return tolerances.FLOAT64_ATOL, tolerances.FLOAT64_RTOL
    if precision in _QUANT_NAMES and precision_name(precision) in ("quant_int8", "quant_uint8"):
        return float(tolerances.QUANT_STEPS), 0.0
    return 0.0, 0.0


class Mismatch(Exception):
    """A result outside its tolerance (the message says where), with the worst error and error/bound."""

    def __init__(self, message: str, max_abs_error: float | None = None, worst_ratio: float | None = None):
        super().__init__(message)
        self.max_abs_error = max_abs_error
        self.worst_ratio = worst_ratio


# Operations computing in pixel coordinates: their outputs (boxes of magnitude ~100) are differences and
# products of large intermediate values, whose rounding errors are ulps of the largest of them. The NNAPI
# CTS tolerances are meant for values of magnitude ~1, so for these the absolute part of the bound scales
# with max(1, max|want|).
PIXEL_COORDINATE_OPERATIONS = frozenset({OperationType.YOLO_BOX, OperationType.PRIOR_BOX, OperationType.ROI_ALIGN,
                                         OperationType.NON_MAX_SUPPRESSION})


def compare_output(got, want, precision, what: str, *, whole_model: bool = False, scale_atol: bool = False) -> tuple:
    """(max abs error, worst error / bound) of `got` against `want`; raises Mismatch when out of tolerance.
    `whole_model`: judged at the whole-model tolerance instead of the one-operation one; `scale_atol`: the
    absolute part of a float bound times max(1, max|want|) (PIXEL_COORDINATE_OPERATIONS)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise Mismatch(f"{what}: shape {list(got.shape)}, the reference gives {list(want.shape)}", None, float("inf"))
    if got.dtype != want.dtype:
        raise Mismatch(f"{what}: dtype {got.dtype}, the reference gives {want.dtype}", None, float("inf"))
    if want.size == 0:
        return 0.0, 0.0
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    same = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.where(same, 0.0, np.nan_to_num(np.abs(got64 - want64), nan=np.inf, posinf=np.inf))
    if whole_model and want.dtype.kind == "f":
        bound = tolerances.model_bound(want64, tolerances.model_scale(want64))
    else:
        atol, rtol = tolerance_of(precision)
        if want.dtype.kind == "f":
            if scale_atol:
                atol *= max(1.0, tolerances.model_scale(want64))
            bound = tolerances.op_bound(want64, atol, rtol)
        else:
            bound = np.full(want64.shape, atol)
    bad = tolerances.out_of_bound(got64, want64, bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(error == 0, 0.0, error / np.where(bound > 0, bound, 0.0))
    worst_error, worst_ratio = float(error.max()), float(np.nan_to_num(ratio, nan=np.inf).max())
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, error, -1.0))), want.shape) if want.ndim else ()
        where = [int(k) for k in i]
        raise Mismatch(f"{what}: {int(bad.sum())}/{want.size} elements out of tolerance; worst at {where}: got "
                       f"{float(got64[i])!r}, want {float(want64[i])!r}", worst_error, worst_ratio)
    return worst_error, worst_ratio


# -- results ---------------------------------------------------------------------------------------------
PASS, FAIL, NOT_CLAIMED = "pass", "fail", "not claimed"


@dataclasses.dataclass
class CaseResult:
    case: str
    operation: str
    precision: str
    origin: str
    status: str
    phase: str = ""     # for a failure: validate, create_program, execute_program, compare, nnc, restore
    message: str = ""
    max_abs_error: float | None = None
    worst_ratio: float | None = None  # worst error / its bound (<= 1 passes)


@dataclasses.dataclass
class OperationRow:
    operation: str
    precision: str
    status: str = NOT_CLAIMED
    cases: int = 0
    claimed: int = 0
    passed: int = 0
    max_abs_error: float | None = None
    worst_ratio: float | None = None
    worst_case: str = ""
    failures: list = dataclasses.field(default_factory=list)

    def add(self, result: CaseResult) -> None:
        self.cases += 1
        if result.status == NOT_CLAIMED:
            return
        self.claimed += 1
        if result.status == PASS:
            self.passed += 1
        else:
            self.failures.append({"case": result.case, "phase": result.phase, "message": result.message})
        if result.worst_ratio is not None and (self.worst_ratio is None or result.worst_ratio > self.worst_ratio):
            self.worst_ratio = result.worst_ratio
            self.max_abs_error = result.max_abs_error
            self.worst_case = result.case
        self.status = FAIL if self.failures else PASS


@dataclasses.dataclass
class ConformanceReport:
    device: str
    driver: dict
    level: str
    seed: int
    operations: list          # OperationRow, sorted by operation then precision
    graphs: dict
    stress: dict
    declared_not_claimed: list  # operation_types() the driver declares but validate_program never claimed
    seconds: float = 0.0
    cases: list = dataclasses.field(default_factory=list)  # every CaseResult
    validate_cannot_tell: bool = False  # validate_program said "cannot tell": every case was taken as claimed

    @property
    def passed(self) -> bool:
        return not self.failures()

    def failures(self) -> list:
        """One line per failure: operation rows, graphs, stress."""
        lines = []
        for row in self.operations:
            for f in row.failures:
                lines.append(f"{row.operation} ({row.precision}) {f['case']}: {f['phase']}: {f['message']}")
        for f in self.graphs.get("failures", []):
            lines.append(f"graph {f['case']}: {f['phase']}: {f['message']}")
        for name, part in self.stress.items():
            if part.get("status") == FAIL:
                lines.append(f"stress {name}: {part.get('message', '')}")
        return lines

    def failed_operations(self) -> list:
        return sorted({row.operation for row in self.operations if row.status == FAIL})

    def to_json(self) -> dict:
        return {
            "device": self.device, "driver": self.driver, "level": self.level, "seed": self.seed,
            "passed": self.passed, "seconds": round(self.seconds, 3),
            "summary": self.summary(),
            "operations": [dataclasses.asdict(r) for r in self.operations],
            "graphs": self.graphs, "stress": self.stress,
            "declared_not_claimed": self.declared_not_claimed,
            "validate_cannot_tell": self.validate_cannot_tell,
        }

    def summary(self) -> dict:
        rows = self.operations
        return {
            "operation_precisions": len(rows),
            "pass": sum(r.status == PASS for r in rows),
            "fail": sum(r.status == FAIL for r in rows),
            "not_claimed": sum(r.status == NOT_CLAIMED for r in rows),
            "cases": sum(r.cases for r in rows),
            "claimed_cases": sum(r.claimed for r in rows),
            "failed_operations": self.failed_operations(),
        }

    def table(self, *, only_claimed: bool = False) -> str:
        """The per operation x precision table, then the graph and stress lines and the verdict."""
        header = ["operation", "precision", "result", "claimed/cases", "worst abs error", "worst/tolerance"]
        rows = []
        for r in self.operations:
            if only_claimed and r.status == NOT_CLAIMED:
                continue
            rows.append([r.operation, r.precision, r.status.upper() if r.status != NOT_CLAIMED else r.status,
                         f"{r.claimed}/{r.cases}", _num(r.max_abs_error), _num(r.worst_ratio)])
        lines = [f"device       {self.device} ({self.driver.get('vendor', '')}, version "
                 f"{self.driver.get('version', '')}); level {self.level}, seed {self.seed}, "
                 f"{self.seconds:.1f} s", "", format_table(header, rows, right_align={3, 4, 5}), ""]
        g = self.graphs
        lines.append(f"graphs       {g.get('passed', 0)}/{g.get('claimed', 0)} claimed random graphs of 2-6 "
                     f"operations match ({g.get('drawn', 0)} drawn, {g.get('not_claimed', 0)} not claimed"
                     + (f"; worst/tolerance {_num(g.get('worst_ratio'))}" if g.get("worst_ratio") is not None else "")
                     + ")")
        for name, part in self.stress.items():
            lines.append(f"stress       {name}: {part.get('status', '').upper()} {part.get('message', '')}".rstrip())
        s = self.summary()
        lines.append("")
        if self.validate_cannot_tell:
            lines.append("validate_program cannot tell which operations it supports: every case was taken as "
                         "claimed, as the runtime takes it")
        if self.declared_not_claimed:
            lines.append("declared in operation_types() but never claimed: " + ", ".join(self.declared_not_claimed))
        lines.append(f"{'PASS' if self.passed else 'FAIL'}: {s['pass']} operation x precision pass, {s['fail']} fail, "
                     f"{s['not_claimed']} not claimed ({s['claimed_cases']}/{s['cases']} cases claimed)")
        failures = self.failures()
        if failures:
            lines.append("")
            lines.extend(failures[:50])
            if len(failures) > 50:
                lines.append(f"... and {len(failures) - 50} more")
        return "\n".join(lines)


def _num(value) -> str:
    if value is None:
        return "-"
    if value == float("inf"):
        return "inf"
    return f"{value:.3g}"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- the kit ---------------------------------------------------------------------------------------------
class _Kit:
    def __init__(self, device_name: str, level: str, seed: int, properties: str, workdir: str,
                 allow_no_cache: bool, progress: Callable[[str], None] | None):
        from nnadapter_bridge.nnadapter.runtime import Context, DeviceManager

        self.device_name = device_name
        self.plan = PLANS[level]
        self.level = level
        self.seed = seed
        self.workdir = workdir
        self.allow_no_cache = allow_no_cache
        self.progress = progress or (lambda text: None)
        manager = DeviceManager.instance()
        self.device = manager.acquire(device_name)
        self.context = Context([self.device], properties)
        self.rng = np.random.default_rng(seed)
        self._tokens = 0
        self.cannot_tell = False  # validate_program answered "cannot tell": everything counts as claimed

    def close(self) -> None:
        self.context.destroy()

    def token(self, what: str) -> str:
        self._tokens += 1
        return hashlib.md5(f"{self.device_name}/{self.seed}/{self._tokens}/{what}".encode()).hexdigest()

    # -- one model ------------------------------------------------------------------------------------
    def validate(self, model) -> list:
        """The driver's flags, checked: one bool per operation (raises on a protocol violation). A driver that
        cannot tell (FEATURE_NOT_SUPPORTED, or no validate_program) is taken to claim everything, as the
        runtime takes it (Context.get_supported_operations)."""
        from nnadapter_bridge.errors import NNAdapterError
        from nnadapter_bridge.nnadapter.codes import ResultCode

        driver = self.device.driver
        hook = getattr(driver, "validate_program", None)
        try:
            if hook is None:
                raise NNAdapterError("no validate_program", ResultCode.FEATURE_NOT_SUPPORTED)
            flags = hook(self.context.device_contexts[0], model)
        except NNAdapterError as exc:
            if exc.code != ResultCode.FEATURE_NOT_SUPPORTED:
                raise
            self.cannot_tell = True
            return [True] * len(model.operations)
        if flags is None or len(flags) != len(model.operations):
            raise AssertionError(f"validate_program returned {'None' if flags is None else len(flags)} flags for "
                                 f"{len(model.operations)} operations")
        return [bool(f) for f in flags]

    def compile_run_restore(self, model, feeds, judge) -> tuple:
        """Compile with a token and cache dir, run, judge, restore from the .nnc, run, compare exactly.
        Returns (phase, message, judged) where phase is '' when everything passed; `judged` is judge()'s
        return value."""
        from nnadapter_bridge.nnadapter.runtime import Compilation, Execution

        token = self.token("case")
        phase = "create_program"
        compiled = restored = None
        try:
            compiled = Compilation(model, token, cache_dir=self.workdir, context=self.context)
            compiled.finish()
            phase = "execute_program"
            got = Execution(compiled).run(feeds)
            phase = "compare"
            try:
                judged = judge(got)
            except Mismatch as exc:
                return "compare", str(exc), (exc.max_abs_error, exc.worst_ratio)
            phase = "nnc"
            compiled.wait_for_cache_write()  # written by its own thread after the first compute
            if compiled.cache_path is None:
                if self.allow_no_cache:
                    return "", "", judged
                return "nnc", "the driver filled no program bytes, so no .nnc was written", judged
            phase = "restore"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                restored = Compilation(None, token, cache_dir=self.workdir, context=self.context)
                try:
                    restored.finish()
                except Exception as exc:
                    why = "; ".join(str(w.message) for w in caught) or _describe(exc)
                    return "restore", f"the .nnc did not restore: {why}", judged
            phase = "execute_program (restored)"
            again = Execution(restored).run(feeds)
            for k, (g, r) in enumerate(zip(got, again)):
                g, r = np.asarray(g), np.asarray(r)
                if g.dtype != r.dtype or g.shape != r.shape or not np.array_equal(g, r, equal_nan=g.dtype.kind == "f"):
                    return "restore", f"output {k} of the restored program differs from the compiled one's", judged
            return "", "", judged
        except Exception as exc:  # noqa: BLE001 - any failure of a claimed case is the driver's
            return phase, _describe(exc), None
        finally:
            for c in (restored, compiled):
                if c is not None:
                    try:
                        c.destroy()
                    except Exception:  # noqa: BLE001
                        pass

    # -- phase 1 ----------------------------------------------------------------------------------------
    def cases(self) -> list:
        plan = self.plan
        cases = []
        for sample in SAMPLES:
            cases.append(generators.from_sample(sample))
            for n in range(plan.value_variants):
                cases.append(generators.value_variant(sample, self.rng, n))
            cases.extend(generators.precision_variants(sample, plan.precisions))
        cases.extend(generators.shape_cases(self.rng, plan.shape_rounds))
        return cases

    def run_case(self, case) -> CaseResult | None:
        from nnadapter_bridge.nnadapter.reference import run_model

        try:
            model, feeds = build_op(case.type, case.inputs, case.n_outputs, null_outputs=case.null_outputs)
            with np.errstate(all="ignore"):
                want = run_model(model, feeds)
        except Exception:  # noqa: BLE001 - a variant the standard does not take: not a test
            if case.origin == "sample":
                raise
            return None
        precision = case_precision(model)
        result = CaseResult(case.id, case.type.name, precision, case.origin, NOT_CLAIMED)
        try:
            flags = self.validate(model)
        except Exception as exc:  # noqa: BLE001
            result.status, result.phase, result.message = FAIL, "validate", _describe(exc)
            return result
        if not flags[0]:
            return result
        out_precisions = [o.type.precision for o in model.output_operands]
        scale_atol = case.type in PIXEL_COORDINATE_OPERATIONS

        def judge(got):
            if len(got) != len(want):
                raise Mismatch(f"{len(got)} outputs, the reference gives {len(want)}")
            worst = (0.0, 0.0)
            for k, (g, w) in enumerate(zip(got, want)):
                e, r = compare_output(g, w, out_precisions[k], f"output {k}", scale_atol=scale_atol)
                worst = (max(worst[0], e), max(worst[1], r))
            return worst

        phase, message, judged = self.compile_run_restore(model, feeds, judge)
        if judged is not None:
            result.max_abs_error, result.worst_ratio = judged
        result.status = FAIL if phase else PASS
        result.phase, result.message = phase, message
        return result

    # -- phase 2 ----------------------------------------------------------------------------------------
    def run_graphs(self, passing_float32: set) -> tuple:
        from nnadapter_bridge.nnadapter.reference import run_model

        allowed = {kind for kind, t in generators.GRAPH_KINDS.items() if t.name in passing_float32}
        summary = {"drawn": 0, "claimed": 0, "passed": 0, "not_claimed": 0, "worst_ratio": None, "failures": [],
                   "kinds": sorted(allowed)}
        stress_candidate = None
        for n in range(self.plan.graphs):
            graph = generators.random_graph(self.rng, n, allowed)
            if graph is None:
                break
            summary["drawn"] += 1
            with np.errstate(all="ignore"):
                want = run_model(graph.model, graph.feeds)
            try:
                flags = self.validate(graph.model)
            except Exception as exc:  # noqa: BLE001
                summary["failures"].append({"case": graph.id, "phase": "validate", "message": _describe(exc)})
                continue
            if not all(flags):
                summary["not_claimed"] += 1
                continue
            summary["claimed"] += 1

            def judge(got, want=want):
                if len(got) != len(want):
                    raise Mismatch(f"{len(got)} outputs, the reference gives {len(want)}")
                worst = 0.0
                for k, (g, w) in enumerate(zip(got, want)):
                    worst = max(worst, compare_output(g, w, Precision.FLOAT32, f"output {k}", whole_model=True)[1])
                return worst

            phase, message, judged = self.compile_run_restore(graph.model, graph.feeds, judge)
            if phase:
                summary["failures"].append({"case": graph.id, "phase": phase, "message": message})
                continue
            summary["passed"] += 1
            if judged is not None and (summary["worst_ratio"] is None or judged > summary["worst_ratio"]):
                summary["worst_ratio"] = judged
            if stress_candidate is None or len(graph.kinds) > len(stress_candidate.kinds):
                stress_candidate = graph
        return summary, stress_candidate

    # -- phase 3 ----------------------------------------------------------------------------------------
    def run_stress(self, model, feeds) -> dict:
        from nnadapter_bridge.nnadapter.reference import run_model
        from nnadapter_bridge.nnadapter.runtime import Compilation, Execution

        plan = self.plan
        rng = np.random.default_rng(self.seed + 1)

        def new_feeds():
            return [(f * rng.uniform(0.5, 1.5, f.shape)).astype(f.dtype) if f.dtype.kind == "f" else f for f in feeds]

        def check(got, inputs, what):
            with np.errstate(all="ignore"):
                want = run_model(model, inputs)
            for k, (g, w) in enumerate(zip(got, want)):
                compare_output(g, w, model.output_operands[k].type.precision, f"{what} output {k}",
                               whole_model=len(model.operations) > 1)

        results = {}

        def phase(name, fn):
            start = time.perf_counter()
            try:
                message = fn()
                results[name] = {"status": PASS, "message": message}
            except Exception as exc:  # noqa: BLE001
                results[name] = {"status": FAIL, "message": _describe(exc)}
            results[name]["seconds"] = round(time.perf_counter() - start, 3)

        def programs_alive():
            compilations = []
            try:
                for _ in range(plan.programs_alive):
                    c = Compilation(model, "", context=self.context)
                    c.finish()
                    compilations.append(c)
                for i, c in enumerate(compilations):
                    inputs = new_feeds()
                    check(Execution(c).run(inputs), inputs, f"program {i} of {len(compilations)} alive")
            finally:
                for c in compilations:
                    c.destroy()
            return f"{plan.programs_alive} programs alive at once, each ran correctly"

        def executions():
            c = Compilation(model, "", context=self.context)
            c.finish()
            try:
                execution = Execution(c)
                for i in range(plan.executions):
                    inputs = new_feeds()
                    check(execution.run(inputs), inputs, f"execution {i}")
            finally:
                c.destroy()
            return f"{plan.executions} executions of one program"

        def threads():
            base = Compilation(model, "", context=self.context)
            base.finish()
            errors: list = []
            inputs_per_thread = [[new_feeds() for _ in range(plan.thread_runs)] for _ in range(2 * plan.threads)]
            barrier = threading.Barrier(2 * plan.threads)

            def worker(index, compilation, owned):
                try:
                    barrier.wait(timeout=60)
                    execution = Execution(compilation)
                    for i, inputs in enumerate(inputs_per_thread[index]):
                        check(execution.run(inputs), inputs, f"thread {index} execution {i}")
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"thread {index}: {_describe(exc)}")
                finally:
                    if owned:
                        compilation.destroy()

            workers = []
            try:
                clones = [base.clone() for _ in range(plan.threads)]          # one program, cloned
                separate = []
                for _ in range(plan.threads):                                 # separate programs, one context
                    c = Compilation(model, "", context=self.context)
                    c.finish()
                    separate.append(c)
                for index, c in enumerate(clones + separate):
                    workers.append(threading.Thread(target=worker, args=(index, c, True), daemon=True))
                for w in workers:
                    w.start()
                for w in workers:
                    w.join(timeout=300)
                if any(w.is_alive() for w in workers):
                    errors.append("a thread did not finish within 300 s")
            finally:
                base.destroy()
            if errors:
                raise AssertionError("; ".join(errors[:3]))
            return (f"{plan.threads} clones of one program and {plan.threads} separate programs, "
                    f"{plan.thread_runs} executions each, on {2 * plan.threads} threads at once")

        phase("programs_alive", programs_alive)
        phase("executions", executions)
        phase("threads", threads)
        return results


def run_conformance(device_name: str, *, level: str = "default", seed: int = 0, properties: str = "",
                    operations: Sequence[str] | None = None, allow_no_cache: bool = False,
                    workdir: str | None = None, progress: Callable[[str], None] | None = None) -> ConformanceReport:
    """Check the installed (or registered) driver `device_name`; see the module docstring.

    `level`: "quick", "default" or "full" (how many variants, graphs and stress iterations); `seed`: every
    random case derives from it; `properties`: the context properties string; `operations`: only these
    operation names (e.g. ["ADD", "CONV_2D"]); `allow_no_cache`: a driver that fills no program bytes (cannot
    cache) is not a failure; `workdir`: where the .nnc files go (default: a temporary directory, removed);
    `progress(text)`: called as the phases advance."""
    if level not in PLANS:
        raise ValueError(f"level '{level}': expected one of {', '.join(LEVELS)}")
    wanted = None
    if operations:
        known = {t.name for t in OperationType}
        wanted = {name.upper() for name in operations}
        unknown = sorted(wanted - known)
        if unknown:
            raise ValueError(f"unknown NNAdapter operation(s): {', '.join(unknown)}")
    start = time.perf_counter()
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="nnadapter-conformance-")
    kit = _Kit(device_name, level, seed, properties, workdir, allow_no_cache, progress)
    try:
        with warnings.catch_warnings():
            # numpy's overflow/invalid notes from drivers and references on extreme values are not findings
            warnings.simplefilter("ignore", RuntimeWarning)
            report = _run_phases(kit, device_name, level, seed, wanted)
    finally:
        kit.close()
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def _run_phases(kit: _Kit, device_name: str, level: str, seed: int, wanted: set | None) -> ConformanceReport:
    driver = kit.device.driver
    info = {"name": device_name, "vendor": str(getattr(driver, "vendor", "")),
            "version": int(getattr(driver, "version", 0)), "type": str(getattr(driver, "type", ""))}
    cases = [c for c in kit.cases() if wanted is None or c.type.name in wanted]
    results = []
    for i, case in enumerate(cases):
        if i % 25 == 0:
            kit.progress(f"operations: case {i + 1}/{len(cases)} ({case.type.name})")
        result = kit.run_case(case)
        if result is not None:
            results.append(result)
    rows: dict = {}
    for result in results:
        key = (result.operation, result.precision)
        if key not in rows:
            rows[key] = OperationRow(result.operation, result.precision)
        rows[key].add(result)
    ordered = [rows[k] for k in sorted(rows, key=lambda k: (OperationType[k[0]].value, k[1]))]
    passing = {r.operation for r in ordered if r.precision == "float32" and r.status == PASS}
    kit.progress("graphs")
    graphs, candidate = kit.run_graphs(passing) if wanted is None else ({"drawn": 0, "claimed": 0, "passed": 0,
                                                                        "not_claimed": 0, "failures": []}, None)
    kit.progress("stress")
    stress = _stress(kit, candidate, results, cases)
    try:
        declared = {OperationType(t).name for t in (driver.operation_types() or [])}
    except Exception:  # noqa: BLE001 - optional; a broken hook is not this report's business
        declared = set()
    claimed_ops = {r.operation for r in ordered if r.claimed}
    declared_not_claimed = sorted(declared - claimed_ops) if wanted is None else []
    return ConformanceReport(device_name, info, level, seed, ordered, graphs, stress, declared_not_claimed,
                             cases=results, validate_cannot_tell=kit.cannot_tell)


def _stress(kit: _Kit, candidate, results: list, cases: list) -> dict:
    """The stress phase on the largest claimed random graph, else on a passing float32 sample."""
    if candidate is not None:
        return kit.run_stress(candidate.model, candidate.feeds)
    by_id = {c.id: c for c in cases}
    for result in results:
        if result.status == PASS and result.precision == "float32" and result.origin == "sample":
            case = by_id[result.case]
            model, feeds = build_op(case.type, case.inputs, case.n_outputs, null_outputs=case.null_outputs)
            if feeds:
                return kit.run_stress(model, feeds)
    skipped = {"status": "skipped", "message": "no claimed float32 model with inputs to stress"}
    return {"programs_alive": dict(skipped), "executions": dict(skipped), "threads": dict(skipped)}


def assert_conformance(device_name: str, **kwargs) -> ConformanceReport:
    """run_conformance, then AssertionError listing every failure (for a driver's own pytest suite)."""
    report = run_conformance(device_name, **kwargs)
    if not report.passed:
        raise AssertionError(f"driver '{device_name}' fails the conformance kit "
                             f"(operations: {', '.join(report.failed_operations()) or '-'}):\n"
                             + "\n".join(report.failures()[:40]))
    return report
