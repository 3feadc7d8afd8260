"""The measured choice of "fastest": the device orders the estimate cannot separate are compiled and timed on the
real input, and the winner is kept in the model cache dir, so a warm start does no timing.

A subgraph whose SubgraphChoice (subgraph.device_selection) lists more than one contested order is decided on its
first run: each contested order runs the subgraph in an engine of its own (which converts, compiles and writes its
`.nnc` as any engine does), then the orders take turns for about a second (_time_orders), each turn first running
unmeasured for 50 ms; each order's figure is the median over the rounds of its runs' median against the round's
(paired_figures: what a user's typical run takes, as bench_zoo.py reports it, with the drift of the machine's speed
between rounds taken out; the best run favoured an order whose runs spread), and the lowest wins. Figures within
TIE_MARGIN of the lowest are a tie, which the estimate's order decides: about a second of timing cannot separate
them on this kind of machine, and the estimate's order is the same at every start (usually the one with fewer parts
and copies). The subgraph's pool then takes the winner's order for every later run (and input shape) of the
predictor and its clones; the trial engines and their programs are destroyed (the winner's is restored from its
`.nnc`, or compiled once more without a cache dir). An order that fails (a device fault, a conversion error) is out
of the contest, with its error in the figures; when every order fails, the estimate's stays.

A device of an order that faults while the order is timed (fails to compile its part, or to run it for these
inputs: google_xnnpack declines inputs that hold NaN) is left out of that order as it is for any run, and the
order is timed as it then runs. When that order wins, its faults go with it (SubgraphChoice.faults): the pool
starts with them recorded, so the predictor neither compiles nor runs that device's part again to see it fail.

The decision is kept as data in `<cache_dir>/choice-<key>.json` (orjson; read with the `.nnc` files' safe reader; a
corrupt or foreign file is a miss with one NncCacheWarning and is rewritten), the key a sha256 of the subgraph's
fingerprint, the input signature, the contested orders and the versions string (code, drivers, their environment):
a warm start reads it, winner's faults included (said once, with a DeviceFallbackWarning), and times nothing.
Without a cache dir nothing is kept and each start times again.

Entry point: `decide(engine, scope, arrays)` (SubgraphEngine.run, once per pool). Imports the engine's classes only
when it times (inside `decide`), the cache key and the `.nnc` file helpers; never the predictor or anything above.
"""
from __future__ import annotations

import math
import os
import statistics
import time
import warnings
from collections.abc import Sequence

from nnadapter_bridge.errors import BridgeError
from nnadapter_bridge.nnadapter.nnc import NncCacheWarning, read_kept_json, write_file_atomically
from nnadapter_bridge.nnadapter.text_digest import sha256_hex
from nnadapter_bridge.subgraph import cache_key
from nnadapter_bridge.subgraph.device_selection import order_text

CHOICE_FORMAT = "nnadapter-bridge-choice-v1"
MAX_CHOICE_BYTES = 1 << 16
MAX_FAULT_CHARS = 4000  # of each kept fault's text
# After the run that compiles (a compiled program's first runs are often slower: OpenVINO's are), the orders take
# turns at least MIN_ROUNDS times and for MIN_TIMING_SECONDS, at most MAX_ROUNDS, each turn SETTLE_SECONDS of
# unmeasured runs and then TURN_SECONDS of measured ones (at least one of each); paired_figures makes the figures.
MIN_ROUNDS, MAX_ROUNDS, MIN_TIMING_SECONDS = 3, 40, 0.4
# And until every order has MIN_MEASURED_RUNS measured runs, unless that takes past MAX_TIMING_SECONDS: a subgraph of
# 70 ms got 3 measured runs an order, and on this kind of VM a median of 3 picked intel_openvino for BiSeNetV2 at 1
# thread where onnxruntime ran 11% faster (bench_zoo, AMD EPYC with AVX2).
MIN_MEASURED_RUNS, MAX_TIMING_SECONDS = 9, 4.0
SETTLE_SECONDS = 0.05  # unmeasured runs at the start of each turn (_time_orders)
TURN_SECONDS = 0.05  # then measured runs
# Timed figures within 3% of the lowest are a tie, taken by the estimate's order. Measured on the zoo (RESULTS.md,
# bench_zoo --steady in-process): two runners of one program in one process differ by up to 5-17% between rounds,
# and ERNIE token cls. at 2 threads took a google_xnnpack-led order of 5 parts over onnxruntime's whole subgraph on
# a timed 2%, then ran 14% slower.
TIE_MARGIN = 0.03


def choice_key(fingerprint: str, signature, orders: Sequence[Sequence[str]], versions: str) -> str:
    parts = [CHOICE_FORMAT, fingerprint, repr(tuple((tuple(shape), dtype) for shape, dtype in signature)),
             "|".join(order_text(o) for o in orders), versions]
    return sha256_hex("\0".join(parts))[:32]


def choice_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, f"choice-{key}.json")


FAULT_STAGES = ("context", "compile", "run")  # engine._DeviceFault.stage


