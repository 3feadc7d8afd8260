"""Where batch tasks run: one task function (task.run_task), three engines.

* `InlineEngine`: in this process, one after another (`--jobs 0`; the baseline, and for debugging).
* `LocalEngine`: a process pool (concurrent.futures.ProcessPoolExecutor, spawn start method), `--jobs N`.
* `RayEngine`: Ray tasks (`--ray [ADDRESS]`): `ray.init(address=ADDRESS)` joins a running cluster (`auto`
  for the local one), no address starts a local Ray with `--jobs` CPUs. Per-device resource tags
  (`--resources DEVICE=RESOURCE[:AMOUNT]`) make every task for that device ask for the custom resource, so
  it lands on a node that has the device. Results stream back as they finish (`ray.wait`).

Each engine's `run(tasks)` yields `(task, payload)` pairs in completion order. A task whose worker died (a
crashed process, a lost Ray task) yields an "error" payload with `lost: True`: its result is reported but
not recorded, so a rerun tries it again.

Ctrl-C (SIGINT, which a terminal sends to the workers too) is the coordinator's to handle: local workers
ignore it. The coordinator then still yields the results that had finished, stops the running workers at once
(their entries are simply not done, and a rerun does them) and raises KeyboardInterrupt.

Entry points: `InlineEngine`, `LocalEngine`, `RayEngine`, `parse_resources`. Imports the task and `errors`; ray only
when a RayEngine starts.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from nnadapter_bridge.batch.task import run_task
from nnadapter_bridge.errors import BridgeError

# The environment of the worker processes (a pool worker's own, a Ray worker's runtime_env): Paddle's log quiet
# before Paddle loads. Never set in the coordinator's process; the predictor's progress bar is off through each
# task's Config (task._config).
WORKER_ENVIRONMENT = {"GLOG_minloglevel": "2"}


class BatchError(BridgeError):
    """The batch cannot run (an engine that cannot start, Ray missing, a bad option)."""


def _lost(task: dict, why: str) -> dict:
    entry = task["entry"]
    return {"result": {"id": entry.id, "key": task["key"], "status": "error", "lost": True,
                       "error": f"the worker running this entry was lost: {why}", "model": entry.model,
                       "devices": list(entry.devices), "timings": {}, "run": {}},
            "programs": {}, "dot": None}


def _init_worker() -> None:
    import signal

    os.environ.update(WORKER_ENVIRONMENT)  # the worker process's own environment
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator stops the pool (module docstring)


class InlineEngine:
    name = "inline"

    def describe(self) -> dict:
        return {"name": self.name, "jobs": 0}

    def run(self, tasks: Iterable[dict]) -> Iterator[tuple]:
        for task in tasks:
            yield task, run_task(task)


class LocalEngine:
    name = "local"

    def __init__(self, jobs: int):
        self.jobs = max(1, int(jobs))

    def describe(self) -> dict:
        return {"name": self.name, "jobs": self.jobs}

    def run(self, tasks: Iterable[dict]) -> Iterator[tuple]:
        import concurrent.futures
        import multiprocessing

        tasks = list(tasks)
        if not tasks:
            return
        context = multiprocessing.get_context("spawn")
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=min(self.jobs, len(tasks)), mp_context=context,
                                                      initializer=_init_worker)
        futures = {pool.submit(run_task, task): task for task in tasks}
        yielded = set()
        try:
            for future in concurrent.futures.as_completed(futures):
                yielded.add(future)
                yield futures[future], _payload(futures[future], future)
        except KeyboardInterrupt:
            # The results that finished meanwhile are kept; the running entries are stopped, not awaited.
            finished = [f for f in futures if f.done() and not f.cancelled() and f not in yielded]
            _stop(pool, futures)
            for future in finished:
                yield futures[future], _payload(futures[future], future)
            raise
        except BaseException:
            _stop(pool, futures)
            raise
        pool.shutdown(wait=True)


def _payload(task: dict, future) -> dict:
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - a worker process that died
        return _lost(task, f"{type(exc).__name__}: {exc}")


def _stop(pool, futures) -> None:
    """Cancel what has not started and end the worker processes now (an interrupted batch stops in a moment;
    shutdown(wait=True) would wait for every running entry to finish)."""
    for future in futures:
        future.cancel()
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(timeout=2)


def parse_resources(specs: Iterable[str]) -> dict:
    """`--resources DEVICE=RESOURCE[:AMOUNT]` (repeatable) -> {device: (resource, amount)}."""
    found = {}
    for spec in specs or ():
        device, sep, rest = spec.partition("=")
        resource, _, amount = rest.partition(":")
        if not sep or not device.strip() or not resource.strip():
            raise BatchError(f"--resources '{spec}': expected DEVICE=RESOURCE[:AMOUNT], e.g. "
                             "intel_openvino=openvino_cpu:0.5")
        try:
            value = float(amount) if amount else 1.0
        except ValueError:
            raise BatchError(f"--resources '{spec}': amount '{amount}' is not a number") from None
        if value <= 0:
            raise BatchError(f"--resources '{spec}': the amount must be positive")
        found[device.strip()] = (resource.strip(), value)
    return found


class RayEngine:
    name = "ray"

    def __init__(self, address: str | None, jobs: int, resources: dict | None = None):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise BatchError("--ray needs Ray, which is not installed here: pip install 'nnadapter-bridge[ray]'") \
                from None
        self.address = address or None
        self.jobs = max(1, int(jobs))
        self.resources = dict(resources or {})
        self.cluster: dict = {}

    def describe(self) -> dict:
        return {"name": self.name, "address": self.address or "local", "jobs": self.jobs,
                "resources": {d: {"resource": r, "amount": a} for d, (r, a) in self.resources.items()},
                "cluster": self.cluster}

    def task_resources(self, task: dict) -> dict:
        wanted: dict = {}
        for device in task["entry"].devices:
            if device in self.resources:
                resource, amount = self.resources[device]
                wanted[resource] = max(wanted.get(resource, 0.0), amount)
        for resource, amount in task["entry"].resources.items():
            wanted[resource] = max(wanted.get(resource, 0.0), amount)
        return wanted

    def run(self, tasks: Iterable[dict]) -> Iterator[tuple]:
        import ray

        tasks = list(tasks)
        owned = False
        if not ray.is_initialized():
            options = dict(log_to_driver=False, logging_level="ERROR", include_dashboard=False,
                           runtime_env={"env_vars": dict(WORKER_ENVIRONMENT)})
            try:
                if self.address:
                    ray.init(address=self.address, **options)
                else:
                    custom = {}
                    for task in tasks:  # a local cluster has every device the tasks ask for
                        for resource, amount in self.task_resources(task).items():
                            custom[resource] = max(custom.get(resource, 0.0), amount * self.jobs)
                    ray.init(num_cpus=self.jobs, resources=custom or None, **options)
            except Exception as exc:  # noqa: BLE001 - Ray's own errors, said in one line
                raise BatchError(
                    f"--ray {self.address or '(local)'}: cannot start or join a Ray cluster: "
                    f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                ) from exc
            owned = True
        try:
            self.cluster = {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}
            remote = ray.remote(run_task)
            pending = {}
            for task in tasks:
                options = {"num_cpus": 1, "max_retries": 0}
                custom = self.task_resources(task)
                if custom:
                    options["resources"] = custom
                pending[remote.options(**options).remote(task)] = task
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    task = pending.pop(ref)
                    try:
                        yield task, ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - a worker that died, a lost node
                        yield task, _lost(task, f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        finally:
            if owned:
                ray.shutdown()
