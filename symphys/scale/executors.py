"""Where a population is evaluated: in this process (the default) or on a
Ray cluster.

Both executors offer the same two calls:
- `evaluate(recipe, thetas (P, D))` -> the objective's outputs (P, ...):
  the objective built once per worker from its `Recipe`, the population
  cut into consecutive shares, the outputs joined back in order;
- `run(function, items)` -> [function(item) for item in items]: whole
  independent jobs (a system-identification fit from each start).

On Ray, each worker is an actor that keeps the objectives it built and
takes the next share or job when it is free; an actor whose process dies
is restarted and its call retried (up to `retries` times), so a run
survives a lost worker. Results equal the
in-process ones: each world of a batch is computed alone, whatever share
it lands in.
"""

from __future__ import annotations

import enum
import socket
from typing import Callable, Sequence

import numpy as np

from symphys.errors import SymphysError
from symphys.scale.recipe import Recipe, concatenate, evaluate_share

RAY_ADDRESS_VARIABLE = "SYMPHYS_RAY_ADDRESS"


class ClusterError(SymphysError, RuntimeError):
    """A Ray cluster cannot be reached or lost more workers than allowed."""


class Where(enum.Enum):
    """Where an executor evaluates."""

    IN_PROCESS = "in-process"
    RAY = "ray"


def _bar(total: int, desc: str, show: bool):
    from symphys.progress import bar

    return bar(None, desc, show, total=total)


