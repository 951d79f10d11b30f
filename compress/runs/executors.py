"""Where the runs of a comparison train: one after another in this process, or as tasks on a Ray cluster.

With Ray, every run (a student, a transform, each step of a pipeline) is one task with the resources
it declares (``cpus_per_run``, ``gpus_per_run``); a pipeline's later step takes its parent's result
as an argument, so Ray starts it only when the parent is done, while independent runs train side by
side. Tasks write their run directories and the cache where the driver would (the cluster's nodes
must see the same paths: one machine, or a shared filesystem). Speed is never measured in a task:
the driver measures every model afterwards, in one process, so the ratios stay fair.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from compress.errors import CompressError
from compress.paths import cache_dir

EXECUTORS = ("local", "ray")
DEFAULT_MAX_RETRIES = 3   # Ray's own default for a task whose worker or node died
T = TypeVar("T")


@dataclass
class Executor:
    """How a comparison's runs are carried out."""

    kind: str = "local"            # local: here, one after another; ray: one Ray task per run
    address: str | None = None     # a Ray cluster to join (default: start a local instance)
    cpus_per_run: float = 1.0
    gpus_per_run: float = 0.0
    max_retries: int = DEFAULT_MAX_RETRIES   # starts again of a run's task whose worker or node died

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise CompressError(f"unknown executor {self.kind!r}; use one of {', '.join(EXECUTORS)}.")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise CompressError(f"--max-retries must be a whole number, 0 or more (the times a run's Ray task is "
                                f"started again after its worker or node died), not {self.max_retries!r}.")
        if self.kind == "local" and (self.address or self.cpus_per_run != 1.0 or self.gpus_per_run
                                     or self.max_retries != DEFAULT_MAX_RETRIES):
            raise CompressError("--address, --cpus-per-run, --gpus-per-run and --max-retries are for --executor ray.")
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
        # What Ray passes on from the tasks and its own processes (a worker lost: "(raylet) A worker died...") goes to
        # stderr with this process's log: stdout holds the command's answer (--json).
        with redirect_stdout(sys.stderr):
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
    """Every step as a task (a later step's takes its parent's result), every task waited for; the first failure
    (in the steps' order) raised once all have ended, the others said."""
    ray = _ray()
    with executor.session(), _attempt_folders() as attempts:
        say(f"ray: {ray.cluster_resources().get('CPU', 0):g} CPUs, {ray.cluster_resources().get('GPU', 0):g} GPUs; "
            f"{len(steps)} runs, each with {executor.cpus_per_run:g} CPUs and {executor.gpus_per_run:g} GPUs")
        task = _remote(ray, executor)
        refs = {}
        for index, step in enumerate(steps):
            refs[step.name] = task.remote(run_one, step, refs[step.parent] if step.parent else None,
                                          executor.cpus_per_run, str(attempts / str(index)))
        results: dict[str, T] = {}
        failures: list[BaseException] = []
        failed: set[str] = set()
        for index, step in enumerate(steps):
            if step.parent in failed:
                failed.add(step.name)
                say(f"ray: {step.name} was not run: its parent {step.parent} failed")
                continue
            try:
                results[step.name] = _gathered(ray, step.name, refs[step.name], attempts / str(index), executor, say)
            except Exception as e:  # noqa: BLE001 - raised (the first) or said once every other run has ended
                failed.add(step.name)
                failures.append(e)
                say(f"ray: {step.name} failed: the other runs go on, and its error ends the command"
                    if len(failures) == 1 else f"ray: {step.name} failed too: {_first_line(e)}")
                continue
            say(f"finished {step.name} (ray)")
        if failures:
            raise failures[0]
        return results


def run_step(step: Any, parent: T | None, run_one: Callable[..., T], executor: Executor,
             say: Callable[[str], None]) -> T:
    """``run_one(step, parent)`` for one step whose parent's result is already at hand: here, or as one Ray task
    (a search trains its candidates one step at a time, each decided by the one before)."""
    if executor.kind != "ray":
        return run_one(step, parent)
    ray = _ray()
    with executor.session(), _attempt_folders() as attempts:
        ref = _remote(ray, executor).remote(run_one, step, parent, executor.cpus_per_run, str(attempts / "0"))
        result = _gathered(ray, step.name, ref, attempts / "0", executor, say)
    say(f"finished {step.name} (ray)")
    return result