def _valid_faults(faults, winner: tuple) -> bool:
    return isinstance(faults, dict) and all(
        device in winner and isinstance(fault, list) and len(fault) == 2 and fault[0] in FAULT_STAGES
        and isinstance(fault[1], str) for device, fault in faults.items())


def load_choice(cache_dir: str, key: str, orders: Sequence[tuple]) -> tuple | None:
    """(winner order, {order text: seconds or error}, {device: (stage, what it failed)}) kept under `key`, or
    None: no file (silently), or one that fails a check (one NncCacheWarning: a miss, timed again and
    rewritten)."""
    path = choice_path(cache_dir, key)
    document, problem = read_kept_json(path, MAX_CHOICE_BYTES)
    if document is None:
        if problem:
            warnings.warn(f"device choice file {path} is unusable ({problem}); the orders are timed again",
                          NncCacheWarning, stacklevel=4)
        return None
    known = {order_text(o): tuple(o) for o in orders}
    if (not isinstance(document, dict) or document.get("format") != CHOICE_FORMAT
            or document.get("winner") not in known or not isinstance(document.get("measured"), dict)
            or not all(k in known and (isinstance(v, (float, str))) for k, v in document["measured"].items())
            or not _valid_faults(document.get("faults", {}), known[document["winner"]])):
        warnings.warn(f"device choice file {path} is not a {CHOICE_FORMAT} file for these orders; they are timed "
                      "again", NncCacheWarning, stacklevel=4)
        return None
    faults = {device: (stage, what) for device, (stage, what) in document.get("faults", {}).items()}
    return known[document["winner"]], dict(document["measured"]), faults


def save_choice(cache_dir: str, key: str, winner: Sequence[str], measured: dict, faults: dict) -> None:
    import orjson

    try:
        write_file_atomically(choice_path(cache_dir, key), orjson.dumps(
            {"format": CHOICE_FORMAT, "winner": order_text(winner), "measured": measured,
             # an SDK's error can run to pages: the file stays well under MAX_CHOICE_BYTES
             "faults": {device: [stage, what[:MAX_FAULT_CHARS]] for device, (stage, what) in faults.items()}},
            option=orjson.OPT_SORT_KEYS))
    except OSError as exc:
        warnings.warn(f"device choice cannot be kept in {cache_dir} ({exc}); it is timed again at the next start",
                      NncCacheWarning, stacklevel=4)


def _time_orders(engine, orders: Sequence[tuple], scope: dict) -> tuple[dict, dict]:
    """{order text: the typical run of the subgraph on that order (paired_figures), or the error that put it out of
    the contest}, and {order text: {device: (stage, what it failed)}} for the devices left out of each order.
    Each order converts and compiles in an engine of its own (its first run), then the orders take turns (so a
    burst of load on the machine hits them all alike) for at least MIN_ROUNDS rounds and MIN_TIMING_SECONDS, and
    until each order has MIN_MEASURED_RUNS measured runs unless that passes MAX_TIMING_SECONDS; at most MAX_ROUNDS.
    Each turn first runs unmeasured for SETTLE_SECONDS (at least once), then measured for TURN_SECONDS (at least
    once): onnxruntime's workers spin for ~40 ms after a run (measured here: 40 ms of CPU in a 100 ms pause at 2
    threads), and at 2 threads on 2 cores that spin slowed whichever order ran next, which made the choice favour
    onnxruntime."""
    from nnadapter_bridge.subgraph.engine import ProgramPool, SubgraphEngine

    trials: dict = {}
    measured: dict = {}

    def run(order) -> float | None:
        """Seconds of one run of `order`, or None when it failed (then out of the contest)."""
        t0 = time.perf_counter()
        try:
            trials[order].run(dict(scope))
        except BridgeError as exc:
            measured[order_text(order)] = f"failed: {exc}"
            running.remove(order)
            return None
        return time.perf_counter() - t0

    try:
        for order in orders:
            trial = SubgraphEngine(engine.subgraph, engine.settings, ProgramPool(engine.pool.resources, order),
                                   name=f"{engine.name} on {order_text(order)}")
            trials[order] = trial
            try:
                trial.run(dict(scope))
                measured[order_text(order)] = math.inf
            except BridgeError as exc:
                measured[order_text(order)] = f"failed: {exc}"
        running = [o for o in orders if isinstance(measured[order_text(o)], float)]
        runs: dict = {order_text(o): [] for o in running}
        by_round: list = []  # per round: {order text: the median of its measured runs in that round}
        started = time.perf_counter()
        rounds = 0
        def wanted() -> bool:
            elapsed = time.perf_counter() - started
            few = min(len(runs[order_text(o)]) for o in running) < MIN_MEASURED_RUNS
            return rounds < MIN_ROUNDS or elapsed < MIN_TIMING_SECONDS or (few and elapsed < MAX_TIMING_SECONDS)

        while running and rounds < MAX_ROUNDS and wanted():
            by_round.append({})
            for order in list(running):
                first = len(runs[order_text(order)])
                turn = time.perf_counter()
                while order in running:  # unmeasured: at least one run, SETTLE_SECONDS in all
                    run(order)
                    if time.perf_counter() - turn >= SETTLE_SECONDS:
                        break
                measuring = time.perf_counter()
                while order in running:  # measured: at least one run, TURN_SECONDS in all
                    seconds = run(order)
                    if seconds is not None:
                        runs[order_text(order)].append(seconds)
                    if time.perf_counter() - measuring >= TURN_SECONDS:
                        break
                if order in running:
                    by_round[-1][order_text(order)] = statistics.median(runs[order_text(order)][first:])
            rounds += 1
        # every order still running ran in every round (an order leaves `running` only by failing)
        measured.update(paired_figures(by_round, [order_text(o) for o in running]))
        faults = {order_text(order): dict(trial.pool.fault_reasons) for order, trial in trials.items()}
    finally:
        for trial in trials.values():
            trial.destroy()
    return measured, faults