class InProcess:
    """Evaluate here, in one call per population (the default)."""

    where = Where.IN_PROCESS
    workers = 1

    def __init__(self):
        self._built: dict = {}

    def objective(self, recipe: Recipe):
        """The recipe's objective, built here once."""
        if recipe.key not in self._built:
            self._built[recipe.key] = recipe.make()
        return self._built[recipe.key]

    def evaluate(self, recipe: Recipe, thetas):
        return evaluate_share(self.objective(recipe), thetas)

    def share_rows(self, count: int) -> int:
        """The most vectors one call of an objective sees for a population
        of `count` (what to compile a fixed-batch objective for)."""
        return int(count)

    def run(self, function: Callable, items: Sequence, desc: str = "jobs",
            show: bool = False) -> list:
        bar = _bar(len(items), desc, show)
        out = []
        for item in items:
            out.append(function(item))
            bar.update(1)
        bar.close()
        return out

    def close(self) -> None:
        self._built.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _WorkerState:
    """The body of a Ray worker actor: an in-process executor of its own,
    which keeps the objectives it has built."""

    def __init__(self):
        self.here = InProcess()

    def evaluate(self, recipe: Recipe, thetas: np.ndarray):
        return self.here.evaluate(recipe, thetas)

    def call(self, function: Callable, item):
        return function(item)

    def pid(self) -> int:
        import os

        return os.getpid()


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a Ray address 'host:port' or 'ray://host:port'; None
    for 'auto' or 'local'."""
    if address in ("auto", "local"):
        return None
    text = address.split("://", 1)[-1]
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"Ray address {address!r}: expected host:port, ray://host:port, "
                           f"'auto' or 'local'")
    return host, int(port)


class RayCluster:
    """Evaluate on a Ray cluster: `workers` actors (default: one per CPU of
    the cluster), each building a recipe's objective once.

    address: None or "local" starts a Ray instance in this process;
    "auto" joins the cluster started on this machine (`ray start --head`);
    "host:port" or "ray://host:port" joins that one (checked first, so an
    unreachable one fails in `timeout` seconds with a clear error).
    retries: how many times a worker that dies is restarted and its call
    retried. shares: how many shares per worker a population is cut into."""

    where = Where.RAY

    def __init__(self, address: str | None = None, workers: int | None = None, *,
                 retries: int = 3, shares: int = 1, timeout: float = 5.0,
                 progress: bool = True):
        try:
            import ray
        except ImportError as err:
            raise ClusterError("RayCluster needs Ray: pip install 'symphys[scale]'") from err
        self._ray = ray
        self.address = "local" if address is None else str(address)
        self.retries, self.shares, self.progress = int(retries), int(shares), progress
        if self.retries < 0 or self.shares < 1:
            raise ClusterError(f"RayCluster: retries must be >= 0 and shares >= 1, got "
                               f"{retries} and {shares}")
        self._started = False
        target = _host_port(self.address)
        if target is not None:
            try:
                socket.create_connection(target, timeout=timeout).close()
            except OSError as err:
                raise ClusterError(f"no Ray cluster answers at {self.address} "
                                   f"({type(err).__name__}: {err}); start one with "
                                   f"`ray start --head` and pass its address") from None
        if not ray.is_initialized():
            self._connect(workers)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = int(workers) if workers is not None else max(1, cpus)
        if self.workers < 1:
            raise ClusterError(f"RayCluster: workers must be >= 1, got {workers}")
        actor = ray.remote(num_cpus=1, max_restarts=self.retries,
                           max_task_retries=self.retries)(_WorkerState)
        self._actors = [actor.remote() for _ in range(self.workers)]

    def _connect(self, workers: int | None) -> None:
        ray = self._ray
        options = dict(include_dashboard=False, log_to_driver=False,
                       logging_level="ERROR")
        from symphys.progress import waiting

        where = "a local Ray cluster" if self.address == "local" else self.address
        try:
            with waiting(f"starting Ray ({where})", period=5.0, announce=True):
                if self.address == "local":
                    ray.init(num_cpus=workers, **options)
                else:
                    ray.init(address=self.address, **options)
        except (ConnectionError, RuntimeError) as err:
            raise ClusterError(f"cannot join the Ray cluster at {self.address}: {err}") from None
        self._started = True

    def evaluate(self, recipe: Recipe, thetas):
        """The objective's outputs for thetas (P, D), shares spread over the
        workers."""
        thetas = np.asarray(thetas, dtype=np.float64)
        count = min(len(thetas), self.workers * self.shares)
        shares = [s for s in np.array_split(thetas, max(count, 1)) if len(s)]
        recipe_ref = self._ray.put(recipe)
        jobs = [("evaluate", (recipe_ref, share)) for share in shares]
        return concatenate(self._dispatch(jobs, f"{len(thetas)} on {self.workers} workers"))

    def share_rows(self, count: int) -> int:
        """The most vectors one call of an objective sees for a population
        of `count` (what to compile a fixed-batch objective for)."""
        return -(-int(count) // max(1, min(int(count), self.workers * self.shares)))

    def run(self, function: Callable, items: Sequence, desc: str = "jobs",
            show: bool | None = None) -> list:
        """[function(item) for item in items], each on the next free worker."""
        return self._dispatch([("call", (function, item)) for item in items], desc, show)

    def _dispatch(self, jobs: list, desc: str, show: bool | None = None) -> list:
        """The results of jobs [(actor method, args)], in order: each worker
        takes the next job when it is free."""
        ray = self._ray
        bar = _bar(len(jobs), desc, self.progress if show is None else show)
        results, running, queue = [None] * len(jobs), {}, list(enumerate(jobs))
        idle = list(self._actors)
        try:
            while queue or running:
                while queue and idle:
                    index, (method, args) = queue.pop(0)
                    actor = idle.pop(0)
                    running[getattr(actor, method).remote(*args)] = (index, actor)
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    index, actor = running.pop(ref)
                    results[index] = ray.get(ref)
                    idle.append(actor)
                    bar.update(1)
            return results
        except ray.exceptions.ActorDiedError as err:
            raise ClusterError(f"a Ray worker died more than {self.retries} times "
                               f"(retries={self.retries}): {err}") from None
        except ray.exceptions.RayTaskError as err:
            raise err.as_instanceof_cause() from None
        finally:
            bar.close()

    @property
    def open(self) -> bool:
        return bool(self._actors)

    def worker_pids(self) -> list[int]:
        """The process id of each worker (for monitoring and tests)."""
        return self._ray.get([a.pid.remote() for a in self._actors])

    def close(self) -> None:
        """Stop the workers, and Ray itself if this executor started it."""
        for actor in getattr(self, "_actors", []):
            self._ray.kill(actor)
        self._actors = []
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


Executor = InProcess | RayCluster
# the clusters joined by address (`as_executor`), reused by later calls, and
# this process's executor (its objectives built once)
_CLUSTERS: dict[str, RayCluster] = {}
_HERE = InProcess()


def as_executor(executor: "Executor | str | None") -> Executor:
    """None: this process (one executor, which keeps what it built); a
    string: the Ray cluster at that address ('local' to start one here;
    joined once, then reused); an executor: itself."""
    if executor is None:
        return _HERE
    if isinstance(executor, str):
        cluster = _CLUSTERS.get(executor)
        if cluster is None or not cluster.open:
            cluster = _CLUSTERS[executor] = RayCluster(executor)
        return cluster
    if isinstance(executor, (InProcess, RayCluster)):
        return executor
    raise ClusterError(f"executor must be None, a Ray address or an executor "
                       f"(InProcess, RayCluster), got {executor!r}")


def bind(recipe: Recipe, executor: "Executor | str | None"):
    """A batch objective (P, D) -> outputs that evaluates `recipe` on
    `executor`; it carries the executor as `.executor`."""
    if not isinstance(recipe, Recipe):
        raise ClusterError(f"an executor evaluates a symphys.scale.Recipe (how a worker "
                           f"builds the objective), not {type(recipe).__name__}: a compiled "
                           f"function does not travel between processes")
    executor = as_executor(executor)

    def objective(thetas):
        return executor.evaluate(recipe, thetas)

    objective.executor = executor
    objective.recipe = recipe
    return objective