def _remote(ray: Any, executor: Executor) -> Any:
    """The task every run is: retried where its worker or node died, never where the run's own code raised."""
    return ray.remote(num_cpus=executor.cpus_per_run, num_gpus=executor.gpus_per_run,
                      max_retries=executor.max_retries, retry_exceptions=False)(_task)


@contextmanager
def _attempt_folders() -> Iterator[Path]:
    """A folder in the cache the tasks share, for a folder per run in which each start of its task leaves a file
    (:func:`_count_start`); removed when the runs are gathered."""
    root = cache_dir() / "ray-attempts" / uuid.uuid4().hex
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        try:
            root.parent.rmdir()   # the last one out
        except OSError:
            pass


def _starts(folder: Path) -> int:
    """How many times the task of a run started (0 where its folder cannot be seen here)."""
    try:
        return sum(1 for _ in folder.iterdir())
    except OSError:
        return 0


def _gathered(ray: Any, name: str, ref: Any, attempts: Path, executor: Executor, say: Callable[[str], None]) -> Any:
    """The result of the task of the run ``name``, after saying whether it was retried; a refusal inside it
    (CompressError) comes out as itself, a worker or node lost more often than retried as one sentence."""
    try:
        result = ray.get(ref)
    except ray.exceptions.RayTaskError as e:   # raised by the run's own code: never retried
        _say_retried(name, _starts(attempts), executor, say)
        if isinstance(e.cause, CompressError):
            raise e.cause from None
        raise
    except _lost(ray) as e:
        tries = executor.max_retries + 1
        raise CompressError(
            f"the run {name} lost its Ray worker or node {tries} time{'s' if tries > 1 else ''} "
            f"({_first_line(e)}); the runs that finished and its last checkpoint, if it wrote one, are kept: run the "
            f"command again to continue{' (or allow more with --max-retries)' if not executor.max_retries else ''}.",
            exit_code=1) from None
    _say_retried(name, _starts(attempts), executor, say)
    return result


def _lost(ray: Any) -> tuple[type[BaseException], ...]:
    """The errors of a task whose process or node died (what Ray retries), as against an error of its code."""
    x = ray.exceptions
    return (x.WorkerCrashedError, x.NodeDiedError, x.LocalRayletDiedError, x.OutOfMemoryError, x.ObjectLostError,
            x.OwnerDiedError)


def _say_retried(name: str, starts: int, executor: Executor, say: Callable[[str], None]) -> None:
    if starts > 1:
        say(f"ray: {name} lost its worker and was retried (attempt {starts} of {executor.max_retries + 1})")


def _first_line(error: BaseException) -> str:
    """An error's first sentence, without its full stop (Ray's messages go on for several lines); for an error of a
    task's own code, the error inside it."""
    if isinstance(getattr(error, "cause", None), BaseException):
        error = error.cause
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__).split(". ")[0].rstrip(".")


def _count_start(folder: str) -> None:
    """Leave a file of this start in ``folder`` (one file each, so starts on several nodes never write the same
    file); where the folder cannot be written, the run goes on uncounted."""
    try:
        os.makedirs(folder, exist_ok=True)
        with open(Path(folder) / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}", "x") as f:
            # what `compress cache` recognises it by (compress.cache_kinds)
            json.dump({"ray_attempt": {"host": socket.gethostname(), "pid": os.getpid()}}, f)
    except OSError:
        pass


def _task(run_one: Callable[..., T], step: Any, parent: T | None, cpus: float, attempts: str) -> T:
    """One run inside a Ray worker: its start counted, as many torch threads as CPUs the task was given, no progress
    bars."""
    import torch

    _count_start(attempts)
    torch.set_num_threads(max(1, int(cpus)))
    return run_one(step, parent, show_progress=False)