def paired_figures(by_round: Sequence[dict], names: Sequence[str]) -> dict:
    """{name: seconds} from per-round medians [{name: seconds}]: each round's figures divided by that round's
    geometric mean over the orders it timed, the median of those ratios per order, times the median round's level.

    The orders of a round ran within a fraction of a second of each other, so a ratio within a round is free of
    what moves this kind of VM's speed by tens of percent from one second to the next; the median of an order's
    runs pooled over all rounds is not (a round of slow runs for one order and fast ones for another). Rounds
    where an order failed are left out for the others too (they no longer compare like with like)."""
    rounds = [r for r in by_round if all(name in r for name in names)]
    if not rounds or not names:  # (no order left: every one failed)
        return {}
    levels = [math.exp(sum(math.log(max(r[name], 1e-12)) for name in names) / len(names)) for r in rounds]
    level = statistics.median(levels)
    return {name: statistics.median(r[name] / lv for r, lv in zip(rounds, levels)) * level for name in names}


def decide(engine, scope: dict, arrays: Sequence) -> None:
    """Decide the order of `engine`'s subgraph among its choice's contested ones (module docstring); the pool and
    the choice (what partition --json, run's report and the predictor's stats show) take the winner."""
    pool = engine.pool
    choice = pool.choice
    with pool.lock:
        if pool.decided:
            return
        orders = [tuple(o) for o in choice.contested]
        signature = tuple((tuple(a.shape), a.dtype.str) for a in arrays)
        key = None
        if engine.cache_dir:
            key = choice_key(engine.fingerprint, signature, orders, cache_key.versions(engine.base_context))
            kept = load_choice(engine.cache_dir, key, orders)
            if kept is not None:
                winner, measured, faults = kept
                _apply(engine, signature, winner, measured, faults, "measured (cached)", 0.0)
                if faults:
                    _say_kept_faults(engine, winner, faults, choice_path(engine.cache_dir, key))
                return
        started = time.perf_counter()
        measured, faults_by_order = _time_orders(engine, orders, scope)
        spent = time.perf_counter() - started
        timed = [(measured[order_text(o)], k, o) for k, o in enumerate(orders)
                 if isinstance(measured[order_text(o)], float)]
        winner = _winner(timed) if timed else tuple(choice.order)
        # The trial already said what failed; the winner's faults stand for the predictor's own runs too.
        faults = faults_by_order.get(order_text(winner), {}) if timed else {}
        if key is not None and timed:
            save_choice(engine.cache_dir, key, winner, measured, faults)
        _apply(engine, signature, winner, measured, faults,
               "measured" if timed else "estimate (every timed order failed)", spent)


def _winner(timed: list) -> tuple:
    """The order that wins among [(median seconds, estimate rank, order)]: the estimate's earliest of those within
    TIE_MARGIN of the lowest median (module docstring)."""
    lowest = min(seconds for seconds, _, _ in timed)
    return min((rank, order) for seconds, rank, order in timed if seconds <= lowest * (1 + TIE_MARGIN))[1]


def _apply(engine, signature, winner: tuple, measured: dict, faults: dict, how: str, spent: float) -> None:
    pool, choice = engine.pool, engine.pool.choice
    pool.device_order = winner
    pool.decided = True
    for device, (stage, what) in faults.items():
        if stage == "run":  # for these input shapes only, as the engine records a run fault
            pool.failed_for.setdefault(signature, set()).add(device)
        else:
            pool.failed_devices.add(device)
        pool.fault_reasons[device] = (stage, what)
    choice.order = winner
    choice.measured = measured
    choice.faults = {device: what for device, (_, what) in faults.items()} or None
    choice.decided_by = how
    choice.timing_seconds = spent


def _say_kept_faults(engine, winner: tuple, faults: dict, path: str) -> None:
    from nnadapter_bridge.nnadapter.runtime import DeviceFallbackWarning

    left = [d for d in winner if d not in faults]
    for device, (stage, what) in sorted(faults.items()):
        scope = "for these input shapes" if stage == "run" else "from now on"
        warnings.warn(f"{engine.describe()}: device '{device}' {what} when the order {order_text(winner)} was "
                      f"timed (kept in {path}); it runs on {', '.join(left) or 'the host'} {scope}",
                      DeviceFallbackWarning, stacklevel=5)
