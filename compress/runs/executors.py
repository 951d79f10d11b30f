"""Where the runs of a comparison train: one after another in this process, or as tasks on a Ray cluster.

With Ray, every run (a student, a transform, each step of a pipeline) is one task with the resources
it declares (``cpus_per_run``, ``gpus_per_run``); a pipeline's later step takes its parent's result
as an argument, so Ray starts it only when the parent is done, while independent runs train side by
side. Tasks write their run directories and the cache where the driver would (the cluster's nodes
must see the same paths: one machine, or a shared filesystem). Speed is never measured in a task:
the driver measures every model afterwards, in one process, so the ratios stay fair.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from compress.errors import CompressError
from compress.paths import cache_dir

EXECUTORS = ("local", "ray")
T = TypeVar("T")


@dataclass
class Executor:
    """How a comparison's runs are carried out."""

    kind: str = "local"            # local: here, one after another; ray: one Ray task per run
    address: str | None = None     # a Ray cluster to join (default: start a local instance)
    cpus_per_run: float = 1.0
    gpus_per_run: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise CompressError(f"unknown executor {self.kind!r}; use one of {', '.join(EXECUTORS)}.")
        if self.kind == "local" and (self.address or self.cpus_per_run != 1.0 or self.gpus_per_run):
            raise CompressError("--address, --cpus-per-run and --gpus-per-run are for --executor ray.")
        if not self.cpus_per_run > 0 or self.gpus_per_run < 0:
            raise CompressError("--cpus-per-run must be positive and --gpus-per-run 0 or more.")
        if self.kind == "ray":
            _ray()  # missing Ray fails here, before a comparison creates its directory or trains anything
            if self.address:
                _reachable(self.address)

    @contextmanager
    def session(self) -> Iterator[None]:
        """Ray joined (or a local instance started) for the block, so that many :func:`run_all` calls inside it
        share one connection (a search submits its candidates one at a time); nothing for the local executor."""
        if self.kind != "ray":
            yield
            return
        ray = _ray()
        started = not ray.is_initialized()
        if started:
            # The tasks read and write the same cache as this process (one machine or a shared filesystem).
            ray.init(address=self.address, include_dashboard=False, log_to_driver=True,
                     runtime_env={"env_vars": {"COMPRESS_CACHE": str(cache_dir())}})
        try:
            yield
        finally:
            if started:
                ray.shutdown()


def _reachable(address: str) -> None:
    """Refuse, in one sentence, a Ray address (HOST:PORT) nothing answers at, before any work."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise CompressError(f"--address takes a Ray cluster's HOST:PORT (as `ray start --head` prints it), not "
                            f"{address!r}.")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise CompressError(f"no Ray cluster answers at {address} ({e.strerror or e}); start one with `ray start "
                            "--head` or leave --address out for a local Ray instance.") from None


def run_all(steps: list[Any], run_one: Callable[..., T], executor: Executor,
            say: Callable[[str], None]) -> dict[str, T]:
    """``run_one(step, parent_result, show_progress=...)`` for every step (each after its ``parent``), by name,
    in order. A step is anything with a ``name`` and the name of its ``parent`` (or None)."""
    if executor.kind == "ray":
        return _on_ray(steps, run_one, executor, say)
    results: dict[str, T] = {}
    for step in steps:
        say(f"run {step.name}")
        results[step.name] = run_one(step, results[step.parent] if step.parent else None)
    return results


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise CompressError("--executor ray needs Ray, which is not installed: pip install 'compress[ray]'.") \
            from None
    return ray


def _on_ray(steps: list[Any], run_one: Callable[..., T], executor: Executor,
            say: Callable[[str], None]) -> dict[str, T]:
    ray = _ray()
    with executor.session():
        say(f"ray: {ray.cluster_resources().get('CPU', 0):g} CPUs, {ray.cluster_resources().get('GPU', 0):g} GPUs; "
            f"{len(steps)} runs, each with {executor.cpus_per_run:g} CPUs and {executor.gpus_per_run:g} GPUs")
        task = ray.remote(num_cpus=executor.cpus_per_run, num_gpus=executor.gpus_per_run, max_retries=0)(_task)
        refs = {}
        for step in steps:
            refs[step.name] = task.remote(run_one, step, refs[step.parent] if step.parent else None,
                                          executor.cpus_per_run)
        results = {}
        for step in steps:
            results[step.name] = _result(ray, refs[step.name])
            say(f"finished {step.name} (ray)")
        return results


def run_step(step: Any, parent: T | None, run_one: Callable[..., T], executor: Executor,
             say: Callable[[str], None]) -> T:
    """``run_one(step, parent)`` for one step whose parent's result is already at hand: here, or as one Ray task
    (a search trains its candidates one step at a time, each decided by the one before)."""
    if executor.kind != "ray":
        return run_one(step, parent)
    ray = _ray()
    with executor.session():
        task = ray.remote(num_cpus=executor.cpus_per_run, num_gpus=executor.gpus_per_run, max_retries=0)(_task)
        result = _result(ray, task.remote(run_one, step, parent, executor.cpus_per_run))
    say(f"finished {step.name} (ray)")
    return result


def _result(ray: Any, ref: Any) -> Any:
    """A task's result; a refusal inside it (CompressError) comes out as itself, a one-line error here."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, CompressError):
            raise e.cause from None
        raise


def _task(run_one: Callable[..., T], step: Any, parent: T | None, cpus: float) -> T:
    """One run inside a Ray worker: as many torch threads as CPUs the task was given, no progress bars."""
    import torch

    torch.set_num_threads(max(1, int(cpus)))
    return run_one(step, parent, show_progress=False)
